"""VerdictJudge rules on scripted LMs: fatal override, refutation, labels outside the set, modes."""

import dspy
import pytest

from binaryeval_dspy.engines.in_process import run_states
from binaryeval_dspy.errors import BinEvalError
from binaryeval_dspy.programs.verdict_judge import VerdictJudge
from binaryeval_dspy.runs.item_rows import item_result
from binaryeval_dspy.schemas.question_set import QuestionSet
from tests.fakes import scripted_lm
from tests.verdict_scripts import AUDIT_POLICY, VerdictScript, verdict_question_set

SHORT = "A short note with an example: run `bineval evaluate`."
LONG = "word " * 80


def run(question_set, script, output=SHORT, **kwargs):
    lm, engine = scripted_lm(script)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        pred = VerdictJudge(question_set, **kwargs)(input="a README section", output=output)
    return pred, engine


def test_fatal_code_check_overrides_a_pass_pick_and_says_so():
    script = VerdictScript(labels=["Keep"])
    pred, _ = run(verdict_question_set(), script, output=LONG)
    nv = pred.named_verdict
    assert nv.provisional_label == "Keep"
    assert nv.label == "Improve" and nv.decided_by == "fatal_rule"
    assert nv.fatal_rule.changed and nv.fatal_rule.question_ids == ["short"]
    assert "code set 'Improve'" in nv.fatal_rule.note and "'Keep'" in nv.fatal_rule.note
    assert nv.grounds == ["short"]
    assert nv.pressure_test.status == "not_run" and "fatal" in nv.pressure_test.reason
    assert script.calls["draft"] == []  # a fixed verdict is not pressure-tested


def test_fatal_rule_keeps_a_more_severe_pick():
    pred, _ = run(verdict_question_set(), VerdictScript(labels=["Retire"]), output=LONG)
    nv = pred.named_verdict
    assert nv.label == "Retire" and nv.decided_by == "lm"
    assert nv.fatal_rule is not None and not nv.fatal_rule.changed


def test_fatal_lm_question_also_forces_the_label():
    qs = verdict_question_set(fatal_code=False, fatal_lm=True)
    script = VerdictScript(judge={"Does it show a runnable example?": "no"}, labels=["Keep"])
    pred, _ = run(qs, script)
    assert pred.named_verdict.label == "Improve"
    assert pred.named_verdict.fatal_rule.question_ids == ["example"]


def test_no_fatal_failure_leaves_the_pick_alone():
    pred, _ = run(verdict_question_set(), VerdictScript(labels=["Keep"]))
    nv = pred.named_verdict
    assert nv.label == "Keep" and nv.fatal_rule is None and nv.grounds == []


def test_code_checked_question_never_reaches_the_lm():
    script = VerdictScript()
    pred, _ = run(verdict_question_set(), script)
    assert "Is it at most 50 words long?" not in script.calls["judge"]
    assert sorted(script.calls["judge"]) == ["Does it show a runnable example?", "Does it stay on one topic?"]
    short = pred.verdicts[0]
    assert short.source == "code" and short.verdict == "yes" and "words" in short.explanation
    assert short.evidence == {"words": 9}  # A short note with an example run bineval evaluate


def test_pick_sees_every_answer_and_grounds_list_every_no():
    script = VerdictScript(judge={"Does it show a runnable example?": "no", "Does it stay on one topic?": "no"},
                           labels=["Improve"], refutations=["Is there an example after all?"])
    pred, _ = run(verdict_question_set(), script)
    assert pred.named_verdict.grounds == ["example", "topic"]
    pick_prompt = script.calls["pick"][0]
    for qid in ("short", "example", "topic"):
        assert f'"question_id": "{qid}"' in pick_prompt
    assert '"answered_by": "code"' in pick_prompt


def test_successful_refutation_moves_one_step_toward_pass():
    script = VerdictScript(judge={"Does it show a runnable example?": "no"}, labels=["Improve"],
                           refutations=["Is there a command in backticks?", "Is the command complete?"],
                           refutation_answers={"Is there a command in backticks?": "yes",
                                               "Is the command complete?": "yes"})
    pred, _ = run(verdict_question_set(), script)
    nv = pred.named_verdict
    assert nv.provisional_label == "Improve"
    assert nv.label == "Keep" and nv.decided_by == "pressure_test"
    pt = nv.pressure_test
    assert pt.status == "ran" and pt.refuted and pt.moved_to == "Keep" and pt.tested_label == "Improve"
    assert [a.answer for a in pt.questions] == ["yes", "yes"]
    assert nv.grounds == ["example"]  # grounds stay the binary "no" answers


def test_refutation_rule_all_versus_any():
    answers = {"Q1?": "yes", "Q2?": "no"}
    script = VerdictScript(labels=["Improve"], refutations=["Q1?", "Q2?"], refutation_answers=answers)
    pred, _ = run(verdict_question_set(), script)
    assert pred.named_verdict.label == "Improve" and not pred.named_verdict.pressure_test.refuted
    policy = {**AUDIT_POLICY, "refutation_needs": "any"}
    script = VerdictScript(labels=["Improve"], refutations=["Q1?", "Q2?"], refutation_answers=answers)
    pred, _ = run(verdict_question_set(policy), script)
    assert pred.named_verdict.label == "Keep" and pred.named_verdict.pressure_test.refuted


def test_declared_refutation_move_and_unparsed_answers_never_refute():
    policy = {**AUDIT_POLICY, "on_refutation": {"Retire": "Keep"}}
    script = VerdictScript(labels=["Retire"], refutations=["Q1?"], refutation_answers={"Q1?": "yes"})
    pred, _ = run(verdict_question_set(policy), script)
    assert pred.named_verdict.label == "Keep"
    script = VerdictScript(labels=["Retire"], refutations=["Q1?"], refutation_answers={"Q1?": "no idea"})
    pred, _ = run(verdict_question_set(policy), script)
    nv = pred.named_verdict
    assert nv.label == "Retire" and nv.pressure_test.questions[0].answer == "unparsed"
    assert not nv.pressure_test.refuted


def test_at_most_three_refutation_questions_are_kept_and_drafting_is_capped():
    script = VerdictScript(labels=["Improve"], refutations=["A?", "B?", "C?", "D?"])
    caps = []
    lm, engine = scripted_lm(script)
    complete = engine.complete

    def spy(request):
        if "proposed_label" in "".join(m.text or "" for m in request.messages):
            caps.append(request.config.max_tokens)
        return complete(request)

    engine.complete = spy
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        pred = VerdictJudge(verdict_question_set())(input="a README section", output=SHORT)
    pt = pred.named_verdict.pressure_test
    assert [a.question for a in pt.questions] == ["A?", "B?", "C?"]
    assert "3 of 4" in pt.reason and len(script.calls["refute"]) == 3
    assert caps == [200]


def test_no_usable_refutation_question_is_a_recorded_failure():
    script = VerdictScript(labels=["Improve"], refutations=[" ", "", "paths-exist"])
    pred, _ = run(verdict_question_set(), script)
    nv = pred.named_verdict
    assert nv.pressure_test.status == "failed" and nv.label == "Improve"
    assert "dropped 1 non-question entry" in nv.pressure_test.reason


def test_a_question_cut_by_the_token_cap_is_dropped():
    script = VerdictScript(labels=["Improve"], refutation_answers={"Is A true?": "yes", "Is B true?": "yes"})
    script.refutations = None  # the drafter's reply below is cut mid-question
    lm, _ = scripted_lm(lambda system, user: '{"questions": ["Is A true?", "Is B true?", "Is C tr'
                        if "[[ ## proposed_label ## ]]" in user else script(system, user))
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        pred = VerdictJudge(verdict_question_set())(input="a README section", output=SHORT)
    pt = pred.named_verdict.pressure_test
    assert [a.question for a in pt.questions] == ["Is A true?", "Is B true?"]
    assert pt.refuted and pred.named_verdict.label == "Keep"


def test_label_outside_the_set_is_retried_with_feedback():
    script = VerdictScript(labels=["Maybe", "Retire"])
    pred, _ = run(verdict_question_set(), script, pressure_test="never")
    nv = pred.named_verdict
    assert nv.label == "Retire" and nv.status == "decided"
    assert [(a.raw, a.accepted) for a in nv.attempts] == [("Maybe", False), ("Retire", True)]
    assert "not one of the allowed labels" in script.calls["pick"][1]
    assert "'Maybe'" in script.calls["pick"][1]


def test_label_outside_the_set_twice_is_reported_unparsed_never_defaulted():
    script = VerdictScript(labels=["Maybe", "Keep it"])
    pred, _ = run(verdict_question_set(), script)
    nv = pred.named_verdict
    assert nv.label is None and nv.status == "unparsed" and nv.decided_by is None
    assert [a.accepted for a in nv.attempts] == [False, False]
    assert any("did not pick a declared label" in n for n in nv.notes)
    assert len(script.calls["pick"]) == 2 and script.calls["draft"] == []
    assert pred.label is None


def test_unreadable_pick_reply_is_retried_then_unparsed():
    script = VerdictScript(labels=["RAW:I think it is fine", "RAW:still no json"])
    pred, _ = run(verdict_question_set(), script)
    assert pred.named_verdict.status == "unparsed"
    assert "no label could be read" in pred.named_verdict.attempts[0].error


def test_case_only_difference_is_accepted_as_the_declared_label():
    pred, _ = run(verdict_question_set(), VerdictScript(labels=["keep"]))
    nv = pred.named_verdict
    assert nv.label == "Keep" and nv.attempts[0].raw == "keep" and nv.attempts[0].accepted


def test_fatal_rule_still_decides_when_the_pick_failed():
    pred, _ = run(verdict_question_set(), VerdictScript(labels=["Maybe"]), output=LONG)
    nv = pred.named_verdict
    assert nv.label == "Improve" and nv.status == "decided" and nv.decided_by == "fatal_rule"
    assert nv.provisional_label is None and "pick failed" in nv.fatal_rule.note


@pytest.mark.parametrize(("mode", "label", "drafts"), [
    ("never", "Improve", 0), ("non-pass", "Keep", 0), ("non-pass", "Improve", 1), ("always", "Keep", 1)])
def test_pressure_test_modes(mode, label, drafts):
    script = VerdictScript(labels=[label], refutations=["Q?"])
    pred, _ = run(verdict_question_set(), script, pressure_test=mode)
    assert len(script.calls["draft"]) == drafts
    assert pred.named_verdict.pressure_test.status == ("ran" if drafts else "not_run")


def test_pass_label_refuted_under_always_moves_only_when_declared():
    script = VerdictScript(labels=["Keep"], refutations=["Q?"], refutation_answers={"Q?": "yes"})
    pred, _ = run(verdict_question_set(), script, pressure_test="always")
    assert pred.named_verdict.label == "Keep" and pred.named_verdict.pressure_test.refuted
    policy = {**AUDIT_POLICY, "on_refutation": {"Keep": "Improve"}}
    script = VerdictScript(labels=["Keep"], refutations=["Q?"], refutation_answers={"Q?": "yes"})
    pred, _ = run(verdict_question_set(policy), script, pressure_test="always")
    assert pred.named_verdict.label == "Improve"


def test_aggregation_verdict_has_no_score_and_both_has_one():
    pred, _ = run(verdict_question_set(), VerdictScript(), aggregation="verdict")
    assert "score" not in pred and "score_card" not in pred
    pred, _ = run(verdict_question_set(), VerdictScript(), aggregation="both")
    assert pred.score == 1.0 and pred.score_card.counts["form"].yes == 1
    assert pred.named_verdict.label == "Keep"


def test_verdict_judge_needs_a_policy_and_valid_modes(small_question_set):
    with pytest.raises(BinEvalError, match="verdict_policy"):
        VerdictJudge(small_question_set)
    qs = verdict_question_set()
    with pytest.raises(BinEvalError, match="BinEval"):
        VerdictJudge(qs, aggregation="score")
    with pytest.raises(BinEvalError, match="pressure_test"):
        VerdictJudge(qs, pressure_test="sometimes")


def test_unparsed_lm_answer_is_not_a_ground():
    script = VerdictScript(judge={"Does it show a runnable example?": "garbage"}, labels=["Keep"])
    pred, _ = run(verdict_question_set(), script)
    assert pred.named_verdict.grounds == []
    assert [v.verdict for v in pred.verdicts] == ["yes", "unparsed", "yes"]


def test_unparsed_fatal_question_is_noted():
    qs = verdict_question_set(fatal_code=False, fatal_lm=True)
    script = VerdictScript(judge={"Does it show a runnable example?": "garbage"}, labels=["Keep"])
    pred, _ = run(qs, script)
    assert pred.named_verdict.label == "Keep"
    assert any("example" in n and "fatal rule could not be checked" in n for n in pred.named_verdict.notes)


def test_question_set_round_trip_keeps_policy_checks_and_fatal(tmp_path):
    qs = verdict_question_set()
    loaded = QuestionSet.load(qs.save(tmp_path / "qs.json"))
    assert loaded == qs and loaded.content_hash == qs.content_hash
    assert loaded.questions[0].fatal and loaded.questions[0].check.name == "word_count"


def test_save_and_load_keep_the_question_set_and_every_predictor(tmp_path):
    qs = verdict_question_set()
    judge = VerdictJudge(qs)
    judge.picker.pick.signature = judge.picker.pick.signature.with_instructions("Pick one label, carefully.")
    path = tmp_path / "judge.json"
    judge.save(str(path))
    fresh = VerdictJudge(qs)
    fresh.load(str(path))
    assert fresh.question_set.content_hash == qs.content_hash
    assert fresh.picker.pick.signature.instructions == "Pick one label, carefully."
    names = {name for name, _ in fresh.named_predictors()}
    assert names == {"evidence.judge", "picker.pick", "pressure.draft", "pressure.answer"}


def failing(script: VerdictScript, step: str):
    """`script`, except that every call of signature `step` ("pick" or "draft") raises."""
    marker = {"pick": "[[ ## allowed_labels ## ]]", "draft": "[[ ## proposed_label ## ]]"}[step]

    def answer(system, user):
        if marker in user:
            raise ConnectionError(f"scripted: the {step} call failed")
        return script(system, user)

    return answer


@pytest.mark.parametrize("step", ["pick", "draft"])
def test_a_failed_pick_or_pressure_test_keeps_the_answers_and_leaves_the_label_undecided(step):
    qs = verdict_question_set()
    script = VerdictScript(judge={"Does it show a runnable example?": "no"}, labels=["Improve"])
    lm, _ = scripted_lm(failing(script, step))
    judge = VerdictJudge(qs, pressure_test="always")
    item = dspy.Example(item_id="a", input="a README section", output=SHORT, line=1)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        done = run_states(judge, [judge.begin(item)])
    assert done[0].error is None  # the item is not failed: its answers come back
    pred = done[0].result
    assert pred.named_verdict is None and pred.label is None
    assert pred.undecided.startswith("label not decided: ") and f"the {step} call failed" in pred.undecided
    assert [(v.question_id, v.source, v.verdict) for v in pred.verdicts] == [
        ("short", "code", "yes"), ("example", "lm", "no"), ("topic", "lm", "yes")]
    row = item_result(judge, item, done[0], lm="scripted")
    assert row.status == "error" and not row.complete and row.questions_answered == 3
    assert row.error == pred.undecided and row.named_verdict is None and len(row.verdicts) == 3
    assert row.lm == "scripted"


# ------------------------------------------------------------------ issue 23.1 / 23.2 in verdict mode


def test_a_qualified_pick_is_taken_flagged_and_noted():
    script = VerdictScript(labels=[{"reason": "mostly fine", "label": "Keep, but the README lacks install steps"}])
    pred, _ = run(verdict_question_set(), script, pressure_test="never")
    nv = pred.named_verdict
    assert nv.label == "Keep" and nv.attempts[0].accepted and nv.attempts[0].qualified
    assert "but the README lacks install steps" in nv.attempts[0].raw
    assert any("came with a reservation" in note for note in nv.notes)


def test_a_qualified_refutation_answer_is_flagged_and_noted():
    script = VerdictScript(labels=["Improve"], refutations=["Q1?"],
                           refutation_answers={"Q1?": {"answer": "Yes, but only in the intro", "evidence": "line 2"}})
    pred, _ = run(verdict_question_set(), script)
    answer = pred.named_verdict.pressure_test.questions[0]
    assert answer.answer == "yes" and answer.qualified and "only in the intro" in answer.raw_answer
    assert any("refutation answer(s) came with a reservation" in note for note in pred.named_verdict.notes)


def test_a_pick_reply_that_stops_inside_its_json_is_no_label():
    """Each reply names a declared label before it is cut; neither is a pick (was: read by the
    JSON repair, or by a pattern on the unreadable reply)."""
    script = VerdictScript(labels=['RAW:{"reason": "ok", "label": "Keep',
                                   'RAW:{"reason": "ok", "label": "Retire", "note": "cut'])
    pred, _ = run(verdict_question_set(), script, pressure_test="never")
    nv = pred.named_verdict
    assert nv.label is None and nv.status == "unparsed" and [a.accepted for a in nv.attempts] == [False, False]
    assert all("stops inside its JSON object" in a.error for a in nv.attempts)


def test_a_refutation_reply_that_stops_inside_its_json_never_refutes():
    script = VerdictScript(labels=["Improve"], refutations=["Q1?"],
                           refutation_answers={"Q1?": 'RAW{"answer": "yes", "evidence": "The READ'[3:]})
    pred, _ = run(verdict_question_set(), script)
    answer = pred.named_verdict.pressure_test.questions[0]
    assert answer.answer == "unparsed" and "stops inside its JSON object" in answer.error
    assert not pred.named_verdict.pressure_test.refuted and pred.named_verdict.label == "Improve"


def test_a_refutation_draft_cut_inside_its_list_keeps_the_questions_written_in_full():
    from binaryeval_dspy.lm.adapters import CountingJSONAdapter

    script = VerdictScript(labels=["Improve"], refutation_answers={"Is A true?": "yes"})
    lm, _ = scripted_lm(lambda system, user: '{"questions": ["Is A true?", "Is B tr'
                        if "[[ ## proposed_label ## ]]" in user else script(system, user))
    with dspy.context(lm=lm, adapter=CountingJSONAdapter()):
        pred = VerdictJudge(verdict_question_set())(input="a README section", output=SHORT)
    pt = pred.named_verdict.pressure_test
    assert pt.status == "ran" and [a.question for a in pt.questions] == ["Is A true?"]

"""BinEvalOptimizer's three modes on scripted LMs whose disagreements, lessons and rewrites are known.

The scripted judge changes its answers when (and only when) the rewritten instructions
contain the lesson, so each test can check the whole chain: disagreement -> lesson ->
dedup -> rewrite -> changed verdicts -> convergence / early stop -> kept iteration.
"""

from __future__ import annotations

import json

import dspy
import pytest

from binaryeval_dspy.errors import BinEvalError, InputError
from binaryeval_dspy.optimizers import BinEvalOptimizer
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.programs.bineval_metric import BinEvalMetric
from binaryeval_dspy.schemas.optimization_history import OptimizationHistory
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.signatures.response_generation import RespondToPrompt
from tests.fakes import field_value, scripted_lm
from tests.update_scripts import append_rewrite, evidence_of, never_duplicate, route

ANCHOR = "Give the verdict, then a brief justification."  # a sentence of JudgeBinaryQuestion's instructions
NUMBERS = "Are the numbers right?"
NUMBERS_LESSON = "Numbers must match the input."


def judge_answer(verdict: str) -> dict[str, str]:
    return {"explanation": f"scripted {verdict}", "verdict": verdict}


def items(n: int, *, wrong: set[int] = frozenset(), consistency=None, prefix: str = "it"):
    out = []
    for i in range(n):
        scores = {"consistency": (consistency or {}).get(i, 1.0 if i in wrong else 5.0), "fluency": 4.0}
        text = f"Summary {i} with {'wrong' if i in wrong else 'correct'} numbers."
        out.append(dspy.Example(item_id=f"{prefix}{i}", input=f"Article {i} says 3 goals.", output=text,
                                human=scores).with_inputs("input", "output"))
    return out


# ---------------------------------------------------------------- cross-model
def target_judge(system, user):
    if field_value(user, "question") == NUMBERS and NUMBERS_LESSON in system:
        return judge_answer("no")
    return judge_answer("yes")


def source_verdicts(trainset):
    return {ex.item_id: [QuestionVerdict(question_id="consistency-01", verdict="yes", explanation="ok"),
                         QuestionVerdict(question_id="consistency-02", verdict="no", explanation="3 is not 4"),
                         QuestionVerdict(question_id="fluency-01", verdict="yes", explanation="ok")]
            for ex in trainset}


def cross_model_prompt_lm():
    def notes(system, user):
        (evidence,) = evidence_of(user)
        assert evidence["question"] == NUMBERS and evidence["verdict"] == "yes"
        assert evidence["reference"].startswith("The reference evaluator answered no: ")
        return {"lessons": [NUMBERS_LESSON]}

    return scripted_lm(route(notes=notes, dedup=never_duplicate, rewrite=append_rewrite(ANCHOR)))


def test_cross_model_learns_from_disagreements_and_converges(tmp_path, small_question_set):
    trainset = items(2)
    target_lm, target_engine = scripted_lm(target_judge)
    prompt_lm, prompt_engine = cross_model_prompt_lm()
    student = BinEval(small_question_set)
    before = student.judge.signature.instructions
    optimizer = BinEvalOptimizer("cross_model", source=source_verdicts(trainset), prompt_lm=prompt_lm,
                                 max_iterations=3, epsilon=0.05)
    with dspy.context(lm=target_lm, adapter=dspy.JSONAdapter()):
        compiled = optimizer.compile(student, trainset=trainset, history_path=tmp_path / "history.json")
    history = compiled.optimization_history
    first, second = history.iterations
    # iteration 0: both items disagree on the numbers question only; consistency gap 0.5, fluency 0
    assert first.failures == 2 and first.scores["gap_consistency"] == pytest.approx(0.5)
    assert first.scores["gap_fluency"] == 0.0 and first.scores["train_agreement"] == pytest.approx(4 / 6)
    assert first.lessons == [NUMBERS_LESSON, NUMBERS_LESSON]
    assert "3 is not 4" in json.dumps(prompt_engine.calls[0])  # the source's explanation reached the note-taker
    assert [d.action for d in first.dedup] == ["added", "exact_duplicate"]
    assert first.lesson_memory == [NUMBERS_LESSON]
    (rewrite,) = first.rewrites
    assert rewrite.applied and rewrite.substring == ANCHOR and rewrite.replacement == f"{ANCHOR} {NUMBERS_LESSON}"
    assert f"+{NUMBERS_LESSON}" in first.diffs["judge_instructions"]
    # iteration 1: the rewritten judge agrees with the source everywhere -> converged
    assert second.scores["max_dimension_gap"] == 0.0 and second.scores["train_agreement"] == 1.0
    assert history.stop_reason.startswith("converged")
    assert history.best_iteration == 1
    assert NUMBERS_LESSON in compiled.judge.signature.instructions
    assert student.judge.signature.instructions == before  # the student is never mutated
    assert compiled._compiled is True
    # calls: 3 questions x 2 items x 2 iterations on the target; 2 notes + 1 rewrite on the note-taker LM
    assert len(target_engine.calls) == 12 and len(prompt_engine.calls) == 3
    assert first.lm_calls == 6 + 3 and second.lm_calls == 6
    saved = OptimizationHistory.load(tmp_path / "history.json")
    assert saved.best_iteration == 1 and saved.iterations[0].lessons == first.lessons


def test_cross_model_with_a_source_bineval_on_another_lm(small_question_set):
    trainset = items(2)
    source_lm, source_engine = scripted_lm(
        lambda s, u: judge_answer("no" if field_value(u, "question") == NUMBERS else "yes"))
    target_lm, _ = scripted_lm(target_judge)
    prompt_lm, _ = cross_model_prompt_lm()
    optimizer = BinEvalOptimizer("cross_model", source=BinEval(), source_lm=source_lm, prompt_lm=prompt_lm,
                                 max_iterations=2)
    with dspy.context(lm=target_lm, adapter=dspy.JSONAdapter()):
        compiled = optimizer.compile(BinEval(small_question_set), trainset=trainset, valset=items(1, prefix="val"))
    history = compiled.optimization_history
    assert [r.scores["val_agreement"] for r in history.iterations] == [pytest.approx(2 / 3), 1.0]
    assert history.lms["source"] != history.lms["target"]
    assert len(source_engine.calls) == 9  # source judged each of the 3 items once, then reused


def test_cross_model_missing_source_verdicts_fail_before_any_lm_call(small_question_set):
    trainset = items(2)
    verdicts = source_verdicts(trainset[:1])
    target_lm, engine = scripted_lm(target_judge)
    optimizer = BinEvalOptimizer("cross_model", source=verdicts)
    with dspy.context(lm=target_lm, adapter=dspy.JSONAdapter()), pytest.raises(InputError, match="it1"):
        optimizer.compile(BinEval(small_question_set), trainset=trainset)
    assert engine.calls == []


# ---------------------------------------------------------------- human
STRICT_LESSON = "Be strict about numbers."


def human_judge(system, user):
    if field_value(user, "question") != NUMBERS:
        return judge_answer("yes")
    wrong = "wrong" in field_value(user, "output")
    if STRICT_LESSON in system:  # the over-corrected judge gets it backwards
        return judge_answer("yes" if wrong else "no")
    if NUMBERS_LESSON in system:
        return judge_answer("no" if wrong else "yes")
    return judge_answer("yes")


def human_notes(system, user):
    evidence = evidence_of(user)
    assert all("Humans rated consistency 0.00" in e["reference"] for e in evidence)
    already_said_no = any(e["question"] == NUMBERS and e["verdict"] == "no" for e in evidence)
    return {"lessons": [STRICT_LESSON if already_said_no else NUMBERS_LESSON]}


def test_human_mode_early_stops_when_validation_spearman_drops_and_keeps_the_best(small_question_set):
    trainset, valset = items(4, wrong={0, 1}), items(4, wrong={0, 1})
    target_lm, _ = scripted_lm(human_judge)
    prompt_lm, _ = scripted_lm(route(notes=human_notes, dedup=never_duplicate, rewrite=append_rewrite(ANCHOR)))
    optimizer = BinEvalOptimizer("human", prompt_lm=prompt_lm, max_iterations=5, threshold=0.3)
    with dspy.context(lm=target_lm, adapter=dspy.JSONAdapter()):
        compiled = optimizer.compile(BinEval(small_question_set), trainset=trainset, valset=valset)
    history = compiled.optimization_history
    assert [r.failures for r in history.iterations] == [2, 2, 4]
    # constant model scores at first: Spearman undefined; then 1.0; then -1.0 -> stop
    assert [r.scores["val_spearman"] for r in history.iterations] == [None, pytest.approx(1.0), pytest.approx(-1.0)]
    assert history.iterations[0].lessons == [NUMBERS_LESSON, NUMBERS_LESSON]
    assert history.iterations[1].lessons == [STRICT_LESSON, STRICT_LESSON]
    assert history.stop_reason == "the validation Spearman dropped (1.000 -> -1.000)"
    assert history.best_iteration == 1
    instructions = compiled.judge.signature.instructions
    assert NUMBERS_LESSON in instructions and STRICT_LESSON not in instructions


def test_human_mode_regenerates_questions_from_the_rewritten_task_prompt(small_question_set):
    trainset = items(3, wrong={0})

    def rewrite(system, user):
        prompt = field_value(user, "prompt")
        anchor = ANCHOR if ANCHOR in prompt else "Summarize the article."
        return {"substring": anchor, "replacement": f"{anchor} {NUMBERS_LESSON}"}

    def requirements(system, user):
        assert NUMBERS_LESSON in field_value(user, "task_prompt")
        return {"requirements": ["Numbers match the article."]}

    def decompose(system, user):
        return {"questions": [{"question": "Does every number match the article?", "dimension": "consistency",
                               "violation_example": "4 goals instead of 3"},
                              {"question": "Is it readable?", "dimension": "fluency", "violation_example": "x"}]}

    target_lm, _ = scripted_lm(human_judge)
    prompt_lm, _ = scripted_lm(route(notes=lambda s, u: {"lessons": [NUMBERS_LESSON]}, dedup=never_duplicate,
                                     rewrite=rewrite, requirements=requirements, decompose=decompose))
    optimizer = BinEvalOptimizer("human", prompt_lm=prompt_lm, max_iterations=1, regenerate_questions=True,
                                 keep="last")
    with dspy.context(lm=target_lm, adapter=dspy.JSONAdapter()):
        compiled = optimizer.compile(BinEval(small_question_set), trainset=trainset)
    first = compiled.optimization_history.iterations[0]
    assert set(first.diffs) == {"judge_instructions", "task_prompt"} and first.questions_regenerated
    assert [q.text for q in compiled.question_set.questions] == ["Does every number match the article?",
                                                                 "Is it readable?"]
    assert compiled.question_set.task_prompt == f"Summarize the article. {NUMBERS_LESSON}"
    assert compiled.optimization_history.iterations[1].question_set_hash == compiled.question_set.content_hash
    assert compiled.optimization_history.best_iteration == 1


def test_human_mode_rejects_items_without_a_rated_dimension(small_question_set):
    bad = [dspy.Example(item_id="a", input="x", output="y", human={"consistency": 3}).with_inputs("input", "output")]
    with pytest.raises(InputError, match="fluency"):
        BinEvalOptimizer("human").compile(BinEval(small_question_set), trainset=bad)


def test_save_and_load_round_trip_the_improved_prompt_and_questions(tmp_path, small_question_set):
    trainset = items(2)
    target_lm, _ = scripted_lm(target_judge)
    prompt_lm, _ = cross_model_prompt_lm()
    optimizer = BinEvalOptimizer("cross_model", source=source_verdicts(trainset), prompt_lm=prompt_lm)
    with dspy.context(lm=target_lm, adapter=dspy.JSONAdapter()):
        compiled = optimizer.compile(BinEval(small_question_set), trainset=trainset)
    path = tmp_path / "evaluator.json"
    compiled.save(str(path))
    loaded = BinEval()
    loaded.load(str(path))
    assert loaded.judge.signature.instructions == compiled.judge.signature.instructions
    assert NUMBERS_LESSON in loaded.judge.signature.instructions
    assert loaded.question_set == compiled.question_set
    assert json.loads(path.read_text())["judge"]["signature"]["instructions"].count(NUMBERS_LESSON) == 1


# ---------------------------------------------------------------- generation
DONE_LESSON = "End every response with the word DONE."
DONE_QUESTIONS = QuestionSet(dimensions=["format"], questions=[
    BinaryQuestion(id="format-01", dimension="format", text="Does the response end with the word DONE?")])


def prompts(n: int):
    return [dspy.Example(item_id=f"p{i}", prompt=f"Write about topic {i}. End with DONE.").with_inputs("prompt")
            for i in range(n)]


def generator_script(system, user):
    return {"response": "A short text. DONE" if DONE_LESSON in system else "A short text."}


def done_judge():
    lm, engine = scripted_lm(lambda s, u: judge_answer("yes" if field_value(u, "output").endswith("DONE") else "no"))
    return BinEvalMetric(BinEval(DONE_QUESTIONS), input_field="prompt", output_field="response", judge_lm=lm), engine


def test_generation_mode_fixes_failed_questions_and_stops_when_nothing_fails(tmp_path):
    judge, judge_engine = done_judge()

    def notes(system, user):
        (evidence,) = evidence_of(user)
        assert evidence["question"] == "Does the response end with the word DONE?" and evidence["verdict"] == "no"
        return {"lessons": [DONE_LESSON]}

    gen_lm, _ = scripted_lm(generator_script)
    prompt_lm, _ = scripted_lm(route(notes=notes, dedup=never_duplicate, rewrite=append_rewrite("Answer the request.")))
    student = dspy.Predict(RespondToPrompt)
    optimizer = BinEvalOptimizer("generation", judge=judge, prompt_lm=prompt_lm, max_iterations=4)
    with dspy.context(lm=gen_lm, adapter=dspy.JSONAdapter()):
        compiled = optimizer.compile(student, trainset=prompts(2), valset=prompts(1))
    history = compiled.optimization_history
    assert [r.scores["train_score"] for r in history.iterations] == [0.0, 1.0]
    assert [r.scores["val_score"] for r in history.iterations] == [0.0, 1.0]
    assert history.stop_reason == "nothing failed on the training items"
    assert compiled.signature.instructions == f"Answer the request. {DONE_LESSON}"
    assert student.signature.instructions == "Answer the request."
    assert history.final_prompts == {"generator_instructions": f"Answer the request. {DONE_LESSON}"}
    assert len(judge_engine.calls) == 6  # 3 items x 2 iterations, one question each


def test_generation_mode_stops_at_the_iteration_limit_when_failures_persist():
    judge, _ = done_judge()
    gen_lm, _ = scripted_lm(lambda s, u: {"response": "never done"})
    prompt_lm, _ = scripted_lm(route(notes=lambda s, u: {"lessons": [DONE_LESSON]}, dedup=never_duplicate,
                                     rewrite=append_rewrite("Answer the request.")))
    optimizer = BinEvalOptimizer("generation", judge=judge, prompt_lm=prompt_lm, max_iterations=2)
    with dspy.context(lm=gen_lm, adapter=dspy.JSONAdapter()):
        compiled = optimizer.compile(dspy.Predict(RespondToPrompt), trainset=prompts(1))
    history = compiled.optimization_history
    assert len(history.iterations) == 3
    assert history.stop_reason == "reached the iteration limit (2 updates)"
    assert history.best_iteration == 0  # no iteration beat the first: keep the starting prompt
    assert compiled.signature.instructions == "Answer the request."


def test_generation_mode_stops_when_no_rewrite_applies():
    judge, _ = done_judge()
    gen_lm, _ = scripted_lm(lambda s, u: {"response": "never done"})
    prompt_lm, prompt_engine = scripted_lm(route(
        notes=lambda s, u: {"lessons": [DONE_LESSON]},
        rewrite=lambda s, u: {"substring": "not in the prompt", "replacement": "x"}))
    optimizer = BinEvalOptimizer("generation", judge=judge, prompt_lm=prompt_lm, max_iterations=3, max_attempts=2)
    with dspy.context(lm=gen_lm, adapter=dspy.JSONAdapter()):
        compiled = optimizer.compile(dspy.Predict(RespondToPrompt), trainset=prompts(1))
    (only,) = compiled.optimization_history.iterations
    assert compiled.optimization_history.stop_reason == "no rewrite could be applied"
    assert only.rewrites[0].attempts == 2 and not only.rewrites[0].applied
    assert len(prompt_engine.calls) == 3  # one note, two rewrite attempts


def test_mode_arguments_are_checked():
    with pytest.raises(BinEvalError, match="source="):
        BinEvalOptimizer("cross_model")
    with pytest.raises(BinEvalError, match="judge="):
        BinEvalOptimizer("generation")
    with pytest.raises(BinEvalError, match="mode must be"):
        BinEvalOptimizer("self")
    with pytest.raises(BinEvalError, match="student must be a BinEval"):
        BinEvalOptimizer("human").compile(dspy.Predict(RespondToPrompt), trainset=items(1))

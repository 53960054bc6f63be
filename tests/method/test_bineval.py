import dspy
import pytest

from binaryeval_dspy.errors import BinEvalError, InputError
from binaryeval_dspy.programs.bineval import BinEval
from tests.conftest import judge_script
from tests.fakes import scripted_lm

ANSWERS = {"Is every claim supported?": "yes", "Are the numbers right?": "no", "Is it grammatical?": "yes"}


def run(program, script, **kw):
    lm, engine = scripted_lm(script)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        return program(input="The article.", output="The summary.", **kw), engine


def test_each_question_gets_its_own_call_and_verdict(small_question_set):
    pred, engine = run(BinEval(small_question_set, scale=(1, 5)), judge_script(ANSWERS))
    assert len(engine.calls) == 3
    assert [v.verdict for v in pred.verdicts] == ["yes", "no", "yes"]
    assert all(v.explanation.startswith("scripted") for v in pred.verdicts)
    assert pred.score_card.dimension_scores == {"consistency": 0.5, "fluency": 1.0}
    assert pred.score == pytest.approx(2 / 3)
    assert pred.score_card.scaled_dimension_scores["consistency"] == pytest.approx(3.0)


def test_shared_fields_come_before_the_question(small_question_set):
    _, engine = run(BinEval(small_question_set), judge_script(ANSWERS))
    prompt = engine.calls[0]
    assert prompt.index("The article.") < prompt.index("The summary.") < prompt.index("Is every claim supported?")


def test_unparseable_answer_is_unparsed_not_no(small_question_set):
    answers = dict(ANSWERS, **{"Are the numbers right?": "I would rather not say."})
    pred, _ = run(BinEval(small_question_set), judge_script(answers))
    bad = pred.verdicts[1]
    assert bad.verdict == "unparsed"
    assert bad.raw_answer and "rather not say" in bad.raw_answer
    assert pred.score_card.counts["consistency"].unparsed == 1
    assert pred.score_card.dimension_scores["consistency"] == 1.0  # 1 yes / 1 parsed


def test_capitalised_verdict_is_read_not_dropped(small_question_set):
    def script(system, user):
        return '{"verdict": "Yes", "explanation": "fine"}'

    pred, _ = run(BinEval(small_question_set), script)
    assert [v.verdict for v in pred.verdicts] == ["yes", "yes", "yes"]
    assert pred.verdicts[0].explanation == "fine"


def test_threads_give_the_same_verdicts_in_question_order(small_question_set):
    pred, engine = run(BinEval(small_question_set, num_threads=3), judge_script(ANSWERS))
    assert [v.question_id for v in pred.verdicts] == ["consistency-01", "consistency-02", "fluency-01"]
    assert [v.verdict for v in pred.verdicts] == ["yes", "no", "yes"]
    assert len(engine.calls) == 3


def test_a_failed_call_is_an_error_outcome_and_keeps_the_other_answers(small_question_set):
    def flaky(system, user):
        if "numbers" in user:
            raise ConnectionError("endpoint down")
        return {"explanation": "fine", "verdict": "no" if "grammatical" in user else "yes"}

    for threads in (1, 2):
        pred, _ = run(BinEval(small_question_set, num_threads=threads), flaky)
        assert [v.verdict for v in pred.verdicts] == ["yes", "error", "no"]
        assert "endpoint down" in pred.verdicts[1].error
        card = pred.score_card
        assert card.counts["consistency"].error == 1 and card.dimension_scores["consistency"] == 1.0
        assert card.overall == 0.5  # 1 yes of 2 answered; the error is in no denominator


def test_empty_output_is_an_outcome_without_an_lm_call(small_question_set):
    lm, engine = scripted_lm(lambda s, u: {"verdict": "yes", "explanation": "fine"})
    with dspy.context(lm=lm):
        for empty in ("  ", "", "\u200b\u200b", "\ufeff \u200e", None):  # None: as a null in an items file
            pred = BinEval(small_question_set)(input="x", output=empty)
            assert pred.status == "empty_output" and pred.score is None and pred.verdicts == []
    assert engine.calls == []
    with pytest.raises(InputError, match="output"):
        BinEval(small_question_set)(input="x", output=3)


def test_save_and_load_round_trip_the_question_set(tmp_path, small_question_set):
    program = BinEval(small_question_set)
    program.judge.signature = program.judge.signature.with_instructions("Judge strictly.")
    path = tmp_path / "bineval.json"
    program.save(str(path))
    fresh = BinEval()
    with pytest.raises(BinEvalError, match="no question set"):
        _ = fresh.question_set
    fresh.load(str(path))
    assert fresh.question_set == small_question_set
    assert fresh.question_set.content_hash == small_question_set.content_hash
    assert fresh.judge.signature.instructions == "Judge strictly."


def test_bineval_inside_a_larger_program(small_question_set):
    class SummarizeThenJudge(dspy.Module):
        def __init__(self):
            super().__init__()
            self.summarize = dspy.Predict("document -> summary")
            self.judge = BinEval(small_question_set)

        def forward(self, document):
            summary = self.summarize(document=document).summary
            return self.judge(input=document, output=summary)

    def script(system, user):
        if "[[ ## question ## ]]" in user:
            return judge_script(ANSWERS)(system, user)
        return {"summary": "A short summary."}

    lm, _ = scripted_lm(script)
    program = SummarizeThenJudge()
    names = [name for name, _ in program.named_predictors()]
    assert "summarize" in names and "judge.judge" in names
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        pred = program(document="Long article.")
    assert pred.score == pytest.approx(2 / 3)


@pytest.mark.parametrize("verdict", [["yes"], True, 1, {"v": "yes"}])
def test_a_verdict_that_is_not_text_is_unparsed_and_a_null_explanation_is_empty(small_question_set, verdict):
    import json

    pred, _ = run(BinEval(small_question_set), lambda system, user: json.dumps({"verdict": verdict,
                                                                                "explanation": None}))
    assert [v.verdict for v in pred.verdicts] == ["unparsed"] * 3
    assert all(v.explanation == "" for v in pred.verdicts)
    pred, _ = run(BinEval(small_question_set), lambda system, user: '{"verdict": "no", "explanation": null}')
    assert [(v.verdict, v.explanation) for v in pred.verdicts] == [("no", "")] * 3


def test_no_lm_names_only_ways_that_work(small_question_set):
    """BinEval takes no `lm=`: the fix names dspy.configure / dspy.context / set_lm (breaker finding)."""
    program = BinEval(small_question_set)
    with dspy.context(lm=None), pytest.raises(BinEvalError) as caught:
        program(input="x", output="y")
    text = str(caught.value)
    assert "set_lm" in text and "dspy.context(lm=" in text and "pass an LM (lm=" not in text
    lm, engine = scripted_lm(lambda s, u: {"verdict": "yes", "explanation": "fine"})
    program.set_lm(lm)  # the way the message names works
    with dspy.context(lm=None):
        assert program(input="x", output="y").status == "scored"

"""BinEvalMetric: score, feedback with failed questions, unparsed answers, DSPy's metric forms."""

from __future__ import annotations

import inspect

import dspy
import pytest

from binaryeval_dspy.errors import BinEvalError
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.programs.bineval_metric import BinEvalMetric
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from binaryeval_dspy.signatures.response_generation import RespondToPrompt
from tests.conftest import judge_script
from tests.fakes import scripted_lm

ANSWERS = {"Is every claim supported?": "yes", "Are the numbers right?": "no", "Is it grammatical?": "garbled"}


def gold(text: str = "Article about 3 goals.") -> dspy.Example:
    return dspy.Example(input=text, item_id="a").with_inputs("input")


def test_score_is_the_yes_rate_and_feedback_lists_failed_questions(small_question_set):
    lm, engine = scripted_lm(judge_script(ANSWERS))
    metric = BinEvalMetric(BinEval(small_question_set), output_field="output", judge_lm=lm)
    with dspy.context(adapter=dspy.JSONAdapter()):
        result = metric(gold(), dspy.Prediction(output="Four goals were scored."))
    # one yes, one no, one unparsed (left out): 1 / 2
    assert result.score == 0.5
    assert "[consistency] Are the numbers right? Judge: scripted no for: Are the numbers right?" in result.feedback
    assert "1 answer(s) could not be parsed and were left out of the score." in result.feedback
    assert "Is every claim supported?" not in result.feedback  # passed questions are not listed as failures
    assert len(engine.calls) == 3 and metric.unscored == 0


def test_all_unparsed_is_unscored_not_a_failure_count(small_question_set):
    lm, _ = scripted_lm(judge_script({q.text: "???" for q in small_question_set.questions}))
    metric = BinEvalMetric(BinEval(small_question_set), judge_lm=lm)
    with dspy.context(adapter=dspy.JSONAdapter()):
        result = metric(gold(), dspy.Prediction(output="x"))
    assert result.score == 0.0 and "unscored" in result.feedback and metric.unscored == 1


def test_empty_output_scores_zero_without_judging(small_question_set):
    lm, engine = scripted_lm(judge_script(ANSWERS))
    metric = BinEvalMetric(BinEval(small_question_set), judge_lm=lm)
    result = metric(gold(), dspy.Prediction(output="  "))
    assert result.score == 0.0 and "produced no 'output'" in result.feedback and engine.calls == []


def test_per_item_questions_and_the_five_argument_forms(small_question_set):
    per_item = QuestionSet(dimensions=["format"], questions=[
        BinaryQuestion(id="format-01", dimension="format", text="Is it grammatical?")])
    lm, engine = scripted_lm(judge_script(ANSWERS | {"Is it grammatical?": "yes"}))
    metric = BinEvalMetric(questions_for=lambda ex: per_item, input_field="prompt", output_field="response",
                           judge_lm=lm)
    params = list(inspect.signature(metric.__call__).parameters)
    assert params == ["gold", "pred", "trace", "pred_name", "pred_trace"]
    example = dspy.Example(prompt="Write a line.").with_inputs("prompt")
    with dspy.context(adapter=dspy.JSONAdapter()):
        assert metric(example, dspy.Prediction(response="Fine."), None, "predict", []).score == 1.0
        assert metric.as_float()(example, dspy.Prediction(response="Fine.")) == 1.0
    assert len(engine.calls) == 2


def test_metric_drives_dspy_evaluate_and_stays_out_of_the_program_trace():
    questions = QuestionSet(dimensions=["format"], questions=[
        BinaryQuestion(id="format-01", dimension="format", text="Does it end with DONE?")])
    judge_lm, _ = scripted_lm(lambda s, u: {"verdict": "yes" if "DONE" in u.split("[[ ## question")[0] else "no",
                                            "explanation": "checked"})
    gen_lm, _ = scripted_lm(lambda s, u: {"response": "ok DONE" if "1" in u else "ok"})
    metric = BinEvalMetric(BinEval(questions), input_field="prompt", output_field="response", judge_lm=judge_lm)
    devset = [dspy.Example(prompt=f"Prompt {i}").with_inputs("prompt") for i in range(2)]
    program = dspy.Predict(RespondToPrompt)
    with dspy.context(lm=gen_lm, adapter=dspy.JSONAdapter()):
        result = dspy.Evaluate(devset=devset, metric=metric, num_threads=1, display_progress=False)(program)
        assert result.score == 50.0  # dspy.Evaluate reports a percentage
        with dspy.context(trace=[]):
            pred = program(prompt="Prompt 1")
            metric(devset[1], pred)
            assert len(dspy.settings.trace) == 1  # the program's call only, not the judge's


def test_missing_questions_or_input_are_errors():
    metric = BinEvalMetric()
    with pytest.raises(BinEvalError, match="no questions"):
        metric(gold(), dspy.Prediction(output="x"))
    with pytest.raises(BinEvalError, match="'input'"):
        BinEvalMetric(question_set=QuestionSet(dimensions=["d"], questions=[
            BinaryQuestion(id="q", dimension="d", text="Ok?")]))(dspy.Example(other="x"), dspy.Prediction(output="x"))

"""DSPy's metric contract (issue 31): pass/fail under a trace, the score otherwise, feedback for GEPA.

A `dspy.Prediction` is always truthy, so a metric that returns one to BootstrapFewShot (or
MIPROv2's demo bootstrapping) keeps demonstrations it scored 0.0. Here a scripted generator
writes a good answer for some prompts and a bad one for others, a scripted judge answers
"no" to the bad ones, and no demonstration judged "no" is kept; GEPA still reads the failed
questions as feedback. Scripted LMs: plumbing, never a model's judgment.
"""

from __future__ import annotations

import logging

import dspy
import pytest

from binaryeval_dspy import (
    BinaryQuestion,
    BinEval,
    BinEvalMetric,
    BinEvalOptimizer,
    HumanAgreementMetric,
    QuestionSet,
    SourceAgreementMetric,
)
from binaryeval_dspy.data import normalized_human_scores
from binaryeval_dspy.errors import BinEvalError, InputError
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from tests.fakes import field_value, scripted_lm
from tests.schema_script import output_fields

QUESTION = "Does the response avoid the word bad?"
QUESTIONS = QuestionSet(dimensions=["quality"], questions=[
    BinaryQuestion(id="quality-01", dimension="quality", text=QUESTION)])
TOPICS = ["tea", "owls", "rain", "maps", "bread", "kites"]
BAD = {"owls", "maps", "kites"}  # the generator's answer about these is judged "no"


def generator(system: str, user: str) -> dict:
    """The scripted generator: a bad response for the topics in BAD, a good one otherwise; any
    other signature (DSPy's proposers) gets a fixed value for each output field."""
    prompt = field_value(user, "prompt")
    fields = output_fields(system) or []
    if fields == ["response"]:
        topic = prompt.split()[-1].rstrip(".")
        return {"response": f"A bad note on {topic}." if topic in BAD else f"A fine note on {topic}."}
    return {name: f"Scripted {name}: write a fine note." for name in fields}


def judge(system: str, user: str) -> dict:
    said = "bad" in field_value(user, "output")
    return {"verdict": "no" if said else "yes", "explanation": "it says bad" if said else "no bad word"}


def trainset() -> list[dspy.Example]:
    return [dspy.Example(prompt=f"Write a note about {t}.").with_inputs("prompt") for t in TOPICS]


def metric_and_lms(**kwargs):
    judge_lm, judge_engine = scripted_lm(judge)
    gen_lm, _ = scripted_lm(generator)
    metric = BinEvalMetric(BinEval(QUESTIONS, logprobs="off"), input_field="prompt", output_field="response",
                           judge_lm=judge_lm, **kwargs)
    return metric, gen_lm, judge_engine


def kept_topics(program: dspy.Module) -> set[str]:
    demos = [demo for _, predictor in program.named_predictors() for demo in predictor.demos]
    return {demo["prompt"].split()[-1].rstrip(".") for demo in demos}


def test_bootstrap_few_shot_never_keeps_a_demo_judged_no():
    metric, gen_lm, _ = metric_and_lms()
    with dspy.context(lm=gen_lm):
        compiled = dspy.BootstrapFewShot(metric=metric, max_bootstrapped_demos=6, max_labeled_demos=0,
                                         max_rounds=1).compile(dspy.Predict("prompt -> response"),
                                                               trainset=trainset())
    assert kept_topics(compiled) == set(TOPICS) - BAD  # every demo judged yes, none judged no


def test_miprov2_bootstrapping_never_keeps_a_demo_judged_no(monkeypatch):
    pytest.importorskip("optuna")
    import dspy.teleprompt.mipro_optimizer_v2 as mipro

    candidates: list[dict] = []

    def recorded(*args, **kwargs):  # MIPROv2's own demo bootstrapping, its result kept to look at
        sets = bootstrap(*args, **kwargs)
        candidates.extend(demo for per_predictor in sets.values() for demo_set in per_predictor for demo in demo_set)
        return sets

    bootstrap = mipro.create_n_fewshot_demo_sets
    monkeypatch.setattr(mipro, "create_n_fewshot_demo_sets", recorded)
    metric, gen_lm, _ = metric_and_lms()
    optimizer = dspy.MIPROv2(metric=metric, prompt_model=gen_lm, task_model=gen_lm, auto=None, num_candidates=3,
                             max_bootstrapped_demos=3, max_labeled_demos=0, num_threads=1, verbose=False, seed=7)
    compiled = optimizer.compile(dspy.Predict("prompt -> response"), trainset=trainset(), valset=trainset()[:2],
                                 num_trials=2, minibatch=False)
    bootstrapped = {d["prompt"].split()[-1].rstrip(".") for d in candidates if "prompt" in d}
    assert bootstrapped and not bootstrapped & BAD, bootstrapped  # every candidate demo was judged yes
    assert not kept_topics(compiled) & BAD


def test_gepa_reads_the_no_questions_as_feedback():
    metric, gen_lm, _ = metric_and_lms()
    seen: list[str] = []

    def reflect(system: str, user: str) -> str:
        seen.append(user)
        return "```Write a fine note; never use the word bad.```"

    reflection_lm, _ = scripted_lm(reflect)
    with dspy.context(lm=gen_lm):
        dspy.GEPA(metric=metric, reflection_lm=reflection_lm, max_metric_calls=12, num_threads=1,
                  reflection_minibatch_size=2, seed=3).compile(dspy.Predict("prompt -> response"),
                                                               trainset=trainset(), valset=trainset()[:3])
    assert any(QUESTION in text and "it says bad" in text for text in seen), seen[:1]


# ------------------------------------------------------------------ the contract, call by call


def test_the_answer_depends_on_how_dspy_calls():
    metric, _, _ = metric_and_lms()
    gold = trainset()[1]
    bad, good = dspy.Prediction(response="A bad note."), dspy.Prediction(response="A fine note.")
    assert metric(gold, bad, trace=[]) is False and metric(gold, good, trace=[]) is True  # bootstrapping
    scored = metric(gold, bad)  # dspy.Evaluate, SIMBA, COPRO
    assert isinstance(scored, dspy.Prediction) and scored.score == 0.0 and QUESTION in scored.feedback
    feedback = metric(gold, bad, [], "predict", [])  # GEPA's feedback call passes its trace and pred_name
    assert isinstance(feedback, dspy.Prediction) and "it says bad" in feedback.feedback
    assert metric.as_float()(gold, good, trace=[]) == 1.0


def test_an_unscored_output_never_passes_and_the_fallback_is_logged(caplog):
    judge_lm, _ = scripted_lm(lambda s, u: "I would rather not say.")
    metric = BinEvalMetric(BinEval(QUESTIONS, logprobs="off"), input_field="prompt", output_field="response",
                           judge_lm=judge_lm, unscored_score=1.0, pass_threshold=0.5)
    gold, pred = trainset()[0], dspy.Prediction(response="A fine note.")
    with caplog.at_level(logging.WARNING, logger="binaryeval_dspy"):
        answers = [metric(gold, pred, trace=[]) for _ in range(5)]
    assert answers == [False] * 5  # its fallback score (1.0 here) is not a pass
    warned = [r.getMessage() for r in caplog.records if "fallback score" in r.getMessage()]
    assert len(warned) == 3 and "1.0" in warned[0] and "unscored" in warned[0]  # calls 1, 2 and 4
    assert metric.counts().unscored == 5


def test_pass_threshold_is_documented_and_checked():
    metric, _, _ = metric_and_lms(pass_threshold=0.0)
    assert metric(trainset()[1], dspy.Prediction(response="A bad note."), trace=[]) is True
    for bad in (1.5, -0.1, True, "high"):
        with pytest.raises(BinEvalError, match="pass_threshold"):
            BinEvalMetric(pass_threshold=bad)


def test_the_evaluator_has_a_clear_name_and_the_old_one_still_works():
    evaluator = BinEval(QUESTIONS)
    metric = BinEvalMetric(evaluator)
    assert metric.evaluator is evaluator and metric.judge is evaluator
    assert metric.evaluator.judge is evaluator.judge  # the judge predictor
    assert BinEvalMetric(judge=evaluator).evaluator is evaluator
    with pytest.raises(BinEvalError, match="`evaluator`"):
        BinEvalMetric(evaluator, judge=evaluator)


def test_bineval_says_scored_or_unscored_beside_its_score():
    judge_lm, _ = scripted_lm(judge)
    silent_lm, _ = scripted_lm(lambda s, u: "no idea")
    with dspy.context(lm=judge_lm):
        scored = BinEval(QUESTIONS, logprobs="off")(input="Write.", output="A fine note.")
    with dspy.context(lm=silent_lm):
        unscored = BinEval(QUESTIONS, logprobs="off")(input="Write.", output="A fine note.")
    assert (scored.status, scored.score) == ("scored", 1.0)
    assert (unscored.status, unscored.score) == ("unscored", None)
    failed = BinEval(QUESTIONS).item_work("Write.", "A note.").finish([
        QuestionVerdict(question_id="quality-01", verdict="error", error="ConnectionError: down")])
    assert (failed.status, failed.score) == ("error", None)


# ------------------------------------------------------------------ the agreement metrics


def human_item(rating: float) -> dspy.Example:
    return dspy.Example(item_id="i1", input="An article.", output="A summary.",
                        human={"quality": rating}).with_inputs("input", "output")


def judged(verdict: str) -> dspy.Prediction:
    return BinEval(QUESTIONS).item_work("An article.", "A summary.").finish([
        QuestionVerdict(question_id="quality-01", verdict=verdict, explanation="scripted")])


def test_human_agreement_passes_within_the_papers_gap_under_a_trace():
    metric = HumanAgreementMetric(QUESTIONS, dimensions=["quality"])
    assert metric(human_item(5.0), judged("yes"), trace=[]) is True   # gap 0
    assert metric(human_item(1.0), judged("yes"), trace=[]) is False  # gap 1 > 0.3
    assert metric(human_item(2.0), judged("yes")).score == pytest.approx(0.25)
    assert metric(human_item(4.0), judged("yes"), trace=[]) is True   # gap 0.25 <= 0.3: agreement 0.75 >= 0.7
    source = SourceAgreementMetric(QUESTIONS, {"i1": [QuestionVerdict(question_id="quality-01", verdict="yes")]})
    assert source(human_item(5.0), judged("yes"), trace=[]) is True
    assert source(human_item(5.0), judged("no"), trace=[]) is False
    assert source(human_item(5.0), judged("no")).score == 0.0


def test_one_human_field_default_for_the_loaders_the_metric_and_the_optimizer():
    from binaryeval_dspy import load_summeval

    item = load_summeval(limit=1)[0]
    assert isinstance(item.human, dict)  # where the loaders put the ratings
    optimizer = BinEvalOptimizer("human")
    assert optimizer.strategy.human_field == HumanAgreementMetric(QUESTIONS, dimensions=[]).human_field == "human"
    dims = ["coherence"]
    assert normalized_human_scores(item, dims) == normalized_human_scores(item, dims, field="human")
    renamed = dspy.Example(item_id="x", scores={"quality": 3.0})
    with pytest.raises(InputError, match="`human_field` 'scores'"):
        normalized_human_scores(renamed, ["quality"])

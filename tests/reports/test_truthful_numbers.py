"""Issue 12, points 1, 2 and 6: one judging path, unscored is not zero, every figure names its LM and its n.

Scripted LMs only (plumbing, never a model's judgment). Each test fails on the code
before the issue: the metric sent code-checked questions to the LM, stored 0.0 for an
unscored or failed item, judged a failed generation as an empty text, had no item counts
in the iteration records, and the comparison table had neither n scored / n nor LM names.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import dspy

from binaryeval_dspy.comparison import (
    Budgets,
    GeneratorSetup,
    Split,
    comparison_markdown,
    run_comparison,
)
from binaryeval_dspy.comparison.report_tables import rows
from binaryeval_dspy.comparison.results import OptimizerResult, metrics_from_records
from binaryeval_dspy.comparison.runners import runner_lms
from binaryeval_dspy.optimizers import BinEvalOptimizer
from binaryeval_dspy.optimizers.bineval_optimizer.optimizer import best_iteration
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.programs.bineval_metric import BinEvalMetric
from binaryeval_dspy.schemas.check_spec import CheckSpec
from binaryeval_dspy.schemas.optimization_history import (
    SELECTION_RULE,
    IterationRecord,
    OptimizationHistory,
)
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from binaryeval_dspy.signatures.response_generation import RespondToPrompt
from tests.fakes import field_value, scripted_lm
from tests.update_scripts import append_rewrite, never_duplicate, route

SHORT = BinaryQuestion(id="format-01", dimension="format", text="Is the response at most five words long?",
                       check=CheckSpec(name="word_count", params={"max": 5}))
POLITE = BinaryQuestion(id="format-02", dimension="format", text="Is the response polite?")
CHECKED = QuestionSet(dimensions=["format"], questions=[SHORT, POLITE])
DONE = QuestionSet(dimensions=["format"], questions=[
    BinaryQuestion(id="format-01", dimension="format", text="Does the response end with the word DONE?")])


def answer(verdict: str) -> dict[str, str]:
    return {"explanation": f"scripted {verdict}", "verdict": verdict}


def prompts(n: int, prefix: str = "p") -> list[dspy.Example]:
    return [dspy.Example(item_id=f"{prefix}{i}", prompt=f"Write about topic {i}.", instruction_id_list=["x:y"],
                         key=str(i)).with_inputs("prompt") for i in range(n)]


# ------------------------------------------------------------------ point 1: one judging path
def test_metric_answers_code_checked_questions_by_code_not_by_the_lm():
    """The scripted judge says "no" to everything, the word-count check says yes: the check wins."""
    lm, engine = scripted_lm(lambda s, u: answer("no"))
    metric = BinEvalMetric(questions_for=lambda ex: CHECKED, input_field="prompt", output_field="response",
                           judge_lm=lm)
    with dspy.context(adapter=dspy.JSONAdapter()):
        result = metric(prompts(1)[0], dspy.Prediction(response="Three short words."))
    by_id = {v.question_id: v for v in result.verdicts}
    assert by_id["format-01"].verdict == "yes" and by_id["format-01"].source == "code"
    assert by_id["format-02"].verdict == "no" and by_id["format-02"].source == "lm"
    assert result.score == 0.5 and result.scored is True
    assert len(engine.calls) == 1  # only the question without a check reached the LM
    assert all("at most five words" not in call for call in engine.calls)


def test_bineval_forward_takes_a_per_item_question_set():
    lm, engine = scripted_lm(lambda s, u: answer("yes"))
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        pred = BinEval()(input="Write a line.", output="Far too many words in this response to pass.",
                         question_set=CHECKED)
    assert [v.verdict for v in pred.verdicts] == ["no", "yes"] and len(engine.calls) == 1


# ------------------------------------------------------------------ point 2: unscored is not zero
def test_an_unscored_evaluation_is_visible_in_the_result_and_the_counts():
    def judge(system, user):
        return "I cannot tell." if "topic 1" in user else answer("yes")

    lm, _ = scripted_lm(judge)
    metric = BinEvalMetric(BinEval(DONE), input_field="prompt", output_field="response", judge_lm=lm,
                           unscored_score=0.25)
    gen_lm, _ = scripted_lm(lambda s, u: {"response": "Some text. DONE"})
    with dspy.context(lm=gen_lm, adapter=dspy.JSONAdapter()):
        unscored = metric(prompts(2)[1], dspy.Prediction(response="Some text. DONE"))
        assert unscored.scored is False and unscored.status == "unscored" and unscored.score == 0.25
        assert "fallback" in unscored.feedback
        with metric.counting() as counts:
            dspy.Evaluate(devset=prompts(2), metric=metric, num_threads=2,
                          display_progress=False)(dspy.Predict(RespondToPrompt))
    assert (counts.scored, counts.unscored, counts.failed, counts.total) == (1, 1, 0, 2)
    assert metric.counts().as_dict() == {"scored": 1, "unscored": 2, "failed": 0, "total": 3}
    assert metric.unscored == 2
    metric.reset_counts()
    assert metric.counts().total == 0


def test_a_judge_whose_calls_fail_is_failed_with_its_error():
    def judge(system, user):
        raise ConnectionError("judge endpoint down")

    lm, _ = scripted_lm(judge)
    metric = BinEvalMetric(BinEval(DONE), input_field="prompt", output_field="response", judge_lm=lm)
    with dspy.context(adapter=dspy.JSONAdapter()):
        result = metric(prompts(1)[0], dspy.Prediction(response="text"))
    assert result.scored is False and result.status == "failed" and result.score == 0.0
    assert "judge endpoint down" in result.error
    assert metric.counts().failed == 1


def generator_failing_on(topic: int, response: str = "A short text."):
    def script(system, user):
        if f"topic {topic}" in field_value(user, "prompt"):
            raise ConnectionError(f"generator endpoint down on topic {topic}")
        return {"response": response}

    return script


def test_optimizer_records_a_failed_generation_as_failed_and_never_judges_it():
    judge_lm, judge_engine = scripted_lm(
        lambda s, u: answer("yes" if field_value(u, "output").endswith("DONE") else "no"))
    judge = BinEvalMetric(BinEval(DONE), input_field="prompt", output_field="response", judge_lm=judge_lm)
    gen_lm, _ = scripted_lm(generator_failing_on(1))
    prompt_lm, _ = scripted_lm(route(notes=lambda s, u: {"lessons": ["End with DONE."]}, dedup=never_duplicate,
                                     rewrite=append_rewrite("Answer the request.")))
    optimizer = BinEvalOptimizer("generation", judge=judge, prompt_lm=prompt_lm, max_iterations=1)
    with dspy.context(lm=gen_lm, adapter=dspy.JSONAdapter()):
        compiled = optimizer.compile(dspy.Predict(RespondToPrompt), trainset=prompts(3))
    first = compiled.optimization_history.iterations[0]
    assert first.items["train"].model_dump() == {"total": 3, "scored": 2, "unscored": 0, "failed": 1}
    (problem,) = first.item_problems
    assert (problem.item_id, problem.status, problem.stage) == ("p1", "failed", "generation")
    assert "generator endpoint down on topic 1" in problem.error
    assert first.selection_missing == ["p1"] and first.selection_split == "train"
    # the failed item was never judged as an empty text, and the mean covers the scored items only
    assert all("topic 1" not in call for call in judge_engine.calls)
    assert first.scores["train_score"] == 0.0 and first.failures == 2


def human_items(n: int) -> list[dspy.Example]:
    return [dspy.Example(item_id=f"it{i}", input=f"Article {i} says 3 goals.", output=f"Summary {i}.",
                         human={"consistency": 1.0 + i, "fluency": 4.0}).with_inputs("input", "output")
            for i in range(n)]


def test_iteration_records_count_failed_and_unscored_evaluator_items(small_question_set):
    def judge(system, user):
        if "Article 1 " in user:
            raise ConnectionError("evaluator endpoint down")
        if "Article 2 " in user and field_value(user, "question") == "Is it grammatical?":
            return "maybe"  # the fluency dimension gets no parsed verdict
        return answer("yes" if "Article 3 " in user else "no")

    lm, _ = scripted_lm(judge)
    prompt_lm, _ = scripted_lm(route(notes=lambda s, u: {"lessons": ["Be fair."]}, dedup=never_duplicate,
                                     rewrite=append_rewrite("Give the verdict, then a brief justification.")))
    optimizer = BinEvalOptimizer("human", prompt_lm=prompt_lm, max_iterations=1)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        compiled = optimizer.compile(BinEval(small_question_set), trainset=human_items(5))
    history = compiled.optimization_history
    first = history.iterations[0]
    assert first.items["train"].model_dump() == {"total": 5, "scored": 3, "unscored": 1, "failed": 1}
    problems = {p.item_id: p for p in first.item_problems}
    assert problems["it1"].status == "failed" and "evaluator endpoint down" in problems["it1"].error
    assert problems["it2"].status == "unscored" and problems["it2"].stage == "evaluator"
    assert first.selection_missing == ["it1", "it2"]
    assert history.selection_rule == SELECTION_RULE
    header, body = history.summary_rows()
    assert "selection score (n scored / n)" in header and body[0][2] == "3/5 (1 unscored, 1 failed)"
    saved = OptimizationHistory.model_validate_json(history.model_dump_json())
    assert saved.iterations[0].items["train"].failed == 1


def record(iteration: int, score: float | None, missing: list[str]) -> IterationRecord:
    return IterationRecord(iteration=iteration, prompts={}, selection_score=score, selection_missing=missing)


def test_best_iteration_is_chosen_among_iterations_scored_on_the_same_items():
    # iteration 1 scores higher only because its hard item failed: it is not comparable
    assert best_iteration([record(0, 0.5, []), record(1, 0.9, ["hard"]), record(2, 0.6, [])]) == 2
    assert best_iteration([record(0, 0.5, ["a"]), record(1, 0.9, ["b"]), record(2, 0.7, ["a"])]) == 2
    assert best_iteration([record(0, 0.5, []), record(1, 0.5, [])]) == 0  # ties: the earliest
    assert best_iteration([record(0, None, []), record(1, 0.2, ["x"])]) == 1


def test_evaluator_metrics_mark_unscored_items_and_count_them(small_question_set):
    from binaryeval_dspy.comparison.evaluator_metrics import (
        HumanAgreementMetric,
        SourceAgreementMetric,
    )
    from binaryeval_dspy.schemas.verdict import QuestionVerdict

    item = human_items(1)[0]
    errors = [QuestionVerdict(question_id=q.id, verdict="error", error="ConnectionError: down")
              for q in small_question_set.questions]
    pred = BinEval(small_question_set).item_work(item.input, item.output).finish(errors)
    human = HumanAgreementMetric(small_question_set, dimensions=small_question_set.dimensions, unscored_score=0.5)
    result = human(item, pred)
    assert (result.score, result.scored, result.status) == (0.5, False, "failed")
    source = SourceAgreementMetric(small_question_set, {"it0": errors})
    assert source(item, pred).scored is False
    assert human.counts().failed == 1 and source.counts().failed == 1


# ------------------------------------------------------------------ IFBench test records
def ifbench_setup(n: int, checkers=None) -> GeneratorSetup:
    setup = GeneratorSetup(split=Split(train=[], val=[], test=prompts(n, "t")), checkers=checkers)
    if checkers is None:
        setup.checkers = None  # the BinEval test path
    setup.question_sets = {ex.item_id: DONE for ex in setup.split.test}
    return setup


def test_ifbench_test_records_keep_failed_generations_and_unscored_judgements_apart():
    judge_lm, judge_engine = scripted_lm(lambda s, u: "unclear" if "topic 2" in u else answer("yes"))
    setup = ifbench_setup(3)
    setup.judge_lm = judge_lm
    gen_lm, _ = scripted_lm(generator_failing_on(1, "Fine. DONE"))
    with dspy.context(lm=gen_lm, adapter=dspy.JSONAdapter()):
        records = setup.test(setup.student())
    ok, failed, unscored = records
    assert ok["bineval"] == 1.0 and ok["scored"] is True and ok["status"] == "scored"
    assert failed["status"] == "failed" and failed["stage"] == "generation" and failed["response"] is None
    assert failed["bineval"] is None and failed["scored"] is False and "topic 1" in failed["error"]
    assert unscored["bineval"] is None and unscored["scored"] is False and unscored["status"] == "unscored"
    assert all("topic 1" not in call for call in judge_engine.calls)
    metric = metrics_from_records("ifbench", records)["bineval_score"]
    assert (metric.value, metric.n, metric.total) == (1.0, 1, 3)


def test_ifbench_checker_records_do_not_check_a_failed_generation():
    seen = []

    def check(example, response):
        seen.append(response)
        return SimpleNamespace(follow_all_instructions=True, follow_instruction_list=[True])

    setup = ifbench_setup(2, checkers=(check, check))
    gen_lm, _ = scripted_lm(generator_failing_on(0))
    with dspy.context(lm=gen_lm, adapter=dspy.JSONAdapter()):
        failed, ok = setup.test(setup.student())
    assert failed["strict"] is None and failed["status"] == "failed" and "endpoint down on topic 0" in failed["error"]
    assert ok["strict"] is True and seen == ["A short text.", "A short text."]
    metrics = metrics_from_records("ifbench", [failed, ok])
    assert (metrics["strict_accuracy"].value, metrics["strict_accuracy"].n, metrics["strict_accuracy"].total) == \
        (1.0, 1, 2)


# ------------------------------------------------------------------ point 6: every figure names its LM and its n
def test_comparison_table_shows_n_scored_token_split_and_lm_names():
    config = {"setup": {"kind": "ifbench", "mode": "generation", "sizes": {"train": 1, "val": 0, "test": 3}},
              "lm": "task-lm", "prompt_lm": "prompt-lm", "optimizers": ["unoptimized", "gepa"], "metric": "m",
              "test_metric": "t", "seed": 42, "limit": 3}
    records = [{"item_id": "a", "strict": True, "loose": True, "strict_list": [True], "loose_list": [True],
                "scored": True, "status": "scored", "instruction_id_list": ["x:y"]},
               {"item_id": "b", "strict": False, "loose": True, "strict_list": [False], "loose_list": [True],
                "scored": True, "status": "scored", "instruction_id_list": ["x:y"]},
               {"item_id": "c", "strict": None, "loose": None, "strict_list": None, "loose_list": None,
                "scored": False, "status": "failed", "error": "ConnectionError: down",
                "instruction_id_list": ["x:y"]}]
    result = OptimizerResult(
        optimizer="gepa", lm="task-lm", prompt_lm="prompt-lm", compile_lm_calls=7, compile_tokens=150,
        compile_prompt_tokens=100, compile_completion_tokens=50, compile_cached_tokens=20, test_lm_calls=3,
        test_tokens=45, test_prompt_tokens=30, test_completion_tokens=15, test_cached_tokens=0,
        compile_seconds=1.5, test_seconds=0.5, test_records=records,
        lms={"task": "task-lm", "prompt": "prompt-lm", "reflection": "prompt-lm", "judge": "judge-lm"},
        metric_counts={"scored": 9, "unscored": 1, "failed": 0, "total": 10})
    header, (row,) = rows(config, [result])
    cell = dict(zip(header, row))
    assert cell["test items scored / n"] == "2 / 3"
    assert cell["optimization metric calls scored / n"] == "9 / 10 (1 unscored)"
    assert cell["LM calls (optimize / test)"] == "7 / 3"
    assert cell["optimize tokens prompt / completion / cached"] == "100 / 50 / 20"
    assert cell["test tokens prompt / completion / cached"] == "30 / 15 / 0"
    assert cell["wall time s (optimize / test)"] == "1.5 / 0.5"
    assert cell["LMs"] == "task: task-lm; prompt: prompt-lm; reflection: prompt-lm; judge: judge-lm"
    assert cell["test loose_accuracy [95% CI]"].startswith("1.000")  # over the 2 scored items, not 2/3
    markdown = comparison_markdown(config, [result])
    assert "| 2 / 3 |" in markdown and "reflection: prompt-lm" in markdown


def test_runner_lms_resolve_roles_per_optimizer():
    setup = ifbench_setup(1)
    setup.judge_lm = SimpleNamespace(name="judge-lm")
    assert runner_lms(setup, "task-lm", "prompt-lm", {"reflection": "@prompt"}) == {
        "task": "task-lm", "prompt": "prompt-lm", "judge": "judge-lm", "reflection": "prompt-lm"}
    setup.judge_lm = None
    assert runner_lms(setup, "task-lm", "prompt-lm", {"prompt": None}) == {"task": "task-lm", "judge": "task-lm"}


def test_a_threaded_comparison_records_costs_counts_and_lms(tmp_path: Path):
    """End to end with 2 threads: token split, metric counts, n scored / n and LM names reach the saved results."""

    def check(example, response):
        ok = response.endswith("DONE")
        return SimpleNamespace(follow_all_instructions=ok, follow_instruction_list=[ok])

    def script(system, user):
        if "[[ ## violation_example ## ]]" in user:
            return answer("yes" if field_value(user, "output").endswith("DONE") else "no")
        if "[[ ## prompt ## ]]" in user and "topic 3" in field_value(user, "prompt"):
            raise ConnectionError("generator endpoint down")
        return route(notes=lambda s, u: {"lessons": ["End with DONE."]}, dedup=never_duplicate,
                     rewrite=append_rewrite("Answer the request."),
                     other=lambda s, u: {"response": "A text."})(system, user)

    lm, _ = scripted_lm(script)
    items = prompts(4)
    setup = GeneratorSetup(split=Split(train=items[:2], val=[], test=items[2:]), checkers=(check, check),
                           num_threads=2)
    for ex in items[:2]:  # the prompts' questions, as `prepare` would have generated them
        DONE.save(tmp_path / "cmp" / "questions" / f"{ex.item_id}.json")
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        _, results, failures = run_comparison(
            setup, ["bineval"], tmp_path / "cmp", lm_name="scripted-task", prompt_lm_name="scripted-task",
            budgets=Budgets(bineval_iterations=1))
    assert failures == {}
    unoptimized, bineval = results
    assert bineval.compile_lm_calls > 0 and bineval.compile_prompt_tokens == 10 * bineval.compile_lm_calls
    assert bineval.compile_completion_tokens == 5 * bineval.compile_lm_calls
    assert bineval.metric_counts["total"] >= 2 and bineval.lms["task"] == "scripted-task"
    assert "prompt" not in unoptimized.lms and unoptimized.lms["judge"] == "scripted-task"
    report = (tmp_path / "cmp" / "comparison.md").read_text()
    assert "| 1 / 2 |" in report  # the test item whose generation failed is counted, not averaged as 0
    assert "## BinEval optimizer iterations" in report and "2/2" in report

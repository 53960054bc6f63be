"""Running a benchmark: BinEval and the baselines on the same items and LM, resumable.

`prepare_run` creates a benchmark run directory or checks that an existing one can be
resumed as asked; `run_benchmark` runs each requested method into its own directory
of it, so a later call only runs what is missing. The directory's files
(``benchmark.json``, ``items.jsonl``, ...) and `BenchmarkRun` are in
`binaryeval_dspy.meta_eval.benchmark_files`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import dspy

from binaryeval_dspy.errors import InputError, RunStateError
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.meta_eval.benchmark_files import (
    LM_METHODS,
    METHODS,
    NO_LM,
    ROUGE_LM_NAME,
    BenchmarkRun,
    BenchmarkRunConfig,
)
from binaryeval_dspy.meta_eval.benchmark_spec import BenchmarkSpec
from binaryeval_dspy.meta_eval.method_run import CodeMethod, run_method
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.programs.geval import GEvalJudge
from binaryeval_dspy.programs.rouge import RougeL
from binaryeval_dspy.programs.rubric_judge import LogprobMode
from binaryeval_dspy.programs.unieval import UniEvalJudge
from binaryeval_dspy.runs.evaluation import evaluate_items
from binaryeval_dspy.runs.evaluation_outcome import EvaluationOutcome
from binaryeval_dspy.runs.run_directory import refuse_unrelated_folder
from binaryeval_dspy.schemas.item_result import text_hash
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.rubric import Rubric
from binaryeval_dspy.schemas.run_manifest import RunManifest
from binaryeval_dspy.settings import RunSettings

__all__ = [
    "ProgressHook",
    "prepare_run",
    "run_benchmark",
]

ProgressHook = Callable[[str, Any, str], None]


def prepare_run(
    run: BenchmarkRun,
    spec: BenchmarkSpec,
    items: Sequence[dspy.Example],
    *,
    lm_name: str,
    question_set: QuestionSet | None,
    question_set_source: str,
    rubric: Rubric | None,
    rubric_source: str,
    methods: Sequence[str],
    limit: int | None,
    sample: str | None,
    seed: int,
    data_dir: str | None,
    logprobs: str,
) -> BenchmarkRunConfig:
    """Create a run directory, or check that an existing one can be resumed as asked.

    Writes ``benchmark.json``, ``items.jsonl`` and copies of the question set and rubric
    (each only when given: `question_set` may be None unless ``bineval`` is among
    `methods`, `rubric` None unless ``geval`` or ``unieval`` is).

    Raises:
        InputError: a method's question set or rubric is missing.
        RunStateError: the directory holds another benchmark, LM, item selection,
            question set or rubric; the message says which and how to proceed.
    """
    _require_task_files(methods, question_set, rubric)
    wanted = BenchmarkRunConfig(
        benchmark=spec.name, lm=lm_name, limit=limit, sample=sample, seed=seed, data_dir=data_dir,
        data_files=dict(spec.data_files), item_ids=[str(i.item_id) for i in items],
        question_set_hash=question_set.content_hash if question_set is not None else "",
        question_set_source=question_set_source if question_set is not None else "",
        rubric_hash=rubric.content_hash if rubric is not None else "",
        rubric_source=rubric_source if rubric is not None else "", logprobs=logprobs, methods=list(methods),
    )
    existing = run.read_config()
    if existing is None:
        refuse_unrelated_folder(run.path, kind="a benchmark run", marker=run.config_path.name)
    if existing is not None:
        checks = {
            "benchmark": "it is another benchmark",
            "lm": "the tables would mix two LMs",
            "item_ids": "another item selection (limit, sample or seed) would mix two samples",
        }
        lm_results = any((run.path / m / "results.jsonl").is_file()
                         and (run.path / m / "results.jsonl").stat().st_size > 0 for m in LM_METHODS)
        if NO_LM in (existing.lm, wanted.lm) or not lm_results:  # no LM result stored: nothing to mix
            checks.pop("lm")
        if "bineval" in methods:
            checks["question_set_hash"] = "BinEval's verdicts would mix two question sets"
        if {"geval", "unieval"} & set(methods):
            checks["rubric_hash"] = "the baselines would mix two rubrics"
        for key, why in checks.items():
            old, new = getattr(existing, key), getattr(wanted, key)
            if old != new and old != "":  # "": that file was never used in this run, so nothing can mix
                shown = (f"{len(old)} items" if key == "item_ids" else repr(old),
                         f"{len(new)} items" if key == "item_ids" else repr(new))
                raise RunStateError(
                    f"{run.path} holds a run with {key} {shown[0]}, this command has {shown[1]}: {why}.",
                    fix="choose another `out_dir`, or rerun with the original settings.",
                )
        try:  # same ids but other texts or human scores (another data folder)?
            old_items = {r["item_id"]: r for r in run.read_items()}
        except InputError:  # missing or damaged: rewritten below; the results carry their own output hashes
            old_items = {}
        if old_items:
            for ex in items:
                old_row = old_items.get(str(ex.item_id))
                if old_row is None:
                    continue
                if old_row.get("output_hash") != text_hash(ex.output) or old_row.get("human") != dict(ex.human):
                    what = "output text" if old_row.get("output_hash") != text_hash(ex.output) else "human scores"
                    raise RunStateError(
                        f"{run.path} holds item {ex.item_id} with another {what} than the data read now "
                        f"(data folder then: {existing.data_dir or 'default'}, now: {data_dir or 'default'}): "
                        "stored scores would not match the items.",
                        fix="choose another `out_dir`, or point `data_dir` at the data the run was made with.",
                    )
        if wanted.lm == NO_LM:
            wanted.lm = existing.lm
        wanted.created_at = existing.created_at
        wanted.methods = [m for m in METHODS if m in set(existing.methods) | set(methods)]
        wanted.question_set_hash, wanted.question_set_source = (
            (existing.question_set_hash, existing.question_set_source) if "bineval" not in methods
            else (wanted.question_set_hash, wanted.question_set_source))
        if not {"geval", "unieval"} & set(methods):
            wanted.rubric_hash, wanted.rubric_source = existing.rubric_hash, existing.rubric_source
    run.write_config(wanted)
    run.write_items(items)
    if question_set is not None and ("bineval" in methods or not run.question_set_path.is_file()):
        question_set.save(run.question_set_path)
    if rubric is not None and ({"geval", "unieval"} & set(methods) or not run.rubric_path.is_file()):
        rubric.save(run.rubric_path)
    return wanted


def _require_task_files(methods: Sequence[str], question_set: QuestionSet | None, rubric: Rubric | None) -> None:
    if "bineval" in methods and question_set is None:
        raise InputError("BinEval needs a question set", field="question_set",
                         fix="pass the benchmark's question set (e.g. binaryeval_dspy/benchmark_data/tasks/<benchmark>/).")
    if {"geval", "unieval"} & set(methods) and rubric is None:
        raise InputError("the G-Eval- and UniEval-style baselines need a rubric", field="rubric",
                         fix="pass the benchmark's rubric.json (e.g. binaryeval_dspy/benchmark_data/tasks/<benchmark>/).")


def _bineval_items(items: Sequence[dspy.Example]) -> list[dspy.Example]:
    return [dspy.Example(item_id=str(ex.item_id), input=ex.input, output=ex.output,
                         doc_id=str(ex.get("doc_id", ex.item_id)), system_id=str(ex.get("system_id", "0")),
                         split=str(ex.get("split", ""))).with_inputs("input", "output") for ex in items]


def run_benchmark(
    run: BenchmarkRun,
    spec: BenchmarkSpec,
    items: Sequence[dspy.Example],
    *,
    methods: Sequence[str],
    handle: LMHandle | None,
    question_set: QuestionSet | None,
    rubric: Rubric | None,
    logprobs: LogprobMode = "auto",
    on_method_start: Callable[[str, int], None] | None = None,
    on_progress: ProgressHook | None = None,
    settings: RunSettings | None = None,
    explanations: bool = True,
) -> dict[str, EvaluationOutcome]:
    """Run each requested method over the items into its own directory of `run`.

    Args:
        run: a directory prepared by `prepare_run`.
        spec: the benchmark.
        items: the selected items (document-grouped order, so prompt prefixes are reused).
        methods: subset of ``bineval``, ``geval``, ``unieval``, ``rouge``, run in that order.
        handle: the LM (required when an LM method is requested).
        question_set: BinEval's questions (dimensions named as the benchmark's); may be
            None when ``bineval`` is not requested.
        rubric: the baselines' rubric; may be None when neither ``geval`` nor
            ``unieval`` is requested.
        logprobs: log-probability mode of the baselines.
        on_method_start: called with (method, number of items) before each method.
        on_progress: called with (method, result or None, status) after each item.
        settings: how to judge (`RunSettings`): the engine and calls in flight (BinEval:
            across items and questions; the baselines: items at once; the embedded model
            always one at a time), ``cache_padding``, and ``fail_on_errors`` (stop BinEval
            at the first item with a failed call; the baselines ignore it).
        explanations: False runs BinEval verdict-only (see `BinEval`).

    Returns:
        method -> `EvaluationOutcome` (results include earlier sessions). After Ctrl-C
        the interrupted method's outcome has ``interrupted=True`` and the methods after
        it are not started (they are absent from the mapping).

    Raises:
        InputError: unknown method, or an LM method without an LM.
        RunStateError: a method directory holds results of another LM or configuration.
    """
    settings = settings or RunSettings()
    baseline_settings = settings.model_copy(update={"fail_on_errors": False})  # a baseline item fails alone
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise InputError(f"unknown method(s) {unknown}; expected some of {', '.join(METHODS)}", field="methods")
    if LM_METHODS & set(methods) and handle is None:
        raise InputError("an LM is needed for bineval, geval and unieval", field="lm")
    _require_task_files(methods, question_set, rubric)
    data_source = ", ".join(spec.data_files.values()) or spec.name
    dims = [d for d in spec.dimensions if rubric is not None and d in rubric.dimensions]
    outcomes: dict[str, EvaluationOutcome] = {}
    for method in [m for m in METHODS if m in methods]:
        if any(o.interrupted for o in outcomes.values()):  # Ctrl-C stops the whole run, not one method
            break

        def progress(result: Any, status: str, _method: str = method) -> None:
            if on_progress:
                on_progress(_method, result, status)

        config = {"input_field": "input", "output_field": "output", "id_field": "item_id", "scale": [0.0, 1.0],
                  "benchmark": spec.name}
        if method in LM_METHODS and handle is not None:
            previous = run.method_dir(method).read_manifest()
            if previous is None or "max_tokens" in previous.config:  # runs made before it was recorded resume
                config["max_tokens"] = handle.lm.kwargs.get("max_tokens")
        if method == "bineval":
            config.update(adapter=handle.adapter_name, adapter_reason=handle.adapter_reason,  # type: ignore[union-attr]
                          explanations=explanations)
            manifest = RunManifest(command="benchmark bineval", lm=handle.name,  # type: ignore[union-attr]
                                   question_set_hash=question_set.content_hash,
                                   question_set_path=str(run.question_set_path), items_path=data_source,
                                   settings=settings.recorded(handle), config=config)
            program = BinEval(question_set, explanations=explanations)
            if on_method_start:  # the progress clock and the method's wall time start together
                on_method_start(method, len(items))
            outcomes[method] = evaluate_items(program, _bineval_items(items), run.method_dir(method), manifest,
                                              lm=handle, on_progress=progress, settings=settings)
            continue
        if method == "rouge":
            scorer = RougeL()

            def function(ex: dspy.Example, _scorer: RougeL = scorer) -> dspy.Prediction:
                pred = _scorer(output=ex.output, reference=ex.get("reference", "") or "")
                return dspy.Prediction(scores={d: pred.score for d in spec.dimensions},
                                       details={"rougeL": {"f": pred.score, "precision": pred.precision,
                                                           "recall": pred.recall, "error": pred.error}})

            manifest = RunManifest(command="benchmark rouge", lm=ROUGE_LM_NAME,
                                   question_set_hash=f"rougeL-stemmer-{scorer.use_stemmer}",
                                   question_set_path="(none)", items_path=data_source, config=config)
            if on_method_start:
                on_method_start(method, len(items))
            outcomes[method] = run_method(method, CodeMethod(function), items, run.method_dir(method),
                                          manifest, lm=None, on_progress=progress, settings=baseline_settings)
            continue
        judge: dspy.Module = (GEvalJudge if method == "geval" else UniEvalJudge)(
            rubric, dimensions=dims, logprobs=logprobs)

        manifest = RunManifest(command=f"benchmark {method}", lm=handle.name,  # type: ignore[union-attr]
                               question_set_hash=f"rubric-{rubric.content_hash}-logprobs-{logprobs}",
                               question_set_path=str(run.rubric_path), items_path=data_source,
                               settings=baseline_settings.recorded(handle), config={**config, "logprobs": logprobs})
        if on_method_start:
            on_method_start(method, len(items))
        outcomes[method] = run_method(method, judge, items, run.method_dir(method),
                                      manifest, lm=handle, on_progress=progress, settings=baseline_settings)
    return outcomes

"""A benchmark run: BinEval and the baselines on the same items and LM, resumable.

Layout of a run directory::

    benchmark.json        what was run: benchmark, LM, selection, question set, rubric
    items.jsonl           the selected items' ids, documents, systems and human scores
    question_set.json     copy of the BinEval question set used
    rubric.json           copy of the baselines' rubric
    bineval/              manifest.json + results.jsonl (BinEval item results)
    geval/ unieval/ rouge/  manifest.json + results.jsonl (`MethodItemResult` lines)
    report.md, report.html, figures/   written by `write_benchmark_report`

Each method's results live in their own directory, so a later call with more methods
(or after an interruption) only runs what is missing, and the report is rebuilt from
these files without any LM call.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import dspy
from pydantic import BaseModel, ConfigDict, Field

from binaryeval_dspy.data.json_files import read_json_file
from binaryeval_dspy.errors import InputError, RunStateError
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.meta_eval.benchmark_spec import BenchmarkSpec
from binaryeval_dspy.meta_eval.method_run import MethodItemResult, MethodRunDirectory, run_method
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.programs.geval import GEvalJudge
from binaryeval_dspy.programs.rouge import RougeL
from binaryeval_dspy.programs.rubric_judge import LogprobMode
from binaryeval_dspy.programs.unieval import UniEvalJudge
from binaryeval_dspy.runs.evaluation import EvaluationOutcome, evaluate_items
from binaryeval_dspy.runs.run_directory import RunDirectory, refuse_unrelated_folder
from binaryeval_dspy.schemas.item_result import ItemResult, text_hash
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.rubric import Rubric
from binaryeval_dspy.schemas.run_manifest import RunManifest, utc_now
from binaryeval_dspy.schemas.versioned import check_schema_version

METHODS = ("bineval", "geval", "unieval", "rouge")
LM_METHODS = frozenset({"bineval", "geval", "unieval"})
METHOD_TITLES = {"bineval": "BinEval", "geval": "G-Eval-style", "unieval": "UniEval-style", "rouge": "ROUGE-L"}
ROUGE_LM_NAME = "none (ROUGE-L via rouge-score)"
NO_LM = "none"  # benchmark.json's LM while only LM-free methods have run
BENCHMARK_RUN_SCHEMA_VERSION = 1

ProgressHook = Callable[[str, Any, str], None]


class BenchmarkRunConfig(BaseModel):
    """``benchmark.json``: what a benchmark run evaluates, and with what.

    Attributes:
        benchmark: benchmark name (``summeval``).
        lm: display name of the LM every LM-based method used.
        limit / sample / seed: the item selection (``limit`` per split).
        data_dir: the data folder read (None: the default one).
        data_files: split -> file inside the data folder.
        item_ids: the selected items, in judging order.
        question_set_hash / question_set_source: BinEval's question set (empty strings
            while no BinEval pass was requested).
        rubric_hash / rubric_source: the baselines' rubric (empty strings while no
            G-Eval- or UniEval-style pass was requested).
        logprobs: log-probability mode of the baselines (auto / on / off).
        methods: every method requested so far.
        created_at / updated_at: UTC ISO times.
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: Annotated[int, check_schema_version(
        BENCHMARK_RUN_SCHEMA_VERSION, "benchmark run file",
        older_fix="run the benchmark again with this version, into a new --out directory")] = (
        BENCHMARK_RUN_SCHEMA_VERSION)
    benchmark: str
    lm: str
    limit: int | None = None
    sample: str | None = None
    seed: int = 0
    data_dir: str | None = None
    data_files: dict[str, str] = Field(default_factory=dict)
    item_ids: list[str]
    question_set_hash: str
    question_set_source: str
    rubric_hash: str
    rubric_source: str
    logprobs: str = "auto"
    methods: list[str] = Field(default_factory=list)
    created_at: str = Field(default_factory=utc_now)
    updated_at: str = Field(default_factory=utc_now)


_DAMAGED_CONFIG_FIX = ("restore benchmark.json from a backup, or run `bineval benchmark` again into a new --out "
                       "directory (the results in this one cannot be attributed without it).")


class BenchmarkRun:
    """The files of one benchmark run directory (see the module docstring).

    Args:
        path: the run directory.
    """

    def __init__(self, path: str | Path) -> None:
        if str(path).strip() == "":
            raise InputError("the run directory path is empty", fix="pass --out DIR.")
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise InputError("exists and is not a directory", path=self.path,
                             fix="choose another --out for the run directory.")
        self.config_path = self.path / "benchmark.json"
        self.items_path = self.path / "items.jsonl"
        self.question_set_path = self.path / "question_set.json"
        self.rubric_path = self.path / "rubric.json"

    def method_dir(self, method: str) -> RunDirectory:
        """The run directory of one method (`RunDirectory` for BinEval, else `MethodRunDirectory`)."""
        folder = self.path / method
        return RunDirectory(folder) if method == "bineval" else MethodRunDirectory(folder)

    def read_config(self) -> BenchmarkRunConfig | None:
        """``benchmark.json``, or None for a new run.

        Raises:
            InputError: the file exists but does not validate.
        """
        if not self.config_path.is_file():
            return None
        return read_json_file(self.config_path, BenchmarkRunConfig, what="benchmark run file",
                              fix=_DAMAGED_CONFIG_FIX)

    def write_config(self, config: BenchmarkRunConfig) -> None:
        """Write ``benchmark.json`` atomically."""
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.config_path.with_suffix(".json.tmp")
        tmp.write_text(config.model_dump_json(indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.config_path)

    def read_items(self) -> list[dict[str, Any]]:
        """The selected items (id, doc, system, split, human scores, output hash), in order.

        Raises:
            InputError: the file is missing, a line is not JSON, or a field has the
                wrong type (human scores must be numbers or null; doc, system and split
                ids strings).
        """
        if not self.items_path.is_file():
            raise InputError("no items.jsonl in this run directory", path=self.items_path,
                             fix="point at a directory written by `bineval benchmark`.")
        from binaryeval_dspy.data.benchmark_rows import read_rows

        fix = "rerun the `bineval benchmark` command that made this directory: it rewrites items.jsonl."
        rows: list[dict[str, Any]] = []
        seen: dict[str, int] = {}
        try:
            for number, row in read_rows(self.items_path):
                item_id, human = row.get("item_id"), row.get("human", {})
                if not isinstance(item_id, str) or not item_id:
                    raise InputError(f"expected a non-empty string, got {item_id!r:.40}", path=self.items_path,
                                     line=number, field="item_id", fix=fix)
                if item_id in seen:
                    raise InputError(f"item {item_id} already appeared on line {seen[item_id]}",
                                     path=self.items_path, line=number, field="item_id", fix=fix)
                if not isinstance(human, dict):
                    raise InputError(f"expected an object of human scores, got {human!r:.40}",
                                     path=self.items_path, line=number, field="human", fix=fix)
                for dim, score in human.items():
                    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
                        raise InputError(f"expected a number or null, got {score!r:.40}", path=self.items_path,
                                         line=number, field=f"human.{dim}", fix=fix)
                for key in ("doc_id", "system_id", "split"):
                    if key in row and (isinstance(row[key], bool) or not isinstance(row[key], (str, int))):
                        raise InputError(f"expected a string, got {row[key]!r:.40}", path=self.items_path,
                                         line=number, field=key, fix=fix)
                seen[item_id] = number
                rows.append(row)
        except InputError as exc:
            if exc.fix:
                raise
            raise InputError(exc.message, path=exc.path, line=exc.line, field=exc.field, fix=fix) from exc
        if not rows:
            raise InputError("items.jsonl holds no items", path=self.items_path, fix=fix)
        return rows

    def write_items(self, items: Sequence[dspy.Example]) -> None:
        """Write ``items.jsonl`` (no texts: ids, grouping keys, human scores, output hash)."""
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.items_path.with_suffix(".jsonl.tmp")
        with tmp.open("w", encoding="utf-8") as handle:
            for ex in items:
                handle.write(json.dumps({
                    "item_id": str(ex.item_id), "doc_id": str(ex.get("doc_id", ex.item_id)),
                    "system_id": str(ex.get("system_id", "0")), "split": str(ex.get("split", "")),
                    "human": dict(ex.human), "output_hash": text_hash(ex.output),
                }, ensure_ascii=False) + "\n")
        os.replace(tmp, self.items_path)

    def methods_present(self) -> list[str]:
        """Methods with stored results, in `METHODS` order."""
        return [m for m in METHODS if (self.path / m / "results.jsonl").is_file()]

    def read_results(self, method: str) -> list[ItemResult] | list[MethodItemResult]:
        """Stored results of one method (empty when it has not run). Read-only: safe beside
        a run that is still appending (a half-written last line is skipped, not cut)."""
        return self.method_dir(method).read_results(repair=False)  # type: ignore[return-value]


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
                    fix="choose another --out, or rerun with the original settings.",
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
                        fix="choose another --out, or point --data-dir at the data the run was made with.",
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
    concurrency: int = 1,
    explanations: bool = True,
    fail_on_errors: bool = False,
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
        concurrency: LM calls in flight (BinEval: across items and questions; the
            baselines: items at once). The embedded model always runs with 1.
        explanations: False runs BinEval verdict-only (see `BinEval`).
        fail_on_errors: stop BinEval at the first item with a failed call.

    Returns:
        method -> `EvaluationOutcome` (results include earlier sessions). After Ctrl-C
        the interrupted method's outcome has ``interrupted=True`` and the methods after
        it are not started (they are absent from the mapping).

    Raises:
        InputError: unknown method, or an LM method without an LM.
        RunStateError: a method directory holds results of another LM or configuration.
    """
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
        if on_method_start:
            on_method_start(method, len(items))

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
                                   config=config)
            outcomes[method] = evaluate_items(BinEval(question_set, explanations=explanations),
                                              _bineval_items(items), run.method_dir(method), manifest, lm=handle,
                                              on_progress=progress, concurrency=concurrency,
                                              fail_on_errors=fail_on_errors)
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
            outcomes[method] = run_method(method, function, items, run.method_dir(method),  # type: ignore[arg-type]
                                          manifest, lm=None, on_progress=progress, concurrency=concurrency)
            continue
        judge: dspy.Module = (GEvalJudge if method == "geval" else UniEvalJudge)(
            rubric, dimensions=dims, logprobs=logprobs)

        def function(ex: dspy.Example, _judge: dspy.Module = judge) -> dspy.Prediction:
            return _judge(input=ex.input, output=ex.output)

        manifest = RunManifest(command=f"benchmark {method}", lm=handle.name,  # type: ignore[union-attr]
                               question_set_hash=f"rubric-{rubric.content_hash}-logprobs-{logprobs}",
                               question_set_path=str(run.rubric_path), items_path=data_source,
                               config={**config, "logprobs": logprobs})
        outcomes[method] = run_method(method, function, items, run.method_dir(method),  # type: ignore[arg-type]
                                      manifest, lm=handle, on_progress=progress, concurrency=concurrency)
    return outcomes

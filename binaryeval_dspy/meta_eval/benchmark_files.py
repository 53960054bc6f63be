"""The files of a benchmark run directory: ``benchmark.json`` (`BenchmarkRunConfig`) and `BenchmarkRun`.

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

The methods are run into these files by `binaryeval_dspy.meta_eval.benchmark_run`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dspy
from pydantic import BaseModel, ConfigDict, Field

from binaryeval_dspy.data.json_files import read_json_file
from binaryeval_dspy.errors import InputError
from binaryeval_dspy.meta_eval.method_run import MethodItemResult, MethodRunDirectory
from binaryeval_dspy.runs.results_file import StoredResults
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.item_result import ItemResult, text_hash
from binaryeval_dspy.schemas.run_manifest import utc_now
from binaryeval_dspy.schemas.versioned import SchemaVersion

METHODS = ("bineval", "geval", "unieval", "rouge")
LM_METHODS = frozenset({"bineval", "geval", "unieval"})
METHOD_TITLES = {"bineval": "BinEval", "geval": "G-Eval-style", "unieval": "UniEval-style", "rouge": "ROUGE-L"}
ROUGE_LM_NAME = "none (ROUGE-L via rouge-score)"
NO_LM = "none"  # benchmark.json's LM while only LM-free methods have run
BENCHMARK_RUN_SCHEMA_VERSION = 1
_OLDER_FIX = "run the benchmark again with this version, into a new `out_dir`"


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

    schema_version: SchemaVersion(BENCHMARK_RUN_SCHEMA_VERSION, "benchmark run file", older_fix=_OLDER_FIX) = BENCHMARK_RUN_SCHEMA_VERSION
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


_DAMAGED_CONFIG_FIX = ("restore benchmark.json from a backup, or run `bineval benchmark` again into a new `out_dir` "
                       "(the results in this one cannot be attributed without it).")


class BenchmarkRun:
    """The files of one benchmark run directory (see the module docstring).

    Args:
        path: the run directory.
    """

    def __init__(self, path: str | Path) -> None:
        if str(path).strip() == "":
            raise InputError("the run directory path is empty", fix="pass `out_dir` DIR.")
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise InputError("exists and is not a directory", path=self.path,
                             fix="choose another `out_dir` for the run directory.")
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
        a run that is still appending (a half-written last line is skipped, not cut, and
        named in a logged warning; `read_stored_results` returns it)."""
        return self.method_dir(method).read_results(repair=False)  # type: ignore[return-value]

    def read_stored_results(self, method: str) -> StoredResults:
        """Stored results of one method and every line that gave none (`StoredResults`),
        changing nothing; a complete line that is not a valid result raises `InputError`."""
        return self.method_dir(method).read_stored_results(strict=True)

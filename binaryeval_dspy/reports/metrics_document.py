"""``metrics.json``: every number of a benchmark or agreement report, and the report itself.

`BenchmarkMetrics` is what `binaryeval_dspy.reports.benchmark_metrics.compute_benchmark_metrics`
returns and what ``report.md`` / ``report.html`` are rendered from, so ``bineval report
--from-metrics`` rebuilds the same report from this one file.

The file is flat, as it always was: ``benchmark``, ``lm``, ``items``, ``level``,
``constant_predictions``, ``items_source`` (agreement reports), ``coverage_warnings``,
then one key per method or prediction set (``{dimension or split: {spearman, kendall,
pearson, items_scored, items, ...}, average, source, ci95_spearman, paired_vs}``) and the
report-wide entries ``cost``, ``score_sources``, ``per_system``, ``question_analysis``
and ``prediction_sets``; then ``schema_version`` and ``report`` (the `Document`: its
tables with their cells and its figures with their data, written on one line).
Undefined numbers (NaN) are written as null, never 0.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from binaryeval_dspy.data.json_files import read_json_file, validation_error
from binaryeval_dspy.errors import InputError
from binaryeval_dspy.render import Document
from binaryeval_dspy.schemas.versioned import SchemaVersion

METRICS_SCHEMA_VERSION = 1
_OLDER_FIX = "rebuild the report from the run's files: bineval report RUN_DIR"
METRICS_FILE = "metrics.json"


def json_safe(value: Any) -> Any:
    """`value` with NaN / inf as None, numpy scalars as Python numbers, tuples as lists
    and mapping keys as strings (what ``json.dumps`` writes without surprises)."""
    import numpy as np

    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (np.floating, np.integer)):
        return json_safe(value.item())
    return value


class BenchmarkMetrics(BaseModel):
    """The content of ``metrics.json`` (see the module docstring for the layout).

    Attributes:
        schema_version: the file format (1).
        benchmark: benchmark name (``summeval``, ``topical_chat``, ``qags``, ...).
        lm: the LM label of the report's captions.
        items: items of the report.
        level: the main correlation level (``summary``, ``turn``, ``pooled``).
        constant_predictions: the summary-level policy, ``skip`` or ``zero``.
        items_source: agreement reports: where the items and human scores come from.
        coverage_warnings: the report's warnings about means over different items.
        entries: every other top-level key of the file (per method or prediction set,
            ``cost``, ``score_sources``, ...), values as in the file (None for NaN).
        report: the report document the Markdown and HTML are rendered from.
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: SchemaVersion(METRICS_SCHEMA_VERSION, "metrics.json", older_fix=_OLDER_FIX) = METRICS_SCHEMA_VERSION
    benchmark: str
    lm: str
    items: int = Field(ge=0)
    level: str
    constant_predictions: str
    items_source: str | None = None
    coverage_warnings: list[str] = Field(default_factory=list)
    entries: dict[str, Any] = Field(default_factory=dict)
    report: Document

    @model_validator(mode="before")
    @classmethod
    def _nest_entries(cls, data: Any) -> Any:
        """Read the flat file: keys that are not fields go to `entries`."""
        if isinstance(data, dict) and "entries" not in data:
            fields = set(cls.model_fields)
            data = {**{k: v for k, v in data.items() if k in fields},
                    "entries": {k: v for k, v in data.items() if k not in fields}}
        return data

    def numbers(self) -> dict[str, Any]:
        """The flat mapping of the file without ``schema_version`` and ``report`` (what
        `BenchmarkReport.metrics` holds)."""
        head: dict[str, Any] = {"benchmark": self.benchmark, "lm": self.lm, "items": self.items,
                                "level": self.level, "constant_predictions": self.constant_predictions}
        if self.items_source is not None:
            head["items_source"] = self.items_source
        head["coverage_warnings"] = list(self.coverage_warnings)
        return {**head, **self.entries}

    def to_json(self) -> str:
        """The file's text: the numbers indented, the report document on one line."""
        numbers = json.dumps({**json_safe(self.numbers()), "schema_version": self.schema_version}, indent=2,
                             ensure_ascii=False)
        document = json.dumps(self.report.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))
        return numbers[:-2] + f',\n  "report": {document}\n}}\n'

    def save(self, path: str | Path) -> Path:
        """Write `to_json` to `path` (a file or a report directory); returns the file path."""
        path = Path(path)
        if path.is_dir():
            path = path / METRICS_FILE
        path.write_text(self.to_json(), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> BenchmarkMetrics:
        """Read ``metrics.json`` (a file or the report directory holding it).

        Raises:
            InputError: no such file, not JSON, a newer schema version, no report
                document (files written before it was saved), or invalid fields.
        """
        path = Path(path)
        if path.is_dir():
            path = path / METRICS_FILE
        if not path.is_file():
            raise InputError("no metrics.json here", path=path,
                             fix="pass a report directory written by `bineval benchmark`, `bineval report` or "
                                 "`bineval agreement`.")
        fix = "rebuild it with `bineval report RUN_DIR` from the run's files."
        data = read_json_file(path, what="metrics.json", fix=fix)
        if not isinstance(data, dict):
            raise InputError("not a metrics.json", expected="a JSON object", received=type(data).__name__,
                             path=path, fix=fix)
        if "report" not in data:
            raise InputError("this metrics.json holds no report document (written before reports were rendered "
                             "from metrics.json)", path=path, field="report",
                             fix="rebuild the report from the run's files: bineval report RUN_DIR (without "
                                 "`from_metrics`).")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise validation_error(exc, path=path, what="metrics.json", fix=fix) from exc

"""The judge weights file: each judge's weight for a ``weighted`` panel, measured beforehand.

A weighted panel (`binaryeval_dspy.panels.panel_vote`, rule ``weighted``) counts each judge's
vote with a weight from that judge's measured agreement with labels. A run has no labels, so
the weights come from a measurement made earlier: ``bineval agreement`` (its `labels` and
`verdicts`) writes ``judge_weights.csv`` into its report directory (`write_judge_weights`),
one row per judge it compared, and a run reads it with the `panel_weights` setting
(`read_judge_weights`). The manifest records the weights used and where they came from
(`JudgeWeights.manifest_entry`).

Format (CSV with a header row, or JSON Lines with the same keys):

* ``judge`` (required): the judge's name exactly as the run names it (one of its `judges`);
* ``weight`` (required): a finite number >= 0 (0: the judge has no say);
* optional, written by ``bineval agreement`` and recorded in the manifest: ``accuracy``,
  ``kappa`` (Cohen's), ``agree`` and ``answered`` (labelled questions), ``labels`` (the labels
  file they were measured against).

The weight ``bineval agreement`` writes is `log_odds_weight(agree, answered)`: log(a / (1 - a))
of the judge's smoothed accuracy a = (agree + 1) / (answered + 2), floored at 0, the weighting
that maximizes a vote's accuracy for independent judges (Nitzan & Paroush, 1982); the same one
its simulated weighted panels use.

Every problem is an `InputError` naming the file, the line and the field: a missing file or
column, a weight that is not a number >= 0, a judge listed twice, a judge of the run the file
does not list, a judge the file lists that is not in the run.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from binaryeval_dspy.data.rows import csv_text, existing_file, read_csv_rows, read_jsonl_rows
from binaryeval_dspy.errors import InputError

#: The name ``bineval agreement`` gives the file in its report directory.
JUDGE_WEIGHTS_FILE = "judge_weights.csv"
#: The columns written, in order (``judge`` and ``weight`` are the ones read as weights).
COLUMNS = ("judge", "weight", "accuracy", "kappa", "agree", "answered", "labels")
_NUMBERS = ("weight", "accuracy", "kappa", "agree", "answered")


@dataclass(frozen=True)
class JudgeWeights:
    """The weights a weighted panel votes with, as read from a judge weights file.

    Attributes:
        path: the file read.
        sha256: the file's SHA-256 (hex), so the manifest names the exact measurement.
        weights: judge -> weight (>= 0), in the run's judge order.
        measured: judge -> the file's other columns for it (``accuracy``, ``kappa``,
            ``agree``, ``answered``, ``labels``), where given.
    """

    path: Path
    sha256: str
    weights: dict[str, float]
    measured: dict[str, dict[str, Any]] = field(default_factory=dict)

    def manifest_entry(self) -> dict[str, Any]:
        """What a run's manifest records: ``panel_weights`` (judge -> weight) and
        ``panel_weights_source`` (the file's path and SHA-256, and what each weight was
        measured as: judge -> accuracy, kappa, counts, labels file)."""
        return {"panel_weights": dict(self.weights),
                "panel_weights_source": {"path": str(self.path), "sha256": self.sha256,
                                         "measured": {j: dict(m) for j, m in self.measured.items()}}}


def _rows(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    if path.suffix.lower() == ".jsonl":
        return read_jsonl_rows(path)
    if path.suffix.lower() != ".csv":
        raise InputError(f"a judge weights file is .csv or .jsonl, got {path.suffix or 'no extension'!r}", path=path,
                         fix=f"pass the {JUDGE_WEIGHTS_FILE} that `bineval agreement` wrote.")
    _header, rows = read_csv_rows(path, {"judge": "judge", "weight": "weight"})
    return rows


def _number(value: Any, *, path: Path, line: int, name: str) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise InputError(f"{name} must be a number, got {value!r}", path=path, line=line, field=name,
                         fix=f"write a finite number in the {name} column.")
    return number


def read_judge_weights(path: str | Path, judges: Sequence[str]) -> JudgeWeights:
    """Read a judge weights file (module docstring) for a panel of `judges`.

    Args:
        path: a ``.csv`` or ``.jsonl`` judge weights file.
        judges: the run's judges (`RunSettings.judges`), in order; the file must list each
            exactly once, and no other.

    Returns:
        The `JudgeWeights` (weights in `judges`' order).

    Raises:
        InputError: the file is missing or unreadable; a row has no ``judge`` or no
            ``weight``, or a weight that is not a finite number >= 0 (another numeric
            column that is not a number); a judge listed twice; a judge of the file that is
            not in the run (its line); a judge of the run the file does not list. Each names
            the file, the line and the field.
    """
    file = existing_file(path, "judge weights file")
    weights: dict[str, float] = {}
    measured: dict[str, dict[str, Any]] = {}
    lines: dict[str, int] = {}
    wanted = set(judges)
    for line, row in _rows(file):
        judge = str(row.get("judge") or "").strip()
        if not judge:
            raise InputError("the row names no judge", path=file, line=line, field="judge",
                             fix="write the judge's name as the run names it (one of its `judges`).")
        if judge in lines:
            raise InputError(f"judge {judge!r} is listed twice (first on line {lines[judge]})", path=file, line=line,
                             field="judge", fix="keep one row per judge.")
        if judge not in wanted:
            raise InputError(f"judge {judge!r} is not a judge of this run (its judges: {', '.join(judges)})",
                             path=file, line=line, field="judge",
                             fix="remove the row, or name the judges exactly as the run's `judges`.")
        numbers = {name: _number(row.get(name), path=file, line=line, name=name) for name in _NUMBERS}
        weight = numbers["weight"]
        if weight is None:
            raise InputError(f"judge {judge!r} has no weight", path=file, line=line, field="weight",
                             fix="write a number >= 0 in the weight column.")
        if weight < 0:
            raise InputError(f"a weight is >= 0 (0: no say), got {weight:g}", path=file, line=line, field="weight",
                             fix="write a number >= 0; a judge worse than chance gets 0, it is never inverted.")
        lines[judge] = line
        weights[judge] = weight
        about: dict[str, Any] = {name: int(value) if name in ("agree", "answered") and value.is_integer() else value
                                 for name, value in numbers.items() if name != "weight" and value is not None}
        if str(row.get("labels") or "").strip():
            about["labels"] = str(row["labels"]).strip()
        measured[judge] = about
    missing = [j for j in judges if j not in weights]
    if missing:
        raise InputError(f"no weight for judge {missing[0]!r}" + (f" (and {len(missing) - 1} more)" if missing[1:] else "")
                         + f"; the file lists {', '.join(weights) or 'no judge'}", path=file, field="judge",
                         fix="measure every judge of the run with `bineval agreement` on labels and verdicts "
                             "and pass the judge_weights.csv it writes, or add a row for it.")
    return JudgeWeights(path=file, sha256=hashlib.sha256(file.read_bytes()).hexdigest(),
                        weights={j: weights[j] for j in judges}, measured={j: measured[j] for j in judges})


def judge_weights_text(rows: Iterable[Mapping[str, Any]]) -> str:
    """The CSV text of a judge weights file: the header `COLUMNS`, one row per mapping
    (missing or None cells empty, floats with 6 decimals; `binaryeval_dspy.data.rows.csv_text`)."""
    return csv_text(COLUMNS, rows, float_cell=lambda value: f"{value:.6f}")


def write_judge_weights(rows: Iterable[Mapping[str, Any]], path: str | Path) -> Path:
    """Write a judge weights file (`judge_weights_text`) to `path`; returns it."""
    path = Path(path)
    path.write_text(judge_weights_text(rows), encoding="utf-8")
    return path


__all__ = ["COLUMNS", "JUDGE_WEIGHTS_FILE", "JudgeWeights", "judge_weights_text", "read_judge_weights",
           "write_judge_weights"]

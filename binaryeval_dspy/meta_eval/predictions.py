"""Prediction files a user brings: ``item_id`` plus per-dimension scores on any numeric scale.

`load_predictions` reads one JSONL or CSV file into a `PredictionSet` aligned with the
items of a meta-evaluation (a bundled benchmark, a benchmark run or a user's scored
file), so `bineval agreement` can correlate it with the human scores exactly as it
does our own methods.

File format (one row per item):

* ``item_id`` (string or integer, required, unique): the id of the item as the items'
  loader names it (SummEval ``<doc_id>/<system_id>``, Topical-Chat ``tc-<nnn>``, QAGS
  ``<split>-<n>``, a scored file: its ``--id-field`` value).
* one column per dimension (``coherence``, ``consistency``, ...; in JSONL also nested
  as ``{"scores": {"coherence": ...}}``), or a single ``score`` column used for every
  dimension that has no column of its own. Any numeric scale: correlations do not
  depend on it (Spearman / Kendall on ranks, Pearson under affine maps).
* a null, NaN, an empty cell or ``NA`` / ``n/a`` / ``nan`` / ``null`` / ``none`` is a
  missing value: counted, left out of the correlations, never read as 0.

Items without a row, and rows whose ``item_id`` is not among the items, are counted
and listed (`PredictionSet.missing_items`, `PredictionSet.unknown_ids`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from binaryeval_dspy.data.rows import read_csv_rows, read_jsonl_rows
from binaryeval_dspy.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

ID_FIELD = "item_id"
SINGLE_SCORE_FIELD = "score"
PREDICTION_SUFFIXES = (".jsonl", ".csv")
MISSING_TEXTS = frozenset({"", "na", "n/a", "nan", "null", "none"})
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+\- ]{0,59}$")


@dataclass
class PredictionSet:
    """One named set of predictions, aligned with the items of a report.

    Attributes:
        name: the name the user gave the set (``NAME`` of ``--predictions NAME=FILE``);
            it labels the set's rows in every table.
        path: the file read.
        frame: index = the report's item ids (in their order), one float column per
            dimension, raw values on the file's own scale; NaN where the item has no
            row or its row has no value for that dimension.
        rows: data rows read from the file.
        columns: dimension -> the column its values came from (a dimension with no
            column and no ``score`` column is absent, and all NaN in `frame`).
        ignored_columns: columns that are neither ``item_id`` nor used for a dimension.
        missing_items: report items without a row in the file (report order).
        unknown_ids: (item_id, line) of rows whose id is not among the report's items.
        missing_values: dimension -> item ids whose row is present but holds no value.
    """

    name: str
    path: Path
    frame: pd.DataFrame
    rows: int
    columns: dict[str, str] = field(default_factory=dict)
    ignored_columns: list[str] = field(default_factory=list)
    missing_items: list[str] = field(default_factory=list)
    unknown_ids: list[tuple[str, int]] = field(default_factory=list)
    missing_values: dict[str, list[str]] = field(default_factory=dict)

    @property
    def matched_items(self) -> int:
        """Report items that have a row in the file."""
        return len(self.frame) - len(self.missing_items)

    def items_used(self, dimension: str) -> int:
        """Report items with a finite value for `dimension`."""
        import numpy as np

        if dimension not in self.frame:
            return 0
        return int(np.isfinite(self.frame[dimension].to_numpy(dtype=float)).sum())

    def column_summary(self) -> str:
        """E.g. ``coherence <- coherence, fluency <- score``; dimensions without a column are named."""
        used = [f"{d} <- {c}" for d, c in self.columns.items()]
        absent = [d for d in self.frame.columns if d not in self.columns]
        return ", ".join(used + [f"{d}: no column" for d in absent])


def parse_prediction_option(value: str) -> tuple[str, Path]:
    """Split one ``NAME=FILE`` value of ``--predictions``.

    Returns:
        (name, path). The name is 1-60 characters: letters, digits, space, ``_ . + -``,
        starting with a letter or digit.

    Raises:
        InputError: no ``=``, an empty or badly formed name, or an empty path.
    """
    name, sep, path = value.partition("=")
    name, path = name.strip(), path.strip()
    if not sep or not path:
        raise InputError(f"expected NAME=FILE, got {value!r}", field="`predictions`",
                         fix="name each prediction set, e.g. `predictions` myjudge=preds.jsonl.")
    if not NAME_PATTERN.match(name):
        raise InputError(f"the prediction set name {name!r} is not usable", field="`predictions`",
                         fix="use 1-60 letters, digits, spaces or _ . + -, starting with a letter or digit.")
    return name, Path(path)


def score_value(raw: Any, *, path: Path, line: int, column: str) -> float:
    """One cell read as a score: a finite float, or NaN for a missing value.

    Missing: None, a float NaN, or a string in `MISSING_TEXTS` (case-insensitive,
    surrounding spaces ignored). Numbers may be given as strings (``"3.5"``).

    Raises:
        InputError: a boolean, a list or object, a string that is not a number, or an
            infinite value (names file, line and column).
    """
    fix = "write the score as a number (any scale), or leave the cell empty / null when there is none."
    if raw is None:
        return math.nan
    if isinstance(raw, (bool, list, dict)):
        raise InputError(f"expected a number, got {raw!r:.40}", path=path, line=line, field=column, fix=fix)
    if isinstance(raw, str):
        text = raw.strip()
        if text.lower() in MISSING_TEXTS:
            return math.nan
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"expected a number, got {raw!r:.40}", path=path, line=line, field=column,
                             fix=fix) from None
    elif isinstance(raw, (int, float)):
        value = float(raw)
    else:
        raise InputError(f"expected a number, got {raw!r:.40}", path=path, line=line, field=column, fix=fix)
    if math.isnan(value):
        return math.nan
    if not math.isfinite(value):
        raise InputError(f"expected a finite number, got {raw!r:.40}", path=path, line=line, field=column, fix=fix)
    return value


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    """A JSONL row with a nested ``scores`` object also reachable as ``scores.<dim>``."""
    flat = dict(row)
    nested = row.get("scores")
    if isinstance(nested, dict):
        for key, value in nested.items():
            flat.setdefault(f"scores.{key}", value)
    return flat


def _choose_columns(available: Sequence[str], dimensions: Sequence[str], path: Path, line: int) -> dict[str, str]:
    columns: dict[str, str] = {}
    for d in dimensions:
        for candidate in (d, f"scores.{d}"):
            if candidate in available:
                columns[d] = candidate
                break
        else:
            if SINGLE_SCORE_FIELD in available:
                columns[d] = SINGLE_SCORE_FIELD
    if not columns:
        shown = ", ".join(c for c in available if c != "scores") or "none"
        raise InputError(f"no score column: expected one of {', '.join(dimensions)} or '{SINGLE_SCORE_FIELD}' "
                         f"(columns: {shown})", path=path, line=line, field="/".join([*dimensions, SINGLE_SCORE_FIELD]),
                         fix="name each score column after its dimension, or give one 'score' column.")
    return columns


def load_predictions(path: str | Path, *, name: str, dimensions: Sequence[str],
                     item_ids: Sequence[str]) -> PredictionSet:
    """Read a predictions file and align it with the report's items.

    Args:
        path: a ``.jsonl`` (one object per line) or ``.csv`` (header row) file; see the
            module docstring for the columns.
        name: the set's name (labels it in the report).
        dimensions: the report's dimensions; each is read from its own column, else
            from ``score``.
        item_ids: the report's items, in order (ids as strings).

    Returns:
        A `PredictionSet` whose frame has one row per item of `item_ids`.

    Raises:
        InputError: a missing or unreadable file, another suffix, no data rows, a row
            without ``item_id`` (or an empty one, or one that is not a string or
            integer), an id used twice, no column for any dimension, a score that is
            not a number or not finite. Each names the file, the line (CSV: the
            header is line 1) and the field.
    """
    import numpy as np
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise InputError("is a directory, not a file" if path.is_dir() else "file not found", path=path,
                         field="`predictions`", fix="check the path given after NAME=.")
    suffix = path.suffix.lower()
    if suffix not in PREDICTION_SUFFIXES:
        raise InputError(f"unsupported file type {suffix!r}; expected one of {PREDICTION_SUFFIXES}", path=path,
                         fix="write the predictions as JSON Lines or CSV with an item_id column.")
    if suffix == ".csv":
        header, row_iter = read_csv_rows(path, {})
        if ID_FIELD not in header:
            raise InputError(f"the header has no column '{ID_FIELD}' (columns: {', '.join(header)})", path=path,
                             line=1, field=ID_FIELD, fix="add an item_id column naming each item.")
        rows = list(row_iter)
        available = list(header)
    else:
        rows = [(number, _flat(row)) for number, row in read_jsonl_rows(path)]
        available = list(dict.fromkeys(key for _, row in rows for key in row))
    if not rows:
        raise InputError("the file holds no predictions", path=path, fix="write one row per item with item_id and scores.")
    columns = _choose_columns(available, dimensions, path, line=1 if suffix == ".csv" else rows[0][0])
    used = set(columns.values())
    ignored = [c for c in available if c not in used and c not in (ID_FIELD, "scores")]
    wanted = {str(i): n for n, i in enumerate(item_ids)}
    values = np.full((len(item_ids), len(dimensions)), np.nan)
    seen: dict[str, int] = {}
    unknown: list[tuple[str, int]] = []
    missing_values: dict[str, list[str]] = {d: [] for d in columns}
    for number, row in rows:
        raw_id = row.get(ID_FIELD)
        if raw_id is None or (isinstance(raw_id, str) and not raw_id.strip()):
            raise InputError("the item_id is missing or empty", path=path, line=number, field=ID_FIELD,
                             fix="give every row the id of the item it scores.")
        if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)):
            raise InputError(f"an item_id must be a string or an integer, got {type(raw_id).__name__}",
                             path=path, line=number, field=ID_FIELD, fix="write the id as text.")
        item_id = str(raw_id)
        if item_id in seen:
            raise InputError(f"item_id {item_id!r} was already used on line {seen[item_id]}", path=path,
                             line=number, field=ID_FIELD, fix="keep one row per item.")
        seen[item_id] = number
        parsed = {d: score_value(row.get(c), path=path, line=number, column=c) for d, c in columns.items()}
        position = wanted.get(item_id)
        if position is None:
            unknown.append((item_id, number))
            continue
        for j, d in enumerate(dimensions):
            if d in parsed:
                values[position, j] = parsed[d]
                if math.isnan(parsed[d]):
                    missing_values[d].append(item_id)
    frame = pd.DataFrame(values, index=pd.Index([str(i) for i in item_ids], name="item_id"),
                         columns=list(dimensions), dtype=float)
    missing_items = [str(i) for i in item_ids if str(i) not in seen]
    return PredictionSet(name=name, path=path, frame=frame, rows=len(rows), columns=columns,
                         ignored_columns=ignored, missing_items=missing_items, unknown_ids=unknown,
                         missing_values=missing_values)

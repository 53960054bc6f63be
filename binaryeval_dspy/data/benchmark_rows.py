"""Reading benchmark JSONL rows with located errors (shared by the benchmark loaders)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from binaryeval_dspy.data.rows import read_jsonl_rows
from binaryeval_dspy.errors import InputError, UnknownNameError


def read_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (1-based line, JSON object) for every non-blank line (`read_jsonl_rows`).

    Raises:
        InputError: a line is not UTF-8, not valid JSON or not an object (names file and line).
    """
    return read_jsonl_rows(path)


def require_rows(items: list, path: Path) -> None:
    """Raise when a benchmark file held no rows at all.

    Raises:
        InputError: `items` is empty (names the file).
    """
    if not items:
        raise InputError("the file holds no items (it is empty or blank)", path=path,
                         fix="restore the benchmark's cleaned JSONL file (see the data folder's README).")


def add_unique_id(item_id: str, seen: set[str], *, path: Path, line: int) -> None:
    """Add a row's item id to the ids `seen` so far in the file.

    Raises:
        InputError: the id is already there (names file, line and ``item_id``).
    """
    if item_id in seen:
        raise InputError(f"item id {item_id} appears twice", path=path, line=line, field="item_id",
                         fix="give every row its own item_id.")
    seen.add(item_id)


def lookup(row: Mapping[str, Any], field: str) -> Any:
    """The value at `field` in `row`; a dotted name (``scores.coherence``) walks nested
    objects. Raises `UnknownNameError` (a KeyError) when any step is missing."""
    if field in row:
        return row[field]
    value: Any = row
    for part in field.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise UnknownNameError(f"the row has no field {field!r}", expected=f"a field '{part}' in the row",
                                   received=", ".join(sorted(map(str, value))) if isinstance(value, Mapping)
                                   else type(value).__name__,
                                   fix="map a field the rows have, or add it to every row.")
        value = value[part]
    return value


def require_text(row: Mapping[str, Any], field: str, *, path: Path | str, line: int | None,
                 allow_empty: bool = False) -> str:
    """A non-empty string field of `row`.

    Args:
        allow_empty: accept a blank string (an output under evaluation: the run records
            it as status ``empty_output`` without asking the LM, see `is_empty_output`).
            A null is still refused: the cleaned benchmark files write every text.

    Raises:
        InputError: the field is missing, not a string, or blank (unless `allow_empty`).
    """
    try:
        value = lookup(row, field)
    except KeyError:
        present = ", ".join(sorted(row)) or "none"
        raise InputError(f"the field is missing (fields present: {present})", path=path, line=line,
                         field=field, fix="use the benchmark's cleaned JSONL file, or map the field.") from None
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise InputError(f"expected a {'' if allow_empty else 'non-empty '}string, got {value!r:.60}", path=path,
                         line=line, field=field,
                         fix="fill in the text, or drop the row.")
    return value


def require_score(row: Mapping[str, Any], field: str, *, path: Path | str, line: int | None,
                  low: float | None = None, high: float | None = None) -> float:
    """A finite numeric human score of `row`, optionally checked against [low, high].

    Raises:
        InputError: the field is missing, not a number, NaN, or out of range.
    """
    try:
        value = lookup(row, field)
    except KeyError:
        raise InputError("the human score is missing", path=path, line=line, field=field,
                         fix="every item needs all the human scores the benchmark uses.") from None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise InputError(f"expected a number, got {value!r:.40}", path=path, line=line, field=field,
                             fix="write the score as a number, e.g. 3 or 0.5.") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"expected a finite number, got {value!r:.40}", path=path, line=line, field=field,
                         fix="write the score as a finite number; drop items without a rating.")
    if (low is not None and value < low - 1e-9) or (high is not None and value > high + 1e-9):
        raise InputError(f"score {value} is outside the scale [{low:g}, {high:g}]", path=path, line=line,
                         field=field, fix="use the benchmark's original rating scale (rescaled data is not "
                                          "accepted).")
    return float(value)

"""The verdicts file: reading and writing per-question answers (JSONL or CSV).

One row per (item, question, judge): ``item_id``, ``question_id``, ``judge``, ``verdict``
(``yes`` / ``no``, or the non-answers ``unparsed`` / ``error``), and optionally ``p_yes``,
``explanation``, ``cost_usd``, ``question_text``, ``dimension`` and the rest of a run's
verdict (`binaryeval_dspy.schemas.verdict_record.VerdictRecord`; docs/verdicts.md).
`read_verdicts` reads ``.jsonl``, ``.jsonl.gz`` and ``.csv`` through the package's one row
readers (`binaryeval_dspy.data.rows`), so every bad row is an `InputError` naming the file,
the line and the field; `write_verdicts` writes the same formats atomically. A file
written by `write_verdicts` reads back to equal records.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from binaryeval_dspy.data.json_files import validation_error
from binaryeval_dspy.data.rows import csv_text, existing_file, read_csv_rows, read_jsonl_rows
from binaryeval_dspy.errors import InputError
from binaryeval_dspy.schemas.verdict_record import (
    REQUIRED_COLUMNS,
    VERDICT_COLUMNS,
    VERDICT_OUTCOMES,
    VerdictKey,
    VerdictRecord,
)

VERDICT_SUFFIXES = (".jsonl", ".jsonl.gz", ".csv")
_FIX = "correct the row (docs/verdicts.md lists the columns and their values)."
_ROLES = {"item_id": "item id", "question_id": "question id", "judge": "judge", "verdict": "verdict"}
_NUMBERS = ("p_yes", "cost_usd")
_BOOLEANS = ("reply_cut", "qualified")
_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")


def verdicts_format(path: str | Path) -> str:
    """``jsonl`` or ``csv``, from the file name (``.jsonl``, ``.jsonl.gz``, ``.csv``, any case).

    Raises:
        InputError: another suffix.
    """
    name = Path(path).name.lower()
    if name.endswith((".jsonl", ".jsonl.gz")):
        return "jsonl"
    if name.endswith(".csv"):
        return "csv"
    raise InputError(f"a verdicts file must end in {', '.join(VERDICT_SUFFIXES)}", path=path,
                     fix="name the file .jsonl or .csv.")


def _normalized_verdict(row: dict[str, Any], path: Path, line: int) -> None:
    value = row.get("verdict")
    if isinstance(value, str) and value.strip().lower() in VERDICT_OUTCOMES:
        row["verdict"] = value.strip().lower()
        return
    if "verdict" not in row:
        raise InputError("the verdict is missing", path=path, line=line, field="verdict",
                         fix=f"give every row a verdict: one of {', '.join(VERDICT_OUTCOMES)}.")
    raise InputError(f"the verdict must be one of {', '.join(VERDICT_OUTCOMES)} (any case), got {value!r}",
                     path=path, line=line, field="verdict",
                     fix="write yes or no for an answer; unparsed or error for a reply that is not one "
                         "(never no).")


def _csv_cell(name: str, text: str, path: Path, line: int, column: int) -> Any:
    """A CSV cell as the row's value ('' is absent); a cell that does not read is an error
    naming the file, the row's line, the field and its column (1-based, as a spreadsheet
    numbers them)."""
    def bad(expected: str, fix: str, detail: str = "") -> InputError:
        return InputError(f"column {column}: expected {expected}, got {text!r}{detail}", path=path, line=line,
                          field=name, fix=fix)

    if name in _NUMBERS:
        try:
            return float(text)
        except ValueError:
            raise bad("a number", "write a decimal number (0.93), or leave the cell empty.") from None
    if name in _BOOLEANS:
        if text.strip().lower() in _TRUE + _FALSE:
            return text.strip().lower() in _TRUE
        raise bad("true or false", "write true or false, or leave the cell empty.")
    if name in ("evidence", "flags"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:  # where in the cell: the cell is not the line, so no line column
            raise bad(f"JSON ({'an object' if name == 'evidence' else 'a list'})", "write the cell as JSON, or "
                      "leave it empty.", f" ({exc.msg} at character {exc.pos + 1} of the cell)") from None
        except (ValueError, RecursionError):
            raise bad(f"JSON ({'an object' if name == 'evidence' else 'a list'})",
                      "write the cell as JSON, or leave it empty.") from None
    if name == "schema_version":
        try:
            return int(text)
        except ValueError:
            raise bad("an integer", "write 1, or leave the cell empty.") from None
    return text


def _csv_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    header, rows = read_csv_rows(path, _ROLES)
    unknown = [name for name in header if name not in VERDICT_COLUMNS]
    if unknown:
        raise InputError(f"unknown column {unknown[0]!r} (columns of a verdicts file: {', '.join(VERDICT_COLUMNS)})",
                         path=path, line=1, field=unknown[0], fix="remove or rename the column on line 1.")
    columns = {name: number for number, name in enumerate(header, start=1)}
    for line, cells in rows:
        row: dict[str, Any] = {}
        for name, text in cells.items():
            if text is None or text == "":
                continue
            row[name] = _csv_cell(name, text, path, line, columns[name]) if name not in REQUIRED_COLUMNS else text
        yield line, row


def iter_verdicts(path: str | Path) -> Iterator[tuple[int, VerdictRecord]]:
    """Yield (1-based line, record) for every row of a verdicts file, checking each row.

    Raises:
        InputError: as `read_verdicts` (except for repeated keys, which it checks).
    """
    path = existing_file(path, "verdicts file")
    rows = read_jsonl_rows(path) if verdicts_format(path) == "jsonl" else _csv_rows(path)
    for line, row in rows:
        for name in REQUIRED_COLUMNS[:3]:
            if name not in row or row[name] in (None, ""):
                raise InputError(f"the {_ROLES[name]} is missing or empty", path=path, line=line, field=name,
                                 fix=f"give every row its {name}.")
            if isinstance(row[name], int) and not isinstance(row[name], bool):
                row[name] = str(row[name])  # numeric ids in JSONL
        for name in ("explanation", "source", "reply_cut", "qualified", "schema_version"):
            if name in row and row[name] is None:
                del row[name]  # JSON null for a field with a default: the default
        _normalized_verdict(row, path, line)
        try:
            yield line, VerdictRecord.model_validate(row)
        except ValidationError as exc:
            raise validation_error(exc, path=path, line=line, what="verdict row", fix=_FIX) from exc


def read_verdicts(path: str | Path) -> list[VerdictRecord]:
    """Read a verdicts file (``.jsonl``, ``.jsonl.gz`` or ``.csv`` with a header row).

    Verdicts are read in any case (``Yes`` is ``yes``); a CSV cell left empty is a field
    left out; JSONL ids may be integers.

    Args:
        path: the file.

    Returns:
        The records in file order.

    Raises:
        InputError: naming the file, the line and the field: a missing file, a wrong
            suffix, text that is not UTF-8 or not valid JSON / CSV, an unknown column or
            field, a missing or empty ``item_id`` / ``question_id`` / ``judge``, a verdict
            other than yes / no / unparsed / error, ``p_yes`` outside [0, 1], a negative
            ``cost_usd``, a second row for the same (item_id, question_id, judge) (with
            the first one's line), or no rows at all.
    """
    records: list[VerdictRecord] = []
    seen: dict[VerdictKey, int] = {}
    for line, record in iter_verdicts(path):
        first = seen.get(record.key)
        if first is not None:
            raise InputError(f"a second row for item {record.item_id!r}, question {record.question_id!r}, judge "
                             f"{record.judge!r} (the first is on line {first})", path=path, line=line,
                             field="item_id, question_id, judge",
                             fix="keep one row per item, question and judge; name two annotators differently.")
        seen[record.key] = line
        records.append(record)
    if not records:
        raise InputError("the verdicts file holds no rows", path=path,
                         fix="add at least one row with item_id, question_id, judge and verdict.")
    return records


def _csv_text(records: Sequence[VerdictRecord]) -> str:
    """A verdicts file's CSV: the columns any row uses, in `VERDICT_COLUMNS` order (`csv_text`)."""
    rows = [r.row() for r in records]
    present = {name for row in rows for name in row}
    return csv_text([name for name in VERDICT_COLUMNS if name in present or name in REQUIRED_COLUMNS], rows)


def write_verdicts(records: Iterable[VerdictRecord], path: str | Path) -> Path:
    """Write records as a verdicts file (format from the suffix), replacing it atomically.

    JSONL: one object per line with the required fields and the optional ones that are
    set. CSV: a header of the columns any row uses, in `VERDICT_COLUMNS` order; an absent
    value is an empty cell, ``evidence`` / ``flags`` are JSON, floats keep every digit.
    ``.jsonl.gz`` is gzipped (reproducibly: no timestamp).

    Returns:
        The path written.

    Raises:
        InputError: a wrong suffix, or two records with the same key (nothing written).
    """
    path = Path(path)
    kind = verdicts_format(path)
    records = list(records)
    seen: set[VerdictKey] = set()
    for r in records:
        if r.key in seen:
            raise InputError(f"two records for item {r.item_id!r}, question {r.question_id!r}, judge {r.judge!r}",
                             path=path, fix="give each judge one answer per item and question.")
        seen.add(r.key)
    if kind == "csv":
        data = _csv_text(records).encode("utf-8")
    else:
        data = "".join(json.dumps(r.row(), ensure_ascii=False) + "\n" for r in records).encode("utf-8")
        if path.name.lower().endswith(".gz"):
            data = gzip.compress(data, compresslevel=9, mtime=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path

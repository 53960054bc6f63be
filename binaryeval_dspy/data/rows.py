"""Reading the rows of a user's JSON Lines or CSV file: one (1-based line, row) pair per
record, UTF-8 and header checked, every problem an `InputError` naming the file, line and
field. The item loaders (`binaryeval_dspy.data.items`) and every other reader of such
files use these."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from binaryeval_dspy.data.json_files import json_syntax_error
from binaryeval_dspy.data.paths import open_data_file
from binaryeval_dspy.errors import InputError

_SHORT_ROW = object()  # csv.DictReader's filler for cells missing from a short row


def check_encodable(value: str, *, path: Path, line: int, field: str) -> None:
    """Refuse text that cannot be written back as UTF-8 (e.g. a lone surrogate)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"contains a character that is not valid Unicode text ({exc.reason} at position {exc.start})",
            path=path, line=line, field=field, fix="remove or replace that character in the file.",
        ) from exc


def _check_csv_header(fieldnames: Sequence[str] | None, path: Path, required: Mapping[str, str]) -> None:
    """Refuse a CSV header row that cannot be read as columns, naming line 1 and the column.

    Args:
        fieldnames: the header's cells (None: the file is empty).
        path: the file, for the message.
        required: column name -> its role (``"input"``, ``"output"``, ``"id"``, a
            human score, ...): each must be a column of the header.

    Raises:
        InputError: no header row, a column without a name (blank cell, e.g. a
            trailing separator), a name used twice, or a required column missing
            (the message lists the columns there are, and points at names that only
            differ by surrounding spaces or case).
    """
    if not fieldnames:
        raise InputError("the CSV file has no header row", path=path, line=1,
                         fix="put the column names on the first line.")
    for number, name in enumerate(fieldnames, start=1):
        if not name.strip():
            raise InputError(f"column {number} of the header has no name", path=path, line=1,
                             field=f"column {number}",
                             fix="name every column on line 1, or remove the empty column (a separator at "
                                 "the end of the line makes one).")
    duplicated = [f for n, f in enumerate(fieldnames) if f in fieldnames[:n]]
    if duplicated:
        raise InputError(f"the header names a column more than once: {duplicated[0]!r} "
                         f"(columns: {', '.join(fieldnames)})", path=path, line=1, field=duplicated[0],
                         fix="give each column its own name.")
    for name, role in required.items():
        if name in fieldnames:
            continue
        near = [f for f in fieldnames if f.strip().lower() == name.strip().lower()]
        hint = f"; the column {near[0]!r} differs only by spaces or case" if near else ""
        option = f"pass --{role}-field with the column that holds the {role}, or " if role in (
            "input", "output", "id") else ""
        raise InputError(f"the header has no column {name!r} for the {role} (columns: {', '.join(fieldnames)}){hint}",
                         path=path, line=1, field=name, fix=f"{option}rename the column on line 1.")


def check_csv_header(path: str | Path, required: Mapping[str, str]) -> list[str]:
    """Read and check a CSV file's header row (line 1) before any row is read.

    Args:
        path: a UTF-8 CSV file (a byte-order mark is accepted).
        required: column name -> its role, e.g. ``{"source": "input", "summary":
            "output", "coherence": "human score"}``.

    Returns:
        The column names, in order.

    Raises:
        InputError: missing file, not UTF-8, no header, an empty or duplicated column
            name, or a required column missing; names the file, line 1 and the column.
    """
    path = existing_file(path)
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle, strict=True)
        try:
            header = next(reader, None)
        except csv.Error as exc:
            raise csv_quoting_error(exc, path=path, row_line=1) from exc
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason})", path=path, line=1,
                             fix="save the file as UTF-8.") from exc
    _check_csv_header(header, path, required)
    return list(header or [])


def csv_quoting_error(exc: csv.Error, *, path: Path, row_line: int,
                      header: Sequence[str] = ()) -> InputError:
    """The located error for a `csv.Error` raised while reading the row that starts on
    `row_line` (1-based) of the CSV file `path` with ``strict=True``.

    When the row holds a quoted cell that is not closed as CSV requires (the file ends
    inside it, or its closing quote is followed by more text, as when a stray quote takes
    the next lines into the cell), the error names the line where that cell's quote opened,
    its column (by name from `header`, else by number), and the line where the file ended
    or the text followed. Otherwise it names `row_line`.

    Returns:
        An `InputError` (path, line, field), for the caller to raise.
    """
    opened, column, ended = _unclosed_quote(path, row_line)
    if opened is None:
        return InputError(f"not valid CSV ({exc})", path=path, line=row_line,
                          fix="check the quoting on that line.")
    if ended is None:
        what = "the quote that opens this cell is never closed: the file ends inside the cell"
    elif ended == opened:
        what = "this cell's closing quote is followed by more text"
    else:
        what = (f"the quote that opens this cell is closed only on line {ended}, by a quote followed by "
                "more text, so the cell takes every line in between")
    field = header[column] if column < len(header) else f"column {column + 1}"
    return InputError(what, path=path, line=opened, field=field,
                      fix='close the quote, or double a quote that is part of the text ("").')


def _unclosed_quote(path: Path, row_line: int) -> tuple[int | None, int, int | None]:
    """Where the faulty quoted cell of the row starting on `row_line` opened (line, 0-based
    column), and where it was wrongly closed (None: at the end of the file);
    ``(None, 0, None)`` when the row has no such cell. The states are those of the ``csv``
    module's reader (excel dialect)."""
    state, opened, column, seen = "start", None, 0, False
    with path.open(encoding="utf-8-sig", errors="replace", newline="") as handle:
        for number, line in enumerate(handle, start=1):
            if number < row_line:
                continue
            for char in line:
                if char in "\r\n" and not seen:
                    continue  # blank lines before the row, which the reader skips
                seen = True
                if state == "quoted":
                    state = "quote" if char == '"' else "quoted"
                elif state == "quote" and char == '"':  # a doubled quote inside the cell
                    state = "quoted"
                elif char in "\r\n":
                    return None, 0, None  # the row ended with every quote closed
                elif state == "quote" and char != ",":
                    return opened, column, number
                elif char == ",":
                    state, column = "start", column + 1
                elif state == "start" and char == '"':
                    state, opened = "quoted", number
                else:
                    state = "plain"
    return (opened, column, None) if state == "quoted" else (None, 0, None)


def read_jsonl_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (1-based line number, JSON object) for every non-blank line of a JSONL file.

    Shared by every JSONL loader (items, benchmarks, IFBench). A UTF-8 BOM is dropped.

    Raises:
        InputError: a line is not UTF-8, not valid JSON (including huge integers and
            absurd nesting), not a JSON object, or holds an unpaired surrogate escape;
            names the file and line.
    """
    for number, text in _utf8_lines(path):
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except (ValueError, RecursionError) as exc:  # bad syntax, huge integers, absurd nesting
            raise json_syntax_error(exc, path=path, line=number, text=text,
                                    fix="each line must be one complete JSON object.") from exc
        if not isinstance(row, dict):
            raise InputError(f"expected a JSON object, got {type(row).__name__}", path=path, line=number,
                             fix="each line must be one JSON object ({...}).")
        for key, value in row.items():  # JSON escapes of lone surrogates (\ud800) would fail on hashing or saving
            shown = key.encode("utf-8", "replace").decode("utf-8")
            check_encodable(key, path=path, line=number, field=shown)
            check_encodable(json.dumps(value, ensure_ascii=False), path=path, line=number, field=shown)
        yield number, row


def read_csv_rows(path: Path, required: Mapping[str, str]) -> tuple[list[str], Iterator[tuple[int, dict[str, Any]]]]:
    """The header and the data rows of a CSV file, each row with its first line number.

    The one CSV row reader of the package (items, prediction files): UTF-8 with or without
    a BOM, cells of any length, a quoted cell may span lines (a row is numbered by the line
    it starts on; the header is line 1, as in a spreadsheet), blank rows are skipped.

    Args:
        path: an existing CSV file with a header row.
        required: column name -> role ("input", "output", "id", a dimension...) that must
            be in the header (see `check_csv_header`).

    Returns:
        ``(header, rows)``; `rows` is a lazy iterator of ``(line, {column: text})``.

    Quoting is read strictly (``csv`` module, ``strict=True``): a quote that opens a cell
    must close it right before a separator or the end of a line. Otherwise an unclosed
    quote would silently take the following lines, rows and all, into one cell.

    Raises:
        InputError (located, raised while iterating for row errors): a bad header (line 1),
            a row with more or fewer cells than the header, invalid CSV quoting (an
            unclosed quote names the line where it opened, see `csv_quoting_error`), or
            text that is not UTF-8.
    """
    header = check_csv_header(path, required)
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # long documents are normal here

    def rows() -> Iterator[tuple[int, dict[str, Any]]]:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle, restval=_SHORT_ROW, strict=True)
            previous_end = 0
            try:
                _ = reader.fieldnames  # the header row, checked above
                previous_end = reader.line_num
                for row in reader:
                    number = previous_end + 1  # a quoted cell may span lines: report where the row starts
                    previous_end = reader.line_num
                    if None in row:
                        raise InputError("the row has more cells than the header", path=path, line=number,
                                         fix="quote cells that contain the separator.")
                    if any(v is _SHORT_ROW for v in row.values()):
                        raise InputError(f"the row has fewer cells than the header ({len(header)} columns)",
                                         path=path, line=number,
                                         fix="check for a missing separator or an unclosed quote.")
                    if not any((v or "").strip() for v in row.values()):
                        continue  # a blank line of separators only
                    yield number, row
            except csv.Error as exc:
                raise csv_quoting_error(exc, path=path, row_line=previous_end + 1, header=header) from exc
            except UnicodeDecodeError as exc:
                raise InputError(f"not UTF-8 text ({exc.reason})", path=path, line=reader.line_num + 1,
                                 fix="save the file as UTF-8.") from exc

    return header, rows()


def _utf8_lines(path: Path):
    """Yield (1-based line number, text) of a UTF-8 file; a leading BOM is dropped.

    Raises:
        InputError: a line is not valid UTF-8 (names the line).
    """
    with open_data_file(path) as handle:  # a .gz file is read through gzip
        for number, raw in enumerate(handle, start=1):
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", path=path, line=number,
                                 fix="save the file as UTF-8.") from exc


def existing_file(path: str | Path, kind: str = "file") -> Path:
    """`path` as a `Path`, once it names an existing file; `kind` (``items file``,
    ``verdicts file``) names it in the fix.

    Raises:
        InputError: nothing is there, or it is a directory (naming the path).
    """
    path = Path(path)
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "file not found"
        raise InputError(what, path=path, fix=f"check the path of the {kind}.")
    return path


def csv_text(columns: Sequence[str], rows: Iterable[Mapping[str, Any]], *,
             float_cell: Callable[[float], str] = repr) -> str:
    """The CSV text of `rows` under the header `columns`: the one CSV writer of the package
    (verdicts files, judge weights files), the counterpart of `read_csv_rows`.

    A cell is empty for a missing or None value, ``true`` / ``false`` for a bool, JSON for a
    list or an object, ``float_cell(value)`` for a float (default `repr`: every digit), and
    ``str(value)`` otherwise. Lines end in ``\n``; quoting is the `csv` module's.
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(row.get(name), float_cell) for name in columns])
    return out.getvalue()


def _cell(value: Any, float_cell: Callable[[float], str]) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return float_cell(value) if isinstance(value, float) else str(value)


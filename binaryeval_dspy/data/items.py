"""Generic JSONL / CSV loaders: any file of (input, output) pairs with a field mapping.

Each row becomes a `dspy.Example` with ``item_id``, ``input``, ``output``, ``line``
and every other field of the row, and ``.with_inputs("input", "output")``. The
whole file is validated before anything is evaluated, and every error names the
file, the line and the field.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import dspy

from binaryeval_dspy.data.json_files import json_syntax_error
from binaryeval_dspy.data.paths import open_data_file
from binaryeval_dspy.data.text_checks import EMPTY_OUTPUT_POLICIES, is_empty_output
from binaryeval_dspy.errors import InputError

SUPPORTED_SUFFIXES = (".jsonl", ".csv")
#: Names the loader sets itself; a row's own field of that name is kept as ``row_<name>``.
RESERVED_FIELDS = ("item_id", "line")
_SHORT_ROW = object()  # csv.DictReader's filler for cells missing from a short row


def _check_encodable(value: str, *, path: Path, line: int, field: str) -> None:
    """Refuse text that cannot be written back as UTF-8 (e.g. a lone surrogate)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"contains a character that is not valid Unicode text ({exc.reason} at position {exc.start})",
            path=path, line=line, field=field, fix="remove or replace that character in the file.",
        ) from exc


def _field_value(row: dict[str, Any], name: str, *, path: Path, line: int, role: str,
                 empty_output: str = "record") -> str:
    """The text of the input or output field of a row (a missing field is an error).

    An empty input is an error. An empty output (nothing but whitespace and invisible
    characters, `is_empty_output`) is kept as it is when `empty_output` is "record"
    (the item gets status ``empty_output``, no LM call) and is an error when "fail".
    """
    if name not in row:
        available = ", ".join(sorted(row)) or "none"
        raise InputError(
            f"the {role} field is missing (fields present: {available})",
            path=path, line=line, field=name,
            fix=f"pass --{role}-field with the name this file uses for the {role}.",
        )
    value = row[name]
    if value is None:
        value = ""
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else str(value)
    if role == "output" and is_empty_output(value):
        if empty_output == "fail":
            raise InputError(
                "the output is empty (nothing but whitespace or invisible characters) and --empty-output is "
                "'fail'", path=path, line=line, field=name,
                fix="fill in the output or remove the row, or use --empty-output record to store it as "
                    "status empty_output without asking the LM.",
            )
    elif not value.strip():
        raise InputError(
            f"the {role} is empty", path=path, line=line, field=name,
            fix=f"remove the row or fill in its {role}; an empty {role} cannot be judged.",
        )
    _check_encodable(value, path=path, line=line, field=name)
    return value


def _to_example(
    row: dict[str, Any], *, path: Path, line: int, input_field: str, output_field: str, id_field: str | None,
    empty_output: str = "record",
) -> dspy.Example:
    input_text = _field_value(row, input_field, path=path, line=line, role="input")
    output_text = _field_value(row, output_field, path=path, line=line, role="output", empty_output=empty_output)
    if id_field:
        if id_field not in row or row[id_field] in (None, ""):
            raise InputError("the id field is missing or empty", path=path, line=line, field=id_field,
                             fix="give every row an id, or leave --id-field out to number rows by line.")
        if not isinstance(row[id_field], (str, int)) or isinstance(row[id_field], bool):
            raise InputError(
                f"an id must be a string or an integer, got {type(row[id_field]).__name__}",
                path=path, line=line, field=id_field,
            )
        item_id = str(row[id_field])
        _check_encodable(item_id, path=path, line=line, field=id_field)
    else:
        item_id = f"line-{line}"
    extra = {k: v for k, v in row.items() if k not in {input_field, output_field, "input", "output"}}
    for name in RESERVED_FIELDS:
        if name in extra:
            extra[f"row_{name}"] = extra.pop(name)
    return dspy.Example(**extra, item_id=item_id, input=input_text, output=output_text, line=line).with_inputs(
        "input", "output"
    )


def _check_ids(examples: list[dspy.Example], path: Path, id_field: str | None) -> None:
    seen: dict[str, int] = {}
    for ex in examples:
        if ex.item_id in seen:
            raise InputError(
                f"id {ex.item_id!r} was already used on line {seen[ex.item_id]}",
                path=path, line=ex.line, field=id_field,
                fix="make the ids unique; results are matched to items by id when a run resumes.",
            )
        seen[ex.item_id] = ex.line


def _examples(rows: Iterable[tuple[int, dict[str, Any]]], path: Path, *, input_field: str, output_field: str,
              id_field: str | None, limit: int | None, empty_output: str) -> list[dspy.Example]:
    """Items from numbered rows (JSONL or CSV), at most `limit`, ids checked unique, none empty."""
    examples: list[dspy.Example] = []
    for number, row in rows:
        examples.append(_to_example(row, path=path, line=number, input_field=input_field,
                                    output_field=output_field, id_field=id_field, empty_output=empty_output))
        if limit is not None and len(examples) >= limit:
            break
    _check_ids(examples, path, id_field)
    _check_not_empty(examples, path)
    return examples


def load_jsonl(
    path: str | Path,
    *,
    input_field: str = "input",
    output_field: str = "output",
    id_field: str | None = None,
    limit: int | None = None,
    empty_output: str = "record",
) -> list[dspy.Example]:
    """Load (input, output) items from a JSON Lines file.

    Args:
        path: a UTF-8 file with one JSON object per line (blank lines are skipped).
        input_field: key holding the input x (source document, context, instruction).
        output_field: key holding the output y to judge.
        id_field: key holding a unique item id; by default items are ``line-<n>``.
        limit: keep only the first `limit` items (None keeps all).
        empty_output: "record" (default) keeps an output that is empty, null, or only
            whitespace and invisible characters (`is_empty_output`) as it is; the run
            stores it with status ``empty_output`` and asks no LM. "fail" refuses it.

    Returns:
        `dspy.Example`s with ``item_id``, ``input``, ``output``, ``line`` (1-based) and
        the row's other fields (a row's own ``item_id`` or ``line`` field is kept as
        ``row_item_id`` / ``row_line``); inputs are ``input`` and ``output``.

    Raises:
        InputError: missing file, text that is not UTF-8, a line that is not a JSON
            object, a missing input/output field, an empty input, an empty output with
            ``empty_output="fail"``, an id that is not a string or integer, a duplicate
            id, an unknown `empty_output`, or no items at all; names file, line and field.
    """
    path = _existing(path)
    _check_limit(limit)
    _check_empty_output_policy(empty_output)
    return _examples(read_jsonl_rows(path), path, input_field=input_field, output_field=output_field,
                     id_field=id_field, limit=limit, empty_output=empty_output)


def load_csv(
    path: str | Path,
    *,
    input_field: str = "input",
    output_field: str = "output",
    id_field: str | None = None,
    limit: int | None = None,
    empty_output: str = "record",
) -> list[dspy.Example]:
    """Load (input, output) items from a CSV file with a header row.

    Same arguments, returns and errors as `load_jsonl`; line numbers count the
    header as line 1, as a spreadsheet does. A wrong header row is reported as
    line 1 with the column (`check_csv_header`): no header, a column without a
    name, a name used twice, or no column for the input, output or id field.
    """
    path = _existing(path)
    _check_limit(limit)
    _check_empty_output_policy(empty_output)
    _, rows = read_csv_rows(path, {input_field: "input", output_field: "output",
                                   **({id_field: "id"} if id_field else {})})
    return _examples(rows, path, input_field=input_field, output_field=output_field, id_field=id_field,
                     limit=limit, empty_output=empty_output)


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
                         fix="put the column names (e.g. input,output) on the first line.")
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
    path = _existing(path)
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader, None)
        except csv.Error as exc:
            raise InputError(f"not valid CSV ({exc})", path=path, line=1, fix="check the quoting on line 1.") from exc
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason})", path=path, line=1,
                             fix="save the file as UTF-8.") from exc
    _check_csv_header(header, path, required)
    return list(header or [])


def load_items(path: str | Path, **options: Any) -> list[dspy.Example]:
    """Load items from a ``.jsonl`` or ``.csv`` file (chosen by suffix).

    Keyword options are those of `load_jsonl` / `load_csv`.

    Raises:
        InputError: the suffix is neither, or any error of the chosen loader.
    """
    suffix = Path(path).suffix.lower()
    if suffix == ".jsonl":
        return load_jsonl(path, **options)
    if suffix == ".csv":
        return load_csv(path, **options)
    raise InputError(
        f"unsupported file type {suffix!r}; expected one of {SUPPORTED_SUFFIXES}", path=path,
        fix="convert the items to JSON Lines or CSV.",
    )


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
            raise json_syntax_error(exc, path=path, line=number,
                                    fix="each line must be one complete JSON object.") from exc
        if not isinstance(row, dict):
            raise InputError(f"expected a JSON object, got {type(row).__name__}", path=path, line=number,
                             fix="each line must be one JSON object ({...}).")
        for key, value in row.items():  # JSON escapes of lone surrogates (\ud800) would fail on hashing or saving
            shown = key.encode("utf-8", "replace").decode("utf-8")
            _check_encodable(key, path=path, line=number, field=shown)
            _check_encodable(json.dumps(value, ensure_ascii=False), path=path, line=number, field=shown)
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

    Raises:
        InputError (located, raised while iterating for row errors): a bad header (line 1),
            a row with more or fewer cells than the header, invalid CSV quoting, or text
            that is not UTF-8.
    """
    header = check_csv_header(path, required)
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # long documents are normal here

    def rows() -> Iterator[tuple[int, dict[str, Any]]]:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle, restval=_SHORT_ROW)
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
                raise InputError(f"not valid CSV ({exc})", path=path, line=reader.line_num,
                                 fix="check the quoting on that line.") from exc
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


def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InputError(f"limit must be a positive integer or None, got {limit!r}")


def _check_empty_output_policy(empty_output: str) -> None:
    if empty_output not in EMPTY_OUTPUT_POLICIES:
        raise InputError(f"empty_output must be one of {EMPTY_OUTPUT_POLICIES}, got {empty_output!r}",
                         field="--empty-output")


def _check_not_empty(examples: list[dspy.Example], path: Path) -> None:
    if not examples:
        raise InputError("the file holds no items", path=path, fix="add at least one row with an input and an output.")


def _existing(path: str | Path) -> Path:
    path = Path(path)
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "file not found"
        raise InputError(what, path=path, fix="check the path of the items file.")
    return path

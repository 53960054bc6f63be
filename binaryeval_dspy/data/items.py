"""Generic JSONL / CSV loaders: any file of (input, output) pairs with a field mapping.

Each row becomes a `dspy.Example` with ``item_id``, ``input``, ``output``, ``line``
and every other field of the row, and ``.with_inputs("input", "output")``. The
whole file is validated before anything is evaluated, and every error names the
file, the line and the field.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import dspy

from binaryeval_dspy.data.rows import check_encodable, existing_file, read_csv_rows, read_jsonl_rows
from binaryeval_dspy.data.text_checks import EMPTY_OUTPUT_POLICIES, is_empty_output
from binaryeval_dspy.errors import InputError

logger = logging.getLogger(__name__)

SUPPORTED_SUFFIXES = (".jsonl", ".csv")
#: Names the loader sets itself; a row's own field of that name is kept as ``row_<name>``.
RESERVED_FIELDS = ("item_id", "line")




class _MissingField(InputError):
    """A row lacks a mapped field (`role` ``input``, ``output`` or ``id``, named `name`);
    `_examples` turns it into the error that says whether the file or the row is wrong."""

    def __init__(self, name: str, role: str, row: dict[str, Any], *, path: Path, line: int) -> None:
        self.role, self.name, self.present = role, name, sorted(row)
        super().__init__(f"the {role} field is missing (fields present: {', '.join(self.present) or 'none'})",
                         path=path, line=line, field=name,
                         fix=f"pass `{role}_field` with the name this file uses for the {role}.")


def _missing_field_error(first: _MissingField, rows: Iterable[tuple[int, dict[str, Any]]], *, seen: int,
                         path: Path) -> InputError:
    """The error for rows lacking a mapped field, after counting the rows of the whole file
    that lack it: when most do, the field name is wrong (pass `<role>_field`); when only some
    do, those rows are (named by line, a few of them), and the option is not suggested."""
    lacking, total = [first.line], seen
    try:
        for number, row in rows:
            total += 1
            if first.name not in row:
                lacking.append(number)
    except InputError:
        pass  # a row further on does not read: count what came before it (its error comes on the next run)
    shown = ", ".join(str(n) for n in lacking[:5]) + (", ..." if len(lacking) > 5 else "")
    role, name = first.role, first.name
    if 2 * len(lacking) > total:
        other = ", or leave it out to number rows by line" if role == "id" else ""
        return InputError(f"the {role} field {name!r} is missing on {len(lacking)} of {total} rows (lines {shown}; "
                          f"fields present on line {first.line}: {', '.join(first.present) or 'none'})",
                          path=path, line=first.line, field=name,
                          fix=f"pass `{role}_field` with the name this file uses for the {role}{other}.")
    return InputError(f"the {role} field {name!r} is missing on {len(lacking)} of {total} rows: line(s) {shown} "
                      f"(fields present on line {first.line}: {', '.join(first.present) or 'none'}); the other rows "
                      f"have it, so the field name is right and these rows are incomplete",
                      path=path, line=first.line, field=name,
                      fix=f"add the {role} ({name!r}) to those rows, or remove them.")


def _field_value(row: dict[str, Any], name: str, *, path: Path, line: int, role: str,
                 empty_output: str = "record", text_only: bool = True) -> str:
    """The text of the input or output field of a row (a missing field is an error).

    An empty input is an error. An empty output (nothing but whitespace and invisible
    characters, `is_empty_output`) is kept as it is when `empty_output` is "record"
    (the item gets status ``empty_output``, no LM call) and is an error when "fail".
    """
    if name not in row:
        raise _MissingField(name, role, row, path=path, line=line)
    value = row[name]
    if value is None:
        value = ""
    if not text_only and isinstance(value, (dict, list)):
        value = json.dumps(value, ensure_ascii=False)  # a dataset's structured field, as JSON text
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        kind = {bool: "true/false", list: "a list", dict: "an object"}.get(type(value), type(value).__name__)
        shown = json.dumps(value, ensure_ascii=False)
        raise InputError(
            f"the {role} must be text, got {kind} ({shown[:60]}{'...' if len(shown) > 60 else ''})",
            path=path, line=line, field=name,
            fix=f"write the {role} as a JSON string (in quotes), or pass `{role}_field` with the field that holds "
                "the text.",
        )
    if not isinstance(value, str):
        value = str(value)  # a number: judged as its text, said once per file (`_warn_numbers`)
    if role == "output" and is_empty_output(value):
        if empty_output == "fail":
            raise InputError(
                "the output is empty (nothing but whitespace or invisible characters) and `empty_output` is "
                "'fail'", path=path, line=line, field=name,
                fix="fill in the output or remove the row, or use `empty_output` record to store it as "
                    "status empty_output without asking the LM.",
            )
    elif not value.strip():
        raise InputError(
            f"the {role} is empty", path=path, line=line, field=name,
            fix=f"remove the row or fill in its {role}; an empty {role} cannot be judged.",
        )
    check_encodable(value, path=path, line=line, field=name)
    return value


def item_from_row(
    row: dict[str, Any], *, path: Path, line: int, input_field: str, output_field: str, id_field: str | None,
    empty_output: str = "record", text_only: bool = True,
) -> dspy.Example:
    """One item (`dspy.Example` with ``item_id``, ``input``, ``output``, ``line`` and the row's other
    fields; inputs ``input`` and ``output``) from a row read at `path`, `line`.

    The row's own ``input`` / ``output`` keys give way to the mapped fields; reserved names
    among the extra fields are kept as ``row_<name>``. Without `id_field` the id is
    ``line-<line>``. `empty_output`: ``record`` keeps an empty output (the item gets status
    ``empty_output``, no LM call); ``fail`` makes it an error. `text_only` False (a dataset
    from the hub, whose fields may be structured) judges a list or an object as its JSON text.

    Raises:
        InputError: a mapped field or the id is missing, empty or of the wrong type (an
            input or output that is true/false, a list or an object, not text; a number is
            taken as its text), or holds text that is not valid Unicode (naming file, line
            and field).
    """
    input_text = _field_value(row, input_field, path=path, line=line, role="input", text_only=text_only)
    output_text = _field_value(row, output_field, path=path, line=line, role="output", empty_output=empty_output,
                               text_only=text_only)
    if id_field:
        if id_field not in row:
            raise _MissingField(id_field, "id", row, path=path, line=line)
        if row[id_field] in (None, ""):
            raise InputError("the id field is empty", path=path, line=line, field=id_field,
                             fix="give every row an id, or leave `id_field` out to number rows by line.")
        if not isinstance(row[id_field], (str, int)) or isinstance(row[id_field], bool):
            raise InputError(
                f"an id must be a string or an integer, got {type(row[id_field]).__name__}",
                path=path, line=line, field=id_field,
            )
        item_id = str(row[id_field])
        check_encodable(item_id, path=path, line=line, field=id_field)
    else:
        item_id = f"line-{line}"
    extra = {k: v for k, v in row.items() if k not in {input_field, output_field, "input", "output"}}
    for name in RESERVED_FIELDS:
        if name in extra:
            extra[f"row_{name}"] = extra.pop(name)
    return dspy.Example(**extra, item_id=item_id, input=input_text, output=output_text, line=line).with_inputs(
        "input", "output"
    )


def check_unique_ids(examples: list[dspy.Example], path: Path, id_field: str | None) -> None:
    """Refuse a second item with an id already used (results are matched to items by id).

    Raises:
        InputError: naming the file, the line of the repeat, the first line and `id_field`.
    """
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
    numbers: dict[str, list[int]] = {}  # field -> lines where it holds a number, not text
    rows = iter(rows)
    for number, row in rows:
        for name in (input_field, output_field):
            value = row.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                numbers.setdefault(name, []).append(number)
        try:
            examples.append(item_from_row(row, path=path, line=number, input_field=input_field,
                                          output_field=output_field, id_field=id_field, empty_output=empty_output))
        except _MissingField as missing:  # the file's field name, or this row? count the others to tell
            raise _missing_field_error(missing, rows, seen=len(examples) + 1, path=path) from None
        if limit is not None and len(examples) >= limit:
            break
    check_unique_ids(examples, path, id_field)
    _check_not_empty(examples, path)
    _warn_numbers(numbers, path)
    return examples


def _warn_numbers(numbers: dict[str, list[int]], path: Path) -> None:
    """Say once per field that some rows hold a number where text is expected (judged as its text)."""
    for name, lines in numbers.items():
        shown = ", ".join(str(n) for n in lines[:5]) + (", ..." if len(lines) > 5 else "")
        logger.warning("%s:%d: field %r holds a number, not text, on %d row(s) (line(s) %s); each is judged as "
                       "its text (e.g. 42 as '42'). Write it as a JSON string to silence this.",
                       path, lines[0], name, len(lines), shown)


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
            object, a missing input/output field, an input or output that is not text
            (true/false, a list, an object; a number is judged as its text, with a warning
            naming file, line and field), an empty input, an empty output with
            ``empty_output="fail"``, an id that is not a string or integer, a duplicate
            id, an unknown `empty_output`, or no items at all; names file, line and field.
    """
    path = existing_file(path, "items file")
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
    path = existing_file(path, "items file")
    _check_limit(limit)
    _check_empty_output_policy(empty_output)
    _, rows = read_csv_rows(path, {input_field: "input", output_field: "output",
                                   **({id_field: "id"} if id_field else {})})
    return _examples(rows, path, input_field=input_field, output_field=output_field, id_field=id_field,
                     limit=limit, empty_output=empty_output)






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








def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InputError(f"limit must be a positive integer or None, got {limit!r}")


def _check_empty_output_policy(empty_output: str) -> None:
    if empty_output not in EMPTY_OUTPUT_POLICIES:
        raise InputError(f"empty_output must be one of {EMPTY_OUTPUT_POLICIES}, got {empty_output!r}",
                         field="`empty_output`")


def _check_not_empty(examples: list[dspy.Example], path: Path) -> None:
    if not examples:
        raise InputError("the file holds no items", path=path, fix="add at least one row with an input and an output.")

"""Generic JSONL / CSV loaders: any file of (input, output) pairs with a field mapping.

Each row becomes a `dspy.Example` with ``item_id``, ``input``, ``output``, ``line``
and every other field of the row, and ``.with_inputs("input", "output")``. The
whole file is validated before anything is evaluated, and every error names the
file, the line and the field.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import dspy

from binaryeval_dspy.errors import InputError

SUPPORTED_SUFFIXES = (".jsonl", ".csv")


def _field_value(row: dict[str, Any], name: str, *, path: Path, line: int, role: str) -> str:
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
    if not value.strip():
        raise InputError(
            f"the {role} is empty", path=path, line=line, field=name,
            fix=f"remove the row or fill in its {role}; an empty {role} cannot be judged.",
        )
    return value


def _to_example(
    row: dict[str, Any], *, path: Path, line: int, input_field: str, output_field: str, id_field: str | None
) -> dspy.Example:
    input_text = _field_value(row, input_field, path=path, line=line, role="input")
    output_text = _field_value(row, output_field, path=path, line=line, role="output")
    if id_field:
        if id_field not in row or row[id_field] in (None, ""):
            raise InputError("the id field is missing or empty", path=path, line=line, field=id_field,
                             fix="give every row an id, or leave --id-field out to number rows by line.")
        item_id = str(row[id_field])
    else:
        item_id = f"line-{line}"
    extra = {k: v for k, v in row.items() if k not in {input_field, output_field}}
    extra.pop("input", None)
    extra.pop("output", None)
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


def load_jsonl(
    path: str | Path,
    *,
    input_field: str = "input",
    output_field: str = "output",
    id_field: str | None = None,
    limit: int | None = None,
) -> list[dspy.Example]:
    """Load (input, output) items from a JSON Lines file.

    Args:
        path: a UTF-8 file with one JSON object per line (blank lines are skipped).
        input_field: key holding the input x (source document, context, instruction).
        output_field: key holding the output y to judge.
        id_field: key holding a unique item id; by default items are ``line-<n>``.
        limit: keep only the first `limit` items (None keeps all).

    Returns:
        `dspy.Example`s with ``item_id``, ``input``, ``output``, ``line`` (1-based) and
        the row's other fields; inputs are ``input`` and ``output``.

    Raises:
        InputError: missing file, a line that is not a JSON object, a missing or
            empty input/output field, or a duplicate id; names file, line and field.
    """
    path = _existing(path)
    examples: list[dspy.Example] = []
    with path.open(encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputError(
                    f"not valid JSON ({exc.msg} at column {exc.colno})", path=path, line=number,
                    fix="each line must be one complete JSON object.",
                ) from exc
            if not isinstance(row, dict):
                raise InputError(f"expected a JSON object, got {type(row).__name__}", path=path, line=number)
            examples.append(_to_example(row, path=path, line=number, input_field=input_field,
                                        output_field=output_field, id_field=id_field))
            if limit is not None and len(examples) >= limit:
                break
    _check_ids(examples, path, id_field)
    return examples


def load_csv(
    path: str | Path,
    *,
    input_field: str = "input",
    output_field: str = "output",
    id_field: str | None = None,
    limit: int | None = None,
) -> list[dspy.Example]:
    """Load (input, output) items from a CSV file with a header row.

    Same arguments, returns and errors as `load_jsonl`; line numbers count the
    header as line 1, as a spreadsheet does.
    """
    path = _existing(path)
    examples: list[dspy.Example] = []
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        if not reader.fieldnames:
            raise InputError("the CSV file has no header row", path=path, line=1)
        for row in reader:
            number = reader.line_num
            if None in row:
                raise InputError("the row has more cells than the header", path=path, line=number)
            examples.append(_to_example(row, path=path, line=number, input_field=input_field,
                                        output_field=output_field, id_field=id_field))
            if limit is not None and len(examples) >= limit:
                break
    _check_ids(examples, path, id_field)
    return examples


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


def _existing(path: str | Path) -> Path:
    path = Path(path)
    if not path.is_file():
        raise InputError("file not found", path=path, fix="check the path of the items file.")
    return path

"""The files a command is given or writes: QUESTION_SET_FILE / ITEMS_FILE (told apart when
swapped), output paths checked before any LM call, and default file names."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from binaryeval_dspy.errors import InputError


def slug(text: str) -> str:
    """A file-name-safe version of `text` (used for default run directories)."""
    return re.sub(r"[^A-Za-z0-9_.\-]+", "-", text).strip("-")[:60] or "run"


def check_writable_file(path: Path) -> None:
    """Fail early (before any LM call) if `path` cannot be written as a file.

    Raises:
        InputError: it is a directory, or its folder cannot be created or written.
    """
    if path.is_dir():
        raise InputError("is a directory; a file path is needed", path=path, fix="give a file name such as questions.json.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the folder ({exc.strerror})", path=path.parent) from exc
    if not os.access(path.parent, os.W_OK):
        raise InputError("the folder is not writable", path=path.parent)


_SNIFF_BYTES = 20_000_000  # a question set is small; a larger .json is not read whole to be sniffed


def file_kind(path: Path) -> str | None:
    """What a file given as an argument looks like: ``"question_set"`` (a JSON object
    with a ``questions`` list), ``"items"`` (.csv, or JSON Lines: a first line that is a
    JSON object without ``questions``), or None (unreadable, missing, or neither)."""
    import json

    path = Path(path)
    try:
        if not path.is_file():
            return None
        if path.suffix.lower() == ".csv":
            return "items"
        with path.open(encoding="utf-8-sig", errors="replace") as handle:
            first = next((line for line in handle if line.strip()), "")
        try:
            row = json.loads(first)
        except ValueError:
            row = None
        if isinstance(row, dict):  # a one-line file: a whole question set or one item
            return "question_set" if isinstance(row.get("questions"), list) else "items"
        if path.stat().st_size <= _SNIFF_BYTES:
            try:
                data = json.loads(path.read_text(encoding="utf-8-sig", errors="replace"))
            except (ValueError, RecursionError):
                data = None
            if isinstance(data, dict) and isinstance(data.get("questions"), list):
                return "question_set"
        return "items" if path.suffix.lower() == ".jsonl" else None
    except OSError:
        return None


def swapped_arguments_error(question_set_file: Path, items_file: Path,
                            command: str = "bineval evaluate") -> InputError | None:
    """An `InputError` naming the mix-up when QUESTION_SET_FILE looks like an items file
    (and ITEMS_FILE like a question set: the two are swapped), or ITEMS_FILE looks like a
    question set; None when neither does. Called when loading one of them failed, so a
    file that loads is never second-guessed."""
    given_set, given_items = file_kind(question_set_file), file_kind(items_file)
    order = f"the order is {command} QUESTION_SET_FILE ITEMS_FILE"
    if given_set == "items" and given_items == "question_set":
        return InputError(
            f"the two files look swapped: {question_set_file} (given as QUESTION_SET_FILE) holds items, and "
            f"{items_file} (given as ITEMS_FILE) is a question set",
            fix=f"swap them: {command} {items_file} {question_set_file} ... (the question set comes first).")
    if given_set == "items":
        return InputError(
            f"{question_set_file} is given as QUESTION_SET_FILE but holds items (one JSON object or CSV row per "
            "item), not a question set",
            fix=f"{order}; make a question set with `bineval questions`.")
    if given_items == "question_set":
        return InputError(
            f"{items_file} is given as ITEMS_FILE but is a question set (a JSON object with 'questions'), not "
            "items", fix=f"{order}; the items are a .jsonl or .csv file with one item per line or row.")
    return None


def load_question_set_and_items(question_set_file: Path, items_file: Path, **item_options: Any) -> tuple[Any, list]:
    """Load QUESTION_SET_FILE and ITEMS_FILE, naming swapped or misplaced arguments.

    Args:
        question_set_file: the question-set JSON given first.
        items_file: the items file given second.
        **item_options: passed to `binaryeval_dspy.data.items.load_items`.

    Returns:
        (the `QuestionSet`, the items).

    Raises:
        InputError: one of the files does not load; when it looks like the other kind
            of file (the arguments swapped), the message says so instead of the
            loader's own.
    """
    from binaryeval_dspy.data.items import load_items
    from binaryeval_dspy.schemas.question_set import QuestionSet

    try:
        question_set = QuestionSet.load(question_set_file)
    except InputError as exc:
        swapped = swapped_arguments_error(question_set_file, items_file)
        if swapped is not None:
            raise swapped from exc
        raise
    try:
        items = load_items(items_file, **item_options)
    except InputError as exc:
        swapped = swapped_arguments_error(question_set_file, items_file)
        if swapped is not None:
            raise swapped from exc
        raise
    if item_options.get("id_field") is None:
        id_field_hint(items_file, items)
    return question_set, items


#: Row fields that look like an item's own id (a row's ``item_id`` is kept as ``row_item_id``).
ID_LIKE_FIELDS = ("id", "row_item_id", "uid", "ID", "Id", "example_id", "doc_id")


def id_field_hint(items_file: Path, items: list) -> None:
    """Print one hint when the items carry an id-like field but ``--id-field`` was not given:
    they are numbered by line, so a reordered or edited file would not keep its answers."""
    from rich.markup import escape

    from binaryeval_dspy.cli.console import console

    first = items[0] if items else None
    name = next((f for f in ID_LIKE_FIELDS if first is not None and f in first), None)
    if name is None:
        return
    shown = "item_id" if name == "row_item_id" else name
    console.print(escape(f"Hint: the rows of {items_file} have an {shown!r} field, but without --id-field the items "
                         f"are numbered by line (line-1, line-2, ...): pass --id-field {shown} to match results to "
                         "items by their ids, so a reordered or edited file keeps its answers."), highlight=False)

"""A question set that does not validate, in the user's words: which question, which
field, which line of the JSON file, and what to do (`QuestionSetError`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import ValidationError

from binaryeval_dspy.errors import BinEvalError, QuestionSetError
from binaryeval_dspy.schemas.versioned import schema_version_fix, schema_version_message

_QID_IN_MSG = re.compile(r"question '([^']+)'")
_FIX = "edit the question-set JSON (the format is in docs/question-sets.md) or regenerate it with `bineval questions`."


def _plain_message(error: dict) -> str:
    """Pydantic's error in the project's words: what was expected, what was found."""
    kind = error.get("type", "")
    loc = error.get("loc", ())
    name = str(loc[-1]) if loc else "value"
    if kind == "missing":
        return f"the required field '{name}' is missing"
    if kind == "extra_forbidden":
        return f"unknown field '{name}' (a typo? unknown fields are refused so mistakes do not pass silently)"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"expected a JSON object, got {type(error.get('input')).__name__}"
    if kind in ("int_type", "string_type", "list_type", "bool_type", "literal_error", "too_short"):
        return f"{error.get('msg', 'invalid')} (got {error.get('input')!r:.60})"
    return str(error.get("msg", "invalid")).removeprefix("Value error, ")


def as_question_set_error(
    exc: ValidationError, data: object, path: str | Path | None, raw_text: str | None
) -> QuestionSetError:
    """Turn a pydantic error into one naming the question, its field and its line."""
    first = exc.errors()[0]
    loc = first.get("loc", ())
    msg = _plain_message(first)
    field: str | None = ".".join(str(p) for p in loc) or None
    question_id: str | None = None
    if len(loc) >= 2 and loc[0] == "questions" and isinstance(loc[1], int):
        try:
            question_id = data["questions"][loc[1]].get("id")  # type: ignore[index]
        except (KeyError, IndexError, TypeError, AttributeError):
            question_id = None
        if question_id:
            field = f"questions[{loc[1]}] (id '{question_id}')" + (
                "." + ".".join(str(p) for p in loc[2:]) if len(loc) > 2 else ""
            )
    match = _QID_IN_MSG.search(msg)
    occurrence = 1
    if match:
        question_id = match.group(1)
        occurrence = 2 if "more than once" in msg else 1
    line = _line_of_id(raw_text, question_id, occurrence=occurrence) if question_id else None
    more = f" ({len(exc.errors())} problems in all; the first is shown)" if len(exc.errors()) > 1 else ""
    version_fix = schema_version_fix(first)  # a file from another version: upgrade, not edit
    if version_fix:
        return QuestionSetError(schema_version_message(first) + more, path=path, field=field, fix=version_fix)
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, BinEvalError) and cause.fix:  # e.g. a check's own error: its fix, said once
        return QuestionSetError(cause.message.removesuffix(".") + more, path=path, line=line, field=field,
                                expected=cause.expected, received=cause.received, fix=cause.fix)
    return QuestionSetError(msg + more, path=path, line=line, field=field, fix=_FIX)


def _line_of_id(raw_text: str | None, question_id: str, *, occurrence: int = 1) -> int | None:
    """1-based line of the `occurrence`-th `"id": "<question_id>"` after the "questions" key.

    Lines are counted on newline characters only, as editors number JSON files.
    """
    if not raw_text:
        return None
    lines = raw_text.split("\n")
    start = next((i for i, line in enumerate(lines) if re.search(r'"questions"\s*:', line)), 0)
    pattern = re.compile(r'"id"\s*:\s*' + re.escape(json.dumps(question_id, ensure_ascii=False)))
    seen = 0
    for number in range(start, len(lines)):
        if pattern.search(lines[number]):
            seen += 1
            if seen == occurrence:
                return number + 1
    return None

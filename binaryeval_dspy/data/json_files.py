"""Reading JSON files with located errors: the one reader of user- and run-written JSON.

`read_json_file` reads one JSON document (a manifest, a run config, a comparison's
``config.json``), optionally validated by a pydantic model. Every failure is an
`InputError` naming the file, the line (from the JSON decoder, or the first bad byte of
non-UTF-8 text), the field (pydantic's ``loc`` path) and a fix. JSON Lines readers
(`binaryeval_dspy.data.items.read_jsonl_rows`, the run directory's results) loop over
lines themselves and format each line's error with `json_syntax_error` and
`validation_error`, so one message shape serves both.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, TypeVar, overload

from pydantic import BaseModel, ValidationError

from binaryeval_dspy.errors import InputError
from binaryeval_dspy.schemas.versioned import schema_version_fix

ModelT = TypeVar("ModelT", bound=BaseModel)


def json_syntax_error(exc: ValueError | RecursionError, *, path: str | Path | None, line: int | None = None,
                      fix: str, what: str | None = None, text: str | None = None) -> InputError:
    """The `InputError` for text that does not parse as JSON.

    Args:
        exc: the decoder's error: a `json.JSONDecodeError` (its line and column are used;
            `line`, when given, is the line of a JSON Lines file and wins), or another
            `ValueError` / `RecursionError` (huge integers, absurd nesting).
        path: the file.
        line: the 1-based line of a JSON Lines row (None for a whole-file document).
        fix: one sentence telling the user what to do.
        what: what the file should be (``"run manifest"``): the message then starts
            ``not a valid <what>``.
        text: the JSON text that failed (a JSON Lines row): the error then names the field
            of its object whose value holds the mistake (`field_at_error`), when there is one.

    Returns:
        The error to raise (``from exc``); its ``line`` is set whenever it is known, its
        column is the decoder's (1-based, in characters of that line), and its ``field``
        the top-level field whose value does not parse, when `text` shows one.
    """
    if isinstance(exc, json.JSONDecodeError):
        column = exc.colno
        if text is not None and line is not None:  # one JSON Lines row: its column is the character in that line
            column = min(exc.pos, len(text.rstrip("\r\n"))) + 1
        ended = text is not None and exc.pos >= len(text.rstrip())
        detail = f"not valid JSON ({exc.msg.removesuffix(' at')} at column {column}" + (
            ", the end of the line: the line ends before its JSON is closed; a missing }, ] or \"?)" if ended else ")")
        line = line if line is not None else exc.lineno
    else:
        detail = f"JSON that cannot be read ({type(exc).__name__}: {str(exc)[:120]})"
    message = f"not a valid {what} ({detail})" if what else detail
    return InputError(message, path=path, line=line, field=field_at_error(text) if text is not None else None,
                      fix=fix)


_BLANK = re.compile(r"[ \t\n\r]*")


def field_at_error(text: str) -> str | None:
    """The top-level field of the JSON object `text` whose value holds its syntax error.

    Walks the object field by field with the standard decoder (`json.decoder.scanstring`,
    `json.JSONDecoder.raw_decode`) and stops at the first value that does not decode.

    Args:
        text: one JSON object that does not parse (a JSON Lines row).

    Returns:
        The field's name, or None when the mistake is not inside a value (a missing comma
        or brace, a bad key, text that is not an object).
    """
    decoder = json.JSONDecoder()
    i = _BLANK.match(text, 0).end()  # type: ignore[union-attr]
    if text[i:i + 1] != "{":
        return None
    i = _BLANK.match(text, i + 1).end()  # type: ignore[union-attr]
    while text[i:i + 1] == '"':
        try:
            key, i = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
        except ValueError:
            return None
        i = _BLANK.match(text, i).end()  # type: ignore[union-attr]
        if text[i:i + 1] != ":":
            return None
        i = _BLANK.match(text, i + 1).end()  # type: ignore[union-attr]
        try:
            _value, i = decoder.raw_decode(text, i)
        except (ValueError, RecursionError):
            return key
        i = _BLANK.match(text, i).end()  # type: ignore[union-attr]
        if text[i:i + 1] != ",":
            return None
        i = _BLANK.match(text, i + 1).end()  # type: ignore[union-attr]
    return None


def validation_error(exc: ValidationError, *, path: str | Path | None, line: int | None = None,
                     what: str, fix: str) -> InputError:
    """The `InputError` for JSON that parsed but does not fit its pydantic model.

    Args:
        exc: pydantic's error; its first error is reported, its ``loc`` path becomes the
            field (``verdicts.0.verdict``).
        path / line: the file, and the 1-based line of a JSON Lines row (None otherwise).
        what: what the document should be (``"run manifest"``, ``"item result"``).
        fix: one sentence telling the user what to do; a file written by another
            version (a ``schema_version`` refusal) gets that refusal's remedy instead.

    Returns:
        The error to raise (``from exc``): ``not a valid <what> (<pydantic message>)``.
    """
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first.get("loc", ())) or None
    return InputError(f"not a valid {what} ({first['msg']})", path=path, line=line, field=field,
                      fix=schema_version_fix(first) or fix)


@overload
def read_json_file(path: str | Path, model: None = None, *, what: str = ..., fix: str = ...) -> Any: ...


@overload
def read_json_file(path: str | Path, model: type[ModelT], *, what: str = ..., fix: str = ...) -> ModelT: ...


def read_json_file(path: str | Path, model: type[BaseModel] | None = None, *, what: str = "JSON file",
                   fix: str = "restore the file, or write it again.") -> Any:
    """Read one JSON document from `path`, validated by `model` when given.

    UTF-8 with or without a byte-order mark. The model validates the file's text with
    `model_validate_json` (JSON semantics, e.g. ISO dates), after a plain parse that
    locates syntax errors.

    Args:
        path: the file.
        model: a pydantic model class; None returns the parsed JSON value (any type).
        what: what the file should be, for messages (``"run manifest"``).
        fix: one sentence telling the user what to do, put in every error.

    Returns:
        The model instance, or the parsed JSON value (dict, list, str, number, bool, None).

    Raises:
        InputError: the file is missing or unreadable; not UTF-8 (line of the first bad
            byte); not valid JSON (line and column); huge integers or absurd nesting; or
            not valid for `model` (field = pydantic's ``loc`` path of the first error).
            The message starts ``not a valid <what>`` except for a missing file.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{what} not found", path=path, fix=fix) from None
    except OSError as exc:
        raise InputError(f"cannot read the {what} ({exc.strerror or exc})", path=path, fix=fix) from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(f"not a valid {what} (not UTF-8 text: {exc.reason})", path=path, line=line,
                         fix=fix) from exc
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise json_syntax_error(exc, path=path, fix=fix, what=what) from exc
    if model is None:
        return data
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        raise validation_error(exc, path=path, what=what, fix=fix) from exc

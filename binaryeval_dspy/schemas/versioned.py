"""One check of ``schema_version`` for every model binaryeval-dspy saves to a file.

A saved model declares its field as::

    schema_version: SchemaVersion(ITEM_RESULT_SCHEMA_VERSION, "item result") = ITEM_RESULT_SCHEMA_VERSION

(`SchemaVersion` is ``Annotated[int, check_schema_version(...)]``; pydantic evaluates the call
also under ``from __future__ import annotations``)

and a file with another version is refused on load with a message saying what to do:

* newer: "this item result was written by a newer binaryeval-dspy (schema_version 2; this
  version reads 1); upgrade with pip install -U binaryeval-dspy";
* older: "this item result was written by an older binaryeval-dspy (schema_version 0; this
  version reads 1) and there is no migration; <older_fix>".

The refusal is a pydantic error of type ``schema_version_newer`` / ``schema_version_older``
whose message carries the remedy, so it survives any loader that quotes ``msg`` of the first
error. Loaders that render errors themselves can take the remedy apart with
`schema_version_fix`. The check runs before the field's own type (``int``, ``StrictInt``,
``Literal[1]``), so the JSON Schema of the model is unchanged and a value that is not an
integer still gets the type's own error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator
from pydantic_core import PydanticCustomError

#: the command that upgrades the package (the remedy for a file from a newer version)
UPGRADE = "pip install -U binaryeval-dspy"
#: the default remedy for a file from an older version (none exists that needs a migration yet)
OLDER_FIX = ("re-run the command that wrote it with this version, or read it with the binaryeval-dspy "
             "version that wrote it")
SCHEMA_VERSION_ERRORS = ("schema_version_newer", "schema_version_older")


def schema_version_problem(received: Any, current: int, what: str, *,
                           older_fix: str = OLDER_FIX) -> tuple[str, str, str] | None:
    """Why a file with `received` as its schema_version cannot be read, or None if it can.

    Args:
        received: the value of ``schema_version`` in the file.
        current: the version this code writes and reads.
        what: the file's kind, for the message (``"run manifest"``).
        older_fix: what to do with a file from an older version.

    Returns:
        None when `received` is `current` or not an integer (the field's type reports that),
        else (error type, message without the remedy, remedy).
    """
    if isinstance(received, bool) or not isinstance(received, int) or received == current:
        return None
    newer = received > current
    message = (f"this {what} was written by {'a newer' if newer else 'an older'} binaryeval-dspy "
               f"(schema_version {received}; this version reads {current})")
    if newer:
        return "schema_version_newer", message, f"upgrade with {UPGRADE}"
    return "schema_version_older", message + " and there is no migration", older_fix


def check_schema_version(current: int, what: str, *, older_fix: str = OLDER_FIX) -> BeforeValidator:
    """The validator of a saved model's ``schema_version`` field, for ``Annotated``.

    It refuses any integer other than `current` with the shared message (newer: upgrade;
    older: no migration, `older_fix`) and leaves other values to the field's own type.

    Args:
        current: the version the model writes and reads.
        what: the file's kind, for the message (``"run manifest"``).
        older_fix: what to do with a file from an older version.

    Example:
        >>> from typing import Annotated
        >>> from pydantic import BaseModel
        >>> class Saved(BaseModel):
        ...     schema_version: Annotated[int, check_schema_version(1, "saved thing")] = 1
        >>> Saved.model_validate({"schema_version": 2})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        pydantic_core._pydantic_core.ValidationError: 1 validation error for Saved
        schema_version
          this saved thing was written by a newer binaryeval-dspy (schema_version 2; this version reads 1); ...
    """

    def check(value: Any) -> Any:
        problem = schema_version_problem(value, current, what, older_fix=older_fix)
        if problem is None:
            return value
        kind, message, remedy = problem
        # the text is already complete (it quotes no "{field}" of the context); the context
        # carries its parts for loaders that word the error themselves
        fix = remedy if remedy.endswith(".") else remedy + "."
        raise PydanticCustomError(kind, f"{message}; {remedy}",
                                  {"expected": current, "received": value, "problem": message + ".",
                                   "fix": fix})

    return BeforeValidator(check)


def SchemaVersion(current: int, what: str, *, older_fix: str = OLDER_FIX,
                  base: Any = int) -> Any:
    """The type of a saved model's ``schema_version`` field: ``Annotated[base, check_schema_version(...)]``.

    Args:
        current: the version the model writes and reads.
        what: the file's kind, for the message (``"run manifest"``).
        older_fix: what to do with a file from an older version.
        base: the field's own type (``int``, ``StrictInt``, ``Literal[1]``).

    Example:
        >>> from pydantic import BaseModel
        >>> class Saved(BaseModel):
        ...     schema_version: SchemaVersion(1, "saved thing") = 1
        >>> Saved.model_validate({"schema_version": 1}).schema_version
        1
    """
    return Annotated[base, check_schema_version(current, what, older_fix=older_fix)]


def schema_version_fix(error: dict[str, Any]) -> str | None:
    """The remedy of one of ``ValidationError.errors()`` when it is a schema_version refusal, else None.

    A loader that words its own fix ("restore the file") uses this one instead for a file
    from another version, with `schema_version_message` as the message.
    """
    if error.get("type") in SCHEMA_VERSION_ERRORS:
        return str((error.get("ctx") or {}).get("fix") or "") or None
    return None


def schema_version_message(error: dict[str, Any]) -> str:
    """``error["msg"]`` without its remedy for a schema_version refusal (the remedy is
    `schema_version_fix`); the whole ``msg`` for any other error."""
    if error.get("type") in SCHEMA_VERSION_ERRORS:
        problem = (error.get("ctx") or {}).get("problem")
        if problem:
            return str(problem)
    return str(error.get("msg", ""))


def write_json_model(model: BaseModel, path: str | Path) -> Path:
    """Write a saved model as indented UTF-8 JSON to `path` (creating its folder); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(model.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return path

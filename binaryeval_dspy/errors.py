"""The project's exceptions: every error raised on purpose derives from `BinEvalError`.

Messages say where the problem is (file, line, field), what was expected, what was
received and how to fix it, so a user never has to read a traceback to act.
"""

from __future__ import annotations

from pathlib import Path


class BinEvalError(Exception):
    """Base class of every error binaryeval-dspy raises on purpose."""


class InputError(BinEvalError, ValueError):
    """Bad user input: a file, a line of it, or a field of that line.

    Args:
        message: what is wrong, expected versus received.
        path: the file concerned, if any.
        line: 1-based line number in that file, if any.
        field: the field (key or column) concerned, if any.
        fix: one sentence telling the user what to do.

    The string form reads ``<path>:<line>: field '<field>': <message> Fix: <fix>``
    with the parts that are unknown left out.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        self.message = message
        self.fix = fix
        where = ""
        if self.path:
            where = self.path + (f":{line}" if line is not None else "") + ": "
        elif line is not None:
            where = f"line {line}: "
        field_part = f"field '{field}': " if field else ""
        fix_part = f" Fix: {fix}" if fix else ""
        super().__init__(f"{where}{field_part}{message}{fix_part}")


class QuestionSetError(InputError):
    """A question set that does not validate (duplicate ids, unknown dimension, ...)."""


class LMConfigError(BinEvalError):
    """An `--lm` value that cannot be turned into a language model."""


class RunStateError(BinEvalError):
    """A run directory that cannot be resumed as asked (other question set, other LM)."""

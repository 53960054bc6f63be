"""The project's exceptions: every error raised on purpose derives from `BinEvalError`.

Messages say where the problem is (file, line, field), what was expected, what was
received and how to fix it, so a user never has to read a traceback to act.

Every class takes the same keyword arguments on top of its message:

* ``expected``: what a valid value looks like (a description, e.g. ``"an integer >= 1"``);
* ``received``: what was given (pass ``repr(value)`` for a raw value);
* ``fix``: one sentence telling the user what to do.

and renders them the same way::

    >>> str(ConfigError("bad max_iterations", expected="an integer >= 1", received="0",
    ...                 fix="pass max_iterations=3."))
    'bad max_iterations: expected an integer >= 1, received 0. Fix: pass max_iterations=3.'

The parts are also kept as attributes (``message``, ``expected``, ``received``, ``fix``)
for callers that format errors themselves.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any


def _render(message: str, expected: str | None, received: str | None, fix: str | None) -> str:
    """``<message>: expected <expected>, received <received>. Fix: <fix>``, unknown parts left out
    (a message without its own closing punctuation gets a full stop before ``Fix:``). A
    message that already ends in another error's ``Fix: ...`` keeps one ``Fix:``: that
    advice, then `fix`."""
    text = message
    if fix and " Fix: " in text:  # a message that quotes another error whole: one "Fix:", its advice first
        text, inner = text.split(" Fix: ", 1)
        fix = f"{inner.rstrip()} {fix[:1].upper()}{fix[1:]}" if inner.strip() else fix
    wanted = ", ".join(part for part in (f"expected {expected}" if expected is not None else "",
                                          f"received {received}" if received is not None else "") if part)
    if wanted:
        text = f"{text}: {wanted}." if text else f"{wanted}."
    if fix:
        if text and not text.rstrip().endswith((".", "!", "?", ":")):
            text = f"{text.rstrip()}."  # "... not found. Fix: ..." reads as two sentences
        text = f"{text} Fix: {fix}" if text else f"Fix: {fix}"
    return text


class BinEvalError(Exception):
    """Base class of every error binaryeval-dspy raises on purpose.

    Args:
        message: what is wrong.
        expected: what a valid value looks like, if it helps.
        received: what was given (``repr(value)`` for a raw value), if it helps.
        fix: one sentence telling the user what to do.
    """

    def __init__(self, message: str = "", *, expected: str | None = None, received: str | None = None,
                 fix: str | None = None) -> None:
        self.message = message
        self.expected = None if expected is None else str(expected)
        self.received = None if received is None else str(received)
        self.fix = fix
        super().__init__(self._where() + _render(message, self.expected, self.received, fix))

    def _where(self) -> str:
        """Where the problem is, as a prefix of the message ("" here; `InputError` names the file)."""
        return ""

    def _init_kwargs(self) -> dict[str, Any]:
        return {"expected": self.expected, "received": self.received, "fix": self.fix}

    def __reduce__(self) -> tuple[Any, ...]:
        # keyword-only arguments survive pickling (multiprocessing, copies of errors)
        return functools.partial(type(self), **self._init_kwargs()), (self.message,)


class ConfigError(BinEvalError, ValueError):
    """A bad argument given to a class or function of the library (not a file's content).

    Also a `ValueError`, so callers that caught the bare ``ValueError`` raised before
    keep working.
    """


class ArgumentTypeError(ConfigError, TypeError):
    """An argument of the wrong type (a `ConfigError` whose ``received`` names the type).

    Also a `TypeError`, so callers that caught the bare ``TypeError`` raised before
    keep working.
    """


class UnknownNameError(BinEvalError, KeyError):
    """A lookup by a name or id that is not declared (a question id, a verdict label).

    Also a `KeyError`, as the lookup methods raised before; reads like any other
    project error (not quoted as a bare ``KeyError`` would be).
    """

    __str__ = BaseException.__str__


class InputError(BinEvalError, ValueError):
    """Bad user input: a file, a line of it, or a field of that line.

    Args:
        message: what is wrong (may itself say expected versus received).
        path: the file concerned, if any.
        line: 1-based line number in that file, if any.
        field: the field (key or column) concerned, if any.
        expected / received / fix: as for `BinEvalError`.

    The string form reads ``<path>:<line>: field '<field>': <message>: expected <expected>,
    received <received>. Fix: <fix>`` with the parts that are unknown left out.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
        expected: str | None = None,
        received: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        super().__init__(message, expected=expected, received=received, fix=fix)

    def _where(self) -> str:
        where = ""
        if self.path:
            where = self.path + (f":{self.line}" if self.line is not None else "") + ": "
        elif self.line is not None:
            where = f"line {self.line}: "
        return where + (f"field '{self.field}': " if self.field else "")

    def _init_kwargs(self) -> dict[str, Any]:
        return {**super()._init_kwargs(), "path": self.path, "line": self.line, "field": self.field}


class QuestionSetError(InputError):
    """A question set that does not validate (duplicate ids, unknown dimension, ...)."""


class LMConfigError(BinEvalError):
    """An `--lm` value (or another LM option) that cannot be turned into a language model.

    Pass the remedy as ``fix=`` rather than writing "Fix:" into the message.
    """


class RunStateError(BinEvalError):
    """A run directory that cannot be resumed as asked (other question set, other LM)."""


class MissingExtraError(BinEvalError, ImportError):
    """An optional feature whose extra is not installed (raised by `binaryeval_dspy.extras.require`)."""


class LMCallFailed(BinEvalError):
    """An LM call a step needs got no answer after its retries (an ``error`` answer): the step
    cannot go on (e.g. a verdict pick). ``str(exc)`` is the call's error text as recorded
    (``"<ErrorType>: <message>"``), so the original error type stays visible."""

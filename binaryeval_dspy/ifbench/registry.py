"""The IFBench constraint registry: instruction id -> checker function and its arguments.

Each checker is a plain function ``check(response: str, **arguments) -> bool``
registered with `constraint("family:name")`. `bind_checker` validates one
prompt's ``kwargs`` for an instruction id (unknown id, missing or unexpected
argument, wrong type) before any response is checked, and returns a
one-argument callable.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from binaryeval_dspy.errors import ConfigError, InputError

Checker = Callable[[str], bool]


@dataclass(frozen=True)
class Constraint:
    """One IFBench constraint type.

    Attributes:
        instruction_id: IFBench's id, e.g. ``"count:numbers"``.
        check: ``check(response, **arguments) -> bool``.
        arguments: names and types (``int`` or ``str``) of the keyword arguments.
        summary: one-line description (the checker's docstring).
        positive: integer arguments that must be at least 1 (1-based positions,
            cycle lengths); other integers must be at least 0.
    """

    instruction_id: str
    check: Callable[..., bool]
    arguments: Mapping[str, type]
    summary: str
    positive: frozenset[str] = frozenset()


CONSTRAINTS: dict[str, Constraint] = {}


def constraint(
    instruction_id: str, *, positive: tuple[str, ...] = ()
) -> Callable[[Callable[..., bool]], Callable[..., bool]]:
    """Register the decorated function as the checker of `instruction_id`.

    The function's keyword-only parameters, annotated ``int`` or ``str``, are the
    constraint's arguments (the non-null ``kwargs`` of an IFBench prompt); those
    named in `positive` must be at least 1, other integers at least 0.
    """

    def register(check: Callable[..., bool]) -> Callable[..., bool]:
        if instruction_id in CONSTRAINTS:
            raise ConfigError(f"constraint {instruction_id!r} is registered twice",
                              fix="give the second checker another instruction id, or remove one of them.")
        signature = inspect.signature(check, eval_str=True)
        arguments = {
            name: parameter.annotation
            for name, parameter in signature.parameters.items()
            if parameter.kind is inspect.Parameter.KEYWORD_ONLY
        }
        summary = (inspect.getdoc(check) or "").split("\n", 1)[0]
        CONSTRAINTS[instruction_id] = Constraint(instruction_id, check, arguments, summary, frozenset(positive))
        return check

    return register


def _coerce(value: Any, expected: type, *, spec: Constraint, name: str, where: dict[str, Any]) -> Any:
    instruction_id = spec.instruction_id
    if expected is int:
        number = None
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, float) and value.is_integer():
            number = int(value)
        minimum = 1 if name in spec.positive else 0
        if number is None or number < minimum:
            raise InputError(
                f"argument {name!r} of {instruction_id} must be a whole number >= {minimum}, got {value!r}",
                field="kwargs", **where,
            )
        return number
    if not isinstance(value, str):
        raise InputError(
            f"argument {name!r} of {instruction_id} must be a string, got {type(value).__name__}",
            field="kwargs", **where,
        )
    return value


def bind_checker(
    instruction_id: str,
    kwargs: Mapping[str, Any] | None,
    *,
    path: str | None = None,
    line: int | None = None,
) -> Checker:
    """Validate one instruction's arguments and return ``check(response) -> bool``.

    Args:
        instruction_id: an IFBench id such as ``"count:numbers"``.
        kwargs: the arguments; ``None`` values are dropped first, as IFBench does.
        path: file the arguments came from, for error messages.
        line: 1-based line in that file, for error messages.

    Returns:
        A callable taking the response text and returning True when it follows
        the instruction.

    Raises:
        InputError: unknown instruction id, a missing or unexpected argument, or
            an argument of the wrong type.
    """
    where = {"path": path, "line": line}
    if instruction_id not in CONSTRAINTS:
        raise InputError(
            f"unknown IFBench instruction id {instruction_id!r} ({len(CONSTRAINTS)} are known)",
            field="instruction_id_list", **where,
            fix="use one of binaryeval_dspy.ifbench.INSTRUCTION_IDS.",
        )
    spec = CONSTRAINTS[instruction_id]
    given = {name: value for name, value in (kwargs or {}).items() if value is not None}
    unexpected = sorted(set(given) - set(spec.arguments))
    if unexpected:
        raise InputError(
            f"{instruction_id} takes {sorted(spec.arguments) or 'no arguments'}, "
            f"got unexpected {unexpected}",
            field="kwargs", **where, fix="remove the extra arguments or set them to null.",
        )
    missing = sorted(set(spec.arguments) - set(given))
    if missing:
        raise InputError(
            f"{instruction_id} needs the arguments {missing}", field="kwargs", **where,
            fix="give every argument of the instruction a value.",
        )
    bound = {
        name: _coerce(given[name], expected, spec=spec, name=name, where=where)
        for name, expected in spec.arguments.items()
    }
    return functools.partial(spec.check, **bound)

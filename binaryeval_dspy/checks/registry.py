"""The check registry: named, deterministic checks that answer a binary question in code.

A check is a plain function ``func(text: str, **params)`` returning a `CheckResult`
(or ``bool``, or ``(bool, evidence)``). It is registered under a name with
`register_check`; a question-set file can then name it. A question-set file never
imports code by itself: only checks already registered (the built-ins, checks
registered from Python, or a ``--checks-module`` the user names on the command line)
can be used, so loading a shared question-set file cannot run anything new.

Parameters are validated when the question set is loaded, before any LM work: with
a pydantic model when the check declares one, else against the function signature.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from binaryeval_dspy.errors import ArgumentTypeError, BinEvalError, ConfigError

CheckFunction = Callable[..., Any]

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]*$")


class CheckResult(BaseModel):
    """What a check found about one text.

    Attributes:
        passed: True ("yes", the text satisfies the question), False ("no"), or None
            when the check cannot decide (e.g. too little text to detect a
            language); None is recorded as an unparsed verdict, never as "no".
        evidence: one line a human can verify, e.g. ``"212 words; bounds [20, 400]"``.
        data: machine-readable details (counts, missing paths, ...), JSON-ready.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    passed: bool | None
    evidence: str
    data: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class CheckDefinition:
    """A registered check.

    Attributes:
        name: the name a question set uses (``check.name``).
        func: ``func(text, **params)`` -> `CheckResult` | bool | (bool, str).
        params_model: pydantic model validating the parameters (unknown names
            forbidden), or None to validate against ``func``'s signature.
        description: one line shown in listings and errors.
        builtin: True for the checks shipped with binaryeval-dspy.
    """

    name: str
    func: CheckFunction
    params_model: type[BaseModel] | None
    description: str
    builtin: bool = False

    def accepted_params(self) -> list[str]:
        """Names of the parameters this check accepts."""
        if self.params_model is not None:
            return list(self.params_model.model_fields)
        rest = list(inspect.signature(self.func).parameters.values())[1:]
        variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        return [p.name for p in rest if p.kind not in variadic]

    def validate_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """The keyword arguments `func` will get, validated.

        Raises:
            ConfigError: an unknown, missing or ill-typed parameter; the message names
                the check, the parameter and the accepted ones (a `ValueError`, which
                pydantic turns into a located validation error).
        """
        if not isinstance(params, dict):
            raise ConfigError(  # a ValueError: pydantic turns it into a located validation error
                f"check '{self.name}': bad 'params'", expected="an object of parameter names to values",
                received=type(params).__name__, fix="write 'params' as a JSON object, e.g. {\"min\": 1}.")
        if self.params_model is not None:
            try:
                model = self.params_model.model_validate(params)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first.get("loc", ())) or "params"
                msg = first.get("msg", "invalid").removeprefix("Value error, ")
                raise ConfigError(
                    f"check '{self.name}': parameter '{where}': {msg.rstrip('.')}.",
                    fix=f"correct it (accepted parameters: {', '.join(self.accepted_params()) or 'none'}).",
                ) from None
            return {name: getattr(model, name) for name in self.params_model.model_fields}
        try:
            inspect.signature(self.func).bind("", **params)
        except TypeError as exc:
            raise ConfigError(
                f"check '{self.name}': {exc}",
                expected=f"its accepted parameters ({', '.join(self.accepted_params()) or 'none'})",
                received=", ".join(sorted(params)) or "none",
                fix="rename, add or remove parameters in the check's 'params'.",
            ) from None
        return dict(params)

    def run(self, text: str, params: dict[str, Any]) -> CheckResult:
        """Validate `params`, run the check on `text` and normalize what it returns.

        Raises:
            ConfigError: bad parameters. ArgumentTypeError: the function returned something
                other than a CheckResult, a bool or a (bool, str) pair. Whatever the
                function itself raises propagates (the caller records it as unparsed).
        """
        result = self.func(text, **self.validate_params(params))
        return as_check_result(result, self.name)


def as_check_result(value: Any, name: str = "check") -> CheckResult:
    """Normalize a check function's return value to a `CheckResult`.

    Raises:
        ArgumentTypeError: `value` is not a CheckResult, bool, or (bool | None, str) pair
            (also a `TypeError`).
    """
    if isinstance(value, CheckResult):
        return value
    if isinstance(value, bool):
        return CheckResult(passed=value, evidence=f"{name} returned {value}")
    if isinstance(value, tuple) and len(value) == 2 and (value[0] is None or isinstance(value[0], bool)):
        return CheckResult(passed=value[0], evidence=str(value[1]))
    raise ArgumentTypeError(
        f"check '{name}' returned a value of the wrong type",
        expected="a CheckResult, a bool, or a (bool, evidence) pair", received=type(value).__name__,
        fix=f"make the function registered as '{name}' return one of those.",
    )


_REGISTRY: dict[str, CheckDefinition] = {}


def register_check(
    name: str,
    *,
    params: type[BaseModel] | None = None,
    description: str | None = None,
    _builtin: bool = False,
) -> Callable[[CheckFunction], CheckFunction]:
    """Decorator registering ``func(text, **params)`` as the check `name`.

    Args:
        name: letters, digits, ``_``, ``-`` and ``.``, starting with a letter. A
            built-in name cannot be taken; registering the same function again
            (same module and qualified name, e.g. a module imported twice) replaces it.
        params: optional pydantic model for the parameters (set
            ``extra="forbid"`` so typos fail); without it the function signature
            is used to check parameter names.
        description: one line describing the check (default: the docstring's first line).

    Returns:
        The decorator; it returns the function unchanged.

    Raises:
        BinEvalError: a bad name, a built-in name, or a name already taken by another function.

    Example:
        >>> @register_check("mentions_license")
        ... def mentions_license(text: str, *, name: str = "Apache-2.0"):
        ...     return name in text, f"looked for {name!r}"
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise BinEvalError(
            f"check name {name!r} is not allowed: use letters, digits, '_', '-' or '.', starting with a letter"
        )

    def decorator(func: CheckFunction) -> CheckFunction:
        if not callable(func):
            raise BinEvalError(f"check '{name}': {func!r} is not callable")
        existing = _REGISTRY.get(name)
        if existing is not None:
            if existing.builtin and not _builtin:
                raise BinEvalError(f"check name '{name}' is a built-in check; choose another name")
            same = (getattr(existing.func, "__module__", None), getattr(existing.func, "__qualname__", None)) == (
                getattr(func, "__module__", None), getattr(func, "__qualname__", None))
            if not same:
                raise BinEvalError(
                    f"check name '{name}' is already registered by "
                    f"{existing.func.__module__}.{existing.func.__qualname__}; choose another name"
                )
        doc = (inspect.getdoc(func) or "").strip().splitlines()
        _REGISTRY[name] = CheckDefinition(
            name=name, func=func, params_model=params,
            description=description or (doc[0] if doc else ""), builtin=_builtin,
        )
        return func

    return decorator


def unregister_check(name: str) -> None:
    """Remove a user check (no-op if absent). Built-in checks cannot be removed.

    Raises:
        BinEvalError: `name` is a built-in check.
    """
    existing = _REGISTRY.get(name)
    if existing is not None and existing.builtin:
        raise BinEvalError(f"check '{name}' is built in and cannot be unregistered")
    _REGISTRY.pop(name, None)


def get_check(name: str) -> CheckDefinition:
    """The registered check `name`.

    Raises:
        ConfigError: no check has that name (a `ValueError`); the message lists the
            known ones and how to register a new one.
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise ConfigError(
            f"unknown check '{name}'", expected=f"one of the known checks ({known})", received=repr(name),
            fix="register your own with binaryeval_dspy.checks.register_check, or pass "
                "`checks_module` FILE.py (the CLI loads it).",
        ) from None


def available_checks() -> dict[str, CheckDefinition]:
    """Every registered check, by name (a copy)."""
    return dict(sorted(_REGISTRY.items()))

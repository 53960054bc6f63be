"""Built-in checks: a regular expression is present in, or absent from, the text."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from binaryeval_dspy.checks.registry import CheckResult, register_check

RegexFlag = Literal["IGNORECASE", "MULTILINE", "DOTALL"]


def compiled_pattern(value: str) -> str:
    """`value` when it compiles as a Python regular expression; the field validator of a
    ``pattern`` parameter (a bad one fails at load time, before any LM work)."""
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression ({exc})") from None
    return value


class RegexParams(BaseModel):
    """Parameters of `regex_present` / `regex_absent`.

    Attributes:
        pattern: a Python regular expression (compiled at load time, so a bad one
            fails before any LM work).
        flags: any of IGNORECASE, MULTILINE, DOTALL.
        min_count: `regex_present` only: matches needed for "yes" (>= 1).
    """

    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(min_length=1)
    flags: list[RegexFlag] = Field(default_factory=list)

    _compiles = field_validator("pattern")(compiled_pattern)


class RegexPresentParams(RegexParams):
    """Settings of ``regex_present``: the pattern must match at least `min_count` (>= 1) times."""

    min_count: int = Field(default=1, ge=1)


def _compile(pattern: str, flags: list[str]) -> re.Pattern[str]:
    value = 0
    for name in flags:
        value |= getattr(re, name)
    return re.compile(pattern, value)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


@register_check("regex_present", params=RegexPresentParams, _builtin=True)
def regex_present(text: str, *, pattern: str, flags: list[str], min_count: int) -> CheckResult:
    """Yes when `pattern` matches the text at least `min_count` times."""
    matches = list(_compile(pattern, flags).finditer(text))
    first = f"; first at line {_line_of(text, matches[0].start())}: {matches[0].group(0)[:60]!r}" if matches else ""
    return CheckResult(
        passed=len(matches) >= min_count,
        evidence=f"{len(matches)} match(es) of /{pattern}/, {min_count} needed{first}",
        data={"matches": len(matches)},
    )


@register_check("regex_absent", params=RegexParams, _builtin=True)
def regex_absent(text: str, *, pattern: str, flags: list[str]) -> CheckResult:
    """Yes when `pattern` does not match anywhere in the text."""
    matches = list(_compile(pattern, flags).finditer(text))
    if not matches:
        return CheckResult(passed=True, evidence=f"no match of /{pattern}/", data={"matches": 0})
    shown = ", ".join(f"line {_line_of(text, m.start())}: {m.group(0)[:40]!r}" for m in matches[:3])
    return CheckResult(passed=False, evidence=f"{len(matches)} match(es) of /{pattern}/ ({shown})",
                       data={"matches": len(matches)})

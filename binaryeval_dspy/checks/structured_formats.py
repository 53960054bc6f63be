"""Built-in checks: the text is valid JSON, or valid YAML (parsed with PyYAML's safe loader)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from binaryeval_dspy.checks.registry import CheckResult, register_check

_FENCE = re.compile(r"^\s*```[\w+-]*[ \t]*\n(.*?)\n?```\s*$", re.DOTALL)


def unfence(text: str) -> str:
    """The body of a text wrapped in one Markdown code fence (```json ... ```), else the text."""
    match = _FENCE.match(text)
    return match.group(1) if match else text


class JsonParams(BaseModel):
    """Parameters of `valid_json`.

    Attributes:
        require: "any" JSON value, or specifically an "object" or an "array".
        strip_code_fence: accept a text wrapped in one Markdown code fence.
    """

    model_config = ConfigDict(extra="forbid")

    require: Literal["any", "object", "array"] = "any"
    strip_code_fence: bool = False


class YamlParams(BaseModel):
    """Parameters of `valid_yaml`.

    Attributes:
        require: "any" YAML document, or a "mapping" or a "sequence" at the top.
            (Almost any plain text is a valid YAML string, so "mapping" is usually
            what a format check wants.)
        strip_code_fence: accept a text wrapped in one Markdown code fence.
    """

    model_config = ConfigDict(extra="forbid")

    require: Literal["any", "mapping", "sequence"] = "any"
    strip_code_fence: bool = False


_JSON_KIND = {dict: "object", list: "array"}


def _parsed(text: str, *, strip_code_fence: bool, require: str, language: str,
            load: Callable[[str], Any], kind_of: Callable[[Any], str]) -> CheckResult:
    """Yes when the text parses as `language` (`load`: the value, or a CheckResult for a text
    that does not parse) and the value's kind is the required one."""
    value = load(unfence(text) if strip_code_fence else text)
    if isinstance(value, CheckResult):
        return value
    kind = kind_of(value)
    ok = require == "any" or kind == require
    return CheckResult(passed=ok, evidence=f"parses as {language} ({kind})" + ("" if ok else f"; {require} required"),
                       data={"kind": kind})


def _load_json(body: str) -> Any:
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        return CheckResult(passed=False, evidence=f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                           data={"line": exc.lineno, "column": exc.colno})


@register_check("valid_json", params=JsonParams, _builtin=True)
def valid_json(text: str, *, require: str, strip_code_fence: bool) -> CheckResult:
    """Yes when the text parses as JSON (of the required kind)."""
    return _parsed(text, strip_code_fence=strip_code_fence, require=require, language="JSON", load=_load_json,
                   kind_of=lambda value: _JSON_KIND.get(type(value), type(value).__name__))


_YAML_KIND = {dict: "mapping", list: "sequence"}


def _load_yaml(body: str) -> Any:
    import yaml  # PyYAML: a dependency of dspy and datasets; imported when the check runs

    try:
        return yaml.safe_load(body)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return CheckResult(passed=False, evidence=f"not YAML: {problem}{where}")


@register_check("valid_yaml", params=YamlParams, _builtin=True)
def valid_yaml(text: str, *, require: str, strip_code_fence: bool) -> CheckResult:
    """Yes when the text parses as one YAML document (of the required kind)."""
    return _parsed(text, strip_code_fence=strip_code_fence, require=require, language="YAML", load=_load_yaml,
                   kind_of=lambda value: _YAML_KIND.get(type(value), "scalar" if value is not None else "empty"))

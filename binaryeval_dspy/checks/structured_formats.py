"""Built-in checks: the text is valid JSON, or valid YAML (parsed with PyYAML's safe loader)."""

from __future__ import annotations

import json
import re
from typing import Literal

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


@register_check("valid_json", params=JsonParams, _builtin=True)
def valid_json(text: str, *, require: str, strip_code_fence: bool) -> CheckResult:
    """Yes when the text parses as JSON (of the required kind)."""
    body = unfence(text) if strip_code_fence else text
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        return CheckResult(passed=False, evidence=f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                           data={"line": exc.lineno, "column": exc.colno})
    kind = _JSON_KIND.get(type(value), type(value).__name__)
    ok = require == "any" or kind == require
    return CheckResult(passed=ok, evidence=f"parses as JSON ({kind})" + ("" if ok else f"; {require} required"),
                       data={"kind": kind})


_YAML_KIND = {dict: "mapping", list: "sequence"}


@register_check("valid_yaml", params=YamlParams, _builtin=True)
def valid_yaml(text: str, *, require: str, strip_code_fence: bool) -> CheckResult:
    """Yes when the text parses as one YAML document (of the required kind)."""
    import yaml  # PyYAML: a dependency of dspy and datasets; imported when the check runs

    body = unfence(text) if strip_code_fence else text
    try:
        value = yaml.safe_load(body)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return CheckResult(passed=False, evidence=f"not YAML: {problem}{where}")
    kind = _YAML_KIND.get(type(value), "scalar" if value is not None else "empty")
    ok = require == "any" or kind == require
    return CheckResult(passed=ok, evidence=f"parses as YAML ({kind})" + ("" if ok else f"; {require} required"),
                       data={"kind": kind})

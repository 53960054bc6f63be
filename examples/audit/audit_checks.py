"""User checks for the documentation audit, registered by name when this file is imported.

Load them with ``--checks-module examples/audit/audit_checks.py``; ``questions.json``
then names ``json_blocks_parse`` like any built-in check.
"""

from __future__ import annotations

import re

from binaryeval_dspy.checks import CheckResult, get_check, register_check

_JSON_BLOCK = re.compile(r"```json[ \t]*\n(.*?)```", re.DOTALL)


@register_check("json_blocks_parse")
def json_blocks_parse(text: str, *, min_blocks: int = 0) -> CheckResult:
    """Yes when every ```json code block of a Markdown text parses (uses the built-in valid_json)."""
    blocks = _JSON_BLOCK.findall(text)
    valid_json = get_check("valid_json")
    failures = []
    for number, block in enumerate(blocks, start=1):
        result = valid_json.run(block, {})
        if not result.passed:
            failures.append(f"block {number}: {result.evidence}")
    if len(blocks) < min_blocks:
        return CheckResult(passed=False, evidence=f"{len(blocks)} JSON block(s), {min_blocks} needed",
                           data={"blocks": len(blocks)})
    if failures:
        return CheckResult(passed=False, evidence=f"{len(failures)} of {len(blocks)} JSON block(s) do not parse: "
                           + "; ".join(failures), data={"blocks": len(blocks), "failing": len(failures)})
    if not blocks:
        return CheckResult(passed=True, evidence="no JSON blocks", data={"blocks": 0})
    return CheckResult(passed=True, evidence=f"all {len(blocks)} JSON block(s) parse", data={"blocks": len(blocks)})

"""Scripted answers for the prompt-update signatures (note-taker, dedup, rewrite, judge, generator).

`route(...)` builds one script that recognizes which signature is asking by its input
field markers and answers with the given function for that step. Plumbing only: never a
model's judgment.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.fakes import field_value

Step = Callable[[str, str], Any]


def step_of(user: str) -> str:
    """Which signature a rendered user message belongs to."""
    if "[[ ## new_lesson ## ]]" in user:
        return "dedup"
    if "[[ ## previous_attempt ## ]]" in user:
        return "rewrite"
    if "[[ ## evidence ## ]]" in user:
        return "notes"
    if "[[ ## violation_example ## ]]" in user:
        return "judge"
    if "[[ ## requirement ## ]]" in user:
        return "decompose"
    if "[[ ## requirements ## ]]" in user:
        return "dimensions"
    if "[[ ## task_prompt ## ]]" in user:
        return "requirements"
    return "other"


def route(**steps: Step) -> Callable[[str, str], Any]:
    """A script answering each step with ``steps[name](system, user)``.

    Unknown steps raise, so a test notices an unexpected LM call.
    """

    def script(system: str, user: str) -> Any:
        name = step_of(user)
        if name not in steps:
            raise AssertionError(f"unexpected LM call for step {name!r}: {user[:200]!r}")
        return steps[name](system, user)

    return script


def evidence_of(user: str) -> list[dict[str, Any]]:
    """The note-taker's evidence list, parsed."""
    return json.loads(field_value(user, "evidence"))


def never_duplicate(system: str, user: str) -> dict[str, Any]:
    return {"is_duplicate": False, "duplicate_number": 0, "merged_lesson": field_value(user, "new_lesson")}


def append_rewrite(anchor: str) -> Step:
    """A rewrite that keeps `anchor` (an exact substring of the prompt) and appends the lesson after it."""

    def rewrite(system: str, user: str) -> dict[str, str]:
        return {"substring": anchor, "replacement": f"{anchor} {field_value(user, 'lesson')}"}

    return rewrite

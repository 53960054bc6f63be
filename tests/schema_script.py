"""A scripted LM that answers any DSPy signature by its output field names (for optimizer runs).

DSPy's own optimizers (MIPROv2, COPRO, GEPA) call signatures of their own; this script
reads the output fields that JSONAdapter lists in the system message and fills each one
with a fixed, type-appropriate value. Plumbing only: never a model's judgment.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.fakes import field_value

LESSON = "Answer no when the output calls itself bad."


def output_fields(system: str) -> list[str] | None:
    """The output field names JSONAdapter asks for, or None for a raw (adapter-less) call."""
    parts = system.split("Outputs will be a JSON object with the following fields.")
    if len(parts) < 2:
        return None
    return re.findall(r'^\s*"(\w+)":', parts[1].split("In adhering")[0], re.MULTILINE)


def first_sentence(text: str) -> str:
    match = re.match(r"\s*(.+?[.!?])(\s|$)", text, re.DOTALL)
    return match.group(1) if match else text.strip()


def schema_script(verdict: Callable[[str, str], str] | None = None) -> Callable[[str, str], Any]:
    """A script for every signature the comparison meets; `verdict(system, user)` answers the judge."""

    def judge(system: str, user: str) -> str:
        return "no" if " bad" in field_value(user, "output") else "yes"

    verdict = verdict or judge

    def script(system: str, user: str) -> Any:
        fields = output_fields(system)
        if fields is None:
            return "```Scripted instruction: judge carefully.```"
        answer: dict[str, Any] = {}
        for name in fields:
            if name == "verdict":
                answer[name] = verdict(system, user)
            elif name == "lessons":
                answer[name] = [LESSON]
            elif name == "is_duplicate":
                answer[name] = False
            elif name == "duplicate_number":
                answer[name] = 0
            elif name == "merged_lesson":
                answer[name] = field_value(user, "new_lesson")
            elif name == "substring":
                answer[name] = first_sentence(field_value(user, "prompt"))
            elif name == "replacement":
                answer[name] = f"{first_sentence(field_value(user, 'prompt'))} {field_value(user, 'lesson')}"
            elif name in ("requirements", "dimensions"):
                answer[name] = ["The response follows the constraint."] if name == "requirements" else ["format"]
            elif name == "questions":
                answer[name] = [{"question": "Does the response follow the constraint?",
                                 "dimension": "instruction_following", "violation_example": "it ignores it"}]
            elif name == "response":
                answer[name] = "A scripted response."
            else:
                answer[name] = f"Scripted {name.replace('_', ' ')}: judge carefully."
        return answer

    return script

"""Scripted answers for the verdict-mode signatures (plumbing tests only, never a model's judgment).

`verdict_script` routes each request by the input fields it renders: the binary judge
(``violation_example``), the label picker (``allowed_labels``), the refutation drafter
(``proposed_label``) and the refutation answerer (``question`` alone).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from binaryeval_dspy.schemas.question_set import QuestionSet
from tests.fakes import field_value

AUDIT_POLICY = {
    "labels": [
        {"name": "Keep", "meaning": "fine as it is", "action": "nothing", "is_pass": True},
        {"name": "Improve", "meaning": "fixable gaps", "action": "open an edit task", "is_pass": False},
        {"name": "Retire", "meaning": "of no further use", "action": "delete it", "is_pass": False},
    ],
    "fatal_label": "Improve",
}


def verdict_question_set(policy: dict | None = None, *, fatal_code: bool = True, fatal_lm: bool = False) -> QuestionSet:
    """Three questions: a fatal word-count code check (max 50 words), and two LM questions."""
    return QuestionSet.model_validate({
        "dimensions": ["form", "usefulness"],
        "verdict_policy": policy or AUDIT_POLICY,
        "questions": [
            {"id": "short", "dimension": "form", "text": "Is it at most 50 words long?",
             "check": {"name": "word_count", "params": {"max": 50}}, "fatal": fatal_code},
            {"id": "example", "dimension": "usefulness", "text": "Does it show a runnable example?",
             "fatal": fatal_lm},
            {"id": "topic", "dimension": "usefulness", "text": "Does it stay on one topic?"},
        ],
    })


@dataclass
class VerdictScript:
    """Answers per signature; records what each signature was asked.

    Attributes:
        judge: question text -> "yes" / "no" / raw text (unparseable); default "yes".
        labels: labels returned by successive pick calls (the last one repeats);
            a dict entry is sent as is, a str starting with "RAW:" as raw text.
        refutations: questions the drafter writes.
        refutation_answers: question -> "yes" / "no" / raw text; default "no".
    """

    judge: dict[str, str] = field(default_factory=dict)
    labels: list[Any] = field(default_factory=lambda: ["Keep"])
    refutations: list[str] = field(default_factory=lambda: ["Is the gap absent?"])
    refutation_answers: dict[str, str] = field(default_factory=dict)
    calls: dict[str, list[str]] = field(default_factory=lambda: {"judge": [], "pick": [], "draft": [], "refute": []})

    def __call__(self, system: str, user: str) -> Any:
        if "[[ ## allowed_labels ## ]]" in user:
            self.calls["pick"].append(user)
            index = min(len(self.calls["pick"]), len(self.labels)) - 1
            label = self.labels[index]
            if isinstance(label, str) and label.startswith("RAW:"):
                return label[4:]
            return label if isinstance(label, dict) else {"reason": f"scripted pick {label}", "label": label}
        if "[[ ## proposed_label ## ]]" in user:
            self.calls["draft"].append(user)
            return {"questions": self.refutations}
        if "[[ ## violation_example ## ]]" in user:
            question = field_value(user, "question")
            self.calls["judge"].append(question)
            answer = self.judge.get(question, "yes")
            if answer in ("yes", "no"):
                return {"verdict": answer, "explanation": f"scripted {answer}"}
            return answer
        question = field_value(user, "question")
        self.calls["refute"].append(question)
        answer = self.refutation_answers.get(question, "no")
        if answer in ("yes", "no"):
            return {"answer": answer, "evidence": f"scripted {answer} for {question}"}
        return answer


def make_script(**kwargs: Any) -> Callable[[str, str], Any]:
    """A `VerdictScript` with the given answers."""
    return VerdictScript(**kwargs)

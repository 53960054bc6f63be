"""A DSPy Parameter that keeps a `QuestionSet` inside a program across save() / load().

`dspy.Module.save()` stores only parameters' state; a question set kept as a plain
attribute would be lost. This parameter dumps the set as JSON and validates it on load.
"""

from __future__ import annotations

from typing import Any

from binaryeval_dspy.lm.dspy_internals import Parameter
from binaryeval_dspy.schemas.question_set import QuestionSet


class QuestionSetState(Parameter):
    """Holds one `QuestionSet` (or None) as saved program state.

    Args:
        question_set: the set to hold.

    The state is ``{"question_set": <QuestionSet JSON>, "content_hash": <hash>}``;
    `load_state` raises `QuestionSetError` if the stored set does not validate.
    """

    def __init__(self, question_set: QuestionSet | None = None) -> None:
        self.value = question_set

    def dump_state(self, json_mode: bool = True) -> dict[str, Any]:
        """The question set as JSON-ready data, with its content hash for reference."""
        if self.value is None:
            return {"question_set": None, "content_hash": None}
        return {"question_set": self.value.model_dump(mode="json"), "content_hash": self.value.content_hash}

    def load_state(self, state: dict[str, Any]) -> QuestionSetState:
        """Restore the question set from `dump_state` output."""
        data = state.get("question_set")
        self.value = QuestionSet.from_data(data, path="<saved program state>") if data else None
        return self

    def reset(self) -> None:
        """Nothing to reset: a question set is not a learned demo."""


class ScaleState(Parameter):
    """Holds BinEval's score interval [a, b] as saved program state.

    Args:
        scale: (a, b), two different finite numbers.
    """

    def __init__(self, scale: tuple[float, float] = (0.0, 1.0)) -> None:
        self.value = (float(scale[0]), float(scale[1]))

    def dump_state(self, json_mode: bool = True) -> dict[str, Any]:
        """``{"scale": [a, b]}``."""
        return {"scale": list(self.value)}

    def load_state(self, state: dict[str, Any]) -> ScaleState:
        """Restore the interval saved by `dump_state`."""
        low, high = state["scale"]
        self.value = (float(low), float(high))
        return self

    def reset(self) -> None:
        """Nothing to reset."""

"""The ``check`` of a binary question: which registered code check answers it, with what parameters."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from binaryeval_dspy.checks.registry import get_check


class CheckSpec(BaseModel):
    """Names the code check that answers a question instead of the LM.

    Attributes:
        name: a registered check (built-in, or registered by the user before the
            question set is loaded).
        params: the check's parameters; validated against the check on load.
        on: which text the check reads: the item's ``"output"`` (default) or ``"input"``.

    Raises:
        pydantic.ValidationError: unknown check name or bad parameters (the question
            set loader turns it into a `QuestionSetError` naming the question).

    Example:
        >>> CheckSpec(name="word_count", params={"min": 20, "max": 400}).name
        'word_count'
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)
    on: Literal["output", "input"] = "output"

    @field_validator("name")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()

    @model_validator(mode="after")
    def _registered_with_valid_params(self) -> CheckSpec:
        get_check(self.name).validate_params(self.params)
        return self

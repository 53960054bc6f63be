"""One binary question's answer for one item (paper section 3.2)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

VerdictValue = Literal["yes", "no", "unparsed"]
VerdictSource = Literal["lm", "code"]


class QuestionVerdict(BaseModel):
    """The evaluator's answer f_E(x, y, q_i) with its explanation e_i (paper 3.2).

    Attributes:
        question_id: id of the `BinaryQuestion` answered.
        verdict: ``"yes"`` (satisfied), ``"no"`` (violated) or ``"unparsed"`` when the
            LM's answer could not be read as yes/no. Unparsed is never counted as no:
            scoring leaves it out of the denominator and reports it.
        explanation: the one- or two-sentence justification ("" when unparsed).
        raw_answer: the LM's raw text when it could not be parsed, for debugging.
        error: why the answer is unparsed (parser or LM error message), else None.
        source: ``"lm"`` (answered by the evaluator LM) or ``"code"`` (answered by a
            registered check before any LM call). Omitted from JSON when "lm".
        evidence: for code checks, the check's machine-readable findings (counts,
            missing paths, ...); the human-readable line is in ``explanation``.
            Omitted from JSON when None.
    """

    model_config = ConfigDict(extra="forbid")

    question_id: str
    verdict: VerdictValue
    explanation: str = ""
    raw_answer: str | None = None
    error: str | None = None
    source: VerdictSource = Field(default="lm", exclude_if=lambda v: v == "lm")
    evidence: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)

    @property
    def parsed(self) -> bool:
        """True for yes/no, False for unparsed."""
        return self.verdict != "unparsed"

"""One binary question's answer for one item (paper section 3.2)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

VerdictValue = Literal["yes", "no", "unparsed"]


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
    """

    model_config = ConfigDict(extra="forbid")

    question_id: str
    verdict: VerdictValue
    explanation: str = ""
    raw_answer: str | None = None
    error: str | None = None

    @property
    def parsed(self) -> bool:
        """True for yes/no, False for unparsed."""
        return self.verdict != "unparsed"

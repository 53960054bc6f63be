"""One binary question's answer for one item (paper section 3.2)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt

VerdictValue = Literal["yes", "no", "unparsed", "error"]
VerdictSource = Literal["lm", "code"]


class QuestionVerdict(BaseModel):
    """The evaluator's answer f_E(x, y, q_i) with its explanation e_i (paper 3.2).

    Attributes:
        question_id: id of the `BinaryQuestion` answered.
        verdict: ``"yes"`` (satisfied), ``"no"`` (violated), ``"unparsed"`` when the
            LM answered but its answer could not be read as yes/no, or ``"error"`` when
            the LM call itself failed after DSPy's retries (rate limit, server error,
            timeout, context overflow). Neither unparsed nor error is ever counted as
            no: scoring leaves both out of the denominator and reports them. An error
            is not an answer: a rerun of the run asks that question again.
        explanation: the one- or two-sentence justification ("" when unparsed).
        raw_answer: the LM's raw reply when it could not be parsed, or when it held more
            than the answer (a quoted block, several answer sets, prose), so a reader can
            see what the judge wrote; None otherwise.
        error: why the answer is unparsed (parser message) or, for ``"error"``, the
            failed call's error type and message; else None.
        source: ``"lm"`` (answered by the evaluator LM) or ``"code"`` (answered by a
            registered check before any LM call). Omitted from JSON when "lm".
        evidence: for code checks, the check's machine-readable findings (counts,
            missing paths, ...); the human-readable line is in ``explanation``.
            Omitted from JSON when None.
        p_yes: P(yes) in [0, 1] read from the LM's token log-probabilities at the
            verdict's position, renormalized over yes/no; None when the LM returned
            none (omitted from JSON then).
        flags: ways the explanation contradicts the verdict, from
            `binaryeval_dspy.analysis.explanation_flags` (``explanation_says_no``,
            ``explanation_says_yes``, ``copies_violation_example``); the verdict itself
            is kept as answered. None when nothing was flagged (omitted from JSON then).
        reply_cut: the LM's reply stopped at the completion cap (``max_tokens``,
            ``finish_reason: "length"``) after its whole answer (the JSON object closed,
            every field block ended): only text after the answer is missing. Omitted from
            JSON when False. (A reply cut inside its answer, even after the verdict, is
            ``unparsed``, with the cut named in ``error``.)
        qualified: the judge followed its verdict word at once with a reservation that
            takes part of it back (``"Yes, but the date is wrong"``, ``"no, although
            ..."``; `binaryeval_dspy.lm.verdict_text.reservation`): the verdict is kept as
            answered and counted, this flag says it is not a plain one, and ``raw_answer``
            keeps what the judge wrote. Omitted from JSON when False.
        judges: for a verdict decided by a panel or a cascade of judges
            (`binaryeval_dspy.programs.judge_panel`): each judge asked -> its own verdict
            on this question, in the order they were asked (a cascade's later stages only
            where it escalated). The verdict above is the rule's decision. Omitted from JSON
            when None (a single judge).
        usage: on a judge's own verdict inside `judges`: what the call that gave it used,
            as `Usage` fields (``lm_calls``, ``failed_calls``, ``prompt_tokens``,
            ``completion_tokens``, ``cached_prompt_tokens``, ``cache_write_tokens``; counts,
            tokens), so a panel's or cascade's usage and cost are known per judge. None (and
            omitted from JSON) elsewhere, and for a call that used nothing (a cache hit, a
            replayed answer, a call never sent): a single judge's usage is its item's.
    """

    model_config = ConfigDict(extra="forbid")

    question_id: str
    verdict: VerdictValue
    explanation: str = ""
    raw_answer: str | None = None
    error: str | None = None
    source: VerdictSource = Field(default="lm", exclude_if=lambda v: v == "lm")
    evidence: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)
    p_yes: float | None = Field(default=None, ge=0.0, le=1.0, exclude_if=lambda v: v is None)
    flags: list[str] | None = Field(default=None, exclude_if=lambda v: not v)
    reply_cut: bool = Field(default=False, exclude_if=lambda v: not v)
    qualified: bool = Field(default=False, exclude_if=lambda v: not v)
    judges: dict[str, QuestionVerdict] | None = Field(default=None, exclude_if=lambda v: v is None)
    usage: dict[str, NonNegativeInt] | None = Field(default=None, exclude_if=lambda v: v is None)

    @property
    def parsed(self) -> bool:
        """True for yes/no, False for unparsed and error."""
        return self.verdict in ("yes", "no")

    @property
    def answered(self) -> bool:
        """True when the LM (or a check) gave an answer, even an unreadable one: every
        outcome but ``error``. A resumed run asks again exactly the unanswered ones."""
        return self.verdict != "error"

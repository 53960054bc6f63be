"""One row of a verdicts file: one judge's answer to one binary question about one item.

The verdicts file is the interchange format for per-question answers (docs/verdicts.md):
what a run exports (`bineval verdicts RUN`), what human labels are written in, what a
published per-question data set converts to, and what `bineval agreement --labels` reads.
Its key is (``item_id``, ``question_id``, ``judge``): a file holds at most one row per key,
so a replay of a judging plan finds each call's answer by that key.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from binaryeval_dspy.schemas.verdict import QuestionVerdict, VerdictSource, VerdictValue
from binaryeval_dspy.schemas.versioned import SchemaVersion

VERDICT_RECORD_SCHEMA_VERSION = 1
#: The columns of a verdicts file, in the order the writer puts them. The first four are
#: required; the others may be left out (or empty in CSV).
VERDICT_COLUMNS = ("item_id", "question_id", "judge", "verdict", "p_yes", "explanation", "cost_usd",
                   "question_text", "dimension", "output_hash", "raw_answer", "error", "source", "evidence", "flags",
                   "reply_cut", "qualified", "schema_version")
REQUIRED_COLUMNS = VERDICT_COLUMNS[:4]
#: The outcomes a row can record: an answer (yes / no) or a non-answer, never read as "no".
VERDICT_OUTCOMES: tuple[VerdictValue, ...] = ("yes", "no", "unparsed", "error")
#: The judge name of a person's label when no annotator id is given.
HUMAN = "human"

VerdictKey = tuple[str, str, str]


class VerdictRecord(BaseModel):
    """One judge's answer to one question about one item (a row of a verdicts file).

    Attributes:
        item_id: the item's id (the ``item_id`` of a run's results, or any id of yours).
        question_id: the binary question's id.
        judge: who answered: an LM's display name (``openai/gpt-4o-mini``), ``human``,
            or an annotator id (``ann-1``); a panel's or cascade's name for aggregated rows.
        verdict: ``yes`` (satisfied), ``no`` (violated), ``unparsed`` (the judge replied
            but no yes/no could be read) or ``error`` (the call failed). A non-answer is
            its own outcome: it is never counted as ``no``, and every figure counts it.
        p_yes: P(yes) in [0, 1] where the judge gave one (log-probabilities); else None.
        explanation: the judge's one- or two-sentence justification ("" when none).
        cost_usd: what this answer cost, USD (>= 0); None when unknown (never 0 for
            "unknown"). A run's export shares each item's estimated cost equally among
            the item's LM questions.
        question_text: the question as asked (optional, for reading the file).
        dimension: the question's dimension (optional).
        output_hash: `binaryeval_dspy.schemas.item_result.text_hash` of the output that was
            judged (a run's export fills it), so a replay can refuse an answer about an
            output that has changed since; optional.
        raw_answer / error / source / evidence / flags / reply_cut / qualified: the rest
            of a run's `QuestionVerdict`, so an export reads back losslessly
            (`to_question_verdict`); all optional.
        schema_version: the row format's version (1); optional in a file.
    """

    model_config = ConfigDict(extra="forbid")

    item_id: str = Field(min_length=1)
    question_id: str = Field(min_length=1)
    judge: str = Field(min_length=1)
    verdict: VerdictValue
    p_yes: float | None = Field(default=None, ge=0.0, le=1.0)
    explanation: str = ""
    cost_usd: float | None = Field(default=None, ge=0.0)
    question_text: str | None = None
    dimension: str | None = None
    output_hash: str | None = None
    raw_answer: str | None = None
    error: str | None = None
    source: VerdictSource = "lm"
    evidence: dict[str, Any] | None = None
    flags: list[str] | None = None
    reply_cut: bool = False
    qualified: bool = False
    schema_version: SchemaVersion(VERDICT_RECORD_SCHEMA_VERSION, "verdicts file") = VERDICT_RECORD_SCHEMA_VERSION

    @field_validator("item_id", "question_id", "judge")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("p_yes", "cost_usd")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    @property
    def key(self) -> VerdictKey:
        """(item_id, question_id, judge): unique in a verdicts file."""
        return (self.item_id, self.question_id, self.judge)

    @property
    def answered(self) -> bool:
        """True for yes / no; False for unparsed and error."""
        return self.verdict in ("yes", "no")

    def row(self) -> dict[str, Any]:
        """The row as written: required fields, then the optional ones that are set
        (defaults left out), in `VERDICT_COLUMNS` order."""
        data = self.model_dump()
        defaults = {"explanation": "", "source": "lm", "reply_cut": False, "qualified": False}
        return {name: data[name] for name in VERDICT_COLUMNS
                if name in REQUIRED_COLUMNS or name == "schema_version"
                or (data[name] is not None and defaults.get(name, None) != data[name])}

    def to_question_verdict(self) -> QuestionVerdict:
        """The run's `QuestionVerdict` this row holds (its item, judge and question text dropped)."""
        return QuestionVerdict(question_id=self.question_id, verdict=self.verdict, explanation=self.explanation,
                               raw_answer=self.raw_answer, error=self.error, source=self.source,
                               evidence=self.evidence, p_yes=self.p_yes, flags=self.flags or None,
                               reply_cut=self.reply_cut, qualified=self.qualified)

    @classmethod
    def from_question_verdict(cls, verdict: QuestionVerdict, *, item_id: str, judge: str,
                              cost_usd: float | None = None, question_text: str | None = None,
                              dimension: str | None = None, output_hash: str | None = None) -> VerdictRecord:
        """The row of one `QuestionVerdict` of item `item_id`, answered by `judge`."""
        return cls(item_id=item_id, question_id=verdict.question_id, judge=judge, verdict=verdict.verdict,
                   p_yes=verdict.p_yes, explanation=verdict.explanation, cost_usd=cost_usd,
                   question_text=question_text, dimension=dimension, output_hash=output_hash,
                   raw_answer=verdict.raw_answer,
                   error=verdict.error, source=verdict.source, evidence=verdict.evidence,
                   flags=list(verdict.flags) if verdict.flags else None, reply_cut=verdict.reply_cut,
                   qualified=verdict.qualified)

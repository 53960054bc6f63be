"""One item's named verdict: the label, its grounds, and how code rules shaped it (seed 004).

Order of decisions, all recorded: the LM picks a provisional label from the evidence
(retried once if outside the declared set); the pressure test may move it by the
declared refutation rule; the fatal rule, applied in code last, forces the fatal
label whenever a fatal question was answered "no".
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from binaryeval_dspy.schemas.verdict import VerdictValue


class LabelAttempt(BaseModel):
    """One try of the LM at picking a label.

    Attributes:
        raw: the label the LM gave (or its raw reply when no label could be read); for a
            qualified pick, the label and its reservation.
        accepted: True when it named a declared label.
        error: why it was rejected, else None.
        qualified: the label came with a reservation that takes part of it back
            (``"pass, but the README lacks install steps"``): accepted as the label named,
            and noted in the verdict's ``notes``. Omitted from JSON when False.
    """

    model_config = ConfigDict(extra="forbid")

    raw: str
    accepted: bool
    error: str | None = None
    qualified: bool = Field(default=False, exclude_if=lambda v: not v)


class RefutationAnswer(BaseModel):
    """One pressure-test question and its answer; "yes" means the tested verdict is refuted.

    Attributes:
        question: the refutation question the LM wrote.
        answer: yes / no / unparsed (unparsed never counts as a refutation).
        evidence: the line of evidence given with the answer.
        raw_answer / error: the unreadable reply and why, when unparsed; for a qualified
            answer, the reply as written.
        qualified: the answer came with a reservation (``"yes, but ..."``): counted as
            the answer named, and noted in the verdict's ``notes``. Omitted from JSON when False.
    """

    model_config = ConfigDict(extra="forbid")

    question: str
    answer: VerdictValue
    evidence: str = ""
    raw_answer: str | None = None
    error: str | None = None
    qualified: bool = Field(default=False, exclude_if=lambda v: not v)


class PressureTestRecord(BaseModel):
    """What the pressure test did for one item.

    Attributes:
        status: "not_run" (see ``reason``), "ran", or "failed" (no usable
            refutation questions; the verdict is left as it was).
        reason: why it did not run or failed; empty when it ran.
        tested_label: the provisional label attacked.
        questions: the refutation questions with their answers (1 to 3).
        refuted: True when the declared rule (all / any "yes") was met.
        moved_to: the label the refutation moved the verdict to (None: not moved).
    """

    model_config = ConfigDict(extra="forbid")

    status: Literal["not_run", "ran", "failed"]
    reason: str = ""
    tested_label: str | None = None
    questions: list[RefutationAnswer] = Field(default_factory=list)
    refuted: bool = False
    moved_to: str | None = None


class FatalRuleRecord(BaseModel):
    """The fatal rule, applied in code after the LM's pick.

    Attributes:
        question_ids: fatal questions answered "no" (non-empty).
        label_before: the label before the rule (None when the LM's pick failed).
        forced_label: the declared fatal label.
        changed: True when the rule changed the verdict.
        note: a sentence saying what code did, for the output.
    """

    model_config = ConfigDict(extra="forbid")

    question_ids: list[str] = Field(min_length=1)
    label_before: str | None
    forced_label: str
    changed: bool
    note: str


class NamedVerdict(BaseModel):
    """The named verdict of one item.

    Attributes:
        label: the final label, one of the declared ones; None when no label could
            be decided (the LM's pick failed twice and no fatal rule applied).
        status: "decided", or "unparsed" when `label` is None. Never a silent default.
        decided_by: "lm" (the pick stood), "pressure_test" (a refutation moved it)
            or "fatal_rule" (code forced it); None when unparsed.
        provisional_label: the LM's pick before any rule (None if it failed).
        reason: the LM's short reason for its pick.
        grounds: ids of every question answered "no", in question-set order.
        fatal_rule: set when a fatal question was answered "no".
        pressure_test: what the pressure test did (always recorded in verdict mode).
        attempts: every pick attempt with its raw label (1 or 2).
        notes: other things the reader must know (e.g. a fatal question unparsed).
    """

    model_config = ConfigDict(extra="forbid")

    label: str | None
    status: Literal["decided", "unparsed"]
    decided_by: Literal["lm", "pressure_test", "fatal_rule"] | None
    provisional_label: str | None
    reason: str = ""
    grounds: list[str] = Field(default_factory=list)
    fatal_rule: FatalRuleRecord | None = None
    pressure_test: PressureTestRecord | None = None
    attempts: list[LabelAttempt] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

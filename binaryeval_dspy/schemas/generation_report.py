"""How a question set was generated: the record of every fallback and rejection.

`QuestionGenerator` (paper section 3.1: summarize the task prompt into requirements,
decompose each into binary questions grouped by dimension) can fall back or reject at
several points. None of that is silent: it is recorded here and saved in the question
set's JSON as ``generation_report``; ``bineval questions`` prints `summary` and
`warnings`. The report describes the set as generated; hand edits of the questions do
not update it. It is not part of the question set's content hash.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DropReason = Literal["empty", "placeholder text", "too short", "not a question", "unknown dimension"]
"""Why a drafted question or requirement was not used (see `QuestionGenerator`)."""


class DroppedDraft(BaseModel):
    """A question (or requirement) the LM wrote that was rejected.

    Attributes:
        text: the text as the LM wrote it (may be empty).
        reason: one of `DropReason`.
        detail: one sentence saying what exactly was wrong (e.g. the valid dimensions).
        requirement_id: the requirement the question was drafted for; None for a
            dropped requirement.
        lm_dimension: the dimension name the LM gave the question; None for a
            requirement.
    """

    model_config = ConfigDict(extra="forbid")

    text: str
    reason: DropReason
    detail: str = ""
    requirement_id: str | None = None
    lm_dimension: str | None = None


class FallbackTemplate(BaseModel):
    """A requirement asked as one template question because its decomposition gave
    nothing usable.

    Attributes:
        question_id: the template question's id in the set.
        requirement_id: the requirement it asks about.
        reason: why no drafted question was used (unparseable answer, no drafts, or
            every draft dropped).
    """

    model_config = ConfigDict(extra="forbid")

    question_id: str
    requirement_id: str
    reason: str


class LeftOutRequirement(BaseModel):
    """A requirement with no question in the set: its decomposition gave nothing usable and
    its template question could not be filed under the dimension it is about.

    Attributes:
        requirement_id: the requirement (its text is in the set's ``requirements``).
        reason: why no drafted question was used (as `FallbackTemplate.reason`).
        why_left_out: why its template question was left out (the LM's dimension choice
            followed the order the dimensions were listed in, could not be read, or named
            none of them).
    """

    model_config = ConfigDict(extra="forbid")

    requirement_id: str
    reason: str
    why_left_out: str


class GenerationReport(BaseModel):
    """Provenance of a generated question set (saved as ``QuestionSet.generation_report``).

    Attributes:
        dimensions_source: where the dimension names came from: ``"given"`` by the
            caller, ``"inferred"`` by the LM from the requirements, or ``"fallback"``
            (inference failed; the single dimension ``"overall"`` was used instead).
        dimensions_note: why the fallback was used, or which inferred names were left
            out; "" when there is nothing to say.
        empty_dimensions: given or inferred dimensions that ended with no question and
            were therefore left out of the set's ``dimensions``.
        questions_by_origin: number of questions in the set per ``origin``
            (``generated``, ``merged``, ``fallback_template``), all >= 0.
        duplicates_merged: drafted questions (>= 0) folded into an identical earlier one.
        fallback_templates: the template questions and why each was needed.
        relabelled: ids of questions put under the only dimension although the LM named
            another one (their ``dimension_source`` is ``mapped_from:<name>``).
        dropped_questions: drafted questions rejected (garbage text, unknown dimension).
        dropped_requirements: requirements rejected (empty or placeholder text).
        left_out_requirements: requirements with no question at all, because their
            template question could not be filed under the dimension it is about
            (`LeftOutRequirement`); write one by hand.
    """

    model_config = ConfigDict(extra="forbid")

    dimensions_source: Literal["given", "inferred", "fallback"]
    dimensions_note: str = ""
    empty_dimensions: list[str] = Field(default_factory=list)
    questions_by_origin: dict[str, int] = Field(default_factory=dict)
    duplicates_merged: int = Field(default=0, ge=0)
    fallback_templates: list[FallbackTemplate] = Field(default_factory=list)
    relabelled: list[str] = Field(default_factory=list)
    dropped_questions: list[DroppedDraft] = Field(default_factory=list)
    dropped_requirements: list[DroppedDraft] = Field(default_factory=list)
    left_out_requirements: list[LeftOutRequirement] = Field(default_factory=list)

    def summary(self, dimension_of: dict[str, str] | None = None) -> str:
        """One line, e.g. ``"12 generated, 2 fallback templates (coverage), 1 dropped
        (placeholder text)"``. `dimension_of` maps question id -> dimension and adds the
        template questions' dimensions in parentheses."""
        by_origin = self.questions_by_origin
        parts = [f"{by_origin.get('generated', 0)} generated"]
        if by_origin.get("merged", 0):
            parts.append(f"{by_origin['merged']} merged ({self.duplicates_merged} duplicate drafts folded in)")
        templates = len(self.fallback_templates)
        if templates:
            dims = sorted({dimension_of[t.question_id] for t in self.fallback_templates
                           if dimension_of and t.question_id in dimension_of})
            where = f" ({', '.join(dims)})" if dims else ""
            parts.append(f"{templates} fallback template{'s' if templates != 1 else ''}{where}")
        if self.relabelled:
            parts.append(f"{len(self.relabelled)} put under the only dimension (LM named another)")
        if self.dropped_questions:
            parts.append(f"{len(self.dropped_questions)} dropped ({_reasons(self.dropped_questions)})")
        if self.dropped_requirements:
            parts.append(f"{len(self.dropped_requirements)} requirement"
                         f"{'s' if len(self.dropped_requirements) != 1 else ''} dropped "
                         f"({_reasons(self.dropped_requirements)})")
        if self.left_out_requirements:
            n = len(self.left_out_requirements)
            parts.append(f"{n} requirement{'s' if n != 1 else ''} left out (no question, dimension unknown)")
        return ", ".join(parts)

    def warnings(self) -> list[str]:
        """Sentences a user must see: the fallback dimension, emptied dimensions,
        template questions, requirements left out. Empty when generation needed no fallback."""
        out: list[str] = []
        if self.dimensions_source == "fallback":
            out.append(f"no dimensions were inferred, so every question is under the fallback dimension "
                       f"'overall' ({self.dimensions_note}); name the dimensions (`dimensions`, or "
                       "QuestionGenerator(dimensions=...)) to avoid it.")
        elif self.dimensions_note:
            out.append(self.dimensions_note)
        for dim in self.empty_dimensions:
            out.append(f"dimension '{dim}' got no usable question and is not in the set; "
                       "add questions for it by hand or regenerate with a stronger LM.")
        for t in self.fallback_templates:
            out.append(f"requirement {t.requirement_id} is asked as one template question "
                       f"({t.question_id}): {t.reason}.")
        for r in self.left_out_requirements:
            out.append(f"requirement {r.requirement_id} has no question: {r.reason}, and its template question was "
                       f"left out because {r.why_left_out}. Write a question for it by hand, under the dimension "
                       "it is about, or regenerate with a stronger LM.")
        return out


def _reasons(dropped: list[DroppedDraft]) -> str:
    """``"placeholder text, 2 unknown dimension"``: reasons in first-seen order, with
    counts above one."""
    counts: dict[str, int] = {}
    for d in dropped:
        counts[d.reason] = counts.get(d.reason, 0) + 1
    return ", ".join(reason if n == 1 else f"{n} {reason}" for reason, n in counts.items())

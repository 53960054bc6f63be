"""Per-dimension and overall scores of one item (paper section 3.2)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class VerdictCounts(BaseModel):
    """How many questions got yes, no, unparsed and error (all >= 0).

    ``error`` counts questions whose LM call failed (no answer at all); like
    ``unparsed`` they are outside the yes-rate's denominator.
    """

    model_config = ConfigDict(extra="forbid")

    yes: int = Field(default=0, ge=0)
    no: int = Field(default=0, ge=0)
    unparsed: int = Field(default=0, ge=0)
    error: int = Field(default=0, ge=0, exclude_if=lambda v: v == 0)

    @property
    def parsed(self) -> int:
        """yes + no: the denominator of the yes-rate."""
        return self.yes + self.no

    @property
    def total(self) -> int:
        """yes + no + unparsed + error: every question asked."""
        return self.yes + self.no + self.unparsed + self.error

    @property
    def answered(self) -> int:
        """yes + no + unparsed: questions that got an answer (error ones did not)."""
        return self.yes + self.no + self.unparsed


class ScoreCard(BaseModel):
    """Yes-rate scores of one item, per dimension and overall, and their affine scaling.

    Attributes:
        dimension_scores: S_d = yes / (yes + no) over dimension d's questions, in [0, 1];
            None when every question of d was unparsed (paper 3.2, S_d).
        overall: yes / (yes + no) over all questions, in [0, 1]; None if none parsed.
        counts: yes / no / unparsed counts per dimension.
        scale: the target interval [a, b] of the scaled scores (default [0, 1]).
        scaled_dimension_scores: S'_d = S_d (b - a) + a, in [a, b] (None stays None).
        scaled_overall: S' for the overall score.
        p_yes_scores: soft score per dimension, the mean P(yes) over the dimension's
            questions that carry one (see `QuestionVerdict.p_yes`), in [0, 1]; None
            when the LM returned no log-probabilities (omitted from JSON then).
        p_yes_overall: the mean P(yes) over all questions that carry one.
    """

    model_config = ConfigDict(extra="forbid")

    dimension_scores: dict[str, float | None]
    overall: float | None
    counts: dict[str, VerdictCounts]
    scale: tuple[float, float] = (0.0, 1.0)
    scaled_dimension_scores: dict[str, float | None]
    scaled_overall: float | None
    p_yes_scores: dict[str, float | None] | None = Field(default=None, exclude_if=lambda v: v is None)
    p_yes_overall: float | None = Field(default=None, exclude_if=lambda v: v is None)

    @model_validator(mode="after")
    def _in_range(self) -> ScoreCard:
        soft = [*(self.p_yes_scores or {}).items(), ("p_yes_overall", self.p_yes_overall)]
        for name, value in [*self.dimension_scores.items(), ("overall", self.overall), *soft]:
            if value is not None and not 0.0 <= value <= 1.0:
                raise ValueError(f"score '{name}' = {value} is outside [0, 1]")
        return self

    @property
    def total_counts(self) -> VerdictCounts:
        """Counts summed over dimensions."""
        return VerdictCounts(
            yes=sum(c.yes for c in self.counts.values()),
            no=sum(c.no for c in self.counts.values()),
            unparsed=sum(c.unparsed for c in self.counts.values()),
            error=sum(c.error for c in self.counts.values()),
        )

"""``rejudge.json``: what `bineval rejudge` did to each item and which verdicts changed."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from binaryeval_dspy.schemas.versioned import SchemaVersion

REJUDGE_REPORT_SCHEMA_VERSION = 1


class ItemChange(BaseModel):
    """One item of a re-judge.

    Attributes:
        item_id: the item.
        status: "unchanged" (same output: result copied, not re-judged), "rejudged"
            (output changed), "new" (not in the previous run), "removed" (in the
            previous run, not in the items file now), "completed" (same output, but the
            previous result was incomplete: its answers were kept and only the questions
            whose LM call had failed were asked) or "failed" (re-judging raised;
            nothing stored, rerun to retry).
        old_verdict / new_verdict: named labels (verdict modes), else None.
        old_overall / new_overall: overall yes-rates in [0, 1] (aggregation "score"
            or "both" only; left out of the JSON in verdict mode).
        changed: True when the verdict (verdict modes) or the overall score (score
            mode) differs between the two runs.
        flipped_questions: ids of questions whose answer differs.
    """

    model_config = ConfigDict(extra="forbid")

    item_id: str
    status: Literal["unchanged", "rejudged", "completed", "new", "removed", "failed"]
    old_verdict: str | None = None
    new_verdict: str | None = None
    old_overall: float | None = Field(default=None, exclude_if=lambda v: v is None)
    new_overall: float | None = Field(default=None, exclude_if=lambda v: v is None)
    changed: bool = False
    flipped_questions: list[str] = Field(default_factory=list)


class RejudgeReport(BaseModel):
    """The outcome of re-judging a run with its frozen question set.

    Attributes:
        schema_version: 1.
        previous_run / run: the run re-judged (left untouched) and the new run directory.
        question_set_hash: the frozen question set's hash (the same for both runs).
        lm: the LM used (the same as the previous run's).
        aggregation: "score", "verdict" or "both", as in the previous run.
        items_path: the items file given.
        counts: items per status.
        changed: ids of items whose verdict (or score, in score mode) changed.
        items: one `ItemChange` per item, in items-file order, removed items last.
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: SchemaVersion(REJUDGE_REPORT_SCHEMA_VERSION, "re-judge report",
                                  older_fix="run bineval rejudge again with this version") = (
        REJUDGE_REPORT_SCHEMA_VERSION)
    previous_run: str
    run: str
    question_set_hash: str
    lm: str
    aggregation: Literal["score", "verdict", "both"]
    items_path: str
    counts: dict[str, int]
    changed: list[str]
    items: list[ItemChange]

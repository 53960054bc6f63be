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
            whose LM call had failed were asked), "incomplete" (judged again, but some of
            its new LM calls failed: stored with every answer it got), "error" (judged
            again, but it could not be judged: every LM question failed, or a later step
            such as the verdict pick did; stored as a status ``error`` row) or "failed"
            (re-judging raised and nothing was stored). A rerun of the same command asks
            an "incomplete" or "error" item's unanswered questions again and retries a
            "failed" one.
        reason: for "incomplete", "error" and "failed": why the item was judged
            ("rejudged", "completed" or "new", as above); None (and not written) otherwise.
        old_verdict / new_verdict: named labels (verdict modes), else None; the new
            one of an "incomplete" item is decided from the questions it answered, and
            an "error" or "failed" item has none.
        old_overall / new_overall: overall yes-rates in [0, 1] (aggregation "score"
            or "both" only; left out of the JSON in verdict mode, and when there is
            none: an "error" item has no score; an "incomplete" one's is over the
            questions it answered).
        changed: True when the verdict (verdict modes) or the overall score (score
            mode) differs between the two runs. Claimed only between two complete
            results (every question answered, on both sides): never for an item whose
            previous or new result has failed LM calls (see `RejudgeReport.not_compared`).
        flipped_questions: ids of questions whose answer differs (questions answered
            in both runs only).
        uncompared_questions: ids of questions that could not be compared because their
            LM call failed in the previous run, in this one, or both (for a "failed"
            item: every question of the previous result); empty (and not written) when
            every question was compared.
        questions_answered / questions_total: for "incomplete" and "error" items, how
            many of the item's questions have an answer (yes, no or unparsed) in the new
            result, out of how many; None (and not written) otherwise.
        error: for "incomplete", "error" and "failed" items, what failed (type and
            message: the item's error, else its first failed call's); None (and not
            written) otherwise.
    """

    model_config = ConfigDict(extra="forbid")

    item_id: str
    status: Literal["unchanged", "rejudged", "completed", "new", "removed", "incomplete", "error", "failed"]
    reason: Literal["rejudged", "completed", "new"] | None = Field(default=None, exclude_if=lambda v: v is None)
    old_verdict: str | None = None
    new_verdict: str | None = None
    old_overall: float | None = Field(default=None, exclude_if=lambda v: v is None)
    new_overall: float | None = Field(default=None, exclude_if=lambda v: v is None)
    changed: bool = False
    flipped_questions: list[str] = Field(default_factory=list)
    uncompared_questions: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    questions_answered: int | None = Field(default=None, exclude_if=lambda v: v is None)
    questions_total: int | None = Field(default=None, exclude_if=lambda v: v is None)
    error: str | None = Field(default=None, exclude_if=lambda v: v is None)


class RejudgeReport(BaseModel):
    """The outcome of re-judging a run with its frozen question set.

    Attributes:
        schema_version: 1.
        previous_run / run: the run re-judged (left untouched) and the new run directory.
        question_set_hash: the frozen question set's hash (the same for both runs).
        lm: the LM used (the same as the previous run's).
        aggregation: "score", "verdict" or "both", as in the previous run.
        items_path: the items file given.
        counts: items per status (failures included: "incomplete", "error", "failed").
        changed: ids of items whose verdict (or score, in score mode) changed, between
            complete results only.
        not_compared: ids of items judged again whose verdict could not be compared
            with the previous one because an LM call failed in either run (status
            "incomplete", "error" or "failed", or a previous result that was incomplete:
            every "completed" item); they are never in `changed`. Empty for files
            written before this field existed.
        items: one `ItemChange` per item, in items-file order, removed items last.
        previous_unreadable: the lines of the previous run's ``results.jsonl`` that gave
            no result (a half-written last line), counted and named; their items are
            judged as new. None (and not written) when every line was read.
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
    not_compared: list[str] = Field(default_factory=list)
    items: list[ItemChange]
    previous_unreadable: str | None = Field(default=None, exclude_if=lambda v: v is None)

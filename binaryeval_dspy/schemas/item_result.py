"""One line of a run's ``results.jsonl``: everything judged about one item."""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from binaryeval_dspy.schemas.named_verdict import NamedVerdict
from binaryeval_dspy.schemas.score_card import ScoreCard
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.schemas.versioned import SchemaVersion

ITEM_RESULT_SCHEMA_VERSION = 1
#: what to do with a item result from an older version
_OLDER_FIX = "judge the items again with this version, into a new run directory (`out_dir`)"
#: What became of an item: judged with a score (or, without a score card, a decided
#: label), judged without one (no readable answer), skipped because its output is empty
#: (no LM call, no score), or not judged at all (no LM answer).
ITEM_STATUSES = ("scored", "unscored", "empty_output", "error")
ItemStatus = Literal["scored", "unscored", "empty_output", "error"]


def text_hash(text: str) -> str:
    """16 hex characters of SHA-256 of a text (used to notice a changed output)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class Usage(BaseModel):
    """LM cost of one item or run: calls that reached the model and their tokens.

    Calls answered from DSPy's own cache cost nothing and are not counted.

    Attributes:
        lm_calls: calls that reached a model and got a reply (each retry in another adapter
            format counts).
        prompt_tokens: their prompt (input) tokens, cached ones included.
        completion_tokens: their completion (output) tokens.
        cached_prompt_tokens: the part of `prompt_tokens` the provider served from its
            prompt cache, as its usage reports it (OpenAI and vLLM:
            ``prompt_tokens_details.cached_tokens``; Anthropic: ``cache_read_input_tokens``);
            0 when the provider reports none.
        adapter_fallbacks: calls that were second attempts in another output format after
            a reply failed to parse (0 with our default adapters, which never retry).
        cache_write_tokens: the part of `prompt_tokens` the provider wrote to its prompt
            cache (Anthropic's ``cache_creation_input_tokens``, billed at 1.25x input); 0
            when the provider reports none.
        failed_calls: requests that got an error instead of a reply (a server error, a
            rate limit, a timeout), whether DSPy retried them or the call then failed; not
            in `lm_calls`, so ``lm_calls + failed_calls`` is the requests an endpoint
            received. Tokens the provider reported for them are in the token counts.
    """

    model_config = ConfigDict(extra="forbid")

    lm_calls: int = Field(default=0, ge=0)
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    cached_prompt_tokens: int = Field(default=0, ge=0, exclude_if=lambda v: v == 0)
    adapter_fallbacks: int = Field(default=0, ge=0, exclude_if=lambda v: v == 0)
    cache_write_tokens: int = Field(default=0, ge=0, exclude_if=lambda v: v == 0)
    failed_calls: int = Field(default=0, ge=0, exclude_if=lambda v: v == 0)

    def __add__(self, other: Usage) -> Usage:
        # two valid usages add up to a valid one: no validation needed (this runs once per answer)
        return Usage.model_construct(**{name: getattr(self, name) + getattr(other, name) for name in _USAGE_FIELDS})

    @property
    def total_tokens(self) -> int:
        """prompt + completion tokens."""
        return self.prompt_tokens + self.completion_tokens


_USAGE_FIELDS = tuple(Usage.model_fields)


class ContextOverflow(BaseModel):
    """A request that did not fit the LM's context window, as its error message told.

    Attributes:
        tokens: the size of the request in tokens, when the message states it.
        limit: the context window in tokens, when the message states it.
    """

    model_config = ConfigDict(extra="forbid")

    tokens: int | None = None
    limit: int | None = None


class ItemResult(BaseModel):
    """The verdicts and scores of one item, as appended to ``results.jsonl``.

    Attributes:
        schema_version: format version (1).
        item_id: the item's id (from ``--id-field`` or ``line-<n>``).
        line: 1-based line (row) of the item in its file.
        output_hash: `text_hash` of the judged output, to detect changed outputs.
        input_hash: `text_hash` of the input it was judged against (None in files
            written before this field existed).
        question_set_hash: content hash of the question set used.
        score_card: per-dimension and overall yes-rates with counts and scaling;
            None (and left out of the JSON) when the run's aggregation is "verdict".
        verdicts: one `QuestionVerdict` per question, in question-set order.
        fields: the item's other fields (ids, human scores, ...), copied through.
        usage: LM calls and tokens spent on this item.
        seconds: wall time spent on this item.
        named_verdict: the named verdict with its grounds, fatal rule and pressure
            test, when the run's aggregation is "verdict" or "both"; left out of
            the JSON otherwise.
        complete: False when some question got no answer because its LM call failed
            (``error`` verdicts); a rerun of the same command asks just those again.
            Set from `verdicts`, never by hand; written to JSON only when False.
        questions_answered: for an incomplete item, how many questions got an answer
            (yes, no or unparsed); None (and not written) for a complete one.
        status: ``"scored"`` (judged and has a score: its score card's overall score is
            defined, or, in a run without scores (aggregation "verdict"), its named
            verdict has a label; not written, and assumed for files written before this
            field existed), ``"unscored"`` (judged, but no answer could be read into a
            score: every answer unparsed, or no label decided; no score, left out of
            every mean, counted), ``"empty_output"`` (the output is empty or only
            whitespace and invisible characters: no LM call, no verdicts, no score;
            complete) or ``"error"`` (the item could not be judged: every LM question
            failed, or judging it raised; incomplete, so a rerun tries it again). An item
            whose LM questions all failed is set to ``"error"``, and a judged item
            without a score to ``"unscored"``, automatically (files written before
            ``"unscored"`` existed are read the same way).
        error: for status ``"error"``, the error's type and message (the first failed
            call's when questions failed).
        lm: for status ``"error"``, the LM that failed.
        context_overflow: for an error that is a context-window overflow, the request's
            size and the window, as far as the message states them.
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: SchemaVersion(ITEM_RESULT_SCHEMA_VERSION, "item result",
                                  older_fix=_OLDER_FIX) = ITEM_RESULT_SCHEMA_VERSION
    item_id: str
    line: int | None = None
    output_hash: str
    input_hash: str | None = Field(default=None, exclude_if=lambda v: v is None)
    question_set_hash: str
    score_card: ScoreCard | None = Field(default=None, exclude_if=lambda v: v is None)
    verdicts: list[QuestionVerdict]
    fields: dict[str, Any] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    seconds: float = Field(default=0.0, ge=0)
    named_verdict: NamedVerdict | None = Field(default=None, exclude_if=lambda v: v is None)
    complete: bool = Field(default=True, exclude_if=lambda v: v is True)
    questions_answered: int | None = Field(default=None, exclude_if=lambda v: v is None)
    status: ItemStatus = Field(default="scored", exclude_if=lambda v: v == "scored")
    error: str | None = Field(default=None, exclude_if=lambda v: v is None)
    lm: str | None = Field(default=None, exclude_if=lambda v: v is None)
    context_overflow: ContextOverflow | None = Field(default=None, exclude_if=lambda v: v is None)

    @model_validator(mode="after")
    def _has_an_outcome(self) -> ItemResult:
        if self.status == "empty_output":
            if self.verdicts or self.score_card is not None or self.named_verdict is not None:
                raise ValueError("an empty_output item has no verdicts, score_card or named_verdict")
        elif self.status == "scored" and self.score_card is None and self.named_verdict is None:
            raise ValueError("an item result needs a score_card, a named_verdict, or both")
        asked = [v for v in self.verdicts if v.source == "lm"]
        if self.status == "scored" and asked and not any(v.answered for v in asked):
            self.status = "error"  # every LM question failed: nothing was judged
        if self.status == "scored" and not self.has_score:
            self.status = "unscored"  # judged, but no readable answer gave it a score
        if self.status == "error" and self.error is None:
            self.error = next((v.error for v in self.verdicts if v.verdict == "error" and v.error),
                              "the item could not be judged")
        answered = sum(1 for v in self.verdicts if v.answered)
        self.complete = answered == len(self.verdicts) and self.status != "error"
        self.questions_answered = None if self.complete else answered
        return self

    @property
    def has_score(self) -> bool:
        """True when the item has a score: its score card's overall score is defined (some
        answer was read as yes or no), or, without a score card (aggregation "verdict"),
        its named verdict has a label."""
        if self.score_card is not None:
            return self.score_card.overall is not None
        return self.named_verdict is not None and self.named_verdict.label is not None

    @property
    def scored(self) -> bool:
        """True for an item with a score (status ``"scored"``): its score card counts in means."""
        return self.status == "scored"

    @property
    def answered_count(self) -> int:
        """Questions with an answer (yes, no or unparsed)."""
        return sum(1 for v in self.verdicts if v.answered)

    @property
    def errors(self) -> int:
        """Questions whose LM call failed (no answer stored)."""
        return len(self.verdicts) - self.answered_count

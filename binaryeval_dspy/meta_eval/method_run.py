"""Per-item results of the baseline methods and the resumable loop that produces them.

Each method of a benchmark run has its own run directory (``<run>/<method>/``) with a
manifest and an append-only ``results.jsonl``, exactly like a BinEval run: a later call
only scores the items (and methods) still missing. BinEval itself runs through
`binaryeval_dspy.runs.evaluate_items`; the baselines store `MethodItemResult` lines.
Every item gets a line: an empty output (`is_empty_output`) is stored with status
``empty_output`` and no score without calling the method, and an item the method could
not score (it raised) with status ``error`` and the error, retried by the next run.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

import dspy
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from binaryeval_dspy.data.text_checks import is_empty_output
from binaryeval_dspy.engines.in_process import run_states
from binaryeval_dspy.engines.plan_runner import ItemOutcome as ItemDone
from binaryeval_dspy.lm.context_overflow import parse_context_overflow
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.lm.calls import error_text
from binaryeval_dspy.runs.evaluation import run_resumable
from binaryeval_dspy.runs.evaluation_outcome import EvaluationOutcome
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.item_result import ContextOverflow, ItemStatus, Usage, text_hash
from binaryeval_dspy.schemas.run_manifest import RunManifest
from binaryeval_dspy.schemas.versioned import SchemaVersion
from binaryeval_dspy.settings import RunSettings

logger = logging.getLogger(__name__)

METHOD_RESULT_SCHEMA_VERSION = 1
_OLDER_FIX = "run the benchmark again with this version, into a new `out_dir`"
MethodFunction = Callable[[dspy.Example], dspy.Prediction]


class MethodItemResult(BaseModel):
    """One line of a baseline's ``results.jsonl``.

    Attributes:
        schema_version: format version (1).
        item_id: the benchmark item.
        method: ``geval``, ``unieval`` or ``rouge``.
        output_hash: `text_hash` of the scored output.
        scores: dimension -> score in [0, 1] (the method's native scale mapped
            affinely), None when the method produced no readable score.
        details: dimension -> what the method returned (raw rating, probability
            distribution, error, ...).
        usage: LM calls and tokens (zero for ROUGE-L).
        seconds: wall time for this item.
        status: ``"scored"`` (some dimension has a score; not written, assumed for older
            files), ``"unscored"`` (the method ran but no dimension got a readable score;
            set automatically, older files are read the same way), ``"empty_output"``
            (empty output: the method was not run, ``scores`` is empty) or ``"error"``
            (the method raised: ``scores`` is empty, `error` says why; a rerun retries).
        error: for status ``"error"``, the error's type and message.
        lm: for status ``"error"``, the LM the method used (None for ROUGE-L).
        context_overflow: for a context-window overflow, the request's size and the
            window as far as the message states them.
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: SchemaVersion(METHOD_RESULT_SCHEMA_VERSION, "method result", older_fix=_OLDER_FIX) = METHOD_RESULT_SCHEMA_VERSION
    item_id: str
    method: str
    output_hash: str
    scores: dict[str, float | None]
    details: dict[str, Any] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    seconds: float = Field(default=0.0, ge=0)
    status: ItemStatus = Field(default="scored", exclude_if=lambda v: v == "scored")
    error: str | None = Field(default=None, exclude_if=lambda v: v is None)
    lm: str | None = Field(default=None, exclude_if=lambda v: v is None)
    context_overflow: ContextOverflow | None = Field(default=None, exclude_if=lambda v: v is None)

    @property
    def complete(self) -> bool:
        """False for an item that could not be scored (status ``error``): a rerun retries it."""
        return self.status != "error"

    @model_validator(mode="after")
    def _unscored_without_a_score(self) -> MethodItemResult:
        if self.status == "scored" and all(score is None for score in self.scores.values()):
            self.status = "unscored"  # the method ran, nothing it returned was a score
        return self

    @field_validator("scores")
    @classmethod
    def _unit_interval(cls, value: dict[str, float | None]) -> dict[str, float | None]:
        for name, score in value.items():
            if score is not None and not -1e-9 <= score <= 1 + 1e-9:
                raise ValueError(f"score '{name}' = {score} is outside [0, 1]")
        return value


class MethodRunDirectory(RunDirectory):
    """A `RunDirectory` whose results are `MethodItemResult` lines."""

    result_model = MethodItemResult


def _empty_result(method: str, item: dspy.Example) -> MethodItemResult:
    return MethodItemResult(item_id=str(item.item_id), method=method, output_hash=text_hash(item.output or ""),
                            scores={}, status="empty_output")


def _failed_result(method: str, item: dspy.Example, done: ItemDone, lm: str | None) -> MethodItemResult:
    message = error_text(done.error) if done.error is not None else "the item could not be scored"
    return MethodItemResult(item_id=str(item.item_id), method=method, output_hash=text_hash(item.output),
                            scores={}, usage=done.usage, seconds=done.seconds, status="error", error=message,
                            lm=lm, context_overflow=parse_context_overflow(message))


def _method_result(method: str, item: dspy.Example, done: ItemDone) -> MethodItemResult:
    pred = done.result
    return MethodItemResult(
        item_id=str(item.item_id), method=method, output_hash=text_hash(item.output),
        scores=dict(pred.scores), details=dict(getattr(pred, "details", {}) or {}),
        usage=done.usage, seconds=done.seconds,
    )


class CodeMethod:
    """A method computed by code alone (ROUGE-L), as a judging plan with no LM call.

    Args:
        function: ``function(item) -> dspy.Prediction(scores=..., details=...)``.
    """

    def __init__(self, function: MethodFunction) -> None:
        self.function = function

    def begin(self, item: dspy.Example, previous: Any = ()) -> dspy.Example:
        """The item itself: nothing is settled before, nothing is asked."""
        return item

    def next_calls(self, state: dspy.Example) -> list:
        """No LM call."""
        return []

    def take(self, state: Any, call: Any, answer: Any) -> None:  # pragma: no cover - never called: no calls
        """Never called (no calls)."""

    def unsent(self, state: Any, call: Any, reason: str) -> None:  # pragma: no cover - never called: no calls
        """Never called (no calls)."""

    def finish(self, state: dspy.Example) -> dspy.Prediction:
        """The method's prediction for the item."""
        return self.function(state)


def score_item(method: str, program: Any, item: dspy.Example, lm: LMHandle | None = None) -> MethodItemResult:
    """Run one method (a judging plan: `GEvalJudge`, `UniEvalJudge`, `CodeMethod`) on one item;
    the prediction must carry ``scores`` (and may carry ``details``).

    An empty output (`is_empty_output`) gets status ``empty_output`` without running the method.

    Raises:
        Exception: whatever the method raised (a failed LM call: `LMCallFailed`; the item is not stored).
    """
    if is_empty_output(item.output):
        return _empty_result(method, item)
    context = lm.context() if lm is not None else contextlib.nullcontext()
    with context:
        done = run_states(program, [program.begin(item)])[0]
    if done.error is not None:
        raise done.error
    return _method_result(method, item, done)


def run_method(
    method: str,
    program: Any,
    items: Sequence[dspy.Example],
    run_dir: MethodRunDirectory,
    manifest: RunManifest,
    *,
    lm: LMHandle | None = None,
    on_progress: Callable[[MethodItemResult | None, str], None] | None = None,
    settings: RunSettings | None = None,
    max_consecutive_failures: int = 3,
) -> EvaluationOutcome:
    """Score every item not yet in `run_dir` with one method, appending as it goes.

    The same loop as `binaryeval_dspy.runs.evaluate_items` (`run_resumable`): the run's
    lock, stored items skipped, the method's calls sent by the run's engine, an item with
    an empty output stored with status ``empty_output`` and no score (the method is not
    called), an item the method could not score stored with status ``error`` (a rerun
    retries it), Ctrl-C keeps what is done, ``settings``' engine and calls in flight
    (`RunSettings`), and `max_consecutive_failures` failures in a row stop the loop.

    Args:
        program: the method as a judging plan (`GEvalJudge`, `UniEvalJudge`, `CodeMethod`).

    Returns:
        An `EvaluationOutcome` whose ``results`` are `MethodItemResult`s.

    Raises:
        RunStateError: `run_dir` was made with another LM or method configuration, or
            another process is writing it.
    """
    progress = (lambda _item, result, status: on_progress(result, status)) if on_progress is not None else None
    return run_resumable(
        items, run_dir, manifest, program=program,
        package=lambda item, done, _stored: _method_result(method, item, done),
        empty_result=lambda item: _empty_result(method, item),
        failed_result=lambda item, done, _stored: _failed_result(method, item, done, manifest.lm),
        lm=lm, settings=settings, on_progress=progress,
        max_consecutive_failures=max_consecutive_failures,
    )

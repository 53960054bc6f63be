"""Per-item results of the baseline methods and the resumable loop that produces them.

Each method of a benchmark run has its own run directory (``<run>/<method>/``) with a
manifest and an append-only ``results.jsonl``, exactly like a BinEval run: a later call
only scores the items (and methods) still missing. BinEval itself runs through
`binaryeval_dspy.runs.evaluate_items`; the baselines store `MethodItemResult` lines.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import dspy
from pydantic import BaseModel, ConfigDict, Field, field_validator

from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.runs.evaluation import EvaluationOutcome, usage_from_tracker
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.item_result import Usage, text_hash
from binaryeval_dspy.schemas.run_manifest import RunManifest

logger = logging.getLogger(__name__)

METHOD_RESULT_SCHEMA_VERSION = 1
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
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: int = METHOD_RESULT_SCHEMA_VERSION
    item_id: str
    method: str
    output_hash: str
    scores: dict[str, float | None]
    details: dict[str, Any] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    seconds: float = Field(default=0.0, ge=0)

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


def score_item(method: str, function: MethodFunction, item: dspy.Example,
               lm: LMHandle | None = None) -> MethodItemResult:
    """Run one method on one item; the prediction must carry ``scores`` (and may carry ``details``).

    Raises:
        Exception: whatever the LM call raised (the item is not stored).
    """
    started = time.perf_counter()
    context = lm.context() if lm is not None else dspy.context()
    with context, dspy.track_usage() as tracker:
        pred = function(item)
    return MethodItemResult(
        item_id=str(item.item_id), method=method, output_hash=text_hash(item.output),
        scores=dict(pred.scores), details=dict(getattr(pred, "details", {}) or {}),
        usage=usage_from_tracker(tracker), seconds=round(time.perf_counter() - started, 3),
    )


def run_method(
    method: str,
    function: MethodFunction,
    items: Sequence[dspy.Example],
    run_dir: MethodRunDirectory,
    manifest: RunManifest,
    *,
    lm: LMHandle | None = None,
    on_progress: Callable[[MethodItemResult | None, str], None] | None = None,
    max_consecutive_failures: int = 3,
) -> EvaluationOutcome:
    """Score every item not yet in `run_dir` with one method, appending as it goes.

    The same contract as `binaryeval_dspy.runs.evaluate_items`: stored items are
    skipped, a failed item is not stored (a rerun retries it), Ctrl-C keeps what is done,
    and `max_consecutive_failures` failures in a row stop the loop.

    Returns:
        An `EvaluationOutcome` whose ``results`` are `MethodItemResult`s.

    Raises:
        RunStateError: `run_dir` was made with another LM or method configuration.
    """
    started = time.perf_counter()
    manifest = run_dir.start(manifest)
    stored = run_dir.read_results()
    done = {r.item_id for r in stored}
    wanted = {str(i.item_id) for i in items}
    outcome = EvaluationOutcome(results=list(stored), new_items=0, skipped_items=len(done & wanted))
    consecutive = 0
    try:
        for item in items:
            if str(item.item_id) in done:
                if on_progress:
                    on_progress(None, "skipped")
                continue
            try:
                result = score_item(method, function, item, lm)
            except Exception as exc:  # noqa: BLE001 - LM transport errors come in many types; none is a score
                outcome.failed.append((str(item.item_id), f"{type(exc).__name__}: {exc}"))
                logger.warning("%s: item %s failed: %s", method, item.item_id, exc)
                consecutive += 1
                if on_progress:
                    on_progress(None, "failed")
                if consecutive >= max_consecutive_failures:
                    break
                continue
            consecutive = 0
            run_dir.append(result)  # type: ignore[arg-type]
            outcome.results.append(result)  # type: ignore[arg-type]
            outcome.new_items += 1
            if on_progress:
                on_progress(result, "done")
    except KeyboardInterrupt:
        outcome.interrupted = True
    finally:
        outcome.seconds = time.perf_counter() - started
        outcome.manifest = run_dir.finish(manifest, items_done=outcome.new_items,
                                          interrupted=outcome.interrupted or bool(outcome.failed))
    return outcome

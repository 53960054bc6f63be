"""What one resumable run call reports: `EvaluationOutcome`.

`binaryeval_dspy.runs.evaluation.run_resumable` (and so `evaluate_items`, rejudge and the
benchmark's methods) and the batch runs fill one in; the commands print it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from binaryeval_dspy.schemas.item_result import Usage
from binaryeval_dspy.schemas.run_manifest import RunManifest


@dataclass
class EvaluationOutcome:
    """What one resumable run call (`evaluate_items`, `run_resumable`) did.

    Attributes:
        results: every result in the run directory (earlier sessions included), in
            the order of the items given (results of other items first); read from the
            run directory when first used (a run keeps none in memory).
        new_items: items stored by this call (complete or not).
        new_incomplete: of those, the items stored incomplete.
        skipped_items: items already complete from an earlier session, not recomputed.
        resumed_items: items an earlier session left incomplete whose missing
            questions this call asked.
        incomplete: ids of stored items that still have questions without an answer
            (their calls failed: ``error`` verdicts) or that could not be judged at all
            (status ``error``); a rerun asks just those again.
        failed: (item_id, error message) of items whose judging raised and that were
            not stored (a loop without ``failed_result``); a rerun retries them.
        errors: (item_id, error message) of items whose judging raised (e.g. the
            verdict pick failed, a context overflow there) and that were stored as
            status ``error`` rows (`evaluate_items`, the benchmark's methods); they are
            also in `incomplete`, and a rerun retries them.
        empty_outputs: ids of the items given whose stored result has status
            ``empty_output`` (no LM call; counted, never scored).
        interrupted: True if stopped by Ctrl-C (results so far are kept).
        stopped_early: why the loop stopped before the end (``--fail-on-errors``, or
            an endpoint that failed every call of several items in a row), else None.
        seconds: wall time of this call.
        usage: LM calls and tokens spent by this call (cache hits are free).
        lm_answers: questions the LM answered (yes, no or unparsed) in items stored by
            this call; 0 with items stored means no LM call succeeded at all.
        lm_readable: those of `lm_answers` read as yes or no; 0 with answers means the
            LM never answered in a form that could be read (all unparsed).
        first_error: the first failed call's error (type and message) in this call.
        manifest: the run manifest as written at the end.
        cache_padding: what cache padding did in this call (`CachePadding.stats`: items
            seen, items padded, filler tokens), or None when nothing could be padded
            (`binaryeval_dspy.cost.cache_padding.cache_padding_for`).
        pending_items: items whose calls wait in a provider batch (collected by a rerun).
        pending_calls: those calls.
        notes: the engine's lines for the user (e.g. Ray's start-up time).
        problems: what went wrong talking to the provider outside a call (a batch that
            could not be created or polled); a rerun retries it.
        summary: the run's `RunSummary` as written to ``summary.json`` at its end (None for
            a run without scores, aggregation "verdict", or with no item stored).
        engine_name: the engine that sent the calls (``local``, ``live``, ``ray``, ``batch``, ...).
        run_dir, items: where `results` is read from, and in which order.
    """

    results: list[Any] = field(default_factory=list)
    new_items: int = 0
    new_incomplete: int = 0
    skipped_items: int = 0
    resumed_items: int = 0
    incomplete: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    empty_outputs: list[str] = field(default_factory=list)
    interrupted: bool = False
    stopped_early: str | None = None
    seconds: float = 0.0
    usage: Usage = field(default_factory=Usage)
    lm_answers: int = 0
    lm_readable: int = 0
    first_error: str | None = None
    manifest: RunManifest | None = None
    cache_padding: dict[str, Any] | None = None
    pending_items: int = 0
    pending_calls: int = 0
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    summary: Any = None
    engine_name: str | None = None
    run_dir: Any = field(default=None, repr=False)
    items: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_loaded", bool(self.__dict__.get("results")) or self.run_dir is None)

    def __getattribute__(self, name: str) -> Any:
        if name == "results" and not object.__getattribute__(self, "__dict__").get("_loaded", True):
            # read from the run directory on first use: a run holds no result in memory
            object.__setattr__(self, "_loaded", True)
            object.__setattr__(self, "results", self.read_results())
        return object.__getattribute__(self, name)

    def read_results(self) -> list[Any]:
        """Every result stored in the run directory, in the order of the items given (results
        of other items first). Reads the file: a large run is better read with
        ``run_dir.iter_results()``."""
        stored = self.run_dir.read_results(repair=False)
        if self.items is None:
            return stored
        position = {str(item.item_id): index for index, item in enumerate(self.items)}
        others = [r for r in stored if r.item_id not in position]
        ours = sorted((r for r in stored if r.item_id in position), key=lambda r: position[r.item_id])
        return others + ours

    def count_verdicts(self, verdicts: Any) -> None:
        """Count one stored item's verdicts: the LM's answers (`lm_answers`), those read as
        yes/no (`lm_readable`), and the first failed call's error (`first_error`; a
        ``--max-cost`` stop, ``NotAsked:``, is not a failure)."""
        for verdict in verdicts:
            if verdict.source == "lm" and verdict.answered:
                self.lm_answers += 1
                self.lm_readable += verdict.parsed
            elif (verdict.verdict == "error" and self.first_error is None
                  and not (verdict.error or "").startswith("NotAsked:")):
                self.first_error = verdict.error

"""Running BinEval over a list of items into a resumable run directory."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import dspy

from binaryeval_dspy.errors import RunStateError
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.programs.verdict_judge import VerdictJudge
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.item_result import ItemResult, Usage, text_hash
from binaryeval_dspy.schemas.run_manifest import RunManifest

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[ItemResult | None, str], None]


@dataclass
class EvaluationOutcome:
    """What one `evaluate_items` call did.

    Attributes:
        results: every result in the run directory (earlier sessions included).
        new_items: how many items this call judged.
        skipped_items: items already done by an earlier session, not recomputed.
        failed: (item_id, error message) of items that could not be judged; they are
            not stored, so a rerun retries them.
        interrupted: True if stopped by Ctrl-C (results so far are kept).
        seconds: wall time of this call.
        manifest: the run manifest as written at the end.
    """

    results: list[ItemResult]
    new_items: int
    skipped_items: int
    failed: list[tuple[str, str]] = field(default_factory=list)
    interrupted: bool = False
    seconds: float = 0.0
    manifest: RunManifest | None = None


def usage_from_tracker(tracker: object) -> Usage:
    """Sum calls and tokens over every LM a `dspy.track_usage()` tracker saw."""
    calls = prompt = completion = 0
    for entries in getattr(tracker, "usage_data", {}).values():
        for entry in entries:
            calls += 1
            prompt += int(entry.get("prompt_tokens") or entry.get("input_tokens") or 0)
            completion += int(entry.get("completion_tokens") or entry.get("output_tokens") or 0)
    return Usage(lm_calls=calls, prompt_tokens=prompt, completion_tokens=completion)


def judge_item(program: BinEval | VerdictJudge, item: dspy.Example, lm: LMHandle | None = None) -> ItemResult:
    """Run `program` on one item and package the outcome as an `ItemResult`.

    Args:
        program: the BinEval (scores) or VerdictJudge (named verdict, with or
            without scores) to run.
        item: an Example with ``item_id``, ``input``, ``output`` (and optionally
            ``line`` and other fields, copied into ``fields``).
        lm: the LM to use (None: whatever `dspy.configure` set).

    Raises:
        Exception: whatever the LM call raised (the item is not judged).
    """
    started = time.perf_counter()
    context = lm.context() if lm is not None else dspy.context()
    with context, dspy.track_usage() as tracker:
        pred = program(input=item.input, output=item.output)
    extra = {k: v for k, v in item.items() if k not in {"item_id", "input", "output", "line"}}
    return ItemResult(
        item_id=str(item.item_id), line=item.get("line"), output_hash=text_hash(item.output),
        input_hash=text_hash(item.input),
        question_set_hash=program.question_set.content_hash, score_card=pred.get("score_card"),
        verdicts=pred.verdicts, fields=extra, usage=usage_from_tracker(tracker),
        seconds=round(time.perf_counter() - started, 3), named_verdict=pred.get("named_verdict"),
    )


def evaluate_items(
    program: BinEval | VerdictJudge,
    items: Sequence[dspy.Example],
    run_dir: RunDirectory,
    manifest: RunManifest,
    *,
    lm: LMHandle | None = None,
    on_progress: ProgressCallback | None = None,
    max_consecutive_failures: int = 3,
) -> EvaluationOutcome:
    """Judge every item not yet in `run_dir`, appending each result as soon as it is done.

    Args:
        program: the BinEval or VerdictJudge whose question set matches
            ``manifest.question_set_hash`` (a copy is frozen in the run directory).
        items: Examples from `binaryeval_dspy.data.load_items` (unique ``item_id``).
        run_dir: where results go; items already stored there are skipped.
        manifest: the manifest for a new run (checked against an existing one).
        lm: the LM to use (None: the configured one).
        on_progress: called after each item with (result or None, status) where
            status is "done", "skipped" or "failed".
        max_consecutive_failures: stop early after this many failed items in a row
            (an unreachable LM should not burn through the whole list).

    Returns:
        An `EvaluationOutcome`.

    Raises:
        RunStateError: `run_dir` holds a run with another question set, LM or mapping,
            another process is writing it, a stored item's input or output differs from
            the item given now, or a result cannot be written.
    """
    started = time.perf_counter()
    run_dir.lock()
    try:
        run_dir.check(manifest)
        stored = run_dir.read_results()
        check_stored_items(stored, items, manifest)
        manifest = run_dir.start(manifest)
        run_dir.freeze_question_set(program.question_set)
    except BaseException:
        run_dir.unlock()
        raise
    done = {r.item_id for r in stored}
    wanted = {str(i.item_id) for i in items}
    outcome = EvaluationOutcome(results=list(stored), new_items=0, skipped_items=len(done & wanted))
    consecutive = 0
    stopped_by_error = True
    try:
        for item in items:
            if str(item.item_id) in done:
                if on_progress:
                    on_progress(None, "skipped")
                continue
            try:
                result = judge_item(program, item, lm)
            except Exception as exc:  # LM transport errors come in many types; none is an answer
                outcome.failed.append((str(item.item_id), f"{type(exc).__name__}: {exc}"))
                logger.warning("item %s failed: %s", item.item_id, exc)
                consecutive += 1
                if on_progress:
                    on_progress(None, "failed")
                if consecutive >= max_consecutive_failures:
                    logger.error("%d items failed in a row; stopping early", consecutive)
                    break
                continue
            consecutive = 0
            run_dir.append(result)
            outcome.results.append(result)
            outcome.new_items += 1
            if on_progress:
                on_progress(result, "done")
        stopped_by_error = False
    except KeyboardInterrupt:
        outcome.interrupted = True
        stopped_by_error = False
    finally:
        outcome.seconds = time.perf_counter() - started
        try:
            outcome.manifest = run_dir.finish(
                manifest, items_done=outcome.new_items,
                interrupted=outcome.interrupted or bool(outcome.failed) or stopped_by_error,
            )
        finally:
            run_dir.unlock()
    return outcome


def check_stored_items(stored: list[ItemResult], items: Sequence[dspy.Example], manifest: RunManifest) -> None:
    """Refuse to resume when stored results do not belong to the items given now.

    Args:
        stored: results already in the run directory.
        items: the items of this invocation.
        manifest: the manifest this invocation would write.

    Raises:
        RunStateError: a stored result was made with another question set, or an item
            with a stored result now has another input or output (the results would
            silently describe a different text).
    """
    by_id = {str(i.item_id): i for i in items}
    for result in stored:
        if result.question_set_hash != manifest.question_set_hash:
            raise RunStateError(
                f"stored result for item {result.item_id!r} was made with question set "
                f"{result.question_set_hash}, this command uses {manifest.question_set_hash}. "
                "Fix: choose another --out for a new run."
            )
        item = by_id.get(result.item_id)
        if item is None:
            continue
        changed = [name for name, stored_hash, text in (("output", result.output_hash, item.output),
                                                        ("input", result.input_hash, item.input))
                   if stored_hash is not None and stored_hash != text_hash(text)]
        if changed:
            raise RunStateError(
                f"item {result.item_id!r} already has a result, but its {' and '.join(changed)} "
                f"differ from the text judged then (line {item.get('line')} of {manifest.items_path}). "
                "Fix: use another --out for a new run, or re-judge changed outputs explicitly."
            )

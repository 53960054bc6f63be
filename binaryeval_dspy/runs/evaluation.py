"""Running BinEval (or any per-item method) over items into a resumable run directory.

`run_resumable` is the one resumable item loop: `evaluate_items` (evaluate, rejudge,
the benchmark's BinEval) and the benchmark's baseline methods are built on it, and
it builds the run's judging plan (items still to do, each with the calls it still needs)
and has an engine execute it (`binaryeval_dspy.engines`). Every item ends as a
stored row: judged (``scored``, or ``unscored`` when no answer could be read into a
score), ``empty_output`` (nothing to judge: no LM call) or
``error`` (could not be judged: retried by the next run); those rows are made in
`binaryeval_dspy.runs.item_rows`, and the outcome of a run is an `EvaluationOutcome`
(`binaryeval_dspy.runs.evaluation_outcome`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import dspy

from binaryeval_dspy.cost.budget import CostBudget
from binaryeval_dspy.cost.cache_padding import (
    cache_padding_for,
    lm_question_count,
    padding_installed,
)
from binaryeval_dspy.cost.prompt_cache import warm_prefix_in_effect
from binaryeval_dspy.data.text_checks import is_empty_output, item_output_is_empty
from binaryeval_dspy.engines.base import Engine, make_engine
from binaryeval_dspy.engines.item_work import ItemDone, ItemWork, StopItems
from binaryeval_dspy.engines.local import LocalEngine
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.programs.bineval import error_text
from binaryeval_dspy.runs.answer_journal import ANSWERS, AnswerJournal, merge_answers, with_journal
from binaryeval_dspy.runs.evaluation_outcome import EvaluationOutcome
from binaryeval_dspy.runs.item_rows import (
    Judge,
    check_stored_items,
    empty_item_result,
    failed_item_result,
    item_result,
)
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.item_result import ItemResult, Usage
from binaryeval_dspy.schemas.run_manifest import RunManifest
from binaryeval_dspy.settings import RunSettings

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[Any, str], None]

__all__ = ["ProgressCallback", "evaluate_items", "judge_item", "run_resumable"]


def judge_item(program: Judge, item: dspy.Example, lm: LMHandle | None = None) -> ItemResult:
    """Run `program` on one item (sequentially) and package the outcome as an `ItemResult`.

    Args:
        program: the BinEval (scores) or VerdictJudge (named verdict, with or
            without scores) to run.
        item: an Example with ``item_id``, ``input``, ``output`` (and optionally
            ``line`` and other fields, copied into ``fields``).
        lm: the LM to use (None: whatever `dspy.configure` set).

    Returns:
        The item's `ItemResult`; an output for which `is_empty_output` is true gets
        status ``empty_output`` without any LM call.

    Raises:
        Exception: what a non-question step raised that the program does not record
            itself; a failed question call is an ``error`` verdict instead, and a
            VerdictJudge whose pick or pressure test failed gives a status ``error``
            result with every answer kept (``VerdictJudge.item_work``).
    """
    if is_empty_output(item.output):
        return empty_item_result(program, item)
    context = lm.context() if lm is not None else contextlib.nullcontext()
    done: list[ItemDone] = []
    with context:
        LocalEngine().run([item], lambda _i, it: program.item_work(it.input, it.output), done.append)
    if done[0].error is not None:
        raise done[0].error
    return item_result(program, item, done[0], lm=lm.name if lm is not None else None)


def _lm_answered_none(result: ItemResult) -> bool:
    """True when every LM question of the item failed (an endpoint that is down)."""
    asked = [v for v in result.verdicts if v.source == "lm"]
    return bool(asked) and not any(v.answered for v in asked)


def evaluate_items(
    program: Judge,
    items: Sequence[dspy.Example],
    run_dir: RunDirectory,
    manifest: RunManifest,
    *,
    lm: LMHandle | None = None,
    settings: RunSettings | None = None,
    on_progress: ProgressCallback | None = None,
    max_consecutive_failures: int = 3,
    seed_results: dict[str, ItemResult] | None = None,
    budget: CostBudget | None = None,
    engine: Engine | None = None,
) -> EvaluationOutcome:
    """Judge every item not yet complete in `run_dir`, storing each result as soon as it is done.

    A question whose LM call fails gets an ``error`` verdict; the item is stored anyway
    with every answer it got, marked incomplete. Rerunning the same command asks only
    the questions without an answer (yes, no and unparsed answers are kept). An item
    whose output is empty (`is_empty_output`) is stored with status ``empty_output``
    and never reaches the program; an item that could not be judged (every LM question
    failed, or judging it raised) is stored with status ``error``, the LM's name and the
    error (`failed_item_result`), and is retried by a rerun.

    Args:
        program: the BinEval or VerdictJudge whose question set matches
            ``manifest.question_set_hash`` (a copy is frozen in the run directory).
        items: Examples from `binaryeval_dspy.data.load_items` (unique ``item_id``).
        run_dir: where results go; complete items already stored there are skipped.
        manifest: the manifest for a new run (checked against an existing one).
        lm: the LM to use (None: the configured one). An embedded (in-process) LM
            always runs one call at a time.
        settings: how to judge (`RunSettings`: engine, concurrency, ``max_cost``,
            ``warm_prefix``, ``cache_padding``, ``price_model``, ``fail_on_errors``);
            None: the defaults. With ``fail_on_errors`` the run stops at the first item
            with a failed call (it is stored, the calls in flight are dropped); the
            caller turns it into a failing exit.
        on_progress: called after each item with (result or None, status) where
            status is "done", "incomplete", "empty_output", "skipped" or "failed" (an
            item that raised; its ``error`` row is the result).
        max_consecutive_failures: stop early after this many items in a row whose LM
            calls all failed (an unreachable LM should not burn through the list).
        seed_results: item id -> an incomplete result from elsewhere (a re-judge's
            previous run) to continue from when `run_dir` has none for that item: its
            answers are kept and only its unanswered questions are asked.
        budget: a `CostBudget` asked before every LM call (e.g. one shared by several
            runs); None: ``settings.max_cost``'s (`RunSettings.cost_budget`), if any. When
            it stops the run, calls in flight finish, their items are stored (questions
            not asked as ``error`` verdicts, asked by a rerun) and ``stopped_early`` says why.
        engine: what executes the plan (`binaryeval_dspy.engines.base.Engine`); None: the
            one `settings` names (`make_engine`).

    Each item's first question goes alone before the rest when ``settings.warm_prefix``
    says so (`binaryeval_dspy.cost.prompt_cache.warm_prefix_in_effect`), so a provider's
    prompt cache is written before it is read. An item's shared prompt prefix is padded up
    to the provider's cache minimum where that is cheaper (``settings.cache_padding``;
    `binaryeval_dspy.cost.cache_padding`):
    only for hosted OpenAI and Anthropic models with cache prices, and only when each item's
    first question finishes before the others start (`warm_prefix`, or one call at a time).
    What it padded is in the outcome's ``cache_padding``.

    Returns:
        An `EvaluationOutcome`.

    Raises:
        RunStateError: `run_dir` holds a run with another question set, LM or mapping,
            another process is writing it, a stored item's input or output differs from
            the item given now, or a result cannot be written.
        LMConfigError: ``settings.max_cost`` for an LM without a price.
        ConfigError: an engine that cannot run with `lm` (`make_engine`).
    """
    settings = settings or RunSettings()
    in_flight = settings.in_flight(lm)
    padding = cache_padding_for(lm, calls_per_item=lm_question_count(program.question_set),
                                policy=settings.cache_padding, price_model=settings.price_model_for(lm),
                                warm=in_flight == 1 or warm_prefix_in_effect(lm, settings.warm_prefix, in_flight))
    journal = AnswerJournal(run_dir.path / ANSWERS, manifest.question_set_hash)
    recovered: dict[str, Usage] = {}  # usage of journaled answers and failed calls an earlier session spent

    def plan(item: dspy.Example, stored: ItemResult | None) -> ItemWork:
        kept = stored.verdicts if stored is not None else ()
        recovered[str(item.item_id)] = journal.recovered_usage(item, kept)
        previous = merge_answers(kept, journal.answers(item))
        return with_journal(journal, item, program.item_work(item.input, item.output, previous))

    def with_recovered(item: dspy.Example, done: ItemDone) -> ItemDone:
        """`done` with the usage its journaled answers cost in an earlier session added in."""
        extra = recovered.pop(str(item.item_id), None)
        return dataclasses.replace(done, usage=done.usage + extra) if extra is not None else done

    def on_stored(result: Any, status: str) -> None:
        """An item's row is stored: its journal lines are now in it (answers and usage; a
        ``failed`` row holds the usage but not the answers, which stay for the rerun)."""
        if result is not None:
            journal.drop([result.item_id], keep_answers=status == "failed")
        if on_progress is not None:
            on_progress(result, status)

    with padding_installed(lm, padding):
        outcome = run_resumable(
            items, run_dir, manifest,
            plan=plan,
            package=lambda item, done, stored: item_result(program, item, with_recovered(item, done), stored,
                                                           lm=manifest.lm),
            empty_result=lambda item: empty_item_result(program, item),
            failed_result=lambda item, done, stored: failed_item_result(program, item, with_recovered(item, done),
                                                                        stored, lm=manifest.lm),
            check_stored=check_stored_items, freeze=lambda: run_dir.freeze_question_set(program.question_set),
            lm=lm, settings=settings, on_progress=on_stored,
            max_consecutive_failures=max_consecutive_failures, seed_results=seed_results,
            budget=budget, engine=engine,
        )
    journal.drop(r.item_id for r in outcome.results if getattr(r, "complete", True))
    if padding is not None:
        outcome.cache_padding = padding.stats()
    return outcome


def run_resumable(
    items: Sequence[dspy.Example],
    run_dir: RunDirectory,
    manifest: RunManifest,
    *,
    plan: Callable[[dspy.Example, Any], ItemWork],
    package: Callable[[dspy.Example, ItemDone, Any], Any],
    empty_result: Callable[[dspy.Example], Any] | None = None,
    failed_result: Callable[[dspy.Example, ItemDone, Any], Any] | None = None,
    check_stored: Callable[[list[Any], Sequence[dspy.Example], RunManifest], None] | None = None,
    freeze: Callable[[], None] | None = None,
    lm: LMHandle | None = None,
    settings: RunSettings | None = None,
    on_progress: ProgressCallback | None = None,
    max_consecutive_failures: int = 3,
    seed_results: dict[str, Any] | None = None,
    budget: CostBudget | None = None,
    engine: Engine | None = None,
) -> EvaluationOutcome:
    """The resumable item loop over a run directory, for any kind of per-item result.

    Takes the run's lock, checks the manifest and stored results, skips complete items,
    hands incomplete ones their stored result to continue from (the judging plan), has an
    engine execute the rest (`binaryeval_dspy.engines.base.Engine`) and records each result
    as soon as its item completes. At the end the results file is rewritten in item order,
    so it does not depend on the engine or its concurrency.

    Args:
        items: the items (unique ``item_id``).
        run_dir: the run directory (its ``result_model`` is the result type).
        manifest: the manifest this invocation would write.
        plan: ``plan(item, stored_result_or_None) -> ItemWork`` whose finish returns
            what `package` needs.
        package: ``package(item, ItemDone, stored_result_or_None) -> result`` to store.
            A result with ``complete == False`` is stored and counted as incomplete.
        empty_result: ``empty_result(item) -> result`` for an item whose ``output`` is
            empty (`is_empty_output`): stored (complete) without `plan` being called,
            so no program and no LM sees it. None: such items are planned like others.
        failed_result: ``failed_result(item, ItemDone, stored_result_or_None) -> result``
            for an item whose work raised (``ItemDone.error``): stored (it should be
            incomplete, so a rerun retries it) and listed in ``errors``. None: a failed
            item is not stored and is listed in ``failed``.
        check_stored: refuses stored results that do not belong to these items.
        freeze: called once the run is started (e.g. to keep the question set).
        lm, settings, on_progress, max_consecutive_failures, seed_results, budget,
            engine: as in `evaluate_items`.

    Returns:
        An `EvaluationOutcome`.

    Raises:
        RunStateError: as `evaluate_items`.
    """
    started = time.perf_counter()
    settings = settings or RunSettings()
    fail_on_errors = settings.fail_on_errors
    warm_prefix = warm_prefix_in_effect(lm, settings.warm_prefix, settings.in_flight(lm))
    if budget is None:
        budget = settings.cost_budget(lm)
    if engine is None:
        engine = make_engine(settings, lm)
    run_dir.lock()
    try:
        run_dir.check(manifest)
        stored = run_dir.read_results()
        if check_stored is not None:
            check_stored(stored, items, manifest)
        manifest = run_dir.start(manifest)
        if freeze is not None:
            freeze()
    except BaseException:
        run_dir.unlock()
        raise
    by_id = {r.item_id: r for r in stored}
    seeds = {i: r for i, r in (seed_results or {}).items() if i not in by_id}
    complete = {i for i, r in by_id.items() if getattr(r, "complete", True)}
    wanted = {str(i.item_id) for i in items}
    todo = [i for i in items if str(i.item_id) not in complete]
    outcome = EvaluationOutcome(results=[], new_items=0, skipped_items=len(complete & wanted),
                                resumed_items=sum(1 for i in todo if str(i.item_id) in by_id))
    if on_progress:
        for _ in range(outcome.skipped_items):
            on_progress(None, "skipped")
    consecutive = 0
    stopped_by_error = True
    appended = False

    def store(item_id: str, result: Any) -> None:
        nonlocal appended
        by_id[item_id] = result  # first: an interrupt during the append must not leave it out of the rewrite
        appended = True
        run_dir.append(result)
        outcome.new_items += 1

    def on_done(done: ItemDone) -> None:
        nonlocal consecutive
        item = todo[done.index]
        item_id = str(item.item_id)
        outcome.usage += done.usage
        if done.result is _EMPTY_OUTPUT and done.error is None:
            result = empty_result(item)  # type: ignore[misc]
            store(item_id, result)
            if on_progress:
                on_progress(result, "empty_output")
            return  # says nothing about the endpoint: the failure streak is left as it is
        if done.error is not None:
            message = error_text(done.error)
            (outcome.errors if failed_result is not None else outcome.failed).append((item_id, message))
            logger.warning("item %s failed: %s", item_id, done.error)
            if outcome.first_error is None:
                outcome.first_error = message
            failed_row = None
            if failed_result is not None:
                failed_row = failed_result(item, done, by_id.get(item_id) or seeds.get(item_id))
                store(item_id, failed_row)
                outcome.incomplete.append(item_id)
            consecutive += 1
            if on_progress:
                on_progress(failed_row, "failed")
            if failed_row is not None and fail_on_errors:
                outcome.stopped_early = f"item {item_id} could not be judged and fail_on_errors is set"
                raise StopItems
            if consecutive >= max_consecutive_failures:
                outcome.stopped_early = f"{consecutive} items in a row could not be judged"
                raise StopItems
            return
        result = package(item, done, by_id.get(item_id) or seeds.get(item_id))
        store(item_id, result)
        is_complete = getattr(result, "complete", True)
        outcome.count_verdicts(getattr(result, "verdicts", ()))
        if getattr(result, "status", None) == "error" and outcome.first_error is None:
            outcome.first_error = result.error  # e.g. a verdict pick that failed after every question was answered
        if not is_complete:
            outcome.incomplete.append(item_id)
        if on_progress:
            on_progress(result, "done" if is_complete else "incomplete")
        consecutive = consecutive + 1 if isinstance(result, ItemResult) and _lm_answered_none(result) else 0
        if not is_complete and fail_on_errors:
            outcome.stopped_early = f"item {item_id} has failed LM calls and fail_on_errors is set"
            raise StopItems
        if consecutive >= max_consecutive_failures:
            outcome.stopped_early = (f"every LM call of {consecutive} items in a row failed; the endpoint looks "
                                     "unreachable")
            raise StopItems

    def planned(_index: int, item: dspy.Example) -> ItemWork:
        if empty_result is not None and item_output_is_empty(item):
            return ItemWork(calls=[], finish=lambda _results: _EMPTY_OUTPUT)  # no program, no LM call
        work = plan(item, by_id.get(str(item.item_id)) or seeds.get(str(item.item_id)))
        if warm_prefix and len(work.calls) > 1:
            work.warm_first = True  # the first question writes the prompt cache the others read
        return work

    context = lm.context() if lm is not None else contextlib.nullcontext()
    try:
        with context:
            engine.run(todo, planned, on_done, budget=budget)
        stopped_by_error = False
        if budget is not None and budget.stop_reason:
            outcome.stopped_early = budget.stop_reason  # the cause, even when an unasked question tripped another stop
    except KeyboardInterrupt:
        outcome.interrupted = True
        stopped_by_error = False
    finally:
        outcome.seconds = time.perf_counter() - started
        try:
            ordered = _in_item_order(list(by_id.values()), items)
            if appended and not outcome.interrupted:  # item order is restored by the next uninterrupted run
                run_dir.rewrite_results(ordered)
            outcome.results = ordered
            outcome.incomplete = [r.item_id for r in ordered
                                  if r.item_id in wanted and not getattr(r, "complete", True)]
            outcome.empty_outputs = [r.item_id for r in ordered
                                     if r.item_id in wanted and getattr(r, "status", None) == "empty_output"]
            outcome.manifest = run_dir.finish(
                manifest, items_done=outcome.new_items,
                interrupted=(outcome.interrupted or bool(outcome.failed) or bool(outcome.incomplete)
                             or stopped_by_error or outcome.stopped_early is not None),
            )
        finally:
            run_dir.unlock()
    return outcome


_EMPTY_OUTPUT = object()  # what the finish of an empty-output item returns (no call was made)



def _in_item_order(results: list[Any], items: Sequence[dspy.Example]) -> list[Any]:
    """Results of other items first (in stored order), then those of `items` in item order."""
    position = {str(item.item_id): index for index, item in enumerate(items)}
    others = [r for r in results if r.item_id not in position]
    ours = sorted((r for r in results if r.item_id in position), key=lambda r: position[r.item_id])
    return others + ours

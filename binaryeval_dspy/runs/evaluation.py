"""Running BinEval (or any planned program) over items into a resumable run directory.

`run_resumable` is the one resumable item loop: `evaluate_items` (evaluate, rejudge, the
pytest plugin, the benchmark's BinEval) and the benchmark's baseline methods are built on
it. It opens the run directory (lock, manifest, the frozen question set), reads what is
stored (`binaryeval_dspy.runs.result_index`), gives each item still to do its stored and
journaled answers, and has the plan runner (`binaryeval_dspy.engines.plan_runner`) send the
item's calls through the run's engine. The recorder's parts are here and in the answer
journal: every answer is journaled as it arrives, every finished item is appended to
``results.jsonl`` as it is done (in completion order; the file is put back in item order
once at the end), and the manifest is written when the run starts and when it ends.
Nothing is held per item beyond the items still open, so memory does not grow with the
number of items.

Every item ends as a stored row: judged (``scored``, or ``unscored`` when no answer could
be read into a score), ``empty_output`` (nothing to judge: no LM call) or ``error`` (could
not be judged: retried by the next run); those rows are made in
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
from binaryeval_dspy.cost.cache_padding import cache_padding_for, lm_question_count, padding_installed
from binaryeval_dspy.lm.prompt_cache import warm_prefix_in_effect
from binaryeval_dspy.data.text_checks import item_output_is_empty
from binaryeval_dspy.engines.base import Engine, make_engine
from binaryeval_dspy.engines.in_process import run_in_process
from binaryeval_dspy.engines.plan_runner import ItemOutcome, PlanRunner, StopRun
from binaryeval_dspy.lm.calls import error_text
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.programs.judge_panel import judge_price_models
from binaryeval_dspy.runs.answer_journal import ANSWERS, AnswerJournal, merge_answers
from binaryeval_dspy.runs.evaluation_outcome import EvaluationOutcome
from binaryeval_dspy.runs.item_rows import (
    Judge,
    check_stored_items,
    empty_item_result,
    failed_item_result,
    item_result,
)
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.runs.result_index import ResultIndex
from binaryeval_dspy.runs.run_summary import RunSummary, SummaryBuilder, UnusedVerdicts, write_summary
from binaryeval_dspy.schemas.item_result import ItemResult, Usage
from binaryeval_dspy.schemas.run_manifest import RunManifest
from binaryeval_dspy.settings import RunSettings

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[Any, str], None]

__all__ = ["ProgressCallback", "evaluate_items", "judge_item", "record_summary", "run_resumable"]


def judge_item(program: Judge, item: dspy.Example, lm: LMHandle | None = None) -> ItemResult:
    """Run `program` on one item (sequentially) and package the outcome as an `ItemResult`.

    Args:
        program: the BinEval (scores) or VerdictJudge (named verdict, with or
            without scores) to run.
        item: an Example with ``item_id``, ``input``, ``output`` (and optionally
            ``line`` and other fields, copied into ``fields``).
        lm: the LM to use (None: whatever `dspy.configure` set).

    Returns:
        The item's `ItemResult`; an output that is empty gets status ``empty_output``
        without any LM call.

    Raises:
        Exception: what planning or finishing the item raised (a failed question call is an
            ``error`` verdict instead; a VerdictJudge whose pick or pressure test failed
            gives a status ``error`` result with every answer kept).
    """
    if item_output_is_empty(item):
        return empty_item_result(program, item)
    context = lm.context() if lm is not None else contextlib.nullcontext()
    started = time.perf_counter()
    with context, dspy.track_usage() as tracker:
        pred = run_in_process(program, program.begin(item), lm=lm.lm if lm is not None else None)
    from binaryeval_dspy.lm.usage import usage_from_entries

    done = ItemOutcome(index=0, item=item, result=pred, error=None, usage=usage_from_entries(dict(tracker.usage_data)),
                       seconds=round(time.perf_counter() - started, 3))
    return item_result(program, item, done, lm=lm.name if lm is not None else None)


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
            with a failed call (it is stored, the calls in flight finish); the caller turns
            it into a failing exit.
        on_progress: called after each item with (result or None, status) where
            status is "done", "incomplete", "empty_output", "skipped" or "failed" (an
            item that raised; its ``error`` row is the result).
        max_consecutive_failures: stop early after this many items in a row whose LM
            calls all failed (an unreachable LM should not burn through the list).
        seed_results: item id -> an incomplete result from elsewhere (a re-judge's
            previous run) to continue from when `run_dir` has none for that item: its
            answers are kept and only its unanswered questions are asked.
        budget: a `CostBudget` asked before every request (e.g. one shared by several
            runs); None: ``settings.max_cost``'s (`RunSettings.cost_budget`), if any. When
            it stops the run, calls in flight finish, their items are stored (questions
            not asked as ``error`` verdicts, asked by a rerun) and ``stopped_early`` says why.
        engine: what sends the plan's calls (`binaryeval_dspy.engines.base.Engine`); None:
            the one `settings` names (`make_engine`).

    Each item's first question goes alone before the rest when ``settings.warm_prefix``
    says so (`binaryeval_dspy.lm.prompt_cache.warm_prefix_in_effect`), so a provider's
    prompt cache is written before it is read. An item's shared prompt prefix is padded up
    to the provider's cache minimum where that is cheaper (``settings.cache_padding``;
    `binaryeval_dspy.cost.cache_padding`): only for hosted OpenAI and Anthropic models with
    cache prices, and only when each item's first question finishes before the others start
    (`warm_prefix`, or one call at a time). What it padded is in the outcome's ``cache_padding``.

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

    def begin(item: dspy.Example, stored: ItemResult | None) -> Any:
        kept = stored.verdicts if stored is not None else ()
        recovered[str(item.item_id)] = journal.recovered_usage(item, kept)
        return program.begin(item, merge_answers(kept, journal.answers(item)))

    def with_recovered(item: dspy.Example, done: ItemOutcome) -> ItemOutcome:
        """`done` with the usage its journaled answers cost in an earlier session added in."""
        extra = recovered.pop(str(item.item_id), None)
        return dataclasses.replace(done, usage=done.usage + extra) if extra is not None else done

    def on_answer(item: dspy.Example, record: Any, usage: Usage) -> None:
        journal.write(item, record, usage)

    def on_stored(item: dspy.Example, result: Any, status: str) -> None:
        """An item's row is stored: its journal lines are now in it (answers and usage; a
        ``failed`` row holds the usage but not the answers, which stay for the rerun)."""
        if result is not None:
            journal.stored(item, keep_answers=status == "failed")
        if on_progress is not None:
            on_progress(result, status)

    try:
        with padding_installed(lm, padding):
            outcome = run_resumable(
                items, run_dir, manifest, program=program, begin=begin,
                package=lambda item, done, stored: item_result(program, item, with_recovered(item, done), stored,
                                                               lm=manifest.lm),
                empty_result=lambda item: empty_item_result(program, item),
                failed_result=lambda item, done, stored: failed_item_result(program, item, with_recovered(item, done),
                                                                            stored, lm=manifest.lm),
                check_stored=check_stored_items, freeze=lambda: run_dir.freeze_question_set(program.question_set),
                lm=lm, settings=settings, on_progress=on_stored, on_answer=on_answer,
                max_consecutive_failures=max_consecutive_failures, seed_results=seed_results,
                budget=budget, engine=engine, end_config=lambda: endpoint_outcome(lm, padding),
            )
    finally:
        journal.compact()
    if padding is not None:
        outcome.cache_padding = padding.stats()
    if getattr(program, "aggregation", "score") != "verdict":  # a run with scores: its summary
        outcome.summary = record_summary(run_dir, program.question_set, lm=lm, name=manifest.lm, settings=settings,
                                         item_ids=[str(i.item_id) for i in items], include_stored=True,
                                         batch=outcome.engine_name == "batch")
    return outcome


def endpoint_outcome(lm: LMHandle | None, padding: Any = None) -> dict[str, Any]:
    """What a run learned about its endpoint, for the manifest's ``config``: the adapter's
    counters (``adapter_stats``: re-sent requests, parse failures), the JSON-schema form the
    endpoint accepted (``schema_dialect``) and, when prompts could be padded for the
    provider's cache, what was padded in this session (``cache_padding_stats``,
    `CachePadding.stats`; the policy is ``cache_padding``). Empty without an LM handle."""
    if lm is None:
        return {}
    out: dict[str, Any] = {"adapter_stats": lm.adapter_stats.as_dict() if lm.adapter_stats is not None else {}}
    dialect = getattr(lm.lm, "schema_dialect", None)
    if dialect:
        out["schema_dialect"] = dialect
    if padding is not None:
        out["cache_padding_stats"] = padding.stats()
    return out


def record_summary(run_dir: RunDirectory, question_set: Any, *, lm: LMHandle | None, name: str,
                   settings: RunSettings | None = None, item_ids: Sequence[str] | None = None,
                   include_stored: bool = False, batch: bool = False) -> RunSummary | None:
    """Write the run's ``summary.json`` and ``summary.md`` from what ``results.jsonl`` holds,
    reading the file once without holding its results (`SummaryBuilder`).

    Called by `evaluate_items` at the end of every run with scores (every front end, the
    CLI, the Python API, the pytest plugin, rejudge and batch, therefore leaves the same
    files), and by rejudge again once it has carried the unchanged items over.

    Args:
        run_dir: the run directory (its results are read, never changed).
        question_set: the run's questions (explanations are checked against them).
        lm: the run's LM (None: the configured one); says whether it is embedded and, with
            `settings`, how it is priced and how many calls were in flight.
        name: the LM's display name, as the manifest records it.
        settings: the run's settings (None: the defaults).
        item_ids: summarize only these items (None: every stored item); those without a
            stored result are counted as ``items_not_stored``.
        include_stored: summarize every stored item, `item_ids` or not (`evaluate_items`: a
            rerun given fewer items, e.g. a smaller `limit`, still describes every item its
            run directory holds); `item_ids` then only says which items were given.
        batch: the calls went through a provider's batch API (batch prices).

    Returns:
        The `RunSummary` written, or None when no item of `item_ids` is stored (nothing is written).

    Raises:
        InputError: a complete line of ``results.jsonl`` is not a valid result (file and line named).
    """
    settings = settings or RunSettings()
    wanted = set(item_ids) if item_ids is not None else None

    seen: set[str] = set()

    def build(results: Any) -> SummaryBuilder | None:
        builder = SummaryBuilder(question_set)
        seen.clear()
        for result in results:
            if wanted is not None and result.item_id not in wanted and not include_stored:
                continue
            if result.item_id in seen:
                return None  # stored twice (an interrupted run): the later line counts, read below
            seen.add(result.item_id)
            builder.add(result)
        return builder

    builder = build(run_dir.iter_results()) or build(run_dir.read_results(repair=False))
    if builder is None or not builder.items:
        return None
    summary = builder.summary(lm=name, embedded=lm.embedded if lm is not None else None,
                              price_model=settings.price_model_for(lm), batch=batch,
                              in_flight=settings.in_flight(lm),
                              judge_prices=judge_price_models(settings) if settings.judges else None)
    if wanted is not None:
        summary.items_not_stored = len(wanted - seen)  # never reached: said beside the figures
        replay = getattr(lm, "replay", None)  # a replay: its file's rows for items or questions the run lacks
        unused = replay.unused(wanted | seen, [q.id for q in question_set.questions]) if replay is not None else None
        summary.verdicts_unused = UnusedVerdicts(**unused) if unused is not None else None
    write_summary(summary, run_dir.path)
    return summary


def run_resumable(
    items: Sequence[dspy.Example],
    run_dir: RunDirectory,
    manifest: RunManifest,
    *,
    program: Any,
    package: Callable[[dspy.Example, ItemOutcome, Any], Any],
    begin: Callable[[dspy.Example, Any], Any] | None = None,
    empty_result: Callable[[dspy.Example], Any] | None = None,
    failed_result: Callable[[dspy.Example, ItemOutcome, Any], Any] | None = None,
    check_stored: Callable[[list[Any], Sequence[dspy.Example], RunManifest], None] | None = None,
    freeze: Callable[[], None] | None = None,
    lm: LMHandle | None = None,
    settings: RunSettings | None = None,
    on_progress: Callable[[dspy.Example, Any, str], None] | None = None,
    on_answer: Callable[[dspy.Example, Any, Usage], None] | None = None,
    max_consecutive_failures: int = 3,
    seed_results: dict[str, Any] | None = None,
    budget: CostBudget | None = None,
    engine: Engine | None = None,
    end_config: Callable[[], dict[str, Any]] | None = None,
) -> EvaluationOutcome:
    """The resumable item loop over a run directory, for any planned program and result type.

    Takes the run's lock, checks the manifest and stored results, skips complete items,
    gives incomplete ones their stored result to continue from, has the plan runner send
    the rest through an engine (`binaryeval_dspy.engines.plan_runner.PlanRunner`) and
    appends each result as soon as its item is finished. At the end the results file is
    put back in item order (once, reading offsets), so it does not depend on the engine or
    its concurrency.

    Args:
        items: the items (unique ``item_id``).
        run_dir: the run directory (its ``result_model`` is the result type).
        manifest: the manifest this invocation would write.
        program: the planned program (`PlannedProgram`).
        package: ``package(item, ItemOutcome, stored_result_or_None) -> result`` to store.
            A result with ``complete == False`` is stored and counted as incomplete.
        begin: ``begin(item, stored_result_or_None) -> state`` (default: ``program.begin(item)``).
        empty_result: ``empty_result(item) -> result`` for an item whose ``output`` is
            empty (`is_empty_output`): stored (complete) without the program seeing it.
            None: such items are planned like others.
        failed_result: ``failed_result(item, ItemOutcome, stored_result_or_None) -> result``
            for an item whose planning or finish raised: stored (it should be incomplete,
            so a rerun retries it) and listed in ``errors``. None: a failed item is not
            stored and is listed in ``failed``.
        check_stored: refuses stored results that do not belong to these items.
        freeze: called once the run is started (e.g. to keep the question set).
        on_progress: ``on_progress(item, result_or_None, status)`` after each item.
        on_answer: ``on_answer(item, record, usage)`` as each answer comes (the journal).
        lm, settings, max_consecutive_failures, seed_results, budget, engine: as in
            `evaluate_items`.
        end_config: ``end_config() -> dict`` merged into the manifest's ``config`` when the
            run ends, before the manifest is written (what was learned during the run).

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
    if getattr(engine, "answers_at_once", False):  # a batch's failures arrive together: stopping saves nothing
        max_consecutive_failures = 10**9
    run_dir.lock()
    try:
        run_dir.check(manifest)
        stored = ResultIndex.read(run_dir)
        if check_stored is not None:
            check_stored(stored.checkable(), items, manifest)
        manifest = run_dir.start(manifest)
        bind = getattr(engine, "bind", None)
        if bind is not None:  # an engine that keeps state in the run directory (batch)
            bind(run_dir, manifest)
        if freeze is not None:
            freeze()
    except BaseException:
        run_dir.unlock()
        raise
    seeds = {i: r for i, r in (seed_results or {}).items() if i not in stored}
    wanted = {str(i.item_id) for i in items}
    todo = [i for i in items if not stored.is_complete(str(i.item_id))]
    outcome = EvaluationOutcome(results=[], new_items=0, skipped_items=sum(stored.is_complete(i) for i in wanted),
                                resumed_items=0, run_dir=run_dir,
                                items=items, engine_name=getattr(engine, "name", None))
    if on_progress:
        for _ in range(outcome.skipped_items):
            on_progress(None, None, "skipped")
    state = {"consecutive": 0}
    writer = stored.writer()

    def store(item: dspy.Example, result: Any) -> None:
        writer.append(result)
        outcome.new_items += 1
        outcome.new_incomplete += not getattr(result, "complete", True)
        outcome.resumed_items += str(item.item_id) in stored  # continued from an earlier session's answers

    def previous_of(item: dspy.Example) -> Any:
        item_id = str(item.item_id)
        return stored.incomplete(item_id) or seeds.get(item_id)

    def on_done(done: ItemOutcome) -> None:
        item = done.item
        item_id = str(item.item_id)
        outcome.usage += done.usage
        if done.pending:
            outcome.pending_items += 1
            outcome.pending_calls += done.pending
            if on_progress:
                on_progress(item, None, "pending")
            return
        if done.error is not None:
            message = error_text(done.error)
            (outcome.errors if failed_result is not None else outcome.failed).append((item_id, message))
            logger.warning("item %s failed: %s", item_id, done.error)
            if outcome.first_error is None:
                outcome.first_error = message
            failed_row = None
            if failed_result is not None:
                failed_row = failed_result(item, done, previous_of(item))
                store(item, failed_row)
                outcome.incomplete.append(item_id)
            state["consecutive"] += 1
            if on_progress:
                on_progress(item, failed_row, "failed")
            if failed_row is not None and fail_on_errors:
                outcome.stopped_early = f"item {item_id} could not be judged and fail_on_errors is set"
                raise StopRun(outcome.stopped_early)
            if state["consecutive"] >= max_consecutive_failures:
                outcome.stopped_early = f"{state['consecutive']} items in a row could not be judged"
                raise StopRun(outcome.stopped_early)
            return
        result = (empty_result(item) if done.result is _EMPTY and empty_result is not None
                  else package(item, done, previous_of(item)))
        store(item, result)
        is_complete = getattr(result, "complete", True)
        outcome.count_verdicts(getattr(result, "verdicts", ()))
        if getattr(result, "status", None) == "error" and outcome.first_error is None:
            outcome.first_error = result.error  # e.g. a verdict pick that failed after every question was answered
        if getattr(result, "status", None) == "empty_output":
            outcome.empty_outputs.append(item_id)
        if not is_complete:
            outcome.incomplete.append(item_id)
        if on_progress:
            on_progress(item, result, "done" if is_complete else "incomplete")
        if getattr(result, "status", None) == "empty_output":
            return  # says nothing about the endpoint: the failure streak is left as it is
        state["consecutive"] = (state["consecutive"] + 1
                                if isinstance(result, ItemResult) and _lm_answered_none(result) else 0)
        if not is_complete and fail_on_errors:
            outcome.stopped_early = f"item {item_id} has failed LM calls and fail_on_errors is set"
            raise StopRun(outcome.stopped_early)
        if state["consecutive"] >= max_consecutive_failures:
            outcome.stopped_early = (f"every LM call of {state['consecutive']} items in a row failed; the endpoint "
                                     "looks unreachable")
            raise StopRun(outcome.stopped_early)

    def begin_item(_index: int, item: dspy.Example) -> Any:
        if empty_result is not None and item_output_is_empty(item):
            return _Empty(item)
        stored_row = previous_of(item)
        return begin(item, stored_row) if begin is not None else program.begin(item)

    planned = _EmptyAware(program, empty_result)
    runner = PlanRunner(planned, enumerate(todo), begin=begin_item, on_done=on_done,
                        on_answer=(lambda run, _call, answer, record: on_answer(run.item, record, answer.usage)
                                   if on_answer is not None and record is not None else None),
                        warm_first=warm_prefix, dedupe=getattr(engine, "dedupe", True),
                        open_items=getattr(engine, "open_items", None) or max(16, 4 * settings.in_flight(lm)))
    context = lm.context() if lm is not None else contextlib.nullcontext()
    stopped_by_error = True
    try:
        with context:
            runner.run(engine, budget=budget)
        stopped_by_error = False
        if budget is not None and budget.stop_reason:
            budget.calls_left = runner.calls_left()
            outcome.stopped_early = budget.stop_reason  # the cause, even when an unasked question tripped another stop
        elif runner.stop_reason is not None and outcome.stopped_early is None:
            outcome.stopped_early = runner.stop_reason
    except KeyboardInterrupt:
        outcome.interrupted = True
        stopped_by_error = False
    finally:
        outcome.seconds = time.perf_counter() - started
        outcome.notes.extend(getattr(engine, "notes", ()))
        outcome.problems.extend(getattr(engine, "problems", ()))
        try:
            writer.close(order=None if outcome.interrupted else [str(i.item_id) for i in items])
            outcome.incomplete = [i for i in writer.incomplete_ids() if i in wanted]
            outcome.empty_outputs = [i for i in writer.empty_output_ids() if i in wanted]
            if end_config is not None:
                manifest.config.update(end_config())
            outcome.manifest = run_dir.finish(
                manifest, items_done=outcome.new_items,
                interrupted=(outcome.interrupted or bool(outcome.failed) or bool(outcome.incomplete)
                             or stopped_by_error or outcome.stopped_early is not None or outcome.pending_items > 0),
            )
        finally:
            run_dir.unlock()
    return outcome


@dataclasses.dataclass
class _Empty:
    """The state of an item with an empty output: no call; its row is the empty result."""

    item: Any


class _EmptyAware:
    """`program`, with items whose output is empty finished at once as their empty result."""

    def __init__(self, program: Any, empty_result: Callable[[Any], Any] | None) -> None:
        self.program = program
        self.empty_result = empty_result

    def next_calls(self, state: Any) -> list:
        return [] if isinstance(state, _Empty) else self.program.next_calls(state)

    def take(self, state: Any, call: Any, answer: Any) -> Any:
        return self.program.take(state, call, answer)

    def unsent(self, state: Any, call: Any, reason: str) -> Any:
        return self.program.unsent(state, call, reason)

    def finish(self, state: Any) -> Any:
        return _EMPTY if isinstance(state, _Empty) else self.program.finish(state)


_EMPTY = object()  # the result of an empty-output item (its row is made by `empty_result`)

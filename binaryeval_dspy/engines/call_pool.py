"""The one item loop: independent LM calls of many items, with N calls in flight.

Every command that judges items (``evaluate``, ``rejudge``, the benchmark methods,
the optimizer's item runs) and `BinEval.forward` itself go through `map_items`; the
resumable run directories built on it are in `binaryeval_dspy.runs`. An item is planned as an
`ItemWork`: independent calls (BinEval: one per binary question) and a `finish` step
that combines their results (and may call the LM again, e.g. a verdict pick).

* ``concurrency == 1``: items run one after the other and one item's calls back to
  back, on the calling thread. This is what an in-process llama.cpp model needs: its
  calls are serialized anyway, and consecutive calls of one item share the prompt
  prefix that llama.cpp reuses.
* ``concurrency > 1``: the calls of all items share one pool of `concurrency` worker
  threads (remote endpoints: vLLM, llama.cpp server, hosted APIs), so the next item's
  questions start while the previous item's are still in flight. Items are admitted
  in order and each item's `finish` runs as soon as its calls are done, so results
  stream out as items complete. An item planned with ``warm_first`` sends its first
  call alone and the others once it is done, so a provider's prompt cache is written
  before it is read (``--warm-prefix``).

A ``budget`` (``--max-cost``, `binaryeval_dspy.cost.budget.CostBudget`) is asked before
every call, with what the call will send (`ItemWork.request`) so that it can reserve the
call's worst case, and told each call's usage when it is done; when it says stop, nothing
more is sent, calls in flight finish, items with calls made are finished with stand-ins
for the calls not sent (`ItemWork.unsent`), and the calls left (those not sent, and those
of the items not started) are counted into ``budget.calls_left``.

Each call runs in a copy of the submitting thread's `contextvars` context, which is
how DSPy settings (``dspy.context(lm=..., adapter=...)``) and the usage tracker reach
the workers. DSPy's own ``dspy.Parallel`` runs a fixed list and returns only when all
of it is done, so it cannot hand back items as they complete; the pool here is the
standard library's `ThreadPoolExecutor`, nothing more.

The item's vocabulary (`ItemWork`, `ItemDone`, `StopItems`, `CallBudget`) lives in
`binaryeval_dspy.engines.item_work`.
"""

from __future__ import annotations

import contextvars
import queue
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import dspy

from binaryeval_dspy.cost.usage import usage_from_entries
from binaryeval_dspy.engines.item_work import CallBudget, CallRequest, ItemDone, ItemWork, StopItems
from binaryeval_dspy.errors import ConfigError
from binaryeval_dspy.schemas.item_result import Usage

T = TypeVar("T")


def _call_usage(entries: dict[str, list[dict]], one_call: bool) -> Usage:
    usage = usage_from_entries(entries)
    if one_call and usage.lm_calls > 1:
        usage.adapter_fallbacks = usage.lm_calls - 1
    return usage


def _measured(call: Callable[[], T]) -> tuple[T | None, BaseException | None, dict[str, list[dict]], float]:
    """Run `call` under its own usage tracker; returns (value, exception, usage entries, start time)."""
    started = time.perf_counter()
    with dspy.track_usage() as tracker:
        try:
            return call(), None, dict(tracker.usage_data), started
        except Exception as exc:  # noqa: BLE001 - an item's failure, whatever its type, is reported through ItemDone
            return None, exc, dict(tracker.usage_data), started


@dataclass
class _Pending:
    index: int
    work: ItemWork
    results: list[Any]
    remaining: int
    usage: Usage = field(default_factory=Usage)
    started: float | None = None
    error: BaseException | None = None
    held: list[int] = field(default_factory=list)  # calls waiting for the warm first call
    sent: int = 0  # calls submitted
    in_flight: int = 0  # futures not yet done (calls and finish)
    dropped: bool = False  # stopped by the budget with nothing to report
    answered: set[int] = field(default_factory=set)  # call positions whose result is in
    requests: dict[int, CallRequest] = field(default_factory=dict)  # what each call reserved with the budget


def map_items(
    items: Sequence[T] | Iterable[T],
    plan: Callable[[int, Any], ItemWork],
    on_done: Callable[[ItemDone], None],
    *,
    concurrency: int = 1,
    budget: CallBudget | None = None,
) -> None:
    """Run every item's `ItemWork` with at most `concurrency` calls in flight.

    Args:
        items: the items, in order (their index is passed to `plan` and reported back).
        plan: ``plan(index, item) -> ItemWork``; called on the calling thread, in order,
            when the item is admitted.
        on_done: called on the calling thread with an `ItemDone` for each item as soon
            as it completes (in completion order when ``concurrency > 1``, else in item
            order). Raise `StopItems` to stop early: nothing more is admitted and calls
            not yet started are cancelled.
        concurrency: LM calls in flight across items and their questions (an int >= 1).
            1 runs everything on the calling thread, in order. An item whose work has
            ``warm_first`` sends its first call alone, the others after it.
        budget: asked before every call (`CallBudget.reserve`, with the call's
            `CallRequest` from ``work.request``; e.g. a `CostBudget` for ``--max-cost``)
            and told its usage after it (`CallBudget.settle`). When it says stop, no
            further call is sent and no item admitted; calls in flight finish, and an
            item with some calls made is finished with ``work.unsent`` results for the
            rest and reported (without ``unsent``, or with no call made, it is dropped).
            Finish steps always run (their usage is `CallBudget.charge`d). The calls not
            sent, those of items never admitted included (planned to count them), are
            set as ``budget.calls_left``.

    Raises:
        ConfigError: `concurrency` is not an int >= 1.
        KeyboardInterrupt: propagated after cancelling the calls not yet started. First,
            every item with answered calls is finished with ``work.unsent`` stand-ins for
            the rest and reported through `on_done`, so no answer is thrown away (an item
            with no answer yet, or without ``unsent``, is not reported).
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError("bad concurrency", expected="an integer >= 1", received=repr(concurrency),
                          fix="pass concurrency=1, or the number of LM calls to run at once.")
    if concurrency == 1:
        _map_sequential(items, plan, on_done, budget)
    else:
        _map_pooled(items, plan, on_done, concurrency, budget)


def _map_sequential(items: Iterable[Any], plan: Callable[[int, Any], ItemWork],
                    on_done: Callable[[ItemDone], None], budget: CallBudget | None = None) -> None:
    source = iter(enumerate(items))
    for index, item in source:
        work = plan(index, item)
        started = time.perf_counter()
        results: list[Any] = []
        usage = Usage()
        error: BaseException | None = None
        stopped = False
        for position, call in enumerate(work.calls):
            request = _request(work, position) if budget is not None else None
            if budget is not None and _reserve(budget, request) is False:
                stopped = True
                _count_left(budget, len(work.calls) - position, source, plan)
                break
            try:
                value, error, entries, _ = _measured(call)
            except KeyboardInterrupt:
                _salvage(index, work, dict(enumerate(results)), usage, started, on_done)
                raise
            call_usage = _call_usage(entries, work.one_call_each)
            usage += call_usage
            if budget is not None:
                budget.settle(call_usage, request)
            if error is not None:
                break
            results.append(value)
        if stopped:
            if not results or work.unsent is None:
                return  # nothing of this item was asked (or cannot be stood in for): not reported
            reason = budget.stop_reason or "stopped before this call"  # type: ignore[union-attr]
            results += [work.unsent(position, reason) for position in range(len(results), len(work.calls))]
        result = None
        if error is None:
            result, error, entries, _ = _measured(partial(work.finish, results))
            finish_usage = usage_from_entries(entries)
            usage += finish_usage
            if budget is not None:
                budget.charge(finish_usage)
        try:
            on_done(ItemDone(index=index, result=result, error=error, usage=usage,
                             seconds=round(time.perf_counter() - started, 3)))
        except StopItems:
            return
        if stopped:
            return


def _map_pooled(items: Iterable[Any], plan: Callable[[int, Any], ItemWork],
                on_done: Callable[[ItemDone], None], concurrency: int, budget: CallBudget | None = None) -> None:
    source = iter(enumerate(items))
    queued: deque[tuple[_Pending, int | None]] = deque()  # (item, call position or None for finish)
    futures: dict[Future, tuple[_Pending, int | None]] = {}
    requests: dict[Future, CallRequest | None] = {}  # what each call in flight reserved with the budget
    active: dict[int, _Pending] = {}  # admitted items not yet reported
    exhausted = False
    stopping = False
    # Keep about two calls per worker queued, so workers never wait for the main thread,
    # and admit a new item only when fewer than that are waiting.
    backlog = 2 * concurrency
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="bineval-call")
    # Finished futures arrive here (a done callback), so taking the next one costs the same with
    # 2 or 128 in flight; `concurrent.futures.wait` locks and scans every pending future each time.
    completed: queue.SimpleQueue[Future] = queue.SimpleQueue()

    def submit(pending: _Pending, position: int | None) -> None:
        if position is None:
            call = lambda: pending.work.finish(pending.results)
        else:
            call = pending.work.calls[position]
            pending.sent += 1
        pending.in_flight += 1
        context = contextvars.copy_context()
        future = pool.submit(context.run, _measured, call)
        futures[future] = (pending, position)
        requests[future] = pending.requests.pop(position, None) if position is not None else None
        future.add_done_callback(completed.put)

    def report(pending: _Pending, result: Any, error: BaseException | None, started: float | None = None) -> None:
        active.pop(pending.index, None)
        begun = pending.started if pending.started is not None else (started or time.perf_counter())
        on_done(ItemDone(index=pending.index, result=result, error=error, usage=pending.usage,
                         seconds=round(time.perf_counter() - begun, 3)))

    def calls_done(pending: _Pending) -> None:
        """Every call of `pending` has a result: finish it (before admitting more work) or report its error."""
        if pending.error is None:
            queued.appendleft((pending, None))
        else:
            report(pending, None, pending.error)

    def stop() -> None:
        """The budget said stop: stand in for every call not yet sent, or drop the item."""
        nonlocal stopping
        stopping = True
        reason = (budget.stop_reason if budget is not None else None) or "stopped before this call"
        unsent = {id(p): [pos for q, pos in queued if q is p and pos is not None] + p.held for p in active.values()}
        if budget is not None:
            _count_left(budget, sum(len(positions) for positions in unsent.values()), source, plan)
        queued_finishes = [(p, pos) for p, pos in queued if pos is None]
        queued.clear()
        queued.extend(queued_finishes)
        for pending in list(active.values()):
            positions = unsent[id(pending)]
            pending.held = []
            if not positions:
                continue
            if pending.sent == 0 or pending.work.unsent is None:
                pending.dropped = True  # nothing asked, or nothing to stand in with: not reported
                if pending.in_flight == 0:
                    active.pop(pending.index, None)
                continue
            for position in positions:
                pending.results[position] = pending.work.unsent(position, reason)
                pending.remaining -= 1
            if pending.remaining == 0 and pending.in_flight == 0:
                calls_done(pending)

    def admit() -> None:
        nonlocal exhausted
        while not stopping and not exhausted and len(queued) + len(futures) < backlog:
            nxt = next(source, None)
            if nxt is None:
                exhausted = True
                break
            index, item = nxt
            work = plan(index, item)
            pending = _Pending(index=index, work=work, results=[None] * len(work.calls), remaining=len(work.calls))
            active[index] = pending
            if work.calls:
                first = 1 if work.warm_first and len(work.calls) > 1 else len(work.calls)
                queued.extend((pending, position) for position in range(first))
                pending.held = list(range(first, len(work.calls)))
            else:
                queued.append((pending, None))
        while queued and len(futures) < backlog:
            pending, position = queued[0]
            if position is not None and budget is not None:
                if position not in pending.requests:
                    pending.requests[position] = _request(pending.work, position)
                request = pending.requests[position]
                go = budget.reserve(request) if futures else _reserve(budget, request)
                if go is None:
                    break  # no call's cost is known yet: wait for the one in flight
                if go is False:
                    stop()
                    continue
            queued.popleft()
            submit(pending, position)

    try:
        admit()
        while futures:
            for future in _next_done(completed):
                if future not in futures:  # already handled (a callback of a cancelled future)
                    continue
                pending, position = futures.pop(future)
                request = requests.pop(future, None)
                pending.in_flight -= 1
                value, error, entries, started = future.result()
                usage = _call_usage(entries, position is not None and pending.work.one_call_each)
                if budget is not None:
                    if position is not None:
                        budget.settle(usage, request)
                    else:
                        budget.charge(usage)
                pending.usage += usage
                pending.started = started if pending.started is None else min(pending.started, started)
                if pending.dropped:
                    if pending.in_flight == 0:
                        active.pop(pending.index, None)
                    continue
                if position is not None:
                    pending.results[position] = value
                    pending.answered.add(position)
                    pending.error = pending.error or error
                    pending.remaining -= 1
                    if position == 0 and pending.held:  # the warm call is done: the others may read its cache
                        queued.extendleft((pending, p) for p in reversed(pending.held))
                        pending.held = []
                    if pending.remaining == 0:
                        calls_done(pending)
                    continue
                report(pending, value, error, started)
            admit()
    except StopItems:
        pass
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        for pending in sorted(active.values(), key=lambda p: p.index):
            if not pending.dropped and pending.error is None:
                _salvage(pending.index, pending.work, {i: pending.results[i] for i in pending.answered},
                         pending.usage, pending.started or time.perf_counter(), on_done)
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        if budget is not None:  # calls dropped with the loop are no longer in flight for the budget
            for future, (_pending, position) in futures.items():
                if position is not None:
                    budget.settle(Usage(), requests.get(future))


def _next_done(completed: queue.SimpleQueue) -> list[Future]:
    """The futures finished so far: waits for one, then takes every other one already there.
    Waits in short slices so that Ctrl-C reaches the main thread promptly."""
    while True:
        try:
            first = completed.get(timeout=0.5)
            break
        except queue.Empty:
            continue
    done = [first]
    while True:
        try:
            done.append(completed.get_nowait())
        except queue.Empty:
            return done


def _salvage(index: int, work: ItemWork, answered: dict[int, Any], usage: Usage, started: float,
             on_done: Callable[[ItemDone], None]) -> None:
    """At Ctrl-C, report an item that has answered calls, so no answer is thrown away.

    The calls not answered get ``work.unsent(position, "interrupted")`` (BinEval: an
    ``error`` verdict, asked again by a rerun) and the item is finished and handed to
    `on_done` as usual. Nothing happens for an item with no answer yet, without an
    ``unsent``, or whose finish step fails or is interrupted again (it is then simply
    not reported, as before).
    """
    if not answered or work.unsent is None:
        return
    results = [answered[i] if i in answered else work.unsent(i, "interrupted (Ctrl-C) before this call finished")
               for i in range(len(work.calls))]
    try:
        result = work.finish(results)
        on_done(ItemDone(index=index, result=result, error=None, usage=usage,
                         seconds=round(time.perf_counter() - started, 3)))
    except (Exception, KeyboardInterrupt, StopItems):  # noqa: BLE001 - best effort while stopping
        return


def _reserve(budget: CallBudget, request: CallRequest | None = None) -> bool:
    """`budget.reserve(request)` when none of this loop's calls is in flight: a "wait" can only be
    for another loop's call (a budget shared across threads), so wait for it here."""
    while True:
        go = budget.reserve(request)
        if go is not None:
            return go
        time.sleep(0.02)


def _request(work: ItemWork, position: int) -> CallRequest:
    """What call `position` of `work` will send (`ItemWork.request`); an empty `CallRequest`
    (the budget then estimates the call) when the work cannot say, or saying it failed (the
    call itself will meet the same trouble and report it)."""
    if work.request is None:
        return CallRequest()
    try:
        return work.request(position)
    except Exception:  # noqa: BLE001 - a prompt that cannot be formatted fails in the call, where it is reported
        return CallRequest()


def _count_left(budget: CallBudget, unsent: int, rest: Iterable[tuple[int, Any]],
                plan: Callable[[int, Any], ItemWork]) -> None:
    """The budget stopped the run: set ``budget.calls_left`` to the `unsent` calls of admitted
    items plus the calls of every item not admitted (planned here only to count them; an
    item whose planning fails counts 0)."""
    left = unsent
    for index, item in rest:
        try:
            left += len(plan(index, item).calls)
        except Exception:  # noqa: BLE001, S112 - counting only: a bad item is reported by the run that judges it
            continue
    if hasattr(budget, "calls_left"):
        budget.calls_left = left

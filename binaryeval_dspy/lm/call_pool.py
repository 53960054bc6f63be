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
  stream out as items complete.

Each call runs in a copy of the submitting thread's `contextvars` context, which is
how DSPy settings (``dspy.context(lm=..., adapter=...)``) and the usage tracker reach
the workers. DSPy's own ``dspy.Parallel`` runs a fixed list and returns only when all
of it is done, so it cannot hand back items as they complete; the pool here is the
standard library's `ThreadPoolExecutor`, nothing more.
"""

from __future__ import annotations

import contextvars
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, TypeVar

import dspy

from binaryeval_dspy.errors import BinEvalError
from binaryeval_dspy.lm.metadata_cache import memoize_model_metadata, memoize_response_schemas
from binaryeval_dspy.lm.usage import usage_from_entries
from binaryeval_dspy.schemas.item_result import Usage

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class ItemWork(Generic[T, R]):
    """What one item needs: independent `calls`, then `finish(call_results)`.

    Attributes:
        calls: zero or more callables, each making (typically) one LM call; they may
            run concurrently and in any order. They should return their outcome rather
            than raise (BinEval turns a failed call into an ``error`` verdict); an
            exception raised here fails the whole item.
        finish: receives the calls' results in `calls` order and returns the item's
            result; it may make further LM calls. An exception fails the item.
        one_call_each: each call is meant to reach the LM once (BinEval: one call per
            question); any further LM call it made (an adapter retrying in another
            output format) is counted in ``usage.adapter_fallbacks``.
    """

    calls: list[Callable[[], T]]
    finish: Callable[[list[T]], R]
    one_call_each: bool = False


@dataclass
class ItemDone(Generic[R]):
    """The outcome of one item, handed to `map_items`' ``on_done`` callback.

    Attributes:
        index: the item's position in the `items` sequence.
        result: `finish`'s return value, or None when the item failed.
        error: the exception that failed the item, else None.
        usage: LM calls and tokens of this item's calls and finish (cache hits are free).
        seconds: wall time from the item's first call starting to its finish ending.
    """

    index: int
    result: R | None
    error: BaseException | None
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0


class StopItems(Exception):
    """Raised by an ``on_done`` callback to stop admitting items (in-flight ones are dropped)."""


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


def map_items(
    items: Sequence[T] | Iterable[T],
    plan: Callable[[int, Any], ItemWork],
    on_done: Callable[[ItemDone], None],
    *,
    concurrency: int = 1,
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
            1 runs everything on the calling thread, in order.

    Raises:
        BinEvalError: `concurrency` is not an int >= 1.
        KeyboardInterrupt: propagated after cancelling the calls not yet started; items
            already reported through `on_done` are unaffected.
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise BinEvalError(f"concurrency must be an integer >= 1, got {concurrency!r}")
    memoize_model_metadata()  # DSPy's per-call metadata scan and schema build cost more CPU
    memoize_response_schemas()  # than the rest of a call (see lm/metadata_cache.py)
    if concurrency == 1:
        _map_sequential(items, plan, on_done)
    else:
        _map_pooled(items, plan, on_done, concurrency)


def _map_sequential(items: Iterable[Any], plan: Callable[[int, Any], ItemWork],
                    on_done: Callable[[ItemDone], None]) -> None:
    for index, item in enumerate(items):
        work = plan(index, item)
        started = time.perf_counter()
        results: list[Any] = []
        usage = Usage()
        error: BaseException | None = None
        for call in work.calls:
            value, error, entries, _ = _measured(call)
            usage += _call_usage(entries, work.one_call_each)
            if error is not None:
                break
            results.append(value)
        result = None
        if error is None:
            result, error, entries, _ = _measured(partial(work.finish, results))
            usage += usage_from_entries(entries)
        try:
            on_done(ItemDone(index=index, result=result, error=error, usage=usage,
                             seconds=round(time.perf_counter() - started, 3)))
        except StopItems:
            return


def _map_pooled(items: Iterable[Any], plan: Callable[[int, Any], ItemWork],
                on_done: Callable[[ItemDone], None], concurrency: int) -> None:
    source = iter(enumerate(items))
    queued: deque[tuple[_Pending, int | None]] = deque()  # (item, call position or None for finish)
    futures: dict[Future, tuple[_Pending, int | None]] = {}
    exhausted = False
    # Keep about two calls per worker queued, so workers never wait for the main thread,
    # and admit a new item only when fewer than that are waiting.
    backlog = 2 * concurrency
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="bineval-call")

    def submit(pending: _Pending, position: int | None) -> None:
        if position is None:
            call = lambda: pending.work.finish(pending.results)
        else:
            call = pending.work.calls[position]
        context = contextvars.copy_context()
        futures[pool.submit(context.run, _measured, call)] = (pending, position)

    def admit() -> None:
        nonlocal exhausted
        while not exhausted and len(queued) + len(futures) < backlog:
            nxt = next(source, None)
            if nxt is None:
                exhausted = True
                break
            index, item = nxt
            work = plan(index, item)
            pending = _Pending(index=index, work=work, results=[None] * len(work.calls), remaining=len(work.calls))
            if work.calls:
                queued.extend((pending, position) for position in range(len(work.calls)))
            else:
                queued.append((pending, None))
        while queued and len(futures) < backlog:
            submit(*queued.popleft())

    try:
        admit()
        while futures:
            done, _ = wait(list(futures), return_when=FIRST_COMPLETED)
            for future in done:
                pending, position = futures.pop(future)
                value, error, entries, started = future.result()
                pending.usage += _call_usage(entries, position is not None and pending.work.one_call_each)
                pending.started = started if pending.started is None else min(pending.started, started)
                if position is not None:
                    pending.results[position] = value
                    pending.error = pending.error or error
                    pending.remaining -= 1
                    if pending.remaining == 0:
                        if pending.error is None:
                            queued.appendleft((pending, None))  # finish before admitting more work
                        else:
                            on_done(ItemDone(index=pending.index, result=None, error=pending.error,
                                             usage=pending.usage,
                                             seconds=round(time.perf_counter() - pending.started, 3)))
                    continue
                on_done(ItemDone(index=pending.index, result=value, error=error, usage=pending.usage,
                                 seconds=round(time.perf_counter() - (pending.started or started), 3)))
            admit()
    except StopItems:
        pass
    finally:
        pool.shutdown(wait=False, cancel_futures=True)

"""Running a program over items, sequentially or concurrently, keeping failures as failures."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import dspy

from binaryeval_dspy.lm.call_pool import ItemDone, ItemWork, map_items

logger = logging.getLogger(__name__)


def item_id(example: dspy.Example, index: int) -> str:
    """The example's ``item_id``, else its position as a string."""
    value = example.get("item_id") if hasattr(example, "get") else None
    return str(value) if value not in (None, "") else str(index)


def run_items(
    call: Callable[[dspy.Example], Any],
    items: Sequence[dspy.Example],
    *,
    num_threads: int = 1,
) -> list[Any | Exception]:
    """``call(item)`` for every item, in order; an exception is returned in the item's place.

    Runs through the project's one item loop (`binaryeval_dspy.lm.call_pool.map_items`),
    so usage is counted on every thread.

    Args:
        call: the work for one item (runs under the caller's DSPy settings).
        items: the items.
        num_threads: items in flight at once (remote LMs gain; the embedded llama.cpp
            model serializes calls anyway).

    Returns:
        One result or exception per item, in item order; the caller decides what a failed
        item means (it is never turned into a score).
    """
    return map_work(items, lambda item: ItemWork(calls=[lambda: call(item)], finish=lambda results: results[0]),
                    num_threads=num_threads)


def map_work(
    items: Sequence[dspy.Example],
    plan: Callable[[dspy.Example], ItemWork],
    *,
    num_threads: int = 1,
) -> list[Any | Exception]:
    """Every item's `ItemWork` with `num_threads` calls in flight; results (or exceptions) in item order."""
    out: list[Any] = [None] * len(items)

    def on_done(done: ItemDone) -> None:
        if done.error is not None:
            logger.warning("an item failed: %s: %s", type(done.error).__name__, done.error)
            out[done.index] = done.error if isinstance(done.error, Exception) else RuntimeError(str(done.error))
        else:
            out[done.index] = done.result

    map_items(list(items), lambda _index, item: plan(item), on_done, concurrency=max(1, int(num_threads)))
    return out

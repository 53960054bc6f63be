"""Running a program over items, sequentially or on DSPy threads, keeping failures as failures."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import dspy

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

    Args:
        call: the work for one item (runs under the caller's DSPy settings).
        items: the items.
        num_threads: > 1 runs items concurrently with `dspy.Parallel` (remote LMs gain;
            the embedded llama.cpp model serializes calls anyway).

    Returns:
        One result or exception per item, in item order; the caller decides what a failed
        item means (it is never turned into a score).
    """

    def guarded(item: dspy.Example) -> Any:
        try:
            return call(item)
        except Exception as exc:  # LM transport and parse errors come in many types
            logger.warning("an item failed: %s: %s", type(exc).__name__, exc)
            return exc

    if num_threads <= 1 or len(items) <= 1:
        return [guarded(item) for item in items]
    parallel = dspy.Parallel(num_threads=min(num_threads, len(items)), disable_progress_bar=True,
                             provide_traceback=False)
    return parallel([(guarded, (item,)) for item in items])

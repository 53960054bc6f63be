"""The ``local`` engine: one call at a time, an item's questions back to back, items in order.

What an in-process llama.cpp model needs: one `llama_cpp.Llama` is not thread-safe, so
its calls are serialized anyway, and consecutive calls of one item share the prompt
prefix (instructions, input, output) that llama.cpp reuses; interleaving items would
throw that reuse away (docs/served-models.md has the measured difference).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from binaryeval_dspy.lm.call_pool import map_items
from binaryeval_dspy.lm.item_work import CallBudget, ItemDone, ItemWork


class LocalEngine:
    """Runs a judging plan on the calling thread, one call at a time (see the module docstring)."""

    name = "local"

    def __init__(self) -> None:
        self.notes: list[str] = []

    def run(self, items: Sequence[Any], plan: Callable[[int, Any], ItemWork], on_done: Callable[[ItemDone], None],
            *, budget: CallBudget | None = None) -> None:
        """As `binaryeval_dspy.engines.base.Engine.run`, with one call in flight."""
        map_items(items, plan, on_done, concurrency=1, budget=budget)

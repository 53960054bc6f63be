"""The ``live`` engine: many calls in flight to a served or hosted endpoint, through DSPy.

Each planned call is the DSPy call itself (adapter formatting and parsing, DSPy's
response cache, retries and usage tracking), run on a shared pool of worker threads
(`binaryeval_dspy.lm.call_pool.map_items`): the next item's questions start while the
previous item's are in flight, and each item is reported as soon as it is done.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from binaryeval_dspy.errors import ConfigError
from binaryeval_dspy.lm.call_pool import map_items
from binaryeval_dspy.lm.item_work import CallBudget, ItemDone, ItemWork


class LiveEngine:
    """Runs a judging plan with `in_flight` calls at once (see the module docstring).

    Args:
        in_flight: LM calls in flight across items and questions (an int >= 1).

    Raises:
        ConfigError: `in_flight` is not an int >= 1.
    """

    name = "live"

    def __init__(self, in_flight: int) -> None:
        if isinstance(in_flight, bool) or not isinstance(in_flight, int) or in_flight < 1:
            raise ConfigError("bad concurrency", expected="an integer >= 1", received=repr(in_flight),
                              fix="set concurrency to the number of LM calls to run at once, e.g. 16.")
        self.in_flight = in_flight
        self.notes: list[str] = []

    def run(self, items: Sequence[Any], plan: Callable[[int, Any], ItemWork], on_done: Callable[[ItemDone], None],
            *, budget: CallBudget | None = None) -> None:
        """As `binaryeval_dspy.engines.base.Engine.run`, with `in_flight` calls at once."""
        map_items(items, plan, on_done, concurrency=self.in_flight, budget=budget)

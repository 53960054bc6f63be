"""What one item of the item loop is: its planned work, its outcome, and the budget asked per call.

`ItemWork` (independent calls plus a `finish` step), `ItemDone` (what `on_done` receives),
`StopItems` (an ``on_done`` callback's early stop), `CallRequest` (what one call will send,
for a budget) and `CallBudget` (what is asked before each call) are the vocabulary of `binaryeval_dspy.engines.call_pool.map_items`, which runs
them; they live here so that code planning items needs no loop (and no DSPy import).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from binaryeval_dspy.schemas.item_result import Usage

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class CallRequest:
    """What one LM call will send, so that a budget can reserve its worst case before it goes.

    Attributes:
        messages: the chat messages of the call (``role`` and ``content``), as the adapter
            formats them; None when not known beforehand.
        max_tokens: the call's completion cap (tokens); None when not known.
        reserved_usd: what the budget reserved for this call (set by `CallBudget.reserve`,
            released by `CallBudget.settle`).
    """

    messages: list[dict[str, Any]] | None = None
    max_tokens: int | None = None
    reserved_usd: float = 0.0


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
        warm_first: send ``calls[0]`` alone and the others only once it has finished
            (with ``concurrency > 1``), so that a provider's prompt cache is written by
            the first call before the others read the prompt prefix they share
            (``--warm-prefix``; see `binaryeval_dspy.cost.prompt_cache`). Other items'
            calls fill the pool meanwhile.
        unsent: ``unsent(position, reason)`` gives the result of a call that was never
            sent because a `map_items` ``budget`` stopped the run (BinEval: an ``error``
            verdict, asked again by a rerun), so an item with some calls made is still
            finished and reported. None: such an item is dropped (not reported).
        request: ``request(position)`` gives what call `position` will send (a
            `CallRequest`: its messages and ``max_tokens``), asked only when a budget is
            set, right before the call, so that the budget reserves its worst case.
            None: the budget estimates the call (see `binaryeval_dspy.cost.budget`).
    """

    calls: list[Callable[[], T]]
    finish: Callable[[list[T]], R]
    one_call_each: bool = False
    warm_first: bool = False
    unsent: Callable[[int, str], T] | None = None
    request: Callable[[int], CallRequest] | None = None


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


class CallBudget(Protocol):
    """What `map_items` asks before each call (see `binaryeval_dspy.cost.budget.CostBudget`)."""

    stop_reason: str | None
    calls_left: int | None

    def reserve(self, request: CallRequest | None = None) -> bool | None:
        """True: send the call (`request` holds what was reserved); None: wait for a call in
        flight to finish; False: stop the run."""

    def settle(self, usage: Usage, request: CallRequest | None = None) -> None:
        """A reserved call (the `request` given to `reserve`) is done, with this usage."""

    def charge(self, usage: Usage) -> None:
        """An item's finish step made calls with this usage (not reserved)."""


"""``--max-cost``: a spending limit (USD) that the LM calls of a live run never pass.

`CostBudget` is asked before every LM call of the item loop (`map_items`, via its
``budget`` argument) whether the call may go, and told when it is done:

* before a call, its **worst case** is reserved: its prompt tokens (counted from the
  messages it will send, `CallRequest`, with the provider's tokenizer,
  `binaryeval_dspy.cost.provider_tokenizer`) at the input price (or the cache-write
  price where that is dearer) plus its ``max_tokens`` at the output price, at batch
  prices in batch mode;
* a call goes when ``spent + reserved + worst case`` stays within the budget; when it
  does not and other calls are in flight, it waits for them (their unused reservation
  is released when their usage arrives: `settle`); when nothing is in flight, the run
  stops: no further call is sent, an item with questions not yet asked is stored
  incomplete (a rerun asks the rest), and the command exits with status 1 saying what
  was spent and how many calls are left;
* a budget smaller than the first call's worst case stops the run before any call, and
  names the smallest budget that allows that call.

So the total never passes the budget, at any concurrency, as long as each call's usage
stays within its worst case (a provider tokenizer that is an approximation, as for
Claude, is given a margin, `APPROXIMATE_MARGIN`). A call planned without its messages
(the baselines' calls, verdict mode's label pick and pressure test, which run in an
item's finish step) cannot be bounded beforehand: it is estimated at the dearest call
settled so far (the first such call goes alone), and a finish step's calls are charged
when done. The budget counts the calls of this command (this process), not those of
earlier sessions of a resumed run. Calls answered from DSPy's cache cost nothing (their
reservation is released whole).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

from binaryeval_dspy.cost.price_map import LOCAL, ModelPrice, model_price, price_source
from binaryeval_dspy.cost.pricing import format_usd
from binaryeval_dspy.cost.provider_tokenizer import MESSAGE_OVERHEAD, content_text
from binaryeval_dspy.errors import LMConfigError
from binaryeval_dspy.schemas.item_result import Usage

#: Share added to a prompt's token count when the tokenizer is not the provider's own
#: (LiteLLM's approximation for Claude and others), so the worst case stays above it.
APPROXIMATE_MARGIN = 0.25
#: Tokens for the reply's priming (OpenAI's chat format), besides `MESSAGE_OVERHEAD` per message.
_REPLY_PRIMING = 3


@dataclass
class CallRequest:
    """What one request will send, so that a budget can reserve its worst case before it goes.

    Attributes:
        messages: the chat messages (``role`` and ``content``), as the adapter formats them;
            None when not known beforehand (the budget then estimates the call).
        max_tokens: the completion cap (tokens); None when not known.
        reserved_usd: what the budget has reserved for it so far (every attempt's worst case).
        attempts: attempts reserved under it (a retry is reserved before it is sent).
    """

    messages: list[dict[str, Any]] | None = None
    max_tokens: int | None = None
    reserved_usd: float = 0.0
    attempts: int = 0


class CostBudget:
    """A spending limit in USD for the LM calls of one command; thread-safe.

    Args:
        max_usd: the budget in USD (> 0).
        price: the model's prices (`ModelPrice`), or None for a model that costs nothing
            (the embedded model: the budget is never reached).
        batch: price calls at batch prices.
        tokenizer: counts a text's prompt tokens (anything with ``count(text) -> int``
            and ``exact``); None makes the model's `ProviderTokenizer` when first needed.

    Attributes:
        spent_usd: estimated USD of the calls settled so far (their reported usage).
        reserved_usd: worst cases of the calls in flight, not yet settled.
        calls: reserved calls settled that reached a model.
        in_flight: reserved calls not yet settled.
        largest_call_usd: the dearest call settled so far (the estimate of a call
            without a `CallRequest`).
        calls_left: LM calls that were not sent because the budget stopped the run (set
            by the item loop), or None.
    """

    def __init__(self, max_usd: float, price: ModelPrice | None, *, batch: bool = False,
                 tokenizer: Any = None) -> None:
        if isinstance(max_usd, bool) or not isinstance(max_usd, (int, float)) or not max_usd > 0:
            raise LMConfigError("bad `max_cost`", expected="a positive number of US dollars", received=repr(max_usd),
                                fix="e.g. `max_cost` 2.50.")
        self.max_usd = float(max_usd)
        self.price = price
        self.batch = batch
        self.spent_usd = 0.0
        self.reserved_usd = 0.0
        self.calls = 0
        self.in_flight = 0
        self.largest_call_usd: float | None = None
        self.calls_left: int | None = None
        self._stop: str | None = None
        self._tokenizer = tokenizer
        self._lock = threading.Lock()

    @classmethod
    def for_model(cls, max_usd: float, model: str | None) -> CostBudget:
        """A budget for calls to `model` (a LiteLLM id, `LOCAL` for the embedded model).

        Raises:
            LMConfigError: `max_usd` is not positive, or `model` has no price in LiteLLM's
                map (a served model reached by base URL, or an unknown id): the budget
                could not be enforced, so nothing is run.
        """
        if model == LOCAL:
            return cls(max_usd, None)
        price = model_price(model)
        if price is None:
            what = f"{model} has no price in {price_source()}" if model else (
                "a served model reached by base URL has no price in LiteLLM's map")
            raise LMConfigError(f"`max_cost` {max_usd:g}: {what}, so the budget cannot be enforced. Nothing was "
                                "judged.",
                                fix="add `price_model` MODEL naming a LiteLLM id to price the calls as (e.g. "
                                    "`price_model` gpt-4o-mini), or drop `max_cost`.")
        return cls(max_usd, price)

    @property
    def stop_reason(self) -> str | None:
        """Why the budget stopped the run (with the calls left, once the loop counted
        them), or None while it has not."""
        if self._stop is None:
            return None
        if self.calls_left is None:
            return self._stop
        return f"{self._stop} {self.calls_left} LM call(s) (questions) are left; rerun to ask them."

    def cost_of(self, usage: Usage) -> float:
        """Estimated USD of calls with this usage (0 for a model that costs nothing)."""
        if self.price is None:
            return 0.0
        parts = self.price.cost(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                                cached_prompt_tokens=usage.cached_prompt_tokens,
                                cache_write_tokens=getattr(usage, "cache_write_tokens", 0), batch=self.batch)
        return parts.total if parts is not None else 0.0

    def prompt_tokens(self, messages: list[dict[str, Any]]) -> int:
        """An upper estimate of the prompt tokens of `messages` (chat messages whose
        ``content`` is a text or a list of text blocks): the provider tokenizer's count
        of each text plus 4 tokens per message and 3 for the reply, raised by
        `APPROXIMATE_MARGIN` when the tokenizer is an approximation."""
        if self._tokenizer is None:
            from binaryeval_dspy.cost.provider_tokenizer import ProviderTokenizer

            self._tokenizer = ProviderTokenizer(self.price.model if self.price is not None else "gpt-4o-mini")
        counted = _REPLY_PRIMING + sum(MESSAGE_OVERHEAD + self._tokenizer.count(content_text(m.get("content")))
                                       for m in messages)
        return counted if getattr(self._tokenizer, "exact", False) else math.ceil(counted * (1 + APPROXIMATE_MARGIN))

    def completion_cap(self, request: CallRequest) -> int | None:
        """The most completion tokens `request` can be billed for: its ``max_tokens``, else
        the model's own output limit from LiteLLM's map (``max_output_tokens``); None when
        neither is known."""
        if request.max_tokens is not None:
            return request.max_tokens
        if self.price is None:
            return None
        import litellm

        entry = litellm.model_cost.get(self.price.key) or {}
        cap = entry.get("max_output_tokens") or entry.get("max_tokens")
        return int(cap) if isinstance(cap, (int, float)) and not isinstance(cap, bool) and cap > 0 else None

    def worst_case(self, request: CallRequest) -> tuple[float, int, int] | None:
        """(USD, prompt tokens, completion tokens) of `request` at its worst: every prompt
        token at the input price, or at the cache-write price where that is dearer, plus
        its completion cap (`completion_cap`) at the output price (batch prices in batch
        mode). None when the request does not say its messages, or no cap is known."""
        cap = self.completion_cap(request) if request.messages is not None else None
        if cap is None or self.price is None:
            return None
        prompt = self.prompt_tokens(request.messages)
        plain = self.price.cost(prompt_tokens=prompt, completion_tokens=cap, batch=self.batch)
        written = self.price.cost(prompt_tokens=prompt, completion_tokens=cap, cache_write_tokens=prompt,
                                  batch=self.batch)
        if plain is None or written is None:
            return None
        return max(plain.total, written.total), prompt, cap

    def reserve(self, request: CallRequest | None = None, *, can_wait: bool = True) -> bool | None:
        """Ask before sending one request (a first attempt or a retry): True (send it: its worst
        case is now reserved, added to ``request.reserved_usd``, and ``request.attempts``
        counts it), None (wait: other calls in flight hold reservations that their usage will
        release; only a first attempt waits), False (do not send it: a retry that does not
        fit now, whose call then ends with its error; or stop: the request could pass the
        budget with nothing else in flight, and `stop_reason` says so).

        Args:
            request: what the request will send (`CallRequest`); None or one without
                messages is estimated at the dearest call settled so far.
            can_wait: False for a caller whose reservations are never settled while it
                asks (a batch submission): a request that does not fit stops the run.
        """
        request = request if request is not None else CallRequest()
        with self._lock:
            if self._stop is not None:
                return False
            others = (self.in_flight - request.attempts) if can_wait else 0  # a retry never waits for itself
            if self.price is None:
                request.attempts += 1
                self.in_flight += 1
                return True
            worst = self.worst_case(request)
            if worst is None:
                if self.largest_call_usd is None:  # nothing known: one unbounded call at a time
                    if others > 0:
                        return None
                    cost = 0.0
                else:
                    cost = self.largest_call_usd
                sizes = None
            else:
                cost, *sizes = worst
            if self.spent_usd + self.reserved_usd + cost > self.max_usd:
                if others > 0 and request.attempts:
                    # a retry never waits: every call in flight could be waiting for its own retry, each
                    # holding the reservations the others wait for. It is not sent; its call ends with
                    # the error it has (a rerun asks it again), and the run goes on while calls fit.
                    return False
                if others > 0:
                    return None  # their unused reservations come back when they settle
                self._stop = self._stop_sentence(cost, sizes)
                return False
            request.reserved_usd += cost
            request.attempts += 1
            self.reserved_usd += cost
            self.in_flight += 1
            return True

    def _stop_sentence(self, cost: float, tokens: list[int] | None) -> str:
        limit = f"`max_cost` {format_usd(self.max_usd)}"
        sizes = (f" ({tokens[0]:,} prompt tokens and up to {tokens[1]:,} completion tokens at "
                 f"{self.price.key}'s {'batch ' if self.batch else ''}prices)") if tokens else ""
        if cost > self.max_usd:
            return (f"{limit} is less than the worst case of one LM call, {format_usd(cost)}{sizes}: the smallest "
                    f"budget that allows this call is {format_usd(cost)}. {format_usd(self.spent_usd)} spent by "
                    f"this command on {self.calls} calls. Everything judged is stored; rerun with a larger "
                    "`max_cost` to continue.")
        return (f"the next LM call could take the cost past {limit}: {format_usd(self.spent_usd)} spent by this "
                f"command on {self.calls} calls, and the next call may cost up to {format_usd(cost)}{sizes}. "
                "Everything judged is stored; rerun with a larger `max_cost` to continue.")

    def settle(self, usage: Usage, request: CallRequest | None = None, *, unanswered: int = 0) -> None:
        """Record a reserved call's usage once it is done (every attempt of it): its cost is
        spent, and its reservations released, except those of `unanswered` attempts (a
        timeout, a cut connection: a provider may bill a request it got no reply to), which
        stay spent at their worst case; it is no longer in flight.

        Args:
            usage: what the call's replies reported.
            request: the `CallRequest` given to `reserve` (None: one unreserved call).
            unanswered: attempts that got no reply at all.
        """
        cost = self.cost_of(usage)
        with self._lock:
            if request is None:
                self.in_flight = max(0, self.in_flight - 1)
            else:
                attempts = request.attempts
                self.in_flight = max(0, self.in_flight - attempts)
                if attempts and unanswered:
                    cost += request.reserved_usd / attempts * min(unanswered, attempts)
                self.reserved_usd = max(0.0, self.reserved_usd - request.reserved_usd)
                request.reserved_usd = 0.0
                request.attempts = 0
            self.spent_usd += cost
            if usage.lm_calls:  # a cache hit says nothing about a call's cost
                self.calls += 1
                per_call = self.cost_of(usage) / usage.lm_calls
                self.largest_call_usd = max(self.largest_call_usd or 0.0, per_call)

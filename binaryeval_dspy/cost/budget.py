"""``--max-cost``: stop a live run before its estimated cost passes a budget (USD).

`CostBudget` is asked before every LM call of the item loop (`map_items`, via its
``budget`` argument) whether the call may go:

* the cost of the calls made so far is known from their usage (tokens, priced with
  `binaryeval_dspy.cost.pricing`); the next call is estimated at the mean cost per call so
  far, and so is every call still in flight;
* a call goes when ``spent + (in flight + 1) x mean`` stays within the budget; otherwise
  the run stops: no further call is sent, calls in flight finish and are stored, an item
  with questions not yet asked is stored incomplete (a rerun asks the rest), and the
  command exits with status 1 naming the budget;
* until one call has reached the model there is no mean, so calls go one at a time
  (answers from DSPy's cache return at once, so a cached rerun is barely slowed).

The budget counts the calls of this command (this process), not those of earlier
sessions of a resumed run. It is an estimate: a call longer than the mean can take the
total a little past the budget, by less than one call's cost. Calls answered from DSPy's
cache cost nothing.
"""

from __future__ import annotations

import threading

from binaryeval_dspy.cost.price_map import LOCAL, ModelPrice, model_price, price_source
from binaryeval_dspy.cost.pricing import format_usd
from binaryeval_dspy.errors import LMConfigError
from binaryeval_dspy.schemas.item_result import Usage


class CostBudget:
    """A spending limit in USD for the LM calls of one command; thread-safe.

    Args:
        max_usd: the budget in USD (> 0).
        price: the model's prices (`ModelPrice`), or None for a model that costs nothing
            (the embedded model: the budget is never reached).
        batch: price calls at batch prices.

    Attributes:
        spent_usd: estimated USD of the calls settled so far.
        calls: reserved calls settled that reached a model (the mean's denominator).
        stop_reason: why the budget stopped the run (one sentence), or None.
    """

    def __init__(self, max_usd: float, price: ModelPrice | None, *, batch: bool = False) -> None:
        if isinstance(max_usd, bool) or not isinstance(max_usd, (int, float)) or not max_usd > 0:
            raise LMConfigError("bad `max_cost`", expected="a positive number of US dollars", received=repr(max_usd),
                                fix="e.g. `max_cost` 2.50.")
        self.max_usd = float(max_usd)
        self.price = price
        self.batch = batch
        self.spent_usd = 0.0
        self.calls = 0
        self.in_flight = 0
        self.stop_reason: str | None = None
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

    def cost_of(self, usage: Usage) -> float:
        """Estimated USD of calls with this usage (0 for a model that costs nothing)."""
        if self.price is None:
            return 0.0
        parts = self.price.cost(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                                cached_prompt_tokens=usage.cached_prompt_tokens,
                                cache_write_tokens=getattr(usage, "cache_write_tokens", 0), batch=self.batch)
        return parts.total if parts is not None else 0.0

    @property
    def mean_usd_per_call(self) -> float | None:
        """Mean USD per call that reached a model so far; None before the first one."""
        with self._lock:
            return self.spent_usd / self.calls if self.calls else None

    def reserve(self) -> bool | None:
        """Ask before sending one call: True (send it; it now counts as in flight), None
        (wait: no call has reached the model yet and one is in flight), False (stop: the
        estimate would pass the budget; `stop_reason` says so)."""
        with self._lock:
            if self.stop_reason is not None:
                return False
            if self.price is None:
                self.in_flight += 1
                return True
            if not self.calls:
                if self.in_flight:
                    return None
                self.in_flight += 1
                return True
            mean = self.spent_usd / self.calls
            estimate = self.spent_usd + (self.in_flight + 1) * mean
            if estimate > self.max_usd:
                self.stop_reason = (
                    f"the next LM call would take the estimated cost past `max_cost` {format_usd(self.max_usd)}: "
                    f"{format_usd(self.spent_usd)} spent by this command on {self.calls} calls (about "
                    f"{format_usd(mean)} per call at {self.price.key}'s prices)"
                    + (f", {self.in_flight} still in flight" if self.in_flight else "")
                    + ". Everything judged is stored; rerun with a larger `max_cost` to continue")
                return False
            self.in_flight += 1
            return True

    def settle(self, usage: Usage) -> None:
        """Record a reserved call's usage once it is done (it is no longer in flight)."""
        cost = self.cost_of(usage)
        with self._lock:
            self.in_flight = max(0, self.in_flight - 1)
            self.spent_usd += cost
            self.calls += 1 if usage.lm_calls else 0  # a cache hit says nothing about a call's cost

    def charge(self, usage: Usage) -> None:
        """Record usage of LM calls that were not reserved (an item's finish step)."""
        cost = self.cost_of(usage)
        with self._lock:
            self.spent_usd += cost  # raises the mean per call: the estimate errs on the safe side

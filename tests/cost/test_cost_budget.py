"""Issue 23, point 4: a ``--max-cost`` budget that holds.

Before each call the budget reserves that call's worst case (prompt tokens at the input
price plus ``max_tokens`` at the output price) and releases the unused part when the
call's usage arrives, so the spend never passes the budget, at any concurrency, with
short and long items in any order; a budget below one call's worst case is refused
before any call. Scripted calls only: each "call" reports usage through DSPy's usage
tracker, as a real one does, and never presents itself as a model.
"""

from __future__ import annotations

import random
import threading
import time

import dspy
import pytest

from binaryeval_dspy.cost.budget import CostBudget
from binaryeval_dspy.cost.pricing import format_usd, model_price
from binaryeval_dspy.cost.budget import CallRequest
from binaryeval_dspy.engines.plan_runner import PlanRunner
from binaryeval_dspy.engines.senders import wait_for_reservation
from binaryeval_dspy.engines.threads import ThreadedEngine
from binaryeval_dspy.lm.calls import Answer, LMCall
from binaryeval_dspy.schemas.item_result import Usage

PRICE = model_price("gpt-4o-mini")
MAX_TOKENS = 200


class WordTokenizer:
    """One token per word: the provider's own count in this test (``exact``)."""

    exact = True

    def count(self, text: str) -> int:
        return len(text.split())


def worst_usd(words: int) -> float:
    """The worst case the budget must reserve for a prompt of `words` words (+4 per message, +3 for the reply)."""
    return PRICE.cost(prompt_tokens=words + 7, completion_tokens=MAX_TOKENS).total


class Judged(dspy.Signature):
    """Scripted (never sent to a model)."""

    text: str = dspy.InputField()
    verdict: str = dspy.OutputField()


class Items:
    """A judging plan of scripted items: item `words` asks `questions` calls of that many words."""

    def __init__(self, questions: int) -> None:
        self.questions = questions

    def begin(self, item):
        index, words = item
        return {"index": index, "words": words, "answers": {}}

    def next_calls(self, state):
        return [LMCall(key=f"q{i}", signature=Judged, inputs={"text": "w " * state["words"], "question": i,
                                                              "item": state["index"]})
                for i in range(self.questions) if f"q{i}" not in state["answers"]]

    def take(self, state, call, answer):
        state["answers"][call.key] = answer

    def unsent(self, state, call, reason):
        state["answers"][call.key] = None

    def finish(self, state):
        return state


class Calls:
    """A sender whose calls report their usage like an LM call does, through the budget protocol
    the real senders follow (reserve the request's worst case, settle with its usage)."""

    name = "scripted"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.usd = 0.0
        self.made = 0

    def answer(self, call, budget=None):
        words = len(call.inputs["text"].split())
        request = CallRequest(messages=[{"role": "user", "content": call.inputs["text"]}], max_tokens=MAX_TOKENS)
        if budget is not None and not wait_for_reservation(budget, request):
            return Answer(status="not_sent", reason=budget.stop_reason)
        with self.lock:
            completion, delay = self.rng.randint(1, MAX_TOKENS), self.rng.random() * 0.004
        time.sleep(delay)
        usage = Usage(lm_calls=1, prompt_tokens=words + 7, completion_tokens=completion)
        with self.lock:
            self.usd += PRICE.cost(prompt_tokens=words + 7, completion_tokens=completion).total
            self.made += 1
        if budget is not None:
            budget.settle(usage, request)
        return Answer(status="answered", fields={"verdict": "yes"}, usage=usage)


def judge(calls: Calls, sizes: list[int], questions: int, *, concurrency: int, budget: CostBudget) -> list:
    """Run the plan of `sizes` through the thread engine with `budget`; the items reported."""
    done: list = []
    engine = ThreadedEngine("live" if concurrency > 1 else "local", None, concurrency, sender=calls)
    runner = PlanRunner(Items(questions), enumerate(enumerate(sizes)), on_done=done.append)
    runner.run(engine, budget=budget)
    if budget.stop_reason is not None:
        budget.calls_left = runner.calls_left()
    return done


@pytest.mark.parametrize("concurrency", [1, 8, 64])
@pytest.mark.parametrize("order", ["short_first", "long_first", "shuffled"])
def test_spend_never_passes_the_budget_at_any_concurrency(concurrency, order):
    sizes = [30] * 20 + [3000] * 20  # short and long items, the long ones 100x the short
    if order == "long_first":
        sizes.reverse()
    elif order == "shuffled":
        random.Random(5).shuffle(sizes)
    calls = Calls(seed=len(sizes) * concurrency)
    limit = 25 * worst_usd(3000)  # room for about a third of the calls
    budget = CostBudget(limit, PRICE, tokenizer=WordTokenizer())
    judge(calls, sizes, 3, concurrency=concurrency, budget=budget)
    assert budget.stop_reason is not None and "`max_cost`" in budget.stop_reason
    assert calls.usd <= limit and budget.spent_usd == pytest.approx(calls.usd)
    assert calls.made >= 25  # it stopped near the budget, not at the first long item
    assert budget.in_flight == 0 and budget.reserved_usd == pytest.approx(0.0, abs=1e-12)
    assert budget.calls_left == len(sizes) * 3 - calls.made  # every call not made is counted as left
    assert f"{budget.calls_left} LM call(s) (questions) are left" in budget.stop_reason


def test_a_short_item_then_long_ones_cannot_overspend():
    """The old guard priced the next call at the mean so far: a short item first let long ones overspend."""
    calls = Calls(seed=1)
    sizes = [10] + [4000] * 10
    limit = 4.5 * worst_usd(4000)
    budget = CostBudget(limit, PRICE, tokenizer=WordTokenizer())
    judge(calls, sizes, 1, concurrency=4, budget=budget)
    assert calls.usd <= limit
    assert calls.made >= 5  # short item + 4 long ones fit in the worst case; actual replies were shorter


def test_a_budget_below_one_calls_worst_case_is_refused_before_any_call():
    calls = Calls(seed=2)
    worst = worst_usd(500)
    budget = CostBudget(worst * 0.9, PRICE, tokenizer=WordTokenizer())
    done = judge(calls, [500, 500], 2, concurrency=8, budget=budget)
    assert calls.made == 0 and done == []  # nothing sent, nothing stored
    reason = budget.stop_reason
    assert reason is not None and "less than the worst case of one LM call" in reason
    assert f"the smallest budget that allows this call is {format_usd(worst)}" in reason
    assert "507 prompt tokens and up to 200 completion tokens" in reason
    assert budget.calls_left == 4


def test_unused_reservations_come_back_so_calls_in_flight_do_not_stop_the_run_early():
    """64 calls in flight reserve 64 worst cases; the replies are short, so the run goes on
    until what was actually spent nears the budget."""
    calls = Calls(seed=3)
    limit = 100 * worst_usd(50)
    budget = CostBudget(limit, PRICE, tokenizer=WordTokenizer())
    judge(calls, [50] * 100, 3, concurrency=64, budget=budget)
    assert calls.usd <= limit
    assert calls.made > 100  # replies average half of max_tokens: more calls than worst cases fit

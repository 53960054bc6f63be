"""One item's plan run in this process, through DSPy's configured LM: how a module's ``forward`` judges.

`run_in_process` hands the item's calls to the ``live`` thread engine (``num_threads`` in
flight) or the ``local`` one (one at a time) with an `LMSender` on the LM DSPy's settings
name (``dspy.configure`` / ``dspy.context``), or the predictor's own; `arun_in_process`
sends them all at once through DSPy's async adapter path (``adapter.acall``) for
``aforward``. Either way the plan, the answers and the result are the program's own
(`binaryeval_dspy.engines.plan_runner.PlannedProgram`), so ``forward``, ``aforward`` and a
run over many items give the same outcomes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import dspy

from binaryeval_dspy.engines.base import engine_sender
from binaryeval_dspy.engines.plan_runner import ItemOutcome, PlanRunner
from binaryeval_dspy.engines.threads import ThreadedEngine
from binaryeval_dspy.lm.calls import Answer, LMCall, answer_from_outputs, read_failure
from binaryeval_dspy.lm.usage import usage_from_entries
from binaryeval_dspy.schemas.item_result import Usage


def run_in_process(program: Any, state: Any, *, num_threads: int = 1, lm: Any = None) -> Any:
    """Run one item's plan (`state`, from ``program.begin``) and return ``program.finish``'s result.

    Raises:
        whatever finishing the item raised (a failed LM call is an answer, never raised).
    """
    done = run_states(program, [state], num_threads=num_threads, lm=lm, dedupe=False)[0]
    if done.error is not None:
        raise done.error
    return done.result


def run_states(program: Any, states: Sequence[Any], *, num_threads: int = 1, lm: Any = None,
               dedupe: bool = True) -> list[ItemOutcome]:
    """Run many items' plans (their states, from ``program.begin``), `num_threads` calls in flight
    across them; one `ItemOutcome` per state, in order (an item whose finish raised has its ``error``)."""
    engine = ThreadedEngine("live" if num_threads > 1 else "local", None, max(1, num_threads), lm=lm)
    done: list[ItemOutcome | None] = [None] * len(states)

    def on_done(outcome: ItemOutcome) -> None:
        done[outcome.index] = outcome

    runner = PlanRunner(program, enumerate(states), begin=lambda _index, given: given, on_done=on_done,
                        dedupe=dedupe, open_items=max(16, 4 * num_threads))
    runner.run(engine)
    return [outcome if outcome is not None else ItemOutcome(index=i, item=state, result=None,
                                                           error=RuntimeError("the item was not judged"),
                                                           usage=Usage(), seconds=0.0)
            for i, (outcome, state) in enumerate(zip(done, states))]


async def arun_in_process(program: Any, state: Any, *, lm: Any = None) -> Any:
    """`run_in_process` for asyncio: each round's calls are awaited together (``asyncio.gather``)."""
    sender = None
    while True:
        calls = program.next_calls(state)
        if not calls:
            return program.finish(state)
        sender = sender or engine_sender(None, lm=lm)  # a plan with no LM call needs no LM
        answers = await asyncio.gather(*(aanswer(sender, call) for call in calls))
        for call, answer in zip(calls, answers):
            program.take(state, call, answer)


async def aanswer(sender: Any, call: LMCall) -> Answer:
    """The answer to `call` through DSPy's async adapter path (``await adapter.acall(lm, ...)``)."""
    with dspy.track_usage() as tracker:
        try:
            values = await sender.adapter.acall(sender.lm, dict(call.config), call.signature, list(call.demos),
                                                dict(call.inputs))
        except Exception as exc:  # noqa: BLE001 - a failed call is an answer's outcome
            answer = read_failure(call, exc)
        else:
            answer = answer_from_outputs(call, values)
        answer.usage = usage_from_entries(dict(tracker.usage_data))
    return answer

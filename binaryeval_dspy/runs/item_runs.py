"""Running a program over in-memory items, keeping failures as failures (no run directory).

`run_resumable` (`binaryeval_dspy.runs.evaluation`) is the loop of a saved, resumable run;
this module runs items for callers that keep results in memory: the optimizer's modes
and the head-to-head comparison. Judging goes through BinEval's judging plan
(`binaryeval_dspy.engines.in_process.run_states`); other work (generation) through a
thread pool (`run_items`).

`generate_outputs` is the one place generations are made for scoring (the optimizer's
generation mode, the IFBench comparison's test records): a call that raised is a failed
`Generation` with its error, never an empty text to be judged. `judge_items` is the one
place a BinEval judges in-memory items.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import dspy

from binaryeval_dspy.engines.in_process import run_states
from binaryeval_dspy.lm.calls import error_text
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.schemas.verdict import QuestionVerdict

logger = logging.getLogger(__name__)


def item_id(example: dspy.Example, index: int) -> str:
    """The example's ``item_id`` as a string, else its position `index` as a string (never raises)."""
    value = example.get("item_id") if hasattr(example, "get") else None
    return str(value) if value not in (None, "") else str(index)


def run_items(
    call: Callable[[dspy.Example], Any],
    items: Sequence[dspy.Example],
    *,
    num_threads: int = 1,
) -> list[Any | Exception]:
    """``call(item)`` for every item, in order; an exception is returned in the item's place.

    For work that is not a judging plan (a generator under optimization, a user's DSPy
    program): `num_threads` items at once on a thread pool, each in a copy of the caller's
    `contextvars` context (DSPy's settings and usage tracker reach every thread).

    Args:
        call: the work for one item (runs under the caller's DSPy settings).
        items: the items.
        num_threads: items in flight at once (remote LMs gain; the embedded llama.cpp
            model serializes calls anyway).

    Returns:
        One result or exception per item, in item order; the caller decides what a failed
        item means (it is never turned into a score). Failures are logged, never raised.
    """
    def guarded(item: dspy.Example) -> Any:
        try:
            return call(item)
        except Exception as exc:  # noqa: BLE001 - a failed item is returned in its place
            logger.warning("an item failed: %s: %s", type(exc).__name__, exc)
            return exc

    if num_threads <= 1:
        return [guarded(item) for item in items]
    with ThreadPoolExecutor(max_workers=int(num_threads), thread_name_prefix="bineval-item") as pool:
        futures = [pool.submit(contextvars.copy_context().run, guarded, item) for item in items]
        return [future.result() for future in futures]


@dataclass
class Generation:
    """One generator call's outcome.

    Attributes:
        output: the output text ("" when the call succeeded but the field is missing or
            blank: the program produced nothing, which scores as such); None when failed.
        error: ``"<ErrorType>: <message>"`` when the call raised (a transport error, a
            reply the adapter could not parse, anything else); None otherwise.
    """

    output: str | None
    error: str | None = None

    @property
    def failed(self) -> bool:
        """True when the generator call raised (there is no output to judge)."""
        return self.error is not None


def generate_outputs(
    program: Callable[..., Any],
    items: Sequence[dspy.Example],
    *,
    output_field: str,
    inputs: Callable[[dspy.Example], dict[str, Any]] | None = None,
    num_threads: int = 1,
) -> list[Generation]:
    """Call `program` on every item and keep each call's output or error, in item order.

    Args:
        program: the generator (a DSPy module or any callable taking keyword inputs).
        items: the items; by default ``program(**item.inputs())``.
        output_field: the prediction field holding the output text.
        inputs: item -> keyword arguments, instead of ``item.inputs()``.
        num_threads: generator calls in flight (`map_items`).

    Returns:
        One `Generation` per item: ``failed`` with the error when the call raised (it
        is never turned into an empty output), else the output text ("" when blank).
    """

    def one(item: dspy.Example) -> Generation:
        try:
            pred = program(**(inputs(item) if inputs is not None else item.inputs()))
        except Exception as exc:  # noqa: BLE001 - any failed call is recorded as failed, with its error
            return Generation(output=None, error=error_text(exc))
        value = pred.get(output_field) if hasattr(pred, "get") else getattr(pred, output_field, None)
        return Generation(output=value if isinstance(value, str) else ("" if value is None else str(value)))

    results = run_items(one, items, num_threads=num_threads)
    return [r if isinstance(r, Generation) else Generation(output=None, error=error_text(r)) for r in results]


def judge_item_results(
    program: BinEval, items: Sequence[dspy.Example], *, num_threads: int = 1
) -> list[list[QuestionVerdict] | Exception]:
    """Verdicts of `program` on every item, in item order, or the exception that failed the item.

    Runs BinEval's judging plan (code checks, outcome states) for all items with
    `num_threads` calls in flight across them (`run_states`); a question whose call failed
    is an ``error`` verdict (left out of every yes-rate).

    Args:
        program: the judge; its question set is asked of every item.
        items: Examples with string ``input`` and ``output``.
        num_threads: LM calls in flight (>= 1).

    Returns:
        Per item, one `QuestionVerdict` per question, or the exception (never raised).
    """
    states: list[Any] = []
    for item in items:
        try:
            states.append(program.begin(item))
        except Exception as exc:  # noqa: BLE001 - an item that cannot be planned is returned as its error
            states.append(exc)
    planned = [state for state in states if not isinstance(state, Exception)]
    done = iter(run_states(program, planned, num_threads=max(1, int(num_threads)), lm=program.judge.lm))
    out: list[list[QuestionVerdict] | Exception] = []
    for state in states:
        if isinstance(state, Exception):
            out.append(state)
            continue
        outcome = next(done)
        if outcome.error is not None:
            logger.warning("an item failed: %s: %s", type(outcome.error).__name__, outcome.error)
            error = outcome.error
            out.append(error if isinstance(error, Exception) else RuntimeError(str(error)))
        else:
            out.append(list(outcome.result.verdicts))
    return out


def judge_items(
    program: BinEval, items: Sequence[dspy.Example], *, num_threads: int = 1
) -> list[list[QuestionVerdict] | None]:
    """`judge_item_results` with None for an item that could not be judged (same order, length)."""
    return [None if isinstance(result, Exception) else result
            for result in judge_item_results(program, items, num_threads=num_threads)]


def judge_items_by_id(
    program: BinEval, items: Sequence[dspy.Example], *, num_threads: int = 1
) -> dict[str, list[QuestionVerdict] | None]:
    """`judge_items` keyed by `item_id` (ids must be unique within `items`: a repeat overwrites)."""
    judged = judge_items(program, items, num_threads=num_threads)
    return {item_id(item, i): verdicts for i, (item, verdicts) in enumerate(zip(items, judged, strict=True))}

"""Running a program over in-memory items, keeping failures as failures (no run directory).

`run_resumable` (`binaryeval_dspy.runs.evaluation`) is the loop of a saved, resumable run;
this module runs items for callers that keep results in memory: the optimizer's modes
and the head-to-head comparison. Every function goes through the project's one item
loop, `binaryeval_dspy.lm.call_pool.map_items`.

`generate_outputs` is the one place generations are made for scoring (the optimizer's
generation mode, the IFBench comparison's test records): a call that raised is a failed
`Generation` with its error, never an empty text to be judged. `judge_items` is the one
place a BinEval judges in-memory items.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import dspy

from binaryeval_dspy.lm.call_pool import map_items
from binaryeval_dspy.lm.item_work import ItemDone, ItemWork
from binaryeval_dspy.programs.bineval import BinEval, error_text
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
    """Every item's `ItemWork` with `num_threads` calls in flight (`map_items`).

    Returns:
        One entry per item, in item order: the work's result, or the exception that
        failed it (a non-exception error is wrapped in `RuntimeError`); logged, never raised.
    """
    out: list[Any] = [None] * len(items)

    def on_done(done: ItemDone) -> None:
        if done.error is not None:
            logger.warning("an item failed: %s: %s", type(done.error).__name__, done.error)
            out[done.index] = done.error if isinstance(done.error, Exception) else RuntimeError(str(done.error))
        else:
            out[done.index] = done.result

    map_items(list(items), lambda _index, item: plan(item), on_done, concurrency=max(1, int(num_threads)))
    return out


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

    Runs `BinEval.item_work` (code checks, salvage, outcome states) in `map_items`: the
    questions of all items share `num_threads` calls in flight; a question whose call
    failed is an ``error`` verdict (left out of every yes-rate).

    Args:
        program: the judge; its question set is asked of every item.
        items: Examples with string ``input`` and ``output``.
        num_threads: LM calls in flight (>= 1).

    Returns:
        Per item, one `QuestionVerdict` per question, or the exception (never raised).
    """
    results = map_work(items, lambda item: program.item_work(item.input, item.output), num_threads=num_threads)
    return [result if isinstance(result, Exception) else list(result.verdicts) for result in results]


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

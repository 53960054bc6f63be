"""Judging items with a BinEval and aggregating per-dimension yes-rates (shared by the evaluator modes)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import dspy

from binaryeval_dspy.errors import BinEvalError, InputError
from binaryeval_dspy.optimizers.bineval_optimizer.item_runs import item_id, map_work
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.verdict import QuestionVerdict


def require_bineval(program: dspy.Module, mode: str) -> BinEval:
    """The program as a `BinEval`, or a `BinEvalError` saying what the mode needs."""
    if not isinstance(program, BinEval):
        raise BinEvalError(
            f"mode {mode!r} optimizes an evaluator: the student must be a BinEval, got "
            f"{type(program).__name__}. Use mode 'generation' to optimize a generator program."
        )
    if program.questions.value is None:
        raise BinEvalError(f"mode {mode!r}: the student BinEval has no question set; give it one")
    return program


def require_items(items: Sequence[dspy.Example], name: str) -> None:
    """Every item must have non-empty string ``input`` and ``output`` fields."""
    if not items:
        raise InputError(f"the {name} is empty", field=name, fix=f"pass at least one item as {name}.")
    for index, item in enumerate(items):
        for field in ("input", "output"):
            value = item.get(field) if hasattr(item, "get") else None
            if not isinstance(value, str) or not value.strip():
                raise InputError(
                    f"{name} item {item_id(item, index)!r} has no non-empty '{field}'", field=field,
                    fix="load items with binaryeval_dspy.data.load_items (input/output field mapping).",
                )


def judge_items(
    program: BinEval, items: Sequence[dspy.Example], *, num_threads: int = 1
) -> list[list[QuestionVerdict] | None]:
    """Verdicts of `program` on every item, in item order (None for an item that could not be judged).

    The questions of all items share `num_threads` calls in flight; a question whose
    call failed is an ``error`` verdict (left out of every yes-rate).
    """
    results = map_work(items, lambda item: program.item_work(item.input, item.output), num_threads=num_threads)
    return [None if isinstance(result, Exception) else list(result.verdicts) for result in results]


def judge_items_by_id(
    program: BinEval, items: Sequence[dspy.Example], *, num_threads: int = 1
) -> dict[str, list[QuestionVerdict] | None]:
    """`judge_items` keyed by item id (ids must be unique within `items`)."""
    judged = judge_items(program, items, num_threads=num_threads)
    return {item_id(item, i): verdicts for i, (item, verdicts) in enumerate(zip(items, judged, strict=True))}


def dimension_yes_rates(
    verdicts_by_item: dict[str, list[QuestionVerdict] | None], question_set: QuestionSet
) -> dict[str, float | None]:
    """S_d of paper Algorithm 1: per question, the mean of yes over items (parsed verdicts
    only), then the mean over the dimension's questions. None where nothing parsed."""
    per_question: dict[str, list[int]] = {q.id: [] for q in question_set.questions}
    for verdicts in verdicts_by_item.values():
        for v in verdicts or []:
            if v.parsed and v.question_id in per_question:
                per_question[v.question_id].append(1 if v.verdict == "yes" else 0)
    rates: dict[str, float | None] = {}
    for dimension, questions in question_set.by_dimension().items():
        means = [sum(per_question[q.id]) / len(per_question[q.id]) for q in questions if per_question[q.id]]
        rates[dimension] = sum(means) / len(means) if means else None
    return rates


def nan_to_none(value: float | None) -> float | None:
    """None for NaN (e.g. a correlation of constant scores), else the value as float."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value

"""Judging items with a BinEval and aggregating per-dimension yes-rates (shared by the evaluator modes)."""

from __future__ import annotations

from collections.abc import Sequence

import dspy

from binaryeval_dspy.errors import BinEvalError, InputError
from binaryeval_dspy.optimizers.bineval_optimizer.mode_base import ItemOutcome
from binaryeval_dspy.lm.calls import error_text
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.runs.item_runs import item_id
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.scoring import score_verdicts


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


def verdicts_outcome(
    key: str, verdicts: list[QuestionVerdict] | Exception | None, question_set: QuestionSet,
    dimensions: Sequence[str] | None = None, *, stage: str = "evaluator",
) -> ItemOutcome:
    """Whether an item's verdicts give it a score on every dimension in `dimensions`.

    Args:
        key: the item id.
        verdicts: the item's verdicts, or the exception / None of an item that failed.
        question_set: the questions the verdicts answer.
        dimensions: the dimensions that must be scored (None: any parsed verdict will do).
        stage: recorded for an item not scored (``evaluator``, ``source``).

    Returns:
        ``scored``; ``failed`` (judging raised, or a needed dimension has no parsed verdict
        and some call failed) with the error; or ``unscored`` (the replies did not parse).
    """
    if verdicts is None or isinstance(verdicts, Exception):
        error = error_text(verdicts) if verdicts is not None else "the item was not judged"
        return ItemOutcome(key, "failed", stage, error)
    card = score_verdicts(verdicts, question_set)
    if dimensions is None:
        ok = card.overall is not None
    else:
        ok = all(card.dimension_scores.get(d) is not None for d in dimensions)
    if ok:
        return ItemOutcome(key, "scored")
    errors = [v for v in verdicts if v.verdict == "error"]
    if errors:
        return ItemOutcome(key, "failed", stage, errors[0].error)
    unparsed = next((v for v in verdicts if v.verdict == "unparsed"), None)
    return ItemOutcome(key, "unscored", stage, (unparsed.error or "unparsed") if unparsed else "no parsed verdict")


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

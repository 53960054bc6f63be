"""Failures from question-level labels: where a judge and a person disagree, question by question.

With a labels file (the verdicts format: judge ``human`` or annotator ids, e.g. downloaded
from `bineval view`), the human mode's failures are the questions whose answer differs from
the label, not the items whose score is 0.3 away from a rating: the finer signal of issue 29.
Several annotators are reduced to their majority label per (item, question) by
`binaryeval_dspy.meta_eval.label_agreement.reference_labels` (a tie gives no label).

A non-answer (``unparsed``, ``error``) to a labelled question is no disagreement and no
agreement: it leaves the figures and is counted (``label_unanswered``). Agreement is the
package's one accuracy and Cohen's kappa (`binaryeval_dspy.metrics.binary_agreement`) over
the pooled judge-vs-label cells of a split's items.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from binaryeval_dspy.errors import InputError
from binaryeval_dspy.meta_eval.label_agreement import reference_labels
from binaryeval_dspy.metrics.binary_agreement import accuracy_from_counts, cohen_kappa_from_counts
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.schemas.verdict_record import VerdictRecord

#: (item id, question id) -> True for a "yes" label
Reference = dict[tuple[str, str], bool]


def label_reference(records: Iterable[VerdictRecord]) -> Reference:
    """The label of each labelled (item, question): its annotators' majority (ties left out).

    Raises:
        InputError: no record gives a yes / no label.
    """
    reference = reference_labels(records).reference
    if not reference:
        raise InputError("the labels hold no yes / no label (every row is unparsed or error, or annotators tie)",
                         field="labels", fix="pass a labels file with yes / no verdicts (docs/verdicts.md).")
    return reference


@dataclass
class ItemLabelComparison:
    """One item's answers against its labels.

    Attributes:
        cells: judge-vs-label counts (yes_yes, yes_no, no_yes, no_no) over its answered
            labelled questions (`binaryeval_dspy.metrics.binary_agreement.CELLS`).
        disagreements: (verdict, label) for each answered question whose answer is not its label.
        unanswered: labelled questions the judge gave no yes / no (unparsed, error, or not asked).
    """

    cells: np.ndarray
    disagreements: list[tuple[QuestionVerdict, str]] = field(default_factory=list)
    unanswered: int = 0

    @property
    def answered(self) -> int:
        """Labelled questions answered yes / no."""
        return int(self.cells.sum())


def compare_item(item_id: str, verdicts: Sequence[QuestionVerdict] | None, reference: Reference,
                 question_ids: Iterable[str]) -> ItemLabelComparison:
    """Compare one item's verdicts (None: judging failed) with the labels of `question_ids`."""
    by_question = {v.question_id: v for v in verdicts or []}
    found = ItemLabelComparison(cells=np.zeros(4))
    for qid in question_ids:
        label = reference.get((item_id, qid))
        if label is None:
            continue
        verdict = by_question.get(qid)
        if verdict is None or not verdict.parsed:
            found.unanswered += 1
            continue
        said_yes = verdict.verdict == "yes"
        found.cells[(0 if label else 1) if said_yes else (2 if label else 3)] += 1
        if said_yes != label:
            found.disagreements.append((verdict, "yes" if label else "no"))
    return found


def labelled_pairs(item_ids: Iterable[str], reference: Reference, question_ids: Iterable[str]) -> int:
    """How many labels name one of `item_ids` and one of `question_ids`."""
    items, questions = set(item_ids), set(question_ids)
    return sum(1 for item, qid in reference if item in items and qid in questions)


def _finite(value: float) -> float | None:
    return None if not math.isfinite(value) else float(value)


def label_scores(split: str, comparisons: Sequence[ItemLabelComparison]) -> dict[str, float | None]:
    """A split's agreement with the labels, for an iteration's scores.

    Returns:
        ``{split}_label_kappa`` (Cohen's kappa, [-1, 1]; None when undefined: no answered
        pair, or one answer on both sides), ``{split}_label_accuracy`` ([0, 1]),
        ``{split}_label_pairs`` (answered labelled questions), ``{split}_label_disagreements``
        and ``{split}_label_unanswered``.
    """
    cells = np.sum([c.cells for c in comparisons], axis=0) if comparisons else np.zeros(4)
    n = float(cells.sum())
    return {f"{split}_label_kappa": _finite(cohen_kappa_from_counts(cells)),
            f"{split}_label_accuracy": _finite(accuracy_from_counts(cells)) if n else None,
            f"{split}_label_pairs": n,
            f"{split}_label_disagreements": float(sum(len(c.disagreements) for c in comparisons)),
            f"{split}_label_unanswered": float(sum(c.unanswered for c in comparisons))}


def label_agreement_change(history: Any) -> dict[str, Any] | None:
    """Agreement with the labels before (iteration 0) and after (the kept iteration).

    Args:
        history: an `OptimizationHistory` of a human-mode run with labels.

    Returns:
        ``{"split": "val" | "train", "before": {...}, "after": {...}}`` with each side's
        ``kappa``, ``accuracy``, ``pairs``, ``disagreements`` and ``unanswered``, on the
        validation items when there were any (never shown to the note-taker), else the
        training items; None when the history holds no label scores.
    """
    iterations = getattr(history, "iterations", [])
    if not iterations:
        return None
    first = iterations[0].scores
    split = "val" if "val_label_kappa" in first else "train" if "train_label_kappa" in first else None
    if split is None:
        return None
    best = getattr(history, "best_iteration", None)
    kept = iterations[best if best is not None else -1].scores

    def side(scores: dict[str, float | None]) -> dict[str, float | None]:
        return {name: scores.get(f"{split}_label_{name}")
                for name in ("kappa", "accuracy", "pairs", "disagreements", "unanswered")}

    return {"split": split, "before": side(first), "after": side(kept)}

"""Why decomposition works: question-level statistics of a BinEval run (paper section 5.6).

From the stored verdicts of many items: the yes-rate of every binary question (how hard
each check is), and per dimension the phi coefficient between every pair of questions
(how redundant two checks are). Low off-diagonal phi means the questions measure
different things, so averaging them reduces variance (the paper reports a mean
off-diagonal phi of 0.38 on SummEval and the share of pairs with |phi| < 0.3).
Unparsed verdicts are left out pairwise; a question answered the same way on every
item has no defined phi with anything (NaN, counted, excluded from the means).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from binaryeval_dspy.schemas.item_result import ItemResult
from binaryeval_dspy.schemas.question_set import QuestionSet

if TYPE_CHECKING:  # numpy and pandas are imported by the functions that use them (import time)
    import pandas as pd

WEAK_PHI = 0.3


def verdict_matrix(results: Sequence[ItemResult], question_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """Items x questions: 1.0 for yes, 0.0 for no, NaN for unparsed or missing.

    Args:
        results: stored BinEval item results.
        question_ids: column order (default: order of first appearance).
    """
    import pandas as pd

    rows = {r.item_id: {v.question_id: (1.0 if v.verdict == "yes" else 0.0 if v.verdict == "no" else math.nan)
                        for v in r.verdicts} for r in results}
    frame = pd.DataFrame.from_dict(rows, orient="index", dtype=float)
    if question_ids is not None:
        frame = frame.reindex(columns=list(question_ids))
    return frame


def phi_coefficient(a: Sequence[float], b: Sequence[float]) -> float:
    """Phi coefficient of two binary (0/1) vectors, NaN entries dropped pairwise.

    phi = (n11 n00 - n10 n01) / sqrt(n1. n0. n.1 n.0), equal to Pearson's r on 0/1
    data; in [-1, 1]. Returns NaN when either vector is constant over the shared items
    or fewer than two items are shared.
    """
    import numpy as np

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep] > 0.5, y[keep] > 0.5
    if len(x) < 2:
        return math.nan
    n11 = float(np.sum(x & y))
    n00 = float(np.sum(~x & ~y))
    n10 = float(np.sum(x & ~y))
    n01 = float(np.sum(~x & y))
    denominator = math.sqrt((n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00))
    if denominator == 0:
        return math.nan
    return (n11 * n00 - n10 * n01) / denominator


@dataclass
class DimensionPhi:
    """Question redundancy within one dimension.

    Attributes:
        dimension: the dimension name.
        question_ids: the dimension's questions (matrix order).
        matrix: phi between every pair (1 on the diagonal, NaN where undefined).
        mean_off_diagonal: mean phi over defined pairs i < j (NaN if none).
        share_weak: share of defined pairs with |phi| < 0.3 (NaN if none).
        pairs: number of pairs i < j.
        undefined_pairs: pairs whose phi is NaN (a constant question).
    """

    dimension: str
    question_ids: list[str]
    matrix: pd.DataFrame
    mean_off_diagonal: float
    share_weak: float
    pairs: int
    undefined_pairs: int


@dataclass
class QuestionAnalysis:
    """Everything section 5.6 reports for one run.

    Attributes:
        yes_rates: one row per question: question_id, dimension, text, yes_rate
            (yes / (yes + no), NaN if never parsed), yes, no, unparsed.
        dimensions: dimension -> `DimensionPhi`.
        mean_off_diagonal: mean phi over the defined pairs of every dimension.
        share_weak: share of |phi| < 0.3 over the defined pairs of every dimension.
        yes_rate_spread: dimension -> max - min yes-rate of its questions.
    """

    yes_rates: pd.DataFrame
    dimensions: dict[str, DimensionPhi] = field(default_factory=dict)
    mean_off_diagonal: float = math.nan
    share_weak: float = math.nan
    yes_rate_spread: dict[str, float] = field(default_factory=dict)


def _dimension_phi(dimension: str, ids: list[str], verdicts: pd.DataFrame) -> DimensionPhi:
    import numpy as np
    import pandas as pd

    matrix = pd.DataFrame(np.eye(len(ids)), index=ids, columns=ids)
    offdiag: list[float] = []
    undefined = 0
    for i, qi in enumerate(ids):
        for j in range(i + 1, len(ids)):
            qj = ids[j]
            value = phi_coefficient(verdicts[qi], verdicts[qj])
            matrix.loc[qi, qj] = matrix.loc[qj, qi] = value
            if math.isnan(value):
                undefined += 1
            else:
                offdiag.append(value)
    for q in ids:  # a question that never varies is not even correlated with itself
        column = verdicts[q].dropna()
        if column.nunique() < 2:
            matrix.loc[q, q] = math.nan
    pairs = len(ids) * (len(ids) - 1) // 2
    return DimensionPhi(
        dimension=dimension, question_ids=ids, matrix=matrix,
        mean_off_diagonal=float(np.mean(offdiag)) if offdiag else math.nan,
        share_weak=float(np.mean(np.abs(offdiag) < WEAK_PHI)) if offdiag else math.nan,
        pairs=pairs, undefined_pairs=undefined,
    )


def analyze_questions(results: Sequence[ItemResult], question_set: QuestionSet) -> QuestionAnalysis:
    """Yes-rates and phi matrices of a BinEval run (paper section 5.6, Figure 3, Tables 9-12).

    Args:
        results: stored item results made with `question_set`.
        question_set: the questions (for dimensions, order and text).

    Returns:
        A `QuestionAnalysis`. Never raises on degenerate data: undefined values are
        NaN and counted.
    """
    import numpy as np
    import pandas as pd

    ids = [q.id for q in question_set.questions]
    verdicts = verdict_matrix(results, ids)
    rows = []
    for q in question_set.questions:
        column = verdicts[q.id] if q.id in verdicts else pd.Series(dtype=float)
        yes, no = int((column == 1.0).sum()), int((column == 0.0).sum())
        rows.append({"question_id": q.id, "dimension": q.dimension, "text": q.text,
                     "yes_rate": yes / (yes + no) if yes + no else math.nan,
                     "yes": yes, "no": no, "unparsed": int(len(results) - yes - no)})
    yes_rates = pd.DataFrame(rows, columns=["question_id", "dimension", "text", "yes_rate", "yes", "no", "unparsed"])
    analysis = QuestionAnalysis(yes_rates=yes_rates)
    all_pairs: list[float] = []
    for dimension, questions in question_set.by_dimension().items():
        dim_ids = [q.id for q in questions]
        phi = _dimension_phi(dimension, dim_ids, verdicts)
        analysis.dimensions[dimension] = phi
        m = phi.matrix.to_numpy()
        upper = m[np.triu_indices(len(dim_ids), k=1)]
        all_pairs.extend(float(v) for v in upper if not math.isnan(v))
        rates = yes_rates.loc[yes_rates["dimension"] == dimension, "yes_rate"].dropna()
        analysis.yes_rate_spread[dimension] = float(rates.max() - rates.min()) if len(rates) else math.nan
    if all_pairs:
        arr = np.array(all_pairs)
        analysis.mean_off_diagonal = float(arr.mean())
        analysis.share_weak = float(np.mean(np.abs(arr) < WEAK_PHI))
    return analysis

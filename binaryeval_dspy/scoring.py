"""Yes-rate scoring and affine scaling (paper section 3.2).

Pure functions: verdicts in, `ScoreCard` out. An unparsed verdict and a failed call
(``error``) are left out of the denominator (never counted as "no") and reported in the
counts.
"""

from __future__ import annotations

from collections.abc import Iterable

from binaryeval_dspy.errors import BinEvalError
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.score_card import ScoreCard, VerdictCounts
from binaryeval_dspy.schemas.verdict import QuestionVerdict


def affine_scale(score: float | None, low: float, high: float) -> float | None:
    """Map a score in [0, 1] to [low, high]: S' = S (high - low) + low (paper 3.2).

    Args:
        score: value in [0, 1], or None (returned unchanged).
        low: a, the score given to 0.
        high: b, the score given to 1 (may be below `low` for a reversed scale).

    Returns:
        The scaled score, in [min(a, b), max(a, b)], or None.

    Example:
        >>> affine_scale(3 / 7, 1, 5)  # the paper's Figure 4 example
        2.7142857142857144
    """
    if score is None:
        return None
    return score * (high - low) + low


def yes_rate(counts: VerdictCounts) -> float | None:
    """yes / (yes + no) in [0, 1]; None when nothing was parsed."""
    return counts.yes / counts.parsed if counts.parsed else None


def score_verdicts(
    verdicts: Iterable[QuestionVerdict],
    question_set: QuestionSet,
    *,
    scale: tuple[float, float] = (0.0, 1.0),
) -> ScoreCard:
    """Aggregate one item's verdicts into per-dimension and overall yes-rates.

    Args:
        verdicts: one verdict per question of `question_set` (missing ones count as
            unparsed, so a dropped answer can never raise a score).
        question_set: gives each question's dimension.
        scale: the interval [a, b] for the scaled scores; (1, 5) for a Likert scale.

    Returns:
        A `ScoreCard` with S_d and S in [0, 1] and their scaled values in [a, b].

    Raises:
        BinEvalError: a verdict names a question that is not in the set.
    """
    by_id = {v.question_id: v for v in verdicts}
    known = {q.id for q in question_set.questions}
    unknown = sorted(set(by_id) - known)
    if unknown:
        raise BinEvalError(
            f"verdicts for questions not in the question set: {unknown}; "
            "score with the question set the verdicts were made with"
        )
    counts: dict[str, VerdictCounts] = {}
    for dimension, questions in question_set.by_dimension().items():
        c = VerdictCounts()
        for q in questions:
            verdict = by_id.get(q.id)
            value = verdict.verdict if verdict is not None else "unparsed"
            setattr(c, value, getattr(c, value) + 1)
        counts[dimension] = c
    dimension_scores = {d: yes_rate(c) for d, c in counts.items()}
    total = VerdictCounts(
        yes=sum(c.yes for c in counts.values()),
        no=sum(c.no for c in counts.values()),
        unparsed=sum(c.unparsed for c in counts.values()),
        error=sum(c.error for c in counts.values()),
    )
    overall = yes_rate(total)
    p_yes_scores, p_yes_overall = soft_scores(by_id, question_set)
    low, high = scale
    return ScoreCard(
        dimension_scores=dimension_scores,
        overall=overall,
        counts=counts,
        scale=(float(low), float(high)),
        scaled_dimension_scores={d: affine_scale(s, low, high) for d, s in dimension_scores.items()},
        scaled_overall=affine_scale(overall, low, high),
        p_yes_scores=p_yes_scores,
        p_yes_overall=p_yes_overall,
    )


def soft_scores(
    by_id: dict[str, QuestionVerdict], question_set: QuestionSet
) -> tuple[dict[str, float | None] | None, float | None]:
    """Mean P(yes) per dimension and overall, over the questions whose verdict carries one.

    The soft counterpart of the yes-rate: where the LM returns token log-probabilities,
    each answered question contributes P(yes) in [0, 1] instead of 1/0. Code-checked
    and failed questions carry no P(yes) and are left out.

    Returns:
        (dimension -> mean P(yes) or None, overall mean or None); (None, None) when no
        verdict carries a P(yes) (the LM returned no log-probabilities).
    """
    if not any(v.p_yes is not None for v in by_id.values()):
        return None, None
    per_dimension: dict[str, float | None] = {}
    every: list[float] = []
    for dimension, questions in question_set.by_dimension().items():
        values = [by_id[q.id].p_yes for q in questions if q.id in by_id and by_id[q.id].p_yes is not None]
        per_dimension[dimension] = sum(values) / len(values) if values else None
        every.extend(values)
    return per_dimension, (sum(every) / len(every) if every else None)

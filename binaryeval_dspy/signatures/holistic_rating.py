"""Holistic rating on one criterion (the G-Eval-style baseline, Liu et al., 2023).

One call per dimension: the judge reads the input and the output, follows written
evaluation steps for the criterion and returns one whole number on a scale. The score
field's allowed values are set per scale by `rating_signature`, so a grammar-constrained
model can only answer with a number on the scale.
"""

from __future__ import annotations

from functools import cache
from typing import Literal

import dspy


class RateOnCriterion(dspy.Signature):
    """You grade one output on a single quality criterion. Read the input the output was
    produced from and the output itself, work through the evaluation steps for the
    criterion, and answer with one whole-number score from the given range, where a
    higher number means the output meets the criterion better. Judge only this
    criterion."""

    input: str = dspy.InputField(desc="the source the output was produced from (document, dialogue, instruction)")
    output: str = dspy.InputField(desc="the output to grade")
    criterion: str = dspy.InputField(desc="what the score measures")
    evaluation_steps: str = dspy.InputField(desc="numbered steps to follow before scoring")
    score_range: str = dspy.InputField(desc="the lowest and highest allowed scores")
    score: int = dspy.OutputField(desc="one whole number in the given range")


@cache
def rating_signature(low: int, high: int) -> type[dspy.Signature]:
    """`RateOnCriterion` with the score restricted to the integers low..high.

    Raises:
        ValueError: `high` is not above `low`, or the range has more than 10 values.
    """
    if high <= low or high - low > 9:
        raise ValueError(f"a rating scale needs 2 to 10 integer values, got {low}..{high}")
    allowed = Literal[tuple(range(low, high + 1))]  # type: ignore[valid-type]
    return RateOnCriterion.with_updated_fields("score", type_=allowed)

"""Answering binary questions with their code checks, before and without any LM call (seed 004).

A check that raises, returns something unreadable, or cannot decide gives an
``unparsed`` verdict with the reason: a crashed check is a failure, never a "no".
"""

from __future__ import annotations

from binaryeval_dspy.checks.registry import get_check
from binaryeval_dspy.errors import ConfigError
from binaryeval_dspy.schemas.question_set import BinaryQuestion
from binaryeval_dspy.schemas.verdict import QuestionVerdict


def answer_with_check(question: BinaryQuestion, *, input: str, output: str) -> QuestionVerdict:
    """Run `question`'s check on the item's output (or input) and record its verdict.

    Args:
        question: a question whose ``check`` is set.
        input: the item's input x.
        output: the item's output y.

    Returns:
        A `QuestionVerdict` with ``source="code"``: "yes"/"no" with the check's
        evidence line as explanation and its findings as ``evidence``, or
        "unparsed" with ``error`` when the check raised or could not decide.

    Raises:
        ConfigError: `question` has no check (also a ValueError).
    """
    spec = question.check
    if spec is None:
        raise ConfigError(f"question '{question.id}' has no check", expected="a question with a `check`",
                          received="a question for the LM",
                          fix="call answer_with_check only for questions whose `check` is set.")
    text = output if spec.on == "output" else input
    try:
        result = get_check(spec.name).run(text, spec.params)
    except Exception as exc:  # noqa: BLE001 - user checks can raise anything; recorded, never counted as "no"
        return QuestionVerdict(
            question_id=question.id, verdict="unparsed", source="code",
            error=f"check '{spec.name}' raised {type(exc).__name__}: {exc}",
        )
    if result.passed is None:
        return QuestionVerdict(question_id=question.id, verdict="unparsed", source="code",
                               explanation=result.evidence, evidence=result.data or None,
                               error=f"check '{spec.name}' could not decide: {result.evidence}")
    return QuestionVerdict(
        question_id=question.id, verdict="yes" if result.passed else "no", source="code",
        explanation=result.evidence, evidence=result.data or None,
    )

"""Lesson extraction: one item's failed or disputed questions -> general lessons (paper 3.3-3.4).

The note-taker sees the item (input and output, long fields first so consecutive calls
share a prefix), the role of the prompt being improved, a one-line statement of what
went wrong, and the question-level evidence. It returns lessons phrased as general
guidance for that prompt, not remarks about this one item.
"""

from __future__ import annotations

import dspy
from pydantic import BaseModel, Field


class QuestionEvidence(BaseModel):
    """One binary question that went wrong on one item, as shown to the note-taker.

    Attributes:
        question: the binary question text.
        dimension: the dimension it scores.
        verdict: the verdict under review (``yes`` or ``no``).
        explanation: the explanation given with that verdict.
        reference: what the reference says instead: the source evaluator's verdict and
            explanation, the human rating, or "the judge found this requirement unmet".
    """

    question: str = Field(description="the binary question")
    dimension: str = Field(description="the dimension the question scores")
    verdict: str = Field(description="the verdict under review: yes or no")
    explanation: str = Field(description="the explanation given with that verdict")
    reference: str = Field(description="what the reference (another evaluator, humans or a judge) says instead")


class ExtractLessons(dspy.Signature):
    """You keep notes for improving a prompt. Below is one case where the behaviour that
    prompt produced went wrong, with the questions concerned and what a trusted reference
    says about each of them. Work out why the behaviour differed from the reference and
    write lessons that would prevent the same kind of mistake on other cases. A lesson is
    one or two sentences of general, actionable guidance addressed to whoever follows the
    prompt; it does not mention this case's specific names, numbers or wording unless they
    illustrate a general rule. Write no lesson when the reference itself looks wrong."""

    input: str = dspy.InputField(desc="the input of the case (document, dialogue, instruction)")
    output: str = dspy.InputField(desc="the output of the case")
    prompt_role: str = dspy.InputField(desc="what the prompt being improved is for")
    problem: str = dspy.InputField(desc="a one-line summary of what went wrong on this case")
    evidence: list[QuestionEvidence] = dspy.InputField(desc="the questions that went wrong, with the reference's view")
    lessons: list[str] = dspy.OutputField(desc="zero to three general lessons, one or two sentences each")

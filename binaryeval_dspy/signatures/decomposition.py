"""Step 2 of question generation: requirement -> atomic binary questions (paper section 3.1)."""

from __future__ import annotations

import dspy
from pydantic import BaseModel, Field


class DraftQuestion(BaseModel):
    """A binary question as the LM drafts it, before ids are assigned."""

    question: str = Field(description="a full yes/no question ending with '?'; yes means the requirement is met")
    dimension: str = Field(description="one of the given dimension names, copied exactly")
    violation_example: str = Field(description="a short example of an output that earns 'no'")


class DecomposeRequirement(dspy.Signature):
    """Break one requirement of a task into atomic yes/no questions that a reviewer can
    answer by reading a single output. Phrase every question so that "yes" means the
    output meets the requirement and "no" means it falls short. When the requirement
    bundles several checks, write one question per check; when it is already a single
    check, write one question. Each question tests one thing only, is answerable from
    the output and its input alone, and comes with a brief example of a violating output.
    Write each question as a complete sentence ending with a question mark. Assign each
    question to the most fitting of the given dimensions, copying its name exactly; no
    other names are accepted."""

    task_prompt: str = dspy.InputField(desc="the instructions the evaluated model was given")
    dimensions: list[str] = dspy.InputField(desc="the allowed dimension names")
    requirement: str = dspy.InputField(desc="the one requirement to decompose")
    questions: list[DraftQuestion] = dspy.OutputField(desc="one to four atomic binary questions")

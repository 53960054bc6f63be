"""Step 1 of question generation: task prompt -> requirements (paper section 3.1)."""

from __future__ import annotations

import dspy


class SummarizeRequirements(dspy.Signature):
    """You are preparing a checklist for judging outputs written for the task prompt below.
    Restate the task prompt as a short list of separate requirements that a good output
    must meet. Each requirement names exactly one criterion: something the output must
    contain, a rule it must follow, or a quality it must show. Keep each one to a single
    plain sentence, leave out repetitions, and cover everything the task prompt asks for."""

    task_prompt: str = dspy.InputField(desc="the instructions the evaluated model was given")
    requirements: list[str] = dspy.OutputField(
        desc="the requirements, one short sentence each, most important first"
    )

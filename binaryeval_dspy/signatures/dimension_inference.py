"""Naming the evaluation dimensions when the user gives none (paper section 3.1)."""

from __future__ import annotations

import dspy


class InferDimensions(dspy.Signature):
    """Group the requirements of a task into a few evaluation dimensions: broad, named
    aspects of quality (for a summary these might be coherence, consistency, fluency and
    relevance). Give between two and six dimensions, each a single lowercase word or a
    short snake_case name, so that every requirement fits under one of them."""

    task_prompt: str = dspy.InputField(desc="the instructions the evaluated model was given")
    requirements: list[str] = dspy.InputField(desc="the requirements summarized from the task")
    dimensions: list[str] = dspy.OutputField(desc="2 to 6 dimension names, lowercase")

"""Filing a requirement under one dimension, for its fallback template question (paper section 3.1).

When a requirement's decomposition gives no usable question, the requirement is asked as
one template question; this step says which of the set's dimensions that question is
about, so its answer counts toward the right dimension's score.
"""

from __future__ import annotations

import dspy


class AssignDimension(dspy.Signature):
    """Say which one of the given evaluation dimensions a requirement of a task is about:
    the aspect of quality a reviewer is checking when checking this requirement. Copy the
    name of that dimension exactly as given."""

    task_prompt: str = dspy.InputField(desc="the instructions the evaluated model was given")
    dimensions: list[str] = dspy.InputField(desc="the allowed dimension names")
    requirement: str = dspy.InputField(desc="the one requirement to file under a dimension")
    dimension: str = dspy.OutputField(desc="one of the given dimension names, copied exactly")

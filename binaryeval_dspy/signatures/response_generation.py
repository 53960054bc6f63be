"""The generator the generation-mode update improves: prompt -> response (paper 3.4).

Its docstring is the generation prompt P_G. It starts as a bare instruction, as in the
paper's IFBench set-up, and the optimizers rewrite it.
"""

from __future__ import annotations

import dspy


class RespondToPrompt(dspy.Signature):
    """Answer the request."""

    prompt: str = dspy.InputField(desc="the user's request, including any constraints on the answer")
    response: str = dspy.OutputField(desc="the answer to the request")

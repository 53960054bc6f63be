"""One yes/no question per dimension (the UniEval-style baseline, Zhong et al., 2022).

UniEval asks a single Boolean question per dimension ("Is this a coherent summary of
the document?") and scores with P(yes). This signature answers such a question with a
bare yes/no and no explanation, so that the answer is the first value token and its
probability can be read from the log-probabilities.
"""

from __future__ import annotations

from typing import Literal

import dspy


class AnswerDimensionQuestion(dspy.Signature):
    """Read the input and the output produced from it, then answer the yes/no question
    about the output's quality. Answer "yes" if the output has the quality the question
    describes and "no" if it does not."""

    input: str = dspy.InputField(desc="the source the output was produced from (document, dialogue, instruction)")
    output: str = dspy.InputField(desc="the output the question is about")
    question: str = dspy.InputField(desc="a yes/no question about one quality of the output")
    answer: Literal["yes", "no"] = dspy.OutputField(desc="yes or no")

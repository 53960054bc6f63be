"""The UniEval-style judge: one yes/no question per dimension, scored by P(yes).

A baseline for meta-evaluation on the same LM as BinEval (paper Tables 1, 7, 8:
"UniEval (gpt-oss)"): where BinEval asks many binary questions per dimension, this asks
exactly one, as UniEval (Zhong et al., 2022) does with its T5 model. The score is
P(yes) among {yes, no} when the LM returns log-probabilities, read at the answer's
position in a JSON or a DSPy chat-format reply; else 1 for yes and 0 for no, recorded as
a fallback with its reason (or no score when log-probabilities are required,
``logprobs="on"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dspy
from dspy.utils.exceptions import AdapterParseError

from binaryeval_dspy.programs.rubric_judge import LogprobMode, RubricJudge
from binaryeval_dspy.schemas.rubric import Rubric
from binaryeval_dspy.signatures.dimension_question import AnswerDimensionQuestion


class UniEvalJudge(RubricJudge):
    """Single-question judge: the rubric's yes/no question per dimension -> P(yes).

    Args:
        rubric: gives each dimension's question.
        dimensions: dimensions to score (default: every rubric dimension).
        logprobs: ``auto`` / ``on`` (alias ``require``) / ``off``, as in `RubricJudge`.
        top_logprobs: alternatives requested per token.

    ``forward(input, output)`` returns ``dspy.Prediction(scores, details)``:
    ``scores[d]`` = P(yes) in [0, 1] (or 1.0 / 0.0 as a recorded fallback; None when
    unparsed, or log-probabilities were required and unusable) and ``details[d]`` with
    ``answer``, ``p_yes`` (or None), ``source`` (``"p_yes"`` / ``"answer"``),
    ``score_source`` (``"logprobs"`` / ``"fallback"`` / None), ``fallback_reason``,
    ``value_format`` and ``error``.
    """

    def __init__(self, rubric: Rubric, *, dimensions: Sequence[str] | None = None,
                 logprobs: LogprobMode = "auto", top_logprobs: int = 20) -> None:
        super().__init__(rubric, dimensions=dimensions, logprobs=logprobs, top_logprobs=top_logprobs)
        self.ask = dspy.Predict(AnswerDimensionQuestion)

    def answer(self, input: str, output: str, dimension: str) -> dict[str, Any]:
        """Ask one dimension's question; returns the ``details`` entry (with ``score``)."""
        question = self.rubric.dimension(dimension).question
        try:
            pred = self._call(self.ask, input=input, output=output, question=question)
        except AdapterParseError as exc:
            return {"score": None, "answer": None, "p_yes": None, "source": None, "score_source": None,
                    "fallback_reason": None, "value_format": None,
                    "error": f"unparsed: {str(exc.lm_response or '')[:200]}"}
        answer = str(pred.answer).strip().lower()
        if answer not in ("yes", "no"):
            return {"score": None, "answer": answer, "p_yes": None, "source": None, "score_source": None,
                    "fallback_reason": None, "value_format": None, "error": "the answer is neither yes nor no"}
        located = self.read_value(pred, "answer", ["yes", "no"])
        entry = self.sourced(located, answer, lambda dist: dist["yes"], 1.0 if answer == "yes" else 0.0,
                             {"answer": answer})
        entry["p_yes"] = entry["score"] if entry["score_source"] == "logprobs" else None
        entry["source"] = {"logprobs": "p_yes", "fallback": "answer"}.get(entry["score_source"])
        return entry

    def score_dimension(self, input: str, output: str, dimension: str) -> dict[str, Any]:
        """`answer`: the single question of one dimension."""
        return self.answer(input, output, dimension)

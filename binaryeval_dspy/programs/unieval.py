"""The UniEval-style judge: one yes/no question per dimension, scored by P(yes).

A baseline for meta-evaluation on the same LM as BinEval (paper Tables 1, 7, 8:
"UniEval (gpt-oss)"): where BinEval asks many binary questions per dimension, this asks
exactly one, as UniEval (Zhong et al., 2022) does with its T5 model. The score is
P(yes) among {yes, no} when the LM returns log-probabilities, else 1 for yes and 0 for no.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dspy
from dspy.utils.exceptions import AdapterParseError

from binaryeval_dspy.errors import BinEvalError, InputError
from binaryeval_dspy.lm.logprobs import value_distribution
from binaryeval_dspy.programs.geval import LogprobMode, logprob_config, logprobs_unsupported
from binaryeval_dspy.schemas.rubric import Rubric
from binaryeval_dspy.signatures.dimension_question import AnswerDimensionQuestion


class UniEvalJudge(dspy.Module):
    """Single-question judge: the rubric's yes/no question per dimension -> P(yes).

    Args:
        rubric: gives each dimension's question.
        dimensions: dimensions to score (default: every rubric dimension).
        logprobs: ``auto`` / ``on`` / ``off``, as in `GEvalJudge`.
        top_logprobs: alternatives requested per token.

    ``forward(input, output)`` returns ``dspy.Prediction(scores, details)``:
    ``scores[d]`` = P(yes) in [0, 1] (or 1.0 / 0.0 without log-probabilities; None when
    unparsed) and ``details[d]`` with ``answer``, ``p_yes`` (or None), ``source`` and ``error``.
    """

    def __init__(self, rubric: Rubric, *, dimensions: Sequence[str] | None = None,
                 logprobs: LogprobMode = "auto", top_logprobs: int = 20) -> None:
        super().__init__()
        if logprobs not in ("auto", "on", "off"):
            raise BinEvalError(f"logprobs must be 'auto', 'on' or 'off', got {logprobs!r}")
        self.rubric = rubric
        self.dimensions = list(dimensions or rubric.dimensions)
        for d in self.dimensions:
            rubric.dimension(d)
        self.logprobs = logprobs
        self.top_logprobs = top_logprobs
        self._logprobs_refused = False
        self.ask = dspy.Predict(AnswerDimensionQuestion)

    def _call(self, **fields: Any) -> dspy.Prediction:
        if self.logprobs == "off" or self._logprobs_refused:
            return self.ask(**fields)
        try:
            return self.ask(**fields, config=logprob_config(self.top_logprobs))
        except AdapterParseError:
            raise
        except Exception as exc:
            if self.logprobs == "auto" and logprobs_unsupported(exc):
                self._logprobs_refused = True
                return self.ask(**fields)
            raise

    def answer(self, input: str, output: str, dimension: str) -> dict[str, Any]:
        """Ask one dimension's question; returns the ``details`` entry (with ``score``)."""
        question = self.rubric.dimension(dimension).question
        try:
            pred = self._call(input=input, output=output, question=question)
        except AdapterParseError as exc:
            return {"score": None, "answer": None, "p_yes": None, "source": None,
                    "error": f"unparsed: {str(exc.lm_response or '')[:200]}"}
        answer = str(pred.answer).strip().lower()
        if answer not in ("yes", "no"):
            return {"score": None, "answer": answer, "p_yes": None, "source": None,
                    "error": "the answer is neither yes nor no"}
        distribution = value_distribution(getattr(pred, "logprobs", None), "answer", ["yes", "no"])
        if distribution:
            p_yes = distribution["yes"]
            return {"score": p_yes, "answer": answer, "p_yes": p_yes, "source": "p_yes", "error": None}
        return {"score": 1.0 if answer == "yes" else 0.0, "answer": answer, "p_yes": None, "source": "answer",
                "error": None}

    def forward(self, input: str, output: str) -> dspy.Prediction:
        """Answer every dimension's question about `output` (one LM call each).

        Raises:
            InputError: `input` or `output` is empty.
        """
        for name, value in (("input", input), ("output", output)):
            if not isinstance(value, str) or not value.strip():
                raise InputError(f"the judge needs a non-empty string, got {value!r:.60}", field=name)
        details = {d: self.answer(input, output, d) for d in self.dimensions}
        return dspy.Prediction(scores={d: v.pop("score") for d, v in details.items()}, details=details)

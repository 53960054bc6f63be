"""The shared shell of the single-call baselines: a rubric, a set of dimensions, log-probabilities.

`GEvalJudge` and `UniEvalJudge` differ only in what they ask per dimension and how they
turn the answer into a score; this base class holds the rest: argument checks, asking
for token log-probabilities and falling back when the LM refuses them, and `forward`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal

import dspy
from dspy.utils.exceptions import AdapterParseError

from binaryeval_dspy.errors import BinEvalError, InputError
from binaryeval_dspy.schemas.rubric import Rubric

logger = logging.getLogger(__name__)

LogprobMode = Literal["auto", "on", "off"]


def logprob_config(top_logprobs: int) -> dict[str, Any]:
    """The DSPy call config asking for token log-probabilities with `top_logprobs` alternatives."""
    return {"logprobs": True, "top_logprobs": top_logprobs}


def logprobs_unsupported(exc: Exception) -> bool:
    """True when an LM error says the provider cannot return log-probabilities."""
    return "logprob" in str(exc).lower()


class RubricJudge(dspy.Module):
    """Base of the rubric baselines: one LM call per dimension, scores in [0, 1] or None.

    Args:
        rubric: per-dimension criterion, steps, question and rating scale.
        dimensions: dimensions to score (default: every rubric dimension).
        logprobs: ``auto`` asks for log-probabilities and stops asking for the rest of
            the run once the LM refuses them; ``on`` always asks; ``off`` never does.
        top_logprobs: alternatives per token requested (20 is the usual provider cap).

    Raises:
        BinEvalError: `logprobs` is not auto / on / off.
        InputError: a dimension is not in the rubric.

    Subclasses implement `score_dimension(input, output, dimension)`, returning the
    ``details`` entry of one dimension with its ``score`` (in [0, 1] or None).
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

    def _call(self, predictor: dspy.Predict, **fields: Any) -> dspy.Prediction:
        """Call `predictor`, with log-probabilities unless they are off or were refused."""
        if self.logprobs == "off" or self._logprobs_refused:
            return predictor(**fields)
        try:
            return predictor(**fields, config=logprob_config(self.top_logprobs))
        except AdapterParseError:
            raise
        except Exception as exc:
            if self.logprobs == "auto" and logprobs_unsupported(exc):
                logger.warning("the LM refused log-probabilities (%s); scoring from the answer alone", exc)
                self._logprobs_refused = True
                return predictor(**fields)
            raise

    def score_dimension(self, input: str, output: str, dimension: str) -> dict[str, Any]:
        """One dimension's ``details`` entry, with ``score`` in [0, 1] or None (unparsed)."""
        raise NotImplementedError

    def forward(self, input: str, output: str) -> dspy.Prediction:
        """Score `output` on every dimension (one LM call each).

        Returns:
            ``dspy.Prediction(scores={dimension: float in [0, 1] or None}, details={dimension: dict})``.

        Raises:
            InputError: `input` or `output` is empty.
        """
        for name, value in (("input", input), ("output", output)):
            if not isinstance(value, str) or not value.strip():
                raise InputError(f"the judge needs a non-empty string, got {value!r:.60}", field=name)
        details = {d: self.score_dimension(input, output, d) for d in self.dimensions}
        return dspy.Prediction(scores={d: v.pop("score") for d, v in details.items()}, details=details)

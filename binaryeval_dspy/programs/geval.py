"""The G-Eval-style holistic judge: one score per dimension from criteria and steps.

A baseline for meta-evaluation, run on the same LM as BinEval (paper section 4,
Tables 1, 7, 8: "G-Eval (gpt-oss)"). Following G-Eval (Liu et al., 2023), the score is
the probability-weighted mean over the scale's values when the LM returns token
log-probabilities, read at the score's position in a JSON or a DSPy chat-format reply;
the chosen integer otherwise, recorded as a fallback with its reason (or no score at all
when log-probabilities are required, ``logprobs="on"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dspy
from dspy.utils.exceptions import AdapterParseError

from binaryeval_dspy.lm.logprobs import expected_value
from binaryeval_dspy.programs.rubric_judge import (
    LogprobMode,
    RubricJudge,
)
from binaryeval_dspy.schemas.rubric import Rubric
from binaryeval_dspy.signatures.holistic_rating import rating_signature


class GEvalJudge(RubricJudge):
    """Holistic judge: criterion + evaluation steps -> one integer score per dimension.

    Args:
        rubric: per-dimension criterion, evaluation steps and rating scale.
        dimensions: dimensions to score (default: every rubric dimension).
        logprobs: ``auto`` asks every LM for log-probabilities and falls back to the
            chosen integer when they cannot be read (recorded); ``on`` (alias
            ``require``) leaves such a dimension unscored; ``off`` never asks. See
            `RubricJudge`.
        top_logprobs: alternatives per token requested (the score's values must be
            among them to be weighted; 20 is the usual provider cap).

    ``forward(input, output)`` returns ``dspy.Prediction(scores, details)``:
    ``scores[d]`` in [0, 1] (the rating mapped affinely from [low, high]; None when the
    answer could not be read, or log-probabilities were required and unusable) and
    ``details[d]`` with ``raw`` (the chosen integer), ``distribution`` (value ->
    probability, or None), ``source`` (``"expected"`` or ``"integer"``),
    ``score_source`` (``"logprobs"`` / ``"fallback"`` / None), ``fallback_reason``,
    ``value_format`` (``"json"`` / ``"chat"`` / None) and ``error``.
    """

    def __init__(self, rubric: Rubric, *, dimensions: Sequence[str] | None = None,
                 logprobs: LogprobMode = "auto", top_logprobs: int = 20) -> None:
        super().__init__(rubric, dimensions=dimensions, logprobs=logprobs, top_logprobs=top_logprobs)
        scales = {tuple(rubric.dimension(d).rating_scale) for d in self.dimensions}
        self.raters = {f"{lo}_{hi}": dspy.Predict(rating_signature(lo, hi)) for lo, hi in sorted(scales)}

    def rate(self, input: str, output: str, dimension: str) -> dict[str, Any]:
        """Score one dimension; returns the ``details`` entry (with ``score`` in [0, 1] or None)."""
        spec = self.rubric.dimension(dimension)
        low, high = spec.rating_scale
        predictor = self.raters[f"{low}_{high}"]
        try:
            pred = self._call(predictor, input=input, output=output, criterion=spec.criterion,
                              evaluation_steps=spec.steps_text(), score_range=f"{low} to {high}")
        except AdapterParseError as exc:
            return {"score": None, "raw": None, "distribution": None, "source": None, "score_source": None,
                    "fallback_reason": None, "value_format": None,
                    "error": f"unparsed: {str(exc.lm_response or '')[:200]}"}
        try:
            raw = int(pred.score)
        except (TypeError, ValueError):
            raw = None
        if raw is None or not low <= raw <= high:
            return {"score": None, "raw": raw, "distribution": None, "source": None, "score_source": None,
                    "fallback_reason": None, "value_format": None,
                    "error": f"score {pred.score!r} is not an integer in [{low}, {high}]"}
        keys = [str(v) for v in range(low, high + 1)]
        located = self.read_value(pred, "score", keys)
        entry = self.sourced(located, str(raw), lambda dist: (expected_value(dist) - low) / (high - low),
                             (raw - low) / (high - low), {"raw": raw, "distribution": located.distribution})
        if entry["score_source"] != "logprobs":
            entry["distribution"] = None
        entry["source"] = {"logprobs": "expected", "fallback": "integer"}.get(entry["score_source"])
        return entry

    def score_dimension(self, input: str, output: str, dimension: str) -> dict[str, Any]:
        """`rate`: the holistic score of one dimension."""
        return self.rate(input, output, dimension)

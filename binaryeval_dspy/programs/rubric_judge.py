"""The shared shell of the single-call baselines: a rubric, a set of dimensions, log-probabilities.

`GEvalJudge` and `UniEvalJudge` differ only in what they ask per dimension and how they
turn the answer into a score; this base class holds the rest: argument checks, asking
for token log-probabilities (on every LM, embedded or remote, unless they are off),
reading the value's distribution in whatever format the reply came (JSON, DSPy chat
format), and recording per dimension where each score came from, so that a score read
from the plain answer instead of the log-probabilities is never silent:

- ``score_source``: ``"logprobs"`` (the probability-weighted score of G-Eval, Liu et
  al., 2023, or P(yes) of UniEval, Zhong et al., 2022), ``"fallback"`` (the plain
  answer: integer or 1/0), or None (no score: unparsed answer, or log-probabilities
  required and unusable);
- ``fallback_reason``: why the log-probabilities were not used (`FALLBACK_REASONS`,
  e.g. ``"no logprobs returned"``, ``"value not located"``), None when they were;
- ``value_format``: how the value was located in the reply (``"json"`` / ``"chat"``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal

import dspy
from dspy.utils.exceptions import AdapterParseError

from binaryeval_dspy.errors import BinEvalError, InputError
from binaryeval_dspy.lm.logprobs import (
    NO_ALLOWED_VALUE,
    NO_ALTERNATIVES,
    NO_LOGPROBS,
    NOT_LOCATED,
    ValueDistribution,
    locate_value,
)
from binaryeval_dspy.schemas.rubric import Rubric

logger = logging.getLogger(__name__)

LogprobMode = Literal["auto", "on", "require", "off"]
LOGPROB_MODES = ("auto", "on", "require", "off")

# Reasons recorded in ``details[d]["fallback_reason"]`` (besides those of `locate_value`).
LOGPROBS_OFF = "log-probabilities off"
LOGPROBS_REFUSED = "the LM refused log-probabilities"
VALUE_MISMATCH = "the located value is not the parsed answer"
FALLBACK_REASONS = (NO_LOGPROBS, NOT_LOCATED, NO_ALTERNATIVES, NO_ALLOWED_VALUE, VALUE_MISMATCH,
                    LOGPROBS_REFUSED, LOGPROBS_OFF)


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
        logprobs: ``auto`` asks every LM for log-probabilities, scores from them when
            they can be read and otherwise falls back to the plain answer, recording the
            fallback and its reason (and stops asking for the rest of the run once the LM
            refuses them); ``on`` (alias ``require``) always asks and never falls back: a
            dimension whose log-probabilities cannot be read is unscored (score None,
            with the reason in ``error``), and a refusal is an error; ``off`` never asks
            (every score is a recorded fallback).
        top_logprobs: alternatives per token requested (20 is the usual provider cap).

    Raises:
        BinEvalError: `logprobs` is not auto / on / require / off.
        InputError: a dimension is not in the rubric.

    Subclasses implement `score_dimension(input, output, dimension)`, returning the
    ``details`` entry of one dimension with its ``score`` (in [0, 1] or None).
    """

    def __init__(self, rubric: Rubric, *, dimensions: Sequence[str] | None = None,
                 logprobs: LogprobMode = "auto", top_logprobs: int = 20) -> None:
        super().__init__()
        if logprobs not in LOGPROB_MODES:
            raise BinEvalError(f"logprobs must be 'auto', 'on' (or 'require') or 'off', got {logprobs!r}")
        self.rubric = rubric
        self.dimensions = list(dimensions or rubric.dimensions)
        for d in self.dimensions:
            rubric.dimension(d)
        self.logprobs: LogprobMode = "on" if logprobs == "require" else logprobs
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

    @property
    def logprobs_required(self) -> bool:
        """True in ``on`` / ``require`` mode: a score must come from the log-probabilities."""
        return self.logprobs == "on"

    def read_value(self, pred: dspy.Prediction, field: str, keys: list[str]) -> ValueDistribution:
        """Locate `field`'s value in `pred`'s log-probabilities (any reply format).

        Returns a `ValueDistribution`; without a distribution its ``reason`` says why
        (log-probabilities off or refused, or a `locate_value` reason).
        """
        if self.logprobs == "off":
            return ValueDistribution(None, reason=LOGPROBS_OFF)
        located = locate_value(getattr(pred, "logprobs", None), field, keys)
        if located.reason == NO_LOGPROBS and self._logprobs_refused:
            return ValueDistribution(None, reason=LOGPROBS_REFUSED)
        return located

    def sourced(self, located: ValueDistribution, answer: str, from_logprobs: Any,
                plain_score: float, entry: dict[str, Any]) -> dict[str, Any]:
        """Complete a dimension's ``details`` entry with its score and where it came from.

        Args:
            located: the value's distribution (`read_value`).
            answer: the parsed answer as text (compared with the located value).
            from_logprobs: distribution -> score in [0, 1], used when it was read.
            plain_score: the score of the plain answer in [0, 1] (the fallback).
            entry: method-specific fields (``raw``, ``answer``, ...), updated in place.

        Returns:
            `entry` with ``score``, ``score_source``, ``fallback_reason``,
            ``value_format`` and ``error``. In ``on`` mode a fallback leaves ``score``
            None and explains it in ``error``.
        """
        reason = located.reason
        if located.distribution is not None and located.chosen is not None and located.chosen != answer:
            reason = VALUE_MISMATCH  # located the wrong occurrence: do not trust it
        entry["value_format"] = located.format
        if reason is None:
            entry.update(score=from_logprobs(located.distribution), score_source="logprobs",
                         fallback_reason=None, error=None)
        elif self.logprobs_required:
            entry.update(score=None, score_source=None, fallback_reason=reason,
                         error=f"log-probabilities required (logprobs='on') but unusable: {reason}; "
                               f"the plain answer {answer!r} was not used")
        else:
            entry.update(score=plain_score, score_source="fallback", fallback_reason=reason, error=None)
        return entry

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

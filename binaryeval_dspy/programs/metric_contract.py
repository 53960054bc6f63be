"""DSPy's metric contract, one rule for every metric we ship (`BinEvalMetric`, the agreement metrics).

DSPy calls a metric as ``metric(gold, pred, trace=None, pred_name=None, pred_trace=None)``
and reads its answer by how it was called:

* with a ``trace`` and no ``pred_name``: bootstrapping (`dspy.BootstrapFewShot`, the demo
  bootstrapping inside `dspy.MIPROv2`, `dspy.BootstrapFewShotWithRandomSearch`) keeps the
  traced calls as demonstrations when the answer is truthy. A `dspy.Prediction` is always
  truthy, so a metric returning one there keeps demos it scored 0.0. The answer is a
  ``bool``: passed, i.e. scored and ``score >= pass_threshold``;
* otherwise (`dspy.Evaluate`, GEPA, SIMBA, COPRO, MIPROv2's trials): the
  ``dspy.Prediction(score=..., feedback=...)`` itself, whose ``score`` DSPy sums and
  compares and whose ``feedback`` GEPA's reflection reads (GEPA passes a ``trace`` with its
  ``pred_name`` when it asks for feedback, so that call gets the prediction too).
"""

from __future__ import annotations

import math
from typing import Any

import dspy

from binaryeval_dspy.errors import ConfigError


def metric_answer(result: dspy.Prediction, *, trace: Any, pred_name: str | None,
                  pass_threshold: float) -> dspy.Prediction | bool:
    """What a metric returns for `result` under DSPy's contract (see the module docstring).

    Args:
        result: the metric's full result, with ``score`` (float) and ``scored`` (bool: False
            for the fallback score of an output that could not be scored).
        trace: DSPy's trace argument (None outside bootstrapping).
        pred_name: GEPA's predictor name (None outside GEPA's feedback calls).
        pass_threshold: the score a passing answer reaches, in [0, 1].

    Returns:
        ``bool`` (passed) when called with a `trace` and no `pred_name`; else `result`. An
        unscored result never passes, whatever its fallback score.
    """
    if trace is not None and pred_name is None:
        return bool(result.get("scored", True)) and float(result.score) >= pass_threshold
    return result


def checked_pass_threshold(value: object) -> float:
    """`value` as a float in [0, 1].

    Raises:
        ConfigError: not a number in [0, 1] (also a `ValueError`).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0.0 <= value <= 1.0:
        raise ConfigError("bad pass_threshold", expected="a number in [0, 1]", received=repr(value),
                          fix="pass the score a bootstrapped demonstration must reach, e.g. pass_threshold=1.0.")
    return float(value)

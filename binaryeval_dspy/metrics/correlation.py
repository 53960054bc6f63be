"""Correlation of evaluator scores with human scores: Spearman's rho, Kendall's tau, Pearson's r.

Pure functions over score vectors, computed with scipy (`scipy.stats`, imported on first
use so that importing this package stays cheap). This is the project's one Spearman:
the benchmark, the optimizer's human mode and the head-to-head comparison all call it. The protocols follow UniEval
(Zhong et al., 2022) and G-Eval (Liu et al., 2023), which the paper reuses (section 4.1):

* **summary-level**: for each document, correlate the scores of its summaries across
  systems, then average over documents (SummEval);
* **pooled**: one correlation over all items (QAGS; also called dataset-level);
* **turn-level**: pooled over all dialogue responses (Topical-Chat);
* **system-level**: average each system's scores, then correlate the system means.

Undefined cases never crash and are reported: pairs with a NaN on either side are
dropped (and counted); a correlation needs at least two pairs; a constant vector has
no defined correlation, so a pooled, turn-level or system-level correlation with a
constant evaluator (or constant human scores) is NaN, shown as "undefined", never 0.

**Constant predictions at summary level** (`ConstantPredictions`). A document whose
evaluator scores are all equal while its human scores vary has no defined
coefficient. Two conventions exist:

* ``"skip"`` (the default): the document is left out of the average. This is what
  the meta-evaluation scripts of G-Eval (Liu et al., 2023: ``meta_eval_summeval.py``
  in nlpyang/geval) and UniEval (Zhong et al., 2022: ``correlation_for_summ`` in
  ``reproduce/correlation.py`` of maszhongming/UniEval) do (both skip a document when
  ``len(set(pred)) == 1`` or ``len(set(human)) == 1``), so it reproduces their
  published numbers. Example on SummEval: expert 1's consistency ratings as
  predictions of the 3-expert mean give rho = 0.937 under ``skip`` (5 of 100 documents
  skipped) and 0.888 under ``zero``.
* ``"zero"``: the document counts as rho = 0 (the evaluator ranked nothing); this
  project's behaviour before the policy existed. It lowers coarse scorers' numbers.

A document whose **human** scores are constant is left out under both policies (its
coefficient is undefined for every method) and counted separately
(``groups_constant_human``); so is one with fewer than two scored items.
Kendall's tau is tau-b (ties corrected), as in scipy and the reference implementations.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from binaryeval_dspy.errors import BinEvalError

Method = Literal["spearman", "kendall", "pearson"]
CORRELATION_METHODS: tuple[Method, ...] = ("spearman", "kendall", "pearson")
MIN_PAIRS = 2
ConstantPredictions = Literal["skip", "zero"]
CONSTANT_PREDICTION_POLICIES: tuple[ConstantPredictions, ...] = ("skip", "zero")
#: G-Eval's and UniEval's meta-evaluation scripts skip such documents: their published numbers.
DEFAULT_CONSTANT_PREDICTIONS: ConstantPredictions = "skip"


def check_constant_predictions(policy: object) -> ConstantPredictions:
    """`policy` if it is ``"skip"`` or ``"zero"``.

    Raises:
        BinEvalError: any other value (names the allowed ones).
    """
    if policy not in CONSTANT_PREDICTION_POLICIES:
        raise BinEvalError(f"constant_predictions must be one of {CONSTANT_PREDICTION_POLICIES}, got {policy!r}")
    return policy  # type: ignore[return-value]


@dataclass(frozen=True)
class CorrelationResult:
    """One correlation with what went into it.

    Attributes:
        value: the coefficient in [-1, 1]; NaN when undefined (see `note`).
        n: pairs used (both values finite).
        dropped: pairs left out because a value was NaN / None.
        note: None, or why the value is NaN / forced: ``"too few pairs"``,
            ``"constant human scores"``, ``"constant predictions"``.
    """

    value: float
    n: int
    dropped: int = 0
    note: str | None = None

    @property
    def defined(self) -> bool:
        """True when `value` is a number."""
        return not math.isnan(self.value)


@dataclass(frozen=True)
class GroupedCorrelationResult:
    """A correlation averaged over groups (documents, contexts).

    Attributes:
        value: mean of the per-group coefficients that count, in [-1, 1] (NaN if none
            count).
        groups_used: groups that entered the mean.
        groups_skipped: groups left out under every policy: human scores constant, or
            fewer than two pairs (not the constant-prediction groups: see below).
        groups_constant_prediction: groups where the evaluator gave one score to every
            item while humans did not: left out of the mean under ``skip``, entered
            as 0 under ``zero`` (see `constant_predictions`).
        per_group: group key -> coefficient (NaN for every group left out).
        dropped: item pairs left out for NaN, summed over groups.
        constant_predictions: the policy applied, ``"skip"`` or ``"zero"``.
        groups_constant_human: of `groups_skipped`, those whose human scores were
            constant (the rest had fewer than two pairs).
    """

    value: float
    groups_used: int
    groups_skipped: int
    groups_constant_prediction: int
    per_group: dict[str, float] = field(default_factory=dict)
    dropped: int = 0
    constant_predictions: ConstantPredictions = DEFAULT_CONSTANT_PREDICTIONS
    groups_constant_human: int = 0

    @property
    def groups_constant_skipped(self) -> int:
        """Constant-prediction groups left out of the mean (0 under ``zero``)."""
        return self.groups_constant_prediction if self.constant_predictions == "skip" else 0

    @property
    def groups_constant_zeroed(self) -> int:
        """Constant-prediction groups that entered the mean as 0 (0 under ``skip``)."""
        return self.groups_constant_prediction if self.constant_predictions == "zero" else 0


def _as_array(values: Sequence[float | None] | np.ndarray, name: str) -> np.ndarray:
    try:
        return np.array([np.nan if v is None else v for v in values], dtype=float)
    except (TypeError, ValueError) as exc:
        raise BinEvalError(f"{name} must hold numbers (None / NaN allowed), got {values!r:.80}") from exc


def _paired(x: Sequence[float | None], y: Sequence[float | None]) -> tuple[np.ndarray, np.ndarray, int]:
    a, b = _as_array(x, "x"), _as_array(y, "y")
    if a.shape != b.shape:
        raise BinEvalError(f"score vectors differ in length: {len(a)} vs {len(b)}")
    keep = np.isfinite(a) & np.isfinite(b)
    return a[keep], b[keep], int((~keep).sum())


def _coefficient(a: np.ndarray, b: np.ndarray, method: Method) -> float:
    from scipy import stats  # imported here: scipy.stats takes ~0.6 s to import

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "spearman":
            value = stats.spearmanr(a, b).statistic
        elif method == "kendall":
            value = stats.kendalltau(a, b).statistic
        elif method == "pearson":
            value = stats.pearsonr(a, b).statistic
        else:
            raise BinEvalError(f"unknown correlation method {method!r}; expected one of {CORRELATION_METHODS}")
    return float(value)


def correlate(
    human: Sequence[float | None],
    predicted: Sequence[float | None],
    method: Method = "spearman",
    *,
    constant_prediction: Literal["nan", "zero"] = "nan",
) -> CorrelationResult:
    """Correlation of `predicted` with `human`, with the reason when it is undefined.

    Args:
        human: human scores (None / NaN allowed: the pair is dropped).
        predicted: evaluator scores, same length.
        method: ``spearman``, ``kendall`` (tau-b) or ``pearson``.
        constant_prediction: what a constant `predicted` (with varying `human`) gives:
            ``nan`` (undefined, the mathematical answer) or ``zero`` (no ranking
            information; what `summary_level_correlation` uses per document under
            its ``constant_predictions="zero"`` policy).

    Returns:
        A `CorrelationResult` (value in [-1, 1] or NaN).

    Raises:
        BinEvalError: the vectors differ in length, hold non-numbers, or `method` is unknown.
    """
    if method not in CORRELATION_METHODS:
        raise BinEvalError(f"unknown correlation method {method!r}; expected one of {CORRELATION_METHODS}")
    a, b, dropped = _paired(human, predicted)
    if len(a) < MIN_PAIRS:
        return CorrelationResult(math.nan, len(a), dropped, "too few pairs")
    if np.ptp(a) == 0:
        return CorrelationResult(math.nan, len(a), dropped, "constant human scores")
    if np.ptp(b) == 0:
        value = 0.0 if constant_prediction == "zero" else math.nan
        return CorrelationResult(value, len(a), dropped, "constant predictions")
    return CorrelationResult(_coefficient(a, b, method), len(a), dropped)


def spearman(x: Sequence[float | None], y: Sequence[float | None]) -> float:
    """Spearman's rho of two score vectors; NaN when undefined (constant, < 2 pairs).

    Pairs with a None / NaN are dropped. Example: ``spearman([1, 2, 3], [1, 3, 2]) == 0.5``.
    """
    return correlate(x, y, "spearman").value


def pooled_spearman(
    model: Sequence[Mapping[str, float | None]],
    human: Sequence[Mapping[str, float]],
    dimensions: Sequence[str],
) -> dict[str, float | None]:
    """Spearman's rho per dimension over all items pooled (paper Appendix B), plus ``mean``.

    The optimizer's human mode selects and early-stops on it; the head-to-head
    comparison reports it as its SummEval test metric.

    Args:
        model: per item, the evaluator's score per dimension (None: not scored).
        human: per item, the human rating per dimension (e.g. normalized to [0, 1]);
            same length and order as `model`.
        dimensions: the dimensions to correlate.

    Returns:
        ``{dimension: rho in [-1, 1] or None, ..., "mean": float or None}``. Items whose
        model score is None on a dimension are left out of that dimension; a dimension
        with fewer than 3 scored items or constant scores on either side gets None;
        ``mean`` averages the defined ones (None if none is). Each rho is `spearman`.

    Raises:
        ValueError: `model` and `human` differ in length.
        KeyError: a human mapping lacks a dimension whose model score is not None.
    """
    out: dict[str, float | None] = {}
    for d in dimensions:
        pairs = [(m[d], h[d]) for m, h in zip(model, human, strict=True) if m.get(d) is not None]
        if len(pairs) < 3 or len({p[0] for p in pairs}) < 2 or len({p[1] for p in pairs}) < 2:
            out[d] = None
            continue
        value = spearman([p[0] for p in pairs], [p[1] for p in pairs])
        out[d] = None if math.isnan(value) else value
    defined = [v for v in out.values() if v is not None]
    out["mean"] = sum(defined) / len(defined) if defined else None
    return out


def kendall(x: Sequence[float | None], y: Sequence[float | None]) -> float:
    """Kendall's tau-b of two score vectors; NaN when undefined. Pairs with NaN are dropped."""
    return correlate(x, y, "kendall").value


def pearson(x: Sequence[float | None], y: Sequence[float | None]) -> float:
    """Pearson's r of two score vectors; NaN when undefined. Pairs with NaN are dropped."""
    return correlate(x, y, "pearson").value


def pooled_correlation(human: Sequence[float | None], predicted: Sequence[float | None],
                       method: Method = "spearman") -> CorrelationResult:
    """One correlation over all items (QAGS protocol; also called dataset- or corpus-level).

    Args:
        human / predicted: one score per item, same length (None / NaN pairs dropped).
        method: ``spearman``, ``kendall`` (tau-b) or ``pearson``.

    Returns:
        A `CorrelationResult`, value in [-1, 1]. NaN ("undefined", with its `note`)
        when fewer than two pairs remain, the human scores are constant, or the
        predictions are constant: a constant evaluator has no defined correlation, it
        is not 0 (no ``constant_predictions`` policy applies here: there is no
        average to leave it out of).

    Raises:
        BinEvalError: as `correlate`.
    """
    return correlate(human, predicted, method, constant_prediction="nan")


def turn_level_correlation(human: Sequence[float | None], predicted: Sequence[float | None],
                           method: Method = "spearman") -> CorrelationResult:
    """Turn-level correlation for dialogue: pooled over every rated response, as UniEval
    and G-Eval compute it on Topical-Chat. Same contract as `pooled_correlation`."""
    return pooled_correlation(human, predicted, method)


def summary_level_correlation(
    human: Sequence[float | None],
    predicted: Sequence[float | None],
    groups: Sequence[object],
    method: Method = "spearman",
    *,
    constant_predictions: ConstantPredictions = DEFAULT_CONSTANT_PREDICTIONS,
) -> GroupedCorrelationResult:
    """Per-document correlation across systems, averaged over documents (SummEval protocol).

    Args:
        human: human scores, one per item (None / NaN pairs dropped).
        predicted: evaluator scores, one per item.
        groups: the document (group) key of each item.
        method: ``spearman``, ``kendall`` or ``pearson``.
        constant_predictions: a document whose predictions are all equal while its
            human scores vary: ``"skip"`` (default) leaves it out of the mean, as
            G-Eval's and UniEval's meta-evaluation scripts do; ``"zero"`` counts it
            as 0. Documents with constant human scores or < 2 pairs are left out
            under both (see the module docstring).

    Returns:
        A `GroupedCorrelationResult`: value in [-1, 1] = mean over the documents that
        count (NaN when none does), with the policy and the counts of documents used,
        skipped (constant human / too few pairs) and with constant predictions.

    Raises:
        BinEvalError: the three sequences differ in length, hold non-numbers, the
            method is unknown, or `constant_predictions` is not ``skip`` / ``zero``.
    """
    policy = check_constant_predictions(constant_predictions)
    if not (len(human) == len(predicted) == len(groups)):
        raise BinEvalError(f"human, predicted and groups differ in length: "
                           f"{len(human)}, {len(predicted)}, {len(groups)}")
    members: dict[str, list[int]] = {}
    for index, key in enumerate(groups):
        members.setdefault(str(key), []).append(index)
    h, p = _as_array(human, "human"), _as_array(predicted, "predicted")
    per_group: dict[str, float] = {}
    used = skipped = constant = constant_human = dropped = 0
    values: list[float] = []
    for key, idx in members.items():
        result = correlate(h[idx], p[idx], method, constant_prediction=policy if policy == "zero" else "nan")
        dropped += result.dropped
        per_group[key] = result.value
        constant += result.note == "constant predictions"
        if not result.defined:
            if result.note != "constant predictions":  # undefined under any policy
                skipped += 1
                constant_human += result.note == "constant human scores"
            continue
        used += 1
        values.append(result.value)
    value = float(np.mean(values)) if values else math.nan
    return GroupedCorrelationResult(value, used, skipped, constant, per_group, dropped,
                                    constant_predictions=policy, groups_constant_human=constant_human)


def system_level_correlation(
    human: Sequence[float | None],
    predicted: Sequence[float | None],
    systems: Sequence[object],
    method: Method = "spearman",
) -> CorrelationResult:
    """Correlation of per-system mean scores (each mean over that system's items).

    Items with a NaN on either side are left out of both means. Needs at least two
    systems with varying human means. An evaluator whose system means are all equal
    has no defined correlation: NaN with note ``"constant predictions"`` (not 0).

    Returns:
        A `CorrelationResult` (value in [-1, 1] or NaN; ``n`` = systems, ``dropped`` =
        items left out for NaN).

    Raises:
        BinEvalError: the three sequences differ in length.
    """
    if not (len(human) == len(predicted) == len(systems)):
        raise BinEvalError(f"human, predicted and systems differ in length: "
                           f"{len(human)}, {len(predicted)}, {len(systems)}")
    h, p = _as_array(human, "human"), _as_array(predicted, "predicted")
    keep = np.isfinite(h) & np.isfinite(p)
    by_system: dict[str, list[int]] = {}
    for index, key in enumerate(systems):
        if keep[index]:
            by_system.setdefault(str(key), []).append(index)
    hm = [float(h[idx].mean()) for idx in by_system.values()]
    pm = [float(p[idx].mean()) for idx in by_system.values()]
    result = correlate(hm, pm, method, constant_prediction="nan")
    return CorrelationResult(result.value, result.n, int((~keep).sum()), result.note)

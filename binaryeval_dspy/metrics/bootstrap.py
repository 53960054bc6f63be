"""Bootstrap confidence intervals: correlations, the paired bootstrap test, and agreement with labels.

Resampling units follow the correlation protocol: documents for summary-level
correlation (a cluster bootstrap: each resample draws documents with replacement and
averages their per-document coefficients), items for pooled / turn-level correlation,
and documents (or items, without documents) for system-level correlation. Intervals are
percentile intervals (Efron & Tibshirani, 1993). The paired test resamples the same
units for both evaluators and reads the two-sided p-value off the distribution of the
difference (Koehn, 2004; Deutsch et al., 2021 for metric correlations). Resamples on
which a coefficient is undefined are left out and counted, never a crash.

Agreement with labels (`agreement_ci`: accuracy or Cohen's kappa of binary verdicts)
resamples items, each with all its questions (a cluster bootstrap: the questions of one
item are not independent), and is computed for all resamples at once from per-item counts.
Every interval draws its resamples the same way (`numpy.random.default_rng(seed)`, units
drawn with replacement), so one seed gives one interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from binaryeval_dspy.errors import BinEvalError
from binaryeval_dspy.metrics.binary_agreement import accuracy_from_counts, cohen_kappa_from_counts
from binaryeval_dspy.metrics.correlation import (
    DEFAULT_CONSTANT_PREDICTIONS,
    ConstantPredictions,
    Method,
    check_constant_predictions,
    pooled_correlation,
    summary_level_correlation,
    system_level_correlation,
)

Level = Literal["summary", "pooled", "turn", "system"]
LEVELS: tuple[Level, ...] = ("summary", "pooled", "turn", "system")


@dataclass(frozen=True)
class BootstrapInterval:
    """A point estimate with its bootstrap percentile interval.

    Attributes:
        estimate: the statistic on the full data (NaN if undefined).
        low / high: interval bounds (NaN when fewer than 10 resamples are defined).
        confidence: e.g. 0.95.
        n_resamples: resamples drawn.
        undefined_resamples: resamples whose statistic was NaN (left out).
    """

    estimate: float
    low: float
    high: float
    confidence: float
    n_resamples: int
    undefined_resamples: int


@dataclass(frozen=True)
class PairedBootstrapResult:
    """Paired bootstrap comparison of evaluator A with evaluator B.

    Attributes:
        estimate_a / estimate_b: each evaluator's correlation on the full data.
        delta: estimate_a - estimate_b.
        low / high: percentile interval of the difference.
        p_value: two-sided p-value for "no difference" (NaN when undefined).
        n_resamples / undefined_resamples: as in `BootstrapInterval`.
    """

    estimate_a: float
    estimate_b: float
    delta: float
    low: float
    high: float
    p_value: float
    n_resamples: int
    undefined_resamples: int


Statistic = Callable[[np.ndarray], float]


def _replicates(statistics: Sequence[Statistic], n_units: int, n_resamples: int, seed: int) -> np.ndarray:
    if n_units < 1:
        return np.full((0, len(statistics)), np.nan)
    rng = np.random.default_rng(seed)
    out = np.empty((n_resamples, len(statistics)))
    for r in range(n_resamples):
        idx = rng.integers(0, n_units, size=n_units)
        out[r] = [s(idx) for s in statistics]
    return out


def _interval(values: np.ndarray, confidence: float) -> tuple[float, float, int]:
    finite = values[np.isfinite(values)]
    undefined = int(len(values) - len(finite))
    if len(finite) < 10:
        return math.nan, math.nan, undefined
    alpha = (1 - confidence) / 2
    return float(np.quantile(finite, alpha)), float(np.quantile(finite, 1 - alpha)), undefined


#: resamples drawn per block by a vectorized statistic (bounds the index array's memory)
_BLOCK = 200


def _vectorized_replicates(statistic: Callable[[np.ndarray], np.ndarray], n_units: int, n_resamples: int,
                           seed: int) -> np.ndarray:
    """The same resamples as `_replicates` (one generator, `n_units` draws per resample, in
    order), handed to `statistic` as blocks of rows."""
    if n_units < 1:
        return np.full(n_resamples, np.nan)
    rng = np.random.default_rng(seed)
    out = np.empty(n_resamples)
    for start in range(0, n_resamples, _BLOCK):
        rows = min(_BLOCK, n_resamples - start)
        out[start:start + rows] = statistic(rng.integers(0, n_units, size=(rows, n_units)))
    return out


def bootstrap_ci(statistic: Statistic, n_units: int, *, n_resamples: int = 1000, confidence: float = 0.95,
                 seed: int = 0, vectorized: bool = False) -> BootstrapInterval:
    """Percentile bootstrap interval of any statistic of resampled units.

    Args:
        statistic: index array (units drawn with replacement, length `n_units`) -> float;
            with `vectorized`, a 2-D index array (one resample per row) -> one value per row.
        n_units: number of resampling units (items or documents).
        n_resamples: resamples to draw (>= 1).
        confidence: interval coverage in (0, 1).
        seed: random seed (same seed, same interval; the vectorized form draws the same
            resamples as the plain one).
        vectorized: `statistic` takes all resamples of a block at once (fast for
            statistics of summed counts, e.g. `agreement_ci`).

    Returns:
        A `BootstrapInterval`; the estimate is `statistic` on all units in order.

    Raises:
        BinEvalError: `n_resamples` < 1 or `confidence` outside (0, 1).
    """
    _check(n_resamples, confidence)
    everything = np.arange(n_units)
    if vectorized:
        estimate = float(np.asarray(statistic(everything[None, :]))[0]) if n_units else math.nan
        reps = _vectorized_replicates(statistic, n_units, n_resamples, seed)  # type: ignore[arg-type]
    else:
        estimate = float(statistic(everything)) if n_units else math.nan
        reps = _replicates([statistic], n_units, n_resamples, seed)[:, 0]
    low, high, undefined = _interval(reps, confidence)
    return BootstrapInterval(estimate, low, high, confidence, n_resamples, undefined)


def _check(n_resamples: int, confidence: float) -> None:
    if n_resamples < 1:
        raise BinEvalError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0 < confidence < 1:
        raise BinEvalError(f"confidence must be in (0, 1), got {confidence}")


def _statistic_factory(
    human: Sequence[float | None], level: Level, method: Method, groups: Sequence[object] | None,
    systems: Sequence[object] | None, constant_predictions: ConstantPredictions = DEFAULT_CONSTANT_PREDICTIONS,
) -> tuple[Callable[[Sequence[float | None]], Statistic], int]:
    """For one level: (predicted -> statistic over unit indices, number of units).

    At summary level a document left out by `constant_predictions` (``skip``) is left
    out of every resample that draws it; under ``zero`` it enters as 0."""
    h = np.array([np.nan if v is None else v for v in human], dtype=float)
    if level == "summary":
        if groups is None:
            raise BinEvalError("summary-level correlation needs the document (group) of each item")
        keys = list(dict.fromkeys(str(g) for g in groups))

        def make(predicted: Sequence[float | None]) -> Statistic:
            per = summary_level_correlation(h, predicted, groups, method,
                                            constant_predictions=constant_predictions).per_group
            values = np.array([per[k] for k in keys])

            def stat(idx: np.ndarray) -> float:
                chosen = values[idx]
                chosen = chosen[np.isfinite(chosen)]
                return float(chosen.mean()) if len(chosen) else math.nan

            return stat

        return make, len(keys)
    if level in ("pooled", "turn"):
        def make(predicted: Sequence[float | None]) -> Statistic:
            p = np.array([np.nan if v is None else v for v in predicted], dtype=float)
            return lambda idx: pooled_correlation(h[idx], p[idx], method).value

        return make, len(h)
    if level == "system":
        if systems is None:
            raise BinEvalError("system-level correlation needs the system of each item")
        unit_of = [str(g) for g in groups] if groups is not None else [str(i) for i in range(len(h))]
        keys = list(dict.fromkeys(unit_of))
        members = {k: [] for k in keys}
        for index, key in enumerate(unit_of):
            members[key].append(index)
        unit_items = [np.array(members[k]) for k in keys]
        system_arr = np.array([str(s) for s in systems], dtype=object)

        def make(predicted: Sequence[float | None]) -> Statistic:
            p = np.array([np.nan if v is None else v for v in predicted], dtype=float)

            def stat(idx: np.ndarray) -> float:
                items = np.concatenate([unit_items[i] for i in idx])
                return system_level_correlation(h[items], p[items], list(system_arr[items]), method).value

            return stat

        return make, len(keys)
    raise BinEvalError(f"unknown correlation level {level!r}; expected one of {LEVELS}")


def _factory(
    human: Sequence[float | None] | Sequence[Sequence[float | None]], level: Level, method: Method,
    groups: Sequence[object] | None, systems: Sequence[object] | None,
    constant_predictions: ConstantPredictions = DEFAULT_CONSTANT_PREDICTIONS,
) -> tuple[Callable[[Sequence], Statistic], int]:
    """Like `_statistic_factory`, but a 2-D `human` (one row per dimension) gives the mean
    of the per-dimension statistics over the same resampled units (the "Average" column)."""
    if len(human) and human[0] is not None and not np.isscalar(human[0]):
        parts = [_statistic_factory(row, level, method, groups, systems, constant_predictions) for row in human]
        n_units = parts[0][1]

        def make(predicted_rows: Sequence) -> Statistic:
            if len(predicted_rows) != len(parts):
                raise BinEvalError("human and predicted must have the same number of dimension rows")
            stats = [mk(row) for (mk, _), row in zip(parts, predicted_rows)]

            def stat(idx: np.ndarray) -> float:
                values = np.array([s(idx) for s in stats])
                values = values[np.isfinite(values)]
                return float(values.mean()) if len(values) else math.nan

            return stat

        return make, n_units
    return _statistic_factory(human, level, method, groups, systems,  # type: ignore[arg-type]
                              constant_predictions)


def correlation_ci(
    human: Sequence[float | None],
    predicted: Sequence[float | None],
    *,
    level: Level = "pooled",
    method: Method = "spearman",
    groups: Sequence[object] | None = None,
    systems: Sequence[object] | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    constant_predictions: ConstantPredictions = DEFAULT_CONSTANT_PREDICTIONS,
) -> BootstrapInterval:
    """Bootstrap interval of a correlation at one protocol level.

    Args:
        human / predicted: scores per item (NaN / None dropped pairwise); or one row
            per dimension (2-D), giving the interval of the mean over dimensions.
        level: ``summary`` (resample documents), ``pooled`` or ``turn`` (resample
            items), ``system`` (resample documents, or items without `groups`).
        method: ``spearman``, ``kendall`` or ``pearson``.
        groups: document key per item (required for ``summary``).
        systems: system key per item (required for ``system``).
        n_resamples / confidence / seed: as in `bootstrap_ci`.
        constant_predictions: at summary level, a document with constant predictions
            is left out (``skip``, default: G-Eval's and UniEval's scripts) or counts
            as 0 (``zero``); see `summary_level_correlation`. Other levels ignore it.

    Returns:
        A `BootstrapInterval` whose estimate equals the protocol's correlation.

    Raises:
        BinEvalError: unknown level, missing groups / systems, bad arguments (an
            unknown `constant_predictions` included).
    """
    check_constant_predictions(constant_predictions)
    make, n_units = _factory(human, level, method, groups, systems, constant_predictions)
    return bootstrap_ci(make(predicted), n_units, n_resamples=n_resamples, confidence=confidence, seed=seed)


def paired_bootstrap_test(
    human: Sequence[float | None],
    predicted_a: Sequence[float | None],
    predicted_b: Sequence[float | None],
    *,
    level: Level = "pooled",
    method: Method = "spearman",
    groups: Sequence[object] | None = None,
    systems: Sequence[object] | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    constant_predictions: ConstantPredictions = DEFAULT_CONSTANT_PREDICTIONS,
) -> PairedBootstrapResult:
    """Is evaluator A's correlation with humans different from evaluator B's?

    Both evaluators are scored on the same resampled units in every resample; the
    difference's percentile interval and two-sided p-value (twice the smaller tail
    share at 0, capped at 1) are reported.

    Args:
        human: human scores per item.
        predicted_a / predicted_b: the two evaluators' scores per item (e.g. BinEval
            and a baseline), same items and order.
        Others: as in `correlation_ci` (one `constant_predictions` policy for both).

    Returns:
        A `PairedBootstrapResult`.

    Raises:
        BinEvalError: as in `correlation_ci`, or vectors of different lengths.
    """
    _check(n_resamples, confidence)
    check_constant_predictions(constant_predictions)
    if not (len(human) == len(predicted_a) == len(predicted_b)):
        raise BinEvalError("human and both prediction vectors must have the same length")
    make, n_units = _factory(human, level, method, groups, systems, constant_predictions)
    stat_a, stat_b = make(predicted_a), make(predicted_b)
    everything = np.arange(n_units)
    est_a = float(stat_a(everything)) if n_units else math.nan
    est_b = float(stat_b(everything)) if n_units else math.nan
    reps = _replicates([stat_a, stat_b], n_units, n_resamples, seed)
    diff = reps[:, 0] - reps[:, 1]
    low, high, undefined = _interval(diff, confidence)
    finite = diff[np.isfinite(diff)]
    if len(finite) < 10:
        p_value = math.nan
    else:
        p_value = float(min(1.0, 2 * min(np.mean(finite <= 0), np.mean(finite >= 0))))
    return PairedBootstrapResult(est_a, est_b, est_a - est_b, low, high, p_value, n_resamples, undefined)



AGREEMENT_STATISTICS = ("kappa", "accuracy")


def agreement_ci(unit_counts: np.ndarray, *, statistic: str = "kappa", n_resamples: int = 1000,
                 confidence: float = 0.95, seed: int = 0) -> BootstrapInterval:
    """Bootstrap interval of a judge's agreement with labels, resampling units (items).

    Args:
        unit_counts: shape (units, 4): per item, its judge-vs-label cells in
            `binaryeval_dspy.metrics.binary_agreement.CELLS` order (yes_yes, yes_no,
            no_yes, no_no) over its answered questions. A resample draws items with
            replacement and sums their cells.
        statistic: ``kappa`` (Cohen's kappa) or ``accuracy``.
        n_resamples / confidence / seed: as in `bootstrap_ci`.

    Returns:
        A `BootstrapInterval` whose estimate is the statistic of all items' cells;
        resamples where it is undefined (kappa of a one-sided resample) are left out and
        counted.

    Raises:
        BinEvalError: an unknown `statistic`, a shape other than (units, 4), or bad
            `n_resamples` / `confidence`.
    """
    counts = np.asarray(unit_counts, dtype=float)
    if counts.ndim != 2 or counts.shape[1] != 4:
        raise BinEvalError(f"unit_counts must have shape (units, 4), got {counts.shape}")
    if statistic not in AGREEMENT_STATISTICS:
        raise BinEvalError(f"unknown agreement statistic {statistic!r}; expected one of {AGREEMENT_STATISTICS}")
    of_cells = cohen_kappa_from_counts if statistic == "kappa" else accuracy_from_counts
    n_units = len(counts)

    def batch(idx: np.ndarray) -> np.ndarray:
        rows = idx.shape[0]
        weights = np.bincount((idx + n_units * np.arange(rows)[:, None]).ravel(),
                              minlength=rows * n_units).reshape(rows, n_units)
        return np.atleast_1d(of_cells(weights @ counts))

    return bootstrap_ci(batch, n_units, n_resamples=n_resamples, confidence=confidence, seed=seed, vectorized=True)

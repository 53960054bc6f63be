"""Agreement of binary verdicts: with labels (accuracy, Cohen's kappa) and among raters
(Fleiss' kappa, Krippendorff's alpha), and the calibration of P(yes) (ECE, Brier score).

Small pure functions over counts, vectorized with numpy so a bootstrap can call them on
every resample at once. Undefined values (no pairs, chance agreement of 1) are NaN, never
0. Sources: Cohen (1960) "A coefficient of agreement for nominal scales"; Fleiss (1971)
"Measuring nominal scale agreement among many raters", with the usual extension to units
rated by different numbers of raters; Krippendorff (2011) "Computing Krippendorff's
alpha-reliability" (nominal metric, coincidence matrix); Guo et al. (2017) "On calibration
of modern neural networks" (expected calibration error over equal-width bins); Brier (1950).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: The four cells of a judge-vs-label table, in this order: (judge yes, label yes),
#: (judge yes, label no), (judge no, label yes), (judge no, label no).
CELLS = ("yes_yes", "yes_no", "no_yes", "no_no")


def confusion_counts(judge: Sequence[bool], label: Sequence[bool]) -> np.ndarray:
    """The 4 cells (`CELLS`) of two aligned yes/no vectors (True = yes).

    Raises:
        ValueError: the vectors differ in length.
    """
    j = np.asarray(judge, dtype=bool)
    y = np.asarray(label, dtype=bool)
    if j.shape != y.shape:
        raise ValueError(f"judge and label differ in length ({j.size} and {y.size})")
    return np.array([np.sum(j & y), np.sum(j & ~y), np.sum(~j & y), np.sum(~j & ~y)], dtype=float)


def accuracy_from_counts(counts: np.ndarray) -> np.ndarray | float:
    """Share of agreeing pairs, (yes_yes + no_no) / n, in [0, 1]; NaN for n = 0.

    Args:
        counts: the 4 cells (last axis, `CELLS` order); any leading shape (resamples).
    """
    c = np.asarray(counts, dtype=float)
    n = c.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (c[..., 0] + c[..., 3]) / n
    return float(out) if np.ndim(out) == 0 else out


def cohen_kappa_from_counts(counts: np.ndarray) -> np.ndarray | float:
    """Cohen's kappa of a 2x2 judge-vs-label table: (p_o - p_e) / (1 - p_e), in [-1, 1].

    p_o is the observed agreement and p_e the agreement expected from the two margins.
    NaN when there are no pairs or p_e = 1 (both sides say the same one thing: kappa is
    undefined, not 0).

    Args:
        counts: the 4 cells (last axis, `CELLS` order); any leading shape (resamples).
    """
    c = np.asarray(counts, dtype=float)
    n = c.sum(axis=-1)
    judge_yes = c[..., 0] + c[..., 1]
    label_yes = c[..., 0] + c[..., 2]
    with np.errstate(invalid="ignore", divide="ignore"):
        p_o = (c[..., 0] + c[..., 3]) / n
        p_e = (judge_yes * label_yes + (n - judge_yes) * (n - label_yes)) / (n * n)
        kappa = np.where(p_e < 1.0, (p_o - p_e) / (1.0 - p_e), np.nan)
    kappa = np.where(n > 0, kappa, np.nan)
    return float(kappa) if np.ndim(kappa) == 0 else kappa


def cohen_kappa(judge: Sequence[bool], label: Sequence[bool]) -> float:
    """Cohen's kappa of two aligned yes/no vectors (True = yes); NaN when undefined."""
    return float(cohen_kappa_from_counts(confusion_counts(judge, label)))


def fleiss_kappa(ratings: np.ndarray) -> float:
    """Fleiss' kappa of several raters on nominal categories.

    Args:
        ratings: counts, shape (units, categories): how many raters put each unit in each
            category. Units rated by fewer than 2 raters are left out; units may have
            different numbers of raters (each unit's agreement is over its own raters).

    Returns:
        kappa in [-1, 1] (1: every unit unanimous); NaN for no usable unit or when the
        expected agreement is 1 (one category only).
    """
    r = np.asarray(ratings, dtype=float)
    m = r.sum(axis=1)
    r, m = r[m >= 2], m[m >= 2]
    if not len(r):
        return math.nan
    per_unit = ((r * r).sum(axis=1) - m) / (m * (m - 1))
    p_bar = float(per_unit.mean())
    shares = r.sum(axis=0) / m.sum()
    p_e = float((shares * shares).sum())
    return math.nan if p_e >= 1.0 else (p_bar - p_e) / (1.0 - p_e)


def krippendorff_alpha_nominal(ratings: np.ndarray) -> float:
    """Krippendorff's alpha for nominal data: 1 - D_o / D_e from the coincidence matrix.

    Args:
        ratings: counts, shape (units, categories), as for `fleiss_kappa`; missing
            ratings are simply not counted, and units with fewer than 2 ratings are left out.

    Returns:
        alpha in (-inf, 1]; NaN when there is no pairable value or only one category.
    """
    r = np.asarray(ratings, dtype=float)
    m = r.sum(axis=1)
    r, m = r[m >= 2], m[m >= 2]
    if not len(r):
        return math.nan
    # coincidences o_ck = sum_u n_uc (n_uk - [c == k]) / (m_u - 1)
    coincidence = np.einsum("uc,uk->ck", r / (m - 1)[:, None], r) - np.diag((r / (m - 1)[:, None]).sum(axis=0))
    n_c = coincidence.sum(axis=1)
    n = n_c.sum()
    observed = coincidence.sum() - np.trace(coincidence)
    expected = (n_c.sum() ** 2 - (n_c * n_c).sum()) / (n - 1)
    return math.nan if expected <= 0 else 1.0 - observed / expected


@dataclass(frozen=True)
class ReliabilityBin:
    """One bin of a reliability diagram.

    Attributes:
        low / high: the bin's P(yes) range, [low, high) (the last bin includes 1).
        n: answers with P(yes) in the bin.
        mean_p_yes: their mean P(yes) (NaN when n = 0).
        yes_rate: the share of them whose label is yes (NaN when n = 0).
    """

    low: float
    high: float
    n: int
    mean_p_yes: float
    yes_rate: float


def reliability_bins(p_yes: Sequence[float], label: Sequence[bool], *, n_bins: int = 10) -> list[ReliabilityBin]:
    """Equal-width bins of P(yes) with the labels' yes-rate in each (a reliability diagram).

    A value p falls in bin ``min(floor(p * n_bins), n_bins - 1)``, so 1.0 is in the last.

    Raises:
        ValueError: lengths differ, `n_bins` < 1, or a P(yes) outside [0, 1].
    """
    p = np.asarray(p_yes, dtype=float)
    y = np.asarray(label, dtype=float)
    if p.shape != y.shape:
        raise ValueError(f"p_yes and label differ in length ({p.size} and {y.size})")
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    if p.size and (np.nanmin(p) < 0 or np.nanmax(p) > 1 or np.isnan(p).any()):
        raise ValueError("every P(yes) must be a number in [0, 1]")
    index = np.minimum(np.floor(p * n_bins).astype(int), n_bins - 1)
    out = []
    for b in range(n_bins):
        chosen = index == b
        n = int(chosen.sum())
        out.append(ReliabilityBin(b / n_bins, (b + 1) / n_bins, n,
                                  float(p[chosen].mean()) if n else math.nan,
                                  float(y[chosen].mean()) if n else math.nan))
    return out


def expected_calibration_error(p_yes: Sequence[float], label: Sequence[bool], *, n_bins: int = 10) -> float:
    """ECE: the mean over answers of |yes-rate - mean P(yes)| of their bin (`reliability_bins`),
    i.e. sum_b (n_b / N) |yes_rate_b - mean_p_b|; in [0, 1]; NaN for no answer."""
    bins = reliability_bins(p_yes, label, n_bins=n_bins)
    total = sum(b.n for b in bins)
    if not total:
        return math.nan
    return float(sum(b.n / total * abs(b.yes_rate - b.mean_p_yes) for b in bins if b.n))


def brier_score(p_yes: Sequence[float], label: Sequence[bool]) -> float:
    """Brier score: mean (P(yes) - [label is yes])^2, in [0, 1] (0 is perfect); NaN for no answer.

    Raises:
        ValueError: the lengths differ.
    """
    p = np.asarray(p_yes, dtype=float)
    y = np.asarray(label, dtype=float)
    if p.shape != y.shape:
        raise ValueError(f"p_yes and label differ in length ({p.size} and {y.size})")
    return float(np.mean((p - y) ** 2)) if p.size else math.nan

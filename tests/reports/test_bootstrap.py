"""Bootstrap intervals and the paired bootstrap test."""

import math

import numpy as np
import pytest

from binaryeval_dspy.errors import BinEvalError
from binaryeval_dspy.metrics import bootstrap_ci, correlation_ci, paired_bootstrap_test, spearman


@pytest.fixture
def noisy():
    rng = np.random.default_rng(3)
    human = rng.normal(size=120)
    good = human + 0.3 * rng.normal(size=120)
    bad = rng.normal(size=120)
    return human, good, bad


def test_interval_brackets_the_estimate_and_is_reproducible(noisy):
    human, good, _ = noisy
    first = correlation_ci(human, good, level="pooled", n_resamples=300, seed=5)
    again = correlation_ci(human, good, level="pooled", n_resamples=300, seed=5)
    assert first == again
    assert first.estimate == pytest.approx(spearman(human, good))
    assert first.low < first.estimate < first.high
    assert first.undefined_resamples == 0


def test_bootstrap_of_a_mean_matches_its_spread():
    values = np.arange(100, dtype=float)
    interval = bootstrap_ci(lambda idx: float(values[idx].mean()), 100, n_resamples=2000, seed=0)
    assert interval.estimate == pytest.approx(49.5)
    # standard error of the mean is ~2.9, so the 95% interval is about 49.5 +- 5.7
    assert 42 < interval.low < 46 and 53 < interval.high < 57


def test_summary_level_resamples_documents():
    human = [1, 2, 3] * 4
    predicted = [1, 2, 3, 1, 2, 3, 3, 2, 1, 1, 2, 3]
    groups = sorted(["a", "b", "c", "d"] * 3)
    interval = correlation_ci(human, predicted, level="summary", groups=groups, n_resamples=400, seed=1)
    assert interval.estimate == pytest.approx(0.5)  # (1 + 1 - 1 + 1) / 4
    # document-level values are +1 or -1, so every resample mean is a multiple of 0.5
    assert interval.low >= -1 and interval.high == pytest.approx(1.0)


def test_undefined_resamples_are_counted_not_fatal():
    interval = correlation_ci([1, 1, 1, 2], [1, 2, 3, 4], level="pooled", n_resamples=200, seed=0)
    assert 0 < interval.undefined_resamples < 200  # resamples with only the three 1s are undefined
    constant = correlation_ci([2, 2, 2, 2], [1, 2, 3, 4], level="pooled", n_resamples=50, seed=0)
    assert math.isnan(constant.estimate) and math.isnan(constant.low) and constant.undefined_resamples == 50


def test_paired_test_detects_a_better_evaluator(noisy):
    human, good, bad = noisy
    test = paired_bootstrap_test(human, good, bad, level="pooled", n_resamples=500, seed=2)
    assert test.delta == pytest.approx(spearman(human, good) - spearman(human, bad))
    assert test.low > 0 and test.p_value < 0.01


def test_paired_test_of_an_evaluator_with_itself_finds_nothing(noisy):
    human, good, _ = noisy
    test = paired_bootstrap_test(human, good, good, level="pooled", n_resamples=200, seed=2)
    assert test.delta == 0 and test.low == 0 and test.high == 0 and test.p_value == 1.0


def test_average_over_dimensions_uses_the_same_resamples(noisy):
    human, good, bad = noisy
    rows_h = [human, human]
    interval = correlation_ci(rows_h, [good, bad], level="pooled", n_resamples=200, seed=4)
    assert interval.estimate == pytest.approx((spearman(human, good) + spearman(human, bad)) / 2)


def test_argument_errors():
    with pytest.raises(BinEvalError):
        correlation_ci([1, 2, 3], [1, 2, 3], level="summary")  # no groups
    with pytest.raises(BinEvalError):
        correlation_ci([1, 2, 3], [1, 2, 3], level="document")  # type: ignore[arg-type]
    with pytest.raises(BinEvalError):
        bootstrap_ci(lambda idx: 0.0, 3, confidence=1.5)

"""Correlation metrics against values computed by hand (ties, constants, NaN)."""

import math

import pytest

from binaryeval_dspy.errors import BinEvalError
from binaryeval_dspy.metrics import (
    correlate,
    kendall,
    pearson,
    pooled_correlation,
    spearman,
    summary_level_correlation,
    system_level_correlation,
    turn_level_correlation,
)


def test_spearman_without_ties():
    # rank differences d = (0, 1, -1, 0): rho = 1 - 6 * 2 / (4 * 15) = 0.8
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)


def test_kendall_without_ties():
    # 5 concordant, 1 discordant pair out of 6
    assert kendall([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)


def test_spearman_with_ties_uses_average_ranks():
    # x ranks (1, 2.5, 2.5, 4), y ranks (1, 2, 3, 4): r = 4.5 / sqrt(4.5 * 5)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(4.5 / math.sqrt(4.5 * 5))


def test_kendall_is_tau_b_with_ties():
    # 5 concordant, 0 discordant, one pair tied in x: tau_b = 5 / sqrt((6 - 1) * 6)
    assert kendall([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(5 / math.sqrt(30))


def test_pearson():
    # cov = 5, var_x = 2, var_y = 38/3: r = 5 / sqrt(2 * 38 / 3)
    assert pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(5 / math.sqrt(2 * 38 / 3))


def test_nan_and_none_pairs_are_dropped_and_counted():
    result = correlate([1, 2, math.nan, 4, None], [1, 3, 5, 2, 7], "spearman")
    assert result.n == 3 and result.dropped == 2
    assert result.value == pytest.approx(0.5)  # ranks (1,2,3) vs (1,3,2)


def test_constant_inputs_are_undefined_not_errors():
    human_constant = correlate([3, 3, 3], [1, 2, 3])
    assert math.isnan(human_constant.value) and human_constant.note == "constant human scores"
    predicted_constant = correlate([1, 2, 3], [5, 5, 5])
    assert math.isnan(predicted_constant.value) and predicted_constant.note == "constant predictions"
    assert math.isnan(spearman([1, 2, 3], [5, 5, 5]))
    assert math.isnan(kendall([1], [1]))
    assert correlate([1], [2]).note == "too few pairs"


def test_pooled_correlation_of_a_constant_evaluator_is_undefined():
    result = pooled_correlation([1, 2, 3, 4], [0.5, 0.5, 0.5, 0.5], "kendall")
    assert math.isnan(result.value) and result.note == "constant predictions"
    assert turn_level_correlation([1, 2, 3], [1, 2, 3]).value == pytest.approx(1.0)


def test_summary_level_averages_documents_and_reports_degenerate_groups():
    human = [1, 2, 3, 1, 2, 3, 2, 2, 2, 1, 2, 3]
    predicted = [1, 2, 3, 3, 2, 1, 1, 2, 3, 4, 4, 4]
    groups = ["a"] * 3 + ["b"] * 3 + ["c"] * 3 + ["d"] * 3
    result = summary_level_correlation(human, predicted, groups, "spearman", constant_predictions="zero")
    # a: +1, b: -1, c: skipped (constant human), d: 0 (constant evaluator, policy zero) -> mean 0
    assert result.value == pytest.approx(0.0)
    assert result.groups_used == 3 and result.groups_skipped == 1 and result.groups_constant_prediction == 1
    assert math.isnan(result.per_group["c"]) and result.per_group["a"] == pytest.approx(1.0)


def test_summary_level_all_groups_undefined_is_nan():
    result = summary_level_correlation([2, 2, 3, 3], [1, 2, 1, 2], ["a", "a", "b", "b"])
    assert math.isnan(result.value) and result.groups_skipped == 2


def test_system_level_correlates_system_means():
    human = [1, 3, 2, 4, 5, 5]          # means: A 2, B 3, C 5
    predicted = [0.1, 0.3, 0.9, 0.1, 0.5, 0.6]  # means: A 0.2, B 0.5, C 0.55
    systems = ["A", "A", "B", "B", "C", "C"]
    assert system_level_correlation(human, predicted, systems, "spearman").value == pytest.approx(1.0)
    # a NaN item is left out of both means: B becomes (2 -> 0.9) only
    predicted[3] = math.nan
    result = system_level_correlation(human, predicted, systems, "pearson")
    assert result.dropped == 1 and result.value == pytest.approx(pearson([2, 2, 5], [0.2, 0.9, 0.55]))


def test_bad_inputs_raise_project_errors():
    with pytest.raises(BinEvalError):
        correlate([1, 2], [1, 2, 3])
    with pytest.raises(BinEvalError):
        correlate([1, 2], [1, 2], "cosine")  # type: ignore[arg-type]
    with pytest.raises(BinEvalError):
        summary_level_correlation([1, 2], [1, 2], ["a"])
    with pytest.raises(BinEvalError):
        spearman(["high", "low"], [1, 2])

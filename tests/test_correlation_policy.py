"""Issue 11, point 8: documents with constant predictions in summary-level correlations.

G-Eval's (``meta_eval_summeval.py``) and UniEval's (``reproduce/correlation.py``)
meta-evaluation scripts skip a document whose predictions (or human scores) are all
equal; the default policy ``skip`` does the same, ``zero`` keeps the old behaviour
(rho = 0 for such a document). Pooled correlations of a constant vector are undefined.
"""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.data.paths import resolve_data_file
from binaryeval_dspy.data.rows import read_jsonl_rows
from binaryeval_dspy.errors import BinEvalError
from binaryeval_dspy.metrics import (
    DEFAULT_CONSTANT_PREDICTIONS,
    correlation_ci,
    paired_bootstrap_test,
    pooled_correlation,
    summary_level_correlation,
    system_level_correlation,
    turn_level_correlation,
)
from tests.test_benchmark_run import data_dir, scripted, tasks_dir  # noqa: F401  (fixtures)

# doc a: rho +1; doc b: rho +0.5; doc c: predictions constant; doc d: human scores constant
HUMAN = [1, 2, 3, 1, 2, 3, 1, 2, 3, 2, 2, 2]
PREDICTED = [1, 2, 3, 2, 1, 3, 4, 4, 4, 1, 2, 3]
DOCS = ["a"] * 3 + ["b"] * 3 + ["c"] * 3 + ["d"] * 3


def test_skip_is_the_default_and_leaves_constant_prediction_documents_out():
    result = summary_level_correlation(HUMAN, PREDICTED, DOCS, "spearman")
    assert DEFAULT_CONSTANT_PREDICTIONS == "skip" and result.constant_predictions == "skip"
    assert result.value == pytest.approx((1.0 + 0.5) / 2)  # c skipped, d skipped
    assert result.groups_used == 2 and result.groups_constant_prediction == 1
    assert result.groups_constant_skipped == 1 and result.groups_constant_zeroed == 0
    assert math.isnan(result.per_group["c"]) and math.isnan(result.per_group["d"])


def test_zero_counts_a_constant_prediction_document_as_zero():
    result = summary_level_correlation(HUMAN, PREDICTED, DOCS, "spearman", constant_predictions="zero")
    assert result.value == pytest.approx((1.0 + 0.5 + 0.0) / 3)
    assert result.groups_used == 3 and result.per_group["c"] == 0.0
    assert result.groups_constant_zeroed == 1 and result.groups_constant_skipped == 0


def test_constant_human_documents_are_skipped_under_both_policies_and_counted_apart():
    for policy in ("skip", "zero"):
        result = summary_level_correlation(HUMAN, PREDICTED, DOCS, "kendall", constant_predictions=policy)
        assert result.groups_skipped == 1 and result.groups_constant_human == 1
        assert math.isnan(result.per_group["d"])
    # constant on both sides: it is the humans' document that is undefined, for every method
    both = summary_level_correlation([2, 2, 1, 2], [3, 3, 1, 2], ["x", "x", "y", "y"], constant_predictions="zero")
    assert both.groups_constant_human == 1 and both.groups_constant_prediction == 0 and both.groups_used == 1


def test_a_document_of_only_constant_predictions_is_undefined_under_skip():
    result = summary_level_correlation([1, 2, 3], [0.5, 0.5, 0.5], ["a", "a", "a"])
    assert math.isnan(result.value) and result.groups_used == 0 and result.groups_constant_prediction == 1


def test_pooled_turn_and_system_correlations_of_a_constant_evaluator_are_undefined():
    pooled = pooled_correlation([1, 2, 3, 4], [0.7, 0.7, 0.7, 0.7], "pearson")
    assert math.isnan(pooled.value) and not pooled.defined and pooled.note == "constant predictions"
    assert math.isnan(turn_level_correlation([1, 2, 3], [1, 1, 1]).value)
    system = system_level_correlation([1, 2, 3, 4], [0.5] * 4, ["A", "A", "B", "B"])
    assert math.isnan(system.value) and system.note == "constant predictions"


def test_an_unknown_policy_is_refused():
    with pytest.raises(BinEvalError, match="constant_predictions"):
        summary_level_correlation(HUMAN, PREDICTED, DOCS, constant_predictions="drop")  # type: ignore[arg-type]
    with pytest.raises(BinEvalError, match="constant_predictions"):
        correlation_ci(HUMAN, PREDICTED, level="summary", groups=DOCS, constant_predictions="nan")  # type: ignore


def test_bootstrap_estimates_follow_the_policy():
    for policy in ("skip", "zero"):
        point = summary_level_correlation(HUMAN, PREDICTED, DOCS, constant_predictions=policy).value
        ci = correlation_ci(HUMAN, PREDICTED, level="summary", groups=DOCS, n_resamples=50, seed=1,
                            constant_predictions=policy)
        assert ci.estimate == pytest.approx(point)
    test = paired_bootstrap_test(HUMAN, PREDICTED, HUMAN, level="summary", groups=DOCS, n_resamples=50, seed=1,
                                 constant_predictions="zero")
    assert test.estimate_a == pytest.approx(0.5) and test.estimate_b == pytest.approx(1.0)


def _summeval_file():
    try:  # $BINEVAL_DATA_DIR when set, else the copy shipped in the package
        return resolve_data_file("summeval/summeval.jsonl")
    except BinEvalError:
        return None


@pytest.mark.skipif(_summeval_file() is None, reason="SummEval data not present ($BINEVAL_DATA_DIR lacks it)")
def test_summeval_expert_1_as_predictions_of_the_expert_mean():
    """Issue 11's check on the real data: consistency rho 0.937 under skip, 0.888 under zero."""
    rows = [row for _, row in read_jsonl_rows(_summeval_file())]  # .jsonl or the packaged .jsonl.gz
    rows = [r for r in rows if r.get("expert_annotations")]  # the 12 abstractive systems, 1,200 items
    human = [r["scores"]["consistency"] for r in rows]
    expert_1 = [r["expert_annotations"][0]["consistency"] for r in rows]
    docs = [r["doc_id"] for r in rows]
    skip = summary_level_correlation(human, expert_1, docs, "spearman")
    zero = summary_level_correlation(human, expert_1, docs, "spearman", constant_predictions="zero")
    assert round(skip.value, 3) == 0.937 and round(zero.value, 3) == 0.888
    assert skip.groups_constant_prediction == zero.groups_constant_prediction == 5
    assert skip.groups_constant_human == zero.groups_constant_human == 4
    assert skip.groups_used == 91 and zero.groups_used == 96


def test_benchmark_report_states_the_policy_and_the_count(tmp_path, data_dir, tasks_dir, scripted):  # noqa: F811
    """UniEval-style answers 'yes' to everything: constant in all 3 documents of every dimension."""
    out = tmp_path / "run"
    base = ["benchmark", "summeval", "--data-dir", str(data_dir), "--tasks-dir", str(tasks_dir), "--out", str(out),
            "--bootstrap", "20", "--no-figures", "--methods", "unieval,rouge"]
    result = CliRunner().invoke(cli, base, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["constant_predictions"] == "skip"
    assert metrics["unieval"]["coherence"]["spearman"] is None  # every document skipped: undefined, not 0
    report = " ".join((out / "report.md").read_text().split())
    assert "policy 'skip'" in report and "UniEval-style 12" in report and "skipped this way" in report
    assert "| UniEval-style | n/a / n/a † |" in (out / "report.md").read_text()

    rebuilt = CliRunner().invoke(cli, ["report", str(out), "--bootstrap", "20", "--no-figures",
                                       "--constant-predictions", "zero"], catch_exceptions=False)
    assert rebuilt.exit_code == 0, rebuilt.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["constant_predictions"] == "zero" and metrics["unieval"]["coherence"]["spearman"] == 0.0
    report = " ".join((out / "report.md").read_text().split())
    assert "policy 'zero'" in report and "counted as 0 this way" in report

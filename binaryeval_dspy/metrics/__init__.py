"""Meta-evaluation metrics: correlations with human scores, bootstrap intervals, paired tests."""

from binaryeval_dspy.metrics.bootstrap import (
    LEVELS,
    BootstrapInterval,
    PairedBootstrapResult,
    bootstrap_ci,
    correlation_ci,
    paired_bootstrap_test,
)
from binaryeval_dspy.metrics.correlation import (
    CONSTANT_PREDICTION_POLICIES,
    CORRELATION_METHODS,
    DEFAULT_CONSTANT_PREDICTIONS,
    ConstantPredictions,
    CorrelationResult,
    GroupedCorrelationResult,
    correlate,
    kendall,
    pearson,
    pooled_correlation,
    spearman,
    summary_level_correlation,
    system_level_correlation,
    turn_level_correlation,
)

__all__ = [
    "CONSTANT_PREDICTION_POLICIES",
    "CORRELATION_METHODS",
    "DEFAULT_CONSTANT_PREDICTIONS",
    "LEVELS",
    "BootstrapInterval",
    "ConstantPredictions",
    "CorrelationResult",
    "GroupedCorrelationResult",
    "PairedBootstrapResult",
    "bootstrap_ci",
    "correlate",
    "correlation_ci",
    "kendall",
    "paired_bootstrap_test",
    "pearson",
    "pooled_correlation",
    "spearman",
    "summary_level_correlation",
    "system_level_correlation",
    "turn_level_correlation",
]

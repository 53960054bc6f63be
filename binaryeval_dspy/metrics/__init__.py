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
    CORRELATION_METHODS,
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
    "CORRELATION_METHODS",
    "LEVELS",
    "BootstrapInterval",
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

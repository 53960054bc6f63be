"""Head-to-head comparison of the BinEval optimizer with DSPy's MIPROv2, COPRO and GEPA.

Two set-ups (SummEval evaluator optimization, IFBench generator optimization), one
resumable harness, and a report rebuilt from saved results.
"""

from binaryeval_dspy.comparison.evaluator_metrics import (
    HumanAgreementMetric,
    SourceAgreementMetric,
    float_metric,
)
from binaryeval_dspy.comparison.harness import OPTIMIZERS, run_comparison
from binaryeval_dspy.comparison.report import (
    OPRO_NOTE,
    MetricValue,
    OptimizerResult,
    bootstrap_ci,
    comparison_markdown,
    comparison_table,
    load_results,
    metrics_from_records,
    write_comparison,
)
from binaryeval_dspy.comparison.runners import Budgets
from binaryeval_dspy.comparison.setups import ComparisonSetup, EvaluatorSetup, GeneratorSetup
from binaryeval_dspy.comparison.splits import (
    Split,
    ifbench_split,
    load_ifbench_items,
    load_summeval_items,
    summeval_split,
)

__all__ = [
    "OPRO_NOTE",
    "OPTIMIZERS",
    "Budgets",
    "ComparisonSetup",
    "EvaluatorSetup",
    "GeneratorSetup",
    "HumanAgreementMetric",
    "MetricValue",
    "OptimizerResult",
    "SourceAgreementMetric",
    "Split",
    "bootstrap_ci",
    "comparison_markdown",
    "comparison_table",
    "float_metric",
    "ifbench_split",
    "load_ifbench_items",
    "load_results",
    "load_summeval_items",
    "metrics_from_records",
    "run_comparison",
    "summeval_split",
    "write_comparison",
]

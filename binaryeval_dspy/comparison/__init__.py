"""Head-to-head comparison of the BinEval optimizer with DSPy's MIPROv2, COPRO and GEPA.

Two set-ups (SummEval evaluator optimization, IFBench generator optimization), one
resumable harness, and a report rebuilt from saved results.

Names are imported from their modules on first use (PEP 562): reading saved results
does not load DSPy or the optimizers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from binaryeval_dspy._lazy import lazy_exports

# name -> the module that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(["HumanAgreementMetric", "SourceAgreementMetric", "float_metric"],
                    "binaryeval_dspy.comparison.evaluator_metrics"),
    **dict.fromkeys(["OPTIMIZERS", "run_comparison"], "binaryeval_dspy.comparison.harness"),
    **dict.fromkeys(["OPRO_NOTE", "comparison_markdown", "write_comparison"], "binaryeval_dspy.comparison.report"),
    **dict.fromkeys(["comparison_table"], "binaryeval_dspy.comparison.report_tables"),
    **dict.fromkeys(["MetricValue", "OptimizerResult", "bootstrap_ci", "load_results", "metrics_from_records"],
                    "binaryeval_dspy.comparison.results"),
    **dict.fromkeys(["Budgets"], "binaryeval_dspy.comparison.runners"),
    **dict.fromkeys(["ComparisonSetup", "EvaluatorSetup", "GeneratorSetup"], "binaryeval_dspy.comparison.setups"),
    **dict.fromkeys(["Split", "ifbench_split", "load_ifbench_items", "load_summeval_items", "summeval_split"],
                    "binaryeval_dspy.comparison.splits"),
}

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

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time `__getattr__` imports these
    from binaryeval_dspy.comparison.evaluator_metrics import (
        HumanAgreementMetric,
        SourceAgreementMetric,
        float_metric,
    )
    from binaryeval_dspy.comparison.harness import OPTIMIZERS, run_comparison
    from binaryeval_dspy.comparison.report import OPRO_NOTE, comparison_markdown, write_comparison
    from binaryeval_dspy.comparison.report_tables import comparison_table
    from binaryeval_dspy.comparison.results import (
        MetricValue,
        OptimizerResult,
        bootstrap_ci,
        load_results,
        metrics_from_records,
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

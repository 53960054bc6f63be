"""Reports rebuilt from saved runs: summaries, tables, Markdown.

Names are imported from their modules on first use (PEP 562): importing the package
loads neither pandas nor the benchmark report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from binaryeval_dspy._lazy import lazy_exports

# name -> the module that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(["DimensionSummary", "RunSummary", "results_frame", "summarize_results", "write_summary"],
                    "binaryeval_dspy.runs.run_summary"),
    **dict.fromkeys(["items_table", "summary_markdown", "summary_table"],
                    "binaryeval_dspy.runs.run_summary_tables"),
    **dict.fromkeys(["build_verdict_output", "item_verdict_lines", "label_counts_table", "print_item_verdicts",
                     "write_verdict_output"], "binaryeval_dspy.reports.verdict_report"),
}

__all__ = [
    "DimensionSummary",
    "RunSummary",
    "build_verdict_output",
    "item_verdict_lines",
    "items_table",
    "label_counts_table",
    "print_item_verdicts",
    "results_frame",
    "summarize_results",
    "summary_markdown",
    "summary_table",
    "write_summary",
    "write_verdict_output",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time `__getattr__` imports these
    from binaryeval_dspy.runs.run_summary import (
        DimensionSummary,
        RunSummary,
        results_frame,
        summarize_results,
        write_summary,
    )
    from binaryeval_dspy.runs.run_summary_tables import (
        items_table,
        summary_markdown,
        summary_table,
    )
    from binaryeval_dspy.reports.verdict_report import (
        build_verdict_output,
        item_verdict_lines,
        label_counts_table,
        print_item_verdicts,
        write_verdict_output,
    )

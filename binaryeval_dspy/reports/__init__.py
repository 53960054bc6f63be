"""Reports rebuilt from saved runs: summaries, tables, Markdown."""

from binaryeval_dspy.reports.run_summary import (
    DimensionSummary,
    RunSummary,
    items_table,
    results_frame,
    summarize_results,
    summary_markdown,
    summary_table,
    write_summary,
)
from binaryeval_dspy.reports.verdict_report import (
    build_verdict_output,
    item_verdict_lines,
    label_counts_table,
    print_item_verdicts,
    write_verdict_output,
)

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

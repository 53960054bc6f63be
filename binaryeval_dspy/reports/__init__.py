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

__all__ = [
    "DimensionSummary",
    "RunSummary",
    "items_table",
    "results_frame",
    "summarize_results",
    "summary_markdown",
    "summary_table",
    "write_summary",
]

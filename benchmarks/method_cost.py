"""Wall time and tokens per item of each method in benchmark run directories.

Reads the stored per-item results of `bineval benchmark` runs (no LM call) and prints,
per run and method: items, LM calls per item, prompt / completion tokens per item,
mean and median wall seconds per item, and total wall time. The LM is printed with
every run, since these numbers belong to it and to the machine that ran it.

Usage:
    python benchmarks/method_cost.py runs/summeval-local-100 [runs/topical_chat-local-100 ...]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from binaryeval_dspy.meta_eval.benchmark_files import METHOD_TITLES, BenchmarkRun


def method_rows(run: BenchmarkRun) -> list[list[str]]:
    """One row of figures per method with stored results."""
    rows = []
    for method in run.methods_present():
        results = run.read_results(method)
        if not results:
            continue
        n = len(results)
        seconds = [r.seconds for r in results]
        calls = sum(r.usage.lm_calls for r in results)
        prompt = sum(r.usage.prompt_tokens for r in results)
        completion = sum(r.usage.completion_tokens for r in results)
        rows.append([METHOD_TITLES.get(method, method), str(n), f"{calls / n:.1f}", f"{prompt / n:.0f}",
                     f"{completion / n:.1f}", f"{(prompt + completion) / n:.0f}", f"{sum(seconds) / n:.2f}",
                     f"{statistics.median(seconds):.2f}", f"{sum(seconds) / 60:.1f}"])
    return rows


def main(paths: list[str]) -> int:
    console = Console(width=170)
    if not paths:
        console.print(__doc__)
        return 2
    for raw in paths:
        run = BenchmarkRun(raw)
        config = run.read_config()
        if config is None:
            console.print(f"[red]{raw}: not a benchmark run directory[/red]")
            continue
        table = Table(title=f"{config.benchmark} ({len(config.item_ids)} items selected) - LM: {config.lm} - {raw}")
        for column in ("method", "items", "LM calls/item", "prompt tok/item", "completion tok/item",
                       "tokens/item", "mean s/item", "median s/item", "total min"):
            table.add_column(column, justify="left" if column == "method" else "right")
        for row in method_rows(run):
            table.add_row(*row)
        console.print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

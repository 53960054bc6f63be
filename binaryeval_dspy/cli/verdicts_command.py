"""`bineval verdicts RUN --out FILE`: export a run's verdicts as a verdicts file.

    bineval verdicts runs/my-run --out my-run.verdicts.jsonl
    bineval verdicts runs/my-run --out my-run.csv --judge my-judge

One row per (item, question): item_id, question_id, judge (the run's LM, or --judge),
verdict (yes / no, or unparsed / error: never no), p_yes, explanation, cost_usd, the
question's text and dimension (docs/verdicts.md). No LM call; the file reads back to the
same verdicts (`binaryeval_dspy.runs.verdicts_export.run_verdict_records`,
`binaryeval_dspy.data.verdicts_file.write_verdicts`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import click

from binaryeval_dspy.cli.console import console
from binaryeval_dspy.cli.error_handling import friendly_errors


@click.command("verdicts")
@click.argument("run_dir", metavar="RUN", type=click.Path(path_type=Path))
@click.option("--out", "out_file", required=True, type=click.Path(path_type=Path), metavar="FILE",
              help="The verdicts file to write: .jsonl, .jsonl.gz or .csv (by its suffix).")
@click.option("--judge", default=None, help="The judge name to write (default: the run's LM, as its manifest names it).")
@friendly_errors
def verdicts_command(run_dir: Path, out_file: Path, judge: str | None) -> None:
    """Export the verdicts of run directory RUN as a verdicts file (one row per item and question)."""
    from binaryeval_dspy.data.verdicts_file import verdicts_format, write_verdicts
    from binaryeval_dspy.runs.verdicts_export import run_verdict_records

    verdicts_format(out_file)  # a wrong suffix is refused before the run is read
    records = run_verdict_records(run_dir, judge=judge)
    write_verdicts(records, out_file)
    outcomes = Counter(r.verdict for r in records)
    judges = ", ".join(dict.fromkeys(r.judge for r in records)) or "none"
    console.print(f"{len(records)} verdicts of {len({r.item_id for r in records})} items ({judges}): "
                  + ", ".join(f"{outcomes.get(v, 0)} {v}" for v in ("yes", "no", "unparsed", "error"))
                  + f" -> {out_file}", highlight=False)

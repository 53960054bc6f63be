"""`bineval agreement`: how well do your own predictions agree with human experts?

    bineval agreement summeval --predictions mine=mine.jsonl --predictions unieval=unieval.csv
    bineval agreement my_scored.jsonl --human-fields coherence,fluency --doc-field doc \\
        --predictions mine=mine.csv --out runs/agreement-mine
    bineval agreement --run runs/summeval-gpt-4o-mini-100-stratified-s0 --predictions mine=mine.jsonl

Writes the same report as ``bineval benchmark`` (report.md, report.html, metrics.json,
figures/) plus missing_predictions.json, without any LM call: computed by
`binaryeval_dspy.reports.benchmark_metrics.compute_benchmark_metrics` and rendered by
`binaryeval_dspy.reports.render`, like the benchmark report. ``bineval report OUT``
re-renders it from OUT/metrics.json alone.
"""

from __future__ import annotations

from pathlib import Path

import click

from binaryeval_dspy.cli.benchmark_command import print_main_table
from binaryeval_dspy.cli.console import console
from binaryeval_dspy.cli.error_handling import friendly_errors
from binaryeval_dspy.cli.file_arguments import slug
from binaryeval_dspy.cli.options import report_statistics_options
from binaryeval_dspy.meta_eval.agreement import load_agreement_scores
from binaryeval_dspy.meta_eval.predictions import parse_prediction_option
from binaryeval_dspy.reports.agreement_tables import MISSING_FILE
from binaryeval_dspy.reports.benchmark_report import write_benchmark_report


@click.command("agreement")
@click.argument("target", metavar="[BENCHMARK_OR_SCORED_FILE]", required=False)
@click.option("--predictions", "prediction_options", multiple=True, required=True, metavar="NAME=FILE",
              help="A prediction set: NAME labels it in the report, FILE is .jsonl or .csv with item_id and one "
                   "column per dimension (or one 'score' column), any numeric scale. Repeat for several sets.")
@click.option("--run", "run_dir", type=click.Path(path_type=Path), default=None,
              help="A `bineval benchmark` run directory: use its items and compare with its methods (LM named).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Report directory (default: runs/agreement-<benchmark or file>-<names>).")
@click.option("--data-dir", type=click.Path(path_type=Path), default=None,
              help="Bundled benchmark data folder (default as for `bineval benchmark`).")
@click.option("--human-fields", default=None,
              help="Scored file: the human score fields, 'coherence,fluency' or 'coherence=scores.coh,...'.")
@click.option("--id-field", default="item_id", show_default=True,
              help="Scored file: the field naming each item (the predictions' item_id values).")
@click.option("--doc-field", default=None,
              help="Scored file: the field grouping items by source document (summary-level correlation).")
@click.option("--system-field", default=None,
              help="Scored file: the field naming the system that wrote each output (system-level correlation).")
@report_statistics_options("predicted scores")
@friendly_errors
def agreement_command(target: str | None, prediction_options: tuple[str, ...], run_dir: Path | None,
                      out_dir: Path | None, data_dir: Path | None, human_fields: str | None, id_field: str,
                      doc_field: str | None, system_field: str | None, n_resamples: int, seed: int,
                      constant_predictions: str, no_figures: bool) -> None:
    """Correlate your prediction files with human scores: a bundled benchmark (summeval, topical_chat,
    qags, qags_cnndm, qags_xsum), a `bineval benchmark` run (--run) or your own human-scored file."""
    predictions = [parse_prediction_option(value) for value in prediction_options]
    scores = load_agreement_scores(target, predictions, run=run_dir, data_dir=data_dir, human_fields=human_fields,
                                   id_field=id_field, doc_field=doc_field, system_field=system_field,
                                   constant_predictions=constant_predictions)  # type: ignore[arg-type]
    if out_dir is None:
        out_dir = Path("runs") / slug(f"agreement-{scores.spec.name}-{'-'.join(scores.prediction_sets)}")
    md_path, html_path, report = write_benchmark_report(scores, n_resamples=n_resamples, seed=seed,
                                                        figures=not no_figures, out_dir=out_dir)
    print_main_table(report)
    n = len(scores.items)
    for name, ps in scores.prediction_sets.items():
        line = f"{name}: {ps.matched_items}/{n} items have a prediction"
        if ps.missing_items:
            line += f", {len(ps.missing_items)} without"
        if ps.unknown_ids:
            line += f"; {len(ps.unknown_ids)} row(s) with an unknown item_id (not used)"
        absent = [d for d in scores.spec.dimensions if d not in ps.columns]
        if absent:
            line += f"; no column for {', '.join(absent)} (n/a)"
        warn = ps.missing_items or ps.unknown_ids or absent
        console.print(f"[yellow]{line}.[/yellow]" if warn else f"{line}.", highlight=False)
    console.print(f"Report: {md_path} and {html_path}" + (f"; ids listed in {out_dir / MISSING_FILE}"
                                                          if any(p.missing_items or p.unknown_ids for p in
                                                                 scores.prediction_sets.values()) else ""))

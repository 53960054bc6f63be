"""`bineval agreement`: how well do your own predictions, or your judges' verdicts, agree with people?

Item scores against human scores (correlations):

    bineval agreement summeval --predictions mine=mine.jsonl --predictions unieval=unieval.csv
    bineval agreement my_scored.jsonl --human-fields coherence,fluency --doc-field doc \\
        --predictions mine=mine.csv --out runs/agreement-mine
    bineval agreement --run runs/summeval-gpt-4o-mini-100-stratified-s0 --predictions mine=mine.jsonl

Writes the same report as ``bineval benchmark`` (report.md, report.html, metrics.json,
figures/) plus missing_predictions.json, without any LM call: computed by
`binaryeval_dspy.reports.benchmark_metrics.compute_benchmark_metrics` and rendered by
`binaryeval_dspy.render`, like the benchmark report. ``bineval report OUT``
re-renders it from OUT/metrics.json alone.

Question-level verdicts against labels (a verdicts file, docs/verdicts.md), with panels
and cascades simulated on the recorded verdicts:

    bineval agreement --labels labels.csv --verdicts judges.jsonl --verdicts runs/my-run \
        --panel majority=a,b,c --cascade 'cheap>strong' --band 0.3,0.7

Writes report.md, report.html, agreement.json, judge_weights.csv (each judge's weight for
``bineval evaluate --panel-rule weighted --panel-weights``) and figures/reliability.png
(`binaryeval_dspy.meta_eval.label_agreement`, `binaryeval_dspy.reports.label_agreement_report`).
"""

from __future__ import annotations

from pathlib import Path

import click

from binaryeval_dspy.cli.benchmark_command import print_main_table
from binaryeval_dspy.cli.console import console
from binaryeval_dspy.cli.error_handling import friendly_errors
from binaryeval_dspy.cli.file_arguments import slug
from binaryeval_dspy.cli.options import report_statistics_options
from binaryeval_dspy.errors import InputError
from binaryeval_dspy.meta_eval.agreement import load_agreement_scores
from binaryeval_dspy.meta_eval.predictions import parse_prediction_option
from binaryeval_dspy.reports.agreement_tables import MISSING_FILE
from binaryeval_dspy.reports.benchmark_report import write_benchmark_report


@click.command("agreement")
@click.argument("target", metavar="[BENCHMARK_OR_SCORED_FILE]", required=False)
@click.option("--predictions", "prediction_options", multiple=True, metavar="NAME=FILE",
              help="A prediction set: NAME labels it in the report, FILE is .jsonl or .csv with item_id and one "
                   "column per dimension (or one 'score' column), any numeric scale. Repeat for several sets.")
@click.option("--labels", "labels_file", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="Question-level labels: a verdicts file (.jsonl or .csv; judge 'human' or one id per "
                   "annotator). Compares every judge of --verdicts with them, question by question.")
@click.option("--verdicts", "verdict_sources", multiple=True, type=click.Path(path_type=Path), metavar="FILE|RUN",
              help="With --labels: judges' verdicts, a verdicts file or a run directory (exported as by "
                   "`bineval verdicts`). Repeatable; judges are named by the file's judge column.")
@click.option("--panel", "panel_options", multiple=True, metavar="RULE=JUDGE,JUDGE,...",
              help="With --labels: a panel of judges, one aggregated verdict per question by RULE: majority, "
                   "any-no (one no decides a --fatal question) or weighted (by each judge's agreement with the "
                   "labels on the other items). Repeatable.")
@click.option("--cascade", "cascade_options", multiple=True, metavar="FIRST>NEXT",
              help="With --labels: a cascade, e.g. 'cheap>strong' or 'a+b>strong' (a first stage of two voting): "
                   "the next stage answers only when the stage before gave no answer, split, or gave a P(yes) "
                   "inside --band. Repeatable.")
@click.option("--band", "band_option", default=None, metavar="LOW,HIGH",
              help="With --cascade: escalate when the stage's P(yes) is in [LOW, HIGH] (a sweep over bands is "
                   "reported whenever the first stage gave P(yes)).")
@click.option("--target-kappa", default=0.6, show_default=True, type=float,
              help="With --cascade: the band sweep reports the cheapest band reaching this Cohen's kappa.")
@click.option("--fatal", "fatal_questions", default="", metavar="QID,QID",
              help="With --panel any-no=...: the fatal question ids.")
@click.option("--items", "items_glob", default=None, metavar="GLOB",
              help="With --labels: use only items whose item_id matches GLOB (e.g. 'natural-*').")
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
def agreement_command(target: str | None, prediction_options: tuple[str, ...], labels_file: Path | None,
                      verdict_sources: tuple[Path, ...], panel_options: tuple[str, ...],
                      cascade_options: tuple[str, ...], band_option: str | None, target_kappa: float,
                      fatal_questions: str, items_glob: str | None, run_dir: Path | None,
                      out_dir: Path | None, data_dir: Path | None, human_fields: str | None, id_field: str,
                      doc_field: str | None, system_field: str | None, n_resamples: int, seed: int,
                      constant_predictions: str, no_figures: bool) -> None:
    """Correlate your prediction files with human scores: a bundled benchmark (summeval, topical_chat,
    qags, qags_cnndm, qags_xsum), a `bineval benchmark` run (--run) or your own human-scored file;
    or, with --labels, compare judges' verdicts with question-level labels."""
    if labels_file is not None:
        if prediction_options or target or run_dir:
            raise InputError("--labels compares verdicts question by question; --predictions, --run and a "
                             "benchmark or scored file correlate item scores", field="--labels",
                             fix="run the two comparisons as two commands.")
        label_agreement_run(labels_file, verdict_sources, panel_options, cascade_options, band_option,
                            target_kappa, fatal_questions, items_glob, out_dir, n_resamples, seed, no_figures)
        return
    if not prediction_options:
        raise InputError("no prediction file given", field="--predictions",
                         fix="pass --predictions NAME=FILE (repeat it for several sets), or --labels FILE with "
                             "--verdicts to compare verdicts question by question.")
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


def _judged_records(sources: tuple[Path, ...]):
    """Every record of the --verdicts sources (files, or run directories exported on the fly),
    and one line per source naming it and its judges."""
    from binaryeval_dspy.data.verdicts_file import read_verdicts
    from binaryeval_dspy.runs.verdicts_export import run_verdict_records

    records, described = [], []
    for source in sources:
        part = run_verdict_records(source) if source.is_dir() else read_verdicts(source)
        judges = list(dict.fromkeys(r.judge for r in part))
        described.append(f"{source} ({len(part)} rows; judges: {', '.join(judges)})")
        records.extend(part)
    return records, described


def label_agreement_run(labels_file: Path, verdict_sources: tuple[Path, ...], panel_options: tuple[str, ...],
                        cascade_options: tuple[str, ...], band_option: str | None, target_kappa: float,
                        fatal_questions: str, items_glob: str | None, out_dir: Path | None, n_resamples: int,
                        seed: int, no_figures: bool) -> None:
    """`bineval agreement --labels`: read, compare, write the report and print the main table."""
    from rich.table import Table as RichTable

    from binaryeval_dspy.data.verdicts_file import read_verdicts
    from binaryeval_dspy.meta_eval.label_agreement import (
        label_agreement,
        parse_band,
        parse_cascade,
        parse_panel,
    )
    from binaryeval_dspy.reports.label_agreement_report import write_agreement_report

    if not verdict_sources:
        raise InputError("no verdicts to compare with the labels", field="--verdicts",
                         fix="pass --verdicts FILE (a verdicts file) or --verdicts RUN (a run directory).")
    band = parse_band(band_option) if band_option else None
    panels = [parse_panel(text) for text in panel_options]
    cascades = [parse_cascade(text, band=band) for text in cascade_options]
    labels = read_verdicts(labels_file)
    judged, described = _judged_records(verdict_sources)
    result = label_agreement(labels, judged, panels=panels, cascades=cascades,
                             fatal_questions=[q.strip() for q in fatal_questions.split(",") if q.strip()],
                             items=items_glob, n_resamples=n_resamples, seed=seed, target_kappa=target_kappa)
    if out_dir is None:
        out_dir = Path("runs") / slug(f"agreement-{labels_file.name.split('.')[0]}")
    md_path, html_path, json_path = write_agreement_report(
        result, out_dir, labels_path=str(labels_file), verdict_sources=described, n_resamples=n_resamples,
        seed=seed, items=items_glob, figures=not no_figures)
    table = RichTable(title=f"Agreement with {labels_file} ({result.labels['pairs']} labelled pairs)")
    for column in ("judge", "answered", "non-answers", "accuracy", "strict", "kappa [95%]", "yes-rate judge/labels",
                   "cost"):
        table.add_column(column, justify="left" if column == "judge" else "right")
    for name, j in result.judges.items():
        low, high = j["kappa_interval"]
        interval = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
        pct = (lambda v: "n/a" if v is None else f"{100 * v:.1f}%")
        table.add_row(name, f"{j['answered']}/{j['pairs']}", str(j["unparsed"] + j["error"]), pct(j["accuracy"]),
                      pct(j["accuracy_strict"]),
                      ("n/a" if j["kappa"] is None else f"{j['kappa']:.3f}") + interval,
                      f"{pct(j['yes_rate'])} / {pct(j['label_yes_rate'])}",
                      "unknown" if j["cost_usd"] is None else f"${j['cost_usd']:.4f}")
    console.print(table)
    for name, c in result.cascades.items():
        share = "n/a" if c["cost_share"] is None else f"{100 * c['cost_share']:.1f}%"
        console.print(f"{name}: {100 * (c['escalated_share'] or 0):.1f}% escalated; cost {share} of asking "
                      f"{'+'.join(c['stages'][-1])} every question.", highlight=False)
    console.print(f"Report: {md_path}, {html_path} and {json_path}")

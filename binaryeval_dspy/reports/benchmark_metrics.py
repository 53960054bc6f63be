"""Compute a benchmark (or agreement) report: a pure function from a run to `BenchmarkMetrics`.

`compute_benchmark_metrics` reads a run directory (no LM call, no data folder, no file
written) and computes, per method and dimension, the correlation with the human scores
at the benchmark's protocol level (Table 1: summary-level rho / tau on SummEval; Table
7: turn-level rho / tau on Topical-Chat; Table 8: pooled r / rho / tau on QAGS), plus
Pearson's r, pooled and system-level correlations, bootstrap 95% intervals, paired
bootstrap tests of BinEval against each baseline, the question analysis of section
5.6, the cost of each method, where each score came from (log-probabilities or the
plain-answer fallback, counted per method) and the data of the figures. When BinEval's
results carry soft scores (mean P(yes) per dimension), a "BinEval, P(yes)" row is added
to every table, computed from those scores exactly as BinEval's row is from its
yes-rates.

The same function makes the report of ``bineval agreement``: a `RunScores` whose
``prediction_sets`` hold a user's prediction files (any numeric scale; built by
`binaryeval_dspy.meta_eval.agreement.load_agreement_scores`) gets one row per set in
every table, labelled with the set's name and file, each row with its items used /
total; paired tests compare the sets with each other and with our methods (when a run
was given); items without a prediction and unknown ids are counted and listed.

The result holds the numbers and the report document (tables with their cells,
figures with their data); `binaryeval_dspy.render` turns it into Markdown and
HTML, `binaryeval_dspy.reports.benchmark_report` writes the files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from binaryeval_dspy.meta_eval.benchmark_files import NO_LM, BenchmarkRun
from binaryeval_dspy.meta_eval.run_scores import DERIVED_METHODS, RunScores, load_run_scores
from binaryeval_dspy.metrics.correlation import DEFAULT_CONSTANT_PREDICTIONS, ConstantPredictions
from binaryeval_dspy.reports.agreement_tables import agreement_intro, prediction_files_table
from binaryeval_dspy.reports.benchmark_figures import benchmark_figures
from binaryeval_dspy.reports.benchmark_statistics import (
    Calculator,
    coverage_warnings,
    score_source_lines,
)
from binaryeval_dspy.reports.correlation_tables import (
    ci_and_tests_tables,
    main_table_dimensions,
    main_table_splits,
    other_levels_table,
)
from binaryeval_dspy.reports.coverage_tables import (
    cost_table,
    diagnostics_table,
    means_table,
    score_source_table,
    system_table,
)
from binaryeval_dspy.reports.formatting import METHOD_DEFINITIONS, method_label, report_lm_label
from binaryeval_dspy.reports.metrics_document import BenchmarkMetrics
from binaryeval_dspy.reports.question_tables import question_blocks
from binaryeval_dspy.render import Document, Section


def compute_benchmark_metrics(run: BenchmarkRun | str | Path | RunScores, *, n_resamples: int = 1000,
                              seed: int = 0, figures: bool = True,
                              constant_predictions: ConstantPredictions = DEFAULT_CONSTANT_PREDICTIONS
                              ) -> BenchmarkMetrics:
    """Every number of the report of a benchmark run, and the report document, from the
    run's files alone (no LM call, nothing written), or those of an agreement report.

    Args:
        run: the run directory (or a `BenchmarkRun`), or a `RunScores` already built,
            e.g. by `load_agreement_scores` with users' prediction sets (its own
            ``constant_predictions`` then applies and the argument is ignored).
        n_resamples: bootstrap resamples for intervals and paired tests (>= 1).
        seed: bootstrap seed (same seed, same intervals).
        figures: include the figures' data (off for quick tests).
        constant_predictions: summary-level documents whose method scores are all
            equal: ``"skip"`` (default; G-Eval's and UniEval's scripts) or ``"zero"``.
            Stated in the report and in ``metrics.json`` with the counts.

    Returns:
        A `BenchmarkMetrics`. Correlations are in [-1, 1] (None where undefined),
        counts in items. With prediction sets: titled after them, one row per set in
        every table (labelled with its name and file), paired tests between the sets
        and against our methods, the prediction-file table, and no question analysis
        unless a run was given.

    Raises:
        InputError: not a benchmark run directory, or damaged files.
    """
    if isinstance(run, RunScores):
        scores = run
    else:
        run = run if isinstance(run, BenchmarkRun) else BenchmarkRun(run)
        scores = load_run_scores(run, constant_predictions=constant_predictions)
    spec = scores.spec
    lm = report_lm_label(scores)
    calc = Calculator(scores)
    metrics: dict[str, Any] = {"benchmark": spec.name, "lm": lm, "items": len(scores.items),
                               "level": spec.level, "constant_predictions": scores.constant_predictions}
    if scores.prediction_sets:
        names = ", ".join(scores.prediction_sets)
        metrics["items_source"] = scores.items_source
        report = Document(title=f"{spec.title}: agreement of {names} with human judgments - "
                                f"{len(scores.items)} items"
                                + (f" - our methods' LM: {scores.config.lm}" if scores.from_run else ""))
    else:
        report = Document(title=f"{spec.title}: evaluator agreement with human judgments - "
                                f"{len(scores.items)} items - LM: {lm}")
    cfg = scores.config
    selection = f"first {cfg.limit}" if cfg.limit and (cfg.sample in (None, "head")) else (
        f"{cfg.limit} per split, {cfg.sample} sample, seed {cfg.seed}" if cfg.limit else "all items")
    same_lm = (f"Every LM-based method ran on the same LM ({cfg.lm}), on the same items ({selection})."
               if cfg.lm != NO_LM else f"No method here uses an LM; all ran on the same items ({selection}).")
    report.intro = [] if not scores.from_run else [
        same_lm
        + (f" BinEval question set {cfg.question_set_hash} ({cfg.question_set_source})."
           if cfg.question_set_hash else "")
        + (f" Baseline rubric {cfg.rubric_hash} ({cfg.rubric_source}); log-probabilities requested: "
           f"{cfg.logprobs}." if cfg.rubric_hash else "")
        + "".join(f" {title}: {line}." for title, line in score_source_lines(scores)),
        "Methods: " + "; ".join(METHOD_DEFINITIONS[m] for m in scores.methods if m in METHOD_DEFINITIONS) + ".",
    ]
    if scores.prediction_sets:
        report.intro = agreement_intro(scores) + report.intro
    missing = [m for m in cfg.methods if m not in scores.methods]
    partial = [f"{method_label(m)} {scores.costs[m].items}/{len(scores.items)}" for m in scores.run_methods
               if m not in DERIVED_METHODS and scores.costs[m].items < len(scores.items)]
    if missing or partial:
        report.intro.append("Incomplete run: " + "; ".join(
            ([f"no results yet for {', '.join(missing)}"] if missing else [])
            + ([f"items scored: {', '.join(partial)}"] if partial else []))
            + ". Rerun the same `bineval benchmark` command to finish, then `bineval report`.")
    warnings = coverage_warnings(scores)
    metrics["coverage_warnings"] = warnings
    report.intro += [f"Warning: {w}" for w in warnings]
    if scores.unreadable:  # lines of results.jsonl that gave no result: counted and named, never dropped silently
        metrics["unreadable_result_lines"] = list(scores.unreadable)
        report.intro += [f"Warning: {line} Their items count as not scored." for line in scores.unreadable]
    main = (main_table_dimensions if spec.layout == "dimensions" else main_table_splits)(calc, scores, lm, metrics)
    blocks: list[Any] = [main]
    other = other_levels_table(calc, scores, lm, metrics)
    if other is not None:
        blocks.append(other)
    report.sections.append(Section(heading="Correlation with human judgments", blocks=blocks))
    if scores.methods:
        report.sections.append(Section(heading="Confidence intervals and paired tests",
                                       blocks=ci_and_tests_tables(calc, scores, lm, n_resamples, seed, metrics)))
        if scores.run_methods:
            report.sections.append(Section(heading="Cost", blocks=[cost_table(scores, lm, metrics)]))
        report.sections.append(Section(heading="Score distributions", blocks=[means_table(scores, lm)]
                                       + ([system_table(scores, lm, metrics)]
                                          if scores.items["system_id"].nunique() >= 2 else [])))
        sources_table = score_source_table(scores, lm, metrics)
        report.sections.append(Section(heading="Coverage", blocks=([prediction_files_table(scores, metrics)]
                                                                  if scores.prediction_sets else [])
                                       + [diagnostics_table(calc, scores, metrics)]
                                       + ([sources_table] if sources_table is not None else [])))
    if scores.from_run:
        report.sections.append(Section(heading="Why decomposition works: question analysis (paper 5.6)",
                                       blocks=question_blocks(scores, lm, metrics, figures=figures)))
    if figures and scores.methods:
        report.sections.append(Section(heading="Figures", blocks=benchmark_figures(scores, lm)))
    numbers = {k: v for k, v in metrics.items()
               if k not in ("benchmark", "lm", "items", "level", "constant_predictions", "items_source",
                            "coverage_warnings")}
    return BenchmarkMetrics(benchmark=metrics["benchmark"], lm=metrics["lm"], items=metrics["items"],
                            level=metrics["level"], constant_predictions=metrics["constant_predictions"],
                            items_source=metrics.get("items_source"), coverage_warnings=metrics["coverage_warnings"],
                            entries=numbers, report=report)

"""The meta-evaluation report of a benchmark run: compute once, render from the numbers.

Three steps, each in its own module:

1. compute: `binaryeval_dspy.reports.benchmark_metrics.compute_benchmark_metrics`, a
   pure function from a run's files (or an agreement `RunScores`) to a
   `BenchmarkMetrics` (``metrics.json``: the numbers and the report document);
2. render: `binaryeval_dspy.render` (Markdown, self-contained HTML) and
   `binaryeval_dspy.reports.figures` (PNG, matplotlib from the ``bench`` extra);
3. write: `write_benchmark_report` (``report.md``, ``report.html``, ``metrics.json``,
   ``figures/*.png`` and, for agreement reports, ``missing_predictions.json``), or
   `rerender_from_metrics`, which rebuilds ``report.md`` / ``report.html`` / figures
   from ``metrics.json`` alone (``bineval report --from-metrics``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from binaryeval_dspy.meta_eval.benchmark_files import BenchmarkRun
from binaryeval_dspy.meta_eval.run_scores import RunScores
from binaryeval_dspy.metrics.correlation import DEFAULT_CONSTANT_PREDICTIONS, ConstantPredictions
from binaryeval_dspy.reports.agreement_tables import MISSING_FILE, missing_predictions_record
from binaryeval_dspy.reports.benchmark_metrics import compute_benchmark_metrics
from binaryeval_dspy.reports.metrics_document import METRICS_FILE, BenchmarkMetrics
from binaryeval_dspy.render import Document, Figure, to_html, to_markdown

__all__ = [
    "BenchmarkReport",
    "build_benchmark_report",
    "render_benchmark_report",
    "rerender_from_metrics",
    "write_benchmark_report",
]


@dataclass
class BenchmarkReport:
    """A rendered view of a `BenchmarkMetrics`: its document and its numbers.

    Attributes:
        document: the report (`Document`: title, intro, sections of tables and figures).
        metrics: the flat numbers of ``metrics.json`` (without the document).
        source: the `BenchmarkMetrics` it was made from.
    """

    document: Document
    metrics: dict[str, Any]
    source: BenchmarkMetrics

    @property
    def title(self) -> str:
        """Names the benchmark, the number of items and the LM."""
        return self.document.title

    @property
    def intro(self) -> list[Any]:
        """Paragraphs under the title."""
        return self.document.intro

    @property
    def sections(self) -> list[tuple[str, list[Any]]]:
        """(heading, blocks) per section; a block is a str, `Table` or `Figure`."""
        return [(s.heading, s.blocks) for s in self.document.sections]

    def figures(self) -> list[Figure]:
        """Every figure, in order."""
        return self.document.figures()

    def to_markdown(self, figures_dir: str = "figures") -> str:
        """The report as Markdown; figures are linked as ``<figures_dir>/<file>``."""
        return to_markdown(self.document, figures_dir)

    def to_html(self, figure_png: Any = None) -> str:
        """The report as one self-contained HTML page (inline CSS, base64 PNG figures
        drawn from their data unless `figure_png` gives them: see `render.to_html`)."""
        if figure_png is None:
            from binaryeval_dspy.reports.figures import draw_figure

            figure_png = draw_figure
        return to_html(self.document, figure_png)


def render_benchmark_report(metrics: BenchmarkMetrics) -> BenchmarkReport:
    """The report view of computed (or loaded) metrics; nothing is recomputed."""
    return BenchmarkReport(document=metrics.report, metrics=metrics.numbers(), source=metrics)


def build_benchmark_report(run: BenchmarkRun | str | Path | RunScores, *, n_resamples: int = 1000, seed: int = 0,
                           figures: bool = True,
                           constant_predictions: ConstantPredictions = DEFAULT_CONSTANT_PREDICTIONS
                           ) -> BenchmarkReport:
    """Compute the report of a benchmark run from its files (no LM call), or the agreement
    report of prediction files: `compute_benchmark_metrics` (same arguments, same
    errors) viewed as a `BenchmarkReport`."""
    return render_benchmark_report(compute_benchmark_metrics(run, n_resamples=n_resamples, seed=seed,
                                                             figures=figures,
                                                             constant_predictions=constant_predictions))


def _write_rendered(report: BenchmarkReport, target: Path) -> tuple[Path, Path]:
    """Draw the figures into ``target/figures/`` and write ``report.md`` and ``report.html``."""
    target.mkdir(parents=True, exist_ok=True)
    pngs: dict[str, bytes] = {}
    if report.figures():
        from binaryeval_dspy.reports.figures import draw_figure

        figures_dir = target / "figures"
        figures_dir.mkdir(parents=True, exist_ok=True)
        for figure in report.figures():
            pngs[figure.filename] = draw_figure(figure)
            (figures_dir / figure.filename).write_bytes(pngs[figure.filename])
    md_path = target / "report.md"
    html_path = target / "report.html"
    md_path.write_text(report.to_markdown(), encoding="utf-8")
    html_path.write_text(report.to_html(pngs), encoding="utf-8")
    return md_path, html_path


def write_benchmark_report(run: BenchmarkRun | str | Path | RunScores, *, n_resamples: int = 1000, seed: int = 0,
                           figures: bool = True,
                           constant_predictions: ConstantPredictions = DEFAULT_CONSTANT_PREDICTIONS,
                           out_dir: str | Path | None = None) -> tuple[Path, Path, BenchmarkReport]:
    """Compute the report and write ``report.md``, ``report.html``, ``metrics.json`` and
    ``figures/*.png`` into the run directory, or `out_dir` (arguments as in
    `compute_benchmark_metrics`). With prediction sets, ``missing_predictions.json``
    (`missing_predictions_record`) is written beside them.

    Returns:
        (report.md path, report.html path, the `BenchmarkReport`).

    Raises:
        InputError: as `compute_benchmark_metrics`; a `RunScores` without `out_dir`.
        MissingExtraError: figures asked for without matplotlib (the ``bench`` extra).
    """
    if isinstance(run, RunScores):
        if out_dir is None:
            from binaryeval_dspy.errors import InputError

            raise InputError("no output directory for the report", field="out_dir", fix="pass `out_dir`.")
        scores: RunScores | None = run
        metrics = compute_benchmark_metrics(run, n_resamples=n_resamples, seed=seed, figures=figures)
    else:
        run = run if isinstance(run, BenchmarkRun) else BenchmarkRun(run)
        scores = None
        metrics = compute_benchmark_metrics(run, n_resamples=n_resamples, seed=seed, figures=figures,
                                            constant_predictions=constant_predictions)
    target = Path(out_dir) if out_dir is not None else run.path  # type: ignore[union-attr]
    report = render_benchmark_report(metrics)
    md_path, html_path = _write_rendered(report, target)
    metrics.save(target / METRICS_FILE)
    if scores is not None and scores.prediction_sets:
        (target / MISSING_FILE).write_text(json.dumps(missing_predictions_record(scores), indent=2,
                                                      ensure_ascii=False) + "\n", encoding="utf-8")
    return md_path, html_path, report


def rerender_from_metrics(report_dir: str | Path, *, out_dir: str | Path | None = None
                          ) -> tuple[Path, Path, BenchmarkReport]:
    """Rebuild ``report.md``, ``report.html`` and ``figures/*.png`` from ``metrics.json``
    alone: no run file is read and no number is recomputed, so the text is the one the
    metrics were computed with (same bootstrap resamples, seed and policy).

    Args:
        report_dir: the directory holding ``metrics.json`` (a run or an agreement report).
        out_dir: where to write (default: `report_dir`).

    Returns:
        (report.md path, report.html path, the `BenchmarkReport`).

    Raises:
        InputError: no readable ``metrics.json``, or one without a report document
            (`BenchmarkMetrics.load`).
        MissingExtraError: the report has figures and matplotlib is missing.
    """
    metrics = BenchmarkMetrics.load(Path(report_dir) / METRICS_FILE)
    report = render_benchmark_report(metrics)
    md_path, html_path = _write_rendered(report, Path(out_dir) if out_dir is not None else Path(report_dir))
    return md_path, html_path, report

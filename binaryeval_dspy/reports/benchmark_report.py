"""The meta-evaluation report of a benchmark run: the paper's tables and figures for any LM.

`build_benchmark_report` reads a run directory (no LM call, no data folder) and
computes, per method and dimension, the correlation with the human scores at the
benchmark's protocol level (Table 1: summary-level rho / tau on SummEval; Table 7:
turn-level rho / tau on Topical-Chat; Table 8: pooled r / rho / tau on QAGS), plus
Pearson's r, pooled and system-level correlations, bootstrap 95% intervals, paired
bootstrap tests of BinEval against each baseline, the question analysis of section
5.6, the cost of each method, where each score came from (log-probabilities or the
plain-answer fallback, counted per method) and the figures. When BinEval's results carry
soft scores (mean P(yes) per dimension), a "BinEval, P(yes)" row is added to every
table, computed from those scores exactly as BinEval's row is from its yes-rates. `write_benchmark_report` writes
``report.md`` (figures as PNG files), a self-contained ``report.html`` (figures
embedded as base64 PNG) and ``metrics.json``.

The same builder makes the report of ``bineval agreement``: a `RunScores` whose
``prediction_sets`` hold a user's prediction files (any numeric scale; built by
`binaryeval_dspy.meta_eval.agreement.load_agreement_scores`) gets one row per set in
every table, labelled with the set's name and file, each row with its items used /
total; paired tests compare the sets with each other and with our methods (when a run
was given); items without a prediction and unknown ids are counted and listed.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from binaryeval_dspy.analysis.question_analysis import analyze_questions
from binaryeval_dspy.lm.pricing import format_usd, price_model_for_name, run_cost
from binaryeval_dspy.meta_eval.benchmark_run import BenchmarkRun
from binaryeval_dspy.meta_eval.run_scores import (
    ALL_METHOD_TITLES,
    DERIVED_METHODS,
    P_YES_METHOD,
    RunScores,
    load_run_scores,
)
from binaryeval_dspy.metrics.bootstrap import correlation_ci, paired_bootstrap_test
from binaryeval_dspy.metrics.correlation import (
    DEFAULT_CONSTANT_PREDICTIONS,
    ConstantPredictions,
    Method,
    pooled_correlation,
    summary_level_correlation,
    system_level_correlation,
)
from binaryeval_dspy.reports.figures import (
    Panel,
    figure_png,
    phi_heatmap_figure,
    scatter_figure,
    system_figure,
    violin_figure,
)

LEVEL_TITLES = {"summary": "Summary-level", "turn": "Turn-level", "pooled": "Pooled (dataset-level)",
                "system": "System-level"}
SYMBOLS = {"spearman": "ρ", "kendall": "τ", "pearson": "r"}


@dataclass
class ReportTable:
    """A table of the report: caption, header row, body rows (strings) and a note."""

    caption: str
    header: list[str]
    rows: list[list[str]]
    note: str = ""


@dataclass
class ReportFigure:
    """A figure of the report as PNG bytes with its caption and file name."""

    caption: str
    png: bytes
    filename: str


_STYLE = (
    "<style>body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;"
    "color:#222}table{border-collapse:collapse;margin:.5em 0 1.2em}th,td{border:1px solid #ccc;"
    "padding:3px 8px;font-size:13px}td{text-align:right}td:first-child,th:first-child{text-align:left}"
    "th{background:#f3f3f3}caption{caption-side:top;text-align:left;font-weight:600;padding:4px 0}"
    "img{max-width:100%}.note{font-size:12px;color:#555}figure{margin:1em 0}</style>"
)


@dataclass
class BenchmarkReport:
    """The whole report: a title, intro paragraphs and sections of text, tables and figures.

    Attributes:
        title: names the benchmark, the number of items and the LM.
        intro: paragraphs under the title.
        sections: (heading, blocks) where a block is a str, `ReportTable` or `ReportFigure`.
        metrics: the numbers behind the tables (written as ``metrics.json``).
    """

    title: str
    intro: list[str] = field(default_factory=list)
    sections: list[tuple[str, list[Any]]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)

    def figures(self) -> list[ReportFigure]:
        """Every figure, in order."""
        return [b for _, blocks in self.sections for b in blocks if isinstance(b, ReportFigure)]

    def to_markdown(self, figures_dir: str = "figures") -> str:
        """The report as Markdown; figures are linked as ``<figures_dir>/<file>``."""
        lines = [f"# {self.title}", ""]
        for paragraph in self.intro:
            lines += [paragraph, ""]
        for heading, blocks in self.sections:
            lines += [f"## {heading}", ""]
            for block in blocks:
                if isinstance(block, ReportTable):
                    aligns = ["---:" if _numeric_column(block.rows, i) else "---" for i in range(len(block.header))]
                    lines += [f"**{block.caption}**", "", "| " + " | ".join(block.header) + " |",
                              "|" + "|".join(aligns) + "|"]
                    lines += ["| " + " | ".join(row) + " |" for row in block.rows]
                    lines.append("")
                    if block.note:
                        lines += [block.note, ""]
                elif isinstance(block, ReportFigure):
                    lines += [f"![{block.caption}]({figures_dir}/{block.filename})", "", f"*{block.caption}*", ""]
                else:
                    lines += [str(block), ""]
        return "\n".join(lines).rstrip() + "\n"

    def to_html(self) -> str:
        """The report as one self-contained HTML page (inline CSS, base64 PNG figures)."""
        esc = html.escape
        parts = [
            "<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>",
            f"<title>{esc(self.title)}</title>",
            _STYLE,
            "</head><body>", f"<h1>{esc(self.title)}</h1>",
        ]
        parts += [f"<p>{esc(p)}</p>" for p in self.intro]
        for heading, blocks in self.sections:
            parts.append(f"<h2>{esc(heading)}</h2>")
            for block in blocks:
                if isinstance(block, ReportTable):
                    parts.append(f"<table><caption>{esc(block.caption)}</caption><tr>"
                                 + "".join(f"<th>{esc(h)}</th>" for h in block.header) + "</tr>")
                    parts += ["<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in block.rows]
                    parts.append("</table>")
                    if block.note:
                        parts.append(f"<p class='note'>{esc(block.note)}</p>")
                elif isinstance(block, ReportFigure):
                    data = base64.b64encode(block.png).decode("ascii")
                    parts.append(f"<figure><img alt='{esc(block.caption)}' src='data:image/png;base64,{data}'>"
                                 f"<figcaption class='note'>{esc(block.caption)}</figcaption></figure>")
                else:
                    parts.append(f"<p>{esc(str(block))}</p>")
        parts.append("</body></html>")
        return "\n".join(parts) + "\n"


def _numeric_column(rows: list[list[str]], index: int) -> bool:
    """True when every cell of a column starts like a number (or is n/a): right-align it."""
    cells = [row[index] for row in rows if index < len(row)]
    return bool(cells) and index > 0 and all(
        c[:1].isdigit() or c[:1] in "-+." or c.startswith("n/a") or c == "" for c in cells)


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}"


def _fmt_p(p_value: float | None, n_resamples: int) -> str:
    """A bootstrap p-value; below the resolution 1/n_resamples it reads ``p<1/n``."""
    if p_value is None or (isinstance(p_value, float) and math.isnan(p_value)):
        return "p=n/a"
    floor = 1.0 / n_resamples
    return f"p<{floor:g}" if p_value < floor else f"p={p_value:.3f}"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def _mean(values: Sequence[float]) -> tuple[float, bool]:
    """Mean over defined values, and whether some were undefined."""
    arr = np.array(values, dtype=float)
    finite = arr[np.isfinite(arr)]
    return (float(finite.mean()) if len(finite) else math.nan), bool(len(finite) < len(arr))


class _Calculator:
    """Correlations of one run at one level, with memoization of the common cases."""

    def __init__(self, scores: RunScores) -> None:
        self.s = scores

    def subset(self, split: str) -> pd.DataFrame:
        items = self.s.items
        return items[items["split"] == split] if split in set(items["split"]) else items

    def vectors(self, method: str, dimension: str, split: str) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
        sub = self.subset(split)
        human = sub[dimension].to_numpy(dtype=float)
        predicted = self.s.scores[method].loc[sub.index, dimension].to_numpy(dtype=float)
        return human, predicted, sub

    def value(self, method: str, dimension: str, split: str, level: str, corr: Method) -> tuple[float, dict]:
        human, predicted, sub = self.vectors(method, dimension, split)
        n_scored = int(np.isfinite(predicted).sum())
        info: dict[str, Any] = {"items_scored": n_scored, "items": len(sub)}
        if level == "summary":
            result = summary_level_correlation(human, predicted, list(sub["doc_id"]), corr,
                                               constant_predictions=self.s.constant_predictions)
            info.update(groups_used=result.groups_used, groups_skipped=result.groups_skipped,
                        groups_constant_prediction=result.groups_constant_prediction,
                        groups_constant_human=result.groups_constant_human,
                        constant_predictions=result.constant_predictions)
            return result.value, info
        if level == "system":
            result = system_level_correlation(human, predicted, list(sub["system_id"]), corr)
        else:
            result = pooled_correlation(human, predicted, corr)
        info.update(note=result.note, pairs=result.n)
        return result.value, info


METHOD_DEFINITIONS = {
    "bineval": "BinEval = yes-rate over many binary questions per dimension (paper 3.2)",
    "geval": "G-Eval-style = one holistic integer score per dimension from criteria and evaluation steps, "
             "probability-weighted when the LM returns log-probabilities",
    P_YES_METHOD: "BinEval, P(yes) = the same binary answers scored by the mean P(yes) over a dimension's "
                  "questions, read from the log-probabilities of BinEval's own calls",
    "unieval": "UniEval-style = one yes/no question per dimension scored by P(yes)",
    "rouge": "ROUGE-L = F-measure against the reference (no LM)",
}
FEW_UNITS = 10  # fewer resampling units than this: the report warns that intervals are unreliable
CONSTANT_MARK = " †"
CONSTANT_NOTE = ("† = the method gave the same score to every item (of every document, at summary level): it "
                 "ranks nothing. A constant score has no defined correlation: pooled, turn- and system-level "
                 "values are n/a, and at summary level such documents are skipped or counted as 0 "
                 "according to the constant-predictions policy.")


def constant_policy_note(scores: RunScores, metrics: dict) -> str:
    """The report's statement of the summary-level constant-predictions policy and its counts.

    E.g. ``Summary level, constant predictions: policy 'skip' - a document whose method
    scores are all equal is left out of that method's average, as G-Eval's and UniEval's
    meta-evaluation scripts do ... Documents skipped, summed over dimensions: BinEval 0,
    UniEval-style 12.`` Counts are read from `metrics` (filled by the main table).
    """
    policy = scores.constant_predictions
    rule = ("left out of that method's average, as G-Eval's and UniEval's meta-evaluation scripts do "
            "(--constant-predictions zero counts it as 0 instead)" if policy == "skip" else
            "counted as ρ = τ = 0 in that method's average (G-Eval's and UniEval's scripts skip it instead: "
            "--constant-predictions skip)")
    text = (f"Summary level, constant predictions: policy '{policy}' - a document whose method scores are all "
            f"equal while its human scores vary is {rule}; a document whose human scores are all equal is left "
            "out for every method under either policy.")
    if scores.spec.level != "summary":
        return text
    def count(method: str, dimension: str, key: str) -> int:
        return int(metrics.get(method, {}).get(dimension, {}).get(key) or 0)

    dims = scores.spec.dimensions
    counts = [f"{_method_label(m)} {sum(count(m, d, 'groups_constant_prediction') for d in dims)}"
              for m in scores.methods]
    human = max((count(m, d, "groups_constant_human") for m in scores.methods for d in dims), default=0)
    verb = "skipped" if policy == "skip" else "counted as 0"
    if counts:
        text += f" Documents {verb} this way, summed over dimensions: {', '.join(counts)}"
        text += f"; documents with constant human scores: up to {human} per dimension." if human else "."
    return text


def _constant_mark(info: dict) -> str:
    """" †" when a cell's value comes only from constant method scores (every document
    with varying human scores had constant method scores, or a pooled vector was constant)."""
    if info.get("note") == "constant predictions":
        return CONSTANT_MARK
    constant = info.get("groups_constant_prediction") or 0
    counted = (info.get("groups_used") or 0) + (constant if info.get("constant_predictions") == "skip" else 0)
    if constant and constant == counted:
        return CONSTANT_MARK
    return ""


def _method_label(method: str) -> str:
    return ALL_METHOD_TITLES.get(method, method)


def report_lm_label(scores: RunScores) -> str:
    """What the report's captions name after "LM:": the run's LM, and the prediction files.

    E.g. ``gpt-4o-mini``, ``none (prediction files: mine, unieval-published)`` or
    ``gpt-4o-mini (our methods); prediction files: mine``.
    """
    if not scores.prediction_sets:
        return scores.config.lm
    names = ", ".join(scores.prediction_sets)
    if not scores.from_run:
        return f"none (prediction files: {names})"
    return f"{scores.config.lm} (our methods); prediction files: {names}"


def _source_cell(scores: RunScores, method: str) -> str:
    """Where a row's scores come from: ``file <name>`` or ``LM: <name>`` (ROUGE-L: no LM)."""
    if method in scores.prediction_sets:
        return f"file {scores.prediction_sets[method].path.name}"
    if method == "rouge":
        return "no LM (rouge-score)"
    return f"LM: {scores.config.lm}"


def coverage_cell(counts: dict[str, int], total: int) -> str:
    """``"12/16"`` when every column used as many items, else ``"coherence 12/16, fluency 16/16"``."""
    if not counts:
        return f"0/{total}"
    if len(set(counts.values())) == 1:
        return f"{next(iter(counts.values()))}/{total}"
    return ", ".join(f"{k} {n}/{total}" for k, n in counts.items())


def _main_table_dimensions(calc: _Calculator, scores: RunScores, lm: str, metrics: dict) -> ReportTable:
    spec = scores.spec
    level = spec.level
    sourced = bool(scores.prediction_sets)
    header = ["Method", *(["source"] if sourced else []), *[d.capitalize() for d in spec.dimensions], "Average",
              "items used / total"]
    rows = []
    for method in scores.methods:
        row = [_method_label(method), *([_source_cell(scores, method)] if sourced else [])]
        rhos, taus = [], []
        used: dict[str, int] = {}
        for d in spec.dimensions:
            rho, info = calc.value(method, d, "", level, "spearman")
            tau, _ = calc.value(method, d, "", level, "kendall")
            rhos.append(rho)
            taus.append(tau)
            used[d] = info["items_scored"]
            metrics.setdefault(method, {})[d] = {"spearman": rho, "kendall": tau, **info}
            row.append(f"{_fmt(rho)} / {_fmt(tau)}" + _constant_mark(info))
        mean_rho, partial_rho = _mean(rhos)
        mean_tau, _ = _mean(taus)
        metrics[method]["average"] = {"spearman": mean_rho, "kendall": mean_tau}
        metrics[method]["source"] = _source_cell(scores, method)
        row.append(f"{_fmt(mean_rho)} / {_fmt(mean_tau)}" + (" *" if partial_rho else ""))
        row.append(coverage_cell(used, len(scores.items)))
        rows.append(row)
    n_items = len(scores.items)
    n_docs = scores.items["doc_id"].nunique()
    return ReportTable(
        caption=f"{LEVEL_TITLES[level]} Spearman ρ / Kendall τ on {spec.title} ({_plural(n_items, 'item')}, "
                f"{_plural(n_docs, 'document' if level == 'summary' else 'context')}) - LM: {lm}"
                + (f" (layout of the paper's {spec.paper_table})" if spec.paper_table else ""),
        header=header, rows=rows,
        note="Average = mean of the dimension columns (* = some dimension undefined, averaged over the rest). "
             "n/a = undefined (e.g. constant human scores, too few items). items used / total = items with a "
             "score (per dimension when they differ) / items of the report; the others are left out, never "
             "counted as 0. " + CONSTANT_NOTE + " "
             + constant_policy_note(scores, metrics)
             + (" ROUGE-L uses no LM." if "rouge" in scores.methods or not scores.prediction_sets else ""),
    )


def _main_table_splits(calc: _Calculator, scores: RunScores, lm: str, metrics: dict) -> ReportTable:
    spec = scores.spec
    dim = spec.dimensions[0]
    sourced = bool(scores.prediction_sets)
    header = ["Method", *(["source"] if sourced else [])]
    titles = [spec.split_title(s) for s in spec.splits] + (["Average"] if len(spec.splits) > 1 else [])
    for title in titles:
        header += [f"{title} r", f"{title} ρ", f"{title} τ"]
    header.append("items used / total")
    rows = []
    for method in scores.methods:
        row = [_method_label(method), *([_source_cell(scores, method)] if sourced else [])]
        per_corr: dict[str, list[float]] = {"pearson": [], "spearman": [], "kendall": []}
        used: dict[str, str] = {}
        for split in spec.splits:
            entry: dict[str, Any] = {}
            for corr in ("pearson", "spearman", "kendall"):
                value, info = calc.value(method, dim, split, "pooled", corr)  # type: ignore[arg-type]
                per_corr[corr].append(value)
                entry[corr] = value
                entry.update(info)
                row.append(_fmt(value) + _constant_mark(info))
            metrics.setdefault(method, {})[split or spec.name] = entry
            used[spec.split_title(split)] = f"{entry['items_scored']}/{entry['items']}"
        metrics[method]["source"] = _source_cell(scores, method)
        if len(spec.splits) > 1:
            avg = {c: _mean(v)[0] for c, v in per_corr.items()}
            metrics[method]["average"] = avg
            row += [_fmt(avg["pearson"]), _fmt(avg["spearman"]), _fmt(avg["kendall"])]
        row.append(", ".join(f"{k} {v}" for k, v in used.items()) if len(used) > 1 else next(iter(used.values())))
        rows.append(row)
    counts = ", ".join(f"{spec.split_title(s)} {len(calc.subset(s))}" for s in spec.splits)
    return ReportTable(
        caption=f"Pearson r / Spearman ρ / Kendall τ with human consistency on {spec.title} ({counts} items) "
                f"- LM: {lm}" + (f" (layout of the paper's {spec.paper_table})" if spec.paper_table else ""),
        header=header, rows=rows,
        note="Correlations are pooled over the items of each split; Average = mean of the splits. items used / "
             "total = items with a score / items of the split (the others are left out, never counted as 0). "
             + CONSTANT_NOTE,
    )


def _other_levels_table(calc: _Calculator, scores: RunScores, lm: str, metrics: dict) -> ReportTable | None:
    spec = scores.spec
    if spec.layout != "dimensions":
        return None
    levels = [lv for lv in ("summary", "pooled", "system") if lv != spec.level]
    if spec.level == "turn":
        levels = ["summary", "system"]  # per-context averaging, and per system
    n_systems = scores.items["system_id"].nunique()
    if n_systems < 3:
        levels = [lv for lv in levels if lv != "system"]
    if not (scores.items.groupby("doc_id").size() >= 2).any():  # every item its own document: nothing to rank
        levels = [lv for lv in levels if lv != "summary"]
    header = ["Method", "Dimension", f"{LEVEL_TITLES[spec.level]} Pearson r"]
    header += [f"{LEVEL_TITLES[lv] if lv != 'summary' or spec.level != 'turn' else 'Per-context'} ρ" for lv in levels]
    header.append("items used / total")
    rows = []
    for method in scores.methods:
        for d in spec.dimensions:
            r, info = calc.value(method, d, "", spec.level, "pearson")
            metrics[method][d]["pearson"] = r
            row = [_method_label(method), d, _fmt(r)]
            for lv in levels:
                value, _ = calc.value(method, d, "", lv, "spearman")
                metrics[method][d][f"{lv}_spearman"] = value
                row.append(_fmt(value))
            row.append(f"{info['items_scored']}/{info['items']}")
            rows.append(row)
    note = (f"System-level correlations use {n_systems} systems (means over the sampled items)." if "system" in levels
            else f"No system-level column: the sample has {_plural(n_systems, 'system')}, and it needs at least 3.")
    return ReportTable(caption=f"Pearson r and Spearman ρ at other levels - LM: {lm}", header=header, rows=rows,
                       note=note)


def _panels_dims(scores: RunScores, split: str = "") -> list[Panel]:
    spec = scores.spec
    sub = scores.items if not split else scores.items[scores.items["split"] == split]
    panels = []
    for d in spec.dimensions:
        methods = {_method_label(m): scores.on_human_scale(m, d).loc[sub.index].to_numpy(dtype=float)
                   for m in scores.methods}
        title = d if not split else spec.split_title(split)
        panels.append(Panel(title=title, human=sub[d].to_numpy(dtype=float), methods=methods,
                            scale=spec.scales[d]))
    return panels


def _panels(scores: RunScores) -> list[Panel]:
    spec = scores.spec
    if spec.layout == "splits":
        return [p for split in spec.splits for p in _panels_dims(scores, split)]
    return _panels_dims(scores)


def _system_means(scores: RunScores) -> tuple[list[str], list[float], dict[str, list[float]], str]:
    items = scores.items
    systems, averages, ylabel = _system_frame(scores)
    means = {label: [float(series[items["system_id"] == s].mean()) for s in systems]
             for label, series in averages.items()}
    human = means.pop("Human")
    return [str(s) for s in systems], human, means, ylabel


def _ci_and_tests(calc: _Calculator, scores: RunScores, lm: str, n_resamples: int, seed: int,
                  metrics: dict) -> list[ReportTable]:
    spec = scores.spec
    level = spec.level
    splits = [s for s in spec.splits]
    columns = [(s, d) for s in splits for d in spec.dimensions]

    def label(split: str, dim: str) -> str:
        if spec.layout == "splits":
            return spec.split_title(split)
        return dim.capitalize()

    def inputs(method: str, split: str, dim: str, mask: np.ndarray | None = None):
        human, predicted, sub = calc.vectors(method, dim, split)
        if mask is not None:
            predicted = np.where(mask, predicted, np.nan)
        return human, predicted, list(sub["doc_id"]), list(sub["system_id"])

    ci_rows = []
    for method in scores.methods:
        row = [_method_label(method)]
        h_rows, p_rows = [], []
        used: dict[str, int] = {}
        for split, dim in columns:
            human, predicted, groups, systems = inputs(method, split, dim)
            used[label(split, dim)] = int(np.isfinite(predicted).sum())
            ci = correlation_ci(human, predicted, level=level, method="spearman", groups=groups, systems=systems,
                                n_resamples=n_resamples, seed=seed, constant_predictions=scores.constant_predictions)
            metrics[method].setdefault("ci95_spearman", {})[label(split, dim)] = [ci.low, ci.high]
            row.append(f"{_fmt(ci.estimate)} [{_fmt(ci.low)}, {_fmt(ci.high)}]")
            h_rows.append(human)
            p_rows.append(predicted)
        if len(columns) > 1 and spec.layout == "dimensions":
            ci = correlation_ci(h_rows, p_rows, level=level, method="spearman", groups=groups, systems=systems,
                                n_resamples=n_resamples, seed=seed, constant_predictions=scores.constant_predictions)
            metrics[method]["ci95_spearman"]["Average"] = [ci.low, ci.high]
            row.append(f"{_fmt(ci.estimate)} [{_fmt(ci.low)}, {_fmt(ci.high)}]")
        row.append(coverage_cell(used, len(scores.items)) if spec.layout == "dimensions" else ", ".join(
            f"{k} {n}/{len(calc.subset(s))}" for (k, n), s in zip(used.items(), splits)))
        ci_rows.append(row)
    header = ["Method", *[label(s, d) for s, d in columns]]
    if len(columns) > 1 and spec.layout == "dimensions":
        header.append("Average")
    ci_header = [*header, "items used / total"]
    unit = "documents" if level == "summary" else "items"
    n_units = scores.items["doc_id"].nunique() if level == "summary" else len(scores.items)
    few = (f"Only {_plural(n_units, unit[:-1])} to resample: intervals and p-values from so few are not "
           f"reliable; use {'more items' if scores.prediction_sets else 'a larger --limit'}."
           if n_units < FEW_UNITS else "")
    tables = [ReportTable(
        caption=f"Spearman ρ with bootstrap 95% intervals ({n_resamples} resamples of {unit}, seed {seed}) - LM: {lm}",
        header=ci_header, rows=ci_rows, note=few)]
    pairs = paired_comparisons(scores)
    if not pairs:
        return tables
    test_rows = []
    for first, other in pairs:
        h_rows, a_rows, b_rows = [], [], []
        cells, both_used = [], {}
        for split, dim in columns:
            _, a, _, _ = inputs(first, split, dim)
            _, b, _, _ = inputs(other, split, dim)
            both = np.isfinite(a) & np.isfinite(b)
            both_used[label(split, dim)] = int(both.sum())
            human, a, groups, systems = inputs(first, split, dim, both)
            _, b, _, _ = inputs(other, split, dim, both)
            test = paired_bootstrap_test(human, a, b, level=level, method="spearman", groups=groups,
                                         systems=systems, n_resamples=n_resamples, seed=seed,
                                         constant_predictions=scores.constant_predictions)
            metrics[first].setdefault("paired_vs", {}).setdefault(other, {})[label(split, dim)] = {
                "delta": test.delta, "ci95": [test.low, test.high], "p_value": test.p_value,
                "items_used": int(both.sum()), "items": len(both)}
            cells.append(f"{_fmt(test.delta, 3)} [{_fmt(test.low)}, {_fmt(test.high)}] {_fmt_p(test.p_value, n_resamples)}")
            h_rows.append(human)
            a_rows.append(a)
            b_rows.append(b)
        if len(columns) > 1 and spec.layout == "dimensions":
            test = paired_bootstrap_test(h_rows, a_rows, b_rows, level=level, method="spearman", groups=groups,
                                         systems=systems, n_resamples=n_resamples, seed=seed,
                                         constant_predictions=scores.constant_predictions)
            metrics[first]["paired_vs"][other]["Average"] = {
                "delta": test.delta, "ci95": [test.low, test.high], "p_value": test.p_value}
            cells.append(f"{_fmt(test.delta, 3)} [{_fmt(test.low)}, {_fmt(test.high)}] {_fmt_p(test.p_value, n_resamples)}")
        n_label = (coverage_cell(both_used, len(scores.items)) if spec.layout == "dimensions" else ", ".join(
            f"{k} {n}/{len(calc.subset(s))}" for (k, n), s in zip(both_used.items(), splits)))
        test_rows.append([f"{_method_label(first)} vs {_method_label(other)} (items with both: {n_label})", *cells])
    if scores.prediction_sets:
        what = ("between the prediction sets" if not scores.run_methods else
                "of each prediction set against the other sets and our methods")
        caption = (f"Paired bootstrap tests {what}: Δρ = ρ(A) - ρ(B) for row 'A vs B', 95% interval and "
                   f"two-sided p ({n_resamples} resamples) - LM: {lm}")
    else:
        caption = (f"Paired bootstrap test of BinEval against each baseline: Δρ = ρ(BinEval) - ρ(baseline), "
                   f"95% interval and two-sided p ({n_resamples} resamples) - LM: {lm}")
    tables.append(ReportTable(
        caption=caption,
        header=header, rows=test_rows,
        note="Both methods are compared on the items where both have a score (counted in each row's label); "
             "the same resampled units are used for both in every resample. "
             + ("A document where one method's scores are constant is left out of that method's mean (policy "
                "'skip'), so the two means may cover different documents." if scores.constant_predictions == "skip"
                else "A constant method (†) counts as ρ = 0 (policy 'zero'), so it can 'beat' a baseline whose ρ "
                     "is negative without ranking anything.") + (f" {few}" if few else "")))
    return tables


def paired_comparisons(scores: RunScores) -> list[tuple[str, str]]:
    """The (A, B) pairs the report tests, A's ρ minus B's.

    With prediction sets: every pair of sets (in the order given), then every set
    against each of our methods (when a run was given). Without: BinEval against each
    other method of the run (none when BinEval has not run).
    """
    names = list(scores.prediction_sets)
    if names:
        pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
        return pairs + [(a, m) for a in names for m in scores.run_methods]
    if "bineval" not in scores.methods:
        return []
    return [("bineval", m) for m in scores.methods if m != "bineval"]


def _diagnostics_table(calc: _Calculator, scores: RunScores, metrics: dict) -> ReportTable:
    spec = scores.spec
    rows = []
    for method in scores.methods:
        for split in spec.splits:
            for d in spec.dimensions:
                _, _, sub = calc.vectors(method, d, split)
                normalized = scores.normalized(method, d).loc[sub.index].to_numpy(dtype=float)
                finite = normalized[np.isfinite(normalized)]
                _, info = calc.value(method, d, split, spec.level, "spearman")
                where = spec.split_title(split) if spec.layout == "splits" else d
                rows.append([
                    _method_label(method), where, f"{info['items_scored']}/{len(sub)}",
                    str(scores.unparsed.get(method, {}).get(d, 0)),
                    str(len(np.unique(finite))) if len(finite) else "0",
                    _fmt(float(np.std(finite)) if len(finite) else math.nan, 3),
                    str(info.get("groups_skipped", "-")), str(info.get("groups_constant_prediction", "-")),
                    info.get("note") or "",
                ])
    return ReportTable(
        caption="Coverage and degenerate cases",
        header=["Method", "Dimension / split", "items scored",
                "unparsed or error" + (" / missing value" if scores.prediction_sets else ""), "distinct scores",
                "std [0,1]" + (" (files: min-max)" if scores.prediction_sets else ""),
                "groups skipped (constant human)",
                "groups with constant method score ("
                + ("skipped" if scores.constant_predictions == "skip" else "counted as 0") + ")", "note"],
        rows=rows,
        note=("Unparsed answers and failed LM calls are left out of every correlation, never counted as a low "
              "score." + (" For a prediction file, 'missing value' counts rows with a null, NaN or empty score; "
                          "items without a row are counted in the prediction-file table; the std of a file's "
                          "scores is taken after min-max rescaling of its observed values to [0, 1]."
                          if scores.prediction_sets else "")))


def _cost_table(scores: RunScores, lm: str, metrics: dict) -> ReportTable:
    rows = []
    derived = [m for m in scores.run_methods if m in DERIVED_METHODS]
    price_model = price_model_for_name(scores.config.lm)
    prices = run_cost(prompt_tokens=0, completion_tokens=0, model=price_model)  # status, table and source
    for method in [m for m in scores.run_methods if m not in DERIVED_METHODS]:
        c = scores.costs[method]
        cost = run_cost(prompt_tokens=c.prompt_tokens, completion_tokens=c.completion_tokens,
                        cached_prompt_tokens=c.cached_prompt_tokens, items=c.items, model=price_model)
        metrics.setdefault("cost", {})[method] = {
            "items": c.items, "lm_calls": c.lm_calls, "prompt_tokens": c.prompt_tokens,
            "completion_tokens": c.completion_tokens, "cached_prompt_tokens": c.cached_prompt_tokens,
            "seconds": c.seconds, "tokens_per_item": c.tokens_per_item, "seconds_per_item": c.seconds_per_item,
            "items_incomplete": c.incomplete, "items_empty_output": c.empty_output, "items_error": c.errors,
            "estimated_usd": cost.usd if c.lm_calls else 0.0,
            "estimated_usd_per_item": cost.usd_per_item if c.lm_calls else 0.0,
            "cost_status": cost.status if c.lm_calls else "no LM calls", "price_model": cost.model,
            "price_source": cost.source}
        if not c.lm_calls:
            usd = per_item = "0 (no LM call)"
        elif cost.status == "priced":
            usd = format_usd(cost.usd or 0.0)
            per_item = format_usd(cost.usd_per_item) if cost.usd_per_item is not None else "n/a"
        else:
            usd = per_item = cost.display
        rows.append([_method_label(method), str(c.items), str(c.incomplete), str(c.empty_output), str(c.errors),
                     str(c.lm_calls),
                     _fmt(c.calls_per_item, 1), str(c.prompt_tokens), str(c.cached_prompt_tokens),
                     str(c.completion_tokens), _fmt(c.tokens_per_item, 0), usd, per_item,
                     _fmt(c.seconds_per_item, 2), _fmt(c.seconds / 60, 1)])
    if prices.status == "priced":
        price_note = (f" Estimated cost in USD at {prices.price_key}'s prices (input, cached input and output "
                      f"tokens priced apart), {prices.source}.")
    elif prices.status == "local":
        price_note = " Estimated cost 0 (local): the embedded model runs on this machine; no per-token bill."
    else:
        price_note = f" Estimated cost unknown: {prices.source}" + (f" ({prices.note})" if prices.note else "") + "."
    return ReportTable(
        caption=f"Cost per method - LM: {lm}",
        header=["Method", "items", "incomplete", "empty output", "error", "LM calls", "calls / item", "prompt tokens",
                "of them cached", "completion tokens", "tokens / item", "est. cost USD", "USD / item",
                "wall s / item", "wall min total"],
        rows=rows,
        note="Tokens as reported by the LM for calls that reached it (answers from DSPy's cache cost 0; "
             "'cached' = served from the provider's prompt cache); wall time summed over items, measured on "
             "the machine that ran them." + price_note + " 'incomplete' = items stored with failed LM calls (their "
             "scores use "
             "the questions answered; rerun the benchmark to ask the rest). 'empty output' = items whose output "
             "is empty or only invisible characters (no LM call, no score); 'error' = items that could not be "
             "judged (no score; rerun to retry). Neither is ever counted as a low score."
             + "".join(f" {_method_label(m)} is read from {_method_label(DERIVED_METHODS[m])}'s calls: no cost "
                       "of its own." for m in derived)
             + (f" Prediction files ({', '.join(scores.prediction_sets)}) carry no cost records: not in this table."
                if scores.prediction_sets else ""))


def score_source_lines(scores: RunScores) -> list[tuple[str, str]]:
    """(method title, measured line) for each method that reads log-probabilities.

    E.g. ``("G-Eval-style", "95 / 100 scores from log-probabilities; 5 fell back to the
    plain answer (no logprobs returned: 5)")``; methods that have not run are left out.
    """
    return [(_method_label(m), scores.score_sources[m].summary()) for m in scores.methods
            if m in scores.score_sources]


def _score_source_table(scores: RunScores, lm: str, metrics: dict) -> ReportTable | None:
    rows = []
    for method in scores.methods:
        src = scores.score_sources.get(method)
        if src is None:
            continue
        metrics.setdefault("score_sources", {})[method] = {
            "unit": src.unit, "logprobs": src.logprobs, "fallback": src.fallback, "unscored": src.unscored,
            "total": src.total, "reasons": dict(src.reasons), "out_of_range": getattr(src, "out_of_range", 0)}
        reasons = "; ".join(f"{r}: {n}" for r, n in sorted(src.reasons.items(), key=lambda x: -x[1]))
        if getattr(src, "out_of_range", 0):  # off-scale answers: no score, and not unparsed either
            reasons = "; ".join(filter(None, [reasons, f"out of range (no score): {src.out_of_range}"]))
        rows.append([_method_label(method), src.unit, f"{src.logprobs} / {src.total}", str(src.fallback),
                     str(src.unscored), reasons])
    if not rows:
        return None
    return ReportTable(
        caption=f"Where the scores came from: log-probabilities or the plain answer - LM: {lm}",
        header=["Method", "counted", "from log-probabilities", "fell back to the plain answer",
                "unscored / left out", "reasons"],
        rows=rows,
        note="G-Eval-style scores are the probability-weighted mean over the scale (Liu et al., 2023) and "
             "UniEval-style scores P(yes) (Zhong et al., 2022) only when the LM returned token "
             "log-probabilities at the answer's position; otherwise the plain integer or 1/0 answer was "
             "used (fell back), or, with --logprobs on, no score was given (unscored). "
             "For BinEval, P(yes), parsed verdicts without a P(yes) are left out of its means. "
             "Unparsed answers are not counted here (see the coverage table); answers off the rubric's scale "
             "are counted apart as 'out of range (no score)'.")


def _means_table(scores: RunScores, lm: str) -> ReportTable:
    spec = scores.spec
    rows = []
    cols = [(s, d) for s in spec.splits for d in spec.dimensions]

    def where(s: str, d: str) -> str:
        return spec.split_title(s) if spec.layout == "splits" else d

    items = scores.items
    human_row = ["Human"]
    for s, d in cols:
        sub = items[items["split"] == s] if s else items
        human_row.append(mean_with_coverage(sub[d].to_numpy(dtype=float)))
    rows.append(human_row)
    for m in scores.methods:
        own = m in scores.prediction_sets
        row = [_method_label(m) + (" (own scale)" if own else "")]
        for s, d in cols:
            sub = items[items["split"] == s] if s else items
            values = scores.scores[m][d] if own else scores.on_human_scale(m, d)
            row.append(mean_with_coverage(values.reindex(items.index).loc[sub.index].to_numpy(dtype=float)))
        rows.append(row)
    return ReportTable(caption="Mean score on the human scale" + (" (prediction files: on their own scale)"
                                                                  if scores.prediction_sets else "") + f" - LM: {lm}",
                       header=["", *[where(s, d) for s, d in cols]], rows=rows,
                       note="Method scores in [0, 1] mapped affinely onto each dimension's human scale "
                            "(S' = S (b - a) + a); ROUGE-L is shown the same way for comparison only. "
                            "(n used / n total) = items with a score for that cell / items; items without "
                            "one (unparsed, empty output, error) are left out of the mean, never counted as 0."
                            + (" Prediction files: mean of the raw values on the file's own scale (own scale); "
                               "items without a prediction or with a missing value are left out."
                               if scores.prediction_sets else ""))


def mean_with_coverage(values: np.ndarray, digits: int = 2) -> str:
    """``"3.12 (15/16)"``: the mean over the defined values and n used / n total; ``"n/a (0/16)"``
    when no value is defined (never 0)."""
    finite = values[np.isfinite(values)]
    mean = float(finite.mean()) if len(finite) else math.nan
    return f"{_fmt(mean, digits)} ({len(finite)}/{len(values)})"


def _system_frame(scores: RunScores) -> tuple[list[str], dict[str, pd.Series], str]:
    """Per item, the mean over dimensions (human scale when all dimensions share one,
    else [0, 1]) for "Human" and each method; NaN when the item has no score at all."""
    spec = scores.spec
    items = scores.items
    scales = {spec.scales[d] for d in spec.dimensions}
    low, high = next(iter(scales)) if len(scales) == 1 else (0.0, 1.0)

    def item_average(frame: pd.DataFrame, normalized: bool) -> pd.Series:
        parts = []
        for d in spec.dimensions:
            lo, hi = spec.scales[d]
            column = frame[d].astype(float)
            parts.append(column if normalized else (column - lo) / (hi - lo))
        return pd.concat(parts, axis=1).mean(axis=1, skipna=True) * (high - low) + low

    averages = {"Human": item_average(items, normalized=False)}
    for m in scores.methods:
        frame = pd.DataFrame({d: scores.normalized(m, d) for d in spec.dimensions}, index=items.index)
        averages[_method_label(m)] = item_average(frame, normalized=True).reindex(items.index)
    unit = f"mean score over dimensions [{low:g}, {high:g}]" if len(scales) == 1 else "mean normalized score [0, 1]"
    return sorted(items["system_id"].unique(), key=str), averages, unit


def coverage_warnings(scores: RunScores) -> list[str]:
    """Warnings for means that are not over the same items (at most two lines): methods
    with a score for fewer items than the run has, and per-system means over fewer items
    than the system has (so systems are compared over different items). Empty when
    every method scored every item."""
    items = scores.items
    total = len(items)
    short = []
    for m in scores.methods:
        frame = scores.scores[m].reindex(items.index)
        used = {d: int(np.isfinite(frame[d].to_numpy(dtype=float)).sum()) for d in scores.spec.dimensions}
        if all(n == total for n in used.values()):
            continue
        counts = (f"{next(iter(used.values()))}/{total}" if len(set(used.values())) == 1
                  else ", ".join(f"{d} {n}/{total}" for d, n in used.items()))
        cost = scores.costs.get(m)
        why = [f"{n} {what}" for n, what in ((cost.empty_output if cost else 0, "empty output"),
                                            (cost.errors if cost else 0, "error")) if n]
        short.append(f"{_method_label(m)} {counts}" + (f" ({', '.join(why)})" if why else ""))
    warnings = []
    if short:
        warnings.append("not every item has a score: " + "; ".join(short) + ". Means and correlations use the "
                        "scored items only (unparsed, empty outputs, errors and missing predictions are never "
                        "counted as 0).")
    if items["system_id"].nunique() >= 2:
        systems, averages, _ = _system_frame(scores)
        uneven: dict[str, list[str]] = {}
        for label, series in averages.items():
            if label == "Human":
                continue
            for system in systems:
                values = series.to_numpy(dtype=float)[(items["system_id"] == system).to_numpy()]
                used_here = int(np.isfinite(values).sum())
                if used_here < len(values):
                    uneven.setdefault(str(system), []).append(f"{label} {used_here}/{len(values)}")
        if uneven:
            listed = [f"{system} ({', '.join(cells)})" for system, cells in list(uneven.items())[:8]]
            warnings.append("some per-system means are over fewer items than the system has: " + "; ".join(listed)
                            + ("; ..." if len(uneven) > 8 else "") + ". Those systems are compared over other "
                            "items than the rest (marked ! in the per-system table).")
    return warnings


def _system_table(scores: RunScores, lm: str, metrics: dict) -> ReportTable:
    """Per-system means of humans and each method, each with n used / n total, and a
    mark on every cell whose mean is not over all of the system's items."""
    items = scores.items
    systems, averages, unit = _system_frame(scores)
    rows = []
    flagged = False
    for system in systems:
        mask = (items["system_id"] == system).to_numpy()
        row = [str(system)]
        for label, series in averages.items():
            values = series.to_numpy(dtype=float)[mask]
            used = int(np.isfinite(values).sum())
            cell = mean_with_coverage(values)
            if used < len(values):
                cell += " !"
                flagged = True
            row.append(cell)
            metrics.setdefault("per_system", {}).setdefault(label, {})[str(system)] = {
                "mean": float(values[np.isfinite(values)].mean()) if used else None, "items_used": used,
                "items": len(values)}
        rows.append(row)
    note = ("(n used / n total) = the system's items with a score / its items. "
            + ("! = this mean is over fewer items than the system has (unparsed, empty output or error): it is "
               "not comparable with the other systems' means as it stands. " if flagged else "")
            + "Means over dimensions leave undefined scores out, never counting them as 0."
            + (" Prediction files are rescaled min-max over their observed values per dimension (to [0, 1], then "
               "to the human scale) before averaging." if scores.prediction_sets else ""))
    return ReportTable(caption=f"Per-system {unit} - LM: {lm}", header=["System", *averages], rows=rows, note=note)


def _question_blocks(scores: RunScores, lm: str, metrics: dict, *, figures: bool = True) -> list[Any]:
    if scores.question_set is None or not scores.bineval_results:
        return ["No BinEval results in this run."]
    analysis = analyze_questions(scores.bineval_results, scores.question_set)
    rate_rows = [[r.question_id, r.dimension, r.text, _fmt(r.yes_rate, 2), str(r.yes), str(r.no), str(r.unparsed)]
                 for r in analysis.yes_rates.itertuples()]
    dim_rows = []
    for dim, phi in analysis.dimensions.items():
        dim_rows.append([dim, str(len(phi.question_ids)), _fmt(phi.mean_off_diagonal, 2), _fmt(phi.share_weak, 2),
                         f"{phi.undefined_pairs}/{phi.pairs}", _fmt(analysis.yes_rate_spread.get(dim), 2)])
    dim_rows.append(["all", str(len(scores.question_set.questions)), _fmt(analysis.mean_off_diagonal, 2),
                     _fmt(analysis.share_weak, 2), "", ""])
    metrics["question_analysis"] = {
        "mean_off_diagonal_phi": analysis.mean_off_diagonal, "share_abs_phi_below_0_3": analysis.share_weak,
        "dimensions": {d: {"mean_off_diagonal_phi": p.mean_off_diagonal, "share_weak": p.share_weak,
                           "undefined_pairs": p.undefined_pairs, "pairs": p.pairs}
                       for d, p in analysis.dimensions.items()},
        "yes_rates": {r.question_id: r.yes_rate for r in analysis.yes_rates.itertuples()},
    }
    blocks: list[Any] = [
        ReportTable(caption=f"Yes-rate per binary question ({len(scores.bineval_results)} items) - LM: {lm}",
                    header=["id", "dimension", "question", "yes-rate", "yes", "no", "unparsed or error"], rows=rate_rows),
        ReportTable(caption=f"Question redundancy per dimension (phi coefficient) - LM: {lm}",
                    header=["dimension", "questions", "mean off-diagonal phi", "share |phi| < 0.3",
                            "undefined pairs", "yes-rate spread"], rows=dim_rows,
                    note="A pair is undefined when one question got the same answer on every item; undefined "
                         "pairs are left out of the means (the paper reports 0.38 mean phi on SummEval).")]
    if figures and any(p.question_ids for p in analysis.dimensions.values()):
        blocks.append(ReportFigure(
            caption=f"Phi coefficients between the binary questions of each dimension (paper Figure 3) - LM: {lm}",
            png=figure_png(phi_heatmap_figure(analysis, title=f"Question phi matrices - {lm}")),
            filename="phi_heatmaps.png"))
    return blocks


MISSING_SHOWN = 10  # ids listed in the report per prediction set; the full lists go to missing_predictions.json
MISSING_FILE = "missing_predictions.json"


def _first_ids(ids: Sequence[str], count: int | None = None) -> str:
    shown = ", ".join(ids[:MISSING_SHOWN])
    return shown + (f", ... ({count if count is not None else len(ids)} in all)" if len(ids) > MISSING_SHOWN else "")


def _agreement_intro(scores: RunScores) -> list[str]:
    """The paragraphs that open an agreement report: where the human scores come from, each
    prediction file, and every item left without a prediction or row left unused."""
    items = scores.items
    n = len(items)
    spec = scores.spec
    docs = items["doc_id"].nunique()
    systems = items["system_id"].nunique()
    lines = [(f"Human scores: {scores.items_source}: {_plural(n, 'item')}, {_plural(docs, 'document')}, "
              f"{_plural(systems, 'system')}; main level: {LEVEL_TITLES[spec.level].lower()}.")]
    for name, ps in scores.prediction_sets.items():
        text = (f"Prediction set '{name}': {ps.path} ({_plural(ps.rows, 'row')}; columns used: {ps.column_summary()}"
                + (f"; ignored columns: {', '.join(ps.ignored_columns)}" if ps.ignored_columns else "")
                + f"); items with a prediction: {ps.matched_items}/{n}.")
        if ps.missing_items:
            text += (f" {len(ps.missing_items)} of the {n} items have no prediction (first ids: "
                     f"{_first_ids(ps.missing_items)}; all in {MISSING_FILE}): they are left out of the "
                     f"correlations of {name}, never counted as 0.")
        if ps.unknown_ids:
            shown = [f"{i} (line {line})" for i, line in ps.unknown_ids]
            verb = "names" if len(ps.unknown_ids) == 1 else "name"
            text += (f" {_plural(len(ps.unknown_ids), 'row')} of the file {verb} an item_id that is not among the "
                     f"{n} items (first: {_first_ids(shown)}; all in {MISSING_FILE}): not used.")
        gaps = {d: len(v) for d, v in ps.missing_values.items() if v}
        if gaps:
            text += (" Rows with a missing value (null, NaN or empty), left out: "
                     + ", ".join(f"{d} {k}" for d, k in gaps.items()) + ".")
        lines.append(text)
    lines.append("Each prediction file is used on its own scale: Spearman ρ and Kendall τ depend only on the "
                 "ranks and Pearson r is unchanged by an increasing affine map, so no rescaling enters the "
                 "correlations. Means are shown on the file's own scale; figures and per-system means rescale "
                 "each file min-max over its observed values.")
    return lines


def missing_predictions_record(scores: RunScores) -> dict[str, Any]:
    """The full lists behind the report's counts, per prediction set (``missing_predictions.json``):
    ``file``, ``items`` (total), ``items_without_prediction`` (ids), ``unknown_item_ids``
    (``{"item_id", "line"}``), ``missing_values`` (dimension -> ids), ``dimensions_without_column``."""
    return {name: {"file": str(ps.path), "items": len(scores.items),
                   "items_without_prediction": list(ps.missing_items),
                   "unknown_item_ids": [{"item_id": i, "line": line} for i, line in ps.unknown_ids],
                   "missing_values": {d: list(v) for d, v in ps.missing_values.items()},
                   "dimensions_without_column": [d for d in scores.spec.dimensions if d not in ps.columns]}
            for name, ps in scores.prediction_sets.items()}


def _prediction_files_table(scores: RunScores, metrics: dict) -> ReportTable:
    n = len(scores.items)
    rows = []
    for name, ps in scores.prediction_sets.items():
        gaps = ", ".join(f"{d} {len(v)}" for d, v in ps.missing_values.items() if v) or "0"
        rows.append([name, str(ps.path), str(ps.rows), f"{ps.matched_items}/{n}", str(len(ps.missing_items)),
                     str(len(ps.unknown_ids)), gaps, ps.column_summary()])
        metrics.setdefault("prediction_sets", {})[name] = {
            "file": str(ps.path), "rows": ps.rows, "items": n, "items_with_prediction": ps.matched_items,
            "items_without_prediction": len(ps.missing_items), "unknown_item_ids": len(ps.unknown_ids),
            "missing_values": {d: len(v) for d, v in ps.missing_values.items()}, "columns": dict(ps.columns),
            "items_used": {d: ps.items_used(d) for d in scores.spec.dimensions}}
    return ReportTable(
        caption=f"Prediction files: rows read and items matched ({n} items)",
        header=["Prediction set", "file", "rows", "items with a prediction / total", "items without a prediction",
                "rows with an unknown item_id", "missing values", "columns used"],
        rows=rows,
        note=f"Items without a prediction, unknown ids and missing values are listed in full in {MISSING_FILE}; "
             "none of them is ever counted as a score.")


def build_benchmark_report(run: BenchmarkRun | str | Path | RunScores, *, n_resamples: int = 1000, seed: int = 0,
                           figures: bool = True,
                           constant_predictions: ConstantPredictions = DEFAULT_CONSTANT_PREDICTIONS
                           ) -> BenchmarkReport:
    """Compute the report of a benchmark run from its files (no LM call), or the agreement
    report of prediction files.

    Args:
        run: the run directory (or a `BenchmarkRun`), or a `RunScores` already built,
            e.g. by `load_agreement_scores` with users' prediction sets (its own
            ``constant_predictions`` then applies and the argument is ignored).
        n_resamples: bootstrap resamples for intervals and paired tests.
        seed: bootstrap seed.
        figures: draw the figures (off for quick tests).
        constant_predictions: summary-level documents whose method scores are all
            equal: ``"skip"`` (default; G-Eval's and UniEval's scripts) or ``"zero"``.
            Stated in the report and in ``metrics.json`` with the counts.

    Returns:
        A `BenchmarkReport`. With prediction sets: titled after them, one row per set
        in every table (labelled with its name and file), paired tests between the sets
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
    calc = _Calculator(scores)
    metrics: dict[str, Any] = {"benchmark": spec.name, "lm": lm, "items": len(scores.items),
                               "level": spec.level, "constant_predictions": scores.constant_predictions}
    if scores.prediction_sets:
        names = ", ".join(scores.prediction_sets)
        metrics["items_source"] = scores.items_source
        report = BenchmarkReport(title=f"{spec.title}: agreement of {names} with human judgments - "
                                       f"{len(scores.items)} items"
                                       + (f" - our methods' LM: {scores.config.lm}" if scores.from_run else ""))
    else:
        report = BenchmarkReport(title=f"{spec.title}: evaluator agreement with human judgments - "
                                       f"{len(scores.items)} items - LM: {lm}")
    cfg = scores.config
    selection = f"first {cfg.limit}" if cfg.limit and (cfg.sample in (None, "head")) else (
        f"{cfg.limit} per split, {cfg.sample} sample, seed {cfg.seed}" if cfg.limit else "all items")
    report.intro = [] if not scores.from_run else [
        (f"Every LM-based method ran on the same LM ({cfg.lm}), on the same items ({selection})."
         + (f" BinEval question set {cfg.question_set_hash} ({cfg.question_set_source})."
            if cfg.question_set_hash else "")
         + (f" Baseline rubric {cfg.rubric_hash} ({cfg.rubric_source}); log-probabilities requested: "
           f"{cfg.logprobs}." if cfg.rubric_hash else "")
        + "".join(f" {title}: {line}." for title, line in score_source_lines(scores))),
        "Methods: " + "; ".join(METHOD_DEFINITIONS[m] for m in scores.methods if m in METHOD_DEFINITIONS) + ".",
    ]
    if scores.prediction_sets:
        report.intro = _agreement_intro(scores) + report.intro
    missing = [m for m in cfg.methods if m not in scores.methods]
    partial = [f"{_method_label(m)} {scores.costs[m].items}/{len(scores.items)}" for m in scores.run_methods
               if m not in DERIVED_METHODS and scores.costs[m].items < len(scores.items)]
    if missing or partial:
        report.intro.append("Incomplete run: " + "; ".join(
            ([f"no results yet for {', '.join(missing)}"] if missing else [])
            + ([f"items scored: {', '.join(partial)}"] if partial else []))
            + ". Rerun the same `bineval benchmark` command to finish, then `bineval report`.")
    warnings = coverage_warnings(scores)
    metrics["coverage_warnings"] = warnings
    report.intro += [f"Warning: {w}" for w in warnings]
    main = (_main_table_dimensions if spec.layout == "dimensions" else _main_table_splits)(calc, scores, lm, metrics)
    blocks: list[Any] = [main]
    other = _other_levels_table(calc, scores, lm, metrics)
    if other is not None:
        blocks.append(other)
    report.sections.append(("Correlation with human judgments", blocks))
    if scores.methods:
        report.sections.append(("Confidence intervals and paired tests",
                                _ci_and_tests(calc, scores, lm, n_resamples, seed, metrics)))
        if scores.run_methods:
            report.sections.append(("Cost", [_cost_table(scores, lm, metrics)]))
        report.sections.append(("Score distributions", [_means_table(scores, lm)]
                                + ([_system_table(scores, lm, metrics)]
                                   if scores.items["system_id"].nunique() >= 2 else [])))
        sources_table = _score_source_table(scores, lm, metrics)
        report.sections.append(("Coverage", ([_prediction_files_table(scores, metrics)]
                                             if scores.prediction_sets else [])
                                + [_diagnostics_table(calc, scores, metrics)]
                                + ([sources_table] if sources_table is not None else [])))
    if scores.from_run:
        report.sections.append(("Why decomposition works: question analysis (paper 5.6)",
                                _question_blocks(scores, lm, metrics, figures=figures)))
    if figures and scores.methods:
        panels = _panels(scores)
        n_items = f" ({_plural(len(scores.items), 'item')})"
        fig_blocks: list[Any] = [ReportFigure(
            caption=f"Score distributions of humans and each method on the human scale (paper Figures 1, 7, 9)"
                    f"{n_items} - LM: {lm}",
            png=figure_png(violin_figure(panels, title=f"{spec.title} score distributions - {lm}")),
            filename="violins.png")]
        if scores.items["system_id"].nunique() >= 3:
            systems, human, methods, ylabel = _system_means(scores)
            fig_blocks.append(ReportFigure(
                caption=f"Per-system mean scores, systems ordered by human mean (paper Figures 2, 8){n_items} - LM: {lm}",
                png=figure_png(system_figure(systems, human, methods, ylabel=ylabel,
                                             title=f"{spec.title} per-system means - {lm}")),
                filename="systems.png"))
        fig_blocks.append(ReportFigure(
            caption=f"Per-item scores against human scores with Pearson's r (paper Figure 10){n_items} - LM: {lm}",
            png=figure_png(scatter_figure(panels, title=f"{spec.title} method vs human - {lm}")),
            filename="scatter.png"))
        report.sections.append(("Figures", fig_blocks))
    report.metrics = metrics
    return report


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (np.floating, np.integer)):
        return _json_safe(value.item())
    return value


def write_benchmark_report(run: BenchmarkRun | str | Path | RunScores, *, n_resamples: int = 1000, seed: int = 0,
                           figures: bool = True,
                           constant_predictions: ConstantPredictions = DEFAULT_CONSTANT_PREDICTIONS,
                           out_dir: str | Path | None = None) -> tuple[Path, Path, BenchmarkReport]:
    """Build the report and write ``report.md``, ``report.html``, ``metrics.json`` and
    ``figures/*.png`` into the run directory, or `out_dir` (arguments as in
    `build_benchmark_report`). With prediction sets, ``missing_predictions.json``
    (`missing_predictions_record`) is written beside them.

    Returns:
        (report.md path, report.html path, the `BenchmarkReport`).

    Raises:
        InputError: as `build_benchmark_report`; a `RunScores` without `out_dir`.
    """
    if isinstance(run, RunScores):
        if out_dir is None:
            from binaryeval_dspy.errors import InputError

            raise InputError("no output directory for the report", field="out_dir", fix="pass out_dir (--out).")
        scores: RunScores | None = run
        report = build_benchmark_report(run, n_resamples=n_resamples, seed=seed, figures=figures)
    else:
        run = run if isinstance(run, BenchmarkRun) else BenchmarkRun(run)
        scores = None
        report = build_benchmark_report(run, n_resamples=n_resamples, seed=seed, figures=figures,
                                        constant_predictions=constant_predictions)
    target = Path(out_dir) if out_dir is not None else run.path  # type: ignore[union-attr]
    target.mkdir(parents=True, exist_ok=True)
    figures_dir = target / "figures"
    for figure in report.figures():
        figures_dir.mkdir(parents=True, exist_ok=True)
        (figures_dir / figure.filename).write_bytes(figure.png)
    md_path = target / "report.md"
    html_path = target / "report.html"
    md_path.write_text(report.to_markdown(), encoding="utf-8")
    html_path.write_text(report.to_html(), encoding="utf-8")
    (target / "metrics.json").write_text(json.dumps(_json_safe(report.metrics), indent=2, ensure_ascii=False)
                                         + "\n", encoding="utf-8")
    if scores is not None and scores.prediction_sets:
        (target / MISSING_FILE).write_text(json.dumps(missing_predictions_record(scores), indent=2,
                                                      ensure_ascii=False) + "\n", encoding="utf-8")
    return md_path, html_path, report

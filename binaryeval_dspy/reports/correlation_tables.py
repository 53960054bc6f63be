"""The correlation tables of the benchmark and agreement reports (paper Tables 1, 7, 8).

Each builder reads a run's scores through a `Calculator`, returns one `Table` (cells
formatted) and records the numbers behind it in `metrics` (the ``metrics.json``
mapping: method -> dimension or split -> values). The main table follows the
benchmark's protocol level (summary-level ρ / τ on SummEval, turn-level on
Topical-Chat, pooled r / ρ / τ on QAGS); `other_levels_table` gives Pearson's r and the
other levels; `ci_and_tests_tables` the bootstrap 95% intervals and the paired
bootstrap tests (`binaryeval_dspy.metrics.bootstrap`, Koehn 2004; Deutsch et al. 2021).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from binaryeval_dspy.meta_eval.run_scores import RunScores
from binaryeval_dspy.metrics.bootstrap import correlation_ci, paired_bootstrap_test
from binaryeval_dspy.reports.benchmark_statistics import (
    Calculator,
    mean_defined,
    paired_comparisons,
)
from binaryeval_dspy.reports.formatting import (
    CONSTANT_NOTE,
    FEW_UNITS,
    LEVEL_TITLES,
    constant_mark,
    constant_policy_note,
    coverage_cell,
    fmt,
    fmt_p,
    method_label,
    plural,
    source_cell,
)
from binaryeval_dspy.render import Table

if TYPE_CHECKING:
    import numpy as np


def main_table_dimensions(calc: Calculator, scores: RunScores, lm: str, metrics: dict) -> Table:
    """The main table for a per-dimension benchmark (SummEval, Topical-Chat; paper section 5):
    per method, its correlation with human scores on each dimension at the spec's level,
    computed by `calc`; records each value in `metrics`. Values in [-1, 1], n/a when undefined."""
    spec = scores.spec
    level = spec.level
    sourced = bool(scores.prediction_sets)
    header = ["Method", *(["source"] if sourced else []), *[d.capitalize() for d in spec.dimensions], "Average",
              "items used / total"]
    rows = []
    for method in scores.methods:
        row = [method_label(method), *([source_cell(scores, method)] if sourced else [])]
        rhos, taus = [], []
        used: dict[str, int] = {}
        for d in spec.dimensions:
            rho, info = calc.value(method, d, "", level, "spearman")
            tau, _ = calc.value(method, d, "", level, "kendall")
            rhos.append(rho)
            taus.append(tau)
            used[d] = info["items_scored"]
            metrics.setdefault(method, {})[d] = {"spearman": rho, "kendall": tau, **info}
            row.append(f"{fmt(rho)} / {fmt(tau)}" + constant_mark(info))
        mean_rho, partial_rho = mean_defined(rhos)
        mean_tau, _ = mean_defined(taus)
        metrics[method]["average"] = {"spearman": mean_rho, "kendall": mean_tau}
        metrics[method]["source"] = source_cell(scores, method)
        row.append(f"{fmt(mean_rho)} / {fmt(mean_tau)}" + (" *" if partial_rho else ""))
        row.append(coverage_cell(used, len(scores.items)))
        rows.append(row)
    n_items = len(scores.items)
    n_docs = scores.items["doc_id"].nunique()
    return Table(
        caption=f"{LEVEL_TITLES[level]} Spearman ρ / Kendall τ on {spec.title} ({plural(n_items, 'item')}, "
                f"{plural(n_docs, 'document' if level == 'summary' else 'context')}) - LM: {lm}"
                + (f" (layout of the paper's {spec.paper_table})" if spec.paper_table else ""),
        header=header, rows=rows,
        note="Average = mean of the dimension columns (* = some dimension undefined, averaged over the rest). "
             "n/a = undefined (e.g. constant human scores, too few items). items used / total = items with a "
             "score (per dimension when they differ) / items of the report; the others are left out, never "
             "counted as 0. " + CONSTANT_NOTE + " "
             + constant_policy_note(scores, metrics)
             + (" ROUGE-L uses no LM." if "rouge" in scores.methods or not scores.prediction_sets else ""),
    )


def main_table_splits(calc: Calculator, scores: RunScores, lm: str, metrics: dict) -> Table:
    """The main table for a benchmark scored by split on one dimension (QAGS' CNN/DM and XSum):
    per method, its correlation with human scores on each split; records each value in
    `metrics`. Values in [-1, 1], n/a when undefined."""
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
        row = [method_label(method), *([source_cell(scores, method)] if sourced else [])]
        per_corr: dict[str, list[float]] = {"pearson": [], "spearman": [], "kendall": []}
        used: dict[str, str] = {}
        for split in spec.splits:
            entry: dict[str, Any] = {}
            for corr in ("pearson", "spearman", "kendall"):
                value, info = calc.value(method, dim, split, "pooled", corr)  # type: ignore[arg-type]
                per_corr[corr].append(value)
                entry[corr] = value
                entry.update(info)
                row.append(fmt(value) + constant_mark(info))
            metrics.setdefault(method, {})[split or spec.name] = entry
            used[spec.split_title(split)] = f"{entry['items_scored']}/{entry['items']}"
        metrics[method]["source"] = source_cell(scores, method)
        if len(spec.splits) > 1:
            avg = {c: mean_defined(v)[0] for c, v in per_corr.items()}
            metrics[method]["average"] = avg
            row += [fmt(avg["pearson"]), fmt(avg["spearman"]), fmt(avg["kendall"])]
        row.append(", ".join(f"{k} {v}" for k, v in used.items()) if len(used) > 1 else next(iter(used.values())))
        rows.append(row)
    counts = ", ".join(f"{spec.split_title(s)} {len(calc.subset(s))}" for s in spec.splits)
    return Table(
        caption=f"Pearson r / Spearman ρ / Kendall τ with human consistency on {spec.title} ({counts} items) "
                f"- LM: {lm}" + (f" (layout of the paper's {spec.paper_table})" if spec.paper_table else ""),
        header=header, rows=rows,
        note="Correlations are pooled over the items of each split; Average = mean of the splits. items used / "
             "total = items with a score / items of the split (the others are left out, never counted as 0). "
             + CONSTANT_NOTE,
    )


def other_levels_table(calc: Calculator, scores: RunScores, lm: str, metrics: dict) -> Table | None:
    """Correlations at the levels other than the main one (system, summary or turn), per method
    and dimension, recorded in `metrics`; None for a benchmark laid out by split."""
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
            row = [method_label(method), d, fmt(r)]
            for lv in levels:
                value, _ = calc.value(method, d, "", lv, "spearman")
                metrics[method][d][f"{lv}_spearman"] = value
                row.append(fmt(value))
            row.append(f"{info['items_scored']}/{info['items']}")
            rows.append(row)
    note = (f"System-level correlations use {n_systems} systems (means over the sampled items)." if "system" in levels
            else f"No system-level column: the sample has {plural(n_systems, 'system')}, and it needs at least 3.")
    return Table(caption=f"Pearson r and Spearman ρ at other levels - LM: {lm}", header=header, rows=rows,
                       note=note)



def ci_and_tests_tables(calc: Calculator, scores: RunScores, lm: str, n_resamples: int, seed: int,
                  metrics: dict) -> list[Table]:
    """Bootstrap confidence intervals of each method's correlation and paired bootstrap tests of
    BinEval against each other method (`n_resamples` resamples of items, `seed`), via
    `binaryeval_dspy.metrics.bootstrap`; recorded in `metrics`."""
    import numpy as np

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
        row = [method_label(method)]
        h_rows, p_rows = [], []
        used: dict[str, int] = {}
        for split, dim in columns:
            human, predicted, groups, systems = inputs(method, split, dim)
            used[label(split, dim)] = int(np.isfinite(predicted).sum())
            ci = correlation_ci(human, predicted, level=level, method="spearman", groups=groups, systems=systems,
                                n_resamples=n_resamples, seed=seed, constant_predictions=scores.constant_predictions)
            metrics[method].setdefault("ci95_spearman", {})[label(split, dim)] = [ci.low, ci.high]
            row.append(f"{fmt(ci.estimate)} [{fmt(ci.low)}, {fmt(ci.high)}]")
            h_rows.append(human)
            p_rows.append(predicted)
        if len(columns) > 1 and spec.layout == "dimensions":
            ci = correlation_ci(h_rows, p_rows, level=level, method="spearman", groups=groups, systems=systems,
                                n_resamples=n_resamples, seed=seed, constant_predictions=scores.constant_predictions)
            metrics[method]["ci95_spearman"]["Average"] = [ci.low, ci.high]
            row.append(f"{fmt(ci.estimate)} [{fmt(ci.low)}, {fmt(ci.high)}]")
        row.append(coverage_cell(used, len(scores.items)) if spec.layout == "dimensions" else ", ".join(
            f"{k} {n}/{len(calc.subset(s))}" for (k, n), s in zip(used.items(), splits)))
        ci_rows.append(row)
    header = ["Method", *[label(s, d) for s, d in columns]]
    if len(columns) > 1 and spec.layout == "dimensions":
        header.append("Average")
    ci_header = [*header, "items used / total"]
    unit = "documents" if level == "summary" else "items"
    n_units = scores.items["doc_id"].nunique() if level == "summary" else len(scores.items)
    few = (f"Only {plural(n_units, unit[:-1])} to resample: intervals and p-values from so few are not "
           f"reliable; use {'more items' if scores.prediction_sets else 'a larger `limit`'}."
           if n_units < FEW_UNITS else "")
    tables = [Table(
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
            cells.append(f"{fmt(test.delta, 3)} [{fmt(test.low)}, {fmt(test.high)}] {fmt_p(test.p_value, n_resamples)}")
            h_rows.append(human)
            a_rows.append(a)
            b_rows.append(b)
        if len(columns) > 1 and spec.layout == "dimensions":
            test = paired_bootstrap_test(h_rows, a_rows, b_rows, level=level, method="spearman", groups=groups,
                                         systems=systems, n_resamples=n_resamples, seed=seed,
                                         constant_predictions=scores.constant_predictions)
            metrics[first]["paired_vs"][other]["Average"] = {
                "delta": test.delta, "ci95": [test.low, test.high], "p_value": test.p_value}
            cells.append(f"{fmt(test.delta, 3)} [{fmt(test.low)}, {fmt(test.high)}] {fmt_p(test.p_value, n_resamples)}")
        n_label = (coverage_cell(both_used, len(scores.items)) if spec.layout == "dimensions" else ", ".join(
            f"{k} {n}/{len(calc.subset(s))}" for (k, n), s in zip(both_used.items(), splits)))
        test_rows.append([f"{method_label(first)} vs {method_label(other)} (items with both: {n_label})", *cells])
    if scores.prediction_sets:
        what = ("between the prediction sets" if not scores.run_methods else
                "of each prediction set against the other sets and our methods")
        caption = (f"Paired bootstrap tests {what}: Δρ = ρ(A) - ρ(B) for row 'A vs B', 95% interval and "
                   f"two-sided p ({n_resamples} resamples) - LM: {lm}")
    else:
        caption = (f"Paired bootstrap test of BinEval against each baseline: Δρ = ρ(BinEval) - ρ(baseline), "
                   f"95% interval and two-sided p ({n_resamples} resamples) - LM: {lm}")
    tables.append(Table(
        caption=caption,
        header=header, rows=test_rows,
        note="Both methods are compared on the items where both have a score (counted in each row's label); "
             "the same resampled units are used for both in every resample. "
             + ("A document where one method's scores are constant is left out of that method's mean (policy "
                "'skip'), so the two means may cover different documents." if scores.constant_predictions == "skip"
                else "A constant method (†) counts as ρ = 0 (policy 'zero'), so it can 'beat' a baseline whose ρ "
                     "is negative without ranking anything.") + (f" {few}" if few else "")))
    return tables



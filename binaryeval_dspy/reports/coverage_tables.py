"""The coverage, cost and distribution tables of the benchmark and agreement reports.

Every builder returns a `Table` and records its numbers in `metrics` (the
``metrics.json`` mapping): items scored per method, unparsed answers and degenerate
cases (`diagnostics_table`), LM calls, tokens and estimated USD (`cost_table`), where
the scores came from (`score_source_table`: log-probabilities or the plain answer),
mean scores on the human scale (`means_table`) and per-system means (`system_table`).
A score that could not be given is left out and counted, never averaged in as 0.
"""

from __future__ import annotations

import math

from binaryeval_dspy.cost.pricing import format_usd, price_model_for_name, run_cost
from binaryeval_dspy.meta_eval.run_scores import DERIVED_METHODS, RunScores
from binaryeval_dspy.reports.benchmark_statistics import Calculator, system_frame
from binaryeval_dspy.reports.formatting import fmt, mean_with_coverage, method_label
from binaryeval_dspy.render import Table


def diagnostics_table(calc: Calculator, scores: RunScores, metrics: dict) -> Table:
    """Coverage and degenerate cases, per method and dimension (or split): items scored,
    unparsed or error (or missing values in prediction files), distinct scores and their
    spread on [0, 1], which show where a correlation is undefined; recorded in `metrics`."""
    import numpy as np

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
                    method_label(method), where, f"{info['items_scored']}/{len(sub)}",
                    str(scores.unparsed.get(method, {}).get(d, 0)),
                    str(len(np.unique(finite))) if len(finite) else "0",
                    fmt(float(np.std(finite)) if len(finite) else math.nan, 3),
                    str(info.get("groups_skipped", "-")), str(info.get("groups_constant_prediction", "-")),
                    info.get("note") or "",
                ])
    return Table(
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


def cost_table(scores: RunScores, lm: str, metrics: dict) -> Table:
    """Per method: items (incomplete, empty output, error), LM calls, prompt tokens (and how many
    were cached), completion tokens, the estimated USD cost at the run's LM prices (LiteLLM's
    price map; 'unknown' when unpriced) and wall time; recorded in `metrics`."""
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
        rows.append([method_label(method), str(c.items), str(c.incomplete), str(c.empty_output), str(c.errors),
                     str(c.lm_calls),
                     fmt(c.calls_per_item, 1), str(c.prompt_tokens), str(c.cached_prompt_tokens),
                     str(c.completion_tokens), fmt(c.tokens_per_item, 0), usd, per_item,
                     fmt(c.seconds_per_item, 2), fmt(c.seconds, 2)])
    if not any(scores.costs[m].lm_calls for m in scores.run_methods if m not in DERIVED_METHODS):
        price_note = " No LM call was made, so there is nothing to price."
    elif prices.status == "priced":
        price_note = (f" Estimated cost in USD at {prices.price_key}'s prices (input, cached input and output "
                      f"tokens priced apart), {prices.source}.")
    elif prices.status == "local":
        price_note = " Estimated cost 0 (local): the embedded model runs on this machine; no per-token bill."
    else:
        price_note = f" Estimated cost unknown: {prices.source}" + (f" ({prices.note})" if prices.note else "") + "."
    return Table(
        caption=f"Cost per method - LM: {lm}",
        header=["Method", "items", "incomplete", "empty output", "error", "LM calls", "calls / item", "prompt tokens",
                "of them cached", "completion tokens", "tokens / item", "est. cost USD", "USD / item",
                "wall s / item", "wall s total"],
        rows=rows,
        note="Tokens as reported by the LM for calls that reached it (answers from DSPy's cache cost 0; "
             "'cached' = served from the provider's prompt cache); wall time summed over items, measured on "
             "the machine that ran them." + price_note + " 'incomplete' = items stored with failed LM calls (their "
             "scores use "
             "the questions answered; rerun the benchmark to ask the rest). 'empty output' = items whose output "
             "is empty or only invisible characters (no LM call, no score); 'error' = items that could not be "
             "judged (no score; rerun to retry). Neither is ever counted as a low score."
             + "".join(f" {method_label(m)} is read from {method_label(DERIVED_METHODS[m])}'s calls: no cost "
                       "of its own." for m in derived)
             + (f" Prediction files ({', '.join(scores.prediction_sets)}) carry no cost records: not in this table."
                if scores.prediction_sets else ""))




def score_source_table(scores: RunScores, lm: str, metrics: dict) -> Table | None:
    """Per method: how many scores came from log-probabilities and how many fell back to the plain
    answer, with the unscored ones and the reasons; recorded in `metrics`; None when no method
    reports a source."""
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
        rows.append([method_label(method), src.unit, f"{src.logprobs} / {src.total}", str(src.fallback),
                     str(src.unscored), reasons])
    if not rows:
        return None
    return Table(
        caption=f"Where the scores came from: log-probabilities or the plain answer - LM: {lm}",
        header=["Method", "counted", "from log-probabilities", "fell back to the plain answer",
                "unscored / left out", "reasons"],
        rows=rows,
        note="G-Eval-style scores are the probability-weighted mean over the scale (Liu et al., 2023) and "
             "UniEval-style scores P(yes) (Zhong et al., 2022) only when the LM returned token "
             "log-probabilities at the answer's position; otherwise the plain integer or 1/0 answer was "
             "used (fell back), or, with `logprobs` on, no score was given (unscored). "
             "For BinEval, P(yes), parsed verdicts without a P(yes) are left out of its means. "
             "Unparsed answers are not counted here (see the coverage table); answers off the rubric's scale "
             "are counted apart as 'out of range (no score)'.")


def means_table(scores: RunScores, lm: str) -> Table:
    """Mean score per method on each split and dimension, beside the human mean (the scales the
    correlations compare)."""
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
        row = [method_label(m) + (" (own scale)" if own else "")]
        for s, d in cols:
            sub = items[items["split"] == s] if s else items
            values = scores.scores[m][d] if own else scores.on_human_scale(m, d)
            row.append(mean_with_coverage(values.reindex(items.index).loc[sub.index].to_numpy(dtype=float)))
        rows.append(row)
    return Table(caption="Mean score on the human scale" + (" (prediction files: on their own scale)"
                                                                  if scores.prediction_sets else "") + f" - LM: {lm}",
                       header=["", *[where(s, d) for s, d in cols]], rows=rows,
                       note="Method scores in [0, 1] mapped affinely onto each dimension's human scale "
                            "(S' = S (b - a) + a); ROUGE-L is shown the same way for comparison only. "
                            "(n used / n total) = items with a score for that cell / items; items without "
                            "one (unparsed, empty output, error) are left out of the mean, never counted as 0."
                            + (" Prediction files: mean of the raw values on the file's own scale (own scale); "
                               "items without a prediction or with a missing value are left out."
                               if scores.prediction_sets else ""))




def system_table(scores: RunScores, lm: str, metrics: dict) -> Table:
    """Per-system means of humans and each method, each with n used / n total, and a
    mark on every cell whose mean is not over all of the system's items."""
    import numpy as np

    items = scores.items
    systems, averages, unit = system_frame(scores)
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
    return Table(caption=f"Per-system {unit} - LM: {lm}", header=["System", *averages], rows=rows, note=note)



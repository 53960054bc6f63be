"""The parts of the agreement report (``bineval agreement``) that the benchmark report lacks.

The intro paragraphs naming each prediction file and what was matched
(`agreement_intro`), the prediction-file table (`prediction_files_table`, which fills
``metrics["prediction_sets"]``) and the full lists behind the counts
(`missing_predictions_record`, written as ``missing_predictions.json``). Items without
a prediction, unknown ids and missing values are counted and listed, never scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from binaryeval_dspy.meta_eval.run_scores import RunScores
from binaryeval_dspy.reports.formatting import LEVEL_TITLES, plural
from binaryeval_dspy.render import Table

MISSING_SHOWN = 10  # ids listed in the report per prediction set; the full lists go to missing_predictions.json
MISSING_FILE = "missing_predictions.json"


def _first_ids(ids: Sequence[str], count: int | None = None) -> str:
    shown = ", ".join(ids[:MISSING_SHOWN])
    return shown + (f", ... ({count if count is not None else len(ids)} in all)" if len(ids) > MISSING_SHOWN else "")


def agreement_intro(scores: RunScores) -> list[str]:
    """The paragraphs that open an agreement report: where the human scores come from, each
    prediction file, and every item left without a prediction or row left unused."""
    items = scores.items
    n = len(items)
    spec = scores.spec
    docs = items["doc_id"].nunique()
    systems = items["system_id"].nunique()
    lines = [(f"Human scores: {scores.items_source}: {plural(n, 'item')}, {plural(docs, 'document')}, "
              f"{plural(systems, 'system')}; main level: {LEVEL_TITLES[spec.level].lower()}.")]
    for name, ps in scores.prediction_sets.items():
        text = (f"Prediction set '{name}': {ps.path} ({plural(ps.rows, 'row')}; columns used: {ps.column_summary()}"
                + (f"; ignored columns: {', '.join(ps.ignored_columns)}" if ps.ignored_columns else "")
                + f"); items with a prediction: {ps.matched_items}/{n}.")
        if ps.missing_items:
            text += (f" {len(ps.missing_items)} of the {n} items have no prediction (first ids: "
                     f"{_first_ids(ps.missing_items)}; all in {MISSING_FILE}): they are left out of the "
                     f"correlations of {name}, never counted as 0.")
        if ps.unknown_ids:
            shown = [f"{i} (line {line})" for i, line in ps.unknown_ids]
            verb = "names" if len(ps.unknown_ids) == 1 else "name"
            text += (f" {plural(len(ps.unknown_ids), 'row')} of the file {verb} an item_id that is not among the "
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


def prediction_files_table(scores: RunScores, metrics: dict) -> Table:
    """The agreement report's table of prediction files: per prediction set, its file, the items it
    scores out of the benchmark's and its coverage; records the counts in `metrics` (the
    metrics.json mapping being built)."""
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
    return Table(
        caption=f"Prediction files: rows read and items matched ({n} items)",
        header=["Prediction set", "file", "rows", "items with a prediction / total", "items without a prediction",
                "rows with an unknown item_id", "missing values", "columns used"],
        rows=rows,
        note=f"Items without a prediction, unknown ids and missing values are listed in full in {MISSING_FILE}; "
             "none of them is ever counted as a score.")



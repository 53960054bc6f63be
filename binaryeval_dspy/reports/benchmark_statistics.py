"""The statistics of the benchmark and agreement reports, read from a run's scores.

`Calculator` gives one correlation of one method with the human scores at one
protocol level (summary, turn, pooled, system: paper section 4.1, UniEval's and
G-Eval's meta-evaluation protocols) with its counts; `coverage_warnings` and
`system_frame` say which means are over which items; `paired_comparisons` names the
pairs the paired bootstrap tests compare. The correlations themselves are those of
`binaryeval_dspy.metrics.correlation` and the intervals and tests those of
`binaryeval_dspy.metrics.bootstrap`: nothing is computed twice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from binaryeval_dspy.meta_eval.run_scores import RunScores
from binaryeval_dspy.metrics.correlation import (
    Method,
    pooled_correlation,
    summary_level_correlation,
    system_level_correlation,
)
from binaryeval_dspy.reports.formatting import method_label

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


def mean_defined(values: Sequence[float]) -> tuple[float, bool]:
    """Mean over the finite values (NaN when none), and whether some were undefined."""
    import numpy as np

    arr = np.array(values, dtype=float)
    finite = arr[np.isfinite(arr)]
    return (float(finite.mean()) if len(finite) else math.nan), bool(len(finite) < len(arr))


class Calculator:
    """Correlations of one run's methods with the human scores, one cell at a time.

    Args:
        scores: the run's items, human scores and method scores (`RunScores`).
    """

    def __init__(self, scores: RunScores) -> None:
        self.s = scores

    def subset(self, split: str) -> pd.DataFrame:
        """The items of `split` (all items when the run has no such split)."""
        items = self.s.items
        return items[items["split"] == split] if split in set(items["split"]) else items

    def vectors(self, method: str, dimension: str, split: str) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
        """(human scores, method scores, items frame) of one dimension and split, aligned
        item by item; a score the method could not give is NaN."""
        sub = self.subset(split)
        human = sub[dimension].to_numpy(dtype=float)
        predicted = self.s.scores[method].loc[sub.index, dimension].to_numpy(dtype=float)
        return human, predicted, sub

    def value(self, method: str, dimension: str, split: str, level: str, corr: Method) -> tuple[float, dict]:
        """One correlation in [-1, 1] (NaN when undefined) and its counts.

        Args:
            method / dimension / split: the cell.
            level: ``summary`` (per document, then averaged, under the run's
                constant-predictions policy), ``system`` (system means), else pooled.
            corr: ``spearman``, ``kendall`` or ``pearson``.

        Returns:
            (value, info) where info holds ``items_scored`` and ``items``, plus the
            group counts at summary level, else ``note`` and ``pairs``.
        """
        import numpy as np

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



def score_source_lines(scores: RunScores) -> list[tuple[str, str]]:
    """(method title, measured line) for each method that reads log-probabilities.

    E.g. ``("G-Eval-style", "95 / 100 scores from log-probabilities; 5 fell back to the
    plain answer (no logprobs returned: 5)")``; methods that have not run are left out.
    """
    return [(method_label(m), scores.score_sources[m].summary()) for m in scores.methods
            if m in scores.score_sources]



def system_frame(scores: RunScores) -> tuple[list[str], dict[str, pd.Series], str]:
    """Per item, the mean over dimensions (human scale when all dimensions share one,
    else [0, 1]) for "Human" and each method; NaN when the item has no score at all."""
    import pandas as pd

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
        averages[method_label(m)] = item_average(frame, normalized=True).reindex(items.index)
    unit = f"mean score over dimensions [{low:g}, {high:g}]" if len(scales) == 1 else "mean normalized score [0, 1]"
    return sorted(items["system_id"].unique(), key=str), averages, unit


def coverage_warnings(scores: RunScores) -> list[str]:
    """Warnings for means that are not over the same items (at most two lines): methods
    with a score for fewer items than the run has, and per-system means over fewer items
    than the system has (so systems are compared over different items). Empty when
    every method scored every item."""
    import numpy as np

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
        short.append(f"{method_label(m)} {counts}" + (f" ({', '.join(why)})" if why else ""))
    warnings = []
    if short:
        warnings.append("not every item has a score: " + "; ".join(short) + ". Means and correlations use the "
                        "scored items only (unparsed, empty outputs, errors and missing predictions are never "
                        "counted as 0).")
    if items["system_id"].nunique() >= 2:
        systems, averages, _ = system_frame(scores)
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


"""The data of the benchmark report's figures (paper Figures 1-3 and 7-10), no drawing.

Each function returns a `Figure` block whose ``data`` holds plain lists (NaN where a
score is missing), so the figures are saved in ``metrics.json`` and drawn only when the
report is rendered (`binaryeval_dspy.reports.figures.draw_figure`, matplotlib).
"""

from __future__ import annotations

from typing import Any

from binaryeval_dspy.analysis.question_analysis import QuestionAnalysis
from binaryeval_dspy.meta_eval.run_scores import RunScores
from binaryeval_dspy.reports.benchmark_statistics import system_frame
from binaryeval_dspy.reports.formatting import method_label, plural
from binaryeval_dspy.render import Figure


def _panels_of(scores: RunScores, split: str = "") -> list[dict[str, Any]]:
    spec = scores.spec
    sub = scores.items if not split else scores.items[scores.items["split"] == split]
    panels = []
    for d in spec.dimensions:
        methods = {method_label(m): scores.on_human_scale(m, d).loc[sub.index].to_numpy(dtype=float).tolist()
                   for m in scores.methods}
        title = d if not split else spec.split_title(split)
        panels.append({"title": title, "human": sub[d].to_numpy(dtype=float).tolist(), "methods": methods,
                       "scale": list(spec.scales[d])})
    return panels


def figure_panels(scores: RunScores) -> list[dict[str, Any]]:
    """One panel per dimension (per split and dimension for split layouts): ``title``,
    ``human`` (scores per item), ``methods`` (label -> scores on the human scale, NaN
    where unscored) and ``scale`` ([low, high] of the human scale)."""
    spec = scores.spec
    if spec.layout == "splits":
        return [p for split in spec.splits for p in _panels_of(scores, split)]
    return _panels_of(scores)


def system_means(scores: RunScores) -> tuple[list[str], list[float], dict[str, list[float]], str]:
    """(systems, human mean per system, method label -> mean per system, y-axis label),
    means over each system's items of the per-item mean over dimensions."""
    items = scores.items
    systems, averages, ylabel = system_frame(scores)
    means = {label: [float(series[items["system_id"] == s].mean()) for s in systems]
             for label, series in averages.items()}
    human = means.pop("Human")
    return [str(s) for s in systems], human, means, ylabel


def benchmark_figures(scores: RunScores, lm: str) -> list[Figure]:
    """The "Figures" section: violins (paper Figures 1, 7, 9), per-system means when the
    run has 3 or more systems (Figures 2, 8) and method-vs-human scatter (Figure 10)."""
    spec = scores.spec
    panels = figure_panels(scores)
    n_items = f" ({plural(len(scores.items), 'item')})"
    blocks = [Figure(
        caption=f"Score distributions of humans and each method on the human scale (paper Figures 1, 7, 9)"
                f"{n_items} - LM: {lm}",
        filename="violins.png", drawing="violins",
        data={"panels": panels, "title": f"{spec.title} score distributions - {lm}"})]
    if scores.items["system_id"].nunique() >= 3:
        systems, human, methods, ylabel = system_means(scores)
        blocks.append(Figure(
            caption=f"Per-system mean scores, systems ordered by human mean (paper Figures 2, 8){n_items} - LM: {lm}",
            filename="systems.png", drawing="systems",
            data={"systems": systems, "human": human, "methods": methods, "ylabel": ylabel,
                  "title": f"{spec.title} per-system means - {lm}"}))
    blocks.append(Figure(
        caption=f"Per-item scores against human scores with Pearson's r (paper Figure 10){n_items} - LM: {lm}",
        filename="scatter.png", drawing="scatter",
        data={"panels": panels, "title": f"{spec.title} method vs human - {lm}"}))
    return blocks


def phi_figure(analysis: QuestionAnalysis, lm: str) -> Figure:
    """The phi matrices between each dimension's binary questions (paper Figure 3)."""
    dims = {d: {"question_ids": list(phi.question_ids), "matrix": phi.matrix.to_numpy(dtype=float).tolist(),
                "mean_off_diagonal": phi.mean_off_diagonal}
            for d, phi in analysis.dimensions.items()}
    return Figure(caption=f"Phi coefficients between the binary questions of each dimension (paper Figure 3) - LM: {lm}",
                  filename="phi_heatmaps.png", drawing="phi_heatmaps",
                  data={"dimensions": dims, "title": f"Question phi matrices - {lm}"})

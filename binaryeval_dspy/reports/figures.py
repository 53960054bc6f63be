"""The meta-evaluation figures (paper Figures 1-3 and 7-10), drawn with matplotlib (Agg).

Every drawing function returns a `matplotlib.figure.Figure`; `figure_png` turns one into
PNG bytes for files and for the self-contained HTML report, and `draw_figure` draws a
report's `binaryeval_dspy.render.Figure` block from its saved data. Titles name
the LM, because a figure without its LM is not a result.

matplotlib comes with the ``bench`` extra and is imported on the first drawing, never
when this module is imported (`MissingExtraError` naming the extra when it is absent).
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from binaryeval_dspy.analysis.question_analysis import QuestionAnalysis

if TYPE_CHECKING:
    import numpy as np
    from matplotlib.figure import Figure

    from binaryeval_dspy.render import Figure as FigureBlock


def _pyplot() -> ModuleType:
    """matplotlib.pyplot on the Agg backend, imported on first use.

    Raises:
        MissingExtraError: matplotlib is not installed (the ``bench`` extra).
    """
    from binaryeval_dspy.extras import require

    matplotlib = require("matplotlib", "bench", "Benchmark report figures")
    matplotlib.use("Agg")
    return require("matplotlib.pyplot", "bench", "Benchmark report figures")

HUMAN_COLOR = "#444444"
METHOD_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2")


@dataclass
class Panel:
    """One panel of a human-vs-methods figure.

    Attributes:
        title: panel title (a dimension or a split).
        human: human scores.
        methods: method label -> scores on the same scale, aligned with `human`
            (NaN allowed: left out of that method's drawing).
        scale: the human scale [low, high] (axis limits).
    """

    title: str
    human: np.ndarray
    methods: Mapping[str, np.ndarray]
    scale: tuple[float, float]


def figure_png(figure: Figure, *, dpi: int = 100) -> bytes:
    """The figure as PNG bytes (the figure is closed afterwards)."""
    plt = _pyplot()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    plt.close(figure)
    return buffer.getvalue()


def _finite(values: np.ndarray) -> np.ndarray:
    import numpy as np

    values = np.asarray(values, dtype=float)
    return values[np.isfinite(values)]


def _grid(n: int, max_cols: int = 4) -> tuple[int, int]:
    cols = min(n, max_cols)
    return math.ceil(n / cols), cols


def violin_figure(panels: Sequence[Panel], *, title: str) -> Figure:
    """Score distributions of humans and each method, one panel per dimension or split
    (paper Figures 1, 7 and 9). Means are printed above the violins.

    A method whose scores are all equal (or missing) is drawn as a single mark.
    """
    import numpy as np

    plt = _pyplot()
    rows, cols = _grid(len(panels))
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.4 * rows), squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        labels = ["Human", *panel.methods]
        series = [_finite(panel.human), *[_finite(v) for v in panel.methods.values()]]
        colors = [HUMAN_COLOR, *METHOD_COLORS]
        for position, (values, color) in enumerate(zip(series, colors), start=1):
            if len(values) >= 2 and np.ptp(values) > 0:
                parts = ax.violinplot(values, positions=[position], showmeans=False, showextrema=False)
                for body in parts["bodies"]:
                    body.set_facecolor(color)
                    body.set_alpha(0.55)
            if len(values):
                mean = float(values.mean())
                ax.scatter([position], [mean], color=color, edgecolor="black", zorder=3, s=22)
                ax.annotate(f"{mean:.2f}", (position, panel.scale[1]), ha="center", va="bottom", fontsize=7,
                            xytext=(0, 2), textcoords="offset points")
        low, high = panel.scale
        pad = 0.08 * (high - low)
        ax.set_ylim(low - pad, high + 2 * pad)
        ax.set_xticks(range(1, len(labels) + 1))
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
        ax.set_title(panel.title, fontsize=10)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def system_figure(systems: Sequence[str], human: Sequence[float], methods: Mapping[str, Sequence[float]], *,
                  ylabel: str, title: str) -> Figure:
    """Per-system mean scores, systems ordered by ascending human mean (paper Figures 2 and 8).

    Args:
        systems: system names.
        human: human mean per system (same order).
        methods: method label -> mean per system on the same scale.
        ylabel: what the y axis shows.
        title: figure title (name the LM).
    """
    import numpy as np

    plt = _pyplot()
    order = np.argsort(np.asarray(human, dtype=float), kind="stable")
    x = np.arange(len(systems))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * len(systems) + 2), 3.8))
    ax.plot(x, np.asarray(human, dtype=float)[order], marker="o", color=HUMAN_COLOR, linewidth=2.2, label="Human")
    for (label, values), color in zip(methods.items(), METHOD_COLORS):
        ax.plot(x, np.asarray(values, dtype=float)[order], marker="s", color=color, linewidth=1.2, label=label,
                alpha=0.9)
    ax.set_xticks(x)
    ax.set_xticklabels([str(systems[i]) for i in order], rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_xlabel("system (ordered by human mean)")
    ax.legend(fontsize=8, ncol=3)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def _phi_tables(analysis: QuestionAnalysis | Mapping[str, Mapping[str, Any]]
                ) -> dict[str, tuple[list[str], np.ndarray, float]]:
    """dimension -> (question ids, phi matrix, mean off-diagonal phi), from a
    `QuestionAnalysis` or from the saved ``{dim: {question_ids, matrix, mean_off_diagonal}}``."""
    import numpy as np

    if isinstance(analysis, QuestionAnalysis):
        return {d: (list(p.question_ids), p.matrix.to_numpy(dtype=float), p.mean_off_diagonal)
                for d, p in analysis.dimensions.items()}
    return {d: (list(p["question_ids"]), np.asarray(p["matrix"], dtype=float).reshape(len(p["question_ids"]), -1),
                math.nan if p.get("mean_off_diagonal") is None else float(p["mean_off_diagonal"]))
            for d, p in analysis.items()}


def phi_heatmap_figure(analysis: QuestionAnalysis | Mapping[str, Mapping[str, Any]], *, title: str) -> Figure:
    """Phi-coefficient matrices between the questions of each dimension (paper Figure 3).

    Args:
        analysis: a `QuestionAnalysis`, or its saved form ``{dimension: {"question_ids",
            "matrix" (square, NaN / null where undefined), "mean_off_diagonal"}}``.
        title: figure title (name the LM).

    Undefined cells (a question answered the same way on every item) are left blank
    and marked "n/a".
    """
    import numpy as np

    plt = _pyplot()
    tables = _phi_tables(analysis)
    dims = [d for d, (ids, _, _) in tables.items() if ids]
    rows, cols = _grid(max(1, len(dims)))
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 3.3 * rows), squeeze=False)
    for ax, dim in zip(axes.flat, dims):
        question_ids, matrix, mean_off_diagonal = tables[dim]
        image = ax.imshow(np.ma.masked_invalid(matrix), vmin=-1, vmax=1, cmap="RdBu_r")
        n = len(question_ids)
        for i in range(n):
            for j in range(n):
                value = matrix[i, j]
                strong = not math.isnan(value) and abs(value) > 0.6
                ax.text(j, i, "n/a" if math.isnan(value) else f"{value:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if strong else "black")
        short = [q.split("-")[-1] for q in question_ids]
        ax.set_xticks(range(n))
        ax.set_yticks(range(n))
        ax.set_xticklabels([f"Q{s}" for s in short], fontsize=7)
        ax.set_yticklabels([f"Q{s}" for s in short], fontsize=7)
        mean = "n/a" if math.isnan(mean_off_diagonal) else f"{mean_off_diagonal:.2f}"
        ax.set_title(f"{dim} (mean off-diag phi {mean})", fontsize=9)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    for ax in list(axes.flat)[len(dims):]:
        ax.axis("off")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def scatter_figure(panels: Sequence[Panel], *, title: str) -> Figure:
    """Per-item method score against the human score, one row per method and one column
    per panel, with a least-squares line and Pearson's r (paper Figure 10)."""
    import numpy as np

    plt = _pyplot()
    methods = list(panels[0].methods) if panels else []
    rows, cols = max(1, len(methods)), max(1, len(panels))
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.9 * rows), squeeze=False)
    for c, panel in enumerate(panels):
        for r, label in enumerate(methods):
            ax = axes[r][c]
            x = np.asarray(panel.human, dtype=float)
            y = np.asarray(panel.methods[label], dtype=float)
            keep = np.isfinite(x) & np.isfinite(y)
            x, y = x[keep], y[keep]
            ax.scatter(x, y, s=9, alpha=0.6, color=METHOD_COLORS[r % len(METHOD_COLORS)])
            text = "r = n/a" + (" (constant)" if len(y) >= 2 and np.ptp(y) == 0 else "")
            if len(x) >= 2 and np.ptp(x) > 0 and np.ptp(y) > 0:
                slope, intercept = np.polyfit(x, y, 1)
                xs = np.linspace(*panel.scale, 10)
                ax.plot(xs, slope * xs + intercept, color="black", linewidth=1)
                text = f"r = {np.corrcoef(x, y)[0, 1]:.2f}"
            low, high = panel.scale
            ax.plot([low, high], [low, high], linestyle=":", color="grey", linewidth=0.8)
            ax.set_xlim(low - 0.05 * (high - low), high + 0.05 * (high - low))
            ax.set_ylim(low - 0.05 * (high - low), high + 0.05 * (high - low))
            ax.set_title(f"{label} - {panel.title}: {text}", fontsize=8)
            if r == rows - 1:
                ax.set_xlabel("human", fontsize=8)
            if c == 0:
                ax.set_ylabel("method (human scale)", fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def _panels(data: Sequence[Mapping[str, Any]]) -> list[Panel]:
    import numpy as np

    return [Panel(title=p["title"], human=np.asarray(p["human"], dtype=float),
                  methods={k: np.asarray(v, dtype=float) for k, v in p["methods"].items()},
                  scale=(float(p["scale"][0]), float(p["scale"][1]))) for p in data]


def reliability_figure(curves: Mapping[str, Sequence[Mapping[str, Any]]], *, title: str) -> Figure:
    """A reliability diagram: per judge, the labels' yes-rate against the mean P(yes) of each
    bin (`binaryeval_dspy.metrics.binary_agreement.reliability_bins`, as dicts with
    ``mean_p_yes``, ``yes_rate``, ``n``), marker area growing with the bin's answers, and
    the diagonal of perfect calibration.

    Args:
        curves: judge name -> its bins (empty bins are skipped).
        title: the figure's title (names the judges and the labels).
    """
    import textwrap

    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(5.6, 5.2 + 0.25 * len(curves)), layout="constrained")
    axis.plot([0, 1], [0, 1], linestyle="--", color=HUMAN_COLOR, linewidth=1, label="perfectly calibrated")
    for index, (judge, bins) in enumerate(curves.items()):
        used = [b for b in bins if b.get("n") and b.get("mean_p_yes") is not None and b.get("yes_rate") is not None]
        if not used:
            continue
        color = METHOD_COLORS[index % len(METHOD_COLORS)]
        xs, ys = [b["mean_p_yes"] for b in used], [b["yes_rate"] for b in used]
        total = sum(b["n"] for b in used)
        axis.plot(xs, ys, marker="o", color=color, linewidth=1.2,
                  label=textwrap.shorten(judge, 70, placeholder="...") + f" ({total} answers)")
        axis.scatter(xs, ys, s=[20 + 400 * b["n"] / total for b in used], color=color, alpha=0.35)
    axis.set_xlim(0, 1)
    axis.set_ylim(0, 1)
    axis.set_xlabel("judge's mean P(yes) in the bin")
    axis.set_ylabel("share of labels that are yes")
    axis.set_aspect("equal")
    axis.set_title("\n".join(textwrap.wrap(title, 70)), fontsize=8)
    axis.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), frameon=False)
    return figure


def draw_figure(block: FigureBlock) -> bytes:
    """PNG bytes of a report's figure block, drawn from its saved data.

    Args:
        block: a `binaryeval_dspy.render.Figure` whose ``drawing`` is
            ``violins`` / ``scatter`` (data: ``panels``, ``title``), ``systems``
            (``systems``, ``human``, ``methods``, ``ylabel``, ``title``) or
            ``phi_heatmaps`` (``dimensions``, ``title``) or ``reliability`` (``curves``,
            ``title``); null values are NaN.

    Raises:
        MissingExtraError: matplotlib is not installed (the ``bench`` extra).
        BinEvalError: an unknown drawing.
    """
    import numpy as np

    data = block.data
    if block.drawing == "violins":
        figure = violin_figure(_panels(data["panels"]), title=data["title"])
    elif block.drawing == "scatter":
        figure = scatter_figure(_panels(data["panels"]), title=data["title"])
    elif block.drawing == "systems":
        methods = {k: np.asarray(v, dtype=float) for k, v in data["methods"].items()}
        figure = system_figure(data["systems"], np.asarray(data["human"], dtype=float), methods,
                               ylabel=data["ylabel"], title=data["title"])
    elif block.drawing == "phi_heatmaps":
        figure = phi_heatmap_figure(data["dimensions"], title=data["title"])
    elif block.drawing == "reliability":
        figure = reliability_figure(data["curves"], title=data["title"])
    else:
        from binaryeval_dspy.errors import BinEvalError

        raise BinEvalError(f"unknown figure drawing {block.drawing!r}", expected="violins, scatter, systems, "
                           "phi_heatmaps or reliability", received=repr(block.drawing), fix="re-render the report from the run.")
    return figure_png(figure)

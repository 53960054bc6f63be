"""The meta-evaluation figures (paper Figures 1-3 and 7-10), drawn with matplotlib (Agg).

Every function returns a `matplotlib.figure.Figure`; `figure_png` turns one into PNG
bytes for files and for the self-contained HTML report. Titles name the LM, because a
figure without its LM is not a result.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from binaryeval_dspy.analysis.question_analysis import QuestionAnalysis

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
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    plt.close(figure)
    return buffer.getvalue()


def _finite(values: np.ndarray) -> np.ndarray:
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


def phi_heatmap_figure(analysis: QuestionAnalysis, *, title: str) -> Figure:
    """Phi-coefficient matrices between the questions of each dimension (paper Figure 3).

    Undefined cells (a question answered the same way on every item) are left blank
    and marked "n/a".
    """
    dims = [d for d, phi in analysis.dimensions.items() if phi.question_ids]
    rows, cols = _grid(max(1, len(dims)))
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 3.3 * rows), squeeze=False)
    for ax, dim in zip(axes.flat, dims):
        phi = analysis.dimensions[dim]
        matrix = phi.matrix.to_numpy(dtype=float)
        image = ax.imshow(np.ma.masked_invalid(matrix), vmin=-1, vmax=1, cmap="RdBu_r")
        n = len(phi.question_ids)
        for i in range(n):
            for j in range(n):
                value = matrix[i, j]
                strong = not math.isnan(value) and abs(value) > 0.6
                ax.text(j, i, "n/a" if math.isnan(value) else f"{value:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if strong else "black")
        short = [q.split("-")[-1] for q in phi.question_ids]
        ax.set_xticks(range(n))
        ax.set_yticks(range(n))
        ax.set_xticklabels([f"Q{s}" for s in short], fontsize=7)
        ax.set_yticklabels([f"Q{s}" for s in short], fontsize=7)
        mean = "n/a" if math.isnan(phi.mean_off_diagonal) else f"{phi.mean_off_diagonal:.2f}"
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

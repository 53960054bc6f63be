"""Saved results of the head-to-head comparison and the report built from them (no LM calls).

Each optimizer's outcome is one `OptimizerResult` (``<out>/<optimizer>/result.json``)
holding its per-item test records; test metrics and their bootstrap 95% confidence
intervals are recomputed from those records, so ``comparison.md`` can be rebuilt at any
time from the saved files alone.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from rich.table import Table
from scipy.stats import rankdata

from binaryeval_dspy.optimizers.bineval_optimizer.human import pooled_spearman

RESULT_SCHEMA_VERSION = 1

OPRO_NOTE = (
    "COPRO is DSPy's OPRO-style optimizer and stands in for OPRO here. It differs from OPRO "
    "proper (Yang et al., 2023): OPRO keeps one meta-prompt holding a growing, score-sorted "
    "history of past instructions (with task examples) and asks the LM for new instructions "
    "from that whole trajectory; COPRO first proposes `breadth` variants of the starting "
    "instruction, scores each on the training set, then for `depth` rounds shows the proposer "
    "the best attempts with their scores, per predictor, and also rewrites the output-field prefix."
)


class MetricValue(BaseModel):
    """A test metric with its bootstrap 95% confidence interval (None where undefined)."""

    model_config = ConfigDict(extra="forbid")

    value: float | None
    low: float | None = None
    high: float | None = None
    n: int = 0


class OptimizerResult(BaseModel):
    """What one optimizer did in the comparison.

    Attributes:
        optimizer: ``unoptimized``, ``bineval``, ``mipro``, ``copro`` or ``gepa``.
        lm: the task LM (evaluator or generator) name.
        prompt_lm: the LM of proposals / lessons / reflection.
        compile_lm_calls, compile_tokens, compile_seconds: cost of optimizing (LM calls
            that reached a model on any thread, prompt + completion tokens, wall time).
        compile_cached_tokens: prompt tokens of those calls served from the provider's cache.
        test_lm_calls, test_tokens, test_seconds: cost of the test evaluation.
        prompt_chars: characters of the compiled program's instructions (all predictors).
        demos: few-shot demos in the compiled program.
        instructions: the compiled instructions by predictor name.
        settings: the optimizer's budget and settings.
        notes: stop reason or other remarks.
        test_records: per-item test records (see the set-ups).
        metrics: test metrics computed from `test_records` when the result was saved
            (`metrics_from_records` recomputes them from the records alone).
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: int = RESULT_SCHEMA_VERSION
    optimizer: str
    lm: str
    prompt_lm: str
    compile_lm_calls: int = Field(default=0, ge=0)
    compile_tokens: int = Field(default=0, ge=0)
    compile_seconds: float = Field(default=0.0, ge=0)
    compile_cached_tokens: int = Field(default=0, ge=0)
    test_lm_calls: int = Field(default=0, ge=0)
    test_tokens: int = Field(default=0, ge=0)
    test_seconds: float = Field(default=0.0, ge=0)
    prompt_chars: int = Field(default=0, ge=0)
    demos: int = Field(default=0, ge=0)
    instructions: dict[str, str] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)
    notes: str = ""
    test_records: list[dict[str, Any]] = Field(default_factory=list)
    metrics: dict[str, MetricValue] = Field(default_factory=dict)


def bootstrap_ci(
    n: int, statistic: Callable[[np.ndarray], np.ndarray], *, n_resamples: int = 1000, seed: int = 0
) -> tuple[float | None, float | None]:
    """Percentile bootstrap 95% CI over items: resample item indices with replacement.

    Args:
        n: number of items.
        statistic: maps an index matrix of shape (resamples, n) to one value per row
            (NaN where undefined, e.g. a rank correlation of constant scores).
        n_resamples: bootstrap resamples.
        seed: RNG seed.

    Returns:
        (low, high), the 2.5th and 97.5th percentiles of the defined resample values;
        (None, None) when n < 3 or fewer than half of the resamples are defined.

    `scipy.stats.bootstrap` is not used here because it cannot drop undefined resamples,
    which are common for rank correlations on small test sets.
    """
    if n < 3:
        return None, None
    idx = np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))
    values = np.asarray(statistic(idx), dtype=float)
    values = values[~np.isnan(values)]
    if len(values) < n_resamples / 2:
        return None, None
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high)


def _row_rank_correlation(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row pair (average ranks, as `scipy.stats.spearmanr`); NaN if a row is constant."""
    rx, ry = rankdata(x, axis=-1), rankdata(y, axis=-1)
    rx, ry = rx - rx.mean(axis=-1, keepdims=True), ry - ry.mean(axis=-1, keepdims=True)
    denominator = np.sqrt((rx * rx).sum(axis=-1) * (ry * ry).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (rx * ry).sum(axis=-1) / np.where(denominator > 0, denominator, 1), np.nan)


def _mean_metric(values: Sequence[float | None]) -> MetricValue:
    clean = [v for v in values if v is not None]
    if not clean:
        return MetricValue(value=None, n=0)
    arr = np.array(clean, dtype=float)
    low, high = bootstrap_ci(len(arr), lambda idx: arr[idx].mean(axis=1))
    return MetricValue(value=float(arr.mean()), low=low, high=high, n=len(arr))


def evaluator_metrics(records: list[dict[str, Any]]) -> dict[str, MetricValue]:
    """Pooled Spearman per dimension and their mean (with CI), the per-item agreement with
    the human ratings (1 - mean |model - human|, with CI), and agreement with the source
    evaluator when recorded.

    The CI resamples the items on which the evaluator scored every dimension.
    """
    if not records:
        return {}
    dims = list(records[0]["human"])
    model = [r["model"] for r in records]
    human = [r["human"] for r in records]
    full = pooled_spearman(model, human, dims)
    complete = [i for i, m in enumerate(model) if all(m.get(d) is not None for d in dims)]
    m_arr = np.array([[model[i][d] for d in dims] for i in complete], dtype=float).reshape(len(complete), len(dims))
    h_arr = np.array([[human[i][d] for d in dims] for i in complete], dtype=float).reshape(len(complete), len(dims))

    def mean_rho(idx: np.ndarray) -> np.ndarray:
        per_dim = np.stack([_row_rank_correlation(m_arr[idx, k], h_arr[idx, k]) for k in range(len(dims))])
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(per_dim, axis=0)

    low, high = bootstrap_ci(len(complete), mean_rho) if len(dims) else (None, None)
    out = {"spearman": MetricValue(value=full["mean"], low=low, high=high, n=len(records))}
    for d in dims:
        out[f"spearman_{d}"] = MetricValue(value=full[d], n=len(records))
    out["human_agreement"] = _mean_metric([_human_agreement(m, h) for m, h in zip(model, human, strict=True)])
    if "agreement" in records[0]:
        out["agreement"] = _mean_metric([r.get("agreement") for r in records])
    return out


def _human_agreement(model: dict[str, float | None], human: dict[str, float]) -> float | None:
    """1 - mean |model - human| over the dimensions the evaluator scored (the optimized per-item metric)."""
    gaps = [abs(model[d] - human[d]) for d in human if model.get(d) is not None]
    return 1.0 - sum(gaps) / len(gaps) if gaps else None


def generator_metrics(records: list[dict[str, Any]]) -> dict[str, MetricValue]:
    """Prompt-level strict / loose accuracy (with CI) and instruction-level accuracy from
    the checkers; the mean BinEval score when the test used BinEval instead."""
    if not records:
        return {}
    out: dict[str, MetricValue] = {}
    if "strict" in records[0]:
        for level in ("strict", "loose"):
            out[f"{level}_accuracy"] = _mean_metric([1.0 if r[level] else 0.0 for r in records])
            flags = [x for r in records for x in r[f"{level}_list"]]
            out[f"{level}_instruction_accuracy"] = MetricValue(
                value=sum(flags) / len(flags) if flags else None, n=len(flags))
    if "bineval" in records[0]:
        out["bineval_score"] = _mean_metric([r.get("bineval") for r in records])
    return out


def metrics_from_records(kind: str, records: list[dict[str, Any]]) -> dict[str, MetricValue]:
    """Metrics for a set-up kind (``summeval`` or ``ifbench``) from saved records."""
    return evaluator_metrics(records) if kind == "summeval" else generator_metrics(records)


def primary_metric(kind: str, mode: str, metrics: dict[str, MetricValue]) -> str:
    """The metric the table leads with."""
    if kind == "summeval":
        return "agreement" if mode == "cross_model" else "spearman"
    return "loose_accuracy" if "loose_accuracy" in metrics else "bineval_score"


def load_results(out_dir: Path) -> list[OptimizerResult]:
    """Every saved `OptimizerResult` under `out_dir`, in the run's optimizer order."""
    config = json.loads((out_dir / "config.json").read_text(encoding="utf-8"))
    results = []
    for name in config["optimizers"]:
        path = out_dir / name / "result.json"
        if path.is_file():
            results.append(OptimizerResult.model_validate_json(path.read_text(encoding="utf-8")))
    return results


def _fmt(metric: MetricValue | None) -> str:
    if metric is None or metric.value is None:
        return "n/a"
    if metric.low is None:
        return f"{metric.value:.3f}"
    return f"{metric.value:.3f} [{metric.low:.3f}, {metric.high:.3f}]"


def rows(config: dict[str, Any], results: list[OptimizerResult]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the comparison table."""
    kind, mode = config["setup"]["kind"], config["setup"]["mode"]
    metrics = [metrics_from_records(kind, r.test_records) for r in results]
    primary = primary_metric(kind, mode, metrics[0] if metrics else {})
    secondary = {"summeval": ["spearman", "human_agreement"] if mode == "cross_model" else ["human_agreement"],
                 "ifbench": ["strict_accuracy"] if primary == "loose_accuracy" else []}[kind]
    header = ["optimizer", f"test {primary} [95% CI]", *[f"test {s}" for s in secondary], "LM calls",
              "tokens (cached)", "wall time (s)", "test LM calls", "prompt chars", "notes"]
    body = []
    for result, m in zip(results, metrics, strict=True):
        body.append([result.optimizer, _fmt(m.get(primary)), *[_fmt(m.get(s)) for s in secondary],
                     str(result.compile_lm_calls), f"{result.compile_tokens} ({result.compile_cached_tokens})",
                     f"{result.compile_seconds:.1f}", str(result.test_lm_calls),
                     str(result.prompt_chars), result.notes.replace("|", "/")[:120]])
    return header, body


def comparison_table(config: dict[str, Any], results: list[OptimizerResult]) -> Table:
    """A rich table of the comparison (title names the LM)."""
    header, body = rows(config, results)
    table = Table(title=f"{config['setup']['kind']} / {config['setup']['mode']} - LM: {config['lm']}")
    for col in header:
        table.add_column(col)
    for row in body:
        table.add_row(*row)
    return table


def comparison_markdown(config: dict[str, Any], results: list[OptimizerResult]) -> str:
    """The ``comparison.md`` text: set-up, LMs, split, budgets, the table and notes."""
    header, body = rows(config, results)
    setup = config["setup"]
    lines = [
        f"# Optimizer comparison: {setup['kind']} ({setup['mode']})",
        "",
        f"- Task LM: **{config['lm']}**; proposal / lesson / reflection LM: **{config['prompt_lm']}**"
        + (f"; source evaluator LM: **{config['source_lm']}**" if config.get("source_lm") else ""),
        f"- Split sizes: {setup['sizes']} (seed {config.get('seed')}; limit {config.get('limit')})",
        f"- Metric every optimizer optimized: {config['metric']}",
        f"- Test metric: {config['test_metric']}; 95% CIs by percentile bootstrap over test items (1,000 resamples).",
        ("- Cost columns (LM calls, tokens, wall time) cover optimization, on every thread; 'test LM calls' is the"
         " test evaluation. Tokens in parentheses were served from the provider's prompt cache. Calls answered"
         " from DSPy's cache are not counted."),
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *["| " + " | ".join(row) + " |" for row in body],
        "",
        "## Budgets",
        "",
        *[f"- {r.optimizer}: {json.dumps(r.settings, sort_keys=True)}" for r in results],
        "",
        "## Notes",
        "",
        f"- {OPRO_NOTE}",
    ]
    lines += [f"- {note}" for note in config.get("notes", [])]
    missing = [name for name in config["optimizers"] if name not in {r.optimizer for r in results}]
    if missing:
        lines.append(f"- Not finished (rerun the same command to run them): {', '.join(missing)}.")
    return "\n".join(lines) + "\n"


def write_comparison(out_dir: Path) -> Path:
    """Rebuild ``comparison.md`` from the saved results; returns its path."""
    config = json.loads((out_dir / "config.json").read_text(encoding="utf-8"))
    path = out_dir / "comparison.md"
    path.write_text(comparison_markdown(config, load_results(out_dir)), encoding="utf-8")
    return path

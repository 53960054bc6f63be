"""Saved results of the head-to-head comparison and the test metrics recomputed from them (no LM calls).

Each optimizer's outcome is one `OptimizerResult` (``<out>/<optimizer>/result.json``)
holding its per-item test records; test metrics and their bootstrap 95% confidence
intervals are recomputed from those records (`metrics_from_records`), so the report
(`binaryeval_dspy.comparison.report`) can be rebuilt at any time from the saved files alone.
A test item the evaluator or the judge could not score, or whose generation failed, is
left out of the averages and counted, never averaged in as a zero.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from binaryeval_dspy.metrics import bootstrap, pooled_spearman
from binaryeval_dspy.metrics.correlation import spearman
from binaryeval_dspy.schemas.versioned import SchemaVersion

if TYPE_CHECKING:
    import numpy as np

RESULT_SCHEMA_VERSION = 1
_OLDER_FIX = ("run the comparison again with this version (bineval optimize, comparing the methods), into a new "
               "`out_dir`")


class MetricValue(BaseModel):
    """A test metric with its bootstrap 95% confidence interval (None where undefined).

    Attributes:
        value: the metric (None when no item was scored).
        low, high: the 95% CI, when defined.
        n: the items (or instructions) the value was computed on.
        total: the items (or instructions) there were; ``total - n`` were not scored.
            None in results saved before it was recorded.
    """

    model_config = ConfigDict(extra="forbid")

    value: float | None
    low: float | None = None
    high: float | None = None
    n: int = 0
    total: int | None = None


class OptimizerResult(BaseModel):
    """What one optimizer did in the comparison.

    Attributes:
        optimizer: ``unoptimized``, ``bineval``, ``mipro``, ``copro`` or ``gepa``.
        lm: the task LM (evaluator or generator) name.
        prompt_lm: the LM of proposals / lessons / reflection.
        compile_lm_calls, compile_tokens, compile_seconds: cost of optimizing (LM calls
            that reached a model on any thread, prompt + completion tokens, wall time).
        compile_cached_tokens: prompt tokens of those calls served from the provider's cache.
        compile_prompt_tokens, compile_completion_tokens: the split of `compile_tokens`
            (None in results saved before it was recorded).
        test_lm_calls, test_tokens, test_seconds: cost of the test evaluation.
        test_prompt_tokens, test_completion_tokens, test_cached_tokens: the split of
            `test_tokens` and its cached prompt tokens (None in older results).
        lms: LM names by role: ``task`` (the program's LM), ``prompt`` (proposals,
            lessons, rules), ``reflection`` (GEPA), ``judge`` (the BinEval metric's LM in
            generation set-ups), ``source`` (cross-model); empty in older results.
        metric_counts: the optimized metric's calls during optimization (``scored``,
            ``unscored``, ``failed``, ``total``; for the BinEval optimizer, its item
            evaluations over all iterations); None when not recorded.
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

    schema_version: SchemaVersion(RESULT_SCHEMA_VERSION, "optimizer result", older_fix=_OLDER_FIX) = RESULT_SCHEMA_VERSION
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
    compile_prompt_tokens: int | None = Field(default=None, ge=0)
    compile_completion_tokens: int | None = Field(default=None, ge=0)
    test_prompt_tokens: int | None = Field(default=None, ge=0)
    test_completion_tokens: int | None = Field(default=None, ge=0)
    test_cached_tokens: int | None = Field(default=None, ge=0)
    lms: dict[str, str] = Field(default_factory=dict)
    metric_counts: dict[str, int] | None = None
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
    """Percentile bootstrap 95% CI over test items, with the comparison's rule for "undefined".

    The resampling is `binaryeval_dspy.metrics.bootstrap.bootstrap_ci` (items drawn
    with replacement, percentile interval, undefined resamples left out and counted);
    this function only adapts its inputs and outputs to the comparison's tables.

    Args:
        n: number of test items.
        statistic: maps an index matrix of shape (resamples, n) to one value per row
            (NaN where undefined, e.g. a rank correlation of constant scores); it is
            called with one row per resample.
        n_resamples: bootstrap resamples.
        seed: RNG seed (same seed, same interval).

    Returns:
        (low, high), the 2.5th and 97.5th percentiles of the defined resample values;
        (None, None) when n < 3 or fewer than half of the resamples are defined.
    """
    import numpy as np

    if n < 3:
        return None, None
    interval = bootstrap.bootstrap_ci(lambda idx: float(np.asarray(statistic(idx[None, :]), dtype=float)[0]), n,
                                   n_resamples=n_resamples, seed=seed)
    if n_resamples - interval.undefined_resamples < n_resamples / 2 or math.isnan(interval.low):
        return None, None
    return float(interval.low), float(interval.high)


def _row_rank_correlation(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row pair (`binaryeval_dspy.metrics.correlation.spearman`);
    NaN where a row is constant. Shapes (rows, n) -> (rows,)."""
    import numpy as np

    return np.array([spearman(a, b) for a, b in zip(np.atleast_2d(x), np.atleast_2d(y), strict=True)], dtype=float)


def _mean_metric(values: Sequence[float | None]) -> MetricValue:
    """Mean of the defined values with its CI; ``n`` defined values of ``total``."""
    import numpy as np

    clean = [v for v in values if v is not None]
    if not clean:
        return MetricValue(value=None, n=0, total=len(values))
    arr = np.array(clean, dtype=float)
    low, high = bootstrap_ci(len(arr), lambda idx: arr[idx].mean(axis=1))
    return MetricValue(value=float(arr.mean()), low=low, high=high, n=len(arr), total=len(values))


def scored_items(kind: str, records: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """(test items scored, test items) of one optimizer's test records.

    ``summeval``: an item is scored when it was judged and has a score on every
    dimension. ``ifbench``: when its record says ``scored`` (records saved before that
    field existed count as scored unless their ``status`` is ``failed``).
    """
    if kind == "summeval":
        scored = sum(1 for r in records if not r.get("failed")
                     and all(v is not None for v in (r.get("model") or {}).values()) and r.get("model"))
    else:
        scored = sum(1 for r in records if r.get("scored", r.get("status") != "failed"))
    return scored, len(records)


def evaluator_metrics(records: list[dict[str, Any]]) -> dict[str, MetricValue]:
    """Pooled Spearman per dimension and their mean (with CI), the per-item agreement with
    the human ratings (1 - mean |model - human|, with CI), and agreement with the source
    evaluator when recorded.

    The CI resamples the items on which the evaluator scored every dimension; ``n`` is
    their number (per dimension: the items scored on it) and ``total`` the test items.
    """
    import numpy as np

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
    out = {"spearman": MetricValue(value=full["mean"], low=low, high=high, n=len(complete), total=len(records))}
    for d in dims:
        out[f"spearman_{d}"] = MetricValue(value=full[d], n=sum(m.get(d) is not None for m in model),
                                           total=len(records))
    out["human_agreement"] = _mean_metric([_human_agreement(m, h) for m, h in zip(model, human, strict=True)])
    if "agreement" in records[0]:
        out["agreement"] = _mean_metric([r.get("agreement") for r in records])
    if "label_cells" in records[0]:
        out.update(label_metrics(records))
    return out


def label_metrics(records: Sequence[dict[str, Any]]) -> dict[str, MetricValue]:
    """Agreement with question-level labels on the test items: ``label_kappa`` (Cohen's
    kappa) and ``label_accuracy`` of the pooled judge-vs-label cells, each with its 95%
    bootstrap interval over items (`binaryeval_dspy.metrics.bootstrap.agreement_ci`, seed 0).

    ``n`` is the items with at least one labelled question answered yes / no, ``total``
    the test items; a value is None when undefined (no answered pair; kappa of one answer
    on both sides).
    """
    import numpy as np

    cells = np.array([r["label_cells"] for r in records if sum(r["label_cells"])], dtype=float).reshape(-1, 4)
    out = {}
    for name, statistic in (("label_kappa", "kappa"), ("label_accuracy", "accuracy")):
        if not len(cells):
            out[name] = MetricValue(value=None, n=0, total=len(records))
            continue
        interval = bootstrap.agreement_ci(cells, statistic=statistic)
        finite = [None if v is None or not math.isfinite(v) else float(v)
                  for v in (interval.estimate, interval.low, interval.high)]
        out[name] = MetricValue(value=finite[0], low=finite[1], high=finite[2], n=len(cells), total=len(records))
    return out


def _human_agreement(model: dict[str, float | None], human: dict[str, float]) -> float | None:
    """1 - mean |model - human| over the dimensions the evaluator scored (the optimized per-item metric)."""
    gaps = [abs(model[d] - human[d]) for d in human if model.get(d) is not None]
    return 1.0 - sum(gaps) / len(gaps) if gaps else None


def generator_metrics(records: list[dict[str, Any]]) -> dict[str, MetricValue]:
    """Prompt-level strict / loose accuracy (with CI) and instruction-level accuracy from
    the checkers; the mean BinEval score when the test used BinEval instead.

    A prompt whose generation failed (``strict``/``loose`` None) or whose BinEval score
    is None (unscored) is left out of the mean and counted in ``total - n``; its
    instructions are counted in the instruction-level ``total``.
    """
    if not records:
        return {}
    out: dict[str, MetricValue] = {}
    if "strict" in records[0]:
        for level in ("strict", "loose"):
            out[f"{level}_accuracy"] = _mean_metric(
                [None if r.get(level) is None else (1.0 if r[level] else 0.0) for r in records])
            flags = [x for r in records for x in (r.get(f"{level}_list") or [])]
            instructions = sum(len(r.get("instruction_id_list") or r.get(f"{level}_list") or []) for r in records)
            out[f"{level}_instruction_accuracy"] = MetricValue(
                value=sum(flags) / len(flags) if flags else None, n=len(flags), total=max(instructions, len(flags)))
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

"""Saved results of the head-to-head comparison and the report built from them (no LM calls).

Each optimizer's outcome is one `OptimizerResult` (``<out>/<optimizer>/result.json``)
holding its per-item test records; test metrics and their bootstrap 95% confidence
intervals are recomputed from those records, so ``comparison.md`` can be rebuilt at any
time from the saved files alone.

Every figure names its LM and its n: each row gives the LMs it used (task, prompt,
reflection, and judge or source where the set-up has one), its LM calls, prompt /
completion / cached tokens, estimated cost in USD (`cost_cell`, LiteLLM's prices) and
wall time (optimization and test), how many test items
were scored out of how many, and how many of the optimization's metric calls were scored.
A test item the evaluator or the judge could not score, or whose generation failed, is
left out of the averages and counted, never averaged in as a zero.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from rich.table import Table
from scipy.stats import rankdata

from binaryeval_dspy.lm.pricing import (
    LOCAL_DISPLAY,
    format_usd,
    price_model_for_name,
    price_source,
    run_cost,
)
from binaryeval_dspy.optimizers.bineval_optimizer.human import pooled_spearman
from binaryeval_dspy.schemas.optimization_history import OptimizationHistory

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
    """Mean of the defined values with its CI; ``n`` defined values of ``total``."""
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


def _fmt(metric: MetricValue | None) -> str:
    if metric is None or metric.value is None:
        return "n/a"
    if metric.low is None:
        return f"{metric.value:.3f}"
    return f"{metric.value:.3f} [{metric.low:.3f}, {metric.high:.3f}]"


def _tokens(prompt: int | None, completion: int | None, cached: int | None, total: int) -> str:
    """``prompt / completion / cached``; older results hold only the total."""
    if prompt is None or completion is None:
        return f"{total} total (split not recorded)"
    return f"{prompt} / {completion} / {cached if cached is not None else 'n/a'}"


def _usd_range(values: list[float]) -> str:
    low, high = min(values), max(values)
    return format_usd(low) if math.isclose(low, high, rel_tol=1e-9, abs_tol=1e-12) else (
        f"{format_usd(low)}-{format_usd(high)}")


def cost_cell(config: dict[str, Any], result: OptimizerResult) -> str:
    """Estimated USD of the optimization and of the test evaluation, ``"$1.20 / $0.31"``.

    The saved token counts are not split by LM, so when the row's LMs (task, prompt,
    reflection, judge, source) have different prices the cell gives the range between
    pricing every token at the cheapest and at the dearest of them (``"$0.90-$3.10 / ..."``).
    ``unknown`` when one of them has no price in LiteLLM's map (a served model, an unknown
    id), or the token split was not recorded; ``0 (local)`` for the embedded model only.
    """
    models = {price_model_for_name(name) for name in row_lms(config, result).values() if name and name != "-"}
    cells = []
    for prompt, completion, cached in ((result.compile_prompt_tokens, result.compile_completion_tokens,
                                        result.compile_cached_tokens),
                                       (result.test_prompt_tokens, result.test_completion_tokens,
                                        result.test_cached_tokens)):
        if prompt is None or completion is None:
            cells.append("n/a")
            continue
        costs = [run_cost(prompt_tokens=prompt, completion_tokens=completion, cached_prompt_tokens=cached or 0,
                          model=model) for model in models]
        if not costs or any(c.status == "unknown" for c in costs):
            cells.append("unknown")
        elif all(c.status == "local" for c in costs):
            cells.append(LOCAL_DISPLAY)
        else:
            cells.append(_usd_range([c.usd or 0.0 for c in costs]))
    return " / ".join(cells)


def row_lms(config: dict[str, Any], result: OptimizerResult) -> dict[str, str]:
    """LM names by role for one row: the result's own ``lms``, else (older results) the
    task and prompt LMs from the result and the source LM from the config."""
    lms = dict(result.lms) or {"task": result.lm, "prompt": result.prompt_lm}
    if config.get("source_lm") and "source" not in lms:
        lms["source"] = str(config["source_lm"])
    return lms


def _lms_cell(lms: dict[str, str]) -> str:
    """``task: X; prompt: Y; reflection: Z`` (``-`` for a role the optimizer does not use),
    then any other role (judge, source)."""
    always = ["task", "prompt", "reflection"]
    cells = [f"{role}: {lms.get(role, '-')}" for role in always]
    cells += [f"{role}: {name}" for role, name in lms.items() if role not in always]
    return "; ".join(cells).replace("|", "/")


def _counts_cell(counts: dict[str, int] | None) -> str:
    if not counts:
        return "n/a"
    text = f"{counts.get('scored', 0)} / {counts.get('total', 0)}"
    extra = [f"{counts[k]} {k}" for k in ("unscored", "failed") if counts.get(k)]
    return text + (f" ({', '.join(extra)})" if extra else "")


def rows(config: dict[str, Any], results: list[OptimizerResult]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the comparison table.

    Per row: the test metrics (primary with its 95% CI), test items scored / n, the
    optimization metric's calls scored / n, LM calls, prompt / completion / cached
    tokens and wall time (optimization, then test), the LMs by role, the compiled
    prompt's characters and the notes.
    """
    kind, mode = config["setup"]["kind"], config["setup"]["mode"]
    metrics = [metrics_from_records(kind, r.test_records) for r in results]
    primary = primary_metric(kind, mode, metrics[0] if metrics else {})
    secondary = {"summeval": ["spearman", "human_agreement"] if mode == "cross_model" else ["human_agreement"],
                 "ifbench": ["strict_accuracy"] if primary == "loose_accuracy" else []}[kind]
    header = ["optimizer", f"test {primary} [95% CI]", *[f"test {s}" for s in secondary],
              "test items scored / n", "optimization metric calls scored / n", "LM calls (optimize / test)",
              "optimize tokens prompt / completion / cached", "test tokens prompt / completion / cached",
              "est. cost USD (optimize / test)", "wall time s (optimize / test)", "LMs", "prompt chars", "notes"]
    body = []
    for result, m in zip(results, metrics, strict=True):
        scored, total = scored_items(kind, result.test_records)
        body.append([
            result.optimizer, _fmt(m.get(primary)), *[_fmt(m.get(s)) for s in secondary],
            f"{scored} / {total}", _counts_cell(result.metric_counts),
            f"{result.compile_lm_calls} / {result.test_lm_calls}",
            _tokens(result.compile_prompt_tokens, result.compile_completion_tokens, result.compile_cached_tokens,
                    result.compile_tokens),
            _tokens(result.test_prompt_tokens, result.test_completion_tokens, result.test_cached_tokens,
                    result.test_tokens), cost_cell(config, result),
            f"{result.compile_seconds:.1f} / {result.test_seconds:.1f}", _lms_cell(row_lms(config, result)),
            str(result.prompt_chars), result.notes.replace("|", "/")[:120]])
    return header, body


def bineval_history_section(out_dir: Path) -> list[str]:
    """Markdown lines summarizing ``<out>/bineval/history.json`` per iteration (items scored
    / n per split, LM cost, the kept iteration and the selection rule); [] when absent or
    unreadable."""
    path = out_dir / "bineval" / "history.json"
    if not path.is_file():
        return []
    try:
        history = OptimizationHistory.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError:
        return []
    return ["## BinEval optimizer iterations", "", history.summary_markdown().rstrip("\n"), ""]


def comparison_table(config: dict[str, Any], results: list[OptimizerResult]) -> Table:
    """A rich table of the comparison (title names the LM)."""
    header, body = rows(config, results)
    table = Table(title=f"{config['setup']['kind']} / {config['setup']['mode']} - LM: {config['lm']}")
    for col in header:
        table.add_column(col)
    for row in body:
        table.add_row(*row)
    return table


def comparison_markdown(config: dict[str, Any], results: list[OptimizerResult], out_dir: Path | None = None) -> str:
    """The ``comparison.md`` text: set-up, LMs, split, budgets, the table and notes; with
    `out_dir`, also the BinEval optimizer's iterations from its saved history."""
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
        ("- Cost columns give optimization, then the test evaluation: LM calls that reached a model, on every"
         " thread; prompt / completion tokens, and prompt tokens served from the provider's prompt cache; wall"
         " time. Calls answered from DSPy's cache are not counted."),
        ("- Estimated cost in USD from those tokens at the row's LMs' prices, " + price_source() + "; the tokens"
         " are not split by LM, so a row whose LMs differ in price gives the range from all-cheapest to"
         " all-dearest. 'unknown' when an LM has no price (a served model, an id the map lacks);"
         " '0 (local)' for the embedded model."),
        ("- 'test items scored / n': test items the test metric could use; an item the evaluator or judge could"
         " not score, or whose generation failed, is left out of the averages, never counted as 0."
         " 'optimization metric calls scored / n': calls of the optimized metric during optimization (BinEval"
         " optimizer: its item evaluations over all iterations); an unscored call returned the metric's fallback"
         " score 0.0 to the optimizer. Calls DSPy itself failed (the program raised) never reach the metric."),
        ("- LMs per row: task = the program being optimized; prompt = proposals / lessons / rules; reflection ="
         " GEPA's reflection LM; judge = the BinEval metric's LM; source = the reference evaluator."),
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
    if out_dir is not None:
        lines[lines.index("## Budgets"):lines.index("## Budgets")] = bineval_history_section(out_dir)
    lines += [f"- {note}" for note in config.get("notes", [])]
    missing = [name for name in config["optimizers"] if name not in {r.optimizer for r in results}]
    if missing:
        lines.append(f"- Not finished (rerun the same command to run them): {', '.join(missing)}.")
    return "\n".join(lines) + "\n"


def write_comparison(out_dir: Path) -> Path:
    """Rebuild ``comparison.md`` from the saved results; returns its path."""
    config = json.loads((out_dir / "config.json").read_text(encoding="utf-8"))
    path = out_dir / "comparison.md"
    path.write_text(comparison_markdown(config, load_results(out_dir), out_dir), encoding="utf-8")
    return path

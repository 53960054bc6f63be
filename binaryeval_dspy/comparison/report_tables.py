"""The comparison table: one row per optimizer, with its test metrics, costs and LMs (no LM calls).

Every figure names its LM and its n: each row gives the LMs it used (task, prompt,
reflection, and judge or source where the set-up has one), its LM calls, prompt /
completion / cached tokens, estimated cost in USD (`cost_cell`, LiteLLM's prices) and
wall time (optimization and test), how many test items
were scored out of how many, and how many of the optimization's metric calls were scored.
"""

from __future__ import annotations

import math
from typing import Any

from rich.table import Table

from binaryeval_dspy.comparison.results import (
    MetricValue,
    OptimizerResult,
    metrics_from_records,
    primary_metric,
    scored_items,
)
from binaryeval_dspy.cost.pricing import (
    LOCAL_DISPLAY,
    format_usd,
    price_model_for_name,
    run_cost,
)


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
    return "; ".join(cells)


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
    if metrics and "label_kappa" in metrics[0]:  # question-level labels: agreement with them, held out
        secondary = [*secondary, "label_kappa", "label_accuracy"]
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
            str(result.prompt_chars), result.notes[:120]])
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

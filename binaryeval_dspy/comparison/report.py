"""The head-to-head comparison's report, ``comparison.md``, rebuilt from the saved results (no LM calls).

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

The saved results and their metrics live in `binaryeval_dspy.comparison.results`, the
table's rows and cells in `binaryeval_dspy.comparison.report_tables`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from binaryeval_dspy.comparison.report_tables import rows
from binaryeval_dspy.comparison.results import OptimizerResult, load_results
from binaryeval_dspy.cost.price_map import price_source
from binaryeval_dspy.render import BulletList, Document, MarkdownText, Section, to_markdown
from binaryeval_dspy.render import Table as DocumentTable
from binaryeval_dspy.schemas.optimization_history import OptimizationHistory

__all__ = [
    "OPRO_NOTE",
    "bineval_history_section",
    "comparison_markdown",
    "write_comparison",
]

OPRO_NOTE = (
    "COPRO is DSPy's OPRO-style optimizer and stands in for OPRO here. It differs from OPRO "
    "proper (Yang et al., 2023): OPRO keeps one meta-prompt holding a growing, score-sorted "
    "history of past instructions (with task examples) and asks the LM for new instructions "
    "from that whole trajectory; COPRO first proposes `breadth` variants of the starting "
    "instruction, scores each on the training set, then for `depth` rounds shows the proposer "
    "the best attempts with their scores, per predictor, and also rewrites the output-field prefix."
)


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


def _history_section(out_dir: Path) -> Section | None:
    """The BinEval optimizer's iterations as a report section; None when absent or unreadable."""
    lines = bineval_history_section(out_dir)
    if not lines:
        return None
    return Section(heading=lines[0].removeprefix("## "), blocks=[MarkdownText(markdown=lines[2])])



def comparison_markdown(config: dict[str, Any], results: list[OptimizerResult], out_dir: Path | None = None) -> str:
    """The ``comparison.md`` text: set-up, LMs, split, budgets, the table and notes; with
    `out_dir`, also the BinEval optimizer's iterations from its saved history."""
    header, body = rows(config, results)
    setup = config["setup"]
    about = [
        f"Task LM: **{config['lm']}**; proposal / lesson / reflection LM: **{config['prompt_lm']}**"
        + (f"; source evaluator LM: **{config['source_lm']}**" if config.get("source_lm") else ""),
        f"Split sizes: {setup['sizes']} (seed {config.get('seed')}; limit {config.get('limit')})",
        f"Metric every optimizer optimized: {config['metric']}",
        f"Test metric: {config['test_metric']}; 95% CIs by percentile bootstrap over test items (1,000 resamples).",
        ("Cost columns give optimization, then the test evaluation: LM calls that reached a model, on every"
         " thread; prompt / completion tokens, and prompt tokens served from the provider's prompt cache; wall"
         " time. Calls answered from DSPy's cache are not counted."),
        ("Estimated cost in USD from those tokens at the row's LMs' prices, " + price_source() + "; the tokens"
         " are not split by LM, so a row whose LMs differ in price gives the range from all-cheapest to"
         " all-dearest. 'unknown' when an LM has no price (a served model, an id the map lacks);"
         " '0 (local)' for the embedded model."),
        ("'test items scored / n': test items the test metric could use; an item the evaluator or judge could"
         " not score, or whose generation failed, is left out of the averages, never counted as 0."
         " 'optimization metric calls scored / n': calls of the optimized metric during optimization (BinEval"
         " optimizer: its item evaluations over all iterations); an unscored call returned the metric's fallback"
         " score 0.0 to the optimizer. Calls DSPy itself failed (the program raised) never reach the metric."),
        ("LMs per row: task = the program being optimized; prompt = proposals / lessons / rules; reflection ="
         " GEPA's reflection LM; judge = the BinEval metric's LM; source = the reference evaluator."),
    ]
    sections = []
    history = _history_section(out_dir) if out_dir is not None else None
    if history is not None:
        sections.append(history)
    notes = [OPRO_NOTE, *config.get("notes", [])]
    missing = [name for name in config["optimizers"] if name not in {r.optimizer for r in results}]
    if missing:
        notes.append(f"Not finished (rerun the same command to run them): {', '.join(missing)}.")
    sections += [
        Section(heading="Budgets", blocks=[BulletList(items=[f"{r.optimizer}: {json.dumps(r.settings, sort_keys=True)}"
                                                              for r in results])]),
        Section(heading="Notes", blocks=[BulletList(items=notes)]),
    ]
    document = Document(title=f"Optimizer comparison: {setup['kind']} ({setup['mode']})",
                        intro=[BulletList(items=about), DocumentTable(header=header, rows=body, align="left")],
                        sections=sections)
    return to_markdown(document)


def write_comparison(out_dir: Path) -> Path:
    """Rebuild ``comparison.md`` from the saved results; returns its path."""
    config = json.loads((out_dir / "config.json").read_text(encoding="utf-8"))
    path = out_dir / "comparison.md"
    path.write_text(comparison_markdown(config, load_results(out_dir), out_dir), encoding="utf-8")
    return path

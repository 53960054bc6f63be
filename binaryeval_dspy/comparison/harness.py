"""The resumable head-to-head run: every optimizer on the same program, split and metric.

Layout of the output directory::

    config.json                 set-up, split ids, LMs, budgets, optimizer list
    source_verdicts.jsonl       (cross-model) the source evaluator's verdicts, shared
    questions/<item>.json       (IFBench) the binary questions of each prompt, shared
    <optimizer>/program.json    the compiled program (`program.save`)
    <optimizer>/history.json    what the optimizer did (BinEval: its iteration history)
    <optimizer>/result.json     costs, compiled instructions and per-item test records
    comparison.md               the table, rebuilt from the result files

An optimizer's result is written as soon as it finishes; a rerun skips optimizers that
have a result and retries the others. Resuming with another split, set-up or LM is refused.
"""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from binaryeval_dspy.comparison.report import (
    OptimizerResult,
    load_results,
    metrics_from_records,
    write_comparison,
)
from binaryeval_dspy.comparison.runners import RUNNERS, Budgets, budgets_dict
from binaryeval_dspy.comparison.setups import ComparisonSetup
from binaryeval_dspy.errors import BinEvalError, RunStateError
from binaryeval_dspy.optimizers.bineval_optimizer.prompt_slots import instruction_chars
from binaryeval_dspy.runs.usage_meter import measure_usage

logger = logging.getLogger(__name__)

OPTIMIZERS: tuple[str, ...] = ("bineval", "mipro", "copro", "gepa")


def _check_or_write_config(out_dir: Path, config: dict[str, Any]) -> dict[str, Any]:
    path = out_dir / "config.json"
    if path.is_file():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(old, dict) or not isinstance(old.get("optimizers"), list):
                raise ValueError("expected an object with an 'optimizers' list")
        except ValueError as exc:  # includes JSON and UTF-8 decoding errors
            raise RunStateError(f"{path} is damaged ({exc}); the results under {out_dir} are kept. Fix: restore "
                                "config.json, or use another --out directory.") from exc
        # "starting_point" is compared only when recorded (comparisons made before it was added resume)
        keys = ("setup", "lm", "prompt_lm", "source_lm", "budgets", "test_metric",
                *(("starting_point",) if "starting_point" in old else ()))
        for key in keys:
            if old.get(key) != config.get(key):
                raise RunStateError(
                    f"{out_dir} holds a comparison with another {key} ({str(old.get(key))[:120]!r}); "
                    "use another --out directory, or the same settings to resume"
                )
        config["optimizers"] = list(dict.fromkeys([*old["optimizers"], *config["optimizers"]]))
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return config


def run_comparison(
    setup: ComparisonSetup,
    optimizers: Sequence[str],
    out_dir: str | Path,
    *,
    lm_name: str,
    prompt_lm_name: str,
    source_lm_name: str | None = None,
    budgets: Budgets | None = None,
    metric_description: str = "",
    test_description: str = "",
    notes: Sequence[str] = (),
    limit: int | None = None,
    on_status: Callable[[str, str], None] | None = None,
) -> tuple[dict[str, Any], list[OptimizerResult], dict[str, str]]:
    """Run the unoptimized baseline and each optimizer, saving each result as it finishes.

    Args:
        setup: the set-up (program, split, metric, test).
        optimizers: names from `OPTIMIZERS`, in run order.
        out_dir: the comparison directory (created; resumed if it exists).
        lm_name, prompt_lm_name, source_lm_name: LM names for the report.
        budgets: each optimizer's budget (defaults: `Budgets()`).
        metric_description, test_description, notes: text for ``comparison.md``.
        limit: the per-split item cap used (for the report).
        on_status: called with (optimizer, status) where status is "skipped (done)",
            "running", "done" or "failed: ...".

    Returns:
        (config, results of every finished optimizer, failures by optimizer name).

    Raises:
        BinEvalError: an unknown optimizer name (before any LM call).
        RunStateError: `out_dir` holds a comparison with another set-up, LM or budget.
    """
    unknown = [name for name in optimizers if name not in OPTIMIZERS]
    if unknown:
        raise BinEvalError(f"unknown optimizer(s) {unknown}; choose from {', '.join(OPTIMIZERS)}")
    out_dir = Path(out_dir)
    budgets = budgets or Budgets()
    status = on_status or (lambda name, message: None)
    config = _check_or_write_config(out_dir, {
        "setup": setup.describe(), "starting_point": setup.starting_point(), "lm": lm_name,
        "prompt_lm": prompt_lm_name, "source_lm": source_lm_name,
        "budgets": budgets_dict(budgets), "optimizers": ["unoptimized", *optimizers], "seed": budgets.seed,
        "limit": limit, "metric": metric_description, "test_metric": test_description, "notes": list(notes),
    })
    status("shared preparation", "running")
    with measure_usage() as meter:
        preparation_notes = setup.prepare(out_dir)
    status("shared preparation", f"done ({meter.lm_calls} LM calls)")
    if preparation_notes:
        config["notes"] = list(dict.fromkeys([*config["notes"], *preparation_notes]))
        (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    failures: dict[str, str] = {}
    for name in config["optimizers"]:
        folder = out_dir / name
        if (folder / "result.json").is_file():
            status(name, "skipped (done)")
            continue
        folder.mkdir(parents=True, exist_ok=True)
        status(name, "running")
        try:
            result = _run_one(name, setup, budgets, folder, lm_name=lm_name, prompt_lm_name=prompt_lm_name)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # one optimizer's crash must not lose the others' results
            failures[name] = f"{type(exc).__name__}: {exc}"
            (folder / "error.txt").write_text(traceback.format_exc(), encoding="utf-8")
            logger.error("%s failed: %s", name, exc)
            status(name, f"failed: {failures[name][:200]}")
            continue
        (folder / "result.json").write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
        (folder / "error.txt").unlink(missing_ok=True)
        write_comparison(out_dir)
        status(name, "done")
    write_comparison(out_dir)
    return config, load_results(out_dir), failures


def _run_one(name: str, setup: ComparisonSetup, budgets: Budgets, folder: Path, *, lm_name: str,
             prompt_lm_name: str) -> OptimizerResult:
    with measure_usage() as compile_meter:
        output = RUNNERS[name](setup, budgets, folder)
    program = output.program
    program.save(str(folder / "program.json"))
    (folder / "history.json").write_text(json.dumps(output.history, indent=2, default=str) + "\n", encoding="utf-8")
    with measure_usage() as test_meter:
        records = setup.test(program)
    return OptimizerResult(
        optimizer=name, lm=lm_name, prompt_lm=prompt_lm_name,
        compile_lm_calls=compile_meter.lm_calls, compile_tokens=compile_meter.total_tokens,
        compile_seconds=round(compile_meter.seconds, 2), compile_cached_tokens=compile_meter.cached_prompt_tokens,
        test_lm_calls=test_meter.lm_calls, test_tokens=test_meter.total_tokens,
        test_seconds=round(test_meter.seconds, 2), prompt_chars=instruction_chars(program),
        demos=sum(len(p.demos) for _, p in program.named_predictors()),
        instructions={n: p.signature.instructions for n, p in program.named_predictors()},
        settings=output.settings, notes=output.notes, test_records=records,
        metrics=metrics_from_records(setup.kind, records),
    )

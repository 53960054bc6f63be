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

DSPy's SIMBA runs here too (``simba``, the optimizer MLflow's judge alignment uses by
default): `run_simba` with a metric-call budget mapped onto SIMBA's ``max_steps``,
``bsize`` and ``num_candidates`` by `simba_plan`.
"""

from __future__ import annotations

import json
import logging
import threading
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy

from binaryeval_dspy.comparison.report import write_comparison
from binaryeval_dspy.comparison.results import OptimizerResult, load_results, metrics_from_records
from binaryeval_dspy.comparison.runners import (
    RUNNERS,
    Budgets,
    Runner,
    RunnerOutput,
    budgets_dict,
    metric_counts,
    runner_lms,
)
from binaryeval_dspy.comparison.setups import ComparisonSetup
from binaryeval_dspy.cost.usage_meter import measure_usage
from binaryeval_dspy.data.json_files import read_json_file
from binaryeval_dspy.errors import BinEvalError, InputError, RunStateError
from binaryeval_dspy.optimizers.bineval_optimizer import instruction_chars

logger = logging.getLogger(__name__)

OPTIMIZERS: tuple[str, ...] = ("bineval", "mipro", "copro", "gepa", "simba")

# ====================================================================== SIMBA
#: SIMBA's own defaults (DSPy 3.4): mini-batch size and candidates per step.
SIMBA_DEFAULT_BSIZE = 32
SIMBA_DEFAULT_CANDIDATES = 6

SIMBA_NOTE = (
    "SIMBA is DSPy's Stochastic Introspective Mini-Batch Ascent, the optimizer MLflow's judge alignment uses "
    "by default. Each step runs a mini-batch of `bsize` training items under `num_candidates` copies of the "
    "task LM at temperature 1.0, asks the prompt LM for a rule contrasting a better and a worse run of the "
    "same item and appends it to the instructions (max_demos=0: no few-shot demos, as for MIPROv2), and scores "
    "the new candidates on the same mini-batch; the step winners are finally compared on the whole training "
    "set (SIMBA takes no validation set). Its metric-call budget B is mapped onto max_steps, bsize and "
    "num_candidates so that SIMBA's worst case, max_steps x bsize x (num_candidates + min(num_candidates + 1, "
    "bsize)) + min(num_candidates + 1, max_steps + 1) x |train|, stays within B."
)


@dataclass
class ComparisonBudgets(Budgets):
    """`Budgets` plus SIMBA's.

    Attributes:
        simba_metric_calls: SIMBA's metric-call budget (one call = one program run on one
            item, scored), mapped onto its settings by `simba_plan`. None (and a plain
            `Budgets`): GEPA's budget, raised to SIMBA's smallest run when below it (see
            `simba_budget`).
    """

    simba_metric_calls: int | None = None


def simba_metric_call_bound(*, max_steps: int, bsize: int, num_candidates: int, train_size: int) -> int:
    """The most metric calls `dspy.SIMBA` (DSPy 3.4) makes with these settings.

    Per step: ``bsize x num_candidates`` sampled runs, then at most
    ``min(num_candidates + 1, bsize)`` new candidates (one per mini-batch item at most)
    each scored on the ``bsize`` items. At the end: at most
    ``min(num_candidates + 1, max_steps + 1)`` distinct step winners (the student
    included), each scored on the whole training set.
    """
    per_step = bsize * (num_candidates + min(num_candidates + 1, bsize))
    final = min(num_candidates + 1, max_steps + 1) * train_size
    return max_steps * per_step + final


@dataclass(frozen=True)
class SimbaPlan:
    """SIMBA's settings for a metric-call budget (see `simba_plan`)."""

    metric_calls_budget: int
    train_size: int
    max_steps: int
    bsize: int
    num_candidates: int

    @property
    def metric_call_bound(self) -> int:
        """The most metric calls SIMBA can make with this plan (never above the budget)."""
        return simba_metric_call_bound(max_steps=self.max_steps, bsize=self.bsize,
                                       num_candidates=self.num_candidates, train_size=self.train_size)


def simba_plan(metric_calls: int, train_size: int) -> SimbaPlan:
    """Map a metric-call budget onto SIMBA's ``max_steps``, ``bsize`` and ``num_candidates``.

    SIMBA takes no budget of its own; its cost is set by three numbers (see
    `simba_metric_call_bound`). The rule, like GEPA's ``max_metric_calls``, spends the
    budget on optimization steps:

    1. ``bsize = min(32, |train|)`` (SIMBA asserts ``|train| >= bsize``) and
       ``num_candidates = 6``, SIMBA's defaults; ``max_steps`` = as many steps as fit.
    2. If not one step fits: lower ``num_candidates`` (down to 2, the fewest that can
       show a better and a worse run of an item), then ``bsize`` (down to 1), until one
       step fits; ``max_steps`` = as many steps as then fit.

    Raises:
        InputError: an empty training set, or a budget below one step at ``bsize`` 1 and
            2 candidates (``3 + 2 x |train|`` metric calls: the final selection alone
            scores two programs on the whole training set).
    """
    if train_size < 1:
        raise InputError("SIMBA needs at least one training item", field="`limit`",
                         fix="use a split with training items.")

    def steps_within(bsize: int, num_candidates: int) -> int:
        steps = 0
        while simba_metric_call_bound(max_steps=steps + 1, bsize=bsize, num_candidates=num_candidates,
                                      train_size=train_size) <= metric_calls:
            steps += 1
        return steps

    top = min(SIMBA_DEFAULT_BSIZE, train_size)
    shapes = [(top, c) for c in range(SIMBA_DEFAULT_CANDIDATES, 1, -1)] + [(b, 2) for b in range(top - 1, 0, -1)]
    for bsize, num_candidates in shapes:
        steps = steps_within(bsize, num_candidates)
        if steps >= 1:
            return SimbaPlan(metric_calls, train_size, steps, bsize, num_candidates)
    minimum = simba_minimum(train_size)
    raise InputError(
        f"a SIMBA budget of {metric_calls} metric calls is below SIMBA's smallest run on {train_size} training "
        f"items ({minimum}: one step on one item with 2 candidates, then 2 programs scored on the whole training "
        "set)", field="`simba_metric_calls`",
        fix=f"pass `simba_metric_calls` {minimum} or more, or fewer training items (`limit`).")


def simba_minimum(train_size: int) -> int:
    """SIMBA's smallest run in metric calls: one step on one item with 2 candidates, then two
    programs scored on the whole training set (``3 + 2 x train_size``)."""
    return simba_metric_call_bound(max_steps=1, bsize=1, num_candidates=2, train_size=train_size)


def simba_budget(budgets: Budgets, train_size: int) -> tuple[int, str]:
    """SIMBA's metric-call budget and where it comes from.

    ``simba_metric_calls`` when given (a `ComparisonBudgets`); otherwise GEPA's budget, in
    the same unit, raised to `simba_minimum` when below it (GEPA would overrun such a
    budget too: it checks it only between iterations).
    """
    given = getattr(budgets, "simba_metric_calls", None)
    if given is not None:
        return int(given), "`simba_metric_calls`"
    minimum = simba_minimum(train_size)
    if budgets.gepa_metric_calls >= minimum:
        return budgets.gepa_metric_calls, "GEPA's budget (`gepa_metric_calls`)"
    return minimum, (f"GEPA's budget ({budgets.gepa_metric_calls}) raised to SIMBA's smallest run on "
                     f"{train_size} training items")


class _CountedMetric:
    """The set-up's metric called as SIMBA calls it, ``metric(example, prediction)``, counted.

    It returns the metric's ``dspy.Prediction(score, feedback)`` unchanged: SIMBA reads
    ``score`` and hands the other fields (the feedback) to the rule-writing LM.
    """

    def __init__(self, metric: Callable[..., Any]) -> None:
        self.metric = metric
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, example: dspy.Example, prediction: Any, trace: Any = None) -> Any:
        with self._lock:
            self.calls += 1
        return self.metric(example, prediction)


def run_simba(setup: ComparisonSetup, budgets: Budgets, out_dir: Path) -> RunnerOutput:
    """DSPy's SIMBA, instruction-only (``max_demos=0``), within a metric-call budget.

    It scores candidates on the training set (SIMBA takes no validation set), samples
    with temperature-1.0 copies of the task LM, and writes rules with the prompt LM.
    """
    budget, source = simba_budget(budgets, len(setup.split.train))
    plan = simba_plan(budget, len(setup.split.train))
    optimized_metric = setup.metric()
    metric = _CountedMetric(optimized_metric)
    prompt_model = setup.prompt_lm.lm if setup.prompt_lm is not None else None
    optimizer = dspy.SIMBA(metric=metric, bsize=plan.bsize, num_candidates=plan.num_candidates,
                           max_steps=plan.max_steps, max_demos=0, prompt_model=prompt_model,
                           num_threads=setup.num_threads)
    compiled = optimizer.compile(setup.student(), trainset=setup.split.train, seed=budgets.seed)
    instructions = {n: p.signature.instructions for n, p in compiled.named_predictors()}
    candidates = [{"score": c.get("score"),
                   "instructions": {n: p.signature.instructions for n, p in c["program"].named_predictors()}}
                  for c in getattr(compiled, "candidate_programs", []) or [] if "program" in c]
    settings = {"metric_calls_budget": plan.metric_calls_budget, "budget_from": source,
                "max_steps": plan.max_steps, "bsize": plan.bsize,
                "num_candidates": plan.num_candidates, "max_demos": 0, "metric_call_bound": plan.metric_call_bound,
                "metric_calls": metric.calls, "scored_on": "train (SIMBA takes no valset)"}
    best = candidates[0]["score"] if candidates else None
    best_text = f"{best:.3f}" if isinstance(best, (int, float)) else "n/a"
    note = (f"{plan.max_steps} step(s), {plan.bsize} item(s) x {plan.num_candidates} candidates; {metric.calls} of "
            f"{plan.metric_calls_budget} metric calls; best train score {best_text} (0-1)")
    trial_logs = getattr(compiled, "trial_logs", None) or {}
    history = {"plan": settings, "trial_logs": {str(k): v for k, v in trial_logs.items()},
               "candidates": candidates, "instructions": instructions}
    # SIMBA writes its rules with the prompt LM (else the configured task LM): the default roles.
    return RunnerOutput(compiled, settings, note, history, metric_counts=metric_counts(optimized_metric))


#: Every runner the harness dispatches to: `runners.RUNNERS` plus SIMBA.
ALL_RUNNERS: dict[str, Runner] = {**RUNNERS, "simba": run_simba}


def _check_or_write_config(out_dir: Path, config: dict[str, Any]) -> dict[str, Any]:
    path = out_dir / "config.json"
    if path.is_file():
        fix = f"restore config.json, or use another `out_dir` (the results under {out_dir} are kept)."
        try:
            old = read_json_file(path, what="comparison config", fix=fix)
        except InputError as exc:  # a run-written file: resuming is what fails
            raise RunStateError(f"the comparison's config.json is damaged: {exc}") from exc
        if not isinstance(old, dict) or not isinstance(old.get("optimizers"), list):
            raise RunStateError(f"{path} is damaged; the results under {out_dir} are kept",
                                expected="an object with an 'optimizers' list",
                                received=type(old).__name__ if not isinstance(old, dict)
                                else f"an object whose 'optimizers' is {type(old.get('optimizers')).__name__}",
                                fix=fix)
        # "starting_point" is compared only when recorded (comparisons made before it was added resume)
        keys = ("setup", "lm", "prompt_lm", "source_lm", "budgets", "test_metric",
                *(("starting_point",) if "starting_point" in old else ()))
        new_budgets = config.get("budgets")
        if (isinstance(old.get("budgets"), dict) and isinstance(new_budgets, dict)
                and "simba_metric_calls" in new_budgets):
            # a comparison made before SIMBA joined ran nothing that depends on SIMBA's budget
            old["budgets"] = {"simba_metric_calls": new_budgets["simba_metric_calls"], **old["budgets"]}
        for key in keys:
            if old.get(key) != config.get(key):
                raise RunStateError(
                    f"{out_dir} holds a comparison with another {key} ({str(old.get(key))[:120]!r}); "
                    "use another `out_dir`, or the same settings to resume"
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
        budgets: each optimizer's budget (defaults: `ComparisonBudgets()`; a plain
            `Budgets` gives SIMBA GEPA's metric-call budget, see `simba_budget`).
        metric_description, test_description, notes: text for ``comparison.md``.
        limit: the per-split item cap used (for the report).
        on_status: called with (optimizer, status) where status is "skipped (done)",
            "running", "done" or "failed: ...".

    Returns:
        (config, results of every finished optimizer, failures by optimizer name).

    Raises:
        BinEvalError: an unknown optimizer name (before any LM call).
        InputError: ``simba`` with a budget below SIMBA's smallest run (before any LM call).
        RunStateError: `out_dir` holds a comparison with another set-up, LM or budget.
    """
    unknown = [name for name in optimizers if name not in OPTIMIZERS]
    if unknown:
        raise BinEvalError(f"unknown optimizer(s) {unknown}; choose from {', '.join(OPTIMIZERS)}")
    out_dir = Path(out_dir)
    budgets = budgets or ComparisonBudgets()
    if "simba" in optimizers:  # a budget SIMBA cannot keep is refused before any LM call
        simba_plan(simba_budget(budgets, len(setup.split.train))[0], len(setup.split.train))
    status = on_status or (lambda name, message: None)
    config = _check_or_write_config(out_dir, {
        "setup": setup.describe(), "starting_point": setup.starting_point(), "lm": lm_name,
        "prompt_lm": prompt_lm_name, "source_lm": source_lm_name,
        "budgets": {**budgets_dict(budgets), "simba_metric_calls": simba_budget(budgets, len(setup.split.train))[0]},
        "optimizers": ["unoptimized", *optimizers], "seed": budgets.seed,
        "limit": limit, "metric": metric_description, "test_metric": test_description, "notes": list(notes),
    })
    status("shared preparation", "running")
    with measure_usage() as meter:
        preparation_notes = setup.prepare(out_dir)
    if "simba" in config["optimizers"]:
        preparation_notes = [*preparation_notes, SIMBA_NOTE]
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
        output = ALL_RUNNERS[name](setup, budgets, folder)
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
        compile_prompt_tokens=compile_meter.prompt_tokens, compile_completion_tokens=compile_meter.completion_tokens,
        test_prompt_tokens=test_meter.prompt_tokens, test_completion_tokens=test_meter.completion_tokens,
        test_cached_tokens=test_meter.cached_prompt_tokens, metric_counts=getattr(output, "metric_counts", None),
        lms=runner_lms(setup, lm_name, prompt_lm_name, getattr(output, "lms", None)),
    )

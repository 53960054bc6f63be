"""One function per optimizer in the comparison: same student, same split, same metric.

Each runner compiles ``setup.student()`` and returns the compiled program, the settings
it ran with, a note and a JSON-ready history. DSPy quirks handled here: COPRO takes no
validation set (it scores candidates on the training set); MIPROv2 needs optuna (the
``mipro`` extra) and, with ``auto=None``, both ``num_candidates`` and ``num_trials``;
GEPA needs exactly one budget (``max_metric_calls`` here), a ``reflection_lm`` and the
five-argument metric. MIPROv2 runs instruction-only (no few-shot demos) so that every
optimizer changes the same thing: the instructions.

Each runner also reports which LM plays which role (`RunnerOutput.lms`, resolved by
`runner_lms`) and how many of the optimized metric's calls were scored, unscored or
failed during optimization (`RunnerOutput.metric_counts`, read from the metric's own
counters: an unscored call returned the metric's fallback score to the optimizer).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import dspy

from binaryeval_dspy.comparison.evaluator_metrics import float_metric
from binaryeval_dspy.comparison.setups import ComparisonSetup
from binaryeval_dspy.errors import BinEvalError
from binaryeval_dspy.schemas.optimization_history import OptimizationHistory


@dataclass
class Budgets:
    """How much each optimizer may do (defaults are small; the paper's T is 5).

    Attributes:
        bineval_iterations: T, the most prompt updates of the BinEval optimizer.
        bineval_max_lessons: lesson memory size (paper: 10).
        bineval_max_prompt_chars: prompt length cap of the BinEval optimizer.
        mipro_candidates: MIPROv2 instruction candidates.
        mipro_trials: MIPROv2 Bayesian-search trials.
        copro_breadth: COPRO candidates per round (> 1).
        copro_depth: COPRO rounds.
        gepa_metric_calls: GEPA's metric-call budget.
        seed: seed passed to the optimizers that take one.
    """

    bineval_iterations: int = 5
    bineval_max_lessons: int = 10
    bineval_max_prompt_chars: int = 4000
    mipro_candidates: int = 3
    mipro_trials: int = 4
    copro_breadth: int = 3
    copro_depth: int = 2
    gepa_metric_calls: int = 40
    seed: int = 42


@dataclass
class RunnerOutput:
    """What a runner hands back to the harness.

    Attributes:
        program: the compiled program.
        settings: the optimizer's budget and settings (JSON-ready).
        notes: stop reason or other remarks.
        history: what the optimizer did (JSON-ready).
        lms: LM roles this optimizer adds or drops, for `runner_lms`: role -> an LM name,
            ``"@task"`` / ``"@prompt"`` (the comparison's task / prompt LM), or None
            (the role is not used by this optimizer).
        metric_counts: the optimized metric's calls during optimization (``scored``,
            ``unscored``, ``failed``, ``total``), when the runner could read them.
    """

    program: dspy.Module
    settings: dict[str, Any]
    notes: str
    history: dict[str, Any]
    lms: dict[str, str | None] = field(default_factory=dict)
    metric_counts: dict[str, int] | None = None


Runner = Callable[[ComparisonSetup, Budgets, Path], RunnerOutput]


def _instructions(program: dspy.Module) -> dict[str, str]:
    return {name: p.signature.instructions for name, p in program.named_predictors()}


def _prompt_model(setup: ComparisonSetup) -> dspy.LM | None:
    return setup.prompt_lm.lm if setup.prompt_lm is not None else None


def metric_counts(metric: Any) -> dict[str, int] | None:
    """The metric's ``counts().as_dict()`` (`CountingMetric`), or None for a metric without counters."""
    counts = getattr(metric, "counts", None)
    return counts().as_dict() if callable(counts) else None


def history_counts(history: OptimizationHistory) -> dict[str, int]:
    """The BinEval optimizer's item evaluations over all iterations and splits, by outcome."""
    out = {"scored": 0, "unscored": 0, "failed": 0, "total": 0}
    for record in history.iterations:
        for counts in record.items.values():
            out["scored"] += counts.scored
            out["unscored"] += counts.unscored
            out["failed"] += counts.failed
            out["total"] += counts.total
    return out


def runner_lms(setup: ComparisonSetup, task: str, prompt: str,
               roles: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """LM names by role for one optimizer's row of the report.

    Starts from ``task`` and ``prompt``, adds the set-up's ``judge`` (generation: the
    BinEval metric's LM; its configured LM is the task LM) and ``source`` (cross-model,
    an LM or "precomputed verdicts"), then applies the runner's `roles` (see
    `RunnerOutput.lms`: ``"@task"`` / ``"@prompt"`` aliases, None drops the role).

    Returns:
        role -> LM name, e.g. ``{"task": ..., "prompt": ..., "reflection": ..., "judge": ...}``.
    """
    alias = {"@task": task, "@prompt": prompt}
    lms: dict[str, str] = {"task": task, "prompt": prompt}
    if hasattr(setup, "judge_lm"):
        judge = setup.judge_lm
        lms["judge"] = judge.name if judge is not None else task
    if getattr(setup, "mode", "") == "cross_model":
        source = getattr(setup, "source_lm", None)
        lms["source"] = source.name if source is not None else "precomputed verdicts"
    for role, name in (roles or {}).items():
        if name is None:
            lms.pop(role, None)
        else:
            lms[role] = alias.get(name, name)
    return lms


def run_unoptimized(setup: ComparisonSetup, budgets: Budgets, out_dir: Path) -> RunnerOutput:
    """The student as it starts: the reference row of the table."""
    program = setup.student()
    return RunnerOutput(program, {}, "starting program, not optimized", {"instructions": _instructions(program)},
                        lms={"prompt": None})


def run_bineval(setup: ComparisonSetup, budgets: Budgets, out_dir: Path) -> RunnerOutput:
    """`BinEvalOptimizer` in the set-up's mode; its own history goes to ``history.json``."""
    settings = {"max_iterations": budgets.bineval_iterations, "max_lessons": budgets.bineval_max_lessons,
                "max_prompt_chars": budgets.bineval_max_prompt_chars}
    optimizer = setup.bineval_optimizer(max_iterations=budgets.bineval_iterations,
                                        max_lessons=budgets.bineval_max_lessons,
                                        max_prompt_chars=budgets.bineval_max_prompt_chars)
    compiled = optimizer.compile(setup.student(), trainset=setup.split.train, valset=setup.split.val or None,
                                 history_path=out_dir / "history.json")
    history = compiled.optimization_history
    note = f"{history.stop_reason}; kept iteration {history.best_iteration} of {len(history.iterations) - 1}"
    counts = history_counts(history)
    if counts["unscored"] or counts["failed"]:
        note += f"; {counts['unscored'] + counts['failed']} item evaluation(s) not scored"
    return RunnerOutput(compiled, {"mode": setup.mode, **settings}, note, history.model_dump(mode="json"),
                        metric_counts=counts)


def run_mipro(setup: ComparisonSetup, budgets: Budgets, out_dir: Path) -> RunnerOutput:
    """DSPy's MIPROv2, instruction-only, validation set for trials, no minibatching."""
    try:
        import optuna  # noqa: F401  (MIPROv2 imports it lazily and fails late without it)
    except ImportError as exc:
        raise BinEvalError("MIPROv2 needs optuna: pip install 'binaryeval-dspy[mipro]'") from exc
    from dspy.teleprompt import MIPROv2

    settings = {"num_candidates": budgets.mipro_candidates, "num_trials": budgets.mipro_trials,
                "max_bootstrapped_demos": 0, "max_labeled_demos": 0, "minibatch": False}
    metric = setup.metric()
    optimizer = MIPROv2(metric=float_metric(metric), prompt_model=_prompt_model(setup), auto=None,
                        num_candidates=budgets.mipro_candidates, max_bootstrapped_demos=0, max_labeled_demos=0,
                        num_threads=setup.num_threads, seed=budgets.seed, verbose=False)
    compiled = optimizer.compile(setup.student(), trainset=setup.split.train, valset=setup.split.val or None,
                                 num_trials=budgets.mipro_trials, minibatch=False,
                                 view_data_batch_size=max(1, min(3, len(setup.split.train))))
    trials = []
    for number, log in sorted(getattr(compiled, "trial_logs", {}).items()):
        trials.append({"trial": number, "score": log.get("full_eval_score", log.get("mb_score")),
                       "parameters": log.get("params") or log.get("full_eval_params")})
    candidates = [{"score": c.get("score"), "instructions": _instructions(c["program"])}
                  for c in getattr(compiled, "candidate_programs", []) if "program" in c]
    return RunnerOutput(compiled, settings, f"best validation score {getattr(compiled, 'score', None)} (%)",
                        {"trials": trials, "candidates": candidates, "instructions": _instructions(compiled)},
                        metric_counts=metric_counts(metric))


def run_copro(setup: ComparisonSetup, budgets: Budgets, out_dir: Path) -> RunnerOutput:
    """DSPy's COPRO (the OPRO entry); it scores candidates on the training set (no valset)."""
    from dspy.teleprompt import COPRO

    if budgets.copro_breadth < 2:
        raise BinEvalError("COPRO needs breadth >= 2")
    settings = {"breadth": budgets.copro_breadth, "depth": budgets.copro_depth, "init_temperature": 1.4,
                "scored_on": "train (COPRO takes no valset)"}
    metric = setup.metric()
    optimizer = COPRO(prompt_model=_prompt_model(setup), metric=float_metric(metric),
                      breadth=budgets.copro_breadth, depth=budgets.copro_depth, init_temperature=1.4)
    compiled = optimizer.compile(setup.student(), trainset=setup.split.train,
                                 eval_kwargs={"num_threads": setup.num_threads, "display_progress": False})
    candidates = [{"score": c.get("score"), "instruction": c.get("instruction"), "prefix": c.get("prefix"),
                   "depth": c.get("depth")} for c in getattr(compiled, "candidate_programs", [])]
    best = candidates[0]["score"] if candidates else None
    return RunnerOutput(compiled, settings, f"best training score {best} (%)",
                        {"candidates": candidates, "instructions": _instructions(compiled)},
                        metric_counts=metric_counts(metric))


def run_gepa(setup: ComparisonSetup, budgets: Budgets, out_dir: Path) -> RunnerOutput:
    """DSPy's GEPA with the feedback metric, a metric-call budget and the prompt LM as reflection LM."""
    reflection = _prompt_model(setup) or dspy.settings.lm
    if reflection is None:
        raise BinEvalError("GEPA needs a reflection LM: configure an LM or pass a prompt LM")
    settings = {"max_metric_calls": budgets.gepa_metric_calls,
                "reflection_minibatch_size": max(1, min(3, len(setup.split.train)))}
    metric = setup.metric()
    optimizer = dspy.GEPA(metric=metric, reflection_lm=reflection, max_metric_calls=budgets.gepa_metric_calls,
                          reflection_minibatch_size=settings["reflection_minibatch_size"],
                          num_threads=setup.num_threads, seed=budgets.seed, track_stats=True,
                          log_dir=str(out_dir / "gepa_logs"))
    compiled = optimizer.compile(setup.student(), trainset=setup.split.train, valset=setup.split.val or None)
    details = getattr(compiled, "detailed_results", None)
    history: dict[str, Any] = {"instructions": _instructions(compiled)}
    if details is not None:
        history["val_aggregate_scores"] = list(getattr(details, "val_aggregate_scores", []) or [])
        history["candidates"] = [dict(c) if isinstance(c, dict) else _instructions(c)
                                 for c in getattr(details, "candidates", []) or []]
        history["best_idx"] = getattr(details, "best_idx", None)
    scores = [s for s in history.get("val_aggregate_scores", []) if s is not None]
    best = f"{max(scores):.3f}" if scores else "n/a"
    # GEPA reflects with the prompt LM, else with the configured (task) LM: the harness's
    # prompt LM name is the task LM's when no prompt LM was given.
    return RunnerOutput(compiled, settings, f"{len(scores)} candidate(s); best validation score {best} (0-1)", history,
                        lms={"reflection": "@prompt"}, metric_counts=metric_counts(metric))


RUNNERS: dict[str, Runner] = {
    "unoptimized": run_unoptimized,
    "bineval": run_bineval,
    "mipro": run_mipro,
    "copro": run_copro,
    "gepa": run_gepa,
}


def budgets_dict(budgets: Budgets) -> dict[str, Any]:
    """JSON-ready budgets."""
    return asdict(budgets)

"""BinEvalOptimizer: the disagreement-driven prompt-update loop as a DSPy teleprompter (paper Algorithm 1).

One loop, three sources of evidence:

* ``cross_model`` (paper 3.3): a target BinEval vs a source evaluator, question by question;
* ``human`` (paper 3.4, Appendix B): a BinEval vs human ratings, item by item;
* ``generation`` (paper 3.4): a generator judged by a BinEval metric.

Each iteration evaluates the current prompt, collects the items that went wrong with
question-level evidence, asks the note-taker for lessons, deduplicates them into a
bounded lesson memory and applies one substring rewrite per lesson. The compiled
program keeps the best iteration's prompt; its history records everything.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import dspy
from dspy.teleprompt import Teleprompter

from binaryeval_dspy.cost.usage_meter import measure_usage
from binaryeval_dspy.errors import BinEvalError
from binaryeval_dspy.lm.context import lm_context
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.optimizers.bineval_optimizer.cross_model import CrossModelMode, SourceVerdicts
from binaryeval_dspy.optimizers.bineval_optimizer.generation import GenerationMode
from binaryeval_dspy.optimizers.bineval_optimizer.human import HumanMode
from binaryeval_dspy.optimizers.bineval_optimizer.label_failures import label_agreement_change
from binaryeval_dspy.optimizers.bineval_optimizer.mode_base import UpdateMode, lm_name
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.programs.bineval_metric import BinEvalMetric
from binaryeval_dspy.programs.note_taker import NoteTaker
from binaryeval_dspy.programs.prompt_updater import (
    DEFAULT_MAX_PROMPT_CHARS,
    PromptUpdater,
    prompt_diff,
)
from binaryeval_dspy.schemas.optimization_history import IterationRecord, OptimizationHistory
from binaryeval_dspy.schemas.verdict_record import VerdictRecord

logger = logging.getLogger(__name__)

Mode = Literal["cross_model", "human", "generation"]
MODES: tuple[str, ...] = ("cross_model", "human", "generation")


class BinEvalOptimizer(Teleprompter):
    """Improve a prompt from binary-question failures (paper sections 3.3-3.4, Algorithm 1).

    Args:
        mode: ``cross_model``, ``human`` or ``generation`` (see the module docstring).
        max_iterations: T, the most prompt updates (paper: 5); the loop evaluates T + 1
            prompts at most. >= 1.
        max_lessons: lesson memory size per iteration (paper: 10).
        max_prompt_chars: cap on each rewritten prompt's length (the paper's "carrying
            capacity"); None disables it.
        max_attempts: updater attempts per lesson before the lesson is skipped.
        max_items_per_iteration: note-taker calls per iteration, the worst items first.
        prompt_lm: LM (or `LMHandle`) of the note-taker, lesson dedup, updater and question
            regeneration; None uses the configured LM (self-update).
        source: ``cross_model``: a `BinEval` to run on `source_lm`, or precomputed verdicts
            (item id -> list of `QuestionVerdict`).
        source_lm: ``cross_model``: the source BinEval's LM.
        epsilon: ``cross_model``: convergence tolerance on per-dimension mean scores.
        threshold: ``human``: |model - human| (both in [0, 1]) above which an item fails (paper: 0.3).
        human_field: ``human``: item field with {dimension: rating}.
        human_scale: ``human``: the ratings' [low, high].
        regenerate_questions: ``human``: rewrite the task prompt too and regenerate the questions.
        labels: ``human``: question-level labels (the records of a verdicts file, judge
            ``human`` or annotator ids, e.g. `read_verdicts("labels-human.jsonl")`); the
            failures are then the questions answered against them, and the history's scores
            the agreement with them (``val_label_kappa``, ``val_label_accuracy``, ...;
            `label_agreement_change` gives before / after). None: item scores vs ratings.
        judge: ``generation``: the `BinEvalMetric` judging generated outputs.
        predictor_name: ``generation``: the predictor holding the generation prompt.
        keep: ``best`` (the highest selection score among the iterations scored on the same
            items: `best_iteration`, rule saved as the history's ``selection_rule``) or ``last``.
        num_threads: items evaluated concurrently.
        progress: called with a short status line as the loop advances (e.g. a CLI's printer).

    Raises:
        BinEvalError: a mode-specific argument is missing or out of range.

    Example:
        >>> optimizer = BinEvalOptimizer(mode="human", max_iterations=3, prompt_lm=strong_lm)  # doctest: +SKIP
        >>> better = optimizer.compile(BinEval(questions), trainset=dev, valset=val)           # doctest: +SKIP
        >>> better.optimization_history.iterations[1].lessons                                # doctest: +SKIP
        >>> better.save("evaluator.json")                                                      # doctest: +SKIP
    """

    def __init__(
        self,
        mode: Mode,
        *,
        max_iterations: int = 5,
        max_lessons: int = 10,
        max_prompt_chars: int | None = DEFAULT_MAX_PROMPT_CHARS,
        max_attempts: int = 2,
        max_items_per_iteration: int = 20,
        prompt_lm: LMHandle | dspy.LM | None = None,
        source: BinEval | SourceVerdicts | None = None,
        source_lm: LMHandle | dspy.LM | None = None,
        epsilon: float = 0.05,
        threshold: float = 0.3,
        human_field: str = "human",
        human_scale: tuple[float, float] = (1.0, 5.0),
        regenerate_questions: bool = False,
        labels: Sequence[VerdictRecord] | None = None,
        judge: BinEvalMetric | None = None,
        predictor_name: str | None = None,
        keep: Literal["best", "last"] = "best",
        num_threads: int = 1,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__()
        if mode not in MODES:
            raise BinEvalError(f"mode must be one of {MODES}, got {mode!r}")
        if labels is not None and mode != "human":
            raise BinEvalError(f"`labels` apply to mode 'human' only, not {mode!r}; drop them or use mode='human'")
        if max_iterations < 1:
            raise BinEvalError(f"max_iterations must be >= 1, got {max_iterations}")
        if max_items_per_iteration < 1:
            raise BinEvalError(f"max_items_per_iteration must be >= 1, got {max_items_per_iteration}")
        if keep not in ("best", "last"):
            raise BinEvalError(f"keep must be 'best' or 'last', got {keep!r}")
        self.mode = mode
        self.max_iterations = max_iterations
        self.max_items_per_iteration = max_items_per_iteration
        self.prompt_lm = prompt_lm
        self.keep = keep
        self.progress = progress
        self.updater = PromptUpdater(max_lessons=max_lessons, max_prompt_chars=max_prompt_chars,
                                     max_attempts=max_attempts)
        self.config: dict[str, Any] = {
            "mode": mode, "max_iterations": max_iterations, "max_lessons": max_lessons,
            "max_prompt_chars": max_prompt_chars, "max_attempts": max_attempts,
            "max_items_per_iteration": max_items_per_iteration, "keep": keep, "num_threads": num_threads,
        }
        self.strategy: UpdateMode
        if mode == "cross_model":
            if source is None:
                raise BinEvalError("mode 'cross_model' needs source= (a BinEval with source_lm=, or precomputed "
                                   "verdicts by item id)")
            self.strategy = CrossModelMode(source=source, source_lm=source_lm, epsilon=epsilon,
                                           num_threads=num_threads)
            self.config["epsilon"] = epsilon
        elif mode == "human":
            self.strategy = HumanMode(threshold=threshold, human_field=human_field, human_scale=human_scale,
                                      regenerate_questions=regenerate_questions, prompt_lm=prompt_lm,
                                      num_threads=num_threads, labels=labels)
            self.config.update(threshold=threshold, human_field=human_field, human_scale=list(human_scale),
                               regenerate_questions=regenerate_questions)
            if self.strategy.labels is not None:
                self.config["labelled_questions"] = len(self.strategy.labels)
        else:
            if judge is None:
                raise BinEvalError("mode 'generation' needs judge= (a BinEvalMetric that judges the outputs)")
            self.strategy = GenerationMode(judge=judge, predictor_name=predictor_name, num_threads=num_threads)
            self.config["predictor_name"] = predictor_name

    def _say(self, message: str) -> None:
        logger.info(message)
        if self.progress is not None:
            self.progress(message)

    def _lessons(self, note_taker: NoteTaker, findings: list) -> list[str]:
        lessons: list[str] = []
        worst_first = sorted(findings, key=lambda f: -f.severity)[: self.max_items_per_iteration]
        with lm_context(self.prompt_lm):
            for finding in worst_first:
                lessons.extend(note_taker(findings=finding).lessons)
        return lessons

    def _update(self, program: dspy.Module, record: IterationRecord, lessons: list[str]) -> None:
        """Dedup `lessons`, rewrite each prompt of the mode, install the results in `program`."""
        with lm_context(self.prompt_lm):
            filed = self.updater.memory(lessons=lessons)
            record.dedup, record.lesson_memory = filed.decisions, filed.lessons
            new_prompts: dict[str, str] = {}
            for name, old in record.prompts.items():
                new, rewrites = self.updater.rewrite_all(old, filed.lessons, target=name)
                record.rewrites.extend(rewrites)
                new_prompts[name] = new
                diff = prompt_diff(old, new, name=name)
                if diff:
                    record.diffs[name] = diff
            self.strategy.apply(program, new_prompts, record)

    def compile(
        self,
        student: dspy.Module,
        *,
        trainset: list[dspy.Example],
        valset: list[dspy.Example] | None = None,
        teacher: dspy.Module | None = None,
        history_path: str | Path | None = None,
    ) -> dspy.Module:
        """Run the update loop on a copy of `student` and return the improved copy.

        Args:
            student: a `BinEval` (``cross_model``, ``human``) or a generator program
                (``generation``); never modified.
            trainset: items whose failures teach lessons (paper: the dev set).
            valset: items for picking the best iteration and early stopping; without it
                the training scores are used.
            teacher: not used (raises if given; kept for DSPy's signature).
            history_path: where to save the history JSON as soon as each iteration ends.

        Returns:
            The program with the kept iteration's prompt (and questions), with
            ``optimization_history`` (`OptimizationHistory`) and ``_compiled = True``.

        Raises:
            BinEvalError / InputError: bad program or items, before any LM call.
        """
        if teacher is not None:
            raise BinEvalError("BinEvalOptimizer does not use a teacher program; leave teacher=None")
        program = student.deepcopy()
        trainset, valset = list(trainset), (list(valset) if valset else None)
        self.strategy.validate(program, trainset, valset)
        note_taker = NoteTaker(prompt_role=self.strategy.prompt_role)
        history = OptimizationHistory(
            mode=self.mode, config=self.config,
            lms={"target": lm_name(None), "note_taker": lm_name(self.prompt_lm), **self.strategy.lm_names()},
        )
        snapshots: dict[int, dspy.Module] = {}  # the program each iteration evaluated
        for iteration in range(self.max_iterations + 1):
            record = IterationRecord(iteration=iteration, prompts=self.strategy.prompts(program))
            if isinstance(program, BinEval):
                record.question_set_hash = program.question_set.content_hash
            stop: str | None = None
            with measure_usage() as meter:
                self._say(f"iteration {iteration}: evaluating")
                evaluation = self.strategy.evaluate(program, trainset, valset)
                record.scores, record.selection_score = evaluation.scores, evaluation.selection_score
                record.failures = evaluation.failures
                record.items, record.item_problems = evaluation.items, evaluation.item_problems
                record.selection_split, record.selection_missing = (evaluation.selection_split,
                                                                    evaluation.selection_missing)
                if self.keep == "best":
                    snapshots[iteration] = program.deepcopy()
                stop = (evaluation.stop_reason or self.strategy.early_stop([*history.iterations, record])
                        or (f"reached the iteration limit ({self.max_iterations} updates)"
                            if iteration == self.max_iterations else None))
                if stop is None:
                    self._say(f"iteration {iteration}: {evaluation.failures} failing items; extracting lessons")
                    record.lessons = self._lessons(note_taker, evaluation.findings)
                    if not record.lessons:
                        stop = "the note-taker wrote no lessons"
                    else:
                        self._update(program, record, record.lessons)
                        if not record.diffs and not record.questions_regenerated:
                            stop = "no rewrite could be applied"
            record.lm_calls, record.prompt_tokens = meter.lm_calls, meter.prompt_tokens
            record.completion_tokens, record.seconds = meter.completion_tokens, round(meter.seconds, 3)
            record.cached_prompt_tokens = meter.cached_prompt_tokens
            history.iterations.append(record)
            problems = sum(c.unscored + c.failed for c in record.items.values())
            self._say(f"iteration {iteration}: scores {record.scores}"
                      + (f"; {problems} item(s) not scored" if problems else ""))
            if history_path is not None:
                history.save(history_path)
            if stop is not None:
                history.stop_reason = stop
                break
        if self.keep == "last":
            # Every stop happens after an evaluation and before (or instead of) an update,
            # so the program in hand is the last one evaluated.
            best = (len(history.iterations) - 1, program)
            history.selection_rule = "keep='last': the last iteration evaluated is kept, whatever its score."
        else:
            chosen = best_iteration(history.iterations)
            best = (chosen, snapshots[chosen])
        compiled = best[1]
        history.best_iteration = best[0]
        history.final_prompts = self.strategy.prompts(compiled)
        if history_path is not None:
            history.save(history_path)
        self._say(f"stopped: {history.stop_reason}; keeping iteration {best[0]}")
        change = label_agreement_change(history)
        if change is not None:
            self._say(f"agreement with the labels on the {'validation' if change['split'] == 'val' else 'training'} "
                      f"items: {_agreement_line(change['before'])} at iteration 0, "
                      f"{_agreement_line(change['after'])} at iteration {best[0]}")
        compiled.optimization_history = history
        compiled._compiled = True
        return compiled


def _agreement_line(side: dict[str, float | None]) -> str:
    """``kappa 0.41, accuracy 0.78 (n 120, 26 disagree)`` ("n/a" where undefined)."""
    def shown(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3f}"
    return (f"kappa {shown(side['kappa'])}, accuracy {shown(side['accuracy'])} "
            f"(n {int(side['pairs'] or 0)}, {int(side['disagreements'] or 0)} disagree)")


def best_iteration(records: list[IterationRecord]) -> int:
    """The iteration `keep="best"` keeps, by `SELECTION_RULE`.

    Iterations are grouped by the set of selection items they could not score
    (``selection_missing``); only the group with the fewest such items is eligible (on a
    tie, the group holding the earliest iteration), so every candidate was scored on the
    same items. Within it the highest ``selection_score`` wins, the earliest on a tie.
    An iteration without a selection score is never picked; when none has one, 0.

    Args:
        records: the history's iteration records, in order (non-empty).

    Returns:
        The chosen record's ``iteration``.
    """
    scored = [r for r in records if r.selection_score is not None]
    if not scored:
        return records[0].iteration if records else 0
    groups: dict[tuple[str, ...], list[IterationRecord]] = {}
    for r in scored:
        groups.setdefault(tuple(r.selection_missing), []).append(r)
    eligible = min(groups.values(), key=lambda g: (len(g[0].selection_missing), g[0].iteration))
    return max(eligible, key=lambda r: (r.selection_score, -r.iteration)).iteration

"""What every update mode provides to the shared loop (evaluate, find failures, apply edits)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import dspy

from binaryeval_dspy.programs.note_taker import ItemFindings
from binaryeval_dspy.schemas.optimization_history import ItemCounts, ItemProblem, IterationRecord


@dataclass
class ItemOutcome:
    """Whether one item's score entered an iteration's scores.

    Attributes:
        item_id: the item's id (its position when it has none).
        status: ``scored``, ``unscored`` (judged, no usable verdict) or ``failed`` (a
            generation or LM call failed, or judging raised).
        stage: where an unscored / failed item went wrong (``generation``, ``judge``,
            ``evaluator``, ``source``); "" when scored.
        error: the error or parser message, when known.
    """

    item_id: str
    status: str
    stage: str = ""
    error: str | None = None


def tally(split: str, outcomes: Sequence[ItemOutcome]) -> tuple[ItemCounts, list[ItemProblem], list[str]]:
    """Counts, problems and the sorted ids of the items not scored, for one split's outcomes."""
    counts = ItemCounts(total=len(outcomes))
    problems: list[ItemProblem] = []
    for outcome in outcomes:
        if outcome.status == "scored":
            counts.scored += 1
            continue
        if outcome.status == "unscored":
            counts.unscored += 1
        else:
            counts.failed += 1
        problems.append(ItemProblem(split=split, item_id=outcome.item_id,
                                    status="unscored" if outcome.status == "unscored" else "failed",
                                    stage=outcome.stage or "judge", error=outcome.error))
    missing = sorted(o.item_id for o in outcomes if o.status != "scored")
    return counts, problems, missing


@dataclass
class Evaluation:
    """One iteration's evaluation of the current program.

    Attributes:
        scores: named scores for the history (None where undefined).
        selection_score: higher is better; picks the iteration the compiled program
            keeps. None when undefined (such an iteration cannot be picked).
        findings: the items that went wrong, with question-level evidence.
        failures: how many items went wrong (may exceed ``len(findings)``).
        stop_reason: set when the loop should stop before updating (converged,
            nothing failed).
        items: item counts by split (``train``, ``val``).
        item_problems: every unscored or failed item.
        selection_split: the split of the selection score (``val`` or ``train``).
        selection_missing: sorted ids of that split's items left out of the selection
            score (iterations are compared only when these match).
    """

    scores: dict[str, float | None]
    selection_score: float | None
    findings: list[ItemFindings] = field(default_factory=list)
    failures: int = 0
    stop_reason: str | None = None
    items: dict[str, ItemCounts] = field(default_factory=dict)
    item_problems: list[ItemProblem] = field(default_factory=list)
    selection_split: str | None = None
    selection_missing: list[str] = field(default_factory=list)

    @classmethod
    def of_splits(cls, scores: dict[str, float | None], selection_score: float | None,
                  findings: list[ItemFindings], train: Sequence[ItemOutcome], val: Sequence[ItemOutcome] | None,
                  *, stop_reason: str | None = None) -> Evaluation:
        """An iteration's evaluation with its train split and, when there is one, its val split
        (which then holds the selection score; else train does). ``failures`` is ``len(findings)``."""
        evaluation = cls(scores=scores, selection_score=selection_score, findings=findings, failures=len(findings),
                         stop_reason=stop_reason)
        evaluation.add_split("train", train, selection=val is None)
        if val is not None:
            evaluation.add_split("val", val, selection=True)
        return evaluation

    def add_split(self, split: str, outcomes: Sequence[ItemOutcome], *, selection: bool = False) -> None:
        """Record one split's item outcomes (`tally`); `selection` marks the selection split."""
        counts, problems, missing = tally(split, outcomes)
        self.items[split] = counts
        self.item_problems.extend(problems)
        if selection:
            self.selection_split, self.selection_missing = split, missing


class UpdateMode:
    """Base of the three modes; subclasses fill in the abstract methods.

    Attributes:
        name: ``cross_model``, ``human`` or ``generation``.
        prompt_role: one sentence telling the note-taker what the prompt is for.
    """

    name: str = ""
    prompt_role: str = ""

    def validate(self, program: dspy.Module, trainset: list[dspy.Example], valset: list[dspy.Example] | None) -> None:
        """Raise `BinEvalError` / `InputError` on unusable input, before any LM call."""
        raise NotImplementedError

    def prompts(self, program: dspy.Module) -> dict[str, str]:
        """The prompts this mode rewrites, by name (the first one is the main prompt)."""
        raise NotImplementedError

    def evaluate(
        self, program: dspy.Module, trainset: list[dspy.Example], valset: list[dspy.Example] | None
    ) -> Evaluation:
        """Run the program, score it and collect findings."""
        raise NotImplementedError

    def early_stop(self, records: list[IterationRecord]) -> str | None:
        """A reason to stop after this iteration's evaluation (default: never)."""
        return None

    def apply(self, program: dspy.Module, new_prompts: dict[str, str], record: IterationRecord) -> None:
        """Install the rewritten prompts into `program` (and regenerate what depends on them)."""
        raise NotImplementedError

    def lm_names(self) -> dict[str, str]:
        """LM names by role for the history (source, judge, ...)."""
        return {}


def lm_name(lm: object) -> str:
    """A display name for an LM, an `LMHandle` or None (the configured LM).

    A served model is named with its endpoint (``openai/m @ http://host:8000/v1``), as
    `make_lm` names it, so one model id on two servers reads as two LMs.
    """
    if lm is None:
        lm = dspy.settings.lm
        if lm is None:
            return "unconfigured"
    name = getattr(lm, "name", None)
    if isinstance(name, str):
        return name
    model = str(getattr(lm, "model", lm))
    kwargs = getattr(lm, "kwargs", None)
    base = (kwargs.get("api_base") or kwargs.get("base_url")) if isinstance(kwargs, dict) else None
    return f"{model} @ {base}" if base else model

"""What every update mode provides to the shared loop (evaluate, find failures, apply edits)."""

from __future__ import annotations

from dataclasses import dataclass, field

import dspy

from binaryeval_dspy.programs.note_taker import ItemFindings
from binaryeval_dspy.schemas.optimization_history import IterationRecord


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
    """

    scores: dict[str, float | None]
    selection_score: float | None
    findings: list[ItemFindings] = field(default_factory=list)
    failures: int = 0
    stop_reason: str | None = None


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

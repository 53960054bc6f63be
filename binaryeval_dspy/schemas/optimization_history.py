"""What one run of the prompt-update loop did, iteration by iteration (paper Algorithm 1).

The history is the optimizer's run record: for each iteration the prompt that was
evaluated, its scores, the lessons drawn, how each lesson was deduplicated, each
substring rewrite (applied or skipped, with the reason), the resulting diff and the LM
cost. It is saved as JSON next to the compiled program and can be read back without
calling any LM.

Failures are counted, never hidden: every iteration records, per split, how many items
were scored, unscored (judged, but no verdict parsed) and failed (an LM call or the
generation raised), and lists each unscored or failed item with its error. The best
iteration is chosen only among iterations scored on the same selection items
(`SELECTION_RULE`, recorded in every history).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from binaryeval_dspy.errors import InputError
from binaryeval_dspy.schemas.versioned import (
    SchemaVersion,
    schema_version_fix,
    schema_version_message,
    write_json_model,
)

OPTIMIZATION_HISTORY_SCHEMA_VERSION = 1

#: How `BinEvalOptimizer` (``keep="best"``) picks the kept iteration; saved in each history.
SELECTION_RULE = (
    "Iterations are compared only when their selection scores were computed on the same items: "
    "iterations are grouped by the set of selection items they could not score (unscored or failed); "
    "the group with the fewest such items is eligible (on a tie, the group holding the earliest "
    "iteration); within it the highest selection score wins, the earliest iteration on a tie. "
    "An iteration without a selection score is never picked."
)

ItemStatus = Literal["unscored", "failed"]


class ItemCounts(BaseModel):
    """Items of one split in one iteration, by outcome.

    Attributes:
        total: items run.
        scored: items whose score entered the iteration's scores.
        unscored: items judged but with no usable verdict (nothing parsed, or a
            dimension left without one), left out of the scores.
        failed: items whose generation or judge LM calls failed, left out of the scores.
    """

    model_config = ConfigDict(extra="forbid")

    total: int = Field(default=0, ge=0)
    scored: int = Field(default=0, ge=0)
    unscored: int = Field(default=0, ge=0)
    failed: int = Field(default=0, ge=0)

    def describe(self) -> str:
        """``"<scored>/<total>"``, plus ``" (<u> unscored, <f> failed)"`` when any."""
        extra = f" ({self.unscored} unscored, {self.failed} failed)" if self.unscored or self.failed else ""
        return f"{self.scored}/{self.total}{extra}"


class ItemProblem(BaseModel):
    """One item left out of an iteration's scores, and why.

    Attributes:
        split: ``train`` or ``val``.
        item_id: the item's id (its position when it has none).
        status: ``unscored`` or ``failed`` (see `ItemCounts`).
        stage: where it went wrong: ``generation`` (the generator call raised),
            ``judge`` (the judge's calls) or ``evaluator`` (the evaluator being optimized).
        error: the error (``"<ErrorType>: <message>"``) or parser message, when known.
    """

    model_config = ConfigDict(extra="forbid")

    split: str
    item_id: str
    status: ItemStatus
    stage: str
    error: str | None = None


class DedupDecision(BaseModel):
    """How one new lesson was filed into the lesson memory.

    Attributes:
        lesson: the new lesson as the note-taker wrote it.
        action: ``added`` (new entry), ``merged`` (folded into an entry), ``dropped``
            (the memory was full) or ``exact_duplicate`` (same words as an entry; no LM call).
        merged_into: 0-based index of the entry it was merged into, if any.
        result: the entry's text after the decision ("" when dropped).
        note: why, when the LM's answer was unusable (e.g. an out-of-range number).
    """

    model_config = ConfigDict(extra="forbid")

    lesson: str
    action: Literal["added", "merged", "dropped", "exact_duplicate"]
    merged_into: int | None = None
    result: str = ""
    note: str | None = None


class RewriteRecord(BaseModel):
    """One lesson's substring rewrite of one prompt.

    Attributes:
        target: which prompt was edited (e.g. ``"judge_instructions"``, ``"task_prompt"``).
        lesson: the lesson the edit carries.
        substring: the updater's last proposed substring s.
        replacement: its proposed replacement s'.
        applied: True if ``prompt.replace(s, s')`` was applied.
        attempts: LM attempts made (1 + retries).
        constrained: True if the last attempt chose the substring among the prompt's
            own sentences (a retry; see `binaryeval_dspy.programs.prompt_updater`).
        reason: why the rewrite was skipped (None when applied).
        prompt_chars: prompt length after this step (characters).
    """

    model_config = ConfigDict(extra="forbid")

    target: str
    lesson: str
    substring: str = ""
    replacement: str = ""
    applied: bool = False
    attempts: int = Field(default=0, ge=0)
    constrained: bool = False
    reason: str | None = None
    prompt_chars: int = Field(default=0, ge=0)


class IterationRecord(BaseModel):
    """One iteration: evaluate the current prompt, then (unless stopping) update it.

    Attributes:
        iteration: 0-based; iteration 0 evaluates the starting prompt.
        prompts: the prompts evaluated in this iteration, by name.
        question_set_hash: content hash of the question set in use (evaluator modes).
        scores: named scores of this iteration (e.g. ``val_spearman``, ``max_dimension_gap``,
            ``train_pass_rate``); None where undefined (e.g. constant scores).
        selection_score: the score used to pick the best iteration (higher is better).
        failures: number of items with failures or disagreements.
        items: item counts by split (``train``, ``val``): total, scored, unscored, failed.
        item_problems: every unscored or failed item, with its error.
        selection_split: the split the selection score was computed on (``val`` when
            there is a validation set, else ``train``).
        selection_missing: ids of the selection split's items not scored in this
            iteration (sorted); iterations are compared only when these sets match.
        lessons: every lesson the note-taker wrote this iteration.
        dedup: one decision per lesson.
        lesson_memory: the unique lessons kept (at most the memory size).
        rewrites: one record per (lesson, prompt) rewrite.
        diffs: unified diffs of each updated prompt (old -> new), by name.
        questions_regenerated: True if the question set was regenerated after the update.
        note: anything else worth knowing (e.g. why question regeneration was skipped).
        lm_calls: LM calls that reached a model during this iteration.
        prompt_tokens: their prompt tokens.
        completion_tokens: their completion tokens.
        cached_prompt_tokens: prompt tokens the provider served from its prompt cache.
        seconds: wall time of this iteration.
    """

    model_config = ConfigDict(extra="forbid")

    iteration: int = Field(ge=0)
    prompts: dict[str, str]
    question_set_hash: str | None = None
    scores: dict[str, float | None] = Field(default_factory=dict)
    selection_score: float | None = None
    failures: int = Field(default=0, ge=0)
    items: dict[str, ItemCounts] = Field(default_factory=dict)
    item_problems: list[ItemProblem] = Field(default_factory=list)
    selection_split: str | None = None
    selection_missing: list[str] = Field(default_factory=list)
    lessons: list[str] = Field(default_factory=list)
    dedup: list[DedupDecision] = Field(default_factory=list)
    lesson_memory: list[str] = Field(default_factory=list)
    rewrites: list[RewriteRecord] = Field(default_factory=list)
    diffs: dict[str, str] = Field(default_factory=dict)
    questions_regenerated: bool = False
    note: str | None = None
    lm_calls: int = Field(default=0, ge=0)
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    cached_prompt_tokens: int = Field(default=0, ge=0)
    seconds: float = Field(default=0.0, ge=0)


class OptimizationHistory(BaseModel):
    """The record of one `BinEvalOptimizer.compile` run.

    Attributes:
        schema_version: format version (1).
        mode: ``cross_model``, ``human`` or ``generation``.
        config: the optimizer's settings (JSON-ready).
        lms: LM names by role (``target``, ``note_taker``, ``source``, ``judge``).
        iterations: one record per iteration, in order.
        best_iteration: index of the iteration whose prompt the compiled program keeps.
        selection_rule: how the best iteration was chosen (`SELECTION_RULE`, or the
            ``keep="last"`` rule).
        stop_reason: why the loop ended (converged, nothing failed, validation score
            dropped, iteration limit).
        final_prompts: the prompts of the returned program, by name.
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: SchemaVersion(OPTIMIZATION_HISTORY_SCHEMA_VERSION, "optimization history",
                                  older_fix="run the optimization again with this version") = (
        OPTIMIZATION_HISTORY_SCHEMA_VERSION)
    mode: Literal["cross_model", "human", "generation"]
    config: dict[str, Any] = Field(default_factory=dict)
    lms: dict[str, str] = Field(default_factory=dict)
    iterations: list[IterationRecord] = Field(default_factory=list)
    best_iteration: int | None = None
    selection_rule: str = SELECTION_RULE
    stop_reason: str = ""
    final_prompts: dict[str, str] = Field(default_factory=dict)

    @property
    def lm_calls(self) -> int:
        """LM calls over all iterations."""
        return sum(r.lm_calls for r in self.iterations)

    @property
    def total_tokens(self) -> int:
        """Prompt + completion tokens over all iterations."""
        return sum(r.prompt_tokens + r.completion_tokens for r in self.iterations)

    @property
    def seconds(self) -> float:
        """Wall time over all iterations."""
        return sum(r.seconds for r in self.iterations)

    def summary_rows(self) -> tuple[list[str], list[list[str]]]:
        """Header and one row per iteration: selection score with ``n scored / n`` of its
        split, train and validation items scored (unscored, failed), failing items, lessons,
        LM calls, prompt / completion / cached tokens, seconds; ``*`` marks the kept iteration.

        Returns:
            (header, rows), strings ready for a Markdown or rich table.
        """
        header = ["iteration", "selection score (n scored / n)", "train items scored", "val items scored",
                  "failing items", "lessons", "LM calls", "prompt / completion / cached tokens", "seconds"]
        body = []
        for r in self.iterations:
            split = r.items.get(r.selection_split or "")
            score = "n/a" if r.selection_score is None else f"{r.selection_score:.3f}"
            if split is not None:
                score += f" ({split.scored}/{split.total} {r.selection_split})"
            mark = "*" if r.iteration == self.best_iteration else ""
            body.append([f"{r.iteration}{mark}", score,
                         r.items["train"].describe() if "train" in r.items else "n/a",
                         r.items["val"].describe() if "val" in r.items else "-",
                         str(r.failures), str(len(r.lessons)), str(r.lm_calls),
                         f"{r.prompt_tokens} / {r.completion_tokens} / {r.cached_prompt_tokens}",
                         f"{r.seconds:.1f}"])
        return header, body

    def summary_markdown(self) -> str:
        """The iterations as a Markdown table (`summary_rows`, drawn by
        `binaryeval_dspy.render.markdown_table`), with the LMs, the kept iteration
        and the selection rule underneath."""
        header, body = self.summary_rows()
        lms = "; ".join(f"{role}: {name}" for role, name in self.lms.items()) or "not recorded"
        from binaryeval_dspy.render import markdown_paragraph, markdown_table

        lines = [*markdown_table(header, body), "",  # the prose is text too: LM names never become markup
                 markdown_paragraph(f"LMs: {lms}. Kept iteration: {self.best_iteration} (marked *). "
                                    f"Selection: {self.selection_rule}")]
        return "\n".join(lines) + "\n"

    def save(self, path: str | Path) -> Path:
        """Write the history as indented UTF-8 JSON; returns the path."""
        return write_json_model(self, path)

    @classmethod
    def load(cls, path: str | Path) -> OptimizationHistory:
        """Read a history JSON file.

        Raises:
            InputError: the file is missing, not JSON, or not a valid history (the
                message names the file and the first failing field).
        """
        path = Path(path)
        if not path.is_file():
            raise InputError("history file not found", path=path,
                             fix="give the history.json written by the optimizer.")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON ({exc.msg})", path=path, line=exc.lineno,
                             fix="restore the file the optimizer wrote.") from exc
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            raise InputError(schema_version_message(first), path=path, field=field,
                             fix=schema_version_fix(first) or "restore the file the optimizer wrote.") from exc

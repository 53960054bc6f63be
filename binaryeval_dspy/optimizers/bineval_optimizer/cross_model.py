"""Cross-model mode: align a target evaluator with a source evaluator (paper 3.3, Algorithm 1).

Both evaluators answer the same binary questions on the same items. Every question on
which they disagree (both verdicts parsed) is evidence for the note-taker; the loop
stops when, for every dimension, the target's mean yes-rate is within epsilon of the
source's.

An item with no question answered (parsed) by both evaluators adds nothing to the
agreement: the iteration record counts it as unscored, or failed when an LM call (or the
judging) failed, with the error and which evaluator it was (``evaluator`` / ``source``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import dspy

from binaryeval_dspy.errors import BinEvalError, InputError
from binaryeval_dspy.lm.context import lm_context
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.optimizers.bineval_optimizer.evaluator_runs import (
    dimension_yes_rates,
    require_bineval,
    require_items,
    verdicts_outcome,
)
from binaryeval_dspy.optimizers.bineval_optimizer.mode_base import (
    Evaluation,
    ItemOutcome,
    UpdateMode,
    lm_name,
)
from binaryeval_dspy.optimizers.bineval_optimizer.prompt_slots import (
    get_instructions,
    set_instructions,
)
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.programs.note_taker import ItemFindings
from binaryeval_dspy.runs.item_runs import item_id, judge_items, judge_items_by_id
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.item_result import text_hash
from binaryeval_dspy.schemas.optimization_history import IterationRecord
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.signatures.lesson_extraction import QuestionEvidence

logger = logging.getLogger(__name__)

SourceVerdicts = Mapping[str, Sequence[QuestionVerdict | dict[str, Any]]]


def load_source_verdicts(path: str | Path) -> dict[str, list[QuestionVerdict]]:
    """Read precomputed source verdicts from a `bineval evaluate` run directory (or its results.jsonl).

    Returns:
        item id -> verdicts, for every item in the run.

    A half-written last line of that run's results (a killed run) is left out and named
    in a logged warning; the run's files are never changed.

    Raises:
        InputError: the directory or file does not exist or a line does not validate.
    """
    path = Path(path)
    directory = path.parent if path.name == "results.jsonl" else path
    if not (directory / "results.jsonl").is_file():
        raise InputError("no results.jsonl here", path=directory,
                         fix="pass the run directory written by `bineval evaluate` with the source LM.")
    stored = RunDirectory(directory).read_stored_results()  # another run: read, never trimmed
    if stored.unreadable:
        logger.warning("%s Those items have no source verdicts.", stored.note())
    return {r.item_id: list(r.verdicts) for r in stored.results}


def _verdict(value: QuestionVerdict | dict[str, Any]) -> QuestionVerdict:
    return value if isinstance(value, QuestionVerdict) else QuestionVerdict.model_validate(value)


class CrossModelMode(UpdateMode):
    """Target = the student BinEval on the configured LM; source = another evaluator.

    Args:
        source: a `BinEval` run on `source_lm` (its question set, if any, must equal the
            target's), or precomputed verdicts: item id -> list of `QuestionVerdict`
            (or their dicts), e.g. from `load_source_verdicts`.
        source_lm: the LM (or `LMHandle`) of a source BinEval; None uses the configured LM.
        epsilon: convergence tolerance on per-dimension mean yes-rates, in (0, 1].
        num_threads: items judged concurrently.
    """

    name = "cross_model"
    prompt_role = ("the instructions of an evaluator that answers one yes/no question about an output; "
                   "the reference is a stronger evaluator answering the same questions")

    def __init__(self, *, source: BinEval | SourceVerdicts, source_lm: LMHandle | dspy.LM | None = None,
                 epsilon: float = 0.05, num_threads: int = 1) -> None:
        if not 0.0 < epsilon <= 1.0:
            raise BinEvalError(f"epsilon must be in (0, 1], got {epsilon}")
        self.source = source
        self.source_lm = source_lm
        self.epsilon = epsilon
        self.num_threads = num_threads
        self._source_verdicts: dict[tuple[str, str], list[QuestionVerdict] | None] = {}

    def lm_names(self) -> dict[str, str]:
        if isinstance(self.source, BinEval):
            return {"source": lm_name(self.source_lm)}
        return {"source": "precomputed verdicts"}

    def validate(self, program: dspy.Module, trainset: list[dspy.Example], valset: list[dspy.Example] | None) -> None:
        target = require_bineval(program, self.name)
        require_items(trainset, "trainset")
        if valset:
            require_items(valset, "valset")
        wanted = {q.id for q in target.question_set.questions}
        if isinstance(self.source, BinEval):
            if self.source.questions.value is not None and self.source.question_set.content_hash != \
                    target.question_set.content_hash:
                raise BinEvalError(
                    "the source and target BinEval use different question sets; cross-model update compares "
                    "answers to the same questions. Give the source no question set (it then uses the target's)."
                )
            return
        for index, item in enumerate([*trainset, *(valset or [])]):
            key = item_id(item, index)
            if key not in self.source:
                raise InputError(f"no source verdicts for item {key!r}", field="item_id",
                                 fix="precompute source verdicts for every train and validation item.")
            found = {_verdict(v).question_id for v in self.source[key]}
            if not wanted <= found:
                raise InputError(f"source verdicts for item {key!r} miss questions {sorted(wanted - found)}",
                                 field="verdicts", fix="judge the items with the same question set as the target.")

    def prompts(self, program: dspy.Module) -> dict[str, str]:
        return {"judge_instructions": get_instructions(program, "judge")}

    def _source_for(self, target: BinEval, items: list[dspy.Example]) -> dict[str, list[QuestionVerdict] | None]:
        keys = [item_id(item, i) for i, item in enumerate(items)]
        if not isinstance(self.source, BinEval):
            return {k: [_verdict(v) for v in self.source[k]] for k in keys}
        # Cached by content too: a train and a validation item may share an id.
        cache_keys = [(k, text_hash(item.input + "\x00" + item.output)) for k, item in zip(keys, items, strict=True)]
        missing = [(ck, item) for ck, item in zip(cache_keys, items, strict=True) if ck not in self._source_verdicts]
        if missing:
            source = self.source.deepcopy()
            source.question_set = target.question_set
            with lm_context(self.source_lm):
                judged = judge_items(source, [item for _, item in missing], num_threads=self.num_threads)
            for (ck, _), verdicts in zip(missing, judged, strict=True):
                self._source_verdicts[ck] = verdicts
        return {k: self._source_verdicts[ck] for k, ck in zip(keys, cache_keys, strict=True)}

    @staticmethod
    def _agreement(tgt: dict[str, list[QuestionVerdict] | None], src: dict[str, list[QuestionVerdict] | None]) -> float | None:
        agree = total = 0
        for key, verdicts in tgt.items():
            source = {v.question_id: v for v in (src.get(key) or [])}
            for v in verdicts or []:
                s = source.get(v.question_id)
                if v.parsed and s is not None and s.parsed:
                    total += 1
                    agree += v.verdict == s.verdict
        return agree / total if total else None

    @staticmethod
    def _outcomes(tgt: dict[str, list[QuestionVerdict] | None], src: dict[str, list[QuestionVerdict] | None],
                  question_set) -> list[ItemOutcome]:
        """Per item: scored when some question was parsed by both evaluators, else why not."""
        outcomes = []
        for key, verdicts in tgt.items():
            source = src.get(key)
            mine = verdicts_outcome(key, verdicts, question_set)
            theirs = verdicts_outcome(key, source, question_set, stage="source")
            if mine.status != "scored":
                outcomes.append(mine)
            elif theirs.status != "scored":
                outcomes.append(theirs)
            elif CrossModelMode._agreement({key: verdicts}, {key: source}) is None:
                outcomes.append(ItemOutcome(key, "unscored", "evaluator",
                                            "no question was parsed by both evaluators"))
            else:
                outcomes.append(ItemOutcome(key, "scored"))
        return outcomes

    def evaluate(self, program: dspy.Module, trainset: list[dspy.Example], valset: list[dspy.Example] | None) -> Evaluation:
        target = require_bineval(program, self.name)
        question_set = target.question_set
        src = self._source_for(target, trainset)
        tgt = judge_items_by_id(target, trainset, num_threads=self.num_threads)
        src_rates = dimension_yes_rates(src, question_set)
        tgt_rates = dimension_yes_rates(tgt, question_set)
        gaps = {d: (abs(tgt_rates[d] - src_rates[d]) if tgt_rates[d] is not None and src_rates[d] is not None
                    else None) for d in question_set.dimensions}
        scores: dict[str, float | None] = {f"gap_{d}": g for d, g in gaps.items()}
        known = [g for g in gaps.values() if g is not None]
        scores["max_dimension_gap"] = max(known) if known else None
        scores["train_agreement"] = self._agreement(tgt, src)
        selection = scores["train_agreement"]
        val_outcomes = None
        if valset:
            val_tgt, val_src = judge_items_by_id(target, valset, num_threads=self.num_threads), \
                self._source_for(target, valset)
            scores["val_agreement"] = selection = self._agreement(val_tgt, val_src)
            val_outcomes = self._outcomes(val_tgt, val_src, question_set)
        by_id = {q.id: q for q in question_set.questions}
        findings: list[ItemFindings] = []
        for index, item in enumerate(trainset):
            key = item_id(item, index)
            source = {v.question_id: v for v in (src.get(key) or [])}
            evidence = []
            for v in tgt.get(key) or []:
                s = source.get(v.question_id)
                if v.parsed and s is not None and s.parsed and v.verdict != s.verdict:
                    q = by_id[v.question_id]
                    evidence.append(QuestionEvidence(
                        question=q.text, dimension=q.dimension, verdict=v.verdict, explanation=v.explanation,
                        reference=f"The reference evaluator answered {s.verdict}: {s.explanation}"))
            if evidence:
                findings.append(ItemFindings(
                    item_id=key, input=item.input, output=item.output, evidence=evidence, severity=len(evidence),
                    problem=(f"The evaluator disagreed with the reference evaluator on {len(evidence)} of "
                             f"{len(question_set.questions)} questions.")))
        stop = None
        if known and len(known) == len(gaps) and all(g < self.epsilon for g in known):
            stop = f"converged: every dimension's mean score is within {self.epsilon} of the source's"
        elif not findings:
            stop = "no question-level disagreements to learn from"
        return Evaluation.of_splits(scores, selection, findings, self._outcomes(tgt, src, question_set), val_outcomes,
                                    stop_reason=stop)

    def apply(self, program: dspy.Module, new_prompts: dict[str, str], record: IterationRecord) -> None:
        set_instructions(program, new_prompts["judge_instructions"], "judge")

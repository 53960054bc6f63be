"""The two head-to-head set-ups: evaluator optimization on SummEval, generator optimization on IFBench.

A set-up fixes what every optimizer gets: the starting program, the split, the per-item
metric the DSPy optimizers optimize, the matching `BinEvalOptimizer`, and the test
procedure whose per-item records the report turns into metrics with confidence intervals.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import dspy
from pydantic import ValidationError

from binaryeval_dspy.comparison.evaluator_metrics import HumanAgreementMetric, SourceAgreementMetric
from binaryeval_dspy.comparison.splits import Split
from binaryeval_dspy.data import normalized_human_scores
from binaryeval_dspy.data.json_files import validation_error
from binaryeval_dspy.data.rows import read_jsonl_rows
from binaryeval_dspy.errors import BinEvalError, InputError
from binaryeval_dspy.lm import LMHandle, lm_context
from binaryeval_dspy.optimizers import BinEvalOptimizer
from binaryeval_dspy.optimizers.bineval_optimizer.label_failures import compare_item, label_reference
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.programs.bineval_metric import BinEvalMetric
from binaryeval_dspy.programs.question_generator import QuestionGenerator
from binaryeval_dspy.runs import generate_outputs, judge_items
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.schemas.verdict_record import VerdictRecord
from binaryeval_dspy.scoring import score_verdicts
from binaryeval_dspy.signatures.response_generation import RespondToPrompt

logger = logging.getLogger(__name__)

Checker = Callable[[dspy.Example, str], Any]

#: Questions for a prompt whose own questions could not be generated (a weak LM can fail
#: to list requirements); the task prompt is filled in per item.
FALLBACK_QUESTIONS = QuestionSet(
    dimensions=["instruction_following"],
    questions=[
        BinaryQuestion(id="instruction_following-01", dimension="instruction_following",
                       text="Does the response answer what the request asks for?",
                       violation_example="a response about another topic"),
        BinaryQuestion(id="instruction_following-02", dimension="instruction_following",
                       text="Does the response follow every constraint the request states (format, counts, "
                            "words to use or avoid)?",
                       violation_example="three paragraphs when exactly two were required"),
    ],
)


@dataclass
class ComparisonSetup:
    """Base of the set-ups. Subclasses set `kind`, `mode` and implement the methods.

    Attributes:
        split: the train / validation / test items shared by every optimizer.
        prompt_lm: LM of the note-taker / updater / proposers / reflection (None: the
            configured LM).
        num_threads: items evaluated concurrently.
        progress: called with a status line as the BinEval optimizer advances.
    """

    split: Split
    prompt_lm: LMHandle | None = None
    num_threads: int = 1
    progress: Callable[[str], None] | None = None
    kind: str = field(default="", init=False)
    mode: str = field(default="", init=False)

    def prepare(self, out_dir: Path) -> list[str]:
        """Shared LM work done once for all optimizers (cached under `out_dir`); returns notes for the report."""
        return []

    def student(self) -> dspy.Module:
        """A fresh copy of the starting program."""
        raise NotImplementedError

    def metric(self) -> Callable[..., dspy.Prediction]:
        """The per-item metric, five-argument form, returning Prediction(score, feedback)."""
        raise NotImplementedError

    def bineval_optimizer(self, *, max_iterations: int, **settings: Any) -> BinEvalOptimizer:
        """The BinEvalOptimizer configured for this set-up."""
        raise NotImplementedError

    def test(self, program: dspy.Module) -> list[dict[str, Any]]:
        """Run `program` on the test items; one JSON-ready record per item."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """JSON-ready description for the run's config (kind, mode, split ids)."""
        return {"kind": self.kind, "mode": self.mode, "sizes": self.split.sizes(),
                "ids": {name: [str(ex.item_id) for ex in getattr(self.split, name)] for name in ("train", "val", "test")}}

    def starting_point(self) -> dict[str, Any]:
        """What every optimizer starts from (question set, starting instructions), as hashes:
        a resumed comparison must start from the same point or its rows would not compare."""
        def digest(text: str | None) -> str | None:
            return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16] if text is not None else None

        question_set = getattr(self, "question_set", None)
        instructions = getattr(self, "judge_instructions", None) or getattr(self, "starting_instructions", None)
        point = {"question_set_hash": question_set.content_hash if question_set is not None else None,
                 "instructions_hash": digest(instructions),
                 "regenerate_questions": getattr(self, "regenerate_questions", None)}
        labels = getattr(self, "labels", None)
        if labels:  # only then: a comparison started before labels existed resumes as it was
            point["labels_hash"] = digest("\n".join(sorted(r.model_dump_json() for r in labels)))
        return point


# ====================================================================== SummEval
@dataclass
class EvaluatorSetup(ComparisonSetup):
    """Optimize a BinEval evaluator on SummEval against human ratings or a source evaluator.

    Attributes:
        question_set: the evaluator's questions (dimensions must be rated in the items).
        evaluator_mode: ``human`` or ``cross_model``.
        judge_instructions: starting judge instructions (None keeps BinEval's own).
        source_lm: ``cross_model``: LM of the source BinEval (default judge instructions).
        source_verdicts: ``cross_model``: precomputed verdicts by item id (else computed).
        regenerate_questions: ``human``: passed to the BinEvalOptimizer.
        human_scale: the ratings' scale (SummEval: 1-5).
        labels: ``human``: question-level labels (verdicts-file records). The BinEval
            optimizer learns from the questions answered against them, and every
            optimizer's test records carry each item's judge-vs-label cells, so the
            comparison reports the agreement with the labels (kappa, accuracy) on the
            held-out test items, the unoptimized program's row being the "before".
    """

    question_set: QuestionSet | None = None
    evaluator_mode: Literal["human", "cross_model"] = "human"
    judge_instructions: str | None = None
    source_lm: LMHandle | None = None
    source_verdicts: dict[str, list[QuestionVerdict]] | None = None
    regenerate_questions: bool = False
    human_scale: tuple[float, float] = (1.0, 5.0)
    labels: list[VerdictRecord] | None = None

    def __post_init__(self) -> None:
        if self.question_set is None:
            raise BinEvalError("EvaluatorSetup needs a question set")
        if self.evaluator_mode not in ("human", "cross_model"):
            raise BinEvalError(f"evaluator_mode must be human or cross_model, got {self.evaluator_mode!r}")
        self.kind, self.mode = "summeval", self.evaluator_mode
        if self.labels is not None and self.evaluator_mode != "human":
            raise BinEvalError(f"`labels` apply to the human set-up only, not {self.evaluator_mode}")
        self._reference = label_reference(self.labels) if self.labels is not None else None
        for ex in [*self.split.train, *self.split.val, *self.split.test]:
            normalized_human_scores(ex, self.question_set.dimensions, scale=self.human_scale)  # fail early

    def prepare(self, out_dir: Path) -> list[str]:
        """``cross_model``: judge every item once with the source BinEval (resumable file)."""
        if self.evaluator_mode != "cross_model" or self.source_verdicts is not None:
            return []
        path = out_dir / "source_verdicts.jsonl"
        done: dict[str, list[QuestionVerdict]] = {}
        if path.is_file():
            fix = f"delete {path.name}: the source verdicts are judged again."
            for line, row in read_jsonl_rows(path):
                try:
                    done[str(row["item_id"])] = [QuestionVerdict.model_validate(v) for v in row["verdicts"]]
                except KeyError as exc:
                    raise InputError("the field is missing", path=path, line=line, field=str(exc.args[0]),
                                     fix=fix) from None
                except ValidationError as exc:
                    raise validation_error(exc, path=path, line=line, what="source verdict", fix=fix) from exc
        items = [ex for ex in [*self.split.train, *self.split.val, *self.split.test] if ex.item_id not in done]
        source = BinEval(self.question_set)
        # Items go through the shared item loop `num_threads` at a time; each batch's
        # verdicts are written before the next is judged, so a stop loses at most one batch.
        step = max(1, self.num_threads)
        with path.open("a", encoding="utf-8") as handle:
            for start in range(0, len(items), step):
                batch = items[start:start + step]
                with lm_context(self.source_lm):
                    judged = judge_items(source, batch, num_threads=self.num_threads)
                failed = []
                for item, verdicts in zip(batch, judged, strict=True):
                    if verdicts is None:
                        failed.append(item.item_id)
                        continue
                    done[item.item_id] = verdicts
                    handle.write(json.dumps({"item_id": item.item_id,
                                             "verdicts": [v.model_dump(mode="json") for v in verdicts]}) + "\n")
                handle.flush()
                if failed:
                    raise BinEvalError(f"the source evaluator failed on item {failed[0]} "
                                       f"({len(failed)} item(s) in all); rerun to retry")
        self.source_verdicts = done
        return []

    def student(self) -> BinEval:
        program = BinEval(self.question_set)
        if self.judge_instructions:
            program.judge.signature = program.judge.signature.with_instructions(self.judge_instructions)
        return program

    def metric(self) -> Callable[..., dspy.Prediction]:
        if self.evaluator_mode == "human":
            return HumanAgreementMetric(self.question_set, dimensions=self.question_set.dimensions,
                                        human_scale=self.human_scale)
        if self.source_verdicts is None:
            raise BinEvalError("call prepare() first: the source verdicts are not computed yet")
        return SourceAgreementMetric(self.question_set, self.source_verdicts)

    def bineval_optimizer(self, *, max_iterations: int, **settings: Any) -> BinEvalOptimizer:
        if self.evaluator_mode == "human":
            return BinEvalOptimizer("human", max_iterations=max_iterations, prompt_lm=self.prompt_lm,
                                    human_scale=self.human_scale, regenerate_questions=self.regenerate_questions,
                                    num_threads=self.num_threads, progress=self.progress, labels=self.labels,
                                    **settings)
        return BinEvalOptimizer("cross_model", max_iterations=max_iterations, prompt_lm=self.prompt_lm,
                                source=self.source_verdicts, num_threads=self.num_threads, progress=self.progress,
                                **settings)

    def test(self, program: dspy.Module) -> list[dict[str, Any]]:
        """Per test item: the evaluator's dimension scores, the normalized human ratings and,
        in cross-model mode, the agreement with the source's verdicts; with `labels`, its
        judge-vs-label cells (``label_cells``: yes_yes, yes_no, no_yes, no_no) and the
        labelled questions not answered yes / no (``label_unanswered``)."""
        judged = judge_items(program, self.split.test, num_threads=self.num_threads)
        records = []
        agreement = self.metric() if self.evaluator_mode == "cross_model" else None
        for item, verdicts in zip(self.split.test, judged, strict=True):
            dims = self.question_set.dimensions
            card = score_verdicts(verdicts, program.question_set) if verdicts is not None else None
            record: dict[str, Any] = {
                "item_id": item.item_id,
                "model": {d: (card.dimension_scores.get(d) if card else None) for d in dims},
                "human": normalized_human_scores(item, dims, scale=self.human_scale),
                "unparsed": card.total_counts.unparsed if card else None,
                "failed": verdicts is None,
            }
            if agreement is not None:
                pred = dspy.Prediction(verdicts=verdicts or [])
                record["agreement"] = float(agreement(item, pred).score) if verdicts else None
            if self._reference is not None:
                found = compare_item(str(item.item_id), verdicts, self._reference,
                                     [q.id for q in program.question_set.questions])
                record["label_cells"] = [int(c) for c in found.cells]
                record["label_unanswered"] = found.unanswered
            records.append(record)
        return records


# ====================================================================== IFBench
def _default_checkers() -> tuple[Checker, Checker] | None:
    """IFBench's strict and loose checkers when the checker module is installed, else None."""
    try:
        from binaryeval_dspy.ifbench import check_loose, check_strict
    except ImportError:
        return None
    return check_strict, check_loose


@dataclass
class GeneratorSetup(ComparisonSetup):
    """Optimize a generator's prompt on IFBench, judged by BinEval questions per prompt.

    Attributes:
        judge_lm: LM of the BinEval judge (None: the configured LM).
        checkers: (strict, loose) IFBench checkers ``(example, response) -> result with
            follow_all_instructions and follow_instruction_list``; None looks them up in
            `binaryeval_dspy.ifbench`, and if absent the test reports the BinEval score only.
        max_requirements: requirements per prompt for question generation.
        starting_instructions: the generator's starting prompt (None: `RespondToPrompt`'s).
    """

    judge_lm: LMHandle | None = None
    checkers: tuple[Checker, Checker] | None = None
    max_requirements: int = 4
    starting_instructions: str | None = None
    question_sets: dict[str, QuestionSet] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.kind, self.mode = "ifbench", "generation"
        if self.checkers is None:
            self.checkers = _default_checkers()

    def _questions_for_items(self, items: list[dspy.Example], out_dir: Path) -> list[str]:
        folder = out_dir / "questions"
        folder.mkdir(parents=True, exist_ok=True)
        generator = QuestionGenerator(dimensions=["instruction_following"], max_requirements=self.max_requirements)
        for item in items:
            path = folder / f"{item.item_id}.json"
            if path.is_file():
                self.question_sets[item.item_id] = QuestionSet.load(path)
                continue
            try:
                with lm_context(self.prompt_lm):
                    question_set = generator(task_prompt=item.prompt).question_set
            except BinEvalError as exc:
                logger.warning("question generation failed for prompt %s (%s); using the fallback questions",
                               item.item_id, exc)
                question_set = FALLBACK_QUESTIONS.model_copy(update={
                    "task_prompt": item.prompt, "generated_by": f"fallback: question generation failed ({exc})"[:300]})
            self.question_sets[item.item_id] = question_set
            question_set.save(path)
        fallbacks = sorted(k for k, qs in self.question_sets.items() if (qs.generated_by or "").startswith("fallback"))
        if not fallbacks:
            return []
        return [(f"Question generation failed for {len(fallbacks)} of {len(self.question_sets)} prompts "
                 f"({', '.join(fallbacks)}); those prompts use two generic questions (does the response answer "
                 "the request; does it follow every stated constraint).")]

    def prepare(self, out_dir: Path) -> list[str]:
        """Generate (or reload) the binary questions of every train and validation prompt;
        of test prompts too when no checker is available (the test then uses BinEval)."""
        items = [*self.split.train, *self.split.val]
        if self.checkers is None:
            items += self.split.test
        return self._questions_for_items(items, out_dir)

    def student(self) -> dspy.Module:
        program = dspy.Predict(RespondToPrompt)
        if self.starting_instructions:
            program.signature = program.signature.with_instructions(self.starting_instructions)
        return program

    def metric(self) -> BinEvalMetric:
        def questions_for(example: dspy.Example) -> QuestionSet:
            if example.item_id not in self.question_sets:
                raise BinEvalError(f"no questions for item {example.item_id}; call prepare() first")
            return self.question_sets[example.item_id]

        return BinEvalMetric(BinEval(), questions_for=questions_for, input_field="prompt",
                             output_field="response", judge_lm=self.judge_lm)

    def bineval_optimizer(self, *, max_iterations: int, **settings: Any) -> BinEvalOptimizer:
        return BinEvalOptimizer("generation", max_iterations=max_iterations, prompt_lm=self.prompt_lm,
                                judge=self.metric(), num_threads=self.num_threads, progress=self.progress,
                                **settings)

    def test(self, program: dspy.Module) -> list[dict[str, Any]]:
        """Per test item: the response and, with checkers, strict and loose results
        (prompt-level and per instruction); without them, the BinEval score. A generation
        that raised is recorded as failed with its error, an unscored judgement as
        ``bineval: None, scored: false`` (`binaryeval_dspy.ifbench.evaluation.ifbench_test_records`)."""
        from binaryeval_dspy.ifbench.evaluation import ifbench_test_records

        generations = generate_outputs(program, self.split.test, output_field="response",
                                       inputs=lambda item: {"prompt": item.prompt}, num_threads=self.num_threads)
        for item, generation in zip(self.split.test, generations, strict=True):
            if generation.failed:
                logger.warning("generation failed on %s: %s", item.item_id, generation.error)
        return ifbench_test_records(self.split.test, generations, checkers=self.checkers,
                                    metric=self.metric() if self.checkers is None else None,
                                    num_threads=self.num_threads)

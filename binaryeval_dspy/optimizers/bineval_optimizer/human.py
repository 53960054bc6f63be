"""Human mode: update an evaluator from its disagreements with human ratings (paper 3.4, Appendix B).

An item fails when, on some dimension, the evaluator's yes-rate and the human rating
(normalized to [0, 1]) differ by more than a threshold (paper: 0.3). The note-taker sees
that dimension's verdicts with explanations and the human rating. The judge's
instructions are rewritten; optionally the task prompt the questions came from is
rewritten too and the questions regenerated from it. The loop stops early when the
validation Spearman drops and keeps the best iteration.

With question-level labels (`labels`: the records of a labels file, e.g. downloaded from
`bineval view`), the failures are instead the questions whose answer differs from the
label (`label_failures`): the note-taker sees each item's disagreeing questions with the
label beside the verdict. The iteration's scores are then the agreement with the labels
(Cohen's kappa and accuracy, on the training items and, held out from the lessons, the
validation items), the selection score is the validation kappa (the training kappa
without a validation set), and the loop stops early when it drops; human ratings are not
needed. `label_failures.label_agreement_change` reads the before / after figures from the
history.

An item the evaluator could not score on every dimension (its replies did not parse, or
its LM calls failed) is left out of that dimension's pooled Spearman; the iteration
record counts and lists such items, the optimizer compares iterations only when they
were scored on the same items, and the early stop compares two iterations only then too.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import dspy

from binaryeval_dspy.data.human_scores import normalized_human_scores
from binaryeval_dspy.errors import BinEvalError, InputError
from binaryeval_dspy.lm.context import lm_context
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.metrics.correlation import pooled_spearman
from binaryeval_dspy.optimizers.bineval_optimizer import evaluator_runs, label_failures, prompt_slots
from binaryeval_dspy.optimizers.bineval_optimizer.mode_base import (
    Evaluation,
    ItemOutcome,
    UpdateMode,
)
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.programs.note_taker import ItemFindings
from binaryeval_dspy.programs.question_generator import QuestionGenerator
from binaryeval_dspy.runs.item_runs import item_id, judge_item_results
from binaryeval_dspy.schemas.optimization_history import IterationRecord
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.schemas.verdict_record import VerdictRecord
from binaryeval_dspy.scoring import score_verdicts
from binaryeval_dspy.signatures.lesson_extraction import QuestionEvidence

logger = logging.getLogger(__name__)


class HumanMode(UpdateMode):
    """Target = the student BinEval; reference = human ratings on each item.

    Args:
        threshold: an item fails on a dimension when |model - human| > threshold (both
            in [0, 1]; paper: 0.3).
        human_field: the item field holding {dimension: rating}.
        human_scale: the ratings' scale [low, high] (SummEval: 1-5).
        regenerate_questions: also rewrite the question set's task prompt and regenerate
            the questions from it with `QuestionGenerator` (paper Appendix B step 5).
        prompt_lm: LM for question regeneration (None: the configured LM).
        num_threads: items judged concurrently.
        labels: question-level labels (verdicts-file records, judge ``human`` or annotator
            ids; several annotators: their majority); when given, the failures are the
            questions answered against them (see the module docstring). None: item scores
            against `human_field` ratings.

    Raises:
        BinEvalError: `threshold` or `human_scale` out of range, or `labels` with
            `regenerate_questions` (labels name question ids; regenerated questions have others).
        InputError: `labels` hold no yes / no label.
    """

    name = "human"
    prompt_role = ("the instructions of an evaluator that answers one yes/no question about an output; "
                   "its yes-rates should rank outputs the way human raters do")

    def __init__(self, *, threshold: float = 0.3, human_field: str = "human",
                 human_scale: tuple[float, float] = (1.0, 5.0), regenerate_questions: bool = False,
                 prompt_lm: LMHandle | dspy.LM | None = None, num_threads: int = 1,
                 labels: Sequence[VerdictRecord] | None = None) -> None:
        if not 0.0 <= threshold < 1.0:
            raise BinEvalError(f"threshold must be in [0, 1), got {threshold}")
        if human_scale[1] == human_scale[0]:
            raise BinEvalError(f"human_scale needs two different ends, got {human_scale}")
        self.threshold = threshold
        self.human_field = human_field
        self.human_scale = (float(human_scale[0]), float(human_scale[1]))
        self.regenerate_questions = regenerate_questions
        self.prompt_lm = prompt_lm
        self.num_threads = num_threads
        self._dimensions: list[str] = []
        self.labels: label_failures.Reference | None = None
        if labels is not None:
            if regenerate_questions:
                raise BinEvalError("`labels` and `regenerate_questions` do not go together: labels name question "
                                   "ids, and regenerated questions have other ids; drop one of them")
            self.labels = label_failures.label_reference(labels)

    def validate(self, program: dspy.Module, trainset: list[dspy.Example], valset: list[dspy.Example] | None) -> None:
        target = evaluator_runs.require_bineval(program, self.name)
        self._dimensions = list(target.question_set.dimensions)
        for name, items in (("trainset", trainset), ("valset", valset or [])):
            if name == "trainset" or items:
                evaluator_runs.require_items(items, name)
            if self.labels is not None:
                continue
            for item in items:
                normalized_human_scores(item, self._dimensions, field=self.human_field, scale=self.human_scale)
        if self.labels is not None:
            questions = [q.id for q in target.question_set.questions]
            train_ids = [item_id(item, i) for i, item in enumerate(trainset)]
            if not label_failures.labelled_pairs(train_ids, self.labels, questions):
                raise InputError(
                    f"no label names a training item and one of the evaluator's {len(questions)} questions "
                    f"(training items e.g. {', '.join(train_ids[:3])}; questions e.g. {', '.join(questions[:3])})",
                    field="labels", fix="label the training items' questions (the item and question ids of the "
                                        "run the labels were made on), or pass the items the labels name.")
        if self.regenerate_questions and not target.question_set.task_prompt.strip():
            raise BinEvalError("regenerate_questions needs the question set's task_prompt; this set has none")

    def prompts(self, program: dspy.Module) -> dict[str, str]:
        prompts = {"judge_instructions": prompt_slots.get_instructions(program, "judge")}
        if self.regenerate_questions:
            prompts["task_prompt"] = evaluator_runs.require_bineval(program, self.name).question_set.task_prompt
        return prompts

    def _model_scores(self, question_set: QuestionSet, verdicts: list[QuestionVerdict] | None) -> dict[str, float | None]:
        if verdicts is None:
            return {d: None for d in self._dimensions}
        card = score_verdicts(verdicts, question_set)
        return {d: card.dimension_scores.get(d) for d in self._dimensions}

    def _judge(self, program: BinEval, items: list[dspy.Example]
               ) -> tuple[list[list[QuestionVerdict] | None], list[ItemOutcome]]:
        """Verdicts per item (None when judging failed) and whether each item was scored on every dimension."""
        results = judge_item_results(program, items, num_threads=self.num_threads)
        outcomes = [evaluator_runs.verdicts_outcome(item_id(item, i), result, program.question_set, self._dimensions)
                    for i, (item, result) in enumerate(zip(items, results, strict=True))]
        return [None if isinstance(r, Exception) else r for r in results], outcomes

    def _spearman(self, program, items) -> tuple[dict[str, float | None], list[ItemOutcome]]:
        judged, outcomes = self._judge(program, items)
        model = [self._model_scores(program.question_set, verdicts) for verdicts in judged]
        human = [normalized_human_scores(it, self._dimensions, field=self.human_field, scale=self.human_scale)
                 for it in items]
        return pooled_spearman(model, human, self._dimensions), outcomes

    def _compare_with_labels(self, program: BinEval, items: list[dspy.Example]
                             ) -> tuple[list[list[QuestionVerdict] | None], list[ItemOutcome],
                                        list[label_failures.ItemLabelComparison]]:
        reference = self.labels if self.labels is not None else {}
        judged, outcomes = self._judge(program, items)
        questions = [q.id for q in program.question_set.questions]
        comparisons = [label_failures.compare_item(item_id(item, i), judged[i], reference, questions)
                       for i, item in enumerate(items)]
        return judged, outcomes, comparisons

    def _evaluate_with_labels(self, target: BinEval, trainset: list[dspy.Example],
                              valset: list[dspy.Example] | None) -> Evaluation:
        """Failures = the questions answered against the labels; scores = agreement with them."""
        by_id = {q.id: q for q in target.question_set.questions}
        _judged, train_outcomes, comparisons = self._compare_with_labels(target, trainset)
        findings = []
        for index, (item, found) in enumerate(zip(trainset, comparisons, strict=True)):
            if not found.disagreements:
                continue
            evidence = [QuestionEvidence(
                question=by_id[v.question_id].text, dimension=by_id[v.question_id].dimension, verdict=v.verdict,
                explanation=v.explanation,
                reference=f"A person labelled this question {label!r} for this output; the evaluator answered "
                          f"{v.verdict!r}.") for v, label in found.disagreements]
            findings.append(ItemFindings(
                item_id=item_id(item, index), input=item.input, output=item.output, evidence=evidence,
                severity=len(found.disagreements) / found.answered,
                problem=(f"{len(found.disagreements)} of {found.answered} labelled questions answered against the "
                         "person's labels.")))
        scores = label_failures.label_scores("train", comparisons)
        scores["train_failure_rate"] = len(findings) / len(trainset)
        selection = scores["train_label_kappa"]
        val_outcomes = None
        if valset:
            _judged, val_outcomes, val_comparisons = self._compare_with_labels(target, valset)
            scores.update(label_failures.label_scores("val", val_comparisons))
            selection = scores["val_label_kappa"]
        stop = None if findings else "every labelled question the evaluator answered agrees with the labels"
        if not findings and not any(c.answered for c in comparisons):
            stop = "no labelled question of the training items was answered yes or no"
        return Evaluation.of_splits(scores, selection, findings, train_outcomes, val_outcomes, stop_reason=stop)

    def evaluate(self, program: dspy.Module, trainset: list[dspy.Example], valset: list[dspy.Example] | None) -> Evaluation:
        target = evaluator_runs.require_bineval(program, self.name)
        if self.labels is not None:
            return self._evaluate_with_labels(target, trainset, valset)
        question_set = target.question_set
        judged, train_outcomes = self._judge(target, trainset)
        model, human, findings = [], [], []
        by_id = {q.id: q for q in question_set.questions}
        for index, item in enumerate(trainset):
            key = item_id(item, index)
            scores = self._model_scores(question_set, judged[index])
            rating = normalized_human_scores(item, self._dimensions, field=self.human_field, scale=self.human_scale)
            model.append(scores)
            human.append(rating)
            off = {d: scores[d] - rating[d] for d in self._dimensions
                   if scores[d] is not None and abs(scores[d] - rating[d]) > self.threshold}
            if not off:
                continue
            evidence = []
            for v in judged[index] or []:
                q = by_id.get(v.question_id)
                if q is None or q.dimension not in off or not v.parsed:
                    continue
                direction = "too lenient" if off[q.dimension] > 0 else "too strict"
                evidence.append(QuestionEvidence(
                    question=q.text, dimension=q.dimension, verdict=v.verdict, explanation=v.explanation,
                    reference=(f"Humans rated {q.dimension} {rating[q.dimension]:.2f} on a 0-1 scale; the evaluator's "
                               f"yes-rate was {scores[q.dimension]:.2f}, so it was {direction} on this dimension.")))
            problem = "; ".join(f"{d}: evaluator {scores[d]:.2f} vs humans {rating[d]:.2f}" for d in off)
            findings.append(ItemFindings(item_id=key, input=item.input, output=item.output, evidence=evidence,
                                         severity=max(abs(g) for g in off.values()),
                                         problem=f"Scores far from the human ratings ({problem})."))
        train = pooled_spearman(model, human, self._dimensions)
        scores: dict[str, float | None] = {"train_spearman": train["mean"],
                                           "train_failure_rate": len(findings) / len(trainset)}
        selection = train["mean"]
        val_outcomes = None
        if valset:
            val, val_outcomes = self._spearman(target, valset)
            scores.update({f"val_spearman_{d}": val[d] for d in self._dimensions})
            scores["val_spearman"] = selection = val["mean"]
        stop = None if findings else f"no item differs from the human ratings by more than {self.threshold}"
        if not findings and not any(o.status == "scored" for o in train_outcomes):
            stop = "no training item could be scored (every judgement failed or did not parse)"
        return Evaluation.of_splits(scores, selection, findings, train_outcomes, val_outcomes, stop_reason=stop)

    def early_stop(self, records: list[IterationRecord]) -> str | None:
        """Stop when the selection Spearman (with labels: the label kappa) dropped from the
        previous iteration, both scored on the same items (else the two numbers are not
        comparable: no stop)."""
        if len(records) < 2:
            return None
        if records[-1].selection_missing != records[-2].selection_missing:
            return None
        now, before = records[-1].selection_score, records[-2].selection_score
        if now is not None and before is not None and now < before:
            scores = records[-1].scores
            which = "validation" if "val_spearman" in scores or "val_label_kappa" in scores else "training"
            figure = "label kappa" if self.labels is not None else "Spearman"
            return f"the {which} {figure} dropped ({before:.3f} -> {now:.3f})"
        return None

    def apply(self, program: dspy.Module, new_prompts: dict[str, str], record: IterationRecord) -> None:
        prompt_slots.set_instructions(program, new_prompts["judge_instructions"], "judge")
        if not self.regenerate_questions:
            return
        target = evaluator_runs.require_bineval(program, self.name)
        old = target.question_set
        if new_prompts["task_prompt"] == old.task_prompt:
            record.note = "task prompt unchanged; questions kept"
            return
        try:
            with lm_context(self.prompt_lm):
                generated = QuestionGenerator(dimensions=list(old.dimensions))(task_prompt=new_prompts["task_prompt"])
        except BinEvalError as exc:
            record.note = f"question regeneration failed, questions kept: {exc}"
            logger.warning(record.note)
            target.question_set = old.model_copy(update={"task_prompt": new_prompts["task_prompt"]})
            return
        target.question_set = generated.question_set
        record.questions_regenerated = True

"""Generation mode: improve a generator's prompt from a BinEval judge's failed questions (paper 3.4).

Each iteration generates an output for every training item with the current prompt,
judges it with binary questions, and hands every question answered "no" (with the
judge's explanation) to the note-taker. It stops when nothing fails or after T
iterations; the selection score is the mean BinEval score on the validation set.

A generator call that raised (a transport error included) is a failed item with its
error: it is never judged as an empty text, gives no lesson and is left out of the mean,
like an output the judge could not score; both are counted in the iteration record.
"""

from __future__ import annotations

from dataclasses import dataclass

import dspy

from binaryeval_dspy.errors import InputError
from binaryeval_dspy.optimizers.bineval_optimizer.mode_base import (
    Evaluation,
    ItemOutcome,
    UpdateMode,
    lm_name,
)
from binaryeval_dspy.optimizers.bineval_optimizer.prompt_slots import (
    find_predictor,
    get_instructions,
    set_instructions,
)
from binaryeval_dspy.programs.bineval_metric import BinEvalMetric, JudgedOutput
from binaryeval_dspy.programs.note_taker import ItemFindings
from binaryeval_dspy.runs.item_runs import Generation, generate_outputs, item_id
from binaryeval_dspy.schemas.optimization_history import IterationRecord
from binaryeval_dspy.signatures.lesson_extraction import QuestionEvidence


@dataclass
class _ItemRun:
    """One item in one evaluation: its generation, and its judgement when there was an output."""

    item_id: str
    generation: Generation
    judged: JudgedOutput | None = None
    result: dspy.Prediction | None = None

    @property
    def score(self) -> float:
        """The metric's score (0.0 for an empty output); only meaningful when scored."""
        return float(self.result.score) if self.result is not None else 0.0

    @property
    def outcome(self) -> ItemOutcome:
        if self.generation.failed:
            return ItemOutcome(self.item_id, "failed", "generation", self.generation.error)
        if self.judged is None:  # an empty output: a real 0.0, nothing to judge
            return ItemOutcome(self.item_id, "scored")
        status = self.judged.status
        return ItemOutcome(self.item_id, status, "" if status == "scored" else "judge", self.judged.problem)


class GenerationMode(UpdateMode):
    """Target = a generator program; reference = a `BinEvalMetric` judging its outputs.

    Args:
        judge: the metric that judges outputs (its questions, judge LM, input and output
            field names are used).
        predictor_name: the predictor whose instructions are the generation prompt; None
            picks the program's only predictor.
        num_threads: items generated and judged concurrently.
    """

    name = "generation"
    prompt_role = "the instructions a generator model follows when it answers a request"

    def __init__(self, *, judge: BinEvalMetric, predictor_name: str | None = None, num_threads: int = 1) -> None:
        self.judge = judge
        self.predictor_name = predictor_name
        self.num_threads = num_threads

    def lm_names(self) -> dict[str, str]:
        return {"judge": lm_name(self.judge.judge_lm)}

    def validate(self, program: dspy.Module, trainset: list[dspy.Example], valset: list[dspy.Example] | None) -> None:
        find_predictor(program, self.predictor_name)
        if not trainset:
            raise InputError("the trainset is empty", field="trainset", fix="pass at least one item.")
        for name, items in (("trainset", trainset), ("valset", valset or [])):
            for index, item in enumerate(items):
                if not item.inputs().keys():
                    raise InputError(f"{name} item {item_id(item, index)!r} declares no inputs", field="inputs",
                                     fix="call .with_inputs(...) on the examples.")
                value = item.get(self.judge.input_field)
                if not isinstance(value, str) or not value.strip():
                    raise InputError(f"{name} item {item_id(item, index)!r} has no '{self.judge.input_field}' "
                                     "for the judge", field=self.judge.input_field)

    def prompts(self, program: dspy.Module) -> dict[str, str]:
        return {"generator_instructions": get_instructions(program, self.predictor_name)}

    def _run(self, program: dspy.Module, items: list[dspy.Example]) -> list[_ItemRun]:
        """Generate every item's output, then judge the generated ones in one item loop.

        A generator call that raised is ``failed`` (stage ``generation``) with its error
        and is not judged; a judged output is ``scored``, ``unscored`` or ``failed``
        (stage ``judge``) as the metric says (`BinEvalMetric.prediction`).
        """
        generations = generate_outputs(program, items, output_field=self.judge.output_field,
                                       num_threads=self.num_threads)
        runs = [_ItemRun(item_id(item, i), g) for i, (item, g) in enumerate(zip(items, generations, strict=True))]
        to_judge = [(index, item) for index, (item, run) in enumerate(zip(items, runs, strict=True))
                    if not run.generation.failed and (run.generation.output or "").strip()]
        judged = self.judge.judge_outputs([(item, runs[index].generation.output) for index, item in to_judge],
                                          num_threads=self.num_threads)
        for (index, _), judgement in zip(to_judge, judged, strict=True):
            runs[index].judged = judgement
            runs[index].result = self.judge.prediction(judgement)
        for item, run in zip(items, runs, strict=True):
            if run.result is None and not run.generation.failed:  # empty output: the metric's real 0.0
                run.result = self.judge(item, dspy.Prediction(**{self.judge.output_field: ""}))
        return runs

    @staticmethod
    def _mean_score(runs: list[_ItemRun]) -> float | None:
        """Mean BinEval score over the scored items (an empty output scores 0.0); None if none."""
        values = [run.score for run in runs if run.outcome.status == "scored"]
        return sum(values) / len(values) if values else None

    def evaluate(self, program: dspy.Module, trainset: list[dspy.Example], valset: list[dspy.Example] | None) -> Evaluation:
        runs = self._run(program, trainset)
        val_runs = self._run(program, valset) if valset else None
        findings: list[ItemFindings] = []
        all_pass = 0
        for item, run in zip(trainset, runs, strict=True):
            if run.outcome.status != "scored":
                continue  # no evidence either way: counted in the record's item_problems
            if run.judged is None:  # the generator produced nothing
                findings.append(ItemFindings(item_id=run.item_id, input=item.get(self.judge.input_field),
                                             output="(none)", problem="the generator produced no response",
                                             severity=1.0))
                continue
            judged = run.judged
            failed = [v for v in judged.verdicts if v.verdict == "no"]
            if not failed:
                all_pass += 1
                continue
            by_id = {q.id: q for q in judged.question_set.questions}
            evidence = [QuestionEvidence(
                question=by_id[v.question_id].text, dimension=by_id[v.question_id].dimension, verdict="no",
                explanation=v.explanation, reference="A good response satisfies this question (answer yes).")
                for v in failed]
            findings.append(ItemFindings(
                item_id=run.item_id, input=item.get(self.judge.input_field), output=run.generation.output,
                evidence=evidence, severity=len(failed) / max(1, len(judged.verdicts)),
                problem=f"The response failed {len(failed)} of {len(judged.verdicts)} questions of the judge."))
        scored = sum(run.outcome.status == "scored" for run in runs)
        scores: dict[str, float | None] = {"train_score": self._mean_score(runs),
                                           "train_all_pass_rate": all_pass / scored if scored else None}
        selection = scores["train_score"]
        if val_runs is not None:
            scores["val_score"] = selection = self._mean_score(val_runs)
        evaluation = Evaluation.of_splits(scores, selection, findings, [run.outcome for run in runs],
                                          None if val_runs is None else [run.outcome for run in val_runs])
        if not findings:
            evaluation.stop_reason = ("nothing failed on the training items" if scored else
                                      "no training item could be scored (every generation or judgement failed)")
        return evaluation

    def apply(self, program: dspy.Module, new_prompts: dict[str, str], record: IterationRecord) -> None:
        set_instructions(program, new_prompts["generator_instructions"], self.predictor_name)

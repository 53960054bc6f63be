"""Generation mode: improve a generator's prompt from a BinEval judge's failed questions (paper 3.4).

Each iteration generates an output for every training item with the current prompt,
judges it with binary questions, and hands every question answered "no" (with the
judge's explanation) to the note-taker. It stops when nothing fails or after T
iterations; the selection score is the mean BinEval score on the validation set.
"""

from __future__ import annotations

import dspy

from binaryeval_dspy.errors import InputError
from binaryeval_dspy.optimizers.bineval_optimizer.item_runs import item_id, run_items
from binaryeval_dspy.optimizers.bineval_optimizer.mode_base import Evaluation, UpdateMode, lm_name
from binaryeval_dspy.optimizers.bineval_optimizer.prompt_slots import (
    find_predictor,
    get_instructions,
    set_instructions,
)
from binaryeval_dspy.programs.bineval_metric import BinEvalMetric, JudgedOutput
from binaryeval_dspy.programs.note_taker import ItemFindings
from binaryeval_dspy.schemas.optimization_history import IterationRecord
from binaryeval_dspy.signatures.lesson_extraction import QuestionEvidence


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

    def _generate_and_judge(self, program: dspy.Module, item: dspy.Example) -> tuple[str, JudgedOutput | None, str]:
        """(output, judgement or None, problem note) for one item; parse failures become empty outputs."""
        try:
            pred = program(**item.inputs())
            output = pred.get(self.judge.output_field) if hasattr(pred, "get") else None
        except Exception as exc:  # an unparseable generation is a failed generation, not a crash
            return "", None, f"the generator's answer could not be used ({type(exc).__name__})"
        if not isinstance(output, str) or not output.strip():
            return "", None, "the generator produced no response"
        return output, self.judge.judge_output(item, output), ""

    def _scores(self, program: dspy.Module, items: list[dspy.Example]) -> list[tuple[str, JudgedOutput | None, str] | Exception]:
        return run_items(lambda item: self._generate_and_judge(program, item), items, num_threads=self.num_threads)

    @staticmethod
    def _mean_score(results: list) -> float | None:
        values = []
        for r in results:
            if isinstance(r, Exception):
                continue
            judged = r[1]
            if judged is None:
                values.append(0.0)
            elif judged.score_card.overall is not None:
                values.append(judged.score_card.overall)
        return sum(values) / len(values) if values else None

    def evaluate(self, program: dspy.Module, trainset: list[dspy.Example], valset: list[dspy.Example] | None) -> Evaluation:
        results = self._scores(program, trainset)
        findings: list[ItemFindings] = []
        all_pass = 0
        for index, (item, result) in enumerate(zip(trainset, results, strict=True)):
            if isinstance(result, Exception):
                continue  # the judge's LM failed: no evidence either way
            output, judged, problem = result
            if judged is None:
                findings.append(ItemFindings(item_id=item_id(item, index), input=item.get(self.judge.input_field),
                                             output=output or "(none)", problem=problem, severity=1.0))
                continue
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
                item_id=item_id(item, index), input=item.get(self.judge.input_field), output=output,
                evidence=evidence, severity=len(failed) / max(1, len(judged.verdicts)),
                problem=f"The response failed {len(failed)} of {len(judged.verdicts)} questions of the judge."))
        scores: dict[str, float | None] = {"train_score": self._mean_score(results),
                                           "train_all_pass_rate": all_pass / len(trainset)}
        selection = scores["train_score"]
        if valset:
            scores["val_score"] = selection = self._mean_score(self._scores(program, valset))
        stop = None if findings else "nothing failed on the training items"
        return Evaluation(scores=scores, selection_score=selection, findings=findings, failures=len(findings),
                          stop_reason=stop)

    def apply(self, program: dspy.Module, new_prompts: dict[str, str], record: IterationRecord) -> None:
        set_instructions(program, new_prompts["generator_instructions"], self.predictor_name)

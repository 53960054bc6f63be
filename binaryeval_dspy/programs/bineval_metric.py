"""BinEvalMetric: BinEval as a DSPy metric, so any DSPy optimizer can improve a generator with it.

The metric judges a program's output with binary questions and returns
``dspy.Prediction(score=..., feedback=...)``: the score is the yes-rate in [0, 1] and the
feedback lists every question answered "no" with the judge's explanation, which is what
GEPA's reflection reads. It takes DSPy's five-argument form
``(gold, pred, trace=None, pred_name=None, pred_trace=None)``, so `dspy.Evaluate`,
MIPROv2, COPRO, SIMBA and GEPA all accept it; `as_float()` gives the same metric
returning a plain float for code that tests a metric's truth value (bootstrapping).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import dspy

from binaryeval_dspy.errors import BinEvalError
from binaryeval_dspy.lm.cache_identity import ensure_cache_identity
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.score_card import ScoreCard
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.scoring import score_verdicts

QuestionsFor = Callable[[dspy.Example], QuestionSet]


@dataclass
class JudgedOutput:
    """One judged output: the questions asked, the verdicts and the score card."""

    question_set: QuestionSet
    verdicts: list[QuestionVerdict]
    score_card: ScoreCard

    @property
    def failed(self) -> list[tuple[str, str, str]]:
        """(dimension, question, explanation) of every question answered "no"."""
        by_id = {q.id: q for q in self.question_set.questions}
        return [(by_id[v.question_id].dimension, by_id[v.question_id].text, v.explanation)
                for v in self.verdicts if v.verdict == "no"]


def lm_context(lm: LMHandle | dspy.LM | None) -> Any:
    """A context that runs DSPy calls on `lm` (with its adapter for an `LMHandle`); no-op for None.

    A bare `dspy.LM` is given its endpoint's cache identity first (`ensure_cache_identity`),
    so two LMs with one model id on different endpoints never share cached answers.
    """
    if lm is None:
        return nullcontext()
    if isinstance(lm, LMHandle):
        return lm.context()
    return dspy.context(lm=ensure_cache_identity(lm))


class BinEvalMetric:
    """Score a program's output with BinEval: yes-rate plus the failed questions as feedback.

    Args:
        judge: the BinEval whose judge answers the questions (its instructions and LM
            settings are used); None makes a default `BinEval()`.
        question_set: the questions for every item; else the judge's own set.
        questions_for: callable gold Example -> `QuestionSet` for per-item questions
            (IFBench: each prompt has its own constraints). Takes precedence.
        questions_field: a gold field holding a `QuestionSet` (or its JSON dict), used
            when `questions_for` is None and the field is present.
        input_field: the gold field holding the input x shown to the judge.
        output_field: the prediction field holding the output y to judge.
        judge_lm: the LM (or `LMHandle`) the judge runs on; None uses the configured LM.
        max_feedback_questions: list at most this many failed questions in the feedback.

    Returns (when called):
        ``dspy.Prediction(score, feedback, score_card, verdicts)``. ``score`` is the
        yes-rate over parsed verdicts, in [0, 1]. Unparsed verdicts are left out and
        mentioned in the feedback, never counted as "no"; when nothing parsed the score
        is 0.0, the feedback says so and `unscored` is incremented. An empty output
        scores 0.0 (the program produced nothing to judge).

    Raises:
        BinEvalError: no questions can be found for an item, or the gold example lacks
            the input field.

    Example:
        >>> metric = BinEvalMetric(BinEval(question_set), input_field="prompt",   # doctest: +SKIP
        ...                        output_field="response", judge_lm=judge_lm)
        >>> dspy.Evaluate(devset=dev, metric=metric)(program)                     # doctest: +SKIP
        >>> dspy.GEPA(metric=metric, reflection_lm=lm, max_metric_calls=50)       # doctest: +SKIP
    """

    def __init__(
        self,
        judge: BinEval | None = None,
        *,
        question_set: QuestionSet | None = None,
        questions_for: QuestionsFor | None = None,
        questions_field: str = "question_set",
        input_field: str = "input",
        output_field: str = "output",
        judge_lm: LMHandle | dspy.LM | None = None,
        max_feedback_questions: int = 10,
    ) -> None:
        self.judge = judge if judge is not None else BinEval()
        self.question_set = question_set
        self.questions_for = questions_for
        self.questions_field = questions_field
        self.input_field = input_field
        self.output_field = output_field
        self.judge_lm = judge_lm
        self.max_feedback_questions = max_feedback_questions
        self.unscored = 0
        self.calls = 0
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ questions
    def questions(self, gold: dspy.Example) -> QuestionSet:
        """The question set for `gold` (per-item callable, gold field, fixed set, judge's set)."""
        if self.questions_for is not None:
            return self.questions_for(gold)
        value = gold.get(self.questions_field) if hasattr(gold, "get") else None
        if isinstance(value, QuestionSet):
            return value
        if isinstance(value, dict):
            return QuestionSet.from_data(value, path=f"<example field '{self.questions_field}'>")
        if self.question_set is not None:
            return self.question_set
        if self.judge.questions.value is not None:
            return self.judge.question_set
        raise BinEvalError(
            "BinEvalMetric has no questions for this example: pass question_set=, questions_for=, "
            f"a judge with a question set, or put a QuestionSet in the example's '{self.questions_field}' field"
        )

    def judge_output(self, gold: dspy.Example, output: str) -> JudgedOutput:
        """Answer every question of `gold`'s question set about `output` (judge LM calls)."""
        input_text = gold.get(self.input_field) if hasattr(gold, "get") else None
        if not isinstance(input_text, str) or not input_text.strip():
            raise BinEvalError(f"the gold example has no non-empty '{self.input_field}' field to show the judge")
        question_set = self.questions(gold)
        # The judge's calls must not land in the trace of the program being optimized.
        with lm_context(self.judge_lm), dspy.context(trace=None):
            verdicts = [self.judge.judge_question(input_text, output, q) for q in question_set.questions]
        return JudgedOutput(question_set, verdicts, score_verdicts(verdicts, question_set))

    # ------------------------------------------------------------------ metric
    def feedback(self, judged: JudgedOutput) -> str:
        """Readable feedback: the score, then each failed question with its explanation."""
        counts = judged.score_card.total_counts
        lines = [(f"BinEval score {judged.score_card.overall or 0.0:.2f}: {counts.yes} of {counts.parsed} "
                  "questions answered yes.")]
        failed = judged.failed
        if failed:
            lines.append("Failed questions (the judge answered no):")
            for dimension, question, explanation in failed[: self.max_feedback_questions]:
                lines.append(f"- [{dimension}] {question} Judge: {explanation or '(no explanation)'}")
            if len(failed) > self.max_feedback_questions:
                lines.append(f"... and {len(failed) - self.max_feedback_questions} more.")
        else:
            lines.append("No question failed.")
        if counts.unparsed:
            lines.append(f"{counts.unparsed} answer(s) could not be parsed and were left out of the score.")
        return "\n".join(lines)

    def __call__(
        self,
        gold: dspy.Example,
        pred: Any,
        trace: Any = None,
        pred_name: str | None = None,
        pred_trace: Any = None,
    ) -> dspy.Prediction:
        """Judge ``pred.<output_field>`` for `gold`; see the class docstring for the result."""
        with self._lock:
            self.calls += 1
        output = pred.get(self.output_field) if hasattr(pred, "get") else getattr(pred, self.output_field, None)
        if not isinstance(output, str) or not output.strip():
            return dspy.Prediction(score=0.0, feedback=f"The program produced no '{self.output_field}' to judge.",
                                   score_card=None, verdicts=[])
        judged = self.judge_output(gold, output)
        overall = judged.score_card.overall
        if overall is None:
            with self._lock:
                self.unscored += 1
            return dspy.Prediction(score=0.0, feedback="No verdict of the judge could be parsed; unscored.",
                                   score_card=judged.score_card, verdicts=judged.verdicts)
        return dspy.Prediction(score=float(overall), feedback=self.feedback(judged),
                               score_card=judged.score_card, verdicts=judged.verdicts)

    def as_float(self) -> Callable[..., float]:
        """The same metric returning ``float(score)`` (for bootstrapping code that tests truth values)."""

        def float_metric(gold: dspy.Example, pred: Any, trace: Any = None, pred_name: str | None = None,
                         pred_trace: Any = None) -> float:
            return float(self(gold, pred, trace, pred_name, pred_trace).score)

        float_metric.__name__ = "bineval_score"
        return float_metric

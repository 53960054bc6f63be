"""BinEval: answer every binary question about one output and score the answers (paper 3.2)."""

from __future__ import annotations

import re
from collections.abc import Callable

import dspy
from dspy.utils.exceptions import AdapterParseError

from binaryeval_dspy.errors import BinEvalError, InputError
from binaryeval_dspy.programs.code_checks import answer_with_check
from binaryeval_dspy.programs.question_set_state import QuestionSetState
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.scoring import score_verdicts
from binaryeval_dspy.signatures.binary_judgment import JudgeBinaryQuestion

_SALVAGE = (
    re.compile(r'"verdict"\s*:\s*"\s*(yes|no)\s*"', re.IGNORECASE),
    re.compile(r"\[\[\s*##\s*verdict\s*##\s*\]\]\s*\W*(yes|no)\b", re.IGNORECASE),
)
_SALVAGE_EXPLANATION = (
    re.compile(r'"explanation"\s*:\s*"((?:[^"\\]|\\.)*)"', re.IGNORECASE),
    re.compile(r"\[\[\s*##\s*explanation\s*##\s*\]\]\s*(.*?)(?:\[\[|$)", re.IGNORECASE | re.DOTALL),
)


def _salvage(raw: str) -> tuple[str, str] | None:
    """Read a verdict whose only flaw is case or quoting (e.g. ``"Yes"``); else None."""
    for pattern in _SALVAGE:
        match = pattern.search(raw or "")
        if match:
            explanation = ""
            for ep in _SALVAGE_EXPLANATION:
                em = ep.search(raw)
                if em:
                    explanation = em.group(1).strip()
                    break
            return match.group(1).lower(), explanation
    return None


class BinEval(dspy.Module):
    """Evaluate an output with binary questions and aggregate yes-rates (paper 3.2).

    Each question is answered in its own LM call (the evaluator sees the input, the
    output and one question), optionally on several threads. A verdict that cannot be
    read as yes/no is recorded as ``unparsed``: excluded from every denominator and
    counted in the score card, never treated as "no".

    Questions that carry a ``check`` are answered by that code check first, always,
    and never sent to the LM; their verdicts are scored like the LM's.

    Args:
        question_set: the frozen questions; kept as program state, so
            ``program.save(path)`` / ``program.load(path)`` round-trip it.
        scale: interval [a, b] for scaled scores, e.g. ``(1, 5)`` for a Likert scale.
        num_threads: concurrent question calls per item (1 = sequential). Embedded
            llama.cpp models serialize calls anyway; remote endpoints gain from more.

    Example:
        >>> evaluator = BinEval(question_set, scale=(1, 5))           # doctest: +SKIP
        >>> pred = evaluator(input=article, output=summary)           # doctest: +SKIP
        >>> pred.score_card.dimension_scores["consistency"]           # in [0, 1]  # doctest: +SKIP
    """

    def __init__(
        self,
        question_set: QuestionSet | None = None,
        *,
        scale: tuple[float, float] = (0.0, 1.0),
        num_threads: int = 1,
    ) -> None:
        super().__init__()
        if num_threads < 1:
            raise BinEvalError(f"num_threads must be >= 1, got {num_threads}")
        self.questions = QuestionSetState(question_set)
        self.judge = dspy.Predict(JudgeBinaryQuestion)
        self.scale = (float(scale[0]), float(scale[1]))
        self.num_threads = num_threads

    @property
    def question_set(self) -> QuestionSet:
        """The question set in use. Raises BinEvalError if none was given or loaded."""
        if self.questions.value is None:
            raise BinEvalError(
                "this BinEval has no question set: pass one to BinEval(question_set) or load a saved program"
            )
        return self.questions.value

    @question_set.setter
    def question_set(self, value: QuestionSet) -> None:
        self.questions.value = value

    def judge_question(self, input: str, output: str, question: BinaryQuestion) -> QuestionVerdict:
        """Answer one binary question f_E(x, y, q) with its explanation (paper 3.2).

        Returns:
            A `QuestionVerdict`; ``unparsed`` (with the raw LM text) when the answer
            cannot be read as yes/no. LM transport errors propagate, so a failed call
            is retried by a rerun instead of being stored as an answer.
        """
        try:
            pred = self.judge(
                input=input, output=output, question=question.text,
                violation_example=question.violation_example,
            )
        except AdapterParseError as exc:
            raw = str(exc.lm_response or "")
            salvaged = _salvage(raw)
            if salvaged is not None:
                return QuestionVerdict(question_id=question.id, verdict=salvaged[0], explanation=salvaged[1])
            return QuestionVerdict(
                question_id=question.id, verdict="unparsed", raw_answer=raw[:2000],
                error=f"{type(exc).__name__}: could not read a yes/no verdict",
            )
        verdict = str(pred.verdict).strip().lower()
        explanation = str(getattr(pred, "explanation", "") or "").strip()
        if verdict not in ("yes", "no"):
            return QuestionVerdict(
                question_id=question.id, verdict="unparsed", raw_answer=str(pred.verdict)[:2000],
                error="the verdict field is neither yes nor no",
            )
        return QuestionVerdict(question_id=question.id, verdict=verdict, explanation=explanation)

    def forward(self, input: str, output: str) -> dspy.Prediction:
        """Answer every question about `output` and score it.

        Args:
            input: the source x (document, dialogue context, instruction); non-empty.
            output: the output y under evaluation; non-empty.

        Returns:
            `dspy.Prediction` with ``score`` (overall yes-rate in [0, 1], None if nothing
            parsed), ``score_card`` (`ScoreCard`: per-dimension S_d, counts, scaled
            scores) and ``verdicts`` (list of `QuestionVerdict`, in question order).

        Raises:
            InputError: `input` or `output` is empty or not a string.
        """
        for name, value in (("input", input), ("output", output)):
            if not isinstance(value, str) or not value.strip():
                raise InputError(f"BinEval needs a non-empty string, got {value!r:.60}", field=name)
        question_set = self.question_set
        by_code = {q.id: answer_with_check(q, input=input, output=output) for q in question_set.code_checked}
        questions = [q for q in question_set.questions if q.id not in by_code]
        if not questions:
            verdicts = []
        elif self.num_threads > 1 and len(questions) > 1:
            pairs: list[tuple[Callable[..., QuestionVerdict], tuple[str, str, BinaryQuestion]]] = [
                (self.judge_question, (input, output, q)) for q in questions
            ]
            parallel = dspy.Parallel(
                num_threads=min(self.num_threads, len(questions)), max_errors=1,
                disable_progress_bar=True, provide_traceback=False,
            )
            try:
                verdicts = parallel(pairs)
            except Exception as exc:  # DSPy's executor raises a bare Exception on cancel
                raise BinEvalError(f"an LM call failed while judging this item ({exc}); rerun to retry it") from exc
            if any(v is None for v in verdicts):
                raise BinEvalError("an LM call failed while judging this item; rerun to retry it")
        else:
            verdicts = [self.judge_question(input, output, q) for q in questions]
        by_lm = {v.question_id: v for v in verdicts}
        verdicts = [by_code.get(q.id) or by_lm[q.id] for q in question_set.questions]
        card = score_verdicts(verdicts, question_set, scale=self.scale)
        return dspy.Prediction(score=card.overall, score_card=card, verdicts=list(verdicts))

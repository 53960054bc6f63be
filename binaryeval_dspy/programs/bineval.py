"""BinEval: answer every binary question about one output and score the answers (paper 3.2)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dspy
from dspy.utils.exceptions import AdapterParseError

from binaryeval_dspy.errors import BinEvalError, InputError
from binaryeval_dspy.programs.code_checks import answer_with_check
from binaryeval_dspy.programs.question_set_state import QuestionSetState, ScaleState
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.scoring import score_verdicts
from binaryeval_dspy.signatures.binary_judgment import JudgeBinaryQuestion

_CHAT_VERDICT = re.compile(r"^\s*\[\[\s*##\s*verdict\s*##\s*\]\]\s*\n\s*(yes|no)\s*[.!]?\s*$",
                           re.IGNORECASE | re.MULTILINE)
_CHAT_EXPLANATION = re.compile(r"\[\[\s*##\s*explanation\s*##\s*\]\]\s*(.*?)\s*(?:\[\[|$)",
                               re.IGNORECASE | re.DOTALL)


def _salvage(raw: str) -> tuple[str, str] | None:
    """Read a verdict whose only flaw is its case (``"Yes"``, ``"NO"``); else None.

    Accepted: a whole JSON object whose ``verdict`` is yes/no in any case, or a
    ChatAdapter field block whose verdict line is exactly yes/no. A verdict merely
    mentioned inside prose is not read.
    """
    text = (raw or "").strip()
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict):
        verdict = data.get("verdict")
        if isinstance(verdict, str) and verdict.strip().lower() in ("yes", "no"):
            explanation = data.get("explanation")
            return verdict.strip().lower(), explanation.strip() if isinstance(explanation, str) else ""
        return None
    match = _CHAT_VERDICT.search(text)
    if match:
        explained = _CHAT_EXPLANATION.search(text)
        return match.group(1).lower(), explained.group(1).strip() if explained else ""
    return None


@dataclass
class _ThreadOutcome:
    verdict: QuestionVerdict | None
    error: Exception | None
    usage: dict[str, list[dict]]


class BinEval(dspy.Module):
    """Evaluate an output with binary questions and aggregate yes-rates (paper 3.2).

    Each question is answered in its own LM call (the evaluator sees the input, the
    output and one question), optionally on several threads. A verdict that cannot be
    read as yes/no is recorded as ``unparsed``: excluded from every denominator and
    counted in the score card, never treated as "no".

    Questions that carry a ``check`` are answered by that code check first, always,
    and never sent to the LM; their verdicts are scored like the LM's.

    Args:
        question_set: the frozen questions (a `QuestionSet` or the path of its JSON);
            kept as program state with the scale, so ``program.save(path)`` /
            ``program.load(path)`` round-trip both.
        scale: interval [a, b] for scaled scores, e.g. ``(1, 5)`` for a Likert scale;
            two different finite numbers.
        num_threads: concurrent question calls per item (an int >= 1; 1 = sequential).
            Embedded llama.cpp models serialize calls anyway; remote endpoints gain.

    Raises:
        BinEvalError: a question set of another type, a bad scale or thread count.
        QuestionSetError: a question-set path that does not load.

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
        if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
            raise BinEvalError(f"num_threads must be an integer >= 1, got {num_threads!r}")
        if isinstance(question_set, (str, Path)):
            question_set = QuestionSet.load(question_set)
        if question_set is not None and not isinstance(question_set, QuestionSet):
            raise BinEvalError(
                f"question_set must be a QuestionSet or the path of its JSON file, got {type(question_set).__name__}"
            )
        self.questions = QuestionSetState(question_set)
        self.judge = dspy.Predict(JudgeBinaryQuestion)
        self.scale_state = ScaleState(_checked_scale(scale))
        self.num_threads = num_threads

    @property
    def scale(self) -> tuple[float, float]:
        """The interval [a, b] of scaled scores (saved with the program)."""
        return self.scale_state.value

    @scale.setter
    def scale(self, value: tuple[float, float]) -> None:
        self.scale_state.value = _checked_scale(value)

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

    def _judge_in_thread(self, input: str, output: str, question: BinaryQuestion) -> _ThreadOutcome:
        """`judge_question` on a worker thread: the verdict or the LM error, plus the usage.

        DSPy's executor gives each worker a private copy of the usage tracker, so the
        calls' usage is returned here and added to the caller's tracker by `forward`.
        """
        with dspy.track_usage() as tracker:
            try:
                return _ThreadOutcome(self.judge_question(input, output, question), None, tracker.usage_data)
            except Exception as exc:  # re-raised with its cause by forward()
                return _ThreadOutcome(None, exc, tracker.usage_data)

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
            pairs: list[tuple[Callable[..., _ThreadOutcome], tuple[str, str, BinaryQuestion]]] = [
                (self._judge_in_thread, (input, output, q)) for q in questions
            ]
            parallel = dspy.Parallel(
                num_threads=min(self.num_threads, len(questions)), max_errors=len(questions) + 1,
                disable_progress_bar=True, provide_traceback=False,
            )
            outcomes = parallel(pairs)
            parent = dspy.settings.usage_tracker
            for outcome in outcomes:
                if parent is not None and isinstance(outcome, _ThreadOutcome):
                    for lm_name, entries in outcome.usage.items():
                        for entry in entries:
                            parent.add_usage(lm_name, entry)
            failures = [o for o in outcomes if not isinstance(o, _ThreadOutcome) or o.error is not None]
            if failures:
                first = next((o.error for o in failures if isinstance(o, _ThreadOutcome)), None)
                cause = f"{type(first).__name__}: {first}" if first is not None else "unknown error"
                raise BinEvalError(
                    f"{len(failures)} of {len(questions)} LM calls failed while judging this item ({cause})"
                ) from first
            verdicts = [o.verdict for o in outcomes]
        else:
            verdicts = [self.judge_question(input, output, q) for q in questions]
        by_lm = {v.question_id: v for v in verdicts}
        verdicts = [by_code.get(q.id) or by_lm[q.id] for q in question_set.questions]
        card = score_verdicts(verdicts, question_set, scale=self.scale)
        return dspy.Prediction(score=card.overall, score_card=card, verdicts=list(verdicts))


def _checked_scale(scale: object) -> tuple[float, float]:
    """(a, b) as floats; raises BinEvalError unless two different finite numbers."""
    try:
        low, high = (float(v) for v in scale)  # type: ignore[union-attr]
    except (TypeError, ValueError) as exc:
        raise BinEvalError(f"scale must be two numbers (a, b), got {scale!r}") from exc
    if not (math.isfinite(low) and math.isfinite(high)) or low == high:
        raise BinEvalError(f"scale must be two different finite numbers, got {scale!r}")
    return low, high

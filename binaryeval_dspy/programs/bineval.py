"""BinEval: answer every binary question about one output and score the answers (paper 3.2)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import dspy

from binaryeval_dspy.analysis.explanation_flags import explanation_flags
from binaryeval_dspy.data.text_checks import is_empty_output
from binaryeval_dspy.engines.base import engine_sender
from binaryeval_dspy.engines.in_process import arun_in_process, run_in_process
from binaryeval_dspy.errors import BinEvalError, ConfigError, InputError
from binaryeval_dspy.lm.calls import Answer, LMCall
from binaryeval_dspy.lm.evaluated_text import as_evaluated_text
from binaryeval_dspy.lm.final_answer import RAW_REPLY_LIMIT
from binaryeval_dspy.lm.verdict_text import normalize_yes_no, reservation
from binaryeval_dspy.programs.code_checks import answer_with_check
from binaryeval_dspy.programs.question_set_state import QuestionSetState, ScaleState
from binaryeval_dspy.schemas.item_result import text_hash
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.scoring import score_verdicts
from binaryeval_dspy.signatures.binary_judgment import JudgeBinaryQuestion, JudgeBinaryVerdict


def _qualified(fields: dict, verdict: str, explanation: str) -> bool:
    """Whether the judge qualified its `verdict` with a reservation (`verdict_text.reservation`):
    in the verdict field (``"Yes, but the date is wrong"``; our parsers name it in the fields'
    ``qualified`` note, another adapter leaves the text in ``verdict``), or by opening the
    explanation with the same verdict word and a reservation (``{"verdict": "yes",
    "explanation": "Yes, although it omits the vote."}``, all a schema-held verdict leaves)."""
    named = fields.get("qualified")
    if isinstance(named, dict) and named.get("verdict"):
        return True
    if reservation(fields.get("verdict")):
        return True
    return normalize_yes_no(explanation) == verdict and reservation(explanation) is not None


LogprobMode = Literal["auto", "on", "off"]
_TOP_LOGPROBS = 5
#: The value distribution every judge call reads from token log-probabilities: P(yes).
_VERDICT_DISTRIBUTION = ("verdict", ("yes", "no"))


def question_verdict(question: BinaryQuestion, answer: Answer) -> QuestionVerdict:
    """The `QuestionVerdict` of one answered judge call (paper 3.2): pure, the same on every engine.

    Returns:
        yes/no (with P(yes) when log-probabilities came back, ``reply_cut`` when the reply
        stopped at ``max_tokens`` after its whole answer, ``qualified`` when a reservation
        follows the verdict word, "Yes, but ..."); ``unparsed`` (with the raw LM text)
        when the answer cannot be read as yes/no or is not complete (a reply that stops
        inside its JSON object or a field, whatever the finish reason; the error says
        why); ``error`` (with the error's type and message) when the call failed, was
        never sent, or the reply held no answer.
    """
    if answer.status == "unparsed":
        return QuestionVerdict(question_id=question.id, verdict="unparsed", raw_answer=(answer.raw or "")[:RAW_REPLY_LIMIT],
                               error=answer.reason)
    if answer.status != "answered":
        reason = answer.reason or "the call gave no answer"
        if answer.status == "not_sent" and not reason.startswith("NotAsked"):
            reason = f"NotAsked: {reason}"
        return QuestionVerdict(question_id=question.id, verdict="error", error=reason[:2000])
    fields = answer.fields or {}
    verdict = normalize_yes_no(fields.get("verdict"))
    explanation = str(fields.get("explanation", "") or "").strip()
    raw_reply = fields.get("raw_reply")
    if verdict is None:
        return QuestionVerdict(question_id=question.id, verdict="unparsed",
                               raw_answer=str(raw_reply or fields.get("verdict"))[:RAW_REPLY_LIMIT],
                               error="the verdict field is neither yes nor no")
    qualified = _qualified(fields, verdict, explanation)
    if qualified and not raw_reply:
        raw_reply = f"verdict: {fields.get('verdict')}\nexplanation: {explanation}"  # what the judge wrote
    p = answer.distribution.get("yes") if answer.distribution else None
    return QuestionVerdict(question_id=question.id, verdict=verdict, explanation=explanation, p_yes=p,
                           flags=explanation_flags(verdict, explanation, question.violation_example) or None,
                           raw_answer=str(raw_reply)[:RAW_REPLY_LIMIT] if raw_reply else None,
                           reply_cut=answer.cut or bool(fields.get("reply_cut")), qualified=qualified)


@dataclass
class ItemJudging:
    """One item's judging state (`BinEval.begin`): its texts, questions and the verdicts so far.

    Attributes:
        input, output: the texts under judgment.
        question_set: the questions for this item.
        verdicts: question id -> verdict (code checks, kept answers, answers of this run).
        empty: the output is empty: nothing is asked, the prediction says ``empty_output``.
        item_id: the item's id (None for an ``(input, output)`` pair), carried by its calls.
        output_hash: `text_hash` of `output` when the item has an id, else None.
    """

    input: str
    output: str
    question_set: QuestionSet
    verdicts: dict[str, QuestionVerdict] = field(default_factory=dict)
    empty: bool = False
    item_id: str | None = None
    output_hash: str | None = None


class BinEval(dspy.Module):
    """Evaluate an output with binary questions and aggregate yes-rates (paper 3.2).

    Each question is answered in its own LM call (the evaluator sees the input, the
    output and one question). Every question has one of four outcomes:

    * ``yes`` / ``no``: the answer, with its explanation (and P(yes) when the LM
      returns token log-probabilities);
    * ``unparsed``: the LM answered but not as yes/no (the raw reply is kept);
    * ``error``: the call failed after DSPy's retries (rate limit, server error,
      timeout, context overflow); the error is kept and a resumed run asks again.

    Unparsed and error are excluded from every denominator and counted in the score
    card, never treated as "no"; a failed question never discards the others.
    Questions that carry a ``check`` are answered by that code check first, always,
    and never sent to the LM; their verdicts are scored like the LM's.

    Args:
        question_set: the frozen questions (a `QuestionSet` or the path of its JSON);
            kept as program state with the scale, so ``program.save(path)`` /
            ``program.load(path)`` round-trip both.
        scale: interval [a, b] for scaled scores, e.g. ``(1, 5)`` for a Likert scale;
            two different finite numbers.
        num_threads: LM calls in flight for one item's questions when called directly
            (an int >= 1; 1 = one after the other). Runs over many items set their
            concurrency across items instead (`binaryeval_dspy.runs.evaluate_items`).
        explanations: True (default) asks for a verdict and an explanation; False asks
            for the verdict alone (`JudgeBinaryVerdict`): fewer tokens on every LM, about
            2x faster per item on the embedded SmolLM2 (2.26x measured by
            ``benchmarks/remote_throughput.py --parts embedded``), and the cheapest way to
            get P(yes).
        logprobs: ``"auto"`` (default) asks the LM for token log-probabilities and
            records P(yes) per question and mean P(yes) per dimension
            (``score_card.p_yes_scores``) when it returns them; an LM that refuses the
            parameter is not asked again. ``"on"`` always asks, ``"off"`` never.

    Raises:
        BinEvalError: a question set of another type, a bad scale, thread count or
            logprobs mode.
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
        explanations: bool = True,
        logprobs: LogprobMode = "auto",
    ) -> None:
        super().__init__()
        if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
            raise ConfigError("bad num_threads", expected="an integer >= 1", received=repr(num_threads),
                              fix="pass num_threads=1, or the number of judge calls to run at once.")
        if logprobs not in ("auto", "on", "off"):
            raise ConfigError("bad logprobs", expected="'auto', 'on' or 'off'", received=repr(logprobs),
                              fix="pass logprobs='auto' (use log-probabilities when the LM returns them).")
        if isinstance(question_set, (str, Path)):
            question_set = QuestionSet.load(question_set)
        if question_set is not None and not isinstance(question_set, QuestionSet):
            raise ConfigError("bad question_set", expected="a QuestionSet or the path of its JSON file",
                              received=type(question_set).__name__,
                              fix="load the file with QuestionSet.load(path), or pass its path.")
        self.questions = QuestionSetState(question_set)
        self.explanations = bool(explanations)
        self.judge = dspy.Predict(JudgeBinaryQuestion if self.explanations else JudgeBinaryVerdict)
        self.scale_state = ScaleState(_checked_scale(scale))
        self.num_threads = num_threads
        self.logprobs = logprobs
        self._logprobs_refused = False

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
            raise BinEvalError("this BinEval has no question set.",
                               fix="pass one to BinEval(question_set), or load a saved program.")
        return self.questions.value

    @question_set.setter
    def question_set(self, value: QuestionSet) -> None:
        self.questions.value = value

    @staticmethod
    def question_fields(input: str, output: str, question: BinaryQuestion) -> dict[str, str]:
        """The judge signature's input fields for one question: the input and output fenced as
        evaluated text (`as_evaluated_text`), then the question and its violation example. The
        first two are the same for every question of an item: its shared prompt prefix."""
        return {"input": as_evaluated_text(input), "output": as_evaluated_text(output),
                "question": question.text, "violation_example": question.violation_example}

    def question_call(self, input: str, output: str, question: BinaryQuestion, *, item_id: str | None = None,
                      output_hash: str | None = None, judge: str | None = None) -> LMCall:
        """The `LMCall` that asks one binary question f_E(x, y, q) (paper 3.2): the judge
        predictor's signature and demos (an optimizer's, once compiled), the question's
        fields, and a request for token log-probabilities unless ``logprobs="off"``.
        `item_id` and `output_hash` name the item the call is about, `judge` the panel
        member asked (None: the run's LM; `LMCall`)."""
        config = dict(self.judge.config or {})
        if self.logprobs != "off":
            config.update(logprobs=True, top_logprobs=_TOP_LOGPROBS)
        return LMCall(key=question.id, signature=self.judge.signature,
                      inputs=self.question_fields(input, output, question), demos=tuple(self.judge.demos or ()),
                      config=config, distribution=_VERDICT_DISTRIBUTION, item_id=item_id, output_hash=output_hash,
                      judge=judge)

    # ----- the judging plan (`binaryeval_dspy.engines.plan_runner.PlannedProgram`)

    def begin(self, item: Any, previous: Sequence[QuestionVerdict] = (),
              question_set: QuestionSet | None = None) -> ItemJudging:
        """An item's judging state: code-checked questions answered, earlier answers kept.

        Args:
            item: anything with ``input`` and ``output`` (a `dspy.Example` from
                `binaryeval_dspy.data.load_items`), or an ``(input, output)`` pair.
            previous: verdicts stored for this item by an earlier, incomplete run: its LM
                answers (yes, no, unparsed) are kept and not asked again; an ``error`` is
                asked again.
            question_set: the questions for this item only; None uses the program's.

        Raises:
            InputError: the input is empty or not a string, or the output is neither a string
                nor None (None is an empty output, as a null in an items file).
            BinEvalError: no question set.
        """
        input, output = item if isinstance(item, tuple) else (item.input, item.output)
        output = "" if output is None else output  # a generator that produced nothing: empty_output
        if not isinstance(input, str) or not input.strip():
            raise InputError(f"BinEval needs a non-empty string, got {input!r:.60}", field="input")
        if not isinstance(output, str):
            raise InputError(f"BinEval needs a string, got {output!r:.60}", field="output")
        question_set = question_set if question_set is not None else self.question_set
        item_id = None if isinstance(item, tuple) else getattr(item, "item_id", None)
        state = ItemJudging(input=input, output=output, question_set=question_set,
                            item_id=None if item_id is None else str(item_id),
                            output_hash=None if item_id is None else text_hash(output))
        if is_empty_output(output):  # nothing to judge: an outcome, never a score and never an LM call
            state.empty = True
            return state
        by_code = {q.id: answer_with_check(q, input=input, output=output) for q in question_set.code_checked}
        state.verdicts.update({v.question_id: v for v in previous
                               if v.answered and v.source == "lm" and v.question_id not in by_code})
        state.verdicts.update(by_code)
        return state

    def next_calls(self, state: ItemJudging) -> list[LMCall]:
        """The questions of `state` without a verdict yet, as calls (one round)."""
        if state.empty:
            return []
        return [self.question_call(state.input, state.output, q, item_id=state.item_id, output_hash=state.output_hash)
                for q in state.question_set.questions if q.id not in state.verdicts]

    def take(self, state: ItemJudging, call: LMCall, answer: Answer) -> QuestionVerdict:
        """Record the answer to one question call; returns its verdict (what the journal keeps)."""
        verdict = question_verdict(state.question_set.question(call.key), answer)
        state.verdicts[call.key] = verdict
        return verdict

    def unsent(self, state: ItemJudging, call: LMCall, reason: str) -> QuestionVerdict:
        """A question never sent (a spending limit, an interrupt): an ``error`` verdict a rerun asks again."""
        verdict = QuestionVerdict(question_id=call.key, verdict="error", error=f"NotAsked: {reason}"[:2000])
        state.verdicts[call.key] = verdict
        return verdict

    def finish(self, state: ItemJudging) -> dspy.Prediction:
        """The item's prediction from its verdicts: yes-rates per dimension and overall (paper 3.3).

        Returns:
            `dspy.Prediction` with ``status`` (``"scored"``; ``"unscored"`` when no verdict
            parsed; ``"error"`` when every LM call failed; ``"empty_output"``: as
            `ItemResult.status`), ``score`` (overall yes-rate in [0, 1], None if nothing
            parsed), ``score_card`` (`ScoreCard`) and ``verdicts`` in question order; for an
            empty output ``score`` and ``score_card`` None and no verdicts.
        """
        if state.empty:
            return dspy.Prediction(score=None, score_card=None, verdicts=[], status="empty_output")
        verdicts = [state.verdicts.get(q.id) or QuestionVerdict(question_id=q.id, verdict="error",
                                                                error="NotAsked: no answer")
                    for q in state.question_set.questions]
        card = score_verdicts(verdicts, state.question_set, scale=self.scale)
        lm_asked = [v for v in verdicts if v.source == "lm"]
        status = ("error" if lm_asked and not any(v.answered for v in lm_asked)  # as `ItemResult.status`
                  else "scored" if card.overall is not None else "unscored")
        return dspy.Prediction(score=card.overall, score_card=card, verdicts=verdicts, status=status)

    # ----- calling the module

    def judge_question(self, input: str, output: str, question: BinaryQuestion) -> QuestionVerdict:
        """Answer one binary question f_E(x, y, q) with its explanation, through DSPy's
        configured LM (`question_verdict` says what the outcomes are). Never raises for LM
        trouble: the outcome is in the verdict."""
        sender = engine_sender(None, lm=self.judge.lm)
        return question_verdict(question, sender.answer(self.question_call(input, output, question)))

    def forward(self, input: str, output: str, question_set: QuestionSet | None = None) -> dspy.Prediction:
        """Answer every question about `output` and score it, through DSPy's configured LM.

        The item's questions go out together (``num_threads`` at a time) through DSPy's
        adapter pipeline with the adapter the LM needs (`binaryeval_dspy.lm.adapters.judging_adapter`),
        so DSPy's cache, history, callbacks and usage tracking see every call.

        Args:
            input: the source x (document, dialogue context, instruction); non-empty.
            output: the output y under evaluation.
            question_set: the questions for this call only; None uses the program's.

        Returns:
            `dspy.Prediction` with ``status`` (``"scored"``; ``"unscored"`` when no verdict
            parsed; ``"error"`` when every LM call failed; ``"empty_output"``: as
            `ItemResult.status`), ``score`` (overall yes-rate in [0, 1]; None when nothing
            parsed: a failure is never a number, so as a DSPy metric use `BinEvalMetric`,
            which returns a documented fallback score with ``scored=False`` and counts it,
            not ``lambda ex, pred: evaluator(...).score``, whose None fails a whole
            `dspy.Evaluate`), ``score_card`` (`ScoreCard`: per-dimension S_d, counts
            including unparsed and error, scaled scores, P(yes) soft scores when
            available) and ``verdicts`` (list of `QuestionVerdict`, in question order).

        Raises:
            InputError: `input` is empty or not a string, or `output` not a string. A failed
                LM call does not raise: it is an ``error`` verdict.
        """
        state = self.begin((input, output), question_set=question_set)
        return run_in_process(self, state, num_threads=self.num_threads, lm=self.judge.lm)

    async def aforward(self, input: str, output: str, question_set: QuestionSet | None = None) -> dspy.Prediction:
        """`forward` for asyncio (``await judge.acall(input=..., output=...)``): the same outcomes,
        the item's questions in flight together through DSPy's async LM path."""
        state = self.begin((input, output), question_set=question_set)
        return await arun_in_process(self, state, lm=self.judge.lm)


def _checked_scale(scale: object) -> tuple[float, float]:
    """(a, b) as floats; raises BinEvalError unless two different finite numbers."""
    try:
        low, high = (float(v) for v in scale)  # type: ignore[union-attr]
    except (TypeError, ValueError) as exc:
        raise ConfigError("bad scale", expected="two numbers (a, b)", received=repr(scale),
                          fix="pass scale=(0, 1), or the interval the scores should span.") from exc
    if not (math.isfinite(low) and math.isfinite(high)) or low == high:
        raise ConfigError("bad scale", expected="two different finite numbers (a, b)", received=repr(scale),
                          fix="pass scale=(0, 1), or the interval the scores should span.")
    return low, high

"""BinEvalMetric: BinEval as a DSPy metric, so any DSPy optimizer can improve a generator with it.

The metric judges a program's output with binary questions. It follows DSPy's metric
contract (`binaryeval_dspy.programs.metric_contract`): called with a ``trace``
(bootstrapping demonstrations: `dspy.BootstrapFewShot`, MIPROv2's demo bootstrapping) it
answers ``True`` / ``False``, passed when the yes-rate reaches ``pass_threshold`` (1.0 by
default: every question answered yes); otherwise it returns
``dspy.Prediction(score=..., feedback=...)``: the score is the yes-rate in [0, 1] and the
feedback lists every question answered "no" with the judge's explanation, which is what
GEPA's reflection reads. So `dspy.Evaluate`, BootstrapFewShot, MIPROv2, COPRO, SIMBA and
GEPA all read it as intended; `as_float()` gives the same metric returning a plain float.

Judging goes through `BinEval.item_work` and `binaryeval_dspy.engines.call_pool.map_items`,
the one judging path of the project: code-checked questions are answered by their
check (never by the LM), replies are salvaged by our parsers, and every question ends
yes / no / unparsed / error exactly as in `BinEval.forward` and ``bineval evaluate``.

Unscored is not zero. Every result carries ``scored`` and ``status``: an output the
judge could not score (no verdict parsed, or its LM calls failed) gets the documented
fallback ``unscored_score`` (DSPy's optimizers need a float) with ``scored=False``, never
passes under a trace, is logged (a warning at the 1st, 2nd, 4th, 8th, ... such call), and
is counted: `CountingMetric.counts` / `CountingMetric.counting` give the scored,
unscored and failed calls of one `dspy.Evaluate` or one optimizer evaluation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dspy

from binaryeval_dspy.engines.call_pool import map_items
from binaryeval_dspy.engines.item_work import ItemDone
from binaryeval_dspy.errors import BinEvalError, ConfigError
from binaryeval_dspy.lm.context import lm_context
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.programs.bineval import BinEval, error_text
from binaryeval_dspy.programs.metric_contract import checked_pass_threshold, metric_answer
from binaryeval_dspy.programs.metric_counts import CountingMetric, MetricStatus
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.score_card import ScoreCard
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.scoring import score_verdicts

QuestionsFor = Callable[[dspy.Example], QuestionSet]

@dataclass
class JudgedOutput:
    """One judged output: the questions asked, the verdicts and the score card.

    Attributes:
        question_set: the questions asked.
        verdicts: one `QuestionVerdict` per question, in question order (empty when
            judging raised).
        score_card: the scores (``overall`` None when nothing parsed).
        error: ``"<ErrorType>: <message>"`` when judging the item raised, else None.
    """

    question_set: QuestionSet
    verdicts: list[QuestionVerdict]
    score_card: ScoreCard
    error: str | None = field(default=None)

    @property
    def status(self) -> MetricStatus:
        """``scored`` when a verdict parsed; else ``failed`` when judging raised or an LM
        call failed (``error`` verdicts), else ``unscored`` (the LM's replies did not parse)."""
        if self.error is not None:
            return "failed"
        if self.score_card.overall is not None:
            return "scored"
        return "failed" if any(v.verdict == "error" for v in self.verdicts) else "unscored"

    @property
    def problem(self) -> str | None:
        """Why the output is not scored: the item's error, else the first failed call's
        error, else the first parser message; None when scored."""
        if self.status == "scored":
            return None
        if self.error is not None:
            return self.error
        for wanted in ("error", "unparsed"):
            for v in self.verdicts:
                if v.verdict == wanted:
                    return v.error or wanted
        return None

    @property
    def failed(self) -> list[tuple[str, str, str]]:
        """(dimension, question, explanation) of every question answered "no"."""
        by_id = {q.id: q for q in self.question_set.questions}
        return [(by_id[v.question_id].dimension, by_id[v.question_id].text, v.explanation)
                for v in self.verdicts if v.verdict == "no"]


class BinEvalMetric(CountingMetric):
    """Score a program's output with BinEval: yes-rate plus the failed questions as feedback.

    Args:
        evaluator: the `BinEval` whose judge answers the questions (its instructions and
            LM settings are used); None makes a default `BinEval()`. Also
            ``metric.evaluator`` (``metric.evaluator.judge`` is its judge predictor).
        question_set: the questions for every item; else the evaluator's own set.
        questions_for: callable gold Example -> `QuestionSet` for per-item questions
            (IFBench: each prompt has its own constraints). Takes precedence.
        questions_field: a gold field holding a `QuestionSet` (or its JSON dict), used
            when `questions_for` is None and the field is present.
        input_field: the gold field holding the input x shown to the judge.
        output_field: the prediction field holding the output y to judge.
        judge_lm: the LM (or `LMHandle`) the judge runs on; None uses the configured LM.
        max_feedback_questions: list at most this many failed questions in the feedback.
        unscored_score: the fallback score returned, with ``scored=False``, when the
            output could not be scored (default 0.0: DSPy's optimizers need a float and
            treat 0.0 as their own failure score). A finite float. Each use is counted
            and logged.
        pass_threshold: the yes-rate a bootstrapped demonstration must reach when DSPy
            calls the metric with a ``trace``, in [0, 1]; default 1.0 (every question
            answered yes: a demo judged "no" on any question is never kept). An unscored
            output never passes.
        judge: the old name of `evaluator` (still accepted; give one of the two).

    Returns (when called):
        With a ``trace`` and no ``pred_name`` (bootstrapping): ``bool``, passed. Otherwise
        ``dspy.Prediction(score, scored, status, error, feedback, score_card, verdicts)``.
        ``score`` is the yes-rate over parsed verdicts, in [0, 1], with ``scored=True``
        and ``status="scored"``. Unparsed verdicts are left out and mentioned in the
        feedback, never counted as "no". When nothing parsed, ``score`` is
        `unscored_score`, ``scored=False``, ``status`` is ``"unscored"`` (the replies did
        not parse) or ``"failed"`` (the judge's LM calls failed; ``error`` says why),
        and the call is counted (`counts()`, `counting()`). An empty output is a real
        score of 0.0 (the program produced nothing; ``scored=True``).

    Judging runs through `BinEval.item_work` (code checks answer their questions, the
    LM never sees them) and `map_items`, with ``evaluator.num_threads`` calls in flight.

    Raises:
        BinEvalError: no questions can be found for an item, the gold example lacks
            the input field, `unscored_score` is not a finite number, `pass_threshold`
            is not in [0, 1], or both `evaluator` and `judge` are given.

    Example:
        >>> metric = BinEvalMetric(BinEval(question_set), input_field="prompt",   # doctest: +SKIP
        ...                        output_field="response", judge_lm=judge_lm)
        >>> dspy.Evaluate(devset=dev, metric=metric)(program)                     # doctest: +SKIP
        >>> dspy.BootstrapFewShot(metric=metric).compile(program, trainset=train)  # doctest: +SKIP
        >>> dspy.GEPA(metric=metric, reflection_lm=lm, max_metric_calls=50)       # doctest: +SKIP
    """

    def __init__(
        self,
        evaluator: BinEval | None = None,
        *,
        question_set: QuestionSet | None = None,
        questions_for: QuestionsFor | None = None,
        questions_field: str = "question_set",
        input_field: str = "input",
        output_field: str = "output",
        judge_lm: LMHandle | dspy.LM | None = None,
        max_feedback_questions: int = 10,
        unscored_score: float = 0.0,
        pass_threshold: float = 1.0,
        judge: BinEval | None = None,
    ) -> None:
        if isinstance(unscored_score, bool) or not isinstance(unscored_score, (int, float)) \
                or not math.isfinite(unscored_score):
            raise ConfigError("bad unscored_score", expected="a finite number", received=repr(unscored_score),
                              fix="pass unscored_score=0.0 (the default), or the score an unjudged output gets.")
        if evaluator is not None and judge is not None:
            raise ConfigError("both `evaluator` and `judge` given", expected="one BinEval",
                              fix="pass the BinEval as `evaluator` (`judge` is its old name).")
        evaluator = evaluator if evaluator is not None else judge
        self.evaluator = evaluator if evaluator is not None else BinEval()
        self.question_set = question_set
        self.questions_for = questions_for
        self.questions_field = questions_field
        self.input_field = input_field
        self.output_field = output_field
        self.judge_lm = judge_lm
        self.max_feedback_questions = max_feedback_questions
        self.unscored_score = float(unscored_score)
        self.pass_threshold = checked_pass_threshold(pass_threshold)
        self._init_counts()

    @property
    def judge(self) -> BinEval:
        """The old name of `evaluator` (the `BinEval`), kept for code written before the rename:
        ``metric.judge.judge`` is ``metric.evaluator.judge``, the judge predictor."""
        return self.evaluator

    @judge.setter
    def judge(self, value: BinEval) -> None:
        self.evaluator = value

    @property
    def calls(self) -> int:
        """Metric calls counted so far (`counts().total`)."""
        return self.counts().total

    @property
    def unscored(self) -> int:
        """Calls that returned the fallback score so far (`counts().not_scored`)."""
        return self.counts().not_scored

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
        if self.evaluator.questions.value is not None:
            return self.evaluator.question_set
        raise BinEvalError(
            "BinEvalMetric has no questions for this example.",
            fix="pass question_set=, questions_for=, an evaluator with a question set, or put a QuestionSet in the "
                f"example's '{self.questions_field}' field.",
        )

    def input_text(self, gold: dspy.Example) -> str:
        """The input shown to the judge: ``gold.<input_field>``; BinEvalError if missing or blank."""
        input_text = gold.get(self.input_field) if hasattr(gold, "get") else None
        if not isinstance(input_text, str) or not input_text.strip():
            raise BinEvalError(f"the gold example has no non-empty '{self.input_field}' field to show the judge",
                               received=f"{input_text!r:.60}",
                               fix="set input_field= to the example field that holds the input text.")
        return input_text

    def judge_output(self, gold: dspy.Example, output: str) -> JudgedOutput:
        """Answer every question of `gold`'s question set about `output` (`judge_outputs` of one)."""
        return self.judge_outputs([(gold, output)])[0]

    def judge_outputs(
        self, pairs: Sequence[tuple[dspy.Example, str]], *, num_threads: int | None = None
    ) -> list[JudgedOutput]:
        """Judge many (gold, output) pairs through `BinEval.item_work` and `map_items`.

        Every pair is one item of the project's one item loop: code-checked questions
        are answered by their check, the others by the judge LM (one call each), and the
        questions of all pairs share `num_threads` calls in flight. Nothing is judged
        until every pair has its input and questions.

        Args:
            pairs: (gold example, non-empty output text) pairs.
            num_threads: LM calls in flight across the pairs (an int >= 1); None uses
                ``evaluator.num_threads``.

        Returns:
            One `JudgedOutput` per pair, in order. A pair whose judging raised is a
            `JudgedOutput` with no verdicts and its ``error`` (status ``failed``); a
            failed LM call is an ``error`` verdict (never a "no").

        Raises:
            BinEvalError: a gold example has no input field or no questions.
            InputError: an output is empty or not a string.
        """
        planned = [(self.input_text(gold), output, self.questions(gold)) for gold, output in pairs]
        works = [self.evaluator.item_work(input_text, output, question_set=question_set)
                 for input_text, output, question_set in planned]
        done: list[ItemDone | None] = [None] * len(works)

        def on_done(item: ItemDone) -> None:
            done[item.index] = item

        calls = sum(len(work.calls) for work in works)
        concurrency = max(1, min(num_threads if num_threads is not None else self.evaluator.num_threads,
                                 max(1, calls)))
        # The judge's calls must not land in the trace of the program being optimized.
        with lm_context(self.judge_lm), dspy.context(trace=None):
            map_items(works, lambda _index, work: work, on_done, concurrency=concurrency)
        out: list[JudgedOutput] = []
        for (_, _, question_set), item in zip(planned, done, strict=True):
            if item is None or item.error is not None:
                reason = error_text(item.error) if item is not None else "the item was not judged"
                out.append(JudgedOutput(question_set, [], score_verdicts([], question_set), error=reason))
                continue
            out.append(JudgedOutput(question_set, list(item.result.verdicts), item.result.score_card))
        return out

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
    ) -> dspy.Prediction | bool:
        """Judge ``pred.<output_field>`` for `gold`: ``bool`` (passed) when called with a `trace`
        and no `pred_name`, else the prediction; see the class docstring."""
        return metric_answer(self.result(gold, pred), trace=trace, pred_name=pred_name,
                             pass_threshold=self.pass_threshold)

    def result(self, gold: dspy.Example, pred: Any) -> dspy.Prediction:
        """The full result of judging ``pred.<output_field>`` for `gold` (never the bool), counted once."""
        output = pred.get(self.output_field) if hasattr(pred, "get") else getattr(pred, self.output_field, None)
        if not isinstance(output, str) or not output.strip():
            self._record("scored")
            return dspy.Prediction(score=0.0, scored=True, status="scored", error=None,
                                   feedback=f"The program produced no '{self.output_field}' to judge.",
                                   score_card=None, verdicts=[])
        judged = self.judge_output(gold, output)
        return self.prediction(judged)

    def prediction(self, judged: JudgedOutput) -> dspy.Prediction:
        """The metric's result for a judged output, counted once (see the class docstring)."""
        status = judged.status
        self._record(status, judged.problem)
        if status != "scored":
            what = ("the judge's LM calls failed" if status == "failed"
                    else "no verdict of the judge could be parsed")
            feedback = (f"Not scored: {what} ({judged.problem}). The score {self.unscored_score} is the "
                        "fallback for an unscored output, not a measurement.")
            return dspy.Prediction(score=self.unscored_score, scored=False, status=status, error=judged.problem,
                                   feedback=feedback, score_card=judged.score_card, verdicts=judged.verdicts)
        return dspy.Prediction(score=float(judged.score_card.overall), scored=True, status="scored", error=None,
                               feedback=self.feedback(judged), score_card=judged.score_card,
                               verdicts=judged.verdicts)

    def as_float(self) -> Callable[..., float]:
        """The same metric returning ``float(score)`` whatever the call (for code that needs a number)."""

        def float_metric(gold: dspy.Example, pred: Any, trace: Any = None, pred_name: str | None = None,
                         pred_trace: Any = None) -> float:
            return float(self.result(gold, pred).score)

        float_metric.__name__ = "bineval_score"
        return float_metric

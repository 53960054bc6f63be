"""VerdictJudge: binary answers as evidence for one named verdict (seed 004's pattern on BinEval).

Per item: code checks answer their questions first, unconditionally; the LM answers
the others (both through `BinEval`); the LM picks one declared label from all the
answers; the pressure test tries to refute a non-pass pick (or every pick, or none);
code applies the refutation rule and then the fatal rule. Every step is recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import dspy

from binaryeval_dspy import verdict_rules
from binaryeval_dspy.engines.item_work import ItemWork
from binaryeval_dspy.errors import BinEvalError, ConfigError
from binaryeval_dspy.programs.bineval import BinEval, error_text
from binaryeval_dspy.programs.label_picker import LabelPicker, evidence_lines
from binaryeval_dspy.programs.pressure_test import PressureTest
from binaryeval_dspy.schemas.named_verdict import PressureTestRecord
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.verdict import QuestionVerdict

Aggregation = Literal["score", "verdict", "both"]
AGGREGATIONS: tuple[str, ...] = get_args(Aggregation)


class VerdictJudge(dspy.Module):
    """Judge an output with binary questions and give one named verdict.

    Args:
        question_set: the frozen questions; must declare a ``verdict_policy``.
        aggregation: "verdict" (no numeric score anywhere in the result) or "both"
            (the verdict and BinEval's yes-rate score card). For "score" use `BinEval`.
        pressure_test: "non-pass" (default: test non-pass picks, as seed 004 does
            for a large audit), "always", or "never".
        scale: [a, b] for the scaled scores (used with "both").
        num_threads: concurrent LM question calls per item.
        explanations, logprobs: passed to the evidence `BinEval` (verdict-only mode, P(yes)).

    Raises:
        BinEvalError: no verdict policy, or an unknown aggregation or pressure-test mode.

    Example:
        >>> judge = VerdictJudge(QuestionSet.load("examples/audit/questions.json"))  # doctest: +SKIP
        >>> pred = judge(input="README section", output=text)                        # doctest: +SKIP
        >>> pred.named_verdict.label, pred.named_verdict.grounds                      # doctest: +SKIP
    """

    def __init__(
        self,
        question_set: QuestionSet,
        *,
        aggregation: Aggregation = "verdict",
        pressure_test: verdict_rules.PressureTestMode = "non-pass",
        scale: tuple[float, float] = (0.0, 1.0),
        num_threads: int = 1,
        explanations: bool = True,
        logprobs: str = "auto",
    ) -> None:
        super().__init__()
        if aggregation not in ("verdict", "both"):
            raise ConfigError("bad VerdictJudge aggregation", expected="'verdict' or 'both'",
                              received=repr(aggregation), fix="use BinEval for aggregation 'score'.")
        if pressure_test not in verdict_rules.PRESSURE_TEST_MODES:
            raise ConfigError("bad pressure_test", expected=f"one of {verdict_rules.PRESSURE_TEST_MODES}",
                              received=repr(pressure_test), fix="pass pressure_test='non-pass' (the default).")
        if question_set.verdict_policy is None:
            raise BinEvalError(
                "this question set declares no verdict_policy, so there are no labels to pick from.",
                fix="add a 'verdict_policy' with 'labels' to the question-set file, or use aggregation 'score'.",
            )
        self.aggregation = aggregation
        self.pressure_test_mode = pressure_test
        self.evidence = BinEval(question_set, scale=scale, num_threads=num_threads, explanations=explanations,
                               logprobs=logprobs)
        self.picker = LabelPicker(question_set.verdict_policy)
        self.pressure = PressureTest()

    @property
    def question_set(self) -> QuestionSet:
        """The question set in use."""
        return self.evidence.question_set

    def forward(self, input: str, output: str) -> dspy.Prediction:
        """Judge one output.

        Args:
            input: the source or context x; non-empty.
            output: the output y under review; non-empty.

        Returns:
            `dspy.Prediction` with ``named_verdict`` (`NamedVerdict`), ``label`` (its
            label, None when unparsed) and ``verdicts`` (every `QuestionVerdict`, code
            and LM, in question order); with aggregation "both" also ``score`` and
            ``score_card`` as `BinEval` gives them.

        Raises:
            InputError: empty input or output. A failed question call is an ``error``
                verdict; a failed pick or pressure-test call propagates.
        """
        return self._decide(input, output, self.evidence(input=input, output=output))

    def item_work(self, input: str, output: str, previous: Sequence[QuestionVerdict] = ()) -> ItemWork:
        """One item for `map_items`: the evidence questions as independent calls, then the
        label pick, pressure test and rules in the finish step (see `BinEval.item_work`).

        A failed pick or pressure-test call does not fail the item, so no answer is lost:
        the finish step then returns every answer (code checks and the LM's) with no
        named verdict and ``undecided`` set to the failure (`undecided_prediction`); the
        item is stored incomplete (status ``error``) and a rerun asks only its unanswered
        questions and the pick again.
        """
        evidence = self.evidence.item_work(input, output, previous)

        def finish(asked: list[QuestionVerdict]) -> dspy.Prediction:
            assessed = evidence.finish(asked)
            try:
                return self._decide(input, output, assessed)
            except Exception as exc:  # noqa: BLE001 - any failed step after the questions keeps the answers
                return self.undecided_prediction(assessed, exc)

        return ItemWork(calls=evidence.calls, finish=finish, one_call_each=evidence.one_call_each,
                        unsent=evidence.unsent, request=evidence.request)

    def undecided_prediction(self, assessed: dspy.Prediction, failure: BaseException) -> dspy.Prediction:
        """The prediction of an item whose answers are in but whose label could not be decided.

        Args:
            assessed: BinEval's prediction (the answers, and the score card).
            failure: what the pick, the pressure test or the rules raised.

        Returns:
            `dspy.Prediction` with ``named_verdict`` and ``label`` None, every answer in
            ``verdicts``, ``undecided`` (``"label not decided: <ErrorType>: <message>"``;
            `binaryeval_dspy.runs.item_rows.item_result` stores it as the item's error,
            never as a verdict) and, with aggregation "both", ``score`` and ``score_card``.
        """
        outputs = {"named_verdict": None, "label": None, "verdicts": assessed.verdicts,
                   "undecided": f"label not decided: {error_text(failure)}"}
        if self.aggregation == "both":
            outputs.update(score=assessed.score, score_card=assessed.score_card)
        return dspy.Prediction(**outputs)

    def _decide(self, input: str, output: str, assessed: dspy.Prediction) -> dspy.Prediction:
        """Pick, pressure-test and rule on a label from BinEval's answers (`assessed`)."""
        question_set = self.question_set
        policy = question_set.verdict_policy
        verdicts = assessed.verdicts
        lines = evidence_lines(verdicts, question_set)
        pick = self.picker(input=input, output=output, evidence=lines)
        skip = verdict_rules.pressure_test_skip_reason(self.pressure_test_mode, pick.label, policy,
                                                       verdict_rules.fatal_failures(verdicts, question_set))
        if skip is not None:
            record = PressureTestRecord(status="not_run", reason=skip, tested_label=pick.label)
        else:
            record = self.pressure(input=input, output=output, evidence=lines, label=policy.label(pick.label)).record
        named = verdict_rules.decide_verdict(policy=policy, question_set=question_set, verdicts=verdicts,
                                             provisional=pick.label, reason=pick.reason, attempts=pick.attempts,
                                             pressure_test=record)
        outputs = {"named_verdict": named, "label": named.label, "verdicts": verdicts}
        if self.aggregation == "both":
            outputs.update(score=assessed.score, score_card=assessed.score_card)
        return dspy.Prediction(**outputs)

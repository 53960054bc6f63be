"""VerdictJudge: binary answers as evidence for one named verdict (seed 004's pattern on BinEval).

Per item: code checks answer their questions first, unconditionally; the LM answers
the others (both through `BinEval`); the LM picks one declared label from all the
answers; the pressure test tries to refute a non-pass pick (or every pick, or none);
code applies the refutation rule and then the fatal rule. Every step is recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import dspy

from binaryeval_dspy import verdict_rules
from binaryeval_dspy.engines.in_process import arun_in_process, run_in_process
from binaryeval_dspy.errors import BinEvalError, ConfigError, LMCallFailed
from binaryeval_dspy.lm.calls import Answer, LMCall, error_text
from binaryeval_dspy.programs.bineval import BinEval, ItemJudging
from binaryeval_dspy.programs.label_picker import LabelPicker, evidence_lines
from binaryeval_dspy.programs.pressure_test import PressureTest
from binaryeval_dspy.schemas.named_verdict import LabelAttempt, PressureTestRecord, RefutationAnswer
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
                verdict; a failed pick or pressure-test call raises `LMCallFailed`.
        """
        state = self.begin((input, output))
        pred = run_in_process(self, state, num_threads=self.evidence.num_threads, lm=self.evidence.judge.lm)
        if state.failure is not None:
            raise state.failure
        return pred

    async def aforward(self, input: str, output: str) -> dspy.Prediction:
        """`forward` for asyncio (``await judge.acall(...)``): each round's calls in flight together."""
        state = self.begin((input, output))
        pred = await arun_in_process(self, state, lm=self.evidence.judge.lm)
        if state.failure is not None:
            raise state.failure
        return pred

    # ----- the judging plan (`binaryeval_dspy.engines.plan_runner.PlannedProgram`): rounds of calls

    def begin(self, item: Any, previous: Sequence[QuestionVerdict] = ()) -> VerdictItem:
        """An item's state: the evidence questions as `BinEval.begin` settles them, no pick yet."""
        return VerdictItem(evidence=self.evidence.begin(item, previous))

    def next_calls(self, state: VerdictItem) -> list[LMCall]:
        """The calls the item needs now, round by round: the evidence questions; then the label
        pick (a second try after a label outside the declared set); then, unless the pressure
        test is skipped for this pick, the refutation draft and its questions' answers."""
        asked = self.evidence.next_calls(state.evidence)
        if asked or state.evidence.empty or state.failure is not None:
            return asked
        item = state.evidence
        if not state.picked:
            return [self.picker.pick_call(item.input, item.output, self._lines(state),
                                          attempt=len(state.attempts) + 1, feedback=state.feedback)]
        if state.pressure is not None:
            return []
        policy = self.question_set.verdict_policy
        if state.questions is None:
            skip = verdict_rules.pressure_test_skip_reason(
                self.pressure_test_mode, state.label, policy,
                verdict_rules.fatal_failures(self._verdicts(state), self.question_set))
            if skip is not None:
                state.pressure = PressureTestRecord(status="not_run", reason=skip, tested_label=state.label)
                return []
            return [self.pressure.draft_call(item.input, item.output, self._lines(state), policy.label(state.label))]
        return [self.pressure.answer_call(item.input, item.output, q, i)
                for i, q in enumerate(self.pressure.kept(state.questions), start=1) if i not in state.refutations]

    def take(self, state: VerdictItem, call: LMCall, answer: Answer) -> QuestionVerdict | None:
        """Record one answer: an evidence verdict (returned, for the journal), a pick try or a
        pressure-test step (kept in `state`; a failed one leaves the label undecided)."""
        if not call.key.startswith(("pick-", "refute-")):
            return self.evidence.take(state.evidence, call, answer)
        policy = self.question_set.verdict_policy
        try:
            if call.key.startswith("pick-"):
                attempt, matched, reason, feedback = self.picker.read_pick(answer)
                state.attempts.append(attempt)
                state.feedback = feedback
                if matched is not None:
                    state.label, state.reason, state.picked = matched, reason, True
                elif len(state.attempts) >= self.picker.max_attempts:
                    state.label, state.picked = None, True
            elif call.key == "refute-draft":
                state.questions, state.dropped = self.pressure.read_draft(answer)
                if not state.questions:
                    state.pressure = self.pressure.record(policy.label(state.label), [], state.dropped, None)
            else:
                number = int(call.key.rsplit("-", 1)[1])
                question = self.pressure.kept(state.questions or [])[number - 1]
                state.refutations[number] = self.pressure.read_answer(question, answer)
                kept = self.pressure.kept(state.questions or [])
                if len(state.refutations) == len(kept):
                    state.pressure = self.pressure.record(policy.label(state.label), state.questions or [],
                                                          state.dropped, [state.refutations[i]
                                                                          for i in range(1, len(kept) + 1)])
        except LMCallFailed as exc:
            state.failure = exc
        return None

    def unsent(self, state: VerdictItem, call: LMCall, reason: str) -> QuestionVerdict | None:
        """A call never sent: an evidence question gets an ``error`` verdict; a later step leaves
        the label undecided (a rerun asks it again)."""
        if not call.key.startswith(("pick-", "refute-")):
            return self.evidence.unsent(state.evidence, call, reason)
        state.failure = LMCallFailed(f"NotAsked: {reason}")
        return None

    def finish(self, state: VerdictItem) -> dspy.Prediction:
        """The item's prediction: the label after the pressure test's refutation rule and the
        fatal rule (`verdict_rules.decide_verdict`); an undecided prediction when a pick or
        pressure-test call failed (every answer kept, `undecided_prediction`)."""
        assessed = self.evidence.finish(state.evidence)
        if state.evidence.empty:
            return assessed
        if state.failure is not None:
            return self.undecided_prediction(assessed, state.failure)
        try:
            return self._decide(state, assessed)
        except Exception as exc:  # noqa: BLE001 - any failed rule after the questions keeps the answers
            return self.undecided_prediction(assessed, exc)

    def _verdicts(self, state: VerdictItem) -> list[QuestionVerdict]:
        item = state.evidence
        return [item.verdicts[q.id] for q in item.question_set.questions if q.id in item.verdicts]

    def _lines(self, state: VerdictItem) -> list:
        return evidence_lines(self._verdicts(state), self.question_set)

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

    def _decide(self, state: VerdictItem, assessed: dspy.Prediction) -> dspy.Prediction:
        """Rule on the picked label with the pressure test's record (code: `verdict_rules`)."""
        question_set = self.question_set
        policy = question_set.verdict_policy
        verdicts = assessed.verdicts
        record = state.pressure or PressureTestRecord(status="not_run", reason="no label was picked",
                                                      tested_label=state.label)
        named = verdict_rules.decide_verdict(policy=policy, question_set=question_set, verdicts=verdicts,
                                             provisional=state.label, reason=state.reason, attempts=state.attempts,
                                             pressure_test=record)
        outputs = {"named_verdict": named, "label": named.label, "verdicts": verdicts}
        if self.aggregation == "both":
            outputs.update(score=assessed.score, score_card=assessed.score_card)
        return dspy.Prediction(**outputs)


@dataclass
class VerdictItem:
    """One item's state in verdict mode (`VerdictJudge.begin`).

    Attributes:
        evidence: the binary questions' state (`binaryeval_dspy.programs.bineval.ItemJudging`).
        attempts: the label pick's tries so far.
        feedback: what the next try is told after a miss.
        picked: the pick is over (a label matched, or every try missed: `label` None).
        label, reason: the picked label and the LM's reason.
        questions: the refutation questions drafted (None before the draft).
        dropped: drafted entries that were not questions.
        refutations: question number -> its answer.
        pressure: the pressure test's record once it is decided (run, failed or not run).
        failure: a pick or pressure-test call that failed: the label stays undecided.
    """

    evidence: ItemJudging
    attempts: list[LabelAttempt] = field(default_factory=list)
    feedback: str = ""
    picked: bool = False
    label: str | None = None
    reason: str = ""
    questions: list[str] | None = None
    dropped: int = 0
    refutations: dict[int, RefutationAnswer] = field(default_factory=dict)
    pressure: PressureTestRecord | None = None
    failure: BaseException | None = None

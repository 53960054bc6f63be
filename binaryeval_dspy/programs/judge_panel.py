"""Live panels and cascades of judges, as judging plans: more calls per question, or a further round.

`JudgePanel` asks every LM question of every member (one round: one call per question and
member, `LMCall.judge` naming the member) and decides each question by a rule of
`binaryeval_dspy.panels` (`panel_vote`: ``majority``, ``any-no`` on fatal questions, or
``weighted`` with each member's weight measured beforehand against labels, read from a judge
weights file, `binaryeval_dspy.data.judge_weights`).
`JudgeCascade` asks its first stage every question, and a question whose stage is unsure
(`panels.escalation_reason`: no yes / no, a split stage, P(yes) inside the band) goes to the
next stage in a further round of calls; the last stage asked decides.

Both wrap a `BinEval` and are planned programs like it
(`binaryeval_dspy.engines.plan_runner.PlannedProgram`): code checks, empty outputs,
answers kept from an earlier run and the scoring are BinEval's; only the LM questions are
asked of several judges. Every member's verdict is kept on the decided verdict
(`QuestionVerdict.judges`); a member that fails (``unparsed``, ``error``) is counted and
the others decide. When every member's call failed the question is an ``error`` (a rerun
asks it again); when no member answered yes / no, or the vote is tied, it is ``unparsed``
(no decision), never "no".

Which engine sends the members' calls is the run's choice: the live and local engines send
each call to its member's LM (`binaryeval_dspy.engines.senders.JudgeRouter`), the replay
engine answers it from the member's rows of a verdicts file. The member names are the
judges' names (LM names, or the judges of a verdicts file).

A question is journaled when it is decided (the decided verdict, with its members'); a run
killed while a question's members are still out asks that question's members again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import dspy

from binaryeval_dspy.errors import ConfigError
from binaryeval_dspy.lm.calls import Answer, LMCall
from binaryeval_dspy.panels import (
    CascadeRule,
    PanelVote,
    check_rule,
    escalation_reason,
    panel_name,
    panel_vote,
)
from binaryeval_dspy.programs.bineval import BinEval, ItemJudging, question_verdict
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.verdict import QuestionVerdict

#: The rules a cascade's stage can vote by in a run (a weighted stage is not offered).
LIVE_PANEL_RULES = ("majority", "any-no")


@dataclass
class EnsembleItem:
    """One item's state: BinEval's (`inner`), and each undecided question's member verdicts so far."""

    inner: ItemJudging
    members: dict[str, dict[str, QuestionVerdict]] = field(default_factory=dict)
    out: dict[str, set[str]] = field(default_factory=dict)  # question id -> members asked, not answered


class _Ensemble:
    """What `JudgePanel` and `JudgeCascade` share: BinEval's plan with several judges per question."""

    def __init__(self, program: BinEval) -> None:
        if not isinstance(program, BinEval):
            raise ConfigError("a panel or cascade wraps a BinEval", received=type(program).__name__,
                              fix="pass BinEval(question_set).")
        self.program = program
        self._last_answer: Answer | None = None  # the answer taken last (a deduplicated request's, see `take`)

    name: str = ""

    @property
    def question_set(self) -> QuestionSet:
        """The wrapped BinEval's questions."""
        return self.program.question_set

    @property
    def scale(self) -> tuple[float, float]:
        """The wrapped BinEval's scale."""
        return self.program.scale

    def begin(self, item: Any, previous: Sequence[QuestionVerdict] = ()) -> EnsembleItem:
        """As `BinEval.begin`: an earlier run's decided verdicts are kept, not asked again."""
        return EnsembleItem(inner=self.program.begin(item, previous))

    def _ask(self, state: EnsembleItem) -> list[LMCall]:
        inner = state.inner
        calls = []
        for question in inner.question_set.questions:
            if question.id in inner.verdicts:
                continue
            have = state.members.setdefault(question.id, {})
            wanted = [m for m in self._members_now(have) if m not in have]
            for member in wanted:
                state.out.setdefault(question.id, set()).add(member)
                calls.append(self.program.question_call(inner.input, inner.output, question, item_id=inner.item_id,
                                                        output_hash=inner.output_hash, judge=member))
        return calls

    def next_calls(self, state: EnsembleItem) -> list[LMCall]:
        """The member calls of every undecided question that its current round needs."""
        if state.inner.empty:
            return []
        return self._ask(state)

    def take(self, state: EnsembleItem, call: LMCall, answer: Answer) -> QuestionVerdict | None:
        """Record one member's answer; returns the decided verdict once its question is decided, else None.

        The member's verdict keeps what its call used (`QuestionVerdict.usage`), so usage and
        cost are known per judge. A request sent once for several identical calls (the plan
        runner's dedupe hands its one answer to each caller in turn) is charged to its first
        caller only, as the item usage is."""
        verdict = question_verdict(state.inner.question_set.question(call.key), answer)
        if answer is not self._last_answer:
            self._last_answer = answer
            used = answer.usage
            if used.lm_calls or used.failed_calls or used.prompt_tokens or used.completion_tokens:
                verdict.usage = used.model_dump()
        return self._record(state, call, verdict)

    def unsent(self, state: EnsembleItem, call: LMCall, reason: str) -> QuestionVerdict | None:
        """A member call never sent: an ``error`` for that member (the question is asked again by a rerun
        when no member answered)."""
        verdict = QuestionVerdict(question_id=call.key, verdict="error", error=f"NotAsked: {reason}"[:2000])
        return self._record(state, call, verdict)

    def _record(self, state: EnsembleItem, call: LMCall, verdict: QuestionVerdict) -> QuestionVerdict | None:
        qid, member = call.key, call.judge or ""
        state.members.setdefault(qid, {})[member] = verdict
        waiting = state.out.get(qid, set())
        waiting.discard(member)
        if waiting:
            return None
        decided = self._decide(state.inner.question_set, qid, state.members[qid])
        if decided is None:
            return None  # a further round (a cascade's next stage)
        state.inner.verdicts[qid] = decided
        state.members.pop(qid, None)
        state.out.pop(qid, None)
        return decided

    def finish(self, state: EnsembleItem) -> dspy.Prediction:
        """As `BinEval.finish`, over the decided verdicts."""
        return self.program.finish(state.inner)

    # ----- per rule
    def _members_now(self, have: dict[str, QuestionVerdict]) -> list[str]:
        raise NotImplementedError

    def _decide(self, question_set: QuestionSet, qid: str, have: dict[str, QuestionVerdict]) -> QuestionVerdict | None:
        raise NotImplementedError


def decided_verdict(qid: str, vote: PanelVote, answers: dict[str, QuestionVerdict], explanation: str
                    ) -> QuestionVerdict:
    """The verdict a panel or cascade decided: the vote's outcome, the members' mean P(yes)
    (over those that answered with one), and every member's own verdict (`judges`). Every
    member's call failed: ``error`` with the first member's error (a rerun asks again)."""
    if answers and all(v.verdict == "error" for v in answers.values()):
        first = next(iter(answers.values()))
        return QuestionVerdict(question_id=qid, verdict="error", error=first.error, judges=dict(answers))
    soft = [v.p_yes for v in answers.values() if v.parsed and v.p_yes is not None]
    return QuestionVerdict(question_id=qid, verdict=vote.verdict, explanation=explanation,  # type: ignore[arg-type]
                           p_yes=sum(soft) / len(soft) if soft else None,
                           error=None if vote.verdict in ("yes", "no") else f"NoDecision: {vote.reason}",
                           judges=dict(answers))


def _vote_text(vote: PanelVote) -> str:
    return f"{vote.yes} yes, {vote.no} no, {vote.failed} without an answer"


class JudgePanel(_Ensemble):
    """Every LM question asked of every member; each decided by `rule` (module docstring).

    Args:
        program: the BinEval whose questions, checks and scoring are used.
        members: the judges' names (at least two, different).
        rule: ``majority``, ``any-no`` (one "no" decides a fatal question,
            `BinaryQuestion.fatal`) or ``weighted`` (each member's vote counts with its
            weight; the sign of the weighted sum decides, 0 is a tie: no decision).
        weights: for ``weighted``: member -> weight (>= 0), measured beforehand against labels
            (`binaryeval_dspy.data.judge_weights.read_judge_weights`); refused by the other rules.

    Attributes:
        name: ``rule(member, ...)`` (`panels.panel_name`), the run's judge name.

    Raises:
        ConfigError: fewer than two members, a repeated member, an unknown rule, ``weighted``
            without a weight (>= 0) for every member, or weights with another rule.
    """

    def __init__(self, program: BinEval, members: Sequence[str], *, rule: str = "majority",
                 weights: Mapping[str, float] | None = None) -> None:
        super().__init__(program)
        members = tuple(members)
        if len(members) < 2 or len(set(members)) != len(members):
            raise ConfigError("a panel needs at least two different judges", received=repr(list(members)),
                              fix="name two or more judges.")
        check_rule(rule)
        if rule == "weighted":
            missing = [m for m in members if weights is None or not (weights.get(m, -1.0) >= 0)]
            if missing:
                raise ConfigError(f"the weighted rule needs each judge's weight measured against labels; none (>= 0) "
                                  f"for {missing[0]!r}", fix="pass `panel_weights` FILE (the judge_weights.csv that "
                                                             "`bineval agreement` writes).")
        elif weights is not None:
            raise ConfigError(f"weights are for the weighted rule, not {rule!r}", fix="leave the weights out.")
        self.members, self.rule = members, rule
        self.weights = [float(weights[m]) for m in members] if weights is not None else None
        self.name = panel_name(rule, members)
        self._fatal = {q.id for q in program.question_set.questions if q.fatal}

    def _members_now(self, have: dict[str, QuestionVerdict]) -> list[str]:
        return list(self.members)

    def _decide(self, question_set: QuestionSet, qid: str, have: dict[str, QuestionVerdict]) -> QuestionVerdict:
        answers = {m: have[m] for m in self.members if m in have}
        vote = panel_vote([have[m].verdict if m in have else None for m in self.members], rule=self.rule,
                          fatal=qid in self._fatal, weights=self.weights)
        return decided_verdict(qid, vote, answers, _vote_text(vote))


class JudgeCascade(_Ensemble):
    """The first stage asked every LM question; the next only where a stage is unsure (module docstring).

    Args:
        program: the BinEval whose questions, checks and scoring are used.
        rule: the stages, the P(yes) band and the rule inside a stage (`panels.CascadeRule`).

    Attributes:
        name: `CascadeRule.name` (``cascade(A > B; band 0.2-0.8)``), the run's judge name.
    """

    def __init__(self, program: BinEval, rule: CascadeRule) -> None:
        super().__init__(program)
        if rule.stage_rule not in LIVE_PANEL_RULES:
            raise ConfigError(f"a cascade stage cannot vote by {rule.stage_rule!r} in a run",
                              expected=" or ".join(LIVE_PANEL_RULES), fix="use majority.")
        self.rule = rule
        self.name = rule.name

    def _stage_vote(self, stage: Sequence[str], have: dict[str, QuestionVerdict]) -> tuple[PanelVote, float | None]:
        vote = panel_vote([have[m].verdict if m in have else None for m in stage], rule=self.rule.stage_rule)
        soft = [have[m].p_yes for m in stage if m in have and have[m].parsed and have[m].p_yes is not None]
        return vote, (sum(soft) / len(soft) if soft else None)

    def _walk(self, have: dict[str, QuestionVerdict]) -> tuple[int, PanelVote | None, list[str]]:
        """(the stage to ask or that decided, its vote if it has answered, the reasons earlier stages passed it on)."""
        reasons: list[str] = []
        for index, stage in enumerate(self.rule.stages):
            if not all(m in have for m in stage):
                return index, None, reasons
            vote, p_yes = self._stage_vote(stage, have)
            reason = escalation_reason(vote, p_yes, self.rule.band)
            if reason is None or index == len(self.rule.stages) - 1:
                return index, vote, reasons
            reasons.append(reason)
        raise AssertionError("unreachable")

    def _members_now(self, have: dict[str, QuestionVerdict]) -> list[str]:
        index, vote, _ = self._walk(have)
        return [] if vote is not None else list(self.rule.stages[index])

    def _decide(self, question_set: QuestionSet, qid: str, have: dict[str, QuestionVerdict]) -> QuestionVerdict | None:
        index, vote, reasons = self._walk(have)
        if vote is None:
            return None
        text = f"answered by stage {index + 1} ({'+'.join(self.rule.stages[index])}): {_vote_text(vote)}"
        if reasons:
            text += "; passed on: " + ", ".join(reasons)
        asked = [m for stage in self.rule.stages[:index + 1] for m in stage if m in have]
        return decided_verdict(qid, vote, {m: have[m] for m in asked}, text)




def cascade_rule(settings: Any) -> CascadeRule:
    """The cascade `RunSettings` name: one stage per judge, in order, with its band."""
    return CascadeRule(tuple((judge,) for judge in settings.judges), band=settings.cascade_band)


def ensemble_name(settings: Any) -> str | None:
    """The judge name of a run with `settings`' `judges`: ``majority(A, B, C)`` or
    ``cascade(A > B; band 0.2-0.8)``; None for one judge."""
    if not settings.judges:
        return None
    return cascade_rule(settings).name if settings.cascade else panel_name(settings.panel_rule, settings.judges)


def ensemble_for(program: BinEval, settings: Any) -> BinEval | JudgePanel | JudgeCascade:
    """`program` asked of `settings`' `judges`: a `JudgePanel` (`panel_rule`), a `JudgeCascade`
    (`cascade`, `cascade_band`), or `program` itself without judges."""
    if not settings.judges:
        return program
    if settings.cascade:
        return JudgeCascade(program, cascade_rule(settings))
    weights = panel_weights(settings)
    return JudgePanel(program, settings.judges, rule=settings.panel_rule,
                      weights=weights.weights if weights is not None else None)


def panel_weights(settings: Any) -> Any:
    """The weighted panel's `JudgeWeights` read from `settings.panel_weights` (None without one).

    Raises:
        InputError: as `binaryeval_dspy.data.judge_weights.read_judge_weights` (file, line, field).
    """
    if not settings.panel_weights:
        return None
    from binaryeval_dspy.data.judge_weights import read_judge_weights

    return read_judge_weights(settings.panel_weights, settings.judges)


def judge_price_models(settings: Any) -> dict[str, str | None]:
    """Judge -> the model its calls are priced as (`binaryeval_dspy.cost.pricing.price_model_for_spec`;
    ``price_model`` prices the judges without a price of their own); every judge of a replay
    run is `REPLAY` (nothing is sent). {} for one judge. None for a judge means "price unknown"."""
    from binaryeval_dspy.cost.pricing import REPLAY, price_model_for_spec

    if settings.engine == "replay":
        return dict.fromkeys(settings.judges, REPLAY)
    return {judge: price_model_for_spec(judge, price_model=settings.price_model) for judge in settings.judges}


def ensemble_record(settings: Any) -> dict[str, Any]:
    """What a manifest's ``config`` records about a panel or cascade beyond its settings (the
    judges and the rule are in the manifest's ``settings``): the model each judge is priced as
    (``judge_prices``, `judge_price_models`) and, for a weighted panel, the weights it voted
    with and where they came from (``panel_weights``, ``panel_weights_source``:
    `JudgeWeights.manifest_entry`); {} for one judge.

    Raises:
        InputError: a weights file that cannot be read (`panel_weights`).
    """
    if not settings.judges:
        return {}
    weights = panel_weights(settings)
    return {"judge_prices": judge_price_models(settings), **(weights.manifest_entry() if weights is not None else {})}


__all__ = ["LIVE_PANEL_RULES", "EnsembleItem", "JudgeCascade", "JudgePanel", "cascade_rule", "decided_verdict",
           "ensemble_for", "ensemble_name", "ensemble_record", "judge_price_models", "panel_weights"]

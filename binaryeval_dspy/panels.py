"""Judge panels and cascades: the rules that turn several judges' verdicts into one.

A **panel** asks each question of several judges and aggregates their verdicts by a named
rule (`panel_vote`):

* ``majority``: yes when more members said yes than no, no when more said no; a tie is no
  decision.
* ``any-no``: on a fatal question, one "no" from any member decides no (a fatal condition
  must not slip through because others missed it); on other questions, majority.
* ``weighted``: each member's vote counts with a weight (`log_odds_weight` of its measured
  agreement with labels); the sign of the weighted sum decides.

A member that fails on a question (``unparsed``, ``error``, or no answer recorded) is
counted and left out: the others still decide. When no member answers, or the vote is
tied, the panel's outcome is ``unparsed`` (no decision), never "no".

A **cascade** asks its first stage (one judge, or a cheap panel) every question and sends a
question to the next stage only when the stage is unsure (`escalation_reason`): its answer
is not yes / no, its members split, or its P(yes) lies inside a band. The last stage's
answer stands.

`ensemble_statistics` says what a live panel or cascade (`binaryeval_dspy.programs.judge_panel`)
did in a run: Fleiss' kappa among its judges, the questions they split on, each judge's
answers and usage (calls, failed requests, tokens; priced per judge by the run's summary,
`binaryeval_dspy.runs.run_summary.judge_costs`), and for a cascade the share escalated and
its calls against asking the last judge everything.

These are pure functions of verdict values, for the live panels and cascades and for
`simulate_panel` / `simulate_cascade`, which replay them on recorded verdicts (verdicts
files): their output is verdict records named after the panel or cascade, scored like any
judge's by `bineval agreement`. Every name lists the rule and every member.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from binaryeval_dspy.errors import BinEvalError
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.schemas.verdict_record import VerdictRecord

PANEL_RULES = ("majority", "any-no", "weighted")
#: The `Usage` counts summed per judge by `ensemble_statistics` (calls, failed requests, tokens).
USAGE_COUNTS = ("lm_calls", "failed_calls", "prompt_tokens", "completion_tokens", "cached_prompt_tokens",
                "cache_write_tokens")
#: Why a cascade stage passed a question on (`escalation_reason`).
ESCALATION_REASONS = ("no answer", "panel split", "P(yes) in band")

Pair = tuple[str, str]  # (item_id, question_id)
Weights = Mapping[str, float] | Callable[[str, str], float]


@dataclass(frozen=True)
class PanelVote:
    """The outcome of one panel on one question.

    Attributes:
        verdict: ``yes`` / ``no``, or ``unparsed`` when the panel reached no decision.
        yes / no: members that answered yes / no.
        failed: members whose answer was ``unparsed`` or ``error``.
        missing: members with no answer recorded.
        reason: why there is no decision (``tie``, ``no member answered``), else None.
    """

    verdict: str
    yes: int
    no: int
    failed: int
    missing: int
    reason: str | None = None

    @property
    def split(self) -> bool:
        """True when members answered both yes and no."""
        return self.yes > 0 and self.no > 0


def check_rule(rule: str) -> str:
    """`rule` if it is one of `PANEL_RULES`.

    Raises:
        BinEvalError: another name (the message lists the rules).
    """
    if rule not in PANEL_RULES:
        raise BinEvalError(f"unknown panel rule {rule!r}; the rules are {', '.join(PANEL_RULES)}",
                           fix="name one of the rules.")
    return rule


def log_odds_weight(agreeing: float, answered: float) -> float:
    """A member's weight from its agreement with labels: log(a / (1 - a)) of its smoothed
    accuracy a = (agreeing + 1) / (answered + 2), floored at 0 (a judge no better than a
    coin gets no say; it is never inverted). The weighting that maximizes a vote's accuracy
    for independent judges (Nitzan & Paroush, 1982)."""
    a = (agreeing + 1.0) / (answered + 2.0)
    return max(0.0, math.log(a / (1.0 - a)))


def panel_vote(answers: Sequence[str | None], *, rule: str = "majority", fatal: bool = False,
               weights: Sequence[float] | None = None) -> PanelVote:
    """One panel decision from its members' verdicts on one question.

    Args:
        answers: one verdict per member (``yes``, ``no``, ``unparsed``, ``error``), None
            when the member has no answer recorded.
        rule: one of `PANEL_RULES`.
        fatal: the question is fatal (``any-no`` decides no on a single "no").
        weights: for ``weighted``: one weight (>= 0) per member, aligned with `answers`.

    Returns:
        A `PanelVote`.

    Raises:
        BinEvalError: an unknown rule, or ``weighted`` without one weight per member.
    """
    check_rule(rule)
    yes = sum(1 for a in answers if a == "yes")
    no = sum(1 for a in answers if a == "no")
    missing = sum(1 for a in answers if a is None)
    failed = len(answers) - yes - no - missing
    counts = {"yes": yes, "no": no, "failed": failed, "missing": missing}
    if yes + no == 0:
        return PanelVote("unparsed", **counts, reason="no member answered")
    if rule == "any-no" and fatal:
        return PanelVote("no" if no else "yes", **counts)
    if rule == "weighted":
        if weights is None or len(weights) != len(answers):
            raise BinEvalError("the weighted rule needs one weight per member")
        total = sum(w * (1 if a == "yes" else -1) for a, w in zip(answers, weights) if a in ("yes", "no"))
        if total == 0:
            return PanelVote("unparsed", **counts, reason="tie")
        return PanelVote("yes" if total > 0 else "no", **counts)
    if yes == no:
        return PanelVote("unparsed", **counts, reason="tie")
    return PanelVote("yes" if yes > no else "no", **counts)


def escalation_reason(vote: PanelVote, p_yes: float | None = None, band: tuple[float, float] | None = None
                      ) -> str | None:
    """Why a cascade stage should pass a question on, or None when its answer stands.

    Args:
        vote: the stage's decision (a single judge is a panel of one).
        p_yes: the stage's P(yes) (a single judge's, or its members' mean), None if none.
        band: (low, high): escalate when low <= P(yes) <= high; None: P(yes) is not used.

    Returns:
        ``panel split`` (members answered both ways, whatever the rule decided), ``no
        answer`` (no yes / no),
        ``P(yes) in band``, or None.
    """
    if vote.split:
        return "panel split"
    if vote.verdict not in ("yes", "no"):
        return "no answer"
    if band is not None and p_yes is not None and band[0] <= p_yes <= band[1]:
        return "P(yes) in band"
    return None


def panel_name(rule: str, members: Sequence[str]) -> str:
    """``majority(A, B, C)``: the rule and every member."""
    return f"{rule}({', '.join(members)})"


@dataclass(frozen=True)
class CascadeRule:
    """A cascade: stages of judges asked in turn, and when to pass a question on.

    Attributes:
        stages: one tuple of judge names per stage (one judge, or a panel voting by
            `stage_rule`); at least two stages.
        band: (low, high) in [0, 1]: a stage whose P(yes) lies in it passes the question
            on; None: only non-answers and splits escalate.
        stage_rule: the panel rule inside a stage of several judges.
    """

    stages: tuple[tuple[str, ...], ...]
    band: tuple[float, float] | None = None
    stage_rule: str = "majority"

    def __post_init__(self) -> None:
        if len(self.stages) < 2 or any(not stage for stage in self.stages):
            raise BinEvalError("a cascade needs at least two stages, each with a judge",
                               fix="write it as FIRST>NEXT, e.g. cheap-judge>strong-judge.")
        if self.band is not None and not 0.0 <= self.band[0] <= self.band[1] <= 1.0:
            raise BinEvalError(f"the P(yes) band must be LOW,HIGH with 0 <= LOW <= HIGH <= 1, got {self.band}")
        check_rule(self.stage_rule)

    @property
    def name(self) -> str:
        """``cascade(A+B > C; band 0.2-0.8)``: every member, in order, and the band."""
        stages = " > ".join("+".join(stage) for stage in self.stages)
        band = f"; band {self.band[0]:g}-{self.band[1]:g}" if self.band is not None else ""
        return f"cascade({stages}{band})"

    def with_band(self, band: tuple[float, float] | None) -> CascadeRule:
        """The same cascade with another band."""
        return CascadeRule(self.stages, band, self.stage_rule)


@dataclass
class CascadeCounts:
    """What a cascade did over a set of questions.

    Attributes:
        questions: questions decided.
        answered_at: stage index -> questions whose answer came from that stage.
        escalations: reason -> times a stage passed a question on for that reason.
        cost_usd: the summed cost of every answer the cascade asked for (None if any was unknown).
        strongest_cost_usd: the cost of asking the last stage every question (None if unknown).
        cost_unknown: answers used whose cost is unknown.
    """

    questions: int = 0
    answered_at: dict[int, int] = field(default_factory=dict)
    escalations: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = 0.0
    strongest_cost_usd: float | None = 0.0
    cost_unknown: int = 0

    @property
    def escalated_share(self) -> float:
        """Share of questions passed beyond the first stage (NaN for none)."""
        if not self.questions:
            return math.nan
        return 1.0 - self.answered_at.get(0, 0) / self.questions


def index_by_pair(records: Iterable[VerdictRecord]) -> dict[Pair, dict[str, VerdictRecord]]:
    """(item_id, question_id) -> judge -> record: every recorded answer, by the pair it answers."""
    index: dict[Pair, dict[str, VerdictRecord]] = {}
    for r in records:
        index.setdefault((r.item_id, r.question_id), {})[r.judge] = r
    return index


def _sum_cost(costs: Iterable[float | None]) -> float | None:
    total = 0.0
    for c in costs:
        if c is None:
            return None
        total += c
    return total


def _weights_for(weights: Weights | None, item_id: str, members: Sequence[str]) -> list[float] | None:
    if weights is None:
        return None
    if callable(weights):
        return [float(weights(item_id, m)) for m in members]
    return [float(weights.get(m, 0.0)) for m in members]


def _stage_vote(answers: Mapping[str, VerdictRecord], members: Sequence[str], item_id: str, *, rule: str,
                fatal: bool, weights: Weights | None) -> tuple[PanelVote, float | None, list[VerdictRecord]]:
    rows = [answers.get(m) for m in members]
    vote = panel_vote([r.verdict if r is not None else None for r in rows], rule=rule, fatal=fatal,
                      weights=_weights_for(weights, item_id, members))
    soft = [r.p_yes for r in rows if r is not None and r.answered and r.p_yes is not None]
    p_yes = sum(soft) / len(soft) if soft else None
    return vote, p_yes, [r for r in rows if r is not None]


def _panel_record(name: str, pair: Pair, vote: PanelVote, p_yes: float | None, cost: float | None,
                  explanation: str, question: VerdictRecord | None) -> VerdictRecord:
    return VerdictRecord(item_id=pair[0], question_id=pair[1], judge=name, verdict=vote.verdict, p_yes=p_yes,
                         explanation=explanation, cost_usd=cost, error=vote.reason,
                         question_text=question.question_text if question else None,
                         dimension=question.dimension if question else None)


def simulate_panel(index: Mapping[Pair, Mapping[str, VerdictRecord]], members: Sequence[str], *,
                   rule: str = "majority", fatal_questions: Iterable[str] = (),
                   weights: Weights | None = None, name: str | None = None) -> list[VerdictRecord]:
    """The panel's verdicts on every pair where any member answered, from recorded answers.

    Args:
        index: `index_by_pair` of the recorded verdicts.
        members: the judges of the panel (names as in the records).
        rule: one of `PANEL_RULES`.
        fatal_questions: question ids that are fatal (for ``any-no``).
        weights: for ``weighted``: judge -> weight, or (item_id, judge) -> weight (e.g.
            measured on the other items).
        name: the panel's judge name (default `panel_name`).

    Returns:
        One record per pair, judge = the panel's name; ``explanation`` counts the votes,
        ``cost_usd`` sums the members' (None if one is unknown), ``p_yes`` is the
        answering members' mean P(yes) when they gave one.

    Raises:
        BinEvalError: an unknown rule, fewer than two members, or ``weighted`` without weights.
    """
    check_rule(rule)
    if len(members) < 2:
        raise BinEvalError(f"a panel needs at least two judges, got {list(members)}")
    if rule == "weighted" and weights is None:
        raise BinEvalError("the weighted rule needs weights (each judge's measured agreement with labels)")
    fatal = set(fatal_questions)
    name = name or panel_name(rule, members)
    out = []
    for pair, answers in index.items():
        if not any(m in answers for m in members):
            continue
        vote, p_yes, rows = _stage_vote(answers, members, pair[0], rule=rule, fatal=pair[1] in fatal,
                                        weights=weights)
        text = f"{vote.yes} yes, {vote.no} no, {vote.failed} without an answer, {vote.missing} not asked"
        out.append(_panel_record(name, pair, vote, p_yes, _sum_cost(r.cost_usd for r in rows), text,
                                 rows[0] if rows else None))
    return out


def simulate_cascade(index: Mapping[Pair, Mapping[str, VerdictRecord]], rule: CascadeRule, *,
                     name: str | None = None) -> tuple[list[VerdictRecord], CascadeCounts]:
    """The cascade's verdicts on every pair where its first stage has an answer recorded.

    Each stage is consulted in turn; a stage's answer stands unless `escalation_reason`
    gives a reason to go on; the last stage's answer stands whatever it is (a non-answer
    there is the cascade's ``unparsed``).

    Returns:
        (records named after the cascade, with ``cost_usd`` the sum over the stages
        consulted and ``explanation`` naming the stage that answered and why earlier ones
        passed; the `CascadeCounts`).
    """
    name = name or rule.name
    counts = CascadeCounts()
    out = []
    last = rule.stages[-1]
    for pair, answers in index.items():
        if not any(m in answers for m in rule.stages[0]):
            continue
        counts.questions += 1
        used: list[VerdictRecord] = []
        reasons: list[str] = []
        for stage_index, members in enumerate(rule.stages):
            vote, p_yes, rows = _stage_vote(answers, members, pair[0], rule=rule.stage_rule, fatal=False,
                                            weights=None)
            used.extend(rows)
            reason = escalation_reason(vote, p_yes, rule.band)
            if reason is None or stage_index == len(rule.stages) - 1:
                break
            reasons.append(reason)
            counts.escalations[reason] = counts.escalations.get(reason, 0) + 1
        counts.answered_at[stage_index] = counts.answered_at.get(stage_index, 0) + 1
        cost = _sum_cost(r.cost_usd for r in used)
        counts.cost_unknown += sum(1 for r in used if r.cost_usd is None)
        counts.cost_usd = None if counts.cost_usd is None or cost is None else counts.cost_usd + cost
        strongest = _sum_cost(answers[m].cost_usd if m in answers else 0.0 for m in last)
        counts.strongest_cost_usd = (None if counts.strongest_cost_usd is None or strongest is None
                                     else counts.strongest_cost_usd + strongest)
        text = f"answered by stage {stage_index + 1} ({'+'.join(rule.stages[stage_index])})"
        if reasons:
            text += "; passed on: " + ", ".join(reasons)
        out.append(_panel_record(name, pair, vote, p_yes, cost, text, used[0] if used else None))
    return out, counts


def ensemble_statistics(verdicts: Iterable[QuestionVerdict], *, cascade: bool = False,
                        top: int = 10) -> dict[str, Any] | None:
    """What a live panel or cascade did, from its decided verdicts (those with `QuestionVerdict.judges`).

    Args:
        verdicts: a run's verdicts (others, e.g. code checks, are skipped).
        cascade: the judges were a cascade's stages, in their first-asked order (adds the
            share escalated and the calls against asking the last judge everything).
        top: how many split questions to list.

    Returns:
        None when no verdict has judges; else a dict: ``judges`` (in order),
        ``questions`` (decided by the judges), ``decided`` (outcome -> questions:
        yes / no / unparsed for no decision / error), ``answers_by_judge`` (judge ->
        {yes, no, unparsed, error}: every question asked of it, a failed call counted as
        ``error``), ``usage_by_judge`` (judge -> summed `QuestionVerdict.usage` of its own
        verdicts: ``lm_calls``, ``failed_calls`` (requests answered with an error),
        ``prompt_tokens``, ``completion_tokens``, ``cached_prompt_tokens``,
        ``cache_write_tokens``; counts and tokens), ``fleiss_kappa`` (over the questions at least two
        judges answered yes / no; None when undefined), ``kappa_questions`` (how many),
        ``split_questions`` (questions where judges answered both ways) and ``splits``
        (question id -> times split, most first, at most `top`); with `cascade` also
        ``escalated`` / ``escalated_share`` (questions asked beyond the first judge),
        ``calls`` (every judge call made), ``strongest_calls`` (asking the last judge every
        question) and ``calls_vs_strongest`` (their ratio).
    """
    from binaryeval_dspy.metrics.binary_agreement import fleiss_kappa

    rows = [v for v in verdicts if v.judges]
    if not rows:
        return None
    judges = list(dict.fromkeys(j for v in rows for j in v.judges or {}))
    by_judge = {j: {"yes": 0, "no": 0, "unparsed": 0, "error": 0} for j in judges}
    usage = {j: dict.fromkeys(USAGE_COUNTS, 0) for j in judges}
    decided = {"yes": 0, "no": 0, "unparsed": 0, "error": 0}
    ratings, splits = [], {}
    for v in rows:
        decided[v.verdict] += 1
        members = v.judges or {}
        for judge, answer in members.items():
            by_judge[judge][answer.verdict] += 1
            if answer.usage:
                sums = usage[judge]
                for name, value in answer.usage.items():
                    if name in sums:
                        sums[name] += value
        yes = sum(1 for a in members.values() if a.verdict == "yes")
        no = sum(1 for a in members.values() if a.verdict == "no")
        if yes + no >= 2:
            ratings.append((yes, no))
        if yes and no:
            splits[v.question_id] = splits.get(v.question_id, 0) + 1
    kappa = fleiss_kappa(ratings) if ratings else math.nan
    out: dict[str, Any] = {
        "judges": judges, "questions": len(rows), "decided": decided, "answers_by_judge": by_judge,
        "usage_by_judge": usage,
        "fleiss_kappa": None if math.isnan(kappa) else kappa, "kappa_questions": len(ratings),
        "split_questions": sum(splits.values()),
        "splits": dict(sorted(splits.items(), key=lambda kv: (-kv[1], kv[0]))[:top]),
    }
    if cascade:
        escalated = sum(1 for v in rows if any(j != judges[0] for j in v.judges or {}))
        calls = sum(len(v.judges or {}) for v in rows)
        out.update(escalated=escalated, escalated_share=escalated / len(rows), calls=calls,
                   strongest_calls=len(rows), calls_vs_strongest=calls / len(rows))
    return out

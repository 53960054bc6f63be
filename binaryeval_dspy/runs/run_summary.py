"""Summaries of a run, rebuilt from its stored results without calling any LM.

Every stored item is counted, whatever its status (``scored``, ``unscored``,
``empty_output``, ``error``); means are taken over the judged items that have a score for the cell, shown
as "n used / n total" beside each mean. An undefined mean is shown as "—", never as 0.

This module computes the summary (`summarize_results`) and saves it (`write_summary`);
its tables and Markdown are in `binaryeval_dspy.runs.run_summary_tables`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from binaryeval_dspy.analysis.explanation_flags import (
    COPIES_VIOLATION_EXAMPLE,
    EXPLANATION_FLAGS,
    SAYS_NO,
    SAYS_YES,
    explanation_flags,
)
from binaryeval_dspy.cost.pricing import RunCost, format_usd, price_model_for_name, run_cost
from binaryeval_dspy.lm.logprobs import AGAINST_VERDICT_WHY, against_verdict
from binaryeval_dspy.panels import ensemble_statistics
from binaryeval_dspy.runs.run_summary_tables import is_defined, item_status, summary_markdown
from binaryeval_dspy.schemas.item_result import ITEM_STATUSES, ItemResult
from binaryeval_dspy.schemas.question_set import QuestionSet

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CONTRADICTED_SHARE",
    "SKEW_SHARE",
    "TIE_MIN_ITEMS",
    "UNDISCRIMINATING_SHARE",
    "UNREAD_SHARE",
    "DimensionSummary",
    "Discrimination",
    "RunSummary",
    "VerdictSkew",
    "SummaryBuilder",
    "UnusedVerdicts",
    "judge_costs",
    "judge_notes",
    "results_frame",
    "summarize_results",
    "trust_warnings",
    "verdict_skew",
    "write_summary",
]

#: Share of one verdict among the judge's answered questions above which `verdict_skew`
#: is recorded (every verdict the same is the extreme case).
SKEW_SHARE = 0.95
#: A judge is said not to tell the items apart (`Discrimination.low`) when MORE than this
#: share of its questions got the same verdict on every judged item, or more than this
#: share of the judged items got one and the same overall score.
UNDISCRIMINATING_SHARE = 0.5
#: Ties among item scores are only read with at least this many judged items (two or three
#: items of similar quality may tie under any judge).
TIE_MIN_ITEMS = 4
#: The headline says not to trust the score when at least this share of the explained
#: answers contradict their verdict, or of the answers could not be read.
CONTRADICTED_SHARE = 0.1
UNREAD_SHARE = 0.1


class DimensionSummary(BaseModel):
    """Mean scores of one dimension over the items of a run.

    Attributes:
        dimension: dimension name ("overall" for all questions).
        mean_score: mean yes-rate over the items with a score (status ``scored``) with a
            defined score in this dimension, in [0, 1]; None if there is none. A NaN
            score is left out like a missing one, never counted as 0.
        mean_scaled: the same mean on the run's [a, b] scale.
        items_scored: n used, the items the mean is over (judged, with at least one
            parsed answer in this dimension).
        items_total: n total, every item of the run (empty and failed ones included).
        yes / no / unparsed: verdict counts summed over items.
        error: questions whose LM call failed (no answer; outside every denominator).
        mean_p_yes: mean over items of the soft score (mean P(yes)), in [0, 1]; None
            when the LM returned no log-probabilities.
    """

    model_config = ConfigDict(extra="forbid")

    dimension: str
    mean_score: float | None
    mean_scaled: float | None
    items_scored: int
    items_total: int = 0
    yes: int
    no: int
    unparsed: int
    error: int = 0
    mean_p_yes: float | None = None


class VerdictSkew(BaseModel):
    """The judge gave (nearly) the same verdict to every question it answered.

    Attributes:
        verdict: the verdict given to (nearly) every question, ``"yes"`` or ``"no"``.
        count: how many of the judge's answered questions got it.
        answered: the judge's answered questions (yes + no; LM answers only, code
            checks, unparsed and failed calls left out).
        share: ``count / answered``, above `SKEW_SHARE`.
    """

    model_config = ConfigDict(extra="forbid")

    verdict: str
    count: int
    answered: int
    share: float


class Discrimination(BaseModel):
    """How much the judge's answers tell the run's items apart (a measure of spread, not of
    correctness: a judge can discriminate and still be wrong).

    Attributes:
        items: judged items compared (status ``scored``), >= 2.
        questions: LM-answered questions with a yes/no answer on at least two of them.
        constant_questions: of those, the questions that got the same verdict on every
            item that answered them (they separate no item from another).
        largest_tie: the largest number of judged items that share one overall score.
        tied_score: that score on the run's [a, b] scale.
        score_sd: the population standard deviation of the items' overall yes-rates, in
            [0, 0.5].
        low: the judge barely tells these items apart: more than
            `UNDISCRIMINATING_SHARE` of `questions` are constant, or (with at least
            `TIE_MIN_ITEMS` items) more than that share of the items tie in `largest_tie`.
    """

    model_config = ConfigDict(extra="forbid")

    items: int
    questions: int
    constant_questions: int
    largest_tie: int
    tied_score: float | None = None
    score_sd: float | None = None
    low: bool = False


class UnusedVerdicts(BaseModel):
    """Rows of a replayed verdicts file that answered nothing in the run: rows of the replayed
    judge(s) for an item or a question the run does not have (`ReplayVerdicts.unused`).

    Attributes:
        file: the verdicts file.
        rows: rows unused (>= 1).
        items / questions: distinct item ids / question ids among them that the run does not have.
        examples: the first few such rows, as ``"item 'x', question 'q9'"``.
    """

    model_config = ConfigDict(extra="forbid")

    file: str
    rows: int
    items: int
    questions: int
    examples: list[str] = Field(default_factory=list)


class RunSummary(BaseModel):
    """The numbers printed at the end of a run and saved as ``summary.json``.

    Attributes:
        lm: LM display name that produced every verdict.
        items: number of items summarized.
        scale: the [a, b] interval of the scaled scores.
        dimensions: one `DimensionSummary` per dimension, then "overall".
        lm_calls / prompt_tokens / completion_tokens: summed over items (calls answered
            from DSPy's cache cost nothing and are not counted). `lm_calls` are the calls
            that got a reply.
        failed_calls: requests that got an error instead of a reply (server errors, rate
            limits, timeouts; retried by DSPy or not), summed over items; ``lm_calls +
            failed_calls`` is every request the endpoint received for the stored items.
        tokens_per_item: mean prompt + completion tokens per item.
        seconds_per_item: mean wall time per item, in seconds.
        cached_prompt_tokens: prompt tokens the provider served from its prompt cache.
        cache_write_tokens: prompt tokens the provider wrote to its prompt cache (Anthropic).
        cost: the estimated cost of the run's LM calls in USD, with the price table it
            comes from (`binaryeval_dspy.cost.pricing.RunCost`): ``unknown`` when the model
            has no price, ``0 (local)`` for the embedded model.
        adapter_fallbacks: second calls in another output format after a parse failure.
        items_incomplete: items with at least one question whose LM call failed, or that
            could not be judged (status ``error``); their scores use the questions
            answered (rerun the command to ask the rest).
        items_by_status: items per status: ``scored`` (judged, with a score),
            ``unscored`` (judged, but no answer could be read into a score: every answer
            unparsed), ``empty_output`` (empty output, no LM call, no score) and ``error``
            (could not be judged, no score).
        questions_answered / questions_total: answered (yes, no, unparsed) and asked
            questions over all items.
        embedded_lm: True when the LM is the embedded llama.cpp model (its P(yes) and
            verdicts are labelled as such).
        verdict_skew: set when the judge gave the same verdict to more than
            `SKEW_SHARE` of the questions it answered (over at least two judged items);
            None otherwise.
        discrimination: how much the judge's answers tell the items apart
            (`Discrimination`: constant questions, tied item scores, their spread); None
            with fewer than two judged items. Its ``low`` drives the note and the headline.
        verdicts_against_p_yes: LM answers whose verdict points the other way from their
            own P(yes) ("yes" with P(yes) < 0.5, "no" with P(yes) > 0.5;
            `binaryeval_dspy.lm.logprobs.against_verdict`), of ``p_yes_answers`` answers
            that carry a P(yes).
        calls_in_flight: LM calls the run kept in flight at once (1: items never
            overlap, so seconds per item are the run's): the `concurrency` in effect, never
            more than the requests the stored items made (2000 allowed for 480 calls is 480);
            None when unknown.
        explanations_checked: LM answers (yes/no) that came with an explanation.
        explanations_flagged: those whose explanation contradicts the verdict (see
            `binaryeval_dspy.analysis.explanation_flags`).
        explanation_flags: count per flag (``explanation_says_no``, ...).
        replies_cut: LM answers (yes/no) read from a reply that stopped at ``max_tokens``
            after its whole answer (``QuestionVerdict.reply_cut``).
        answers_qualified: LM answers (yes/no) whose verdict word came with a reservation
            (``"yes, but ..."``; ``QuestionVerdict.qualified``): counted as the verdict
            named, and noted.
        judges: for a panel or cascade of judges (`binaryeval_dspy.programs.judge_panel`):
            `binaryeval_dspy.panels.ensemble_statistics` (Fleiss' kappa, split questions, each
            judge's answers and usage; for a cascade the share escalated and its calls against
            the last judge's) with each judge's cost at its own prices (`judge_costs`:
            ``cost_by_judge``, ``cost_usd``; for a cascade ``strongest_estimate`` and
            ``cost_vs_strongest``); else None.
        items_not_stored: items given to the run that have no stored result (it stopped
            early or was interrupted before them); the other figures are over the stored items.
        verdicts_unused: for a replay (engine ``replay``), the rows of its verdicts file that
            answered nothing because the run has no such item or question (`UnusedVerdicts`);
            None when every row was the run's, and for runs that are not replays.
        notes: what the summary says about the judge, as printed beside the table.
        warnings: the reasons not to trust the overall score, in a few words each
            (`trust_warnings`), shown in the headline beside it; empty when there are none.
    """

    model_config = ConfigDict(extra="forbid")

    lm: str
    items: int
    scale: tuple[float, float]
    dimensions: list[DimensionSummary]
    lm_calls: int
    prompt_tokens: int
    completion_tokens: int
    tokens_per_item: float
    seconds_per_item: float
    cached_prompt_tokens: int = 0
    cache_write_tokens: int = 0
    failed_calls: int = 0
    cost: RunCost | None = None
    adapter_fallbacks: int = 0
    items_incomplete: int = 0
    questions_answered: int = 0
    questions_total: int = 0
    items_by_status: dict[str, int] = Field(default_factory=dict)
    embedded_lm: bool = False
    verdict_skew: VerdictSkew | None = None
    discrimination: Discrimination | None = None
    explanations_checked: int = 0
    explanations_flagged: int = 0
    explanation_flags: dict[str, int] = Field(default_factory=dict)
    replies_cut: int = 0
    answers_qualified: int = 0
    verdicts_against_p_yes: int = 0
    p_yes_answers: int = 0
    calls_in_flight: int | None = None
    judges: dict[str, Any] | None = None
    items_not_stored: int = 0
    verdicts_unused: UnusedVerdicts | None = None
    notes: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)




def results_frame(results: list[ItemResult]) -> pd.DataFrame:
    """One row per item: ``item_id``, ``status``, one column per dimension score (in [0, 1],
    NaN when nothing parsed or the item was not judged), ``overall``, counts of
    ``yes``/``no``/``unparsed``/``error``, ``complete``, tokens and seconds."""
    import pandas as pd

    rows = []
    for r in results:
        row: dict[str, object] = {"item_id": r.item_id, "status": item_status(r)}
        card = r.score_card if item_status(r) == "scored" else None
        for dim, score in (card.dimension_scores.items() if card is not None else ()):
            row[dim] = score if is_defined(score) else math.nan
        row["overall"] = card.overall if card is not None and is_defined(card.overall) else math.nan
        totals = r.score_card.total_counts if r.score_card is not None else None
        row.update(yes=totals.yes if totals else 0, no=totals.no if totals else 0,
                   unparsed=totals.unparsed if totals else 0, error=totals.error if totals else 0,
                   complete=r.complete,
                   tokens=r.usage.total_tokens, lm_calls=r.usage.lm_calls, seconds=r.seconds)
        rows.append(row)
    return pd.DataFrame(rows)


class SummaryBuilder:
    """Builds a `RunSummary` from item results given one at a time, in one pass and in memory
    that does not grow with the items beyond one float per judged item (their overall
    scores, for the tie and the spread of `Discrimination`).

    Every counter is a sum over items, so the order of the results does not matter; the
    dimensions are listed in the order of the first result with a score card. This is what
    `summarize_results` runs, and what the recorder (`binaryeval_dspy.runs.evaluation`)
    feeds while it reads ``results.jsonl`` once at the end of a run.

    Args:
        question_set: the run's questions; when given, explanations are checked again
            against them (`explanation_flags`), so results stored before flags existed
            are counted too. None counts the ``flags`` stored with each verdict.
    """

    def __init__(self, question_set: QuestionSet | None = None) -> None:
        self._examples = ({q.id: q.violation_example for q in question_set.questions}
                          if question_set is not None else None)
        self.items = 0
        self._scale: tuple[float, float] | None = None
        self._dims: dict[str, None] = {}
        # dimension (or "overall") -> [score sum, scores, P(yes) sum, P(yes)s, yes, no, unparsed, error]
        self._cells: dict[str, list[float]] = {}
        self._usage = {name: 0 for name in ("prompt_tokens", "completion_tokens", "lm_calls", "cached_prompt_tokens",
                                            "cache_write_tokens", "failed_calls", "adapter_fallbacks")}
        self._seconds = 0.0
        self._incomplete = self._answered = self._asked = 0
        self._status = dict.fromkeys(ITEM_STATUSES, 0)
        self._judged = 0
        self._yes = self._parsed = 0  # the judge's parsed (yes / no) answers on judged items
        self._explained = self._flagged = self._flags_stored = 0
        self._flag_counts = dict.fromkeys(EXPLANATION_FLAGS, 0)
        self._cut = self._qualified = self._against = self._soft = 0
        self._by_question: dict[str, list[int]] = {}  # question id -> [yes, no] over judged items
        self._by_code: set[str] = set()
        self._overall: list[float] = []
        self._ensemble: list[Any] = []  # verdicts decided by a panel or cascade (`QuestionVerdict.judges`)
        self._judged_scale: tuple[float, float] | None = None

    def add(self, r: ItemResult) -> None:
        """Count one stored item result (any status)."""
        self.items += 1
        status = item_status(r)
        self._status[status] = self._status.get(status, 0) + 1
        usage = r.usage
        for name in self._usage:
            self._usage[name] += getattr(usage, name)
        self._seconds += r.seconds
        self._incomplete += not r.complete
        self._answered += r.answered_count
        self._asked += len(r.verdicts)
        self._ensemble.extend(v for v in r.verdicts if v.judges)
        card = r.score_card
        if card is None:
            return
        if self._scale is None:
            self._scale = card.scale
        for dim in card.dimension_scores:
            self._dims.setdefault(dim)
        judged = status == "scored"
        for dim, counts in ((d, card.counts.get(d)) for d in card.dimension_scores):
            self._count(dim, counts, card.dimension_scores.get(dim), _p_yes(card, dim), judged)
        for dim, counts in card.counts.items():  # counts of a dimension without a score entry
            if dim not in card.dimension_scores:
                self._count(dim, counts, None, None, False)
        self._count("overall", card.total_counts, card.overall, _p_yes(card, "overall"), judged)
        if judged:
            self._add_judged(r)

    def _count(self, dim: str, counts: object, score: float | None, soft: float | None, judged: bool) -> None:
        cell = self._cells.setdefault(dim, [0.0, 0, 0.0, 0, 0, 0, 0, 0])
        if judged and is_defined(score):
            cell[0] += float(score)
            cell[1] += 1
        if judged and is_defined(soft):
            cell[2] += float(soft)
            cell[3] += 1
        if counts:
            cell[4] += counts.yes
            cell[5] += counts.no
            cell[6] += counts.unparsed
            cell[7] += counts.error

    def _add_judged(self, r: ItemResult) -> None:
        self._judged += 1
        if self._judged_scale is None:
            self._judged_scale = r.score_card.scale
        if is_defined(r.score_card.overall):
            self._overall.append(float(r.score_card.overall))
        latest: dict[str, str] = {}
        for v in r.verdicts:
            latest[v.question_id] = v.verdict  # the item's last verdict per question counts
            if v.source != "lm":
                self._by_code.add(v.question_id)
                continue
            if not v.parsed:
                continue
            self._parsed += 1
            self._yes += v.verdict == "yes"
            self._cut += bool(v.reply_cut)
            self._qualified += bool(v.qualified)
            self._against += against_verdict(v.p_yes, v.verdict)
            self._soft += v.p_yes is not None
            if not v.explanation.strip():
                continue
            self._explained += 1
            flags = (explanation_flags(v.verdict, v.explanation, self._examples.get(v.question_id))
                     if self._examples is not None else list(v.flags or ()))
            self._flagged += bool(flags)
            self._flags_stored += bool(v.flags)
            for flag in flags:
                if flag in self._flag_counts:
                    self._flag_counts[flag] += 1
        for question_id, verdict in latest.items():
            if verdict in ("yes", "no"):
                self._by_question.setdefault(question_id, [0, 0])[verdict == "no"] += 1

    def summary(self, *, lm: str, embedded: bool | None = None, price_model: str | None = None,
                batch: bool = False, in_flight: int | None = None,
                judge_prices: Mapping[str, str | None] | None = None) -> RunSummary:
        """The `RunSummary` of every result added so far (arguments as in `summarize_results`)."""
        low, high = scale = self._scale or (0.0, 1.0)
        out = []
        for dim in [*self._dims, "overall"]:
            total, scored, soft, softs, yes, no, unparsed, error = self._cells.get(dim, [0.0, 0, 0.0, 0, 0, 0, 0, 0])
            mean = total / scored if scored else None
            out.append(DimensionSummary(
                dimension=dim, mean_score=mean, mean_scaled=None if mean is None else mean * (high - low) + low,
                items_scored=scored, items_total=self.items, yes=yes, no=no, unparsed=unparsed, error=error,
                mean_p_yes=soft / softs if softs else None,
            ))
        n = self.items
        prompt, completion = self._usage["prompt_tokens"], self._usage["completion_tokens"]
        sent = self._usage["lm_calls"] + self._usage["failed_calls"]
        if in_flight is not None and sent:
            in_flight = min(in_flight, sent)  # the calls made bound what could be in flight at once
        summary = RunSummary(
            lm=lm, items=n, scale=scale, dimensions=out, lm_calls=self._usage["lm_calls"],
            prompt_tokens=prompt, completion_tokens=completion,
            tokens_per_item=(prompt + completion) / n if n else 0.0,
            seconds_per_item=self._seconds / n if n else 0.0,
            cached_prompt_tokens=self._usage["cached_prompt_tokens"],
            cache_write_tokens=self._usage["cache_write_tokens"],
            failed_calls=self._usage["failed_calls"], adapter_fallbacks=self._usage["adapter_fallbacks"],
            items_incomplete=self._incomplete, questions_answered=self._answered, questions_total=self._asked,
            items_by_status={status: self._status.get(status, 0) for status in ITEM_STATUSES},
            embedded_lm=lm.endswith("(llama.cpp)") if embedded is None else bool(embedded),
            verdict_skew=verdict_skew(self._yes, self._parsed, judged_items=self._judged),
            discrimination=self._discrimination(),
            explanations_checked=self._explained, explanations_flagged=self._flagged,
            explanation_flags={flag: count for flag, count in self._flag_counts.items() if count},
            replies_cut=self._cut, answers_qualified=self._qualified,
            verdicts_against_p_yes=self._against, p_yes_answers=self._soft, calls_in_flight=in_flight,
            judges=ensemble_statistics(self._ensemble, cascade="cascade(" in lm),
        )
        summary.notes = judge_notes(summary, flags_stored=self._flags_stored == summary.explanations_flagged)
        summary.warnings = trust_warnings(summary)
        if price_model is None:
            price_model = price_model_for_name(lm, embedded=summary.embedded_lm)
        summary.cost = run_cost(prompt_tokens=prompt, completion_tokens=completion,
                                cached_prompt_tokens=summary.cached_prompt_tokens,
                                cache_write_tokens=summary.cache_write_tokens, items=n, model=price_model,
                                batch=batch)
        if summary.judges is not None and judge_prices is not None:
            total = judge_costs(summary.judges, judge_prices, batch=batch, items=n)
            if total is not None:  # the sum of each judge's cost at its own prices
                summary.cost = total
        return summary

    def _discrimination(self) -> Discrimination | None:
        """How much the judge's yes/no answers tell the judged items apart (`Discrimination`),
        or None with fewer than two. Questions answered by code checks are left out (they
        are not the judge's answers); unparsed and failed answers too."""
        from collections import Counter
        from statistics import pstdev

        if self._judged < 2:
            return None
        compared = [(yes, no) for q, (yes, no) in self._by_question.items() if q not in self._by_code and yes + no >= 2]
        constant = sum(1 for yes, no in compared if yes == 0 or no == 0)
        overall = self._overall
        counts = Counter(round(x, 9) for x in overall)
        tie = max(counts.values(), default=0)
        tied = min((score for score, n in counts.items() if n == tie), default=None)  # ties: the lowest, in any order
        low, high = self._judged_scale
        items = self._judged
        is_low = (bool(compared) and constant > UNDISCRIMINATING_SHARE * len(compared)) or (
            items >= TIE_MIN_ITEMS and tie > UNDISCRIMINATING_SHARE * items)
        return Discrimination(items=items, questions=len(compared), constant_questions=constant, largest_tie=tie,
                              tied_score=None if tied is None else round(tied * (high - low) + low, 4),
                              score_sd=round(pstdev(overall), 4) if overall else None, low=bool(is_low))


def judge_costs(stats: dict[str, Any], judge_prices: Mapping[str, str | None], *, batch: bool = False,
                items: int = 0) -> RunCost | None:
    """Price a panel's or cascade's usage per judge, in place in `stats` (`ensemble_statistics`).

    Each judge's summed usage (``usage_by_judge``: its own calls' tokens) is priced at its
    own model's prices (`run_cost`; `judge_prices`: judge -> LiteLLM id, ``local``,
    ``replay``, or None for a price unknown). Adds to `stats`:

    * ``cost_by_judge``: judge -> `RunCost` as JSON (``status`` ``unknown`` with no ``usd``
      when its price is unknown: never 0);
    * ``cost_usd``: the USD of every judge's calls, None when any judge's price is unknown;
    * for a cascade (``escalated`` in `stats`), ``strongest_estimate``: what asking the last
      judge every question would cost, from that judge's own measured cost per question
      asked of it: ``judge``, ``asked`` (questions it was asked), ``questions`` (every
      question the cascade decided), ``usd_per_call`` / ``usd`` (None when its price is
      unknown or it was never asked), ``tokens_per_call`` / ``tokens`` (prompt + completion),
      and ``cost_vs_strongest`` (``cost_usd / strongest_estimate.usd``, None when either is
      unknown).

    Args:
        stats: the summary's ``judges`` dict (changed in place).
        judge_prices: judge -> the model to price it as (`judge_price_models`).
        batch: price at batch prices.
        items: the run's items, for the per-item figure of the total.

    Returns:
        The run's total as a `RunCost` (the sum over judges, each at its own prices) when
        every judge is priced (or local, or replayed); None when any judge's price is unknown
        (the run's cost stays as priced by its LM name).
    """
    usage = stats.get("usage_by_judge") or {}
    costs: dict[str, RunCost] = {}
    for judge in stats.get("judges") or ():
        used = usage.get(judge) or {}
        costs[judge] = run_cost(prompt_tokens=used.get("prompt_tokens", 0),
                                completion_tokens=used.get("completion_tokens", 0),
                                cached_prompt_tokens=used.get("cached_prompt_tokens", 0),
                                cache_write_tokens=used.get("cache_write_tokens", 0),
                                model=judge_prices.get(judge), batch=batch)
    stats["cost_by_judge"] = {judge: cost.model_dump(mode="json") for judge, cost in costs.items()}
    known = all(cost.usd is not None for cost in costs.values())
    stats["cost_usd"] = sum(cost.usd for cost in costs.values()) if known and costs else None
    if stats.get("escalated") is not None and costs:
        last = stats["judges"][-1]
        asked = sum((stats.get("answers_by_judge") or {}).get(last, {}).values())
        used = usage.get(last) or {}
        tokens = used.get("prompt_tokens", 0) + used.get("completion_tokens", 0)
        questions = stats.get("strongest_calls") or stats.get("questions", 0)
        per_call = costs[last].usd / asked if asked and costs[last].usd is not None else None
        estimate = {"judge": last, "asked": asked, "questions": questions,
                    "usd_per_call": per_call, "usd": per_call * questions if per_call is not None else None,
                    "tokens_per_call": tokens / asked if asked else None,
                    "tokens": round(tokens / asked * questions) if asked else None}
        stats["strongest_estimate"] = estimate
        stats["cost_vs_strongest"] = (stats["cost_usd"] / estimate["usd"]
                                      if stats["cost_usd"] is not None and estimate["usd"] else None)
    if not known or not costs:
        return None
    total = stats["cost_usd"]
    priced = [c for c in costs.values() if c.status == "priced"]
    if not priced:  # every judge local or replayed: the first one's display (0 (local), 0 (replay))
        first = next(iter(costs.values()))
        return first.model_copy(update={"usd_per_item": 0.0})
    parts = {name: sum(getattr(c, name) or 0.0 for c in priced)
             for name in ("input_usd", "cached_input_usd", "cache_write_usd", "output_usd")}
    return RunCost(status="priced", display=format_usd(total), usd=total, usd_per_item=total / items if items else None,
                   model=None, price_key=", ".join(dict.fromkeys(c.price_key or "" for c in priced)),
                   mode="batch" if batch else "live", **parts,
                   source=f"the sum of each judge's calls at its own prices; {priced[0].source}",
                   note="per judge in the summary's judges.cost_by_judge")


def summarize_results(results: Iterable[ItemResult], *, lm: str, embedded: bool | None = None,
                      question_set: QuestionSet | None = None, price_model: str | None = None,
                      batch: bool = False, in_flight: int | None = None,
                      judge_prices: Mapping[str, str | None] | None = None) -> RunSummary:
    """Aggregate stored item results into a `RunSummary` (mean of per-item yes-rates), in one
    pass over `results` (`SummaryBuilder`: a generator over ``results.jsonl`` is read
    without holding the items).

    Every item is counted (per status in ``items_by_status``); each mean is over the
    judged items with a defined score for it (None and NaN are left out, never read as
    0), so one undefined score leaves the other dimensions' means intact. The summary
    also says whether the judge discriminates at all (`VerdictSkew`, `Discrimination`),
    counts the explanations flagged as contradicting their verdict
    (``QuestionVerdict.flags``), and carries the notes printed beside the table
    (`judge_notes`) and the headline's warnings (`trust_warnings`).

    Args:
        results: item results of one run (same question set and scale), of any status.
        lm: the LM name to print beside the figures.
        embedded: whether `lm` is the embedded llama.cpp model; None guesses it from the
            name (embedded LMs are named ``<file>.gguf (llama.cpp)``).
        question_set: the run's questions; when given, explanations are checked again
            against them (`explanation_flags`), so results stored before flags existed
            are counted too. None counts the ``flags`` stored with each verdict.
        price_model: the LiteLLM id to price the usage at (`LMHandle.priced_as`); None
            prices it by `lm` (`price_model_for_name`: the embedded model costs
            ``0 (local)``, a served model at a base URL is ``unknown``).
        batch: the calls went through a provider's batch API: priced at batch prices.
        in_flight: LM calls kept in flight at once (`RunSettings.in_flight`); None when
            unknown (the seconds-per-item line then says items may overlap).
        judge_prices: for a panel or cascade, judge -> the model its calls are priced as
            (`binaryeval_dspy.programs.judge_panel.judge_price_models`, recorded in the
            manifest as ``judge_prices``): each judge's usage is priced at its own prices
            (`judge_costs`); None leaves the judges unpriced.
    """
    builder = SummaryBuilder(question_set)
    for result in results:
        builder.add(result)
    return builder.summary(lm=lm, embedded=embedded, price_model=price_model, batch=batch, in_flight=in_flight,
                           judge_prices=judge_prices)


def verdict_skew(yes: int, answered: int, *, judged_items: int) -> VerdictSkew | None:
    """A `VerdictSkew` when more than `SKEW_SHARE` of the judge's yes/no answers are the
    same verdict, over at least two judged items; else None.

    Args:
        yes: the judge's "yes" answers (LM answers on judged items).
        answered: its yes and no answers.
        judged_items: items judged (status ``scored``); one item cannot be compared.
    """
    if judged_items < 2 or not answered:
        return None
    verdict, count = ("yes", yes) if yes * 2 >= answered else ("no", answered - yes)
    share = count / answered
    if share <= SKEW_SHARE:
        return None
    return VerdictSkew(verdict=verdict, count=count, answered=answered, share=round(share, 4))


def _discrimination_said(summary: RunSummary) -> str:
    """What the answers show about telling the items apart, e.g. ``13 of 16 items got the same
    overall score (5.00 on [1, 5]) and 3 of 12 questions got the same verdict on every item``."""
    d = summary.discrimination
    low, high = summary.scale
    parts = []
    if d.items >= TIE_MIN_ITEMS and d.largest_tie > 1 and d.tied_score is not None:
        parts.append(f"{d.largest_tie} of {d.items} items got the same overall score ({d.tied_score:.2f} on "
                     f"[{low:g}, {high:g}])")
    if d.questions:
        parts.append(f"{d.constant_questions} of {d.questions} questions got the same verdict on every item")
    return " and ".join(parts)


_FLAG_WORDS = {SAYS_NO: 'begin with a bare "no" under a "yes" verdict',
               SAYS_YES: 'begin with a bare "yes" under a "no" verdict',
               COPIES_VIOLATION_EXAMPLE: 'copy the question\'s violation example under a "yes" verdict'}


def judge_notes(summary: RunSummary, *, flags_stored: bool = True) -> list[str]:
    """What to say beside the table about the judge: a verdict skew (with its counts and
    what it means), explanations that contradict their verdicts, qualified verdicts, answers read from replies
    cut at ``max_tokens``, and, for the embedded
    model, what its P(yes) column is. Empty when there is nothing to say.

    Args:
        summary: the run's summary.
        flags_stored: whether the flagged verdicts carry their ``flags`` in
            results.jsonl (False for results stored before the check existed, whose
            flags were only counted from their explanations).
    """
    notes = []
    skew = summary.verdict_skew
    low = summary.discrimination is not None and summary.discrimination.low
    fix = ("Try a larger model (a provider's model id or a served model's URL as the LM)"
           if summary.embedded_lm else "Try a larger model, or check that the questions can be failed")
    if skew is not None and skew.count == skew.answered:
        other = "no" if skew.verdict == "yes" else "yes"
        notes.append(f'The judge answered "{skew.verdict}" to all {skew.answered} questions it answered '
                     f'(0 "{other}"): it does not discriminate between items, so these scores say little about '
                     f"them. {fix}.")
    elif low:
        yes = summary.dimensions[-1].yes if summary.dimensions else 0
        answered = yes + (summary.dimensions[-1].no if summary.dimensions else 0)
        share = f' ({yes} of {answered} answers "yes", {yes / answered:.0%})' if answered else ""
        notes.append(f"The judge barely tells these items apart: {_discrimination_said(summary)}{share}, so these "
                     f"scores say little about them. {fix}.")
    elif skew is not None:
        other = "no" if skew.verdict == "yes" else "yes"
        notes.append(f'The judge answered "{skew.verdict}" to {skew.count} of the {skew.answered} questions it '
                     f'answered ({skew.share:.0%}; {skew.answered - skew.count} "{other}"): it barely '
                     f"discriminates between items, so these scores say little about them. {fix}.")
    if summary.explanations_flagged:
        kinds = "; ".join(f"{count} {_FLAG_WORDS.get(flag, flag)}" for flag, count in summary.explanation_flags.items())
        where = ("those verdicts carry \"flags\" in results.jsonl" if flags_stored else
                 "counted from the stored explanations (results stored before this check carry no \"flags\")")
        notes.append(f"{summary.explanations_flagged} of {summary.explanations_checked} explanations contradict their "
                     f"verdict ({kinds}); {where}. Do not trust those verdicts.")
    if summary.answers_qualified:
        count = summary.answers_qualified
        notes.append(f"{count} answer{'s' if count != 1 else ''} qualified {'their' if count != 1 else 'its'} "
                     "verdict with a reservation (\"yes, but "
                     "...\", \"no, although ...\"; \"qualified\" in results.jsonl, the reply in \"raw_answer\"): "
                     "each is counted as the verdict it names, but the judge also took part of it back. Read them "
                     "before trusting those verdicts.")
    if summary.replies_cut:
        notes.append(f"{summary.replies_cut} answers came from replies that stopped at max_tokens after the answer "
                     "(\"reply_cut\" in results.jsonl): the verdicts are the LM's, text after them was cut. "
                     "Raise `max_tokens` to get whole replies.")
    if summary.verdicts_against_p_yes:
        count = summary.verdicts_against_p_yes
        notes.append(f"{count} of {summary.p_yes_answers} verdicts point the other way from their own P(yes) "
                     "(\"yes\" with P(yes) below 0.5 or \"no\" above it; marked in the item view of bineval "
                     f"view). {AGAINST_VERDICT_WHY}")
    if summary.embedded_lm:
        has_soft = any(d.mean_p_yes is not None for d in summary.dimensions)
        if has_soft:
            notes.append(f"The P(yes) columns are the embedded model's own probability of \"yes\" ({summary.lm}): "
                         "they rank items even where every verdict is \"yes\", but this model is too small to judge "
                         "well; read them and the scores as a smoke test of the pipeline, not as measurements.")
        else:
            notes.append("Judged by the embedded model (llama.cpp), which is too small to judge well: read these "
                         "scores as a smoke test of the pipeline, not as measurements.")
    return notes


def trust_warnings(summary: RunSummary) -> list[str]:
    """The reasons not to trust the run's overall score, a few words each, for the headline
    beside it (console, summary.md, `bineval view`): the judge barely tells the items apart
    (`Discrimination.low`, or one verdict for every question), at least `CONTRADICTED_SHARE`
    of the explanations contradict their verdict, at least `UNREAD_SHARE` of the answers
    could not be read, or the embedded model judged. Empty when there is none; the notes
    (`judge_notes`) say each in full."""
    out = []
    skew, d = summary.verdict_skew, summary.discrimination
    if skew is not None and skew.count == skew.answered:
        out.append(f'the judge answered "{skew.verdict}" to every question, so it tells no item from another')
    elif d is not None and d.low:
        out.append(f"the judge barely tells the items apart ({_discrimination_said(summary)})")
    checked = summary.explanations_checked
    if checked and summary.explanations_flagged >= CONTRADICTED_SHARE * checked:
        out.append(f"{summary.explanations_flagged} of {checked} explanations contradict their verdict")
    overall = summary.dimensions[-1] if summary.dimensions else None
    if overall is not None:
        answered = overall.yes + overall.no + overall.unparsed
        if answered and overall.unparsed >= UNREAD_SHARE * answered:
            out.append(f"{overall.unparsed} of {answered} answers could not be read as yes or no")
    if summary.embedded_lm:
        out.append("the embedded model is too small to judge well (a smoke test of the pipeline)")
    return out


def _p_yes(card: object, dim: str) -> float | None:
    """An item's soft score (mean P(yes)) for `dim` or "overall", None without one."""
    if dim == "overall":
        return card.p_yes_overall
    return (card.p_yes_scores or {}).get(dim)


def write_summary(summary: RunSummary, run_path: Path) -> tuple[Path, Path]:
    """Write ``summary.json`` and ``summary.md`` into the run directory; returns both paths."""
    json_path = Path(run_path) / "summary.json"
    md_path = Path(run_path) / "summary.md"
    json_path.write_text(json.dumps(summary.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    md_path.write_text(summary_markdown(summary), encoding="utf-8")
    return json_path, md_path

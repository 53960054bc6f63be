"""Summaries of a run, rebuilt from its stored results without calling any LM.

Every stored item is counted, whatever its status (``scored``, ``empty_output``,
``error``); means are taken over the judged items that have a score for the cell, shown
as "n used / n total" beside each mean. An undefined mean is shown as "—", never as 0.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from binaryeval_dspy.analysis.explanation_flags import (
    COPIES_VIOLATION_EXAMPLE,
    EXPLANATION_FLAGS,
    SAYS_NO,
    SAYS_YES,
    explanation_flags,
)
from binaryeval_dspy.lm.pricing import RunCost, cost_line, price_model_for_name, run_cost
from binaryeval_dspy.schemas.item_result import ITEM_STATUSES, ItemResult
from binaryeval_dspy.schemas.question_set import QuestionSet

UNDEFINED = "—"  # how an undefined mean or score is shown (never 0)
#: Share of one verdict among the judge's answered questions above which the run is
#: said not to discriminate between items (every verdict the same is the extreme case).
SKEW_SHARE = 0.95


class DimensionSummary(BaseModel):
    """Mean scores of one dimension over the items of a run.

    Attributes:
        dimension: dimension name ("overall" for all questions).
        mean_score: mean yes-rate over the judged items (status ``scored``) with a
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


class RunSummary(BaseModel):
    """The numbers printed at the end of a run and saved as ``summary.json``.

    Attributes:
        lm: LM display name that produced every verdict.
        items: number of items summarized.
        scale: the [a, b] interval of the scaled scores.
        dimensions: one `DimensionSummary` per dimension, then "overall".
        lm_calls / prompt_tokens / completion_tokens: summed over items (calls answered
            from DSPy's cache cost nothing and are not counted).
        tokens_per_item: mean prompt + completion tokens per item.
        seconds_per_item: mean wall time per item, in seconds.
        cached_prompt_tokens: prompt tokens the provider served from its prompt cache.
        cache_write_tokens: prompt tokens the provider wrote to its prompt cache (Anthropic).
        cost: the estimated cost of the run's LM calls in USD, with the price table it
            comes from (`binaryeval_dspy.lm.pricing.RunCost`): ``unknown`` when the model
            has no price, ``0 (local)`` for the embedded model.
        adapter_fallbacks: second calls in another output format after a parse failure.
        items_incomplete: items with at least one question whose LM call failed, or that
            could not be judged (status ``error``); their scores use the questions
            answered (rerun the command to ask the rest).
        items_by_status: items per status: ``scored`` (judged), ``empty_output`` (empty
            output, no LM call, no score) and ``error`` (could not be judged, no score).
        questions_answered / questions_total: answered (yes, no, unparsed) and asked
            questions over all items.
        embedded_lm: True when the LM is the embedded llama.cpp model (its P(yes) and
            verdicts are labelled as such).
        verdict_skew: set when the judge gave the same verdict to more than
            `SKEW_SHARE` of the questions it answered (over at least two judged items):
            it does not discriminate between items; None otherwise.
        explanations_checked: LM answers (yes/no) that came with an explanation.
        explanations_flagged: those whose explanation contradicts the verdict (see
            `binaryeval_dspy.analysis.explanation_flags`).
        explanation_flags: count per flag (``explanation_says_no``, ...).
        notes: what the summary says about the judge, as printed beside the table.
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
    cost: RunCost | None = None
    adapter_fallbacks: int = 0
    items_incomplete: int = 0
    questions_answered: int = 0
    questions_total: int = 0
    items_by_status: dict[str, int] = Field(default_factory=dict)
    embedded_lm: bool = False
    verdict_skew: VerdictSkew | None = None
    explanations_checked: int = 0
    explanations_flagged: int = 0
    explanation_flags: dict[str, int] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


def _status(result: ItemResult) -> str:
    return getattr(result, "status", "scored")


def _defined(value: float | None) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def results_frame(results: list[ItemResult]) -> pd.DataFrame:
    """One row per item: ``item_id``, ``status``, one column per dimension score (in [0, 1],
    NaN when nothing parsed or the item was not judged), ``overall``, counts of
    ``yes``/``no``/``unparsed``/``error``, ``complete``, tokens and seconds."""
    rows = []
    for r in results:
        row: dict[str, object] = {"item_id": r.item_id, "status": _status(r)}
        card = r.score_card if _status(r) == "scored" else None
        for dim, score in (card.dimension_scores.items() if card is not None else ()):
            row[dim] = score if _defined(score) else math.nan
        row["overall"] = card.overall if card is not None and _defined(card.overall) else math.nan
        totals = r.score_card.total_counts if r.score_card is not None else None
        row.update(yes=totals.yes if totals else 0, no=totals.no if totals else 0,
                   unparsed=totals.unparsed if totals else 0, error=totals.error if totals else 0,
                   complete=r.complete,
                   tokens=r.usage.total_tokens, lm_calls=r.usage.lm_calls, seconds=r.seconds)
        rows.append(row)
    return pd.DataFrame(rows)


def summarize_results(results: list[ItemResult], *, lm: str, embedded: bool | None = None,
                      question_set: QuestionSet | None = None, price_model: str | None = None,
                      batch: bool = False) -> RunSummary:
    """Aggregate stored item results into a `RunSummary` (mean of per-item yes-rates).

    Every item is counted (per status in ``items_by_status``); each mean is over the
    judged items with a defined score for it (None and NaN are left out, never read as
    0), so one undefined score leaves the other dimensions' means intact. The summary
    also says whether the judge discriminates at all (`VerdictSkew`), counts the
    explanations flagged as contradicting their verdict (``QuestionVerdict.flags``),
    and carries the notes printed beside the table (`judge_notes`).

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
    """
    carded = [r for r in results if r.score_card is not None]
    judged = [r for r in carded if _status(r) == "scored"]
    scale = carded[0].score_card.scale if carded else (0.0, 1.0)
    low, high = scale
    dims: list[str] = list(dict.fromkeys(d for r in carded for d in r.score_card.dimension_scores))
    out: list[DimensionSummary] = []
    for dim in [*dims, "overall"]:
        values = [
            (r.score_card.overall if dim == "overall" else r.score_card.dimension_scores.get(dim))
            for r in judged
        ]
        parsed = [float(v) for v in values if _defined(v)]
        counts = [
            (r.score_card.total_counts if dim == "overall" else r.score_card.counts.get(dim))
            for r in carded
        ]
        mean = sum(parsed) / len(parsed) if parsed else None
        soft = [float(v) for v in (_p_yes(r.score_card, dim) for r in judged) if _defined(v)]
        out.append(DimensionSummary(
            dimension=dim, mean_score=mean,
            mean_scaled=None if mean is None else mean * (high - low) + low,
            items_scored=len(parsed), items_total=len(results),
            yes=sum(c.yes for c in counts if c), no=sum(c.no for c in counts if c),
            unparsed=sum(c.unparsed for c in counts if c), error=sum(c.error for c in counts if c),
            mean_p_yes=sum(soft) / len(soft) if soft else None,
        ))
    n = len(results)
    prompt = sum(r.usage.prompt_tokens for r in results)
    completion = sum(r.usage.completion_tokens for r in results)
    answers = [v for r in judged for v in r.verdicts if v.source == "lm" and v.parsed]
    explained = [v for v in answers if v.explanation.strip()]
    examples = {q.id: q.violation_example for q in question_set.questions} if question_set is not None else None
    flagged = [(explanation_flags(v.verdict, v.explanation, examples.get(v.question_id)) if examples is not None
                else list(v.flags or ())) for v in explained]
    flag_counts = {flag: sum(1 for f in flagged if flag in f) for flag in EXPLANATION_FLAGS}
    summary = RunSummary(
        lm=lm, items=n, scale=scale, dimensions=out, lm_calls=sum(r.usage.lm_calls for r in results),
        prompt_tokens=prompt, completion_tokens=completion,
        tokens_per_item=(prompt + completion) / n if n else 0.0,
        seconds_per_item=sum(r.seconds for r in results) / n if n else 0.0,
        cached_prompt_tokens=sum(r.usage.cached_prompt_tokens for r in results),
        cache_write_tokens=sum(r.usage.cache_write_tokens for r in results),
        adapter_fallbacks=sum(r.usage.adapter_fallbacks for r in results),
        items_incomplete=sum(1 for r in results if not r.complete),
        questions_answered=sum(r.answered_count for r in results),
        questions_total=sum(len(r.verdicts) for r in results),
        items_by_status={status: sum(1 for r in results if _status(r) == status) for status in ITEM_STATUSES},
        embedded_lm=lm.endswith("(llama.cpp)") if embedded is None else bool(embedded),
        verdict_skew=verdict_skew(answers, judged_items=len(judged)),
        explanations_checked=len(explained),
        explanations_flagged=sum(1 for f in flagged if f),
        explanation_flags={flag: count for flag, count in flag_counts.items() if count},
    )
    stored = sum(1 for v in explained if v.flags)
    summary.notes = judge_notes(summary, flags_stored=stored == summary.explanations_flagged)
    if price_model is None:
        price_model = price_model_for_name(lm, embedded=summary.embedded_lm)
    summary.cost = run_cost(prompt_tokens=prompt, completion_tokens=completion,
                            cached_prompt_tokens=summary.cached_prompt_tokens,
                            cache_write_tokens=summary.cache_write_tokens, items=n, model=price_model, batch=batch)
    return summary


def verdict_skew(answers: list, *, judged_items: int) -> VerdictSkew | None:
    """A `VerdictSkew` when more than `SKEW_SHARE` of the judge's yes/no answers are the
    same verdict, over at least two judged items; else None.

    Args:
        answers: the LM's parsed verdicts (`QuestionVerdict` with verdict yes or no).
        judged_items: items judged (status ``scored``); one item cannot be compared.
    """
    if judged_items < 2 or not answers:
        return None
    yes = sum(1 for v in answers if v.verdict == "yes")
    verdict, count = ("yes", yes) if yes * 2 >= len(answers) else ("no", len(answers) - yes)
    share = count / len(answers)
    if share <= SKEW_SHARE:
        return None
    return VerdictSkew(verdict=verdict, count=count, answered=len(answers), share=round(share, 4))


_FLAG_WORDS = {SAYS_NO: 'begin with a bare "no" under a "yes" verdict',
               SAYS_YES: 'begin with a bare "yes" under a "no" verdict',
               COPIES_VIOLATION_EXAMPLE: 'copy the question\'s violation example under a "yes" verdict'}


def judge_notes(summary: RunSummary, *, flags_stored: bool = True) -> list[str]:
    """What to say beside the table about the judge: a verdict skew (with its counts and
    what it means), explanations that contradict their verdicts, and, for the embedded
    model, what its P(yes) column is. Empty when there is nothing to say.

    Args:
        summary: the run's summary.
        flags_stored: whether the flagged verdicts carry their ``flags`` in
            results.jsonl (False for results stored before the check existed, whose
            flags were only counted from their explanations).
    """
    notes = []
    skew = summary.verdict_skew
    if skew is not None:
        other = "no" if skew.verdict == "yes" else "yes"
        if skew.count == skew.answered:
            said = (f'The judge answered "{skew.verdict}" to all {skew.answered} questions it answered '
                    f'(0 "{other}"): it does not discriminate between items')
        else:
            said = (f'The judge answered "{skew.verdict}" to {skew.count} of the {skew.answered} questions it '
                    f'answered ({skew.share:.0%}; {skew.answered - skew.count} "{other}"): it barely '
                    "discriminates between items")
        fix = ("Try a larger model (--lm provider/model or a served model's URL)"
               if summary.embedded_lm else "Try a larger model, or check that the questions can be failed")
        notes.append(f"{said}, so these scores say little about them. {fix}.")
    if summary.explanations_flagged:
        kinds = "; ".join(f"{count} {_FLAG_WORDS.get(flag, flag)}" for flag, count in summary.explanation_flags.items())
        where = ("those verdicts carry \"flags\" in results.jsonl" if flags_stored else
                 "counted from the stored explanations (results stored before this check carry no \"flags\")")
        notes.append(f"{summary.explanations_flagged} of {summary.explanations_checked} explanations contradict their "
                     f"verdict ({kinds}); {where}. Do not trust those verdicts.")
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


def _p_yes(card: object, dim: str) -> float | None:
    """An item's soft score (mean P(yes)) for `dim` or "overall", None without one."""
    if dim == "overall":
        return card.p_yes_overall
    return (card.p_yes_scores or {}).get(dim)


def prompt_tokens_phrase(summary: RunSummary) -> str:
    """``prompt tokens 12,538 per item, 10,120 of them from cache`` (the cached part only
    when the provider reported one; cache writes too when it reported them)."""
    n = summary.items or 1
    text = f"prompt tokens {summary.prompt_tokens / n:,.0f} per item"
    if summary.cached_prompt_tokens:
        text += f", {summary.cached_prompt_tokens / n:,.0f} of them from cache"
    if summary.cache_write_tokens:
        text += f", {summary.cache_write_tokens / n:,.0f} written to cache"
    return text


def usage_line(summary: RunSummary) -> str:
    """One line of usage: calls, tokens (prompt per item and its cached part, completion
    per item), fallbacks, time per item."""
    tokens = summary.prompt_tokens + summary.completion_tokens
    n = summary.items or 1
    fallbacks = f", {summary.adapter_fallbacks} adapter fallbacks" if summary.adapter_fallbacks else ""
    return (f"{summary.lm_calls:,} LM calls, {tokens:,} tokens ({prompt_tokens_phrase(summary)}; completion tokens "
            f"{summary.completion_tokens / n:,.0f} per item){fallbacks}, {summary.seconds_per_item:.1f} s per item")


def status_line(summary: RunSummary) -> str:
    """Items per status, e.g. ``4 items: scored: 1, empty_output: 3, error: 0``."""
    counts = summary.items_by_status or {"scored": summary.items}
    return f"{summary.items} items: " + ", ".join(f"{status}: {counts.get(status, 0)}" for status in ITEM_STATUSES)


def coverage_warning(summary: RunSummary) -> str | None:
    """A warning when the means are not over every item (empty outputs, items that could
    not be judged, or dimensions without a parsed answer), else None."""
    short = [d for d in summary.dimensions if d.items_scored < d.items_total]
    if not short:
        return None
    cells = ", ".join(f"{d.dimension} {d.items_scored} / {d.items_total}" for d in short)
    return (f"Means are over the items with a score only ({cells} items used); empty outputs and items that "
            "could not be judged have no score and are not counted as 0.")


def used_cell(d: DimensionSummary) -> str:
    """``n used / n total`` of one dimension's mean."""
    return f"{d.items_scored} / {d.items_total}"


def incomplete_line(summary: RunSummary) -> str | None:
    """A warning line when some questions got no answer (failed calls), else None."""
    if not summary.items_incomplete:
        return None
    failed = summary.questions_total - summary.questions_answered
    return (f"{summary.items_incomplete} of {summary.items} items incomplete: {failed} of "
            f"{summary.questions_total} questions have no answer (their LM call failed); scores use the "
            "answered questions. Rerun the same command to ask just those again.")


def _fmt(value: float | None, digits: int = 3) -> str:
    return UNDEFINED if not _defined(value) else f"{value:.{digits}f}"


def p_yes_header(summary: RunSummary) -> str:
    """The P(yes) column's heading, naming the embedded model when it produced them."""
    return "mean P(yes), embedded model" if summary.embedded_lm else "mean P(yes)"


def flagged_line(summary: RunSummary) -> str | None:
    """``Explanations contradicting their verdict: N of M`` (None when no answer had one)."""
    if not summary.explanations_checked:
        return None
    return f"Explanations contradicting their verdict: {summary.explanations_flagged} of {summary.explanations_checked}"


def summary_table(summary: RunSummary) -> Table:
    """A rich table: per dimension, mean yes-rate, mean scaled score and verdict counts,
    with the run's notes about the judge (`judge_notes`) in its caption."""
    low, high = summary.scale
    table = Table(title=escape(f"BinEval scores - {summary.items} items - LM: {summary.lm}"))
    table.add_column("dimension")
    table.add_column("mean yes-rate [0,1]", justify="right")
    table.add_column(f"mean score [{low:g},{high:g}]", justify="right")
    table.add_column("items used", justify="right")
    table.add_column("yes", justify="right")
    table.add_column("no", justify="right")
    table.add_column("unparsed", justify="right")
    table.add_column("error", justify="right")
    soft = any(d.mean_p_yes is not None for d in summary.dimensions)
    if soft:
        table.add_column(p_yes_header(summary), justify="right")
    for d in summary.dimensions:
        cells = [_fmt(d.mean_score), _fmt(d.mean_scaled, 2), used_cell(d), str(d.yes), str(d.no), str(d.unparsed),
                 str(d.error)]
        if soft:
            cells.append(_fmt(d.mean_p_yes))
        table.add_row(Text(d.dimension), *cells, style="bold" if d.dimension == "overall" else None)
    warnings = [w for w in (coverage_warning(summary), incomplete_line(summary)) if w]
    caption = Text("\n".join([status_line(summary), usage_line(summary),
                              *([cost_line(summary.cost)] if summary.cost is not None else []), *warnings,
                              *([flagged_line(summary)] if flagged_line(summary) else [])]))
    for note in summary.notes:
        caption.append("\nNote: ", style="bold yellow")
        caption.append(note, style="yellow")
    table.caption = caption
    table.caption_justify = "left"
    return table


def items_table(results: list[ItemResult], *, max_rows: int = 40, embedded: bool = False) -> Table:
    """A rich table with one row per item (first `max_rows`): scaled scores per dimension;
    an item without a score (``empty_output``, ``error``) shows its status and "—".

    When the LM returned log-probabilities, a ``P(yes)`` column (the item's mean P(yes)
    over all questions, in [0, 1]) ranks items even where every hard verdict is the
    same; `embedded` labels it as the embedded model's."""
    table = Table(title="Per-item scores (scaled)")
    table.add_column("item", no_wrap=True)
    dims = list(dict.fromkeys(d for r in results if r.score_card is not None for d in r.score_card.dimension_scores))
    for d in dims:
        table.add_column(escape(d), justify="right")
    table.add_column("overall", justify="right")
    soft = any(r.score_card is not None and _defined(r.score_card.p_yes_overall) for r in results)
    if soft:
        table.add_column("P(yes), embedded model" if embedded else "P(yes)", justify="right")
    table.add_column("unparsed", justify="right")
    table.add_column("error", justify="right")
    for r in results[:max_rows]:
        sc = r.score_card
        status = _status(r)
        if status != "scored":
            item = Text(f"{r.item_id} ({status})", style="yellow" if status == "error" else "dim")
        else:
            item = Text(r.item_id) if r.complete else Text(f"{r.item_id} (incomplete)", style="yellow")
        if sc is None or status != "scored":
            counts = sc.total_counts if sc is not None else None
            table.add_row(item, *[UNDEFINED for _ in dims], UNDEFINED, *([UNDEFINED] if soft else []),
                          str(counts.unparsed if counts else 0), str(counts.error if counts else 0))
            continue
        table.add_row(item, *[_fmt(sc.scaled_dimension_scores.get(d), 2) for d in dims],
                      _fmt(sc.scaled_overall, 2), *([_fmt(sc.p_yes_overall)] if soft else []),
                      str(sc.total_counts.unparsed), str(sc.total_counts.error))
    if len(results) > max_rows:
        table.caption = f"... {len(results) - max_rows} more items in results.jsonl"
    return table


def summary_markdown(summary: RunSummary) -> str:
    """The summary as a Markdown table, LM named in the heading, the notes about the judge
    (`judge_notes`) right below it."""
    low, high = summary.scale
    lines = [
        f"# BinEval run summary ({summary.items} items, LM: {summary.lm})", "",
        (f"| dimension | mean yes-rate [0,1] | mean score [{low:g},{high:g}] | items used | yes | no | unparsed |"
         f" error | {p_yes_header(summary)} |"),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for d in summary.dimensions:
        lines.append(f"| {d.dimension} | {_fmt(d.mean_score)} | {_fmt(d.mean_scaled, 2)} | {used_cell(d)} | {d.yes} | "
                     f"{d.no} | {d.unparsed} | {d.error} | {_fmt(d.mean_p_yes)} |")
    for note in summary.notes:  # beside the table, before the cost lines
        lines += ["", f"**Note:** {note}"]
    cached = f" ({summary.cached_prompt_tokens} of them from the provider's cache)" if summary.cached_prompt_tokens else ""
    lines += ["", (f"LM calls: {summary.lm_calls}; tokens: {summary.prompt_tokens} prompt{cached} + "
                   f"{summary.completion_tokens} completion ({summary.tokens_per_item:.0f} per item: "
                   f"{prompt_tokens_phrase(summary)}); "
                   f"adapter fallbacks: {summary.adapter_fallbacks}; wall time {summary.seconds_per_item:.2f} s "
                   "per item."),
              *([cost_line(summary.cost)] if summary.cost is not None else []),
              (f"Questions answered: {summary.questions_answered} of {summary.questions_total}; "
               f"incomplete items: {summary.items_incomplete}."),
              f"Items by status: {status_line(summary)}.", ""]
    if flagged_line(summary):
        lines[-1:] = [f"{flagged_line(summary)}.", ""]
    for warning in (coverage_warning(summary), incomplete_line(summary)):
        if warning:
            lines += [f"**Warning:** {warning}", ""]
    return "\n".join(lines)


def write_summary(summary: RunSummary, run_path: Path) -> tuple[Path, Path]:
    """Write ``summary.json`` and ``summary.md`` into the run directory; returns both paths."""
    json_path = Path(run_path) / "summary.json"
    md_path = Path(run_path) / "summary.md"
    json_path.write_text(json.dumps(summary.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    md_path.write_text(summary_markdown(summary), encoding="utf-8")
    return json_path, md_path

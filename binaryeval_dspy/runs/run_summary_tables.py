"""A run's summary as text: the rich tables printed at the end of a run, and ``summary.md``.

The numbers come from `binaryeval_dspy.runs.run_summary.RunSummary` (and, for the
per-item table, the stored item results); nothing here computes a mean. An undefined mean
or score is shown as "—" (`UNDEFINED`), never as 0. `UNDEFINED` and the helpers that tell
a defined score and an item's status are shared with the summary's computation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from binaryeval_dspy.cost.pricing import cost_line, format_usd
from binaryeval_dspy.render import markdown_paragraph, markdown_table
from binaryeval_dspy.schemas.item_result import ITEM_STATUSES

if TYPE_CHECKING:
    from binaryeval_dspy.runs.run_summary import DimensionSummary, RunSummary
    from binaryeval_dspy.schemas.item_result import ItemResult

UNDEFINED = "—"  # how an undefined mean or score is shown (never 0)


def item_status(result: ItemResult) -> str:
    """An item result's status (``scored`` for rows written before statuses existed)."""
    return getattr(result, "status", "scored")


def is_defined(value: float | None) -> bool:
    """True for a number that is neither None nor NaN (an undefined score is shown as such)."""
    return value is not None and not (isinstance(value, float) and math.isnan(value))


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


def calls_phrase(summary: RunSummary) -> str:
    """``34 LM calls (32 answered, 2 failed)``: every request sent, with the failed ones
    (errors instead of a reply, retried or not) apart; ``32 LM calls`` when none failed."""
    if not summary.failed_calls:
        return f"{summary.lm_calls:,} LM calls"
    return (f"{summary.lm_calls + summary.failed_calls:,} LM calls ({summary.lm_calls:,} answered, "
            f"{summary.failed_calls:,} failed)")


def usage_line(summary: RunSummary) -> str:
    """One line of usage: calls, tokens (prompt per item and its cached part, completion
    per item), fallbacks, and each item's own latency (mean seconds from its first call to
    its score; with calls of several items in flight this is not the run's time per item)."""
    tokens = summary.prompt_tokens + summary.completion_tokens
    n = summary.items or 1
    fallbacks = f", {summary.adapter_fallbacks} adapter fallbacks" if summary.adapter_fallbacks else ""
    in_flight = summary.calls_in_flight
    if in_flight is None:
        overlap = " (items overlap with `concurrency` > 1: not the run's time per item)"
    elif in_flight > 1:
        overlap = f" ({in_flight} calls in flight, so items overlap: not the run's time per item)"
    else:
        overlap = ""  # one call at a time: items never overlap
    return (f"{calls_phrase(summary)}, {tokens:,} tokens ({prompt_tokens_phrase(summary)}; completion tokens "
            f"{summary.completion_tokens / n:,.0f} per item){fallbacks}, {summary.seconds_per_item:.1f} s from an "
            f"item's first call to its score{overlap}")


def headline(summary: RunSummary) -> str:
    """The run's headline: its overall score with the reasons not to trust it beside it
    (`RunSummary.warnings`), e.g. ``Overall 4.77 on [1, 5] (mean of 16 items). Do not trust
    it: 171 of 192 explanations contradict their verdict; ...``."""
    overall = next((d for d in summary.dimensions if d.dimension == "overall"), None)
    low, high = summary.scale
    if overall is None or not is_defined(overall.mean_scaled):
        line = f"Overall {UNDEFINED}: no item has a score ({summary.items} items)."
    else:
        line = (f"Overall {overall.mean_scaled:.2f} on [{low:g}, {high:g}] (mean of {overall.items_scored} "
                f"item{'s' if overall.items_scored != 1 else ''}).")
    if summary.warnings:
        line += " Do not trust it: " + "; ".join(summary.warnings) + "."
    return line


def status_line(summary: RunSummary) -> str:
    """Items per status, e.g. ``4 items: scored: 1, unscored: 1, empty_output: 2, error: 0``
    (``unscored``: judged, no readable answer), with how
    many items are incomplete (some questions unanswered) when any are."""
    counts = summary.items_by_status or {"scored": summary.items}
    line = f"{summary.items} items: " + ", ".join(f"{status}: {counts.get(status, 0)}" for status in ITEM_STATUSES)
    if summary.items_incomplete:
        line += f" ({summary.items_incomplete} incomplete: some questions unanswered)"
    return line


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
    """A warning line when some questions got no answer (failed calls) or some items given
    have no stored result at all (`RunSummary.items_not_stored`), else None."""
    parts = []
    if summary.items_incomplete:
        failed = summary.questions_total - summary.questions_answered
        parts.append(f"{summary.items_incomplete} of {summary.items} items incomplete: {failed} of "
                     f"{summary.questions_total} questions have no answer (their LM call failed, or was not made: an "
                     "interrupted run or a `max_cost` stop); scores use the answered questions.")
    missing = getattr(summary, "items_not_stored", 0)
    if missing:
        parts.append(f"{missing} of the {summary.items + missing} items given have no stored result (the run stopped "
                     f"or was interrupted before them): every figure here is over the {summary.items} stored.")
    if not parts:
        return None
    return " ".join(parts) + " Rerun the same command to ask just those again."


def unused_verdicts_line(summary: RunSummary) -> str | None:
    """A warning line when rows of a replayed verdicts file answered nothing because the run has
    no such item or question (`RunSummary.verdicts_unused`), with a few of them; else None."""
    unused = getattr(summary, "verdicts_unused", None)
    if unused is None:
        return None
    what = " and ".join(part for part in (f"{unused.items} item id(s)" if unused.items else "",
                                          f"{unused.questions} question id(s)" if unused.questions else "") if part)
    return (f"{unused.rows} row(s) of the verdicts file {unused.file} were not used: they are for {what} this run "
            f"does not have (e.g. {'; '.join(unused.examples)}). Check that the file's item and question ids are "
            "this run's.")


def _fmt(value: float | None, digits: int = 3) -> str:
    return UNDEFINED if not is_defined(value) else f"{value:.{digits}f}"


def p_yes_header(summary: RunSummary) -> str:
    """The P(yes) column's heading, naming the embedded model when it produced them."""
    return "mean P(yes), embedded model" if summary.embedded_lm else "mean P(yes)"


def flagged_line(summary: RunSummary) -> str | None:
    """``Explanations contradicting their verdict: N of M``, then ``; qualified verdicts ("yes,
    but ..."): K`` when there are any (None when no answer had an explanation or a reservation)."""
    parts = []
    if summary.explanations_checked:
        parts.append(f"Explanations contradicting their verdict: {summary.explanations_flagged} of "
                     f"{summary.explanations_checked}")
    if summary.answers_qualified:
        parts.append(f"qualified verdicts (\"yes, but ...\"): {summary.answers_qualified}")
    return "; ".join(parts) or None


def judges_line(summary: RunSummary) -> str | None:
    """What a panel or cascade of judges did (`RunSummary.judges`), in one line for the console,
    summary.md and `bineval view`; None for one judge. E.g. ``Judges: a, b, c; Fleiss' kappa
    0.412 over 12 questions; split on 4 of 12 questions (q1 2x, q2 2x)``, and for a cascade
    the share escalated and its calls against asking the last judge everything."""
    stats = summary.judges
    if not stats:
        return None
    kappa = stats.get("fleiss_kappa")
    parts = [f"Judges: {', '.join(stats.get('judges') or ())}",
             (f"Fleiss' kappa {kappa:.3f} over {stats.get('kappa_questions', 0)} questions" if kappa is not None
              else "Fleiss' kappa undefined (fewer than two judges answered yes or no on any question)")]
    splits = stats.get("splits") or {}
    shown = ", ".join(f"{question} {times}x" for question, times in list(splits.items())[:5])
    parts.append(f"split on {stats.get('split_questions', 0)} of {stats.get('questions', 0)} questions"
                 + (f" ({shown})" if shown else ""))
    if stats.get("escalated") is not None:
        ratio = stats.get("calls_vs_strongest")
        parts.append(f"{stats['escalated']} questions escalated ({stats.get('escalated_share', 0):.0%}); "
                     f"{stats.get('calls', 0)} judge calls against {stats.get('strongest_calls', 0)} asking the last "
                     "judge everything" + (f" ({ratio:.2f}x)" if ratio is not None else ""))
    if any(u.get("lm_calls") or u.get("failed_calls") for u in (stats.get("usage_by_judge") or {}).values()):
        parts.append("per judge: " + ", ".join(judge_cost_phrase(judge, stats) for judge in stats.get("judges") or ()))
    if stats.get("strongest_estimate"):
        parts.append(cascade_cost_phrase(stats))
    return "; ".join(parts)


def _usd_or_unknown(cost: dict | None) -> str:
    """A judge's cost as shown: ``$0.0012``, ``0 (local)``, ``0 (replay)`` or ``price unknown`` (never 0 for
    an unknown price)."""
    if not cost or cost.get("usd") is None:
        return "price unknown"
    return cost.get("display") or format_usd(cost["usd"])


def judge_cost_phrase(judge: str, stats: dict) -> str:
    """One judge of a panel or cascade: ``a $0.0012 (12 calls, 1 failed; 1,234 tokens; 1 question with a
    failed call)``; ``price unknown`` with the token counts when its price is not known."""
    used = (stats.get("usage_by_judge") or {}).get(judge) or {}
    cost = (stats.get("cost_by_judge") or {}).get(judge)
    calls = used.get("lm_calls", 0)
    failed = used.get("failed_calls", 0)
    tokens = used.get("prompt_tokens", 0) + used.get("completion_tokens", 0)
    errors = ((stats.get("answers_by_judge") or {}).get(judge) or {}).get("error", 0)
    detail = f"{calls + failed:,} calls" + (f", {failed:,} failed" if failed else "") + f"; {tokens:,} tokens"
    if errors:
        detail += f"; {errors:,} question{'s' if errors != 1 else ''} with a failed call"
    shown = _usd_or_unknown(cost) if "cost_by_judge" in stats else "cost not priced"
    return f"{judge} {shown} ({detail})"


def cascade_cost_phrase(stats: dict) -> str:
    """A cascade's cost against asking its last judge every question, estimated from that judge's own
    measured cost per question asked: ``cost $0.0030 against an estimated $0.0100 asking b every question
    (0.30x; b's $0.00083 per call x 12 questions)``; with a price unknown, the tokens instead."""
    e = stats["strongest_estimate"]
    judge, questions = e["judge"], e.get("questions", 0)
    total = stats.get("cost_usd")
    mine = "price unknown" if total is None else format_usd(total)
    costs = (stats.get("cost_by_judge") or {}).values()
    if costs and all(c.get("status") == "local" for c in costs):  # the embedded model or a replay: no bill
        return f"cascade cost {next(iter(costs)).get('display')}: no per-token bill to compare"
    if e.get("usd") is not None:
        ratio = stats.get("cost_vs_strongest")
        return (f"cascade cost {mine} against an estimated {format_usd(e['usd'])} asking {judge} every question"
                + (f" ({ratio:.2f}x;" if ratio is not None else " (")
                + f" {judge}'s {format_usd(e['usd_per_call'])} per call x {questions} questions)")
    usage = stats.get("usage_by_judge") or {}
    tokens = sum(u.get("prompt_tokens", 0) + u.get("completion_tokens", 0) for u in usage.values())
    if e.get("tokens") is None:
        return f"cascade cost {mine}; {judge} was never asked, so asking it every question cannot be estimated"
    why = "price unknown" if e.get("asked") else "never asked"
    return (f"cascade cost {mine} ({tokens:,} tokens) against an estimated {e['tokens']:,} tokens asking {judge} "
            f"every question ({why} for {judge}: {e['tokens_per_call']:,.0f} tokens per call x {questions} questions)")


def summary_table(summary: RunSummary, wording: Callable[[str], str] | None = None) -> Table:
    """A rich table: per dimension, mean yes-rate, mean scaled score and verdict counts,
    with the run's notes about the judge (`judge_notes`) in its caption.

    `wording` rewrites each caption line and note (the CLI passes one naming settings
    by their flags, `cli.error_handling.with_flag_names`); None keeps them as they are."""
    wording = wording or str
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
    warnings = [w for w in (coverage_warning(summary), incomplete_line(summary), unused_verdicts_line(summary)) if w]
    caption = Text(wording(headline(summary)) + "\n", style="bold red" if summary.warnings else "bold")
    caption.append("\n".join(wording(line) for line in [
        status_line(summary), usage_line(summary), *([cost_line(summary.cost)] if summary.cost is not None else []),
        *warnings, *([flagged_line(summary)] if flagged_line(summary) else []),
        *([judges_line(summary)] if judges_line(summary) else [])]), style="")
    for note in summary.notes:
        caption.append("\nNote: ", style="bold yellow")
        caption.append(wording(note), style="yellow")
    table.caption = caption
    table.caption_justify = "left"
    return table


def items_table(results: list[ItemResult], *, max_rows: int = 40, embedded: bool = False) -> Table:
    """A rich table with one row per item (first `max_rows`): scaled scores per dimension;
    an item without a score (``unscored``, ``empty_output``, ``error``) shows its status
    and "—".

    When the LM returned log-probabilities, a ``P(yes)`` column (the item's mean P(yes)
    over all questions, in [0, 1]) ranks items even where every hard verdict is the
    same; `embedded` labels it as the embedded model's."""
    table = Table(title="Per-item scores (scaled)")
    table.add_column("item", no_wrap=True)
    dims = list(dict.fromkeys(d for r in results if r.score_card is not None for d in r.score_card.dimension_scores))
    for d in dims:
        table.add_column(escape(d), justify="right")
    table.add_column("overall", justify="right")
    soft = any(r.score_card is not None and is_defined(r.score_card.p_yes_overall) for r in results)
    if soft:
        table.add_column("P(yes), embedded model" if embedded else "P(yes)", justify="right")
    table.add_column("unparsed", justify="right")
    table.add_column("error", justify="right")
    for r in results[:max_rows]:
        sc = r.score_card
        status = item_status(r)
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
    """The summary as a Markdown table (`markdown_table`: dimension names escaped), LM named
    in the heading, the notes about the judge (`judge_notes`) right below it; every line of
    prose is text (`markdown_paragraph`), so an LM or model name never becomes markup."""
    low, high = summary.scale
    header = ["dimension", "mean yes-rate [0,1]", f"mean score [{low:g},{high:g}]", "items used", "yes", "no",
              "unparsed", "error", p_yes_header(summary)]
    rows = [[d.dimension, _fmt(d.mean_score), _fmt(d.mean_scaled, 2), used_cell(d), str(d.yes), str(d.no),
             str(d.unparsed), str(d.error), _fmt(d.mean_p_yes)] for d in summary.dimensions]
    text = markdown_paragraph
    title = headline(summary)
    if summary.warnings:  # the score in bold, the reasons not to trust it beside it
        score, _, reasons = title.partition(" Do not trust it: ")
        title = f"**{text(score)}** **Do not trust it:** {text(reasons)}"
    else:
        title = f"**{text(title)}**"
    lines = [f"# {text(f'BinEval run summary ({summary.items} items, LM: {summary.lm})')}", "", title, "",
             *markdown_table(header, rows, ["---", *["---:"] * (len(header) - 1)])]
    for note in summary.notes:  # beside the table, before the cost lines
        lines += ["", f"**Note:** {text(note)}"]
    cached = f" ({summary.cached_prompt_tokens} of them from the provider's cache)" if summary.cached_prompt_tokens else ""
    calls = (f"{summary.lm_calls + summary.failed_calls} ({summary.lm_calls} answered, {summary.failed_calls} failed)"
             if summary.failed_calls else str(summary.lm_calls))
    lines += ["", text(f"LM calls: {calls}; tokens: {summary.prompt_tokens} prompt{cached} + "
                   f"{summary.completion_tokens} completion ({summary.tokens_per_item:.0f} per item: "
                   f"{prompt_tokens_phrase(summary)}); "
                   f"adapter fallbacks: {summary.adapter_fallbacks}; wall time {summary.seconds_per_item:.2f} s "
                   "per item."),
              *([text(cost_line(summary.cost))] if summary.cost is not None else []),
              text(f"Questions answered: {summary.questions_answered} of {summary.questions_total}; "
                   f"incomplete items: {summary.items_incomplete}."),
              text(f"Items by status: {status_line(summary)}."), ""]
    if flagged_line(summary):
        lines[-1:] = [text(f"{flagged_line(summary)}."), ""]
    if judges_line(summary):
        lines[-1:] = [text(f"{judges_line(summary)}."), ""]
    for warning in (coverage_warning(summary), incomplete_line(summary), unused_verdicts_line(summary)):
        if warning:
            lines += [f"**Warning:** {text(warning)}", ""]
    return "\n".join(lines)

"""Verdict-mode reports rebuilt from saved results: ``verdicts.json`` and the per-item printout.

Nothing here calls an LM: the document is assembled from ``results.jsonl`` and the
run's frozen question set.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from binaryeval_dspy.errors import BinEvalError
from binaryeval_dspy.schemas.item_result import ItemResult
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.verdict_output import EvidenceEntry, ItemVerdictOutput, VerdictOutput

VERDICTS_FILE = "verdicts.json"


def evidence_entries(result: ItemResult, question_set: QuestionSet) -> list[EvidenceEntry]:
    """Every answer of one item with its question, in question-set order."""
    by_id = {v.question_id: v for v in result.verdicts}
    entries = []
    for q in question_set.questions:
        v = by_id.get(q.id)
        if v is None:
            continue
        entries.append(EvidenceEntry(
            question_id=q.id, question=q.text, dimension=q.dimension, answered_by=v.source,
            check=q.check.name if q.check is not None else None, answer=v.verdict, detail=v.explanation,
            data=v.evidence, fatal=q.fatal, error=v.error, qualified=v.qualified,
        ))
    return entries


def build_verdict_output(
    results: list[ItemResult], question_set: QuestionSet, *, lm: str, aggregation: str, pressure_test: str
) -> VerdictOutput:
    """Assemble the downstream document from stored item results (no LM call).

    Args:
        results: item results that carry a ``named_verdict``; items with status
            ``empty_output`` or ``error`` (not judged, or no label decided because a
            call failed) are only counted (``counts`` gains those keys when there are
            any). An incomplete item with a label is listed with ``complete`` False and
            its answered count.
        question_set: the frozen question set they were judged with (needs a verdict policy).
        lm: the LM name to record.
        aggregation: "verdict" (scores left out) or "both" (score cards included).
        pressure_test: the run's pressure-test mode.

    Raises:
        BinEvalError: the set has no verdict policy, or a result has no named verdict.
    """
    policy = question_set.verdict_policy
    if policy is None:
        raise BinEvalError("the question set declares no verdict_policy; there is no verdict output to build")
    counts = {name: 0 for name in policy.names} | {"unparsed": 0}
    items = []
    for r in results:
        nv = r.named_verdict
        if r.status in ("empty_output", "error"):  # nothing was judged: counted, never given a label
            counts[r.status] = counts.get(r.status, 0) + 1
            continue
        if nv is None:
            raise BinEvalError(f"item {r.item_id} has no named verdict (judged with aggregation 'score')")
        counts[nv.label if nv.label is not None else "unparsed"] += 1
        label = policy.label(nv.label) if nv.label is not None else None
        entries = evidence_entries(r, question_set)
        items.append(ItemVerdictOutput(
            item_id=r.item_id, output_hash=r.output_hash, verdict=nv.label, status=nv.status,
            complete=r.complete, questions_answered=r.answered_count, questions_total=len(r.verdicts),
            is_pass=label.is_pass if label else None, action=label.action if label else None,
            decided_by=nv.decided_by, provisional_verdict=nv.provisional_label, reason=nv.reason,
            grounds=[e for e in entries if e.answer == "no"], evidence=entries, fatal_rule=nv.fatal_rule,
            pressure_test=nv.pressure_test, notes=nv.notes, fields=r.fields,
            scores=r.score_card if aggregation == "both" else None,
        ))
    return VerdictOutput(
        lm=lm, question_set_hash=question_set.content_hash, aggregation=aggregation, pressure_test=pressure_test,
        labels=policy.labels, fatal_label=policy.fatal_label, counts=counts, items=items,
    )


def write_verdict_output(output: VerdictOutput, run_path: str | Path) -> Path:
    """Write ``verdicts.json`` into the run directory; returns its path."""
    path = Path(run_path) / VERDICTS_FILE
    path.write_text(output.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return path


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def item_verdict_lines(item: ItemVerdictOutput) -> list[str]:
    """Plain-text lines for one item: verdict and action, incompleteness, fatal rule, grounds, code checks,
    pressure test."""
    head = (f"{item.item_id}: {item.verdict} -> {item.action}" if item.verdict is not None
            else f"{item.item_id}: UNPARSED (no declared label was picked; see attempts in results.jsonl)")
    lines = [head]
    if not item.complete:
        lines.append(f"  incomplete: {item.questions_answered} of {item.questions_total} questions answered "
                     "(failed calls): the verdict was made without the rest; rerun the same command to ask them")
    if item.fatal_rule is not None:
        lines.append(f"  fatal rule: {item.fatal_rule.note}")
    if item.grounds:
        lines.append("  grounds (every no):")
        for g in item.grounds:
            tag = "code" + (", fatal" if g.fatal else "") if g.answered_by == "code" else (
                "lm" + (", fatal" if g.fatal else ""))
            lines.append(f"    - {g.question_id} [{tag}] {_short(g.question, 80)}: {_short(g.detail)}")
    else:
        lines.append("  grounds: none (no question was answered no)")
    code = [e for e in item.evidence if e.answered_by == "code"]
    if code:
        lines.append("  code checks:")
        for e in code:
            lines.append(f"    - {e.question_id} ({e.check}): {e.answer} - {_short(e.detail or e.error or '')}")
    pt = item.pressure_test
    if pt is not None:
        if pt.status == "ran":
            answers = "; ".join(f"{_short(a.question, 70)} -> {a.answer}" for a in pt.questions)
            outcome = f"refuted, moved to '{pt.moved_to}'" if pt.moved_to else (
                "refuted, no move declared" if pt.refuted else "not refuted")
            lines.append(f"  pressure test on '{pt.tested_label}': {outcome} ({answers})")
        else:
            lines.append(f"  pressure test {pt.status.replace('_', ' ')}: {pt.reason}")
    if item.reason:
        lines.append(f"  LM's reason: {_short(item.reason)}")
    for note in item.notes:
        lines.append(f"  note: {note}")
    return lines


def print_item_verdicts(output: VerdictOutput, console: Console,
                        wording: Callable[[str], str] | None = None) -> None:
    """Print every item's verdict, grounds and code-check evidence, then the label counts.

    `wording` rewrites each line and action (the CLI passes one naming settings by their
    flags, `cli.error_handling.with_flag_names`); None keeps them as they are."""
    wording = wording or str
    for item in output.items:
        for number, line in enumerate(item_verdict_lines(item)):
            line = wording(line)
            console.print(f"[bold]{escape(line)}[/bold]" if number == 0 else escape(line), highlight=False,
                          soft_wrap=True)
    console.print(label_counts_table(output, wording))


def label_counts_table(output: VerdictOutput, wording: Callable[[str], str] | None = None) -> Table:
    """A rich table: items per label with its action, the LM named in the title; `wording`
    as in `print_item_verdicts`."""
    wording = wording or str
    table = Table(title=f"Verdicts - {len(output.items)} items - LM: {output.lm}")
    table.add_column("verdict")
    table.add_column("pass", justify="center")
    table.add_column("items", justify="right")
    table.add_column("action")
    for label in output.labels:
        table.add_row(label.name, "yes" if label.is_pass else "no", str(output.counts.get(label.name, 0)),
                      label.action)
    if output.counts.get("unparsed"):
        table.add_row("unparsed", "-", str(output.counts["unparsed"]),
                      wording("rerun with a stronger `spec` or inspect attempts"))
    if output.counts.get("empty_output"):
        table.add_row("empty_output", "-", str(output.counts["empty_output"]), "nothing to judge: no LM call")
    if output.counts.get("error"):
        table.add_row("error", "-", str(output.counts["error"]),
                      "not judged or no label decided (a call failed): rerun the same command")
    return table

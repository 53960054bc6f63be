"""How a judging run ends on the command line: its tables and files, what it learned about the
endpoint, and its exit status. Shared by ``evaluate`` (live, local and Ray engines, and the
batch engine's invocations) and ``rejudge``."""

from __future__ import annotations

from collections.abc import Callable

from rich.markup import escape

from binaryeval_dspy.cli.console import console, out_console
from binaryeval_dspy.cli.error_handling import leave_after_interrupt, with_flag_names
from binaryeval_dspy.runs.run_summary import RunSummary
from binaryeval_dspy.runs.run_summary_tables import items_table, summary_table
from binaryeval_dspy.reports.verdict_report import (
    build_verdict_output,
    print_item_verdicts,
    write_verdict_output,
)
from binaryeval_dspy.runs.evaluation_outcome import EvaluationOutcome
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.item_result import ItemResult
from binaryeval_dspy.schemas.question_set import QuestionSet


#: Exit status of a run whose requests still wait for a provider batch (EX_TEMPFAIL).
EXIT_WAITING = 75


def exit_for_outcome(outcome: EvaluationOutcome, *, fail_on_errors: bool) -> None:
    """Print what went wrong in a run and exit with its status (Inspect AI's convention).

    0: every item complete (``empty_output`` items included), or some incomplete without
    ``--fail-on-errors`` (they are stored with their answers, items that could not be
    judged as status ``error`` rows; a rerun asks the rest). 1: items that could not be
    judged and were not stored, an incomplete item with ``--fail-on-errors``, a run
    stopped early, a run in which no LM call succeeded (wrong address or key), one
    whose LM answers were all unparsed (the LM ignores the reply format), or a problem
    talking to a batch provider. 75 (`EXIT_WAITING`): requests wait in a provider's
    batch (rerun later). 130: interrupted.
    """
    for item_id, message in outcome.errors[:5]:
        console.print(f"[yellow]could not judge[/yellow] {escape(item_id)} (stored with status error): "
                      f"{escape(with_flag_names(message[:400]))}", highlight=False)
    if outcome.incomplete:
        wanted = set(outcome.incomplete)
        by_id = {r.item_id: r for r in outcome.run_dir.iter_results() if r.item_id in wanted}
        cut_short = [i for i in outcome.incomplete if _only_not_asked(by_id.get(i))]
        failed = [i for i in outcome.incomplete if i not in cut_short]
        if cut_short:
            why = ("interrupted (Ctrl-C) before all their questions were answered" if outcome.interrupted
                   else "stopped before all their questions were asked")
            console.print(f"[yellow]{len(cut_short)} item(s) incomplete: {why} ({_ids(cut_short)}). Whatever they "
                          "answered is stored; rerun the same command to ask only the unanswered questions."
                          "[/yellow]", highlight=False)
        if failed:
            console.print(f"[yellow]{len(failed)} item(s) incomplete: some LM calls failed ({_ids(failed)}). Whatever "
                          "they answered is stored; rerun the same command to ask only the unanswered questions."
                          "[/yellow]", highlight=False)
    if outcome.first_error:
        console.print(f"[yellow]First failed call:[/yellow] {escape(with_flag_names(outcome.first_error[:400]))}", highlight=False)
    for problem in outcome.problems:
        console.print(f"[red]problem:[/red] {escape(with_flag_names(problem))}", highlight=False)
    no_answer = outcome.new_items > 0 and outcome.lm_answers == 0 and outcome.first_error is not None
    if no_answer and (outcome.first_error or "").startswith("EmptyReply"):
        console.print("[red]No LM call succeeded in this run:[/red] the server was reached but its replies held no "
                      "text. Fix: check that --lm-model names a chat model the server serves and its logs, then "
                      "rerun the same command (nothing is lost).", highlight=False)
    elif no_answer and (outcome.first_error or "").startswith("BatchRequestError"):
        console.print("[red]No batch request of this run was answered[/red] (the provider failed or expired them; "
                      "the first failure is above). Rerun the same command to submit them again (nothing is lost).",
                      highlight=False)
    elif no_answer:
        console.print("[red]No LM call succeeded in this run.[/red] Fix: check --lm / --lm-model, the server's "
                      "address and the API key, then rerun the same command (nothing is lost).", highlight=False)
    unreadable = outcome.lm_answers > 0 and outcome.lm_readable == 0
    if unreadable:
        console.print(f"[red]No LM answer in this run could be read as yes or no[/red] ({outcome.lm_answers} "
                      "answers, all unparsed; their raw text is in results.jsonl): the LM does not answer in the "
                      "reply format. Fix: try the other --adapter (json or chat) or a larger model, then rerun with "
                      "--restart (unparsed answers are not asked again otherwise). After fixing the server itself "
                      "(e.g. its chat template), also set DSPY_CACHEDIR to a new folder: DSPy's cache would answer "
                      "the same requests with the same replies.", highlight=False)
    if outcome.stopped_early:
        console.print(f"[red]Stopped early:[/red] {escape(with_flag_names(outcome.stopped_early))}.", highlight=False)
    if outcome.failed:
        for item_id, message in outcome.failed[:5]:
            console.print(f"[red]failed[/red] {escape(item_id)}: {escape(with_flag_names(message))}",
                          highlight=False)
        console.print(f"[yellow]{len(outcome.failed)} items failed and were not stored; rerun the same "
                      "command to retry them.[/yellow]")
    if outcome.interrupted:
        console.print("[yellow]Interrupted. Results so far are saved; rerun the same command to resume.[/yellow]")
        leave_after_interrupt(130)
    if (outcome.failed or outcome.stopped_early or no_answer or unreadable or outcome.problems
            or (fail_on_errors and outcome.incomplete)):
        raise SystemExit(1)
    if outcome.pending_items:
        raise SystemExit(EXIT_WAITING)


def _ids(item_ids: list[str]) -> str:
    """The first five ids, escaped, then ", ..." when there are more."""
    return ", ".join(escape(i) for i in item_ids[:5]) + (", ..." if len(item_ids) > 5 else "")


def _only_not_asked(result: object) -> bool:
    """Whether an incomplete item lacks answers only because its questions were not asked
    (``NotAsked: ...``: a Ctrl-C or a ``max_cost`` stop), not because a call failed."""
    unanswered = [v for v in getattr(result, "verdicts", ()) if v.verdict == "error"]
    return (result is not None and getattr(result, "status", None) != "error" and bool(unanswered)
            and all((v.error or "").startswith("NotAsked:") for v in unanswered))


def report_results(summary: RunSummary | None, results: Callable[[], list[ItemResult]], question_set: QuestionSet,
                   run_dir: RunDirectory, *, lm: str, aggregation: str, pressure_test: str,
                   print_only: set[str] | None = None) -> None:
    """Print what the aggregation asks for: score tables and/or named verdicts (written to the
    run directory as ``verdicts.json``).

    `summary` is the one the run wrote (``EvaluationOutcome.summary``; None when no item is
    stored: nothing is printed). `results` reads the run's results and is called only when
    they are needed: the per-item table (at most 40 items) and verdict mode, so a large
    run in score mode is never held in memory. `print_only` limits the per-item printout to
    those ids.
    """
    if aggregation in ("score", "both"):
        if summary is None:
            return
        if print_only is not None or summary.items <= 40:
            shown = [r for r in results() if print_only is None or r.item_id in print_only]
            if shown and len(shown) <= 40:
                out_console.print(items_table(shown, embedded=summary.embedded_lm))
        out_console.print(summary_table(summary, wording=with_flag_names))
    if aggregation in ("verdict", "both"):
        results = results()
        if not results:
            return
        output = build_verdict_output(results, question_set, lm=lm, aggregation=aggregation,
                                      pressure_test=pressure_test)
        path = write_verdict_output(output, run_dir.path)
        print_item_verdicts(output.model_copy(update={"items": [i for i in output.items
                                                                if print_only is None or i.item_id in print_only]}),
                            out_console, wording=with_flag_names)
        console.print(f"Verdicts for downstream code: {path} (schema docs/verdict_output.schema.json)")

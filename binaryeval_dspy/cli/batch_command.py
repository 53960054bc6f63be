"""Batch mode on the command line: ``bineval evaluate --batch`` and ``bineval batch status|resolve``.

``bineval evaluate ... --batch`` hands its loaded question set, items, LM and manifest
to `evaluate_in_batch`, which runs one batch invocation (`run_batch`: submit what needs
asking, poll, download, record what has come back) and reports it like a live run.
Exit status: 0 when every item is stored (incomplete items only warn, as live, unless
``--fail-on-errors``), 75 when requests still wait for the provider (rerun the same
command later), 1 when talking to the provider failed or ``--fail-on-errors`` finds
incomplete items, 130 when interrupted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from binaryeval_dspy.cli.console import console, out_console
from binaryeval_dspy.cli.error_handling import friendly_errors, leave_after_interrupt
from binaryeval_dspy.cli.run_outcome import record_endpoint_outcome, report_results
from binaryeval_dspy.engines.batch import BatchRunOutcome, run_batch
from binaryeval_dspy.engines.batch_api import batch_target
from binaryeval_dspy.engines.batch_journal import iso
from binaryeval_dspy.engines.batch_status import (
    REQUEST_STATES,
    BatchStatusReport,
    batch_status,
    resolve_submission,
)
from binaryeval_dspy.settings import RunSettings

#: Exit status of a batch run whose requests still wait for the provider (EX_TEMPFAIL).
EXIT_WAITING = 75


def evaluate_in_batch(program: Any, items: list, run_dir: Any, manifest: Any, handle: Any, *, question_set: Any,
                      aggregation: str, pressure_test: str, settings: RunSettings,
                      api_key_env: str | None = None) -> None:
    """Run one batch invocation of ``bineval evaluate`` and report it; exits with its status.

    Raises:
        SystemExit: always (0, 1, 75 or 130; see the module docstring).
        BinEvalError: as `run_batch` (shown by the command's error handler).
    """
    batch_target(handle, api_key_env=api_key_env)  # an LM without a batch API is refused before anything is shown
    n_q, n_code = len(question_set.questions), len(question_set.code_checked)
    console.print(escape(f"Batch mode: {len(items)} items x {n_q} questions ({n_code} answered by code checks) with "
                         f"{handle.name} ({handle.adapter_name} adapter) through the provider's batch API -> "
                         f"{run_dir.path}"))
    outcome = run_batch(program, items, run_dir, manifest, handle, api_key_env=api_key_env, settings=settings,
                        on_event=lambda line: console.print(f"[dim]{escape(line)}[/dim]", highlight=False))
    evaluation = outcome.evaluation
    wanted = {str(i.item_id) for i in items}
    results = [r for r in evaluation.results if r.item_id in wanted]
    if results and (evaluation.new_items or outcome.finished):
        report_results(results, question_set, run_dir, lm=handle.name, aggregation=aggregation,
                       pressure_test=pressure_test, embedded=handle.embedded, batch=True,
                       price_model=settings.price_model_for(handle))
    record_endpoint_outcome(run_dir, evaluation, handle)
    _print_outcome(outcome, run_dir.path, wanted)
    if evaluation.interrupted:
        console.print("[yellow]Interrupted. Everything submitted is recorded in the run; rerun the same command to "
                      "resume (nothing is sent twice).[/yellow]")
        leave_after_interrupt(130)
    if outcome.problems:
        raise SystemExit(1)
    if not outcome.finished:
        raise SystemExit(EXIT_WAITING)
    if settings.fail_on_errors and evaluation.incomplete:
        raise SystemExit(1)
    raise SystemExit(0)


def _print_outcome(outcome: BatchRunOutcome, out: Path, wanted: set[str]) -> None:
    evaluation = outcome.evaluation
    for number, batch_id, count in outcome.submitted:
        console.print(f"Submitted {count} request(s) as batch {escape(str(batch_id))} (submission {number}).",
                      highlight=False)
    if outcome.resubmitted:
        console.print(f"{outcome.resubmitted} of them ask again questions whose earlier batch request failed or "
                      "expired.", highlight=False)
    console.print(f"{evaluation.new_items} item(s) recorded now, {evaluation.skipped_items} already complete before; "
                  f"results: {escape(str(out / 'results.jsonl'))}", highlight=False)
    waiting = set(outcome.waiting)
    incomplete = [i for i in evaluation.incomplete if i in wanted and i not in waiting]
    if incomplete:
        console.print(f"[yellow]{len(incomplete)} item(s) incomplete: some batch requests failed or expired "
                      f"({', '.join(escape(i) for i in incomplete[:5])}{', ...' if len(incomplete) > 5 else ''}). "
                      "Their answers are stored; rerun the same command to resubmit only the failed "
                      "questions.[/yellow]", highlight=False)
        if evaluation.first_error:
            console.print(f"[yellow]First failure:[/yellow] {escape(evaluation.first_error[:400])}", highlight=False)
    for problem in outcome.problems:
        console.print(f"[red]problem:[/red] {escape(problem)}", highlight=False)
    if not outcome.finished:
        ids = ", ".join(outcome.pending_batch_ids[:3]) + (", ..." if len(outcome.pending_batch_ids) > 3 else "")
        console.print(f"[yellow]{outcome.pending_requests} request(s) of {outcome.waiting_items} item(s) still wait "
                      f"for the provider (batches {escape(ids)}). Rerun the same command later to collect them; "
                      f"`bineval batch status {escape(str(out))}` shows their progress.[/yellow]", highlight=False)


@click.group("batch")
def batch_group() -> None:
    """Follow and settle the provider batches of a `bineval evaluate --batch` run."""


@batch_group.command("status")
@click.argument("run", type=click.Path(path_type=Path))
@click.option("--no-refresh", is_flag=True,
              help="Show what the run last recorded, without asking the provider (no key needed).")
@friendly_errors
def status_command(run: Path, no_refresh: bool) -> None:
    """Show the progress of RUN's batches: ids, times, request counts per state."""
    report = batch_status(run, refresh=not no_refresh)
    print_status(report)


def print_status(report: BatchStatusReport) -> None:
    """Print a `BatchStatusReport` (a table per submission, then the totals)."""
    out_console.print(escape(f"Batch run {report.run}: provider {report.provider}, {report.endpoint}, model "
                             f"{report.model}"), highlight=False)
    table = Table(show_header=True, header_style="bold")
    for name in ("#", "batch id", "status", "created (UTC)", "expires (UTC)", "ended (UTC)", "requests",
                 "answered", "failed"):
        table.add_column(name, no_wrap=name in ("batch id", "status"))
    for sub in report.submissions:
        status = sub.status or {"prepared": "not sent", "creating": "unconfirmed"}.get(sub.phase, sub.phase)
        table.add_row(str(sub.number), sub.batch_id or "-", status, _short(sub.created_at), _short(sub.expires_at),
                      _short(sub.ended_at), str(sub.requests), str(sub.request_counts.get("completed", "-")),
                      str(sub.request_counts.get("failed", "-")))
    out_console.print(table)
    shown = [f"{report.states[name]} {name}" for name in REQUEST_STATES if report.states.get(name)]
    out_console.print("Requests: " + (", ".join(shown) if shown else "none"), highlight=False)
    out_console.print(f"Items stored: {report.items_stored} ({report.items_complete} complete)", highlight=False)
    if report.refreshed:
        out_console.print("[dim](polled the provider just now)[/dim]")
    for problem in report.problems:
        out_console.print(f"[yellow]note:[/yellow] {escape(problem)}", highlight=False)
    waiting = sum(report.states.get(n, 0) for n in ("not sent", "unconfirmed", "in progress", "to download",
                                                    "downloaded"))
    if report.states.get("unconfirmed"):
        out_console.print("[yellow]An unconfirmed submission is settled by the next `bineval evaluate --batch` run "
                          "(or by `bineval batch resolve`).[/yellow]")
    if waiting or report.states.get("failed, to resubmit"):
        out_console.print("Rerun the same `bineval evaluate --batch` command to collect results and resubmit failed "
                          "requests.", highlight=False)


def _short(unix: int | None) -> str:
    """A Unix time as ``YYYY-MM-DD HH:MM`` (UTC), "-" when unknown."""
    return iso(unix)[:16].replace("T", " ") if unix is not None else "-"


@batch_group.command("resolve")
@click.argument("run", type=click.Path(path_type=Path))
@click.option("--submission", "number", type=click.IntRange(min=1), required=True,
              help="The unconfirmed submission's number (see `bineval batch status`).")
@click.option("--batch-id", default=None, help="The provider's batch created for it: adopt it.")
@click.option("--not-created", is_flag=True, help="The provider has no batch for it: the next run creates it.")
@friendly_errors
def resolve_command(run: Path, number: int, batch_id: str | None, not_created: bool) -> None:
    """Settle by hand a submission whose creation could not be confirmed (the provider's list was unreadable)."""
    sub = resolve_submission(run, number, batch_id=batch_id, not_created=not_created)
    what = f"adopted batch {sub.batch_id}" if batch_id else "marked as not created; the next run creates it"
    console.print(escape(f"submission {number}: {what}. Rerun the `bineval evaluate --batch` command."))

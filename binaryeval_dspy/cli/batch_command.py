"""Batch mode on the command line: what ``bineval evaluate --engine batch`` did at the provider, and
``bineval batch status|resolve``.

``bineval evaluate ... --engine batch`` (or ``--batch``) runs like any other engine; the
batch engine (`binaryeval_dspy.engines.batch.BatchEngine`) answers what its batches hold and
submits the rest. Exit status: 0 when every item is stored (incomplete items only warn,
as live, unless ``--fail-on-errors``), 75 when requests still wait for the provider (rerun
the same command later), 1 when talking to the provider failed or ``--fail-on-errors``
finds incomplete items, 130 when interrupted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from binaryeval_dspy.cli.console import console, out_console
from binaryeval_dspy.cli.error_handling import friendly_errors, leave_after_interrupt
from binaryeval_dspy.engines.batch_journal import iso
from binaryeval_dspy.runs.batch_status import (
    REQUEST_STATES,
    BatchStatusReport,
    batch_status,
    resolve_submission,
)


def print_batch_outcome(engine: Any, outcome: Any, out: Path) -> None:
    """What one ``bineval evaluate --engine batch`` invocation did at the provider: batches submitted,
    requests sent again, problems, and what still waits (the exit status is `exit_for_outcome`'s:
    75 while requests wait)."""
    for number, batch_id, count in engine.submitted:
        console.print(f"Submitted {count} request(s) as batch {escape(str(batch_id))} (submission {number}).",
                      highlight=False)
    if engine.resubmitted:
        console.print(f"{engine.resubmitted} of them ask again questions whose earlier batch request failed or "
                      "expired.", highlight=False)
    if outcome.pending_items:
        ids = ", ".join(engine.pending_batch_ids[:3]) + (", ..." if len(engine.pending_batch_ids) > 3 else "")
        console.print(f"[yellow]{outcome.pending_calls} request(s) of {outcome.pending_items} item(s) still wait "
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

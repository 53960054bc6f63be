"""The progress of a batch run, and settling it by hand (``bineval batch status`` / ``resolve``).

`batch_status` counts every request of the run's submissions by state, from the journal
and the stored results (optionally polling the provider first); `resolve_submission`
settles an unconfirmed creation; `check_no_pending_batches` keeps a live run from asking
again, and paying again for, questions a batch still holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from binaryeval_dspy.engines.batch_api import BatchAPI
from binaryeval_dspy.engines.batch_journal import (
    BatchRequestRef,
    BatchStore,
    BatchSubmission,
    RequestOutcome,
    submission_outcomes,
)
from binaryeval_dspy.errors import InputError, RunStateError
from binaryeval_dspy.lm.calls import error_text
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.item_result import ItemResult

#: Request states shown by `batch_status`, in display order.
REQUEST_STATES = ("not sent", "unconfirmed", "in progress", "to download", "downloaded", "recorded",
                  "failed, to resubmit", "retried")


@dataclass
class SubmissionStatus:
    """One submission as `batch_status` reports it."""

    number: int
    batch_id: str | None
    phase: str
    status: str | None
    created_at: int | None
    expires_at: int | None
    ended_at: int | None
    requests: int
    request_counts: dict[str, int]
    states: dict[str, int]
    errors: list[str]


@dataclass
class BatchStatusReport:
    """The progress of a run's batches (`batch_status`)."""

    run: Path
    provider: str
    endpoint: str
    model: str
    submissions: list[SubmissionStatus]
    states: dict[str, int]
    items_stored: int
    items_complete: int
    refreshed: bool
    problems: list[str] = field(default_factory=list)

    @property
    def batch_ids(self) -> list[str]:
        return [s.batch_id for s in self.submissions if s.batch_id]


def _request_state(sub: BatchSubmission, ref: BatchRequestRef, outcome: RequestOutcome, latest: bool) -> str:
    if sub.phase == "prepared":
        return "not sent"
    if sub.phase == "creating":
        return "unconfirmed"
    if outcome.state == "pending":
        return "to download" if sub.ended else "in progress"
    if not latest:
        return "retried"
    if not ref.recorded:
        return "downloaded"  # its outcome is in, the next run records it
    return "failed, to resubmit" if outcome.state == "failed" else "recorded"


def batch_status(run_path: str | Path, *, refresh: bool = True, api: BatchAPI | None = None) -> BatchStatusReport:
    """The progress of the batches of the run in `run_path`.

    Args:
        run_path: the run directory.
        refresh: poll the provider for every batch that has not ended (the journal is
            updated; nothing is downloaded or recorded). Skipped, with a note, when
            another process holds the run or the provider cannot be reached.
        api: the provider's batch API (default: from the journal and the environment).

    Raises:
        InputError: `run_path` holds no batch run.
    """
    run_dir = RunDirectory(run_path)
    store = BatchStore(run_dir.path)
    state = store.load()
    if state is None:
        raise InputError("holds no batch run (no batch/state.json)", path=run_dir.path,
                         fix="give the `out_dir` of a run judged with `engine` batch.")
    problems: list[str] = []
    refreshed = False
    if refresh and any(s.phase == "submitted" and not s.ended for s in state.submissions):
        try:
            run_dir.lock()
        except RunStateError:
            problems.append("another process is working on the run; showing the state it last wrote")
        else:
            try:
                state = store.load() or state
                api = api if api is not None else BatchAPI.from_environment(state.target())
                for sub in state.submissions:
                    if sub.phase == "submitted" and not sub.ended:
                        try:
                            sub.update_from(api.retrieve(sub.batch_id))  # type: ignore[arg-type]
                        except Exception as exc:  # noqa: BLE001 - shown; the stored state is shown instead
                            problems.append(f"batch {sub.batch_id} could not be polled: {error_text(exc, 200)}")
                        else:
                            refreshed = True
                store.save(state)
            finally:
                run_dir.unlock()
    stored = {r.item_id: r for r in run_dir.read_results(repair=False)}
    latest = {}
    for sub in state.submissions:
        for ref in sub.requests:
            latest[ref.call_key] = ref.custom_id
    totals = dict.fromkeys(REQUEST_STATES, 0)
    subs = []
    for sub in state.submissions:
        outcomes = submission_outcomes(store, sub)
        states = dict.fromkeys(REQUEST_STATES, 0)
        for ref in sub.requests:
            name = _request_state(sub, ref, outcomes[ref.custom_id], latest[ref.call_key] == ref.custom_id)
            states[name] += 1
            totals[name] += 1
        status = sub.status
        subs.append(SubmissionStatus(number=sub.number, batch_id=sub.batch_id, phase=sub.phase, status=status,
                                     created_at=sub.created_at, expires_at=sub.expires_at, ended_at=sub.ended_at,
                                     requests=len(sub.requests), request_counts=dict(sub.request_counts),
                                     states=states, errors=list(sub.errors)))
    return BatchStatusReport(run=run_dir.path, provider=state.provider, endpoint=state.endpoint, model=state.model,
                             submissions=subs, states=totals, items_stored=len(stored),
                             items_complete=sum(1 for r in stored.values() if r.complete), refreshed=refreshed,
                             problems=problems)


def resolve_submission(run_path: str | Path, number: int, *, batch_id: str | None = None,
                       not_created: bool = False) -> BatchSubmission:
    """Settle by hand a submission whose creation is unconfirmed (phase ``creating``).

    Args:
        run_path: the run directory.
        number: the submission's number.
        batch_id: the provider's batch created for it (found in its dashboard): it is
            adopted and polled by the next run.
        not_created: the provider has no such batch: the next run creates it.

    Raises:
        InputError: not exactly one of `batch_id` / `not_created`, no such submission,
            or it is not unconfirmed.
        RunStateError: another process holds the run.
    """
    if (batch_id is None) == (not not_created):
        raise InputError("give exactly one of `batch_id` ID and `not_created`")
    run_dir = RunDirectory(run_path)
    store = BatchStore(run_dir.path)
    run_dir.lock()
    try:
        state = store.load()
        if state is None:
            raise InputError("holds no batch run (no batch/state.json)", path=run_dir.path)
        sub = next((s for s in state.submissions if s.number == number), None)
        if sub is None:
            raise InputError(f"the run has no submission {number} (it has {len(state.submissions)})",
                             path=store.state_path)
        if sub.phase != "creating":
            raise InputError(f"submission {number} is {sub.phase}, not unconfirmed: nothing to resolve",
                             path=store.state_path)
        if batch_id is not None:
            sub.phase, sub.batch_id = "submitted", batch_id.strip()
        else:
            sub.phase = "prepared"
        store.save(state)
        return sub
    finally:
        run_dir.unlock()


def _pending_batch_error(run_path: str | Path) -> RunStateError | None:
    """The error refusing a *live* run of this run directory now, or None (see `pending_batch_work`)."""
    run_dir = RunDirectory(run_path)
    store = BatchStore(run_dir.path)
    if not store.exists():
        return None
    report = batch_status(run_dir.path, refresh=False)
    waiting = sum(report.states[s] for s in ("not sent", "unconfirmed", "in progress", "to download", "downloaded"))
    if not waiting:
        return None
    return RunStateError(
        f"{run_dir.path} is a batch run with {waiting} request(s) still out or not yet recorded (batches "
        f"{', '.join(report.batch_ids) or 'not yet created'}); a live run would ask and pay for them again.",
        fix="rerun with `engine` batch to collect them (`bineval batch status RUN` shows their progress), or "
            "use another `out_dir`.")


def pending_batch_work(run_path: str | Path) -> str | None:
    """Why a *live* run must not continue this run directory now, or None.

    A live rerun would ask again, and pay again for, questions whose batch requests are
    still out or whose replies are downloaded but not yet recorded.
    """
    error = _pending_batch_error(run_path)
    return None if error is None else str(error)


def check_no_pending_batches(run_dir: RunDirectory) -> None:
    """Refuse a live run of a run directory whose batch requests are still out (`pending_batch_work`).

    Raises:
        RunStateError: batch requests are out or not yet recorded.
    """
    error = _pending_batch_error(run_dir.path)
    if error is not None:
        raise error

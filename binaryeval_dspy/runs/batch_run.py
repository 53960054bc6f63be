"""Batch mode: a run's judge calls sent through a provider's batch API, resumably.

`run_batch` is what ``bineval evaluate --batch`` runs. One invocation, under the run
directory's lock:

1. **reconcile** a submission whose batch creation may or may not have reached the
   provider (the process died between sending the create and writing its answer):
   the provider's batch list is searched for it (by the metadata ``bineval_intent``
   and the uploaded file's id); found, it is adopted; listed and absent, it was never
   created and is sent now; the list unreadable, the run stops and says how to settle
   it by hand (``bineval batch resolve``);
2. **send** submissions prepared earlier but not created (upload, then create);
3. **submit** a request for every question of every item that needs an answer and
   has no request outstanding: questions never asked, and questions whose last batch
   request failed or expired and was recorded as an ``error`` verdict (so a rerun
   resubmits only those);
4. **poll** each batch that has not ended, and download the output and error files
   of those that ended;
5. **record** every item whose outstanding requests all have an outcome: the replies
   are parsed by the live judge call (`binaryeval_dspy.lm.batch_calls`), failed and
   expired requests become ``error`` verdicts carrying the provider's error, and the
   item is stored with the live path's own code (`item_result`, `RunDirectory.append`):
   results.jsonl rows are those of a live run.

Nothing is submitted twice and nothing is lost when the process is killed anywhere:
the journal ``batch/state.json`` (written atomically: temp file, fsync, rename) moves
each submission through ``prepared`` (its request file ``batch/submission-NNNN.jsonl``
is on disk, nothing sent), ``creating`` (written just before the create call) and
``submitted`` (written right after the create returns, with the batch id). Downloaded
files are written atomically before they are marked downloaded. Whether a request's
outcome has been recorded is read from results.jsonl itself (answered, or an ``error``
verdict tagged ``[batch request <custom_id>]``), so a kill between storing an item and
any bookkeeping cannot record it twice or resubmit it.

The run directory holds no key: request bodies are written without client settings,
and the journal names the key's environment variable only.

This module holds the invocation (`run_batch`) and its plan; the rest lives by job:
the journal and its files in `batch_journal`, steps 1-3 (reconcile, send, submit) in
`batch_requests`, step 4 in `batch_polling`, the requests' outcomes and step 5 in
`batch_results`, and ``bineval batch status`` / ``resolve`` in `batch_status`. Their
public names are importable from here too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import dspy
from pydantic import ValidationError

from binaryeval_dspy.errors import BinEvalError
from binaryeval_dspy.lm.batch_api import BatchAPI, BatchTarget, batch_target
from binaryeval_dspy.lm.batch_calls import call_question
from binaryeval_dspy.lm.cache_padding import cache_padding_for, lm_question_count, padding_installed
from binaryeval_dspy.lm.call_pool import ItemWork
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.runs.batch_journal import (
    BATCH_DIR,
    BATCH_STATE_SCHEMA_VERSION,
    STATE_FILE,
    BatchRequestRef,
    BatchState,
    BatchStore,
    BatchSubmission,
    Phase,
    iso,
)
from binaryeval_dspy.runs.batch_polling import _Polling
from binaryeval_dspy.runs.batch_requests import (
    MAX_BYTES_PER_BATCH,
    MAX_REQUESTS_PER_BATCH,
    _check_same_settings,
    _check_same_target,
    _Submitting,
    run_settings,
)
from binaryeval_dspy.runs.batch_results import (
    RequestOutcome,
    _has_empty_output,
    _Recording,
    failure_verdict,
    request_tag,
    submission_outcomes,
)
from binaryeval_dspy.runs.batch_status import (
    REQUEST_STATES,
    BatchStatusReport,
    SubmissionStatus,
    batch_status,
    check_no_pending_batches,
    pending_batch_work,
    resolve_submission,
)
from binaryeval_dspy.runs.evaluation import EvaluationOutcome, check_stored_items
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.item_result import ItemResult, Usage
from binaryeval_dspy.schemas.question_set import BinaryQuestion
from binaryeval_dspy.schemas.run_manifest import RunManifest
from binaryeval_dspy.settings import RunSettings

logger = logging.getLogger(__name__)

EventFn = Callable[[str], None]


@dataclass
class BatchRunOutcome:
    """What one `run_batch` invocation did.

    Attributes:
        evaluation: the run's `EvaluationOutcome` (results, items stored now, usage of
            the replies recorded now, incomplete items, ...), as a live run returns it.
        submitted: (submission number, batch id or None, requests) sent now.
        resubmitted: requests sent now for questions whose earlier batch request failed.
        adopted: submissions whose unrecorded creation was found at the provider.
        pending_requests: requests still waiting for the provider after this run.
        waiting: ids of items some of whose requests wait for the provider (not yet
            stored, or stored incomplete until those come back).
        pending_batch_ids: the batches those requests are in.
        problems: what went wrong talking to the provider (a rerun retries it).
        batch_ids: every batch id of the run.
    """

    evaluation: EvaluationOutcome
    submitted: list[tuple[int, str | None, int]] = field(default_factory=list)
    resubmitted: int = 0
    adopted: list[int] = field(default_factory=list)
    pending_requests: int = 0
    waiting: list[str] = field(default_factory=list)
    pending_batch_ids: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    batch_ids: list[str] = field(default_factory=list)

    @property
    def waiting_items(self) -> int:
        """Items not yet stored in full because some of their requests wait for the provider."""
        return len(self.waiting)

    @property
    def finished(self) -> bool:
        """True when nothing waits for the provider any more."""
        return self.pending_requests == 0 and not self.waiting


@dataclass
class _Planned:
    """One item not yet complete: its work, and per planned call its question and latest request."""

    index: int
    item: dspy.Example
    stored: ItemResult | None
    work: ItemWork
    questions: list[BinaryQuestion]
    states: list[str]  # per call: new, resubmit, pending, succeeded, failed
    refs: list[tuple[BatchSubmission, BatchRequestRef] | None]


class _Run(_Submitting, _Polling, _Recording):
    """One `run_batch` invocation: its state, the plan of what each item still asks, and the steps
    (reconcile and submit: `batch_requests`; poll: `batch_polling`; record: `batch_results`)."""

    def __init__(self, program: BinEval, items: Sequence[dspy.Example], run_dir: RunDirectory,
                 manifest: RunManifest, handle: LMHandle, target: BatchTarget, api: BatchAPI,
                 on_event: EventFn | None) -> None:
        self.program, self.items, self.run_dir, self.manifest = program, items, run_dir, manifest
        self.handle, self.target, self.api = handle, target, api
        self.emit = on_event or (lambda _message: None)
        self.store = BatchStore(run_dir.path)
        self.state: BatchState = BatchState.for_target(target)
        self.by_id: dict[str, ItemResult] = {}
        self.outcomes: dict[int, dict[str, RequestOutcome]] = {}
        self.result = BatchRunOutcome(evaluation=EvaluationOutcome(results=[], new_items=0, skipped_items=0))
        self.appended = False
        self.before_submit: Callable[[list[dict]], None] | None = None

    # ------------------------------------------------------------ bookkeeping

    def save(self) -> None:
        self.store.save(self.state)

    def latest_requests(self) -> dict[tuple[str, str], tuple[BatchSubmission, BatchRequestRef]]:
        latest: dict[tuple[str, str], tuple[BatchSubmission, BatchRequestRef]] = {}
        for sub in self.state.submissions:
            for ref in sub.requests:
                latest[(ref.item_id, ref.question_id)] = (sub, ref)
        return latest

    def outcome_of(self, sub: BatchSubmission, custom_id: str) -> RequestOutcome:
        if sub.number not in self.outcomes:
            self.outcomes[sub.number] = submission_outcomes(self.store, sub)
        return self.outcomes[sub.number].get(custom_id, RequestOutcome("pending"))

    def plan(self) -> list[_Planned]:
        """Every item of this run not yet complete, with the state of each question it must ask."""
        latest = self.latest_requests()
        planned = []
        for index, item in enumerate(self.items):
            item_id = str(item.item_id)
            stored = self.by_id.get(item_id)
            if stored is not None and stored.complete:
                continue
            if stored is None and _has_empty_output(item):
                planned.append(_Planned(index, item, None, ItemWork(calls=[], finish=lambda _r: None), [], [], []))
                continue
            previous = stored.verdicts if stored is not None else ()
            work = self.program.item_work(item.input, item.output, previous)
            stored_by_q = {v.question_id: v for v in previous}
            questions, states, refs = [], [], []
            for call in work.calls:
                question = call_question(call)
                ref = latest.get((item_id, question.id))
                if ref is None:
                    state = "new"
                else:
                    sub, request = ref
                    verdict = stored_by_q.get(question.id)
                    if (verdict is not None and verdict.verdict == "error"
                            and request_tag(request.custom_id) in (verdict.error or "")):
                        state = "resubmit"  # its failure is recorded: ask again
                    else:
                        state = self.outcome_of(sub, request.custom_id).state
                questions.append(question)
                states.append(state)
                refs.append(ref)
            planned.append(_Planned(index, item, stored, work, questions, states, refs))
        return planned

    def problem(self, message: str) -> None:
        self.result.problems.append(message)
        logger.warning("%s", message)
        self.emit(message)


def run_batch(
    program: BinEval,
    items: Sequence[dspy.Example],
    run_dir: RunDirectory,
    manifest: RunManifest,
    handle: LMHandle,
    *,
    api_key_env: str | None = None,
    api: BatchAPI | None = None,
    on_event: EventFn | None = None,
    before_submit: Callable[[list[dict]], None] | None = None,
    settings: RunSettings | None = None,
) -> BatchRunOutcome:
    """One batch-mode invocation over `items` into `run_dir` (see the module docstring).

    Args:
        program: the BinEval (``--aggregation score``) whose question set matches
            ``manifest.question_set_hash``.
        items: Examples from `binaryeval_dspy.data.load_items` (unique ``item_id``).
        run_dir: the run directory; its manifest records ``mode: batch``.
        manifest: the manifest for a new run (checked against an existing one).
        handle: the run's LM; its adapter builds and parses every request, with the
            item's prompt prefix padded for the provider's cache as in a live run, decided
            at batch prices (`binaryeval_dspy.lm.cache_padding`; what it padded is in the
            outcome's ``evaluation.cache_padding``).
        api_key_env: ``--api-key-env`` of a base-URL LM (its name is recorded, never the key).
        api: the provider's batch API (default: `BatchAPI.for_handle`).
        on_event: called with one line per notable step (batch created, ended, ...).
        settings: the run's `RunSettings` (its ``cache_padding`` and ``price_model``);
            None: the defaults.
        before_submit: called with the request bodies about to be submitted (before
            anything is written or sent); raising refuses the submission (e.g. a
            ``--max-cost`` budget). Not called when there is nothing new to submit.

    Returns:
        A `BatchRunOutcome`; ``finished`` is False while requests wait for the provider
        (rerun the same command to collect them).

    Raises:
        LMConfigError: the LM has no batch API here (see `batch_target`), or the
            provider does not take an option of the requests.
        RunStateError: as `evaluate_items`; the run's batches were sent elsewhere
            (another provider, endpoint or model); or a submission's creation cannot be
            settled (the message says how to settle it).
        BinEvalError: `program` is not a BinEval.
    """
    if not isinstance(program, BinEval):
        raise BinEvalError("--batch supports the BinEval scores only (--aggregation score): the named-verdict "
                           "aggregations make further LM calls after the questions, which a batch cannot hold.",
                           fix="drop --batch, or use --aggregation score.")
    started = time.perf_counter()
    target = batch_target(handle, api_key_env=api_key_env)
    api = api if api is not None else BatchAPI.for_handle(target, handle)
    manifest.config["mode"] = "batch"
    run = _Run(program, items, run_dir, manifest, handle, target, api, on_event)
    run.before_submit = before_submit
    run_dir.lock()
    try:
        run_dir.check(manifest)
        stored = run_dir.read_results()
        check_stored_items(stored, items, manifest)
        existing = run.store.load()
        request_settings = run_settings(manifest)
        if existing is not None:
            _check_same_target(existing, target, run.store.state_path)
            _check_same_settings(existing, request_settings, run.store.state_path)
            run.state = existing
        run.state.run_settings = request_settings
        manifest = run_dir.start(manifest)
        run.manifest = manifest
        run_dir.freeze_question_set(program.question_set)
        run.by_id = {r.item_id: r for r in stored}
        evaluation = run.result.evaluation
        wanted = {str(i.item_id) for i in items}
        evaluation.skipped_items = sum(1 for r in stored if r.item_id in wanted and r.complete)
        interrupted = stopped = False
        # the requests are formatted by the live adapter, so they are padded as live calls are (at batch prices)
        how = settings or RunSettings()
        padding = cache_padding_for(handle, calls_per_item=lm_question_count(program.question_set),
                                    policy=how.cache_padding, price_model=how.price_model_for(handle), batch=True)
        try:
            with padding_installed(handle, padding):
                run.reconcile()
                run.send_prepared()
                run.submit_new(run.plan())
                run.poll()
                run.record(run.plan())
        except KeyboardInterrupt:
            interrupted = True
        except BaseException:
            stopped = True
            raise
        finally:
            _finish(run, interrupted, started, counted=not (interrupted or stopped))
            if padding is not None:
                evaluation.cache_padding = padding.stats()
    finally:
        run_dir.unlock()
    return run.result


def _finish(run: _Run, interrupted: bool, started: float, *, counted: bool) -> None:
    """Order the results file, count what waits, and close the session in the manifest."""
    evaluation = run.result.evaluation
    evaluation.interrupted = interrupted
    evaluation.seconds = time.perf_counter() - started
    position = {str(item.item_id): index for index, item in enumerate(run.items)}
    results = list(run.by_id.values())
    ordered = ([r for r in results if r.item_id not in position]
               + sorted((r for r in results if r.item_id in position), key=lambda r: position[r.item_id]))
    if run.appended and not interrupted:
        run.run_dir.rewrite_results(ordered)
    evaluation.results = ordered
    wanted = set(position)
    evaluation.incomplete = [r.item_id for r in ordered if r.item_id in wanted and not r.complete]
    evaluation.empty_outputs = [r.item_id for r in ordered if r.item_id in wanted and r.status == "empty_output"]
    pending = 0
    waiting: list[str] = []
    pending_batches: dict[str, None] = {}
    if counted:  # what still waits for the provider (items whose failures are recorded are just incomplete)
        for entry in run.plan():
            waits = [ref for state, ref in zip(entry.states, entry.refs) if state == "pending"]
            pending += len(waits)
            if waits or "new" in entry.states:
                waiting.append(str(entry.item.item_id))
            for ref in waits:
                if ref is not None:
                    pending_batches[ref[0].batch_id or f"submission {ref[0].number} (not yet created)"] = None
    run.result.pending_requests = pending
    run.result.waiting = waiting
    run.result.pending_batch_ids = list(pending_batches)
    run.result.batch_ids = [s.batch_id for s in run.state.submissions if s.batch_id]
    manifest = run.manifest
    previous = (manifest.config.get("batch") or {}).get("usage") or {}
    try:
        usage = Usage(**previous) + evaluation.usage
    except (TypeError, ValidationError):
        usage = evaluation.usage
    manifest.config["mode"] = "batch"
    manifest.config["batch"] = {
        "provider": run.state.provider, "endpoint": run.state.endpoint, "model": run.state.model,
        "batch_ids": run.result.batch_ids,
        "requests_submitted": sum(len(s.requests) for s in run.state.submissions if s.phase == "submitted"),
        "usage": usage.model_dump(),
        "note": "usage counts the replies served by the provider's batch API (batch prices apply to them)",
    }
    evaluation.manifest = run.run_dir.finish(
        manifest, items_done=evaluation.new_items,
        interrupted=interrupted or bool(evaluation.incomplete) or pending > 0 or bool(waiting))


__all__ = [
    "BATCH_DIR", "BATCH_STATE_SCHEMA_VERSION", "MAX_BYTES_PER_BATCH", "MAX_REQUESTS_PER_BATCH", "REQUEST_STATES",
    "STATE_FILE", "BatchRequestRef", "BatchRunOutcome", "BatchState", "BatchStatusReport", "BatchStore",
    "BatchSubmission", "EventFn", "Phase", "RequestOutcome", "SubmissionStatus", "batch_status",
    "check_no_pending_batches", "failure_verdict", "iso", "pending_batch_work", "request_tag", "resolve_submission",
    "run_batch", "run_settings", "submission_outcomes",
]

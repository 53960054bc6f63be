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
   are parsed by the live judge call (`binaryeval_dspy.engines.prepared_requests`), failed and
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

This module holds one batch invocation: its plan, the requests' outcomes, and the steps
(`_Run`: reconcile, send and submit; poll; record). The journal and its files are in
`batch_journal`, and ``bineval batch status`` / ``resolve`` in `batch_status`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import dspy
from pydantic import ValidationError

from binaryeval_dspy.cost.cache_padding import (
    cache_padding_for,
    lm_question_count,
    padding_installed,
)
from binaryeval_dspy.data.text_checks import item_output_is_empty
from binaryeval_dspy.engines.batch_api import (
    BatchAPI,
    BatchInfo,
    BatchTarget,
    batch_target,
    create_was_refused,
)
from binaryeval_dspy.engines.batch_journal import (
    BatchRequestRef,
    BatchState,
    BatchStore,
    BatchSubmission,
    RequestOutcome,
    iso,
    request_tag,
    submission_outcomes,
)
from binaryeval_dspy.engines.call_pool import map_items
from binaryeval_dspy.engines.item_work import ItemDone, ItemWork
from binaryeval_dspy.engines.prepared_requests import (
    ReplayLM,
    call_question,
    capture_request,
    request_body,
)
from binaryeval_dspy.errors import BinEvalError, RunStateError
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.lm.calls import error_text
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.runs.evaluation_outcome import EvaluationOutcome
from binaryeval_dspy.runs.item_rows import (
    check_stored_items,
    empty_item_result,
    failed_item_result,
    item_result,
)
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.item_result import ItemResult, Usage
from binaryeval_dspy.schemas.question_set import BinaryQuestion
from binaryeval_dspy.schemas.run_manifest import RunManifest
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.settings import RunSettings

logger = logging.getLogger(__name__)


def failure_verdict(question_id: str, sub: BatchSubmission, custom_id: str, error: str) -> QuestionVerdict:
    """The ``error`` verdict of a failed or expired batch request (with the provider's error)."""
    return QuestionVerdict(question_id=question_id, verdict="error",
                           error=f"BatchRequestError: {error} (batch {sub.batch_id}) {request_tag(custom_id)}")


def _tagged(verdict: QuestionVerdict, custom_id: str) -> QuestionVerdict:
    if verdict.verdict != "error" or request_tag(custom_id) in (verdict.error or ""):
        return verdict
    return verdict.model_copy(update={"error": f"{verdict.error or 'error'} {request_tag(custom_id)}"})


class _Recording:
    """Step 5 of a batch invocation, as methods of `_Run` (`binaryeval_dspy.engines.batch`):
    store every item whose requests all have an outcome."""

    # ------------------------------------------------------------ 5. record

    def record(self, planned: list[_Planned]) -> None:
        ready = [p for p in planned if all(s in ("succeeded", "failed") for s in p.states)]
        if not ready:
            return
        replay = ReplayLM(self.handle)
        evaluation = self.result.evaluation

        def plan(_index: int, entry: _Planned) -> ItemWork:
            if entry.stored is None and item_output_is_empty(entry.item):
                return ItemWork(calls=[], finish=lambda _r: _EMPTY)
            calls = [self.replayed(call, question, ref, replay)
                     for call, question, ref in zip(entry.work.calls, entry.questions, entry.refs)]
            return ItemWork(calls=calls, finish=entry.work.finish, one_call_each=True)

        def on_done(done: ItemDone) -> None:
            entry = ready[done.index]
            item = entry.item
            if done.result is _EMPTY:
                result = empty_item_result(self.program, item)
            elif done.error is not None:
                result = failed_item_result(self.program, item, done, entry.stored, lm=self.manifest.lm)
                evaluation.errors.append((result.item_id, error_text(done.error)))
            else:
                result = item_result(self.program, item, done, entry.stored, lm=self.manifest.lm)
            self.by_id[result.item_id] = result
            self.appended = True
            self.run_dir.append(result)
            evaluation.new_items += 1
            evaluation.usage += done.usage
            if entry.stored is not None:
                evaluation.resumed_items += 1
            evaluation.count_verdicts(result.verdicts)

        map_items(ready, plan, on_done, concurrency=1)

    def replayed(self, call: Callable[[], QuestionVerdict], question: BinaryQuestion,
                 ref: tuple[BatchSubmission, BatchRequestRef] | None, replay: ReplayLM) -> Callable[[], QuestionVerdict]:
        assert ref is not None
        sub, request = ref
        outcome = self.outcome_of(sub, request.custom_id)

        def answer() -> QuestionVerdict:
            if outcome.state != "succeeded" or outcome.body is None:
                return failure_verdict(question.id, sub, request.custom_id, outcome.error or "no result")
            return _tagged(replay.verdict(call, outcome.body), request.custom_id)

        return answer


_EMPTY = object()


MAX_REQUESTS_PER_BATCH = 50_000
MAX_BYTES_PER_BATCH = 190_000_000
#: How far back (seconds before a submission was prepared) the provider's list is searched.
_RECONCILE_SLACK = 3600
_RECONCILE_PAGES = 50
# Manifest settings the request bodies depend on (with the LM and the question set).
_REQUEST_SETTINGS = ("input_field", "output_field", "id_field", "max_tokens", "explanations", "adapter")


class _Submitting:
    """Steps 1-3 of a batch invocation, as methods of `_Run` (`binaryeval_dspy.engines.batch`)."""

    # ------------------------------------------------------------ 1. reconcile

    def reconcile(self) -> None:
        for sub in self.state.submissions:
            if sub.phase != "creating":
                continue
            self.emit(f"submission {sub.number}: its batch creation was sent but its answer never recorded; "
                      "looking for it in the provider's batch list")
            try:
                found = self.find_created(sub)
            except Exception as exc:  # the provider's list could not be read
                raise RunStateError(
                    f"submission {sub.number} of {self.run_dir.path} may have been created at the provider (the "
                    "process stopped after sending the create and before writing its answer), and the provider's "
                    f"batch list could not be read to find out ({error_text(exc, 300)}). Sending it again could "
                    "pay for its requests twice, so nothing is sent.",
                    fix=f"look for a batch with metadata bineval_intent={sub.intent_id} (input file "
                        f"{sub.input_file_id}) in the provider's dashboard, then record it for run "
                        f"{self.run_dir.path} (`resolve_submission`, `bineval batch resolve`) with `number` "
                        f"{sub.number} and `batch_id` <id>; if there is none, with `number` {sub.number} and "
                        "`not_created`; then rerun this command.") from exc
            if found is not None:
                sub.phase = "submitted"
                sub.update_from(found)
                self.result.adopted.append(sub.number)
                self.emit(f"submission {sub.number}: found batch {found.id} at the provider; adopted (not sent again)")
            else:
                sub.phase = "prepared"  # the create never arrived: send it (its uploaded file is reused)
                self.emit(f"submission {sub.number}: no such batch at the provider; it will be created now")
            self.save()

    def find_created(self, sub: BatchSubmission) -> BatchInfo | None:
        """The provider's batch created for `sub`, or None when the list shows none."""
        after = None
        oldest = sub.prepared_unix - _RECONCILE_SLACK
        for _page in range(_RECONCILE_PAGES):
            batches, more = self.api.list(after=after, limit=100)
            for info in batches:
                if info.metadata.get("bineval_intent") == sub.intent_id or (
                        sub.input_file_id and info.input_file_id == sub.input_file_id):
                    return info
            if not batches or not more or any(b.created_at is not None and b.created_at < oldest for b in batches):
                return None
            after = batches[-1].id
        raise RunStateError(f"the provider lists more than {_RECONCILE_PAGES * 100} batches since submission "
                            f"{sub.number} was prepared; searched no further")

    # ------------------------------------------------------------ 2./3. submit

    def send_prepared(self) -> None:
        for sub in self.state.submissions:
            if sub.phase == "prepared":
                self.send(sub)

    def send(self, sub: BatchSubmission) -> None:
        """Upload (unless done) and create one prepared submission; the journal is written at each step."""
        path = self.store.requests_path(sub.number)
        if sub.input_file_id is None:
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise RunStateError(f"{path}: the requests file of submission {sub.number} cannot be read "
                                    f"({exc.strerror}); nothing was sent for it.",
                                    fix="restore the file, or start the run over with `restart`.") from exc
            if hashlib.sha256(data).hexdigest() != sub.requests_sha256:
                raise RunStateError(f"{path} changed since submission {sub.number} was prepared (its SHA-256 differs "
                                    "from the journal's); nothing was sent.",
                                    fix="restore the file, or start the run over with `restart`.")
            try:
                sub.input_file_id = self.api.upload(path)
            except Exception as exc:  # noqa: BLE001 - reported; the next run uploads again
                self.problem(f"submission {sub.number}: upload failed ({error_text(exc, 300)}); the next run tries "
                             "again")
                return
            self.save()
        sub.phase = "creating"
        self.save()  # from here until the answer is written, a crash leaves the create ambiguous
        try:
            info = self.api.create(sub.input_file_id, {"bineval_intent": sub.intent_id,
                                                       "bineval_submission": str(sub.number)})
        except Exception as exc:  # noqa: BLE001
            if create_was_refused(exc):
                sub.phase = "prepared"
                self.save()
                self.problem(f"submission {sub.number}: the provider refused the batch ({error_text(exc, 300)}); "
                             "nothing was created; the next run tries again")
            else:
                self.problem(f"submission {sub.number}: the batch creation got no clear answer "
                             f"({error_text(exc, 300)}); the next run looks for it at the provider before sending "
                             "anything")
            return
        sub.phase = "submitted"
        sub.update_from(info)
        self.save()
        self.result.submitted.append((sub.number, sub.batch_id, len(sub.requests)))
        self.emit(f"submission {sub.number}: batch {sub.batch_id} created with {len(sub.requests)} request(s)"
                  + (f", expires {iso(sub.expires_at)}" if sub.expires_at else ""))

    def submit_new(self, planned: list[_Planned]) -> None:
        lines: list[tuple[dict, BatchRequestRef | None, bool]] = []
        for entry in planned:
            item_id = str(entry.item.item_id)
            for call, question, state in zip(entry.work.calls, entry.questions, entry.states):
                if state not in ("new", "resubmit"):
                    continue
                messages, options = capture_request(call, self.handle)
                body = request_body(messages, options, model=self.target.model, provider=self.target.provider,
                                    logprobs_optional=self.program.logprobs == "auto")
                lines.append((body, BatchRequestRef(custom_id="", item_id=item_id, question_id=question.id),
                              state == "resubmit"))
        if not lines:
            return
        if self.before_submit is not None:
            self.before_submit([body for body, _ref, _again in lines])
        self.result.resubmitted += sum(1 for _b, _r, again in lines if again)
        for chunk in _chunks(lines):
            number = len(self.state.submissions) + 1
            refs, encoded = [], []
            for k, (body, ref, _again) in enumerate(chunk, start=1):
                custom_id = f"b{number:04d}-{k:06d}"
                refs.append(ref.model_copy(update={"custom_id": custom_id}))
                encoded.append(json.dumps({"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions",
                                           "body": body}, ensure_ascii=False))
            data = ("\n".join(encoded) + "\n").encode("utf-8")
            path = self.store.requests_path(number)
            self.store.write(path, data)
            now = datetime.now(timezone.utc)
            sub = BatchSubmission(number=number, intent_id=uuid.uuid4().hex, phase="prepared",
                                  prepared_at=now.isoformat(timespec="seconds"), prepared_unix=int(now.timestamp()),
                                  requests_file=path.name, requests_sha256=hashlib.sha256(data).hexdigest(),
                                  requests=refs)
            self.state.submissions.append(sub)
            self.save()  # the intent is on disk before anything is sent
            self.send(sub)


def _chunks(lines: list[tuple[dict, Any, bool]]) -> list[list[tuple[dict, Any, bool]]]:
    chunks: list[list[tuple[dict, Any, bool]]] = [[]]
    size = 0
    for line in lines:
        length = len(json.dumps(line[0], ensure_ascii=False).encode("utf-8")) + 100
        if chunks[-1] and (len(chunks[-1]) >= MAX_REQUESTS_PER_BATCH or size + length > MAX_BYTES_PER_BATCH):
            chunks.append([])
            size = 0
        chunks[-1].append(line)
        size += length
    return chunks


def run_settings(manifest: RunManifest) -> dict[str, Any]:
    """What the requests of a batch run depend on (LM, question set, the settings a resume must keep)."""
    config = manifest.config
    return {"lm": manifest.lm, "question_set_hash": manifest.question_set_hash,
            **{key: config.get(key) for key in _REQUEST_SETTINGS if key in config}}


def _check_same_settings(state: BatchState, settings: dict[str, Any], path: Path) -> None:
    """Refuse to mix requests built with other settings (a run dir without results may otherwise be restarted)."""
    if not state.run_settings or not state.submissions:
        return
    changed = [k for k in sorted(set(state.run_settings) | set(settings))
               if json.dumps(state.run_settings.get(k), sort_keys=True) != json.dumps(settings.get(k), sort_keys=True)]
    if changed:
        raise RunStateError(
            f"the batches of this run ({path}) were built with other settings ({', '.join(changed)}: then "
            f"{[state.run_settings.get(k) for k in changed]}, now {[settings.get(k) for k in changed]}); their "
            "replies cannot be recorded as answers to this command's questions.",
            fix="rerun with the original options, or choose another `out_dir` (or `restart`: the old directory, "
                "batch ids included, is moved aside).")


def _check_same_target(state: BatchState, target: BatchTarget, path: Path) -> None:
    for name, old, new in (("provider", state.provider, target.provider), ("endpoint", state.endpoint, target.endpoint),
                           ("model", state.model, target.model)):
        if old != new:
            raise RunStateError(
                f"the batches of this run were sent with {name} {old!r} ({path}), this command has {new!r}: their "
                "results can only be collected from where they were sent.",
                fix="rerun with the original `spec` (and OPENAI_BASE_URL), or choose another `out_dir`.")

class _Polling:
    """Step 4 of a batch invocation, as a method of `_Run` (`binaryeval_dspy.engines.batch`)."""

    # ------------------------------------------------------------ 4. poll

    def poll(self) -> None:
        for sub in self.state.submissions:
            if sub.phase != "submitted" or (sub.ended and sub.downloaded):
                continue
            try:
                info = self.api.retrieve(sub.batch_id)  # type: ignore[arg-type]
            except Exception as exc:  # noqa: BLE001 - reported; the next run polls again
                self.problem(f"batch {sub.batch_id}: could not be polled ({error_text(exc, 300)})")
                continue
            sub.update_from(info)
            self.save()
            if not sub.ended:
                continue
            try:
                for kind, file_id in (("output", sub.output_file_id), ("errors", sub.error_file_id)):
                    if file_id:
                        self.store.write(self.store.download_path(sub.number, kind), self.api.content(file_id))
            except Exception as exc:  # noqa: BLE001 - reported; the next run downloads again
                self.problem(f"batch {sub.batch_id}: its results could not be downloaded ({error_text(exc, 300)})")
                continue
            sub.downloaded = True
            self.save()
            self.outcomes.pop(sub.number, None)
            counts = sub.request_counts
            self.emit(f"batch {sub.batch_id} {sub.status}: {counts.get('completed', 0)} request(s) answered, "
                      f"{counts.get('failed', 0)} failed; results downloaded")


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
    (reconcile, send and submit; poll; record: the mixins above)."""

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
            if stored is None and item_output_is_empty(item):
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
            at batch prices (`binaryeval_dspy.cost.cache_padding`; what it padded is in the
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
        raise BinEvalError("`engine` batch supports the BinEval scores only (`aggregation` score): the named-verdict "
                           "aggregations make further LM calls after the questions, which a batch cannot hold.",
                           fix="choose another `engine`, or use `aggregation` score.")
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
    "MAX_BYTES_PER_BATCH", "MAX_REQUESTS_PER_BATCH", "BatchRunOutcome", "EventFn", "failure_verdict", "run_batch",
    "run_settings",
]

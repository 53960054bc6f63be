"""The ``batch`` engine: a judging plan's calls sent through a provider's batch API, across invocations.

Engines only send, and a batch only sends more slowly: each invocation of the same command
hands this engine the calls the plan still needs (`CallSource`), and the engine answers
each one from the batch journal (``batch/state.json``), by the call's content key
(`LMCall.content_key`):

1. **reconcile** a submission whose batch creation may or may not have reached the
   provider (the process died between sending the create and writing its answer):
   the provider's batch list is searched for it (by the metadata ``bineval_intent``
   and the uploaded file's id); found, it is adopted; listed and absent, it was never
   created and is sent now; the list unreadable, the run stops and says how to settle
   it by hand (``bineval batch resolve``);
2. **send** submissions prepared earlier but not created (upload, then create);
3. **poll** each batch that has not ended, and download the output and error files of
   those that ended;
4. **answer** every call handed out: a request that succeeded is read by the run's
   adapter exactly as a live reply (`binaryeval_dspy.lm.calls.read_outputs`), so its
   verdict is the same record; a request that failed or expired is the call's ``error``
   (once: the next time the call is planned it gets a new request); a request still out
   is ``pending``; a call with no request goes into a new submission (its request body
   formatted by `format_call`, as live) and is ``pending`` too.

The plan runner journals every answer and stores every item whose calls are all
answered, with the live run's own code; an item with a pending call waits, its answers
journaled, for the next invocation. So a batch run's results.jsonl rows are those of a
live run, verdict mode included (its later rounds are submitted by later invocations).

Nothing is submitted twice and nothing is lost when the process is killed anywhere:
the journal (written atomically: temp file, fsync, rename) moves each submission
through ``prepared`` (its request file ``batch/submission-NNNN.jsonl`` is on disk,
nothing sent), ``creating`` (written just before the create call) and ``submitted``
(written right after the create returns, with the batch id). Downloaded files are
written atomically before they are marked downloaded. The run directory holds no key:
request bodies are written without client settings, and the journal names the key's
environment variable only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from binaryeval_dspy.cost.budget import CallRequest
from binaryeval_dspy.engines.base import CallSource
from binaryeval_dspy.engines.batch_api import BatchAPI, BatchInfo, BatchTarget, batch_target, create_was_refused
from binaryeval_dspy.engines.batch_journal import (
    BatchRequestRef,
    BatchState,
    BatchStore,
    BatchSubmission,
    RequestOutcome,
    iso,
    submission_outcomes,
)
from binaryeval_dspy.engines.senders import HttpSender, completion_cap, http_spec, reply_outputs
from binaryeval_dspy.errors import LMConfigError, RunStateError
from binaryeval_dspy.lm.calls import Answer, LMCall, error_text, format_call, read_outputs
from binaryeval_dspy.lm.usage import FAILED_REQUEST, usage_from_entries
from binaryeval_dspy.schemas.item_result import Usage
from binaryeval_dspy.schemas.run_manifest import RunManifest

if TYPE_CHECKING:
    from binaryeval_dspy.lm.factory import LMHandle
    from binaryeval_dspy.settings import RunSettings

logger = logging.getLogger(__name__)

MAX_REQUESTS_PER_BATCH = 50_000
MAX_BYTES_PER_BATCH = 190_000_000
#: How far back (seconds before a submission was prepared) the provider's list is searched.
_RECONCILE_SLACK = 3600
_RECONCILE_PAGES = 50
#: Manifest settings the request bodies depend on (with the LM and the question set).
_REQUEST_SETTINGS = ("input_field", "output_field", "id_field", "max_tokens", "explanations", "adapter")
#: Calls taken from the plan at once (a batch needs all of them before it submits).
_TAKE = 4096


def run_settings(manifest: RunManifest) -> dict[str, Any]:
    """What the requests of a batch run depend on (LM, question set, the settings a resume must keep)."""
    config = manifest.config
    return {"lm": manifest.lm, "question_set_hash": manifest.question_set_hash,
            **{key: config.get(key) for key in _REQUEST_SETTINGS if key in config}}


class BatchEngine:
    """Sends a plan's calls through the provider's batch API (see the module docstring).

    Args:
        handle: the run's LM: ``openai/<model>`` or an OpenAI-compatible base URL serving
            ``/v1/files`` and ``/v1/batches``.
        settings: the run's settings.
        api: the provider's batch API (default: `BatchAPI.for_handle`).
        api_key_env: the variable holding a base URL's key (recorded, never the key).

    Attributes:
        submitted: (submission number, batch id or None, requests) sent by this invocation.
        resubmitted: requests sent again for calls whose earlier request failed.
        adopted: submissions whose unrecorded creation was found at the provider.
        problems: what went wrong talking to the provider (a rerun retries it).
        pending_batch_ids: the batches still holding requests after this invocation.

    Raises:
        LMConfigError: the LM has no batch API here (`batch_target`).
    """

    name = "batch"
    #: A batch submits every call the plan has at once: the plan runner admits every item.
    open_items = 10**9
    #: Its answers come together: stopping after failed items saves nothing (the run goes on).
    answers_at_once = True

    def describe(self) -> str:
        """What the run's start line says this engine does: its adapter, and that the calls go
        to the provider's batch API together (none is live, so none is "in flight")."""
        where = self.target.api_base or self.target.provider
        return (f"{self.handle.adapter_name} adapter, batch engine: every call submitted to the batch API of {where}, "
                "answers collected by a rerun")

    def __init__(self, handle: LMHandle, settings: RunSettings, *, api: BatchAPI | None = None,
                 api_key_env: str | None = None) -> None:
        self.handle = handle
        self.settings = settings
        self.target: BatchTarget = batch_target(handle, api_key_env=api_key_env or handle.api_key_env)
        spec = http_spec(handle, openai=True)
        if spec is None:  # pragma: no cover - batch_target refuses these first
            raise LMConfigError(f"the batch engine cannot format requests for {handle.name}")
        spec.dialect = "json_schema"  # a batch is not negotiated request by request: OpenAI's form
        self.formatter = HttpSender(spec, lm=handle.lm, adapter=handle.adapter)
        self.api = api
        self.notes: list[str] = []
        self.events: list[str] = []
        self.submitted: list[tuple[int, str | None, int]] = []
        self.resubmitted = 0
        self.adopted: list[int] = []
        self.problems: list[str] = []
        self.pending_batch_ids: list[str] = []
        self.store: BatchStore | None = None
        self.state: BatchState | None = None
        self.run_path: Path | None = None
        self.manifest: RunManifest | None = None
        self.usage = Usage()  # of the replies handed to the run by this invocation
        self._outcomes: dict[int, dict[str, RequestOutcome]] = {}

    # ------------------------------------------------------------------ binding to a run

    def bind(self, run_dir: Any, manifest: RunManifest) -> None:
        """Attach the engine to the run directory it records into (called by the run, under its lock).

        Raises:
            RunStateError: the run's batches were sent elsewhere (another provider,
                endpoint or model) or built with other settings.
        """
        self.run_path = Path(run_dir.path)
        self.store = BatchStore(self.run_path)
        existing = self.store.load()
        settings = run_settings(manifest)
        if existing is not None:
            _check_same_target(existing, self.target, self.store.state_path)
            _check_same_settings(existing, settings, self.store.state_path)
            self.state = existing
        else:
            self.state = BatchState.for_target(self.target)
        self.state.run_settings = settings
        self.manifest = manifest
        if self.api is None:
            self.api = BatchAPI.for_handle(self.target, self.handle)

    def emit(self, message: str) -> None:
        self.events.append(message)
        logger.info("%s", message)

    def problem(self, message: str) -> None:
        self.problems.append(message)
        logger.warning("%s", message)

    def save(self) -> None:
        assert self.store is not None and self.state is not None
        self.store.save(self.state)

    # ------------------------------------------------------------------ sending

    def send(self, source: CallSource, *, budget: Any = None) -> Iterator[tuple[int, Answer]]:
        """As `binaryeval_dspy.engines.base.Engine.send`: answers from the batches, ``pending`` for the rest.

        Raises:
            RunStateError: not bound to a run directory, or an unconfirmed submission that
                cannot be settled (the message says how).
        """
        if self.state is None:
            raise RunStateError("the batch engine records into a run directory; none was given",
                                fix="run it through evaluate_items with the `engine` setting batch.")
        self.reconcile()
        self.send_prepared()
        latest = self._latest_requests()
        taken: list[tuple[int, LMCall]] = []
        new: list[tuple[int, LMCall, dict]] = []
        refused: dict[int, str] = {}
        while batch := source.take(_TAKE):  # every call the plan has now: one submission for all the new ones
            for ticket, call in batch:
                taken.append((ticket, call))
                known = latest.get(call.content_key())
                if known is not None and not self._send_again(*known):
                    continue
                prepared = format_call(call, self.handle.lm, self.handle.adapter)
                if budget is not None:  # the submission's worst case stays reserved: what this invocation commits
                    request = CallRequest(messages=prepared.messages,
                                          max_tokens=completion_cap(self.handle.lm, prepared))
                    if not budget.reserve(request, can_wait=False):
                        refused[ticket] = budget.stop_reason or "stopped by the spending limit"
                        continue
                new.append((ticket, call, self.formatter.body(prepared)))
        self._submit(new)
        self.poll()
        latest = self._latest_requests()
        try:
            for ticket, call in taken:
                if ticket in refused:
                    yield ticket, Answer(status="not_sent", reason=refused[ticket])
                    continue
                answer = self._answer_known(call, *latest[call.content_key()])
                self.usage += answer.usage
                yield ticket, answer
        finally:
            self.save()
            self._record_in_manifest()
            pending = {sub.batch_id or f"submission {sub.number} (not yet created)"
                       for sub in self.state.submissions for ref in sub.requests
                       if not ref.recorded and self._outcome(sub, ref.custom_id).state == "pending"}
            self.pending_batch_ids = sorted(pending)
            self.notes.extend(self.events)

    def _record_in_manifest(self) -> None:
        """The run's batches in its manifest: where they went, their ids, the requests sent and
        the usage of the replies recorded (over every invocation)."""
        if self.manifest is None:
            return
        previous = (self.manifest.config.get("batch") or {}).get("usage") or {}
        try:
            usage = Usage(**previous) + self.usage
        except (TypeError, ValueError):
            usage = self.usage
        self.manifest.config["batch"] = {
            "provider": self.state.provider, "endpoint": self.state.endpoint, "model": self.state.model,
            "batch_ids": [sub.batch_id for sub in self.state.submissions if sub.batch_id],
            "requests_submitted": sum(len(sub.requests) for sub in self.state.submissions
                                      if sub.phase == "submitted"),
            "usage": usage.model_dump(),
            "note": "usage counts the replies served by the provider's batch API (batch prices apply to them)",
        }
        self.usage = Usage()

    def _send_again(self, sub: BatchSubmission, ref: BatchRequestRef) -> bool:
        """A call whose request failed and whose failure is recorded gets a new request."""
        outcome = self._outcome(sub, ref.custom_id)
        again = outcome.state == "failed" and ref.recorded
        self.resubmitted += again
        return again

    def _answer_known(self, call: LMCall, sub: BatchSubmission, ref: BatchRequestRef) -> Answer:
        """The answer a call's latest request holds: ``pending`` while out, its ``error`` once
        it failed (recorded; the next invocation sends it again), else the reply read as live."""
        outcome = self._outcome(sub, ref.custom_id)
        if outcome.state == "pending":
            return Answer(status="pending", reason=f"waiting in batch {sub.batch_id or sub.number}")
        ref.recorded = True
        entry = outcome.body.get("usage") if outcome.body is not None else None
        entry = dict(entry) if isinstance(entry, dict) else {}
        if outcome.state == "failed" or outcome.body is None:
            # a request the provider ran and answered with an error is one it received: a failed call
            usage = usage_from_entries({"batch": [{**entry, FAILED_REQUEST: 1}]}) if outcome.executed else Usage()
            return Answer(status="error", reason=f"BatchRequestError: {outcome.error or 'no result'} "
                                                 f"(batch {sub.batch_id}) [batch request {ref.custom_id}]",
                          usage=usage)
        prepared = format_call(call, self.handle.lm, self.handle.adapter)
        usage = usage_from_entries({"batch": [entry]})
        return read_outputs(call, prepared, reply_outputs(outcome.body), self.handle.lm, self.handle.adapter, usage)

    def _outcome(self, sub: BatchSubmission, custom_id: str) -> RequestOutcome:
        if sub.number not in self._outcomes:
            self._outcomes[sub.number] = submission_outcomes(self.store, sub)
        return self._outcomes[sub.number].get(custom_id, RequestOutcome("pending"))

    def _latest_requests(self) -> dict[str, tuple[BatchSubmission, BatchRequestRef]]:
        latest: dict[str, tuple[BatchSubmission, BatchRequestRef]] = {}
        for sub in self.state.submissions:
            for ref in sub.requests:
                latest[ref.call_key] = (sub, ref)
        return latest

    # ------------------------------------------------------------------ 1. reconcile

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
                    f"submission {sub.number} of {self.run_path} may have been created at the provider (the "
                    "process stopped after sending the create and before writing its answer), and the provider's "
                    f"batch list could not be read to find out ({error_text(exc, 300)}). Sending it again could "
                    "pay for its requests twice, so nothing is sent.",
                    fix=f"look for a batch with metadata bineval_intent={sub.intent_id} (input file "
                        f"{sub.input_file_id}) in the provider's dashboard, then record it for run "
                        f"{self.run_path} (`resolve_submission`, `bineval batch resolve`) with `number` "
                        f"{sub.number} and `batch_id` <id>; if there is none, with `number` {sub.number} and "
                        "`not_created`; then rerun this command.") from exc
            if found is not None:
                sub.phase = "submitted"
                sub.update_from(found)
                self.adopted.append(sub.number)
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

    # ------------------------------------------------------------------ 2. send

    def send_prepared(self) -> None:
        for sub in self.state.submissions:
            if sub.phase == "prepared":
                self.send_one(sub)

    def send_one(self, sub: BatchSubmission) -> None:
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
        self.submitted.append((sub.number, sub.batch_id, len(sub.requests)))
        self.emit(f"submission {sub.number}: batch {sub.batch_id} created with {len(sub.requests)} request(s)"
                  + (f", expires {iso(sub.expires_at)}" if sub.expires_at else ""))

    def _submit(self, new: list[tuple[int, LMCall, dict]]) -> None:
        """Write the new calls' requests as submissions (the intent on disk first), then send them."""
        for chunk in _chunks(new):
            number = len(self.state.submissions) + 1
            refs, encoded = [], []
            for k, (_ticket, call, body) in enumerate(chunk, start=1):
                custom_id = f"b{number:04d}-{k:06d}"
                refs.append(BatchRequestRef(custom_id=custom_id, call_key=call.content_key(), question_id=call.key))
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
            self.send_one(sub)

    # ------------------------------------------------------------------ 3. poll

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
            self._outcomes.pop(sub.number, None)
            counts = sub.request_counts
            self.emit(f"batch {sub.batch_id} {sub.status}: {counts.get('completed', 0)} request(s) answered, "
                      f"{counts.get('failed', 0)} failed; results downloaded")


def _chunks(lines: list[tuple[Any, Any, dict]]) -> list[list[tuple[Any, Any, dict]]]:
    chunks: list[list[Any]] = [[]]
    size = 0
    for line in lines:
        length = len(json.dumps(line[2], ensure_ascii=False).encode("utf-8")) + 100
        if chunks[-1] and (len(chunks[-1]) >= MAX_REQUESTS_PER_BATCH or size + length > MAX_BYTES_PER_BATCH):
            chunks.append([])
            size = 0
        chunks[-1].append(line)
        size += length
    return [chunk for chunk in chunks if chunk]


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


__all__ = ["MAX_BYTES_PER_BATCH", "MAX_REQUESTS_PER_BATCH", "BatchEngine", "run_settings"]

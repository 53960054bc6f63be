"""The requests of a batch run: built, written to request files, and sent to the provider.

Steps 1-3 of a batch invocation (`_Submitting`, a part of `_Run` in
`binaryeval_dspy.runs.batch_run`): reconcile a submission whose creation is unconfirmed,
send prepared submissions (upload, then create), and build a request for every question
still to ask, split into submissions within the provider's limits (`_chunks`). Also the
run settings the request bodies depend on (`run_settings`), which a resume must keep.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from binaryeval_dspy.errors import RunStateError
from binaryeval_dspy.lm.batch_api import BatchInfo, BatchTarget, create_was_refused
from binaryeval_dspy.lm.batch_calls import capture_request, request_body
from binaryeval_dspy.programs.bineval import error_text
from binaryeval_dspy.runs.batch_journal import BatchRequestRef, BatchState, BatchSubmission, iso
from binaryeval_dspy.schemas.run_manifest import RunManifest

if TYPE_CHECKING:
    from binaryeval_dspy.runs.batch_run import _Planned

#: OpenAI's limits per batch: 50,000 requests and a 200 MB input file (a margin is kept).
MAX_REQUESTS_PER_BATCH = 50_000
MAX_BYTES_PER_BATCH = 190_000_000
#: How far back (seconds before a submission was prepared) the provider's list is searched.
_RECONCILE_SLACK = 3600
_RECONCILE_PAGES = 50
# Manifest settings the request bodies depend on (with the LM and the question set).
_REQUEST_SETTINGS = ("input_field", "output_field", "id_field", "max_tokens", "explanations", "adapter")


class _Submitting:
    """Steps 1-3 of a batch invocation, as methods of `_Run` (`binaryeval_dspy.runs.batch_run`)."""

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
                        f"{sub.input_file_id}) in the provider's dashboard, then run `bineval batch resolve "
                        f"{self.run_dir.path} --submission {sub.number} --batch-id <id>`; if there is none, "
                        f"`bineval batch resolve {self.run_dir.path} --submission {sub.number} --not-created`; "
                        "then rerun this command.") from exc
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
                                    fix="restore the file, or start the run over with --restart.") from exc
            if hashlib.sha256(data).hexdigest() != sub.requests_sha256:
                raise RunStateError(f"{path} changed since submission {sub.number} was prepared (its SHA-256 differs "
                                    "from the journal's); nothing was sent.",
                                    fix="restore the file, or start the run over with --restart.")
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
            fix="rerun with the original options, or choose another --out (or --restart: the old directory, "
                "batch ids included, is moved aside).")


def _check_same_target(state: BatchState, target: BatchTarget, path: Path) -> None:
    for name, old, new in (("provider", state.provider, target.provider), ("endpoint", state.endpoint, target.endpoint),
                           ("model", state.model, target.model)):
        if old != new:
            raise RunStateError(
                f"the batches of this run were sent with {name} {old!r} ({path}), this command has {new!r}: their "
                "results can only be collected from where they were sent.",
                fix="rerun with the original --lm (and OPENAI_BASE_URL), or choose another --out.")

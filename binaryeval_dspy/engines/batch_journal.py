"""The journal of a batch run: ``batch/state.json`` and the files beside it in ``<run>/batch/``.

`BatchState` records where the run's batches go (provider, endpoint, model, the key's
environment variable, never the key) and every `BatchSubmission` with its phase
(``prepared``, ``creating``, ``submitted``), its requests (`BatchRequestRef`) and the
provider's last answer about it. `BatchStore` reads and writes the journal, the request
files and the downloaded result files, every write atomic and durable.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from binaryeval_dspy.engines.batch_api import BatchInfo, BatchTarget
from binaryeval_dspy.errors import InputError, RunStateError
from binaryeval_dspy.schemas.run_manifest import utc_now
from binaryeval_dspy.schemas.versioned import SchemaVersion

logger = logging.getLogger(__name__)

BATCH_DIR = "batch"
STATE_FILE = "state.json"
BATCH_STATE_SCHEMA_VERSION = 2
#: what to do with a batch journal from an older version
_OLDER_FIX = "collect its batches with the binaryeval-dspy version that submitted them, then rerun"

Phase = Literal["prepared", "creating", "submitted"]


class BatchRequestRef(BaseModel):
    """One request line of a submission.

    Attributes:
        custom_id: the line's id (``b<submission>-<line>``).
        call_key: the call it asks (`LMCall.content_key`): the same call planned by a later
            invocation finds its request by this key, whatever item asked it.
        question_id: the call's name in its item (a question id, ``pick-1``), for display.
        recorded: its outcome was handed to the run (an answer journaled, or a failure
            recorded as an ``error`` verdict); a failed request recorded is sent again
            when its call is planned again.
    """

    model_config = ConfigDict(extra="forbid")

    custom_id: str
    call_key: str
    question_id: str
    recorded: bool = False


class BatchSubmission(BaseModel):
    """One batch submission of the run (one requests file, one provider batch).

    Attributes:
        number: 1, 2, ... in order of preparation.
        intent_id: random id sent as the batch's metadata ``bineval_intent``, to find
            the batch again if its id was never written.
        phase: ``prepared`` (file written, create not sent), ``creating`` (create sent,
            answer not yet written) or ``submitted`` (batch id known).
        prepared_at / prepared_unix: when it was prepared (ISO UTC / Unix seconds).
        requests_file: the requests JSONL (in ``batch/``), as uploaded.
        requests_sha256: SHA-256 of that file (checked before an upload).
        requests: the request-to-(item, question) map.
        input_file_id: the uploaded file's id, once uploaded.
        batch_id: the provider's batch id, once created.
        status: the provider's status at the last poll.
        created_at / expires_at / ended_at: the provider's Unix times.
        request_counts: the provider's ``{"total", "completed", "failed"}``.
        errors: batch-level errors (a refused input file).
        output_file_id / error_file_id: the result files, once the batch ended.
        downloaded: True once both result files are stored in ``batch/``.
        polled_at: ISO UTC time of the last poll.
    """

    model_config = ConfigDict(extra="forbid")

    number: int
    intent_id: str
    phase: Phase
    prepared_at: str
    prepared_unix: int
    requests_file: str
    requests_sha256: str
    requests: list[BatchRequestRef]
    input_file_id: str | None = None
    batch_id: str | None = None
    status: str | None = None
    created_at: int | None = None
    expires_at: int | None = None
    ended_at: int | None = None
    request_counts: dict[str, int] = Field(default_factory=dict)
    errors: list[str] = Field(default_factory=list)
    output_file_id: str | None = None
    error_file_id: str | None = None
    downloaded: bool = False
    polled_at: str | None = None

    @property
    def ended(self) -> bool:
        """True once the provider reported a final status (completed, failed, expired, cancelled)."""
        return self.status in ("completed", "failed", "expired", "cancelled")

    def update_from(self, info: BatchInfo) -> None:
        """Take the provider's view of the batch (`BatchInfo`)."""
        self.batch_id = info.id
        self.status = info.status
        self.created_at = info.created_at if info.created_at is not None else self.created_at
        self.expires_at = info.expires_at if info.expires_at is not None else self.expires_at
        self.ended_at = info.ended_at if info.ended_at is not None else self.ended_at
        self.request_counts = dict(info.request_counts) or self.request_counts
        self.errors = list(info.errors)
        self.output_file_id = info.output_file_id or self.output_file_id
        self.error_file_id = info.error_file_id or self.error_file_id
        self.input_file_id = self.input_file_id or info.input_file_id
        self.polled_at = utc_now()


class BatchState(BaseModel):
    """``batch/state.json``: where the run's batches go and every submission."""

    model_config = ConfigDict(extra="forbid")

    schema_version: SchemaVersion(BATCH_STATE_SCHEMA_VERSION, "batch journal",
                                  older_fix=_OLDER_FIX) = BATCH_STATE_SCHEMA_VERSION
    provider: str
    endpoint: str
    api_base: str | None = None
    model: str
    api_key_env: str | None = None
    run_settings: dict[str, Any] = Field(default_factory=dict)
    submissions: list[BatchSubmission] = Field(default_factory=list)

    @classmethod
    def for_target(cls, target: BatchTarget) -> BatchState:
        return cls(provider=target.provider, endpoint=target.endpoint, api_base=_safe_api_base(target.api_base),
                   model=target.model, api_key_env=target.api_key_env)

    def target(self) -> BatchTarget:
        """The `BatchTarget` recorded (for ``bineval batch status``)."""
        return BatchTarget(provider=self.provider, api_base=self.api_base, endpoint=self.endpoint, model=self.model,
                           api_key_env=self.api_key_env)


def _safe_api_base(url: str | None) -> str | None:
    """The base URL as written to disk: None when it carries credentials or a query (which may hold a key)."""
    if not url:
        return None
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.username or parts.password or parts.query:
        return None
    return url


class BatchStore:
    """The files of batch mode in a run directory (``<run>/batch/``)."""

    def __init__(self, run_path: Path) -> None:
        self.path = Path(run_path) / BATCH_DIR
        self.state_path = self.path / STATE_FILE

    def exists(self) -> bool:
        return self.state_path.is_file()

    def load(self) -> BatchState | None:
        """The journal, or None when the run has none.

        Raises:
            InputError: the journal is not valid (named; nothing is changed).
        """
        if not self.state_path.is_file():
            return None
        try:
            return BatchState.model_validate_json(self.state_path.read_bytes())
        except ValidationError as exc:
            first = exc.errors()[0]
            raise InputError(f"not a valid batch journal ({first['msg']})", path=self.state_path,
                             fix="restore it from a backup; without it the run's submitted batches cannot be "
                                 "collected (their ids are in it).") from exc

    def save(self, state: BatchState) -> None:
        """Write the journal atomically and durably (temp file, fsync, rename, fsync of the folder)."""
        _write_atomic(self.state_path, (state.model_dump_json(indent=2) + "\n").encode("utf-8"))

    def requests_path(self, number: int) -> Path:
        return self.path / f"submission-{number:04d}.jsonl"

    def download_path(self, number: int, kind: str) -> Path:
        return self.path / f"submission-{number:04d}.{kind}.jsonl"

    def write(self, path: Path, data: bytes) -> None:
        _write_atomic(path, data)


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise RunStateError(f"cannot write {path}: {exc.strerror}. Nothing was sent for it.",
                            fix="remove the cause (disk space, permissions) and rerun the same command.") from exc


def iso(unix: int | None) -> str:
    """A provider's Unix time as ISO 8601 UTC ("-" when unknown)."""
    if unix is None:
        return "-"
    return datetime.fromtimestamp(unix, tz=timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class RequestOutcome:
    """What became of one batch request: ``pending``, ``succeeded`` (with the reply body)
    or ``failed`` (with the provider's error).

    ``executed``: a failed request that the provider ran and answered with an error (an
    HTTP error response, a timeout): a request the endpoint received, counted as a failed
    call. False for one it never ran (the batch expired or was cancelled before it, or
    ended with no result for it).
    """

    state: Literal["pending", "succeeded", "failed"]
    body: dict | None = None
    error: str | None = None
    executed: bool = False


#: Error codes of batch requests the provider never ran (OpenAI's names).
NOT_RUN_CODES = frozenset({"batch_expired", "batch_cancelled"})


def _outcome_from_line(entry: dict) -> RequestOutcome:
    error = entry.get("error")
    response = entry.get("response") or {}
    if error:
        code = error.get("code") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else str(error)
        return RequestOutcome("failed", error=f"{code or 'error'}: {message or ''}".strip(),
                              executed=code not in NOT_RUN_CODES)
    status = response.get("status_code")
    body = response.get("body")
    if status == 200 and isinstance(body, dict):
        return RequestOutcome("succeeded", body=body)
    detail = body.get("error") if isinstance(body, dict) else None
    message = (detail.get("message") if isinstance(detail, dict) else None) or json.dumps(body)[:500]
    code = detail.get("code") or detail.get("type") if isinstance(detail, dict) else None
    return RequestOutcome("failed", error=f"HTTP {status}{f' {code}' if code else ''}: {message}",
                          executed=status is not None, body=body if isinstance(body, dict) else None)


def submission_outcomes(store: BatchStore, sub: BatchSubmission) -> dict[str, RequestOutcome]:
    """custom_id -> `RequestOutcome` for every request of `sub` (``pending`` until downloaded)."""
    if sub.phase != "submitted" or not (sub.ended and sub.downloaded):
        return {r.custom_id: RequestOutcome("pending") for r in sub.requests}
    found: dict[str, RequestOutcome] = {}
    for kind in ("output", "errors"):
        path = store.download_path(sub.number, kind)
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                logger.warning("%s:%d: not JSON; skipped", path, number)
                continue
            custom_id = str(entry.get("custom_id"))
            outcome = _outcome_from_line(entry)
            if custom_id not in found or found[custom_id].state != "succeeded":
                found[custom_id] = outcome
    why = f"the batch {sub.batch_id} ended with status {sub.status}"
    if sub.errors:
        why += " (" + "; ".join(sub.errors)[:500] + ")"
    missing = RequestOutcome("failed", error=f"no result for this request: {why}")
    return {r.custom_id: found.get(r.custom_id, missing) for r in sub.requests}

"""A fake of OpenAI's Batch API (files + batches) on 127.0.0.1, for tests only.

Not product code and never a model. `FakeBatchEndpoint` is a `FakeEndpoint` (so it also
answers live ``POST /v1/chat/completions``) that adds the endpoints a batch run uses,
in the shapes OpenAI documents:

* ``POST /v1/files`` (multipart upload of the requests JSONL, ``purpose=batch``);
* ``GET /v1/files/{id}`` and ``GET /v1/files/{id}/content`` (input, output and error files);
* ``POST /v1/batches`` (create from an uploaded file, with ``metadata``);
* ``GET /v1/batches/{id}`` (retrieve: the batch advances as scripted);
* ``GET /v1/batches?limit=&after=`` (list, newest first).

Every request of a batch is answered by the same machinery as a live request (the
endpoint's ``reply`` and ``fault`` callables, `FakeEndpoint._answer`), so a scripted
reply gives the same completion body live and in a batch. How each batch ends is
scripted with a `BatchScript` (``scripts``: one per created batch, in order; the
default completes on the first retrieve):

* ``polls``: retrieves answered ``in_progress`` before the batch ends;
* ``outcome``: ``completed`` (every request answered; a request whose ``fault`` /
  ``reply`` is an `HttpFault` goes to the error file with its status and error body),
  ``expired`` (only the first ``finished_before_end`` requests answered, the rest in the
  error file with code ``batch_expired``), ``cancelled`` (likewise, ``batch_cancelled``),
  or ``failed`` (the input was refused: ``errors`` set, no output or error file);
* ``fail``: ``(custom_id, body) -> (code, message) | None``: requests that fail inside
  the batch (error file, ``response`` with status 500 and an error body).

Observations: ``create_calls`` (POST /v1/batches received), ``uploads``, ``batches``
(id -> batch object), ``files`` (id -> bytes), ``retrieve_calls``, ``content_calls``,
``list_calls``, ``batch_requests(batch_id)`` (the request lines of a batch).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fake_endpoint import (
    FakeEndpoint,
    TimeoutFault,
    _Handler,
    fake_endpoint_running,
    serve_in_thread,
    serve_until_killed,
)

FailFn = Callable[[str, dict], "tuple[str, str] | None"]


@dataclass
class BatchScript:
    """How the fake runs one batch (see the module docstring)."""

    polls: int = 0
    outcome: str = "completed"
    finished_before_end: int = 0
    fail: FailFn | None = None
    errors: list[dict] = field(default_factory=lambda: [
        {"code": "invalid_request", "message": "scripted: the input file was refused", "line": None}])

    def __post_init__(self) -> None:
        if self.outcome not in ("completed", "expired", "cancelled", "failed"):
            raise ValueError(f"unknown batch outcome {self.outcome!r}")


def fail_questions(*questions: str, code: str = "server_error",
                   message: str = "scripted failure inside the batch") -> FailFn:
    """A `BatchScript.fail` for the requests whose ``question`` field is one of `questions`."""
    from tests.fake_endpoint import request_field

    wanted = set(questions)
    return lambda _cid, body: (code, message) if request_field(body, "question") in wanted else None


class FakeBatchEndpoint(FakeEndpoint):
    """`FakeEndpoint` plus OpenAI's files and batches endpoints (see the module docstring).

    Args:
        scripts: `BatchScript` per created batch, in creation order; batches beyond the
            list use `default_script`.
        **kwargs: as `FakeEndpoint`.
    """

    def __init__(self, scripts: list[BatchScript] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scripts: list[BatchScript] = list(scripts or [])
        self.default_script = BatchScript()
        self.files: dict[str, dict] = {}
        self.batches: dict[str, dict] = {}
        self.create_calls = 0
        self.uploads = 0
        self.retrieve_calls = 0
        self.content_calls = 0
        self.list_calls = 0
        self._batch_lock = threading.RLock()
        self._scripts_used = 0
        self._polls: dict[str, int] = {}
        self._script_of: dict[str, BatchScript] = {}
        self._clock = 1_700_000_000  # created_at values increase by one per batch (list order is stable)

    # ----- lifecycle (the handler knows the batch routes)

    def start(self) -> FakeBatchEndpoint:
        endpoint = self

        class Handler(_BatchHandler):
            owner = endpoint

        self._server, self._thread = serve_in_thread(Handler, "fake-batch-endpoint")
        return self

    # ----- observations

    def batch_requests(self, batch_id: str) -> list[dict]:
        """The request lines (custom_id, method, url, body) of a batch, in file order."""
        batch = self.batches[batch_id]
        return [json.loads(line) for line in self.files[batch["input_file_id"]]["content"].splitlines() if line.strip()]

    def submitted_custom_ids(self) -> list[str]:
        """Every custom_id of every created batch, in creation order (duplicates kept)."""
        return [line["custom_id"] for batch_id in self.batches for line in self.batch_requests(batch_id)]

    # ----- files

    def _new_file(self, content: bytes, purpose: str, filename: str) -> dict:
        file_id = f"file-{uuid.uuid4().hex[:20]}"
        record = {"id": file_id, "object": "file", "bytes": len(content), "created_at": int(time.time()),
                  "filename": filename, "purpose": purpose, "status": "processed", "content": content}
        with self._batch_lock:
            self.files[file_id] = record
        return record

    @staticmethod
    def file_object(record: dict) -> dict:
        return {k: v for k, v in record.items() if k != "content"}

    # ----- batches

    def create_batch(self, payload: dict) -> tuple[int, dict]:
        with self._batch_lock:
            self.create_calls += 1
            file_record = self.files.get(payload.get("input_file_id", ""))
            if file_record is None:
                return 400, {"error": {"message": f"no file {payload.get('input_file_id')!r}",
                                       "type": "invalid_request_error"}}
            script = self.scripts[self._scripts_used] if self._scripts_used < len(self.scripts) else self.default_script
            self._scripts_used += 1
            self._clock += 1
            batch_id = f"batch_{uuid.uuid4().hex[:20]}"
            lines = [line for line in file_record["content"].splitlines() if line.strip()]
            batch = {
                "id": batch_id, "object": "batch", "endpoint": payload.get("endpoint"), "errors": None,
                "input_file_id": file_record["id"], "completion_window": payload.get("completion_window", "24h"),
                "status": "validating", "output_file_id": None, "error_file_id": None,
                "created_at": self._clock, "in_progress_at": None, "expires_at": self._clock + 86_400,
                "finalizing_at": None, "completed_at": None, "failed_at": None, "expired_at": None,
                "cancelling_at": None, "cancelled_at": None,
                "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                "metadata": payload.get("metadata"),
            }
            self.batches[batch_id] = batch
            self._polls[batch_id] = 0
            self._script_of[batch_id] = script
            return 200, dict(batch)

    def retrieve_batch(self, batch_id: str) -> tuple[int, dict]:
        with self._batch_lock:
            self.retrieve_calls += 1
            batch = self.batches.get(batch_id)
            if batch is None:
                return 404, {"error": {"message": f"no batch {batch_id!r}", "type": "invalid_request_error"}}
            if batch["status"] in ("completed", "expired", "cancelled", "failed", "finalizing"):
                return 200, dict(batch)
            script = self._script_of[batch_id]
            seen = self._polls[batch_id]
            self._polls[batch_id] = seen + 1
            if seen < script.polls:
                batch["status"], batch["in_progress_at"] = "in_progress", batch["created_at"] + 1
                return 200, dict(batch)
            batch["status"] = "finalizing"  # a concurrent retrieve sees it finalizing, not finished twice
        self._finish_batch(batch_id, script)  # outside the lock: answers call the reply callables
        with self._batch_lock:
            return 200, dict(self.batches[batch_id])

    def _finish_batch(self, batch_id: str, script: BatchScript) -> None:
        batch = self.batches[batch_id]
        ended = batch["created_at"] + 3600
        if script.outcome == "failed":
            with self._batch_lock:
                batch.update(status="failed", failed_at=ended,
                             errors={"object": "list", "data": [dict(e) for e in script.errors]})
            return
        outputs: list[dict] = []
        errors: list[dict] = []
        for position, line in enumerate(self.batch_requests(batch_id)):
            custom_id, body = line["custom_id"], line.get("body") or {}
            request_id = f"batch_req_{uuid.uuid4().hex[:16]}"
            if script.outcome != "completed" and position >= script.finished_before_end:
                code = "batch_expired" if script.outcome == "expired" else "batch_cancelled"
                message = ("This request could not be executed before the completion window expired."
                           if script.outcome == "expired" else "This request was cancelled with its batch.")
                errors.append({"id": request_id, "custom_id": custom_id, "response": None,
                               "error": {"code": code, "message": message}})
                continue
            failure = script.fail(custom_id, body) if script.fail is not None else None
            if failure is not None:
                code, message = failure
                errors.append({"id": request_id, "custom_id": custom_id, "error": None, "response": {
                    "status_code": 500, "request_id": request_id,
                    "body": {"error": {"message": message, "type": "server_error", "code": code}}}})
                continue
            index, generation = self._admit(body)
            answer = self._answer(body, index)
            if isinstance(answer, TimeoutFault):
                self._finish("timeout", generation)
                errors.append({"id": request_id, "custom_id": custom_id, "response": None,
                               "error": {"code": "timeout", "message": "scripted: the request timed out"}})
                continue
            status, _headers, payload = answer
            self._finish(str(status), generation, payload.get("usage") if status == 200 else None)
            entry = {"id": request_id, "custom_id": custom_id, "error": None,
                     "response": {"status_code": status, "request_id": request_id, "body": payload}}
            (outputs if status == 200 else errors).append(entry)
        with self._batch_lock:
            if outputs:
                batch["output_file_id"] = self._new_file(_jsonl(outputs), "batch_output", "batch_output.jsonl")["id"]
            if errors:
                batch["error_file_id"] = self._new_file(_jsonl(errors), "batch_output", "batch_errors.jsonl")["id"]
            status = {"completed": "completed", "expired": "expired", "cancelled": "cancelled"}[script.outcome]
            batch.update(status=status, in_progress_at=batch["in_progress_at"] or batch["created_at"] + 1,
                         finalizing_at=ended - 1,
                         request_counts={"total": batch["request_counts"]["total"], "completed": len(outputs),
                                         "failed": len(errors)})
            batch[{"completed": "completed_at", "expired": "expired_at", "cancelled": "cancelled_at"}[status]] = ended

    def list_batches(self, limit: int, after: str | None) -> dict:
        with self._batch_lock:
            self.list_calls += 1
            ordered = sorted(self.batches.values(), key=lambda b: b["created_at"], reverse=True)
            if after is not None:
                ids = [b["id"] for b in ordered]
                ordered = ordered[ids.index(after) + 1:] if after in ids else []
            page = [dict(b) for b in ordered[:limit]]
            return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
                    "last_id": page[-1]["id"] if page else None, "has_more": len(ordered) > limit}


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8")


def _multipart(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """Form fields of a multipart/form-data body: name -> (filename, bytes)."""
    message = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw)
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        fields[str(name)] = (part.get_filename(), part.get_payload(decode=True) or b"")
    return fields


class _BatchHandler(_Handler):
    owner: FakeBatchEndpoint

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        path = parts.path.rstrip("/")
        owner = self.owner
        if path in ("/v1/batches", "/batches"):
            query = parse_qs(parts.query)
            limit = int((query.get("limit") or ["20"])[0])
            after = (query.get("after") or [None])[0]
            self._send_json(200, owner.list_batches(limit, after))
            return
        segments = [s for s in path.split("/") if s]
        if segments and segments[0] == "v1":
            segments = segments[1:]
        if len(segments) == 2 and segments[0] == "batches":
            status, payload = owner.retrieve_batch(segments[1])
            self._send_json(status, payload)
            return
        if len(segments) in (2, 3) and segments[0] == "files":
            record = owner.files.get(segments[1])
            if record is None:
                self._send_json(404, {"error": {"message": f"no file {segments[1]!r}", "type": "invalid_request_error"}})
                return
            if len(segments) == 2:
                self._send_json(200, owner.file_object(record))
                return
            if segments[2] == "content":
                with owner._batch_lock:
                    owner.content_calls += 1
                data = record["content"]
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
        super().do_GET()

    def do_POST(self) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        if path not in ("/v1/files", "/files", "/v1/batches", "/batches"):
            super().do_POST()
            return
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        owner = self.owner
        if path.endswith("/files"):
            fields = _multipart(self.headers.get("Content-Type", ""), raw)
            if "file" not in fields:
                self._send_json(400, {"error": {"message": "no file part", "type": "invalid_request_error"}})
                return
            filename, content = fields["file"]
            purpose = fields.get("purpose", (None, b"batch"))[1].decode()
            with owner._batch_lock:
                owner.uploads += 1
            self._send_json(200, owner.file_object(owner._new_file(content, purpose, filename or "upload.jsonl")))
            return
        try:
            payload = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            self._send_json(400, {"error": {"message": f"bad JSON: {exc}", "type": "invalid_request_error"}})
            return
        status, body = owner.create_batch(payload)
        self._send_json(status, body)


def fake_batch_endpoint_running(**kwargs: Any) -> AbstractContextManager[FakeBatchEndpoint]:
    """Context manager: a started `FakeBatchEndpoint` (kwargs as its constructor), closed on exit."""
    return fake_endpoint_running(FakeBatchEndpoint, **kwargs)


def main(argv: list[str] | None = None) -> None:
    """Serve a `FakeBatchEndpoint` in its own process (``python -m tests.fake_batch_endpoint``).

    Prints the base URL, then serves until killed. Options script the batches: e.g.
    ``--polls 1 --fail-question "Are the numbers right?"`` (every batch is in progress
    on its first retrieve, and that question fails inside it), ``--expire-first`` (the
    first batch expires with ``--finished-before-end`` requests answered).
    """
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--polls", type=int, default=0, help="retrieves answered in_progress before a batch ends")
    parser.add_argument("--fail-question", action="append", default=[],
                        help="question text whose requests fail inside the first batch (repeatable)")
    parser.add_argument("--expire-first", action="store_true", help="the first batch expires")
    parser.add_argument("--finished-before-end", type=int, default=0)
    args = parser.parse_args(argv)
    first = BatchScript(polls=args.polls, outcome="expired" if args.expire_first else "completed",
                        finished_before_end=args.finished_before_end,
                        fail=fail_questions(*args.fail_question) if args.fail_question else None)
    endpoint = FakeBatchEndpoint(scripts=[first])
    endpoint.default_script = BatchScript(polls=args.polls)
    serve_until_killed(endpoint)


if __name__ == "__main__":
    main()

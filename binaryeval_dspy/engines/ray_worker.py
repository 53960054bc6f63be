"""The Ray engine's worker side: one task answers a block of calls in a worker process.

A fresh worker process (a job's first task on a node) must not wait for DSPy before it
sends. This module imports only the standard library and the HTTP client
(`binaryeval_dspy.engines.http_client`, 0.01-0.08 s); nothing in a task's arguments needs
DSPy to be unpickled (calls, signatures and the sender's spec travel as bytes). So a task:

1. starts loading the reader in a background thread (DSPy, the run's adapter and an
   `binaryeval_dspy.engines.senders.HttpSender` built from the spec, with this package's
   DSPy patches: 0.5-1 CPU-s, far more on a loaded machine), once per process;
2. POSTs the requests the driver formatted for it (`HttpSender.request_bytes`: the first
   block of each task) at once, through the same client and retries, `threads` at a time,
   while DSPy loads (their replies wait for the reader);
3. reads each reply with the sender once it is ready (`HttpSender.answer(sent=...)`: the
   same format, cache store and parse as any other call) and formats, sends and reads the
   rest of the block itself.

Per process, once: the sender (per spec) and the signature classes (per signature digest,
a hash of its pickled bytes), so what DSPy memoizes per signature class
(the JSON adapter's response schema, the system message) is built once per worker, not
once per task. Finished answers stream back in groups (`FLUSH_SECONDS`).
"""

from __future__ import annotations

import pickle
import queue
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from binaryeval_dspy.engines.http_client import Connections, HttpTarget, post_json

#: Seconds a finished answer may wait in its worker for others to go back with it.
FLUSH_SECONDS = 0.25

_LOCK = threading.Lock()
_READERS: dict[bytes, Future] = {}  # spec bytes -> Future of its HttpSender
_CONNECTIONS: dict[HttpTarget, Connections] = {}
_SIGNATURES: dict[str, Any] = {}  # signature digest -> class, unpickled once per process


def _build_sender(spec: bytes) -> Any:
    """The `HttpSender` of `spec`, with DSPy imported and this package's DSPy patches installed."""
    from binaryeval_dspy.engines.senders import HttpSender, SenderSpec
    from binaryeval_dspy.lm.dspy_internals import install_dspy_patches
    from binaryeval_dspy.lm.factory import OPENAI_COMPATIBLE, openai_compatible_provider

    install_dspy_patches()  # the per-call memos the driver's make_lm installs (response schema: ~4 ms a call)
    loaded: SenderSpec = pickle.loads(spec)  # noqa: S301 - our own driver's bytes
    if loaded.lm_model.startswith(f"{OPENAI_COMPATIBLE}/"):
        openai_compatible_provider()
    sender = HttpSender(loaded)
    sender.connections = connections(loaded.target)  # the keep-alive connections the first requests opened
    return sender


def reader(spec: bytes) -> Future:
    """This process's sender for `spec`, loading in a background thread on first use."""
    with _LOCK:
        future = _READERS.get(spec)
        if future is None:
            future = _READERS[spec] = Future()

            def load() -> None:
                try:
                    future.set_result(_build_sender(spec))
                except BaseException as exc:  # noqa: BLE001 - every call of the task reports it
                    future.set_exception(exc)

            threading.Thread(target=load, name="bineval-reader", daemon=True).start()
        return future


def connections(target: HttpTarget) -> Connections:
    """This process's keep-alive connections to `target`."""
    with _LOCK:
        found = _CONNECTIONS.get(target)
        if found is None:
            found = _CONNECTIONS[target] = Connections(target)
        return found


def _signature(digest: str, signatures: dict[str, bytes]) -> Any:
    with _LOCK:
        known = _SIGNATURES.get(digest)
    if known is None:
        known = pickle.loads(signatures[digest])  # noqa: S301 - our own driver's bytes
        with _LOCK:
            known = _SIGNATURES.setdefault(digest, known)
    return known


def answer_block(rows: list[tuple[int, bytes, bytes | None]], target: HttpTarget, spec: bytes,
                 signatures: dict[str, bytes], threads: int) -> Iterator[list[tuple[int, dict[str, Any]]]]:
    """A Ray generator task: answer a block of calls, `threads` at a time, yielding answer rows as they come.

    Args:
        rows: ``(ticket, call bytes, request bytes or None)``: the call (`_call_row` of
            `binaryeval_dspy.engines.ray_engine`) and, when the driver formatted it, the body
            to POST at once.
        target: the endpoint (what the pre-formatted requests need, without DSPy).
        spec: the pickled `SenderSpec`.
        signatures: pickled signature classes by digest.
        threads: requests in flight.

    Never raises for one call: a failure is that call's ``error`` answer.

    Yields:
        Lists of ``(ticket, Answer.as_row())``.
    """
    future = reader(spec)
    finished: queue.SimpleQueue = queue.SimpleQueue()

    def read(ticket: int, payload: bytes, posted: Any = None) -> None:
        """Format the call and read its reply (`posted`, when its request went out already), or send it."""
        try:
            sender = future.result()
            from binaryeval_dspy.lm.calls import LMCall

            key, digest, inputs, demos, config, distribution, judge, required = pickle.loads(payload)  # noqa: S301
            call = LMCall(key=key, signature=_signature(digest, signatures), inputs=inputs, demos=demos,
                          config=config, distribution=distribution, judge=judge, logprobs_required=required)
            row = sender.answer(call, sent=posted).as_row()
        except Exception as exc:  # noqa: BLE001 - the call's error, never a lost answer
            row = _error_row(exc, posted)
        finished.put((ticket, row))

    def post_first(ticket: int, payload: bytes, body: bytes) -> None:
        """POST a request the driver formatted; read it now if the reader is ready, else after
        the block's other requests of this kind went out (the thread does not wait for DSPy)."""
        try:
            posted = post_json(connections(target), body)
        except Exception as exc:  # noqa: BLE001 - the call's error, never a lost answer
            finished.put((ticket, _error_row(exc, None)))
            return
        if future.done():
            read(ticket, payload, posted)
        else:
            pool.submit(read, ticket, payload, posted)

    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(rows)))) as pool:
        for ticket, payload, body in rows:
            if body is None:
                pool.submit(read, ticket, payload)
            else:
                pool.submit(post_first, ticket, payload, body)
        ready: list[tuple[int, dict[str, Any]]] = []
        left, oldest = len(rows), 0.0
        while left:
            waited = time.monotonic() - oldest if ready else 0.0
            if ready and waited >= FLUSH_SECONDS:
                yield ready
                ready = []
                continue
            try:
                item = finished.get(timeout=FLUSH_SECONDS - waited)
            except queue.Empty:
                continue
            if not ready:
                oldest = time.monotonic()
            ready.append(item)
            left -= 1
        if ready:
            yield ready


def _error_row(exc: BaseException, posted: Any) -> dict[str, Any]:
    """The ``error`` answer row of a call whose reader failed (a request it sent still counts)."""
    from binaryeval_dspy.lm.calls import Answer
    from binaryeval_dspy.schemas.item_result import Usage

    usage = Usage(lm_calls=int(posted is not None and posted.body is not None),
                  failed_calls=posted.failed_attempts if posted is not None else 0)
    return Answer(status="error", reason=f"{type(exc).__name__}: {exc}"[:2000], usage=usage).as_row()

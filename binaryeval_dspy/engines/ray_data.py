"""Sending prepared chat-completion requests through Ray Data (the ``ray`` extra).

The Ray engine's transport. The driver formats every (item, question) call with DSPy's
adapter into a `PreparedRequest` (an OpenAI chat-completions body); `send_requests` moves
them as rows through ``ray.data`` and yields one `RequestReply` per request as it arrives,
so that the caller can journal each answer at once. Parsing a reply is the adapter's job
again, on the driver; this module knows nothing of questions, verdicts or the run folder.

How a request travels::

    rows {custom_id, body: JSON text}            (driver: ray.data.from_items, a window at a time)
      -> map_batches(_send_block)                (Ray tasks, one block of rows each; a sliding
                                                  window of `batch_size` threads POSTs each row to
                                                  {base_url}/chat/completions, retrying 429 / 5xx /
                                                  timeouts / connection errors)
      -> a row per `batch_size` finished replies (yielded while the task goes on, each its own block)
      -> iter_batches() on the driver            (streaming: replies arrive as groups finish)

The task function never raises: a failed request is a row with ``error`` set, and the
other rows are unaffected (``ray.data.llm``'s HTTP processor, by contrast, keeps one
request in flight per actor and fails the whole dataset on one bad reply). Request and
reply bodies travel as JSON text, since Ray turns nested lists of dicts into numpy object
arrays. At most ``in_flight`` requests are out at once: ``in_flight // batch_size``
concurrent tasks of ``batch_size`` threads each. Tasks are stateless functions, so the
warm worker processes of one run serve the next (an actor pool would start anew per run).

The worker-side functions need only the standard library and ``pyarrow`` (installed with
``ray[data]``) and are shipped by value, so a cluster joined with ``address=`` needs no copy of
binaryeval-dspy on its workers.

Example (needs a served model at the URL)::

    with ray_session():
        for reply in send_requests(prepared, HttpTarget("http://127.0.0.1:8000/v1")):
            journal(reply)          # as each arrives, in completion order
"""

from __future__ import annotations

import json
import logging
import math
import random
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from binaryeval_dspy.engines.ray_session import ray_session as ray_session  # its own module; re-exported here
from binaryeval_dspy.errors import ConfigError
from binaryeval_dspy.extras import require

__all__ = [
    "HttpTarget",
    "PreparedRequest",
    "RayEngineSettings",
    "RequestReply",
    "ray_session",
    "send_requests",
]

_FEATURE = "The Ray engine"
#: HTTP statuses retried (as the OpenAI SDK does): request timeout, conflict, rate limit, server errors.
RETRIED_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))
#: Longest wait before a retry, in seconds (also caps a server's Retry-After).
MAX_RETRY_WAIT = 60.0
#: Characters of a failed reply's text kept in `RequestReply.error`.
ERROR_TEXT_CHARS = 300
#: Seconds a finished reply may wait in its worker for others to be sent back with it.
FLUSH_SECONDS = 0.5
#: Most requests in one block, i.e. one Ray task. A window is cut into one block per task
#: while it has at most ``tasks x MAX_BLOCK_ROWS`` requests: on a busy 2-core machine each
#: further task start cost 0.5-1 s (768 requests at 64 in flight, 0.5 s latency: 0.96 of
#: the ideal throughput with one block per task, 0.92 with two, 0.76 with four).
MAX_BLOCK_ROWS = 1024


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class PreparedRequest:
    """One (item, question) call, formatted on the driver by DSPy's adapter.

    Attributes:
        custom_id: unique per request in one `send_requests` call, e.g.
            ``"<item_id>::<question_id>::<n>"``; the reply carries it back.
        body: an OpenAI chat-completions request body (``model``, ``messages``,
            ``max_tokens``, ``response_format``, ...), JSON-serializable.
    """

    custom_id: str
    body: dict


@dataclass(frozen=True)
class HttpTarget:
    """Where and how to send: an OpenAI-compatible endpoint (no judging policy).

    Attributes:
        base_url: the OpenAI-compatible base, e.g. ``http://127.0.0.1:8000/v1``; requests
            go to ``POST {base_url}/chat/completions``.
        api_key: sent as ``Authorization: Bearer <key>``; never logged, never in a reply
            row, left out of ``repr``. None: no Authorization header.
        timeout: seconds per HTTP attempt (connecting, and waiting for the reply's bytes).
        max_retries: retries after the first attempt on HTTP 408 / 409 / 429 / 5xx, timeouts
            and connection errors (0: one attempt only). Other statuses are not retried.
        backoff: seconds before the first retry; doubled per retry, capped at
            `MAX_RETRY_WAIT`, times a random factor in [0.5, 1] (jitter). A ``Retry-After``
            header (seconds or an HTTP date) replaces it, capped the same way.
        headers: extra request headers as (name, value) pairs.

    Raises:
        ConfigError: an empty ``base_url``, a timeout <= 0, negative retries or backoff.
    """

    base_url: str
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 600.0
    max_retries: int = 4
    backoff: float = 0.5
    headers: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not str(self.base_url).strip():
            raise ConfigError("HttpTarget.base_url is empty.", expected="an OpenAI-compatible base URL",
                              received=repr(self.base_url), fix="give e.g. http://127.0.0.1:8000/v1")
        _check_number("HttpTarget.timeout", self.timeout, minimum=0.0, inclusive=False)
        _check_number("HttpTarget.max_retries", self.max_retries, minimum=0, integer=True)
        _check_number("HttpTarget.backoff", self.backoff, minimum=0.0)

    @property
    def url(self) -> str:
        """The chat-completions URL, ``{base_url}/chat/completions``."""
        return self.base_url.rstrip("/") + "/chat/completions"


@dataclass(frozen=True)
class RequestReply:
    """What came back for one `PreparedRequest`.

    Attributes:
        custom_id: the request's id.
        body: the parsed JSON response (a chat completion), or None when the request failed.
        error: None on success; otherwise what the last attempt got, e.g. ``"HTTP 500:
            <first 300 chars of the reply>"``, ``"timeout after 600 s"``, ``"connection
            error: ..."``, ``"HTTP 200: reply is not a JSON object: ..."``.
        status: the HTTP status of the last attempt, or None when it got no response
            (timeout, connection error).
        attempts: HTTP attempts made (1 = no retry). Failed attempts reached the endpoint
            too: count them as calls in usage.
        seconds: wall time of this request in the worker, retries and waits included.
    """

    custom_id: str
    body: dict | None
    error: str | None
    status: int | None
    attempts: int
    seconds: float

    @property
    def ok(self) -> bool:
        """Whether a JSON reply came back (``error`` is None)."""
        return self.error is None


@dataclass(frozen=True)
class RayEngineSettings:
    """How the Ray engine runs: which Ray, and how many requests at once.

    Attributes:
        address: None starts a local Ray (stopped again at the end); ``"auto"`` or
            ``"ray://host:10001"`` joins a running cluster.
        num_cpus: CPUs of a local Ray (None: 2); must be None when joining a cluster.
        in_flight: most requests out at once (``in_flight // batch_size`` tasks of
            ``batch_size`` threads; fewer threads when ``in_flight < batch_size``).
        batch_size: requests each Ray task keeps out at once (its threads); also how many
            finished replies come back to the driver together (or fewer after
            `FLUSH_SECONDS`).
        num_cpus_per_task: CPUs Ray reserves per task (None: half a CPU, less when the
            cluster has fewer CPUs than the tasks need at that size).
        window: requests turned into one dataset at a time, bounding the driver's memory
            for long plans; each window ends with a drain (its last requests finish while
            the next window waits).

    Raises:
        ConfigError: a count < 1, a CPU share <= 0, or ``num_cpus`` with ``address``.
    """

    address: str | None = None
    num_cpus: int | None = None
    in_flight: int = 64
    batch_size: int = 16
    num_cpus_per_task: float | None = None
    window: int = 16_384

    def __post_init__(self) -> None:
        if self.address is not None and self.num_cpus is not None:
            raise ConfigError("RayEngineSettings: num_cpus is for a local Ray, not a joined cluster.",
                              received=f"address={self.address!r}, num_cpus={self.num_cpus}",
                              fix="leave num_cpus unset when giving an address")
        if self.num_cpus is not None:
            _check_number("RayEngineSettings.num_cpus", self.num_cpus, minimum=1, integer=True)
        _check_send_options(self.in_flight, self.batch_size, self.num_cpus_per_task, self.window,
                            owner="RayEngineSettings")


def _check_number(name: str, value: Any, *, minimum: float, inclusive: bool = True,
                  integer: bool = False) -> None:
    kind = "an integer" if integer else "a number"
    bound = f">= {minimum}" if inclusive else f"> {minimum}"
    wrong_type = isinstance(value, bool) or not isinstance(value, int if integer else (int, float))
    if wrong_type or (value < minimum if inclusive else value <= minimum):
        raise ConfigError(f"{name} must be {kind} {bound}.", expected=f"{kind} {bound}", received=repr(value))


def _check_send_options(in_flight: int, batch_size: int, num_cpus_per_task: float | None, window: int,
                        *, owner: str) -> None:
    _check_number(f"{owner}.in_flight", in_flight, minimum=1, integer=True)
    _check_number(f"{owner}.batch_size", batch_size, minimum=1, integer=True)
    _check_number(f"{owner}.window", window, minimum=1, integer=True)
    if num_cpus_per_task is not None:
        _check_number(f"{owner}.num_cpus_per_task", num_cpus_per_task, minimum=0.0, inclusive=False)


# --------------------------------------------------------------------------- worker side
# Runs in Ray workers. Shipped by value (see `send_requests`): uses only the standard
# library and `pyarrow` (installed with ray[data]), and no project code.


def _retry_after_seconds(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta seconds or an HTTP date), None if absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        from email.utils import parsedate_to_datetime

        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _retry_wait(target: HttpTarget, attempt: int, retry_after: float | None) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based)."""
    if retry_after is not None:
        return min(retry_after, MAX_RETRY_WAIT)
    return min(target.backoff * 2 ** (attempt - 1), MAX_RETRY_WAIT) * random.uniform(0.5, 1.0)


class _Connections:
    """Keep-alive HTTP connections to one target, one per thread (``http.client``, standard library).

    ``http.client`` costs about a third of the CPU per request of ``requests`` here (0.3 vs
    1.1 ms), which decides the throughput of a busy 2-core machine. No proxy support.
    """

    def __init__(self, target: HttpTarget) -> None:
        from urllib.parse import urlsplit

        url = urlsplit(target.url)
        self.target = target
        self.path = url.path + (f"?{url.query}" if url.query else "")
        self.https = url.scheme == "https"
        self.host, self.port = url.hostname or "", url.port
        self.local = threading.local()
        self.opened: list[Any] = []
        self.lock = threading.Lock()

    def _connection(self) -> tuple[Any, bool]:
        """This thread's connection, and whether it has served a request already."""
        import http.client

        connection = getattr(self.local, "connection", None)
        if connection is not None:
            return connection, True
        if self.https:
            import ssl

            connection = http.client.HTTPSConnection(self.host, self.port, timeout=self.target.timeout,
                                                     context=ssl.create_default_context())
        else:
            connection = http.client.HTTPConnection(self.host, self.port, timeout=self.target.timeout)
        self.local.connection = connection
        with self.lock:
            self.opened.append(connection)
        return connection, False

    def post(self, data: bytes, headers: dict[str, str]) -> tuple[int, str | None, str]:
        """POST once: (status, Retry-After header, body text). Raises on no response.

        A kept-alive connection the server closed meanwhile is reopened and the request
        sent again once, uncounted (the request never reached the server), as urllib3 does.
        """
        import http.client

        connection, reused = self._connection()
        try:
            try:
                connection.request("POST", self.path, body=data, headers=headers)
                response = connection.getresponse()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                if not reused:
                    raise
                connection.close()  # closed by the server while idle: reopen, send again
                connection.request("POST", self.path, body=data, headers=headers)
                response = connection.getresponse()
            text = response.read().decode("utf-8", errors="replace")
        except BaseException:
            connection.close()  # reopened by the next request
            raise
        if response.will_close:
            connection.close()
        return response.status, response.getheader("Retry-After"), text

    def close(self) -> None:
        with self.lock:
            for connection in self.opened:
                connection.close()


def _send_one(connections: _Connections, custom_id: str, body_json: str) -> dict[str, Any]:
    """POST one request with retries; returns its reply row. Never raises."""
    import http.client

    target = connections.target
    started = time.monotonic()
    headers = {"Content-Type": "application/json", **dict(target.headers)}
    if target.api_key:
        headers["Authorization"] = f"Bearer {target.api_key}"
    data = body_json.encode("utf-8")
    attempts = 0
    while True:
        attempts += 1
        status: int | None = None
        retry_after: float | None = None
        try:
            status, retry_after_header, text = connections.post(data, headers)
        except TimeoutError:
            error, retried = f"timeout after {target.timeout:g} s", True
        except (OSError, http.client.HTTPException) as exc:
            error, retried = f"connection error: {type(exc).__name__}: {str(exc)[:ERROR_TEXT_CHARS]}", True
        except Exception as exc:  # noqa: BLE001 - a bug or an odd environment: still a row, never a crash
            error, retried = f"client error: {type(exc).__name__}: {str(exc)[:ERROR_TEXT_CHARS]}", False
        else:
            if 200 <= status < 300:
                return {"custom_id": custom_id, "body": text, "error": None, "status": status,
                        "attempts": attempts, "seconds": time.monotonic() - started}
            error = f"HTTP {status}: {text[:ERROR_TEXT_CHARS]}"
            retried = status in RETRIED_STATUSES
            retry_after = _retry_after_seconds(retry_after_header)
        if not retried or attempts > target.max_retries:
            return {"custom_id": custom_id, "body": None, "error": error, "status": status,
                    "attempts": attempts, "seconds": time.monotonic() - started}
        time.sleep(_retry_wait(target, attempts, retry_after))


def _failed_row(custom_id: str, exc: BaseException) -> dict[str, Any]:
    return {"custom_id": custom_id, "body": None, "error": f"client error: {type(exc).__name__}: "
            f"{str(exc)[:ERROR_TEXT_CHARS]}", "status": None, "attempts": 0, "seconds": 0.0}


def _packed(rows: list[dict[str, Any]]) -> Any:
    """Reply rows as one output row (``replies``: JSON text of the list), hence one Ray block."""
    import pyarrow as pa

    return pa.table({"replies": [json.dumps(rows)]})


def _send_block(batch: dict[str, Any], target: HttpTarget, threads: int, flush_rows: int) -> Iterator[Any]:
    """Ray Data batch function: send a block's rows, `threads` at a time, yielding replies as they come.

    A sliding window: a row starts as soon as one of the `threads` frees up, so one slow
    request holds back no other. Finished replies are yielded in groups of `flush_rows`
    (or fewer once `FLUSH_SECONDS` passed since the oldest waiting one, and at the end),
    each group as one output row, which the driver receives while the task goes on.

    Args:
        batch: numpy columns ``custom_id`` (str) and ``body`` (JSON text), a whole block.
        target: where to send.
        threads: requests of this block out at once.
        flush_rows: replies per output row.

    Yields:
        One-row pyarrow tables (column ``replies``, JSON text of a list of reply rows);
        every input row is in exactly one. Never raises: a failure, even of this
        function's own set-up, becomes an ``error`` in the rows not yet yielded. If the
        task is cancelled, requests not yet started are dropped.
    """
    import queue

    ids = [str(value) for value in batch["custom_id"]]
    unsent = dict.fromkeys(ids)
    pool = connections = None
    try:
        bodies = [str(value) for value in batch["body"]]
        connections = _Connections(target)
        finished: queue.SimpleQueue = queue.SimpleQueue()
        pool = ThreadPoolExecutor(max_workers=max(1, min(threads, len(ids))))
        for custom_id, body in zip(ids, bodies):
            future = pool.submit(_send_one, connections, custom_id, body)
            future.add_done_callback(lambda done, custom_id=custom_id: finished.put((custom_id, done)))
        ready: list[dict[str, Any]] = []
        oldest, remaining = 0.0, len(ids)
        while remaining:
            waited = time.monotonic() - oldest if ready else 0.0
            if ready and waited >= FLUSH_SECONDS:
                table, ready = _packed(ready), []
                yield table
                continue
            try:
                custom_id, future = finished.get(timeout=FLUSH_SECONDS - waited)
            except queue.Empty:
                continue
            remaining -= 1
            try:
                row = future.result()
            except Exception as exc:  # noqa: BLE001 - _send_one never raises; so that no row is ever lost
                row = _failed_row(custom_id, exc)
            if not ready:
                oldest = time.monotonic()
            ready.append(row)
            unsent.pop(custom_id, None)
            if len(ready) >= flush_rows or not remaining:
                table, ready = _packed(ready), []
                yield table
    except Exception as exc:  # noqa: BLE001 - the task never fails: the rows not yet sent back get the error
        if unsent:
            yield _packed([_failed_row(custom_id, exc) for custom_id in unsent])
    finally:
        if pool is not None:  # on cancellation: start nothing more, do not wait for the running ones
            pool.shutdown(wait=False, cancel_futures=True)
        if connections is not None:
            connections.close()


# --------------------------------------------------------------------------- driver side


def _reply(row: dict[str, Any]) -> RequestReply:
    """A reply row as a `RequestReply`, its body parsed (a 2xx whose body is not a JSON object is an error)."""
    text, error, body = row["body"], row["error"], None
    if error is None:
        try:
            body = json.loads(text)
        except (TypeError, ValueError):
            body = None
        if not isinstance(body, dict):
            error = f"HTTP {row['status']}: reply is not a JSON object: {str(text)[:ERROR_TEXT_CHARS]}"
            body = None
    return RequestReply(custom_id=row["custom_id"], body=body, error=error, status=row["status"],
                        attempts=row["attempts"], seconds=row["seconds"])


def _rows(window: list[PreparedRequest]) -> list[dict[str, str]]:
    """Input rows of one window: custom_id and the body as JSON text; checks ids and bodies."""
    seen: set[str] = set()
    rows = []
    for request in window:
        custom_id = request.custom_id
        if not isinstance(custom_id, str) or not custom_id:
            raise ConfigError("A prepared request has no custom_id.", expected="a non-empty string",
                              received=repr(custom_id))
        if custom_id in seen:
            raise ConfigError(f"Two prepared requests share the custom_id {custom_id!r}.",
                              expected="one request per custom_id", fix="number repeated calls in the id")
        seen.add(custom_id)
        try:
            body = json.dumps(request.body)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"Prepared request {custom_id!r}: the body is not JSON-serializable ({exc}).",
                              expected="a chat-completions body of JSON values") from exc
        rows.append({"custom_id": custom_id, "body": body})
    return rows


def send_requests(requests: Iterable[PreparedRequest], target: HttpTarget, *, in_flight: int = 64,
                  batch_size: int = 16, num_cpus_per_task: float | None = None,
                  window: int = 16_384) -> Iterator[RequestReply]:
    """Send prepared requests through ``ray.data``; an iterator of the replies as they arrive.

    Must run inside an active Ray session (`ray_session`). Replies stream back in
    completion order, a batch at a time, while later requests are still out: journal each
    one as it comes. Every request gets exactly one reply; a failed request is a reply with
    ``error`` set, never an exception. Closing the generator (``break``, Ctrl-C, an
    exception in the caller) stops the dataset: its tasks are cancelled, which ends their
    worker processes (requests out at that moment get no reply; the next run starts new
    workers, some seconds), and Ray stays usable and can be shut down.

    Args:
        requests: the calls to make (consumed lazily, `window` at a time); custom_ids unique
            within each window.
        target: the endpoint; its api_key goes to the workers with the task, never into rows.
        in_flight: most requests out at once (>= 1).
        batch_size: requests each Ray task keeps out at once (>= 1), and replies sent back
            together; ``in_flight // batch_size`` tasks run at once (at least one; with
            ``in_flight < batch_size``, one task of ``in_flight`` threads). Each task takes
            a block of requests: a window's share, up to `MAX_BLOCK_ROWS`.
        num_cpus_per_task: CPUs reserved per task (None: ``min(0.5, cluster CPUs / tasks)``).
        window: requests per dataset (>= 1); see `RayEngineSettings.window`.

    Returns:
        An iterator of one `RequestReply` per request (the arguments are checked when
        `send_requests` is called, each window's requests when the iterator reaches it).

    Raises:
        MissingExtraError: the ``ray`` extra is not installed.
        ConfigError: at the call, no active Ray session or an option out of range; while
            iterating, before a window is sent, a request of it without a custom_id, two
            with the same custom_id, or a body that is not JSON-serializable.
        ray.exceptions.RayError: while iterating, the cluster itself failed (a worker or node died past
            Ray's retries); replies yielded before remain valid.
    """
    _check_send_options(in_flight, batch_size, num_cpus_per_task, window, owner="send_requests")
    ray = require("ray", "ray", _FEATURE)
    ray_data = require("ray.data", "ray", _FEATURE)
    if not ray.is_initialized():
        raise ConfigError("send_requests needs an active Ray session.", expected="ray initialized",
                          received="no Ray session in this process",
                          fix="call it inside `with ray_session(): ...`")
    # Ship the worker functions by value: a joined cluster's workers need not have this package.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    threads = min(batch_size, in_flight)
    tasks = max(1, in_flight // threads)
    if num_cpus_per_task is None:
        cluster_cpus = float(ray.cluster_resources().get("CPU", 1.0))
        num_cpus_per_task = min(0.5, cluster_cpus / tasks)
    return _stream(ray_data, iter(requests), target, batch_size=batch_size, threads=threads, tasks=tasks,
                   num_cpus_per_task=num_cpus_per_task, window=window)


class _QuietRayData(logging.Filter):
    """Drops Ray Data's per-execution INFO lines and its "progress bars disabled" notice."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING and not str(record.msg).startswith("Progress bars")


@contextmanager
def _data_context(ray_data: Any) -> Iterator[None]:
    """Ray Data set up for streaming replies; restored on exit.

    On the current `DataContext` (read when a dataset is created): every output row of
    `_send_block` is its own block, so it reaches the driver as soon as it is yielded (a
    one-byte target block size; the default, 128 MiB, would hold a task's replies until
    the task ends); no per-operator resource reservation (Ray Data's allocator otherwise
    starts one task, and the others only once the first one's outputs are measured, about
    a second later: the task pool's size already bounds the tasks); and no progress bars.
    On the handlers of the ``ray.data`` logger (its
    records do not propagate further): no per-execution INFO lines on the console.
    """
    context = ray_data.DataContext.get_current()
    saved = (context.enable_progress_bars, context.print_on_execution_start, context.target_max_block_size,
             context.op_resource_reservation_enabled)
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    context.target_max_block_size = 1
    context.op_resource_reservation_enabled = False
    quiet = _QuietRayData()
    handlers = list(logging.getLogger("ray.data").handlers)
    for handler in handlers:
        handler.addFilter(quiet)
    try:
        yield
    finally:
        (context.enable_progress_bars, context.print_on_execution_start, context.target_max_block_size,
         context.op_resource_reservation_enabled) = saved
        for handler in handlers:
            handler.removeFilter(quiet)


def _stream(ray_data: Any, requests: Iterator[PreparedRequest], target: HttpTarget, *, batch_size: int,
            threads: int, tasks: int, num_cpus_per_task: float, window: int) -> Iterator[RequestReply]:
    """The generator behind `send_requests` (which checks its arguments before the first reply is asked for)."""
    with _data_context(ray_data):
        while chunk := list(islice(requests, window)):
            rows = _rows(chunk)
            block_rows = min(max(math.ceil(len(rows) / tasks), threads), MAX_BLOCK_ROWS)
            blocks = math.ceil(len(rows) / block_rows)
            dataset = ray_data.from_items(rows, override_num_blocks=blocks)
            dataset = dataset.map_batches(
                _send_block, batch_size=None, batch_format="numpy", zero_copy_batch=True,
                fn_kwargs={"target": target, "threads": threads, "flush_rows": batch_size},
                compute=ray_data.TaskPoolStrategy(size=min(tasks, blocks)), num_cpus=num_cpus_per_task)
            # Closed explicitly, so that closing this generator stops the dataset at once.
            with closing(iter(dataset.iter_batches(batch_size=None, batch_format="pyarrow",
                                                   prefetch_batches=1))) as tables:
                for table in tables:
                    for packed in table.column("replies").to_pylist():
                        for row in json.loads(packed):
                            yield _reply(row)

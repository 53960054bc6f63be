"""POSTing a chat-completions body to an OpenAI-compatible endpoint: the one HTTP client of the engines.

Two drivers of one retry rule (`_Attempts`), so every route sends, retries and counts the
same way:

* `post_json` (blocking, the standard library's ``http.client``, one keep-alive connection
  per thread): the Ray engine's workers, a one-at-a-time run and a call made directly.
  Measured on this project's scripted endpoint with 64 requests in flight it costs 0.22
  CPU-ms per request against 2.1 for httpx's client and 4.4 for httpx's async client
  (``benchmarks/http_clients.py``).
* `apost_json` (aiohttp on an asyncio event loop, its C HTTP parser): the live engine, which
  keeps all its calls in flight on one thread (`binaryeval_dspy.engines.threads`).

The client's CPU is what a large run waits for. No proxy support.

Retries follow the OpenAI SDK's rule: HTTP 408, 409, 429 and 5xx, timeouts and
connection errors are retried with exponential backoff and jitter (a ``Retry-After``
header replaces the wait); other statuses are final. Every attempt that reached the
endpoint and got an error is counted (`Posted.failed_attempts`), so that calls plus
failed calls equal the requests the endpoint received. An attempt can be gated
(`post_json`'s ``before_attempt``): a spending limit reserves each retry before it goes.

A server may close a kept-alive connection a moment after its reply (without saying
``Connection: close``): a request sent on it meanwhile is never read, and the server's
kernel answers it with a TCP reset. A request that met a reset on a reused connection
before any byte of its reply (`StaleConnection`) is sent again at once, once, on a fresh
connection, and is neither an attempt nor a failed one (`Posted.resent`). A connection
closed cleanly after the request went out (the server read it and hung up) stays a
failed attempt: the server may have received, and billed, it.
"""

from __future__ import annotations

import asyncio
import errno
import http.client
import json
import random
import select
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from binaryeval_dspy.errors import ConfigError

#: HTTP statuses retried (as the OpenAI SDK does): request timeout, conflict, rate limit, server errors.
RETRIED_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))
#: Longest wait before a retry, in seconds (also caps a server's Retry-After).
MAX_RETRY_WAIT = 60.0
#: Characters of a failed reply's text kept in an error.
ERROR_TEXT_CHARS = 300


@dataclass(frozen=True)
class HttpTarget:
    """Where and how to send: an OpenAI-compatible endpoint (no judging policy).

    Attributes:
        base_url: the OpenAI-compatible base, e.g. ``http://127.0.0.1:8000/v1``; requests
            go to ``POST {base_url}/chat/completions``.
        api_key: sent as ``Authorization: Bearer <key>``; never logged, never in a result,
            left out of ``repr``. None: no Authorization header.
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
    max_retries: int = 3
    backoff: float = 0.5
    headers: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not str(self.base_url).strip():
            raise ConfigError("HttpTarget.base_url is empty.", expected="an OpenAI-compatible base URL",
                              received=repr(self.base_url), fix="give e.g. http://127.0.0.1:8000/v1")
        check_number("HttpTarget.timeout", self.timeout, minimum=0.0, inclusive=False)
        check_number("HttpTarget.max_retries", self.max_retries, minimum=0, integer=True)
        check_number("HttpTarget.backoff", self.backoff, minimum=0.0)

    @property
    def url(self) -> str:
        """The chat-completions URL, ``{base_url}/chat/completions``."""
        return self.base_url.rstrip("/") + "/chat/completions"


def check_number(name: str, value: Any, *, minimum: float, inclusive: bool = True, integer: bool = False) -> None:
    """Raise `ConfigError` naming `name` unless `value` is a number (an int if `integer`) >= (or >) `minimum`."""
    kind = "an integer" if integer else "a number"
    bound = f">= {minimum}" if inclusive else f"> {minimum}"
    wrong_type = isinstance(value, bool) or not isinstance(value, int if integer else (int, float))
    if wrong_type or (value < minimum if inclusive else value <= minimum):
        raise ConfigError(f"{name} must be {kind} {bound}.", expected=f"{kind} {bound}", received=repr(value))


@dataclass
class Posted:
    """What one `post_json` got, after its retries.

    Attributes:
        body: the reply's JSON object, or None when the request failed.
        error: None on success; otherwise what the last attempt got, e.g. ``"HTTP 500:
            <first 300 chars of the reply>"``, ``"timeout after 600 s"``, ``"connection
            error: ..."``, ``"HTTP 200: reply is not a JSON object: ..."``.
        error_type: a short name for the error (``HTTPError``, ``TimeoutError``,
            ``ConnectionError``, ``ReplyError``, ``NotSent``), None on success.
        status: the HTTP status of the last attempt, or None when it got no response.
        attempts: HTTP attempts that reached the endpoint (1 = no retry).
        failed_attempts: attempts answered with an error (or with no reply in time):
            requests the endpoint received that gave no answer.
        unanswered: attempts that got no reply at all (timeouts, cut connections): a
            provider may still bill them, so a budget keeps their worst case.
        resent: requests sent again on a fresh connection because a reused kept-alive one
            was reset before any byte of the reply (`StaleConnection`; the server never read
            them): in neither `attempts` nor `failed_attempts`. At most one per attempt.
        seconds: wall time, retries and waits included.
    """

    body: dict | None
    error: str | None = None
    error_type: str | None = None
    status: int | None = None
    attempts: int = 0
    failed_attempts: int = 0
    unanswered: int = 0
    resent: int = 0
    seconds: float = 0.0


class StaleConnection(ConnectionError):
    """A reused kept-alive connection was reset before any byte of the reply came: the server
    had closed it, so it never read the request (sent again once on a fresh connection)."""


#: errno values of a connection the peer had closed before it read the request.
_RESET_ERRNOS = frozenset({errno.ECONNRESET, errno.EPIPE})


def _is_reset(exc: BaseException) -> bool:
    """A TCP reset or a broken pipe; not `http.client.RemoteDisconnected` (a subclass of
    ConnectionResetError that means a clean close: the server may have read the request)."""
    if isinstance(exc, http.client.RemoteDisconnected):
        return False
    return isinstance(exc, (ConnectionResetError, BrokenPipeError)) or getattr(exc, "errno", None) in _RESET_ERRNOS


def retry_after_seconds(value: str | None) -> float | None:
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


def retry_wait(target: HttpTarget, attempt: int, retry_after: float | None) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based)."""
    if retry_after is not None:
        return min(retry_after, MAX_RETRY_WAIT)
    return min(target.backoff * 2 ** (attempt - 1), MAX_RETRY_WAIT) * random.uniform(0.5, 1.0)


class Connections:
    """Keep-alive HTTP connections to one target, one per thread (``http.client``)."""

    def __init__(self, target: HttpTarget) -> None:
        url = urlsplit(target.url)
        self.target = target
        self.path = url.path + (f"?{url.query}" if url.query else "")
        self.https = url.scheme == "https"
        self.host, self.port = url.hostname or "", url.port
        self.local = threading.local()
        self.opened: list[Any] = []
        self.lock = threading.Lock()
        self.headers = {"Content-Type": "application/json", **dict(target.headers)}
        if target.api_key:
            self.headers["Authorization"] = f"Bearer {target.api_key}"

    def _connection(self) -> tuple[Any, bool]:
        """This thread's connection and whether it is reused: kept alive from its last request
        unless the server closed it meanwhile (then a new one; nothing was sent on the old one)."""
        connection = getattr(self.local, "connection", None)
        if connection is not None:
            if not _dropped(connection):
                return connection, True
            connection.close()  # closed by the server while idle: reopened below, nothing sent
        if self.https:
            connection = http.client.HTTPSConnection(self.host, self.port, timeout=self.target.timeout,
                                                     context=ssl.create_default_context())
        else:
            connection = http.client.HTTPConnection(self.host, self.port, timeout=self.target.timeout)
        self.local.connection = connection
        with self.lock:
            self.opened.append(connection)
        return connection, False

    def post(self, data: bytes) -> tuple[int, str | None, bytes]:
        """POST once: (status, Retry-After header, body bytes). Raises on no response.

        Every call is one request the server may have received, and is counted as one
        attempt by `post_json`: a kept-alive connection is checked before it is used (a
        server that closed it while idle has it readable at end of file, as urllib3 checks),
        so a connection closed after the request went out is the server's doing (it took
        the request and hung up). Only a reset of a reused connection before the reply's
        status line (the server closed it before reading the request, racing this send)
        raises `StaleConnection`.
        """
        connection, reused = self._connection()
        replied = False
        try:
            connection.request("POST", self.path, body=data, headers=self.headers)
            response = connection.getresponse()
            replied = True
            payload = response.read()
        except BaseException as exc:
            connection.close()  # reopened by the next request
            if reused and not replied and _is_reset(exc):
                raise StaleConnection(f"{type(exc).__name__}: {exc}") from exc
            raise
        if response.will_close:
            connection.close()
        return response.status, response.getheader("Retry-After"), payload

    def close(self) -> None:
        """Close every connection opened so far."""
        with self.lock:
            for connection in self.opened:
                connection.close()


def _dropped(connection: Any) -> bool:
    """True when a kept-alive connection cannot take a request: closed here, or readable while
    idle (the server closed it, or sent bytes nobody asked for)."""
    sock = getattr(connection, "sock", None)
    if sock is None:
        return True
    try:
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return bool(poller.poll(0))
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable)
    except (OSError, ValueError):
        return True


class _Attempts:
    """The retry rule of one POST (module docstring), the same for `post_json` and `apost_json`:
    each attempt's outcome is told to it, and it says whether and when to try again."""

    def __init__(self, target: HttpTarget, final: Callable[[int, str], bool] | None) -> None:
        self.target = target
        self.final = final
        self.started = time.monotonic()
        self.posted = Posted(body=None)

    def refused(self, reason: str) -> None:
        """The gate refused the next attempt: nothing more is sent. A refused retry is said as
        what it is (``retry not sent: <reason>``, e.g. a spending limit), with what the last
        attempt got after it, so it is not read as the endpoint's last word (a rate limit's
        advice to lower the concurrency, when it was the limit that stopped it)."""
        posted = self.posted
        if posted.error is not None:
            reason = f"retry not sent: {reason}; the last attempt got {posted.error}"
        posted.error, posted.error_type = reason, "NotSent"

    def no_reply(self, exc: BaseException) -> float | None:
        """An attempt that got no reply (a timeout, a refused or cut connection): retried."""
        posted = self.posted
        posted.status = None
        if isinstance(exc, TimeoutError):
            posted.error, posted.error_type = f"timeout after {self.target.timeout:g} s", "TimeoutError"
        else:
            posted.error = f"connection error: {type(exc).__name__}: {str(exc)[:ERROR_TEXT_CHARS]}"
            posted.error_type = "ConnectionError"
        posted.unanswered += 1
        return self._failed(True, None)

    def replied(self, status: int, retry_after_header: str | None, payload: bytes) -> float | None:
        """An HTTP reply; the seconds to wait before the next attempt, or None: done."""
        posted = self.posted
        posted.status = status
        text = payload.decode("utf-8", errors="replace")
        if 200 <= status < 300:
            try:
                reply = json.loads(text)
            except ValueError:
                reply = None
            if isinstance(reply, dict):
                posted.body, posted.error, posted.error_type = reply, None, None
                return None
            posted.error = f"HTTP {status}: reply is not a JSON object: {text[:ERROR_TEXT_CHARS]}"
            posted.error_type = "ReplyError"
            return self._failed(False, None)
        posted.error, posted.error_type = f"HTTP {status}: {text[:ERROR_TEXT_CHARS]}", "HTTPError"
        retried = status in RETRIED_STATUSES and not (self.final is not None and self.final(status, text))
        return self._failed(retried, retry_after_seconds(retry_after_header))

    def _failed(self, retried: bool, retry_after: float | None) -> float | None:
        self.posted.failed_attempts += 1
        if not retried or self.posted.attempts > self.target.max_retries:
            return None
        return retry_wait(self.target, self.posted.attempts, retry_after)

    def done(self) -> Posted:
        self.posted.seconds = time.monotonic() - self.started
        return self.posted


def _body_bytes(body: dict | bytes) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")


def post_json(connections: Connections, body: dict | bytes, *,
              before_attempt: Callable[[int], str | None] | None = None,
              final: Callable[[int, str], bool] | None = None) -> Posted:
    """POST `body` with retries; never raises for what the endpoint or the network does.

    Args:
        connections: the target's connections (`Connections`).
        body: the chat-completions body (a dict, or its JSON bytes).
        before_attempt: called with the attempt number (1-based) before each attempt; a
            returned reason stops before that attempt is sent (``NotSent``), e.g. a spending
            limit that cannot reserve a retry.
        final: ``final(status, text)`` of an error reply: True keeps it from being retried
            (e.g. a server refusing the request's form: sending it again changes nothing).

    Returns:
        A `Posted`: the reply's JSON object, or the last attempt's error.
    """
    data = _body_bytes(body)
    attempts = _Attempts(connections.target, final)
    while True:
        if before_attempt is not None:
            refused = before_attempt(attempts.posted.attempts + 1)
            if refused is not None:
                attempts.refused(refused)
                break
        attempts.posted.attempts += 1
        try:
            try:
                reply = connections.post(data)
            except StaleConnection:
                attempts.posted.resent += 1  # never read by the server: once more, on a fresh connection
                reply = connections.post(data)
            wait = attempts.replied(*reply)
        except (OSError, http.client.HTTPException) as exc:
            wait = attempts.no_reply(exc)
        if wait is None:
            break
        time.sleep(wait)
    return attempts.done()


class AsyncConnections:
    """Keep-alive connections to one target for one event loop (aiohttp's client and its C
    HTTP parser): many requests in flight on one thread, so no thread waits for another's
    interpreter lock. Make it and use it inside the loop; `close` it there.

    Args:
        target: where to send.
        limit: connections kept at most (the calls in flight).
    """

    def __init__(self, target: HttpTarget, limit: int) -> None:
        import aiohttp

        self.target = target
        self.aiohttp = aiohttp
        self.headers = {"Content-Type": "application/json", **dict(target.headers)}
        if target.api_key:
            self.headers["Authorization"] = f"Bearer {target.api_key}"
        self.limit = limit
        self.session = self._session(force_close=False)
        self.fresh: Any = None  # a session whose connections serve one request each (`StaleConnection`)

    def _session(self, *, force_close: bool) -> Any:
        aiohttp = self.aiohttp
        reuse = aiohttp.TraceConfig()
        reuse.on_connection_reuseconn.append(_note_reuse)
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self.limit, force_close=force_close,
                                           ssl=ssl.create_default_context()
                                           if self.target.url.startswith("https") else False),
            timeout=aiohttp.ClientTimeout(sock_connect=self.target.timeout, sock_read=self.target.timeout),
            trust_env=False, skip_auto_headers=("User-Agent",), trace_configs=[reuse])

    async def post(self, data: bytes, *, fresh: bool = False) -> tuple[int, str | None, bytes]:
        """POST once (as `Connections.post`, `StaleConnection` included); raises TimeoutError or
        OSError on no response. `fresh`: on a new connection, closed after the reply."""
        if fresh and self.fresh is None:
            self.fresh = self._session(force_close=True)
        session = self.fresh if fresh else self.session
        trace = {"reused": False}
        replied = False
        try:
            async with session.post(self.target.url, data=data, headers=self.headers,
                                    trace_request_ctx=trace) as response:
                replied = True
                return response.status, response.headers.get("Retry-After"), await response.read()
        except (asyncio.TimeoutError, self.aiohttp.ServerTimeoutError) as exc:
            raise TimeoutError(str(exc)) from exc
        except self.aiohttp.ClientError as exc:
            if trace["reused"] and not replied and _is_reset(exc):
                raise StaleConnection(f"{type(exc).__name__}: {exc}") from exc
            raise ConnectionError(f"{type(exc).__name__}: {exc}") from exc

    async def close(self) -> None:
        """Close every connection."""
        await self.session.close()
        if self.fresh is not None:
            await self.fresh.close()


async def _note_reuse(_session: Any, context: Any, _params: Any) -> None:
    """aiohttp's trace hook: the request's connection is a kept-alive one, reused."""
    if isinstance(context.trace_request_ctx, dict):
        context.trace_request_ctx["reused"] = True


async def apost_json(connections: AsyncConnections, body: dict | bytes, *,
                     before_attempt: Callable[[int], str | None | bool] | None = None,
                     final: Callable[[int, str], bool] | None = None) -> Posted:
    """`post_json` on an event loop: the same attempts, retries and counts.

    `before_attempt` returns a reason to stop, None to send, or True to be asked again a
    little later (a spending limit waiting for a call in flight to settle), so the loop is
    never blocked.
    """
    data = _body_bytes(body)
    attempts = _Attempts(connections.target, final)
    while True:
        if before_attempt is not None:
            refused = before_attempt(attempts.posted.attempts + 1)
            while refused is True:
                await asyncio.sleep(0.02)
                refused = before_attempt(attempts.posted.attempts + 1)
            if refused is not None:
                attempts.refused(refused)
                break
        attempts.posted.attempts += 1
        try:
            try:
                reply = await connections.post(data)
            except StaleConnection:
                attempts.posted.resent += 1  # never read by the server: once more, on a fresh connection
                reply = await connections.post(data, fresh=True)
            wait = attempts.replied(*reply)
        except OSError as exc:
            wait = attempts.no_reply(exc)
        if wait is None:
            break
        await asyncio.sleep(wait)
    return attempts.done()


__all__ = ["AsyncConnections", "Connections", "apost_json", "HttpTarget", "Posted", "RETRIED_STATUSES",
           "StaleConnection", "check_number", "post_json", "retry_after_seconds", "retry_wait"]

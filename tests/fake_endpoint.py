"""A small OpenAI-compatible HTTP endpoint with scripted faults, for tests only.

Not product code and never a model: it answers ``POST /v1/chat/completions`` (and
``GET /v1/models``) on 127.0.0.1 from a Python callable, so tests can drive LiteLLM and
DSPy over real HTTP and script what a served model or a provider does wrong: rate limits
(429 with ``Retry-After: 0``), server errors (500, 503), a request that never gets an
answer (timeout), a reply cut at ``max_tokens`` (``finish_reason: "length"``), and slow
replies (``latency``, slept per request without any global lock, so concurrent requests
overlap). Only the standard library is used (``http.server.ThreadingHTTPServer`` in a
background thread).

Usage::

    with FakeEndpoint() as ep:                      # or the `fake_endpoint` pytest fixture
        ep.reply = verdict_replies({"Is it short?": "no"})
        ep.fault = first_n(2, SERVER_ERROR)         # the first 2 requests get 500
        lm = dspy.LM("openai/fake-x", api_base=ep.base_url, api_key="k", cache=False)
        ...
        ep.requests                                 # the JSON bodies received, in order

Tokens are counted roughly (a token is a run of non-space characters with the spaces
before it), enough for usage accounting and ``max_tokens`` cuts to be deterministic.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union

from tests.fakes import field_value

# --------------------------------------------------------------------------- replies & faults


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token's log-probability and its alternatives (``top``: token -> logprob)."""

    token: str
    logprob: float
    top: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """A reply with more than text: per-token logprobs and/or an explicit finish reason.

    ``text`` may be a dict (sent as JSON text). ``logprobs`` lists one `TokenLogprob` per
    generated token; it is returned (OpenAI-shaped, ``choices[0].logprobs.content``) only
    when the request asks for ``logprobs``. When ``logprobs`` is None and the request asks
    for them, each token gets logprob 0.0 (probability 1) with itself as the only
    alternative.
    """

    text: str | dict
    logprobs: list[TokenLogprob] | None = None
    finish_reason: str = "stop"


class Fault:
    """Base class of scripted faults; return one from ``reply`` or ``fault`` callables."""


@dataclass(frozen=True)
class HttpFault(Fault):
    """Answer with HTTP ``status`` and an OpenAI-shaped error body (429 adds ``Retry-After``)."""

    status: int
    message: str = "scripted fault"
    retry_after: float | None = None

    def error_type(self) -> str:
        return {429: "rate_limit_error", 500: "server_error", 503: "service_unavailable"}.get(
            self.status, "invalid_request_error")


@dataclass(frozen=True)
class TimeoutFault(Fault):
    """Hold the request ``seconds`` (longer than the client's timeout), then close the
    connection without an answer. The sleep ends early when the endpoint stops."""

    seconds: float = 10.0


@dataclass(frozen=True)
class CutFault(Fault):
    """Truncate the reply at ``tokens`` tokens (default: the request's ``max_tokens`` or
    ``max_completion_tokens``, else 1) and report ``finish_reason: "length"`` (also when
    the reply is shorter than that: the model "would have gone on").

    The text cut is ``text`` when given, else the endpoint's ``reply`` (from a ``fault``
    script) or `verdict_reply` (when ``reply`` itself returns the CutFault)."""

    tokens: int | None = None
    text: str | dict | Reply | None = None


RATE_LIMIT = HttpFault(429, "Rate limit reached (scripted)", retry_after=0)
SERVER_ERROR = HttpFault(500, "Internal server error (scripted)")
UNAVAILABLE = HttpFault(503, "Service unavailable (scripted)")
TIMEOUT = TimeoutFault()
#: A server (or a proxy in front of it) that takes the request and hangs up without a reply,
#: well before any client timeout: on a kept-alive connection, the client cannot tell it
#: from a connection closed while idle except by checking before it sends.
HANG_UP = TimeoutFault(seconds=0.05)
CUT = CutFault()

ReplyValue = Union[str, dict, Reply, Fault]
ReplyFn = Callable[[dict], ReplyValue]
FaultFn = Callable[[dict, int], Fault | None]


def first_n(n: int, fault: Fault) -> FaultFn:
    """Fault script: the first ``n`` requests the endpoint receives get ``fault``."""
    return lambda body, index: fault if index < n else None


def when_user_contains(text: str, fault: Fault) -> FaultFn:
    """Fault script: every request whose user message(s) contain ``text`` gets ``fault``, forever."""
    return lambda body, index: fault if text in user_text(body) else None


# --------------------------------------------------------------------------- request helpers


def message_text(message: dict) -> str:
    """The text of one chat message (a string content, or the text parts of a list content)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def user_text(body: dict) -> str:
    """All user messages of a chat-completions request body, joined by newlines."""
    return "\n".join(message_text(m) for m in body.get("messages", []) if m.get("role") == "user")


def request_field(body: dict, name: str) -> str:
    """The value of DSPy input field ``name`` in a request, as ChatAdapter/JSONAdapter
    render it in the user message (``[[ ## name ## ]]\\nvalue``); "" if absent.

    The last occurrence wins (few-shot demos come before the real inputs)."""
    return field_value(user_text(body), name)


def wants_json(body: dict) -> bool:
    """Whether the request asks for a JSON answer (a ``response_format``, or JSONAdapter's
    "Respond with a JSON object" instruction)."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema"):
        return True
    return "Respond with a JSON object" in user_text(body)


def format_fields(body: dict, values: dict[str, str]) -> str | dict:
    """DSPy output field values answered in the form the request expects: a dict (sent as
    JSON) when `wants_json`, else ChatAdapter's ``[[ ## name ## ]]`` sections ending with
    ``[[ ## completed ## ]]``."""
    if wants_json(body):
        return dict(values)
    sections = [f"[[ ## {name} ## ]]\n{value}" for name, value in values.items()]
    return "\n\n".join(sections + ["[[ ## completed ## ]]"])


def verdict_replies(answers: dict[str, str] | None = None, default: str = "yes") -> ReplyFn:
    """Reply callable answering the BinEval judge signature (``JudgeBinaryQuestion``).

    ``answers`` maps a question text (the request's ``question`` field) to the verdict
    to give; other questions get ``default``. The explanation names the question, so a
    test can check which question an answer belongs to."""
    answers = dict(answers or {})

    def reply(body: dict) -> str | dict:
        question = request_field(body, "question")
        verdict = answers.get(question, default)
        return format_fields(body, {"verdict": verdict, "explanation": f"scripted {verdict} for: {question}"})

    return reply


def verdict_reply(body: dict) -> str | dict:
    """Answer any judge request with verdict "yes" (JSON or chat form, see `format_fields`)."""
    return verdict_replies()(body)


# --------------------------------------------------------------------------- tokens


_TOKEN = re.compile(r"\s*\S+|\s+")


def tokenize(text: str) -> list[str]:
    """Rough tokens: runs of non-space characters with their leading spaces ("".join = text)."""
    return _TOKEN.findall(text)


# --------------------------------------------------------------------------- the endpoint


class _Server(ThreadingHTTPServer):
    """A threading HTTP server with a listen backlog like a real one's.

    The standard library's backlog of 5 makes the kernel drop connection attempts when
    dozens of clients connect at once (the first requests of a run at ``--concurrency
    64``); they are retried only after a second, which no real server (uvicorn: 2048)
    would cause and which would be measured as the client's slowness.
    """

    daemon_threads = True
    request_queue_size = 1024


def serve_in_thread(handler: type[BaseHTTPRequestHandler], name: str) -> tuple[_Server, threading.Thread]:
    """Bind `handler` on 127.0.0.1 at a free port and serve it in a daemon thread."""
    server = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=name, daemon=True)
    thread.start()
    return server, thread


class FakeEndpoint:
    """An OpenAI-compatible endpoint on 127.0.0.1 (free port) answering from callables.

    Settings a test may change at any time (read per request):

    - ``reply``: ``(body) -> str | dict | Reply | Fault``; default `verdict_reply`.
    - ``fault``: ``(body, index) -> Fault | None`` consulted before ``reply``; ``index``
      counts requests from 0 (since the last `reset`). Default: no faults.
    - ``latency``: seconds slept per request (float, or ``(body) -> float``), without any
      lock held, so concurrent requests overlap.
    - ``cached_tokens``: ``usage.prompt_tokens_details.cached_tokens`` (int, or
      ``(body) -> int``), capped at prompt_tokens; default 0.
    - ``enforce_max_tokens``: cut any reply longer than the request's max_tokens, as a
      real server does (``finish_reason: "length"``); default True.

    Observations: ``requests`` (JSON bodies, in arrival order), ``outcomes`` (per request:
    "200", "429", "timeout", ... in completion order), ``max_in_flight`` (most requests
    being handled at once), ``billed`` (the ``usage`` of every completion the endpoint
    generated, in completion order, whether or not the client was still there to read it:
    what a provider bills; `billed_usd` prices it). Use as a context manager, or call
    `start` / `close`.
    """

    def __init__(self, reply: ReplyFn | None = None, *, latency: float | Callable[[dict], float] = 0.0,
                 cached_tokens: int | Callable[[dict], int] = 0, model: str | None = None):
        self.reply: ReplyFn = reply or verdict_reply
        self.fault: FaultFn | None = None
        self.latency = latency
        self.cached_tokens = cached_tokens
        self.enforce_max_tokens = True
        # A model id of its own (unless one is given), so that no two fakes, in this test
        # session or an earlier one on this machine, ever share DSPy cache entries: a port
        # freed by one fake is often handed to the next.
        self.model = model or f"fake-{uuid.uuid4().hex[:12]}"
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._requests: list[dict] = []
        self._outcomes: list[str] = []
        self._billed: list[dict] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self._generation = 0  # bumped by reset(): requests admitted before it are not recorded after it
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ----- lifecycle

    def start(self) -> FakeEndpoint:
        """Bind 127.0.0.1 on a free port and serve in a daemon thread."""
        endpoint = self

        class Handler(_Handler):
            owner = endpoint

        self._server, self._thread = serve_in_thread(Handler, "fake-endpoint")
        return self

    def close(self) -> None:
        """Stop serving: ends pending sleeps (latency, timeouts) and closes the socket."""
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeEndpoint:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # ----- observations

    @property
    def port(self) -> int:
        """The TCP port the endpoint listens on."""
        assert self._server is not None, "endpoint not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: the ``api_base`` to give LiteLLM / DSPy."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[dict]:
        """A copy of the chat-completions bodies received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def outcomes(self) -> list[str]:
        """A copy of what each request got ("200", "429", "500", "timeout", ...), in completion order."""
        with self._lock:
            return list(self._outcomes)

    @property
    def billed(self) -> list[dict]:
        """A copy of the ``usage`` of every completion generated so far (a provider bills
        these: those the client timed out on or hung up on are included)."""
        with self._lock:
            return list(self._billed)

    def billed_usd(self, model: str = "gpt-4o-mini") -> float:
        """`billed` priced at `model`'s prices in LiteLLM's bundled map (prompt and completion tokens)."""
        import litellm

        entry = litellm.model_cost[model]
        return sum(u["prompt_tokens"] * entry["input_cost_per_token"]
                   + u["completion_tokens"] * entry["output_cost_per_token"] for u in self.billed)

    def wait_idle(self, seconds: float = 10.0) -> bool:
        """Wait until no request is being handled (requests a client gave up on still run to
        their end here, as at a provider); True when idle within `seconds`."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with self._lock:
                if self._in_flight == 0:
                    return True
            time.sleep(0.02)
        return False

    @property
    def max_in_flight(self) -> int:
        """The largest number of chat-completions requests handled at the same time."""
        with self._lock:
            return self._max_in_flight

    def reset(self) -> None:
        """Forget received requests and outcomes, restart the request index at 0, clear
        ``fault`` and restore the default reply, latency and cached tokens."""
        with self._lock:
            self._requests.clear()
            self._outcomes.clear()
            self._billed.clear()
            self._max_in_flight = self._in_flight
            self._generation += 1
        self.reply = verdict_reply
        self.fault = None
        self.latency = 0.0
        self.cached_tokens = 0
        self.enforce_max_tokens = True

    # ----- request handling (called from handler threads)

    def _admit(self, body: dict) -> tuple[int, int]:
        """Record a request: (its index since the last reset, the reset generation)."""
        with self._lock:
            index = len(self._requests)
            self._requests.append(body)
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            return index, self._generation

    def _finish(self, outcome: str, generation: int, billed: dict | None = None) -> None:
        """Record what a request got (and the usage of the completion generated for it, if
        any); called before the answer is written, so a client that has its answer always
        finds it in `outcomes`."""
        with self._lock:
            self._in_flight -= 1
            if generation == self._generation:
                self._outcomes.append(outcome)
                if billed is not None:
                    self._billed.append(dict(billed))

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._stop.wait(seconds)

    def _value(self, setting: Any, body: dict) -> Any:
        return setting(body) if callable(setting) else setting

    def _answer(self, body: dict, index: int) -> tuple[int, dict, dict] | TimeoutFault:
        """(status, headers, JSON) for one request, or the TimeoutFault to act out."""
        self._sleep(float(self._value(self.latency, body) or 0.0))
        fault_fn = self.fault
        outcome: ReplyValue | None = fault_fn(body, index) if fault_fn is not None else None
        cut: CutFault | None = None
        if isinstance(outcome, CutFault):
            cut, outcome = outcome, outcome.text
        if outcome is None:
            outcome = self.reply(body)
            if isinstance(outcome, CutFault):
                cut, outcome = outcome, outcome.text if outcome.text is not None else verdict_reply(body)
        if isinstance(outcome, TimeoutFault):
            return outcome
        if isinstance(outcome, HttpFault):
            headers = {} if outcome.retry_after is None else {"Retry-After": f"{outcome.retry_after:g}"}
            error = {"error": {"message": outcome.message, "type": outcome.error_type(),
                               "code": str(outcome.status)}}
            return outcome.status, headers, error
        if isinstance(outcome, Fault):
            raise TypeError(f"unknown fault {outcome!r}")
        return 200, {}, self._completion(body, outcome, cut)

    def _completion(self, body: dict, value: str | dict | Reply, cut: CutFault | None) -> dict:
        reply = value if isinstance(value, Reply) else Reply(value)
        text = reply.text if isinstance(reply.text, str) else json.dumps(reply.text)
        tokens = tokenize(text)
        logprobs = list(reply.logprobs) if reply.logprobs is not None else [
            TokenLogprob(t, 0.0, {t: 0.0}) for t in tokens]
        finish_reason = reply.finish_reason
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        limit = None
        if cut is not None:
            limit = cut.tokens if cut.tokens is not None else (max_tokens or 1)
        elif self.enforce_max_tokens and max_tokens:
            limit = int(max_tokens)
        if cut is not None or (limit is not None and len(tokens) > limit):
            tokens, logprobs, finish_reason = tokens[:limit], logprobs[:limit], "length"
            text = "".join(tokens)
        prompt_tokens = sum(len(tokenize(message_text(m))) for m in body.get("messages", []))
        cached = min(int(self._value(self.cached_tokens, body) or 0), prompt_tokens)
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": finish_reason,
            "logprobs": None,
        }
        if body.get("logprobs"):
            top_n = int(body.get("top_logprobs") or 0)
            choice["logprobs"] = {"content": [_logprob_entry(lp, top_n) for lp in logprobs]}
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.model),
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": len(tokens),
                "total_tokens": prompt_tokens + len(tokens),
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }


def _logprob_entry(lp: TokenLogprob, top_n: int) -> dict:
    top = sorted(lp.top.items(), key=lambda kv: kv[1], reverse=True)[:top_n]
    return {
        "token": lp.token,
        "logprob": lp.logprob,
        "bytes": list(lp.token.encode("utf-8")),
        "top_logprobs": [{"token": t, "logprob": v, "bytes": list(t.encode("utf-8"))} for t, v in top],
    }


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 handler delegating to its `FakeEndpoint` (``owner``)."""

    owner: FakeEndpoint
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes; without TCP_NODELAY, Nagle's algorithm and the
        # client's delayed ACK hold the body back about 40 ms per response on a kept-alive connection.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send_json(self, status: int, payload: dict, headers: dict | None = None) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, completion: dict, body: dict) -> None:
        """The completion as server-sent events (one content chunk, one finish chunk, usage)."""
        choice = completion["choices"][0]
        base = {k: completion[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
        events = [
            base | {"choices": [{"index": 0, "delta": {"role": "assistant", "content": choice["message"]["content"]},
                                 "logprobs": choice["logprobs"], "finish_reason": None}]},
            base | {"choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
        ]
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append(base | {"choices": [], "usage": completion["usage"]})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for event in events:
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send_json(200, {"object": "list", "data": [
                {"id": self.owner.model, "object": "model", "created": 0, "owned_by": "tests"}]})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            self._send_json(400, {"error": {"message": f"bad JSON: {exc}", "type": "invalid_request_error"}})
            return
        owner = self.owner
        index, generation = owner._admit(body)
        try:
            answer = owner._answer(body, index)
        except Exception as exc:  # a bug in a test's reply/fault callable: make it visible
            owner._finish("500-callable-error", generation)
            self._send_json(500, {"error": {"message": f"fake endpoint callable failed: {exc!r}",
                                            "type": "server_error"}})
            return
        if isinstance(answer, TimeoutFault):
            owner._finish("timeout", generation)
            owner._sleep(answer.seconds)
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        status, headers, payload = answer
        owner._finish(str(status), generation, payload.get("usage") if status == 200 else None)
        try:
            if status == 200 and body.get("stream"):
                self._send_stream(payload, body)
            else:
                self._send_json(status, payload, headers)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout): nothing to answer


@contextmanager
def fake_endpoint_running(kind: type[FakeEndpoint] | None = None, **kwargs: Any) -> Iterator[FakeEndpoint]:
    """Context manager: a started `FakeEndpoint` (or subclass `kind`, e.g. the batch fake;
    kwargs as its constructor), closed on exit."""
    endpoint = (kind or FakeEndpoint)(**kwargs)
    endpoint.start()
    try:
        yield endpoint
    finally:
        endpoint.close()


def serve_until_killed(endpoint: FakeEndpoint) -> None:
    """Start `endpoint`, print its base URL on one line, serve until killed or Ctrl-C."""
    endpoint.start()
    print(endpoint.base_url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        endpoint.close()


def main(argv: list[str] | None = None) -> None:
    """Serve a `FakeEndpoint` in its own process (``python -m tests.fake_endpoint --latency 0.5``).

    Benchmarks use this so that the endpoint's threads do not compete with the client for
    the client's interpreter lock. Prints the base URL on one line, then serves until
    killed. Only answers judge requests with "yes" (`verdict_reply`).
    """
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds slept per request")
    parser.add_argument("--cached-tokens", type=int, default=0, help="usage.prompt_tokens_details.cached_tokens")
    args = parser.parse_args(argv)
    serve_until_killed(FakeEndpoint(latency=args.latency, cached_tokens=args.cached_tokens))


if __name__ == "__main__":
    main()

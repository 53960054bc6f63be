"""The benchmarks' scripted OpenAI-compatible endpoint in a process of its own, cheap per request.

Usage (the benchmarks start it themselves; by hand, from the repository root)::

    python -m benchmarks.scripted_server                 # prints its base URL, serves until killed
    python -m benchmarks.scripted_server --latency 0.2
    python -m benchmarks.scripted_server --measure 64      # CPU per request, this server and the threaded one

Why it exists: `benchmarks.engines.TimedEndpoint` serves `tests/fake_endpoint.py` from threads of
the benchmark's own process (``http.server``: a thread per connection, the standard library's
header parsing, one interpreter lock shared with the benchmark's samplers). It spends 0.6-1.0
CPU-ms per request on this machine, as much as a third of what a Ray worker spends, on the same
2 cores: in the Ray benchmark that CPU, not Ray, was what decided the two-raylet ratio. This
server gives the same replies for less: one process, one ``asyncio`` event loop, a bare
``asyncio.Protocol`` speaking HTTP/1.1 with keep-alive (no framework, no thread per connection).

What it answers, exactly as `TimedEndpoint` does (a test checks it against `FakeEndpoint`):

* ``POST /v1/chat/completions`` (or ``/chat/completions``): the verdict of
  `benchmarks.engines.scripted_verdict` (fixed by the item's output and the question, about 1
  in 4 "no"; a JSON object or ChatAdapter's sections, as the request asks), as an OpenAI chat
  completion with the usage `tests.fake_endpoint.FakeEndpoint` reports (tokens counted by
  `tests.fake_endpoint.tokenize`'s rule), its ``max_tokens`` cut, and its log-probabilities when
  asked (each token certain, with itself as the only alternative). Streaming is not served
  (400): no benchmark asks for it.
* ``GET /v1/models``: one model.
* ``GET /_timings?since=A,R``: the ``time.monotonic()`` instants (the machine's monotonic clock,
  the same in every process) at which requests arrived and were answered, from the `A`-th
  arrival and `R`-th reply on, as JSON ``{"arrived": N, "replied": M, "arrivals": [...], "replies": [...]}``: what the
  benchmark reads instead of `TimedEndpoint`'s lists. Not counted as a request.

`ScriptedServer` starts it as a subprocess and offers `TimedEndpoint`'s interface (`mark`,
`count`, `window`, `arrivals_since`, `replies_since`, ``base_url``) plus ``pid`` (so its CPU is
read from ``/proc``, apart from the benchmark's). The latency, when set, is slept on the event
loop's timer (``loop.call_later``), so concurrent requests overlap. No figure it takes part in is
a quality claim: the verdicts are scripted.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_REASONS = {200: b"OK", 400: b"Bad Request", 404: b"Not Found"}


def token_count(text: str) -> int:
    """How many tokens `tests.fake_endpoint.tokenize` finds in `text` (runs of non-space
    characters with the spaces before them, and trailing spaces as one more), without the regex."""
    return len(text.split()) + (1 if text[-1:].isspace() else 0)


def completion(body: dict, model: str) -> dict:
    """The chat completion `FakeEndpoint` sends for `body` with `scripted_verdict`'s reply (no
    fault, no cut other than its ``max_tokens`` rule), but for its ``id`` and ``created``."""
    from benchmarks.engines import scripted_verdict
    from tests.fake_endpoint import message_text, tokenize

    value = scripted_verdict(body)
    text = value if isinstance(value, str) else json.dumps(value)
    finish = "stop"
    completion_tokens = token_count(text)
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if limit and completion_tokens > int(limit):  # rare (never at the benchmarks' settings): the exact cut
        text, completion_tokens, finish = "".join(tokenize(text)[:int(limit)]), int(limit), "length"
    prompt_tokens = sum(token_count(message_text(m)) for m in body.get("messages", []))
    logprobs = None
    if body.get("logprobs"):  # as FakeEndpoint without scripted logprobs: each token certain, its own alternative
        top_n = int(body.get("top_logprobs") or 0)
        entries = [{"token": t, "logprob": 0.0, "bytes": list(t.encode("utf-8"))} for t in tokenize(text)]
        logprobs = {"content": [entry | {"top_logprobs": [dict(entry)][:top_n]} for entry in entries]}
    return {"id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", model),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": finish, "logprobs": logprobs}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens,
                      "prompt_tokens_details": {"cached_tokens": 0}}}


class _Records:
    """Arrival and reply instants (``time.monotonic()``), appended by the one event loop thread."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        self.replies: list[float] = []


class _Http(asyncio.Protocol):
    """One client connection: HTTP/1.1 requests with ``Content-Length`` bodies, kept alive."""

    def __init__(self, records: _Records, latency: float, model: str) -> None:
        self.records, self.latency, self.model = records, latency, model
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            import socket

            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].decode("latin-1")
            lines = head.split("\r\n")
            length, close = 0, False
            for line in lines[1:]:
                name, _, value = line.partition(":")
                name = name.strip().lower()
                if name == "content-length":
                    length = int(value.strip())
                elif name == "connection" and value.strip().lower() == "close":
                    close = True
            if len(self.buffer) < end + 4 + length:
                return
            raw = self.buffer[end + 4:end + 4 + length]
            self.buffer = self.buffer[end + 4 + length:]
            method, path, *_ = lines[0].split(" ")
            self.handle(method, path, raw, close)

    def handle(self, method: str, path: str, raw: bytes, close: bool) -> None:
        route = path.split("?", 1)[0].rstrip("/")
        if method == "POST" and route in ("/v1/chat/completions", "/chat/completions"):
            self.records.arrivals.append(time.monotonic())
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError as exc:
                self.send(400, {"error": {"message": f"bad JSON: {exc}", "type": "invalid_request_error"}}, close)
                return
            if body.get("stream"):
                self.send(400, {"error": {"message": "the benchmark's endpoint does not stream",
                                          "type": "invalid_request_error"}}, close)
                return
            if self.latency > 0:
                asyncio.get_running_loop().call_later(self.latency, self.answer, body, close)
            else:
                self.answer(body, close)
        elif method == "GET" and route in ("/v1/models", "/models"):
            self.send(200, {"object": "list", "data": [{"id": self.model, "object": "model", "created": 0,
                                                        "owned_by": "benchmarks"}]}, close)
        elif method == "GET" and route == "/_timings":
            since = path.partition("since=")[2] or "0,0"
            a, _, r = since.partition(",")
            self.send(200, {"arrived": len(self.records.arrivals), "replied": len(self.records.replies),
                            "arrivals": self.records.arrivals[int(a):],
                            "replies": self.records.replies[int(r or 0):]}, close)
        else:
            self.send(404, {"error": {"message": f"no route {path}", "type": "not_found"}}, close)

    def answer(self, body: dict, close: bool) -> None:
        try:
            payload = completion(body, self.model)
        except Exception as exc:  # noqa: BLE001 - a bug here must be visible to the client
            self.send(500, {"error": {"message": f"scripted server failed: {exc!r}", "type": "server_error"}}, close)
            return
        self.records.replies.append(time.monotonic())
        self.send(200, payload, close)

    def send(self, status: int, payload: dict, close: bool) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        data = json.dumps(payload).encode()
        head = (b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n"
                % (status, _REASONS.get(status, b"Error"), len(data), b"Connection: close\r\n" if close else b""))
        self.transport.write(head + data)
        if close:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


async def serve(latency: float, model: str, port: int = 0) -> None:
    """Serve on 127.0.0.1:`port` (0: a free one), print the base URL on one line, until killed."""
    records = _Records()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Http(records, latency, model), "127.0.0.1", port, backlog=2048)
    print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", flush=True)
    async with server:
        await server.serve_forever()


class ScriptedServer:
    """`serve` in a subprocess, with `benchmarks.engines.TimedEndpoint`'s interface.

    Args:
        latency: seconds before each reply (overlapping: a timer, not a sleep).
        model: the model id ``/v1/models`` lists.

    Use as a context manager; the process is killed (by its pid) on exit.
    """

    def __init__(self, latency: float = 0.0, *, model: str = "fake-scripted") -> None:
        self.latency, self.model = latency, model
        self.process: subprocess.Popen | None = None
        self.base_url = ""

    def __enter__(self) -> ScriptedServer:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.scripted_server", "--latency", str(self.latency), "--model", self.model],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline().strip()  # type: ignore[union-attr]
        if not line.startswith("http://"):
            self.__exit__()
            raise RuntimeError(f"the scripted server did not start (it printed {line!r})")
        self.base_url = line
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    @property
    def pid(self) -> int:
        assert self.process is not None, "not started"
        return self.process.pid

    def _timings(self, arrivals: int = 0, replies: int = 0) -> dict[str, list[float]]:
        with urllib.request.urlopen(f"{self.base_url.removesuffix('/v1')}/_timings?since={arrivals},{replies}",
                                    timeout=30) as reply:
            return json.loads(reply.read())

    def mark(self) -> tuple[int, int]:
        """(arrivals, replies) so far (pass to `count` / `window`)."""
        timings = self._timings(10**12, 10**12)  # the counts only
        return timings["arrived"], timings["replied"]

    def arrivals_since(self, since: tuple[int, int]) -> list[float]:
        return self._timings(since[0], 10**12)["arrivals"]

    def replies_since(self, since: tuple[int, int]) -> list[float]:
        return self._timings(10**12, since[1])["replies"]

    def count(self, since: tuple[int, int]) -> int:
        """Requests arrived since `since`."""
        return len(self.arrivals_since(since))

    def window(self, since: tuple[int, int], skip: int = 0) -> tuple[int, float, float] | None:
        """As `TimedEndpoint.window`: (replies, first arrival, last reply) since `since`, the first
        `skip` arrivals (and replies) left out; None without any."""
        timings = self._timings(since[0] + skip, since[1] + skip)
        if not timings["arrivals"] or not timings["replies"]:
            return None
        return len(timings["replies"]), timings["arrivals"][0], timings["replies"][-1]


def measure(threads: int, per_thread: int) -> None:
    """Print the CPU-ms per request of this server and of tests/fake_endpoint.py's (each in a
    process of its own) under a client doing no work (`benchmarks.engines.post_bare`, another
    process, `threads` keep-alive connections, `per_thread` requests each), with the load average.
    ``python -m benchmarks.scripted_server --measure 64``."""
    from benchmarks.engines import load_average
    from benchmarks.ray_cluster import cpu_seconds

    user = ("[[ ## input ## ]]\n" + "The match ended two to one after a late goal. " * 20
            + "\n\n[[ ## output ## ]]\nSummary number 3\n\n[[ ## question ## ]]\nDoes it meet requirement 3?"
            "\n\nRespond with a JSON object")
    body = json.dumps({"model": "m", "response_format": {"type": "json_object"},
                       "messages": [{"role": "system", "content": "You are a judge. " * 20},
                                    {"role": "user", "content": user}]})

    def run(base_url: str, pid: int, label: str) -> None:
        code = (f"from benchmarks.engines import post_bare; post_bare({base_url!r}, {body!r}, "
                f"concurrency={threads}, per_thread={per_thread})")
        client = [sys.executable, "-c", code]
        before = cpu_seconds(pid) or 0.0
        subprocess.run(client, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
        spent = (cpu_seconds(pid) or 0.0) - before
        print(f"{label}: {1000 * spent / (threads * per_thread):.3f} CPU-ms per request "
              f"({threads * per_thread} requests, {threads} connections; {load_average()})")

    with ScriptedServer() as server:
        run(server.base_url, server.pid, "benchmarks/scripted_server.py (asyncio)")
    threaded = subprocess.Popen(  # tests/fake_endpoint.py with the same replies, in its own process
        [sys.executable, "-c", ("from benchmarks.engines import scripted_verdict; from tests.fake_endpoint import "
                                "FakeEndpoint, serve_until_killed; serve_until_killed(FakeEndpoint(reply=scripted_verdict))")],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True)
    try:
        run(threaded.stdout.readline().strip(), threaded.pid, "tests/fake_endpoint.py (threads)")  # type: ignore[union-attr]
    finally:
        threaded.kill()
        threaded.wait()


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    parser.add_argument("--model", default="fake-scripted")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--measure", type=int, metavar="THREADS", help="print both endpoints' CPU per request "
                        "under a bare client of THREADS connections (`measure`), then exit")
    args = parser.parse_args(argv)
    if args.measure:
        measure(args.measure, max(1, 2560 // args.measure))
        return
    import tests.fake_endpoint  # noqa: F401 - what `completion` uses (and DSPy, through tests.fakes), imported
    # before the first request: none of that start-up is in a request's CPU

    try:
        asyncio.run(serve(args.latency, args.model, args.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

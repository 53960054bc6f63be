"""The Ray engine's transport (`binaryeval_dspy.engines.ray_data`) against scripted endpoints.

Tests marked ``ray`` share one local Ray (the session fixture ``ray_cluster``, 2 CPUs,
10-20 s to start) and are skipped, with the reason, when the ``ray`` extra is missing.
The endpoints are tests/fake_endpoint.py's scripted server (and, for replies it cannot
script, a plain-text one below); their replies are scripted text, never a model's.
The test that closes a stream early kills its Ray workers, so it comes last.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import ClassVar

import pytest

from binaryeval_dspy.engines.ray_data import (
    HttpTarget,
    PreparedRequest,
    RayEngineSettings,
    RequestReply,
    ray_session,
    send_requests,
)
from binaryeval_dspy.errors import ConfigError, MissingExtraError
from tests.fake_endpoint import (
    RATE_LIMIT,
    SERVER_ERROR,
    UNAVAILABLE,
    FakeEndpoint,
    Fault,
    HttpFault,
    TimeoutFault,
    serve_in_thread,
    user_text,
)

# Ray Data 2.60 sets deprecated fields of its own DataContext (use_polars, use_push_based_shuffle,
# ...) when copying one, each a DeprecationWarning from ray.data.context.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-test-NEVER-IN-A-ROW-7f3a"


def _request(text: str) -> PreparedRequest:
    """A request whose user message is `text` and whose custom_id is ``id-<text>``."""
    return PreparedRequest(f"id-{text}", {"model": "fake", "max_tokens": 50,
                                          "messages": [{"role": "user", "content": text}]})


def _echo(body: dict) -> str:
    return f"echo: {user_text(body)}"


def _content(reply: RequestReply) -> str:
    assert reply.body is not None, reply
    return reply.body["choices"][0]["message"]["content"]


def _faults_by_text(script: dict[str, list[Fault]]):
    """Fault script: the n-th request with user text T gets ``script[T][n]`` (then none)."""
    seen: Counter[str] = Counter()
    lock = threading.Lock()

    def fault(body: dict, index: int) -> Fault | None:
        text = user_text(body)
        with lock:
            n = seen[text]
            seen[text] += 1
        faults = script.get(text, [])
        return faults[n] if n < len(faults) else None

    return fault


def _by_id(replies: list[RequestReply]) -> dict[str, RequestReply]:
    ids = [reply.custom_id for reply in replies]
    assert len(ids) == len(set(ids)), Counter(ids).most_common(3)
    return {reply.custom_id: reply for reply in replies}


@pytest.fixture
def endpoint() -> Iterator[FakeEndpoint]:
    with FakeEndpoint(_echo) as ep:
        yield ep


class _TextHandler(BaseHTTPRequestHandler):
    """A server FakeEndpoint cannot play: a 500 with a plain-text body, a 200 that is not JSON."""

    protocol_version = "HTTP/1.1"
    seen_headers: ClassVar[list[tuple[str | None, str | None]]] = []  # (Authorization, X-Run) per request

    def log_message(self, format, *args) -> None:
        pass

    def do_POST(self) -> None:
        self.seen_headers.append((self.headers.get("Authorization"), self.headers.get("X-Run")))
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = user_text(body)
        if text == "text-500":
            status, kind, data = 500, "text/plain", b"upstream exploded (scripted)"
        elif text == "not-json":
            status, kind, data = 200, "text/html", b"<html>proxy sign-in page (scripted)</html>"
        else:
            status, kind = 200, "application/json"
            data = json.dumps({"choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": _echo(body)}}]}).encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


# --------------------------------------------------------------------------- without Ray


def test_settings_out_of_range_are_refused():
    for bad in ({"in_flight": 0}, {"batch_size": 0}, {"window": 0}, {"num_cpus_per_task": 0.0},
                {"in_flight": 2.5}, {"address": "auto", "num_cpus": 2}, {"num_cpus": 0}):
        with pytest.raises(ConfigError):
            RayEngineSettings(**bad)
    for bad in ({"timeout": 0}, {"max_retries": -1}, {"backoff": -0.1}):
        with pytest.raises(ConfigError):
            HttpTarget("http://127.0.0.1:9/v1", **bad)
    with pytest.raises(ConfigError):
        HttpTarget(" ")
    with pytest.raises(ConfigError):
        send_requests([], HttpTarget("http://127.0.0.1:9/v1"), in_flight=0)
    assert SECRET not in repr(HttpTarget("http://127.0.0.1:9/v1", api_key=SECRET))


def test_importing_the_library_and_the_engine_does_not_import_ray():
    code = ("import sys, binaryeval_dspy, binaryeval_dspy.engines.ray_data\n"
            "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_a_missing_ray_extra_stops_with_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingExtraError) as info:
        send_requests([_request("a")], HttpTarget("http://127.0.0.1:9/v1"))
    with pytest.raises(MissingExtraError) as info_session, ray_session():
        pass
    for exc in (info.value, info_session.value):
        text = str(exc)
        assert "\n" not in text and "'ray' extra" in text and "pip install 'binaryeval-dspy[ray]'" in text, text


def test_sending_outside_a_ray_session_is_refused(monkeypatch):
    ray = pytest.importorskip("ray", reason="the ray extra is not installed")
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    with pytest.raises(ConfigError, match="active Ray session"):
        send_requests([_request("a")], HttpTarget("http://127.0.0.1:9/v1"))


# --------------------------------------------------------------------------- one local Ray

@pytest.mark.ray
@pytest.mark.usefixtures("ray_cluster")
def test_the_local_session_is_quiet_and_sized_for_the_machine():
    import os

    import ray

    assert os.environ.get("RAY_USAGE_STATS_ENABLED") == "0"
    # token authentication on (issue 30), with a token held in the environment only: none under the home folder
    assert os.environ.get("RAY_AUTH_MODE") == "token" and len(os.environ.get("RAY_AUTH_TOKEN", "")) == 64
    resources = ray.cluster_resources()
    assert resources["CPU"] == 2
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert resources["object_store_memory"] <= max(ram * 0.1, 128 * 2**20) + 2**20
    with ray_session():  # a session already running is used and left running
        pass
    assert ray.is_initialized()


@pytest.mark.ray
@pytest.mark.usefixtures("ray_cluster")
def test_every_reply_maps_back_to_its_request(endpoint):
    """Shuffled latencies, 3 windows (40 requests, 16 per dataset), 4 tasks of 2 threads."""
    texts = [f"q{i:02d}" for i in range(40)]
    latencies = [0.02 * i for i in range(len(texts))]
    random.Random(7).shuffle(latencies)
    latency_of = dict(zip(texts, latencies))
    endpoint.latency = lambda body: latency_of[user_text(body)]
    target = HttpTarget(endpoint.base_url, api_key=SECRET, headers=(("X-Run", "test"),))

    replies = list(send_requests([_request(t) for t in texts], target, in_flight=8, batch_size=2, window=16))

    by_id = _by_id(replies)
    assert sorted(by_id) == sorted(f"id-{t}" for t in texts)
    for text in texts:
        reply = by_id[f"id-{text}"]
        assert reply.ok and reply.error is None and reply.status == 200 and reply.attempts == 1, reply
        assert _content(reply) == f"echo: {text}"
        assert reply.seconds >= latency_of[text]
    assert 1 < endpoint.max_in_flight <= 8
    assert all(SECRET not in repr(reply) for reply in replies)


@pytest.mark.ray
@pytest.mark.usefixtures("ray_cluster")
def test_rate_limits_and_server_errors_are_retried_and_counted(endpoint):
    endpoint.fault = _faults_by_text({"limited": [RATE_LIMIT], "flaky": [SERVER_ERROR, UNAVAILABLE]})
    texts = ["limited", "flaky", "fine-1", "fine-2"]
    target = HttpTarget(endpoint.base_url, max_retries=2, backoff=0.01)

    by_id = _by_id(list(send_requests([_request(t) for t in texts], target, in_flight=4, batch_size=2)))

    assert {cid: (r.ok, r.status, r.attempts) for cid, r in by_id.items()} == {
        "id-limited": (True, 200, 2), "id-flaky": (True, 200, 3), "id-fine-1": (True, 200, 1),
        "id-fine-2": (True, 200, 1)}
    assert _content(by_id["id-flaky"]) == "echo: flaky"
    assert sorted(endpoint.outcomes) == sorted(["429", "500", "503"] + ["200"] * 4)


@pytest.mark.ray
@pytest.mark.usefixtures("ray_cluster")
def test_persistent_failures_become_error_rows_and_the_others_succeed(endpoint):
    endpoint.fault = _faults_by_text({"broken": [SERVER_ERROR] * 10, "refused": [HttpFault(400, "bad request")]})
    texts = ["broken", "refused", "fine-1", "fine-2", "fine-3"]
    target = HttpTarget(endpoint.base_url, max_retries=2, backoff=0.01)
    by_id = _by_id(list(send_requests([_request(t) for t in texts], target, in_flight=4, batch_size=2)))

    broken, refused = by_id["id-broken"], by_id["id-refused"]
    assert (broken.ok, broken.body, broken.status, broken.attempts) == (False, None, 500, 3)
    assert broken.error.startswith("HTTP 500: ") and "Internal server error (scripted)" in broken.error
    assert (refused.status, refused.attempts) == (400, 1)  # a client error is not retried
    assert refused.error.startswith("HTTP 400: ") and "bad request" in refused.error
    assert [_content(by_id[f"id-fine-{i}"]) for i in (1, 2, 3)] == ["echo: fine-1", "echo: fine-2", "echo: fine-3"]

    server, thread = serve_in_thread(_TextHandler, "text-endpoint")
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/v1"
        texts = ["text-500", "not-json", "fine"]
        target = HttpTarget(base, api_key=SECRET, max_retries=1, backoff=0.01, headers=(("X-Run", "r1"),))
        _TextHandler.seen_headers.clear()
        by_id = _by_id(list(send_requests([_request(t) for t in texts], target, in_flight=4, batch_size=2)))
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    text_500, not_json = by_id["id-text-500"], by_id["id-not-json"]
    assert (text_500.error, text_500.status, text_500.attempts) == ("HTTP 500: upstream exploded (scripted)", 500, 2)
    assert not_json.body is None and not_json.status == 200 and not_json.attempts == 1
    assert not_json.error.startswith("HTTP 200: reply is not a JSON object: <html>")
    assert by_id["id-fine"].ok and _content(by_id["id-fine"]) == "echo: fine"
    assert set(_TextHandler.seen_headers) == {(f"Bearer {SECRET}", "r1")}  # sent, on every attempt
    assert len(_TextHandler.seen_headers) == 4
    assert all(SECRET not in repr(reply) for reply in by_id.values())


@pytest.mark.ray
@pytest.mark.usefixtures("ray_cluster")
def test_a_timeout_and_a_refused_connection_become_error_rows(endpoint):
    endpoint.fault = _faults_by_text({"stuck": [TimeoutFault(seconds=5.0)] * 3})
    target = HttpTarget(endpoint.base_url, timeout=1.0, max_retries=1, backoff=0.01)
    by_id = _by_id(list(send_requests([_request("stuck"), _request("fine")], target, in_flight=2, batch_size=2)))

    stuck = by_id["id-stuck"]
    assert (stuck.error, stuck.status, stuck.attempts, stuck.body) == ("timeout after 1 s", None, 2, None)
    assert stuck.seconds >= 2.0
    assert by_id["id-fine"].ok

    closed = FakeEndpoint().start()
    base = closed.base_url
    closed.close()  # nothing listens on that port any more
    replies = list(send_requests([_request("a"), _request("b")], HttpTarget(base, max_retries=1, backoff=0.01),
                                 in_flight=2, batch_size=2))
    assert [(r.status, r.attempts, r.error.startswith("connection error: ")) for r in replies] == [(None, 2, True)] * 2


@pytest.mark.ray
@pytest.mark.usefixtures("ray_cluster")
def test_bad_requests_are_refused_before_anything_is_sent(endpoint):
    target = HttpTarget(endpoint.base_url)
    with pytest.raises(ConfigError, match="share the custom_id 'id-a'"):
        list(send_requests([_request("a"), _request("b"), _request("a")], target))
    with pytest.raises(ConfigError, match="not JSON-serializable"):
        list(send_requests([PreparedRequest("x", {"messages": {1, 2}})], target))
    assert endpoint.requests == []


@pytest.mark.ray
@pytest.mark.usefixtures("ray_cluster")
def test_replies_stream_before_the_last_request_is_answered(endpoint):
    """One task of two threads: one thread holds the slow request, the other sends the rest,
    whose replies must reach the driver while that task is still running."""
    endpoint.latency = lambda body: 5.0 if user_text(body) == "slow" else 0.05
    texts = ["slow"] + [f"fast-{i}" for i in range(11)]
    stream = send_requests([_request(t) for t in texts], HttpTarget(endpoint.base_url), in_flight=2, batch_size=2)

    first = next(stream)
    answered_at_first = len(endpoint.outcomes)
    rest = list(stream)

    assert first.custom_id != "id-slow" and first.ok
    assert answered_at_first < len(texts)  # the slow request was still out
    by_id = _by_id([first, *rest])
    assert len(by_id) == len(texts) and all(reply.ok for reply in by_id.values())
    assert by_id["id-slow"].seconds >= 5.0


@pytest.mark.ray
@pytest.mark.usefixtures("ray_cluster")
def test_closing_the_stream_stops_sending_and_ray_stays_usable(endpoint):
    """Last: closing cancels the dataset's tasks, which kills their worker processes."""
    endpoint.latency = 0.3
    texts = [f"q{i:03d}" for i in range(200)]
    stream = send_requests([_request(t) for t in texts], HttpTarget(endpoint.base_url), in_flight=4, batch_size=2)
    assert next(stream).ok
    stream.close()
    time.sleep(1.0)
    sent = len(endpoint.requests)
    time.sleep(1.5)
    assert len(endpoint.requests) == sent < len(texts)

    replies = list(send_requests([_request("after-1"), _request("after-2")], HttpTarget(endpoint.base_url)))
    assert sorted(_content(r) for r in replies) == ["echo: after-1", "echo: after-2"]


@pytest.mark.ray
def test_a_session_shuts_down_after_an_exception_and_restores_the_environment():
    """In a process of its own (a second local Ray, beside the session's)."""
    pytest.importorskip("ray", reason="the ray extra is not installed")
    code = """
import glob, os, ray
from binaryeval_dspy.engines.ray_data import ray_session
before = set(glob.glob("/tmp/bineval-ray-*"))
os.environ.pop("RAY_AUTH_MODE", None)
try:
    with ray_session(num_cpus=1):
        assert ray.is_initialized() and os.environ["RAY_AUTH_MODE"] == "token"
        raise KeyError("boom")
except KeyError:
    pass
print(ray.is_initialized(), os.environ.get("RAY_AUTH_MODE"), set(glob.glob("/tmp/bineval-ray-*")) - before)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "False None set()"

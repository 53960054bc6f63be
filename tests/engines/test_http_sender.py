"""The direct route to an OpenAI-compatible endpoint (`HttpSender` on `http_client`), against scripted endpoints.

The same sender runs in this process (the live engine) and in the Ray engine's workers, so
what it does with retries, failures, keys and the request form is checked here once,
without Ray. The endpoints are tests/fake_endpoint.py's scripted server and, for replies it
cannot script, a plain-text one below; their replies are scripted text, never a model's.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import ClassVar

import pytest

from binaryeval_dspy.engines.http_client import AsyncConnections, Connections, HttpTarget, apost_json, post_json
from binaryeval_dspy.engines.senders import HttpSender, http_spec
from binaryeval_dspy.errors import ConfigError
from binaryeval_dspy.lm.calls import Answer
from binaryeval_dspy.lm.factory import make_lm
from binaryeval_dspy.programs.bineval import BinEval, question_verdict
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from tests.fake_endpoint import (
    RATE_LIMIT,
    SERVER_ERROR,
    UNAVAILABLE,
    FakeEndpoint,
    Fault,
    HttpFault,
    TimeoutFault,
    request_field,
    serve_in_thread,
    verdict_replies,
)

SECRET = "sk-test-NEVER-IN-AN-ANSWER-7f3a"
QUESTIONS = QuestionSet(task_prompt="Summarize.", dimensions=["coverage"], questions=[
    BinaryQuestion(id=f"q{i}", dimension="coverage", text=f"Is point {i} covered?") for i in range(1, 6)])


def _faults_by_question(script: dict[str, list[Fault]]):
    """Fault script: the n-th request asking question T gets ``script[T][n]`` (then none)."""
    seen: Counter[str] = Counter()
    lock = threading.Lock()

    def fault(body: dict, index: int) -> Fault | None:
        text = request_field(body, "question")
        with lock:
            n = seen[text]
            seen[text] += 1
        faults = script.get(text, [])
        return faults[n] if n < len(faults) else None

    return fault


@pytest.fixture
def endpoint() -> Iterator[FakeEndpoint]:
    with FakeEndpoint(verdict_replies({"Is point 2 covered?": "no"})) as ep:
        yield ep


def _sender(base_url: str, model: str, *, retries: int = 2, timeout: float | None = None,
            api_key_env: str | None = None) -> tuple[HttpSender, BinEval]:
    handle = make_lm(base_url, model=model, cache=False, timeout=timeout, api_key_env=api_key_env)
    handle.lm.num_retries = retries
    spec = http_spec(handle)
    spec.target = HttpTarget(spec.target.base_url, api_key=spec.target.api_key, timeout=spec.target.timeout,
                             max_retries=retries, backoff=0.01)
    return HttpSender(spec, lm=handle.lm, adapter=handle.adapter), BinEval(QUESTIONS, logprobs="off")


@pytest.fixture(params=["blocking", "event-loop"])
def route(request) -> str:
    """How the sender's POST goes: `HttpSender.answer` (http.client, the Ray workers' and a
    one-at-a-time run's way) or `HttpSender.apost` on an event loop (the live engine's)."""
    return request.param


def _on_a_loop(sender: HttpSender, call) -> Answer:
    """`call`'s answer with its POSTs on an event loop, as the live engine sends them."""
    async def run() -> Answer:
        connections = sender.async_connections(4)
        try:
            exchange = sender.prepare(call)
            while exchange.answer is None:
                await sender.apost(exchange, connections)
                exchange = sender.complete(exchange)
            return exchange.answer
        finally:
            await connections.close()

    return asyncio.run(run())


def _ask(sender: HttpSender, program: BinEval, number: int, route: str = "blocking") -> tuple[Answer, str]:
    call = program.question_call("An article.", "A summary.", QUESTIONS.question(f"q{number}"))
    answer = sender.answer(call) if route == "blocking" else _on_a_loop(sender, call)
    return answer, question_verdict(QUESTIONS.question(f"q{number}"), answer).verdict


def test_targets_out_of_range_are_refused_and_keys_never_shown():
    for bad in ({"timeout": 0}, {"max_retries": -1}, {"backoff": -0.1}):
        with pytest.raises(ConfigError):
            HttpTarget("http://127.0.0.1:9/v1", **bad)
    with pytest.raises(ConfigError):
        HttpTarget(" ")
    assert SECRET not in repr(HttpTarget("http://127.0.0.1:9/v1", api_key=SECRET))


def test_answers_come_back_read_and_counted(endpoint, route):
    sender, program = _sender(endpoint.base_url, endpoint.model)
    answers = [_ask(sender, program, n, route) for n in (1, 2)]
    assert [verdict for _, verdict in answers] == ["yes", "no"]
    assert all(a.usage.lm_calls == 1 and a.usage.failed_calls == 0 and a.usage.prompt_tokens > 0 for a, _ in answers)
    assert len(endpoint.requests) == 2


def test_rate_limits_and_server_errors_are_retried_and_every_request_is_counted(endpoint, route):
    endpoint.fault = _faults_by_question({"Is point 1 covered?": [RATE_LIMIT],
                                          "Is point 3 covered?": [SERVER_ERROR, UNAVAILABLE]})
    sender, program = _sender(endpoint.base_url, endpoint.model)
    limited, flaky, fine = (_ask(sender, program, n, route)[0] for n in (1, 3, 4))
    assert [(a.status, a.usage.lm_calls, a.usage.failed_calls) for a in (limited, flaky, fine)] == [
        ("answered", 1, 1), ("answered", 1, 2), ("answered", 1, 0)]
    assert sorted(endpoint.outcomes) == sorted(["429", "500", "503"] + ["200"] * 3)
    spent = sum(a.usage.lm_calls + a.usage.failed_calls for a in (limited, flaky, fine))
    assert spent == len(endpoint.requests)


def test_persistent_failures_are_errors_named_for_the_user_and_a_client_error_is_not_retried(endpoint, route):
    endpoint.fault = _faults_by_question({"Is point 1 covered?": [SERVER_ERROR] * 10,
                                          "Is point 3 covered?": [HttpFault(400, "bad request")],
                                          "Is point 4 covered?": [HttpFault(401, "no key")]})
    sender, program = _sender(endpoint.base_url, endpoint.model)
    broken, refused, denied = (_ask(sender, program, n, route) for n in (1, 3, 4))
    assert broken[1] == refused[1] == denied[1] == "error"
    assert broken[0].reason.startswith("InternalServerError: HTTP 500: ") and "after 3 attempts" in broken[0].reason
    assert broken[0].usage.failed_calls == 3 and broken[0].usage.lm_calls == 0
    assert refused[0].reason.startswith("BadRequestError: HTTP 400") and refused[0].usage.failed_calls == 1
    assert denied[0].reason.startswith("AuthenticationError") and "`api_key_env`" in denied[0].reason
    assert len(endpoint.requests) == 3 + 1 + 1


class _TextHandler(BaseHTTPRequestHandler):
    """A server FakeEndpoint cannot play: a 500 with a plain-text body, a 200 that is not JSON."""

    protocol_version = "HTTP/1.1"
    seen_headers: ClassVar[list[str | None]] = []

    def log_message(self, format, *args) -> None:
        pass

    def do_POST(self) -> None:
        self.seen_headers.append(self.headers.get("Authorization"))
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = body["messages"][-1]["content"]
        status, kind, data = ((500, "text/plain", b"upstream exploded (scripted)") if "text-500" in text
                              else (200, "text/html", b"<html>proxy sign-in page (scripted)</html>"))
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_a_text_error_body_and_a_200_that_is_not_json_are_errors_and_the_key_goes_only_in_the_header(monkeypatch,
                                                                                                   route):
    monkeypatch.setenv("BINEVAL_TEST_KEY", SECRET)
    server, thread = serve_in_thread(_TextHandler, "text-endpoint")
    _TextHandler.seen_headers.clear()
    target = HttpTarget(f"http://127.0.0.1:{server.server_address[1]}/v1", api_key=SECRET, max_retries=1,
                        backoff=0.01)

    async def on_a_loop(bodies: list[dict]) -> list:
        connections = AsyncConnections(target, 2)
        try:
            return [await apost_json(connections, body) for body in bodies]
        finally:
            await connections.close()

    bodies = [{"messages": [{"role": "user", "content": "text-500"}]}, {"messages": [{"role": "user", "content": "other"}]}]
    try:
        if route == "blocking":
            connections = Connections(target)
            text_500, not_json = (post_json(connections, body) for body in bodies)
        else:
            text_500, not_json = asyncio.run(on_a_loop(bodies))
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    assert (text_500.error, text_500.status, text_500.attempts, text_500.failed_attempts) == (
        "HTTP 500: upstream exploded (scripted)", 500, 2, 2)
    assert not_json.body is None and not_json.status == 200 and not_json.attempts == 1
    assert not_json.error.startswith("HTTP 200: reply is not a JSON object: <html>")
    assert _TextHandler.seen_headers == [f"Bearer {SECRET}"] * 3
    assert SECRET not in repr(text_500) and SECRET not in repr(not_json)


def test_a_timeout_names_the_setting_and_a_refused_connection_is_an_error(endpoint, route):
    endpoint.fault = _faults_by_question({"Is point 1 covered?": [TimeoutFault(seconds=3.0)] * 3})
    sender, program = _sender(endpoint.base_url, endpoint.model, retries=1, timeout=1.0)
    stuck, verdict = _ask(sender, program, 1, route)
    assert verdict == "error" and stuck.reason.startswith("Timeout: timeout after 1 s after 2 attempts")
    assert "`timeout`" in stuck.reason and stuck.usage.failed_calls == 2

    closed = FakeEndpoint().start()
    base, model = closed.base_url, closed.model
    closed.close()  # nothing listens on that port any more
    sender, program = _sender(base, model, retries=1)
    answer, verdict = _ask(sender, program, 1, route)
    assert verdict == "error" and answer.reason.startswith("APIConnectionError: connection error: ")


def test_a_server_that_refuses_the_json_schema_form_gets_the_json_object_form_from_then_on(endpoint, route):
    def refuse_json_schema(body: dict, index: int) -> Fault | None:
        if (body.get("response_format") or {}).get("type") == "json_schema":
            return HttpFault(500, "1 validation error: ('body', 'response_format', 'type') Input should be 'text' "
                                  "or 'json_object'")
        return None

    endpoint.fault = refuse_json_schema
    sender, program = _sender(endpoint.base_url, endpoint.model)
    verdicts = [_ask(sender, program, n, route)[1] for n in (1, 2, 3)]
    assert verdicts == ["yes", "no", "yes"]
    types = [body["response_format"]["type"] for body in endpoint.requests]
    assert types == ["json_schema", "json_object", "json_object", "json_object"]  # refused once, then settled
    assert sender.dialect == "json_object" and sender.lm.schema_dialect == "json_object"
    schema = endpoint.requests[1]["response_format"]["schema"]
    assert set(schema["properties"]) == {"verdict", "explanation"}


def test_a_reply_in_content_parts_is_read_as_its_text():
    """OpenAI-style ``content`` as a list of parts is the joined text; a list without text parts
    or a number is no text (an empty reply), never a crash in the reader."""
    from binaryeval_dspy.engines.senders import reply_outputs

    def body(content):
        return {"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}

    parts = [{"type": "text", "text": '{"explanation": "ok", '}, {"type": "text", "text": '"verdict": "yes"}'}]
    assert reply_outputs(body(parts))[0]["text"] == '{"explanation": "ok", "verdict": "yes"}'
    assert reply_outputs(body([{"type": "image_url", "image_url": {}}]))[0]["text"] is None
    assert reply_outputs(body(5))[0]["text"] is None


@pytest.mark.parametrize("text", ["unknown field json_schema", "Unknown field: `json_schema`",
                                  "JSON schema output is not supported by this model",
                                  "invalid responseFormat", "'json_schema' is not one of ['text', 'json_object']"])
def test_every_wording_of_a_refused_schema_form_is_recognised(text):
    from binaryeval_dspy.lm.schema_format import rejects_response_format

    assert rejects_response_format(RuntimeError(text))
    assert not rejects_response_format(RuntimeError("unknown field temperature_jsonschemax"))


def test_a_422_unknown_field_json_schema_gets_the_json_object_form(endpoint, route):
    def refuse_json_schema(body: dict, index: int) -> Fault | None:
        if (body.get("response_format") or {}).get("type") == "json_schema":
            return HttpFault(422, "unknown field json_schema")
        return None

    endpoint.fault = refuse_json_schema
    sender, program = _sender(endpoint.base_url, endpoint.model)
    verdicts = [_ask(sender, program, n, route)[1] for n in (1, 2)]
    assert verdicts == ["yes", "no"]
    assert [body["response_format"]["type"] for body in endpoint.requests] == ["json_schema", "json_object",
                                                                              "json_object"]


def test_adapter_stats_count_the_calls_of_the_direct_route(tmp_path, fake_endpoint):
    """The live engine's straight HTTP route formats each call with the run's adapter: its
    ``adapter_stats.calls`` in the manifest count them, as DSPy's route does (it said 0)."""
    import json

    from tests.engines.test_remote_faults import evaluate, write_inputs

    qs, items = write_inputs(tmp_path, n_items=3)
    out = tmp_path / "run"
    assert evaluate(fake_endpoint, qs, items, out, "--engine", "live").exit_code == 0
    stats = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["config"]["adapter_stats"]
    assert stats["calls"] == 3 * 6 == len(fake_endpoint.requests)

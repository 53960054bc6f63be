"""The scripted OpenAI-compatible endpoint (tests/fake_endpoint.py) behaves like a server.

Each test drives it over real HTTP on 127.0.0.1, through DSPy's `dspy.LM` on both of its
backends: "auto" (DSPy 3.4's native lm15 client, what `dspy.LM("openai/...",
api_base=...)` picks) and "litellm" (the LiteLLM compatibility engine).
"""

from __future__ import annotations

import json
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import dspy
import pytest
from dspy.utils.exceptions import LMError, LMRateLimitError, LMServerError

from binaryeval_dspy.signatures.binary_judgment import JudgeBinaryQuestion
from tests.fake_endpoint import (
    CUT,
    RATE_LIMIT,
    SERVER_ERROR,
    UNAVAILABLE,
    CutFault,
    FakeEndpoint,
    Reply,
    TimeoutFault,
    TokenLogprob,
    first_n,
    format_fields,
    request_field,
    verdict_replies,
    when_user_contains,
)

ENGINES = ["auto", "litellm"]
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def make_lm(ep: FakeEndpoint, engine: str, **kwargs) -> dspy.LM:
    """A `dspy.LM` on the fake endpoint, cache off, no retries unless asked."""
    kwargs.setdefault("num_retries", 0)
    return dspy.LM("openai/fake-x", api_base=ep.base_url, api_key="k", cache=False, engine=engine, **kwargs)


def post(ep: FakeEndpoint, body: dict) -> tuple[int, dict, bytes]:
    """POST a chat-completions body directly; (status, headers, raw body)."""
    req = urllib.request.Request(f"{ep.base_url}/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with _DIRECT.open(req, timeout=5) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def judge(question: str, **inputs) -> dspy.Prediction:
    return dspy.Predict(JudgeBinaryQuestion)(input=inputs.get("input", "The article."),
                                             output=inputs.get("output", "The summary."),
                                             question=question, violation_example="")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("adapter", [dspy.JSONAdapter, dspy.ChatAdapter])
def test_judge_signature_answered_in_the_adapters_format(fake_endpoint, engine, adapter):
    fake_endpoint.reply = verdict_replies({"Is it short?": "no"}, default="yes")
    with dspy.context(lm=make_lm(fake_endpoint, engine), adapter=adapter()):
        short = judge("Is it short?", output="A long summary.")
        true = judge("Is it true?")
    assert (short.verdict, true.verdict) == ("no", "yes")
    assert short.explanation == "scripted no for: Is it short?"
    bodies = fake_endpoint.requests
    assert len(bodies) == 2
    assert [request_field(b, "question") for b in bodies] == ["Is it short?", "Is it true?"]
    assert request_field(bodies[0], "output") == "A long summary."
    assert fake_endpoint.outcomes == ["200", "200"]


def test_concurrent_requests_overlap(fake_endpoint):
    fake_endpoint.latency = 0.3
    fake_endpoint.reply = lambda body: format_fields(body, {"answer": "ok"})
    lm = make_lm(fake_endpoint, "auto")
    lm("warm up the client")  # connection setup is not what this test measures
    fake_endpoint.reset()
    fake_endpoint.latency = 0.3
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=8) as pool:
        outs = list(pool.map(lambda i: lm(f"request {i}"), range(8)))
    elapsed = time.monotonic() - start
    assert len(outs) == 8 and all(o for o in outs)
    assert len(fake_endpoint.requests) == 8
    assert elapsed < 8 * 0.3 / 2, f"8 requests at 0.3 s took {elapsed:.2f} s: they did not overlap"
    assert fake_endpoint.max_in_flight >= 6


@pytest.mark.parametrize("engine", ENGINES)
def test_rate_limit_on_one_question_surfaces_after_retries(fake_endpoint, engine):
    fake_endpoint.fault = when_user_contains("Question 4", RATE_LIMIT)
    lm = make_lm(fake_endpoint, engine, num_retries=1)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        assert judge("Question 3: is it fine?").verdict == "yes"
        start = time.monotonic()
        with pytest.raises(LMRateLimitError):
            judge("Question 4: is it fine?")
    assert time.monotonic() - start < 5  # Retry-After: 0, one retry
    assert fake_endpoint.outcomes == ["200", "429", "429"]  # the retry happened, and failed again


def test_rate_limit_answer_is_openai_shaped(fake_endpoint):
    fake_endpoint.fault = first_n(1, RATE_LIMIT)
    status, headers, raw = post(fake_endpoint, {"messages": [{"role": "user", "content": "hi"}]})
    assert status == 429 and headers.get("Retry-After") == "0"
    assert json.loads(raw)["error"]["type"] == "rate_limit_error"
    status, _, _ = post(fake_endpoint, {"messages": [{"role": "user", "content": "hi"}]})
    assert status == 200


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("fault", [SERVER_ERROR, UNAVAILABLE], ids=["500", "503"])
def test_server_errors_surface_or_are_retried(fake_endpoint, engine, fault):
    fake_endpoint.reply = lambda body: format_fields(body, {"answer": "ok"})
    fake_endpoint.fault = first_n(1, fault)
    with pytest.raises(LMServerError):
        make_lm(fake_endpoint, engine, num_retries=0)("hi")
    fake_endpoint.reset()
    fake_endpoint.reply = lambda body: format_fields(body, {"answer": "ok"})
    fake_endpoint.fault = first_n(1, fault)
    out = make_lm(fake_endpoint, engine, num_retries=1)("hi")
    assert "ok" in out[0]
    assert fake_endpoint.outcomes == [str(fault.status), "200"]


@pytest.mark.parametrize("engine", ENGINES)
def test_timeout_fault_surfaces_as_an_lm_error(fake_endpoint, engine):
    fake_endpoint.fault = first_n(1, TimeoutFault(seconds=10))
    start = time.monotonic()
    with pytest.raises(LMError):
        make_lm(fake_endpoint, engine, timeout=0.5)("hi")
    assert time.monotonic() - start < 5
    assert fake_endpoint.outcomes == ["timeout"]


def test_cut_reply_stops_at_max_tokens_with_finish_reason_length(fake_endpoint):
    fake_endpoint.reply = lambda body: "one two three four five six"
    fake_endpoint.fault = first_n(1, CUT)
    status, _, raw = post(fake_endpoint, {"messages": [{"role": "user", "content": "count"}], "max_tokens": 3})
    answer = json.loads(raw)
    assert status == 200
    assert answer["choices"][0]["finish_reason"] == "length"
    assert answer["choices"][0]["message"]["content"] == "one two three"
    assert answer["usage"]["completion_tokens"] == 3
    # A real server also cuts an over-long reply without a scripted fault.
    status, _, raw = post(fake_endpoint, {"messages": [{"role": "user", "content": "count"}], "max_tokens": 2})
    assert json.loads(raw)["choices"][0]["finish_reason"] == "length"
    status, _, raw = post(fake_endpoint, {"messages": [{"role": "user", "content": "count"}]})
    assert json.loads(raw)["choices"][0]["finish_reason"] == "stop"
    # A reply callable can cut its own text; a scripted cut says "length" even when short.
    fake_endpoint.reply = lambda body: CutFault(tokens=2, text="alpha beta gamma")
    choice = json.loads(post(fake_endpoint, {"messages": [{"role": "user", "content": "x"}]})[2])["choices"][0]
    assert (choice["message"]["content"], choice["finish_reason"]) == ("alpha beta", "length")


@pytest.mark.parametrize("engine", ENGINES)
def test_cut_reply_through_dspy(fake_endpoint, engine):
    fake_endpoint.fault = lambda body, index: CUT
    out = make_lm(fake_endpoint, engine, max_tokens=3)("hi")
    assert out == ["[[ ## verdict"]  # the chat-form verdict reply, cut after 3 tokens
    sent = fake_endpoint.requests[0]
    assert sent.get("max_tokens", sent.get("max_completion_tokens")) == 3  # lm15 sends max_completion_tokens


@pytest.mark.parametrize("engine", ENGINES)
def test_cached_tokens_reach_dspy_usage_tracker(fake_endpoint, engine):
    fake_endpoint.cached_tokens = 7
    fake_endpoint.reply = lambda body: format_fields(body, {"answer": "ok"})
    with dspy.context(lm=make_lm(fake_endpoint, engine)), dspy.track_usage() as tracker:
        dspy.Predict("question -> answer")(question="a")
        dspy.Predict("question -> answer")(question="b")
    usage = tracker.get_total_tokens()["openai/fake-x"]
    assert usage["prompt_tokens_details"]["cached_tokens"] == 14
    assert usage["prompt_tokens"] > 14 and usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_logprobs_are_openai_shaped(fake_endpoint):
    fake_endpoint.reply = lambda body: Reply("yes", [TokenLogprob("yes", -0.1, {"yes": -0.1, "no": -2.4, "maybe": -5})])
    body = {"messages": [{"role": "user", "content": "?"}], "logprobs": True, "top_logprobs": 2}
    choice = json.loads(post(fake_endpoint, body)[2])["choices"][0]
    (entry,) = choice["logprobs"]["content"]
    assert (entry["token"], entry["logprob"]) == ("yes", -0.1)
    assert [t["token"] for t in entry["top_logprobs"]] == ["yes", "no"]  # best first, top_logprobs of them
    body.pop("logprobs")
    assert json.loads(post(fake_endpoint, body)[2])["choices"][0]["logprobs"] is None


def test_logprobs_reach_dspy(fake_endpoint):
    fake_endpoint.reply = lambda body: Reply("no", [TokenLogprob("no", -0.2, {"no": -0.2, "yes": -1.7})])
    out = make_lm(fake_endpoint, "auto", logprobs=True, top_logprobs=5)("?")
    assert out[0]["text"] == "no"
    top = out[0]["logprobs"]["content"][0]["top_logprobs"]
    assert {t["token"]: t["logprob"] for t in top} == {"no": -0.2, "yes": -1.7}
    sent = fake_endpoint.requests[0]
    assert sent["logprobs"] is True and sent["top_logprobs"] == 5


def test_stream_and_models_routes(fake_endpoint):
    with _DIRECT.open(f"{fake_endpoint.base_url}/models", timeout=5) as resp:
        assert json.loads(resp.read())["data"][0]["id"] == fake_endpoint.model
    fake_endpoint.reply = lambda body: "hello there"
    body = {"messages": [{"role": "user", "content": "hi"}], "stream": True,
            "stream_options": {"include_usage": True}}
    status, headers, raw = post(fake_endpoint, body)
    events = [line[6:] for line in raw.decode().splitlines() if line.startswith("data: ")]
    assert status == 200 and headers["Content-Type"] == "text/event-stream" and events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == "hello there"
    assert chunks[-1]["usage"]["completion_tokens"] == 2


def test_reset_forgets_requests_and_faults(fake_endpoint):
    fake_endpoint.fault = first_n(5, SERVER_ERROR)
    assert post(fake_endpoint, {"messages": []})[0] == 500
    fake_endpoint.reset()
    assert fake_endpoint.requests == [] and fake_endpoint.outcomes == []
    assert post(fake_endpoint, {"messages": []})[0] == 200
    assert fake_endpoint.outcomes == ["200"]

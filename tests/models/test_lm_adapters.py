"""Adapter policy per endpoint (binaryeval_dspy.lm.adapters) over a scripted local HTTP endpoint.

`auto` on a base URL sends the judge's JSON schema as ``response_format``; `chat` costs
exactly one request per judgment even when the reply does not parse; every extra
request (DSPy's JSON retry, a schema re-sent in another form) is counted.
"""

from __future__ import annotations

import json

import dspy
import pytest
from dspy.lm15 import Message, Response, TextPart, Usage

from binaryeval_dspy.errors import LMConfigError
from binaryeval_dspy.lm import (
    AdapterStats,
    CacheScopedLM,
    CountingChatAdapter,
    CountingJSONAdapter,
    LlamaCppEngine,
    LMHandle,
    choose_adapter,
    make_lm,
)
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from tests.fake_endpoint import FakeEndpoint, HttpFault, TimeoutFault, verdict_replies

ARTICLE = "The council approved the new park on Tuesday after a two-hour debate."
SUMMARY = "The council approved a park."
QUESTIONS = ["Does the summary say who approved the park?", "Is the summary one sentence?",
             "Does the summary avoid details absent from the article?"]


@pytest.fixture(autouse=True)
def offline_model_metadata(monkeypatch):
    """LiteLLM / DSPy read their bundled model tables instead of fetching them."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture
def endpoint():
    with FakeEndpoint(verdict_replies({QUESTIONS[1]: "no"})) as ep:
        yield ep


def question_set() -> QuestionSet:
    return QuestionSet(task_prompt="Summarize the article.", dimensions=["consistency"], questions=[
        BinaryQuestion(id=f"consistency-0{i + 1}", dimension="consistency", text=text)
        for i, text in enumerate(QUESTIONS)])


def run(handle: LMHandle) -> list:
    with handle.context():
        return BinEval(question_set(), num_threads=1)(input=ARTICLE, output=SUMMARY).verdicts


def unparseable(body: dict) -> str:
    return "I think the answer is probably fine overall."


# --------------------------------------------------------------------------- auto / json


def test_auto_on_a_base_url_is_json_with_the_schema_in_the_request(endpoint):
    handle = make_lm(endpoint.base_url, model="fake-x", cache=False)
    assert handle.adapter_name == "json" and isinstance(handle.adapter, dspy.JSONAdapter)
    assert "response_format" in handle.adapter_reason
    verdicts = run(handle)
    assert [v.verdict for v in verdicts] == ["yes", "no", "yes"]
    assert len(endpoint.requests) == 3
    for body in endpoint.requests:
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema"
        schema = fmt["json_schema"]["schema"]
        assert set(schema["properties"]) == {"verdict", "explanation"}
        assert schema["properties"]["verdict"]["enum"] == ["yes", "no"]
    assert handle.adapter_stats.as_dict() == {"calls": 3, "fallback_calls": 0, "parse_failures": 0,
                                              "schema_not_sent": 0, "format_retries": 0}
    assert handle.adapter_fallbacks == 0
    assert handle.lm.schema_dialect == "json_schema"


def refuse_openai_schema_form(body: dict, index: int):
    """What llama-cpp-python's server answers to OpenAI's json_schema form."""
    if (body.get("response_format") or {}).get("type") == "json_schema":
        return HttpFault(500, "1 validation error: {'type': 'literal_error', 'loc': ('body', 'response_format', "
                              "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}")
    return None


def test_schema_form_refused_once_then_sent_as_json_object_schema(endpoint):
    endpoint.fault = refuse_openai_schema_form
    handle = make_lm(endpoint.base_url, model="fake-x", cache=False)
    verdicts = run(handle)
    assert [v.verdict for v in verdicts] == ["yes", "no", "yes"]
    types = [(b.get("response_format") or {}).get("type") for b in endpoint.requests]
    assert types == ["json_schema", "json_object", "json_object", "json_object"]  # refused once, no DSPy retries
    schema = endpoint.requests[-1]["response_format"]["schema"]
    assert set(schema["properties"]) == {"verdict", "explanation"}
    assert handle.lm.schema_dialect == "json_object"
    assert handle.adapter_stats.format_retries == 1
    assert handle.adapter_fallbacks == 1


def test_with_many_calls_in_flight_no_call_waits_for_the_schema_probe(endpoint):
    # Issue 22: the first round goes out together. A server that refuses the schema form
    # refuses at most the calls already in flight, once each; every question is answered.
    endpoint.fault = refuse_openai_schema_form
    endpoint.latency = 0.05
    handle = make_lm(endpoint.base_url, model="fake-x", cache=False)
    with handle.context():
        verdicts = BinEval(question_set(), num_threads=3, logprobs="off")(input=ARTICLE, output=SUMMARY).verdicts
    assert [v.verdict for v in verdicts] == ["yes", "no", "yes"]
    types = [(b.get("response_format") or {}).get("type") for b in endpoint.requests]
    assert 1 <= types.count("json_schema") <= 3 and types.count("json_object") == 3
    assert types[-1] == "json_object" and handle.lm.schema_dialect == "json_object"
    assert handle.adapter_stats.format_retries == types.count("json_schema")


def test_the_first_calls_go_out_together_while_the_schema_dialect_is_unknown(endpoint):
    import time

    arrivals: list[float] = []

    def note(body, index):
        arrivals.append(time.monotonic())
        return None

    endpoint.fault = note
    endpoint.latency = 0.5
    handle = make_lm(endpoint.base_url, model="fake-x", cache=False)
    with handle.context():
        BinEval(question_set(), num_threads=3, logprobs="off")(input=ARTICLE, output=SUMMARY)
    assert len(arrivals) == 3 and arrivals[2] - arrivals[0] < 0.4  # not one latency round behind the first


def test_other_errors_are_not_taken_for_a_refused_schema_form(endpoint):
    endpoint.fault = lambda body, index: HttpFault(400, "model fake-x does not exist")
    handle = make_lm(endpoint.base_url, model="fake-x", cache=False)
    verdicts = run(handle)
    assert [v.verdict for v in verdicts] == ["error"] * 3
    assert "does not exist" in verdicts[0].error
    assert len(endpoint.requests) == 3  # one per question: a 400 is final, not retried in another form
    assert handle.lm.schema_dialect == "auto" and handle.adapter_stats.format_retries == 0


def test_json_on_an_lm_without_schema_support_counts_schema_not_sent():
    class PlainEngine:
        def complete(self, request):
            text = json.dumps({"verdict": "yes", "explanation": "fine"})
            return Response(id=None, model="plain", message=Message.assistant([TextPart(text)]),
                            finish_reason="stop", usage=Usage(input_tokens=1, output_tokens=1))

    lm = CacheScopedLM("custom/plain-engine", engine=PlainEngine(), cache=False)
    adapter, name, reason = choose_adapter("json", lm)
    assert name == "json" and "not sent" in reason
    verdicts = run(LMHandle(lm=lm, adapter=adapter, name="plain", embedded=False))
    assert [v.verdict for v in verdicts] == ["yes"] * 3
    assert adapter.stats.schema_not_sent == 3
    assert choose_adapter("auto", lm)[1] == "chat"


# --------------------------------------------------------------------------- chat


def test_chat_is_one_request_per_judgment_even_when_nothing_parses(endpoint):
    endpoint.reply = unparseable
    handle = make_lm(endpoint.base_url, model="fake-x", adapter="chat", cache=False)
    assert handle.adapter_name == "chat" and handle.adapter.use_json_adapter_fallback is False
    verdicts = run(handle)
    assert [v.verdict for v in verdicts] == ["unparsed"] * 3
    assert len(endpoint.requests) == 3
    assert all("response_format" not in body for body in endpoint.requests)
    stats = handle.adapter_stats
    assert (stats.calls, stats.parse_failures, stats.fallback_calls, handle.adapter_fallbacks) == (3, 3, 0, 0)


def test_chat_answers_parse(endpoint):
    handle = make_lm(endpoint.base_url, model="fake-x", adapter="chat", cache=False)
    assert [v.verdict for v in run(handle)] == ["yes", "no", "yes"]
    assert len(endpoint.requests) == 3


def test_dspy_json_fallback_is_never_made(endpoint):
    """DSPy's ChatAdapter (fallback on by default) retried in JSON: two requests per judgment.
    Under the adapter rule it is sent through ours, one request each (issue 31)."""
    endpoint.reply = unparseable
    handle = make_lm(endpoint.base_url, model="fake-x", adapter="chat", cache=False)
    with dspy.context(lm=handle.lm, adapter=dspy.ChatAdapter()):
        verdicts = BinEval(question_set(), num_threads=1)(input=ARTICLE, output=SUMMARY).verdicts
    assert [v.verdict for v in verdicts] == ["unparsed"] * 3
    assert len(endpoint.requests) == 3
    with pytest.raises(LMConfigError, match="never makes DSPy's second call"):
        CountingChatAdapter(use_json_adapter_fallback=True)
    adapter = CountingChatAdapter()
    with pytest.raises(LMConfigError, match="never makes DSPy's second call"):
        adapter.use_json_adapter_fallback = True
    assert adapter.use_json_adapter_fallback is False


def test_adapter_callbacks_fire_once_per_format():
    seen = []

    class Spy(dspy.utils.callback.BaseCallback):
        def on_adapter_format_start(self, call_id, instance, inputs):
            seen.append(call_id)

    adapter = CountingChatAdapter(callbacks=[Spy()])
    adapter.format(dspy.Signature("question -> answer"), [], {"question": "q"})
    assert len(seen) == 1


# --------------------------------------------------------------------------- policy


def test_embedded_models_are_always_json(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    lm = CacheScopedLM("custom/m", engine=LlamaCppEngine(gguf), cache=False)
    for policy in ("auto", "json"):
        adapter, name, _ = choose_adapter(policy, lm, spec=str(gguf))
        assert name == "json" and isinstance(adapter, CountingJSONAdapter)
    with pytest.raises(LMConfigError, match="`adapter` auto or json"):
        choose_adapter("chat", lm, spec=str(gguf))
    with pytest.raises(LMConfigError, match="`adapter` auto or json"):
        make_lm(str(gguf), adapter="chat")  # refused before the file is loaded


def test_unknown_policy_is_a_config_error(endpoint):
    with pytest.raises(LMConfigError, match="auto, json, chat"):
        make_lm(endpoint.base_url, model="fake-x", adapter="xml")
    with pytest.raises(LMConfigError, match="auto, json, chat"):
        choose_adapter("xml", None)


def test_litellm_ids_follow_the_providers_capabilities():
    assert make_lm("openai/gpt-4o-mini").adapter_name == "json"
    vllm = make_lm("hosted_vllm/Qwen/Qwen2.5-7B-Instruct")
    assert vllm.adapter_name == "json" and vllm.lm.supports_response_schema
    unknown = make_lm("openai/not-a-known-model-name")
    assert unknown.adapter_name == "chat" and unknown.adapter.use_json_adapter_fallback is False


def test_handles_built_elsewhere_derive_their_adapter_name():
    lm = dspy.LM("openai/x", api_base="http://127.0.0.1:9/v1", api_key="k")
    assert LMHandle(lm=lm, adapter=dspy.JSONAdapter(), name="x", embedded=False).adapter_name == "json"
    plain = LMHandle(lm=lm, adapter=None, name="x", embedded=False)
    assert plain.adapter_name == "chat" and plain.adapter_fallbacks == 0
    stats = AdapterStats()
    stats.add("fallback_calls", 2)
    assert LMHandle(lm=lm, adapter=CountingChatAdapter(stats=stats), name="x", embedded=False).adapter_fallbacks == 2


def test_a_hung_schema_probe_does_not_hold_the_other_calls_for_its_timeout(endpoint, monkeypatch):
    import time

    arrivals: list[float] = []

    def first_one_hangs(body, index):
        arrivals.append(time.monotonic())
        return TimeoutFault(30) if len(arrivals) == 1 else None  # the probe never gets an answer

    endpoint.fault = first_one_hangs
    handle = make_lm(endpoint.base_url, model="fake-x", cache=False, timeout=8)
    with handle.context():
        verdicts = BinEval(question_set(), num_threads=3, logprobs="off")(input=ARTICLE, output=SUMMARY).verdicts
    # The other two calls went out at once, long before the hung request's 8 s timeout
    # (before the probe lock was removed they waited for it).
    assert len(arrivals) >= 3 and arrivals[2] - arrivals[0] < 4
    assert sorted(v.verdict for v in verdicts).count("error") <= 1
    assert handle.lm.schema_dialect == "json_schema"

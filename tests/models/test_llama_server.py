"""A real OpenAI-compatible server (``python -m llama_cpp.server`` with SmolLM2) answers
DSPy over HTTP on 127.0.0.1, and its log shows llama.cpp's prefix reuse.

The DSPy calls here use ``engine="litellm"``: DSPy 3.4's default engine for
``openai/...`` with ``api_base`` (lm15) sends ``max_completion_tokens``, which
llama_cpp.server's request model does not have and silently drops, so a call would
generate until end-of-sequence or n_ctx. LiteLLM sends ``max_tokens``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import dspy
import pytest

from binaryeval_dspy.lm import llama_server as served
from tests import llama_server as llama_server_module

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
SYSTEM = ("You are a careful reviewer. You read a short text and answer questions about it "
          "with one word. " * 6).strip()


def post(server, body: dict, timeout: float = 120) -> tuple[int, dict]:
    """POST to the server's chat completions; (status, JSON answer)."""
    req = urllib.request.Request(f"{server.base_url}/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with _DIRECT.open(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def server_lm(server, **kwargs) -> dspy.LM:
    kwargs.setdefault("max_tokens", 32)
    return dspy.LM(f"openai/{server.model}", api_base=server.base_url, api_key="x", cache=False,
                   engine="litellm", num_retries=0, temperature=0.0, timeout=120, **kwargs)


@pytest.mark.server
def test_server_lists_its_model(llama_server):
    with _DIRECT.open(f"{llama_server.base_url}/models", timeout=10) as resp:
        models = json.loads(resp.read())
    assert [m["id"] for m in models["data"]] == ["smollm2"]
    assert llama_server.process.poll() is None


@pytest.mark.server
def test_dspy_predict_with_json_adapter_parses_the_servers_reply(llama_server):
    lm = server_lm(llama_server)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        pred = dspy.Predict("question -> answer")(question="What is the capital of France?")
    assert isinstance(pred.answer, str) and pred.answer.strip()
    entry = lm.history[-1]
    assert entry["kwargs"].get("response_format") == {"type": "json_object"}  # LiteLLM's fallback for unknown models
    assert entry["usage"]["prompt_tokens"] > 50 and entry["usage"]["completion_tokens"] > 0


@pytest.mark.server
@pytest.mark.filterwarnings("ignore:Passing OpenAI-style message:DeprecationWarning")
def test_prefix_stats_show_reuse_between_calls_sharing_a_prefix(llama_server):
    lm = server_lm(llama_server, max_tokens=1)
    start = llama_server.log_offset()
    lm(messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Is the sky green?"}])
    lm(messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Is the grass blue?"}])
    second_prompt = lm.history[-1]["usage"]["prompt_tokens"]
    stats = llama_server.prefix_stats(start)
    assert stats.generations == 2
    hit, remaining = stats.pairs[-1]
    assert hit + remaining == second_prompt  # the whole prompt: reused part + evaluated part
    assert hit > 60 and remaining < 10, stats  # the long system message was not evaluated again
    assert stats.prompt_evals[-1] == remaining


@pytest.mark.server
def test_openai_json_schema_response_format_is_rejected(llama_server):
    """What DSPy's JSONAdapter sends when it believes the endpoint takes a schema."""
    schema = {"type": "object", "properties": {"verdict": {"type": "string", "enum": ["yes", "no"]}},
              "required": ["verdict"]}
    status, answer = post(llama_server, {
        "model": "smollm2", "max_tokens": 8, "messages": [{"role": "user", "content": "Yes or no?"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}}})
    assert status == 500  # a validation error, reported as a server error (retryable for clients)
    assert "Input should be 'text' or 'json_object'" in answer["error"]["message"]


@pytest.mark.server
def test_chat_logprobs_need_top_logprobs(llama_server):
    body = {"model": "smollm2", "max_tokens": 1, "temperature": 0,
            "messages": [{"role": "user", "content": "Is the sky blue? Answer yes or no."}],
            "logprobs": True, "top_logprobs": 5}
    status, answer = post(llama_server, body)
    assert status == 200
    (entry,) = answer["choices"][0]["logprobs"]["content"]
    assert len(entry["top_logprobs"]) == 5 and entry["logprob"] <= 0
    assert entry["token"] == entry["top_logprobs"][0]["token"]  # greedy at temperature 0
    del body["top_logprobs"]
    status, answer = post(llama_server, body)
    assert status == 200 and answer["choices"][0]["logprobs"] is None  # logprobs=true alone gives none


def test_missing_server_extra_skips_with_the_reason(monkeypatch, tmp_path):
    monkeypatch.setattr(served, "SERVER_MODULES", ("json", "no_such_module_for_bineval"))
    with pytest.raises(pytest.skip.Exception, match="'server' extra is not installed.*no_such_module_for_bineval"):
        with llama_server_module.running_llama_server(tmp_path):
            pass
    assert not (tmp_path / "llama_server.log").exists()  # nothing was started

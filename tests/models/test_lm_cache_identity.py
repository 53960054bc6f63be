"""DSPy's response cache scoped to the endpoint or engine (binaryeval_dspy.lm.cache_identity).

Two OpenAI-compatible endpoints on 127.0.0.1 serve the same model id at different base
URLs; DSPy's cache is on, in a temporary directory. A cached answer may only come back
for the endpoint (or engine) that produced it: across "runs" (a new cache object over
the same directory: empty memory, same disk) and within one process (memory cache).
"""

from __future__ import annotations

import json
import warnings

import dspy
import pytest
from dspy.lm15 import Message, Response, TextPart, Usage

from binaryeval_dspy.errors import LMConfigError
from binaryeval_dspy.lm import (
    CacheScopedLM,
    LlamaCppEngine,
    cache_identity_of,
    engine_identity,
    ensure_cache_identity,
    make_lm,
    normalize_base_url,
)
from binaryeval_dspy.lm.cache_identity import CACHE_SCOPE_FIELD
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from tests.fake_endpoint import FakeEndpoint, verdict_replies

ARTICLE = "The council approved the new park on Tuesday after a two-hour debate."
SUMMARY = "The council approved a park."
QUESTION = "Does the summary say who approved the park?"


@pytest.fixture(autouse=True)
def offline_model_metadata(monkeypatch):
    """LiteLLM / DSPy read their bundled model tables instead of fetching them."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture
def dspy_cache(tmp_path):
    """DSPy's cache on (memory + disk in a temporary dir); call it again to start a new "run".

    A new run gets a new cache object over the same directory: an empty memory cache
    and the disk entries of the previous runs, as a new process would.
    """
    saved = dspy.cache
    opened = []

    def new_run():
        dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=True,
                             disk_cache_dir=str(tmp_path / "dspy-cache"))
        opened.append(dspy.cache)
        return dspy.cache

    new_run()
    yield new_run
    dspy.cache = saved
    for cache in opened:
        cache.disk_cache.close()


@pytest.fixture
def two_endpoints():
    """Two endpoints serving model id ``fake-x``; A answers every question "yes", B "no"."""
    with FakeEndpoint(verdict_replies(default="yes")) as a, FakeEndpoint(verdict_replies(default="no")) as b:
        yield a, b


def one_question() -> QuestionSet:
    return QuestionSet(task_prompt="Summarize the article.", dimensions=["consistency"], questions=[
        BinaryQuestion(id="consistency-01", dimension="consistency", text=QUESTION)])


def judge(handle) -> str:
    """The verdict BinEval gets for the one question, through `handle`."""
    with handle.context():
        pred = BinEval(one_question(), num_threads=1)(input=ARTICLE, output=SUMMARY)
    return pred.verdicts[0].verdict


# --------------------------------------------------------------------------- endpoints


def test_second_endpoint_gets_its_own_request_across_runs(two_endpoints, dspy_cache):
    a, b = two_endpoints
    assert judge(make_lm(a.base_url, model="fake-x")) == "yes"
    assert len(a.requests) == 1

    dspy_cache()  # a new run: same disk cache, empty memory cache
    assert judge(make_lm(b.base_url, model="fake-x")) == "no"
    assert len(b.requests) == 1, "the second endpoint was served the first endpoint's cached answer"

    dspy_cache()  # a third run, back on A: its own disk entry, no request
    assert judge(make_lm(a.base_url, model="fake-x")) == "yes"
    assert len(a.requests) == 1


def test_second_endpoint_gets_its_own_request_in_one_process(two_endpoints, dspy_cache):
    a, b = two_endpoints
    assert judge(make_lm(a.base_url, model="fake-x")) == "yes"
    assert judge(make_lm(b.base_url, model="fake-x")) == "no"
    assert (len(a.requests), len(b.requests)) == (1, 1)


def test_same_question_to_same_endpoint_is_served_from_cache(two_endpoints, dspy_cache):
    a, _ = two_endpoints
    assert judge(make_lm(a.base_url, model="fake-x")) == "yes"
    assert judge(make_lm(a.base_url, model="fake-x")) == "yes"  # memory cache
    dspy_cache()
    assert judge(make_lm(a.base_url + "/", model="fake-x")) == "yes"  # disk cache; same URL, trailing slash
    assert len(a.requests) == 1


def test_api_key_is_not_part_of_the_identity(two_endpoints, dspy_cache, monkeypatch):
    a, _ = two_endpoints
    monkeypatch.setenv("KEY_ONE", "sk-first-secret")
    monkeypatch.setenv("KEY_TWO", "sk-second-secret")
    first = make_lm(a.base_url, model="fake-x", api_key_env="KEY_ONE")
    second = make_lm(a.base_url, model="fake-x", api_key_env="KEY_TWO")
    assert first.cache_identity == second.cache_identity == f"endpoint={a.base_url}"
    assert "secret" not in first.cache_identity
    assert judge(first) == judge(second) == "yes"
    assert len(a.requests) == 1


def test_identity_is_never_sent_to_the_endpoint(two_endpoints, dspy_cache):
    a, _ = two_endpoints
    handle = make_lm(a.base_url, model="fake-x")
    judge(handle)
    body = json.dumps(a.requests[0])
    assert CACHE_SCOPE_FIELD not in body and "endpoint=" not in body


def test_copy_with_another_base_url_is_scoped_to_it(two_endpoints, dspy_cache):
    a, b = two_endpoints
    handle = make_lm(a.base_url, model="fake-x")
    assert judge(handle) == "yes"
    handle.lm = handle.lm.copy(api_base=b.base_url)
    assert isinstance(handle.lm, CacheScopedLM)
    assert judge(handle) == "no"
    assert (len(a.requests), len(b.requests)) == (1, 1)


def test_ensure_cache_identity_scopes_a_users_own_lm(two_endpoints, dspy_cache):
    a, b = two_endpoints
    messages = [{"role": "user", "content": "Is the park approved? Answer yes or no."}]
    lm_a = ensure_cache_identity(dspy.LM("openai/fake-x", api_base=a.base_url, api_key="k", temperature=0.0))
    lm_b = ensure_cache_identity(dspy.LM("openai/fake-x", api_base=b.base_url, api_key="k", temperature=0.0))
    assert isinstance(lm_a, CacheScopedLM) and ensure_cache_identity(lm_a) is lm_a
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # messages= dictionaries, fine for a test
        lm_a(messages=messages)
        lm_b(messages=messages)
        lm_a(messages=messages)
    assert (len(a.requests), len(b.requests)) == (1, 1)


def test_async_calls_are_scoped_too(two_endpoints, dspy_cache):
    import asyncio

    a, b = two_endpoints
    messages = [{"role": "user", "content": "Is the park approved? Answer yes or no."}]

    async def ask_both():
        await make_lm(a.base_url, model="fake-x").lm.acall(messages=messages)
        await make_lm(b.base_url, model="fake-x").lm.acall(messages=messages)
        await make_lm(a.base_url, model="fake-x").lm.acall(messages=messages)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        asyncio.run(ask_both())
    assert (len(a.requests), len(b.requests)) == (1, 1)


def test_ensure_cache_identity_leaves_uncached_lms_and_refuses_others():
    plain = dspy.LM("openai/fake-x", api_base="http://127.0.0.1:9/v1", api_key="k", cache=False)
    assert ensure_cache_identity(plain) is plain

    class OwnLM(dspy.LM):
        pass

    with pytest.raises(LMConfigError, match="cache=False"):
        ensure_cache_identity(OwnLM("openai/fake-x", api_base="http://127.0.0.1:9/v1", api_key="k"))
    with pytest.raises(LMConfigError, match="expected a dspy.LM"):
        ensure_cache_identity("openai/fake-x")


# --------------------------------------------------------------------------- custom engines


class VerdictEngine:
    """A DSPy engine answering every judgment with one verdict; counts its calls."""

    supports_response_schema = True
    supported_params = frozenset({"response_format", "temperature", "max_tokens"})

    def __init__(self, verdict: str, identity: str | None = None):
        self.verdict = verdict
        self.calls = 0
        if identity is not None:
            self.cache_identity = identity

    def complete(self, request):
        self.calls += 1
        text = json.dumps({"verdict": self.verdict, "explanation": f"always {self.verdict}"})
        return Response(id=None, model="verdict", message=Message.assistant([TextPart(text)]),
                        finish_reason="stop", usage=Usage(input_tokens=10, output_tokens=5))


def engine_handle(engine):
    from binaryeval_dspy.lm import LMHandle

    lm = CacheScopedLM("custom/one-shared-id", engine=engine, temperature=0.0, cache=True)
    return LMHandle(lm=lm, adapter=dspy.JSONAdapter(), name="engine", embedded=False)


def test_two_engines_behind_one_custom_id_never_share(dspy_cache):
    yes, no = VerdictEngine("yes"), VerdictEngine("no")
    with pytest.warns(RuntimeWarning, match="declares no `cache_identity`"):
        assert judge(engine_handle(yes)) == "yes"
    with pytest.warns(RuntimeWarning):
        assert judge(engine_handle(no)) == "no"
    assert (yes.calls, no.calls) == (1, 1)
    assert judge(engine_handle(yes)) == "yes"  # same engine object: its own entry
    assert yes.calls == 1


def test_engines_declaring_an_identity_share_across_runs_only_when_it_matches(dspy_cache):
    first = VerdictEngine("yes", identity="model-a.gguf size=1 settings=x")
    assert judge(engine_handle(first)) == "yes"
    dspy_cache()
    same = VerdictEngine("no", identity="model-a.gguf size=1 settings=x")
    assert judge(engine_handle(same)) == "yes"  # declared the same: served from the disk cache
    other = VerdictEngine("no", identity="model-b.gguf size=1 settings=x")
    assert judge(engine_handle(other)) == "no"
    assert (first.calls, same.calls, other.calls) == (1, 0, 1)


def test_llama_engine_identity_names_file_and_settings(tmp_path):
    one, two = tmp_path / "one.gguf", tmp_path / "two.gguf"
    one.write_bytes(b"GGUF one")
    two.write_bytes(b"GGUF two")
    assert engine_identity(LlamaCppEngine(one)) == engine_identity(LlamaCppEngine(one))
    assert engine_identity(LlamaCppEngine(one)) != engine_identity(LlamaCppEngine(two))
    assert engine_identity(LlamaCppEngine(one)) != engine_identity(LlamaCppEngine(one, max_string_chars=80))
    assert engine_identity(LlamaCppEngine(one)) != engine_identity(LlamaCppEngine(one, n_ctx=2048))
    before = engine_identity(LlamaCppEngine(one))
    one.write_bytes(b"GGUF one, rewritten")
    assert engine_identity(LlamaCppEngine(one)) != before


# --------------------------------------------------------------------------- identities


@pytest.mark.parametrize(("url", "expected"), [
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ("HTTP://LocalHost:8000/v1/", "http://localhost:8000/v1"),
    ("https://api.example.com:443/v1", "https://api.example.com/v1"),
    ("http://user:pw@host/v1", "http://host/v1"),
])
def test_normalize_base_url(url, expected):
    assert normalize_base_url(url) == expected


def test_query_is_kept_only_as_a_hash():
    out = normalize_base_url("https://h/v1?api-key=sk-secret")
    assert "secret" not in out and out.startswith("https://h/v1?q#")
    assert out != normalize_base_url("https://h/v1?api-key=other")


def test_bad_base_url_is_a_config_error():
    with pytest.raises(LMConfigError, match="Fix"):
        normalize_base_url("ftp://host/v1")
    with pytest.raises(LMConfigError):
        make_lm("http://", model="m")
    # DSPy appends /chat/completions to the base URL: after a query string it would land in the query
    with pytest.raises(LMConfigError, match="query string"):
        make_lm("http://127.0.0.1:9/v1?x=1", model="m")


def test_an_upper_case_scheme_is_a_base_url():
    handle = make_lm("HTTP://127.0.0.1:9/v1", model="m")
    assert cache_identity_of(handle.lm) == cache_identity_of(make_lm("http://127.0.0.1:9/v1", model="m").lm)


def test_provider_default_and_environment_base(monkeypatch):
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    lm = make_lm("openai/gpt-4o-mini").lm
    assert cache_identity_of(lm) == "provider-default=openai"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1/")
    assert cache_identity_of(lm) == "endpoint=http://127.0.0.1:8000/v1"  # read at call time


@pytest.mark.parametrize("empty", ["", "  \n "])
def test_an_empty_reply_is_an_error_and_is_not_served_again_from_the_cache(dspy_cache, empty):
    with FakeEndpoint(lambda body: empty) as ep:
        handle = make_lm(ep.base_url, model="fake-x")
        with handle.context():
            verdict = BinEval(one_question(), num_threads=1)(input=ARTICLE, output=SUMMARY).verdicts[0]
        assert verdict.verdict == "error" and verdict.error.startswith("EmptyReply"), verdict
        assert handle.adapter_stats.parse_failures == 0  # no reply, not one that did not parse
        asked = len(ep.requests)

        ep.reply = verdict_replies(default="yes")  # the endpoint recovers
        dspy_cache()  # a new run over the same disk cache
        assert judge(make_lm(ep.base_url, model="fake-x")) == "yes"
        assert len(ep.requests) == asked + 1  # asked again, not replayed from the cache
        dspy_cache()
        assert judge(make_lm(ep.base_url, model="fake-x")) == "yes"
        assert len(ep.requests) == asked + 1  # a real answer is cached as usual


def test_bineval_scopes_a_plain_lm_from_dspy_settings_in_one_process(two_endpoints, dspy_cache):
    a, b = two_endpoints
    program = BinEval(one_question(), num_threads=1)
    for endpoint, expected in ((a, "yes"), (b, "no"), (a, "yes")):
        plain = dspy.LM("openai/fake-x", api_base=endpoint.base_url, api_key="k")  # the user's own, cache on
        with dspy.context(lm=plain):
            assert program(input=ARTICLE, output=SUMMARY).verdicts[0].verdict == expected
    assert (len(a.requests), len(b.requests)) == (1, 1)  # B was asked; A's third run came from A's own entry
    lm_a = dspy.LM("openai/fake-x", api_base=a.base_url, api_key="k")
    program.judge.lm = lm_a  # a predictor-level LM is scoped the same way
    with dspy.context(lm=dspy.LM("openai/fake-x", api_base=b.base_url, api_key="k")):
        assert program(input=ARTICLE, output=SUMMARY).verdicts[0].verdict == "yes"

"""Issue 13: cache padding. An item's shared prompt prefix under the provider's cache minimum is
padded with a marked filler block up to the minimum, only where the price map says it is cheaper.
No network: prompts are rendered with the live adapters, requests captured by scripted engines."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.cost.cache_padding import (
    FILLER_BEGINS,
    FILLER_ENDS,
    CachePadding,
    cache_padding_for,
    decide_padding,
    filler_block,
    padding_installed,
)
from binaryeval_dspy.cost.price_map import model_price
from binaryeval_dspy.cost.provider_tokenizer import MESSAGE_OVERHEAD, ProviderTokenizer
from binaryeval_dspy.errors import LMConfigError
from binaryeval_dspy.lm.adapters import CountingChatAdapter, CountingJSONAdapter, choose_adapter
from binaryeval_dspy.lm.cache_identity import CacheScopedLM
from binaryeval_dspy.lm.calls import format_call
from binaryeval_dspy.lm.factory import LMHandle, make_lm
from binaryeval_dspy.lm.prompt_cache import CacheRules, cache_rules, field_header, render_messages
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.runs import evaluation
from binaryeval_dspy.runs.evaluation import evaluate_items
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.question_set import BinaryQuestion
from binaryeval_dspy.settings import RunSettings
from binaryeval_dspy.signatures.binary_judgment import JudgeBinaryQuestion
from binaryeval_dspy.signatures.refutation import AnswerRefutationQuestion
from tests.conftest import judge_script
from tests.cost.test_cost import (
    RecordingEngine,
    four_questions,
    items_for,
    manifest,
    recording_handle,
)

ROOT = Path(__file__).resolve().parents[2]
OPENAI = CacheRules("OpenAI automatic", 1024, 128, False)
ANTHROPIC = CacheRules("Anthropic breakpoint", 1024, 1, True)
GPT5_MINI = {"input": 0.25, "cached_input": 0.025, "cache_write": 0.25}  # USD per million tokens
GPT4O_MINI = {"input": 0.15, "cached_input": 0.075, "cache_write": 0.15}
SONNET = {"input": 3.0, "cached_input": 0.3, "cache_write": 3.75}
SHORT_ARTICLE = "The home side won 3-1 after a late goal in the second half. " * 12  # well under 1,024 tokens
LONG_ARTICLE = "The home side won 3-1 after a late goal in the second half. " * 120  # well over


# ------------------------------------------------------------------ the decision rule


def test_pads_when_padding_is_cheaper_and_prices_both_choices():
    decision = decide_padding(800, 1040, calls=12, rules=OPENAI, rates=GPT5_MINI)
    assert decision.pad
    assert decision.cost_without == pytest.approx(12 * 800 * 0.25 / 1e6)
    # the first call pays the 1,024 cached tokens at input price (OpenAI bills no write), the other
    # eleven at the cached price, and every call pays the 16 tokens beyond the cached part
    assert decision.cost_with == pytest.approx((1024 * 0.25 + 11 * 1024 * 0.025 + 12 * 16 * 0.25) / 1e6)
    assert decision.cost_with < decision.cost_without


def test_anthropic_write_price_is_counted_for_the_first_call():
    decision = decide_padding(600, 1076, calls=12, rules=ANTHROPIC, rates=SONNET)
    assert decision.pad
    assert decision.cost_with == pytest.approx((1076 * 3.75 + 11 * 1076 * 0.3) / 1e6)
    # a short prefix over few calls: the write premium is not paid back
    assert not decide_padding(300, 1076, calls=3, rules=ANTHROPIC, rates=SONNET).pad


@pytest.mark.parametrize("prefix", [1024, 1500])
def test_never_pads_a_prefix_over_the_minimum_without_caching_more_of_it(prefix):
    # 1024 -> 1124 and 1500 -> 1520 stay within their 128-token step: nothing more is cached
    decision = decide_padding(prefix, prefix + 100 if prefix == 1024 else 1520, calls=12, rules=OPENAI,
                              rates=GPT5_MINI)
    assert not decision.pad and "reaches" in decision.reason
    # Anthropic caches up to the breakpoint exactly: a prefix over its minimum is never padded
    assert not decide_padding(prefix, prefix + 200, calls=12, rules=ANTHROPIC, rates=SONNET).pad


def test_pads_a_long_tail_over_the_minimum_to_openais_next_step():
    # 1,500 tokens: 1,408 cached (1,024 + 3 steps of 128), a 92-token tail paid by all 12 calls
    decision = decide_padding(1500, 1552, calls=12, rules=OPENAI, rates=GPT5_MINI)
    assert decision.pad
    assert decision.cost_without == pytest.approx((1408 * 0.25 + 11 * 1408 * 0.025 + 12 * 92 * 0.25) / 1e6)
    assert decision.cost_with == pytest.approx((1536 * 0.25 + 11 * 1536 * 0.025 + 12 * 16 * 0.25) / 1e6)
    # a 30-token tail is not worth 114 more tokens at gpt-4o-mini's prices (cached input at half)
    assert not decide_padding(1438, 1552, calls=12, rules=OPENAI, rates=GPT4O_MINI).pad


def test_does_not_pad_when_it_is_not_cheaper():
    # cached input at half price: a 200-token prefix is cheaper sent twelve times than padded
    decision = decide_padding(200, 1040, calls=12, rules=OPENAI, rates=GPT4O_MINI)
    assert not decision.pad and decision.cost_with > decision.cost_without
    assert not decide_padding(900, 1040, calls=1, rules=OPENAI, rates=GPT5_MINI).pad  # nothing shared
    assert not decide_padding(900, 1000, calls=12, rules=OPENAI, rates=GPT5_MINI).pad  # padding falls short


def test_does_not_pad_without_prices():
    assert not decide_padding(800, 1040, calls=12, rules=OPENAI,
                              rates={"input": None, "cached_input": None, "cache_write": None}).pad


# ------------------------------------------------------------------ which runs may pad


def hosted(model: str) -> LMHandle:
    return make_lm(model, cache=False)  # never called


def test_auto_pads_hosted_openai_and_anthropic_models_with_cache_prices():
    assert isinstance(cache_padding_for(hosted("openai/gpt-5-mini"), calls_per_item=12), CachePadding)
    padding = cache_padding_for(hosted("anthropic/claude-sonnet-4-5"), calls_per_item=12)
    assert padding is not None and padding.rules.minimum == 1024 and padding.target > 1024
    haiku = cache_padding_for(hosted("anthropic/claude-haiku-4-5"), calls_per_item=12)
    assert haiku is not None and haiku.rules.minimum == 4096  # LiteLLM's prompt_cache_min_tokens


def test_never_pads_with_off_local_served_unpriced_or_uncached_models(scripted_handle):
    assert cache_padding_for(hosted("openai/gpt-5-mini"), calls_per_item=12, policy="off") is None
    handle, _ = scripted_handle(judge_script({}))  # a custom engine
    assert cache_padding_for(handle, calls_per_item=12) is None
    served = make_lm("http://127.0.0.1:9/v1", model="qwen", cache=False)  # a base URL, never contacted
    assert cache_padding_for(served, calls_per_item=12) is None
    # priced as a hosted model (the run's price_model setting), still a local server
    assert cache_padding_for(served, calls_per_item=12, price_model="gpt-5-mini") is None
    embedded = LMHandle(lm=CacheScopedLM("openai/gpt-5-mini", cache=False), adapter=None, name="x.gguf",
                        embedded=True)
    assert cache_padding_for(embedded, calls_per_item=12) is None
    assert cache_padding_for(hosted("openai/unpriced-model-xyz-123"), calls_per_item=12) is None
    assert model_price("openai/gpt-4o-mini-tts").cache_read is None
    assert cache_padding_for(hosted("openai/gpt-4o-mini-tts"), calls_per_item=12) is None  # no cache price
    assert cache_padding_for(hosted("openai/gpt-5-mini"), calls_per_item=1) is None
    assert cache_padding_for(hosted("openai/gpt-5-mini"), calls_per_item=12, warm=False) is None
    assert cache_padding_for(hosted("openai/gpt-4o-mini"), calls_per_item=12, batch=True) is None  # no batch cache price
    assert cache_padding_for(hosted("openai/gpt-5-mini"), calls_per_item=12, batch=True) is not None
    with pytest.raises(LMConfigError, match="cache padding"):
        cache_padding_for(hosted("openai/gpt-5-mini"), calls_per_item=12, policy="always")


def test_a_hosted_id_sent_to_a_base_url_from_the_environment_is_not_padded(monkeypatch):
    # OPENAI_BASE_URL points an openai/ id at the user's own server: its cache rules and prices are not OpenAI's.
    assert cache_padding_for(hosted("openai/gpt-5-mini"), calls_per_item=12) is not None
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert cache_padding_for(hosted("openai/gpt-5-mini"), calls_per_item=12) is None


def test_a_price_model_of_another_provider_does_not_decide_padding():
    haiku = hosted("anthropic/claude-haiku-4-5")
    assert cache_padding_for(haiku, calls_per_item=12) is not None
    # OpenAI's 1,024-token rule would leave Haiku's 4,096 minimum unmet
    assert cache_padding_for(haiku, calls_per_item=12, price_model="gpt-5-mini") is None


def test_evaluate_items_does_not_pad_when_the_questions_start_together(monkeypatch, tmp_path):
    seen = []

    def spy(handle, **kwargs):  # records the arguments, pads nothing (returns None)
        seen.append(kwargs)

    monkeypatch.setattr(evaluation, "cache_padding_for", spy)
    engine = RecordingEngine()
    handle = recording_handle(engine, CountingJSONAdapter())
    qs = four_questions()
    for warm, run in ((True, "a"), (False, "b")):
        evaluate_items(BinEval(qs, logprobs="off"), items_for(tmp_path, 1), RunDirectory(tmp_path / run),
                       manifest(qs, handle.name), lm=handle, settings=RunSettings(concurrency=4, warm_prefix=warm))
    assert [s["warm"] for s in seen] == [True, False]
    assert all(s["calls_per_item"] == 4 for s in seen)


# ------------------------------------------------------------------ the filler in the prompt


def question(i: int) -> BinaryQuestion:
    return BinaryQuestion(id=f"q{i}", dimension="d", text=f"Is claim {i} supported by the article?",
                          violation_example=f"claim {i} contradicts the article")


def render(handle: LMHandle, padding: CachePadding | None, article: str, n: int = 12,
           signature=JudgeBinaryQuestion) -> list[tuple[list[dict], dict]]:
    with padding_installed(handle, padding):
        return [render_messages(handle.adapter, handle.lm, signature,
                                BinEval.question_fields(article, "The home side won.", question(i)))
                for i in range(n)]


def text_of(message: dict) -> str:
    content = message["content"]
    return content if isinstance(content, str) else "".join(b["text"] for b in content)


@pytest.mark.parametrize("adapter_class", [CountingJSONAdapter, CountingChatAdapter])
def test_the_filler_is_byte_identical_across_an_items_calls_and_sits_right_before_the_question(adapter_class):
    handle = hosted("openai/gpt-5-mini")
    handle.adapter = adapter_class()
    padding = cache_padding_for(handle, calls_per_item=12)
    calls = render(handle, padding, SHORT_ARTICLE)
    users = [text_of(messages[-1]) for messages, _ in calls]
    heads = {u[:u.index(field_header("question"))] for u in users}
    assert len(heads) == 1  # the shared part, filler included, is byte-identical for all 12 calls
    head = heads.pop()
    assert head.rstrip("\n").endswith(FILLER_ENDS) and FILLER_BEGINS in head
    assert head.index(FILLER_BEGINS) > head.index("The home side won.")  # after the output, before the question
    assert "carries no content" in head and "cache" in head
    assert padding.stats()["padded_items"] == 1 and padding.stats()["items_seen"] == 1
    # unpadded, the same call differs only by the filler block
    plain = text_of(render(handle, None, SHORT_ARTICLE, n=1)[0][0][-1])
    block = head[head.index(FILLER_BEGINS):head.index(FILLER_ENDS) + len(FILLER_ENDS)]
    assert users[0].replace(block + "\n\n", "") == plain


def test_a_long_prefix_gets_at_most_one_step_and_other_signatures_are_left_alone():
    handle = hosted("openai/gpt-5-mini")
    padding = cache_padding_for(handle, calls_per_item=12)
    render(handle, padding, LONG_ARTICLE, n=2)
    stats = padding.stats()
    assert stats["items_seen"] == 1 and stats["filler_tokens"] <= 128 + 16 + 100  # to the next step, no further
    sonnet = hosted("anthropic/claude-sonnet-4-5")
    exact = cache_padding_for(sonnet, calls_per_item=12)
    assert all(FILLER_BEGINS not in text_of(m[-1]) for m, _ in render(sonnet, exact, LONG_ARTICLE, n=2))
    inputs = {"input": SHORT_ARTICLE, "output": "The home side won.", "question": "Did they win?"}
    with padding_installed(handle, padding):
        messages, _ = render_messages(handle.adapter, handle.lm, AnswerRefutationQuestion, inputs)
    assert FILLER_BEGINS not in text_of(messages[-1])  # a pressure-test call: not the judge's prefix


@pytest.mark.parametrize("engine", ["auto", "litellm"])
def test_the_filler_is_inside_the_anthropic_cache_breakpoint_part(engine):
    lm = CacheScopedLM("anthropic/claude-sonnet-4-5", api_key="k", cache=False, engine=engine)
    adapter, _, _ = choose_adapter("json", lm)
    handle = LMHandle(lm=lm, adapter=adapter, name=lm.model, embedded=False)
    padding = cache_padding_for(handle, calls_per_item=12)
    assert padding is not None
    calls = render(handle, padding, SHORT_ARTICLE)
    for messages, kwargs in calls:
        assert [m["role"] for m in messages] == ["system", "user", "user"]
        shared, rest = messages[1], messages[2]
        if engine == "litellm":  # the mark on the content block
            assert shared["content"][0]["cache_control"] == {"type": "ephemeral"}
        else:  # DSPy's native prompt-cache setting up to the shared message
            assert kwargs["prompt_cache"].prefix_until_index == 0
        assert text_of(shared).endswith(FILLER_ENDS) and FILLER_BEGINS in text_of(shared)
        assert text_of(rest).startswith(field_header("question"))
    assert len({json.dumps(m[:2]) for m, _ in calls}) == 1


@pytest.mark.parametrize("model", ["openai/gpt-5-mini", "anthropic/claude-sonnet-4-5"])
def test_the_padded_prefix_reaches_the_minimum_by_the_tokenizers_count(model):
    handle = hosted(model)
    padding = cache_padding_for(handle, calls_per_item=12)
    tokenizer = ProviderTokenizer(model)

    def prefix_tokens(messages: list[dict]) -> int:
        user = text_of(messages[-1])
        shared = user[:user.index(field_header("question"))].rstrip("\n")
        return (MESSAGE_OVERHEAD + tokenizer.count(text_of(messages[0]))) + MESSAGE_OVERHEAD + tokenizer.count(shared)

    def plain_messages(messages: list[dict]) -> list[dict]:  # the Anthropic split joined back
        return [messages[0], {"role": "user", "content": "\n\n".join(text_of(m) for m in messages[1:])}]

    plain = plain_messages(render(handle, None, SHORT_ARTICLE, n=1)[0][0])
    padded = plain_messages(render(handle, padding, SHORT_ARTICLE, n=1)[0][0])
    rules = cache_rules(model, model_price(model))
    assert prefix_tokens(plain) < rules.minimum
    assert rules.minimum + padding.margin <= prefix_tokens(padded) <= rules.minimum + padding.margin + 40
    assert filler_block(40) == filler_block(40) and filler_block(0).count("\n") == 2


def test_live_calls_carry_the_filler_end_to_end(tmp_path):
    engine = RecordingEngine()
    handle = recording_handle(engine, CountingJSONAdapter())
    price = model_price("gpt-5-mini")
    padding = CachePadding(model="gpt-5-mini", price=price, rules=cache_rules("gpt-5-mini", price),
                           tokenizer=ProviderTokenizer("gpt-5-mini"), calls_per_item=4)
    qs = four_questions()
    items = items_for(tmp_path, 2)
    with padding_installed(handle, padding):  # a scripted engine is never padded by itself: put it on
        evaluate_items(BinEval(qs, logprobs="off"), items, RunDirectory(tmp_path / "run"), manifest(qs, handle.name),
                       lm=handle, settings=RunSettings(concurrency=4))
    assert handle.adapter.cache_padding is None  # removed after the run
    assert len(engine.requests) == 8
    for item in items:
        users = ["\n".join(r["user"]) for r in engine.requests if r["item"].strip() == item.input.strip()]
        heads = {u[:u.index(field_header("question"))] for u in users}
        assert len(heads) == 1 and FILLER_BEGINS in heads.pop()
    assert padding.stats()["padded_items"] == 2


def test_batch_requests_are_padded_by_the_same_adapter():
    handle = hosted("openai/gpt-5-mini")
    padding = cache_padding_for(handle, calls_per_item=12, batch=True)
    program = BinEval(four_questions(), logprobs="off")
    call = program.question_call(SHORT_ARTICLE, "The home side won.", question(1))
    with padding_installed(handle, padding):
        messages = format_call(call, handle.lm, handle.adapter).messages
    user = text_of(messages[-1])
    assert FILLER_BEGINS in user and user.index(FILLER_ENDS) < user.index(field_header("question"))
    live = render(handle, cache_padding_for(handle, calls_per_item=12), SHORT_ARTICLE, n=1)[0][0]
    assert text_of(live[-1])[:user.index(field_header("question"))] == user[:user.index(field_header("question"))]


# ------------------------------------------------------------------ the CLI and the manifest


@pytest.mark.parametrize("policy", [None, "off"])
def test_cli_records_the_cache_padding_policy(tmp_path, items_file, small_question_set, cli_scripted_lms, policy):
    cli_scripted_lms(judge_script({}))
    qs_path = small_question_set.save(tmp_path / "qs.json")
    out = tmp_path / "run"
    args = ["evaluate", str(qs_path), str(items_file), "--input-field", "source", "--output-field", "summary",
            "--out", str(out)] + (["--cache-padding", policy] if policy else [])
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    config = manifest["config"]
    assert manifest["settings"]["cache_padding"] == (policy or "auto") and "cache_padding" not in config
    assert "cache_padding_stats" not in config  # a scripted (not hosted) LM is never padded
    bad = CliRunner().invoke(cli, [*args, "--cache-padding", "always"])
    assert bad.exit_code == 2 and "always" in bad.output


# ------------------------------------------------------------------ the benchmark's lower bound


def load_benchmark():
    path = ROOT / "benchmarks" / "cost_per_item.py"
    spec = importlib.util.spec_from_file_location("cost_per_item_under_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_benchmarks_lower_bound_never_counts_the_filler():
    bench = load_benchmark()
    measured = bench.measure("gpt-5-mini", "auto", limit=6)
    padded = [(plain, pad) for plain, pad in zip(measured.plain, measured.padded) if pad.filler]
    assert padded, "the first six SummEval items include some under OpenAI's 1,024-token minimum"
    for plain, pad in padded:
        assert pad.sent == plain.sent + pad.filler > plain.sent  # the filler is sent and billed
        assert pad.lower_bound == plain.lower_bound  # ... but never counted as necessary
        assert pad.text_bound == plain.text_bound
        assert pad.prefix >= 1024 and pad.served > 0 and plain.served == 0
        eq_plain = bench.billed(plain.sent, plain.served, plain.written, model_price("gpt-5-mini"), batch=False)
        eq_pad = bench.billed(pad.sent, pad.served, pad.written, model_price("gpt-5-mini"), batch=False)
        assert eq_pad < eq_plain  # padded only because it is cheaper

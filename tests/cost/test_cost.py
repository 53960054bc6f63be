"""Issue 13 points 1, 3 and 4: cacheable prompts, warm-prefix scheduling, a price on every run,
``--max-cost``, and the Anthropic cache breakpoint on the wire. No network: scripted engines,
the scripted CLI LM, and a fake Anthropic Messages endpoint on 127.0.0.1."""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import dspy
import pytest
from click.testing import CliRunner
from dspy.lm15 import Message, Response, TextPart, Usage

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.cost.budget import CallRequest, CostBudget
from binaryeval_dspy.engines.senders import completion_cap
from binaryeval_dspy.lm.adapters import judging_adapter
from binaryeval_dspy.lm.calls import format_call
from binaryeval_dspy.cost.price_map import model_price, price_source
from binaryeval_dspy.cost.pricing import estimate_cost
from binaryeval_dspy.lm.prompt_cache import common_prefix_length, field_header
from binaryeval_dspy.data.items import load_items
from binaryeval_dspy.lm.adapters import CountingChatAdapter, CountingJSONAdapter, choose_adapter
from binaryeval_dspy.lm.cache_identity import CacheScopedLM
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.runs.run_summary import summarize_results, write_summary
from binaryeval_dspy.runs.evaluation import evaluate_items
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.item_result import ItemResult
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from binaryeval_dspy.schemas.run_manifest import RunManifest
from binaryeval_dspy.settings import RunSettings
from tests.conftest import judge_script
from tests.fakes import field_value

ANSWERS = {"Is every claim supported?": "yes", "Are the numbers right?": "no", "Is it grammatical?": "yes"}
ARTICLE = "The home side won 3-1 after a late goal. " * 30


class RecordingEngine:
    """A custom DSPy engine that answers yes/no by question and records every request:
    the system text, the user messages, which item and question it was, and when it ran."""

    supports_response_schema = True
    supported_params = frozenset({"response_format", "temperature", "max_tokens"})

    def __init__(self, delay: float = 0.0):
        self.delay = delay
        self.requests: list[dict] = []
        self._lock = threading.Lock()

    def complete(self, request):
        started = time.perf_counter()
        system = request.system if isinstance(request.system, str) else "".join(
            getattr(p, "text", "") for p in (request.system or ()))
        user = [m.text or "" for m in request.messages]
        joined = "\n".join(user)
        if self.delay:
            time.sleep(self.delay)
        with self._lock:
            self.requests.append({"system": system, "user": user, "item": field_value(joined, "input"),
                                  "question": field_value(joined, "question"), "start": started,
                                  "end": time.perf_counter()})
        return Response(id=None, model="recording", finish_reason="stop", usage=Usage(input_tokens=10, output_tokens=5),
                        message=Message.assistant([TextPart(json.dumps({"verdict": "yes", "explanation": "ok"}))]))

    def close(self) -> None:
        pass


def recording_handle(engine: RecordingEngine, adapter) -> LMHandle:
    lm = dspy.LM(f"custom/recording-{uuid.uuid4().hex[:12]}", engine=engine, cache=False, temperature=0.0)
    return LMHandle(lm=lm, adapter=adapter, name=f"recording ({lm.model})", embedded=False)


def four_questions() -> QuestionSet:
    texts = ["Is every claim supported?", "Are the numbers right?", "Is the score given?", "Is it grammatical?"]
    return QuestionSet(task_prompt="Summarize the article.", dimensions=["quality"], questions=[
        BinaryQuestion(id=f"q{i}", dimension="quality", text=t, violation_example="" if i % 2 else f"bad example {i}")
        for i, t in enumerate(texts)])


def manifest(qs: QuestionSet, lm_name: str) -> RunManifest:
    return RunManifest(command="evaluate", lm=lm_name, question_set_hash=qs.content_hash, question_set_path="qs.json",
                       items_path="items.jsonl",
                       config={"input_field": "source", "output_field": "summary", "id_field": "id"})


def items_for(tmp_path, n: int) -> list:
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps({"id": f"item-{i}", "source": f"Article {i}. {ARTICLE}",
                                        "summary": f"Summary {i}: the home side won."}) + "\n" for i in range(n)),
                    encoding="utf-8")
    return load_items(path, input_field="source", output_field="summary", id_field="id")


# ------------------------------------------------------------------ point 1: cacheable prompts


@pytest.mark.parametrize("adapter_class", [CountingJSONAdapter, CountingChatAdapter])
@pytest.mark.parametrize("explanations", [True, False])
def test_an_items_questions_share_a_byte_identical_prefix_up_to_the_question(tmp_path, adapter_class, explanations):
    engine = RecordingEngine()
    handle = recording_handle(engine, adapter_class())
    qs = four_questions()
    items = items_for(tmp_path, 2)
    evaluate_items(BinEval(qs, explanations=explanations, logprobs="off"), items, RunDirectory(tmp_path / "run"),
                   manifest(qs, handle.name), lm=handle, settings=RunSettings(concurrency=4))
    assert len(engine.requests) == 8
    systems = {r["system"] for r in engine.requests}
    assert len(systems) == 1  # instructions and field descriptions: the same for every item
    for item in items:
        users = ["\n".join(r["user"]) for r in engine.requests if r["item"].strip() == item.input.strip()]
        assert len(users) == 4
        # everything before the question (system, input, output) is byte-identical across the item's calls
        header = {u.index(field_header("question")) for u in users}
        assert len(header) == 1
        assert common_prefix_length(users) >= header.pop()
        head = users[0][:users[0].index(field_header("question"))]
        assert item.input.strip() in head and item.output in head
        assert "violation_example ## ]]" not in head


def test_anthropic_messages_split_at_the_question_without_changing_the_text():
    lm = CacheScopedLM("anthropic/claude-haiku-4-5", api_key="k", cache=False)
    adapter, _, _ = choose_adapter("json", lm)
    from binaryeval_dspy.signatures.binary_judgment import JudgeBinaryQuestion

    inputs = {"input": "ART", "output": "SUM", "question": "Q?", "violation_example": "V"}
    plain = CountingJSONAdapter().format(JudgeBinaryQuestion, [], inputs)
    kwargs: dict = {}
    adapter._call_preprocess(lm, kwargs, JudgeBinaryQuestion, inputs)
    split = adapter.format(JudgeBinaryQuestion, [], inputs)
    assert [m["role"] for m in split] == ["system", "user", "user"]
    assert split[1]["content"] + "\n\n" + split[2]["content"] == plain[1]["content"]
    assert split[2]["content"].startswith(field_header("question"))
    assert kwargs["prompt_cache"].prefix_until_index == 0  # the shared user message, counted without the system


# ------------------------------------------------------------------ point 1: warm prefix


def test_warm_prefix_sends_an_items_first_question_before_the_others_start(tmp_path):
    engine = RecordingEngine(delay=0.05)
    handle = recording_handle(engine, CountingJSONAdapter())
    qs = four_questions()
    outcome = evaluate_items(BinEval(qs, logprobs="off"), items_for(tmp_path, 3), RunDirectory(tmp_path / "run"),
                             manifest(qs, handle.name), lm=handle, settings=RunSettings(concurrency=8, warm_prefix=True))
    assert outcome.new_items == 3 and not outcome.incomplete
    by_item: dict[str, list[dict]] = {}
    for r in engine.requests:
        by_item.setdefault(r["item"], []).append(r)
    assert len(by_item) == 3
    for calls in by_item.values():
        calls.sort(key=lambda r: r["start"])
        first, rest = calls[0], calls[1:]
        assert len(rest) == 3
        assert all(first["end"] <= r["start"] for r in rest)  # the cache is written before it is read
        assert first["question"] == "Is every claim supported?"  # the item's first question goes alone
    # meanwhile the pool was not idle: other items' first questions overlapped
    firsts = sorted((min(c, key=lambda r: r["start"]) for c in by_item.values()), key=lambda r: r["start"])
    assert firsts[1]["start"] < firsts[0]["end"]


def test_without_warm_prefix_an_items_questions_start_together(tmp_path):
    engine = RecordingEngine(delay=0.05)
    handle = recording_handle(engine, CountingJSONAdapter())
    qs = four_questions()
    evaluate_items(BinEval(qs, logprobs="off"), items_for(tmp_path, 1), RunDirectory(tmp_path / "run"),
                   manifest(qs, handle.name), lm=handle, settings=RunSettings(concurrency=8, warm_prefix=False))
    calls = sorted(engine.requests, key=lambda r: r["start"])
    assert calls[1]["start"] < calls[0]["end"]


# ------------------------------------------------------------------ point 3: a price on every run


def _result(item_id: str, prompt: int, completion: int, cached: int = 0) -> ItemResult:
    from binaryeval_dspy.schemas.item_result import Usage as ItemUsage
    from binaryeval_dspy.schemas.verdict import QuestionVerdict
    from binaryeval_dspy.scoring import score_verdicts

    qs = QuestionSet(task_prompt="t", dimensions=["d"], questions=[BinaryQuestion(id="q", dimension="d", text="Q?")])
    verdicts = [QuestionVerdict(question_id="q", verdict="yes")]
    return ItemResult(item_id=item_id, output_hash="0", question_set_hash=qs.content_hash, verdicts=verdicts,
                      score_card=score_verdicts(verdicts, qs),
                      usage=ItemUsage(lm_calls=12, prompt_tokens=prompt, completion_tokens=completion,
                                      cached_prompt_tokens=cached))


def test_summary_json_prices_the_run_and_names_the_price_source(tmp_path):
    results = [_result("a", 12_538, 400, cached=10_120), _result("b", 12_538, 400, cached=10_120)]
    summary = summarize_results(results, lm="openai/gpt-4o-mini")
    write_summary(summary, tmp_path)
    saved = json.loads((tmp_path / "summary.json").read_text())
    cost = saved["cost"]
    price = model_price("openai/gpt-4o-mini")
    expected = 2 * ((12_538 - 10_120) * price.input + 10_120 * price.cache_read + 400 * price.output)
    assert cost["status"] == "priced" and cost["usd"] == pytest.approx(expected)
    assert cost["usd_per_item"] == pytest.approx(expected / 2)
    assert cost["price_key"] == "gpt-4o-mini" and cost["mode"] == "live"
    assert cost["source"] == price_source() and "LiteLLM" in cost["source"]
    assert cost["cached_input_usd"] == pytest.approx(2 * 10_120 * price.cache_read)
    markdown = (tmp_path / "summary.md").read_text()
    assert "prompt tokens 12,538 per item, 10,120 of them from cache" in markdown
    assert "Estimated cost: $" in markdown and "LiteLLM" in markdown
    batch = summarize_results(results, lm="openai/gpt-4o-mini", batch=True).cost
    assert batch.mode == "batch" and batch.batch_discount == "LiteLLM batch prices"
    assert batch.input_usd == pytest.approx(cost["input_usd"] / 2)


def test_an_unpriced_model_costs_unknown_and_the_embedded_model_zero_local(tmp_path):
    results = [_result("a", 1000, 100)]
    unknown = summarize_results(results, lm="custom/my-own-model-xyz")
    write_summary(unknown, tmp_path)
    saved = json.loads((tmp_path / "summary.json").read_text())["cost"]
    assert saved["status"] == "unknown" and saved["display"] == "unknown" and saved["usd"] is None
    assert "no price for custom/my-own-model-xyz" in saved["source"]
    assert "Estimated cost: unknown" in (tmp_path / "summary.md").read_text()
    served = summarize_results(results, lm="openai/qwen @ http://127.0.0.1:8000/v1").cost
    assert served.status == "unknown" and "`price_model`" in served.note
    local = summarize_results(results, lm="smollm2.gguf (llama.cpp)").cost
    assert local.status == "local" and local.display == "0 (local)" and local.usd == 0.0


def test_estimate_cost_for_a_batch_submission():
    price = model_price("gpt-4o-mini")
    live = estimate_cost(1000, 1000, 50, "gpt-4o-mini", batch=False)
    batch = estimate_cost(1000, 1000, 50, "gpt-4o-mini")
    assert live == pytest.approx(1000 * (1000 * price.input + 50 * price.output))
    assert batch == pytest.approx(live / 2)  # LiteLLM's batch prices for gpt-4o-mini: half
    assert estimate_cost(10, 100, 10, "custom/unpriced-model") is None
    assert estimate_cost(10, 100, 10, "local") == 0.0


# ------------------------------------------------------------------ point 3: --max-cost


@pytest.fixture
def fake_lm(cli_scripted_lms):
    """Make every --lm value resolve to a scripted LM (`cli_scripted_lms`); returns the engines made."""
    return cli_scripted_lms


def test_max_cost_stops_before_exceeding_and_keeps_everything_stored(tmp_path, items_file, small_question_set,
                                                                    fake_lm):
    engines = fake_lm(judge_script(ANSWERS))
    qs_path = small_question_set.save(tmp_path / "qs.json")
    out = tmp_path / "run"
    per_call = estimate_cost(1, 10, 5, "gpt-4o-mini", batch=False)  # the scripted LM: 10 prompt, 5 completion tokens
    args = ["evaluate", str(qs_path), str(items_file), "--input-field", "source", "--output-field", "summary",
            "--id-field", "id", "--out", str(out), "--price-model", "gpt-4o-mini", "--max-cost"]
    # A budget below one call's worst case (its prompt, and the model's whole output limit: the
    # scripted LM sets no max_tokens) is refused before any call, naming the smallest budget.
    result = CliRunner().invoke(cli, [*args, f"{4.5 * per_call:.10f}"])
    assert result.exit_code == 1, result.output
    assert len(engines[0].calls) == 0 and not (out / "results.jsonl").exists()
    said = " ".join(result.output.split())
    assert "16,384 completion tokens" in said and "9 LM call(s) (questions) are left" in said
    smallest = float(re.search(r"the smallest budget that allows this call is \$(\d+\.\d+)", said).group(1))
    assert smallest > 100 * per_call
    # Room for the first call's worst case plus about 4 calls as they really cost.
    budget = smallest + 4.5 * per_call
    result = CliRunner().invoke(cli, [*args, f"{budget:.10f}"])
    assert result.exit_code == 1, result.output
    assert "--max-cost" in result.output and "Stopped early" in result.output
    made = len(engines[1].calls)
    assert 3 <= made <= 5  # each call's worst case had to fit beside what was already spent
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sum(r["usage"]["lm_calls"] for r in rows) == made  # every call made is stored
    assert rows[-1]["complete"] is False and any(v["error"].startswith("NotAsked: ") for v in rows[-1]["verdicts"]
                                                 if v["verdict"] == "error")
    spent = estimate_cost(made, 10, 5, "gpt-4o-mini", batch=False)
    assert spent <= budget
    assert f"{9 - made} LM call(s) (questions) are left" in " ".join(result.output.split())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cost"]["status"] == "priced" and summary["cost"]["usd"] == pytest.approx(spent)
    # a rerun with room for the rest asks only the questions not asked yet
    result = CliRunner().invoke(cli, [*args, "1"])
    assert result.exit_code == 0, result.output
    assert len(engines[2].calls) == 9 - made


def test_max_cost_with_calls_in_flight_stores_their_items(tmp_path, small_question_set, scripted_handle):
    handle, engine = scripted_handle(judge_script(ANSWERS))
    per_call = estimate_cost(1, 10, 5, "gpt-4o-mini", batch=False)
    program = BinEval(small_question_set, logprobs="off")
    items = items_for(tmp_path, 8)
    prepared = format_call(program.question_call(items[0].input, items[0].output, small_question_set.questions[0]),
                           handle.lm, judging_adapter(handle.adapter, handle.lm))  # the adapter the run uses
    request = CallRequest(messages=prepared.messages, max_tokens=completion_cap(handle.lm, prepared))
    worst = CostBudget(1.0, model_price("gpt-4o-mini")).worst_case(request)[0]
    limit = worst + 10.5 * per_call
    budget = CostBudget(limit, model_price("gpt-4o-mini"))
    run_dir = RunDirectory(tmp_path / "run")
    outcome = evaluate_items(program, items, run_dir, manifest(small_question_set, handle.name), lm=handle,
                             settings=RunSettings(concurrency=4), budget=budget)
    assert outcome.stopped_early and "`max_cost`" in outcome.stopped_early
    assert 9 <= len(engine.calls) <= 11  # a call goes only while its worst case fits beside what was spent
    assert budget.spent_usd <= limit and budget.in_flight == 0
    stored = run_dir.read_results()
    assert sum(r.usage.lm_calls for r in stored) == len(engine.calls)  # every call made is in a stored item
    assert sum(r.answered_count for r in stored) == len(engine.calls)
    assert all(r.answered_count >= 1 for r in stored)  # an item nothing was asked of is not stored
    unasked = [v for r in stored for v in r.verdicts if v.verdict == "error"]
    assert unasked and all(v.error.startswith("NotAsked: ") for v in unasked)
    assert {r.item_id for r in stored if not r.complete} == set(outcome.incomplete)
    assert budget.calls_left == 8 * 3 - len(engine.calls)


def test_max_cost_is_refused_for_an_lm_without_a_price(tmp_path, items_file, small_question_set, fake_lm):
    fake_lm(judge_script(ANSWERS))
    qs_path = small_question_set.save(tmp_path / "qs.json")
    result = CliRunner().invoke(cli, ["evaluate", str(qs_path), str(items_file), "--input-field", "source",
                                      "--output-field", "summary", "--out", str(tmp_path / "r"), "--max-cost", "1"])
    assert result.exit_code == 2
    assert "no price" in result.output and "--price-model" in result.output
    assert not (tmp_path / "r" / "results.jsonl").exists()


# ------------------------------------------------------------------ point 1: Anthropic cache_control on the wire


@contextmanager
def fake_anthropic() -> Iterator[tuple[str, list[dict]]]:
    """A Messages endpoint on 127.0.0.1 recording every request body; replies yes, reporting
    900 prompt tokens read from the cache."""
    bodies: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            bodies.append(body)
            reply = {"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
                     "content": [{"type": "text", "text": json.dumps({"verdict": "yes", "explanation": "ok"})}],
                     "stop_reason": "end_turn", "stop_sequence": None,
                     "usage": {"input_tokens": 20, "output_tokens": 7, "cache_read_input_tokens": 900,
                               "cache_creation_input_tokens": 0}}
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", bodies
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("engine", ["auto", "litellm"])
def test_anthropic_request_marks_the_items_shared_part_for_the_cache(tmp_path, engine):
    with fake_anthropic() as (url, bodies):
        lm = CacheScopedLM("anthropic/claude-haiku-4-5", api_base=url, api_key="test-key", cache=False,
                           max_tokens=100, engine=engine, num_retries=0)
        adapter, _, _ = choose_adapter("chat", lm)
        handle = LMHandle(lm=lm, adapter=adapter, name="anthropic/claude-haiku-4-5", embedded=False)
        qs = four_questions()
        outcome = evaluate_items(BinEval(qs, logprobs="off"), items_for(tmp_path, 1), RunDirectory(tmp_path / "run"),
                                 manifest(qs, handle.name), lm=handle, settings=RunSettings(concurrency=2))
    assert outcome.new_items == 1 and not outcome.incomplete, outcome.first_error
    assert len(bodies) == 4
    shared_parts = set()
    for body in bodies:
        # DSPy's native client sends two user turns, LiteLLM merges them into one: either way the
        # block holding the input and output carries the mark, and the question's block comes after it
        blocks = [b for m in body["messages"] for b in (m["content"] if isinstance(m["content"], list)
                                                        else [{"type": "text", "text": m["content"]}])]
        marked = [i for i, b in enumerate(blocks) if b.get("cache_control") == {"type": "ephemeral"}]
        assert len(marked) == 1
        shared, rest = blocks[marked[0]], blocks[marked[0] + 1:]
        assert "<<<evaluated text begins>>>" in shared["text"] and field_header("question") not in shared["text"]
        assert rest and rest[0]["text"].startswith(field_header("question"))
        shared_parts.add(json.dumps(blocks[:marked[0] + 1]))
    assert len(shared_parts) == 1  # one cache entry serves all four questions
    usage = outcome.results[0].usage
    assert usage.cached_prompt_tokens == 4 * 900 and usage.prompt_tokens == 4 * 920

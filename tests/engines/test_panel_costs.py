"""Usage and cost per judge of a live panel or cascade (issue 29 leftovers).

Each judge is a scripted OpenAI-compatible endpoint of its own (tests/fake_endpoint.py), so
what the endpoint billed is that judge's usage: the run's per-judge figures are checked
against it. USD figures are LiteLLM's bundled prices applied to scripted token counts
(plumbing, never a model's judgment or a real bill).
"""

from __future__ import annotations

import json
from pathlib import Path

import litellm
import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.runs.run_summary import summarize_results
from binaryeval_dspy.scoring import score_verdicts
from binaryeval_dspy.runs.run_summary_tables import judges_line
from binaryeval_dspy.schemas.item_result import ItemResult, Usage
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from tests.engines.test_panels_live import by_model
from tests.engines.test_remote_faults import QUESTIONS, SERVER_ERROR_NOW, stored, write_inputs
from tests.fake_endpoint import FakeEndpoint, request_field


def run(tmp_path: Path, judges: list[str], *extra: str, n_items: int = 2, items: Path | None = None):
    qs, written = write_inputs(tmp_path, n_items=n_items)
    out = tmp_path / "run"
    args = ["evaluate", str(qs), str(items or written), "--id-field", "id", "--out", str(out), "--concurrency", "4"]
    for judge in judges:
        args += ["--judge", judge]
    result = CliRunner().invoke(cli, [*args, *extra])
    return result, out


def summary_of(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


def billed_tokens(endpoint: FakeEndpoint) -> tuple[int, int]:
    return (sum(u["prompt_tokens"] for u in endpoint.billed), sum(u["completion_tokens"] for u in endpoint.billed))


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def second_endpoint():
    with FakeEndpoint() as endpoint:
        yield endpoint


def test_a_cascade_reports_each_judges_usd_and_its_cost_against_asking_the_last_judge_everything(
        tmp_path, fake_endpoint, second_endpoint):
    cheap, strong = fake_endpoint, second_endpoint
    cheap.reply = by_model({"a": {"q3": "garbled", "q5": "garbled"}})  # the cheap judge fails to answer q3, q5
    a, b = f"{cheap.base_url}#{cheap.model}-a", f"{strong.base_url}#{strong.model}-b"
    result, out = run(tmp_path, [a, b], "--cascade", "--price-model", "openai/gpt-4o-mini")
    assert result.exit_code == 0, result.output
    assert len(cheap.requests) == 12 and len(strong.requests) == 4
    stats = summary_of(out)["judges"]
    for judge, endpoint in ((a, cheap), (b, strong)):
        used = stats["usage_by_judge"][judge]
        assert (used["prompt_tokens"], used["completion_tokens"]) == billed_tokens(endpoint) != (0, 0)
        assert used["lm_calls"] == len(endpoint.requests)
        cost = stats["cost_by_judge"][judge]
        assert cost["status"] == "priced" and abs(cost["usd"] - endpoint.billed_usd("gpt-4o-mini")) < 1e-12
    total = cheap.billed_usd("gpt-4o-mini") + strong.billed_usd("gpt-4o-mini")
    assert abs(stats["cost_usd"] - total) < 1e-12
    assert abs(summary_of(out)["cost"]["usd"] - total) < 1e-12  # the run's total is the judges' sum
    estimate = stats["strongest_estimate"]
    per_call = strong.billed_usd("gpt-4o-mini") / 4  # the last judge's own measured cost per question asked
    assert estimate["judge"] == b and estimate["asked"] == 4 and estimate["questions"] == 12
    assert abs(estimate["usd"] - per_call * 12) < 1e-12
    assert abs(stats["cost_vs_strongest"] - total / (per_call * 12)) < 1e-9
    said = f"against an estimated ${per_call * 12:.4g} asking {b} every question"
    assert said in flat(result.output) and said in flat((out / "summary.md").read_text(encoding="utf-8"))
    from binaryeval_dspy.reports.run_view import _run_data, load_run

    assert any(said in line for line in _run_data(load_run(out))["summary"]["lines"])


def test_a_judge_without_a_price_is_price_unknown_with_its_tokens_never_0_usd(tmp_path, fake_endpoint,
                                                                           second_endpoint):
    fake_endpoint.reply = second_endpoint.reply = by_model({"b": {"q1": "no"}})
    a, b = f"{fake_endpoint.base_url}#{fake_endpoint.model}-a", f"{second_endpoint.base_url}#{second_endpoint.model}-b"
    result, out = run(tmp_path, [a, b])  # base URLs, no --price-model: no price known
    assert result.exit_code == 0, result.output
    summary = summary_of(out)
    stats = summary["judges"]
    for judge, endpoint in ((a, fake_endpoint), (b, second_endpoint)):
        assert stats["cost_by_judge"][judge]["status"] == "unknown" and stats["cost_by_judge"][judge]["usd"] is None
        assert stats["usage_by_judge"][judge]["prompt_tokens"] == billed_tokens(endpoint)[0] > 0
    assert stats["cost_usd"] is None and summary["cost"]["usd"] is None
    tokens = sum(billed_tokens(second_endpoint))
    said = f"{b} price unknown (12 calls; {tokens:,} tokens)"
    assert said in flat(result.output) and said in flat((out / "summary.md").read_text(encoding="utf-8"))
    assert "$0" not in flat((out / "summary.md").read_text(encoding="utf-8"))  # never 0 USD for an unknown price


def test_a_judges_failed_calls_are_counted_as_its_own(tmp_path, fake_endpoint, second_endpoint):
    second_endpoint.fault = lambda body, index: SERVER_ERROR_NOW if request_field(body, "question") == QUESTIONS[1] \
        else None  # judge b's calls on q2 always fail (after DSPy's retries)
    a, b = f"{fake_endpoint.base_url}#{fake_endpoint.model}-a", f"{second_endpoint.base_url}#{second_endpoint.model}-b"
    result, out = run(tmp_path, [a, b], "--price-model", "openai/gpt-4o-mini")
    assert result.exit_code == 0, result.output
    stats = summary_of(out)["judges"]
    failed_requests = sum(1 for o in second_endpoint.outcomes if o == "500")
    assert failed_requests >= 2
    assert stats["usage_by_judge"][b]["failed_calls"] == failed_requests
    assert stats["usage_by_judge"][a]["failed_calls"] == 0
    assert stats["answers_by_judge"][b]["error"] == 2 and stats["answers_by_judge"][a]["error"] == 0
    assert stats["usage_by_judge"][b]["lm_calls"] == 10  # the answered ones
    assert f"{b} $" in flat(result.output) and "2 questions with a failed call" in flat(result.output)
    for row in stored(out):  # q2 is decided by the judge that answered; b's failure is an error, never "no"
        q2 = next(v for v in row["verdicts"] if v["question_id"] == "q2")
        assert q2["judges"][b]["verdict"] == "error" and q2["verdict"] == "yes"


def test_a_request_sent_once_for_two_identical_items_is_charged_once_per_judge(tmp_path, fake_endpoint):
    items = tmp_path / "same.jsonl"
    items.write_text("".join(json.dumps({"id": f"item-{i}", "input": "Article about a match.",
                                         "output": "A summary."}) + "\n" for i in range(2)), encoding="utf-8")
    a, b = f"{fake_endpoint.base_url}#{fake_endpoint.model}-a", f"{fake_endpoint.base_url}#{fake_endpoint.model}-b"
    result, out = run(tmp_path, [a, b], items=items)
    assert result.exit_code == 0, result.output
    assert len(fake_endpoint.requests) == 12  # the second item's calls were the first's requests
    summary = summary_of(out)
    per_judge = summary["judges"]["usage_by_judge"]
    assert per_judge[a]["lm_calls"] + per_judge[b]["lm_calls"] == summary["lm_calls"] == 12
    assert sum(u["prompt_tokens"] for u in per_judge.values()) == summary["prompt_tokens"]


def _panel_result(item_id: str, usages: dict[str, dict[str, int] | None]) -> ItemResult:
    members = {judge: QuestionVerdict(question_id="q1", verdict="yes", usage=used) for judge, used in usages.items()}
    verdict = QuestionVerdict(question_id="q1", verdict="yes", judges=members)
    card = score_verdicts([verdict], QuestionSet(task_prompt="t", dimensions=["d"], questions=[
        BinaryQuestion(id="q1", dimension="d", text="Is it so?")]))
    return ItemResult(item_id=item_id, output_hash="0", question_set_hash="0", verdicts=[verdict], score_card=card,
                      usage=Usage(lm_calls=len(usages)))


def test_each_judge_is_priced_at_its_own_models_prices():
    mini, big = "openai/gpt-4o-mini", "openai/gpt-4o"
    results = [_panel_result(f"i{n}", {mini: {"lm_calls": 1, "prompt_tokens": 1000, "completion_tokens": 10},
                                       big: {"lm_calls": 1, "prompt_tokens": 1200, "completion_tokens": 20}})
               for n in range(3)]
    summary = summarize_results(results, lm=f"majority({mini}, {big})", judge_prices={mini: mini, big: big})

    def usd(model: str, prompt: int, completion: int) -> float:
        entry = litellm.model_cost[model.split("/", 1)[1]]
        return prompt * entry["input_cost_per_token"] + completion * entry["output_cost_per_token"]

    costs = summary.judges["cost_by_judge"]
    assert abs(costs[mini]["usd"] - usd(mini, 3000, 30)) < 1e-12
    assert abs(costs[big]["usd"] - usd(big, 3600, 60)) < 1e-12
    assert costs[big]["usd"] > 5 * costs[mini]["usd"]  # not one price for both
    assert abs(summary.cost.usd - (usd(mini, 3000, 30) + usd(big, 3600, 60))) < 1e-12
    unknown = summarize_results(results, lm="majority", judge_prices={mini: mini, big: None})
    assert unknown.judges["cost_by_judge"][big]["usd"] is None and unknown.judges["cost_usd"] is None
    line = judges_line(unknown)
    assert f"{big} price unknown (3 calls; 3,660 tokens)" in line and f"{mini} $" in line


def test_the_exported_verdicts_carry_each_judges_own_cost_so_agreement_prices_the_cascade_as_the_run_did(
        tmp_path, fake_endpoint, second_endpoint):
    from binaryeval_dspy.panels import CascadeRule, index_by_pair, simulate_cascade
    from binaryeval_dspy.runs.verdicts_export import run_verdict_records

    fake_endpoint.reply = by_model({"a": {"q2": "garbled"}})
    a, b = f"{fake_endpoint.base_url}#{fake_endpoint.model}-a", f"{second_endpoint.base_url}#{second_endpoint.model}-b"
    result, out = run(tmp_path, [a, b], "--cascade", "--price-model", "openai/gpt-4o-mini")
    assert result.exit_code == 0, result.output
    records = run_verdict_records(out)
    for judge, endpoint in ((a, fake_endpoint), (b, second_endpoint)):
        own = [r.cost_usd for r in records if r.judge == judge]
        assert None not in own and abs(sum(own) - endpoint.billed_usd("gpt-4o-mini")) < 1e-12
    stats = summary_of(out)["judges"]
    decided = [r.cost_usd for r in records if r.judge == summary_of(out)["lm"]]
    assert abs(sum(decided) - stats["cost_usd"]) < 1e-12
    _, counts = simulate_cascade(index_by_pair([r for r in records if r.judge in (a, b)]), CascadeRule(((a,), (b,))))
    assert abs(counts.cost_usd - stats["cost_usd"]) < 1e-12  # the simulation on the export costs what the run did

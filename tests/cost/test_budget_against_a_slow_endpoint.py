"""Issue 30: a `max_cost` budget that holds against an endpoint slower than the client's `timeout`.

The scripted endpoint (tests/fake_endpoint.py) takes longer to reply than the client
waits, so every attempt times out, and it goes on generating each reply after the client
has given up, as a provider does: it bills what it generated (`FakeEndpoint.billed`),
priced here at the prices the budget uses (gpt-4o-mini's, from LiteLLM's bundled map).
Every attempt (first tries and retries) must be reserved before it goes and a timed-out
one keep its worst case, so what the endpoint billed never passes the budget. Nothing
here is a model's judgment.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from tests.engines.test_remote_faults import write_inputs
from tests.fake_endpoint import FakeEndpoint

BUDGET = 0.001  # USD: about 13 worst-case attempts of these requests at gpt-4o-mini's prices
LATENCY = 0.8  # seconds the endpoint takes to reply ...
TIMEOUT = "0.4"  # ... and the client waits


def run_against_slow_endpoint(tmp_path, endpoint: FakeEndpoint, lm_args: list[str]):
    endpoint.latency = LATENCY
    qs, items = write_inputs(tmp_path, n_items=3)  # 18 calls x 4 attempts would bill far more than the budget
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["evaluate", str(qs), str(items), "--id-field", "id", "--out", str(out),
                                      *lm_args, "--concurrency", "4", "--timeout", TIMEOUT,
                                      "--max-tokens", "64", "--max-cost", str(BUDGET)])
    assert endpoint.wait_idle(30)  # the replies the client gave up on are generated (and billed) too
    return result, out


def check_within_budget(endpoint: FakeEndpoint, result) -> None:
    billed = endpoint.billed
    assert len(billed) >= 2, result.output  # the endpoint did work (and was not answered in time)
    assert endpoint.outcomes.count("200") == len(endpoint.requests)  # every request was generated
    assert endpoint.billed_usd("gpt-4o-mini") <= BUDGET, (len(billed), endpoint.billed_usd(), result.output)
    assert result.exit_code == 1, result.output  # stopped by the budget, and says so
    assert "max_cost" in result.output.replace("-", "_") or "max cost" in result.output.lower()


def test_a_served_model_slower_than_the_timeout_never_bills_past_the_budget(tmp_path, fake_endpoint):
    result, _out = run_against_slow_endpoint(tmp_path, fake_endpoint, [
        "--lm", fake_endpoint.base_url, "--lm-model", fake_endpoint.model, "--price-model", "gpt-4o-mini"])
    check_within_budget(fake_endpoint, result)


def test_a_hosted_model_slower_than_the_timeout_never_bills_past_the_budget(tmp_path, monkeypatch):
    """``openai/gpt-4o-mini``: DSPy's LM sends, retries and times out; the budget gates each attempt."""
    with FakeEndpoint(model="gpt-4o-mini") as endpoint:
        monkeypatch.setenv("OPENAI_BASE_URL", endpoint.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
        result, _out = run_against_slow_endpoint(tmp_path, endpoint, ["--lm", "openai/gpt-4o-mini"])
        check_within_budget(endpoint, result)


def test_a_retry_the_budget_refused_says_not_sent_spending_limit_not_the_last_http_error(tmp_path, fake_endpoint):
    """Every request is rate-limited (429): the retries the budget has no room for are not sent,
    and the verdict says so (``NotAsked: retry not sent: spending limit ...``), with what the
    last attempt got after it, never the rate limit's advice to lower the concurrency as if
    the endpoint had refused every retry."""
    from tests.engines.test_remote_faults import stored
    from tests.fake_endpoint import RATE_LIMIT

    fake_endpoint.fault = lambda body, index: RATE_LIMIT
    qs, items = write_inputs(tmp_path, n_items=3)
    out = tmp_path / "run"
    CliRunner().invoke(cli, ["evaluate", str(qs), str(items), "--id-field", "id", "--out", str(out),
                             "--lm", fake_endpoint.base_url, "--lm-model", fake_endpoint.model,
                             "--price-model", "gpt-4o-mini", "--concurrency", "4", "--max-tokens", "64",
                             "--max-cost", str(BUDGET)])
    errors = [v["error"] for row in stored(out) for v in row["verdicts"] if v["verdict"] == "error"]
    refused = [e for e in errors if "retry not sent" in e]
    assert refused, errors  # the budget stops some retries: ~13 worst-case attempts for 18 calls
    for error in errors:
        if "after 4 attempts" in error:  # every retry was sent: the rate limit is the last word
            assert error.startswith("RateLimitError:"), error
            continue
        assert error.startswith("NotAsked: retry not sent: spending limit (`max_cost`)"), error
        assert "the last attempt got HTTP 429" in error and "lower `concurrency`" not in error, error

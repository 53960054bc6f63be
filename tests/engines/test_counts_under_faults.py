"""Issue 30: ``lm_calls + failed_calls`` equal the requests the endpoint received, on every engine.

One fault mix, against the scripted endpoint of tests/fake_endpoint.py (3 items x 6
questions): every fifth request answered 500 (answered on a retry), one (item, question)
pair answered 500 every time, one that always times out (the endpoint holds it longer
than the client's `timeout`), and one the server always hangs up on without a reply (on a
kept-alive connection, which the client must not send again uncounted). Every attempt the
client makes (first tries and retries, through every route and engine) must be counted
exactly once: in summary.json, in the rows' usage, and against what the endpoint saw.
Nothing here is a model's judgment.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from tests.engines.test_remote_faults import QUESTIONS, evaluate, stored, write_inputs
from tests.fake_endpoint import HANG_UP, FakeEndpoint, HttpFault, TimeoutFault, user_text

ALWAYS_500 = HttpFault(500, "Internal server error (scripted, every time)", retry_after=0)
FLAKY_500 = HttpFault(500, "Internal server error (scripted, once)", retry_after=0)
#: Longer than the client's timeout below (0.5 s): the client gives up on every attempt.
HELD = TimeoutFault(seconds=2.0)
TIMEOUT = "0.5"


def fault_mix(body: dict, index: int):
    """The fault mix of the module docstring (by item and question, then by arrival)."""
    text = user_text(body)
    if "Summary number 1." in text and QUESTIONS[2] in text:
        return ALWAYS_500
    if "Summary number 2." in text and QUESTIONS[4] in text:
        return HELD
    if "Summary number 0." in text and QUESTIONS[5] in text:
        return HANG_UP
    if index % 5 == 4:
        return FLAKY_500
    return None


def check_counts(endpoint: FakeEndpoint, out: Path, *, retried: bool = True) -> dict:
    """summary.json and every row's usage agree with the endpoint: answered = 200s, and
    answered + failed = requests received. Returns the summary."""
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    received = len(endpoint.requests)
    answered = endpoint.outcomes.count("200")
    rows = stored(out)
    assert len(rows) == 3
    row_calls = sum(r["usage"]["lm_calls"] for r in rows)
    row_failed = sum(r["usage"].get("failed_calls", 0) for r in rows)
    assert (summary["lm_calls"], summary["failed_calls"]) == (row_calls, row_failed)
    assert summary["lm_calls"] == answered
    assert summary["lm_calls"] + summary["failed_calls"] == received
    if retried:  # the three failing pairs: a first try and 3 retries each, plus the flaky 500s
        assert answered == 15 and summary["failed_calls"] >= 3 * 4  # 18 questions, 3 never answered
    else:
        assert summary["failed_calls"] >= 3
    return summary


def test_the_live_engine_counts_every_attempt_under_the_fault_mix(tmp_path, fake_endpoint):
    fake_endpoint.fault = fault_mix
    qs, items = write_inputs(tmp_path, n_items=3)
    result = evaluate(fake_endpoint, qs, items, tmp_path / "run", "--engine", "live", "--concurrency", "4",
                      "--timeout", TIMEOUT)
    assert result.exit_code == 0, result.output
    check_counts(fake_endpoint, tmp_path / "run")


def test_dspys_route_counts_every_attempt_under_the_fault_mix(tmp_path, monkeypatch):
    """A hosted model id (``openai/<model>``) goes through DSPy's LM and LiteLLM, not our client."""
    with FakeEndpoint(model="gpt-4o-mini") as endpoint:
        endpoint.fault = fault_mix
        monkeypatch.setenv("OPENAI_BASE_URL", endpoint.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
        qs, items = write_inputs(tmp_path, n_items=3)
        out = tmp_path / "run"
        result = CliRunner().invoke(cli, ["evaluate", str(qs), str(items), "--id-field", "id", "--out", str(out),
                                          "--lm", "openai/gpt-4o-mini", "--engine", "live", "--concurrency", "4",
                                          "--timeout", TIMEOUT])
        assert result.exit_code == 0, result.output
        check_counts(endpoint, out)


@pytest.mark.ray
@pytest.mark.usefixtures("ray_cluster")
@pytest.mark.filterwarnings("ignore:`use_arrow_tensor_v2` is deprecated:DeprecationWarning")
def test_the_ray_engine_counts_every_attempt_under_the_fault_mix(tmp_path, fake_endpoint):
    fake_endpoint.fault = fault_mix
    qs, items = write_inputs(tmp_path, n_items=3)
    result = evaluate(fake_endpoint, qs, items, tmp_path / "run", "--engine", "ray", "--concurrency", "4",
                      "--timeout", TIMEOUT)
    assert result.exit_code == 0, result.output
    check_counts(fake_endpoint, tmp_path / "run")


def test_the_batch_engine_counts_every_request_of_its_batches(tmp_path):
    """A batch request that failed inside the batch (a 500, a timeout) was received: it is a
    failed call (a batch has no retries: the next invocation sends it again)."""
    from tests.fake_batch_endpoint import FakeBatchEndpoint

    with FakeBatchEndpoint() as endpoint:
        endpoint.fault = fault_mix
        qs, items = write_inputs(tmp_path, n_items=3)
        out = tmp_path / "run"
        result = evaluate(endpoint, qs, items, out, "--batch")
        assert result.exit_code == 0, result.output
        check_counts(endpoint, out, retried=False)  # one request each: no retry inside a batch
        again = evaluate(endpoint, qs, items, out, "--batch")  # sends the 3 failed ones again
        assert again.exit_code == 0, again.output
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
        assert summary["lm_calls"] + summary["failed_calls"] == len(endpoint.requests)


def test_dspys_own_http_layer_counts_and_reserves_every_attempt(fake_endpoint):
    """A served model handed to a program as a DSPy LM (no run handle) goes through DSPy's LM and
    its own HTTP layer (lm15), where a timeout or a reply cut by a hang-up is a transport error,
    not a provider's: those requests were received (and the slow one billed) all the same. With
    a spending limit, what the budget counts as spent is never less than what was billed."""
    from binaryeval_dspy.cost.budget import CostBudget
    from binaryeval_dspy.engines.senders import LMSender
    from binaryeval_dspy.lm.adapters import judging_adapter
    from binaryeval_dspy.lm.factory import make_lm
    from binaryeval_dspy.programs.bineval import BinEval
    from tests.engines.test_remote_faults import question_set

    questions = question_set()
    handle = make_lm(fake_endpoint.base_url, model=fake_endpoint.model, cache=False, timeout=0.4)
    handle.lm.num_retries = 1  # two attempts per call (after a one-attempt probe of the schema form while unknown)
    sender = LMSender(handle.lm, judging_adapter(handle.adapter, handle.lm))
    fake_endpoint.latency = lambda body: 0.8 if QUESTIONS[0] in user_text(body) else 0.0  # slower than the timeout
    fake_endpoint.fault = lambda body, index: HANG_UP if QUESTIONS[1] in user_text(body) else None
    budget = CostBudget.for_model(1.0, "gpt-4o-mini")
    program = BinEval(questions, logprobs="off")
    answers = [sender.answer(program.question_call("An article.", "A summary.", question), budget)
               for question in questions.questions[:3]]
    assert [a.status for a in answers] == ["error", "error", "answered"]
    assert fake_endpoint.wait_idle(10)
    received = len(fake_endpoint.requests)
    assert sum(a.usage.lm_calls + a.usage.failed_calls for a in answers) == received >= 2 + 2 + 1
    slow = sum(1 for body in fake_endpoint.requests if QUESTIONS[0] in user_text(body))
    assert len(fake_endpoint.billed) == slow + 1  # every attempt of the slow call (the client gave up on each), the answer
    assert budget.spent_usd >= fake_endpoint.billed_usd("gpt-4o-mini") > 0
    assert budget.in_flight == 0 and budget.reserved_usd == 0


@pytest.mark.parametrize("stop", [(), ("--fail-on-errors",)], ids=["failures-in-a-row", "fail-on-errors"])
def test_an_early_stop_counts_the_requests_of_items_whose_every_call_failed(tmp_path, fake_endpoint, stop):
    """After an early stop, the calls still in flight are drained: an item whose every request
    failed is stored (incomplete, a rerun asks it again), so its failed requests are counted in
    summary.json and on the console, never lost with a dropped item."""
    fake_endpoint.fault = lambda body, index: ALWAYS_500
    qs, items = write_inputs(tmp_path, n_items=10)
    out = tmp_path / "run"
    result = evaluate(fake_endpoint, qs, items, out, "--concurrency", "8", *stop)
    assert "Stopped early" in result.output
    assert fake_endpoint.wait_idle(10)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    received = len(fake_endpoint.requests)
    assert summary["lm_calls"] == 0 and summary["failed_calls"] == received
    assert sum(r["usage"].get("failed_calls", 0) for r in stored(out)) == received
    assert f"{received} LM calls (0 answered, {received} failed)" in " ".join(result.output.split())

"""Issue 23, point 5: usage that matches the endpoint.

A run is killed (right after an answer reached answers.jsonl, as a SIGKILL would leave it)
and resumed, against the scripted OpenAI-compatible endpoint of tests/fake_endpoint.py
with server errors that DSPy retries and a question that fails every time. Every answer in
the journal carries its call's usage, the resumed run adds what the killed session spent,
and failed requests are counted apart from answered ones: the summary's calls equal the
requests the endpoint received. Nothing here is a model's judgment.
"""

from __future__ import annotations

import json

import pytest

from binaryeval_dspy.runs import answer_journal
from binaryeval_dspy.runs.answer_journal import ANSWERS
from binaryeval_dspy.schemas.item_result import Usage
from tests.engines.test_remote_faults import evaluate, stored, write_inputs
from tests.fake_endpoint import HttpFault, user_text

FLAKY = HttpFault(500, "Internal server error (scripted)", retry_after=0)
DOWN = HttpFault(503, "Service unavailable (scripted)", retry_after=0)


class _Killed(BaseException):
    """Stands in for the process dying: nothing in the run gets to clean up after it."""


def test_a_killed_and_resumed_run_counts_every_request_the_endpoint_received(tmp_path, fake_endpoint, monkeypatch):
    qs_path, items = write_inputs(tmp_path, n_items=3)  # 3 items x 6 questions

    def fault(body: dict, index: int):
        text = user_text(body)
        if index in (1, 2, 9):
            return FLAKY  # answered on DSPy's next attempt
        if "Summary number 1." in text and "Is point 5 covered?" in text:
            return DOWN  # every attempt fails: an error verdict, asked again by the rerun
        return None

    fake_endpoint.fault = fault
    written = {"answers": 0}
    original = answer_journal.AnswerJournal.write

    def write_then_die(self, item, verdict, usage=None):
        original(self, item, verdict, usage)
        if verdict.answered:
            written["answers"] += 1
            if written["answers"] == 11:  # item-1's last question: its 5th failed for good before it
                raise _Killed

    monkeypatch.setattr(answer_journal.AnswerJournal, "write", write_then_die)
    out = tmp_path / "run"
    with pytest.raises(_Killed):
        evaluate(fake_endpoint, qs_path, items, out, "--concurrency", "1")
    lines = [json.loads(line) for line in (out / ANSWERS).read_text().splitlines()]
    answers = [line for line in lines if line["verdict"]["verdict"] != "error"]
    assert len(answers) == 5  # item-0 was stored (its lines dropped); item-1's five answers wait
    assert all(Usage.model_validate(line["usage"]).lm_calls == 1 for line in answers)
    failed = [Usage.model_validate(line["usage"]) for line in lines if line["verdict"]["verdict"] == "error"]
    assert [u.failed_calls for u in failed] == [4]  # one try and DSPy's 3 retries, all 503
    assert len(stored(out)) == 1
    sent_before = len(fake_endpoint.requests)

    monkeypatch.setattr(answer_journal.AnswerJournal, "write", original)
    result = evaluate(fake_endpoint, qs_path, items, out, "--concurrency", "1")
    assert result.exit_code == 0, result.output  # incomplete items, without --fail-on-errors
    # item-1's 5th question again (one try and 3 retries, all 503: the response_format form is
    # settled by the first reply, no request is sent only to probe it), then item-2's six
    assert len(fake_endpoint.requests) == sent_before + 4 + 6
    summary = json.loads((out / "summary.json").read_text())
    outcomes = fake_endpoint.outcomes
    answered = sum(1 for o in outcomes if o == "200")
    assert summary["lm_calls"] == answered == 3 * 6 - 1  # every answer, the killed session's included
    assert summary["failed_calls"] == len(outcomes) - answered == 3 + 4 + 4
    assert summary["lm_calls"] + summary["failed_calls"] == len(fake_endpoint.requests)
    rows = {r["item_id"]: r for r in stored(out)}
    assert rows["item-1"]["usage"]["lm_calls"] == 5 and rows["item-1"]["usage"]["failed_calls"] == 1 + 4 + 4
    assert rows["item-1"]["usage"]["prompt_tokens"] > 0
    said = (out / "summary.md").read_text()
    assert f"LM calls: {len(fake_endpoint.requests)} (17 answered, 11 failed)" in said
    assert not (out / ANSWERS).exists()  # every item is stored: nothing left to recover


def test_a_failed_request_is_counted_apart_from_answered_calls():
    from binaryeval_dspy.lm.usage import FAILED_REQUEST, usage_from_entries

    usage = usage_from_entries({"m": [{"prompt_tokens": 10, "completion_tokens": 5}, {FAILED_REQUEST: 1},
                                      {FAILED_REQUEST: 1, "prompt_tokens": 7}]})
    assert (usage.lm_calls, usage.failed_calls, usage.prompt_tokens) == (1, 2, 17)
    assert (usage + usage).failed_calls == 4

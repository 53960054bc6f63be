"""A served model that misbehaves: no answered question is lost, and the numbers stay true.

Every test drives `bineval evaluate` (or the library) over real HTTP against the scripted
OpenAI-compatible endpoint in tests/fake_endpoint.py: rate limits, server errors, cut
replies, latency. Nothing here is a model's judgment.
"""

from __future__ import annotations

import json
from pathlib import Path

import dspy
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.lm.usage import SharedUsageTracker
from binaryeval_dspy.cost.usage_meter import measure_usage
from binaryeval_dspy.lm.factory import make_lm
from binaryeval_dspy.engines.senders import HttpSender
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from tests.fake_endpoint import (
    RATE_LIMIT,
    CutFault,
    HttpFault,
    user_text,
    verdict_replies,
    when_user_contains,
)

QUESTIONS = [f"Is point {n} covered?" for n in range(1, 7)]
SERVER_ERROR_NOW = HttpFault(500, "Internal server error (scripted)", retry_after=0)


def question_set() -> QuestionSet:
    return QuestionSet(
        task_prompt="Summarize the article.", dimensions=["coverage", "style"],
        questions=[BinaryQuestion(id=f"q{n}", dimension="coverage" if n <= 4 else "style", text=text)
                   for n, text in enumerate(QUESTIONS, start=1)],
    )


def write_inputs(tmp_path: Path, n_items: int = 3) -> tuple[Path, Path]:
    qs_path = question_set().save(tmp_path / "questions.json")
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": f"item-{i}", "input": f"Article {i} about a match.",
                                         "output": f"Summary number {i}."}) + "\n" for i in range(n_items)),
                     encoding="utf-8")
    return qs_path, items


def evaluate(endpoint, qs_path: Path, items: Path, out: Path, *extra: str):
    args = ["evaluate", str(qs_path), str(items), "--id-field", "id", "--out", str(out),
            "--lm", endpoint.base_url, "--lm-model", endpoint.model, *extra]
    return CliRunner().invoke(cli, args)


def stored(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]


def requests_for(endpoint, text: str) -> int:
    return sum(1 for body in endpoint.requests if text in user_text(body))


def test_a_question_that_keeps_getting_429_loses_nothing_and_a_rerun_asks_only_it(tmp_path, fake_endpoint):
    qs_path, items = write_inputs(tmp_path)
    out = tmp_path / "run"
    fake_endpoint.reply = verdict_replies({QUESTIONS[1]: "no"})
    fake_endpoint.fault = when_user_contains(QUESTIONS[3], RATE_LIMIT)
    result = evaluate(fake_endpoint, qs_path, items, out, "--concurrency", "4")
    assert result.exit_code == 0, result.output  # the run finishes; failures are not fatal by default
    assert "incomplete" in result.output
    before = stored(out)
    assert [r["item_id"] for r in before] == ["item-0", "item-1", "item-2"]
    for record in before:
        verdicts = {v["question_id"]: v for v in record["verdicts"]}
        assert record["complete"] is False and record["questions_answered"] == 5
        assert verdicts["q4"]["verdict"] == "error" and "RateLimit" in verdicts["q4"]["error"]
        assert [verdicts[f"q{n}"]["verdict"] for n in (1, 2, 3, 5, 6)] == ["yes", "no", "yes", "yes", "yes"]
        # the error is in no denominator: coverage = 2 yes of 3 answered
        assert record["score_card"]["counts"]["coverage"] == {"yes": 2, "no": 1, "unparsed": 0, "error": 1}
        assert abs(record["score_card"]["dimension_scores"]["coverage"] - 2 / 3) < 1e-9
    summary = json.loads((out / "summary.json").read_text())
    assert summary["items_incomplete"] == 3 and summary["questions_answered"] == 15
    assert summary["questions_total"] == 18
    assert {d["dimension"]: d["error"] for d in summary["dimensions"]}["overall"] == 3

    fake_endpoint.fault = None
    fake_endpoint.reset()
    result = evaluate(fake_endpoint, qs_path, items, out, "--concurrency", "4")
    assert result.exit_code == 0, result.output
    assert len(fake_endpoint.requests) == 3  # one per item: the 4th question only
    assert requests_for(fake_endpoint, QUESTIONS[3]) == 3
    after = stored(out)
    assert len(after) == 3 and all("complete" not in r for r in after)  # complete items omit the flag
    for old, new in zip(before, after, strict=True):
        kept = [v for v in old["verdicts"] if v["question_id"] != "q4"]
        assert [v for v in new["verdicts"] if v["question_id"] != "q4"] == kept
        assert new["usage"]["lm_calls"] > old["usage"]["lm_calls"]  # the earlier attempt's cost is kept
    assert json.loads((out / "summary.json").read_text())["items_incomplete"] == 0


def test_an_item_whose_every_call_fails_is_counted_not_dropped(tmp_path, fake_endpoint):
    qs_path, items = write_inputs(tmp_path)
    out = tmp_path / "run"
    fake_endpoint.fault = when_user_contains("Article 1 ", SERVER_ERROR_NOW)
    fake_endpoint.reply = verdict_replies(default="yes")
    result = evaluate(fake_endpoint, qs_path, items, out)
    assert result.exit_code == 0, result.output
    records = {r["item_id"]: r for r in stored(out)}
    assert set(records) == {"item-0", "item-1", "item-2"}
    broken = records["item-1"]
    assert broken["complete"] is False and broken["questions_answered"] == 0
    assert broken["score_card"]["overall"] is None  # no answers: no score, never 0 or 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["items"] == 3 and summary["items_incomplete"] == 1
    overall = {d["dimension"]: d for d in summary["dimensions"]}["overall"]
    assert overall["items_scored"] == 2 and overall["error"] == 6
    assert "1 of 3 items incomplete" in (out / "summary.md").read_text()
    assert "(1 incomplete: some questions unanswered)" in (out / "summary.md").read_text()  # beside the status counts


def test_fail_on_errors_stops_at_the_first_incomplete_item_and_exits_1(tmp_path, fake_endpoint):
    qs_path, items = write_inputs(tmp_path, n_items=4)
    out = tmp_path / "run"
    fake_endpoint.fault = when_user_contains("Article 0 ", SERVER_ERROR_NOW)
    result = evaluate(fake_endpoint, qs_path, items, out, "--fail-on-errors")
    assert result.exit_code == 1, result.output
    records = stored(out)
    assert [r["item_id"] for r in records] == ["item-0"] and records[0]["complete"] is False
    assert "Stopped early" in result.output and "--fail-on-errors" in result.output


def test_a_reply_cut_at_max_tokens_is_unparsed_never_no(tmp_path, fake_endpoint):
    qs_path, items = write_inputs(tmp_path, n_items=1)
    out = tmp_path / "run"
    fake_endpoint.fault = when_user_contains(QUESTIONS[0], CutFault(tokens=1))  # '{"verdict":' and no value
    result = evaluate(fake_endpoint, qs_path, items, out, "--max-tokens", "16")
    assert result.exit_code == 0, result.output
    verdicts = {v["question_id"]: v for v in stored(out)[0]["verdicts"]}
    assert verdicts["q1"]["verdict"] == "unparsed" and "max_tokens" in verdicts["q1"]["error"]
    assert [verdicts[f"q{n}"]["verdict"] for n in range(2, 7)] == ["yes"] * 5
    assert requests_for(fake_endpoint, QUESTIONS[0]) == 1  # no second format


def test_a_reply_cut_after_its_verdict_is_unparsed_not_an_answer(tmp_path, fake_endpoint):
    """Issue 23.1 (changed on purpose: this reply was read as "no" with ``reply_cut``): the
    verdict word is whole, but the reply stops inside its JSON object, so it is no answer."""
    qs_path, items = write_inputs(tmp_path, n_items=2)
    out = tmp_path / "run"
    reply = {"verdict": "no", "explanation": "The summary leaves out the second half of the match entirely."}
    # 6 tokens: '{"verdict": "no", "explanation": "The summary leaves' -- the verdict, then a cut explanation
    fake_endpoint.fault = when_user_contains(QUESTIONS[0], CutFault(tokens=6, text=reply))
    result = evaluate(fake_endpoint, qs_path, items, out, "--concurrency", "4")
    assert result.exit_code == 0, result.output
    for record in stored(out):
        verdicts = {v["question_id"]: v for v in record["verdicts"]}
        assert verdicts["q1"]["verdict"] == "unparsed" and "reply_cut" not in verdicts["q1"]
        assert "max_tokens" in verdicts["q1"]["error"] and "stops inside its JSON object" in verdicts["q1"]["error"]
        assert verdicts["q1"]["raw_answer"] == '{"verdict": "no", "explanation": "The summary leaves'
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["replies_cut"] == 0


def test_a_whole_answer_in_a_reply_marked_cut_is_answered_and_marked_cut(tmp_path, fake_endpoint):
    qs_path, items = write_inputs(tmp_path, n_items=2)
    out = tmp_path / "run"
    reply = {"verdict": "no", "explanation": "The summary leaves out the second half of the match entirely."}
    # the whole object, reported with finish_reason "length" (the model "would have gone on")
    fake_endpoint.fault = when_user_contains(QUESTIONS[0], CutFault(tokens=100, text=reply))
    result = evaluate(fake_endpoint, qs_path, items, out, "--concurrency", "4")
    assert result.exit_code == 0, result.output
    for record in stored(out):
        verdicts = {v["question_id"]: v for v in record["verdicts"]}
        assert verdicts["q1"]["verdict"] == "no" and verdicts["q1"]["reply_cut"] is True
        assert verdicts["q1"]["explanation"] == reply["explanation"]
        assert all("reply_cut" not in verdicts[f"q{n}"] for n in range(2, 7))  # whole replies carry no mark
        assert record.get("complete", True) is True  # stored only when False
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["replies_cut"] == 2
    assert any("stopped at max_tokens" in note for note in summary["notes"])
    assert "stopped at max_tokens" in " ".join(result.output.split())


def test_items_overlap_and_results_do_not_depend_on_concurrency(tmp_path, fake_endpoint):
    qs_path, items = write_inputs(tmp_path, n_items=4)
    fake_endpoint.latency = 0.05
    replies = verdict_replies({QUESTIONS[0]: "no", QUESTIONS[5]: "no"})
    fake_endpoint.reply = replies
    serial = tmp_path / "serial"
    assert evaluate(fake_endpoint, qs_path, items, serial, "--concurrency", "1").exit_code == 0
    assert fake_endpoint.max_in_flight == 1
    fake_endpoint.reset()
    from tests.fake_endpoint import fake_endpoint_running

    with fake_endpoint_running(latency=0.05) as other:  # a fresh endpoint: nothing cached for it
        other.reply = replies
        pooled = tmp_path / "pooled"
        result = evaluate(other, qs_path, items, pooled, "--concurrency", "12")
        assert result.exit_code == 0, result.output
        assert other.max_in_flight > 6  # more than one item's 6 questions at once
        assert len(other.requests) == 24

    def strip(records: list[dict]) -> list[dict]:
        return [{k: v for k, v in r.items() if k not in ("seconds", "usage")} for r in records]

    assert strip(stored(serial)) == strip(stored(pooled))
    a = json.loads((serial / "summary.json").read_text())
    b = json.loads((pooled / "summary.json").read_text())
    assert a["dimensions"] == b["dimensions"] and a["lm_calls"] == b["lm_calls"] == 24


def test_usage_is_true_under_threads_and_counts_cached_tokens(fake_endpoint):
    fake_endpoint.cached_tokens = 7
    handle = make_lm(fake_endpoint.base_url, model=fake_endpoint.model, cache=False)
    program = BinEval(question_set(), num_threads=6)
    with handle.context(), measure_usage() as meter:
        pred = program(input="Article about a match.", output="A summary.")
        # DSPy's own thread pool (dspy.Evaluate / Parallel) deep-copies the tracker per thread
        dspy.Parallel(num_threads=3, disable_progress_bar=True)(
            [(program, {"input": f"Article {i}.", "output": "S."}) for i in range(3)])
    assert [v.verdict for v in pred.verdicts] == ["yes"] * 6
    assert meter.lm_calls == len(fake_endpoint.requests) == 24
    assert meter.cached_prompt_tokens == 7 * 24
    assert meter.prompt_tokens > meter.cached_prompt_tokens


def test_shared_tracker_survives_deepcopy():
    import copy

    tracker = SharedUsageTracker()
    assert copy.deepcopy(tracker) is tracker
    tracker.add_usage("m", {"prompt_tokens": 3, "completion_tokens": 1})
    assert tracker.snapshot() == {"m": [{"prompt_tokens": 3, "completion_tokens": 1}]}


def test_usage_under_dspy_evaluate_and_the_optimizers_item_runs_counts_every_call(small_question_set):
    from binaryeval_dspy.runs import run_items
    from tests.conftest import judge_script
    from tests.fakes import scripted_lm

    lm, engine = scripted_lm(judge_script({}))
    program = BinEval(small_question_set, logprobs="off")
    devset = [dspy.Example(input=f"Article {i}.", output=f"Summary {i}.").with_inputs("input", "output")
              for i in range(4)]
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()), measure_usage() as meter:
        dspy.Evaluate(devset=devset, metric=lambda example, pred, trace=None: 1.0, num_threads=4,
                      display_progress=False)(program)
        run_items(lambda item: program(input=item.input, output=item.output), devset, num_threads=3)
    assert len(engine.calls) == 24
    assert meter.lm_calls == 24 and meter.prompt_tokens == 240  # 10 prompt tokens per scripted call


def test_a_request_that_never_answers_times_out_into_an_error_verdict(tmp_path, fake_endpoint):
    from tests.fake_endpoint import TimeoutFault

    qs_path, items = write_inputs(tmp_path, n_items=1)
    out = tmp_path / "run"
    fake_endpoint.fault = when_user_contains(QUESTIONS[2], TimeoutFault(seconds=5))
    result = evaluate(fake_endpoint, qs_path, items, out, "--timeout", "0.5", "--concurrency", "6")
    assert result.exit_code == 0, result.output
    verdicts = {v["question_id"]: v for v in stored(out)[0]["verdicts"]}
    assert verdicts["q3"]["verdict"] == "error" and "timeout" in verdicts["q3"]["error"].lower()
    assert all(verdicts[f"q{n}"]["verdict"] == "yes" for n in (1, 2, 4, 5, 6))


def test_rejudge_completes_an_incomplete_item_asking_only_its_failed_questions(tmp_path, fake_endpoint):
    qs_path, items = write_inputs(tmp_path, n_items=2)
    first = tmp_path / "run"
    fake_endpoint.fault = when_user_contains(QUESTIONS[3], RATE_LIMIT)
    assert evaluate(fake_endpoint, qs_path, items, first).exit_code == 0
    assert all(r["complete"] is False for r in stored(first))
    fake_endpoint.fault = None
    fake_endpoint.reset()
    again = tmp_path / "again"
    result = CliRunner().invoke(cli, ["rejudge", str(first), str(items), "--out", str(again)])
    assert result.exit_code == 0, result.output
    # Only the failed question is asked again, once per item (a client retry under a loaded
    # machine may add a request, never one for another question).
    assert requests_for(fake_endpoint, QUESTIONS[3]) == len(fake_endpoint.requests) >= 2
    report = json.loads((again / "rejudge.json").read_text())
    assert {i["item_id"]: i["status"] for i in report["items"]} == {"item-0": "completed", "item-1": "completed"}
    assert all(i["flipped_questions"] == [] for i in report["items"])  # error -> yes is an answer, not a flip
    assert all("complete" not in r for r in stored(again))
    assert all("complete" in r for r in stored(first))  # the previous run is never modified


def test_an_endpoint_where_no_call_succeeds_fails_the_run_with_the_cause(tmp_path, fake_endpoint):
    qs_path, items = write_inputs(tmp_path, n_items=2)
    fake_endpoint.fault = lambda body, index: HttpFault(404, "The model nothing-here does not exist (scripted)")
    result = CliRunner().invoke(cli, ["evaluate", str(qs_path), str(items), "--id-field", "id",
                                      "--out", str(tmp_path / "run"), "--lm", fake_endpoint.base_url,
                                      "--lm-model", "nothing-here", "--timeout", "2", "--concurrency", "12"])
    assert result.exit_code == 1, result.output
    assert "No LM call succeeded" in result.output and "First failed call" in result.output
    assert "does not exist" in result.output  # the error itself is shown, not only in results.jsonl
    assert all(r["complete"] is False for r in stored(tmp_path / "run"))


def test_an_empty_reply_is_an_error_verdict_and_keeps_the_other_answers(tmp_path, fake_endpoint):
    from tests.fake_endpoint import Reply

    qs_path, items = write_inputs(tmp_path, n_items=1)
    base = fake_endpoint.reply
    fake_endpoint.reply = lambda body: Reply(text="") if QUESTIONS[4] in user_text(body) else base(body)
    result = evaluate(fake_endpoint, qs_path, items, tmp_path / "run", "--concurrency", "3")
    assert result.exit_code == 0, result.output
    verdicts = {v["question_id"]: v["verdict"] for v in stored(tmp_path / "run")[0]["verdicts"]}
    assert verdicts["q5"] in ("error", "unparsed") and sum(v == "yes" for v in verdicts.values()) == 5


def test_ctrl_c_keeps_the_answers_of_items_in_flight_and_a_rerun_asks_only_the_rest(tmp_path, fake_endpoint,
                                                                                     monkeypatch):
    """Ctrl-C while item-1's fourth question is in flight: its three answers (and, with
    calls in flight across items, the other items' answers) are stored, the item is
    incomplete, and the rerun asks only what was not answered."""
    for concurrency in ("1", "3"):
        qs_path, items = write_inputs(tmp_path / concurrency)
        out = tmp_path / concurrency / "run"
        fake_endpoint.reset()
        fake_endpoint.reply = verdict_replies({QUESTIONS[1]: "no"})
        original = HttpSender.prepare  # every route's first step (the live engine never calls `answer`)
        pressed = []

        def prepare(self, call, *args, _original=original, _pressed=pressed, **kwargs):
            if "Article 1" in call.inputs["input"] and call.key == "q4" and not _pressed:
                _pressed.append(True)
                raise KeyboardInterrupt
            return _original(self, call, *args, **kwargs)

        monkeypatch.setattr(HttpSender, "prepare", prepare)
        first = evaluate(fake_endpoint, qs_path, items, out, "--concurrency", concurrency)
        assert first.exit_code == 130, first.output
        records = {r["item_id"]: r for r in stored(out)}
        answered = sum(1 for r in records.values() for v in r["verdicts"] if v["verdict"] in ("yes", "no"))
        sent_before = len(fake_endpoint.requests)
        for record in records.values():  # what is stored is what the endpoint answered, or an error
            for v in record["verdicts"]:
                assert v["verdict"] in ("error", "no" if v["question_id"] == "q2" else "yes"), v
        if concurrency == "1":  # item-0 done, item-1 stopped at q4: every answer given is stored
            verdicts = {v["question_id"]: v for v in records["item-1"]["verdicts"]}
            assert [verdicts[q]["verdict"] for q in ("q1", "q2", "q3", "q4")] == ["yes", "no", "yes", "error"]
            assert "interrupted" in verdicts["q4"]["error"] and records["item-1"]["complete"] is False
            assert answered == sent_before == len(QUESTIONS) + 3
        else:  # calls of several items were in flight: an item with an answer keeps it
            assert answered >= len(QUESTIONS) - 1

        monkeypatch.setattr(HttpSender, "prepare", original)
        second = evaluate(fake_endpoint, qs_path, items, out, "--concurrency", concurrency)
        assert second.exit_code == 0, second.output
        asked_again = len(fake_endpoint.requests) - sent_before
        if concurrency == "1":
            assert asked_again == 3 * len(QUESTIONS) - answered  # only what had no answer
        else:  # answers that arrived after Ctrl-C come from DSPy's cache on the rerun
            assert asked_again <= 3 * len(QUESTIONS) - answered
        assert all(r.get("complete", True) for r in stored(out)) and len(stored(out)) == 3


def test_failed_call_records_name_bineval_options_not_the_http_layers_advice():
    from dspy.utils.exceptions import LMRateLimitError, LMTimeoutError

    from binaryeval_dspy.lm.calls import error_text

    limited = error_text(LMRateLimitError("Rate limit reached\n\n  To fix:\n    - Retry with backoff in your "
                                          "application layer (lm15 never retries for you)\n"))
    assert limited.startswith("LMRateLimitError: Rate limit reached (") and "`concurrency`" in limited
    assert "never retries" not in limited
    slow = error_text(LMTimeoutError("read timed out\n\n  To fix:\n    - raise it with Timeouts(read=...)\n"))
    assert "`timeout`" in slow and "Timeouts(read" not in slow
    # The same advice inside the message itself, as DSPy's HTTP layer writes it today.
    from dspy._vendor.lm15.transports._limits import pool_timeout_hint, read_timeout_hint

    inline = error_text(LMTimeoutError(f"read timed out waiting for headers: {read_timeout_hint(2)}"))
    assert "Timeouts(" not in inline and "lm15" not in inline and "`timeout`" in inline
    busy = error_text(LMTimeoutError(f"pool timeout: {pool_timeout_hint(5, 10)}"))
    assert "Timeouts(" not in busy and "`concurrency`" in busy
    assert error_text(ValueError("bad")) == "ValueError: bad"
    from dspy.utils.exceptions import LMInvalidRequestError

    missing = error_text(LMInvalidRequestError("[bineval-openai-compatible/x]", status=404))  # base URL without /v1
    assert "HTTP 404" in missing and "/v1" in missing and "`model`" in missing
    from dspy.utils.exceptions import LMAuthError

    refused = error_text(LMAuthError("[bineval-openai-compatible/x] Unauthorized", status=401))
    assert "HTTP 401" in refused and "`api_key_env`" in refused


def test_a_base_url_where_nothing_listens_is_refused_before_any_item(tmp_path):
    import socket

    with socket.socket() as probe:  # a free port, closed again: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    qs_path, items = write_inputs(tmp_path)
    result = CliRunner().invoke(cli, ["evaluate", str(qs_path), str(items), "--input-field", "input",
                                      "--output-field", "output", "--id-field", "id", "--out", str(tmp_path / "r"),
                                      "--lm", f"http://127.0.0.1:{port}/v1", "--lm-model", "fake-x"])
    assert result.exit_code != 0 and "connection refused" in result.output, result.output
    assert not (tmp_path / "r" / "results.jsonl").exists()


def test_a_run_whose_answers_are_all_unparsed_fails_and_says_why(tmp_path, fake_endpoint):
    qs_path, items = write_inputs(tmp_path, n_items=2)
    out = tmp_path / "run"
    fake_endpoint.reply = lambda body: "I think maybe."  # a server that ignores the reply format
    result = evaluate(fake_endpoint, qs_path, items, out)
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())
    assert "No LM answer in this run could be read as yes or no" in said and "--restart" in said
    assert {v["verdict"] for r in stored(out) for v in r["verdicts"]} == {"unparsed"}  # stored, nothing lost
    fake_endpoint.reply = verdict_replies({})
    again = evaluate(fake_endpoint, qs_path, items, out, "--restart", "--adapter", "chat")  # the advised fix
    assert again.exit_code == 0, again.output
    assert {v["verdict"] for r in stored(out) for v in r["verdicts"]} == {"yes"}


def test_a_server_answering_only_empty_replies_is_named_as_such(tmp_path, fake_endpoint):
    qs_path, items = write_inputs(tmp_path, n_items=1)
    fake_endpoint.reply = lambda body: ""
    result = evaluate(fake_endpoint, qs_path, items, tmp_path / "run")
    said = " ".join(result.output.split())
    assert result.exit_code == 1 and "replies held no text" in said, result.output
    assert "did not parse" not in said  # empty replies are failed calls, not unreadable answers


def test_https_to_a_plain_http_server_is_refused_before_any_item(tmp_path, fake_endpoint):
    qs_path, items = write_inputs(tmp_path, n_items=1)
    https = fake_endpoint.base_url.replace("http://", "https://")
    result = CliRunner().invoke(cli, ["evaluate", str(qs_path), str(items), "--id-field", "id",
                                      "--out", str(tmp_path / "r"), "--lm", https, "--lm-model", fake_endpoint.model])
    said = " ".join(result.output.split())
    assert result.exit_code != 0 and "plain HTTP, not HTTPS" in said and fake_endpoint.base_url in said, said
    assert fake_endpoint.requests == [] and not (tmp_path / "r" / "results.jsonl").exists()

"""Batch mode (`bineval evaluate --batch`, `bineval batch status|resolve`) against a local fake
of OpenAI's Batch API (`tests.fake_batch_endpoint`): no network, no real provider.

Covered: request bodies identical to live requests; batch and live verdicts the same
record; submit -> kill -> resume with no second submission (killed after the create
was recorded, between the create and its record, before the create arrived, during the
download); partial failure and expiry -> error outcomes -> a rerun resubmits only
those; a batch refused as a whole; `bineval batch status`; no key in the run directory;
a live rerun refused while batch requests are out; unsupported LMs refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.data.items import load_items
from binaryeval_dspy.cost.budget import CostBudget
from binaryeval_dspy.cost.pricing import model_price
from binaryeval_dspy.engines.batch import BatchEngine
from binaryeval_dspy.engines.batch_api import BatchAPI, batch_target
from binaryeval_dspy.engines.batch_journal import BatchStore
from binaryeval_dspy.runs.batch_status import batch_status
from binaryeval_dspy.errors import LMConfigError
from binaryeval_dspy.lm.factory import LMHandle, make_lm
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.programs.verdict_judge import VerdictJudge
from binaryeval_dspy.runs.evaluation import evaluate_items
from binaryeval_dspy.runs.items_file import items_file_identity
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.run_manifest import RunManifest
from binaryeval_dspy.settings import RunSettings
from tests.fake_batch_endpoint import BatchScript, FakeBatchEndpoint, fail_questions
from tests.fake_endpoint import format_fields, request_field

SECRET = "sk-test-batch-secret-0123456789abcdef"


class SimulatedKill(BaseException):
    """Stands for the process being killed: nothing after it runs but `finally` blocks."""


def judge_reply(body: dict):
    """yes / no / unreadable text, by question: the three kinds of answer a run records."""
    question = request_field(body, "question")
    if question == "Is it grammatical?":
        return "I would rather not say."  # the adapter cannot read it: unparsed
    verdict = "no" if question == "Are the numbers right?" else "yes"
    return format_fields(body, {"verdict": verdict, "explanation": f"scripted {verdict} for: {question}"})


@pytest.fixture
def endpoint():
    with FakeBatchEndpoint(reply=judge_reply) as ep:
        yield ep


@pytest.fixture
def files(tmp_path, items_file, small_question_set):
    return small_question_set.save(tmp_path / "qs.json"), items_file


def evaluate_args(files, out: Path, endpoint: FakeBatchEndpoint, *extra: str) -> list[str]:
    qs_path, items_path = files
    return ["evaluate", str(qs_path), str(items_path), "--input-field", "source", "--output-field", "summary",
            "--id-field", "id", "--out", str(out), "--lm", endpoint.base_url, "--lm-model", "fake-x", "--batch",
            *extra]


def invoke(args: list[str], **kwargs):
    return CliRunner().invoke(cli, args, catch_exceptions=False, **kwargs)


def text(result) -> str:
    """The command's output with line wrapping undone (the console wraps at 80 columns here)."""
    return " ".join(result.output.split())


def results_of(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]


def evaluate_killed(monkeypatch, method: str, dies, args: list[str]) -> None:
    """Run `args` with ``BatchAPI.<method>`` replaced by `dies`, which raises `SimulatedKill`:
    the process dies there (the patch is undone afterwards)."""
    with monkeypatch.context() as patch:
        patch.setattr(BatchAPI, method, dies)
        with pytest.raises(SimulatedKill):
            invoke(args)


def journal(out: Path):
    return BatchStore(out).load()


def question_ids(endpoint: FakeBatchEndpoint, batch_id: str) -> list[str]:
    return sorted(request_field(line["body"], "question") for line in endpoint.batch_requests(batch_id))


# ----------------------------------------------------------------------------- same requests, same records


def run_batch(program, items, run_dir: RunDirectory, manifest: RunManifest, handle: LMHandle, *, budget=None):
    """One batch invocation through the common run (`evaluate_items` with the batch engine)."""
    settings = RunSettings(engine="batch")
    engine = BatchEngine(handle, settings)
    outcome = evaluate_items(program, items, run_dir, manifest, lm=handle, settings=settings, engine=engine,
                             budget=budget)
    return outcome, engine


def _manifest(items_path: Path, question_set, handle: LMHandle) -> RunManifest:
    return RunManifest(command="evaluate", lm=handle.name, question_set_hash=question_set.content_hash,
                       question_set_path="qs.json",
                       items_path=str(items_path), items_file=items_file_identity(items_path),
                       config={"input_field": "source", "output_field": "summary", "id_field": "id",
                               "scale": [0.0, 1.0], "max_tokens": 512, "explanations": True,
                               "adapter": handle.adapter_name})


@pytest.mark.parametrize("adapter", ["auto", "chat"])
def test_batch_and_live_give_the_same_requests_and_records(tmp_path, endpoint, items_file, small_question_set,
                                                           adapter):
    items = load_items(items_file, input_field="source", output_field="summary", id_field="id")
    live_handle = make_lm(endpoint.base_url, model="fake-x", cache=False, adapter=adapter)
    live = evaluate_items(BinEval(small_question_set), items, RunDirectory(tmp_path / "live"),
                          _manifest(items_file, small_question_set, live_handle), lm=live_handle)
    live_bodies = endpoint.requests
    assert len(live_bodies) == 9 and live.new_items == 3

    batch_handle = make_lm(endpoint.base_url, model="fake-x", cache=False, adapter=adapter)
    outcome, _engine = run_batch(BinEval(small_question_set), items, RunDirectory(tmp_path / "batch"),
                                 _manifest(items_file, small_question_set, batch_handle), batch_handle)
    assert outcome.pending_items == 0 and outcome.new_items == 3
    (batch_id,) = [sub.batch_id for sub in journal(tmp_path / "batch").submissions]
    batch_bodies = [line["body"] for line in endpoint.batch_requests(batch_id)]
    # every batch request body is, key for key, a request the live run sent
    assert sorted(json.dumps(b, sort_keys=True) for b in batch_bodies) == sorted(
        json.dumps(b, sort_keys=True) for b in live_bodies)

    def comparable(row: dict) -> dict:
        return {k: v for k, v in row.items() if k != "seconds"}

    live_rows, batch_rows = results_of(tmp_path / "live"), results_of(tmp_path / "batch")
    assert [comparable(r) for r in batch_rows] == [comparable(r) for r in live_rows]
    kinds = {v["verdict"] for row in batch_rows for v in row["verdicts"]}
    assert kinds == {"yes", "no", "unparsed"}  # the three answer kinds went through the same parser
    assert all(row["usage"]["lm_calls"] == 3 for row in batch_rows)  # usage from the replies, as live


def test_openai_id_goes_to_openai_batches_with_the_live_body(tmp_path, endpoint, files, monkeypatch):
    """--lm openai/<model>: the request line carries the provider's model name; OPENAI_BASE_URL is honoured."""
    monkeypatch.setenv("OPENAI_BASE_URL", endpoint.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    out = tmp_path / "run"
    args = evaluate_args(files, out, endpoint)
    args[args.index("--lm") + 1:args.index("--lm-model") + 2] = ["openai/gpt-4o-mini"]
    result = invoke(args)
    assert result.exit_code == 0, result.output
    batch_id = journal(out).submissions[0].batch_id
    lines = endpoint.batch_requests(batch_id)
    assert {line["body"]["model"] for line in lines} == {"gpt-4o-mini"}
    assert {line["url"] for line in lines} == {"/v1/chat/completions"}
    assert all(line["body"]["response_format"]["type"] == "json_schema" for line in lines)
    assert len(results_of(out)) == 3
    assert not any(SECRET.encode() in p.read_bytes() for p in out.rglob("*") if p.is_file())


# ----------------------------------------------------------------------------- kill and resume


def test_killed_after_submit_resumes_without_a_second_submission(tmp_path, endpoint, files, monkeypatch):
    out = tmp_path / "run"

    def killed(self, batch_id):
        raise SimulatedKill

    evaluate_killed(monkeypatch, "retrieve", killed, evaluate_args(files, out, endpoint))
    assert endpoint.create_calls == 1
    sub = journal(out).submissions[0]
    assert sub.phase == "submitted" and sub.batch_id in endpoint.batches
    assert not (out / "results.jsonl").exists()

    result = invoke(evaluate_args(files, out, endpoint))
    assert result.exit_code == 0, result.output
    assert endpoint.create_calls == 1 and endpoint.uploads == 1
    assert len(endpoint.submitted_custom_ids()) == len(set(endpoint.submitted_custom_ids())) == 9
    rows = results_of(out)
    assert [r["item_id"] for r in rows] == ["item-0", "item-1", "item-2"]
    assert all(r.get("complete", True) for r in rows)


def test_killed_between_create_and_its_record_adopts_the_batch(tmp_path, endpoint, files, monkeypatch):
    out = tmp_path / "run"
    real_create = BatchAPI.create

    def create_then_die(self, input_file_id, metadata):
        real_create(self, input_file_id, metadata)
        raise SimulatedKill  # the batch exists; its id was never written

    evaluate_killed(monkeypatch, "create", create_then_die, evaluate_args(files, out, endpoint))
    sub = journal(out).submissions[0]
    assert sub.phase == "creating" and sub.batch_id is None and endpoint.create_calls == 1

    result = invoke(evaluate_args(files, out, endpoint))
    assert result.exit_code == 0, result.output
    assert "adopted" in text(result)
    assert endpoint.create_calls == 1 and endpoint.list_calls >= 1
    assert journal(out).submissions[0].batch_id == next(iter(endpoint.batches))
    assert len(results_of(out)) == 3


def test_a_create_that_never_arrived_is_sent_once(tmp_path, endpoint, files, monkeypatch):
    out = tmp_path / "run"

    def die_before_sending(self, input_file_id, metadata):
        raise SimulatedKill

    evaluate_killed(monkeypatch, "create", die_before_sending, evaluate_args(files, out, endpoint))
    assert journal(out).submissions[0].phase == "creating" and endpoint.create_calls == 0

    result = invoke(evaluate_args(files, out, endpoint))
    assert result.exit_code == 0, result.output
    assert endpoint.create_calls == 1 and endpoint.uploads == 1  # the uploaded file was reused
    assert len(results_of(out)) == 3


def test_killed_during_download_loses_nothing(tmp_path, endpoint, files, monkeypatch):
    out = tmp_path / "run"

    def die_downloading(self, file_id):
        raise SimulatedKill

    evaluate_killed(monkeypatch, "content", die_downloading, evaluate_args(files, out, endpoint))
    sub = journal(out).submissions[0]
    assert sub.status == "completed" and not sub.downloaded

    result = invoke(evaluate_args(files, out, endpoint))
    assert result.exit_code == 0, result.output
    assert endpoint.create_calls == 1
    assert len(results_of(out)) == 3 and len((out / "results.jsonl").read_text().splitlines()) == 3
    # a third run finds everything done: no request, no new row
    result = invoke(evaluate_args(files, out, endpoint))
    assert result.exit_code == 0 and endpoint.create_calls == 1
    assert "0 items judged now, 3 already done before" in text(result)


def test_unconfirmed_create_with_an_unreadable_list_is_refused_then_resolved(tmp_path, endpoint, files, monkeypatch):
    out = tmp_path / "run"
    real_create = BatchAPI.create

    def create_then_die(self, input_file_id, metadata):
        real_create(self, input_file_id, metadata)
        raise SimulatedKill

    def list_fails(self, **kwargs):
        raise ConnectionError("the list endpoint is down")

    evaluate_killed(monkeypatch, "create", create_then_die, evaluate_args(files, out, endpoint))
    with monkeypatch.context() as patch:
        patch.setattr(BatchAPI, "list", list_fails)
        result = invoke(evaluate_args(files, out, endpoint))
    assert result.exit_code == 2
    assert "bineval batch resolve" in text(result) and "bineval_intent=" in text(result)
    assert endpoint.create_calls == 1

    batch_id = next(iter(endpoint.batches))
    result = invoke(["batch", "resolve", str(out), "--submission", "1", "--batch-id", batch_id])
    assert result.exit_code == 0, result.output
    with monkeypatch.context() as patch:
        patch.setattr(BatchAPI, "list", list_fails)  # not needed any more
        result = invoke(evaluate_args(files, out, endpoint))
    assert result.exit_code == 0, result.output
    assert endpoint.create_calls == 1 and len(results_of(out)) == 3


# ----------------------------------------------------------------------------- failures and expiry


def test_partial_failure_becomes_errors_and_a_rerun_resubmits_only_those(tmp_path, endpoint, files):
    endpoint.scripts = [BatchScript(fail=fail_questions("Is every claim supported?", code="server_error",
                                                       message="scripted: the model crashed"))]
    out = tmp_path / "run"
    result = invoke(evaluate_args(files, out, endpoint))
    assert result.exit_code == 0, result.output  # incomplete items warn, as live
    assert "rerun the same command to ask only the unanswered questions" in text(result)
    rows = results_of(out)
    assert all(r["complete"] is False and r["questions_answered"] == 2 for r in rows)
    errors = [v for r in rows for v in r["verdicts"] if v["verdict"] == "error"]
    assert len(errors) == 3 and all("scripted: the model crashed" in v["error"] for v in errors)
    assert all(v["question_id"] == "consistency-01" for v in errors)

    result = invoke(evaluate_args(files, out, endpoint))
    assert result.exit_code == 0, result.output
    assert endpoint.create_calls == 2
    second = list(endpoint.batches)[1]
    assert question_ids(endpoint, second) == ["Is every claim supported?"] * 3  # only the failed ones
    rows = results_of(out)
    assert all(r.get("complete", True) for r in rows)
    assert all(r["usage"]["lm_calls"] == 3 for r in rows)  # 2 answered first, 1 on the rerun


@pytest.mark.parametrize("outcome, answered, error_text", [
    ("expired", 4, "batch_expired"),
    ("cancelled", 2, "batch_cancelled"),
    ("failed", 0, "scripted: the input file was refused"),
])
def test_expired_or_failed_batch_becomes_errors_and_a_rerun_resubmits(tmp_path, endpoint, files, outcome, answered,
                                                                       error_text):
    endpoint.scripts = [BatchScript(outcome=outcome, finished_before_end=answered)]
    out = tmp_path / "run"
    result = invoke(evaluate_args(files, out, endpoint))
    # a batch with no request answered at all fails the command, as a live run that got no answer
    assert result.exit_code == (1 if answered == 0 else 0), result.output
    if answered == 0:
        assert "No batch request of this run was answered" in text(result)
    rows = results_of(out)
    verdicts = [v for r in rows for v in r["verdicts"]]
    failed = [v for v in verdicts if v["verdict"] == "error"]
    assert len(failed) == 9 - answered and all(error_text in v["error"] for v in failed)
    assert all(r["complete"] is False for r in rows if any(v["verdict"] == "error" for v in r["verdicts"]))

    result = invoke(evaluate_args(files, out, endpoint))
    assert result.exit_code == 0, result.output
    assert endpoint.create_calls == 2
    assert len(endpoint.batch_requests(list(endpoint.batches)[1])) == 9 - answered
    assert all(r.get("complete", True) for r in results_of(out))
    custom_ids = endpoint.submitted_custom_ids()
    assert len(custom_ids) == len(set(custom_ids)) == 9 + 9 - answered


# ----------------------------------------------------------------------------- status, keys, refusals


def test_batch_status_shows_ids_times_and_counts(tmp_path, endpoint, files):
    endpoint.scripts = [BatchScript(polls=2, fail=fail_questions("Is it grammatical?"))]
    out = tmp_path / "run"
    result = invoke(evaluate_args(files, out, endpoint))
    assert result.exit_code == 75, result.output  # waiting for the provider
    assert "still wait for the provider" in text(result)
    (batch_id,) = endpoint.batches

    offline = invoke(["batch", "status", str(out), "--no-refresh"])
    assert offline.exit_code == 0, offline.output
    assert batch_id in text(offline) and "in_progress" in text(offline)
    assert "2023-11-14 22:13" in text(offline)  # created (the fake's clock), UTC
    assert "2023-11-15 22:13" in text(offline)  # expires 24 h later
    assert "Requests: 9 in progress" in text(offline)
    retrieves = endpoint.retrieve_calls
    assert invoke(["batch", "status", str(out)]).exit_code == 0
    assert endpoint.retrieve_calls == retrieves + 1  # refreshed from the provider

    result = invoke(evaluate_args(files, out, endpoint))  # the batch ends: collected
    assert result.exit_code == 0, result.output
    final = invoke(["batch", "status", str(out), "--no-refresh"])
    assert "completed" in text(final) and "6 recorded, 3 failed, to resubmit" in text(final)
    assert "Items stored: 3 (0 complete)" in text(final)
    report = batch_status(out, refresh=False)
    assert report.batch_ids == [batch_id] and report.submissions[0].request_counts == {
        "total": 9, "completed": 6, "failed": 3}


def test_the_key_is_never_written_to_the_run_directory(tmp_path, endpoint, files, monkeypatch):
    monkeypatch.setenv("MY_BATCH_KEY", SECRET)
    endpoint.scripts = [BatchScript(fail=fail_questions("Is it grammatical?"))]
    out = tmp_path / "run"
    for _ in range(2):
        result = invoke(evaluate_args(files, out, endpoint, "--api-key-env", "MY_BATCH_KEY"))
        assert result.exit_code == 0, result.output
    written = [p for p in out.rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {"manifest.json", "results.jsonl", "state.json", "submission-0001.jsonl",
                                         "submission-0001.output.jsonl", "submission-0001.errors.jsonl"}
    assert not [p for p in written if SECRET.encode() in p.read_bytes()]
    assert journal(out).api_key_env == "MY_BATCH_KEY"


def test_manifest_records_batch_mode_and_its_usage(tmp_path, endpoint, files):
    out = tmp_path / "run"
    result = invoke(evaluate_args(files, out, endpoint))
    assert result.exit_code == 0
    start = text(result).split("->")[0]  # a batch sends nothing live: no "call(s) in flight" on its start line
    assert f"batch engine: every call submitted to the batch API of {endpoint.base_url}" in start, start
    assert "in flight" not in start, start
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["settings"]["engine"] == "batch"
    batch = manifest["config"]["batch"]
    assert batch["provider"] == "openai" and batch["batch_ids"] == list(endpoint.batches)
    assert batch["requests_submitted"] == 9 and batch["usage"]["lm_calls"] == 9
    assert batch["usage"]["prompt_tokens"] == sum(r["usage"]["prompt_tokens"] for r in results_of(out))


def test_a_live_rerun_is_refused_while_batch_requests_are_out(tmp_path, endpoint, files):
    endpoint.scripts = [BatchScript(polls=5)]
    out = tmp_path / "run"
    assert invoke(evaluate_args(files, out, endpoint)).exit_code == 75
    live = [a for a in evaluate_args(files, out, endpoint) if a != "--batch"]
    result = invoke(live)
    assert result.exit_code == 2
    assert "rerun with --engine batch" in text(result)  # --batch is its alias
    assert endpoint.requests == []  # no live call was made


def test_other_request_settings_are_refused_while_batches_exist(tmp_path, endpoint, files):
    endpoint.scripts = [BatchScript(polls=5)]
    out = tmp_path / "run"
    assert invoke(evaluate_args(files, out, endpoint)).exit_code == 75
    result = invoke(evaluate_args(files, out, endpoint, "--max-tokens", "64"))
    assert result.exit_code == 2 and "max_tokens" in text(result)
    assert endpoint.create_calls == 1


def test_unsupported_lms_are_refused(endpoint):
    handle = make_lm("anthropic/claude-3-5-haiku-latest", cache=False)
    with pytest.raises(LMConfigError, match="cannot create them"):
        batch_target(handle)
    assert endpoint.create_calls == 0


def test_verdict_mode_goes_through_batches_round_by_round(tmp_path, items_file):
    """The pick is a later round of calls: a later invocation submits it once the questions are in."""
    from tests.verdict_scripts import VerdictScript, verdict_question_set

    qs = verdict_question_set()
    script = VerdictScript(judge={"Does it show a runnable example?": "no"}, labels=["Improve"])

    def reply(body: dict):
        system = "\n".join(m["content"] for m in body["messages"] if m["role"] == "system")
        user = "\n".join(m["content"] for m in body["messages"] if m["role"] != "system")
        answer = script(system, user)
        return answer if isinstance(answer, str) else format_fields(body, answer)

    rows = [{"id": "a", "source": "a README section", "summary": "Install it with pip and run it."}]
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    items = load_items(path, input_field="source", output_field="summary", id_field="id")
    with FakeBatchEndpoint(reply=reply) as ep:
        handle = make_lm(ep.base_url, model="fake-x", cache=False)
        judge = VerdictJudge(qs, pressure_test="never")
        outcomes = []
        for _ in range(4):
            outcome, _engine = run_batch(judge, items, RunDirectory(tmp_path / "r"),
                                         _manifest(path, qs, handle), handle)
            outcomes.append(outcome.pending_items)
            if outcome.new_items:
                break
        assert ep.create_calls == 2  # the questions, then the pick
    (row,) = results_of(tmp_path / "r")
    assert row["named_verdict"]["label"] == "Improve"


def test_a_create_without_a_clear_answer_is_settled_before_anything_is_sent_again(tmp_path, endpoint, files,
                                                                                  monkeypatch):
    import httpx
    import openai

    out = tmp_path / "run"

    def connection_lost(self, input_file_id, metadata):
        raise openai.APIConnectionError(request=httpx.Request("POST", endpoint.base_url + "/batches"))

    def refused(self, input_file_id, metadata):
        raise openai.BadRequestError("scripted refusal", response=httpx.Response(
            400, request=httpx.Request("POST", endpoint.base_url + "/batches")), body=None)

    with monkeypatch.context() as patch:
        patch.setattr(BatchAPI, "create", refused)  # an answer: nothing was created
        result = invoke(evaluate_args(files, out, endpoint))
    assert result.exit_code == 1 and "refused the batch" in text(result)
    assert journal(out).submissions[0].phase == "prepared"
    with monkeypatch.context() as patch:
        patch.setattr(BatchAPI, "create", connection_lost)  # no answer: it may exist
        result = invoke(evaluate_args(files, out, endpoint))
    assert result.exit_code == 1 and "looks for it at the provider" in text(result)
    assert journal(out).submissions[0].phase == "creating" and endpoint.create_calls == 0

    result = invoke(evaluate_args(files, out, endpoint))
    assert result.exit_code == 0, result.output
    assert endpoint.list_calls == 1 and endpoint.create_calls == 1 and endpoint.uploads == 1
    assert len(journal(out).submissions) == 1 and len(results_of(out)) == 3


def test_empty_outputs_are_recorded_without_a_request(tmp_path, endpoint, small_question_set):
    items_path = tmp_path / "items.jsonl"
    rows = [{"id": "a", "source": "An article.", "summary": "A summary."},
            {"id": "b", "source": "Another article.", "summary": " \u200b "}]
    items_path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "run"
    files = (small_question_set.save(tmp_path / "qs.json"), items_path)
    result = invoke(evaluate_args(files, out, endpoint))
    assert result.exit_code == 0, result.output
    assert len(endpoint.submitted_custom_ids()) == 3  # the first item's questions only
    by_id = {r["item_id"]: r for r in results_of(out)}
    assert by_id["b"]["status"] == "empty_output" and by_id["b"]["verdicts"] == []
    assert by_id["a"].get("complete", True)


def test_a_spending_limit_bounds_what_one_invocation_submits(tmp_path, endpoint, items_file, small_question_set):
    items = load_items(items_file, input_field="source", output_field="summary", id_field="id")
    handle = make_lm(endpoint.base_url, model="fake-x", cache=False)
    price = model_price("gpt-4o-mini")
    probe = CostBudget(1.0, price, batch=True)
    program = BinEval(small_question_set)
    from binaryeval_dspy.engines.senders import completion_cap
    from binaryeval_dspy.lm.calls import format_call
    from binaryeval_dspy.cost.budget import CallRequest

    prepared = format_call(program.question_call(items[0].input, items[0].output, small_question_set.questions[0]),
                           handle.lm, handle.adapter)
    worst = probe.worst_case(CallRequest(messages=prepared.messages, max_tokens=completion_cap(handle.lm, prepared)))[0]
    budget = CostBudget(4.5 * worst, price, batch=True)
    outcome, _engine = run_batch(program, items, RunDirectory(tmp_path / "r"),
                                 _manifest(items_file, small_question_set, handle), handle, budget=budget)
    assert len(endpoint.submitted_custom_ids()) == 4  # the worst case of a fifth would pass the limit
    assert outcome.stopped_early is not None and "`max_cost`" in outcome.stopped_early


def test_a_server_error_on_create_is_not_retried_blindly(tmp_path, endpoint, files, monkeypatch):
    """HTTP 500 on POST /v1/batches: sent once (no SDK retry), then settled by listing on the next run."""
    out = tmp_path / "run"
    real = endpoint.create_batch

    def server_error(payload):
        endpoint.create_calls += 1
        return 500, {"error": {"message": "scripted: overloaded", "type": "server_error"}}

    monkeypatch.setattr(endpoint, "create_batch", server_error)
    result = invoke(evaluate_args(files, out, endpoint))
    assert result.exit_code == 1 and endpoint.create_calls == 1
    monkeypatch.setattr(endpoint, "create_batch", real)
    result = invoke(evaluate_args(files, out, endpoint))
    assert result.exit_code == 0, result.output
    assert endpoint.create_calls == 2 and len(endpoint.batches) == 1 and endpoint.list_calls == 1

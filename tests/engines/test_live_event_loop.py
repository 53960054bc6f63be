"""The live engine on the direct route: every call's steps on the calling thread, its POSTs on an event loop.

Against the scripted endpoint of tests/fake_endpoint.py (scripted verdicts, never a model's):
no sending or cache thread is started, the answers are the same as one call at a time, the
replies go to DSPy's cache from the calling thread (a second run into a new directory asks
nothing).
"""

from __future__ import annotations

import asyncio
import json
import threading

import dspy

from tests.engines.test_remote_faults import QUESTIONS, evaluate, stored, write_inputs
from tests.fake_endpoint import verdict_replies


def _verdicts(out) -> dict:
    return {(row["item_id"], v["question_id"]): v["verdict"] for row in stored(out) for v in row["verdicts"]}


def test_a_live_run_starts_no_sending_or_cache_thread_and_answers_as_one_at_a_time(tmp_path, fake_endpoint,
                                                                                   monkeypatch):
    fake_endpoint.reply = verdict_replies({QUESTIONS[1]: "no", QUESTIONS[4]: "no"})
    qs, items = write_inputs(tmp_path, n_items=4)
    started: list[str] = []
    start = threading.Thread.start

    def recording_start(self):
        started.append(self.name)
        return start(self)

    monkeypatch.setattr(threading.Thread, "start", recording_start)
    monkeypatch.setattr(dspy, "cache", dspy.cache)  # this test's caches are its own, and put back after it
    dspy.configure_cache(disk_cache_dir=str(tmp_path / "cache"))
    result = evaluate(fake_endpoint, qs, items, tmp_path / "pooled", "--concurrency", "8")
    assert result.exit_code == 0, result.output
    assert not [name for name in started if name.startswith(("bineval-call", "bineval-cache"))], started
    sent = len(fake_endpoint.requests)
    assert sent == 4 * len(QUESTIONS)

    dspy.configure_cache(disk_cache_dir=str(tmp_path / "other-cache"))  # one at a time asks the endpoint again
    single = evaluate(fake_endpoint, qs, items, tmp_path / "single", "--concurrency", "1")
    assert single.exit_code == 0, single.output
    assert _verdicts(tmp_path / "pooled") == _verdicts(tmp_path / "single")
    assert sorted(set(_verdicts(tmp_path / "pooled").values())) == ["no", "yes"]

    assert len(fake_endpoint.requests) == 2 * sent
    dspy.configure_cache(disk_cache_dir=str(tmp_path / "cache"))
    before = len(fake_endpoint.requests)
    again = evaluate(fake_endpoint, qs, items, tmp_path / "again", "--concurrency", "8")
    assert again.exit_code == 0, again.output
    assert len(fake_endpoint.requests) == before  # every reply was in DSPy's cache, written by the first run
    assert _verdicts(tmp_path / "again") == _verdicts(tmp_path / "pooled")
    summary = json.loads((tmp_path / "again" / "summary.json").read_text(encoding="utf-8"))
    assert summary["lm_calls"] == 0


def test_a_run_called_from_inside_a_running_event_loop_still_sends(tmp_path, fake_endpoint):
    """A notebook (or an async application) calls a run synchronously while its own loop runs:
    no second loop can run on that thread, so the calls go on threads and the run completes."""
    qs, items = write_inputs(tmp_path, n_items=2)

    async def inside_a_loop():
        return evaluate(fake_endpoint, qs, items, tmp_path / "run", "--concurrency", "4")

    result = asyncio.run(inside_a_loop())
    assert result.exit_code == 0, result.output
    assert sorted(set(_verdicts(tmp_path / "run").values())) == ["yes"]
    assert len(fake_endpoint.requests) == 2 * len(QUESTIONS)


def test_ctrl_c_keeps_every_reply_already_read(tmp_path, fake_endpoint, monkeypatch):
    """Ctrl-C while the engine reads one reply: the replies it has in memory already (read from
    the endpoint, not yet handed over) are stored too; only the one being read is given up."""
    from binaryeval_dspy.engines.senders import HttpSender

    qs, items = write_inputs(tmp_path, n_items=4)
    seen = {"completed": 0, "posted": 0, "posted_at_interrupt": None}
    original_complete, original_apost = HttpSender.complete, HttpSender.apost

    async def apost(self, exchange, connections, budget=None):
        await original_apost(self, exchange, connections, budget)
        seen["posted"] += 1

    def complete(self, exchange, budget=None):
        seen["completed"] += 1
        if seen["completed"] == 5:
            seen["posted_at_interrupt"] = seen["posted"]
            raise KeyboardInterrupt
        return original_complete(self, exchange, budget)

    monkeypatch.setattr(HttpSender, "apost", apost)
    monkeypatch.setattr(HttpSender, "complete", complete)
    result = evaluate(fake_endpoint, qs, items, tmp_path / "run", "--concurrency", "8")
    assert result.exit_code == 130, result.output
    answered = sum(v in ("yes", "no") for v in _verdicts(tmp_path / "run").values())
    assert seen["posted_at_interrupt"] > 5  # replies were waiting to be read when the interrupt came
    assert answered == seen["posted_at_interrupt"] - 1


def test_every_request_refused_for_its_schema_form_is_counted_as_sent_again(tmp_path, fake_endpoint):
    """All calls in flight go out in the JSON-schema form before the first refusal comes back:
    each refused one is sent again as ``json_object`` and counted, not only the first."""
    from tests.fake_endpoint import HttpFault

    def refuse_json_schema(body: dict, index: int):
        if (body.get("response_format") or {}).get("type") == "json_schema":
            return HttpFault(500, "1 validation error: ('body', 'response_format', 'type') Input should be 'text' "
                                  "or 'json_object'")
        return None

    fake_endpoint.fault = refuse_json_schema
    fake_endpoint.latency = 0.05
    qs, items = write_inputs(tmp_path, n_items=2)
    result = evaluate(fake_endpoint, qs, items, tmp_path / "run", "--concurrency", "8")
    assert result.exit_code == 0, result.output
    refused = sum((b.get("response_format") or {}).get("type") == "json_schema" for b in fake_endpoint.requests)
    assert refused > 1
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest_retries(manifest) == refused and f"{refused} request(s) re-sent" in " ".join(result.output.split())


def manifest_retries(manifest: dict) -> int | None:
    """``format_retries`` wherever the manifest keeps the adapter's counts."""
    def find(node):
        if isinstance(node, dict):
            if "format_retries" in node:
                return node["format_retries"]
            for value in node.values():
                found = find(value)
                if found is not None:
                    return found
        return None

    return find(manifest)


def test_a_plan_without_lm_calls_needs_no_lm():
    """The live engine decides how to send only when there is an LM to send to: a plan whose
    items need no call (a ROUGE baseline, all code checks) runs with none configured."""
    from binaryeval_dspy.engines.threads import ThreadedEngine

    class Empty:
        exhausted = True

        def take(self, n):
            return []

    with dspy.context(lm=None):
        assert list(ThreadedEngine("live", None, 8).send(Empty())) == []

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

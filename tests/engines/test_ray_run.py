"""`bineval evaluate --engine ray`: the same results as the live engine, and a killed run loses nothing.

Runs on the shared local Ray of the ``ray_cluster`` session fixture (skipped, with the
reason, without the ``ray`` extra) against the scripted endpoint of tests/fake_endpoint.py,
whose verdicts depend on the item and the question; nothing here is a model's judgment.
This file sorts after tests/engines/test_ray_engine.py, whose stream-closing test comes last there.
"""

from __future__ import annotations

import json

import pytest

from binaryeval_dspy.runs import answer_journal
from tests.engines.test_engines import comparable, mixed_verdicts
from tests.engines.test_remote_faults import QUESTIONS, evaluate, stored, write_inputs
from tests.fake_endpoint import request_field

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster"),
              pytest.mark.filterwarnings("ignore:`use_arrow_tensor_v2` is deprecated:DeprecationWarning")]


class Killed(BaseException):
    """Stands for the process dying right after an answer was journaled (nothing after it runs)."""


def test_the_ray_engine_stores_what_the_live_engine_stores(tmp_path, fake_endpoint):
    fake_endpoint.reply = mixed_verdicts
    qs, items = write_inputs(tmp_path, n_items=5)
    live = evaluate(fake_endpoint, qs, items, tmp_path / "live", "--engine", "live", "--concurrency", "6")
    assert live.exit_code == 0, live.output
    fake_endpoint.model = f"{fake_endpoint.model}-ray"  # another model name: nothing the live run cached applies
    before = len(fake_endpoint.requests)
    ray = evaluate(fake_endpoint, qs, items, tmp_path / "ray", "--engine", "ray", "--concurrency", "6")
    assert ray.exit_code == 0, ray.output
    assert len(fake_endpoint.requests) - before == 5 * 6  # one request per question, no retry in another format
    assert comparable(tmp_path / "ray") == comparable(tmp_path / "live")
    assert "Ray: started a local Ray" in ray.output or "Ray: joined" in ray.output
    assert "ray engine" in " ".join(ray.output.split())
    summary = json.loads((tmp_path / "ray" / "summary.json").read_text())
    assert summary["lm_calls"] == 30 and summary["prompt_tokens"] > 0  # the replies' usage is counted as live


def test_a_killed_ray_run_loses_no_answer_and_asks_none_again(tmp_path, fake_endpoint, monkeypatch):
    fake_endpoint.reply = mixed_verdicts
    qs, items = write_inputs(tmp_path, n_items=4)
    out = tmp_path / "run"
    write = answer_journal.AnswerJournal.write
    journaled: list[tuple[str, str]] = []

    def write_then_die(self, item, verdict, *args, **kwargs):
        write(self, item, verdict, *args, **kwargs)
        journaled.append((str(item.item_id), verdict.question_id))
        if len(journaled) == 9:
            raise Killed

    monkeypatch.setattr(answer_journal.AnswerJournal, "write", write_then_die)
    with pytest.raises(Killed):
        evaluate(fake_endpoint, qs, items, out, "--engine", "ray", "--concurrency", "4")
    monkeypatch.setattr(answer_journal.AnswerJournal, "write", write)
    journal = out / "answers.jsonl"
    lines = journal.read_text(encoding="utf-8").splitlines() if journal.is_file() else []
    on_disk = {(row["item_id"], row["verdict"]["question_id"]) for row in map(json.loads, lines)
               if row["verdict"]["verdict"] in ("yes", "no", "unparsed")}
    if (out / "results.jsonl").is_file():  # items stored complete before the kill (their journal lines are dropped)
        on_disk |= {(r["item_id"], v["question_id"]) for r in stored(out) for v in r["verdicts"]
                    if v["verdict"] in ("yes", "no", "unparsed")}
    assert set(journaled) <= on_disk and len(journaled) == 9  # every answer returned before the kill is on disk

    before = len(fake_endpoint.requests)
    again = evaluate(fake_endpoint, qs, items, out, "--engine", "ray", "--concurrency", "4")
    assert again.exit_code == 0, again.output
    asked = {(_item_of(body), _question_of(body)) for body in fake_endpoint.requests[before:]}
    # only what was missing is asked: a reply that came back but was not journaled before the kill
    # was cached by the worker that read it, so the rerun gets it with no request
    first_session = {(_item_of(body), _question_of(body)) for body in fake_endpoint.requests[:before]}
    assert len(fake_endpoint.requests) - before == len(asked) <= 4 * 6 - len(on_disk)
    assert first_session | asked == {(f"item-{i}", f"q{q}") for i in range(4) for q in range(1, 7)}
    assert not asked & on_disk  # no answered question asked again
    rows = stored(out)
    assert len(rows) == 4 and all(r.get("status", "scored") == "scored" and r.get("complete", True) for r in rows)
    final = {(r["item_id"], v["question_id"]): v["verdict"] for r in rows for v in r["verdicts"]}
    for item_id, question_id in on_disk:  # the journaled answers are the stored ones
        assert final[(item_id, question_id)] in ("yes", "no")


def _item_of(body: dict) -> str:
    """The item a request judges (write_inputs' outputs are "Summary number <i>.")."""
    return f"item-{request_field(body, 'output').split('number ', 1)[1].rstrip('.')}"


def _question_of(body: dict) -> str:
    return f"q{QUESTIONS.index(request_field(body, 'question')) + 1}"

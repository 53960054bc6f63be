"""The replay engine (issue 29 item 2): a run answered from a verdicts file, on the same plan, with no LM call.

The live runs here are judged by the scripted OpenAI-compatible endpoint (tests/fake_endpoint.py)
whose verdict depends on the item and the question; nothing here is a model's judgment.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.data.verdicts_file import read_verdicts, write_verdicts
from binaryeval_dspy.engines.base import make_engine
from binaryeval_dspy.engines.replay import ReplayVerdicts, record_answer
from binaryeval_dspy.errors import ConfigError
from binaryeval_dspy.programs.bineval import question_verdict
from binaryeval_dspy.schemas.question_set import BinaryQuestion
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.schemas.verdict_record import VerdictRecord
from binaryeval_dspy.settings import RunSettings
from tests.engines.test_engines import comparable
from tests.engines.test_remote_faults import evaluate, stored, write_inputs
from tests.fake_endpoint import format_fields, request_field


def varied_verdicts(body: dict) -> str | dict:
    """yes, no, a qualified yes or an unreadable reply, fixed by the output and the question."""
    question, output = request_field(body, "question"), request_field(body, "output")
    pick = hashlib.sha256(f"{output}|{question}".encode()).digest()[0] % 8
    if pick == 0:
        return "I cannot tell."  # unparsed in either format
    verdict = "no" if pick in (1, 2) else "yes"
    explanation = "Yes, but it leaves out the score." if pick == 3 else f"scripted {verdict}"
    return format_fields(body, {"verdict": verdict, "explanation": explanation})


def replay(qs: Path, items: Path, out: Path, verdicts: Path, *extra: str):
    args = ["evaluate", str(qs), str(items), "--id-field", "id", "--out", str(out), "--engine", "replay",
            "--verdicts", str(verdicts), *extra]
    return CliRunner().invoke(cli, args)


def live_run_and_export(tmp_path: Path, endpoint, n_items: int = 6) -> tuple[Path, Path, Path, Path]:
    endpoint.reply = varied_verdicts
    qs, items = write_inputs(tmp_path, n_items=n_items)
    live = tmp_path / "live"
    result = evaluate(endpoint, qs, items, live, "--concurrency", "4")
    assert result.exit_code == 0, result.output
    exported = tmp_path / "verdicts.jsonl"
    result = CliRunner().invoke(cli, ["verdicts", str(live), "--out", str(exported)])
    assert result.exit_code == 0, result.output
    return qs, items, live, exported


def test_replaying_a_runs_own_export_reproduces_its_verdicts_and_scores_with_no_request(tmp_path, fake_endpoint):
    qs, items, live, exported = live_run_and_export(tmp_path, fake_endpoint)
    sent = len(fake_endpoint.requests)
    out = tmp_path / "replayed"
    result = replay(qs, items, out, exported)
    assert result.exit_code == 0, result.output
    assert len(fake_endpoint.requests) == sent  # not one request
    assert comparable(out) == comparable(live)
    outcomes = {v["verdict"] for r in stored(live) for v in r["verdicts"]}
    assert {"yes", "no", "unparsed"} <= outcomes  # the comparison covers every outcome, not constant rows
    full = {r["item_id"]: r["verdicts"] for r in stored(live)}
    assert {r["item_id"]: r["verdicts"] for r in stored(out)} == full  # every field of every verdict
    assert any(v.get("qualified") for vs in full.values() for v in vs)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["lm"].startswith("replay(") and summary["lm_calls"] == 0
    assert summary["cost"]["usd"] == 0.0 and summary["cost"]["display"] == "0 (replay)"
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["settings"]["engine"] == "replay" and manifest["settings"]["replay_verdicts"] == str(exported)
    assert "answers replayed" in " ".join(result.output.split())


def test_a_question_not_in_the_file_is_a_counted_error_never_no(tmp_path, fake_endpoint):
    qs, items, live, exported = live_run_and_export(tmp_path, fake_endpoint, n_items=3)
    rows = read_verdicts(exported)
    dropped = [r for r in rows if not (r.item_id == "item-1" and r.question_id == "q2")]
    assert len(dropped) == len(rows) - 1
    partial = write_verdicts(dropped, tmp_path / "partial.csv")
    out = tmp_path / "replayed"
    result = replay(qs, items, out, partial)
    assert result.exit_code == 0, result.output
    by_item = {r["item_id"]: {v["question_id"]: v for v in r["verdicts"]} for r in stored(out)}
    missing = by_item["item-1"]["q2"]
    assert missing["verdict"] == "error" and missing["error"].startswith("NotInVerdicts:")
    live_item = next(r for r in stored(live) if r["item_id"] == "item-1")
    was = next(v["verdict"] for v in live_item["verdicts"] if v["question_id"] == "q2")
    expected = {k: live_item["score_card"]["counts"]["coverage"].get(k, 0) for k in ("yes", "no", "unparsed", "error")}
    expected[was] -= 1
    expected["error"] += 1  # counted as an error, out of the denominators: never a "no"
    card = next(r for r in stored(out) if r["item_id"] == "item-1")["score_card"]
    assert {k: card["counts"]["coverage"].get(k, 0) for k in expected} == expected
    assert next(r for r in stored(out) if r["item_id"] == "item-1")["complete"] is False
    assert "1 question(s) not in the file" in " ".join(result.output.split())


def test_an_answer_recorded_for_another_output_is_refused(tmp_path, fake_endpoint):
    qs, items, live, exported = live_run_and_export(tmp_path, fake_endpoint, n_items=2)
    lines = items.read_text(encoding="utf-8").splitlines()
    changed = json.loads(lines[0])
    changed["output"] = "A different summary."
    items.write_text("\n".join([json.dumps(changed), *lines[1:]]) + "\n", encoding="utf-8")
    out = tmp_path / "replayed"
    result = replay(qs, items, out, exported)
    assert result.exit_code == 0, result.output
    first = next(r for r in stored(out) if r["item_id"] == "item-0")
    assert {v["verdict"] for v in first["verdicts"]} == {"error"}
    assert all(v["error"].startswith("OtherOutput:") for v in first["verdicts"])
    second = next(r for r in stored(out) if r["item_id"] == "item-1")
    assert second["verdicts"] == next(r for r in stored(live) if r["item_id"] == "item-1")["verdicts"]
    assert "recorded for another output and refused" in " ".join(result.output.split())


def test_a_recorded_row_reads_back_into_the_same_verdict():
    question = BinaryQuestion(id="q", dimension="d", text="Is the score given?", violation_example="No score.")
    verdicts = [
        QuestionVerdict(question_id="q", verdict="yes", explanation="It gives 2-1.", p_yes=0.37),
        QuestionVerdict(question_id="q", verdict="no", explanation="No score.", p_yes=0.125, reply_cut=True,
                        raw_answer="verdict: no"),
        QuestionVerdict(question_id="q", verdict="yes", explanation="Yes, but late.", qualified=True,
                        raw_answer="verdict: yes\nexplanation: Yes, but late."),
        QuestionVerdict(question_id="q", verdict="unparsed", raw_answer="hmm", error="AdapterParseError: no field"),
        QuestionVerdict(question_id="q", verdict="error", error="RateLimitError: 429"),
    ]
    for verdict in verdicts:
        row = VerdictRecord.from_question_verdict(verdict, item_id="i", judge="j")
        expected = question_verdict(question, record_answer(row))
        original = verdict.model_copy(update={"flags": expected.flags})  # flags are recomputed from the explanation
        assert expected == original


def test_the_judge_is_the_files_only_one_or_named(tmp_path):
    path = write_verdicts([VerdictRecord(item_id="1", question_id="q", judge=j, verdict="yes") for j in ("a", "b")],
                          tmp_path / "two.jsonl")
    with pytest.raises(ConfigError, match="2 judges"):
        ReplayVerdicts(path)
    with pytest.raises(ConfigError, match="no row"):
        ReplayVerdicts(path, judge="c")
    assert ReplayVerdicts(path, judge="b").judge == "b"
    engine = make_engine(RunSettings(engine="replay", replay_verdicts=str(path), replay_judge="a"), None)
    assert engine.name == "replay" and engine.verdicts.judge == "a"


def test_replay_settings_go_together():
    with pytest.raises(ConfigError, match="replay"):
        RunSettings(engine="replay")
    with pytest.raises(ConfigError, match="replay_verdicts"):
        RunSettings(engine="live", replay_verdicts="v.jsonl")


def test_two_items_with_the_same_texts_keep_their_own_recorded_answers(tmp_path):
    qs, _ = write_inputs(tmp_path, n_items=1)
    items = tmp_path / "twins.jsonl"
    items.write_text("".join(json.dumps({"id": i, "input": "The same article.", "output": "The same summary."}) + "\n"
                             for i in ("a", "b")), encoding="utf-8")
    labels = write_verdicts([VerdictRecord(item_id=i, question_id=f"q{n}", judge="human",
                                           verdict="yes" if i == "a" else "no")
                             for i in ("a", "b") for n in range(1, 7)], tmp_path / "labels.csv")
    out = tmp_path / "replayed"
    result = replay(qs, items, out, labels)
    assert result.exit_code == 0, result.output
    overall = {r["item_id"]: r["score_card"]["overall"] for r in stored(out)}
    assert overall == {"a": 1.0, "b": 0.0}  # a live run would send these calls once; a replay must not share them


def test_rejudge_of_a_replayed_run_replays_the_changed_items_from_a_new_file(tmp_path, fake_endpoint):
    from binaryeval_dspy.schemas.item_result import text_hash

    qs, items, _live, exported = live_run_and_export(tmp_path, fake_endpoint, n_items=3)
    first = tmp_path / "replayed"
    assert replay(qs, items, first, exported).exit_code == 0
    lines = items.read_text(encoding="utf-8").splitlines()
    changed = {**json.loads(lines[0]), "output": "A rewritten summary."}
    items.write_text("\n".join([json.dumps(changed), *lines[1:]]) + "\n", encoding="utf-8")
    flip = {"yes": "no", "no": "yes"}
    rows = [r.model_copy(update={"verdict": flip.get(r.verdict, "yes"), "output_hash": text_hash(changed["output"]),
                                 "explanation": "relabelled", "raw_answer": None, "error": None})
            if r.item_id == "item-0" else r for r in read_verdicts(exported)]
    relabelled = write_verdicts(rows, tmp_path / "relabelled.jsonl")
    sent = len(fake_endpoint.requests)
    out = tmp_path / "rejudged"
    result = CliRunner().invoke(cli, ["rejudge", str(first), str(items), "--out", str(out),
                                      "--verdicts", str(relabelled)])
    assert result.exit_code == 0, result.output
    assert len(fake_endpoint.requests) == sent
    report = json.loads((out / "rejudge.json").read_text(encoding="utf-8"))
    status = {c["item_id"]: c["status"] for c in report["items"]}
    assert status["item-0"] == "rejudged" and {status["item-1"], status["item-2"]} == {"unchanged"}
    new_first = next(r for r in stored(out) if r["item_id"] == "item-0")
    assert [v["verdict"] for v in new_first["verdicts"]] == [
        r.verdict for r in rows if r.item_id == "item-0"]  # the new file's answers, in question order


def test_the_embedded_models_recorded_verdicts_keep_its_warnings_and_the_replay_costs_nothing(tmp_path):
    from binaryeval_dspy.cost.pricing import cost_line, run_cost
    from binaryeval_dspy.engines.replay import replay_handle

    judge = "SmolLM2-135M-Instruct.Q4_K_M.gguf (llama.cpp)"
    path = write_verdicts([VerdictRecord(item_id="1", question_id="q", judge=judge, verdict="yes")],
                          tmp_path / "embedded.jsonl")
    handle = replay_handle(ReplayVerdicts(path))
    assert handle.embedded  # its summary still says the embedded model judged (a smoke test)
    other = replay_handle(ReplayVerdicts(write_verdicts(
        [VerdictRecord(item_id="1", question_id="q", judge="openai/gpt-4o", verdict="yes")], tmp_path / "o.jsonl")))
    assert not other.embedded
    cost = run_cost(prompt_tokens=0, completion_tokens=0, items=1, model=handle.priced_as())
    assert cost_line(cost).startswith("Estimated cost: 0 (replay)")  # as summary.json says, not "0 (local)"


def test_the_start_line_of_a_replay_says_what_replay_does_and_nothing_about_sending(tmp_path, fake_endpoint):
    """Replay formats and sends nothing: its start line names the verdicts file and the judge, never an
    adapter or calls in flight (it said "(json adapter, replay engine, 1 call(s) in flight)")."""
    qs, items, _live, exported = live_run_and_export(tmp_path, fake_endpoint, n_items=2)
    result = replay(qs, items, tmp_path / "replayed", exported, "--concurrency", "4")
    assert result.exit_code == 0, result.output
    start = " ".join(result.output.split()).split("->")[0]
    assert f"replay engine: answers read from {exported}" in start and "judge " in start and "no LM call" in start
    assert "adapter" not in start and "in flight" not in start, start


def test_rows_for_items_or_questions_the_run_does_not_have_are_reported_unused(tmp_path, fake_endpoint):
    """A verdicts file's rows that no call of the run can use (an item the run does not have, a
    question id it does not ask) are counted, with examples, on the console and in the summary:
    never dropped without a word."""
    qs, items, _live, exported = live_run_and_export(tmp_path, fake_endpoint, n_items=3)
    rows = exported.read_text(encoding="utf-8").splitlines()
    stray = json.loads(rows[0])
    stray["question_id"] = "q99"  # a question the question set does not have
    exported.write_text("\n".join([*rows, json.dumps(stray)]) + "\n", encoding="utf-8")
    out = tmp_path / "replayed"
    result = replay(qs, items, out, exported, "--limit", "2")  # item-2's 6 rows are for an item not in the run
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    unused = summary["verdicts_unused"]
    assert (unused["rows"], unused["items"], unused["questions"]) == (7, 1, 1), unused
    assert any("'item-2'" in e for e in unused["examples"]) and unused["file"] == str(exported)
    said = " ".join(result.output.split())
    assert "7 row(s) of the verdicts file" in said and "1 item id(s) and 1 question id(s) this run does not have" in said
    assert "7 row(s) of the verdicts file" in (out / "summary.md").read_text(encoding="utf-8")
    assert summary["items"] == 2  # the run itself is unchanged: its two items replayed


def test_a_replay_whose_every_row_is_the_runs_reports_nothing_unused(tmp_path, fake_endpoint):
    qs, items, _live, exported = live_run_and_export(tmp_path, fake_endpoint, n_items=2)
    out = tmp_path / "replayed"
    assert replay(qs, items, out, exported).exit_code == 0
    assert json.loads((out / "summary.json").read_text(encoding="utf-8"))["verdicts_unused"] is None

"""Empty outputs are an outcome, not an error; every item is accounted for (issue 11, points 4 and 5).

Scripted LMs only: nothing here is a model's judgment.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import dspy
import litellm
import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli import benchmark_command
from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.data.text_checks import is_empty_output
from binaryeval_dspy.lm.context_overflow import parse_context_overflow
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.meta_eval.method_run import CodeMethod, MethodRunDirectory, run_method
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.runs.run_summary import summarize_results
from binaryeval_dspy.runs.run_summary_tables import summary_markdown
from binaryeval_dspy.runs.evaluation import evaluate_items
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.item_result import ItemResult
from binaryeval_dspy.schemas.run_manifest import RunManifest
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.scoring import score_verdicts
from tests.cli import test_cli
from tests.conftest import judge_script
from tests.fakes import field_value, scripted_lm
from tests.reports import test_benchmark_run

ANSWERS = {"Is every claim supported?": "yes", "Are the numbers right?": "no", "Is it grammatical?": "yes"}
EVALUATE = ["--input-field", "source", "--output-field", "summary", "--id-field", "id"]
DIMS, benchmark_script = test_benchmark_run.DIMS, test_benchmark_run.script
fake_lm = test_cli.fake_lm  # the fixtures, shared: every --lm resolves to a scripted LM
tasks_dir = test_benchmark_run.tasks_dir  # a SummEval task folder with 12 numbered questions
OVERFLOW = "This model's maximum context length is 2048 tokens. However, you requested 5000 tokens."


def write_items(path: Path, summaries: dict[str, object]) -> Path:
    rows = [{"id": item_id, "source": f"Article about {item_id}.", **({} if text is None else {"summary": text})}
            for item_id, text in summaries.items()]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def stored(out: Path) -> dict[str, dict]:
    lines = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["item_id"]: r for r in map(json.loads, lines)}


def manifest(qs, lm_name: str = "scripted") -> RunManifest:
    return RunManifest(command="evaluate", lm=lm_name, question_set_hash=qs.content_hash, question_set_path="qs.json",
                       items_path="items.jsonl", config={"input_field": "input", "output_field": "output"})


# ------------------------------------------------------------------ point 4: empty outputs


def test_is_empty_output_sees_through_whitespace_and_invisible_format_characters():
    for text in (None, "", "  \n\t", "\u200b\u200b", "\ufeff", "\u200c\u200d\u2060", "\u00ad",
                 "\u200e\u200f\u202a\u202b\u202c\u202d\u202e", "\u2066\u2067\u2068\u2069", " \u200b \u3000 "):
        assert is_empty_output(text), repr(text)
    for text in ("a", " \u200bx", "0", "\u200b.", "é"):
        assert not is_empty_output(text), repr(text)


def test_empty_blank_and_zero_width_outputs_are_recorded_without_an_lm_call(tmp_path, small_question_set, fake_lm):
    engines = fake_lm(judge_script(ANSWERS))
    qs_path = small_question_set.save(tmp_path / "qs.json")
    items = write_items(tmp_path / "items.jsonl", {"empty": "", "blank": "  \n\t ", "zero-width": "\u200b\u200b",
                                                   "normal": "A fine summary."})
    out = tmp_path / "run"
    args = ["evaluate", str(qs_path), str(items), *EVALUATE, "--out", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output  # the other items run normally; empties alone never fail a run
    calls = engines[0].calls
    assert len(calls) == 3  # the normal item's three questions, nothing else
    assert all(field_value(call, "input") == "Article about normal." for call in calls)
    records = stored(out)
    assert list(records) == ["empty", "blank", "zero-width", "normal"]
    for item_id in ("empty", "blank", "zero-width"):
        record = records[item_id]
        assert record["status"] == "empty_output" and record["verdicts"] == []
        assert "score_card" not in record and "complete" not in record and record["usage"]["lm_calls"] == 0
    assert "status" not in records["normal"]  # scored rows stay as small as before
    summary = json.loads((out / "summary.json").read_text())
    assert summary["items"] == 4
    assert summary["items_by_status"] == {"scored": 1, "unscored": 0, "empty_output": 3, "error": 0}
    dims = {d["dimension"]: d for d in summary["dimensions"]}
    assert dims["consistency"]["mean_score"] == pytest.approx(0.5)  # over the one scored item, never 0
    assert all(d["items_scored"] == 1 and d["items_total"] == 4 for d in dims.values())
    text = " ".join(result.output.split())
    assert "empty_output: 3" in text and "1 / 4" in text
    markdown = (out / "summary.md").read_text()
    assert "empty_output: 3" in markdown and "| 1 / 4 |" in markdown

    again = CliRunner().invoke(cli, args)  # a resume keeps the empty rows: nothing is asked again
    assert again.exit_code == 0, again.output
    assert len(engines[1].calls) == 0 and "4 already done" in again.output


def test_empty_output_fail_exits_naming_file_line_and_field(tmp_path, small_question_set, fake_lm):
    engines = fake_lm(judge_script(ANSWERS))
    qs_path = small_question_set.save(tmp_path / "qs.json")
    items = write_items(tmp_path / "items.jsonl", {"a": "Fine.", "b": "Fine too.", "c": "\u200b"})
    result = CliRunner().invoke(cli, ["evaluate", str(qs_path), str(items), *EVALUATE, "--out", str(tmp_path / "r"),
                                      "--empty-output", "fail"])
    assert result.exit_code != 0
    message = "".join(result.output.split())
    assert "items.jsonl:3" in message and "field'summary'" in message and "empty" in message
    assert not (tmp_path / "r").exists() and engines == []  # refused before any LM was made


def test_a_missing_output_field_is_still_a_located_error(tmp_path, small_question_set, fake_lm):
    fake_lm(judge_script(ANSWERS))
    qs_path = small_question_set.save(tmp_path / "qs.json")
    items = write_items(tmp_path / "items.jsonl", {"a": "Fine.", "b": None})
    result = CliRunner().invoke(cli, ["evaluate", str(qs_path), str(items), *EVALUATE, "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    message = " ".join(result.output.split())
    assert "items.jsonl:2" in message and "'summary'" in message and "missing" in message


def test_a_benchmark_item_with_an_empty_output_gets_no_lm_call_in_any_method(tmp_path, tasks_dir, monkeypatch):
    folder = tmp_path / "data" / "summeval"
    folder.mkdir(parents=True)
    rows = []
    for doc in range(2):
        for k in range(2):
            output = "\u200b" if (doc, k) == (1, 1) else " ".join(["summary"] + ["good"] * (k + 1)) + f" {doc}."
            rows.append({"doc_id": f"doc-{doc}", "system_id": f"M{k}", "source": f"Article {doc} about a match.",
                         "system_output": output, "reference": f"A match report {doc} good.",
                         "scores": {d: 1 + 2 * k + doc for d in DIMS}})
    (folder / "summeval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    lm, engine = scripted_lm(benchmark_script)
    handle = LMHandle(lm=lm, adapter=dspy.JSONAdapter(), name="scripted-judge", embedded=False)
    monkeypatch.setattr(benchmark_command, "build_lm", lambda *a, **k: handle)
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["benchmark", "summeval", "--data-dir", str(tmp_path / "data"), "--tasks-dir",
                                      str(tasks_dir), "--out", str(out), "--bootstrap", "20", "--no-figures",
                                      "--methods", "bineval,geval,unieval,rouge"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert len(engine.calls) == 3 * 12 + 3 * 4 * 2  # 3 judged items: 12 questions, 4 G-Eval + 4 UniEval calls
    assert not any("\u200b" in call for call in engine.calls)
    for method in ("bineval", "geval", "unieval", "rouge"):
        records = stored(out / method)
        assert len(records) == 4, method
        empty = [r for r in records.values() if r.get("status") == "empty_output"]
        assert len(empty) == 1 and empty[0]["usage"]["lm_calls"] == 0, method
        assert "score_card" not in empty[0] and not empty[0].get("scores"), method
    metrics = json.loads((out / "metrics.json").read_text())
    assert all(metrics["cost"][m]["items_empty_output"] == 1 for m in ("bineval", "geval", "unieval", "rouge"))
    m1 = metrics["per_system"]["BinEval"]["M1"]
    assert (m1["items_used"], m1["items"]) == (1, 2) and m1["mean"] is not None
    assert any("M1 (BinEval 1/2" in w for w in metrics["coverage_warnings"])  # a mean over 1 of 2 items is flagged
    report = (out / "report.md").read_text()
    assert "(3/4)" in report and "(1/2) !" in report and "Warning:" in report


# ------------------------------------------------------------------ point 5: every item accounted for


def test_a_context_overflow_gets_an_error_row_with_its_size_and_limit(tmp_path, small_question_set, fake_lm):
    base = judge_script(ANSWERS)

    def overflowing(system, user):
        if field_value(user, "input") == "Article about long.":
            raise litellm.ContextWindowExceededError(message=OVERFLOW, model="scripted", llm_provider="openai")
        return base(system, user)

    fake_lm(overflowing)
    qs_path = small_question_set.save(tmp_path / "qs.json")
    items = write_items(tmp_path / "items.jsonl", {"long": "A summary.", "short": "Another summary."})
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["evaluate", str(qs_path), str(items), *EVALUATE, "--out", str(out)])
    assert result.exit_code == 0, result.output  # incomplete, without --fail-on-errors: the run finishes
    record = stored(out)["long"]
    assert record["status"] == "error" and record["complete"] is False and record["questions_answered"] == 0
    assert "maximum context length is 2048" in record["error"] and record["lm"] == "scripted-cli"
    assert record["context_overflow"] == {"tokens": 5000, "limit": 2048}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["items"] == 2 and summary["items_by_status"] == {"scored": 1, "unscored": 0, "empty_output": 0, "error": 1}
    assert {d["dimension"]: d["items_scored"] for d in summary["dimensions"]}["overall"] == 1

    strict = CliRunner().invoke(cli, ["evaluate", str(qs_path), str(items), *EVALUATE, "--out", str(tmp_path / "s"),
                                      "--fail-on-errors"])
    assert strict.exit_code == 1  # error rows follow the incomplete / --fail-on-errors rules


def test_an_item_whose_judging_raises_is_stored_as_error_and_retried(tmp_path, small_question_set, scripted_handle):
    handle, engine = scripted_handle(judge_script(ANSWERS))
    items = [dspy.Example(item_id=f"i{n}", input=f"Article {n}.", output=f"Summary {n}.", line=n + 1)
             .with_inputs("input", "output") for n in range(3)]
    program = BinEval(small_question_set, logprobs="off")
    plain = program.finish

    def finish(state):
        if state.input == "Article 1.":
            raise RuntimeError(f"Requested tokens (9000) exceed context window of 4096 ({state.output})")
        return plain(state)

    program.finish = finish
    run_dir = RunDirectory(tmp_path / "run")
    outcome = evaluate_items(program, items, run_dir, manifest(small_question_set), lm=handle)
    assert [i for i, _ in outcome.errors] == ["i1"] and outcome.failed == [] and outcome.incomplete == ["i1"]
    rows = {r.item_id: r for r in run_dir.read_results()}
    assert set(rows) == {"i0", "i1", "i2"}  # no item is left out of results.jsonl
    failed = rows["i1"]
    assert failed.status == "error" and not failed.complete and failed.verdicts == [] and failed.score_card is None
    assert failed.lm == "scripted" and "exceed context window" in failed.error
    assert failed.context_overflow is not None and (failed.context_overflow.tokens, failed.context_overflow.limit) == (
        9000, 4096)
    assert summarize_results(list(rows.values()), lm="scripted").items_by_status["error"] == 1

    assert (run_dir.path / "answers.jsonl").is_file()  # the failed item's 3 answers, journaled as they came
    program.finish = plain  # the next run retries the error row only
    calls = len(engine.calls)
    again = evaluate_items(program, items, run_dir, manifest(small_question_set), lm=handle)
    # its questions were answered before its scoring step raised: the journal hands them back, none is asked again
    assert again.skipped_items == 2 and again.resumed_items == 1 and len(engine.calls) == calls
    assert not (run_dir.path / "answers.jsonl").exists()  # every item complete: the journal is tidied away
    assert {r.item_id: r.status for r in run_dir.read_results()} == {"i0": "scored", "i1": "scored", "i2": "scored"}


def test_a_baseline_item_that_raises_gets_an_error_row_and_a_rerun_retries_it(tmp_path):
    items = [dspy.Example(item_id=f"i{n}", input="x", output=f"out {n}").with_inputs("input", "output")
             for n in range(3)]
    broken = {"i1"}

    def method(item):
        if item.item_id in broken:
            raise ValueError("the rating could not be made")
        return dspy.Prediction(scores={"coherence": 0.5})

    run_dir = MethodRunDirectory(tmp_path / "geval")
    run_manifest = RunManifest(command="benchmark geval", lm="scripted-judge", question_set_hash="rubric-x",
                               question_set_path="rubric.json", items_path="data", config={})
    outcome = run_method("geval", CodeMethod(method), items, run_dir, run_manifest)
    rows = {r.item_id: r for r in run_dir.read_results()}
    assert set(rows) == {"i0", "i1", "i2"} and outcome.failed == [] and outcome.incomplete == ["i1"]
    assert rows["i1"].status == "error" and rows["i1"].scores == {} and rows["i1"].lm == "scripted-judge"
    assert "could not be made" in rows["i1"].error
    broken.clear()
    again = run_method("geval", CodeMethod(method), items, run_dir, run_manifest)
    assert again.new_items == 1 and again.skipped_items == 2
    assert {r.item_id: r.status for r in run_dir.read_results()}["i1"] == "scored"


def test_one_nan_score_never_blanks_the_summary(small_question_set):
    verdicts = [QuestionVerdict(question_id=q.id, verdict="yes") for q in small_question_set.questions]
    card = score_verdicts(verdicts, small_question_set)
    common = {"output_hash": "x", "question_set_hash": small_question_set.content_hash, "verdicts": verdicts}
    results = [  # a NaN cannot pass validation; a results file edited by other tools may still hold one
        ItemResult.model_construct(item_id="a", score_card=card.model_copy(
            update={"dimension_scores": {"consistency": math.nan, "fluency": 1.0}}), **common),
        ItemResult(item_id="b", score_card=card.model_copy(update={"dimension_scores": {"consistency": 0.5,
                                                                                      "fluency": None}}), **common),
        ItemResult(item_id="c", output_hash="y", question_set_hash=small_question_set.content_hash, verdicts=[],
                   status="empty_output"),
    ]
    summary = summarize_results(results, lm="scripted")
    dims = {d.dimension: d for d in summary.dimensions}
    assert dims["consistency"].mean_score == pytest.approx(0.5) and dims["consistency"].items_scored == 1
    assert dims["fluency"].mean_score == pytest.approx(1.0) and dims["fluency"].items_scored == 1
    assert dims["overall"].mean_score == pytest.approx(1.0) and dims["overall"].items_scored == 2
    assert all(d.items_total == 3 for d in dims.values())
    markdown = summary_markdown(summary)
    assert "nan" not in markdown.lower() and "| 1 / 3 |" in markdown and "empty_output: 1" in markdown


def test_old_results_without_a_status_read_back_as_before():
    line = {"schema_version": 1, "item_id": "a", "output_hash": "x", "question_set_hash": "q", "verdicts": [],
            "score_card": {"dimension_scores": {}, "overall": None, "counts": {}, "scale": [0, 1],
                           "scaled_dimension_scores": {}, "scaled_overall": None}}
    assert ItemResult.model_validate(line).status == "unscored"  # no status written, but no score either
    scored = dict(line, score_card=dict(line["score_card"], overall=1.0, scaled_overall=1.0))
    assert ItemResult.model_validate(scored).status == "scored"
    failed = dict(line, verdicts=[{"question_id": "q1", "verdict": "error", "error": f"BadRequest: {OVERFLOW}"}])
    old = ItemResult.model_validate(failed)  # an incomplete row of an older run, where every call failed
    assert old.status == "error" and not old.complete and OVERFLOW in old.error
    assert parse_context_overflow(old.error).limit == 2048
    assert parse_context_overflow("rate limit reached") is None

"""The recorder writes the run's summary: every front end (here the Python API) leaves summary.json
and summary.md, computed in one pass over results.jsonl without holding the results."""

import json
import random

import pytest

from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.runs.evaluation import evaluate_items, record_summary
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.runs.run_summary import SummaryBuilder, summarize_results
from tests.conftest import judge_script
from tests.engines.test_run_resume import load, manifest

ANSWERS = {"Is every claim supported?": "yes", "Are the numbers right?": "no", "Is it grammatical?": "maybe"}


def judged_run(tmp_path, items_file, question_set, scripted_handle):
    handle, _engine = scripted_handle(judge_script(ANSWERS))
    run_dir = RunDirectory(tmp_path / "run")
    outcome = evaluate_items(BinEval(question_set), load(items_file), run_dir, manifest(question_set, handle.name),
                             lm=handle)
    return run_dir, outcome, handle


def test_evaluate_items_leaves_the_summary_files_of_the_cli(tmp_path, items_file, small_question_set,
                                                           scripted_handle):
    run_dir, outcome, handle = judged_run(tmp_path, items_file, small_question_set, scripted_handle)
    saved = json.loads((run_dir.path / "summary.json").read_text())
    assert outcome.summary is not None and saved == outcome.summary.model_dump(mode="json")
    assert saved["items"] == 3 and saved["lm"] == handle.name
    fluency = next(d for d in saved["dimensions"] if d["dimension"] == "fluency")
    assert fluency["unparsed"] == 3 and fluency["mean_score"] is None  # unparsed is counted, never "no"
    assert (run_dir.path / "summary.md").read_text().startswith("# BinEval run summary (3 items")


def test_the_summary_is_read_in_one_streaming_pass(tmp_path, items_file, small_question_set, scripted_handle,
                                                   monkeypatch):
    run_dir, outcome, handle = judged_run(tmp_path, items_file, small_question_set, scripted_handle)

    def refuse(*args, **kwargs):
        raise AssertionError("the whole results file was loaded")

    monkeypatch.setattr(RunDirectory, "read_results", refuse)
    again = record_summary(run_dir, small_question_set, lm=handle, name=handle.name)
    assert again == outcome.summary


def test_an_item_stored_twice_counts_once_with_its_later_line(tmp_path, items_file, small_question_set,
                                                             scripted_handle):
    run_dir, outcome, handle = judged_run(tmp_path, items_file, small_question_set, scripted_handle)
    lines = run_dir.results_path.read_text().splitlines()
    first = json.loads(lines[0])
    first["verdicts"][1]["verdict"] = "yes"  # an earlier, different row of the same item
    first["usage"]["lm_calls"] = 99
    run_dir.results_path.write_text("\n".join([json.dumps(first), *lines]) + "\n")
    again = record_summary(run_dir, small_question_set, lm=handle, name=handle.name)
    assert again.items == 3 and again.model_dump() == outcome.summary.model_dump()


def test_only_the_items_named_are_summarized_and_none_writes_nothing(tmp_path, items_file, small_question_set,
                                                                    scripted_handle):
    run_dir, _outcome, handle = judged_run(tmp_path, items_file, small_question_set, scripted_handle)
    assert record_summary(run_dir, small_question_set, lm=handle, name=handle.name, item_ids=["item-1"]).items == 1
    (run_dir.path / "summary.json").unlink()
    assert record_summary(run_dir, small_question_set, lm=handle, name=handle.name, item_ids=["elsewhere"]) is None
    assert not (run_dir.path / "summary.json").exists()


def test_the_summary_does_not_depend_on_the_order_of_the_results(tmp_path, items_file, small_question_set,
                                                                scripted_handle):
    _run_dir, outcome, handle = judged_run(tmp_path, items_file, small_question_set, scripted_handle)
    results = outcome.results
    for seed in range(3):
        shuffled = list(results)
        random.Random(seed).shuffle(shuffled)
        a, b = (summarize_results(r, lm=handle.name).model_dump() for r in (shuffled, results))
        assert a.pop("seconds_per_item") == pytest.approx(b.pop("seconds_per_item"))  # a float sum's last digit
        assert a == b


def test_discrimination_counts_constant_questions_and_ties_as_the_matrix_does(tmp_path, items_file,
                                                                               small_question_set, scripted_handle):
    _run_dir, outcome, handle = judged_run(tmp_path, items_file, small_question_set, scripted_handle)
    builder = SummaryBuilder(small_question_set)
    for result in outcome.results:
        builder.add(result)
    d = builder.summary(lm=handle.name).discrimination
    # two questions answered yes/no on all three items, each the same verdict everywhere; fluency unparsed
    assert (d.items, d.questions, d.constant_questions, d.largest_tie, d.low) == (3, 2, 2, 3, True)
    assert d.score_sd == pytest.approx(0.0)


def test_evaluate_file_leaves_the_run_directory_the_command_leaves(tmp_path, fake_endpoint):
    from binaryeval_dspy import evaluate_file
    from tests.engines.test_remote_faults import evaluate, write_inputs
    from tests.fake_endpoint import verdict_replies

    fake_endpoint.reply = verdict_replies({"Is point 2 covered?": "no"})
    qs_path, items = write_inputs(tmp_path, n_items=2)
    by_cli = tmp_path / "cli"
    assert evaluate(fake_endpoint, qs_path, items, by_cli).exit_code == 0
    by_python = tmp_path / "python"
    outcome = evaluate_file(qs_path, items, by_python, lm=fake_endpoint.base_url, lm_model=fake_endpoint.model,
                            id_field="id")
    assert sorted(p.name for p in by_python.iterdir()) == sorted(p.name for p in by_cli.iterdir())
    cli_manifest, py_manifest = (json.loads((d / "manifest.json").read_text()) for d in (by_cli, by_python))
    for manifest in (cli_manifest, py_manifest):  # the second run's replies come from DSPy's cache: no
        manifest["config"].pop("schema_dialect", None)  # request went out, so no schema form was settled
    assert py_manifest["config"] == cli_manifest["config"]
    cli_summary, py_summary = (json.loads((d / "summary.json").read_text()) for d in (by_cli, by_python))
    assert py_summary["dimensions"] == cli_summary["dimensions"] and outcome.summary.items == 2
    assert py_summary["items_by_status"] == cli_summary["items_by_status"] == {"scored": 2, "unscored": 0,
                                                                             "empty_output": 0, "error": 0}
    again = evaluate_file(qs_path, items, by_python, lm=fake_endpoint.base_url, lm_model=fake_endpoint.model,
                          id_field="id")
    assert again.skipped_items == 2 and again.new_items == 0  # a second call resumes, asks nothing


def test_items_given_but_never_stored_are_said_beside_the_figures(tmp_path, items_file, small_question_set,
                                                                 scripted_handle):
    run_dir, _outcome, handle = judged_run(tmp_path, items_file, small_question_set, scripted_handle)
    summary = record_summary(run_dir, small_question_set, lm=handle, name=handle.name,
                             item_ids=["item-0", "item-1", "item-2", "never-reached"])
    assert summary.items == 3 and summary.items_not_stored == 1
    said = "1 of the 4 items given have no stored result"
    assert said in (run_dir.path / "summary.md").read_text()


def test_a_rerun_after_an_early_stop_never_reports_a_negative_count(tmp_path, fake_endpoint):
    from tests.engines.test_remote_faults import SERVER_ERROR_NOW, evaluate, write_inputs
    from tests.fake_endpoint import user_text

    qs_path, items = write_inputs(tmp_path, n_items=8)
    failing = tuple(f"Article {i} " for i in (0, 2, 4, 6))  # every other item fails: no early stop at first
    fake_endpoint.fault = lambda body, index: SERVER_ERROR_NOW if any(t in user_text(body) for t in failing) else None
    out = tmp_path / "run"
    assert evaluate(fake_endpoint, qs_path, items, out).exit_code == 0
    again = evaluate(fake_endpoint, qs_path, items, out)  # the 4 failing items now come in a row: stops after 3
    said = " ".join(again.output.split())
    assert "Stopped early" in said and "(-" not in said, said
    assert "3 items stored now (0 complete, 3 incomplete, 3 of them resumed)" in said, said
    assert "1 left incomplete by an earlier session and not asked again now" in said, said


def test_a_line_stored_twice_is_warned_about_once_per_run(tmp_path, fake_endpoint, caplog):
    """A rerun reads its results file several times (resume, summary): each warning about a stored
    line is said once, not once per reader (the "appears again" line printed twice)."""
    from tests.engines.test_remote_faults import evaluate, write_inputs

    qs, items = write_inputs(tmp_path)
    out = tmp_path / "run"
    assert evaluate(fake_endpoint, qs, items, out).exit_code == 0
    lines = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
    (out / "results.jsonl").write_text("\n".join([lines[0], *lines]) + "\n", encoding="utf-8")
    caplog.clear()
    assert evaluate(fake_endpoint, qs, items, out).exit_code == 0
    said = [r.getMessage() for r in caplog.records if "appears again" in r.getMessage()]
    assert len(said) == 1 and "results.jsonl:2: item 'item-0'" in said[0], said


def test_a_rerun_with_a_smaller_limit_keeps_describing_every_item_stored(tmp_path, fake_endpoint):
    """The run directory describes what it holds: a rerun given fewer items (a smaller `limit`)
    neither shrinks the summary to them nor records its smaller range as the run's."""
    from tests.engines.test_remote_faults import evaluate, write_inputs

    qs, items = write_inputs(tmp_path, n_items=5)
    out = tmp_path / "run"

    def run(*extra: str) -> tuple[dict, dict]:
        result = evaluate(fake_endpoint, qs, items, out, *extra)
        assert result.exit_code == 0, result.output
        return (json.loads((out / "summary.json").read_text(encoding="utf-8")),
                json.loads((out / "manifest.json").read_text(encoding="utf-8")))

    summary, manifest = run("--limit", "3")
    assert summary["items"] == 3 and manifest["config"]["limit"] == 3
    summary, manifest = run("--limit", "1")
    assert summary["items"] == 3 and summary["items_not_stored"] == 0  # the 3 stored, not the 1 given
    assert manifest["config"]["limit"] == 3  # the largest range asked
    assert (out / "summary.md").read_text(encoding="utf-8").startswith("# BinEval run summary (3 items")
    summary, manifest = run("--limit", "4")
    assert summary["items"] == 4 and manifest["config"]["limit"] == 4
    summary, manifest = run()
    assert summary["items"] == 5 and manifest["config"]["limit"] is None  # every item
    summary, manifest = run("--limit", "2")
    assert summary["items"] == 5 and manifest["config"]["limit"] is None

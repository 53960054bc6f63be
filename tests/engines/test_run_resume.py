import json

import pytest

from binaryeval_dspy.data.items import load_items
from binaryeval_dspy.errors import InputError, RunStateError
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.runs.run_summary import summarize_results
from binaryeval_dspy.runs.evaluation import evaluate_items
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.run_manifest import RunManifest
from tests.conftest import judge_script

ANSWERS = {"Is every claim supported?": "yes", "Are the numbers right?": "no", "Is it grammatical?": "yes"}


def manifest(qs, lm_name, **config):
    base = {"input_field": "source", "output_field": "summary", "id_field": "id", "scale": [0.0, 1.0]}
    base.update(config)
    return RunManifest(command="evaluate", lm=lm_name, question_set_hash=qs.content_hash,
                       question_set_path="qs.json", items_path="items.jsonl", config=base)


def load(items_file):
    return load_items(items_file, input_field="source", output_field="summary", id_field="id")


def test_full_run_writes_results_manifest_and_usage(tmp_path, items_file, small_question_set, scripted_handle):
    handle, engine = scripted_handle(judge_script(ANSWERS))
    run_dir = RunDirectory(tmp_path / "run")
    outcome = evaluate_items(BinEval(small_question_set), load(items_file), run_dir,
                             manifest(small_question_set, "fake"), lm=handle)
    assert outcome.new_items == 3 and not outcome.interrupted and not outcome.failed
    lines = run_dir.results_path.read_text().splitlines()
    assert len(lines) == 3
    first = json.loads(lines[0])
    assert first["item_id"] == "item-0" and first["fields"]["human"] == 0
    assert first["usage"] == {"lm_calls": 3, "prompt_tokens": 30, "completion_tokens": 15}
    assert [v["verdict"] for v in first["verdicts"]] == ["yes", "no", "yes"]
    saved = json.loads(run_dir.manifest_path.read_text())
    assert saved["question_set_hash"] == small_question_set.content_hash
    assert saved["finished_at"] and saved["sessions"][0]["items_done"] == 3
    assert "api_key" not in run_dir.manifest_path.read_text()
    summary = summarize_results(outcome.results, lm="fake")
    consistency = next(d for d in summary.dimensions if d.dimension == "consistency")
    assert consistency.mean_score == pytest.approx(0.5) and consistency.yes == 3 and consistency.no == 3


def test_interrupted_run_resumes_without_redoing_items(tmp_path, items_file, small_question_set, scripted_handle):
    calls = {"n": 0}
    script = judge_script(ANSWERS)

    def interrupt_on_fifth_call(system, user):
        calls["n"] += 1
        if calls["n"] == 5:  # inside item 2 (3 questions per item)
            raise KeyboardInterrupt
        return script(system, user)

    handle, _ = scripted_handle(interrupt_on_fifth_call)
    run_dir = RunDirectory(tmp_path / "run")
    first = evaluate_items(BinEval(small_question_set), load(items_file), run_dir,
                           manifest(small_question_set, "fake"), lm=handle)
    assert first.interrupted and first.new_items == 2
    stored = run_dir.read_results()  # item 2's one answer is kept, as an incomplete item
    assert [r.item_id for r in stored] == ["item-0", "item-1"] and not stored[1].complete

    handle2, engine2 = scripted_handle(script)
    second = evaluate_items(BinEval(small_question_set), load(items_file), run_dir,
                            manifest(small_question_set, "fake"), lm=handle2)
    assert second.skipped_items == 1 and second.new_items == 2
    assert len(engine2.calls) == 5  # item 2's two unanswered questions and item 3's three
    assert [r.item_id for r in run_dir.read_results()] == ["item-0", "item-1", "item-2"]
    sessions = json.loads(run_dir.manifest_path.read_text())["sessions"]
    assert [s["interrupted"] for s in sessions] == [True, False]


def test_truncated_last_line_is_trimmed_and_redone(tmp_path, items_file, small_question_set, scripted_handle):
    handle, _ = scripted_handle(judge_script(ANSWERS))
    run_dir = RunDirectory(tmp_path / "run")
    evaluate_items(BinEval(small_question_set), load(items_file)[:2], run_dir,
                   manifest(small_question_set, "fake"), lm=handle)
    text = run_dir.results_path.read_text()
    run_dir.results_path.write_text(text[: len(text) - 40])  # crash in the middle of writing line 2
    assert [r.item_id for r in run_dir.read_results()] == ["item-0"]
    outcome = evaluate_items(BinEval(small_question_set), load(items_file), run_dir,
                             manifest(small_question_set, "fake"), lm=handle)
    assert outcome.new_items == 2
    assert [r.item_id for r in run_dir.read_results()] == ["item-0", "item-1", "item-2"]


def test_damaged_middle_line_is_reported_not_deleted(tmp_path, items_file, small_question_set, scripted_handle):
    handle, _ = scripted_handle(judge_script(ANSWERS))
    run_dir = RunDirectory(tmp_path / "run")
    evaluate_items(BinEval(small_question_set), load(items_file), run_dir,
                   manifest(small_question_set, "fake"), lm=handle)
    lines = run_dir.results_path.read_text().splitlines()
    lines[1] = '{"broken": true}'
    run_dir.results_path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as err:
        run_dir.read_results()
    assert err.value.line == 2 and str(run_dir.results_path) in str(err.value)
    assert len(run_dir.results_path.read_text().splitlines()) == 3


def test_resume_with_another_question_set_or_lm_is_refused(tmp_path, items_file, small_question_set, scripted_handle):
    handle, _ = scripted_handle(judge_script(ANSWERS))
    run_dir = RunDirectory(tmp_path / "run")
    evaluate_items(BinEval(small_question_set), load(items_file)[:1], run_dir,
                   manifest(small_question_set, "fake"), lm=handle)
    edited = small_question_set.model_copy(deep=True)
    edited.questions[0].text = "Is every single claim supported?"
    with pytest.raises(RunStateError, match="question set changed"):
        evaluate_items(BinEval(edited), load(items_file), run_dir, manifest(edited, "fake"), lm=handle)
    with pytest.raises(RunStateError, match="LM changed"):
        evaluate_items(BinEval(small_question_set), load(items_file), run_dir,
                       manifest(small_question_set, "other"), lm=handle)
    with pytest.raises(RunStateError, match="scale"):
        evaluate_items(BinEval(small_question_set), load(items_file), run_dir,
                       manifest(small_question_set, "fake", scale=[1.0, 5.0]), lm=handle)
    assert len(run_dir.read_results()) == 1


def test_an_unreachable_endpoint_stores_error_outcomes_and_stops_early(tmp_path, items_file, small_question_set,
                                                                       scripted_handle):
    def down(system, user):
        raise ConnectionError("endpoint down")

    handle, _ = scripted_handle(down)
    run_dir = RunDirectory(tmp_path / "run")
    outcome = evaluate_items(BinEval(small_question_set), load(items_file), run_dir,
                             manifest(small_question_set, "fake"), lm=handle, max_consecutive_failures=2)
    assert outcome.new_items == 2 and outcome.stopped_early and "unreachable" in outcome.stopped_early
    stored = run_dir.read_results()
    assert [r.complete for r in stored] == [False, False]
    assert all(v.verdict == "error" and "endpoint down" in v.error for r in stored for v in r.verdicts)
    assert outcome.incomplete == [r.item_id for r in stored]

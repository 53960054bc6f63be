"""Issue 11, points 6 and 7: one run directory judges one items file; question sets and
CSV headers written by hand.

* A resume compares the items file recorded in ``manifest.json`` (path, SHA-256, size):
  another file is refused naming both, a moved copy is accepted, appended rows are
  accepted, any other change is refused, ``--restart`` starts over without losing the
  old run, and manifests written before the record existed resume with a warning.
* ``requirements`` (and questions) may be written as plain strings.
* A wrong CSV header row is reported as line 1, naming the column.
"""

from __future__ import annotations

import json
import logging
import shutil

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.data.items import load_items
from binaryeval_dspy.data.rows import check_csv_header
from binaryeval_dspy.data.scored_items import load_scored_items
from binaryeval_dspy.errors import InputError, QuestionSetError, RunStateError
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.runs.evaluation import evaluate_items
from binaryeval_dspy.runs.items_file import items_file_identity
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.run_manifest import RunManifest
from tests.conftest import judge_script

ANSWERS = {"Is every claim supported?": "yes", "Are the numbers right?": "no", "Is it grammatical?": "yes"}


def _rows(ids: list[str]) -> str:
    return "".join(json.dumps({"id": i, "source": f"Article {i}.", "summary": f"Summary {i}."}) + "\n" for i in ids)


@pytest.fixture
def fake_lm(cli_scripted_lms):
    """Every --lm resolves to a scripted LM with one stable name; returns the engines made."""
    return cli_scripted_lms(per_lm=lambda _made: judge_script(ANSWERS))


@pytest.fixture
def evaluate(tmp_path, small_question_set, fake_lm):
    """Run `bineval evaluate QS ITEMS --out tmp/run ...extra`; returns the CliRunner result."""
    qs_path = small_question_set.save(tmp_path / "qs.json")

    def run(items, *extra):
        args = ["evaluate", str(qs_path), str(items), "--input-field", "source", "--output-field", "summary",
                "--id-field", "id", "--out", str(tmp_path / "run"), *extra]
        return CliRunner().invoke(cli, args)

    return run


def _flat(text: str) -> str:
    return " ".join(text.split())


def _manifest(tmp_path) -> dict:
    return json.loads((tmp_path / "run" / "manifest.json").read_text())


# ------------------------------------------------------------------ point 6: one run, one items file


def test_another_items_file_into_the_same_out_is_refused_naming_both(tmp_path, evaluate, fake_lm):
    items_a, items_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    items_a.write_text(_rows(["a1", "a2"]), encoding="utf-8")
    items_b.write_text(_rows(["b1", "b2"]), encoding="utf-8")
    assert evaluate(items_a).exit_code == 0
    results_before = (tmp_path / "run" / "results.jsonl").read_text()

    refused = evaluate(items_b)
    assert refused.exit_code == 2, refused.output
    message = _flat(refused.output)
    assert str(items_a.resolve()) in message and str(items_b.resolve()) in message
    assert "--restart" in message and "another --out" in message
    assert len(fake_lm) == 2 and not fake_lm[1].calls  # nothing was asked
    assert (tmp_path / "run" / "results.jsonl").read_text() == results_before
    assert _manifest(tmp_path)["items_path"] == str(items_a)


def test_manifest_records_path_hash_and_size_and_a_moved_copy_resumes(tmp_path, evaluate, fake_lm):
    items = tmp_path / "items.jsonl"
    items.write_text(_rows(["x1", "x2"]), encoding="utf-8")
    assert evaluate(items).exit_code == 0
    recorded = _manifest(tmp_path)["items_file"]
    assert recorded == {"path": str(items.resolve()), "sha256": items_file_identity(items).sha256,
                        "bytes": items.stat().st_size}
    assert len(recorded["sha256"]) == 64

    moved = tmp_path / "elsewhere" / "renamed.jsonl"
    moved.parent.mkdir()
    shutil.move(items, moved)
    result = evaluate(moved)
    assert result.exit_code == 0, result.output
    assert not fake_lm[1].calls and "2 already done" in result.output
    assert _manifest(tmp_path)["items_file"]["path"] == str(moved.resolve())


def test_rows_appended_to_the_items_file_are_accepted_and_only_they_are_judged(tmp_path, evaluate, fake_lm):
    items = tmp_path / "items.jsonl"
    items.write_text(_rows(["x1", "x2"]), encoding="utf-8")
    assert evaluate(items).exit_code == 0
    with items.open("a", encoding="utf-8") as handle:
        handle.write(_rows(["x3"]))
    result = evaluate(items)
    assert result.exit_code == 0, result.output
    assert len(fake_lm[1].calls) == 3  # the new item's 3 questions only
    assert _manifest(tmp_path)["items_file"]["bytes"] == items.stat().st_size


def test_an_items_file_changed_other_than_by_appending_is_refused(tmp_path, evaluate, fake_lm):
    items = tmp_path / "items.jsonl"
    items.write_text(_rows(["x1", "x2", "x3"]), encoding="utf-8")
    assert evaluate(items, "--limit", "2").exit_code == 0
    items.write_text(_rows(["x1", "x2", "x3-edited"]), encoding="utf-8")  # a row not yet judged changed
    refused = evaluate(items)
    assert refused.exit_code == 2
    assert "changed since the run" in _flat(refused.output) and "--restart" in _flat(refused.output)
    assert not fake_lm[1].calls


def test_restart_moves_the_old_run_aside_and_starts_over(tmp_path, evaluate, fake_lm):
    items_a, items_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    items_a.write_text(_rows(["a1"]), encoding="utf-8")
    items_b.write_text(_rows(["b1", "b2"]), encoding="utf-8")
    assert evaluate(items_a).exit_code == 0
    result = evaluate(items_b, "--restart")
    assert result.exit_code == 0, result.output
    assert "run.old-1" in _flat(result.output)
    old = tmp_path / "run.old-1"
    assert [json.loads(line)["item_id"] for line in (old / "results.jsonl").read_text().splitlines()] == ["a1"]
    assert json.loads((old / "manifest.json").read_text())["items_path"] == str(items_a)
    new_ids = [json.loads(line)["item_id"] for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert new_ids == ["b1", "b2"] and _manifest(tmp_path)["items_path"] == str(items_b)


def test_a_manifest_without_the_items_file_resumes_with_a_warning(tmp_path, items_file, small_question_set,
                                                                 scripted_handle, caplog):
    handle, _ = scripted_handle(judge_script(ANSWERS))
    items = load_items(items_file, input_field="source", output_field="summary", id_field="id")

    def manifest() -> RunManifest:
        return RunManifest(command="evaluate", lm="fake", question_set_hash=small_question_set.content_hash,
                           question_set_path="qs.json", items_path=str(items_file),
                           items_file=items_file_identity(items_file),
                           config={"input_field": "source", "output_field": "summary", "id_field": "id",
                                   "scale": [0.0, 1.0]})

    run_dir = RunDirectory(tmp_path / "run")
    evaluate_items(BinEval(small_question_set), items[:2], run_dir, manifest(), lm=handle)
    saved = json.loads(run_dir.manifest_path.read_text())
    del saved["items_file"]  # as written before the items file was recorded
    run_dir.manifest_path.write_text(json.dumps(saved))

    resumed = RunDirectory(tmp_path / "run")
    with caplog.at_level(logging.WARNING):
        outcome = evaluate_items(BinEval(small_question_set), items, resumed, manifest(), lm=handle)
    assert outcome.skipped_items == 2 and outcome.new_items == 1
    assert any("cannot be checked" in n for n in resumed.notes)
    assert "cannot be checked" in caplog.text
    assert json.loads(resumed.manifest_path.read_text())["items_file"]["sha256"] == items_file_identity(
        items_file).sha256


def test_run_directory_check_refuses_another_file_for_any_caller(tmp_path, items_file, small_question_set,
                                                               scripted_handle):
    """The rule lives in `RunDirectory.check`, so rejudge (which records its items file too) gets it."""
    handle, _ = scripted_handle(judge_script(ANSWERS))
    other = tmp_path / "other.jsonl"
    other.write_text(_rows(["item-0", "item-1"]), encoding="utf-8")

    def manifest(path) -> RunManifest:
        return RunManifest(command="rejudge", lm="fake", question_set_hash=small_question_set.content_hash,
                           question_set_path="qs.json", items_path=str(path), items_file=items_file_identity(path),
                           config={"input_field": "source", "output_field": "summary", "id_field": "id",
                                   "scale": [0.0, 1.0]})

    run_dir = RunDirectory(tmp_path / "run")
    items = load_items(items_file, input_field="source", output_field="summary", id_field="id")
    evaluate_items(BinEval(small_question_set), items, run_dir, manifest(items_file), lm=handle)
    with pytest.raises(RunStateError, match="another file"):
        run_dir.check(manifest(other))


def test_set_aside_refuses_a_folder_that_is_not_a_run(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("my own file")
    with pytest.raises(RunStateError, match="not a run directory"):
        RunDirectory(folder).set_aside()
    assert (folder / "notes.txt").is_file()
    assert RunDirectory(tmp_path / "missing").set_aside() is None


# ------------------------------------------------------------------ point 7: question sets written by hand


def test_requirements_written_as_plain_strings_get_ids_in_order(tmp_path):
    path = tmp_path / "qs.json"
    path.write_text(json.dumps({
        "dimensions": ["consistency"],
        "requirements": ["Report only facts from the article.", "Keep it short."],
        "questions": [{"id": "c1", "dimension": "consistency", "text": "Is every claim supported?",
                       "requirement_id": "r1"}],
    }), encoding="utf-8")
    qs = QuestionSet.load(path)
    assert [(r.id, r.text) for r in qs.requirements] == [("r1", "Report only facts from the article."),
                                                         ("r2", "Keep it short.")]
    assert qs.questions[0].requirement_id == "r1"
    saved = json.loads(qs.save(tmp_path / "saved.json").read_text())  # saved back in the full form
    assert saved["requirements"][1] == {"id": "r2", "text": "Keep it short."}
    assert QuestionSet.load(tmp_path / "saved.json").content_hash == qs.content_hash


def test_questions_written_as_plain_strings_or_grouped_by_dimension(tmp_path):
    single = QuestionSet.from_data({"dimensions": ["fluency"], "questions": ["Is it grammatical?", "Spelled right?"]})
    assert [(q.id, q.dimension, q.text) for q in single.questions] == [
        ("q1", "fluency", "Is it grammatical?"), ("q2", "fluency", "Spelled right?")]
    grouped = QuestionSet.from_data({"questions": {"coherence": ["Is it ordered?"],
                                                   "fluency": ["Is it grammatical?", {"id": "f2", "text": "Spelled?"}]}})
    with pytest.raises(QuestionSetError, match="required field 'id' is missing"):  # objects still need their id
        QuestionSet.from_data({"dimensions": ["fluency"], "questions": [{"dimension": "fluency", "text": "Ok?"}]})
    assert grouped.dimensions == ["coherence", "fluency"]
    assert [(q.id, q.dimension) for q in grouped.questions] == [("q1", "coherence"), ("q2", "fluency"),
                                                               ("f2", "fluency")]


def test_plain_string_questions_with_several_dimensions_are_explained(tmp_path):
    path = tmp_path / "qs.json"
    path.write_text(json.dumps({"dimensions": ["coherence", "fluency"], "questions": ["Is it ordered?"]}))
    with pytest.raises(QuestionSetError) as err:
        QuestionSet.load(path)
    assert str(path) in str(err.value) and "exactly one dimension" in str(err.value)
    assert '"dimension"' in str(err.value)  # says how to write it


def test_a_generated_id_that_collides_with_an_explicit_one_is_a_duplicate(tmp_path):
    with pytest.raises(QuestionSetError, match="'q1': id used more than once"):
        QuestionSet.from_data({"dimensions": ["fluency"],
                               "questions": ["Is it grammatical?", {"id": "q1", "dimension": "fluency", "text": "x?"}]})


# ------------------------------------------------------------------ point 7: CSV header errors name line 1


def _csv(tmp_path, text: str):
    path = tmp_path / "items.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_header_missing_the_output_column_is_line_1(tmp_path):
    path = _csv(tmp_path, "input,summary\nAn article.,A summary.\n")
    with pytest.raises(InputError) as err:
        load_items(path)
    assert err.value.line == 1 and err.value.field == "output" and err.value.path == str(path)
    assert f"{path}:1:" in str(err.value) and "input, summary" in str(err.value)


def test_csv_header_missing_the_id_column_is_line_1(tmp_path):
    path = _csv(tmp_path, "input,output\nAn article.,A summary.\n")
    with pytest.raises(InputError) as err:
        load_items(path, id_field="id")
    assert err.value.line == 1 and err.value.field == "id"


def test_csv_header_with_an_empty_column_name_is_line_1(tmp_path):
    path = _csv(tmp_path, "input,output,\nAn article.,A summary.,\n")
    with pytest.raises(InputError) as err:
        load_items(path)
    assert err.value.line == 1 and err.value.field == "column 3" and "no name" in str(err.value)


def test_csv_header_with_a_duplicated_column_names_it(tmp_path):
    path = _csv(tmp_path, "input,output,output\nAn article.,A summary.,Another.\n")
    with pytest.raises(InputError) as err:
        load_items(path)
    assert err.value.line == 1 and err.value.field == "output" and "more than once" in str(err.value)


def test_csv_header_column_with_stray_spaces_is_pointed_out(tmp_path):
    path = _csv(tmp_path, "input, output\nAn article.,A summary.\n")
    with pytest.raises(InputError) as err:
        check_csv_header(path, {"input": "input", "output": "output"})
    assert err.value.line == 1 and "' output' differs only by spaces or case" in str(err.value)


def test_scored_csv_missing_a_human_score_column_is_line_1(tmp_path):
    path = _csv(tmp_path, "input,output,coh\nAn article.,A summary.,3\n")
    with pytest.raises(InputError) as err:
        load_scored_items(path, human_fields={"coherence": "coherence"})
    assert err.value.line == 1 and err.value.field == "coherence" and "human score" in str(err.value)


def test_cli_reports_a_bad_csv_header_as_line_1(tmp_path, evaluate):
    path = _csv(tmp_path, "id,source,summ\n1,An article.,A summary.\n")
    result = evaluate(path)
    assert result.exit_code == 2
    assert f"{path.name}:1: field 'summary'" in _flat(result.output)
    assert not (tmp_path / "run").exists()

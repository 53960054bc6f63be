import json

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from tests.conftest import judge_script
from tests.fakes import field_value

ANSWERS = {"Is every claim supported?": "yes", "Are the numbers right?": "no", "Is it grammatical?": "yes"}


@pytest.fixture
def fake_lm(cli_scripted_lms):
    """Make every --lm value resolve to a scripted LM (`cli_scripted_lms`); returns the engines made."""
    return cli_scripted_lms


def test_evaluate_writes_results_summary_and_resumes(tmp_path, items_file, small_question_set, fake_lm):
    engines = fake_lm(judge_script(ANSWERS))
    qs_path = small_question_set.save(tmp_path / "qs.json")
    out = tmp_path / "run"
    args = ["evaluate", str(qs_path), str(items_file), "--input-field", "source", "--output-field", "summary",
            "--id-field", "id", "--out", str(out), "--scale", "1", "5", "--limit", "2"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "consistency" in result.output and "3.00" in result.output  # mean 0.5 on 1-5
    assert len((out / "results.jsonl").read_text().splitlines()) == 2
    summary = json.loads((out / "summary.json").read_text())
    assert summary["items"] == 2 and summary["scale"] == [1.0, 5.0]
    # same command, no limit: only the third item is judged
    result = CliRunner().invoke(cli, args[:-2])
    assert result.exit_code == 0, result.output
    assert len(engines[1].calls) == 3
    assert "2 already done" in result.output


def test_evaluate_bad_input_exits_2_with_located_message(tmp_path, small_question_set, fake_lm):
    fake_lm(judge_script(ANSWERS))
    qs_path = small_question_set.save(tmp_path / "qs.json")
    items = tmp_path / "items.jsonl"
    items.write_text('{"input": "a", "output": "b"}\n{"input": "a"}\n', encoding="utf-8")
    result = CliRunner().invoke(cli, ["evaluate", str(qs_path), str(items), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "items.jsonl:2" in result.output and "'output'" in result.output
    assert not (tmp_path / "r").exists()  # nothing started before the input was checked


def test_evaluate_unknown_dimension_in_question_set(tmp_path, items_file, fake_lm):
    fake_lm(judge_script(ANSWERS))
    qs = tmp_path / "qs.json"
    qs.write_text(json.dumps({"dimensions": ["fluency"], "questions": [
        {"id": "q1", "dimension": "fluency", "text": "Fine?"},
        {"id": "q2", "dimension": "style", "text": "Stylish?"}]}, indent=2), encoding="utf-8")
    result = CliRunner().invoke(cli, ["evaluate", str(qs), str(items_file)])
    assert result.exit_code == 2
    assert "q2" in result.output and "style" in result.output and "qs.json" in result.output


def test_missing_items_file(tmp_path, small_question_set, fake_lm):
    fake_lm(judge_script(ANSWERS))
    qs_path = small_question_set.save(tmp_path / "qs.json")
    result = CliRunner().invoke(cli, ["evaluate", str(qs_path), str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2 and "nope.jsonl" in result.output and "not found" in result.output


def test_questions_command_writes_a_valid_set(tmp_path, fake_lm):
    def script(system, user):
        if "[[ ## requirement ## ]]" in user:
            req = field_value(user, "requirement")
            return {"questions": [{"question": f"Does it {req.lower().rstrip('.')}?", "dimension": "quality",
                                   "violation_example": "It does not."}]}
        return {"requirements": ["Stay short.", "Be polite."]}

    fake_lm(script)
    task = tmp_path / "task.txt"
    task.write_text("Reply to the customer briefly and politely.", encoding="utf-8")
    out = tmp_path / "qs.json"
    result = CliRunner().invoke(cli, ["questions", str(task), "--out", str(out), "--dimensions", "quality"])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert [q["text"] for q in data["questions"]] == ["Does it stay short?", "Does it be polite?"]
    assert data["generated_by"] == "scripted-cli"


def test_bad_lm_value_is_explained(tmp_path, small_question_set, items_file):
    qs_path = small_question_set.save(tmp_path / "qs.json")
    result = CliRunner().invoke(cli, ["evaluate", str(qs_path), str(items_file), "--input-field", "source",
                                      "--output-field", "summary", "--lm", "gpt4"])
    assert result.exit_code == 2 and "LiteLLM id" in result.output
    result = CliRunner().invoke(cli, ["evaluate", str(qs_path), str(items_file), "--input-field", "source",
                                      "--output-field", "summary", "--lm", "http://localhost:9/v1"])
    assert result.exit_code == 2 and "--lm-model" in result.output

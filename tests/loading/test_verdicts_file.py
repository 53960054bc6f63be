"""The verdicts file: lossless round trips (JSONL, CSV, a run's export), and bad rows named by
file, line and field."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.data.verdicts_file import read_verdicts, write_verdicts
from binaryeval_dspy.errors import InputError
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.runs.verdicts_export import run_verdict_records
from binaryeval_dspy.schemas.item_result import ItemResult, Usage
from binaryeval_dspy.schemas.run_manifest import RunManifest
from binaryeval_dspy.schemas.score_card import ScoreCard
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.schemas.verdict_record import VerdictRecord

VERDICTS = [
    QuestionVerdict(question_id="q1", verdict="yes", explanation="It says so, \"quoted\", with a, comma.", p_yes=0.8125),
    QuestionVerdict(question_id="q2", verdict="unparsed", raw_answer="maybe\nperhaps", error="no yes/no"),
    QuestionVerdict(question_id="q3", verdict="error", error="TimeoutError: 30 s"),
    QuestionVerdict(question_id="q4", verdict="no", source="code", evidence={"words": 12, "limit": [1, 10]},
                    explanation="12 words"),
    QuestionVerdict(question_id="q5", verdict="yes", flags=["explanation_says_no"], reply_cut=True, qualified=True),
]


def _run(tmp_path):
    run = RunDirectory(tmp_path / "run")
    run.start(RunManifest(command="evaluate", lm="openai/gpt-4o-mini", question_set_hash="h", question_set_path="q",
                          items_path="i"))
    card = ScoreCard(dimension_scores={"d": 0.5}, overall=0.5, counts={}, scale=(0.0, 1.0),
                     scaled_dimension_scores={"d": 0.5}, scaled_overall=0.5)
    run.append(ItemResult(item_id="a", output_hash="x", question_set_hash="h", score_card=card, verdicts=VERDICTS,
                          usage=Usage(lm_calls=4, prompt_tokens=4000, completion_tokens=400)))
    (run.path / "question_set.json").write_text(json.dumps({"questions": [
        {"id": "q1", "text": "Is it grounded?", "dimension": "d"}]}), encoding="utf-8")
    return run


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".jsonl.gz"])
def test_a_runs_export_reads_back_losslessly(tmp_path, suffix):
    run = _run(tmp_path)
    records = run_verdict_records(run.path)
    assert [r.verdict for r in records] == ["yes", "unparsed", "error", "no", "yes"]
    assert records[0].judge == "openai/gpt-4o-mini" and records[0].question_text == "Is it grounded?"
    assert {r.output_hash for r in records} == {"x"}
    lm_rows = [r for r in records if r.source == "lm"]
    assert len({r.cost_usd for r in lm_rows}) == 1 and lm_rows[0].cost_usd > 0  # the item's cost shared by 4
    assert records[3].cost_usd == 0.0  # answered by code
    path = write_verdicts(records, tmp_path / f"out{suffix}")
    back = read_verdicts(path)
    assert back == records
    assert [r.to_question_verdict() for r in back] == VERDICTS


def test_bineval_verdicts_command_writes_the_file(tmp_path):
    run = _run(tmp_path)
    result = CliRunner().invoke(cli, ["verdicts", str(run.path), "--out", str(tmp_path / "v.csv"), "--judge", "me"])
    assert result.exit_code == 0, result.output
    assert "5 verdicts of 1 items (me): 2 yes, 1 no, 1 unparsed, 1 error" in result.output
    assert {r.judge for r in read_verdicts(tmp_path / "v.csv")} == {"me"}


def test_a_served_model_without_a_price_has_an_unknown_cost_not_zero(tmp_path):
    run = RunDirectory(tmp_path / "run")
    run.start(RunManifest(command="evaluate", lm="openai/x @ http://127.0.0.1:9/v1", question_set_hash="h",
                          question_set_path="q", items_path="i"))
    card = ScoreCard(dimension_scores={"d": 1.0}, overall=1.0, counts={}, scale=(0.0, 1.0),
                     scaled_dimension_scores={"d": 1.0}, scaled_overall=1.0)
    run.append(ItemResult(item_id="a", output_hash="x", question_set_hash="h", score_card=card,
                          verdicts=VERDICTS[:1], usage=Usage(lm_calls=1, prompt_tokens=10, completion_tokens=1)))
    assert run_verdict_records(run.path)[0].cost_usd is None


@pytest.mark.parametrize(("text", "line", "field", "message"), [
    ("item_id,question_id,judge,verdict\na,q,h,yes\na,q,h,maybe\n", 3, "verdict", "one of yes, no, unparsed, error"),
    ("item_id,question_id,judge,verdict,p_yes\na,q,h,yes,high\n", 2, "p_yes", "expected a number"),
    ("item_id,question_id,judge,verdict,p_yes\na,q,h,yes,1.5\n", 2, "p_yes", "less than or equal to 1"),
    ("item_id,question_id,judge,verdict\na,q,,yes\n", 2, "judge", "missing or empty"),
    ("item_id,question_id,judge,verdict,notes\na,q,h,yes,x\n", 1, "notes", "unknown column"),
    ("item_id,question_id,verdict\na,q,yes\n", 1, "judge", "no column 'judge'"),
    ("item_id,question_id,judge,verdict\na,q,h,yes\na,q,h,no\n", 3, "item_id, question_id, judge",
     "the first is on line 2"),
])
def test_bad_csv_rows_name_file_line_and_field(tmp_path, text, line, field, message):
    path = tmp_path / "labels.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_verdicts(path)
    assert (caught.value.line, caught.value.field) == (line, field)
    assert message in str(caught.value) and str(path) in str(caught.value)


def test_bad_jsonl_rows_name_line_and_field(tmp_path):
    path = tmp_path / "v.jsonl"
    path.write_text('{"item_id": "a", "question_id": "q", "judge": "h", "verdict": "YES"}\n'
                    '{"item_id": "a", "question_id": "q2", "judge": "h", "verdict": "no", "cost_usd": -1}\n',
                    encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_verdicts(path)
    assert (caught.value.line, caught.value.field) == (2, "cost_usd")
    path.write_text('{"item_id": 7, "question_id": "q", "judge": "h", "verdict": " Yes "}\n', encoding="utf-8")
    assert read_verdicts(path) == [VerdictRecord(item_id="7", question_id="q", judge="h", verdict="yes")]


def test_a_spreadsheet_with_capitalised_verdicts_and_empty_cells_reads(tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text("item_id,question_id,judge,verdict,explanation,p_yes\n1,q,human,Yes,,\n2,q,human,No,too long,\n",
                    encoding="utf-8")
    records = read_verdicts(path)
    assert [(r.item_id, r.verdict, r.explanation, r.p_yes) for r in records] == [
        ("1", "yes", "", None), ("2", "no", "too long", None)]


def test_a_missing_verdicts_file_is_named_as_one(tmp_path):
    with pytest.raises(InputError, match="check the path of the verdicts file"):
        read_verdicts(tmp_path / "nope.csv")
    with pytest.raises(InputError, match="is a directory"):
        read_verdicts(tmp_path)


@pytest.mark.parametrize("cell, column_of", [
    ('"{bad json"', "evidence"),
    ('"[1, 2"', "flags"),
])
def test_a_csv_cell_that_is_not_json_names_the_line_the_field_and_its_column(tmp_path, cell, column_of):
    """A CSV cell's JSON error names the row's line, the field and the CSV column it is in (the
    decoder's own column counts characters of the cell, not of the file's line)."""
    header = ["item_id", "question_id", "judge", "verdict", "evidence", "flags"]
    cells = ["a", "q1", "j", "yes", "", ""]
    cells[header.index(column_of)] = cell
    path = tmp_path / "verdicts.csv"
    path.write_text(",".join(header) + "\n" + "a,q0,j,no,,\n" + ",".join(cells) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_verdicts(path)
    error = caught.value
    assert error.line == 3 and error.field == column_of, str(error)
    assert f"column {header.index(column_of) + 1}:" in str(error) and "of the cell" in str(error), str(error)


def test_a_jsonl_row_that_is_not_json_names_the_line_the_field_and_the_right_column(tmp_path):
    good = json.dumps({"item_id": "a", "question_id": "q0", "judge": "j", "verdict": "no"})
    bad = '{"item_id": "a", "question_id": "q1", "judge": "j", "verdict": "yes", "evidence": {bad}}'
    path = tmp_path / "verdicts.jsonl"
    path.write_text(good + "\n" + bad + "\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_verdicts(path)
    error = caught.value
    assert error.line == 2 and error.field == "evidence", str(error)
    assert f"at column {bad.index('bad') + 1}" in str(error), str(error)  # 1-based: where a key was expected


def test_a_jsonl_row_whose_mistake_is_between_fields_names_no_field(tmp_path):
    path = tmp_path / "verdicts.jsonl"
    row = '{"item_id": "a" "question_id": "q1"}'  # the comma after "a" is missing
    path.write_text(row + "\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_verdicts(path)
    where = row.index('"question_id"') + 1
    assert caught.value.line == 1 and caught.value.field is None and f"at column {where}" in str(caught.value)


def test_the_one_csv_writer_writes_what_the_csv_reader_reads(tmp_path):
    """`csv_text` is the writer of verdicts files and judge weights files alike: each kind of
    cell comes back from `read_csv_rows` as written (JSON for lists and objects, true/false,
    empty for None, floats by the caller's rule)."""
    from binaryeval_dspy.data.judge_weights import judge_weights_text
    from binaryeval_dspy.data.rows import csv_text, read_csv_rows

    rows = [{"a": "x, \"quoted\"", "b": ["e", 1], "c": True, "d": None, "e": 0.1},
            {"a": "line\nbreak", "b": {"k": "v"}, "c": False, "e": 2}]
    path = tmp_path / "t.csv"
    path.write_text(csv_text(["a", "b", "c", "d", "e"], rows), encoding="utf-8")
    _header, read = read_csv_rows(path, {})
    assert [row for _line, row in read] == [
        {"a": 'x, "quoted"', "b": '["e", 1]', "c": "true", "d": "", "e": "0.1"},
        {"a": "line\nbreak", "b": '{"k": "v"}', "c": "false", "d": "", "e": "2"}]
    assert judge_weights_text([{"judge": "j", "weight": 0.5, "answered": 3}]) == (
        "judge,weight,accuracy,kappa,agree,answered,labels\nj,0.500000,,,,3,\n")

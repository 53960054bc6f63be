"""Bad input found by adversarial testing: each case gets a located, clear error (or is handled)."""

import json

import dspy
import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.data.items import load_items
from binaryeval_dspy.errors import (
    BinEvalError,
    InputError,
    LMConfigError,
    QuestionSetError,
    RunStateError,
)
from binaryeval_dspy.lm.factory import make_lm
from binaryeval_dspy.lm.calls import LMCall, read_failure
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.runs.evaluation import evaluate_items
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.run_manifest import RunManifest
from binaryeval_dspy.signatures.binary_judgment import JudgeBinaryQuestion
from tests.conftest import judge_script
from tests.fakes import scripted_lm

ANSWERS = {"Is every claim supported?": "yes", "Are the numbers right?": "no", "Is it grammatical?": "yes"}


def write(tmp_path, name, data: bytes | str):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


# ---------------------------------------------------------------- item files
def test_bom_is_accepted_in_jsonl_and_csv(tmp_path):
    jsonl = write(tmp_path, "a.jsonl", b'\xef\xbb\xbf{"input": "x", "output": "y"}\n')
    assert load_items(jsonl)[0].input == "x"
    csv_path = write(tmp_path, "a.csv", b"\xef\xbb\xbfinput,output\nx,y\n")
    assert load_items(csv_path)[0].output == "y"


def test_non_utf8_line_is_located(tmp_path):
    path = write(tmp_path, "a.jsonl", b'{"input": "x", "output": "y"}\n{"input": "x\xff", "output": "y"}\n')
    with pytest.raises(InputError) as err:
        load_items(path)
    assert err.value.line == 2 and "UTF-8" in str(err.value)


def test_reserved_field_names_in_rows_are_kept_aside(tmp_path):
    path = write(tmp_path, "a.jsonl", json.dumps({"input": "x", "output": "y", "line": 99, "item_id": "q"}) + "\n")
    (item,) = load_items(path)
    assert item.line == 1 and item.row_line == 99 and item.row_item_id == "q" and item.item_id == "line-1"


def test_csv_short_row_and_multiline_record(tmp_path):
    short = write(tmp_path, "s.csv", "input,output,id\nx,y,1\nx,2\n")
    with pytest.raises(InputError, match="fewer cells than the header") as err:
        load_items(short)
    assert err.value.line == 3
    multi = write(tmp_path, "m.csv", 'output,input\n"a\nb\nc",\n')  # an empty input is refused (an empty
    with pytest.raises(InputError) as err:                             # output is recorded as empty_output)
        load_items(multi)
    assert err.value.line == 2 and "input is empty" in str(err.value)


def test_huge_csv_field_and_huge_json_numbers(tmp_path):
    big = "w " * 100_000
    (item,) = load_items(write(tmp_path, "big.csv", f"input,output\n{big},short\n"))
    assert len(item.input) == len(big)
    with pytest.raises(InputError, match="cannot be read"):
        load_items(write(tmp_path, "n.jsonl", '{"input": "x", "output": "y", "n": ' + "9" * 5000 + "}\n"))


def test_empty_file_limit_and_bad_ids(tmp_path):
    with pytest.raises(InputError, match="no items"):
        load_items(write(tmp_path, "e.jsonl", "\n\n"))
    ok = write(tmp_path, "ok.jsonl", '{"input": "x", "output": "y", "id": ["a"]}\n')
    with pytest.raises(InputError, match="positive integer"):
        load_items(ok, limit=0)
    with pytest.raises(InputError, match="string or an integer"):
        load_items(ok, id_field="id")
    with pytest.raises(InputError, match="not valid Unicode"):
        load_items(write(tmp_path, "s.jsonl", '{"input": "x", "output": "\\ud800"}\n'))


# ---------------------------------------------------------------- question sets
def test_duplicate_id_is_reported_where_the_duplicate_is(tmp_path):
    data = {"dimensions": ["a"], "requirements": [{"id": "a-1", "text": "r"}],
            "questions": [{"id": "a-1", "dimension": "a", "text": "Q1?", "requirement_id": "a-1"},
                          {"id": "a-1", "dimension": "a", "text": "Q2?"}]}
    text = json.dumps(data, indent=2)
    path = write(tmp_path, "qs.json", text)
    with pytest.raises(QuestionSetError) as err:
        QuestionSet.load(path)
    lines = text.split("\n")
    second = [i + 1 for i, line in enumerate(lines) if '"id": "a-1"' in line][-1]
    assert err.value.line == second


def test_question_set_type_strictness_and_messages(tmp_path):
    base = {"dimensions": ["a"], "questions": [{"id": "q", "dimension": "a", "text": "Q?"}]}
    with pytest.raises(QuestionSetError, match="schema_version"):
        QuestionSet.load(write(tmp_path, "v.json", json.dumps({**base, "schema_version": "1"})))
    with pytest.raises(QuestionSetError, match="unknown field 'foo'"):
        QuestionSet.load(write(tmp_path, "u.json", json.dumps({**base, "foo": 1})))
    with pytest.raises(QuestionSetError, match="required field 'id' is missing"):
        QuestionSet.load(write(tmp_path, "m.json", json.dumps({"dimensions": ["a"], "questions": [
            {"dimension": "a", "text": "Q?"}]})))
    with pytest.raises(QuestionSetError, match="requirements: id used more than once"):
        QuestionSet.load(write(tmp_path, "r.json", json.dumps({**base, "requirements": [
            {"id": "r1", "text": "x"}, {"id": "r1", "text": "y"}]})))
    with pytest.raises(QuestionSetError, match="UTF-8"):
        QuestionSet.load(write(tmp_path, "b.json", b'{"dimensions": ["\xff"]}'))


# ---------------------------------------------------------------- run directories
def _manifest(qs, lm="fake"):
    return RunManifest(command="evaluate", lm=lm, question_set_hash=qs.content_hash, question_set_path="q",
                       items_path="items.jsonl", config={"input_field": "source", "output_field": "summary",
                                                         "id_field": "id", "scale": [0.0, 1.0]})


def _items(items_file):
    return load_items(items_file, input_field="source", output_field="summary", id_field="id")


def test_changed_output_is_refused_on_resume(tmp_path, items_file, small_question_set, scripted_handle):
    handle, _ = scripted_handle(judge_script(ANSWERS))
    run_dir = RunDirectory(tmp_path / "run")
    evaluate_items(BinEval(small_question_set), _items(items_file), run_dir, _manifest(small_question_set), lm=handle)
    rows = [json.loads(line) for line in items_file.read_text().splitlines()]
    rows[1]["summary"] = "A different summary."
    items_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(RunStateError, match="item 'item-1' already has a result, but its output"):
        evaluate_items(BinEval(small_question_set), _items(items_file), run_dir, _manifest(small_question_set),
                       lm=handle)


def test_missing_newline_is_repaired_and_invalid_complete_line_is_kept(tmp_path, items_file, small_question_set,
                                                                       scripted_handle):
    handle, _ = scripted_handle(judge_script(ANSWERS))
    run_dir = RunDirectory(tmp_path / "run")
    evaluate_items(BinEval(small_question_set), _items(items_file)[:1], run_dir, _manifest(small_question_set),
                   lm=handle)
    run_dir.results_path.write_bytes(run_dir.results_path.read_bytes().rstrip(b"\n"))
    evaluate_items(BinEval(small_question_set), _items(items_file), run_dir, _manifest(small_question_set), lm=handle)
    assert [r.item_id for r in run_dir.read_results()] == ["item-0", "item-1", "item-2"]
    # a complete JSON line that is not a valid result is reported, not deleted
    lines = run_dir.results_path.read_bytes().rstrip(b"\n").split(b"\n")
    lines[-1] = lines[-1].replace(b'"verdict":"yes"', b'"verdict":"Yes"')
    text = b"\n".join(lines)
    run_dir.results_path.write_bytes(text)
    with pytest.raises(InputError) as err:
        run_dir.read_results()
    assert err.value.line == 3
    assert run_dir.results_path.read_bytes() == text


def test_results_without_manifest_and_concurrent_writers_are_refused(tmp_path, small_question_set):
    run_dir = RunDirectory(tmp_path / "run")
    run_dir.path.mkdir()
    run_dir.results_path.write_text('{"x": 1}\n')
    with pytest.raises(RunStateError, match="no manifest.json"):
        run_dir.start(_manifest(small_question_set))
    other = RunDirectory(tmp_path / "run2")
    other.lock()
    try:
        with pytest.raises(RunStateError, match="another process"):
            RunDirectory(tmp_path / "run2").lock()
    finally:
        other.unlock()
    unrelated = tmp_path / "docs"
    unrelated.mkdir()
    (unrelated / "notes.md").write_text("mine")
    with pytest.raises(RunStateError, match="not a run directory"):
        RunDirectory(unrelated).start(_manifest(small_question_set))
    with pytest.raises(InputError, match="not a directory"):
        RunDirectory(unrelated / "notes.md")


def test_run_with_no_results_may_restart_with_another_lm(tmp_path, small_question_set):
    run_dir = RunDirectory(tmp_path / "run")
    run_dir.start(_manifest(small_question_set, lm="broken.gguf"))
    manifest = run_dir.start(_manifest(small_question_set, lm="local"))
    assert manifest.lm == "local"


# ---------------------------------------------------------------- programs and LMs
def test_bineval_accepts_a_path_rejects_other_types_and_saves_the_scale(tmp_path, small_question_set):
    path = small_question_set.save(tmp_path / "qs.json")
    program = BinEval(str(path), scale=(1, 5))
    assert program.question_set == small_question_set
    with pytest.raises(BinEvalError, match="QuestionSet or the path"):
        BinEval({"dimensions": []})
    with pytest.raises(BinEvalError, match="two numbers|two different"):
        BinEval(small_question_set, scale=(5,))
    with pytest.raises(BinEvalError, match="finite"):
        BinEval(small_question_set, scale=(float("nan"), 1))
    with pytest.raises(BinEvalError, match="integer"):
        BinEval(small_question_set, num_threads=2.5)
    program.save(str(tmp_path / "p.json"))
    fresh = BinEval()
    fresh.load(str(tmp_path / "p.json"))
    assert fresh.scale == (1.0, 5.0)


@pytest.mark.parametrize("threads", [1, 3])
def test_failed_calls_are_error_verdicts_naming_their_cause(small_question_set, threads):
    def down(system, user):
        raise ConnectionError("endpoint down")

    lm, _ = scripted_lm(down)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        pred = BinEval(small_question_set, num_threads=threads)(input="a", output="b")
    assert [v.verdict for v in pred.verdicts] == ["error"] * 3
    assert all("endpoint down" in v.error for v in pred.verdicts)
    assert pred.score is None and pred.score_card.total_counts.error == 3


def test_a_reply_in_the_other_format_is_read_but_prose_is_not():
    from dspy.utils.exceptions import AdapterParseError

    call = LMCall(key="q", signature=JudgeBinaryQuestion, inputs={})

    def read(raw):
        answer = read_failure(call, AdapterParseError(adapter_name="ChatAdapter", signature=JudgeBinaryQuestion,
                                                      lm_response=raw, message="could not read it"))
        return (answer.fields["verdict"], answer.fields["explanation"]) if answer.answered else None

    assert read('{"verdict": "Yes", "explanation": "ok"}') == ("yes", "ok")
    assert read("[[ ## verdict ## ]]\nNO\n\n[[ ## explanation ## ]]\nbad") == ("no", "bad")
    assert read('Considering "verdict": "no" would be wrong, the answer is yes.') is None


def test_make_lm_rejects_inconsistent_options(monkeypatch):
    with pytest.raises(LMConfigError, match="only apply to a base URL"):
        make_lm("openai/gpt-4o-mini", model="x")
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(LMConfigError, match="not set"):
        make_lm("http://localhost:1/v1", model="m", api_key_env="NO_SUCH_KEY_VAR")
    with pytest.raises(LMConfigError, match="max_tokens"):
        make_lm("openai/gpt-4o-mini", max_tokens=0)
    with pytest.raises(LMConfigError, match="non-empty"):
        make_lm("  ")


def test_bad_gguf_fails_when_the_lm_is_made(tmp_path):
    pytest.importorskip("llama_cpp")
    fake = write(tmp_path, "fake.gguf", b"not a model")
    with pytest.raises(LMConfigError, match="could not load"):
        make_lm(str(fake))


# ---------------------------------------------------------------- CLI
@pytest.fixture
def fake_cli_lm(cli_scripted_lms):
    return cli_scripted_lms(per_lm=lambda _made: judge_script(ANSWERS))


def test_cli_markup_in_names_is_printed_literally(tmp_path, fake_cli_lm):
    qs = QuestionSet.model_validate({"dimensions": ["fl[/]"], "questions": [
        {"id": "q[bold]", "dimension": "fl[/]", "text": "Is it grammatical?"}]})
    qs_path = qs.save(tmp_path / "qs.json")
    items = write(tmp_path, "items[red].jsonl", '{"id": "[draft]", "input": "x", "output": "y"}\n')
    result = CliRunner().invoke(cli, ["evaluate", str(qs_path), str(items), "--id-field", "id",
                                      "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "[draft]" in result.output and "fl[/]" in result.output
    bad = write(tmp_path, "bad[x].jsonl", '{"input": "x"}\n')
    result = CliRunner().invoke(cli, ["evaluate", str(qs_path), str(bad)])
    assert result.exit_code == 2 and "bad[x].jsonl:1" in result.output


def test_cli_rejects_bad_scale_and_out(tmp_path, items_file, small_question_set, fake_cli_lm):
    qs_path = small_question_set.save(tmp_path / "qs.json")
    base = ["evaluate", str(qs_path), str(items_file), "--input-field", "source", "--output-field", "summary"]
    for scale in (["nan", "1"], ["1", "1"], ["inf", "5"]):
        result = CliRunner().invoke(cli, [*base, "--scale", *scale])
        assert result.exit_code == 2 and "--scale" in result.output
    a_file = write(tmp_path, "afile", "x")
    result = CliRunner().invoke(cli, [*base, "--out", str(a_file)])
    assert result.exit_code == 2 and "not a directory" in result.output
    assert fake_cli_lm == []  # no LM was even built


def test_questions_checks_out_path_and_dimensions_before_the_lm(tmp_path, fake_cli_lm):
    task = write(tmp_path, "task.txt", "Summarize the article.")
    result = CliRunner().invoke(cli, ["questions", str(task), "--out", str(tmp_path)])
    assert result.exit_code == 2 and "is a directory" in result.output
    result = CliRunner().invoke(cli, ["questions", str(task), "--out", str(tmp_path / "q.json"),
                                      "--dimensions", ",,!!"])
    assert result.exit_code == 2 and "no letter or digit" in result.output
    assert fake_cli_lm == []


def test_usage_is_counted_when_questions_run_on_threads(small_question_set):
    lm, _ = scripted_lm(judge_script(ANSWERS))
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()), dspy.track_usage() as tracker:
        BinEval(small_question_set, num_threads=3)(input="a", output="b")
    (entries,) = tracker.usage_data.values()
    assert len(entries) == 3 and sum(e["prompt_tokens"] for e in entries) == 30


def test_items_with_an_id_field_but_no_id_field_option_get_one_hint(tmp_path, fake_endpoint):
    from click.testing import CliRunner

    from binaryeval_dspy.cli.main import cli
    from tests.engines.test_remote_faults import write_inputs

    qs, items = write_inputs(tmp_path, n_items=3)  # rows carry "id": "item-0", ...
    base = ["evaluate", str(qs), str(items), "--lm", fake_endpoint.base_url, "--lm-model", fake_endpoint.model]
    result = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / "a")])
    said = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert said.count("Hint: the rows of") == 1 and "pass --id-field id" in said, said
    given = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / "b"), "--id-field", "id"])
    assert given.exit_code == 0 and "--id-field id to match" not in " ".join(given.output.split())


def test_a_litellm_id_with_an_unknown_provider_is_refused_when_the_lm_is_built():
    with pytest.raises(LMConfigError, match=r"LiteLLM knows no provider 'notaprovider'"):
        make_lm("notaprovider/xyz")
    with pytest.raises(LMConfigError, match=r"did you mean openai"):
        make_lm("opeani/gpt-4o-mini")
    assert make_lm("openai/gpt-4o-mini").name == "openai/gpt-4o-mini"  # a known provider is built (no call made)

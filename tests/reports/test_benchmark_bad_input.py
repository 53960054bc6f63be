"""Bad input to `bineval benchmark` / `report` and the benchmark loaders: located errors,
exit code 2, and nothing computed lost or silently mixed (ROUGE-L only: no LM)."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.data import load_summeval
from binaryeval_dspy.errors import InputError

DIMS = ("coherence", "consistency", "fluency", "relevance")
FAST = ["--methods", "rouge", "--no-figures", "--bootstrap", "10"]


def _rows(summary_word: str = "summary", score: float = 3.0) -> list[dict]:
    return [{"doc_id": f"doc-{doc}", "system_id": f"M{k}", "source": f"Article {doc}.",
             "system_output": f"{summary_word} {k} of article {doc}.", "reference": f"Highlight {doc}.",
             "scores": {d: score + (k % 2) for d in DIMS}} for doc in range(2) for k in range(2)]


def _data(root: Path, rows: list[dict] | None = None, raw: bytes | None = None) -> Path:
    (root / "summeval").mkdir(parents=True)
    text = raw if raw is not None else "".join(json.dumps(r) + "\n" for r in rows or _rows()).encode()
    (root / "summeval" / "summeval.jsonl").write_bytes(text)
    return root


def _bench(data: Path, out: Path, *extra: str):
    return CliRunner().invoke(cli, ["benchmark", "summeval", "--data-dir", str(data), "--out", str(out), *FAST,
                                    *extra])


def test_rerun_on_changed_data_with_the_same_ids_is_refused(tmp_path):
    out = tmp_path / "run"
    first = _bench(_data(tmp_path / "a"), out)
    assert first.exit_code == 0, first.output
    stored = (out / "rouge" / "results.jsonl").read_text()
    again = _bench(_data(tmp_path / "b", _rows(summary_word="précis", score=2.0)), out)
    assert again.exit_code == 2 and "doc-0/M0" in again.output, again.output
    assert (out / "rouge" / "results.jsonl").read_text() == stored


def test_out_folder_that_is_not_a_run_is_refused_and_left_alone(tmp_path):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "report.md").write_text("MY NOTES")
    result = _bench(_data(tmp_path / "d"), out)
    assert result.exit_code == 2 and "notes" in result.output, result.output
    assert (out / "report.md").read_text() == "MY NOTES"


def test_non_utf8_benchmark_file_names_file_and_line(tmp_path):
    good = "".join(json.dumps(r) + "\n" for r in _rows()).encode()
    lines = good.splitlines(keepends=True)
    raw = lines[0] + lines[1].replace(b"Article", b"Artic\xe9le") + b"".join(lines[2:])
    data = _data(tmp_path / "d", raw=raw)
    with pytest.raises(InputError) as error:
        load_summeval(data_dir=data)
    assert "summeval.jsonl" in str(error.value) and ":2" in str(error.value) and "UTF-8" in str(error.value)
    result = _bench(data, tmp_path / "run")
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_empty_benchmark_file_says_the_file_is_empty(tmp_path):
    data = _data(tmp_path / "d", raw=b"\n")
    with pytest.raises(InputError, match="holds no items") as error:
        load_summeval(data_dir=data)
    assert "summeval.jsonl" in str(error.value)


def test_report_on_a_damaged_items_file_names_it(tmp_path):
    out = tmp_path / "run"
    assert _bench(_data(tmp_path / "d"), out).exit_code == 0
    items = out / "items.jsonl"
    lines = items.read_text().splitlines()
    items.write_text("\n".join([lines[0], "[1]", *lines[2:]]) + "\n")
    result = CliRunner().invoke(cli, ["report", str(out), "--no-figures"])
    assert result.exit_code == 2 and "items.jsonl" in result.output and "Traceback" not in result.output, result.output


def test_out_that_is_a_file_is_a_clear_error(tmp_path):
    target = tmp_path / "file.txt"
    target.write_text("keep me")
    result = _bench(_data(tmp_path / "d"), target)
    assert result.exit_code == 2 and "file.txt" in result.output, result.output
    assert target.read_text() == "keep me"


def test_optimize_resume_from_another_starting_point_is_refused(tmp_path):
    from binaryeval_dspy.comparison.harness import _check_or_write_config
    from binaryeval_dspy.errors import RunStateError

    config = {"setup": {"kind": "summeval"}, "lm": "x", "optimizers": ["unoptimized"],
              "starting_point": {"question_set_hash": "aaaa", "instructions_hash": None}}
    _check_or_write_config(tmp_path, config)
    assert _check_or_write_config(tmp_path, dict(config))["lm"] == "x"  # same start: resumes
    other = {**config, "starting_point": {"question_set_hash": "bbbb", "instructions_hash": None}}
    with pytest.raises(RunStateError, match="starting_point"):
        _check_or_write_config(tmp_path, other)
    (tmp_path / "config.json").write_text("{")
    with pytest.raises(RunStateError, match="damaged"):
        _check_or_write_config(tmp_path, config)


def test_lone_surrogate_escape_is_a_located_error_before_anything_is_written(tmp_path):
    lines = [json.dumps(r) for r in _rows()]
    lines[2] = lines[2].replace('"M0"', '"M\\ud800"')
    data = _data(tmp_path / "d", raw=("\n".join(lines) + "\n").encode())
    result = _bench(data, tmp_path / "run")
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "summeval.jsonl:3:" in text and "system_id" in text and "surrogate" in text
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("target", "line", "message"), [
    ("items.jsonl", '{"item_id": "x", "human": {"coherence": "high"}}', "human.coherence"),
    ("items.jsonl", '{"item_id": "x", "human": {}, "doc_id": {"a": 1}}', "doc_id"),
    ("benchmark.json", '{"benchmark": "summeval"}', "not a valid benchmark run file"),
    ("benchmark.json", '{"benchmark": "summ', "not a valid benchmark run file"),
])
def test_report_on_damaged_run_files_gives_one_located_line(tmp_path, target, line, message):
    out = tmp_path / "run"
    assert _bench(_data(tmp_path / "d"), out).exit_code == 0
    (out / target).write_text(line + "\n")
    result = CliRunner().invoke(cli, ["report", str(out), "--no-figures", "--bootstrap", "10"])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert message in text and "Fix:" in text and "Traceback" not in text, text
    assert "--out at a new directory" not in text


def test_topical_chat_id_with_thousands_of_digits_is_kept_as_text(tmp_path):
    from binaryeval_dspy.data import load_topical_chat
    scores = {"naturalness": 2, "coherence": 3, "engagingness": 1, "groundedness": 1, "understandability": 1,
              "overall": 4}
    row = {"item_id": "9" * 5000, "context_id": "c1", "context": "A: hi", "fact": "Cats purr.",
           "system_id": "Original Ground Truth", "response": "Hello.", "scores": scores}
    file = tmp_path / "tc.jsonl"
    file.write_text(json.dumps(row) + "\n")
    assert load_topical_chat(file)[0].item_id == "tc-" + "9" * 5000


def test_empty_ifbench_file_is_refused(tmp_path):
    from binaryeval_dspy.data.ifbench import load_ifbench
    file = tmp_path / "IFBench_test.jsonl"
    file.write_text("\n")
    with pytest.raises(InputError, match="holds no items"):
        load_ifbench(file)


def test_optimize_into_a_folder_that_is_not_a_comparison_is_refused(tmp_path, monkeypatch):
    def no_lm(*args, **kwargs):
        raise AssertionError("the LM was built before --out was checked")

    monkeypatch.setattr("binaryeval_dspy.cli.optimize_command.build_lm", no_lm)
    out = tmp_path / "mine"
    (out / "bineval").mkdir(parents=True)
    (out / "bineval" / "result.json").write_text("{}")
    result = CliRunner().invoke(cli, ["optimize", "--mode", "human", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "holds no comparison" in " ".join(result.output.split())
    assert sorted(p.name for p in out.iterdir()) == ["bineval"]


def test_rubric_without_the_benchmark_dimensions_is_refused_before_the_lm(tmp_path, monkeypatch):
    tasks = tmp_path / "tasks" / "summeval"
    tasks.mkdir(parents=True)
    shipped = Path(__file__).resolve().parents[2] / "binaryeval_dspy" / "benchmark_data" / "tasks" / "summeval" / "rubric.json"
    rubric = json.loads(shipped.read_text())
    rubric["dimensions"] = {"tone": next(iter(rubric["dimensions"].values()))}
    (tasks / "rubric.json").write_text(json.dumps(rubric))

    def no_lm(*args, **kwargs):
        raise AssertionError("the LM was built before the rubric was checked")

    monkeypatch.setattr("binaryeval_dspy.cli.benchmark_command.build_lm", no_lm)
    result = CliRunner().invoke(cli, ["benchmark", "summeval", "--data-dir", str(_data(tmp_path / "d")), "--out",
                                      str(tmp_path / "run"), "--tasks-dir", str(tmp_path / "tasks"),
                                      "--methods", "geval", "--no-figures"])
    assert result.exit_code == 2, result.output
    assert "the rubric has none of SummEval's dimensions" in " ".join(result.output.split())

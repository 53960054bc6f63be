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

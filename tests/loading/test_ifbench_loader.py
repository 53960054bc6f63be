"""IFBench loader: the real 300-prompt file, the default data directory, located errors."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import dspy
import pytest

from binaryeval_dspy.data import load_ifbench
from binaryeval_dspy.data.paths import DATA_DIR_ENV, default_data_dir
from binaryeval_dspy.errors import InputError
from binaryeval_dspy.ifbench import INSTRUCTION_IDS, check_strict

FIXTURE = Path(__file__).parents[1] / "data" / "ifbench" / "IFBench_test.jsonl.gz"


@pytest.fixture()
def data_dir(tmp_path: Path) -> Path:
    """A data directory holding the real IFBench test file (unpacked from the fixture)."""
    (tmp_path / "ifbench").mkdir()
    (tmp_path / "ifbench" / "IFBench_test.jsonl").write_bytes(gzip.decompress(FIXTURE.read_bytes()))
    return tmp_path


def _line(**overrides) -> str:
    row = {"key": "1", "prompt": "Say hi.", "instruction_id_list": ["count:numbers"],
           "kwargs": [{"N": 2, "word": None}]}
    row.update(overrides)
    return json.dumps({k: v for k, v in row.items() if v is not ...})


def _write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _check_real_file(examples: list[dspy.Example]) -> None:
    assert len(examples) == 300
    assert [ex.key for ex in examples] == [str(n) for n in range(300)]
    ids = Counter(i for ex in examples for i in ex.instruction_id_list)
    assert len(ids) == 58 and set(ids) == set(INSTRUCTION_IDS)
    assert Counter(len(ex.instruction_id_list) for ex in examples) == {1: 256, 2: 44}
    assert all(len(ex.kwargs) == len(ex.instruction_id_list) for ex in examples)
    assert all(value is not None for ex in examples for entry in ex.kwargs for value in entry.values())
    first = examples[0]
    assert set(first.inputs().keys()) == {"prompt"} and first.prompt.startswith("What should the world's smartest")
    assert first.kwargs == [{"keyword1": "kaleidoscope", "keyword2": "nebula", "keyword3": "whisper",
                             "keyword4": "labyrinth", "keyword5": "paradox"}]


def test_loads_the_real_file_from_a_data_dir(data_dir):
    _check_real_file(load_ifbench(data_dir=data_dir))


def test_real_file_shipped_in_the_package(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    _check_real_file(load_ifbench())


def test_examples_feed_the_checkers(data_dir):
    example = load_ifbench(data_dir=data_dir, limit=1)[0]
    response = "kaleidoscope " + "nebula " * 2 + "whisper " * 3 + "labyrinth " * 5 + "paradox " * 7
    result = check_strict(example, response)
    assert result.key == "0" and result.follow_all_instructions


def test_limit_keeps_the_first_prompts(data_dir):
    assert [ex.key for ex in load_ifbench(data_dir=data_dir, limit=3)] == ["0", "1", "2"]
    assert load_ifbench(data_dir=data_dir, limit=0) == []
    with pytest.raises(InputError, match="limit"):
        load_ifbench(data_dir=data_dir, limit=-1)


def test_default_data_dir_prefers_the_environment(monkeypatch, tmp_path, data_dir):
    monkeypatch.setenv(DATA_DIR_ENV, str(data_dir))
    assert default_data_dir() == data_dir
    assert len(load_ifbench(limit=2)) == 2
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(InputError, match="benchmark file not found") as error:
        load_ifbench()
    assert "nowhere" in str(error.value) and DATA_DIR_ENV in str(error.value)


def test_no_folder_beside_the_working_directory_is_searched(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    (tmp_path / "shared" / "data" / "ifbench").mkdir(parents=True)
    (tmp_path / "shared" / "data" / "ifbench" / "IFBench_test.jsonl").write_text(_line() + "\n", encoding="utf-8")
    (tmp_path / "repo").mkdir()
    monkeypatch.chdir(tmp_path / "repo")
    assert default_data_dir() is None
    assert len(load_ifbench()) == 300  # the packaged file, not ../shared/data


def test_missing_data_dir_error_says_where_it_looked(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    with pytest.raises(InputError, match="benchmark file not found in the data folder") as error:
        load_ifbench(data_dir=tmp_path / "absent")
    assert "absent" in str(error.value) and "`data_dir`" in str(error.value)


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="benchmark file not found") as error:
        load_ifbench(tmp_path / "absent.jsonl")
    assert str(error.value).startswith(str(tmp_path / "absent.jsonl"))


@pytest.mark.parametrize(
    ("bad_line", "where", "message"),
    [
        ("{not json", "prompts.jsonl:2:", "not valid JSON"),
        ("[1, 2]", "prompts.jsonl:2:", "expected a JSON object"),
        (_line(key="2", prompt=...), "prompts.jsonl:2: field 'prompt'", "the field is missing"),
        (_line(key="2", kwargs=...), "prompts.jsonl:2: field 'kwargs'", "the field is missing"),
        (_line(key="2", prompt="  "), "prompts.jsonl:2: field 'prompt'", "non-empty prompt"),
        (_line(key="2", instruction_id_list=["count:bogus"]), "prompts.jsonl:2: field 'instruction_id_list'",
         "unknown IFBench instruction id 'count:bogus'"),
        (_line(key="2", kwargs=[{"N": None}]), "prompts.jsonl:2: field 'kwargs'", "needs the arguments ['N']"),
        (_line(key="2", kwargs=[]), "prompts.jsonl:2: field 'kwargs'", "expected a list of 1 argument objects"),
        (_line(key="1"), "prompts.jsonl:2: field 'key'", "already used on line 1"),
    ],
)
def test_bad_lines_raise_located_errors(tmp_path, bad_line, where, message):
    path = _write(tmp_path, _line(), bad_line)
    with pytest.raises(InputError) as error:
        load_ifbench(path)
    text = str(error.value)
    assert text.startswith(str(tmp_path / where)), text
    assert message in text


def test_integer_keys_become_strings_and_blank_lines_are_skipped(tmp_path):
    path = _write(tmp_path, _line(key=7), "", _line(key="8"))
    assert [ex.key for ex in load_ifbench(path)] == ["7", "8"]

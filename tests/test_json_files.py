"""`read_json_file`: the one JSON-file reader, and its located errors (path, line, field, fix)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from binaryeval_dspy.data.json_files import read_json_file
from binaryeval_dspy.errors import InputError
from binaryeval_dspy.meta_eval.benchmark_files import BenchmarkRun
from binaryeval_dspy.runs.run_directory import RunDirectory


class _Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    score: float


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    items: list[_Inner]


def _write(tmp_path: Path, text: str | bytes, name: str = "doc.json") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def test_reads_json_and_a_model_with_or_without_a_bom(tmp_path):
    assert read_json_file(_write(tmp_path, '{"a": [1, 2]}')) == {"a": [1, 2]}
    doc = read_json_file(_write(tmp_path, '\ufeff{"name": "x", "items": [{"score": 1}]}'), _Doc)
    assert isinstance(doc, _Doc) and doc.items[0].score == 1.0


def test_a_syntax_error_names_the_file_line_and_column(tmp_path):
    path = _write(tmp_path, '{\n  "name": "x",\n  "items": [1,,]\n}\n')
    with pytest.raises(InputError) as err:
        read_json_file(path, what="test document", fix="write valid JSON.")
    assert err.value.path == str(path) and err.value.line == 3
    assert "not a valid test document (not valid JSON" in str(err.value) and "column" in str(err.value)
    assert err.value.fix == "write valid JSON."


def test_a_model_error_names_the_field_path(tmp_path):
    path = _write(tmp_path, '{"name": "x", "items": [{"score": 1}, {"score": "high"}]}')
    with pytest.raises(InputError) as err:
        read_json_file(path, _Doc, what="test document")
    assert err.value.field == "items.1.score" and err.value.path == str(path)
    assert str(err.value).startswith(f"{path}: field 'items.1.score': not a valid test document")


def test_non_utf8_text_names_the_line_of_the_first_bad_byte(tmp_path):
    path = _write(tmp_path, b'{\n"name": "caf\xe9"\n}')
    with pytest.raises(InputError, match="not UTF-8") as err:
        read_json_file(path)
    assert err.value.line == 2


def test_a_missing_file_and_absurd_nesting_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="not found"):
        read_json_file(tmp_path / "absent.json", what="run manifest")
    with pytest.raises(InputError, match="cannot be read"):
        read_json_file(_write(tmp_path, "[" * 100_000 + "]" * 100_000))


def test_the_run_manifest_and_the_benchmark_config_errors_are_located(tmp_path):
    run = RunDirectory(tmp_path / "run")
    run.path.mkdir()
    run.manifest_path.write_text('{"schema_version": 1,\n "run_id": }\n', encoding="utf-8")
    with pytest.raises(InputError, match="not a valid run manifest") as err:
        run.read_manifest()
    assert err.value.line == 2 and err.value.path == str(run.manifest_path)
    bench = BenchmarkRun(tmp_path / "bench")
    bench.path.mkdir()
    bench.config_path.write_text('{"benchmark": "summeval"}', encoding="utf-8")
    with pytest.raises(InputError, match="not a valid benchmark run file") as err:
        bench.read_config()
    assert err.value.field == "lm"

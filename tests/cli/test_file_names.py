"""Issue 30: a file name that is not valid UTF-8 is refused before anything is written, never a traceback.

The name is a Latin-1 ``café`` (the byte 0xE9), as an old archive holds it: Python sees it as
``caf\\udce9``, which no UTF-8 manifest, report or page can hold. Every command is given one in
a path it takes (a real file or run folder of that name, so the refusal is about the name,
not a missing file); the message shows it with the replacement character. Scripted LMs only.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import LAZY_COMMANDS, cli
from binaryeval_dspy.errors import InputError
from binaryeval_dspy.runs.items_file import items_file_identity
from binaryeval_dspy.schemas.run_manifest import RunManifest
from tests.reports.test_view_truth import OUTPUTS, QS, evaluate

CAFE = os.fsdecode(b"caf\xe9")  # 'caf\udce9'
SHOWN = "caf\ufffd"


def _files(folder: Path) -> set[str]:
    return {os.fsdecode(os.fsencode(p)) for p in folder.rglob("*")}


@pytest.fixture
def inputs(tmp_path, cli_scripted_lms):
    """A run (evaluated from UTF-8 names), its question set, and copies under Latin-1 names."""
    run = evaluate(tmp_path, cli_scripted_lms, "run", QS, OUTPUTS)
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copy(tmp_path / "run-items.jsonl", bad / f"{CAFE}.jsonl")
    shutil.copy(tmp_path / "run-qs.json", bad / f"{CAFE}.json")
    shutil.copytree(run, bad / f"{CAFE}-run")
    return {"run": run, "qs": tmp_path / "run-qs.json", "items": tmp_path / "run-items.jsonl", "bad": bad,
            "out": tmp_path / "out"}


def _cases(i) -> dict[str, list[str]]:
    bad = i["bad"]
    return {
        "evaluate items": ["evaluate", str(i["qs"]), str(bad / f"{CAFE}.jsonl"), "--id-field", "id", "--out",
                           str(i["out"])],
        "evaluate question set": ["evaluate", str(bad / f"{CAFE}.json"), str(i["items"]), "--out", str(i["out"])],
        "evaluate --out": ["evaluate", str(i["qs"]), str(i["items"]), "--id-field", "id", "--out",
                           str(bad / f"{CAFE}-new")],
        "view": ["view", str(bad / f"{CAFE}-run")],
        "view --out": ["view", str(i["run"]), "--out", str(bad / f"{CAFE}.html")],
        "agreement": ["agreement", "summeval", "--predictions", f"mine={bad / (CAFE + '.jsonl')}", "--out",
                      str(i["out"])],
        "rejudge": ["rejudge", str(bad / f"{CAFE}-run"), str(i["items"]), "--out", str(i["out"])],
        "questions": ["questions", str(bad / f"{CAFE}.json"), "--out", str(i["out"] / "qs.json")],
        "benchmark": ["benchmark", "summeval", "--data-dir", str(bad), "--out", str(bad / f"{CAFE}-bench")],
        "benchmark-questions": ["benchmark-questions", "summeval", "--tasks-dir", str(bad / CAFE)],
        "report": ["report", str(bad / f"{CAFE}-run")],
        "optimize": ["optimize", "--questions", str(bad / f"{CAFE}.json"), "--out", str(i["out"])],
        "batch": ["batch", "status", str(bad / f"{CAFE}-run")],
        "verdicts": ["verdicts", str(bad / f"{CAFE}-run"), "--out", str(i["out"] / "verdicts.jsonl")],
        "verdicts --out": ["verdicts", str(i["run"]), "--out", str(bad / f"{CAFE}.jsonl.gz")],
        "serve --log": ["serve", "--log", str(bad / f"{CAFE}.log"), "--port", "0"],
    }


def test_every_command_is_covered():
    assert {name.split()[0] for name in _cases({"run": Path(), "qs": Path(), "items": Path(), "bad": Path(),
                                               "out": Path()})} == set(LAZY_COMMANDS)


@pytest.mark.parametrize("case", list(_cases({"run": Path(), "qs": Path(), "items": Path(), "bad": Path(),
                                              "out": Path()})))
def test_a_name_that_is_not_utf8_is_refused_before_anything_is_written(inputs, case, tmp_path):
    before = _files(tmp_path)
    result = CliRunner().invoke(cli, _cases(inputs)[case])
    assert result.exit_code == 2, (result.output, result.exception)
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), result.exception
    said = " ".join(result.output.split())
    assert "not valid UTF-8" in said and SHOWN in said and "rename" in said, said
    assert _files(tmp_path) == before  # no run folder, no .lock, no page


def test_an_environment_variable_that_is_not_utf8_is_refused(inputs, monkeypatch, tmp_path):
    monkeypatch.setenv("BINEVAL_EVALUATE_OUT", str(inputs["bad"] / f"{CAFE}-env"))
    before = _files(tmp_path)
    result = CliRunner().invoke(cli, ["evaluate", str(inputs["qs"]), str(inputs["items"]), "--id-field", "id"])
    assert result.exit_code == 2 and "BINEVAL_EVALUATE_OUT is not valid UTF-8" in " ".join(result.output.split())
    assert _files(tmp_path) == before


def test_a_utf8_name_reached_through_a_folder_that_is_not_is_refused_before_the_run_starts(inputs, monkeypatch,
                                                                                          tmp_path):
    folder = tmp_path / CAFE
    folder.mkdir()
    shutil.copy(inputs["items"], folder / "items.jsonl")
    with pytest.raises(InputError, match="not valid UTF-8") as refused:
        items_file_identity(folder / "items.jsonl")
    assert SHOWN in str(refused.value) and "\udce9" not in str(refused.value)
    monkeypatch.chdir(folder)  # every argument is UTF-8; the folder they resolve in is not
    result = CliRunner().invoke(cli, ["evaluate", str(inputs["qs"]), "items.jsonl", "--id-field", "id", "--out",
                                      str(tmp_path / "fresh")])
    assert result.exit_code == 2 and "not valid UTF-8" in " ".join(result.output.split()), result.output
    assert not (tmp_path / "fresh").exists()


def test_a_manifest_cannot_be_made_with_a_name_that_is_not_utf8():
    with pytest.raises(ValueError, match=f"items_path is not valid UTF-8 \\('{SHOWN}.jsonl'\\)"):
        RunManifest(command="evaluate", lm="x", question_set_hash="h", question_set_path="qs.json",
                    items_path=f"{CAFE}.jsonl")
    with pytest.raises(ValueError, match="config.checks_modules.0.path is not valid UTF-8"):
        RunManifest(command="evaluate", lm="x", question_set_hash="h", question_set_path="qs.json",
                    items_path="items.jsonl", config={"checks_modules": [{"path": f"{CAFE}.py"}]})
    assert json.loads(RunManifest(command="evaluate", lm="x", question_set_hash="h", question_set_path="qs.json",
                                  items_path="café.jsonl").model_dump_json())["items_path"] == "café.jsonl"

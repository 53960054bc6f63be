"""The pytest plugin (`binaryeval_dspy.pytest_plugin`), run inside pytest's own `pytester`.

The judge is a scripted LM set by a ``pytest_bineval_lm`` hook in the inner session's
``conftest.py`` (plumbing only, never a model's judgment): it answers "no" to the
numbers question when the summary says "3 goals", and an unreadable reply to the
grammar question when the summary says "garbled".
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import subprocess
import sys
from pathlib import Path

import litellm  # noqa: F401 - see below
import numpy  # noqa: F401 - the same: numpy cannot be imported a second time in one process
import pytest

from binaryeval_dspy.reports.run_view import view_data

# pytester's in-process runs drop the modules first imported inside them; litellm imported
# there for the first time leaves importlib.metadata finding no installed package at all
# afterwards (pytest's own header then fails), so it is imported here, by the outer session.

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]


def plugin_args() -> list[str]:
    """``-p binaryeval_dspy.pytest_plugin`` unless the installed package's entry point loads it already."""
    installed = any(ep.value == "binaryeval_dspy.pytest_plugin"
                    for ep in importlib.metadata.entry_points(group="pytest11"))
    return [] if installed else ["-p", "binaryeval_dspy.pytest_plugin"]


CONFTEST = '''
from pathlib import Path

import dspy

from binaryeval_dspy.lm.factory import LMHandle
from tests.fakes import ScriptedEngine, field_value

CALLS = Path(__file__).with_name("calls.txt")


def script(system, user):
    with CALLS.open("a") as handle:
        handle.write("call\\n")
    question, output = field_value(user, "question"), field_value(user, "output")
    if "numbers" in question and "3 goals" in output:
        return {"explanation": "The summary says 3 goals; the article says 2.", "verdict": "no"}
    if "grammatical" in question and "garbled" in output:
        return "hmm hmm"
    return {"explanation": "It does.", "verdict": "yes"}


def pytest_bineval_lm(config):
    engine = ScriptedEngine(script)
    engine.cache_identity = "scripted-pytest-plugin-MODEL"  # so DSPy's cache serves it across sessions
    lm = dspy.LM("custom/scripted-pytest-plugin-MODEL", engine=engine, cache=True, temperature=0.0)
    return LMHandle(lm=lm, adapter=dspy.JSONAdapter(), name="scripted judge (tests)", embedded=False)
'''

QUESTIONS = {"task_prompt": "Summarize the match report.", "dimensions": ["consistency", "fluency"],
             "questions": [{"id": "consistency-01", "dimension": "consistency", "text": "Are the numbers right?"},
                           {"id": "consistency-02", "dimension": "consistency", "text": "Is every name right?"},
                           {"id": "fluency-01", "dimension": "fluency", "text": "Is it grammatical?"}]}

TESTS = '''
from binaryeval_dspy.pytest_plugin import assert_bineval

ARTICLE = "Spurs drew 2-2 with Burnley; Kane scored twice."


def test_good_summary():
    check = assert_bineval("Spurs and Burnley drew 2-2.", questions="questions.json", input=ARTICLE)
    assert check.score == 1.0


def test_wrong_numbers(bineval_judge):
    bineval_judge("Spurs won by 3 goals.", questions="questions.json", input=ARTICLE, min_score=0.8)


def test_garbled_summary_fails_even_at_min_score_zero():
    assert_bineval("garbled words", questions="questions.json", input=ARTICLE, min_score=0.0)
'''


@pytest.fixture
def inner(pytester: pytest.Pytester, request):
    """An inner test session's folder: conftest with the scripted judge, questions, tests."""
    model = request.node.name.replace("_", "-")
    pytester.makeconftest(CONFTEST.replace("MODEL", model))
    (pytester.path / "questions.json").write_text(json.dumps(QUESTIONS), encoding="utf-8")
    pytester.makepyfile(test_summaries=TESTS)
    pytester.syspathinsert(ROOT)  # tests.fakes for the conftest
    return pytester


def test_passing_failing_and_unreadable_answers(inner: pytest.Pytester):
    result = inner.runpytest(*plugin_args(), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2)
    text = result.stdout.str()
    assert 'Questions answered "no":' in text
    assert "consistency-01: Are the numbers right?" in text
    assert "because: The summary says 3 goals; the article says 2." in text
    assert "score 0.67 < min_score 0.80" in text
    # an unreadable answer fails with its own message, whatever the score
    assert "1 of 3 answers could not be read as yes or no, e.g. fluency-01: 'hmm hmm'" in text
    runs = inner.path / ".bineval" / "pytest"
    stored = runs / "test_summaries.py__test_wrong_numbers" / "run"
    assert f"bineval view {stored}" in text
    data = view_data(stored)  # `bineval view` reads the stored run, texts included
    item = data["run"]["items"][0]
    assert item["output"] == "Spurs won by 3 goals." and item["counts"]["no"] == 1
    assert (runs / "test_summaries.py__test_good_summary" / "run" / "summary.json").is_file()


def test_a_rerun_is_answered_from_dspys_cache_unless_turned_off(inner: pytest.Pytester):
    calls = inner.path / "calls.txt"
    inner.runpytest(*plugin_args(), "-p", "no:cacheprovider", "-k", "good").assert_outcomes(passed=1)
    assert len(calls.read_text().splitlines()) == 3
    inner.runpytest(*plugin_args(), "-p", "no:cacheprovider", "-k", "good").assert_outcomes(passed=1)
    assert len(calls.read_text().splitlines()) == 3  # nothing asked again
    inner.runpytest(*plugin_args(), "-p", "no:cacheprovider", "-k", "good",
                    "--bineval-no-cache").assert_outcomes(passed=1)
    assert len(calls.read_text().splitlines()) == 6


def test_the_command_line_lm_wins_over_the_conftest_hook(inner: pytest.Pytester):
    result = inner.runpytest(*plugin_args(), "-p", "no:cacheprovider", "-k", "good",
                             "--bineval-lm", "not a model id")
    result.assert_outcomes(failed=1)
    assert "not a model id" in result.stdout.str()
    assert not (inner.path / "calls.txt").exists()


def test_loading_the_plugin_imports_no_dspy():
    code = "import binaryeval_dspy.pytest_plugin, sys; print('dspy' in sys.modules, 'litellm' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


# ------------------------------------------------------------------ issue 30: switching off, the LM, a failed start

DOCS_CONFTEST = '''
def pytest_bineval_lm(config):
    return "openai/gpt-4o-mini"
'''


def test_the_plugin_switches_off_with_the_documented_conftest_hook(pytester: pytest.Pytester):
    """docs/pytest.md's hook, word for word, and ``-p no:bineval``: the session runs (no
    "unknown hook" internal error) and the plugin is off (its options are gone)."""
    documented = (ROOT / "docs" / "pytest.md").read_text(encoding="utf-8")
    assert DOCS_CONFTEST.strip() in documented  # the form the docs show
    pytester.makeconftest(DOCS_CONFTEST)
    pytester.makepyfile(test_plain="def test_plain():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_subprocess("-p", "no:bineval", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1)
    off = pytester.runpytest_subprocess("-p", "no:bineval", "-p", "no:cacheprovider", "--bineval-lm", "local")
    assert off.ret == pytest.ExitCode.USAGE_ERROR and "unrecognized arguments: --bineval-lm" in off.stderr.str()


def test_a_base_url_takes_its_model_from_the_plugins_own_option(inner: pytest.Pytester, fake_endpoint, monkeypatch):
    fake_endpoint.reply = lambda body: {"explanation": "It does.", "verdict": "yes"}
    missing = inner.runpytest(*plugin_args(), "-p", "no:cacheprovider", "-k", "good", "--bineval-lm",
                              fake_endpoint.base_url)
    missing.assert_outcomes(failed=1)
    said = "\n".join(line for line in missing.outlines if line.startswith("E "))  # the error pytest shows
    assert "--bineval-lm-model (or $BINEVAL_LM_MODEL) NAME" in said, said  # an option pytest has ...
    assert "--lm-model" not in said and "`model`" not in said, said  # ... never bineval's, or a parameter name
    assert not (inner.path / ".bineval" / "pytest" / "test_summaries.py__test_good_summary").exists()
    given = inner.runpytest(*plugin_args(), "-p", "no:cacheprovider", "-k", "good", "--bineval-lm",
                            fake_endpoint.base_url, "--bineval-lm-model", fake_endpoint.model)
    given.assert_outcomes(passed=1)
    assert len(fake_endpoint.requests) == 3 and not (inner.path / "calls.txt").exists()  # the URL, not the hook
    monkeypatch.setenv("BINEVAL_LM", fake_endpoint.base_url)
    monkeypatch.setenv("BINEVAL_LM_MODEL", fake_endpoint.model)
    by_env = inner.runpytest(*plugin_args(), "-p", "no:cacheprovider", "-k", "good", "--bineval-no-cache")
    by_env.assert_outcomes(passed=1)
    assert len(fake_endpoint.requests) == 6


def test_a_session_whose_lm_cannot_be_built_leaves_nothing_in_the_way(inner: pytest.Pytester):
    stored = inner.path / ".bineval" / "pytest" / "test_summaries.py__test_good_summary"
    failed = inner.runpytest(*plugin_args(), "-p", "no:cacheprovider", "-k", "good", "--bineval-lm",
                             "http://127.0.0.1:9/v1")
    failed.assert_outcomes(failed=1)
    assert not stored.exists()
    again = inner.runpytest(*plugin_args(), "-p", "no:cacheprovider", "-k", "good")
    again.assert_outcomes(passed=1)  # the conftest's judge: no usage error about a half-made run
    # a session interrupted after it made the folder (marked as the plugin's) is replaced too
    shutil.rmtree(stored / "run")
    assert stored.is_dir() and any(stored.iterdir())
    inner.runpytest(*plugin_args(), "-p", "no:cacheprovider", "-k", "good").assert_outcomes(passed=1)
    assert (stored / "run" / "manifest.json").is_file()
    # a folder the plugin did not make is still never deleted
    shutil.rmtree(stored)
    stored.mkdir()
    (stored / "notes.txt").write_text("mine")
    refused = inner.runpytest(*plugin_args(), "-p", "no:cacheprovider", "-k", "good")
    assert (stored / "notes.txt").read_text() == "mine" and "not a stored BinEval test run" in refused.stdout.str()


# ------------------------------------------------------------------ breaker: folders, the hook's value, providers

def test_a_folder_not_marked_as_the_plugins_is_refused_and_nothing_deleted(inner: pytest.Pytester):
    stored = inner.path / ".bineval" / "pytest" / "test_summaries.py__test_good_summary"
    (stored / "run").mkdir(parents=True)
    (stored / "run" / "manifest.json").write_text("{}")  # not a run's manifest
    (stored / "mine.txt").write_text("mine")
    refused = inner.runpytest(*plugin_args(), "-p", "no:cacheprovider", "-k", "good")
    refused.assert_outcomes(failed=1)
    assert (stored / "mine.txt").read_text() == "mine" and (stored / "run" / "manifest.json").read_text() == "{}"
    assert f"{stored} holds files that are not a stored BinEval test run" in refused.stdout.str()
    # a real stored run whose mark was removed, with a user's file beside it: refused as well
    shutil.rmtree(stored)
    inner.runpytest(*plugin_args(), "-p", "no:cacheprovider", "-k", "good").assert_outcomes(passed=1)
    (stored / ".bineval-pytest-run").unlink()
    (stored / "mine.txt").write_text("mine")
    inner.runpytest(*plugin_args(), "-p", "no:cacheprovider", "-k", "good").assert_outcomes(failed=1)
    assert (stored / "mine.txt").read_text() == "mine" and (stored / "run" / "manifest.json").is_file()
    # without the user's file, a real (unmarked) stored run is the plugin's to replace
    (stored / "mine.txt").unlink()
    inner.runpytest(*plugin_args(), "-p", "no:cacheprovider", "-k", "good").assert_outcomes(passed=1)


PARAMETRIZED = '''
import pytest
from binaryeval_dspy.pytest_plugin import assert_bineval

@pytest.mark.parametrize("name", ["a/b", "a-b"])
def test_p(name):
    assert_bineval("Spurs and Burnley drew 2-2 " + name, questions="questions.json", input="x")
'''


def test_parametrized_ids_that_sanitize_alike_get_folders_of_their_own(inner: pytest.Pytester):
    from binaryeval_dspy.pytest_plugin import run_folder_name

    names = {run_folder_name(f"test_x.py::test_p[{p}]") for p in ("a/b", "a-b", "a b")}
    assert len(names) == 3 and run_folder_name("test_x.py::test_p[a/b]") == run_folder_name("test_x.py::test_p[a/b]")
    assert run_folder_name("t.py::C::test_a") != run_folder_name("t.py::C__test_a")
    assert run_folder_name("test_summaries.py::test_good") == "test_summaries.py__test_good"  # the docs' form
    inner.makepyfile(test_param=PARAMETRIZED)
    inner.runpytest(*plugin_args(), "-p", "no:cacheprovider", "test_param.py").assert_outcomes(passed=2)
    runs = inner.path / ".bineval" / "pytest"
    folders = {p.name: json.loads((p / "items.jsonl").read_text())["output"] for p in runs.iterdir()}
    assert len(folders) == 2 and sorted(folders.values()) == ["Spurs and Burnley drew 2-2 a-b",
                                                             "Spurs and Burnley drew 2-2 a/b"]
    alone = inner.runpytest(*plugin_args(), "-p", "no:cacheprovider", "test_param.py", "-k", "a-b")
    alone.assert_outcomes(passed=1)
    again = {p.name: json.loads((p / "items.jsonl").read_text())["output"] for p in runs.iterdir()}
    assert again == folders  # running one alone keeps the other's run


def test_a_file_where_the_run_folder_goes_is_a_clear_usage_error(inner: pytest.Pytester):
    runs = inner.path / ".bineval" / "pytest"
    runs.mkdir(parents=True)
    (runs / "test_summaries.py__test_good_summary").write_text("a file")
    result = inner.runpytest(*plugin_args(), "-p", "no:cacheprovider", "-k", "good")
    result.assert_outcomes(failed=1)
    assert "is not a folder" in result.stdout.str() and "NotADirectoryError" not in result.stdout.str()
    assert (runs / "test_summaries.py__test_good_summary").read_text() == "a file"


def test_a_bad_value_from_the_hook_is_blamed_on_the_hook(pytester: pytest.Pytester):
    pytester.makeconftest("def pytest_bineval_lm(config):\n    return 42\n")
    (pytester.path / "questions.json").write_text(json.dumps(QUESTIONS), encoding="utf-8")
    pytester.makepyfile(test_summaries=TESTS)
    result = pytester.runpytest(*plugin_args(), "-p", "no:cacheprovider", "-k", "good")
    result.assert_outcomes(failed=1)
    said = "\n".join(line for line in result.outlines if line.startswith("E "))
    assert "pytest_bineval_lm hook" in said and "42 (int)" in said, said
    assert "--bineval-lm" not in said and "BINEVAL_LM" not in said, said
    assert not (pytester.path / ".bineval").exists()


def test_an_unknown_provider_fails_before_anything_is_on_disk(inner: pytest.Pytester):
    result = inner.runpytest(*plugin_args(), "-p", "no:cacheprovider", "-k", "good", "--bineval-lm",
                             "notaprovider/xyz")
    result.assert_outcomes(failed=1)
    assert "LiteLLM knows no provider 'notaprovider'" in result.stdout.str()
    assert not (inner.path / ".bineval").exists()

"""Issue 25: time that stays honest, progress for every long command, reports that say what ran.

A moving ETA with a revised estimate when it drifts; one hint when LM calls are several
times slower than the model and machine should give (oversubscribed cores or a slow
endpoint); a llama.cpp thread default from the load average, recorded in the manifest;
the embedded model closed deterministically; `bineval questions` in countable steps with
a forecast on the embedded model; a ROUGE-only benchmark that names no LM. Every LM
here is scripted; nothing is a model's judgment.
"""

from __future__ import annotations

import json

import dspy
import pytest
from click.testing import CliRunner
from rich.console import Console

from binaryeval_dspy.cli import common, run_speed
from binaryeval_dspy.cli.item_progress import ItemProgress, moving_eta
from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.cli.run_speed import SpeedCheck, questions_forecast
from binaryeval_dspy.lm import llama_engine
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.lm.llama_engine import (
    LlamaCppEngine,
    choose_llama_threads,
    default_llama_threads,
)
from tests.cli.test_first_hour import QUESTIONS, always_yes, evaluate_args, flat, write_items
from tests.fakes import scripted_lm
from tests.method.test_question_provenance import TASK, draft, script_for


def fake_clock():
    now = [1000.0]
    return now, (lambda: now[0])


# ------------------------------------------------------------------ 1. estimates that stay honest


def test_the_eta_is_the_recent_pace_and_grows_while_an_item_runs_long():
    assert moving_eta([8.0, 8.0], 4, 0.0) == pytest.approx(32.0)
    assert moving_eta([8.0, 8.0], 4, 3.0) == pytest.approx(29.0)  # counts down while the item runs
    assert moving_eta([8.0], 4, 20.0) == pytest.approx(72.0)  # overdue: every item taken to be that slow
    assert moving_eta([8.0], 1, 8.0) == pytest.approx(0.0) and moving_eta([8.0], 1, 20.0) == pytest.approx(12.0)
    assert moving_eta([], 4, 5.0) is None and moving_eta([8.0], 0, 5.0) == 0.0


def test_a_run_that_slows_down_prints_a_revised_estimate():
    now, clock = fake_clock()
    console = Console(record=True, width=300)
    with ItemProgress(console, plain=True, every_seconds=0, clock=clock) as progress:
        task = progress.add_task("items", total=20)
        now[0] += 8.0
        progress.update(task, "done")  # first item: 8 s -> about 3 min for 19
        for _ in range(5):  # the machine gets busy: 130 s per item
            now[0] += 130.0
            progress.update(task, "done")
        counter = progress.counters[task]
        assert counter.eta(now[0]) == pytest.approx(14 * 130.0)  # the last 5 items' pace, not the first's
    raw = console.export_text()
    assert "first item took 8.0 s; about 3 min for the remaining 19 items at this rate." in flat(raw)
    revised = [line for line in raw.splitlines() if line.startswith("revised estimate")]
    assert revised and "(was " in revised[0] and "s per item (recent)" in revised[0]
    assert len(revised) < 5  # only when it drifts, not after every item


def test_a_steady_run_prints_no_revision():
    now, clock = fake_clock()
    console = Console(record=True, width=300)
    with ItemProgress(console, plain=True, every_seconds=0, clock=clock) as progress:
        task = progress.add_task("items", total=10)
        for _ in range(10):
            now[0] += 8.0
            progress.update(task, "done")
    assert "revised estimate" not in console.export_text()


@pytest.mark.parametrize(("load", "threads", "expected"), [
    (3.9, 2, ["oversubscribed", "load average 3.9 on 2 cores", "--llama-threads 1"]),
    (3.9, 1, ["other processes hold its cores", "already uses one llama.cpp thread"]),
    (0.4, 2, ["not oversubscribed now"]),
])
def test_slow_embedded_calls_get_a_hint_with_the_likely_cause(monkeypatch, load, threads, expected):
    monkeypatch.setattr(run_speed, "machine_load", lambda: (load, 2))
    check = SpeedCheck(expected=0.7, embedded=True, threads=threads)
    assert check(1.0) is None  # under SLOW_FACTOR times the expected time
    hint = check(7.0)
    assert hint is not None and "7.0 s each, 10x the 0.7 s expected" in hint
    for words in expected:
        assert words in hint
    if threads == 1 or load < 2:
        assert "--llama-threads 1" not in hint


def test_a_slow_endpoint_is_named_as_the_cause():
    hint = SpeedCheck(expected=3.0, embedded=False, in_flight=1)(40.0)
    assert hint is not None and "endpoint is slow" in hint and "1 call in flight" in hint
    assert "--llama-threads" not in hint


def test_with_calls_in_flight_the_hint_allows_for_a_server_that_answers_one_at_a_time():
    """8 calls in flight to a server that answers one request at a time, 5 s each: one call
    finishes every 5 s, so each seems to take 40 s. More concurrency cannot help such a
    server: the hint says so, and never advises raising it as the fix."""
    hint = SpeedCheck(expected=3.0, embedded=False, in_flight=8)(40.0)
    said = " ".join(hint.split())
    assert "one finishes every 5.0 s" in said and "8 calls in flight" in said
    assert "answers one request at a time" in said and "more --concurrency only lengthens the queue" in said
    assert "--concurrency can keep more going" not in said


def test_the_speed_hint_is_printed_once(monkeypatch):
    monkeypatch.setattr(run_speed, "machine_load", lambda: (4.0, 2))
    now, clock = fake_clock()
    console = Console(record=True, width=300)
    check = SpeedCheck(expected=0.7, embedded=True, threads=2)
    with ItemProgress(console, plain=True, every_seconds=0, speed_check=check, clock=clock) as progress:
        task = progress.add_task("items", total=5)
        for _ in range(4):
            now[0] += 12 * 6.0  # 12 calls at 6 s each
            progress.update(task, "done", calls=12)
    text = flat(console.export_text())
    assert text.count("--llama-threads 1") == 1 and "6.0 s each" in text


def test_the_thread_default_leaves_busy_cores_alone(monkeypatch):
    assert default_llama_threads(cores=2, load=0.1).threads == 2
    assert default_llama_threads(cores=2, load=1.0).threads == 1
    busy = default_llama_threads(cores=2, load=5.3)
    assert busy.threads == 1 and "load average was 5.3" in busy.reason and busy.source == "load_average"
    assert default_llama_threads(cores=8, load=3.0).threads == 5
    monkeypatch.delenv("BINEVAL_LLAMA_THREADS", raising=False)
    assert choose_llama_threads(3).source == "n_threads" and choose_llama_threads(3).threads == 3
    monkeypatch.setenv("BINEVAL_LLAMA_THREADS", "1")
    assert choose_llama_threads().source == "BINEVAL_LLAMA_THREADS" and choose_llama_threads().threads == 1


def test_the_manifest_records_the_thread_count_and_why(tmp_path, monkeypatch):
    monkeypatch.delenv("BINEVAL_LLAMA_THREADS", raising=False)
    monkeypatch.setattr(llama_engine.os, "getloadavg", lambda: (7.5, 7.0, 6.0))
    monkeypatch.setattr(llama_engine.os, "cpu_count", lambda: 2)

    def make_lm(spec, **kwargs):  # scripted answers; the engine is made but never loads a model
        lm, _ = scripted_lm(always_yes)
        engine = LlamaCppEngine(tmp_path / "never-loaded.gguf", n_threads=kwargs.get("llama_threads"))
        return LMHandle(lm=lm, adapter=dspy.JSONAdapter(), name="scripted (embedded stand-in)", embedded=True,
                        engine=engine)

    monkeypatch.setattr(common, "make_lm", make_lm)
    qs = QUESTIONS.save(tmp_path / "qs.json")
    result = CliRunner().invoke(cli, evaluate_args(qs, write_items(tmp_path, 1), tmp_path / "run"))
    assert result.exit_code == 0, result.output
    config = json.loads((tmp_path / "run" / "manifest.json").read_text())["config"]
    assert config["llama_threads"] == 1 and config["llama_threads_source"] == "load_average"
    assert "load average was 7.5" in config["llama_threads_reason"]
    assert "1 of 2 cores: the load average was 7.5" in flat(result.output)
    asked = CliRunner().invoke(cli, evaluate_args(qs, write_items(tmp_path, 1), tmp_path / "run2",
                                                  "--llama-threads", "2"))
    assert asked.exit_code == 0, asked.output
    config = json.loads((tmp_path / "run2" / "manifest.json").read_text())["config"]
    assert config["llama_threads"] == 2 and config["llama_threads_source"] == "n_threads"


def test_close_models_frees_every_loaded_model(monkeypatch):
    closed = []

    class Model:
        def __init__(self, name):
            self.name = name

        def close(self):
            closed.append(self.name)

    monkeypatch.setattr(llama_engine, "_MODELS", {("a.gguf", 1): Model("a"), ("b.gguf", 1): Model("b")})
    llama_engine.close_models()
    assert sorted(closed) == ["a", "b"] and llama_engine._MODELS == {}
    llama_engine.close_models()  # nothing left: a second call is harmless
    assert sorted(closed) == ["a", "b"]


# ------------------------------------------------------------------ 2-3. questions: steps and a forecast


def test_questions_reports_countable_steps_and_forecasts_on_the_embedded_model(tmp_path, monkeypatch):
    script = script_for({"Be accurate.": [draft("Is every claim in the article?", "consistency")],
                         "Be fluent.": "not json"})

    def make_lm(spec, **kwargs):
        lm, _ = scripted_lm(script)
        return LMHandle(lm=lm, adapter=dspy.JSONAdapter(), name="scripted (embedded stand-in)", embedded=True)

    monkeypatch.setattr(common, "make_lm", make_lm)
    monkeypatch.setattr(run_speed, "machine_load", lambda: (1.0, 2))
    task = tmp_path / "task.txt"
    task.write_text(TASK, encoding="utf-8")
    result = CliRunner().invoke(cli, ["questions", str(task), "--out", str(tmp_path / "qs.json"),
                                      "--dimensions", "consistency,fluency", "--max-requirements", "4"])
    assert result.exit_code == 0, result.output
    said = flat(result.output)
    assert "On the embedded model this takes roughly" in said and "up to 5 LM calls" in said  # 1 requirement list + 4 requirements
    assert "the set will hold few questions or none" in said and "--lm" in said
    assert "requirements: 1/1 done" in said
    assert "requirements decomposed: 2/2 done" in said and "2 questions kept (1 fallback templates)" in said
    assert said.index("On the embedded model") < said.index("requirements: 1/1")


def test_a_forecast_counts_the_calls_and_the_load(monkeypatch):
    monkeypatch.setattr(run_speed, "machine_load", lambda: (0.0, 2))
    idle = questions_forecast(calls=10, threads=2)
    monkeypatch.setattr(run_speed, "machine_load", lambda: (6.0, 2))
    busy = questions_forecast(calls=10, threads=1)
    assert "load average 0.0" in idle and "load average 6.0" in busy and idle != busy


# ------------------------------------------------------------------ 7. a ROUGE-only benchmark


def test_a_rouge_only_benchmark_names_no_lm_and_no_price(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["benchmark", "summeval", "--methods", "rouge", "--limit", "4",
                                      "--no-figures", "--bootstrap", "10"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "runs" / "summeval-rouge-no-lm-4-head-s0"  # named for its method, and no LM
    report = (out / "report.md").read_text()
    assert "Every LM-based method" not in report and "No method here uses an LM" in report
    assert "no price for" not in report and "nothing to price" in report
    assert "LM: none (no method here uses an LM)" in report
    cost_row = next(line for line in report.splitlines() if line.startswith("| ROUGE-L | 4 |"))
    per_item, total = (float(cell) for cell in cost_row.strip("| ").split(" | ")[-2:])
    assert total == pytest.approx(per_item * 4, abs=0.02)  # the total is the items' times, in seconds too


def test_the_bineval_command_frees_the_model_when_it_ends(monkeypatch):
    from binaryeval_dspy.cli import error_handling
    from binaryeval_dspy.cli import main as main_module

    closed = []
    # main() marks the process as the command's own and takes SIGTERM; undo both after the test
    monkeypatch.setattr(error_handling, "OWNS_PROCESS", False)
    monkeypatch.setattr(main_module.signal, "signal", lambda *args: None)

    class Model:
        def close(self):
            closed.append(True)

    monkeypatch.setattr(llama_engine, "_MODELS", {("m.gguf", 1): Model()})
    monkeypatch.setattr(main_module.sys, "argv", ["bineval", "--version"])
    with pytest.raises(SystemExit):
        main_module.main()
    assert closed == [True] and llama_engine._MODELS == {}


def test_pytest_prints_why_tests_are_skipped():
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    settings = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert "-rs" in settings["tool"]["pytest"]["ini_options"]["addopts"].split()


def test_a_first_item_that_drags_on_gets_the_hint_before_it_ends(monkeypatch):
    monkeypatch.setattr(run_speed, "machine_load", lambda: (4.0, 2))
    now, clock = fake_clock()
    console = Console(record=True, width=300)
    check = SpeedCheck(expected=0.7, embedded=True, threads=2)
    with ItemProgress(console, plain=True, every_seconds=0, speed_check=check, clock=clock) as progress:
        progress.add_task("items", total=2, calls_each=12)
        now[0] += 20.0  # 12 calls should take about 8 s
        progress.check_speed()
        assert "--llama-threads" not in console.export_text(clear=False)  # 20 / 12 s per call: not 4x yet
        now[0] += 100.0  # 120 s and the item is still running: at least 10 s per call
        progress.check_speed()
        progress.check_speed()
    text = flat(console.export_text())
    assert text.count("--llama-threads 1") == 1 and "10.0 s each" in text

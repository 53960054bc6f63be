"""One Ctrl-C stops the whole test suite, even while a test runs a `bineval` command in-process.

A child pytest runs two tests: the first runs ``bineval evaluate`` in-process (click's
``CliRunner``) on a slow scripted LM and receives a real SIGINT half-way; the second
only leaves a mark that it ran. With the suite's Ctrl-C hooks (tests/ctrl_c.py, loaded by
tests/conftest.py) the session stops at the first test; without them the command's own
interrupt handling turns the Ctrl-C into exit status 130, the first test fails on it and
pytest goes on with the second: the behaviour the hooks fix.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

INNER = '''
import json
import os
import signal
import threading
import time
from pathlib import Path

import dspy
from click.testing import CliRunner

from binaryeval_dspy.cli import common
from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.lm.factory import LMHandle
from tests.fakes import scripted_lm

MARK = Path(__file__).with_name("second-test-ran")


def test_evaluate_gets_a_real_ctrl_c(tmp_path, monkeypatch):
    started = []

    def slow(system, user):  # Ctrl-C comes once the command judges (not during its imports, on a busy machine)
        if not started:
            started.append(True)
            threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        time.sleep(0.2)
        return {"explanation": "scripted", "verdict": "yes"}

    lm, _ = scripted_lm(slow)
    handle = LMHandle(lm=lm, adapter=dspy.JSONAdapter(), name="scripted (ctrl-c test)", embedded=False)
    monkeypatch.setattr(common, "make_lm", lambda spec, **kwargs: handle)
    questions = {"task_prompt": "t", "dimensions": ["d"],
                 "questions": [{"id": f"d-0{i}", "dimension": "d", "text": f"Is point {i} right?"} for i in (1, 2)]}
    (tmp_path / "q.json").write_text(json.dumps(questions))
    (tmp_path / "items.jsonl").write_text("".join(json.dumps({"input": f"x {i}", "output": f"y {i}"}) + "\\n"
                                                  for i in range(60)))
    result = CliRunner().invoke(cli, ["evaluate", str(tmp_path / "q.json"), str(tmp_path / "items.jsonl"),
                                      "--out", str(tmp_path / "run"), "--concurrency", "{concurrency}"])
    print("exit status", result.exit_code, result.output[-300:])
    assert result.exit_code == 0


def test_second():
    MARK.write_text("ran")
'''


def run_child(tmp_path: Path, *, hooks: bool, concurrency: int) -> tuple[subprocess.CompletedProcess, bool]:
    test_file = tmp_path / "test_inner.py"
    test_file.write_text(INNER.replace("{concurrency}", str(concurrency)), encoding="utf-8")
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)]
    if hooks:
        args[3:3] = ["-p", "tests.ctrl_c"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(args, check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    return done, (tmp_path / "second-test-ran").exists()


def test_one_ctrl_c_stops_the_session(tmp_path):
    done, second_ran = run_child(tmp_path, hooks=True, concurrency=4)
    output = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "KeyboardInterrupt" in output, output
    assert not second_ran, output
    assert " failed" not in output.splitlines()[-1], output  # interrupted, not reported as a failure


def test_without_the_hooks_the_command_swallows_ctrl_c(tmp_path):
    done, second_ran = run_child(tmp_path, hooks=False, concurrency=4)
    output = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, output
    assert "exit status 130" in output, output  # the command's own Ctrl-C handling: Interrupted, 130
    assert second_ran, output  # and pytest went on


def test_a_command_run_from_python_never_ends_its_callers_process(monkeypatch):
    """After Ctrl-C with LM calls still in flight, only the `bineval` script itself ends its
    process without waiting for them (`OWNS_PROCESS`); a command run from Python (CliRunner
    in these tests, a notebook) raises SystemExit and leaves its caller's process alone."""
    import threading
    import time

    from binaryeval_dspy.cli import error_handling

    ended: list[int] = []
    monkeypatch.setattr(error_handling.os, "_exit", ended.append)
    release = threading.Event()
    busy = threading.Thread(target=release.wait, name="bineval-call-test", daemon=True)
    busy.start()
    try:
        with pytest.raises(SystemExit):
            error_handling.leave_after_interrupt(130, grace_seconds=0.05)
        time.sleep(0.3)
        assert ended == []
        monkeypatch.setattr(error_handling, "OWNS_PROCESS", True)  # as `bineval` (cli.main.main) sets it
        with pytest.raises(SystemExit):
            error_handling.leave_after_interrupt(130, grace_seconds=0.05)
        time.sleep(0.3)
        assert ended == [130]
    finally:
        release.set()

"""`bineval serve`: the embedded model behind llama-cpp-python's OpenAI-compatible server.

The `server` test starts the real command in a child process on a free port, reads the
``--lm ... --lm-model ...`` it prints, asks ``/v1/models``, sends Ctrl-C (SIGINT) and
checks that the command exits 0 and leaves no server process behind. The other tests
need no server: the command line it runs, the missing extra, a port in use.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.lm import llama_server as served

ROOT = Path(__file__).resolve().parents[2]
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _children(pid: int) -> list[int]:
    """The child processes of `pid` (Linux /proc)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        text = (task / "children").read_text() if (task / "children").exists() else ""
        found += [int(c) for c in text.split()]
    return found


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status  # a zombie has exited


def _read_line(stream, timeout: float) -> str:
    """The next line of a child's pipe, or "" after `timeout` seconds."""
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(stream, selectors.EVENT_READ)
    try:
        return stream.readline() if sel.select(timeout) else ""
    finally:
        sel.close()


def test_the_command_line_is_the_documented_one(tmp_path):
    cmd = served.server_command(tmp_path / "m.gguf", port=8123, n_threads=1)
    assert cmd[:3] == [sys.executable, "-m", "llama_cpp.server"]
    pairs = dict(zip(cmd[3::2], cmd[4::2]))
    assert pairs == {"--model": str(tmp_path / "m.gguf"), "--model_alias": "smollm2", "--host": "127.0.0.1",
                     "--port": "8123", "--n_ctx": "8192", "--n_threads": "1", "--verbose": "True"}


def test_missing_server_extra_is_one_line_naming_it(monkeypatch):
    monkeypatch.setattr(served, "SERVER_MODULES", ("json", "no_such_module_for_bineval"))
    result = CliRunner().invoke(cli, ["serve", "--port", "0"])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "the 'server' extra is not installed (no module 'no_such_module_for_bineval')" in text, text
    assert "pip install 'binaryeval-dspy[server]'" in text, text


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path):
    if served.missing_server_modules():
        pytest.skip("the server extra is not installed")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        log = tmp_path / "server.log"
        result = CliRunner().invoke(cli, ["serve", "--port", str(port), "--log", str(log)])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert f"port {port} on 127.0.0.1 is in use" in text and "pass --port another number, or 0" in text, text
    assert not log.exists()  # nothing was started


@pytest.mark.server
def test_serve_answers_models_prints_the_lm_and_stops_on_ctrl_c(tmp_path):
    if served.missing_server_modules():
        pytest.skip("the server extra is not installed")
    port = served.free_port()
    log = tmp_path / "server.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-m", "binaryeval_dspy.cli.main", "serve", "--port", str(port),
                              "--log", str(log), "--llama-threads", "1"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = _read_line(child.stdout, timeout=150)
        assert line, f"no --lm line; stderr:\n{child.stderr.read() if child.poll() is not None else ''}"
        base_url = f"http://127.0.0.1:{port}/v1"
        assert line.split() == ["--lm", base_url, "--lm-model", "smollm2"], line
        with _DIRECT.open(f"{base_url}/models", timeout=10) as resp:
            models = json.loads(resp.read())
        assert [m["id"] for m in models["data"]] == ["smollm2"], models
        servers = _children(child.pid)
        assert len(servers) == 1 and _alive(servers[0]), servers
        child.send_signal(signal.SIGINT)  # Ctrl-C
        status = child.wait(timeout=30)
        errors = child.stderr.read()
        assert status == 0, errors
        assert "Stopped the server" in errors, errors
        deadline = time.monotonic() + 5
        while _alive(servers[0]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(servers[0]), "the llama_cpp.server process outlived bineval serve"
        assert not served.models_answer(base_url)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()

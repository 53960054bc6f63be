"""Issue 30: a Ray the product starts for itself is locked, and nothing of it outlives its driver.

Each test runs a driver in a process of its own (`ray_session` with 1 CPU, one task run, then
it waits) and looks at it from outside, the way another user of the machine or the network
would: which processes the driver's Ray runs, whether a client without the session's token
can join it (it would run code as the user), whether a token was written under the home
folder, and what is left 10 s after ``kill -9`` of the driver. Linux only (``/proc``); each
starts a local Ray (10-20 s here). No LM is involved.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc (Linux)")]

ROOT = Path(__file__).resolve().parents[2]

DRIVER = r"""
import json, os, sys, time
from pathlib import Path
from binaryeval_dspy.engines.ray_session import ray_session
import ray

def descendants(root):
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found

before = {str(p) for p in Path("/tmp").glob("bineval-ray-*")}
with ray_session(num_cpus=1):
    assert ray.get(ray.remote(lambda: os.getpid()).remote()) > 0
    folders = sorted({str(p) for p in Path("/tmp").glob("bineval-ray-*")} - before)
    print(json.dumps({"pids": descendants(os.getpid()), "folders": folders,
                      "gcs": ray.get_runtime_context().gcs_address,
                      "node_ip": ray.util.get_node_ip_address()}), flush=True)
    time.sleep(600)
"""

#: a client that would run code on the Ray it reaches: it has no token (Ray's own opt-out set)
INTRUDER = r"""
import sys
import ray
ray.init(address=sys.argv[1], log_to_driver=False)
print("CONNECTED", ray.get(ray.remote(lambda: "ran code on it").remote()), flush=True)
"""


def _state(pid: int) -> str | None:
    """The process's state letter (``Z``: a zombie, dead), None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _running(pids) -> list[int]:
    return [pid for pid in pids if _state(pid) not in (None, "Z")]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:80].strip()
    except OSError:
        return "?"


@pytest.fixture
def driver(tmp_path):
    """Start a driver with its own home folder; yields (process, what it printed); kills what is left."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home)}
    env.pop("RAY_AUTH_MODE", None)  # what a user's shell has: nothing
    process = subprocess.Popen([sys.executable, "-c", DRIVER], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    errors: list[str] = []
    threading.Thread(target=lambda: errors.extend(process.stderr), daemon=True).start()
    line = process.stdout.readline()
    if not line:
        process.kill()
        pytest.fail("the driver printed nothing: " + "".join(errors)[-3000:])
    started = json.loads(line)
    started["home"] = home
    yield process, started
    if process.poll() is None:
        process.kill()
    for pid in _running(started["pids"]):  # only what this test started, by pid
        os.kill(pid, signal.SIGKILL)


def _listening(pids: set[int]) -> list[tuple[str, int, str]]:
    """(process name, pid, local address) of every listening TCP socket of `pids` (``ss -ltnp``)."""
    found = []
    for line in subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout.splitlines():
        for name, pid in re.findall(r'\("([^"]+)",pid=(\d+)', line):
            if int(pid) in pids:
                found.append((name, int(pid), line.split()[3]))
    return found


def _http_status(address: str) -> int | str:
    host, port = address.rsplit(":", 1)
    host = "127.0.0.1" if host in ("*", "0.0.0.0", "[::]") else host.strip("[]")
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/api/version", timeout=5) as reply:
            return reply.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError as exc:
        return f"no HTTP answer ({exc})"


def _intrude(address: str) -> str:
    """What a client without the token gets from the Ray at `address`: "CONNECTED ..." or the refusal."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "BINEVAL_RAY"))}
    env["RAY_AUTH_MODE"] = "disabled"
    intruder = subprocess.Popen([sys.executable, "-c", INTRUDER, address], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    seen = []
    deadline = time.monotonic() + 120
    try:
        for line in intruder.stdout:
            seen.append(line)
            if "CONNECTED" in line or "InvalidAuthToken" in line or time.monotonic() > deadline:
                break
    finally:
        intruder.kill()
        intruder.wait()
    return next((line.strip() for line in seen if "CONNECTED" in line or "InvalidAuthToken" in line),
                "".join(seen)[-500:])


def test_a_local_ray_is_locked_and_nothing_of_it_outlives_a_killed_driver(driver):
    process, started = driver
    problems = []
    [folder] = started["folders"]
    sockets = _listening(set(started["pids"]) | {process.pid})
    beyond_loopback = [s for s in sockets if not s[2].startswith(("127.", "[::1]"))]
    print(f"{len(sockets)} listening sockets, {len(beyond_loopback)} beyond loopback:", sockets)
    checked = 0
    for name, _pid, address in sockets:  # Ray's HTTP servers (the agents) refuse a request without the token
        if "RuntimeEnv" in name or "Dashboard" in name:  # ss shows 15 characters of the name
            checked += 1
            status = _http_status(address)
            if status != 401:
                problems.append(f"{name} at {address} answered HTTP {status} without the token")
    assert checked, f"no HTTP agent among {sockets}"
    host, port = started["gcs"].rsplit(":", 1)
    answer = _intrude(f"{started['node_ip']}:{port}")  # from the machine's network address, not loopback
    if "InvalidAuthToken" not in answer:
        problems.append(f"a client without the token joined the Ray: {answer}")
    if (started["home"] / ".ray").exists():
        problems.append(f"a token was written under the home folder: {sorted(started['home'].rglob('*'))}")

    process.send_signal(signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (_running(started["pids"]) or Path(folder).exists()):
        time.sleep(0.5)
    left = _running(started["pids"])
    if left:
        problems.append(f"10 s after kill -9 of the driver, {len(left)} of its processes run: "
                        + "; ".join(f"{pid} {_cmdline(pid)}" for pid in left))
    if Path(folder).exists():
        problems.append(f"10 s after kill -9 of the driver, its temp folder is still there: {folder}")
    assert problems == [], "\n".join(problems)


def test_the_next_run_cleans_up_a_session_whose_driver_and_watchdog_were_killed(driver):
    from binaryeval_dspy.engines.ray_session import clean_up_abandoned_sessions, session_processes

    process, started = driver
    [folder] = started["folders"]
    watchdogs = [pid for pid in started["pids"] if "binaryeval_dspy.engines.ray_session" in _cmdline(pid)]
    assert len(watchdogs) == 1, [(_cmdline(pid)) for pid in started["pids"]]
    assert set(started["pids"]) - set(watchdogs) <= set(session_processes(folder))  # every Ray process is known
    os.kill(watchdogs[0], signal.SIGKILL)  # nothing is left to clean up after the driver ...
    process.send_signal(signal.SIGKILL)
    process.wait()
    time.sleep(2)
    assert _running(started["pids"]) and Path(folder).exists()  # ... so its Ray lives on
    cleaned = clean_up_abandoned_sessions()  # what the next local session does first
    assert Path(folder) in cleaned
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _running(started["pids"]):
        time.sleep(0.2)
    assert _running(started["pids"]) == [] and not Path(folder).exists()

"""The Ray a run uses: one started on this machine for the run (locked and tied to its driver), or one joined.

`ray_session` starts a local Ray for the run, or joins the cluster the user names, and
shuts down what it started. A Ray the product starts for itself:

* keeps Ray's token authentication on, with a fresh random token that lives only in the
  environment of the run's own processes (``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN``):
  nothing is written under the home folder, and a process that reaches one of its ports
  without the token is refused (Ray 2.60's servers listen on every interface and have no
  setting to listen on loopback only, so the token is what keeps the machine's network out);
* is tied to the driver's lifetime: each session has a temp folder of its own, where every
  one of its processes keeps its logs open (`session_processes` finds them by that), and
  a watchdog process (``python -m binaryeval_dspy.engines.ray_session``), started before
  Ray, waits on a pipe from the driver. When the driver ends, however it ends (``kill
  -9`` included: the kernel closes the pipe), the watchdog kills every process of the
  session still running and removes the folder (`clean_up_session`);
* starts cleanly whatever an earlier run left: a session folder whose driver is dead
  (its watchdog killed too) is cleaned up first (`clean_up_abandoned_sessions`).

Joining a cluster (``address``) is the user's choice: that cluster's security is its own
(see docs/engines.md), nothing is killed or removed there.

Finding a session's processes reads ``/proc`` (Linux); elsewhere the watchdog only removes
the folder, and Ray's own shutdown stops what it can.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from binaryeval_dspy.errors import ConfigError
from binaryeval_dspy.extras import require

__all__ = ["IDLE_WORKERS_KEPT", "TEMP_PREFIX", "clean_up_abandoned_sessions", "clean_up_session", "ray_session",
           "session_processes"]

logger = logging.getLogger(__name__)

_FEATURE = "The Ray engine"
#: The name prefix of a local session's temp folder (under ``/tmp``).
TEMP_PREFIX = "bineval-ray-"
#: The file in a session folder naming the driver that owns it (pid and start time).
_OWNER_FILE = "bineval-owner.json"
#: Environment variables `ray_session` sets for Ray's processes (and restores afterwards).
_RAY_ENVIRONMENT = ("RAY_USAGE_STATS_ENABLED", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN")
#: Idle worker processes a local Ray keeps (Ray's default is one per CPU and kills the others
#: after 1 s idle; the transport runs more tasks than CPUs, and re-starting a worker costs
#: 2-15 s of CPU on a busy 2-core machine). 16 covers 256 requests in flight at batch size 16.
IDLE_WORKERS_KEPT = 16
#: Seconds the driver waits for its watchdog's last sweep after a normal shutdown.
_WATCHDOG_WAIT = 15.0


def _short_temp_root() -> str:
    """A temp folder with a short path: Ray's Unix sockets live under it (107-byte limit)."""
    return "/tmp" if os.path.isdir("/tmp") and os.access("/tmp", os.W_OK) else tempfile.gettempdir()


def _object_store_bytes() -> int:
    """10% of this machine's RAM for Ray's object store, between 128 MiB and 2 GiB.

    Replies are small and stream out as they come, so the store never holds much; Ray's
    default (30% of RAM) would only reserve shared memory other processes need.
    """
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        ram = 8 * 2**30
    return int(min(max(ram // 10, 128 * 2**20), 2 * 2**30))


# --------------------------------------------------------------------------- the session's processes


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat``), None if gone or unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]  # field 22 counting from 1: after "pid (comm) state ..."


def _alive(pid: int, start: str | None) -> bool:
    """True while process `pid` runs and (when `start` is known) is the one that started then."""
    if start is not None and Path("/proc").is_dir():
        return _start_time(pid) == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _belongs_to(pid_dir: Path, folder: str) -> bool:
    """True when the process has a file open under `folder`, or names it on its command line."""
    try:
        if folder.encode() in (pid_dir / "cmdline").read_bytes():
            return True
        for fd in (pid_dir / "fd").iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd).startswith(folder):
                    return True
    except OSError:
        return False
    return False


def session_processes(temp_dir: str | Path, *, spare: tuple[int, ...] = ()) -> list[int]:
    """Pids of the processes of the local Ray session in `temp_dir`.

    A process belongs to it when it has a file open under `temp_dir` (every Ray process of
    the session, the GCS server, raylet, agents, monitors and workers, keeps its logs open
    there) or names the folder on its command line. Neither a process's environment (a
    process that renames itself, ``ray::DashboardAgent``, may overwrite its start) nor its
    parent (the driver, gone after ``kill -9``) would do. Processes of other users cannot
    be read and are never listed.

    Args:
        temp_dir: the session's temp folder.
        spare: pids never listed (the driver, the watchdog).

    Returns:
        The pids, ascending; [] where there is no ``/proc``.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    inside = os.fspath(temp_dir).rstrip("/") + "/"
    return sorted(int(entry.name) for entry in proc.iterdir()
                  if entry.name.isdigit() and int(entry.name) not in spare and int(entry.name) != os.getpid()
                  and _belongs_to(entry, inside))


def clean_up_session(temp_dir: str | Path, *, spare: tuple[int, ...] = (), rounds: int = 20) -> int:
    """Kill every process of the session in `temp_dir` (SIGKILL: Ray's GCS server ignores
    SIGTERM, and the session's state is throwaway) and remove the folder.

    Args:
        temp_dir: the session's temp folder (a `TEMP_PREFIX` folder).
        spare: pids never killed (the driver while it still runs, this process).
        rounds: sweeps at most (a raylet may start a worker while the first sweep runs).

    Returns:
        How many processes were killed.
    """
    killed: set[int] = set()
    for _ in range(rounds):
        pids = [pid for pid in session_processes(temp_dir, spare=spare) if _start_time(pid) is not None]
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        time.sleep(0.1)
    shutil.rmtree(temp_dir, ignore_errors=True)
    return len(killed)


def _write_owner(temp_dir: str) -> None:
    owner = {"pid": os.getpid(), "start": _start_time(os.getpid())}
    Path(temp_dir, _OWNER_FILE).write_text(json.dumps(owner) + "\n", encoding="utf-8")


def clean_up_abandoned_sessions(root: str | Path | None = None) -> list[Path]:
    """Clean up the local sessions under `root` whose driver is no longer running.

    A session folder (`TEMP_PREFIX`) whose owner file names a dead driver (or another
    process that reused its pid) had its driver killed and its watchdog too: its
    processes are killed and the folder removed (`clean_up_session`). Folders of running
    drivers, of other users, and without an owner file are left alone.

    Args:
        root: where session folders are made (None: ``/tmp``, as `ray_session`).

    Returns:
        The folders cleaned up.
    """
    cleaned = []
    for folder in sorted(Path(root or _short_temp_root()).glob(f"{TEMP_PREFIX}*")):
        try:
            owner = json.loads((folder / _OWNER_FILE).read_text(encoding="utf-8"))
            pid, start = int(owner["pid"]), owner.get("start")
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not os.access(folder, os.W_OK) or _alive(pid, start):
            continue
        killed = clean_up_session(folder)
        logger.warning("cleaned up a local Ray session left by a driver that died (pid %d): %d process(es) "
                       "stopped, %s removed", pid, killed, folder)
        cleaned.append(folder)
    return cleaned


class _QuietAuthNotice(logging.Filter):
    """Drops Ray's notice that token authentication is on "by default" and how to opt out:
    a Ray started here always has it on, so the notice's advice does not apply."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Token authentication is enabled")


#: Ray's logger of the notice `_QuietAuthNotice` drops
_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"
_TOKEN: list[str] = []


def _session_token() -> str:
    """The token of this process's local Ray sessions: random, made once per process (Ray's
    token loader may keep the first token it read), never written to a file."""
    if not _TOKEN:
        _TOKEN.append(secrets.token_hex(32))
    return _TOKEN[0]


class _Watchdog:
    """The process that outlives the driver long enough to clean up its session.

    Started before Ray, in a session of its own (terminal signals do not reach it), with
    the read end of a pipe whose write end only the driver holds: the pipe closes when the
    driver closes it or dies, and the watchdog then sweeps (`clean_up_session`).
    """

    def __init__(self, temp_dir: str) -> None:
        self.process = subprocess.Popen(  # noqa: S603 - our own module, our own interpreter
            [sys.executable, "-m", __name__, temp_dir, str(os.getpid())], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)

    def finish(self) -> None:
        """Close the pipe (the watchdog sweeps what Ray's shutdown left) and wait for it."""
        with contextlib.suppress(OSError):
            self.process.stdin.close()  # type: ignore[union-attr]
        try:
            self.process.wait(timeout=_WATCHDOG_WAIT)
        except subprocess.TimeoutExpired:
            logger.warning("the Ray session's watchdog (pid %d) did not finish in %.0f s; it goes on in the "
                           "background", self.process.pid, _WATCHDOG_WAIT)


def _watch(temp_dir: str, driver: int) -> None:
    """The watchdog's body: wait until the driver's pipe closes, then clean up the session."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        sys.stdin.buffer.read()  # returns at end of file: the driver closed the pipe, or died
    clean_up_session(temp_dir, spare=(driver,))


# --------------------------------------------------------------------------- the session


@contextmanager
def ray_session(address: str | None = None, *, num_cpus: int | None = None) -> Iterator[None]:
    """Start a local Ray quietly (or join `address`); always shut down what it started.

    A local Ray gets ``num_cpus`` CPUs (default 2), no dashboard, usage statistics off
    (``RAY_USAGE_STATS_ENABLED=0``), token authentication on with a fresh token held only
    in its processes' environment (``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN``; no token
    written under the home folder), a fresh session folder under ``/tmp`` (removed
    afterwards), an object store of 10% of RAM (128 MiB to 2 GiB), up to
    `IDLE_WORKERS_KEPT` idle workers kept warm between tasks, worker logs kept out of the
    driver's output and Ray's own logging at WARNING. Its processes are tied to the
    driver's lifetime by a watchdog (see the module docstring): after the driver dies,
    even by ``kill -9``, none of them and no folder is left; sessions whose driver died
    before are cleaned up first. Starting takes about 10-20 s on a busy 2-core machine,
    stopping about 1.5 s.

    If Ray is already initialized in this process, that session is used and left running.
    Otherwise ``ray.shutdown()`` runs on exit, also after an exception or Ctrl-C, and the
    environment variables set here are restored.

    Args:
        address: None for a local Ray; ``"auto"`` (a cluster started on this machine with
            ``ray start``) or ``"ray://host:10001"`` to join one (its authentication is
            the cluster's: set ``RAY_AUTH_MODE`` / ``RAY_AUTH_TOKEN`` as it requires).
        num_cpus: CPUs of a local Ray (None: 2). Not allowed with ``address``.

    Yields:
        None, inside the session.

    Raises:
        MissingExtraError: the ``ray`` extra is not installed.
        ConfigError: ``num_cpus`` given with ``address``, or not a positive integer.
    """
    _check_session(address, num_cpus)
    ray = require("ray", "ray", _FEATURE)
    if ray.is_initialized():
        yield
        return
    saved = {name: os.environ.get(name) for name in _RAY_ENVIRONMENT}
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    options: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
    temp_dir = None
    watchdog = None
    try:
        if address is None:
            clean_up_abandoned_sessions()
            temp_dir = tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=_short_temp_root())
            _write_owner(temp_dir)
            watchdog = _Watchdog(temp_dir)  # before Ray starts: a driver killed during ray.init leaves nothing
            # Unset, RAY_AUTH_MODE makes ray.init turn token authentication on for the local Ray it
            # starts (and refresh its settings in this process, even with Ray imported already);
            # RAY_AUTH_TOKEN is the token, so none is generated or written under the home folder.
            os.environ.pop("RAY_AUTH_MODE", None)
            os.environ["RAY_AUTH_TOKEN"] = _session_token()
            cpus = num_cpus or 2
            options.update(num_cpus=cpus, include_dashboard=False, _temp_dir=temp_dir,
                           object_store_memory=_object_store_bytes(),
                           _system_config={"num_workers_soft_limit": max(cpus, IDLE_WORKERS_KEPT)})
        else:
            options["address"] = address
        quiet = _QuietAuthNotice()
        logging.getLogger(_AUTH_LOGGER).addFilter(quiet)
        try:
            ray.init(**options)
        finally:
            logging.getLogger(_AUTH_LOGGER).removeFilter(quiet)
        yield
    finally:
        ray.shutdown()  # also after a start interrupted half-way; a no-op when nothing started
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if watchdog is not None:
            watchdog.finish()  # it kills what the shutdown left (Ray's agents outlive it) and removes the folder
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)


def _check_session(address: str | None, num_cpus: Any) -> None:
    if address is not None and num_cpus is not None:
        raise ConfigError("ray_session: num_cpus is for a local Ray, not a joined cluster.",
                          received=f"address={address!r}, num_cpus={num_cpus}",
                          fix="leave num_cpus unset when giving an address")
    if num_cpus is not None and (isinstance(num_cpus, bool) or not isinstance(num_cpus, int) or num_cpus < 1):
        raise ConfigError("ray_session: num_cpus must be an integer >= 1.", expected="an integer >= 1",
                          received=repr(num_cpus))


if __name__ == "__main__":  # the watchdog: python -m binaryeval_dspy.engines.ray_session TEMP_DIR DRIVER_PID
    _watch(sys.argv[1], int(sys.argv[2]))

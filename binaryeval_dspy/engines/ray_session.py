"""Starting (or joining) the Ray the ``ray`` engine runs on, quietly, and always stopping what was started.

Split from the engine (`binaryeval_dspy.engines.ray_engine`) so that how Ray is started, and
what it leaves behind, is one concept in one place.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from binaryeval_dspy.engines.http_client import check_number
from binaryeval_dspy.errors import ConfigError
from binaryeval_dspy.extras import require

__all__ = ["ray_session"]

#: Environment variables `ray_session` sets for Ray's processes (and restores afterwards).
_RAY_ENVIRONMENT = ("RAY_USAGE_STATS_ENABLED", "RAY_AUTH_MODE")
#: Idle worker processes a local Ray keeps (Ray's default is one per CPU and kills the others
#: after 1 s idle; re-starting a worker costs 2-15 s of CPU on a busy 2-core machine).
IDLE_WORKERS_KEPT = 16
_FEATURE = "The Ray engine"


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


@contextmanager
def ray_session(address: str | None = None, *, num_cpus: int | None = None) -> Iterator[None]:
    """Start a local Ray quietly (or join `address`); always shut down what it started.

    A local Ray gets ``num_cpus`` CPUs (default 2), no dashboard, usage statistics off
    (``RAY_USAGE_STATS_ENABLED=0``), token authentication off (``RAY_AUTH_MODE=disabled``,
    unless set already, so no token is written under the home folder), a fresh session
    folder under ``/tmp`` (removed afterwards), an object store of 10% of RAM (128 MiB to
    2 GiB), up to `IDLE_WORKERS_KEPT` idle workers kept warm between tasks, worker logs
    kept out of the driver's output and Ray's own logging at WARNING.
    Starting takes about 10-20 s on a busy 2-core machine, stopping about 1.5 s.

    If Ray is already initialized in this process, that session is used and left running.
    Otherwise ``ray.shutdown()`` runs on exit, also after an exception or Ctrl-C, and the
    environment variables set here are restored.

    Args:
        address: None for a local Ray; ``"auto"`` (a cluster started on this machine with
            ``ray start``) or ``"ray://host:10001"`` to join one.
        num_cpus: CPUs of a local Ray (None: 2). Not allowed with ``address``.

    Yields:
        None, inside the session.

    Raises:
        MissingExtraError: the ``ray`` extra is not installed.
        ConfigError: ``num_cpus`` given with ``address``, or not a positive integer.
    """
    if address is not None and num_cpus is not None:
        raise ConfigError("ray_session: num_cpus is for a local Ray, not a joined cluster.",
                          received=f"address={address!r}, num_cpus={num_cpus}",
                          fix="leave num_cpus unset when giving an address")
    if num_cpus is not None:
        check_number("ray_session num_cpus", num_cpus, minimum=1, integer=True)
    ray = require("ray", "ray", _FEATURE)
    if ray.is_initialized():
        yield
        return
    saved = {name: os.environ.get(name) for name in _RAY_ENVIRONMENT}
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    options: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
    temp_dir = None
    if address is None:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        temp_dir = tempfile.mkdtemp(prefix="bineval-ray-", dir=_short_temp_root())
        cpus = num_cpus or 2
        options.update(num_cpus=cpus, include_dashboard=False, _temp_dir=temp_dir,
                       object_store_memory=_object_store_bytes(),
                       _system_config={"num_workers_soft_limit": max(cpus, IDLE_WORKERS_KEPT)})
    else:
        options["address"] = address
    try:
        ray.init(**options)
        yield
    finally:
        ray.shutdown()  # also after a start interrupted half-way; a no-op when nothing started
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)

"""One Ctrl-C stops the whole test session, even inside a `bineval` command run in-process.

Why it did not: tests run the CLI in-process (click's ``CliRunner.invoke``), and a real
Ctrl-C raises KeyboardInterrupt wherever the main thread is. Inside a command, the run
loop (`runs.evaluation.run_resumable`) and the commands' `friendly_errors` catch it, as
they must for a user (results kept, "Interrupted.", exit status 130), so it leaves the
command as ``SystemExit(130)``, which ``CliRunner`` turns into ``result.exit_code``. The
test then failed on its exit code and pytest went on with the next one.

The fix, here and not in the CLI (the CLI's handling is what a user of ``bineval``
needs): the session counts the SIGINTs that reach the process (a handler that counts,
then raises KeyboardInterrupt as Python's default one does), and after each test phase
(setup, call, teardown) in which one arrived, raises KeyboardInterrupt again, so pytest
stops the session there (its "!!! KeyboardInterrupt !!!" and summary). A test that
*simulates* Ctrl-C by raising KeyboardInterrupt from a scripted LM sends no signal and is
not affected.

tests/conftest.py imports these hooks; ``python -m pytest -p tests.ctrl_c`` loads them
alone (tests/project/test_ctrl_c.py does, to show the difference).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator

import pytest

_received = [0]  # SIGINTs that reached this process since the session started


def _count_and_interrupt(signum: int, frame: object) -> None:
    _received[0] += 1
    signal.default_int_handler(signum, frame)  # raises KeyboardInterrupt, as without this handler


def pytest_configure(config: pytest.Config) -> None:
    """Count SIGINTs from here on (main thread only: where Python delivers signals)."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is \
            signal.default_int_handler:
        signal.signal(signal.SIGINT, _count_and_interrupt)


def _stop_if_interrupted(before: int, phase: str) -> None:
    if _received[0] != before:
        raise KeyboardInterrupt(f"Ctrl-C during a test's {phase}: the session stops (tests/ctrl_c.py)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """Setup (fixtures that run commands, e.g. a module's evaluate run), then stop on a Ctrl-C."""
    before = _received[0]
    try:
        return (yield)
    finally:
        _stop_if_interrupted(before, "setup")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """The test itself, then stop on a Ctrl-C whatever the test made of it."""
    before = _received[0]
    try:
        return (yield)
    finally:
        _stop_if_interrupted(before, "call")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Teardown, then stop on a Ctrl-C."""
    before = _received[0]
    try:
        return (yield)
    finally:
        _stop_if_interrupted(before, "teardown")

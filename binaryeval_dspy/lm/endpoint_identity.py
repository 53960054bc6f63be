"""Endpoint and engine identity: a string naming what answered an LM call.

`CacheScopedLM` (`binaryeval_dspy.lm.cache_identity`) adds this identity to DSPy's cache
key, so answers cached for one server or engine are never served for another; run
manifests and batch journals record it. It is:

* an HTTP endpoint: ``endpoint=<normalized base URL>`` from the call's ``api_base`` /
  ``base_url`` (or the LM's), else from LiteLLM's environment override for the
  provider (``<PROVIDER>_API_BASE`` / ``<PROVIDER>_BASE_URL``, read at call time), else
  ``provider-default=<provider>``;
* a custom engine: ``engine=<module:Class>|<what the engine declares>``. An engine
  declares itself with an attribute (or property, or zero-argument method)
  ``cache_identity`` returning a string or JSON-able data; `LlamaCppEngine` is
  identified by its model file (resolved path, size, modification time) and settings.
  An engine that declares nothing gets a random token of its own, so two such
  engines never share entries (and nothing is reused across processes); a warning
  says so once per engine.

It never contains a credential (user:password in a URL is dropped, a query string is
kept only as a hash, the API key is not used).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import warnings
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from binaryeval_dspy.errors import LMConfigError

if TYPE_CHECKING:
    import dspy

_DEFAULT_PORTS = {"http": 80, "https": 443}
# LiteLLM providers whose base-URL environment variables use another prefix.
_ENV_PREFIX = {"ollama_chat": "OLLAMA", "text-completion-openai": "OPENAI"}


def normalize_base_url(url: str) -> str:
    """A base URL in the form used as cache identity: the same server gives the same string.

    Lower-cases scheme and host, drops a default port (80 for http, 443 for https),
    user:password, the fragment and trailing slashes; a query string (which may hold a
    key or select a deployment) is kept only as a 12-hex-digit hash. Host names are
    not resolved: ``localhost`` and ``127.0.0.1`` stay distinct.

    Args:
        url: an ``http://`` or ``https://`` base URL, e.g. ``http://Host:8000/v1/``.

    Returns:
        e.g. ``http://host:8000/v1``, or ``https://api.example.com/v1?q#3f2a...``.

    Raises:
        LMConfigError: `url` is not an http(s) URL with a host.
    """
    text = str(url).strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise LMConfigError(f"base URL {text!r} is not a valid URL ({exc}).",
                            fix="pass e.g. http://host:8000/v1.") from exc
    scheme = (parts.scheme or "").lower()
    host = (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        raise LMConfigError("bad base URL", expected="an http(s) URL with a host", received=repr(text),
                            fix="pass e.g. http://host:8000/v1.")
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    path = parts.path.rstrip("/")
    out = f"{scheme}://{netloc}{path}"
    if parts.query:
        out += "?q#" + hashlib.sha256(parts.query.encode()).hexdigest()[:12]
    return out


def _safe_base_url(url: Any) -> str:
    """`normalize_base_url`, or a hash for a value that is not an http(s) URL (never raises)."""
    try:
        return normalize_base_url(str(url))
    except LMConfigError:
        return "unparsed#" + hashlib.sha256(str(url).encode()).hexdigest()[:16]


def provider_of(model: str) -> str:
    """The provider prefix of a LiteLLM model id (``anthropic/claude-...`` -> ``anthropic``); a bare name is OpenAI's."""
    return model.split("/", 1)[0] if "/" in model else "openai"


def endpoint_identity(model: str, options: Mapping[str, Any]) -> str:
    """The identity of the HTTP endpoint a LiteLLM/lm15 call goes to.

    Args:
        model: the LM's model id, e.g. ``openai/my-model`` (its prefix names the provider).
        options: the call's options (the LM's kwargs updated with the call's own);
            ``api_base`` / ``base_url`` are read, nothing else.

    Returns:
        ``endpoint=<normalize_base_url(url)>`` when a base URL is set in `options` or
        in the provider's environment variables (``<PROVIDER>_API_BASE`` or
        ``<PROVIDER>_BASE_URL``: ``OPENAI_BASE_URL``, ``HOSTED_VLLM_API_BASE``,
        ``OLLAMA_API_BASE``, ..., read now), else ``provider-default=<provider>``.
    """
    url = options.get("api_base") or options.get("base_url")
    provider = provider_of(model)
    if not url:
        prefix = _ENV_PREFIX.get(provider, provider.upper().replace("-", "_"))
        url = os.environ.get(f"{prefix}_API_BASE") or os.environ.get(f"{prefix}_BASE_URL")
    if url:
        return f"endpoint={_safe_base_url(url)}"
    return f"provider-default={provider}"


_TOKENS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_PINNED: dict[int, tuple[Any, str]] = {}  # engines that cannot be weakly referenced (kept alive: ids never reused)
_TOKENS_LOCK = threading.Lock()


def _object_token(engine: Any) -> str:
    """A random token owned by `engine` for its lifetime (warns once per engine)."""
    with _TOKENS_LOCK:
        try:
            token = _TOKENS.get(engine)
        except TypeError:  # not weakly referenceable or not hashable
            pinned = _PINNED.get(id(engine))
            token = pinned[1] if pinned is not None and pinned[0] is engine else None
        if token is not None:
            return token
        token = os.urandom(8).hex()
        try:
            _TOKENS[engine] = token
        except TypeError:
            _PINNED[id(engine)] = (engine, token)
    warnings.warn(
        f"engine {type(engine).__module__}.{type(engine).__qualname__} declares no `cache_identity`, so its "
        "cached answers are kept apart from every other engine object's and are not reused by another "
        "process. Declare `cache_identity` (e.g. the model file and settings) on the engine to reuse them.",
        RuntimeWarning, stacklevel=4,
    )
    return token


def engine_identity(engine: Any) -> str:
    """The identity of a custom engine object (see the module docstring).

    Args:
        engine: an object with ``complete(Request) -> Response`` passed as ``dspy.LM(engine=...)``.

    Returns:
        ``engine=<module:Class>|<identity>``; the identity is the engine's declared
        ``cache_identity`` (string, or JSON-able data serialized with sorted keys;
        `LlamaCppEngine.cache_identity`: its file and settings), or a per-object random token
        (``object#<hex>``, with a RuntimeWarning the first time).

    Raises:
        LMConfigError: the engine's ``cache_identity`` is empty or cannot be serialized.
    """
    kind = f"{type(engine).__module__}:{type(engine).__qualname__}"
    declared = getattr(engine, "cache_identity", None)
    if callable(declared):
        declared = declared()
    if declared is not None:
        if isinstance(declared, str):
            text = declared
        else:
            try:
                text = json.dumps(declared, sort_keys=True)
            except (TypeError, ValueError) as exc:
                raise LMConfigError(
                    f"engine {kind}: its cache_identity {declared!r:.80} cannot be serialized ({exc}).",
                    fix="make cache_identity a string or JSON data (model file, version, settings).",
                ) from exc
        if not text.strip():
            raise LMConfigError(f"engine {kind}: its cache_identity is empty.", fix="name the model file and settings.")
        return f"engine={kind}|{text}"
    return f"engine={kind}|object#{_object_token(engine)}"


def cache_identity_of(lm: dspy.LM, options: Mapping[str, Any] | None = None) -> str:
    """What a call of `lm` (with call options `options`) would add to DSPy's cache key.

    Args:
        lm: a `dspy.LM` (plain or `CacheScopedLM`).
        options: the call's own keyword arguments, if any (they override ``lm.kwargs``).

    Returns:
        The identity string (no credential in it; safe for manifests and logs).
    """
    spec = getattr(lm, "engine", "auto")
    if not isinstance(spec, str):
        return engine_identity(spec)
    merged = {**(getattr(lm, "kwargs", None) or {}), **dict(options or {})}
    return endpoint_identity(lm.model, merged)

"""Cache identity: DSPy's response cache scoped to the endpoint or engine that answered.

DSPy 3.4 keys a cached answer on the request (model id, messages, generation options)
but leaves out ``api_key``, ``api_base`` and ``base_url``, and never looks at a custom
engine object. Two servers behind one model id, or two in-process engines behind one
``custom/...`` id, therefore share entries: the second one is served the first one's
answers without a request being sent, both from the on-disk cache (across runs) and
from the in-memory cache (in one process).

`CacheScopedLM` is a `dspy.LM` that adds one field, its *cache identity*, to the cache
key of every call. The identity names what produced the answer: the HTTP endpoint or
the custom engine (`binaryeval_dspy.lm.endpoint_identity` computes it).

The identity is only part of the cache key: it is never sent to the provider or the
engine (the request goes out as DSPy builds it; the only rewrite this class can make
is the ``response_format`` form, see `schema_format`), and it never contains a
credential (user:password in a URL is dropped, a query string is kept only as a hash,
the API key is not used). Adapter, signature instructions and inputs are in the key
already, through the rendered messages and ``response_format``.

`ensure_cache_identity` turns an LM a user built with ``dspy.LM(...)`` into a
`CacheScopedLM` copy, so programs handed such an LM get the same guarantee.
"""

from __future__ import annotations

import contextvars
import copy
import logging
import math
import threading
import time
import weakref
from typing import Any

import dspy
from dspy.utils import with_callbacks
from dspy.utils.exceptions import LMError, LMProviderError, LMUnexpectedError, is_retryable_lm_error

from binaryeval_dspy.errors import LMConfigError
from binaryeval_dspy.lm.dspy_internals import (
    aexecute_call,
    execute_call,
    finalize_call,
    forget_cached_reply,
    install_dspy_patches,
    prepare_call,
    scope_cache_key,
    switch_route,
    uses_response_cache,
    warn_call_path,
)
from binaryeval_dspy.lm.endpoint_identity import cache_identity_of
from binaryeval_dspy.lm.schema_format import (
    as_json_object,
    check_dialect,
    is_openai_schema,
    rejects_response_format,
)
from binaryeval_dspy.lm.usage import record_failed_request

logger = logging.getLogger(__name__)

#: The field added to DSPy's cache key (a key of the hashed dict, never a request field).
CACHE_SCOPE_FIELD = "_bineval_cache_identity"

#: Set around one call by a sender with a spending limit (`binaryeval_dspy.engines.senders`): an
#: object whose ``before_retry()`` is asked before each further attempt `CacheScopedLM` makes
#: (after a failed probe of the schema form too) and returns the reason not to send it (the
#: budget cannot reserve it), or None; ``unanswered_attempt()`` is told of every attempt that
#: went out and got no reply (the last one included), whose worst case stays spent.
ATTEMPT_GATE: contextvars.ContextVar[Any] = contextvars.ContextVar("bineval_attempt_gate", default=None)


def _has_no_text(result: Any) -> bool:
    """True when a DSPy call result carries no reply text at all (no choices, or only empty ones)."""
    outputs = getattr(result, "outputs", None)
    if outputs is None:
        return False
    for output in outputs:
        if isinstance(output, dict):
            if str(output.get("text") or "").strip() or output.get("tool_calls"):
                return False
        elif str(output or "").strip():
            return False
    return True


def _forget_empty_reply(lm: Any, call: Any, result: Any, *, asynchronous: bool) -> None:
    """Take a reply with no text back out of DSPy's response cache, right after DSPy stored it.

    An endpoint that answers 200 with no choices or an empty message has not answered: the
    question gets an ``error`` verdict, and a rerun must reach the endpoint again instead of
    being served the same empty reply from the cache forever. Best effort
    (`dspy_internals.forget_cached_reply`).
    """
    if not getattr(call, "cache", False) or getattr(result, "cache_hit", False) or not _has_no_text(result):
        return
    forget_cached_reply(lm, call, asynchronous=asynchronous)


#: The key (and value) an output carries when its reply stopped at ``max_tokens``.
CUT_REPLY = ("finish_reason", "length")


def mark_cut_replies(result: Any, outputs: Any) -> Any:
    """`outputs` with each reply the LM stopped at the completion cap marked as cut.

    DSPy hands adapters the reply text alone and only logs a warning when a response's
    ``finish_reason`` is ``"length"``, so a verdict read from a reply cut mid-explanation
    would look like any other. Such an output becomes a dict, ``{"text": ...,
    "finish_reason": "length"}`` (DSPy's adapters read dict outputs by their ``"text"``),
    which `binaryeval_dspy.lm.adapters` turns into the ``reply_cut`` mark on the answer.

    Args:
        result: DSPy's call result (its ``responses`` carry each reply's finish reason;
            a result without them, e.g. a legacy LiteLLM call, is left unmarked).
        outputs: what DSPy's ``finalize`` returned: a list of str / dict outputs, or a
            typed response (returned as is).

    Returns:
        A new list when some output was cut (the cached result is never changed), else
        `outputs` itself.
    """
    responses = getattr(result, "responses", None) or ()
    if not isinstance(outputs, list) or not responses:
        return outputs
    cut = [i for i, response in enumerate(responses[:len(outputs)])
           if getattr(response, "finish_reason", None) == CUT_REPLY[1]]
    if not cut:
        return outputs
    marked = list(outputs)
    for index in cut:
        out = marked[index]
        marked[index] = ({**out, CUT_REPLY[0]: CUT_REPLY[1]} if isinstance(out, dict)
                         else {"text": out, CUT_REPLY[0]: CUT_REPLY[1]})
    return marked


class CacheScopedLM(dspy.LM):
    """A `dspy.LM` whose cached answers are only served back for the same endpoint or engine.

    Built like ``dspy.LM`` (same arguments), plus:

    Args:
        response_schema: True declares that the endpoint honours a JSON schema sent as
            ``response_format`` (vLLM, llama.cpp's servers, most OpenAI-compatible
            servers), so `dspy.JSONAdapter` sends its schema even when the model id is
            unknown to DSPy's capability tables (``openai/<served name>`` at a base URL
            is). None (default) keeps DSPy's capabilities.
        schema_dialect: how a JSON schema goes out (see `schema_format`): None
            (default) leaves ``response_format`` as DSPy sends it; ``json_schema``
            likewise; ``json_object`` rewrites it as ``{"type": "json_object",
            "schema": ...}`` (llama-cpp-python's server); ``auto`` sends OpenAI's form
            and switches this LM to ``json_object`` the first time the server rejects
            a request for its ``response_format`` (that request is sent again, once).
        adapter_stats: an `AdapterStats` in which such re-sent requests are counted
            (``format_retries``), or None.

    Every call (``lm(...)`` and ``await lm.acall(...)``, as adapters make them) adds
    `cache_identity_of` to the cache key; the identity is never sent. Copies
    (``lm.copy(api_base=...)``) stay scoped and recompute the identity from their own
    settings. Calling ``lm.forward`` directly bypasses DSPy's public call path and
    this scoping, as it bypasses history.

    Attributes:
        schema_dialect: the dialect in use (``auto`` until a schema call succeeded or
            was rejected, then ``json_schema`` or ``json_object``); None if not managed.

    Saved state (``dump_state``) records this class; loading it back needs
    ``allow_unsafe_lm_state=True`` like any LM class outside DSPy.
    """

    def __init__(self, model: str, *args: Any, response_schema: bool | None = None,
                 schema_dialect: str | None = None, adapter_stats: Any = None, **kwargs: Any):
        super().__init__(model, *args, **kwargs)
        self._declared_response_schema = response_schema
        self.schema_dialect = check_dialect(schema_dialect)
        self.adapter_stats = adapter_stats

    @property
    def cache_identity(self) -> str:
        """This LM's identity in DSPy's cache key (without call-time overrides)."""
        return cache_identity_of(self)

    @property
    def supports_response_schema(self) -> bool:
        """DSPy's capability, unless `response_schema` was declared at construction."""
        declared = getattr(self, "_declared_response_schema", None)
        return bool(declared) if declared is not None else super().supports_response_schema

    @property
    def supported_params(self) -> set[str]:
        """DSPy's supported parameters, with ``response_format`` when a schema is declared supported.

        DSPy works them out again on every call (its backend selection and capability
        lookup, about 7% of a served call's client CPU with 64 calls in flight); they depend
        only on the model id, its engine and the LM's settings, so the answer is kept until
        one of those changes (e.g. the switch to the ``json_object`` route).
        """
        spec = getattr(self, "engine", None)
        key = (self.model, self.model_type, spec if isinstance(spec, str) else id(spec),
               repr(sorted(self.kwargs.items(), key=lambda kv: kv[0])))
        known = self.__dict__.get("_supported_params_memo")
        if known is None or known[0] != key:
            params = set(super().supported_params)
            if getattr(self, "_declared_response_schema", None):
                params.add("response_format")
            known = (key, frozenset(params))
            self.__dict__["_supported_params_memo"] = known
        return set(known[1])

    # ----- the call path: DSPy's own (prepare, execute, finalize), with a scoped cache key

    def _shaped(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """Call options with ``response_format`` in this LM's schema dialect."""
        if getattr(self, "schema_dialect", None) == "json_object" and is_openai_schema(kwargs.get("response_format")):
            return {**kwargs, "response_format": as_json_object(kwargs["response_format"])}
        return kwargs

    def _probing(self, kwargs: dict[str, Any]) -> bool:
        return getattr(self, "schema_dialect", None) == "auto" and is_openai_schema(kwargs.get("response_format"))

    def _format_rejected(self, exc: BaseException) -> bool:
        """After a failed probe: switch to ``json_object`` if the server refused the format."""
        if not rejects_response_format(exc):
            return False
        self.schema_dialect = "json_object"
        route = getattr(self, "json_object_route", None)
        if route is not None:  # a client that can carry the json_object + schema form
            switch_route(self, *route)
        stats = getattr(self, "adapter_stats", None)
        if stats is not None:
            stats.add("format_retries")
        logger.warning("%s rejected a JSON schema in OpenAI's response_format form; sending "
                       "{'type': 'json_object', 'schema': ...} from now on.", self.model)
        return True

    def _after_failed_probe(self, exc: LMError, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The request's kwargs after a failed schema probe: reshaped when the server refused
        the format; unchanged for a retryable fault (the normal call retries it); else re-raise."""
        if self._format_rejected(exc):
            return self._shaped(kwargs)
        if not is_retryable_lm_error(exc):
            raise exc
        return kwargs

    def _single_attempt(self) -> CacheScopedLM:
        probe = copy.copy(self)  # shares history, kwargs and connection pools; only retries differ
        probe.num_retries = 0
        return probe

    def _run(self, runner: Any, prompt: Any, messages: Any, kwargs: dict[str, Any]) -> Any:
        """One call: DSPy's prepare, execute and finalize, with DSPy's retries made here one
        attempt at a time, so that every request answered with an error is counted
        (`_failed_attempt`); the retry rule and delays are DSPy's."""
        retries = runner.num_retries
        single = runner._single_attempt() if retries else runner
        call = prepare_call(single, prompt, messages, kwargs)
        warn_call_path(self, call, messages)
        if call.cache:
            scope_cache_key(call, CACHE_SCOPE_FIELD, cache_identity_of(self, kwargs))
        for attempt in range(retries + 1):
            try:
                result = execute_call(single, call)
                break
            except Exception as exc:
                if not _failed_attempt(self, exc, attempt, retries) or _gate_refuses(exc):
                    raise
                time.sleep(_retry_delay(exc, attempt))
        _forget_empty_reply(runner, call, result, asynchronous=False)
        return mark_cut_replies(result, finalize_call(self, call, result))

    async def _arun(self, runner: Any, prompt: Any, messages: Any, kwargs: dict[str, Any]) -> Any:
        import asyncio

        retries = runner.num_retries
        single = runner._single_attempt() if retries else runner
        call = await asyncio.to_thread(prepare_call, single, prompt, messages, kwargs, asynchronous=True)
        warn_call_path(self, call, messages)
        if call.cache:
            scope_cache_key(call, CACHE_SCOPE_FIELD, cache_identity_of(self, kwargs))
        for attempt in range(retries + 1):
            try:
                result = await aexecute_call(single, call)
                break
            except Exception as exc:
                if not _failed_attempt(self, exc, attempt, retries) or _gate_refuses(exc):
                    raise
                await asyncio.sleep(_retry_delay(exc, attempt))
        _forget_empty_reply(runner, call, result, asynchronous=True)
        return mark_cut_replies(result, finalize_call(self, call, result))

    @with_callbacks
    def __call__(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
        """As `dspy.LM.__call__`, with the cache key scoped to this LM's endpoint or engine.

        While the schema dialect is unknown, every call is a probe: it goes out at once in
        OpenAI's ``json_schema`` form, as one attempt; the first success settles the dialect
        and a refusal of the form switches the LM to ``json_object`` and re-sends that call.
        No call waits for another's probe, so the first round of a run is not held back by
        one request (a server that refuses the form refuses at most the calls already in
        flight, once each; a refusal is immediate and carries no tokens).
        """
        kwargs = self._shaped(kwargs)
        if self._probing(kwargs):
            try:
                outputs = self._run(self._single_attempt(), prompt, messages, kwargs)
            except LMError as exc:
                kwargs = self._after_failed_probe(exc, kwargs)
                if _gate_refuses(exc):  # the call goes on with another attempt: a spending limit reserves it first
                    raise
            else:
                self.schema_dialect = "json_schema"
                return outputs
        return self._run(self, prompt, messages, kwargs)

    @with_callbacks
    async def acall(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
        """As `dspy.LM.acall`, with the cache key scoped to this LM's endpoint or engine."""
        kwargs = self._shaped(kwargs)
        if self._probing(kwargs):
            try:
                outputs = await self._arun(self._single_attempt(), prompt, messages, kwargs)
            except LMError as exc:
                kwargs = self._after_failed_probe(exc, kwargs)
                if _gate_refuses(exc):
                    raise
            else:
                self.schema_dialect = "json_schema"
                return outputs
        return await self._arun(self, prompt, messages, kwargs)

    def dump_state(self) -> dict[str, Any]:
        """`dspy.LM.dump_state`, plus the declared `response_schema` and `schema_dialect` when set."""
        state = super().dump_state()
        if getattr(self, "_declared_response_schema", None) is not None:
            state["response_schema"] = self._declared_response_schema
        if getattr(self, "schema_dialect", None) is not None:
            state["schema_dialect"] = self.schema_dialect
        return state


def ensure_cache_identity(lm: dspy.BaseLM) -> dspy.BaseLM:
    """An LM whose DSPy cache entries are scoped to its endpoint or engine.

    For an LM a user built with ``dspy.LM(...)`` and handed to this package's programs:
    answers cached for another server or engine behind the same model id are then
    never served to it.

    Args:
        lm: any DSPy LM.

    Returns:
        `lm` itself when it is already a `CacheScopedLM` or does not use DSPy's
        response cache (``cache=False``, `DummyLM`, legacy ``forward()`` LMs); for a
        plain ``dspy.LM``, a `CacheScopedLM` copy (``lm.copy()``: same settings, engine
        and connection pools, fresh history; `lm` itself is not modified).

    Raises:
        LMConfigError: `lm` is not a DSPy LM, or is a ``dspy.LM`` subclass with its own
            call path that uses the response cache (its cache key cannot be scoped
            from outside).

    This is where an LM not built by `make_lm` enters the package (`BinEval` calls it through
    `cache_scoped`), so it installs this package's DSPy patches first
    (`dspy_internals.install_dspy_patches`, once per process).
    """
    install_dspy_patches()
    if isinstance(lm, CacheScopedLM):
        return lm
    if not isinstance(lm, dspy.BaseLM):
        raise LMConfigError("cannot scope this LM's cache", expected="a dspy.LM", received=type(lm).__name__,
                            fix="pass dspy.LM(...) or make_lm(...).lm.")
    if not uses_response_cache(lm):
        return lm
    if type(lm) is not dspy.LM:
        raise LMConfigError(
            f"{type(lm).__qualname__} is a dspy.LM subclass whose cache key cannot be scoped to its endpoint, so "
            "answers cached for another endpoint behind the same model id could be served to it.",
            fix="build it with dspy.LM(...) or binaryeval_dspy.make_lm(...), or pass cache=False.",
        )
    scoped = lm.copy()
    scoped.__class__ = CacheScopedLM
    scoped._declared_response_schema = None
    scoped.schema_dialect = None
    scoped.adapter_stats = None
    return scoped


_SCOPED_COPIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SCOPED_LOCK = threading.Lock()


def cache_scoped(lm: Any) -> Any:
    """`ensure_cache_identity(lm)`, made once per LM object and reused while `lm` lives.

    For programs that find a plain ``dspy.LM`` in DSPy's settings on every call (BinEval's
    judge under ``dspy.configure(lm=...)``): the copy is made at the first call, so its
    history, schema dialect and connection pools carry over from call to call. A later
    change to `lm`'s own settings is not seen by the copy. An LM that cannot be scoped
    (a ``dspy.LM`` subclass with its own call path) is returned as it is, with a warning
    once: its cached answers are then keyed as DSPy keys them.

    Args:
        lm: a DSPy LM, or None (returned as is).
    """
    if lm is None or isinstance(lm, CacheScopedLM) or not isinstance(lm, dspy.BaseLM):
        return lm
    with _SCOPED_LOCK:
        try:
            known = _SCOPED_COPIES.get(lm)
        except TypeError:  # not weak-referenceable or unhashable: scope it each time
            known = None
        if known is not None:
            return known
        try:
            scoped = ensure_cache_identity(lm)
        except LMConfigError as exc:
            logger.warning("%s", exc)
            scoped = lm
        try:
            _SCOPED_COPIES[lm] = scoped
        except TypeError:
            pass
        return scoped


__all__ = [
    "CACHE_SCOPE_FIELD",
    "CacheScopedLM",
    "ensure_cache_identity",
]


#: Exception type names (anywhere in a failed call's cause chain) of a request that went out
#: and got no readable reply: its reply was being waited for or read when the connection timed
#: out or broke (DSPy's HTTP layer, lm15: ``ReadTimeout`` / ``ReadError`` / ``ProtocolError``;
#: httpx and LiteLLM: ``ReadTimeout``, ``RemoteProtocolError``, ...). A connect or write error
#: means the request never arrived whole.
_SENT_UNANSWERED = frozenset({"ReadError", "ReadTimeout", "ProtocolError", "RemoteProtocolError",
                              "RemoteDisconnected", "IncompleteRead", "ReadTimeoutError"})


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and all(cause is not seen for seen in chain) and len(chain) < 12:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    return chain


def _unanswered(exc: BaseException) -> bool:
    """Whether a failed attempt went out and got no reply at all (a timeout, a connection that
    broke while the reply was awaited): a provider may bill it."""
    for cause in _causes(exc):
        name = type(cause).__name__
        if name in _SENT_UNANSWERED or "timeout" in name.lower() or isinstance(cause, TimeoutError):
            return True
    return "timed out" in str(exc).lower()


def _reached_endpoint(exc: BaseException) -> bool:
    """Whether a failed attempt is a request the endpoint received: the provider answered it
    with an error (`LMProviderError`: a server error, a rate limit, a timeout it reports, a
    refused request), its reply could not be read (`LMUnexpectedError`), or it went out and
    the connection timed out or broke while its reply was awaited (an `LMTransportError` of
    DSPy's HTTP layer caused by a read error). Errors raised before any request went out
    (configuration, an unsupported feature, a connection that could not be made, a request
    that could not be written) are not requests."""
    if isinstance(exc, (LMProviderError, LMUnexpectedError)):
        return True
    return isinstance(exc, LMError) and any(type(c).__name__ in _SENT_UNANSWERED for c in _causes(exc))


def _failed_attempt(lm: Any, exc: BaseException, attempt: int, retries: int) -> bool:
    """Count one failed attempt that reached the endpoint (`_reached_endpoint`) as a failed call
    in the usage tracker, tell the call's `ATTEMPT_GATE` (a spending limit) when it got no reply
    at all (its worst case stays spent), and say whether to try again: a retryable error
    (`is_retryable_lm_error`, DSPy's rule) with attempts left."""
    if _reached_endpoint(exc):
        record_failed_request(lm.model)
        gate = ATTEMPT_GATE.get()
        if gate is not None and _unanswered(exc):
            gate.unanswered_attempt()
    return attempt < retries and is_retryable_lm_error(exc)


def _gate_refuses(exc: BaseException | None = None) -> bool:
    """Whether the call's `ATTEMPT_GATE` (a spending limit) refuses the next attempt (it reserves
    the attempt's worst case when it allows it)."""
    gate = ATTEMPT_GATE.get()
    if gate is None:
        return False
    return gate.before_retry() is not None


def _retry_delay(exc: BaseException, attempt: int) -> float:
    """Seconds before the next attempt, as DSPy waits: the provider's ``retry_after`` hint
    when it is a finite number >= 0, else 2 ** attempt seconds, at most 60."""
    hint = getattr(exc, "retry_after", None)
    if isinstance(hint, (int, float)) and not isinstance(hint, bool) and math.isfinite(hint) and hint >= 0:
        return float(hint)
    return float(min(2 ** min(attempt, 6), 60))

"""Sending one `LMCall` and getting its `Answer`: through DSPy's LM, or straight to an OpenAI-compatible endpoint.

Both senders format the call with `binaryeval_dspy.lm.calls.format_call` and read the
reply with `read_outputs` / `read_failure` (the run's adapter: DSPy's ``format``, our
``parse``), so an answer is the same record on every route.

* `LMSender`: any ``dspy.LM`` (a provider through LiteLLM, a custom engine such as the
  embedded llama.cpp model or a scripted test LM, a user's own LM): the call goes through
  DSPy's adapter pipeline, so DSPy's response cache, retries, history, callbacks and usage
  tracking apply as for any DSPy module.
* `HttpSender`: a served model at an OpenAI-compatible base URL (vLLM, llama.cpp's server,
  a LiteLLM proxy) or ``openai/<model>``: the body goes out through the standard-library
  client of `binaryeval_dspy.engines.http_client` (one keep-alive connection per thread,
  the same code the Ray workers run), replies are cached in DSPy's cache (its disk layer)
  keyed on the endpoint too, and the per-call CPU that DSPy's generic LM path spends (its request
  planning, output shims and in-memory cache) is not paid. The ``response_format`` form
  is negotiated with the endpoint once per LM (`negotiate`): OpenAI's ``json_schema``
  form, or ``{"type": "json_object", "schema": ...}`` after a refusal (llama-cpp-python's
  server), shared with DSPy's route through the LM's ``schema_dialect``.

A spending limit (`binaryeval_dspy.cost.budget.CostBudget`) is asked before every request
that goes out, retries included (`CallBudget.reserve` with the formatted messages); a
request that got no reply (a timeout, a cut connection) keeps its worst case, since a
provider may bill it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import dspy

from binaryeval_dspy.cost.budget import CallRequest
from binaryeval_dspy.lm.usage import record_failed_request, usage_from_entries
from binaryeval_dspy.engines.http_client import (AsyncConnections, Connections, HttpTarget, Posted, apost_json,
                                                  post_json)
from binaryeval_dspy.lm.cache_identity import ATTEMPT_GATE
from binaryeval_dspy.lm.dspy_internals import openai_schema_format
from binaryeval_dspy.lm.calls import (Answer, LMCall, Prepared, answer_from_outputs, error_text, format_call, hinted,
                                      read_failure, read_outputs)
from binaryeval_dspy.lm.schema_format import as_json_object, is_openai_schema, rejects_response_format
from binaryeval_dspy.schemas.item_result import Usage

logger = logging.getLogger(__name__)

# Call options that configure the client (where and how to connect), never the request body.
CLIENT_KEYS = frozenset({"api_key", "api_base", "base_url", "headers", "extra_headers", "timeout", "api_version",
                         "azure_ad_token_provider", "organization", "project", "extra_query",
                         "custom_llm_provider", "num_retries", "cache", "rollout_id", "prompt_cache"})



class CallBudget(Protocol):
    """What a sender asks before each request (see `binaryeval_dspy.cost.budget.CostBudget`)."""

    stop_reason: str | None

    def reserve(self, request: Any = None) -> bool | None:
        """True: send (`request` holds what was reserved); None: wait for a call in flight; False: stop."""

    def settle(self, usage: Usage, request: Any = None, *, unanswered: int = 0) -> None:
        """A reserved request is done with this usage; `unanswered` attempts keep their worst case."""


def completion_cap(lm: Any, prepared: Prepared) -> int | None:
    """The call's ``max_tokens`` (its own, else the LM's), or None."""
    kwargs = {**(getattr(lm, "kwargs", None) or {}), **prepared.lm_kwargs}
    cap = kwargs.get("max_tokens") or kwargs.get("max_completion_tokens")
    return int(cap) if cap else None


def wait_for_reservation(budget: CallBudget, request: CallRequest) -> bool:
    """`budget.reserve(request)`, waiting while it says "wait" (another call in flight will settle)."""
    while True:
        go = budget.reserve(request)
        if go is not None:
            return go
        time.sleep(0.02)


class Sender(Protocol):
    """Sends one call and returns its answer; never raises for what the LM or the network does."""

    name: str

    def answer(self, call: LMCall, budget: CallBudget | None = None) -> Answer:
        """The answer to `call` (``not_sent`` when `budget` refused it)."""


def _logprobs_refused(answer: Answer, call: LMCall) -> bool:
    return (answer.status == "error" and "logprobs" in call.config and not call.logprobs_required
            and "logprob" in str(answer.reason or "").lower())


def _without_logprobs(call: LMCall) -> LMCall:
    config = {k: v for k, v in call.config.items() if k not in ("logprobs", "top_logprobs")}
    return dataclasses.replace(call, config=config)


def _refused(answer: Answer) -> Answer:
    answer.logprobs_refused = True
    return answer


class LMSender:
    """Any ``dspy.LM`` through DSPy's adapter pipeline (see the module docstring).

    Args:
        lm: the LM (a `CacheScopedLM` keeps cached answers apart per endpoint).
        adapter: the adapter every call goes through (the run's, `choose_adapter`).
        name: the LM's display name.
    """

    def __init__(self, lm: Any, adapter: Any, *, name: str | None = None) -> None:
        self.lm = lm
        self.adapter = adapter
        self.name = name or str(getattr(lm, "model", "lm"))
        self._logprobs_refused = False

    def answer(self, call: LMCall, budget: CallBudget | None = None) -> Answer:
        """Send `call` through ``adapter(lm, ...)``; an LM that refuses log-probabilities is not asked for them again."""
        if self._logprobs_refused and "logprobs" in call.config and not call.logprobs_required:
            return _refused(self._answer(_without_logprobs(call), budget))
        answer = self._answer(call, budget)
        if _logprobs_refused(answer, call):
            logger.warning("%s refused log-probabilities (%s); asking without them from now on", self.name,
                           answer.reason)
            self._logprobs_refused = True
            retried = self._answer(_without_logprobs(call), budget)
            retried.usage = answer.usage + retried.usage
            return _refused(retried)
        return answer

    def _answer(self, call: LMCall, budget: CallBudget | None) -> Answer:
        request = None
        if budget is not None:
            prepared = format_call(call, self.lm, self.adapter)
            request = CallRequest(messages=prepared.messages, max_tokens=completion_cap(self.lm, prepared))
            if not wait_for_reservation(budget, request):
                return Answer(status="not_sent", reason=budget.stop_reason or "stopped by the spending limit")
        gate = _AttemptGate(budget, request) if budget is not None else None
        token = ATTEMPT_GATE.set(gate)
        try:
            with dspy.track_usage() as tracker:
                try:
                    values = self.adapter(self.lm, dict(call.config), call.signature, list(call.demos),
                                          dict(call.inputs))
                except Exception as exc:  # noqa: BLE001 - a failed call is an answer's outcome, never a crash
                    answer = read_failure(call, exc)
                else:
                    answer = answer_from_outputs(call, values)
                usage = usage_from_entries(dict(tracker.usage_data))
        finally:
            ATTEMPT_GATE.reset(token)
        if usage.lm_calls > 1:
            usage.adapter_fallbacks = usage.lm_calls - 1
        answer.usage = usage
        if budget is not None:
            budget.settle(usage, request, unanswered=gate.unanswered if gate is not None else 0)
        return answer


class _AttemptGate:
    """Reserves every further attempt of one call with the budget (asked by `CacheScopedLM`)."""

    def __init__(self, budget: CallBudget, request: CallRequest) -> None:
        self.budget = budget
        self.request = request
        self.unanswered = 0

    def unanswered_attempt(self) -> None:
        """An attempt went out and got no reply (a timeout, a broken connection): it keeps its worst case."""
        self.unanswered += 1

    def before_retry(self) -> str | None:
        """Called before attempt 2, 3, ...: reserves it; the reason not to send it, or None."""
        if not wait_for_reservation(self.budget, self.request):
            return self.budget.stop_reason or "stopped by the spending limit"
        return None


# ----------------------------------------------------------------------------- the direct route


@dataclass
class SenderSpec:
    """Everything a process needs to build an `HttpSender` (a Ray worker builds its own from it).

    Attributes:
        target: the endpoint (its key included; never written anywhere).
        model: the model name in each request body.
        lm_model: the LM's DSPy model id (``openai/<name>``), for capabilities and usage.
        lm_kwargs: the LM's settings (temperature, max_tokens, ...), client settings excluded.
        adapter: ``json`` or ``chat``.
        dialect: the ``response_format`` form: ``auto`` (negotiate), ``json_schema`` or ``json_object``.
        cache_identity: the endpoint's identity in the cache key; None: no cache.
        reasoning: an OpenAI reasoning model (``max_completion_tokens``, no temperature).
        name: the LM's display name.
    """

    target: HttpTarget
    model: str
    lm_model: str
    lm_kwargs: dict[str, Any]
    adapter: str
    dialect: str = "auto"
    cache_identity: str | None = None
    reasoning: bool = False
    name: str = ""
    response_schema: bool = True
    stats: Any = field(default=None, repr=False)


_SCHEMA_FORMATS: dict[type, dict] = {}
_SCHEMA_LOCK = threading.Lock()


def _schema_format(response_format: Any) -> Any:
    """A pydantic ``response_format`` as OpenAI's ``json_schema`` dict, as DSPy's native client
    sends it (`openai_schema_format`), memoized per class."""
    if not isinstance(response_format, type):
        return response_format
    with _SCHEMA_LOCK:
        known = _SCHEMA_FORMATS.get(response_format)
    if known is None:
        known = openai_schema_format(response_format)
        with _SCHEMA_LOCK:
            _SCHEMA_FORMATS[response_format] = known
    return known


@dataclass
class Exchange:
    """One call on the direct route between its steps (`HttpSender.prepare`, `post`, `complete`).

    Attributes:
        call: the call (without log-probabilities once the LM refused them).
        prepared: the formatted call.
        data: the request body's bytes.
        key: the reply's key in the cache, or None (no cache).
        cache: the reply cache this exchange reads and writes.
        request: what the spending limit reserves for each attempt, or None (no limit).
        probing: the body uses OpenAI's ``json_schema`` form before the endpoint accepted it.
        refused: the LM refused log-probabilities: the answer says so.
        unsettled: usage of an earlier POST of this exchange (a refused form) not yet
            settled with the budget.
        unanswered: that POST's attempts with no reply (they keep their worst case).
        carried: usage of an earlier exchange of the call (settled), added to the answer.
        posted: what `HttpSender.post` got, or None before it.
        answer: the call's answer once known, else None.
    """

    call: LMCall
    prepared: Prepared
    data: bytes
    key: str | None
    cache: Any = None
    request: CallRequest | None = None
    probing: bool = False
    refused: bool = False
    unsettled: Usage = field(default_factory=Usage)
    unanswered: int = 0
    carried: Usage = field(default_factory=Usage)
    posted: Posted | None = None
    answer: Answer | None = None


class HttpSender:
    """A served or hosted OpenAI-compatible endpoint, reached directly (see the module docstring).

    Args:
        spec: where and how to send (`SenderSpec`).
        lm: the run's LM, whose capabilities `format_call` reads and whose ``schema_dialect``
            is shared with DSPy's route; None builds one from `spec` (a Ray worker).
        adapter: the run's adapter; None builds one from ``spec.adapter``.
    """

    def __init__(self, spec: SenderSpec, *, lm: Any = None, adapter: Any = None) -> None:
        from binaryeval_dspy.lm.adapters import CountingChatAdapter, CountingJSONAdapter
        from binaryeval_dspy.lm.cache_identity import CacheScopedLM

        self.spec = spec
        self.name = spec.name or spec.lm_model
        self.lm = lm if lm is not None else CacheScopedLM(spec.lm_model, api_base=spec.target.base_url,
                                                          response_schema=spec.response_schema, cache=False,
                                                          schema_dialect=spec.dialect, **spec.lm_kwargs)
        self.adapter = adapter if adapter is not None else (
            CountingJSONAdapter() if spec.adapter == "json" else CountingChatAdapter())
        self.connections = Connections(spec.target)
        self.cache = _reply_cache() if spec.cache_identity is not None else None
        self._logprobs_refused = False

    # --------------------------------------------------------------------- request

    def body(self, prepared: Prepared, dialect: str | None = None) -> dict[str, Any]:
        """The chat-completions body of a formatted call (client settings dropped)."""
        params = {k: v for k, v in {**self.spec.lm_kwargs, **prepared.lm_kwargs}.items()
                  if k not in CLIENT_KEYS and v is not None and k not in ("model", "messages")}
        if params.get("n") == 1:
            params.pop("n")
        if params.get("stream") is False:
            params.pop("stream")
        response_format = params.get("response_format")
        if response_format is not None:
            dialect = dialect or self.dialect
            params["response_format"] = (as_json_object(response_format)
                                         if dialect == "json_object" and is_openai_schema(response_format)
                                         else _schema_format(response_format))
        if self.spec.reasoning:
            if "max_tokens" in params:
                params["max_completion_tokens"] = params.pop("max_tokens")
            params.pop("temperature", None)
        return {"model": self.spec.model, "messages": prepared.messages, **params}

    @property
    def dialect(self) -> str:
        """The ``response_format`` form in use (``auto`` until the endpoint has answered one)."""
        return str(getattr(self.lm, "schema_dialect", None) or self.spec.dialect or "json_schema")

    # --------------------------------------------------------------------- sending

    def answer(self, call: LMCall, budget: CallBudget | None = None, *, sent: Posted | None = None) -> Answer:
        """POST `call` (from DSPy's on-disk cache when an identical request was answered
        before): `prepare`, then `post` and `complete` until the exchange has its answer.

        `sent` is the outcome of `call`'s request already posted (`request_bytes` sent with
        `binaryeval_dspy.engines.http_client.post_json`, by a Ray worker before its DSPy was
        loaded): it is read as this sender's own first attempt would have been (no cache
        lookup, no second request)."""
        exchange = self.prepare(call, budget, sent=sent)
        while exchange.answer is None:
            if exchange.posted is None:
                self.post(exchange, budget)
            exchange = self.complete(exchange, budget)
        return exchange.answer

    def request_bytes(self, call: LMCall) -> bytes | None:
        """`call`'s request body as the bytes this sender would POST, or None when DSPy's cache
        holds its reply (its sender answers it from there) or the ``response_format`` form is
        not settled yet (``auto``: the first reply decides it)."""
        prepared = format_call(call, self.lm, self.adapter)
        if self.dialect == "auto" and is_openai_schema(prepared.lm_kwargs.get("response_format")):
            return None
        data = _encoded(self.body(prepared))
        return None if isinstance(_cache_get(self.cache, self._cache_key(data)), dict) else data

    def prepare(self, call: LMCall, budget: CallBudget | None = None, *, cache: Any = None,
                carried: Usage | None = None, sent: Posted | None = None) -> Exchange:
        """Step 1 of a call (no I/O but the cache): format it, encode its body and look it up.

        Args:
            call: the call.
            budget: the run's spending limit (its request is built here, reserved by `post`).
            cache: the reply cache to use (`InlineCache` of a caller that drives every step
                on one thread); None: the sender's own (`CacheAccess`, any thread).
            carried: usage of an earlier exchange of the same call (a reply refusing
                log-probabilities), added to the answer's usage.
            sent: the outcome of this call's request posted already (`answer`'s `sent`):
                no cache lookup, ``posted`` set, `complete` reads it.

        Returns:
            An `Exchange`; its ``answer`` is set already when the cache held the reply.
        """
        refused = (sent is None and self._logprobs_refused and "logprobs" in call.config
                   and not call.logprobs_required)
        if refused:
            call = _without_logprobs(call)
        prepared = format_call(call, self.lm, self.adapter)
        stats = getattr(self.adapter, "stats", None)
        if stats is not None and carried is None:  # one adapter invocation per call, as on DSPy's route
            stats.add("calls")
        data = _encoded(self.body(prepared))
        key = self._cache_key(data)
        exchange = Exchange(call=call, prepared=prepared, data=data, key=key, refused=refused,
                            carried=carried or Usage(), cache=cache if cache is not None else self.cache)
        cached = _cache_get(exchange.cache, key) if sent is None else None
        if isinstance(cached, dict):
            exchange.answer = self._finished(exchange, self._read(call, prepared, cached, Usage()))
            return exchange
        if budget is not None:
            exchange.request = CallRequest(messages=prepared.messages, max_tokens=completion_cap(self.lm, prepared))
        exchange.probing = (sent is None and self.dialect == "auto"
                            and is_openai_schema(prepared.lm_kwargs.get("response_format")))
        exchange.posted = sent
        return exchange

    def post(self, exchange: Exchange, budget: CallBudget | None = None) -> None:
        """Step 2 (the only blocking one; any thread): POST the exchange's body with its
        retries, each attempt reserved with `budget` first; sets ``exchange.posted``."""
        def before_attempt(number: int) -> str | None:
            if not wait_for_reservation(budget, exchange.request):
                return budget.stop_reason or _NO_ROOM
            return None

        exchange.posted = post_json(self.connections, exchange.data,
                                    before_attempt=before_attempt if budget is not None else None,
                                    final=_refuses_the_form if exchange.probing else None)

    async def apost(self, exchange: Exchange, connections: AsyncConnections,
                    budget: CallBudget | None = None) -> None:
        """`post` on an event loop (`AsyncConnections`, made by `async_connections`): the same
        attempts, retries and budget reservations, without blocking the loop."""
        def before_attempt(number: int) -> str | bool | None:
            go = budget.reserve(exchange.request)
            if go is None:
                return True  # wait for a call in flight to settle, then ask again
            return None if go else (budget.stop_reason or _NO_ROOM)

        exchange.posted = await apost_json(connections, exchange.data,
                                           before_attempt=before_attempt if budget is not None else None,
                                           final=_refuses_the_form if exchange.probing else None)

    def async_connections(self, limit: int) -> AsyncConnections:
        """Connections for `apost` on the running event loop, at most `limit` of them."""
        return AsyncConnections(self.spec.target, limit)

    def complete(self, exchange: Exchange, budget: CallBudget | None = None) -> Exchange:
        """Step 3 (no I/O but the cache): read what `post` got.

        Returns `exchange` with its ``answer``, or a new exchange to post when the endpoint
        refused the request's form (OpenAI's ``json_schema`` ``response_format``: sent again
        as ``json_object``, once per LM) or refused log-probabilities (sent again without
        them, and never asked for them again).
        """
        posted = exchange.posted
        usage = self._posted_usage(posted)
        if (exchange.probing and posted.body is None and posted.error_type == "HTTPError"
                and rejects_response_format(RuntimeError(posted.error))):
            self._switch_to_json_object()
            data = _encoded(self.body(exchange.prepared, "json_object"))
            return dataclasses.replace(exchange, data=data, key=self._cache_key(data), probing=False, posted=None,
                                       unsettled=exchange.unsettled + usage,
                                       unanswered=exchange.unanswered + posted.unanswered)
        if posted.body is not None and self.dialect == "auto" and exchange.prepared.lm_kwargs.get("response_format"):
            self.lm.schema_dialect = "json_schema"
        usage = exchange.unsettled + usage
        if budget is not None:
            budget.settle(usage, exchange.request, unanswered=exchange.unanswered + posted.unanswered)
        if posted.body is None:
            answer = (Answer(status="not_sent", reason=posted.error, usage=usage)
                      if posted.error_type == "NotSent" and not posted.attempts
                      else Answer(status="error", reason=_posted_error(posted), usage=usage))
        else:
            try:
                answer = self._read(exchange.call, exchange.prepared, posted.body, usage)
            except Exception as exc:  # noqa: BLE001 - a reply our reader cannot take is the call's error, still counted
                answer = Answer(status="error", reason=hinted("ReplyError", f"the reply could not be read: {error_text(exc)}"),
                                usage=usage)
            else:
                if exchange.key is not None and _has_text(posted.body):
                    _cache_put(exchange.cache, exchange.key, posted.body)
        if not exchange.refused and _logprobs_refused(answer, exchange.call):
            logger.warning("%s refused log-probabilities (%s); asking without them from now on", self.name,
                           answer.reason)
            self._logprobs_refused = True
            return self.prepare(exchange.call, budget, cache=exchange.cache,
                                carried=exchange.carried + answer.usage)
        exchange.answer = self._finished(exchange, answer)
        return exchange

    @staticmethod
    def _finished(exchange: Exchange, answer: Answer) -> Answer:
        if exchange.carried.lm_calls or exchange.carried.failed_calls or exchange.carried.total_tokens:
            answer.usage = exchange.carried + answer.usage
        if exchange.refused:
            answer.logprobs_refused = True
        return answer

    def _posted_usage(self, posted: Posted) -> Usage:
        """What a POST cost (its reply's tokens, its failed attempts), also told to a caller
        measuring with ``dspy.track_usage``."""
        usage = _reply_usage(posted.body) if posted.body is not None else Usage()
        usage.failed_calls += posted.failed_attempts
        tracker = dspy.settings.usage_tracker
        if tracker is not None:  # a caller measuring with dspy.track_usage sees these requests too
            for _ in range(posted.failed_attempts):
                record_failed_request(self.spec.lm_model)
            if posted.body is not None and isinstance(posted.body.get("usage"), dict):
                tracker.add_usage(self.spec.lm_model, dict(posted.body["usage"]))
        return usage

    def _cache_key(self, data: bytes) -> str | None:
        """The reply's key in DSPy's cache: the endpoint's identity and the exact request bytes
        (prefixed, so it is never one of DSPy's own keys); None without a cache."""
        if self.cache is None:
            return None
        digest = hashlib.sha256(self.spec.cache_identity.encode("utf-8", "surrogatepass"))
        digest.update(b"\x1f")
        digest.update(data)
        return f"bineval-reply-{digest.hexdigest()}"

    def _switch_to_json_object(self) -> None:
        """A request refused for its ``json_schema`` form is sent again as ``json_object``:
        each such request is counted (``format_retries``); the switch is said once."""
        stats = getattr(self.adapter, "stats", None)
        if stats is not None:
            stats.add("format_retries")
        if getattr(self.lm, "schema_dialect", None) != "json_object":
            self.lm.schema_dialect = "json_object"
            logger.warning("%s rejected a JSON schema in OpenAI's response_format form; sending "
                           "{'type': 'json_object', 'schema': ...} from now on.", self.spec.lm_model)

    def _read(self, call: LMCall, prepared: Prepared, body: dict, usage: Usage) -> Answer:
        return read_outputs(call, prepared, reply_outputs(body), self.lm, self.adapter, usage)

    def inline_cache(self) -> InlineCache | None:
        """A cache for a caller that runs `prepare` and `complete` on one thread (it must
        `flush` it), or None when this sender caches nothing."""
        return InlineCache(self.cache.cache) if self.cache is not None else None

    def close(self) -> None:
        """Close the connections."""
        self.connections.close()


#: Why a retry was not sent when the spending limit had no room for it while other calls were in flight.
_NO_ROOM = "spending limit (`max_cost`): no room for it while other calls are in flight"


def _refuses_the_form(status: int, text: str) -> bool:
    """An error reply refusing the request's ``response_format`` form: sending it again would not help."""
    return rejects_response_format(RuntimeError(text))


def reply_outputs(body: dict) -> list[dict[str, Any]]:
    """A chat-completions reply as the outputs DSPy's adapters read: one dict per choice with its
    ``text`` and ``logprobs``, marked as cut (`CUT_REPLY`) when it stopped at ``max_tokens``."""
    from binaryeval_dspy.lm.cache_identity import CUT_REPLY

    outputs = []
    for choice in body.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        message = choice.get("message") or {}
        output: dict[str, Any] = {"text": _content_text(message.get("content")) if isinstance(message, dict) else None}
        if choice.get("logprobs"):
            output["logprobs"] = choice["logprobs"]
        if choice.get("finish_reason") == CUT_REPLY[1]:
            output[CUT_REPLY[0]] = CUT_REPLY[1]
        outputs.append(output)
    return outputs or [{"text": None}]


def _content_text(content: Any) -> str | None:
    """A message's ``content`` as text: a string as it is, a list of content parts (OpenAI's
    ``[{"type": "text", "text": ...}]``) as their texts joined; anything else None (no text)."""
    if isinstance(content, str) or content is None:
        return content
    if isinstance(content, list):
        texts = [part.get("text") for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)]
        return "".join(texts) if texts else None
    return None


def _has_text(body: dict) -> bool:
    return any(str(o.get("text") or "").strip() for o in reply_outputs(body))


def _reply_usage(body: dict) -> Usage:
    entry = body.get("usage")
    usage = usage_from_entries({"reply": [dict(entry) if isinstance(entry, dict) else {}]})
    return usage


#: OpenAI's SDK names for an error reply's HTTP status (what users of other clients know).
_STATUS_ERRORS = {400: "BadRequestError", 401: "AuthenticationError", 403: "PermissionDeniedError",
                  404: "NotFoundError", 408: "Timeout", 409: "ConflictError", 413: "RequestTooLargeError",
                  422: "UnprocessableEntityError", 429: "RateLimitError", 503: "ServiceUnavailableError"}
_KIND_ERRORS = {"TimeoutError": "Timeout", "ConnectionError": "APIConnectionError", "ReplyError": "APIError",
                "NotSent": "NotAsked"}


def _posted_error(posted: Posted) -> str:
    """``"<ErrorType>: <what the last attempt got> [after N attempts] (<hint>)"`` of a failed POST."""
    if posted.error_type == "HTTPError" and posted.status is not None:
        name = _STATUS_ERRORS.get(posted.status, "InternalServerError" if posted.status >= 500 else "APIError")
    else:
        name = _KIND_ERRORS.get(posted.error_type or "", "APIError")
    attempts = f" after {posted.attempts} attempts" if posted.attempts > 1 else ""
    return hinted(name, f"{posted.error}{attempts}", status=posted.status)


def _reply_cache() -> Any:
    """DSPy's response cache as configured (``dspy.configure_cache``, ``DSPY_CACHEDIR``), reached
    through one thread (`CacheAccess`), or None when DSPy's cache is off."""
    cache = dspy.cache
    if not (getattr(cache, "enable_disk_cache", False) or getattr(cache, "enable_memory_cache", False)):
        return None
    return CacheAccess.for_cache(cache)


#: SQLite pages (4 KiB) each shard of DSPy's disk cache keeps in memory on the cache thread.
CACHE_PAGES = 64


class InlineCache:
    """DSPy's response cache read and written on the calling thread only, for a caller that
    runs every non-blocking step of its calls on one thread (the live engine's main loop).

    Lookups go straight to the disk layer; stores are kept until `flush` (the caller flushes
    before it waits for replies), then written many in one transaction per shard (one
    transaction per reply costs about 3x more CPU: 0.13 against 0.04 ms measured here). The
    SQLite connections of the thread that uses it are kept small (`limit_page_caches`), and
    replies go to the disk layer only, so none stays in memory.

    Args:
        cache: DSPy's cache (``dspy.cache``), disk or memory layer on.
    """

    def __init__(self, cache: Any) -> None:
        self.cache = cache
        self.pending: dict[str, Any] = {}
        self._since = 0.0
        self._limited = False

    def get(self, key: str) -> Any:
        """The cached value of `key` (a store not flushed yet included), or None."""
        if key in self.pending:
            return self.pending[key]
        self._limit_once()
        try:
            if getattr(self.cache, "enable_disk_cache", False):
                return self.cache.disk_cache.get(key)
            return self.cache.memory_cache.get(key)
        except Exception as exc:  # noqa: BLE001 - a damaged entry is a miss
            logger.debug("cache get failed: %s", exc)
            return None

    def put(self, key: str, value: Any) -> None:
        """Keep `value` for `key` until `flush` (written at once when `_BATCH` are kept)."""
        if not self.pending:
            self._since = time.monotonic()
        self.pending[key] = value
        if len(self.pending) >= _BATCH:
            self.flush()

    def flush_due(self) -> None:
        """`flush` when a store has been kept for `_KEPT_SECONDS` (a caller about to wait)."""
        if self.pending and time.monotonic() - self._since >= _KEPT_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Write the stores kept so far. A full or locked disk leaves them uncached (logged at
        debug level), never a failed call."""
        stores, self.pending = list(self.pending.items()), {}
        if not stores:
            return
        self._limit_once()
        try:
            if getattr(self.cache, "enable_disk_cache", False):
                disk = self.cache.disk_cache
                with disk.transact() if len(stores) >= _TRANSACTION_MIN else contextlib.nullcontext():
                    for key, value in stores:
                        disk.set(key, value)
            else:
                for key, value in stores:
                    self.cache.memory_cache[key] = value
        except Exception as exc:  # noqa: BLE001
            logger.debug("cache put failed: %s", exc)

    def _limit_once(self) -> None:
        if not self._limited:
            self._limited = True
            self.limit_page_caches()

    def limit_page_caches(self) -> None:
        """Keep this thread's SQLite connections small: diskcache opens each shard with a 32 MB
        page cache and a 64 MB memory map, which fill as the cache grows (a 10,000-item run
        writes 120,000 replies into 16 shards), so the client's memory grew with the run.
        Only this thread's connections are changed (``update=False``): the cache folder's
        stored settings, which DSPy's own calls read, stay as they are."""
        disk = getattr(self.cache, "disk_cache", None)
        for shard in getattr(disk, "_shards", ()) if getattr(self.cache, "enable_disk_cache", False) else ():
            try:
                shard.reset("sqlite_cache_size", CACHE_PAGES, update=False)
                shard.reset("sqlite_mmap_size", 0, update=False)
            except Exception as exc:  # noqa: BLE001 - a cache that cannot be tuned still works
                logger.debug("cannot limit the cache's page cache: %s", exc)


class CacheAccess:
    """DSPy's cache read and written from one thread, for senders running on many.

    DSPy's disk cache (diskcache over SQLite) opens a connection per thread and per shard,
    each with its own page cache: 64 sending threads held up to 1,024 connections, and the
    client's memory grew with the run (157 MB at 32 items, 1.09 GB at 2,000 measured on the
    old engine). Here one thread owns the connections (an `InlineCache`): lookups wait for
    it, stores are queued, and it serves every job queued at once, lookups first.
    """

    _known: dict[int, CacheAccess] = {}
    _known_lock = threading.Lock()

    def __init__(self, cache: Any) -> None:
        self.cache = cache
        self.store = InlineCache(cache)
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._replies = threading.local()  # each sending thread's reply queue, reused for every lookup
        self.thread: threading.Thread | None = None  # started by the first job (a live run uses `InlineCache`)
        self._start_lock = threading.Lock()

    def _submit(self, job: tuple) -> None:
        if self.thread is None:
            with self._start_lock:
                if self.thread is None:
                    self.thread = threading.Thread(target=self._serve, name="bineval-cache", daemon=True)
                    self.thread.start()
        self.jobs.put(job)

    @classmethod
    def for_cache(cls, cache: Any) -> CacheAccess:
        """The one access thread of `cache` (made on first use)."""
        with cls._known_lock:
            access = cls._known.get(id(cache))
            if access is None or access.cache is not cache:
                access = cls._known[id(cache)] = cls(cache)
            return access

    def _serve(self) -> None:
        while True:
            jobs = [self.jobs.get()]  # waits for one job, then takes every job already queued
            while len(jobs) < _BATCH:
                try:
                    jobs.append(self.jobs.get_nowait())
                except queue.Empty:
                    break
            for kind, key, value, _reply in jobs:
                if kind == "put":
                    self.store.put(key, value)
            for kind, key, _value, reply in jobs:  # lookups before the writes: their senders are waiting
                if kind == "get":
                    reply.put(self.store.get(key))
            self.store.flush()

    def get(self, key: str) -> Any:
        """The cached value of `key`, or None (waits for the cache thread)."""
        reply = getattr(self._replies, "queue", None)
        if reply is None:
            reply = self._replies.queue = queue.SimpleQueue()
        self._submit(("get", key, None, reply))
        return reply.get()

    def put(self, key: str, value: Any) -> None:
        """Store `value` under `key` (queued: the caller does not wait)."""
        self._submit(("put", key, value, None))


#: Stores kept before they are written (at most `_KEPT_SECONDS` by a caller that waits); at
#: least `_TRANSACTION_MIN` go in one transaction (it locks every shard: 16 in DSPy's cache).
_BATCH = 64
_KEPT_SECONDS = 1.0
_TRANSACTION_MIN = 8


def _encoded(body: dict[str, Any]) -> bytes:
    """A request body as the bytes sent (and hashed for the cache)."""
    return json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")


def _cache_get(cache: CacheAccess | None, key: str | None) -> Any:
    return cache.get(key) if cache is not None and key is not None else None


def _cache_put(cache: CacheAccess | None, key: str | None, value: Any) -> None:
    if cache is not None and key is not None:
        cache.put(key, value)


def sender_for(handle: Any) -> Sender:
    """The sender for a run's LM handle: `HttpSender` for a served model reached by base URL,
    `LMSender` (DSPy's route) for everything else."""
    from binaryeval_dspy.lm.adapters import judging_adapter

    spec = http_spec(handle)
    if spec is not None:
        return HttpSender(spec, lm=handle.lm, adapter=handle.adapter)
    return LMSender(handle.lm, judging_adapter(handle.adapter, handle.lm), name=handle.name)


def http_spec(handle: Any, *, api_key: str | None = None, timeout: float | None = None,
              openai: bool = False) -> SenderSpec | None:
    """The `SenderSpec` of a handle whose LM is an OpenAI-compatible base URL (or, with `openai`,
    an ``openai/<model>`` id), else None."""
    from binaryeval_dspy.lm.dspy_internals import is_openai_reasoning_model
    from binaryeval_dspy.lm.endpoint_identity import cache_identity_of

    lm = handle.lm
    if getattr(handle, "embedded", False) or handle.adapter is None:
        return None
    kwargs = dict(getattr(lm, "kwargs", None) or {})
    model = str(getattr(lm, "model", ""))
    provider, _, wire = model.partition("/")
    base = kwargs.get("api_base") or kwargs.get("base_url")
    if base and provider in ("openai", "bineval-openai-compatible"):
        url = str(base)
    elif openai and provider == "openai" and wire:
        url = os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or "https://api.openai.com/v1"
    else:
        return None
    key = api_key or kwargs.get("api_key")
    if key == "not-needed":
        key = None
    if key is None and not base:
        key = os.environ.get("OPENAI_API_KEY")
    limit = timeout or kwargs.get("timeout") or 600.0
    target = HttpTarget(base_url=url, api_key=key, timeout=float(limit),
                        max_retries=int(getattr(lm, "num_retries", 3) or 0))
    lm_kwargs = {k: v for k, v in kwargs.items() if k not in CLIENT_KEYS}
    return SenderSpec(target=target, model=wire or model, lm_model=model, lm_kwargs=lm_kwargs,
                      adapter="json" if getattr(handle, "adapter_name", "") == "json" else "chat",
                      dialect=str(getattr(lm, "schema_dialect", None) or "auto"),
                      cache_identity=cache_identity_of(lm) if getattr(lm, "cache", True) else None,
                      reasoning=is_openai_reasoning_model(model), name=getattr(handle, "name", model),
                      response_schema=bool(getattr(lm, "_declared_response_schema", True)))


class JudgeRouter:
    """A sender for a panel or cascade run: each call goes to its judge's sender (`LMCall.judge`).

    Args:
        senders: judge name -> its sender (`sender_for` of the judge's LM handle).
        default: the sender of calls without a judge (the run's own LM), or None.

    Raises (from `answer`, as an ``error`` answer of the call, never for the run):
        a call naming a judge that has no sender.
    """

    def __init__(self, senders: dict[str, Sender], default: Sender | None = None) -> None:
        self.senders = dict(senders)
        self.default = default
        first = default or next(iter(self.senders.values()))
        self.lm, self.adapter = getattr(first, "lm", None), getattr(first, "adapter", None)  # for code that reads the run's sender (the run's context)

    def answer(self, call: LMCall, budget: CallBudget | None = None) -> Answer:
        """The answer of `call` from its judge's sender."""
        sender = self.senders.get(call.judge) if call.judge is not None else self.default
        if sender is None:
            return Answer(status="error", reason=f"ConfigError: no LM for judge {call.judge!r} in this run "
                                                 f"(its judges: {', '.join(self.senders)})")
        return sender.answer(call, budget)

    def close(self) -> None:
        """Close every judge's sender."""
        for sender in {id(s): s for s in (*self.senders.values(), self.default) if s is not None}.values():
            close = getattr(sender, "close", None)
            if close is not None:
                close()


@contextlib.contextmanager
def closing_sender(sender: Sender):
    """Close `sender`'s connections on exit (a no-op for senders without any)."""
    try:
        yield sender
    finally:
        close = getattr(sender, "close", None)
        if close is not None:
            close()


__all__ = ["CallBudget", "CallRequest", "HttpSender", "JudgeRouter", "LMSender", "Sender", "SenderSpec",
           "closing_sender", "completion_cap", "http_spec", "reply_outputs", "sender_for", "wait_for_reservation"]

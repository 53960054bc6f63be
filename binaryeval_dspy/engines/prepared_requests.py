"""Judge calls as batch request lines, and batch replies back into verdicts, through the live code.

A batch verdict must be the same record as a live verdict of the same question. So
nothing here re-implements the judge: both directions run the live call itself, the
`BinEval.judge_question` call that `BinEval.item_work` plans, with the run's adapter
(`LMHandle.adapter`), and change only what sits behind the adapter:

* `capture_request` runs the call with a *capturing* twin of the run's LM: the adapter
  formats the messages (``adapter.format(signature, demos, inputs)``: the same fenced
  inputs, instructions, demos and question), chooses ``response_format`` and the call
  options (log-probabilities, max_tokens, temperature) exactly as for a live call, and
  the twin stops the call where it would go out, keeping messages and options.
  `request_body` turns them into OpenAI's chat-completions body (client settings and
  keys dropped; a pydantic ``response_format`` turned into its ``json_schema`` form as
  LiteLLM does; the parameters mapped for the provider by LiteLLM's
  ``get_optional_params``).
* `ReplayLM` answers the same call from a batch reply instead of the network: a
  `dspy.LM` with a custom engine (``complete(Request) -> Response``, DSPy's documented
  engine interface) that returns the reply body read by ``dspy.lm15.
  response_from_openai_chat``. DSPy turns it into outputs, the adapter parses it
  (``adapter.parse``, our final-answer rules), `judge_question` turns the prediction,
  an `AdapterParseError` or a missing answer into the `QuestionVerdict`, and the usage
  of the reply is counted by DSPy's usage tracker, as for a live call. DSPy's response
  cache is not used in either direction.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Callable
from typing import Any

import dspy

from binaryeval_dspy.errors import BinEvalError, LMConfigError
from binaryeval_dspy.lm.adapter_stats import AdapterStats
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.schemas.question_set import BinaryQuestion
from binaryeval_dspy.schemas.verdict import QuestionVerdict

# Call options that configure the client (where and how to connect), never the request body.
_CLIENT_KEYS = frozenset({"api_key", "api_base", "base_url", "headers", "extra_headers", "timeout", "api_version",
                          "azure_ad_token_provider", "organization", "project", "extra_query",
                          "custom_llm_provider", "num_retries", "cache", "rollout_id", "prompt_cache"})


class _Captured(BaseException):
    """Raised by the capturing LM where the request would go out. A BaseException, so the
    judge's own handlers (which turn any Exception into an ``error`` verdict) let it by."""

    def __init__(self, messages: list[dict], options: dict[str, Any]) -> None:
        super().__init__("captured")
        self.messages = messages
        self.options = options


def _capture_call(self: Any, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
    shaped = self._shaped(kwargs) if hasattr(self, "_shaped") else kwargs  # CacheScopedLM's schema dialect
    merged = {**(getattr(self, "kwargs", None) or {}), **shaped}
    raise _Captured(list(messages) if messages is not None else [{"role": "user", "content": prompt}], merged)


async def _capture_acall(self: Any, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
    _capture_call(self, prompt, messages=messages, **kwargs)


_CAPTURING_CLASSES: dict[type, type] = {}
_CLASS_LOCK = threading.Lock()


def _capturing_twin(lm: Any) -> Any:
    """A shallow copy of `lm` whose calls stop before anything is sent (see `_Captured`)."""
    cls = type(lm)
    with _CLASS_LOCK:
        twin_cls = _CAPTURING_CLASSES.get(cls)
        if twin_cls is None:
            twin_cls = type(f"Capturing{cls.__name__}", (cls,), {"__call__": _capture_call, "acall": _capture_acall})
            _CAPTURING_CLASSES[cls] = twin_cls
    twin = copy.copy(lm)
    twin.__class__ = twin_cls
    return twin


def _stats_free_copy(adapter: Any) -> Any:
    """The run's adapter counting into throwaway stats, so building requests does not count as judgments."""
    if adapter is None:
        return None
    twin = copy.copy(adapter)
    if hasattr(twin, "stats"):
        twin.stats = AdapterStats()
    return twin


def call_question(call: Callable[[], Any]) -> BinaryQuestion:
    """The question a call planned by `BinEval.item_work` asks.

    Raises:
        BinEvalError: the call is not a ``partial(judge_question, input, output, question)``
            (the planning changed: batch mode cannot tell which question it asks).
    """
    if (isinstance(call, functools.partial) and getattr(call.func, "__name__", "") == "judge_question"
            and len(call.args) == 3 and isinstance(call.args[2], BinaryQuestion)):
        return call.args[2]
    raise BinEvalError(f"batch mode cannot tell which question the call {call!r:.120} asks: BinEval.item_work is "
                       "expected to plan partial(judge_question, input, output, question) calls")


def capture_request(call: Callable[[], Any], handle: LMHandle) -> tuple[list[dict], dict[str, Any]]:
    """The messages and call options a live run of `call` would send through `handle`.

    Runs `call` (a judge call from `BinEval.item_work`) with the run's adapter and a
    capturing twin of the run's LM, so formatting and options are the live path's own.

    Returns:
        ``(messages, options)``: options are the LM's settings merged with the call's
        (client settings and the key included: `request_body` drops them).

    Raises:
        BinEvalError: the call made no LM call (nothing to send).
    """
    twin = _capturing_twin(handle.lm)
    settings: dict[str, Any] = {"lm": twin}
    adapter = _stats_free_copy(handle.adapter)
    if adapter is not None:
        settings["adapter"] = adapter
    try:
        with dspy.context(**settings):
            outcome = call()
    except _Captured as captured:
        return captured.messages, captured.options
    raise BinEvalError(f"the judge call made no LM call to capture (it returned {outcome!r:.120})")


def request_body(messages: list[dict], options: dict[str, Any], *, model: str, provider: str = "openai",
                 logprobs_optional: bool = True) -> dict[str, Any]:
    """OpenAI's chat-completions body for captured `messages` and `options`.

    Client settings (key, base URL, timeout, headers, retries) and DSPy-only options are
    dropped; a pydantic ``response_format`` becomes its strict ``json_schema`` form (as
    LiteLLM sends it); the rest is mapped for `provider` and `model` by LiteLLM's
    ``get_optional_params`` (e.g. ``max_completion_tokens`` where a model needs it).

    Args:
        messages: the chat messages, as the adapter formatted them.
        options: the merged call options (`capture_request`).
        model: the model name for the body (the provider's, without a prefix).
        provider: LiteLLM provider whose parameter mapping applies.
        logprobs_optional: when the model refuses ``logprobs`` / ``top_logprobs``, drop
            them (``BinEval(logprobs="auto")`` stops asking too) instead of refusing.

    Raises:
        LMConfigError: the provider does not take one of the options.
    """
    from binaryeval_dspy.lm.dspy_internals import litellm_module

    litellm = litellm_module()
    from litellm.llms.base_llm.base_utils import type_to_response_format_param

    params = {k: v for k, v in options.items() if k not in _CLIENT_KEYS and v is not None and k not in ("model",
                                                                                                   "messages")}
    if params.get("n") == 1:
        params.pop("n")
    if "response_format" in params and not isinstance(params["response_format"], dict):
        params["response_format"] = type_to_response_format_param(params["response_format"])
    mapped = _mapped_params(litellm, params, model=model, provider=provider, logprobs_optional=logprobs_optional)
    extra = mapped.pop("extra_body", None) or {}
    if mapped.get("stream") is False:
        mapped.pop("stream")
    return {"model": model, "messages": messages, **mapped, **extra}


def _mapped_params(litellm: Any, params: dict[str, Any], *, model: str, provider: str,
                   logprobs_optional: bool) -> dict[str, Any]:
    from litellm.utils import get_optional_params

    try:
        return dict(get_optional_params(model=model, custom_llm_provider=provider, **params))
    except litellm.UnsupportedParamsError as exc:
        if logprobs_optional and "logprob" in str(exc).lower() and ("logprobs" in params or "top_logprobs" in params):
            trimmed = {k: v for k, v in params.items() if k not in ("logprobs", "top_logprobs")}
            return _mapped_params(litellm, trimmed, model=model, provider=provider, logprobs_optional=False)
        raise LMConfigError(f"`engine` batch: {provider} does not take these options for {model}: {exc}.",
                            fix="drop the option, or use another `engine`.") from exc


class _ReplayEngine:
    """A DSPy engine answering each call with the reply body it is given (never the network)."""

    def __init__(self, lm: Any) -> None:
        self.supports_response_schema = bool(getattr(lm, "supports_response_schema", False))
        self.supports_function_calling = False
        self.supports_reasoning = False
        try:
            self.supported_params = frozenset(getattr(lm, "supported_params", ()) or ())
        except Exception:  # noqa: BLE001 - capabilities of an unknown model: none declared
            self.supported_params = frozenset()
        self.cache_identity = "bineval-batch-replay"
        self._local = threading.local()

    def answer_with(self, body: dict[str, Any]) -> None:
        self._local.body = body
        self._local.used = False

    def complete(self, request: Any) -> Any:
        from dspy.lm15 import response_from_openai_chat

        body = getattr(self._local, "body", None)
        if body is None or self._local.used:
            raise LMConfigError("batch mode: this judgment made a second LM call (e.g. an adapter retrying in "
                                "another format), which a batch reply cannot answer.",
                                fix="judge these items with another `engine` (a live run lets the adapter retry).")
        self._local.used = True
        return response_from_openai_chat(body, model=getattr(request, "model", None))


class ReplayLM:
    """Answers the run's judge calls from batch replies, through DSPy's own response path.

    Args:
        handle: the run's LM (its model id, settings and capabilities are copied; the
            copy sends nothing and caches nothing).
    """

    def __init__(self, handle: LMHandle) -> None:
        lm = handle.lm
        self._engine = _ReplayEngine(lm)
        settings = {k: v for k, v in (getattr(lm, "kwargs", None) or {}).items() if k not in _CLIENT_KEYS}
        if "max_completion_tokens" in settings:  # a reasoning model's: dspy.LM stores max_tokens under this name
            settings["max_tokens"] = settings.pop("max_completion_tokens")
        self.lm = dspy.LM(lm.model, model_type=getattr(lm, "model_type", "chat"), engine=self._engine, cache=False,
                          num_retries=0, **settings)
        self.adapter = handle.adapter

    def verdict(self, call: Callable[[], QuestionVerdict], body: dict[str, Any]) -> QuestionVerdict:
        """Run the judge `call` with `body` (a chat-completion JSON) as the LM's reply."""
        self._engine.answer_with(body)
        settings: dict[str, Any] = {"lm": self.lm}
        if self.adapter is not None:
            settings["adapter"] = self.adapter
        with dspy.context(**settings):
            return call()

"""Provider prompt caching: one item's questions share a prompt prefix, and we help it be reused.

BinEval asks one call per question, and every call of an item carries the same system
message (instructions, field descriptions: identical across items too), the same input
and the same output, with the question and its violation example last (the field order of
`binaryeval_dspy.signatures.binary_judgment`). So all of an item's calls share a
byte-identical prefix that ends where the ``question`` field begins; a provider's prompt
cache can serve it to every call after the first.

* OpenAI and vLLM cache prefixes automatically (OpenAI from 1,024 prompt tokens, in steps
  of 128; see docs/cost.md). Nothing is sent.
* Anthropic caches only up to a marked block (``cache_control``). For ``anthropic/``
  models the judge's user message is split in two user messages at the ``question``
  field, and the first (the item's shared part) is marked: through DSPy's own prompt-cache
  setting (``prompt_cache=dspy.lm15.CacheConfig(prefix_until_index=...)``) on DSPy's native
  Anthropic client, or as ``cache_control`` on the content block when the call goes
  through LiteLLM. The text the model reads is unchanged (two consecutive user turns are
  one turn to Anthropic). See `split_at_shared_prefix` and `cache_breakpoint_route`.
* The cache is written by the first call and read by the others only when the first has
  finished: with ``--warm-prefix`` (`default_warm_prefix`) the item loop sends an item's
  first question alone and the rest after it (the plan runner's ``warm_first``,
  `binaryeval_dspy.engines.plan_runner.PlanRunner`).
* What a provider's cache serves from a shared prefix (`cache_rules`, `servable`): nothing
  under its minimum, then the prefix in steps. An item whose prefix is under the minimum
  can be padded up to it where that is cheaper (`binaryeval_dspy.cost.cache_padding`).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from binaryeval_dspy.cost.price_map import ModelPrice

#: The first input field that differs between an item's calls: the cache breakpoint goes
#: right before it (BinEval's judge signatures).
PER_CALL_FIELD = "question"
CACHE_MARKER = {"type": "ephemeral"}

_ROUTES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

#: OpenAI's prompt caching: prompts from 1,024 tokens, cached in steps of 128 tokens
#: (OpenAI's prompt-caching guide).
OPENAI_MIN_TOKENS, OPENAI_STEP = 1024, 128
#: Names of the cache rules (`CacheRules.name`) whose providers are known to cache our prompts.
OPENAI_RULES, ANTHROPIC_RULES = "OpenAI automatic", "Anthropic breakpoint"


class CacheRules(NamedTuple):
    """How a provider's prompt cache serves a shared prefix (see `cache_rules`).

    Attributes:
        name: ``"OpenAI automatic"``, ``"Anthropic breakpoint"`` or ``"automatic prefix"``.
        minimum: the shortest prefix cached, in tokens; nothing is cached below it.
        step: above the minimum the cached part grows in steps of this many tokens.
        writes_billed: the first call's write is billed at the cache-write price
            (Anthropic); else it costs plain input.
    """

    name: str
    minimum: int
    step: int
    writes_billed: bool


def cache_rules(model: str, price: ModelPrice) -> CacheRules:
    """The cache rules of `model` (a LiteLLM id, or a bare name of `price`'s provider).

    Anthropic: from the model's minimum (LiteLLM's ``prompt_cache_min_tokens``, else 1,024)
    up to the breakpoint, token by token, writes billed. OpenAI: from `OPENAI_MIN_TOKENS` in
    steps of `OPENAI_STEP`, writes not billed. Others: LiteLLM's minimum (else 1,024), step 1.
    """
    if model.startswith("anthropic/") or price.provider == "anthropic":
        return CacheRules(ANTHROPIC_RULES, price.prompt_cache_min_tokens or 1024, 1, True)
    if model.startswith("openai/") or price.provider == "openai":
        return CacheRules(OPENAI_RULES, OPENAI_MIN_TOKENS, OPENAI_STEP, False)
    return CacheRules("automatic prefix", price.prompt_cache_min_tokens or OPENAI_MIN_TOKENS, 1, False)


def servable(prefix: int, minimum: int, step: int) -> int:
    """Tokens a provider's cache serves from a shared prefix of `prefix` tokens: 0 below
    `minimum`, else `minimum` plus the rest rounded down to whole steps (all in tokens)."""
    if prefix < minimum:
        return 0
    return minimum + (prefix - minimum) // step * step


def field_header(name: str) -> str:
    """How DSPy's ChatAdapter and JSONAdapter open an input field in the user message."""
    return f"[[ ## {name} ## ]]"


def cache_breakpoint_route(lm: Any) -> str | None:
    """How a cache breakpoint reaches `lm`'s provider: ``"native"``, ``"litellm"`` or None.

    ``"native"``: an ``anthropic/`` model on DSPy's native Anthropic client, marked with
    DSPy's ``prompt_cache`` setting. ``"litellm"``: an ``anthropic/`` model whose calls go
    through LiteLLM (``engine="litellm"``, or client settings only LiteLLM carries), marked
    with ``cache_control`` on the content block. None: any other model (OpenAI, vLLM and
    llama.cpp cache prefixes without marks; custom engines get nothing).
    """
    try:
        cached = _ROUTES.get(lm, False)
    except TypeError:
        cached = False
    if cached is not False:
        return cached
    route = _route(lm)
    try:
        _ROUTES[lm] = route
    except TypeError:
        pass
    return route


def _route(lm: Any) -> str | None:
    model = getattr(lm, "model", None)
    spec = getattr(lm, "engine", None)
    if not isinstance(model, str) or not model.lower().startswith("anthropic/") or not isinstance(spec, str):
        return None
    if spec == "litellm" or getattr(lm, "model_type", "chat") != "chat":
        return "litellm"
    try:
        from binaryeval_dspy.lm.dspy_internals import select_backend

        selection = select_backend(lm, {})
    except Exception:  # noqa: BLE001 - a model DSPy cannot place natively goes through LiteLLM
        return "litellm"
    provider = getattr(selection.resolution, "provider", None)
    return "native" if selection.native and provider == "anthropic" else "litellm"


def split_at_shared_prefix(messages: list[dict[str, Any]], input_fields: Sequence[str]
                           ) -> tuple[list[dict[str, Any]], int | None]:
    """Split the last user message where the per-call part (`PER_CALL_FIELD`) begins.

    Args:
        messages: the chat messages an adapter formatted (system first, then demos, then
            the user message with the input fields in signature order).
        input_fields: the signature's input field names, in order.

    Returns:
        ``(messages, index)``: the messages with the last user message replaced by two,
        the item's shared part (fields before ``question``) and the rest, and `index`, the
        position of the shared part in `messages`; or the messages unchanged and None when
        the signature has no ``question`` field after another input field, or the message
        is not plain text holding that field's header.
    """
    names = list(input_fields)
    if PER_CALL_FIELD not in names or names.index(PER_CALL_FIELD) == 0 or not messages:
        return messages, None
    last = messages[-1]
    content = last.get("content")
    if last.get("role") != "user" or not isinstance(content, str):
        return messages, None
    at = content.find(field_header(PER_CALL_FIELD))
    if at <= 0:
        return messages, None
    shared, rest = content[:at].rstrip("\n"), content[at:]
    if not shared:
        return messages, None
    return [*messages[:-1], {**last, "content": shared}, {**last, "content": rest}], len(messages) - 1


def mark_for_litellm(messages: list[dict[str, Any]], index: int) -> list[dict[str, Any]]:
    """`messages` with message `index` as one text block carrying ``cache_control``
    (LiteLLM's prompt-caching form, passed on to Anthropic)."""
    marked = dict(messages[index])
    marked["content"] = [{"type": "text", "text": marked["content"], "cache_control": dict(CACHE_MARKER)}]
    return [*messages[:index], marked, *messages[index + 1:]]


def native_cache_config(messages: list[dict[str, Any]], index: int) -> Any:
    """DSPy's prompt-cache setting marking message `index` (counted without a leading
    system message, as DSPy's request holds it apart)."""
    from dspy.lm15 import CacheConfig

    offset = 1 if messages and messages[0].get("role") == "system" else 0
    return CacheConfig(prefix_until_index=index - offset)


def render_messages(adapter: Any, lm: Any, signature: Any, inputs: dict[str, Any],
                    demos: Sequence[dict[str, Any]] = ()) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The chat messages (and the extra LM options) one judge call to `lm` would send, built by
    `adapter` exactly as a live call builds them, without calling any LM.

    Args:
        adapter: one of our adapters (`CountingJSONAdapter`, `CountingChatAdapter`), or any
            DSPy adapter (then no cache breakpoint is placed).
        lm: the `dspy.LM` the call would go to (its provider decides the breakpoint).
        signature: the judge signature (e.g. `JudgeBinaryQuestion`).
        inputs: the signature's input fields, as `BinEval.question_fields` builds them.
        demos: few-shot demos, if any.

    Returns:
        ``(messages, lm_kwargs)``: `lm_kwargs` holds what the adapter adds to the call
        (``response_format``, DSPy's ``prompt_cache`` for Anthropic's native route).
    """
    lm_kwargs: dict[str, Any] = {}
    prepare = getattr(adapter, "_prepare_response_format", None)
    if prepare is not None:  # JSON adapters choose response_format first, as their __call__ does
        prepare(lm, lm_kwargs, signature)
    processed = adapter._call_preprocess(lm, lm_kwargs, signature, inputs)
    return adapter.format(processed, list(demos), inputs), lm_kwargs


def is_hosted(handle: Any) -> bool:
    """True for a provider's hosted model (a LiteLLM id), False for the embedded model, for a
    served model reached by base URL (given to the LM, or in the provider's environment
    variable, e.g. ``OPENAI_BASE_URL``: `endpoint_identity` reads both) and for an LM on a
    custom engine."""
    from binaryeval_dspy.lm.endpoint_identity import endpoint_identity

    if handle is None or getattr(handle, "embedded", False):
        return False
    lm = getattr(handle, "lm", None)
    if not isinstance(getattr(lm, "engine", "auto"), str):
        return False  # a custom engine (in-process, scripted): no provider cache to warm
    kwargs = getattr(lm, "kwargs", None) or {}
    return endpoint_identity(getattr(lm, "model", ""), kwargs).startswith("provider-default=")


def default_warm_prefix(handle: Any, concurrency: int) -> bool:
    """Whether an item's first question goes alone before the rest, when not asked for:
    on for hosted models (`is_hosted`) with more than one call in flight, off otherwise
    (one call at a time is in order anyway; served models are left as they were)."""
    return concurrency > 1 and is_hosted(handle)


def warm_prefix_in_effect(handle: Any, warm_prefix: bool | None, concurrency: int) -> bool:
    """Whether a run sends each item's first question alone: the run's `warm_prefix` setting
    when given (True / False), else `default_warm_prefix`."""
    if warm_prefix is None:
        warm_prefix = default_warm_prefix(handle, concurrency)
    return bool(warm_prefix)


def common_prefix_length(texts: Sequence[Any]) -> int:
    """Length of the longest common prefix of `texts` (strings or token lists), 0 for none."""
    if not texts:
        return 0
    first = texts[0]
    n = min(len(t) for t in texts)
    for i in range(n):
        x = first[i]
        if any(t[i] != x for t in texts[1:]):
            return i
    return n

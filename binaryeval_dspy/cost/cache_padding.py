"""Cache padding: an item's shared prompt prefix padded up to the provider's cache minimum, where that is cheaper.

Issue 13 ("billed-token equivalent per item at most 2x the lower bound with prefix
caching"). All calls of one item share a prompt prefix (system message, input, output;
see `binaryeval_dspy.lm.prompt_cache`), but a provider caches it only from a minimum
length: OpenAI from 1,024 prompt tokens (its prompt-caching guide), Anthropic from the
model's minimum (LiteLLM's ``prompt_cache_min_tokens``: 1,024 for Claude Sonnet 4.5,
4,096 for Claude Haiku 4.5; Anthropic's prompt-caching docs). An item whose prefix is
shorter pays the whole prefix on every call. Padding the prefix up to the minimum turns
all calls after the first into cache reads; whether that is cheaper depends on the
prices, so it is decided per item by `decide_padding`:

    without padding: calls x prefix x input price
    with padding:    first call: cached part x write price (Anthropic; input price for
                     OpenAI) + rest x input price;
                     every other call: cached part x cache-read price + rest x input price
    pad only if "with" < "without" (prices of LiteLLM's map; batch prices in batch mode).

The padding is a filler block (`filler_block`): fixed words of ours, saying that it
carries no content and is there so the provider can cache the prompt, inserted at the
end of the item's shared part, right before the per-call ``question`` field, so it is
inside the cached prefix (and inside the Anthropic cache breakpoint's part). Its size is
counted with the provider's tokenizer (`ProviderTokenizer`: tiktoken for OpenAI, exact;
LiteLLM's tokenizer otherwise, for Claude an approximation) to reach the minimum plus a
margin (`margin_tokens`). It is a function of the prefix text alone, so every call of an
item carries the same bytes.

Never padded: the embedded model, served models reached by base URL, custom engines,
models without a cached-input price, providers other than OpenAI and Anthropic (whether
their cache serves our prompts is not known), Anthropic models on a route that places no
breakpoint, and items with one call. `cache_padding_for` applies these rules to a run's
LM; `CachePadding.apply` pads one call's messages (the judging adapters call it, in live
and batch mode alike).
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from binaryeval_dspy.cost.price_map import ModelPrice, model_price
from binaryeval_dspy.cost.provider_tokenizer import (
    MESSAGE_OVERHEAD,
    ProviderTokenizer,
    content_text,
)
from binaryeval_dspy.errors import ConfigError, LMConfigError
from binaryeval_dspy.lm.endpoint_identity import provider_of
from binaryeval_dspy.lm.prompt_cache import (
    ANTHROPIC_RULES,
    OPENAI_RULES,
    PER_CALL_FIELD,
    CacheRules,
    cache_breakpoint_route,
    cache_rules,
    field_header,
    is_hosted,
    servable,
)

#: ``--cache-padding`` values: ``auto`` pads where `decide_padding` says it saves money, ``off`` never.
CACHE_PADDING_POLICIES = ("auto", "off")
#: Margin above the minimum, in tokens, when the tokenizer is the provider's own (tiktoken for OpenAI).
EXACT_MARGIN = 16
#: Margin as a share of the minimum when the tokenizer is an approximation (LiteLLM's for Claude).
APPROXIMATE_MARGIN_SHARE = 0.05

FILLER_BEGINS = "<<<filler begins: no content>>>"
FILLER_ENDS = "<<<filler ends>>>"
FILLER_NOTE = ("This block is filler added by the evaluation tool. It is not part of the input, the output or the "
               "question, it carries no content and asks for nothing: ignore it. It is here only so that the part of "
               "this prompt shared by all questions about this item is long enough for the model provider to cache "
               "it.")
FILLER_WORD = "filler"
_WORDS_PER_LINE = 16


def filler_block(words: int) -> str:
    """The filler text with `words` filler words (lines of 16), between `FILLER_BEGINS` and
    `FILLER_ENDS` and opened by `FILLER_NOTE`. Deterministic: the same `words`, the same bytes.

    Raises:
        ConfigError: `words` is negative.
    """
    if words < 0:
        raise ConfigError("bad filler size", expected="a number of words >= 0", received=repr(words),
                          fix="pass the number of filler words to add (0 for none).")
    lines = [" ".join([FILLER_WORD] * min(_WORDS_PER_LINE, words - i)) for i in range(0, words, _WORDS_PER_LINE)]
    return "\n".join([FILLER_BEGINS, FILLER_NOTE, *lines, FILLER_ENDS])


def margin_tokens(minimum: int, *, exact: bool) -> int:
    """Tokens padded beyond `minimum`: `EXACT_MARGIN` with the provider's own tokenizer, else
    `APPROXIMATE_MARGIN_SHARE` of the minimum (at least `EXACT_MARGIN`)."""
    return EXACT_MARGIN if exact else max(EXACT_MARGIN, math.ceil(minimum * APPROXIMATE_MARGIN_SHARE))


@dataclass(frozen=True)
class PaddingDecision:
    """Whether to pad one item's shared prefix, and what each choice costs.

    Attributes:
        pad: pad the prefix (only when `cost_with` < `cost_without`).
        reason: one sentence on why.
        prefix_tokens: the unpadded shared prefix (tokens, per call).
        padded_tokens: the prefix with the filler (tokens, per call); equals
            `prefix_tokens` when no filler was measured.
        calls: the item's calls that share the prefix.
        cost_without / cost_with: USD of the shared prefix over all `calls`, without and
            with padding; None when not priced (no input price, or nothing to compare).
    """

    pad: bool
    reason: str
    prefix_tokens: int
    padded_tokens: int
    calls: int
    cost_without: float | None = None
    cost_with: float | None = None


def decide_padding(prefix_tokens: int, padded_tokens: int, *, calls: int, rules: CacheRules,
                   rates: dict[str, float | None]) -> PaddingDecision:
    """The padding rule: pad only if the item's estimated billed cost with padding is lower than without.

    Only the shared prefix is priced (the per-call part costs the same either way). A prefix
    of T tokens has ``servable(T, minimum, step)`` of them cached (0 under ``rules.minimum``):
    the first call pays those at the cache-write price (``rules.writes_billed``, Anthropic)
    or the input price, each later call at the cached-input price, and every call pays the
    rest at the input price. The cost is computed so for the prefix as it is and padded to
    `padded_tokens`. Padding applies to a prefix under the minimum (padded up to it) and,
    with OpenAI's 128-token steps, to a prefix over it whose tail past the last whole step
    is long (padded to the next step, so the tail is cached too).

    Args:
        prefix_tokens: the item's shared prefix, unpadded (tokens per call).
        padded_tokens: the same prefix with the filler (tokens per call).
        calls: how many of the item's calls share the prefix.
        rules: the provider's cache rules (`binaryeval_dspy.lm.prompt_cache.cache_rules`).
        rates: USD per million tokens with keys ``input``, ``cached_input`` and
            ``cache_write`` (`ModelPrice.per_million`, live or batch).

    Returns:
        A `PaddingDecision`; `pad` is False when the padded prefix does not reach the
        minimum or has no more tokens cached than the prefix as it is, there is no input
        price, or padding is not cheaper.
    """
    def no(reason: str, without: float | None = None, with_: float | None = None) -> PaddingDecision:
        return PaddingDecision(False, reason, prefix_tokens, padded_tokens, calls, without, with_)

    if padded_tokens < rules.minimum:
        return no(f"the padded prefix ({padded_tokens:,} tokens) does not reach the {rules.minimum:,}-token minimum")
    if prefix_tokens >= rules.minimum and (servable(padded_tokens, rules.minimum, rules.step)
                                           <= servable(prefix_tokens, rules.minimum, rules.step)):
        return no(f"the shared prefix ({prefix_tokens:,} tokens) reaches the {rules.minimum:,}-token cache minimum "
                  "and padding would not have more of it cached")
    input_rate, cached_rate = rates.get("input"), rates.get("cached_input")
    if input_rate is None or cached_rate is None:
        return no("no input or cached-input price")
    write_rate = rates.get("cache_write") if rules.writes_billed else input_rate
    write_rate = input_rate if write_rate is None else write_rate

    def cost(tokens: int) -> float:
        cached = servable(tokens, rules.minimum, rules.step)
        rest = tokens - cached
        return (cached * write_rate + (calls - 1) * cached * cached_rate + calls * rest * input_rate) / 1e6

    without, with_ = cost(prefix_tokens), cost(padded_tokens)
    if with_ < without:
        return PaddingDecision(True, f"padding {prefix_tokens:,} -> {padded_tokens:,} tokens costs ${with_:.6g} "
                                     f"instead of ${without:.6g} over {calls} calls", prefix_tokens, padded_tokens,
                               calls, without, with_)
    return no(f"padding would cost ${with_:.6g} instead of ${without:.6g} over {calls} calls", without, with_)


def _judge_fields() -> tuple[str, ...]:
    from binaryeval_dspy.signatures.binary_judgment import JudgeBinaryQuestion

    return tuple(JudgeBinaryQuestion.input_fields)


class CachePadding:
    """Pads the shared prefix of one run's judge calls where `decide_padding` says it is cheaper.

    Thread-safe; the plan of each distinct prefix is computed once (the calls of an item
    share it) and kept for the last 1,024 prefixes.

    Args:
        model: the LiteLLM id whose prices and cache rules apply.
        price: its `ModelPrice`.
        rules: its `CacheRules`.
        tokenizer: its `ProviderTokenizer` (anything with ``count(text) -> int`` and ``exact``).
        calls_per_item: calls of an item that share its prefix (the question set's LM
            questions; a resumed item asking fewer is decided with this number too).
        batch: decide at batch prices.
    """

    def __init__(self, *, model: str, price: ModelPrice, rules: CacheRules, tokenizer: Any, calls_per_item: int,
                 batch: bool = False) -> None:
        self.model, self.price, self.rules, self.tokenizer = model, price, rules, tokenizer
        self.calls_per_item = int(calls_per_item)
        self.batch = batch
        self.margin = margin_tokens(rules.minimum, exact=bool(getattr(tokenizer, "exact", False)))
        self.target = rules.minimum + self.margin
        self._rates = price.per_million(batch=batch)
        self._lock = threading.Lock()
        self._plans: OrderedDict[str, tuple[str | None, PaddingDecision]] = OrderedDict()
        self._padded_items = 0
        self._filler_tokens = 0
        self._items = 0

    def decide(self, prefix_tokens: int, padded_tokens: int) -> PaddingDecision:
        """`decide_padding` with this run's calls per item, cache rules and prices."""
        return decide_padding(prefix_tokens, padded_tokens, calls=self.calls_per_item, rules=self.rules,
                              rates=self._rates)

    def apply(self, signature: Any, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`messages` (one judge call, as the adapter formatted them) with the filler block
        inserted right before the ``question`` field of the last user message, when the
        item's prefix is to be padded; else `messages` unchanged. Signatures other than the
        judge's (input, output, question, violation example) are never padded."""
        if tuple(getattr(signature, "input_fields", ())) != _judge_fields() or not messages:
            return messages
        last = messages[-1]
        content = last.get("content")
        if last.get("role") != "user" or not isinstance(content, str):
            return messages
        at = content.find(field_header(PER_CALL_FIELD))
        if at <= 0:
            return messages
        head = content[:at]
        before = sum(MESSAGE_OVERHEAD + self.tokenizer.count(content_text(m.get("content"))) for m in messages[:-1])
        filler, _decision = self._plan(head, before, messages[:-1])
        if filler is None:
            return messages
        return [*messages[:-1], {**last, "content": head + filler + "\n\n" + content[at:]}]

    @staticmethod
    def _key(earlier: Sequence[dict[str, Any]], head: str) -> str:
        digest = hashlib.sha256()
        for message in earlier:
            digest.update(f"{message.get('role')}\0{content_text(message.get('content'))}\0".encode())
        digest.update(head.encode())
        return digest.hexdigest()

    def _plan(self, head: str, before: int, earlier: Sequence[dict[str, Any]]) -> tuple[str | None, PaddingDecision]:
        key = self._key(earlier, head)
        with self._lock:
            if key in self._plans:
                self._plans.move_to_end(key)
                return self._plans[key]

        def tokens(shared: str) -> int:
            return before + MESSAGE_OVERHEAD + self.tokenizer.count(shared.rstrip("\n"))

        prefix = tokens(head)
        filler, padded = None, prefix
        target = self._target_for(prefix)
        if target is not None:
            words = 0
            for _ in range(16):  # each filler word is about one token: two or three rounds
                candidate = filler_block(words)
                padded = tokens(head + candidate + "\n\n")
                if padded >= target:
                    filler = candidate
                    break
                words += max(1, (target - padded) * _WORDS_PER_LINE // (_WORDS_PER_LINE + 1))
        decision = self.decide(prefix, padded)
        planned = (filler if decision.pad else None, decision)
        with self._lock:
            if key not in self._plans:
                self._plans[key] = planned
                self._items += 1
                if decision.pad:
                    self._padded_items += 1
                    self._filler_tokens += padded - prefix
                while len(self._plans) > 1024:
                    self._plans.popitem(last=False)
        return planned

    def _target_for(self, prefix: int) -> int | None:
        """Tokens to pad a prefix of `prefix` tokens to: the minimum plus the margin when under it;
        with steps (OpenAI), the next step plus the margin when the tail past the last whole step
        is longer than the margin; else None (nothing to gain). `decide_padding` then says
        whether it pays (the filler block is at least about 80 tokens)."""
        if prefix < self.rules.minimum:
            return self.target
        if self.rules.step <= 1:
            return None
        cached = servable(prefix, self.rules.minimum, self.rules.step)
        if prefix - cached <= self.margin:
            return None
        return cached + self.rules.step + self.margin

    def stats(self) -> dict[str, Any]:
        """What was padded so far: ``{"model", "rules", "minimum", "target_tokens", "batch",
        "calls_per_item", "items_seen", "padded_items", "filler_tokens"}`` (items are distinct
        item prefixes; ``filler_tokens``: the filler of one call, summed over padded items)."""
        with self._lock:
            return {"model": self.model, "rules": self.rules.name, "minimum": self.rules.minimum,
                    "target_tokens": self.target, "batch": self.batch, "calls_per_item": self.calls_per_item,
                    "items_seen": self._items, "padded_items": self._padded_items,
                    "filler_tokens": self._filler_tokens}


def check_policy(policy: str) -> str:
    """`policy` normalized (``auto`` or ``off``).

    Raises:
        LMConfigError: any other value.
    """
    value = policy.strip().lower() if isinstance(policy, str) else policy
    if value not in CACHE_PADDING_POLICIES:
        raise LMConfigError("bad cache padding policy", expected=f"one of {', '.join(CACHE_PADDING_POLICIES)}",
                            received=repr(policy), fix="`cache_padding` auto (pads only where it saves money) or off.")
    return value


def cache_padding_for(handle: Any, *, calls_per_item: int, policy: str = "auto", price_model: str | None = None,
                      batch: bool = False, warm: bool = True) -> CachePadding | None:
    """The `CachePadding` a run with `handle` uses, or None when nothing may be padded.

    Args:
        handle: the run's `LMHandle` (its ``lm`` and what it is priced as).
        calls_per_item: the item's calls sharing a prefix (LM questions per item).
        policy: ``auto`` or ``off`` (the run's ``cache_padding`` setting).
        price_model: the LiteLLM id the run prices calls at (`RunSettings.price_model_for`);
            None: what `handle` is priced as by itself.
        batch: the run goes through a batch API: decide at batch prices, and only where
            LiteLLM lists a batch cached-input price.
        warm: each item's first call finishes before the others start (``--warm-prefix``,
            or one call at a time); without it the calls miss the cache they would write.

    Returns:
        None for ``off``, `warm` False, an LM that is not a hosted model (embedded, base URL,
        custom engine), a model without a price or a cached-input price, a provider other
        than OpenAI and Anthropic, a price model (``--price-model``) of another provider
        than the LM's, an Anthropic model without a cache breakpoint route,
        `calls_per_item` < 2, or a tokenizer that cannot be loaded; else a `CachePadding`.

    Raises:
        LMConfigError: `policy` is neither ``auto`` nor ``off``.
    """
    chosen = check_policy(policy)
    if chosen == "off" or not warm or calls_per_item < 2 or not is_hosted(handle):
        return None
    model = price_model or (handle.priced_as() if callable(getattr(handle, "priced_as", None)) else None)
    if model is None or provider_of(model) != provider_of(getattr(handle.lm, "model", "")):
        return None  # priced as another provider's model (--price-model): its cache rules do not apply
    price = model_price(model)
    if price is None or price.cache_read is None or (batch and price.batch_cache_read is None):
        return None
    rules = cache_rules(model, price)
    if rules.name not in (OPENAI_RULES, ANTHROPIC_RULES):
        return None
    if rules.name == ANTHROPIC_RULES and cache_breakpoint_route(handle.lm) is None:
        return None
    try:
        tokenizer = ProviderTokenizer(model)
    except Exception:  # noqa: BLE001 - no tokenizer, no sizing: never pad blind
        return None
    return CachePadding(model=model, price=price, rules=rules, tokenizer=tokenizer, calls_per_item=calls_per_item,
                        batch=batch)


@contextmanager
def padding_installed(handle: Any, padding: CachePadding | None) -> Iterator[CachePadding | None]:
    """Put `padding` on the handle's adapter (``adapter.cache_padding``) for the ``with`` block,
    and restore the previous value after it. A None `padding`, or an adapter that does not
    pad (not one of `binaryeval_dspy.lm.adapters`'), changes nothing."""
    adapter = getattr(handle, "adapter", None)
    if padding is None or adapter is None or not hasattr(adapter, "cache_padding"):
        yield padding
        return
    previous = adapter.cache_padding
    adapter.cache_padding = padding
    try:
        yield padding
    finally:
        adapter.cache_padding = previous


def lm_question_count(question_set: Any) -> int:
    """Questions of `question_set` the LM answers (those without a code check); 0 for None."""
    if question_set is None:
        return 0
    return sum(1 for q in question_set.questions if getattr(q, "check", None) is None)


__all__ = [
    "APPROXIMATE_MARGIN_SHARE", "CACHE_PADDING_POLICIES", "EXACT_MARGIN", "FILLER_BEGINS", "FILLER_ENDS",
    "FILLER_NOTE", "MESSAGE_OVERHEAD", "CachePadding", "PaddingDecision", "ProviderTokenizer", "cache_padding_for",
    "check_policy", "decide_padding", "filler_block", "lm_question_count", "margin_tokens", "padding_installed",
]

"""LiteLLM's model price map: which table is in use, and one model's per-token prices.

LiteLLM loads its map (``litellm.model_cost``) at import: the copy bundled with the
installed ``litellm`` package, or (unless ``LITELLM_LOCAL_MODEL_COST_MAP=True``) the
newest one from LiteLLM's GitHub repository; `price_source` names which one was used.
`model_price` reads one model's entry into a `ModelPrice` (USD per token), and
`ModelPrice.cost` prices token counts into `CostParts`. What a whole run costs is
`binaryeval_dspy.cost.pricing`'s job.

Prices used, per token:

* input (``input_cost_per_token``) for prompt tokens not served from a prompt cache;
* cached input (``cache_read_input_token_cost``) for prompt tokens the provider served
  from its prompt cache (the usage's cached tokens); the input price when the map has
  none;
* cache write (``cache_creation_input_token_cost``, Anthropic: 1.25x input) for prompt
  tokens written to the cache (Anthropic reports them); the input price when absent;
* output (``output_cost_per_token``) for completion tokens;
* batch: the map's batch prices (``input_cost_per_token_batches``,
  ``output_cost_per_token_batches``, ``cache_read_input_token_cost_batches``) where it
  lists them, else the provider's published 50% batch discount for OpenAI, Anthropic and
  Azure OpenAI (`BATCH_DISCOUNT_PROVIDERS`), else no batch price (unknown). The cost says
  which (``batch_discount``).

"""

from __future__ import annotations

import functools
import math
import threading
from dataclasses import dataclass
from typing import Any

#: What `price_model_for_name` returns for the embedded model: it costs 0 (local).
LOCAL = "local"
#: Providers that publish a 50% batch discount; used when LiteLLM lists no batch price.
BATCH_DISCOUNT_PROVIDERS = frozenset({"openai", "anthropic", "azure"})
PROVIDER_BATCH_DISCOUNT = 0.5


def _litellm() -> Any:
    from binaryeval_dspy.lm.dspy_internals import litellm_module

    return litellm_module()


def litellm_version() -> str:
    """The installed LiteLLM's version (e.g. ``1.110.2``), or ``unknown version``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("litellm")
    except PackageNotFoundError:  # pragma: no cover - litellm is a dependency of dspy
        return "unknown version"


@functools.lru_cache(maxsize=1)
def price_source() -> str:
    """The price table in use, named for reports: LiteLLM's version and which copy of its map.

    E.g. ``"LiteLLM 1.110.2 model price map (bundled copy, git blob c8f11f1)"`` or
    ``"LiteLLM model price map fetched from GitHub on 2026-12-01 (litellm 1.110.2)"``.
    """
    version = litellm_version()
    _litellm()  # the map is loaded at import
    try:
        from litellm.litellm_core_utils.get_model_cost_map import get_model_cost_map_source_info

        info = get_model_cost_map_source_info()
    except Exception:  # noqa: BLE001 - older LiteLLM: no provenance, the version still names the table
        info = {}
    revision = (info.get("source_revision") or "")[:7]
    if info.get("source") == "remote":
        loaded = (info.get("loaded_at") or "")[:10]
        return (f"LiteLLM model price map fetched from GitHub on {loaded or 'an unknown date'} "
                f"(litellm {version}{', git blob ' + revision if revision else ''})")
    return (f"LiteLLM {version} model price map (bundled copy"
            f"{', git blob ' + revision if revision else ''})")


@dataclass(frozen=True)
class ModelPrice:
    """Per-token prices of one model, in USD per token, from LiteLLM's price map.

    Attributes:
        model: the name asked for (e.g. ``openai/gpt-4o-mini``).
        key: the entry of ``litellm.model_cost`` the prices come from (e.g. ``gpt-4o-mini``).
        provider: the entry's ``litellm_provider`` (``openai``, ``anthropic``, ...).
        input: USD per prompt token not served from cache.
        output: USD per completion token.
        cache_read: USD per prompt token served from the provider's prompt cache; None
            when the map lists no cached price (cached tokens are then priced as input).
        cache_write: USD per prompt token written to the cache (Anthropic); None when
            the map lists none (priced as input).
        batch_input / batch_output / batch_cache_read: the batch prices in USD per token;
            None when there is no batch price at all.
        batch_discount: where the batch prices come from: ``"LiteLLM batch prices"``,
            ``"provider's 50% batch discount (LiteLLM lists no batch price)"``, or None
            (no batch price known).
        prompt_cache_min_tokens: the shortest prompt the provider caches, when the map
            states it (e.g. 1024 for OpenAI, 4096 for Claude Haiku 4.5); None otherwise.
    """

    model: str
    key: str
    provider: str
    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    batch_input: float | None = None
    batch_output: float | None = None
    batch_cache_read: float | None = None
    batch_discount: str | None = None
    prompt_cache_min_tokens: int | None = None

    def per_million(self, *, batch: bool = False) -> dict[str, float | None]:
        """Prices in USD per million tokens: ``input``, ``cached_input``, ``cache_write``, ``output``
        (live prices, or batch prices with `batch`; None where there is none)."""
        rates = self._rates(batch)
        return {name: None if value is None else round(value * 1e6, 6) for name, value in rates.items()}

    def _rates(self, batch: bool) -> dict[str, float | None]:
        if not batch:
            return {"input": self.input, "cached_input": _or(self.cache_read, self.input),
                    "cache_write": _or(self.cache_write, self.input), "output": self.output}
        if self.batch_input is None or self.batch_output is None:
            return {"input": None, "cached_input": None, "cache_write": None, "output": None}
        factor = self.batch_input / self.input if self.input else 1.0
        return {"input": self.batch_input,
                "cached_input": _or(self.batch_cache_read, min(_or(self.cache_read, self.input), self.batch_input)),
                "cache_write": _or(self.cache_write, self.input) * factor, "output": self.batch_output}

    def cost(self, *, prompt_tokens: int, completion_tokens: int, cached_prompt_tokens: int = 0,
             cache_write_tokens: int = 0, batch: bool = False) -> CostParts | None:
        """USD of calls with these token counts; None in batch mode when no batch price is known.

        Args:
            prompt_tokens: every prompt token, cached and written ones included (tokens).
            completion_tokens: completion tokens (tokens).
            cached_prompt_tokens: the part of `prompt_tokens` served from the provider's
                prompt cache (tokens).
            cache_write_tokens: the part of `prompt_tokens` written to the cache (tokens).
            batch: price at batch prices.
        """
        rates = self._rates(batch)
        if rates["input"] is None:
            return None
        cached = max(0, min(cached_prompt_tokens, prompt_tokens))
        written = max(0, min(cache_write_tokens, prompt_tokens - cached))
        fresh = prompt_tokens - cached - written
        return CostParts(input=fresh * rates["input"], cached_input=cached * rates["cached_input"],
                         cache_write=written * rates["cache_write"], output=completion_tokens * rates["output"])


@dataclass(frozen=True)
class CostParts:
    """USD of some calls, by kind of token (see `ModelPrice.cost`)."""

    input: float
    cached_input: float
    cache_write: float
    output: float

    @property
    def total(self) -> float:
        """The sum, in USD."""
        return self.input + self.cached_input + self.cache_write + self.output


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def _number(entry: dict, key: str) -> float | None:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


_LOOKUP_LOCK = threading.Lock()


@functools.lru_cache(maxsize=256)
def _lookup(model: str) -> ModelPrice | None:
    table = getattr(_litellm(), "model_cost", None) or {}
    provider, _, rest = model.partition("/")
    candidates: list[tuple[str, str | None]] = [(model, None)]
    if rest:
        candidates.append((rest, provider.lower()))
    for key, wanted_provider in candidates:
        entry = table.get(key)
        if not isinstance(entry, dict):
            continue
        entry_provider = str(entry.get("litellm_provider") or "")
        if wanted_provider is not None and not entry_provider.lower().startswith(wanted_provider):
            continue  # the bare name is another provider's model (e.g. azure/x vs openai's x)
        input_price, output_price = _number(entry, "input_cost_per_token"), _number(entry, "output_cost_per_token")
        if input_price is None or output_price is None:
            continue
        batch_input = _number(entry, "input_cost_per_token_batches")
        batch_output = _number(entry, "output_cost_per_token_batches")
        family = (wanted_provider or entry_provider or provider).lower()
        if batch_input is not None and batch_output is not None:
            discount = "LiteLLM batch prices"
        elif any(family.startswith(p) for p in BATCH_DISCOUNT_PROVIDERS):
            batch_input, batch_output = input_price * PROVIDER_BATCH_DISCOUNT, output_price * PROVIDER_BATCH_DISCOUNT
            discount = "provider's 50% batch discount (LiteLLM lists no batch price)"
        else:
            batch_input = batch_output = None
            discount = None
        min_tokens = entry.get("prompt_cache_min_tokens")
        return ModelPrice(
            model=model, key=key, provider=entry_provider, input=input_price, output=output_price,
            cache_read=_number(entry, "cache_read_input_token_cost"),
            cache_write=_number(entry, "cache_creation_input_token_cost"),
            batch_input=batch_input, batch_output=batch_output,
            batch_cache_read=_number(entry, "cache_read_input_token_cost_batches") if discount else None,
            batch_discount=discount,
            prompt_cache_min_tokens=int(min_tokens) if isinstance(min_tokens, int) and min_tokens > 0 else None,
        )
    return None


def model_price(model: str | None) -> ModelPrice | None:
    """The prices of a LiteLLM model id from LiteLLM's price map, or None when it has none.

    ``provider/name`` is looked up as given, then as ``name`` when that entry belongs to
    the same provider (``openai/gpt-4o-mini`` -> ``gpt-4o-mini``; ``anthropic/claude-haiku-4-5``
    -> ``claude-haiku-4-5``). `LOCAL`, None and empty names have no price.
    """
    if not model or not isinstance(model, str) or model == LOCAL:
        return None
    with _LOOKUP_LOCK:
        return _lookup(model.strip())

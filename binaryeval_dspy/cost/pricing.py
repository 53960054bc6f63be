"""What a run costs: prices from LiteLLM's model price map, applied to measured usage.

Every figure here is an estimate in US dollars (USD) from token counts and the per-token
prices in LiteLLM's model price map (``litellm.model_cost``). LiteLLM loads that map at
import: the copy bundled with the installed ``litellm`` package, or (unless
``LITELLM_LOCAL_MODEL_COST_MAP=True``) the newest one from LiteLLM's GitHub repository;
`price_source` names which one was used, with LiteLLM's version. The map is read, and
its per-token prices (live, cached, cache-write and batch) picked, in
`binaryeval_dspy.cost.price_map`; this module applies them to a run's usage.

A model the map does not price costs "unknown", never 0. The embedded llama.cpp model
runs on this machine and costs ``0 (local)``: no per-token bill (the machine's time and
power are not counted). A served model reached by base URL is "unknown" unless a
``price_model`` names a LiteLLM id to price it as (e.g. a proxy in front of OpenAI).

For the batch engineer and any caller planning a run: `estimate_cost` prices
``n_calls`` calls of a given size before any is made.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from binaryeval_dspy.cost.price_map import LOCAL, model_price, price_source

LOCAL_DISPLAY = "0 (local)"
UNKNOWN_DISPLAY = "unknown"
#: The price key of a replay run (`binaryeval_dspy.engines.replay`): nothing is sent, it costs 0.
REPLAY = "replay"
REPLAY_DISPLAY = "0 (replay)"

CostStatus = Literal["priced", "local", "unknown"]


def price_model_for_name(lm_name: str | None, *, embedded: bool | None = None) -> str | None:
    """The model to price a run as, from its LM's display name (`LMHandle.name`).

    Returns `LOCAL` for the embedded model (named ``<file>.gguf (llama.cpp)``, or
    `embedded` True), None for a served model reached by base URL (named
    ``openai/<model> @ <url>``: its price is not LiteLLM's to know), else the name itself
    (a LiteLLM id such as ``openai/gpt-4o-mini``).
    """
    if embedded or (lm_name or "").endswith("(llama.cpp)"):
        return LOCAL
    if not lm_name or " @ " in lm_name:
        return None
    return lm_name.strip()


def price_model_for_spec(spec: str, *, price_model: str | None = None) -> str | None:
    """The model to price one judge of a panel or cascade as, from its spec (`RunSettings.judges`).

    Args:
        spec: ``local`` or a ``.gguf`` path (the embedded model), a base URL and its model as
            ``URL#MODEL``, or a LiteLLM id (``openai/gpt-4o-mini``).
        price_model: the run's ``price_model`` (a LiteLLM id), or None.

    Returns:
        `LOCAL` for the embedded model; for a LiteLLM id that LiteLLM's map prices, the id
        itself; otherwise (a base URL, an id without a price) `price_model` when given, else
        the id or None, which `run_cost` reports as unknown (never 0). So `price_model` prices
        the judges that have no price of their own and leaves the others at theirs.
    """
    spec = spec.strip()
    if spec == LOCAL or spec.endswith(".gguf"):
        return LOCAL
    base = spec.partition("#")[0]
    if base.lower().startswith(("http://", "https://")):
        return price_model
    if model_price(spec) is not None:
        return spec
    return price_model or spec


def estimate_cost(n_calls: int, prompt_tokens_per_call: float, completion_tokens_per_call: float, model: str,
                  batch: bool = True, *, cached_tokens_per_call: float = 0.0) -> float | None:
    """Estimated USD of `n_calls` calls of one size to `model`, before any is made.

    Meant for refusing a submission over ``--max-cost`` (batch mode) or planning a run.

    Args:
        n_calls: how many calls (requests).
        prompt_tokens_per_call: prompt tokens of one call (tokens; cached ones included).
        completion_tokens_per_call: completion tokens of one call (tokens); use the
            completion cap (``--max-tokens``) for an upper bound.
        model: a LiteLLM model id (``openai/gpt-4o-mini``), or `LOCAL`.
        batch: price at batch prices (see `ModelPrice.batch_discount`); True by default.
        cached_tokens_per_call: prompt tokens of one call expected from the provider's
            prompt cache (tokens); 0 by default.

    Returns:
        USD; 0.0 for `LOCAL`; None when the model has no price in LiteLLM's map, or no
        batch price when `batch` is True.
    """
    if model == LOCAL:
        return 0.0
    price = model_price(model)
    if price is None:
        return None
    parts = price.cost(prompt_tokens=round(n_calls * prompt_tokens_per_call),
                       completion_tokens=round(n_calls * completion_tokens_per_call),
                       cached_prompt_tokens=round(n_calls * cached_tokens_per_call), batch=batch)
    return None if parts is None else parts.total


class RunCost(BaseModel):
    """The estimated cost of a run's LM calls, as saved in ``summary.json``.

    Attributes:
        status: ``priced`` (a USD figure), ``local`` (the embedded model: 0, no bill) or
            ``unknown`` (no price for the model in LiteLLM's map, or a served model).
        display: the figure as printed: ``$0.0421``, ``0 (local)`` or ``unknown``.
        usd: total USD (None when unknown; 0.0 when local).
        usd_per_item: `usd` divided by the run's items (None when unknown).
        model: the model the run was priced as (a LiteLLM id, ``local``, or None).
        price_key: the entry of LiteLLM's map whose prices were used.
        mode: ``live`` (per-call prices) or ``batch`` (batch prices).
        input_usd / cached_input_usd / cache_write_usd / output_usd: the USD of prompt
            tokens not from cache, from cache, written to cache, and of completion tokens.
        usd_per_million_tokens: the prices used, USD per million tokens
            (``input``, ``cached_input``, ``cache_write``, ``output``).
        batch_discount: where batch prices came from (batch mode only).
        source: the price table (`price_source`), or why there is no price.
        note: what the estimate leaves out or assumes.
    """

    model_config = ConfigDict(extra="forbid")

    status: CostStatus
    display: str
    usd: float | None = None
    usd_per_item: float | None = None
    model: str | None = None
    price_key: str | None = None
    mode: Literal["live", "batch"] = "live"
    input_usd: float | None = None
    cached_input_usd: float | None = None
    cache_write_usd: float | None = None
    output_usd: float | None = None
    usd_per_million_tokens: dict[str, float | None] = Field(default_factory=dict)
    batch_discount: str | None = None
    source: str = ""
    note: str | None = None


def format_usd(usd: float) -> str:
    """``$1.23`` for a dollar or more, 4 significant digits below (``$0.004213``)."""
    if usd == 0:
        return "$0"
    if usd >= 1:
        return f"${usd:,.2f}"
    return f"${usd:.4g}" if usd >= 1e-4 else f"${usd:.2e}"


def run_cost(*, prompt_tokens: int, completion_tokens: int, cached_prompt_tokens: int = 0, cache_write_tokens: int = 0,
             items: int = 0, model: str | None, batch: bool = False) -> RunCost:
    """Price a run's measured usage (tokens) at `model`'s prices (USD).

    Args:
        prompt_tokens / completion_tokens / cached_prompt_tokens / cache_write_tokens:
            the run's token counts (tokens; cached and written tokens are part of
            `prompt_tokens`).
        items: the run's items, for the per-item figure.
        model: a LiteLLM id, `LOCAL`, `REPLAY` (nothing sent: 0), or None (a served model: unknown).
        batch: price at batch prices.

    Returns:
        A `RunCost`; ``unknown`` (never 0) when there is no price.
    """
    mode: Literal["live", "batch"] = "batch" if batch else "live"
    if model == REPLAY:
        return RunCost(status="local", display=REPLAY_DISPLAY, usd=0.0, usd_per_item=0.0, model=REPLAY, mode=mode,
                       source="a replay sends no request: its answers come from a verdicts file",
                       note="what the recorded answers cost is the verdicts file's cost_usd")
    if model == LOCAL:
        return RunCost(status="local", display=LOCAL_DISPLAY, usd=0.0, usd_per_item=0.0, model=LOCAL, mode=mode,
                       source="the embedded model runs on this machine",
                       note="no per-token bill; the machine's time and power are not counted")
    if model is None:
        return RunCost(status="unknown", display=UNKNOWN_DISPLAY, mode=mode,
                       source="a served model reached by base URL has no price in LiteLLM's map",
                       note="price it as a hosted model with `price_model` MODEL (a LiteLLM id)")
    price = model_price(model)
    if price is None:
        return RunCost(status="unknown", display=UNKNOWN_DISPLAY, model=model, mode=mode,
                       source=f"{price_source()}: no price for {model}")
    parts = price.cost(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                       cached_prompt_tokens=cached_prompt_tokens, cache_write_tokens=cache_write_tokens, batch=batch)
    if parts is None:
        return RunCost(status="unknown", display=UNKNOWN_DISPLAY, model=model, price_key=price.key, mode=mode,
                       source=f"{price_source()}: no batch price for {model}")
    notes = []
    if cached_prompt_tokens and price.cache_read is None:
        notes.append("cached prompt tokens priced as input (no cached price in the map)")
    if cache_write_tokens and price.cache_write is None:
        notes.append("cache-write tokens priced as input (no cache-write price in the map)")
    total = parts.total
    return RunCost(
        status="priced", display=format_usd(total), usd=total, usd_per_item=total / items if items else None,
        model=model, price_key=price.key, mode=mode, input_usd=parts.input, cached_input_usd=parts.cached_input,
        cache_write_usd=parts.cache_write, output_usd=parts.output,
        usd_per_million_tokens=price.per_million(batch=batch),
        batch_discount=price.batch_discount if batch else None, source=price_source(),
        note="; ".join(notes) or None,
    )


def cost_line(cost: RunCost | None) -> str | None:
    """One line for a summary: ``Estimated cost: $0.0421 ($0.0042 per item) at gpt-4o-mini's
    prices (LiteLLM ...)``, ``Estimated cost: 0 (local) ...`` or ``Estimated cost: unknown ...``;
    None without a cost."""
    if cost is None:
        return None
    if cost.status == "local":  # the embedded model, or a replay (its own display: "0 (replay)")
        return f"Estimated cost: {cost.display or LOCAL_DISPLAY} ({cost.source}; {cost.note})."
    if cost.status == "unknown":
        why = cost.source + (f"; {cost.note}" if cost.note else "")
        return f"Estimated cost: {UNKNOWN_DISPLAY} ({why})."
    per_item = f", {format_usd(cost.usd_per_item)} per item" if cost.usd_per_item is not None else ""
    parts = [f"input {format_usd(cost.input_usd or 0)}"]
    if cost.cached_input_usd:
        parts.append(f"cached input {format_usd(cost.cached_input_usd)}")
    if cost.cache_write_usd:
        parts.append(f"cache writes {format_usd(cost.cache_write_usd)}")
    parts.append(f"output {format_usd(cost.output_usd or 0)}")
    batch = f" (batch: {cost.batch_discount})" if cost.mode == "batch" else ""
    note = f" Note: {cost.note}." if cost.note else ""
    return (f"Estimated cost: {cost.display}{per_item} ({', '.join(parts)}) at {cost.price_key}'s prices{batch}; "
            f"{cost.source}.{note}")


__all__ = [
    "LOCAL_DISPLAY",
    "UNKNOWN_DISPLAY",
    "CostStatus",
    "RunCost",
    "cost_line",
    "estimate_cost",
    "format_usd",
    "price_model_for_name",
    "price_model_for_spec",
    "run_cost",
]

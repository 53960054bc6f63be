"""The run's LM from the shared options (`build_lm`), and what a manifest and summary say about it.

The CLI's other shared helpers live by job, and are re-exported here for the commands:
options and their values in `binaryeval_dspy.cli.options`, consoles in
`binaryeval_dspy.cli.console`, error exits in `binaryeval_dspy.cli.error_handling`,
file arguments in `binaryeval_dspy.cli.file_arguments`. Commands stay thin: parse,
call, render.
"""

from __future__ import annotations

from rich.markup import escape

from binaryeval_dspy.cli.console import PIPED_WIDTH, console, out_console, quiet_libraries
from binaryeval_dspy.cli.error_handling import friendly_errors, leave_after_interrupt
from binaryeval_dspy.cli.file_arguments import (
    check_writable_file,
    file_kind,
    load_question_set_and_items,
    slug,
    swapped_arguments_error,
)
from binaryeval_dspy.cli.options import (
    ADAPTER_POLICIES,
    adapter_policy,
    check_scale,
    checks_module_option,
    cost_settings,
    llama_threads,
    llama_threads_option,
    lm_options,
    load_checks_modules,
    remember_adapter,
    remember_llama_threads,
    remember_timeout,
    request_timeout,
    run_options,
)
from binaryeval_dspy.errors import LMConfigError
from binaryeval_dspy.lm.factory import LMHandle, check_provider_key, make_lm
from binaryeval_dspy.lm.provider_keys import check_endpoint_address


def build_lm(lm_spec: str, lm_model: str | None, api_key_env: str | None, max_tokens: int,
             option: str = "--lm") -> LMHandle:
    """Make the LM, telling the user when the embedded model is being loaded.

    The adapter policy, request timeout and llama.cpp thread count come from the
    command's ``--adapter``, ``--timeout`` and ``--llama-threads`` options
    (`adapter_policy`, `request_timeout`, `llama_threads`). A LiteLLM id whose provider
    key LiteLLM reports missing is refused here, before any item is judged
    (`check_provider_key`), and so is a base URL where nothing listens
    (`check_endpoint_address`).

    Args:
        option: the CLI option `lm_spec` came from (``--prompt-lm``, ``--source-lm``),
            named in errors instead of ``--lm``.

    Raises:
        LMConfigError: as `make_lm`, a missing provider key, or a base URL refusing
            connections or naming an unknown host, with `option` named.
    """
    check_provider_key(lm_spec, option)
    embedded = lm_spec == "local" or lm_spec.endswith(".gguf")
    threads = llama_threads() if embedded else None
    extra = {"llama_threads": threads} if threads else {}
    try:
        handle = make_lm(lm_spec, model=lm_model, api_key_env=api_key_env, max_tokens=max_tokens,
                         adapter=adapter_policy(), timeout=None if embedded else request_timeout(), **extra)
    except LMConfigError as exc:
        if option == "--lm":
            raise
        message = str(exc)
        message = option + message.removeprefix("--lm") if message.startswith("--lm ") else f"{option}: {message}"
        raise LMConfigError(message) from exc
    check_endpoint_address(lm_spec, option)  # after make_lm: a malformed value gets make_lm's own message
    if embedded:
        choice = handle.engine.thread_choice if handle.engine is not None else None
        on = f"; {choice.reason}" if choice is not None else ""
        console.print(f"[dim]Using the embedded model ({escape(lm_spec)}{escape(on)}); it runs offline and is too "
                      "small to judge well - pass --lm for real evaluations.[/dim]")
    if option == "--lm":
        apply_cost_settings(handle)
    return handle


def apply_cost_settings(handle: LMHandle) -> LMHandle:
    """Put the command's --price-model, --warm-prefix, --cache-padding and --max-cost on `handle`
    (`LMHandle.price_model`, ``warm_prefix``, ``cache_padding``, ``cost_budget``), where runs read them.

    Raises:
        LMConfigError: --max-cost for an LM without a price (see `CostBudget.for_model`), or a
            --price-model LiteLLM's price map does not know.
    """
    from binaryeval_dspy.lm.cost_budget import CostBudget

    settings = cost_settings()
    if settings["price_model"]:
        from binaryeval_dspy.lm.pricing import model_price, price_source

        handle.price_model = str(settings["price_model"]).strip()
        if model_price(handle.price_model) is None:
            raise LMConfigError(f"--price-model {handle.price_model}: no price for it in {price_source()}.",
                                fix="name a model of LiteLLM's price map, e.g. gpt-4o-mini or "
                                    "anthropic/claude-haiku-4-5.")
    if settings["warm_prefix"] is not None:
        handle.warm_prefix = bool(settings["warm_prefix"])
    if settings["cache_padding"] is not None:
        handle.cache_padding = str(settings["cache_padding"])
    if settings["max_cost"] is not None:
        handle.cost_budget = CostBudget.for_model(float(settings["max_cost"]), handle.priced_as())
    return handle


def endpoint_config(handle: LMHandle) -> dict[str, object]:
    """What a run's manifest records about how its LM is reached (never a key), the
    ``--cache-padding`` policy (what it padded is added after the run: `padding_note`) and,
    for the embedded model, its llama.cpp thread count and why it was chosen
    (`ThreadChoice.as_dict`)."""
    threads = handle.engine.thread_choice.as_dict() if handle.engine is not None else {}
    return {"adapter": handle.adapter_name, "adapter_reason": handle.adapter_reason,
            "cache_identity": handle.cache_identity, "cache_padding": handle.cache_padding, **threads}


def padding_note(stats: dict[str, object] | None) -> str | None:
    """One line on the items whose prompt prefix was padded for the provider's cache (from
    `CachePadding.stats`), or None when none was."""
    if not stats or not stats.get("padded_items"):
        return None
    padded, seen = int(stats["padded_items"]), int(stats.get("items_seen") or 0)  # type: ignore[call-overload]
    filler = int(stats.get("filler_tokens") or 0) / padded  # type: ignore[call-overload]
    return (f"cache padding: {padded} of {seen} item prompt prefix(es) padded to the {stats['minimum']:,}-token cache "
            f"minimum of {stats['model']} ({filler:,.0f} filler tokens per call on average; --cache-padding off to "
            "stop)")


def adapter_note(handle: LMHandle) -> str | None:
    """One line on adapter trouble during the run (fallbacks, schema-form retries, unparsed
    replies), or None when there was none."""
    stats = handle.adapter_stats
    if stats is None:
        return None
    counts = stats.as_dict()
    parts = []
    if counts.get("fallback_calls"):
        parts.append(f"{counts['fallback_calls']} second calls in another format")
    if counts.get("format_retries"):
        dialect = getattr(handle.lm, "schema_dialect", None)
        parts.append(f"{counts['format_retries']} request(s) re-sent after the server refused the schema form"
                     + (f" (now sending the {dialect} form)" if dialect else ""))
    if counts.get("parse_failures"):
        parts.append(f"{counts['parse_failures']} replies that did not parse (recorded as unparsed)")
    return f"{handle.adapter_name} adapter: " + "; ".join(parts) if parts else None


__all__ = [
    "ADAPTER_POLICIES", "PIPED_WIDTH", "adapter_note", "adapter_policy", "apply_cost_settings", "build_lm",
    "check_scale", "check_writable_file", "checks_module_option", "console", "cost_settings", "endpoint_config",
    "file_kind", "friendly_errors", "leave_after_interrupt", "llama_threads", "llama_threads_option", "lm_options",
    "load_checks_modules", "load_question_set_and_items", "out_console", "padding_note", "quiet_libraries",
    "remember_adapter", "remember_llama_threads", "remember_timeout", "request_timeout", "run_options", "slug",
    "swapped_arguments_error",
]

"""The run's LM from the shared options (`build_lm`), and what a manifest and summary say about it.

The CLI's other shared helpers live by job: options and run settings in
`binaryeval_dspy.cli.options`, consoles in `binaryeval_dspy.cli.console`, error exits in
`binaryeval_dspy.cli.error_handling`, file arguments in `binaryeval_dspy.cli.file_arguments`.
Commands import each from its module and stay thin: parse, call, render.
"""

from __future__ import annotations

from rich.markup import escape

from binaryeval_dspy.cli.console import console
from binaryeval_dspy.cli.error_handling import with_flag_names
from binaryeval_dspy.errors import LMConfigError
from binaryeval_dspy.lm.factory import LMHandle, make_lm
from binaryeval_dspy.lm.provider_keys import check_endpoint_address, check_provider_key
from binaryeval_dspy.settings import RunSettings


def build_lm(lm_spec: str, lm_model: str | None, api_key_env: str | None, max_tokens: int,
             settings: RunSettings | None = None, option: str = "--lm") -> LMHandle:
    """Make the LM, telling the user when the embedded model is being loaded.

    The adapter policy, request timeout and llama.cpp thread count come from `settings`
    (the command's ``--adapter``, ``--timeout`` and ``--llama-threads``). A LiteLLM id
    whose provider key LiteLLM reports missing is refused here, before any item is judged
    (`check_provider_key`), and so is a base URL where nothing listens
    (`check_endpoint_address`), and a ``price_model`` LiteLLM's price map does not know.
    With the ``replay`` engine no LM is made: the handle names the replayed judge
    (`binaryeval_dspy.engines.replay.replay_handle`) and `lm_spec` is not used. With
    `judges` (a panel or cascade) the handle is the first judge's LM, named after the panel
    or cascade (`binaryeval_dspy.programs.judge_panel.ensemble_name`); `lm_spec` is not used.

    Args:
        settings: the command's run settings (None: the defaults).
        option: the CLI option `lm_spec` came from (``--prompt-lm``, ``--source-lm``),
            named in errors instead of ``--lm``.

    Raises:
        LMConfigError: as `make_lm`, a missing provider key, a base URL refusing
            connections or naming an unknown host, with `option` named, or an unknown
            ``--price-model``.
    """
    settings = settings or RunSettings()
    if option == "--lm" and (settings.engine == "replay" or settings.judges):
        from binaryeval_dspy.programs.judge_panel import ensemble_name

        if settings.engine == "replay":  # no LM: every answer comes from the verdicts file
            from binaryeval_dspy.engines.base import replay_verdicts
            from binaryeval_dspy.engines.replay import replay_handle

            return replay_handle(replay_verdicts(settings), judge_name=ensemble_name(settings))
        # a panel or cascade: the run is named after it; its first judge stands for the run's LM
        from binaryeval_dspy.engines.base import ensemble_handle, judge_error

        for spec in settings.judges:
            try:
                check_provider_key(spec.partition("#")[0])
            except LMConfigError as exc:
                raise judge_error(spec, exc) from exc
        return ensemble_handle(settings, name=ensemble_name(settings) or settings.judges[0])
    embedded = lm_spec == "local" or lm_spec.endswith(".gguf")
    threads = settings.llama_threads if embedded else None
    extra = {"llama_threads": threads} if threads else {}
    try:
        check_provider_key(lm_spec)
        handle = make_lm(lm_spec, model=lm_model, api_key_env=api_key_env, max_tokens=max_tokens,
                         adapter=settings.adapter, timeout=None if embedded else settings.timeout, **extra)
        check_endpoint_address(lm_spec)  # after make_lm: a malformed value gets make_lm's own message
    except LMConfigError as exc:
        if option == "--lm":
            raise  # `spec` becomes --lm where the error is shown (friendly_errors)
        message = str(exc) if "`spec`" in str(exc) else f"{option}: {exc}"
        raise LMConfigError(with_flag_names(message, {"spec": option})) from exc
    if embedded:
        choice = handle.engine.thread_choice if handle.engine is not None else None
        on = f"; {choice.reason}" if choice is not None else ""
        console.print(f"[dim]Using the embedded model ({escape(lm_spec)}{escape(on)}); it runs offline and is too "
                      "small to judge well - pass --lm for real evaluations.[/dim]")
    if option == "--lm" and settings.price_model:
        from binaryeval_dspy.cost.price_map import model_price, price_source

        if model_price(settings.price_model) is None:
            raise LMConfigError(f"--price-model {settings.price_model}: no price for it in {price_source()}.",
                                fix="name a model of LiteLLM's price map, e.g. gpt-4o-mini or "
                                    "anthropic/claude-haiku-4-5.")
    return handle


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

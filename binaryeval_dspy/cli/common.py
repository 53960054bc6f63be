"""Options and helpers shared by the CLI commands (kept thin: parse, call, render)."""

from __future__ import annotations

import functools
import logging
import math
import os
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from binaryeval_dspy.errors import BinEvalError, InputError, LMConfigError
from binaryeval_dspy.lm.adapters import ADAPTER_POLICIES
from binaryeval_dspy.lm.factory import LMHandle, check_provider_key, make_lm

PIPED_WIDTH = 200  # rich assumes 80 columns without a terminal, which cuts wide tables to "QAGS…"


def _stdout_console() -> Console:
    """Tables go to stdout; when it is a file or a pipe (and $COLUMNS is unset), use
    `PIPED_WIDTH` columns so that saved output keeps whole headers and numbers."""
    plain = Console()
    if plain.is_terminal or os.environ.get("COLUMNS"):
        return plain
    return Console(width=PIPED_WIDTH)


console = Console(stderr=True)
out_console = _stdout_console()


_ADAPTER_KEY = "bineval_adapter"
_TIMEOUT_KEY = "bineval_timeout"
_LLAMA_THREADS_KEY = "bineval_llama_threads"


def remember_adapter(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """Keep --adapter in the command's context, where `build_lm` reads it."""
    ctx.meta[_ADAPTER_KEY] = value
    return value


def remember_timeout(ctx: click.Context, _param: click.Parameter, value: float | None) -> float | None:
    """Keep --timeout in the command's context, where `build_lm` reads it."""
    ctx.meta[_TIMEOUT_KEY] = value
    return value


def remember_llama_threads(ctx: click.Context, _param: click.Parameter, value: int | None) -> int | None:
    """Keep --llama-threads in the command's context, where `build_lm` reads it."""
    ctx.meta[_LLAMA_THREADS_KEY] = value
    return value


def llama_threads() -> int | None:
    """The --llama-threads value of the running command (None: $BINEVAL_LLAMA_THREADS, else every core)."""
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(_LLAMA_THREADS_KEY) if ctx is not None else None


def llama_threads_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add --llama-threads (CPU threads of the embedded llama.cpp model), read by `build_lm`."""
    return click.option(
        "--llama-threads", "llama_threads", type=click.IntRange(min=1), default=None, expose_value=False,
        callback=remember_llama_threads,
        help="CPU threads of the embedded llama.cpp model (default: $BINEVAL_LLAMA_THREADS, else every core). "
             "1 is much faster on a busy machine, where llama.cpp's threads wait on each other. No effect on "
             "served or hosted models.")(func)


def request_timeout() -> float | None:
    """The --timeout value of the running command (None: the client's default)."""
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(_TIMEOUT_KEY) if ctx is not None else None


def adapter_policy() -> str:
    """The --adapter value of the running command ("auto" outside a command)."""
    ctx = click.get_current_context(silent=True)
    value = ctx.meta.get(_ADAPTER_KEY) if ctx is not None else None
    return str(value) if value else "auto"


_MAX_COST_KEY = "bineval_max_cost"
_WARM_PREFIX_KEY = "bineval_warm_prefix"
_PRICE_MODEL_KEY = "bineval_price_model"


def _remember(key: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def callback(ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
        ctx.meta[key] = value
        return value

    return callback


def cost_settings() -> dict[str, Any]:
    """The running command's --max-cost (USD or None), --warm-prefix (True, False or None for
    the default) and --price-model (a LiteLLM id or None); all None outside such a command."""
    ctx = click.get_current_context(silent=True)
    meta = ctx.meta if ctx is not None else {}
    return {"max_cost": meta.get(_MAX_COST_KEY), "warm_prefix": meta.get(_WARM_PREFIX_KEY),
            "price_model": meta.get(_PRICE_MODEL_KEY)}


def run_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add --concurrency (alias --threads), --fail-on-errors, --no-explanations, and the cost
    options --max-cost, --warm-prefix/--no-warm-prefix and --price-model (read by `build_lm`)."""
    decorators = [
        click.option("--concurrency", "--threads", "concurrency", default=1, show_default=True,
                     type=click.IntRange(min=1),
                     help="LM calls in flight across items and questions (served and hosted models; 8-64 is "
                          "typical). The embedded model always runs one call at a time."),
        click.option("--fail-on-errors", is_flag=True,
                     help="Stop at the first item with a failed LM call and exit with status 1. Without it the "
                          "run finishes the other items, stores incomplete ones with their answers, and a rerun "
                          "asks only the questions that failed."),
        click.option("--no-explanations", "no_explanations", is_flag=True,
                     help="Ask for the verdict alone (no explanation): about 3x faster on a small model, fewer "
                          "tokens everywhere; P(yes) is still recorded when the LM returns log-probabilities."),
        click.option("--max-cost", "max_cost", type=click.FloatRange(min=0, min_open=True), default=None,
                     metavar="USD", expose_value=False, callback=_remember(_MAX_COST_KEY),
                     help="Stop before the estimated cost of this command's LM calls passes USD (prices from "
                          "LiteLLM's price map; checked before each call with the mean cost per call so far). "
                          "Everything judged is stored; exit status 1. See docs/cost.md."),
        click.option("--warm-prefix/--no-warm-prefix", "warm_prefix", default=None, expose_value=False,
                     callback=_remember(_WARM_PREFIX_KEY),
                     help="Send each item's first question alone and the rest after it, so the provider's prompt "
                          "cache is written before the others read it. Default: on for hosted models (a LiteLLM "
                          "id) with --concurrency > 1."),
        click.option("--price-model", "price_model", default=None, metavar="MODEL", expose_value=False,
                     callback=_remember(_PRICE_MODEL_KEY),
                     help="Estimate cost at this LiteLLM model's prices (e.g. gpt-4o-mini), e.g. for a base URL "
                          "that proxies a hosted model. Default: the --lm model's own prices."),
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def lm_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add --lm, --lm-model, --api-key-env, --max-tokens, --timeout, --adapter and
    --llama-threads to a command."""
    decorators = [
        click.option("--lm", "lm_spec", default="local", show_default=True,
                     help="'local' (embedded SmolLM2-135M), a .gguf path, a LiteLLM id "
                          "(openai/gpt-4o-mini, ollama_chat/llama3.1, ...) or an http(s) base URL."),
        click.option("--lm-model", default=None, help="Model name served at a base URL given as --lm."),
        click.option("--api-key-env", default=None,
                     help="Environment variable holding the key for a base URL (the key is never logged)."),
        click.option("--max-tokens", default=512, show_default=True, type=click.IntRange(min=16),
                     help="Completion cap per LM call."),
        click.option("--timeout", "request_timeout", type=click.FloatRange(min=0, min_open=True), default=None,
                     expose_value=False, callback=remember_timeout,
                     help="Seconds one request to a served or hosted model may take before it fails (it is then "
                          "retried; a call that still fails is an 'error' verdict). Default: LiteLLM's, 600."),
        click.option("--adapter", type=click.Choice(ADAPTER_POLICIES), default="auto", show_default=True,
                     expose_value=False, callback=remember_adapter, is_eager=True,
                     help="How prompts and replies are formatted. 'auto': JSON with schema-constrained output "
                          "where the endpoint supports it (OpenAI, vLLM, llama.cpp server, embedded models), "
                          "chat fields otherwise. 'json' or 'chat' force one. Never retried in the other format."),
        llama_threads_option,
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def build_lm(lm_spec: str, lm_model: str | None, api_key_env: str | None, max_tokens: int,
             option: str = "--lm") -> LMHandle:
    """Make the LM, telling the user when the embedded model is being loaded.

    The adapter policy, request timeout and llama.cpp thread count come from the
    command's ``--adapter``, ``--timeout`` and ``--llama-threads`` options
    (`adapter_policy`, `request_timeout`, `llama_threads`). A LiteLLM id whose provider
    key LiteLLM reports missing is refused here, before any item is judged
    (`check_provider_key`).

    Args:
        option: the CLI option `lm_spec` came from (``--prompt-lm``, ``--source-lm``),
            named in errors instead of ``--lm``.

    Raises:
        LMConfigError: as `make_lm`, or a missing provider key, with `option` named.
    """
    check_provider_key(lm_spec, option)
    embedded = lm_spec == "local" or lm_spec.endswith(".gguf")
    threads = llama_threads() if embedded else None
    if embedded:
        on = f", {threads} llama.cpp thread(s)" if threads else ""
        console.print(f"[dim]Using the embedded model ({escape(lm_spec)}{on}); it runs offline and is too small "
                      "to judge well - pass --lm for real evaluations.[/dim]")
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
    if option == "--lm":
        apply_cost_settings(handle)
    return handle


def apply_cost_settings(handle: LMHandle) -> LMHandle:
    """Put the command's --price-model, --warm-prefix and --max-cost on `handle`
    (`LMHandle.price_model`, ``warm_prefix``, ``cost_budget``), where runs read them.

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
            raise LMConfigError(f"--price-model {handle.price_model}: no price for it in {price_source()}. Fix: "
                                "name a model of LiteLLM's price map, e.g. gpt-4o-mini or anthropic/claude-haiku-4-5.")
    if settings["warm_prefix"] is not None:
        handle.warm_prefix = bool(settings["warm_prefix"])
    if settings["max_cost"] is not None:
        handle.cost_budget = CostBudget.for_model(float(settings["max_cost"]), handle.priced_as())
    return handle


def slug(text: str) -> str:
    """A file-name-safe version of `text` (used for default run directories)."""
    return re.sub(r"[^A-Za-z0-9_.\-]+", "-", text).strip("-")[:60] or "run"


def friendly_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn project errors into a one-line red message and exit code 2, Ctrl-C into 130."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except BinEvalError as exc:
            console.print(f"[bold red]error:[/bold red] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise SystemExit(2) from exc
        except KeyboardInterrupt as exc:
            console.print("[yellow]Interrupted.[/yellow]")
            raise SystemExit(130) from exc
        except OSError as exc:  # a path that cannot be read or written (--out is a file, no permission, ...)
            where = f"{exc.filename}: " if exc.filename else ""
            console.print(f"[bold red]error:[/bold red] {escape(where + (exc.strerror or str(exc)))}. Fix: check "
                          "that the path exists, is of the right kind (file or folder) and is writable; results "
                          "already stored are kept.", highlight=False, soft_wrap=True)
            raise SystemExit(2) from exc

    return wrapper


def check_scale(scale: tuple[float, float]) -> tuple[float, float]:
    """Validate --scale A B: two finite, different numbers.

    Raises:
        InputError: otherwise.
    """
    low, high = scale
    if not all(math.isfinite(v) for v in (low, high)) or low == high:
        raise InputError(f"--scale needs two different finite numbers, got {low} {high}",
                         field="--scale", fix="e.g. --scale 1 5 for a 1-5 Likert scale.")
    return float(low), float(high)


def check_writable_file(path: Path) -> None:
    """Fail early (before any LM call) if `path` cannot be written as a file.

    Raises:
        InputError: it is a directory, or its folder cannot be created or written.
    """
    if path.is_dir():
        raise InputError("is a directory; a file path is needed", path=path, fix="give a file name such as questions.json.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the folder ({exc.strerror})", path=path.parent) from exc
    if not os.access(path.parent, os.W_OK):
        raise InputError("the folder is not writable", path=path.parent)


def leave_after_interrupt(code: int = 130, grace_seconds: float = 3.0) -> None:
    """Exit with `code` after Ctrl-C / SIGTERM, without waiting long for calls in flight.

    The item loop's worker threads (``bineval-call-*``) may sit in a request to a hung
    endpoint until its timeout (LiteLLM's default: 600 s) and DSPy's retries end, and
    Python waits for them before exiting. Results are already stored and the run
    directory released when this is called, so after `grace_seconds` the process ends
    without them. With no worker thread busy this is a plain ``SystemExit(code)``.

    Raises:
        SystemExit: always.
    """
    busy = [t for t in threading.enumerate() if t.name.startswith("bineval-call") and t.is_alive()]
    if busy:
        console.print(f"[dim]{len(busy)} LM call(s) still in flight are abandoned; their items are asked again on "
                      "the next run.[/dim]")

        def _quit() -> None:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

        timer = threading.Timer(grace_seconds, _quit)
        timer.daemon = True
        timer.start()
    raise SystemExit(code)


def endpoint_config(handle: LMHandle) -> dict[str, object]:
    """What a run's manifest records about how its LM is reached (never a key)."""
    return {"adapter": handle.adapter_name, "adapter_reason": handle.adapter_reason,
            "cache_identity": handle.cache_identity}


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


def quiet_libraries() -> None:
    """Keep LiteLLM / httpx chatter out of the progress display."""
    for name in ("LiteLLM", "litellm", "httpx", "dspy"):
        logging.getLogger(name).setLevel(logging.ERROR)


def checks_module_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add --checks-module (repeatable): Python files or modules that register user checks."""
    return click.option(
        "--checks-module", "checks_modules", multiple=True, metavar="FILE.py|MODULE",
        help="Import this file (or dotted module) before loading the question set, so the checks it "
             "registers with @register_check can be named in the set. Repeatable. Only modules named "
             "here are ever imported; a question-set file cannot import code.",
    )(func)


def load_checks_modules(specs: tuple[str, ...] | list[str]) -> list[dict[str, str | None]]:
    """Import each checks module; returns [{"module": spec, "sha256": 16-hex fingerprint or None}].

    Raises:
        InputError: a module is missing or fails to import (named in the message).
    """
    from binaryeval_dspy.checks import load_checks_module, module_fingerprint

    loaded = []
    for spec in specs:
        load_checks_module(spec)
        loaded.append({"module": spec, "sha256": module_fingerprint(spec)})
    return loaded


_SNIFF_BYTES = 20_000_000  # a question set is small; a larger .json is not read whole to be sniffed


def file_kind(path: Path) -> str | None:
    """What a file given as an argument looks like: ``"question_set"`` (a JSON object
    with a ``questions`` list), ``"items"`` (.csv, or JSON Lines: a first line that is a
    JSON object without ``questions``), or None (unreadable, missing, or neither)."""
    import json

    path = Path(path)
    try:
        if not path.is_file():
            return None
        if path.suffix.lower() == ".csv":
            return "items"
        with path.open(encoding="utf-8-sig", errors="replace") as handle:
            first = next((line for line in handle if line.strip()), "")
        try:
            row = json.loads(first)
        except ValueError:
            row = None
        if isinstance(row, dict):  # a one-line file: a whole question set or one item
            return "question_set" if isinstance(row.get("questions"), list) else "items"
        if path.stat().st_size <= _SNIFF_BYTES:
            try:
                data = json.loads(path.read_text(encoding="utf-8-sig", errors="replace"))
            except (ValueError, RecursionError):
                data = None
            if isinstance(data, dict) and isinstance(data.get("questions"), list):
                return "question_set"
        return "items" if path.suffix.lower() == ".jsonl" else None
    except OSError:
        return None


def swapped_arguments_error(question_set_file: Path, items_file: Path,
                            command: str = "bineval evaluate") -> InputError | None:
    """An `InputError` naming the mix-up when QUESTION_SET_FILE looks like an items file
    (and ITEMS_FILE like a question set: the two are swapped), or ITEMS_FILE looks like a
    question set; None when neither does. Called when loading one of them failed, so a
    file that loads is never second-guessed."""
    given_set, given_items = file_kind(question_set_file), file_kind(items_file)
    order = f"the order is {command} QUESTION_SET_FILE ITEMS_FILE"
    if given_set == "items" and given_items == "question_set":
        return InputError(
            f"the two files look swapped: {question_set_file} (given as QUESTION_SET_FILE) holds items, and "
            f"{items_file} (given as ITEMS_FILE) is a question set",
            fix=f"swap them: {command} {items_file} {question_set_file} ... (the question set comes first).")
    if given_set == "items":
        return InputError(
            f"{question_set_file} is given as QUESTION_SET_FILE but holds items (one JSON object or CSV row per "
            "item), not a question set",
            fix=f"{order}; make a question set with `bineval questions`.")
    if given_items == "question_set":
        return InputError(
            f"{items_file} is given as ITEMS_FILE but is a question set (a JSON object with 'questions'), not "
            "items", fix=f"{order}; the items are a .jsonl or .csv file with one item per line or row.")
    return None


def load_question_set_and_items(question_set_file: Path, items_file: Path, **item_options: Any) -> tuple[Any, list]:
    """Load QUESTION_SET_FILE and ITEMS_FILE, naming swapped or misplaced arguments.

    Args:
        question_set_file: the question-set JSON given first.
        items_file: the items file given second.
        **item_options: passed to `binaryeval_dspy.data.items.load_items`.

    Returns:
        (the `QuestionSet`, the items).

    Raises:
        InputError: one of the files does not load; when it looks like the other kind
            of file (the arguments swapped), the message says so instead of the
            loader's own.
    """
    from binaryeval_dspy.data.items import load_items
    from binaryeval_dspy.schemas.question_set import QuestionSet

    try:
        question_set = QuestionSet.load(question_set_file)
    except InputError as exc:
        swapped = swapped_arguments_error(question_set_file, items_file)
        if swapped is not None:
            raise swapped from exc
        raise
    try:
        items = load_items(items_file, **item_options)
    except InputError as exc:
        swapped = swapped_arguments_error(question_set_file, items_file)
        if swapped is not None:
            raise swapped from exc
        raise
    return question_set, items

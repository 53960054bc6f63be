"""Options shared by the commands: the click decorators and where the running command keeps their values.

`lm_options` and `run_options` add the LM and run options; `with_run_settings` gathers
the run options into one `binaryeval_dspy.settings.RunSettings` that the command receives
as ``settings`` and passes down explicitly (to `build_lm` and the run).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import click

from binaryeval_dspy.cost.cache_padding import CACHE_PADDING_POLICIES
from binaryeval_dspy.errors import InputError
from binaryeval_dspy.lm.adapters import ADAPTER_POLICIES
from binaryeval_dspy.settings import ENGINES, RunSettings

#: Command parameters that make up a `RunSettings` (parameter name -> settings field).
SETTING_PARAMS = {
    "engine": "engine", "ray_address": "ray_address", "concurrency": "concurrency",
    "fail_on_errors": "fail_on_errors", "request_timeout": "timeout", "adapter": "adapter",
    "llama_threads": "llama_threads", "max_cost": "max_cost", "warm_prefix": "warm_prefix",
    "cache_padding": "cache_padding", "price_model": "price_model", "replay_verdicts": "replay_verdicts",
    "replay_judge": "replay_judge", "judges": "judges", "panel_rule": "panel_rule", "panel_weights": "panel_weights", "cascade": "cascade",
    "cascade_band": "cascade_band",
}


def with_run_settings(func: Callable[..., Any]) -> Callable[..., Any]:
    """Gather the command's run options (`SETTING_PARAMS`) into one `RunSettings`, passed to
    the command as ``settings``; the command never sees them one by one.

    Put it right above the command function (below the option decorators and
    `friendly_errors`), so a bad combination is reported like any other error.

    Raises:
        ConfigError: the options do not make valid settings (the field is named;
            `friendly_errors` shows it with the flag's name).
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        given = {field: kwargs.pop(param) for param, field in SETTING_PARAMS.items() if param in kwargs}
        settings = RunSettings(**{field: value for field, value in given.items() if value is not None})
        return func(*args, settings=settings, **kwargs)

    return wrapper


def llama_threads_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add --llama-threads (CPU threads of the embedded llama.cpp model; ``llama_threads``)."""
    return click.option(
        "--llama-threads", "llama_threads", type=click.IntRange(min=1), default=None,
        help="CPU threads of the embedded llama.cpp model (default: $BINEVAL_LLAMA_THREADS, else the cores the "
             "load average leaves free, recorded with the reason in the run's manifest). 1 is much faster on a busy "
             "machine, where llama.cpp's threads wait on each other. No effect on served or hosted models.")(func)


def run_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add --engine, --ray-address, --concurrency (alias --threads), --fail-on-errors,
    --no-explanations, and the cost options --max-cost, --warm-prefix/--no-warm-prefix,
    --cache-padding and --price-model (gathered by `with_run_settings`)."""
    decorators = [
        click.option("--engine", type=click.Choice(ENGINES), default="auto", show_default=True,
                     help="What sends the LM calls. 'auto': 'local' for the embedded model, 'live' otherwise. "
                          "'local': one call at a time. 'live': --concurrency calls in flight to an endpoint. "
                          "'batch': the provider's batch API (same as --batch; docs/batch.md). 'ray': Ray tasks, "
                          "locally or on a cluster (--ray-address; the 'ray' extra; docs/engines.md). 'replay': "
                          "answer every question from --verdicts FILE, no LM call (docs/replay.md)."),

        click.option("--ray-address", "ray_address", default=None, metavar="ADDR",
                     help="With --engine ray: the Ray cluster to join ('auto', 'ray://host:10001'). Default: start "
                          "a local Ray for this run and stop it afterwards."),
        click.option("--concurrency", "--threads", "concurrency", default=1, show_default=True,
                     type=click.IntRange(min=1),
                     help="LM calls in flight across items and questions (served and hosted models; 8-64 is "
                          "typical). The embedded model always runs one call at a time."),
        click.option("--fail-on-errors", is_flag=True,
                     help="Stop at the first item with a failed LM call and exit with status 1. Without it the "
                          "run finishes the other items, stores incomplete ones with their answers, and a rerun "
                          "asks only the questions that failed."),
        click.option("--no-explanations", "no_explanations", is_flag=True,
                     help="Ask for the verdict alone (no explanation): about 2x faster per item on the embedded "
                          "model, fewer tokens everywhere; P(yes) is still recorded when the LM returns log-probabilities."),
        click.option("--max-cost", "max_cost", type=click.FloatRange(min=0, min_open=True), default=None,
                     metavar="USD",
                     help="Never let the cost of this command's LM calls pass USD (prices from LiteLLM's price "
                          "map): each call's worst case (its prompt tokens, and max_tokens of output) is reserved "
                          "before it is sent, the unused part released when its usage arrives. Everything judged "
                          "is stored; exit status 1. See docs/cost.md."),
        click.option("--warm-prefix/--no-warm-prefix", "warm_prefix", default=None,
                     help="Send each item's first question alone and the rest after it, so the provider's prompt "
                          "cache is written before the others read it. Default: on for hosted models (a LiteLLM "
                          "id) with --concurrency > 1."),
        click.option("--cache-padding", "cache_padding", type=click.Choice(CACHE_PADDING_POLICIES),
                     default="auto", show_default=True,
                     help="'auto': when an item's shared prompt prefix is under the provider's cache minimum "
                          "(OpenAI, Anthropic) and padding it up to the minimum is cheaper at the model's prices, "
                          "add a marked filler block before the question so the prefix gets cached. No effect on "
                          "local, served or unpriced models. 'off': never. See docs/cost.md."),
        click.option("--price-model", "price_model", default=None, metavar="MODEL",
                     help="Estimate cost at this LiteLLM model's prices (e.g. gpt-4o-mini), e.g. for a base URL "
                          "that proxies a hosted model. Default: the --lm model's own prices."),
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def _band(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[float, float] | None:
    if value is None:
        return None
    try:
        low, high = (float(part) for part in value.split(","))
    except ValueError:
        raise click.BadParameter(f"expected LOW,HIGH (e.g. 0.2,0.8), got {value!r}") from None
    return low, high


def judging_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add the replay options (--verdicts, --replay-judge) and the panel and cascade options
    (--judge, repeatable; --panel-rule; --panel-weights; --cascade; --band), gathered by `with_run_settings`."""
    decorators = [
        click.option("--verdicts", "replay_verdicts", default=None, metavar="FILE",
                     help="With --engine replay: the verdicts file (.jsonl, .jsonl.gz, .csv; docs/verdicts.md) whose "
                          "rows answer the questions. A question it does not answer is an error verdict "
                          "(NotInVerdicts), never 'no'; a row recorded for another output is refused (OtherOutput)."),
        click.option("--replay-judge", "replay_judge", default=None, metavar="JUDGE",
                     help="With --engine replay: whose rows of --verdicts to replay (default: the file's only judge)."),
        click.option("--judge", "judges", multiple=True, metavar="LM",
                     help="A judge of a panel (or, with --cascade, a stage), repeatable, two or more: a LiteLLM id "
                          "or URL#MODEL for a base URL; with --engine replay, a judge of --verdicts. Every question "
                          "is asked of every judge and decided by --panel-rule; every judge's verdict is kept "
                          "(docs/panels.md). --lm is then not used."),
        click.option("--panel-rule", "panel_rule", type=click.Choice(["majority", "any-no", "weighted"]),
                     default=None,
                     help="How a panel decides a question: 'majority' (a tie is no decision: unparsed, never 'no'), "
                          "'any-no' (one 'no' decides a fatal question) or 'weighted' (each judge's vote counts "
                          "with its weight from --panel-weights). Default: majority."),
        click.option("--panel-weights", "panel_weights", default=None, metavar="FILE",
                     help="With --panel-rule weighted: the judge weights file (.csv or .jsonl; judge, weight) that "
                          "`bineval agreement --labels ... --verdicts ...` writes as judge_weights.csv: each judge's "
                          "weight measured against labels. It must list every --judge, and no other; the weights "
                          "and the file's hash go into the manifest."),
        click.option("--cascade", "cascade", is_flag=True, default=None,
                     help="The --judge LMs are a cascade, cheapest first: the first answers every question, the next "
                          "only those where the one before gave no yes/no answer (or its P(yes) is inside --band)."),
        click.option("--band", "cascade_band", default=None, metavar="LOW,HIGH", callback=_band,
                     help="With --cascade: a P(yes) inside [LOW, HIGH] passes the question to the next judge."),
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
                     help="Seconds to wait for a served or hosted model to connect and, after that, for each "
                          "next part of its reply (a reply that keeps arriving is not cut); an attempt that waits "
                          "longer fails and is retried, and a call that still fails is an 'error' verdict. "
                          "Default: 600."),
        click.option("--adapter", type=click.Choice(ADAPTER_POLICIES), default="auto", show_default=True,
                     help="How prompts and replies are formatted. 'auto': JSON with schema-constrained output "
                          "where the endpoint supports it (OpenAI, vLLM, llama.cpp server, embedded models), "
                          "chat fields otherwise. 'json' or 'chat' force one. Never retried in the other format."),
        llama_threads_option,
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


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


def bootstrap_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add --bootstrap (passed as ``n_resamples``): resamples for intervals and paired tests."""
    return click.option("--bootstrap", "n_resamples", default=1000, show_default=True, type=click.IntRange(min=10),
                        help="Bootstrap resamples for intervals and paired tests.")(func)


def constant_predictions_option(scores: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add --constant-predictions; `scores` says in its help whose scores are constant
    (``"method scores"``, ``"predicted scores"``)."""
    from binaryeval_dspy.metrics.correlation import (
        CONSTANT_PREDICTION_POLICIES,
        DEFAULT_CONSTANT_PREDICTIONS,
    )

    return click.option(
        "--constant-predictions", "constant_predictions", type=click.Choice(CONSTANT_PREDICTION_POLICIES),
        default=DEFAULT_CONSTANT_PREDICTIONS, show_default=True,
        help=f"Summary level: a document whose {scores} are all equal is left out of the average "
             "('skip', as G-Eval's and UniEval's scripts do) or counted as 0 ('zero').")


def report_statistics_options(scores: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add --bootstrap, --seed, --constant-predictions (`constant_predictions_option`) and
    --no-figures: the options of the commands that build a report from scores already there."""
    decorators = [
        bootstrap_option,
        click.option("--seed", default=0, show_default=True, type=int, help="Bootstrap seed."),
        constant_predictions_option(scores),
        click.option("--no-figures", is_flag=True, help="Skip the figures (faster)."),
    ]

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        for decorator in reversed(decorators):
            func = decorator(func)
        return func

    return decorate


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

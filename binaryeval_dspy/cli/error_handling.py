"""How a command ends on an error or Ctrl-C: one red line and exit 2, or 130 without waiting on hung calls."""

from __future__ import annotations

import functools
import os
import re
import sys
import threading
from collections.abc import Callable
from typing import Any

from rich.markup import escape

from binaryeval_dspy.cli.console import console
from binaryeval_dspy.errors import BinEvalError

#: Run settings (`binaryeval_dspy.settings.RunSettings` fields) as the command line spells them.
SETTING_FLAGS = {
    "engine": "--engine", "ray_address": "--ray-address", "concurrency": "--concurrency",
    "fail_on_errors": "--fail-on-errors", "timeout": "--timeout", "adapter": "--adapter",
    "llama_threads": "--llama-threads", "max_cost": "--max-cost", "price_model": "--price-model",
    "warm_prefix": "--warm-prefix", "cache_padding": "--cache-padding", "replay_verdicts": "--verdicts",
    "replay_judge": "--replay-judge", "judges": "--judge", "panel_rule": "--panel-rule", "panel_weights": "--panel-weights", "cascade": "--cascade",
    "cascade_band": "--band",
}

#: Every Python-side name a library message may name in backticks (a `RunSettings` field, or
#: a parameter the user passes to a library function) with the flag that sets it on the
#: command line. Library code says "`max_cost` 2.5: no price for it" or "`spec` must be a
#: non-empty string"; `with_flag_names` shows "--max-cost 2.5: ..." and "--lm must be ...".
#: Where a command takes the same parameter under another flag (`spec` as ``--source-lm``),
#: the command passes that flag to `with_flag_names` (see `cli.common.build_lm`).
FLAG_NAMES = {
    **SETTING_FLAGS,
    # make_lm / check_provider_key / check_endpoint_address
    "spec": "--lm", "model": "--lm-model", "api_key_env": "--api-key-env", "max_tokens": "--max-tokens",
    # run directories (RunDirectory, rejudge, benchmark, report) and their options
    "out_dir": "--out", "out": "--out", "restart": "--restart", "question_set": "--question-set",
    # loading items and benchmarks
    "input_field": "--input-field", "output_field": "--output-field", "id_field": "--id-field",
    "doc_field": "--doc-field", "empty_output": "--empty-output", "data_dir": "--data-dir", "split": "--split",
    "limit": "--limit", "tasks_dir": "--tasks-dir", "questions": "--questions", "checks_module": "--checks-module",
    # judging
    "aggregation": "--aggregation", "pressure_test": "--pressure-test", "dimensions": "--dimensions",
    "logprobs": "--logprobs",
    # bineval serve (start_llama_server)
    "port": "--port", "start_timeout": "--start-timeout",
    # batch runs (`bineval batch resolve`, resolve_submission)
    "batch_id": "--batch-id", "not_created": "--not-created", "number": "--submission",
    # comparisons and optimization
    "source_lm": "--source-lm", "source_verdicts_dir": "--source-verdicts", "mode": "--mode",
    "simba_metric_calls": "--simba-metric-calls", "gepa_metric_calls": "--gepa-metric-calls",
    # agreement, benchmark reports
    "predictions": "--predictions", "human_fields": "--human-fields", "run_dir": "--run",
    "constant_predictions": "--constant-predictions", "from_metrics": "--from-metrics",
    # question-level agreement (`bineval agreement --labels`), panels and cascades
    "labels": "--labels", "labels_file": "--labels", "verdicts": "--verdicts", "panels": "--panel",
    "cascades": "--cascade",
    "band": "--band", "items": "--items", "target_kappa": "--target-kappa",
}
# A backticked name from FLAG_NAMES ("`max_cost`") always becomes its flag. Unbackticked, a
# setting is recognised by its field name with an underscore (max_cost), or by a one-word
# name right after "setting" ("bad run setting concurrency"), never as an ordinary word.
_QUOTED_NAME = re.compile(r"`([a-z][a-z_]*)`")
_SETTING_NAME = re.compile(
    r"(?<![\w-])(" + "|".join(n for n in SETTING_FLAGS if "_" in n) + r")(?![\w-])"
    r"|(?<=setting )(" + "|".join(n for n in SETTING_FLAGS if "_" not in n) + r")(?![\w-])")


def with_flag_names(text: str, flags: dict[str, str] | None = None) -> str:
    """`text` (a library message naming settings and parameters, e.g. ``max_cost``) with each
    named by its command-line flag (``--max-cost``): the one place names become flags.

    Args:
        text: the message. A backticked name in `FLAG_NAMES` ("`spec`") becomes its flag
            ("--lm"); other backticked text is kept. Unbackticked, only run settings are
            replaced (see `SETTING_FLAGS`).
        flags: names this command spells differently, over `FLAG_NAMES` (e.g.
            ``{"spec": "--source-lm"}`` where the LM comes from ``--source-lm``).
    """
    names = {**FLAG_NAMES, **flags} if flags else FLAG_NAMES
    text = _QUOTED_NAME.sub(lambda m: names.get(m.group(1), m.group(0)), text)
    return _SETTING_NAME.sub(lambda m: SETTING_FLAGS[m.group(1) or m.group(2)], text)


def friendly_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn project errors into a one-line red message and exit code 2, Ctrl-C into 130;
    run settings named in the message are shown as their flags (`with_flag_names`)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except BinEvalError as exc:
            console.print(f"[bold red]error:[/bold red] {escape(with_flag_names(str(exc)))}", highlight=False,
                          soft_wrap=True)
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


#: Set by the ``bineval`` script (`binaryeval_dspy.cli.main.main`): this process *is* the
#: command, so after Ctrl-C it may end itself without waiting for calls in flight
#: (`leave_after_interrupt`). A command run from Python (click's ``CliRunner`` in the
#: tests, a notebook) never ends its caller's process.
OWNS_PROCESS = False


def leave_after_interrupt(code: int = 130, grace_seconds: float = 3.0) -> None:
    """Exit with `code` after Ctrl-C / SIGTERM, without waiting long for calls in flight.

    The item loop's worker threads (``bineval-call-*``) may sit in a request to a hung
    endpoint until its timeout (LiteLLM's default: 600 s) and DSPy's retries end, and
    Python waits for them before exiting. Results are already stored and the run
    directory released when this is called, so after `grace_seconds` the process ends
    without them, when the process is the ``bineval`` command (`OWNS_PROCESS`). With no
    worker thread busy, or when run from Python, this is a plain ``SystemExit(code)``.

    Raises:
        SystemExit: always.
    """
    busy = [t for t in threading.enumerate() if t.name.startswith("bineval-call") and t.is_alive()]
    if busy and OWNS_PROCESS:
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

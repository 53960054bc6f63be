"""The `bineval` command: a thin shell over the library (one module per command).

Every option can also be set from the environment as BINEVAL_<COMMAND>_<OPTION>,
e.g. ``BINEVAL_EVALUATE_LM=openai/gpt-4o-mini``.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys

import click

# name -> (module, attribute, first paragraph of its help). `bineval --help` prints the
# help from this table, so it imports no command module (and so neither DSPy nor LiteLLM);
# `bineval NAME ...` imports NAME's module only. tests/project/test_lazy_imports.py fails when a
# summary here differs from the command's own help.
LAZY_COMMANDS: dict[str, tuple[str, str, str]] = {
    "agreement": ("binaryeval_dspy.cli.agreement_command", "agreement_command",
                  ("Correlate your prediction files with human scores: a bundled benchmark (summeval, "
                   "topical_chat, qags, qags_cnndm, qags_xsum), a `bineval benchmark` run (--run) or "
                   "your own human-scored file; or, with --labels, compare judges' verdicts with "
                   "question-level labels.")),
    "batch": ("binaryeval_dspy.cli.batch_command", "batch_group",
              "Follow and settle the provider batches of a `bineval evaluate --batch` run."),
    "benchmark": ("binaryeval_dspy.cli.benchmark_command", "benchmark_command",
                  "Run BinEval and the baselines on benchmark NAME with one LM and write the report."),
    "benchmark-questions": ("binaryeval_dspy.cli.benchmark_command", "benchmark_questions_command",
                            ("Generate the question set of each benchmark's task prompt with --lm "
                             "(all benchmarks by default).")),
    "evaluate": ("binaryeval_dspy.cli.evaluate_command", "evaluate_command",
                 "Judge every item of ITEMS_FILE (.jsonl or .csv) with the questions of QUESTION_SET_FILE."),
    "optimize": ("binaryeval_dspy.cli.optimize_command", "optimize_command",
                 "Optimize a prompt with the BinEval loop and compare it with MIPROv2, COPRO, GEPA and SIMBA."),
    "questions": ("binaryeval_dspy.cli.questions_command", "questions_command",
                  "Generate binary questions from the task prompt in TASK_PROMPT_FILE."),
    "rejudge": ("binaryeval_dspy.cli.rejudge_command", "rejudge_command",
                "Re-judge the items of ITEMS_FILE whose output changed since RUN_DIR, with the same questions."),
    "report": ("binaryeval_dspy.cli.benchmark_command", "report_command",
               "Rebuild report.md / report.html of a benchmark run without calling any LM."),
    "serve": ("binaryeval_dspy.cli.serve_command", "serve_command",
              ("Serve the embedded model (SmolLM2-135M-Instruct) over an OpenAI-compatible API on 127.0.0.1 until "
               "Ctrl-C, and print the --lm and --lm-model that reach it.")),
    "verdicts": ("binaryeval_dspy.cli.verdicts_command", "verdicts_command",
                 "Export the verdicts of run directory RUN as a verdicts file (one row per item and question)."),
    "view": ("binaryeval_dspy.cli.view_command", "view_command",
             ("Write one HTML page showing RUN (evaluate, verdict mode, rejudge, benchmark or optimizer "
              "comparison); with RUN2, what changed from RUN2 to RUN.")),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported when first looked up, not at start-up.

    Args:
        lazy_commands: name -> (module, attribute, help summary), as `LAZY_COMMANDS`.
    """

    def __init__(self, *args: object, lazy_commands: dict[str, tuple[str, str, str]] | None = None,
                 **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy_commands = dict(lazy_commands or {})

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        """The subcommand, after refusing any argument or ``BINEVAL_*`` variable that is not
        valid UTF-8 (`refuse_undecodable_arguments`): before the command runs, nothing written."""
        refuse_undecodable_arguments(args)
        return super().resolve_command(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy_commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            module, attribute, _summary = self.lazy_commands[cmd_name]
            command = getattr(importlib.import_module(module), attribute)
            if command.name != cmd_name:
                raise RuntimeError(f"LAZY_COMMANDS[{cmd_name!r}] loads the command {command.name!r}")
            self.add_command(command)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The "Commands" section, from the table for commands not imported yet (same text)."""
        stand_ins = {name: click.Command(name, help=summary)
                     for name, (_module, _attribute, summary) in self.lazy_commands.items()
                     if name not in self.commands}
        listed = [(name, self.commands.get(name) or stand_ins[name]) for name in self.list_commands(ctx)]
        listed = [(name, command) for name, command in listed if not command.hidden]
        if not listed:
            return
        limit = formatter.width - 6 - max(len(name) for name, _command in listed)
        with formatter.section("Commands"):
            formatter.write_dl([(name, command.get_short_help_str(limit)) for name, command in listed])


def refuse_undecodable_arguments(args: list[str]) -> None:
    """Refuse, before any command starts, an argument or a ``BINEVAL_*`` environment variable
    that is not valid UTF-8 (a Latin-1 file name): every path a command takes reaches a
    manifest, a report or a page, UTF-8 files that cannot hold it. Shown with replacement
    characters (`printable_path`).

    Raises:
        click.UsageError: naming the argument or variable and the fix (exit status 2).
    """
    from binaryeval_dspy.data.file_names import UTF8_FIX, is_utf8, printable_path

    for arg in args:
        if not is_utf8(arg):
            raise click.UsageError(f"the argument {printable_path(arg)!r} is not valid UTF-8 (shown with replacement "
                                   f"characters); nothing was read or written. Fix: {UTF8_FIX}")
    for name, value in os.environ.items():
        if name.startswith("BINEVAL_") and not is_utf8(value):
            raise click.UsageError(f"the environment variable {name} is not valid UTF-8 ({printable_path(value)!r}); "
                                   f"nothing was read or written. Fix: {UTF8_FIX}")


@click.group(cls=LazyGroup, lazy_commands=LAZY_COMMANDS,
             context_settings={"auto_envvar_prefix": "BINEVAL", "help_option_names": ["-h", "--help"]})
@click.version_option(package_name="binaryeval-dspy")
def cli() -> None:
    """Judge LLM outputs with many atomic yes/no questions (BinEval, in DSPy)."""


def _terminate_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    """Entry point of the `bineval` script: SIGTERM stops a run as Ctrl-C does (results kept)."""
    from binaryeval_dspy.cli import error_handling

    error_handling.OWNS_PROCESS = True  # this process is the command: Ctrl-C may end it (leave_after_interrupt)
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    try:
        cli(standalone_mode=True)
    except KeyboardInterrupt:  # before a command's own handler is in place
        raise SystemExit(130) from None
    finally:
        _close_embedded_models()


def _close_embedded_models() -> None:
    """Free the embedded llama.cpp model once the command is done, if one was loaded (its
    module is only imported by commands that use it)."""
    engine = sys.modules.get("binaryeval_dspy.lm.llama_engine")
    if engine is not None:
        engine.close_models()


if __name__ == "__main__":
    main()

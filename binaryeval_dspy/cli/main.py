"""The `bineval` command: a thin shell over the library (one module per command).

Every option can also be set from the environment as BINEVAL_<COMMAND>_<OPTION>,
e.g. ``BINEVAL_EVALUATE_LM=openai/gpt-4o-mini``.
"""

from __future__ import annotations

import signal

import click

from binaryeval_dspy.cli.agreement_command import agreement_command
from binaryeval_dspy.cli.batch_command import batch_group
from binaryeval_dspy.cli.benchmark_command import (
    benchmark_command,
    benchmark_questions_command,
    report_command,
)
from binaryeval_dspy.cli.evaluate_command import evaluate_command
from binaryeval_dspy.cli.optimize_command import optimize_command
from binaryeval_dspy.cli.questions_command import questions_command
from binaryeval_dspy.cli.rejudge_command import rejudge_command


@click.group(context_settings={"auto_envvar_prefix": "BINEVAL", "help_option_names": ["-h", "--help"]})
@click.version_option(package_name="binaryeval-dspy")
def cli() -> None:
    """Judge LLM outputs with many atomic yes/no questions (BinEval, in DSPy)."""


cli.add_command(questions_command)
cli.add_command(evaluate_command)
cli.add_command(rejudge_command)
cli.add_command(benchmark_command)
cli.add_command(report_command)
cli.add_command(agreement_command)
cli.add_command(benchmark_questions_command)
cli.add_command(optimize_command)
cli.add_command(batch_group)


def _terminate_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    """Entry point of the `bineval` script: SIGTERM stops a run as Ctrl-C does (results kept)."""
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    try:
        cli(standalone_mode=True)
    except KeyboardInterrupt:  # before a command's own handler is in place
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()

"""The CLI's consoles: messages to stderr (`console`), tables and results to stdout (`out_console`)."""

from __future__ import annotations

import logging
import os

from rich.console import Console

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


def quiet_libraries() -> None:
    """Keep LiteLLM / httpx chatter out of the progress display."""
    for name in ("LiteLLM", "litellm", "httpx", "dspy"):
        logging.getLogger(name).setLevel(logging.ERROR)

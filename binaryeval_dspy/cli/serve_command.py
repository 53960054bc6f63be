"""`bineval serve`: the embedded model behind an OpenAI-compatible server on 127.0.0.1, until Ctrl-C.

    bineval serve                 # http://127.0.0.1:8080/v1, model smollm2
    bineval serve --port 0        # any free port

Starts ``python -m llama_cpp.server`` on the bundled SmolLM2 GGUF
(`binaryeval_dspy.lm.llama_server`), waits until ``/v1/models`` answers, prints the
``--lm ... --lm-model ...`` to use (on stdout, the rest on stderr) and keeps serving;
Ctrl-C (or SIGTERM) stops the server and waits for it to exit.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

import click
from rich.markup import escape

from binaryeval_dspy.cli.console import console, out_console
from binaryeval_dspy.cli.error_handling import friendly_errors

EXAMPLE = ("bineval evaluate examples/summeval/questions.json examples/summeval/items.jsonl --input-field source "
           "--output-field summary --id-field id --scale 1 5 --limit 2")


@click.command("serve")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True,
              help="TCP port on 127.0.0.1 (loopback only: the server has no authentication); 0 picks a free one.")
@click.option("--n-ctx", "n_ctx", type=click.IntRange(min=512), default=8192, show_default=True,
              help="Context window in tokens (a SummEval article, its summary and a question fit in 8192).")
@click.option("--log", "log_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="File for the server's log, one 'prefix-match hit' line per request that reused the previous "
                   "prompt's start (default: a new file in the system temp folder, printed at start).")
@click.option("--start-timeout", type=click.FloatRange(min=1), default=120.0, show_default=True,
              help="Seconds to wait for /v1/models to answer before giving up.")
@click.option("--llama-threads", "llama_threads", type=click.IntRange(min=1), default=None,
              help="CPU threads of the served model (default: $BINEVAL_LLAMA_THREADS, else the cores the load "
                   "average leaves free; printed at start).")
@friendly_errors
def serve_command(port: int, n_ctx: int, log_file: Path | None, start_timeout: float,
                  llama_threads: int | None) -> None:
    """Serve the embedded model (SmolLM2-135M-Instruct) over an OpenAI-compatible API on 127.0.0.1 until Ctrl-C,
    and print the --lm and --lm-model that reach it."""
    from binaryeval_dspy.lm.llama_engine import choose_llama_threads
    from binaryeval_dspy.lm.llama_server import MODEL_ALIAS, start_llama_server

    threads = choose_llama_threads(llama_threads)
    if log_file is None:
        log_file = Path(tempfile.mkdtemp(prefix="bineval-serve-")) / "llama_server.log"
    console.print(escape(f"Starting llama_cpp.server (model {MODEL_ALIAS}, {threads.threads} llama.cpp thread(s): "
                         f"{threads.reason}); log: {log_file}"), highlight=False)
    started = time.monotonic()
    server = start_llama_server(log_file, port=port, n_ctx=n_ctx, n_threads=threads.threads,
                                start_timeout=start_timeout)
    try:
        console.print(escape(f"Serving {server.gguf.name} as '{server.model}' at {server.base_url} (ready after "
                             f"{time.monotonic() - started:.1f} s). Pass these to any bineval command:"),
                      highlight=False)
        out_console.print(escape(" ".join(server.lm_args)), highlight=False, soft_wrap=True)
        console.print(escape(f"e.g. {EXAMPLE} {' '.join(server.lm_args)}"), highlight=False, soft_wrap=True)
        console.print("Press Ctrl-C to stop the server.")
        while server.process.poll() is None:
            try:
                server.process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:  # still serving
                continue
        console.print(f"[red]error:[/red] llama_cpp.server exited on its own with status {server.process.returncode}; "
                      f"the end of its log ({escape(str(log_file))}):\n{escape(server.log_text()[-2000:])}",
                      highlight=False)
        raise SystemExit(1)
    except KeyboardInterrupt:
        server.stop()
        console.print("Stopped the server.")
    finally:
        server.stop()

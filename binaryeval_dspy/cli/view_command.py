"""`bineval view`: one self-contained HTML page of a run, to open in a browser.

    bineval view runs/my-run
    bineval view runs/my-run-after runs/my-run-before --open

The page is built by `binaryeval_dspy.reports.run_view.write_view` from the run's files
alone (no LM call, no network; opening it from disk works).
"""

from __future__ import annotations

import webbrowser
from pathlib import Path

import click
from rich.markup import escape

from binaryeval_dspy.cli.console import console
from binaryeval_dspy.cli.error_handling import friendly_errors


@click.command("view")
@click.argument("run_dir", metavar="RUN", type=click.Path(path_type=Path))
@click.argument("other_dir", metavar="[RUN2]", type=click.Path(path_type=Path), required=False)
@click.option("--out", "out_file", type=click.Path(path_type=Path), default=None,
              help="The HTML file to write (default: RUN/view.html, or RUN/view-vs-<RUN2>.html with RUN2).")
@click.option("--open", "open_page", is_flag=True, help="Open the page in the default browser.")
@click.option("--no-texts", is_flag=True,
              help="Leave the items' input and output texts and their other fields (all but the id) out of the page "
                   "(to share it without the data; explanations stay and may quote the output).")
@friendly_errors
def view_command(run_dir: Path, other_dir: Path | None, out_file: Path | None, open_page: bool,
                 no_texts: bool) -> None:
    """Write one HTML page showing RUN (evaluate, verdict mode, rejudge, benchmark or optimizer comparison);
    with RUN2, what changed from RUN2 to RUN."""
    from binaryeval_dspy.reports.run_view import write_view

    path = write_view(run_dir, other_dir, out=out_file, texts=not no_texts)
    size = path.stat().st_size
    console.print(escape(f"Wrote {path} ({size / 1024:,.0f} KiB; self-contained, opens from disk)."), highlight=False)
    if open_page:
        webbrowser.open(path.resolve().as_uri())

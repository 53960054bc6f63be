"""`bineval evaluate`: question set + items -> per-item verdicts, scores and a summary."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from binaryeval_dspy.cli.common import (
    build_lm,
    check_scale,
    console,
    friendly_errors,
    lm_options,
    out_console,
    quiet_libraries,
    slug,
)
from binaryeval_dspy.data.items import load_items
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.reports.run_summary import items_table, summarize_results, summary_table, write_summary
from binaryeval_dspy.runs.evaluation import evaluate_items
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.run_manifest import RunManifest


@click.command("evaluate")
@click.argument("question_set_file", type=click.Path(path_type=Path))
@click.argument("items_file", type=click.Path(path_type=Path))
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Run directory (default: runs/<items>-<lm>-<question-set hash>). Rerun the same "
                   "command to resume an interrupted run.")
@click.option("--input-field", default="input", show_default=True, help="Field holding the input x.")
@click.option("--output-field", default="output", show_default=True, help="Field holding the output y.")
@click.option("--id-field", default=None, help="Field holding a unique item id (default: line number).")
@click.option("--limit", default=None, type=click.IntRange(min=1), help="Judge only the first N items.")
@click.option("--threads", default=1, show_default=True, type=click.IntRange(min=1),
              help="Concurrent question calls per item (helps remote LMs; the embedded model serializes).")
@click.option("--scale", nargs=2, type=float, default=(0.0, 1.0), show_default=True,
              help="Map scores from [0,1] to [A,B], e.g. --scale 1 5.")
@lm_options
@friendly_errors
def evaluate_command(question_set_file: Path, items_file: Path, out_dir: Path | None, input_field: str,
                     output_field: str, id_field: str | None, limit: int | None, threads: int,
                     scale: tuple[float, float], lm_spec: str, lm_model: str | None, api_key_env: str | None,
                     max_tokens: int) -> None:
    """Judge every item of ITEMS_FILE (.jsonl or .csv) with the questions of QUESTION_SET_FILE."""
    quiet_libraries()
    scale = check_scale(scale)
    question_set = QuestionSet.load(question_set_file)
    items = load_items(items_file, input_field=input_field, output_field=output_field,
                       id_field=id_field, limit=limit)
    if out_dir is None:
        out_dir = Path("runs") / f"{slug(items_file.stem)}-{slug(lm_spec)}-{question_set.content_hash[:8]}"
    run_dir = RunDirectory(out_dir)  # a bad --out fails before the LM is loaded
    handle = build_lm(lm_spec, lm_model, api_key_env, max_tokens)
    manifest = RunManifest(
        command="evaluate", lm=handle.name, question_set_hash=question_set.content_hash,
        question_set_path=str(question_set_file), items_path=str(items_file),
        config={"input_field": input_field, "output_field": output_field, "id_field": id_field,
                "scale": list(scale), "threads": threads, "limit": limit, "max_tokens": max_tokens},
    )
    program = BinEval(question_set, scale=scale, num_threads=threads)
    n_q = len(question_set.questions)
    console.print(escape(f"Judging {len(items)} items x {n_q} questions with {handle.name} -> {out_dir}"))
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), TextColumn("{task.fields[note]}"), console=console) as progress:
        task = progress.add_task("items", total=len(items), note="")

        def on_progress(result, status):  # noqa: ANN001 - small local callback
            note = ""
            if result is not None:
                overall = result.score_card.overall
                shown = "-" if overall is None else f"{overall:.2f}"
                note = escape(f"last: {result.item_id} overall {shown}")
            elif status != "done":
                note = status
            progress.update(task, advance=1, note=note)

        outcome = evaluate_items(program, items, run_dir, manifest, lm=handle, on_progress=on_progress)
    wanted = {str(i.item_id) for i in items}
    results = [r for r in outcome.results if r.item_id in wanted]
    summary = summarize_results(results, lm=handle.name)
    if results:
        if len(results) <= 40:
            out_console.print(items_table(results))
        out_console.print(summary_table(summary))
        write_summary(summary, run_dir.path)
    console.print(f"{outcome.new_items} items judged now, {outcome.skipped_items} already done before; "
                  f"{outcome.seconds:.1f} s. Results: {escape(str(run_dir.results_path))}")
    if outcome.failed:
        for item_id, message in outcome.failed[:5]:
            console.print(f"[red]failed[/red] {escape(item_id)}: {escape(message)}", highlight=False)
        console.print(f"[yellow]{len(outcome.failed)} items failed and were not stored; rerun the same "
                      "command to retry them.[/yellow]")
        raise SystemExit(1)
    if outcome.interrupted:
        console.print("[yellow]Interrupted. Results so far are saved; rerun the same command to resume.[/yellow]")
        raise SystemExit(130)

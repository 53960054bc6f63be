"""`bineval evaluate`: question set + items -> per-item verdicts, scores and a summary.

With ``--aggregation verdict`` (or ``both``) each item also gets one named verdict
from the question set's declared labels (seed 004's pattern; see `VerdictJudge`).
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from binaryeval_dspy.cli.common import (
    adapter_note,
    build_lm,
    check_scale,
    checks_module_option,
    console,
    endpoint_config,
    friendly_errors,
    leave_after_interrupt,
    lm_options,
    load_checks_modules,
    load_question_set_and_items,
    out_console,
    padding_note,
    quiet_libraries,
    run_options,
    slug,
)
from binaryeval_dspy.cli.item_progress import ItemProgress
from binaryeval_dspy.cli.run_speed import speed_check_for
from binaryeval_dspy.data.text_checks import EMPTY_OUTPUT_POLICIES
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.programs.verdict_judge import AGGREGATIONS, VerdictJudge
from binaryeval_dspy.reports.run_summary import (
    items_table,
    summarize_results,
    summary_table,
    write_summary,
)
from binaryeval_dspy.reports.verdict_report import (
    build_verdict_output,
    print_item_verdicts,
    write_verdict_output,
)
from binaryeval_dspy.runs.batch_run import check_no_pending_batches
from binaryeval_dspy.runs.evaluation import EvaluationOutcome, evaluate_items
from binaryeval_dspy.runs.run_directory import RunDirectory, items_file_identity
from binaryeval_dspy.schemas.item_result import ItemResult
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.run_manifest import RunManifest
from binaryeval_dspy.verdict_rules import PRESSURE_TEST_MODES


def progress_note(result: ItemResult) -> str:
    """The progress bar's note for the last judged item (no score in verdict mode)."""
    parts = [f"last: {result.item_id}"]
    if result.named_verdict is not None:
        parts.append(f"-> {result.named_verdict.label or 'unparsed'}")
    if result.score_card is not None:
        overall = result.score_card.overall
        parts.append("overall -" if overall is None else f"overall {overall:.2f}")
    return " ".join(parts)


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
@click.option("--empty-output", "empty_output", type=click.Choice(EMPTY_OUTPUT_POLICIES), default="record",
              show_default=True,
              help="An output that is empty or only whitespace and invisible characters (zero-width, BOM, bidi "
                   "marks): 'record' stores it with status empty_output (no LM call, no score, counted in the "
                   "summary); 'fail' refuses the items file, naming the line and field.")
@click.option("--scale", nargs=2, type=float, default=(0.0, 1.0), show_default=True,
              help="Map scores from [0,1] to [A,B], e.g. --scale 1 5.")
@click.option("--aggregation", type=click.Choice(AGGREGATIONS), default="score", show_default=True,
              help="'score': yes-rates per dimension (BinEval). 'verdict': one named label per item from the "
                   "question set's verdict_policy, grounds and evidence, and no numeric score anywhere. "
                   "'both': the two side by side.")
@click.option("--pressure-test", "pressure_test", type=click.Choice(PRESSURE_TEST_MODES), default="non-pass",
              show_default=True, help="In verdict modes: let the LM try to refute non-pass verdicts, every "
                                      "verdict, or none.")
@click.option("--restart", is_flag=True,
              help="Start the run in --out over: the existing run directory is moved to <out>.old-N (nothing is "
                   "deleted) and every item is judged again.")
@click.option("--batch", "batch", is_flag=True,
              help="Send the questions through the provider's batch API (OpenAI, or a base URL serving /v1/batches; "
                   "typically half price, results within 24 h) instead of live calls. Rerun the same command to "
                   "collect results; nothing is submitted twice. Exit 75 while requests wait. See docs/batch.md.")
@checks_module_option
@run_options
@lm_options
@friendly_errors
def evaluate_command(question_set_file: Path, items_file: Path, out_dir: Path | None, input_field: str,
                     output_field: str, id_field: str | None, limit: int | None, empty_output: str,
                     concurrency: int,
                     fail_on_errors: bool, no_explanations: bool,
                     scale: tuple[float, float], aggregation: str, pressure_test: str, restart: bool, batch: bool,
                     checks_modules: tuple[str, ...], lm_spec: str, lm_model: str | None,
                     api_key_env: str | None, max_tokens: int) -> None:
    """Judge every item of ITEMS_FILE (.jsonl or .csv) with the questions of QUESTION_SET_FILE."""
    quiet_libraries()
    scale = check_scale(scale)
    loaded_checks = load_checks_modules(checks_modules)
    question_set, items = load_question_set_and_items(
        question_set_file, items_file, input_field=input_field, output_field=output_field, id_field=id_field,
        limit=limit, empty_output=empty_output)  # swapped arguments are named as such
    explanations = not no_explanations
    if aggregation == "score":
        program = BinEval(question_set, scale=scale, explanations=explanations)
    else:
        program = VerdictJudge(question_set, aggregation=aggregation, pressure_test=pressure_test, scale=scale,
                               explanations=explanations)
    if out_dir is None:
        suffix = "" if aggregation == "score" else f"-{aggregation}"
        lm_part = slug(f"{lm_spec}-{lm_model}" if lm_model else lm_spec)  # one URL may serve several models
        out_dir = Path("runs") / f"{slug(items_file.stem)}-{lm_part}-{question_set.content_hash[:8]}{suffix}"
    run_dir = RunDirectory(out_dir)  # a bad --out fails before the LM is loaded
    handle = build_lm(lm_spec, lm_model, api_key_env, max_tokens)
    config: dict[str, object] = {
        "input_field": input_field, "output_field": output_field, "id_field": id_field, "scale": list(scale),
        "concurrency": concurrency, "limit": limit, "max_tokens": max_tokens, **endpoint_config(handle),
        "explanations": explanations, "empty_output": empty_output,
    }
    if aggregation != "score":
        config.update(aggregation=aggregation, pressure_test=pressure_test)
    config.update(lm_spec=lm_spec, lm_model=lm_model, api_key_env=api_key_env)
    if loaded_checks:
        config["checks_modules"] = loaded_checks
    manifest = RunManifest(
        command="evaluate", lm=handle.name, question_set_hash=question_set.content_hash,
        question_set_path=str(question_set_file), items_path=str(items_file),
        items_file=items_file_identity(items_file), config=config,
    )
    if restart:
        moved = run_dir.set_aside()
        if moved is not None:
            console.print(escape(f"--restart: the previous run in {out_dir} was moved to {moved} (nothing deleted); "
                                 "starting a new run."))
    run_dir.check(manifest)  # a resume with other settings is refused before anything is shown or asked
    if batch:  # batch mode (docs/batch.md): submit, poll, collect; exits with its own status
        from binaryeval_dspy.cli.batch_command import evaluate_in_batch
        evaluate_in_batch(program, items, run_dir, manifest, handle, question_set=question_set, aggregation=aggregation,
                          pressure_test=pressure_test, fail_on_errors=fail_on_errors, api_key_env=api_key_env)
    check_no_pending_batches(run_dir)  # a live rerun must not ask (and pay) again what a batch still holds
    n_q = len(question_set.questions)
    n_code = len(question_set.code_checked)
    in_flight = 1 if handle.embedded else concurrency
    console.print(escape(f"Judging {len(items)} items x {n_q} questions ({n_code} answered by code checks) with "
                         f"{handle.name} ({handle.adapter_name} adapter, {in_flight} call(s) in flight), "
                         f"aggregation '{aggregation}' -> {out_dir}"))
    with ItemProgress(console, in_flight=in_flight, speed_check=speed_check_for(handle, in_flight)) as progress:
        # in score mode an item makes at most one call per LM question (verdict modes add a pick and refutations)
        each = (n_q - n_code) or None if aggregation == "score" else None
        task = progress.add_task("items", total=len(items), calls_each=each)

        def on_progress(result, status):
            note = ""
            if result is not None:
                note = progress_note(result)
            if status not in ("done", "skipped"):
                note = f"{note} ({status})" if note else status
            progress.update(task, status, note=note, calls=result.usage.lm_calls if result is not None else None)

        outcome = evaluate_items(program, items, run_dir, manifest, lm=handle, on_progress=on_progress,
                                 concurrency=concurrency, fail_on_errors=fail_on_errors)
    wanted = {str(i.item_id) for i in items}
    results = [r for r in outcome.results if r.item_id in wanted]
    report_results(results, question_set, run_dir, lm=handle.name, aggregation=aggregation,
                   pressure_test=pressure_test, embedded=handle.embedded, price_model=handle.priced_as())
    record_endpoint_outcome(run_dir, outcome, handle)
    resumed = f", {outcome.resumed_items} of them resumed" if outcome.resumed_items else ""
    now_incomplete = len({i for i in outcome.incomplete} & wanted)
    stored_now = (f"{outcome.new_items} items stored now ({outcome.new_items - now_incomplete} complete, "
                  f"{now_incomplete} incomplete{resumed})" if now_incomplete or outcome.resumed_items
                  else f"{outcome.new_items} items judged now")
    console.print(f"{stored_now}, {outcome.skipped_items} already done before; "
                  f"{outcome.seconds:.1f} s. Results: {escape(str(run_dir.results_path))}")
    if outcome.empty_outputs:
        shown = ", ".join(escape(i) for i in outcome.empty_outputs[:5])
        console.print(f"{len(outcome.empty_outputs)} item(s) with an empty output recorded as status empty_output "
                      f"(no LM call, no score): {shown}{', ...' if len(outcome.empty_outputs) > 5 else ''}.",
                      highlight=False)
    for note in (adapter_note(handle), padding_note(outcome.cache_padding)):
        if note:
            console.print(f"[dim]{escape(note)}[/dim]")
    exit_for_outcome(outcome, fail_on_errors=fail_on_errors)


def record_endpoint_outcome(run_dir: RunDirectory, outcome: EvaluationOutcome, handle) -> None:
    """Add to the run's manifest what was learned about the endpoint during the run: the
    schema form it accepted, the adapter's counters (re-sent requests, parse failures) and,
    when prompts could be padded for the provider's cache, what was padded in this session
    (``cache_padding_stats``, `CachePadding.stats`; the policy is ``cache_padding``)."""
    manifest = outcome.manifest
    if manifest is None:
        return
    stats = handle.adapter_stats.as_dict() if handle.adapter_stats is not None else {}
    dialect = getattr(handle.lm, "schema_dialect", None)
    manifest.config.update(adapter_stats=stats, **({"schema_dialect": dialect} if dialect else {}))
    if outcome.cache_padding is not None:
        manifest.config["cache_padding_stats"] = outcome.cache_padding
    run_dir.write_manifest(manifest)


def exit_for_outcome(outcome: EvaluationOutcome, *, fail_on_errors: bool) -> None:
    """Print what went wrong in a run and exit with its status (Inspect AI's convention).

    0: every item complete (``empty_output`` items included), or some incomplete without
    ``--fail-on-errors`` (they are stored with their answers, items that could not be
    judged as status ``error`` rows; a rerun asks the rest). 1: items that could not be
    judged and were not stored, an incomplete item with ``--fail-on-errors``, a run
    stopped early, a run in which no LM call succeeded (wrong address or key), or one
    whose LM answers were all unparsed (the LM ignores the reply format).
    130: interrupted.
    """
    for item_id, message in outcome.errors[:5]:
        console.print(f"[yellow]could not judge[/yellow] {escape(item_id)} (stored with status error): "
                      f"{escape(message[:400])}", highlight=False)
    if outcome.incomplete:
        console.print(f"[yellow]{len(outcome.incomplete)} item(s) incomplete: some LM calls failed "
                      f"({', '.join(escape(i) for i in outcome.incomplete[:5])}"
                      f"{', ...' if len(outcome.incomplete) > 5 else ''}). Whatever they answered is stored; rerun "
                      "the same command to ask only the unanswered questions.[/yellow]", highlight=False)
    if outcome.first_error:
        console.print(f"[yellow]First failed call:[/yellow] {escape(outcome.first_error[:400])}", highlight=False)
    no_answer = outcome.new_items > 0 and outcome.lm_answers == 0 and outcome.first_error is not None
    if no_answer and (outcome.first_error or "").startswith("EmptyReply"):
        console.print("[red]No LM call succeeded in this run:[/red] the server was reached but its replies held no "
                      "text. Fix: check that --lm-model names a chat model the server serves and its logs, then "
                      "rerun the same command (nothing is lost).", highlight=False)
    elif no_answer:
        console.print("[red]No LM call succeeded in this run.[/red] Fix: check --lm / --lm-model, the server's "
                      "address and the API key, then rerun the same command (nothing is lost).", highlight=False)
    unreadable = outcome.lm_answers > 0 and outcome.lm_readable == 0
    if unreadable:
        console.print(f"[red]No LM answer in this run could be read as yes or no[/red] ({outcome.lm_answers} "
                      "answers, all unparsed; their raw text is in results.jsonl): the LM does not answer in the "
                      "reply format. Fix: try the other --adapter (json or chat) or a larger model, then rerun with "
                      "--restart (unparsed answers are not asked again otherwise). After fixing the server itself "
                      "(e.g. its chat template), also set DSPY_CACHEDIR to a new folder: DSPy's cache would answer "
                      "the same requests with the same replies.", highlight=False)
    if outcome.stopped_early:
        console.print(f"[red]Stopped early:[/red] {escape(outcome.stopped_early)}.", highlight=False)
    if outcome.failed:
        for item_id, message in outcome.failed[:5]:
            console.print(f"[red]failed[/red] {escape(item_id)}: {escape(message)}", highlight=False)
        console.print(f"[yellow]{len(outcome.failed)} items failed and were not stored; rerun the same "
                      "command to retry them.[/yellow]")
    if outcome.interrupted:
        console.print("[yellow]Interrupted. Results so far are saved; rerun the same command to resume.[/yellow]")
        leave_after_interrupt(130)
    if outcome.failed or outcome.stopped_early or no_answer or unreadable or (fail_on_errors and outcome.incomplete):
        raise SystemExit(1)


def report_results(results: list[ItemResult], question_set: QuestionSet, run_dir: RunDirectory, *, lm: str,
                   aggregation: str, pressure_test: str, print_only: set[str] | None = None,
                   embedded: bool | None = None, price_model: str | None = None, batch: bool = False) -> None:
    """Print and save what the aggregation asks for: score tables and/or named verdicts.

    Files cover every result; `print_only` limits the per-item printout to those ids.
    The summary carries the notes about the judge (a verdict skew, contradicting
    explanations, the embedded model's P(yes)); `embedded` says whether `lm` is the
    embedded model (None: guessed from its name). The summary's estimated cost is at
    `price_model`'s prices (`LMHandle.priced_as`; None: priced by `lm`), at batch prices
    with `batch`.
    """
    if not results:
        return
    shown = [r for r in results if print_only is None or r.item_id in print_only]
    if aggregation in ("score", "both"):
        summary = summarize_results(results, lm=lm, embedded=embedded, question_set=question_set,
                                    price_model=price_model, batch=batch)
        if shown and len(shown) <= 40:
            out_console.print(items_table(shown, embedded=summary.embedded_lm))
        out_console.print(summary_table(summary))
        write_summary(summary, run_dir.path)
    if aggregation in ("verdict", "both"):
        output = build_verdict_output(results, question_set, lm=lm, aggregation=aggregation,
                                      pressure_test=pressure_test)
        path = write_verdict_output(output, run_dir.path)
        print_item_verdicts(output.model_copy(update={"items": [i for i in output.items
                                                                if print_only is None or i.item_id in print_only]}),
                            out_console)
        console.print(f"Verdicts for downstream code: {path} (schema docs/verdict_output.schema.json)")

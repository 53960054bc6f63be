"""`bineval evaluate`: question set + items -> per-item verdicts, scores and a summary.

With ``--aggregation verdict`` (or ``both``) each item also gets one named verdict
from the question set's declared labels (seed 004's pattern; see `VerdictJudge`).
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from binaryeval_dspy.cli.common import adapter_note, build_lm, padding_note
from binaryeval_dspy.cli.console import console, quiet_libraries
from binaryeval_dspy.cli.error_handling import friendly_errors, with_flag_names
from binaryeval_dspy.cli.file_arguments import load_question_set_and_items, slug
from binaryeval_dspy.cli.item_progress import ItemProgress
from binaryeval_dspy.cli.options import (
    check_scale,
    checks_module_option,
    judging_options,
    lm_options,
    load_checks_modules,
    run_options,
    with_run_settings,
)
from binaryeval_dspy.cli.run_outcome import (
    exit_for_outcome,
    report_results,
)
from binaryeval_dspy.cli.run_speed import speed_check_for
from binaryeval_dspy.data.text_checks import EMPTY_OUTPUT_POLICIES
from binaryeval_dspy.engines.base import make_engine
from binaryeval_dspy.errors import ConfigError
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.programs.judge_panel import ensemble_for
from binaryeval_dspy.programs.verdict_judge import AGGREGATIONS, VerdictJudge
from binaryeval_dspy.cli.batch_command import print_batch_outcome
from binaryeval_dspy.runs.evaluation import evaluate_items
from binaryeval_dspy.runs.batch_status import check_no_pending_batches
from binaryeval_dspy.runs.file_run import run_manifest
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.item_result import ItemResult
from binaryeval_dspy.settings import RunSettings
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
              help="Same as --engine batch: send the questions through the provider's batch API (OpenAI, or a base "
                   "URL serving /v1/batches; typically half price, results within 24 h) instead of live calls. Rerun "
                   "the same command to collect results; nothing is submitted twice. Exit 75 while requests wait. "
                   "See docs/batch.md.")
@checks_module_option
@run_options
@judging_options
@lm_options
@friendly_errors
@with_run_settings
def evaluate_command(question_set_file: Path, items_file: Path, out_dir: Path | None, input_field: str,
                     output_field: str, id_field: str | None, limit: int | None, empty_output: str,
                     no_explanations: bool,
                     scale: tuple[float, float], aggregation: str, pressure_test: str, restart: bool, batch: bool,
                     checks_modules: tuple[str, ...], lm_spec: str, lm_model: str | None,
                     api_key_env: str | None, max_tokens: int, settings: RunSettings) -> None:
    """Judge every item of ITEMS_FILE (.jsonl or .csv) with the questions of QUESTION_SET_FILE."""
    quiet_libraries()
    if batch:
        settings = settings.model_copy(update={"engine": "batch"})
    concurrency, fail_on_errors = settings.concurrency, settings.fail_on_errors
    scale = check_scale(scale)
    loaded_checks = load_checks_modules(checks_modules)
    question_set, items = load_question_set_and_items(
        question_set_file, items_file, input_field=input_field, output_field=output_field, id_field=id_field,
        limit=limit, empty_output=empty_output)  # swapped arguments are named as such
    explanations = not no_explanations
    if aggregation == "score":
        program = ensemble_for(BinEval(question_set, scale=scale, explanations=explanations), settings)
    elif settings.judges:
        raise ConfigError("panels and cascades decide binary questions: they score (`aggregation` score)",
                          fix="leave `aggregation` at score, or judge with one LM.")
    else:
        program = VerdictJudge(question_set, aggregation=aggregation, pressure_test=pressure_test, scale=scale,
                               explanations=explanations)
    if out_dir is None:
        suffix = "" if aggregation == "score" else f"-{aggregation}"
        lm_part = slug(f"{lm_spec}-{lm_model}" if lm_model else lm_spec)  # one URL may serve several models
        out_dir = Path("runs") / f"{slug(items_file.stem)}-{lm_part}-{question_set.content_hash[:8]}{suffix}"
    run_dir = RunDirectory(out_dir)  # a bad --out fails before the LM is loaded
    handle = build_lm(lm_spec, lm_model, api_key_env, max_tokens, settings)
    manifest = run_manifest("evaluate", handle, question_set, question_set_file, items_file, settings=settings,
                            input_field=input_field, output_field=output_field, id_field=id_field, scale=scale,
                            limit=limit, max_tokens=max_tokens, explanations=explanations,
                            empty_output=empty_output, aggregation=aggregation, pressure_test=pressure_test,
                            lm_spec=lm_spec, lm_model=lm_model, api_key_env=api_key_env,
                            checks_modules=loaded_checks)
    if restart:
        moved = run_dir.set_aside()
        if moved is not None:
            console.print(escape(f"--restart: the previous run in {out_dir} was moved to {moved} (nothing deleted); "
                                 "starting a new run."))
    run_dir.check(manifest)  # a resume with other settings is refused before anything is shown or asked
    engine = make_engine(settings, handle)  # a missing extra or an impossible engine is refused before any item
    if engine.name != "batch":
        check_no_pending_batches(run_dir)  # a live rerun must not ask (and pay) again what a batch still holds
    n_q = len(question_set.questions)
    n_code = len(question_set.code_checked)
    in_flight = settings.in_flight(handle)
    describe = getattr(engine, "describe", None)  # an engine that sends nothing live says what it does instead
    how = (describe() if describe is not None
           else f"{handle.adapter_name} adapter, {engine.name} engine, {in_flight} call(s) in flight")
    console.print(escape(f"Judging {len(items)} items x {n_q} questions ({n_code} answered by code checks) with "
                         f"{handle.name} ({how}), aggregation '{aggregation}' -> {out_dir}"))
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

        outcome = evaluate_items(program, items, run_dir, manifest, lm=handle, settings=settings,
                                 on_progress=on_progress, engine=engine)
    wanted = {str(i.item_id) for i in items}
    report_results(outcome.summary, lambda: [r for r in outcome.results if r.item_id in wanted], question_set,
                   run_dir, lm=handle.name, aggregation=aggregation, pressure_test=pressure_test)
    resumed = f", {outcome.resumed_items} of them resumed" if outcome.resumed_items else ""
    now_incomplete = outcome.new_incomplete  # of the items stored now (not those an earlier session left)
    left_before = len(set(outcome.incomplete) & wanted) - now_incomplete
    stored_now = (f"{outcome.new_items} items stored now ({outcome.new_items - now_incomplete} complete, "
                  f"{now_incomplete} incomplete{resumed})" if now_incomplete or outcome.resumed_items
                  else f"{outcome.new_items} items judged now")
    if left_before > 0:
        stored_now += f", {left_before} left incomplete by an earlier session and not asked again now"
    console.print(f"{stored_now}, {outcome.skipped_items} already done before; "
                  f"{outcome.seconds:.1f} s. Results: {escape(str(run_dir.results_path))}")
    if outcome.empty_outputs:
        shown = ", ".join(escape(i) for i in outcome.empty_outputs[:5])
        console.print(f"{len(outcome.empty_outputs)} item(s) with an empty output recorded as status empty_output "
                      f"(no LM call, no score): {shown}{', ...' if len(outcome.empty_outputs) > 5 else ''}.",
                      highlight=False)
    for note in (*engine.notes, adapter_note(handle), padding_note(outcome.cache_padding)):
        if note:
            console.print(f"[dim]{escape(with_flag_names(note))}[/dim]")
    if engine.name == "batch":
        print_batch_outcome(engine, outcome, run_dir.path)
    exit_for_outcome(outcome, fail_on_errors=fail_on_errors)

"""`bineval optimize`: run the BinEval optimizer (and DSPy's) on a benchmark split, resumably."""

from __future__ import annotations

import json
from pathlib import Path

import click
import dspy

from binaryeval_dspy.cli.common import build_lm
from binaryeval_dspy.cli.console import console, out_console, quiet_libraries
from binaryeval_dspy.cli.error_handling import friendly_errors
from binaryeval_dspy.cli.file_arguments import slug
from binaryeval_dspy.cli.item_progress import ItemProgress
from binaryeval_dspy.cli.options import lm_options, with_run_settings
from binaryeval_dspy.comparison.factories import make_setup
from binaryeval_dspy.comparison.harness import (
    OPTIMIZERS,
    ComparisonBudgets,
    run_comparison,
)
from binaryeval_dspy.comparison.report import write_comparison
from binaryeval_dspy.comparison.report_tables import comparison_table
from binaryeval_dspy.comparison.results import load_results
from binaryeval_dspy.errors import InputError
from binaryeval_dspy.runs.run_directory import refuse_unrelated_folder
from binaryeval_dspy.settings import RunSettings


def _names(value: str) -> list[str]:
    names = [n.strip().lower() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in OPTIMIZERS]
    if unknown or not names:
        raise InputError(f"--compare got {unknown or value!r}", field="--compare",
                         fix=f"give a comma-separated subset of {','.join(OPTIMIZERS)}.")
    return list(dict.fromkeys(names))


def _check_out_dir(out_dir: Path) -> None:
    """Refuse an --out that is a file, or a non-empty folder that is not a comparison.

    Raises:
        InputError: --out is a file.
        RunStateError: its files could be overwritten or mistaken for results.
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError("--out is a file, not a folder", path=out_dir, field="--out",
                         fix="choose a new or empty folder.")
    if not (out_dir / "config.json").is_file():
        refuse_unrelated_folder(out_dir, kind="a comparison folder", marker="comparison (config.json)")


def _check_mode_options(mode: str, *, source_lm: str | None, source_verdicts: Path | None,
                        regenerate_questions: bool, labels_file: Path | None = None) -> None:
    """Refuse options that the chosen mode would silently ignore.

    Raises:
        InputError: --source-lm / --source-verdicts outside ``cross_model``, both of them
            together, ``cross_model`` without either, --regenerate-questions or --labels outside
            ``human``, or both of them.
    """
    if mode != "cross_model":
        given = [name for name, value in (("--source-lm", source_lm), ("--source-verdicts", source_verdicts))
                 if value is not None]
        if given:
            raise InputError(f"{' and '.join(given)} only apply to --mode cross_model, not {mode}",
                             field=given[0], fix=f"drop {' and '.join(given)}, or pass --mode cross_model.")
    elif source_lm is not None and source_verdicts is not None:
        raise InputError("--source-lm and --source-verdicts both name the source evaluator", field="--source-lm",
                         fix="pass one of them: an LM to compute the source verdicts, or a run with them.")
    elif source_lm is None and source_verdicts is None:
        raise InputError("cross_model needs a source evaluator", field="--source-lm",
                         fix="pass --source-lm SPEC (an LM for the source BinEval) or --source-verdicts DIR.")
    if regenerate_questions and mode != "human":
        raise InputError(f"--regenerate-questions only applies to --mode human, not {mode}",
                         field="--regenerate-questions", fix="drop it, or pass --mode human.")
    if labels_file is not None and mode != "human":
        raise InputError(f"--labels only applies to --mode human, not {mode}", field="--labels",
                         fix="drop it, or pass --mode human.")
    if labels_file is not None and regenerate_questions:
        raise InputError("--labels and --regenerate-questions do not go together: labels name question ids, and "
                         "regenerated questions have other ids", field="--labels",
                         fix="drop one of them.")


@click.command("optimize")
@click.option("--mode", type=click.Choice(["cross_model", "human", "generation"]), required=True,
              help="human / cross_model: optimize a BinEval evaluator on SummEval; generation: a generator on IFBench.")
@click.option("--compare", "compare", default="bineval", show_default=True,
              help=f"Optimizers to run, comma-separated, from {','.join(OPTIMIZERS)}. The unoptimized program is "
                   "always the first row.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Comparison directory (default runs/optimize-<mode>-<lm>). Rerun to resume.")
@click.option("--data-dir", type=click.Path(path_type=Path), default=None, envvar="BINEVAL_DATA_DIR",
              help="Folder with summeval/ and ifbench/ (default: $BINEVAL_DATA_DIR, else the data shipped with the package).")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="Keep at most N items in each of train, validation and test (small runs).")
@click.option("--seed", default=42, show_default=True, help="Split seed (paper: 42).")
@click.option("--questions", "questions_path", type=click.Path(path_type=Path), default=None,
              help="SummEval question set (default examples/summeval/questions.json).")
@click.option("--questions-per-dimension", type=click.IntRange(min=0), default=0, show_default=True,
              help="Keep only the first K questions of each dimension (0 keeps all).")
@click.option("--target-instructions", type=click.Path(path_type=Path), default=None,
              help="File with the starting instructions of the optimized predictor (judge or generator).")
@click.option("--source-lm", default=None, help="cross_model: LM of the source evaluator (same forms as --lm).")
@click.option("--source-verdicts", type=click.Path(path_type=Path), default=None,
              help="cross_model: a `bineval evaluate` run directory with the source's verdicts.")
@click.option("--prompt-lm", default=None,
              help="LM for lessons, rewrites, proposals and reflection (default: --lm, i.e. self-update).")
@click.option("--regenerate-questions/--keep-questions", default=False, show_default=True,
              help="human: also rewrite the task prompt and regenerate the questions each iteration.")
@click.option("--labels", "labels_file", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="human: question-level labels on the SummEval items (a verdicts file, e.g. downloaded from "
                   "bineval view). The BinEval optimizer learns from the questions answered against them, and the "
                   "table adds every row's agreement with them (kappa, accuracy) on the test items.")
@click.option("--iterations", default=5, show_default=True, type=click.IntRange(min=1),
              help="BinEval optimizer: most prompt updates T (paper: 5).")
@click.option("--max-lessons", default=10, show_default=True, type=click.IntRange(min=1))
@click.option("--max-prompt-chars", default=4000, show_default=True, type=click.IntRange(min=1))
@click.option("--mipro-candidates", default=3, show_default=True, type=click.IntRange(min=1))
@click.option("--mipro-trials", default=4, show_default=True, type=click.IntRange(min=1))
@click.option("--copro-breadth", default=3, show_default=True, type=click.IntRange(min=2))
@click.option("--copro-depth", default=2, show_default=True, type=click.IntRange(min=1))
@click.option("--gepa-metric-calls", default=40, show_default=True, type=click.IntRange(min=1))
@click.option("--simba-metric-calls", default=None, type=click.IntRange(min=1),
              help="SIMBA: most metric calls (program runs on an item, scored), mapped onto its max_steps, bsize "
                   "and num_candidates; at least 3 + 2 x train items. Default: --gepa-metric-calls, raised to "
                   "that minimum when below it.")
@click.option("--threads", default=1, show_default=True, type=click.IntRange(min=1),
              help="Items evaluated concurrently (remote LMs; the embedded model serializes).")
@click.option("--report-only", is_flag=True, default=False,
              help="Rebuild comparison.md from the results saved in --out and print the table; no LM calls.")
@click.option("--cache/--no-cache", default=False, show_default=True,
              help="Use DSPy's response cache. Off by default so every optimizer pays for its own calls.")
@lm_options
@friendly_errors
@with_run_settings
def optimize_command(mode: str, compare: str, out_dir: Path | None, data_dir: Path | None, limit: int | None,
                     seed: int, questions_path: Path | None, questions_per_dimension: int,
                     target_instructions: Path | None, source_lm: str | None, source_verdicts: Path | None,
                     prompt_lm: str | None, regenerate_questions: bool, labels_file: Path | None, iterations: int,
                     max_lessons: int,
                     max_prompt_chars: int, mipro_candidates: int, mipro_trials: int, copro_breadth: int,
                     copro_depth: int, gepa_metric_calls: int, simba_metric_calls: int | None, threads: int,
                     report_only: bool, cache: bool, lm_spec: str,
                     lm_model: str | None, api_key_env: str | None, max_tokens: int, settings: RunSettings) -> None:
    """Optimize a prompt with the BinEval loop and compare it with MIPROv2, COPRO, GEPA and SIMBA."""
    quiet_libraries()
    if report_only:
        if out_dir is None or not (out_dir / "config.json").is_file():
            raise InputError("no comparison here (config.json missing)", path=out_dir, field="--out",
                             fix="pass the --out directory of an earlier `bineval optimize` run.")
        try:
            config = json.loads((out_dir / "config.json").read_text(encoding="utf-8"))
            table = comparison_table(config, load_results(out_dir))
        except (ValueError, KeyError, TypeError) as exc:  # damaged config.json or <optimizer>/result.json
            raise InputError(f"cannot rebuild the comparison from the saved files ({type(exc).__name__}: "
                             f"{str(exc)[:200]})", path=out_dir, field="--out",
                             fix="restore config.json / <optimizer>/result.json, or move the damaged "
                                 "result.json away and rerun the command to recompute that optimizer.") from exc
        out_console.print(table)
        console.print(f"Rebuilt {write_comparison(out_dir)} from the saved results (no LM calls).")
        return
    optimizers = _names(compare)
    if out_dir is None:
        out_dir = Path("runs") / f"optimize-{mode}-{slug(lm_spec)}"
    _check_out_dir(out_dir)
    _check_mode_options(mode, source_lm=source_lm, source_verdicts=source_verdicts,
                        regenerate_questions=regenerate_questions, labels_file=labels_file)
    instructions = None
    if target_instructions is not None:
        if not target_instructions.is_file():
            raise InputError("file not found", path=target_instructions, field="--target-instructions",
                             fix="give a text file with the starting instructions, or drop the option.")
        try:
            instructions = target_instructions.read_text(encoding="utf-8-sig").strip()
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason})", path=target_instructions,
                             field="--target-instructions", fix="save it as UTF-8.") from exc
        if not instructions:
            raise InputError("the file is empty", path=target_instructions, field="--target-instructions",
                             fix="write the starting instructions into it, or drop the option to use the defaults.")
    handle = build_lm(lm_spec, lm_model, api_key_env, max_tokens, settings)
    handle.lm.cache = cache
    prompt_handle = (build_lm(prompt_lm, lm_model, api_key_env, max_tokens, settings, "--prompt-lm")
                     if prompt_lm else None)
    source_handle = (build_lm(source_lm, lm_model, api_key_env, max_tokens, settings, "--source-lm")
                     if source_lm else None)
    for extra in (prompt_handle, source_handle):
        if extra is not None:
            extra.lm.cache = cache
    choice = make_setup(mode, data_dir=data_dir, limit=limit, seed=seed, question_set_path=questions_path,
                        questions_per_dimension=questions_per_dimension, target_instructions=instructions,
                        source_lm=source_handle, source_verdicts_dir=source_verdicts,
                        regenerate_questions=regenerate_questions, prompt_lm=prompt_handle, judge_lm=prompt_handle,
                        num_threads=threads, labels_file=labels_file)
    budgets = ComparisonBudgets(bineval_iterations=iterations, bineval_max_lessons=max_lessons,
                                bineval_max_prompt_chars=max_prompt_chars, mipro_candidates=mipro_candidates,
                                mipro_trials=mipro_trials, copro_breadth=copro_breadth, copro_depth=copro_depth,
                                gepa_metric_calls=gepa_metric_calls, simba_metric_calls=simba_metric_calls,
                                seed=seed)
    notes = list(choice.notes)
    if handle.embedded:
        notes.append("The embedded engine bounds every free-text output field to 160 characters (responses, "
                     "proposed instructions, rewrites), for every optimizer alike.")
    sizes = choice.setup.split.sizes()
    console.print(f"{mode}: train {sizes['train']}, validation {sizes['val']}, test {sizes['test']} items; "
                  f"optimizers: unoptimized, {', '.join(optimizers)}; LM {handle.name} -> {out_dir}")

    adapter = {"adapter": handle.adapter} if handle.adapter is not None else {}
    with ItemProgress(console) as progress, dspy.context(lm=handle.lm, **adapter):
        task = progress.add_task("optimizers", total=len(optimizers) + 1, unit="optimizer")

        def on_status(name: str, message: str) -> None:
            console.print(f"[bold]{name}[/bold]: {message}", highlight=False)
            if name == "shared preparation" or message == "running":
                progress.set_note(task, f"{name}: {message}"[:80])
            else:  # "done", "skipped (done)" or "failed: ..."
                status = "skipped" if message.startswith("skipped") else message.split(":")[0]
                progress.update(task, status, note=f"{name}: {message}"[:80])

        def on_bineval(line: str) -> None:
            console.print(f"[dim]bineval {line}[/dim]", highlight=False)
            progress.set_note(task, f"bineval: {line}"[:80])

        choice.setup.progress = on_bineval
        config, results, failures = run_comparison(
            choice.setup, optimizers, out_dir, lm_name=handle.name,
            prompt_lm_name=prompt_handle.name if prompt_handle else handle.name,
            source_lm_name=(source_handle.name if source_handle else
                            (f"precomputed ({source_verdicts})" if source_verdicts else None)),
            budgets=budgets, metric_description=choice.metric_description,
            test_description=choice.test_description, notes=notes, limit=limit, on_status=on_status)
    out_console.print(comparison_table(config, results))
    console.print(f"Wrote {out_dir / 'comparison.md'}; per-optimizer results, programs and histories under {out_dir}/.")
    if failures:
        for name, message in failures.items():
            console.print(f"[red]{name} failed[/red]: {message[:300]} (traceback in {out_dir / name / 'error.txt'})",
                          highlight=False)
        console.print("[yellow]Rerun the same command to retry the failed optimizers; finished ones are kept.[/yellow]")
        raise SystemExit(1)

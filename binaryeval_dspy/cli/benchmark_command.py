"""`bineval benchmark NAME`, `bineval report RUN_DIR` and `bineval benchmark-questions`.

`benchmark` runs BinEval and the baselines on one benchmark with one LM into a
resumable run directory and writes the report; `report` rebuilds the report from a
run directory without calling any LM (recomputed from the run's files, or re-rendered
from ``metrics.json`` alone); `benchmark-questions` regenerates the question sets of the
benchmarks' task prompts with an LM.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from binaryeval_dspy.cli.common import build_lm
from binaryeval_dspy.cli.console import console, out_console, quiet_libraries
from binaryeval_dspy.cli.error_handling import (
    friendly_errors,
    leave_after_interrupt,
    with_flag_names,
)
from binaryeval_dspy.cli.file_arguments import check_writable_file, slug
from binaryeval_dspy.cli.item_progress import GenerationSteps, ItemProgress
from binaryeval_dspy.cli.options import (
    bootstrap_option,
    constant_predictions_option,
    lm_options,
    report_statistics_options,
    run_options,
    with_run_settings,
)
from binaryeval_dspy.cli.run_speed import speed_check_for
from binaryeval_dspy.data.sampling import SAMPLE_METHODS
from binaryeval_dspy.errors import BinEvalError, InputError
from binaryeval_dspy.meta_eval.benchmark_files import (
    LM_METHODS,
    METHOD_TITLES,
    METHODS,
    NO_LM,
    BenchmarkRun,
)
from binaryeval_dspy.meta_eval.benchmark_run import prepare_run, run_benchmark
from binaryeval_dspy.meta_eval.benchmark_spec import BENCHMARKS, get_benchmark
from binaryeval_dspy.meta_eval.task_files import MANUAL, TaskFiles, lm_tag
from binaryeval_dspy.programs.question_generator import QuestionGenerator
from binaryeval_dspy.reports.benchmark_report import rerender_from_metrics, write_benchmark_report
from binaryeval_dspy.render import Table as ReportTable
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.rubric import Rubric
from binaryeval_dspy.settings import RunSettings


def _methods(value: str) -> list[str]:
    chosen = [m.strip().lower() for m in value.split(",") if m.strip()]
    unknown = [m for m in chosen if m not in METHODS]
    if unknown or not chosen:
        raise InputError(f"unknown method(s) {unknown or value!r}; choose from {','.join(METHODS)}",
                         field="methods")
    return [m for m in METHODS if m in chosen]


def default_run_dir(benchmark: str, methods: list[str], lm_spec: str | None, *, limit: int | None,
                    sample: str | None, seed: int) -> Path:
    """``runs/<benchmark>[-<methods>]-<lm>-<selection>``: what ran and on which LM.

    The methods are named (joined by ``+``) unless all of `METHODS` run; the LM is
    `lm_spec` as a slug, or ``no-lm`` when `lm_spec` is None (no chosen method uses an
    LM); the selection is ``<limit>-<sample>-s<seed>`` or ``all``. E.g.
    ``runs/summeval-rouge-no-lm-4-head-s0``, ``runs/summeval-local-all``.
    """
    selection = f"{limit}-{sample or 'head'}-s{seed}" if limit else "all"
    which = "" if list(methods) == list(METHODS) else "-" + "+".join(methods)
    return Path("runs") / f"{benchmark}{which}-{slug(lm_spec) if lm_spec else 'no-lm'}-{selection}"


def _shown_path(path: Path) -> str:
    """`path` relative to the working directory when it lies under it (reports stay portable), else as given."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def print_report_table(block: ReportTable) -> None:
    """Print one report table on the terminal (rich): caption as title (settings named by
    their flags), the Method column left-aligned and every other column right-aligned."""
    table = Table(title=with_flag_names(block.caption), title_justify="left")
    for h in block.header:
        table.add_column(h, justify="left" if h == "Method" else "right")
    for row in block.rows:
        table.add_row(*row)
    out_console.print(table)


def print_main_table(report) -> None:
    """Print the report's first table (the main correlation table) on the terminal."""
    for _heading, blocks in report.sections[:1]:
        for block in blocks[:1]:
            print_report_table(block)


_print_main_table = print_main_table  # the name before it was public


@click.command("benchmark")
@click.argument("name", type=click.Choice(sorted(BENCHMARKS), case_sensitive=False))
@click.option("--methods", default=",".join(METHODS), show_default=True,
              help="Comma-separated methods: bineval, geval (G-Eval-style), unieval (UniEval-style), rouge.")
@click.option("--limit", default=None, type=click.IntRange(min=1), help="Items per split (default: all).")
@click.option("--sample", type=click.Choice(SAMPLE_METHODS), default=None,
              help="How --limit picks items: head (default), random, or stratified (whole documents, "
                   "systems balanced; score bins for QAGS).")
@click.option("--seed", default=0, show_default=True, type=int, help="Sampling and bootstrap seed.")
@click.option("--data-dir", type=click.Path(path_type=Path), default=None,
              help="Benchmark data folder (default: $BINEVAL_DATA_DIR, else the data shipped with the package).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Run directory (default: runs/<benchmark>[-<methods>]-<lm>-<selection>, the methods named unless "
                   "all run, the LM 'no-lm' when none of them uses one). Rerun to resume, or with the same --out to add "
                   "methods.")
@click.option("--questions", "questions_choice", default=MANUAL, show_default=True,
              help="BinEval question set: 'manual', 'generated' (made by this --lm with benchmark-questions) "
                   "or a path.")
@click.option("--tasks-dir", type=click.Path(path_type=Path), default=None,
              help="Folder with one task folder per benchmark (default: ./examples/tasks if present, else the copy shipped with the package).")
@click.option("--logprobs", type=click.Choice(["auto", "on", "off"]), default="auto", show_default=True,
              help="Ask the LM for token log-probabilities for the G-Eval/UniEval-style scores.")
@bootstrap_option
@constant_predictions_option("method scores")
@click.option("--no-figures", is_flag=True, help="Write the report without figures (faster).")
@run_options
@lm_options
@friendly_errors
@with_run_settings
def benchmark_command(name: str, methods: str, limit: int | None, sample: str | None, seed: int,
                      data_dir: Path | None, out_dir: Path | None, questions_choice: str, tasks_dir: Path | None,
                      logprobs: str, n_resamples: int, constant_predictions: str, no_figures: bool,
                      no_explanations: bool, lm_spec: str, lm_model: str | None,
                      api_key_env: str | None, max_tokens: int, settings: RunSettings) -> None:
    """Run BinEval and the baselines on benchmark NAME with one LM and write the report."""
    quiet_libraries()
    spec = get_benchmark(name)
    chosen = _methods(methods)
    if sample is not None and limit is None:
        console.print(f"[yellow]--sample {sample} has no effect without --limit: every item of {spec.title} is "
                      "used.[/yellow]")
    items = spec.load(data_dir=data_dir, limit=limit, sample=sample, seed=seed)
    if not items:
        raise InputError("the benchmark selection is empty", field="limit",
                         fix="check the data file, or raise --limit.")
    # Only the task files the chosen methods use are read: ROUGE-L alone needs none of them.
    task = TaskFiles.for_benchmark(spec.task_dir, tasks_dir) if set(chosen) - {"rouge"} else None
    rubric = Rubric.load(task.rubric) if task is not None and {"geval", "unieval"} & set(chosen) else None
    if rubric is not None:
        covered = [d for d in spec.dimensions if d in rubric.dimensions]
        if not covered:
            raise InputError(f"the rubric has none of {spec.title}'s dimensions ({', '.join(spec.dimensions)}); "
                             f"it has {', '.join(rubric.dimensions) or 'none'}", path=task.rubric,
                             field="dimensions", fix="add criteria for the benchmark's dimensions to the rubric.")
        if len(covered) < len(spec.dimensions):
            absent = ", ".join(d for d in spec.dimensions if d not in covered)
            console.print(f"[yellow]The rubric has no criteria for {absent}: the G-Eval- and UniEval-style "
                          "baselines will report n/a there.[/yellow]")
    handle = build_lm(lm_spec, lm_model, api_key_env, max_tokens, settings) if LM_METHODS & set(chosen) else None
    question_path = question_set = None
    if task is not None and "bineval" in chosen:
        question_path = task.question_set_path(questions_choice, handle)
        question_set = QuestionSet.load(question_path)
        missing_dims = [d for d in spec.dimensions if d not in question_set.dimensions]
        if missing_dims:
            console.print(f"[yellow]The question set has no questions for {', '.join(missing_dims)}: BinEval "
                          "will report n/a there.[/yellow]")
    lm_name = handle.name if handle is not None else NO_LM
    if out_dir is None:
        out_dir = default_run_dir(spec.name, chosen, lm_spec if handle is not None else None, limit=limit,
                                  sample=sample, seed=seed)
    run = BenchmarkRun(out_dir)
    prepare_run(run, spec, items, lm_name=lm_name, question_set=question_set,
                question_set_source=_shown_path(question_path) if question_path else "", rubric=rubric,
                rubric_source=_shown_path(task.rubric) if rubric is not None and task is not None else "",
                methods=chosen, limit=limit, sample=sample, seed=seed,
                data_dir=str(data_dir) if data_dir else None, logprobs=logprobs)
    console.print(f"{spec.title}: {len(items)} items, methods {', '.join(chosen)}, LM {lm_name} -> {out_dir}")
    in_flight = settings.in_flight(handle)
    with ItemProgress(console, in_flight=in_flight, speed_check=speed_check_for(handle, in_flight)) as progress:
        tasks: dict[str, int] = {}

        def on_start(method: str, total: int) -> None:
            each = (len(question_set.questions) - len(question_set.code_checked) or None
                    if method == "bineval" and question_set is not None else None)
            tasks[method] = progress.add_task(f"{METHOD_TITLES[method]:<14}", total=total, calls_each=each)

        def on_progress(method: str, result, status: str) -> None:
            note = status if status != "done" else f"last {getattr(result, 'item_id', '')}"[:40]
            usage = getattr(result, "usage", None)
            progress.update(tasks[method], status, note="" if status == "skipped" else note,
                            calls=getattr(usage, "lm_calls", None))

        outcomes = run_benchmark(run, spec, items, methods=chosen, handle=handle, question_set=question_set,
                                 rubric=rubric, logprobs=logprobs,  # type: ignore[arg-type]
                                 on_method_start=on_start, on_progress=on_progress, settings=settings,
                                 explanations=not no_explanations)
    failed = {m: o.failed for m, o in outcomes.items() if o.failed}
    interrupted = any(o.interrupted for o in outcomes.values())
    md_path, html_path, report = write_benchmark_report(run, n_resamples=n_resamples, seed=seed,
                                                        figures=not no_figures,
                                                        constant_predictions=constant_predictions)
    print_main_table(report)
    for method, outcome in outcomes.items():
        console.print(f"{METHOD_TITLES[method]}: {outcome.new_items} items now, {outcome.skipped_items} done "
                      f"before, {outcome.seconds:.1f} s")
    console.print(f"Report: {md_path} and {html_path}")
    incomplete = {m: o.incomplete for m, o in outcomes.items() if o.incomplete}
    for method, ids in incomplete.items():
        console.print(f"[yellow]{METHOD_TITLES[method]}: {len(ids)} item(s) incomplete (failed LM calls); rerun the "
                      "same command to ask only the failed questions.[/yellow]", highlight=False)
    for method, outcome in outcomes.items():
        for item_id, message in outcome.errors[:3]:
            console.print(f"[yellow]{METHOD_TITLES[method]} could not judge[/yellow] {escape(item_id)} (stored with "
                          f"status error): {escape(message[:300])}", highlight=False)
        if outcome.empty_outputs:
            console.print(f"{METHOD_TITLES[method]}: {len(outcome.empty_outputs)} item(s) with an empty output "
                          "recorded as status empty_output (no LM call, no score).", highlight=False)
    stopped = [o.stopped_early for o in outcomes.values() if o.stopped_early]
    for reason in stopped:
        console.print(f"[red]Stopped early:[/red] {reason}.", highlight=False)
    if failed:
        for method, items_failed in failed.items():
            for item_id, message in items_failed[:3]:
                console.print(f"[red]{method} failed[/red] {item_id}: {message}", highlight=False)
        console.print("[yellow]Some items failed and were not stored; rerun the same command to retry them.[/yellow]")
        raise SystemExit(1)
    if interrupted:
        console.print("[yellow]Interrupted. Results so far are saved; rerun the same command to resume.[/yellow]")
        leave_after_interrupt(130)
    if stopped or (settings.fail_on_errors and incomplete):
        raise SystemExit(1)


@click.command("report")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--from-metrics", is_flag=True,
              help="Re-render report.md / report.html / figures from RUN_DIR/metrics.json alone, without reading "
                   "or recomputing the run (the default when RUN_DIR has metrics.json but no benchmark.json).")
@report_statistics_options("method scores")
@click.pass_context
@friendly_errors
def report_command(ctx: click.Context, run_dir: Path, from_metrics: bool, n_resamples: int, seed: int,
                   constant_predictions: str, no_figures: bool) -> None:
    """Rebuild report.md / report.html of a benchmark run without calling any LM.

    By default every number is recomputed from the run's files (benchmark.json, items
    and results), with --bootstrap, --seed and --constant-predictions, and metrics.json
    is rewritten. With --from-metrics, or when RUN_DIR holds metrics.json but not the
    run's files (a copied report, an agreement report), the report is re-rendered from
    metrics.json alone: the same text as when it was computed; --bootstrap, --seed,
    --constant-predictions and --no-figures do not apply (figures are drawn from the
    data saved in metrics.json).
    """
    has_run = (run_dir / "benchmark.json").is_file()
    if from_metrics or (not has_run and (run_dir / "metrics.json").is_file()):
        options = {"n_resamples": "--bootstrap", "seed": "--seed", "constant_predictions": "--constant-predictions",
                   "no_figures": "--no-figures"}
        ignored = [flag for name, flag in options.items()
                   if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)]
        if ignored:
            console.print(f"[yellow]Re-rendering from metrics.json: {', '.join(ignored)} not applied (the numbers "
                          "are those saved).[/yellow]", highlight=False)
        md_path, html_path, report = rerender_from_metrics(run_dir)
        print_main_table(report)
        console.print(f"Report (re-rendered from {run_dir / 'metrics.json'}): {md_path} and {html_path}")
        return
    if not has_run:
        raise InputError("not a benchmark run directory (no benchmark.json)", path=run_dir,
                         fix="pass the --out directory of a `bineval benchmark` run.")
    md_path, html_path, report = write_benchmark_report(run_dir, n_resamples=n_resamples, seed=seed,
                                                        figures=not no_figures,
                                                        constant_predictions=constant_predictions)
    print_main_table(report)
    console.print(f"Report: {md_path} and {html_path}")


@click.command("benchmark-questions")
@click.argument("names", nargs=-1, type=click.Choice(sorted({s.task_dir for s in BENCHMARKS.values()}),
                                                      case_sensitive=False))
@click.option("--tasks-dir", type=click.Path(path_type=Path), default=None,
              help="Folder with one task folder per benchmark (default: ./examples/tasks if present, else the copy shipped with the package).")
@click.option("--max-requirements", default=8, show_default=True, type=click.IntRange(min=1))
@lm_options
@friendly_errors
@with_run_settings
def benchmark_questions_command(names: tuple[str, ...], tasks_dir: Path | None, max_requirements: int,
                                lm_spec: str, lm_model: str | None, api_key_env: str | None,
                                max_tokens: int, settings: RunSettings) -> None:
    """Generate the question set of each benchmark's task prompt with --lm (all benchmarks by default).

    Writes <tasks dir>/<benchmark>/questions.generated-<lm>.json beside the task prompt.
    """
    quiet_libraries()
    folders = list(dict.fromkeys(names)) or sorted({s.task_dir for s in BENCHMARKS.values()})
    prompts: dict[str, tuple[TaskFiles, str]] = {}
    for folder in folders:  # every task prompt is checked before the LM is loaded or called
        task = TaskFiles.for_benchmark(folder, tasks_dir)
        if not task.task_prompt.is_file():
            raise InputError("task prompt file not found", path=task.task_prompt,
                             fix="write the task prompt there, or pass --tasks-dir.")
        try:
            prompt = task.task_prompt.read_text(encoding="utf-8-sig").strip()
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason})", path=task.task_prompt,
                             fix="save it as UTF-8.") from exc
        if not prompt:
            raise InputError("the task prompt file is empty", path=task.task_prompt,
                             fix="write the instructions the evaluated outputs were written for.")
        prompts[folder] = (task, prompt)
    handle = build_lm(lm_spec, lm_model, api_key_env, max_tokens, settings)
    for folder, (task, prompt) in prompts.items():
        spec = next(s for s in BENCHMARKS.values() if s.task_dir == folder)
        target = task.generated_questions(lm_tag(handle))
        check_writable_file(target)
        with ItemProgress(console, speed_check=speed_check_for(handle, generation=True)) as progress, \
                handle.context():
            console.print(f"{folder}: generating questions with {escape(handle.name)}", highlight=False)
            generator = QuestionGenerator(dimensions=list(spec.dimensions), max_requirements=max_requirements,
                                          on_step=GenerationSteps(progress, infer_dimensions=False))
            try:
                pred = generator(task_prompt=prompt)
            except BinEvalError:
                raise
            except Exception as exc:  # transport and provider errors come in many types
                raise BinEvalError(f"{folder}: the LM call failed ({type(exc).__name__}: {exc}). Question sets "
                                   "written before this one are kept; fix the LM and rerun.") from exc
        question_set = pred.question_set.model_copy(update={"generated_by": handle.name})
        path = question_set.save(target)
        counts = {d: len(qs) for d, qs in question_set.by_dimension().items()}
        console.print(f"{folder}: {len(question_set.questions)} questions {counts} -> {path}")

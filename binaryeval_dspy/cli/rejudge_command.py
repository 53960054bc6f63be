"""`bineval rejudge`: judge again only the items whose output changed, with the run's frozen question set."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from binaryeval_dspy.cli.common import build_lm
from binaryeval_dspy.runs.file_run import endpoint_config, recorded_settings
from binaryeval_dspy.cli.console import console, out_console, quiet_libraries
from binaryeval_dspy.cli.error_handling import friendly_errors
from binaryeval_dspy.cli.options import (
    checks_module_option,
    llama_threads_option,
    load_checks_modules,
)
from binaryeval_dspy.cli.run_outcome import (
    exit_for_outcome,
    report_results,
)
from binaryeval_dspy.data.items import load_items
from binaryeval_dspy.errors import QuestionSetError, RunStateError
from binaryeval_dspy.lm.adapters import ADAPTER_POLICIES
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.programs.judge_panel import ensemble_for, ensemble_record
from binaryeval_dspy.programs.verdict_judge import VerdictJudge
from binaryeval_dspy.runs.items_file import items_file_identity
from binaryeval_dspy.runs.rejudge import frozen_question_set, rejudge_items, rejudge_settings
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.rejudge_report import RejudgeReport
from binaryeval_dspy.schemas.run_manifest import RunManifest
from binaryeval_dspy.settings import LEGACY_CONFIG_KEYS, RunSettings


def default_rejudge_dir(previous: Path) -> Path:
    """``<previous>-rejudge-N``: the last such directory if it is unfinished (to resume), else a new one."""
    n = 1
    while True:
        candidate = previous.parent / f"{previous.name}-rejudge-{n}"
        if not candidate.exists():
            return candidate
        manifest = RunDirectory(candidate).read_manifest()
        following = previous.parent / f"{previous.name}-rejudge-{n + 1}"
        if manifest is not None and manifest.finished_at is None and not following.exists():
            return candidate
        n += 1


def changes_table(report: RejudgeReport) -> Table:
    """A rich table of the re-judge: per item its status (with how many questions an item
    that could not be fully judged again answered), the verdict (or score) before and
    after, whether it changed ("not compared" when an LM call failed in either run), the
    answers that flipped and the questions that could not be compared."""
    table = Table(title=f"Re-judge of {report.previous_run} - LM: {report.lm}")
    for col in ("item", "status", "before", "after", "changed", "answers flipped", "not compared"):
        table.add_column(col)
    verdicts = report.aggregation != "score"
    uncompared = set(report.not_compared)
    for c in report.items:
        def fmt(label: str | None, overall: float | None) -> str:
            if verdicts:
                return label or "-"
            return "-" if overall is None else f"{overall:.2f}"
        status = c.status
        if c.questions_total is not None:
            status = f"{c.status} ({c.questions_answered}/{c.questions_total} answered)"
        changed = "yes" if c.changed else "not compared" if c.item_id in uncompared else ""
        table.add_row(escape(c.item_id), status, escape(fmt(c.old_verdict, c.old_overall)),
                      escape(fmt(c.new_verdict, c.new_overall)), changed, escape(", ".join(c.flipped_questions)),
                      escape(", ".join(c.uncompared_questions)))
    return table


def changes_summary(report: RejudgeReport) -> str:
    """One line for the terminal: items per status, the changed verdicts and, apart, the
    items whose verdict was not compared or that could not be fully judged again (failed
    LM calls), each with how many questions it answered."""
    counts = ", ".join(f"{n} {status}" for status, n in report.counts.items())
    line = f"{counts}; {len(report.changed)} verdict(s) changed: {', '.join(report.changed) or 'none'}."
    uncompared = set(report.not_compared)
    failures = ("incomplete", "error", "failed")
    said = []
    for c in report.items:
        if c.status in failures and c.questions_total is not None:
            said.append(f"{c.item_id} {c.status} ({c.questions_answered} of {c.questions_total} questions answered)")
        elif c.status in failures:
            said.append(f"{c.item_id} {c.status} (nothing stored)")
        elif c.item_id in uncompared:
            said.append(f"{c.item_id} (its previous result was incomplete)")
    if said:
        line += (f" {len(said)} item(s) with failed LM calls, in this run or the previous one, whose verdict is "
                 f"not compared (never counted as changed): {', '.join(said)}.")
    if any(c.status in failures for c in report.items):
        line += " Rerun the same command to complete them."
    if report.previous_unreadable:
        line += f" {report.previous_unreadable}"
    return line


@click.command("rejudge")
@click.argument("run_dir_path", metavar="RUN_DIR", type=click.Path(path_type=Path))
@click.argument("items_file", type=click.Path(path_type=Path))
@click.option("--question-set", "question_set_file", type=click.Path(path_type=Path), default=None,
              help="Check this question-set file against the run (refused if it changed). Default: the run's "
                   "frozen copy, question_set.json.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="New run directory (default: RUN_DIR-rejudge-N). RUN_DIR itself is never modified.")
@click.option("--lm", "lm_spec", default=None, help="The LM (default: the one recorded in RUN_DIR; another is refused).")
@click.option("--lm-model", default=None, help="Model name served at a base URL given as --lm.")
@click.option("--api-key-env", default=None, help="Environment variable holding the key for a base URL.")
@click.option("--max-tokens", default=None, type=click.IntRange(min=16), help="Completion cap (default: the run's).")
@click.option("--adapter", type=click.Choice(ADAPTER_POLICIES), default=None,
              help="Adapter policy (default: the one the run used).")
@click.option("--concurrency", "--threads", "concurrency", default=None, type=click.IntRange(min=1),
              help="LM calls in flight across items and questions (default: the run's).")
@click.option("--fail-on-errors", is_flag=True, help="Stop at the first item with a failed LM call; exit 1.")
@click.option("--restart", is_flag=True, help="Start the re-judge in --out over: an existing re-judge there is "
                                              "moved to <out>.old-N (nothing is deleted).")
@click.option("--verdicts", "replay_verdicts", default=None, metavar="FILE",
              help="Judge the changed items from this verdicts file (the replay engine, no LM call; docs/replay.md). "
                   "Default: for a run made with --engine replay, the file it replayed.")
@click.option("--replay-judge", "replay_judge", default=None, metavar="JUDGE",
              help="With --verdicts: whose rows to replay (default: the run's, else the file's only judge).")
@llama_threads_option
@checks_module_option
@friendly_errors
def rejudge_command(run_dir_path: Path, items_file: Path, question_set_file: Path | None, out_dir: Path | None,
                    lm_spec: str | None, lm_model: str | None, api_key_env: str | None, max_tokens: int | None,
                    adapter: str | None, concurrency: int | None, fail_on_errors: bool, restart: bool,
                    replay_verdicts: str | None, replay_judge: str | None,
                    llama_threads: int | None, checks_modules: tuple[str, ...]) -> None:
    """Re-judge the items of ITEMS_FILE whose output changed since RUN_DIR, with the same questions.

    Unchanged items are copied, changed and new ones judged again, and the command
    reports which verdicts changed (also in rejudge.json of the new run directory).
    """
    quiet_libraries()
    previous = RunDirectory(run_dir_path)
    old = previous.read_manifest()
    if old is None:
        raise RunStateError(f"{run_dir_path} is not a run directory (no manifest.json).",
                            fix="pass the --out directory of an earlier `bineval evaluate`.")
    config = old.config
    loaded_checks = load_checks_modules(checks_modules)
    _warn_changed_checks(config.get("checks_modules") or [], loaded_checks)
    try:
        given = QuestionSet.load(question_set_file) if question_set_file is not None else None
        question_set = frozen_question_set(previous, given)
    except QuestionSetError as exc:
        recorded = [m.get("module") for m in config.get("checks_modules") or []]
        if recorded and not checks_modules:
            raise QuestionSetError(f"{exc.message} The previous run loaded checks from {recorded}; pass them "
                                   "again with --checks-module.", path=exc.path, line=exc.line,
                                   field=exc.field) from exc
        raise
    items = load_items(items_file, input_field=config.get("input_field", "input"),
                       output_field=config.get("output_field", "output"), id_field=config.get("id_field"))
    aggregation = str(config.get("aggregation", "score"))
    pressure_test = str(config.get("pressure_test", "non-pass"))
    scale = tuple(config.get("scale") or (0.0, 1.0))
    explanations = bool(config.get("explanations", True))
    if aggregation == "score":
        program = BinEval(question_set, scale=scale, explanations=explanations)
    else:
        program = VerdictJudge(question_set, aggregation=aggregation, pressure_test=pressure_test, scale=scale,
                               explanations=explanations)
    settings = rejudge_settings(RunSettings.of_manifest(old, path=previous.manifest_path), adapter=adapter,
                                concurrency=concurrency, fail_on_errors=fail_on_errors, llama_threads=llama_threads,
                                replay_verdicts=replay_verdicts, replay_judge=replay_judge)
    if aggregation == "score":
        program = ensemble_for(program, settings)
    spec = lm_spec or config.get("lm_spec")
    if not spec:
        raise RunStateError(f"{run_dir_path} does not record which --lm made it (it used {old.lm!r}).",
                            fix="pass the same --lm again.")
    handle = build_lm(str(spec), lm_model or config.get("lm_model"), api_key_env or config.get("api_key_env"),
                      max_tokens or int(config.get("max_tokens") or 512), settings)
    if handle.name != old.lm:
        raise RunStateError(f"{run_dir_path} was judged by {old.lm!r}, this command would use {handle.name!r}: "
                            "re-judging with another LM would mix two evaluators.",
                            fix="use the same --lm, or start a new baseline with `bineval evaluate`.")
    out_dir = out_dir or default_rejudge_dir(run_dir_path)
    run_dir = RunDirectory(out_dir)
    new_config = {**{k: v for k, v in config.items() if k not in LEGACY_CONFIG_KEYS},
                  "previous_run": str(run_dir_path), **endpoint_config(handle), **ensemble_record(settings)}
    if config.get("panel_weights") is not None and new_config.get("panel_weights") != config["panel_weights"]:
        raise RunStateError(f"{run_dir_path}'s weighted panel voted with {config['panel_weights']}, but its weights "
                            f"file now gives {new_config.get('panel_weights')}: re-judging would mix two panels.",
                            fix="restore the weights file, or start a new baseline with `bineval evaluate`.")
    if loaded_checks:
        new_config["checks_modules"] = loaded_checks
    manifest = RunManifest(
        command="rejudge", lm=handle.name, question_set_hash=question_set.content_hash,
        question_set_path=str(previous.frozen_question_set_path if previous.frozen_question_set_path.is_file()
                              else question_set_file),
        items_path=str(items_file), items_file=items_file_identity(items_file),
        settings=recorded_settings(settings, handle), config=new_config,
    )
    if restart and run_dir.path.resolve() != previous.path.resolve():  # RUN_DIR itself is never moved
        moved = run_dir.set_aside()
        if moved is not None:
            console.print(f"--restart: the previous re-judge in {out_dir} was moved to {moved} (nothing deleted).",
                          highlight=False)
    console.print(f"Re-judging changed items of {run_dir_path} ({len(items)} items in {items_file}) with "
                  f"{handle.name}, frozen question set {question_set.content_hash} -> {out_dir}")
    with console.status("judging changed items..."):
        outcome = rejudge_items(program, items, previous, run_dir, manifest, aggregation=aggregation, lm=handle,
                                settings=settings)
    report = outcome.report
    judged = {c.item_id for c in report.items
              if c.status in ("rejudged", "completed", "new", "incomplete", "error")}
    report_results(outcome.evaluation.summary, lambda: outcome.results, question_set, run_dir, lm=handle.name,
                   aggregation=aggregation, pressure_test=pressure_test, print_only=judged)
    out_console.print(changes_table(report))
    console.print(f"{escape(changes_summary(report))} Previous run left untouched; new run: {run_dir.path} "
                  "(rejudge.json lists every item).", highlight=False)
    exit_for_outcome(outcome.evaluation, fail_on_errors=settings.fail_on_errors)



def _warn_changed_checks(recorded: list[dict], loaded: list[dict]) -> None:
    """Warn when a checks module's code differs from the one the previous run used."""
    before = {m.get("module"): m.get("sha256") for m in recorded}
    for module in loaded:
        old = before.get(module["module"])
        if old and module["sha256"] and old != module["sha256"]:
            console.print(f"[yellow]warning:[/yellow] {module['module']} changed since the previous run "
                          f"(sha256 {old} -> {module['sha256']}); its checks may answer differently.",
                          highlight=False)

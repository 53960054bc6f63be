"""`bineval questions`: task prompt file -> question set JSON (paper section 3.1).

Besides the table of questions it prints how they were made (the set's
``generation_report``): a summary line such as ``12 generated, 2 fallback templates
(coverage), 1 dropped (placeholder text)``, a warning for every fallback (fallback
dimension, dimension left without questions, template question) and the dropped drafts.
"""

from __future__ import annotations

import logging
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from binaryeval_dspy.cli.common import build_lm
from binaryeval_dspy.cli.console import console, out_console, quiet_libraries
from binaryeval_dspy.cli.error_handling import friendly_errors, with_flag_names
from binaryeval_dspy.cli.file_arguments import check_writable_file
from binaryeval_dspy.cli.item_progress import GenerationSteps, ItemProgress
from binaryeval_dspy.cli.options import lm_options, with_run_settings
from binaryeval_dspy.cli.run_speed import questions_forecast, speed_check_for
from binaryeval_dspy.errors import BinEvalError, InputError
from binaryeval_dspy.programs import question_generator as question_generator_module
from binaryeval_dspy.programs.question_generator import QuestionGenerator, normalize_dimension
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.settings import RunSettings


@click.command("questions")
@click.argument("task_prompt_file", type=click.Path(path_type=Path))
@click.option("--out", "out_path", type=click.Path(path_type=Path), required=True,
              help="Where to write the question set JSON.")
@click.option("--dimensions", default=None,
              help="Comma-separated dimension names (e.g. coherence,consistency); inferred if omitted. "
                   "The LM must use these names (case, spaces, _ and - ignored); other names are dropped.")
@click.option("--max-requirements", default=12, show_default=True, type=click.IntRange(min=1))
@lm_options
@friendly_errors
@with_run_settings
def questions_command(task_prompt_file: Path, out_path: Path, dimensions: str | None, max_requirements: int,
                      lm_spec: str, lm_model: str | None, api_key_env: str | None, max_tokens: int,
                      settings: RunSettings) -> None:
    """Generate binary questions from the task prompt in TASK_PROMPT_FILE.

    Prints the questions, a provenance summary (generated / merged / fallback templates /
    dropped) and a warning for each fallback; all of it is also saved in the JSON.
    """
    quiet_libraries()
    if not task_prompt_file.is_file():
        raise InputError("task prompt file not found", path=task_prompt_file,
                         fix="give the path of a text file holding the task prompt.")
    try:
        task_prompt = task_prompt_file.read_text(encoding="utf-8-sig").strip()
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason})", path=task_prompt_file, fix="save it as UTF-8.") from exc
    if not task_prompt:
        raise InputError("the task prompt file is empty", path=task_prompt_file,
                         fix="write the instructions the evaluated model gets into it.")
    check_writable_file(out_path)  # before any LM work, so nothing generated is lost
    dims = None
    if dimensions is not None:
        names = [d.strip() for d in dimensions.split(",") if d.strip()]  # ",," and a trailing comma are ignored
        dims = list(dict.fromkeys(n for n in (normalize_dimension(d) for d in names) if n))
        for name in names:
            if not normalize_dimension(name):
                raise InputError(f"the dimension name {name!r} has no letter or digit, so it can name no "
                                 f"dimension (usable names given: {dims})", field="--dimensions",
                                 fix="use names such as coherence,factual_consistency, or remove it.")
        if not dims:
            raise InputError(f"no usable dimension name in {dimensions!r}", field="--dimensions",
                             fix="give comma-separated names such as coherence,fluency (letters, digits, _).")
    handle = build_lm(lm_spec, lm_model, api_key_env, max_tokens, settings)
    if handle.embedded:
        choice = getattr(handle.engine, "thread_choice", None)
        calls = 1 + (0 if dims else 1) + max_requirements
        console.print(escape(questions_forecast(calls=calls, threads=choice.threads if choice else None)),
                      highlight=False)
    # the generator logs its report's warnings for library users; this command prints them itself
    generator_logger = logging.getLogger(question_generator_module.__name__)
    level = generator_logger.level
    generator_logger.setLevel(logging.ERROR)
    with ItemProgress(console, speed_check=speed_check_for(handle, generation=True)) as progress, handle.context():
        generator = QuestionGenerator(dimensions=dims, max_requirements=max_requirements,
                                      on_step=GenerationSteps(progress, infer_dimensions=not dims))
        try:
            pred = generator(task_prompt=task_prompt)
        except BinEvalError:
            raise
        except Exception as exc:  # transport and provider errors come in many types
            raise BinEvalError(f"the LM call failed ({type(exc).__name__}: {exc})") from exc
        finally:
            generator_logger.setLevel(level)
    question_set = pred.question_set.model_copy(update={"generated_by": handle.name})
    question_set.save(out_path)
    table = Table(title=escape(f"{len(question_set.questions)} binary questions - LM: {handle.name}"))
    for col in ("id", "dimension", "origin", "question"):
        table.add_column(col)
    for q in question_set.questions:
        table.add_row(Text(q.id), Text(q.dimension), Text(q.origin), Text(q.text))
    out_console.print(table)
    _print_provenance(question_set)
    console.print(escape(f"Wrote {out_path} (hash {question_set.content_hash}; {pred.merged} duplicate questions "
                         "merged). Review and edit it before evaluating: it is plain JSON."))


def _print_provenance(question_set: QuestionSet) -> None:
    """The generation report: summary line on stdout, fallbacks and drops on stderr."""
    report = question_set.generation_report
    if report is None:
        return
    dimension_of = {q.id: q.dimension for q in question_set.questions}
    out_console.print(Text(f"Generation: {report.summary(dimension_of)}"), soft_wrap=True)
    for warning in report.warnings():
        console.print(Text.assemble(("warning: ", "yellow"), with_flag_names(warning)), soft_wrap=True)
    shown = report.dropped_requirements + report.dropped_questions
    for d in shown[:_MAX_DROPPED_SHOWN]:
        what = f"question for {d.requirement_id}" if d.requirement_id else "requirement"
        dim = f" [dimension {d.lm_dimension!r}]" if d.lm_dimension is not None and d.reason == "unknown dimension" else ""
        console.print(Text(f"dropped {what}: {d.text[:80]!r}{dim} ({d.reason})"), style="dim", soft_wrap=True)
    if len(shown) > _MAX_DROPPED_SHOWN:
        console.print(Text(f"... {len(shown) - _MAX_DROPPED_SHOWN} more dropped; see generation_report in the "
                           "JSON"), style="dim")


_MAX_DROPPED_SHOWN = 10

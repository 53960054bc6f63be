"""`bineval questions`: task prompt file -> question set JSON (paper section 3.1)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from binaryeval_dspy.cli.common import (
    build_lm,
    check_writable_file,
    console,
    friendly_errors,
    lm_options,
    out_console,
    quiet_libraries,
)
from binaryeval_dspy.errors import BinEvalError, InputError
from binaryeval_dspy.programs.question_generator import QuestionGenerator, normalize_dimension


@click.command("questions")
@click.argument("task_prompt_file", type=click.Path(path_type=Path))
@click.option("--out", "out_path", type=click.Path(path_type=Path), required=True,
              help="Where to write the question set JSON.")
@click.option("--dimensions", default=None,
              help="Comma-separated dimension names (e.g. coherence,consistency); inferred if omitted.")
@click.option("--max-requirements", default=12, show_default=True, type=click.IntRange(min=1))
@lm_options
@friendly_errors
def questions_command(task_prompt_file: Path, out_path: Path, dimensions: str | None, max_requirements: int,
                      lm_spec: str, lm_model: str | None, api_key_env: str | None, max_tokens: int) -> None:
    """Generate binary questions from the task prompt in TASK_PROMPT_FILE."""
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
        dims = [normalize_dimension(d) for d in dimensions.split(",")]
        dims = [d for d in dims if d]
        if not dims:
            raise InputError(f"no usable dimension name in {dimensions!r}", field="--dimensions",
                             fix="give comma-separated names such as coherence,fluency (letters, digits, _).")
    handle = build_lm(lm_spec, lm_model, api_key_env, max_tokens)
    generator = QuestionGenerator(dimensions=dims, max_requirements=max_requirements)
    with console.status("Generating questions (requirements, then one call per requirement)..."), handle.context():
        try:
            pred = generator(task_prompt=task_prompt)
        except BinEvalError:
            raise
        except Exception as exc:  # transport and provider errors come in many types
            raise BinEvalError(f"the LM call failed ({type(exc).__name__}: {exc})") from exc
    question_set = pred.question_set.model_copy(update={"generated_by": handle.name})
    question_set.save(out_path)
    table = Table(title=escape(f"{len(question_set.questions)} binary questions - LM: {handle.name}"))
    for col in ("id", "dimension", "question"):
        table.add_column(col)
    for q in question_set.questions:
        table.add_row(Text(q.id), Text(q.dimension), Text(q.text))
    out_console.print(table)
    console.print(escape(f"Wrote {out_path} (hash {question_set.content_hash}; {pred.merged} duplicate questions "
                         "merged). Review and edit it before evaluating: it is plain JSON."))

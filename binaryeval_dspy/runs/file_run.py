"""Judging an items file from Python in one call, leaving the run directory the CLI leaves.

`evaluate_file` is what ``bineval evaluate`` does in score mode, without the terminal: it
loads the question set and the items (errors name file, line and field), builds the LM
(`make_lm`), writes the same manifest (`run_manifest`, which the command uses too), and
runs the recorder (`evaluate_items`): ``results.jsonl``, ``answers.jsonl`` while it runs,
``manifest.json``, ``question_set.json``, ``summary.json`` and ``summary.md``. Rerunning
the same call resumes the run; `bineval view`, `bineval report` and `bineval rejudge` read
the directory as they read one made by the command.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from binaryeval_dspy.errors import ConfigError
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.programs.judge_panel import ensemble_record
from binaryeval_dspy.runs.evaluation_outcome import EvaluationOutcome
from binaryeval_dspy.runs.items_file import items_file_identity
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.run_manifest import RunManifest
from binaryeval_dspy.settings import RunSettings

__all__ = ["endpoint_config", "evaluate_file", "recorded_settings", "run_manifest"]



def endpoint_config(handle: LMHandle) -> dict[str, object]:
    """What a run's manifest ``config`` records about how its LM is reached (never a key): the
    adapter its policy chose and why, the cache identity and, for the embedded model, its
    llama.cpp thread count and why it was chosen (`ThreadChoice.as_dict`). The run settings
    themselves (engine, concurrency, cache policies, judges, ...) are the manifest's
    ``settings`` (`RunSettings.recorded`), never copied here."""
    choice = getattr(handle.engine, "thread_choice", None) if handle.engine is not None else None
    return {"adapter": handle.adapter_name, "adapter_reason": handle.adapter_reason,
            "cache_identity": handle.cache_identity, **(choice.as_dict() if choice is not None else {})}


def recorded_settings(settings: RunSettings, handle: LMHandle) -> dict[str, object]:
    """`settings` as the manifest stores them (`RunSettings.recorded`), with what the run
    resolved from them: the engine that runs, and the judge a replay answers from (the
    verdicts file's only judge when `replay_judge` was left out)."""
    replay = getattr(handle, "replay", None)  # a run answered from a verdicts file (engine ``replay``)
    if replay is not None and settings.replay_judge is None and not replay.members and not settings.judges:
        settings = settings.model_copy(update={"replay_judge": replay.judge})
    return settings.recorded(handle)


def run_manifest(command: str, handle: LMHandle, question_set: QuestionSet, question_set_path: str | Path,
                 items_path: str | Path, *, settings: RunSettings | None = None, input_field: str = "input",
                 output_field: str = "output", id_field: str | None = None,
                 scale: tuple[float, float] = (0.0, 1.0), limit: int | None = None, max_tokens: int = 512,
                 explanations: bool = True, empty_output: str = "record", aggregation: str = "score",
                 pressure_test: str = "non-pass", lm_spec: str | None = None, lm_model: str | None = None,
                 api_key_env: str | None = None, checks_modules: list[dict] | None = None) -> RunManifest:
    """The manifest of a new run of an items file (``bineval evaluate`` and `evaluate_file`).

    Its ``settings`` is the run's `RunSettings` (`recorded_settings`; read back with
    `RunSettings.of_manifest`). Its ``config`` records how the items were read (fields,
    limit, empty-output policy), the scale, the aggregation, how the LM is reached
    (`endpoint_config`; the spec, model and key's variable name, never the key), the
    checks modules and a panel's or cascade's prices per judge and weights (`ensemble_record`), so a rerun can be checked against it and `bineval rejudge` can rebuild
    the run.
    """
    settings = settings or RunSettings()
    config: dict[str, Any] = {
        "input_field": input_field, "output_field": output_field, "id_field": id_field, "scale": list(scale),
        "limit": limit, "max_tokens": max_tokens, **endpoint_config(handle), "explanations": explanations,
        "empty_output": empty_output,
    }
    if aggregation != "score":
        config.update(aggregation=aggregation, pressure_test=pressure_test)
    config.update(lm_spec=lm_spec, lm_model=lm_model, api_key_env=api_key_env)
    if checks_modules:
        config["checks_modules"] = checks_modules
    config.update(ensemble_record(settings))  # a panel's or cascade's prices per judge and weights
    return RunManifest(command=command, lm=handle.name, question_set_hash=question_set.content_hash,
                       question_set_path=str(question_set_path), items_path=str(items_path),
                       items_file=items_file_identity(items_path), settings=recorded_settings(settings, handle),
                       config=config)


def evaluate_file(questions: str | Path, items: str | Path, out_dir: str | Path, *, lm: str,
                  lm_model: str | None = None, api_key_env: str | None = None, max_tokens: int = 512,
                  settings: RunSettings | None = None, input_field: str = "input", output_field: str = "output",
                  id_field: str | None = None, scale: tuple[float, float] = (0.0, 1.0), limit: int | None = None,
                  explanations: bool = True,
                  on_progress: Callable[[Any, str], None] | None = None) -> EvaluationOutcome:
    """Judge every item of an items file with BinEval and leave a complete run directory.

    The Python form of ``bineval evaluate QUESTIONS ITEMS --out OUT_DIR --lm LM`` in score
    mode (aggregation ``score``): the same files, the same manifest, resumable the same way
    (a second call judges only what is missing). Verdict modes and code-check modules are
    the command's (`bineval evaluate --aggregation`, ``--checks-module``).

    Args:
        questions: a question-set file (JSON).
        items: a ``.jsonl`` or ``.csv`` items file.
        out_dir: the run directory (made if missing; an existing one is resumed).
        lm: what judges: ``local`` (the embedded model), a LiteLLM id (``openai/gpt-4o-mini``)
            or an OpenAI-compatible base URL (with `lm_model`), as `make_lm`'s ``spec``.
        lm_model, api_key_env, max_tokens: as `make_lm`.
        settings: how to judge (`RunSettings`: engine, concurrency, adapter, timeout,
            ``max_cost``, ...); None: the defaults.
        input_field, output_field, id_field: the items' fields (`load_items`).
        scale: scores mapped from [0, 1] to [a, b].
        limit: judge only the first `limit` items.
        explanations: ask the judge for an explanation before each verdict.
        on_progress: as `evaluate_items`.

    Returns:
        The `EvaluationOutcome`; its ``summary`` is what ``summary.json`` holds.

    Raises:
        ConfigError: a `limit` below 1.
        InputError: a bad question-set or items file (file, line and field named).
        LMConfigError: an LM that cannot be built.
        RunStateError: `out_dir` holds another run (other questions, LM or fields).
    """
    from binaryeval_dspy.data.items import load_items
    from binaryeval_dspy.lm.factory import make_lm
    from binaryeval_dspy.programs.bineval import BinEval
    from binaryeval_dspy.runs.evaluation import evaluate_items
    from binaryeval_dspy.runs.run_directory import RunDirectory

    if limit is not None and limit < 1:
        raise ConfigError("`limit` must be at least 1", received=repr(limit),
                          fix="leave `limit` out to judge every item, or give a positive number.")
    settings = settings or RunSettings()
    question_set = QuestionSet.load(questions)
    loaded = load_items(items, input_field=input_field, output_field=output_field, id_field=id_field)
    loaded = loaded[:limit] if limit is not None else loaded
    embedded = lm == "local" or lm.endswith(".gguf")
    handle = make_lm(lm, model=lm_model, api_key_env=api_key_env, max_tokens=max_tokens, adapter=settings.adapter,
                     timeout=None if embedded else settings.timeout,
                     **({"llama_threads": settings.llama_threads} if embedded and settings.llama_threads else {}))
    manifest = run_manifest("evaluate", handle, question_set, questions, items, settings=settings,
                            input_field=input_field, output_field=output_field, id_field=id_field, scale=scale,
                            limit=limit, max_tokens=max_tokens, explanations=explanations, lm_spec=lm,
                            lm_model=lm_model, api_key_env=api_key_env)
    program = BinEval(question_set, scale=scale, explanations=explanations)
    return evaluate_items(program, loaded, RunDirectory(out_dir), manifest, lm=handle, settings=settings,
                          on_progress=on_progress)

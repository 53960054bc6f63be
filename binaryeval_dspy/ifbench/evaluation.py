"""Strict and loose IFBench verification of one response, and prompt/instruction accuracy.

IFBench (Pyatkin et al., 2025) scores a response per instruction with code
checkers. *Strict*: the response as written must pass. *Loose*: it passes if any
of eight variants passes: the response, the response without its first line,
without its last line, without both, and each of these four with every ``*``
removed (so Markdown emphasis or a preamble line does not fail a format rule).
Prompt-level accuracy is the share of prompts whose instructions all pass;
instruction-level accuracy is the share of all instructions that pass.

`ifbench_test_records` builds the per-prompt test records of the optimizer comparison:
a generation that raised is recorded as failed with its error (never checked or judged
as an empty response), and a BinEval score the judge could not give is stored as
``None`` with ``scored: false`` (never as 0.0).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Protocol

import dspy
from pydantic import BaseModel, ConfigDict

import binaryeval_dspy.ifbench.constraints  # noqa: F401  (importing registers the checkers)
from binaryeval_dspy.errors import ArgumentTypeError, ConfigError, InputError
from binaryeval_dspy.ifbench.registry import Checker, bind_checker
from binaryeval_dspy.schemas.versioned import SchemaVersion

#: the format version of a saved `IFBenchResult`
IFBENCH_RESULT_SCHEMA_VERSION = 1


class IFBenchResult(BaseModel):
    """The verification of one response to one IFBench prompt.

    Attributes:
        key: the prompt's IFBench key ("0".."299"), or None if unknown.
        instruction_id_list: the prompt's instruction ids, in order.
        follow_instruction_list: per instruction, whether the response follows it.
        follow_all_instructions: whether it follows all of them.
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: SchemaVersion(IFBENCH_RESULT_SCHEMA_VERSION, "IFBench result") = (
        IFBENCH_RESULT_SCHEMA_VERSION)
    key: str | None
    instruction_id_list: list[str]
    follow_instruction_list: list[bool]
    follow_all_instructions: bool


def _fields(example_or_fields: Any) -> Mapping[str, Any]:
    if isinstance(example_or_fields, dspy.Example):
        return example_or_fields.toDict()
    if isinstance(example_or_fields, Mapping):
        return example_or_fields
    raise ArgumentTypeError(
        "bad IFBench prompt", expected="a dspy.Example or a mapping with instruction_id_list and kwargs",
        received=type(example_or_fields).__name__, fix="pass a row of the IFBench test set (or its dspy.Example).",
    )


def bind_prompt_checkers(
    example_or_fields: Any, *, path: str | None = None, line: int | None = None
) -> tuple[str | None, list[str], list[Checker]]:
    """Validate one prompt's instructions and arguments; return its checkers.

    Args:
        example_or_fields: a `dspy.Example` from `load_ifbench` or a mapping with
            ``instruction_id_list`` (list of ids), ``kwargs`` (parallel list of
            argument dicts; may be omitted when no instruction takes arguments)
            and optionally ``key``.
        path: file the prompt came from, for error messages.
        line: line of that file, for error messages.

    Returns:
        (key, instruction ids, one ``check(response) -> bool`` per id).

    Raises:
        InputError: a missing or malformed field, an unknown id, or bad arguments.
    """
    fields = _fields(example_or_fields)
    key = fields.get("key")
    where = {"path": path, "line": line}
    ids = fields.get("instruction_id_list")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise InputError(
            f"expected a non-empty list of instruction ids, got {ids!r}",
            field="instruction_id_list", **where,
        )
    kwargs = fields.get("kwargs")
    if kwargs is None:
        kwargs = [{} for _ in ids]
    if not isinstance(kwargs, list) or len(kwargs) != len(ids) or not all(
        isinstance(k, Mapping) for k in kwargs
    ):
        raise InputError(
            f"expected a list of {len(ids)} argument objects (one per instruction id), got {kwargs!r:.200}",
            field="kwargs", **where,
        )
    checkers = [bind_checker(i, k, **where) for i, k in zip(ids, kwargs)]
    return (str(key) if key is not None else None), list(ids), checkers


def loose_variants(response: str) -> list[str]:
    """The eight texts loose scoring tries, in IFBench's order.

    The response; it with every ``*`` removed; without its first line; without its
    last line; without both; and the last three with every ``*`` removed. The
    shortened variants are stripped of surrounding whitespace.
    """
    lines = response.split("\n")
    shortened = [
        "\n".join(lines[1:]).strip(),
        "\n".join(lines[:-1]).strip(),
        "\n".join(lines[1:-1]).strip(),
    ]
    return [response, response.replace("*", ""), *shortened, *(text.replace("*", "") for text in shortened)]


def _result(key: str | None, ids: list[str], follows: list[bool]) -> IFBenchResult:
    return IFBenchResult(
        key=key, instruction_id_list=ids, follow_instruction_list=follows,
        follow_all_instructions=all(follows),
    )


def check_strict(example_or_fields: Any, response: str | None) -> IFBenchResult:
    """Verify `response` against every instruction of one IFBench prompt, as written.

    Args:
        example_or_fields: see `bind_prompt_checkers`.
        response: the model's response; None or blank follows nothing.

    Returns:
        An `IFBenchResult` (IFBench's ``eval_results_strict`` row without the texts).

    Raises:
        InputError: the prompt's instructions or arguments are invalid.

    Example:
        >>> check_strict({"instruction_id_list": ["format:no_whitespace"]}, "ok").follow_all_instructions
        True
    """
    key, ids, checkers = bind_prompt_checkers(example_or_fields)
    text = response or ""
    return _result(key, ids, [bool(text.strip()) and check(text) for check in checkers])


def check_loose(example_or_fields: Any, response: str | None) -> IFBenchResult:
    """Verify `response` leniently: an instruction passes if any loose variant passes.

    Variants are listed in `loose_variants`; blank variants are skipped. Arguments and
    errors are those of `check_strict`; the result is an `IFBenchResult` (IFBench's
    ``eval_results_loose`` row without the texts).
    """
    key, ids, checkers = bind_prompt_checkers(example_or_fields)
    variants = [text for text in loose_variants(response or "") if text.strip()]
    return _result(key, ids, [any(check(text) for text in variants) for check in checkers])


def check_response(
    example_or_fields: Any, response: str | None, mode: Literal["strict", "loose"] = "strict"
) -> IFBenchResult:
    """`check_strict` or `check_loose`, chosen by `mode`."""
    if mode == "strict":
        return check_strict(example_or_fields, response)
    if mode == "loose":
        return check_loose(example_or_fields, response)
    raise ConfigError("bad mode", expected="'strict' or 'loose'", received=repr(mode),
                      fix="pass mode='strict' (IFBench's headline numbers) or mode='loose'.")


def ifbench_accuracy(results: Sequence[IFBenchResult]) -> dict[str, float]:
    """IFBench's prompt-level and instruction-level accuracy.

    Args:
        results: one `IFBenchResult` per prompt (all strict or all loose).

    Returns:
        ``{"prompt_level": p, "instruction_level": i}``, both in [0, 1]: p is the
        share of prompts that follow all their instructions, i the share of all
        instructions (over all prompts) that are followed.

    Raises:
        InputError: `results` is empty.
    """
    if not results:
        raise InputError("no IFBench results to score", fix="check at least one response first.")
    followed = sum(sum(result.follow_instruction_list) for result in results)
    total = sum(len(result.follow_instruction_list) for result in results)
    return {
        "prompt_level": sum(result.follow_all_instructions for result in results) / len(results),
        "instruction_level": followed / total,
    }


class GenerationLike(Protocol):
    """A generator call's outcome (`binaryeval_dspy.optimizers.bineval_optimizer.item_runs.Generation`)."""

    output: str | None
    error: str | None


def ifbench_test_records(
    items: Sequence[dspy.Example],
    generations: Sequence[GenerationLike],
    *,
    checkers: tuple[Callable[[Any, str], Any], Callable[[Any, str], Any]] | None = None,
    metric: Any = None,
    num_threads: int = 1,
) -> list[dict[str, Any]]:
    """One JSON-ready test record per IFBench prompt, from its generation.

    Every record has ``item_id``, ``instruction_id_list``, ``response`` (None when the
    generation failed), ``status`` (``scored`` / ``unscored`` / ``failed``), ``scored``
    (bool), ``stage`` (``generation`` or ``judge`` when not scored, else None) and
    ``error`` (the error or parser message, else None).

    * With `checkers` ((strict, loose), each ``(item, response) -> IFBenchResult``-like):
      ``strict``, ``loose`` (prompt-level booleans) and ``strict_list``, ``loose_list``
      (per instruction), all None for a failed generation.
    * Else with `metric` (a `BinEvalMetric`): ``bineval``, the BinEval score in [0, 1], or
      None when the judge could not score the response (``scored: false``), judged with
      `BinEvalMetric.judge_outputs` (``num_threads`` calls in flight). An empty response
      is a real 0.0.

    Args:
        items: the test prompts (`dspy.Example` with ``item_id`` and ``instruction_id_list``).
        generations: one outcome per item, in order (``output``; ``error`` when it raised).
        checkers: IFBench's strict and loose checkers, or None.
        metric: the BinEval metric used when there are no checkers.
        num_threads: judge calls in flight.

    Returns:
        The records, in item order.

    Raises:
        InputError: neither checkers nor a metric were given, or the lengths differ.
    """
    if checkers is None and metric is None:
        raise InputError("IFBench test records need checkers or a BinEval metric")
    if len(items) != len(generations):
        raise InputError(f"{len(items)} items but {len(generations)} generations")
    records: list[dict[str, Any]] = []
    for item, generation in zip(items, generations):
        failed = generation.error is not None
        records.append({
            "item_id": item.item_id, "instruction_id_list": list(item.instruction_id_list),
            "response": None if failed else (generation.output or ""),
            "status": "failed" if failed else "scored", "scored": not failed,
            "stage": "generation" if failed else None, "error": generation.error,
        })
    if checkers is not None:
        for item, record in zip(items, records):
            if record["status"] == "failed":
                record.update(strict=None, loose=None, strict_list=None, loose_list=None)
                continue
            strict, loose = (check(item, record["response"]) for check in checkers)
            record.update(strict=bool(strict.follow_all_instructions), loose=bool(loose.follow_all_instructions),
                          strict_list=[bool(x) for x in strict.follow_instruction_list],
                          loose_list=[bool(x) for x in loose.follow_instruction_list])
        return records
    to_judge = [i for i, r in enumerate(records) if r["status"] != "failed" and r["response"].strip()]
    judged = metric.judge_outputs([(items[i], records[i]["response"]) for i in to_judge], num_threads=num_threads)
    results: dict[int, Any] = {i: metric.prediction(j) for i, j in zip(to_judge, judged)}
    for i, record in enumerate(records):
        if record["status"] == "failed":
            record["bineval"] = None
            continue
        pred = results.get(i)
        if pred is None:  # an empty response: the metric's real 0.0, no judge call
            pred = metric(items[i], dspy.Prediction(**{metric.output_field: record["response"]}))
        scored = bool(getattr(pred, "scored", True))
        record.update(bineval=float(pred.score) if scored else None, scored=scored,
                      status="scored" if scored else str(getattr(pred, "status", "unscored")),
                      stage=None if scored else "judge", error=None if scored else getattr(pred, "error", None))
    return records

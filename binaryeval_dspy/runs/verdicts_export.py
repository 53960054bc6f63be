"""A run's verdicts as a verdicts file: every stored answer, one row per (item, question).

`run_verdict_records` reads a run directory (``results.jsonl`` of `ItemResult` rows, the
manifest for the judge's name and prices, the frozen ``question_set.json`` for question
texts and dimensions) without calling any LM, and returns one `VerdictRecord` per stored
`QuestionVerdict`. `bineval verdicts RUN --out FILE` writes them
(`binaryeval_dspy.data.verdicts_file.write_verdicts`); reading the file back and
`VerdictRecord.to_question_verdict` give the run's verdicts again, equal field by field.

Non-answers keep their outcome (``unparsed``, ``error``), never "no". An item without
verdicts (status ``empty_output``: no question was asked) has no rows. A run judged by a
panel or cascade also gives each judge's own answer as a row of its own (judge = the
member's name; its cost is its own call's usage, `QuestionVerdict.usage`, at the prices the
manifest's ``judge_prices`` names for it, unknown when it names none), beside the decided
row (judge = the panel's or cascade's name; its cost the sum of its judges' rows, unknown
when one is; a run made before ``judge_prices`` was recorded keeps the item's cost shared
among its questions), so `bineval agreement` can score every member and the rule, and price a
cascade on the costs the run measured.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from binaryeval_dspy.cost.pricing import price_model_for_name, run_cost
from binaryeval_dspy.errors import InputError
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.item_result import ItemResult
from binaryeval_dspy.schemas.verdict_record import VerdictRecord
from binaryeval_dspy.settings import RunSettings


def _questions(run: RunDirectory) -> dict[str, dict[str, Any]]:
    """Question id -> its ``text`` and ``dimension`` from the frozen question set, read as
    plain JSON (so a set naming a user check that is not registered here still gives its
    texts); empty for a run made before sets were frozen."""
    path = run.frozen_question_set_path
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(q.get("id")): q for q in data.get("questions", []) if isinstance(q, dict)}


def item_answer_costs(result: ItemResult, *, price_model: str | None, batch: bool = False) -> float | None:
    """What each LM question of one item cost, USD: the item's estimated cost (its measured
    tokens at `price_model`'s prices, `binaryeval_dspy.cost.pricing.run_cost`) shared
    equally among its LM-answered questions; None when the price is unknown (a served model
    without `price_model`), 0.0 for the embedded model. Code-answered questions cost 0."""
    asked = [v for v in result.verdicts if v.source == "lm"]
    if not asked:
        return 0.0
    cost = run_cost(prompt_tokens=result.usage.prompt_tokens, completion_tokens=result.usage.completion_tokens,
                    cached_prompt_tokens=result.usage.cached_prompt_tokens,
                    cache_write_tokens=result.usage.cache_write_tokens, items=1, model=price_model, batch=batch)
    return None if cost.usd is None else cost.usd / len(asked)


def run_verdict_records(run_dir: str | Path, *, judge: str | None = None) -> list[VerdictRecord]:
    """Every verdict stored in a run directory, as verdicts-file records.

    Args:
        run_dir: a ``bineval evaluate`` / ``rejudge`` run directory, or a benchmark run's
            ``bineval`` method folder (any folder with ``manifest.json`` and
            ``results.jsonl`` of item results).
        judge: the judge name to write; default the run's LM as its manifest names it.

    Returns:
        Records in results order, then question-set order; ``cost_usd`` as
        `item_answer_costs` (priced as the run was: its ``price_model`` setting, else by
        its LM's name).

    Raises:
        InputError: the folder has no manifest or no results, or a line of
            ``results.jsonl`` is not a valid item result (file and line named).
    """
    run = RunDirectory(run_dir)
    manifest = run.read_manifest()
    if manifest is None or not run.results_path.is_file():
        missing = "manifest.json" if manifest is None else "results.jsonl"
        raise InputError(f"not a run directory (no {missing})", path=run.path,
                         fix="pass the folder that holds manifest.json and results.jsonl (for a benchmark run, "
                             "its bineval/ folder).")
    settings = RunSettings.of_manifest(manifest, path=run.manifest_path)
    price_model = settings.price_model or price_model_for_name(manifest.lm)
    batch = settings.engine == "batch"
    questions = _questions(run)
    name = judge or manifest.lm
    records: list[VerdictRecord] = []
    judge_prices = (manifest.config or {}).get("judge_prices")
    for result in run.read_results(repair=False):
        share = item_answer_costs(result, price_model=price_model if isinstance(price_model, str) else None,
                                  batch=batch)
        for verdict in result.verdicts:
            question = questions.get(verdict.question_id, {})
            members = [(member, answer, member_cost(answer, judge_prices, member, batch=batch))
                       for member, answer in (verdict.judges or {}).items()]
            cost = 0.0 if verdict.source == "code" else share
            if members and isinstance(judge_prices, dict):  # a decision costs what its judges' calls cost
                cost = None if any(c is None for _, _, c in members) else sum(c for _, _, c in members)
            records.append(VerdictRecord.from_question_verdict(
                verdict, item_id=result.item_id, judge=name, cost_usd=cost,
                question_text=question.get("text"), dimension=question.get("dimension"),
                output_hash=result.output_hash))
            for member, answer, own in members:  # a panel's or cascade's judges, one row each
                records.append(VerdictRecord.from_question_verdict(
                    answer, item_id=result.item_id, judge=member, cost_usd=own, question_text=question.get("text"),
                    dimension=question.get("dimension"), output_hash=result.output_hash))
    return records


def member_cost(answer: Any, judge_prices: Any, member: str, *, batch: bool = False) -> float | None:
    """USD of one panel or cascade judge's own answer: its call's usage (`QuestionVerdict.usage`;
    none recorded: 0 tokens) at the prices `judge_prices` (the manifest's, judge -> model) names
    for `member`; None when the run recorded no prices (made before they were recorded) or
    the judge's price is unknown."""
    if not isinstance(judge_prices, dict) or member not in judge_prices:
        return None
    used = answer.usage or {}
    return run_cost(prompt_tokens=used.get("prompt_tokens", 0), completion_tokens=used.get("completion_tokens", 0),
                    cached_prompt_tokens=used.get("cached_prompt_tokens", 0),
                    cache_write_tokens=used.get("cache_write_tokens", 0), model=judge_prices[member],
                    batch=batch).usd

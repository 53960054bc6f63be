"""The stored row of one judged item: packaging an `ItemResult`, and checking stored rows.

An item ends as a judged row (`item_result`), an ``empty_output`` row (`empty_item_result`,
no LM call) or an ``error`` row (`failed_item_result`, retried by a rerun). Before a run
resumes, `check_stored_items` refuses stored rows made with another question set or of
an input or output that changed since. Used by the resumable loop
(`binaryeval_dspy.runs.evaluation`) and the batch runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dspy

from binaryeval_dspy.engines.plan_runner import ItemOutcome as ItemDone
from binaryeval_dspy.errors import RunStateError
from binaryeval_dspy.lm.context_overflow import parse_context_overflow
from binaryeval_dspy.lm.calls import error_text
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.programs.verdict_judge import VerdictJudge
from binaryeval_dspy.schemas.item_result import ItemResult, text_hash
from binaryeval_dspy.schemas.run_manifest import RunManifest

Judge = BinEval | VerdictJudge


def item_result(program: Judge, item: dspy.Example, done: ItemDone, previous: ItemResult | None = None, *,
                lm: str | None = None) -> ItemResult:
    """The `ItemResult` of one finished item (`done.result` is the program's prediction).

    Usage and seconds of an earlier, incomplete attempt (`previous`) are added in. An
    item whose LM questions all failed gets status ``error`` with the first failure's
    message, `lm` and, for a context overflow, its size and limit. So does an item whose
    verdict could not be decided (the prediction's ``undecided``: `VerdictJudge`'s pick or
    pressure-test call failed): it keeps every answer it got, has no named verdict and is
    incomplete, so a rerun asks only its unanswered questions and decides again.
    """
    pred = done.result
    extra = _item_fields(item)
    usage, seconds = done.usage, done.seconds
    if previous is not None:
        usage, seconds = previous.usage + usage, previous.seconds + seconds
    result = ItemResult(
        item_id=str(item.item_id), line=item.get("line"), output_hash=text_hash(item.output),
        input_hash=text_hash(item.input),
        question_set_hash=program.question_set.content_hash, score_card=pred.get("score_card"),
        verdicts=pred.verdicts, fields=extra, usage=usage,
        seconds=round(seconds, 3), named_verdict=pred.get("named_verdict"),
        **({"status": "error", "error": pred.get("undecided")} if pred.get("undecided") else {}),
    )
    if result.status == "error":
        result.lm, result.context_overflow = lm, parse_context_overflow(result.error)
    return result


def _item_fields(item: dspy.Example) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in {"item_id", "input", "output", "line"}}


def empty_item_result(program: Judge, item: dspy.Example) -> ItemResult:
    """The `ItemResult` of an item whose output is empty (`is_empty_output`): status
    ``empty_output``, no verdicts, no score, no LM call; complete (a rerun keeps it)."""
    return ItemResult(
        item_id=str(item.item_id), line=item.get("line"), output_hash=text_hash(item.output or ""),
        input_hash=text_hash(item.input), question_set_hash=program.question_set.content_hash,
        verdicts=[], fields=_item_fields(item), status="empty_output",
    )


def failed_item_result(program: Judge, item: dspy.Example, done: ItemDone, previous: ItemResult | None = None, *,
                       lm: str | None = None) -> ItemResult:
    """The `ItemResult` of an item that could not be judged (`done.error` is set: e.g. the
    verdict pick or another non-question step raised, or a context overflow there).

    Status ``error`` with the error's type and message, `lm` and, for a context overflow,
    its size and limit; incomplete, so a rerun tries the item again. Answers and score of
    an earlier attempt (`previous`) are kept, and its usage and seconds added in.
    """
    message = error_text(done.error) if done.error is not None else "the item could not be judged"
    usage, seconds = done.usage, done.seconds
    if previous is not None:
        usage, seconds = previous.usage + usage, previous.seconds + seconds
    return ItemResult(
        item_id=str(item.item_id), line=item.get("line"), output_hash=text_hash(item.output),
        input_hash=text_hash(item.input), question_set_hash=program.question_set.content_hash,
        score_card=previous.score_card if previous is not None else None,
        verdicts=list(previous.verdicts) if previous is not None else [],
        named_verdict=previous.named_verdict if previous is not None else None,
        fields=_item_fields(item), usage=usage, seconds=round(seconds, 3), status="error", error=message,
        lm=lm, context_overflow=parse_context_overflow(message),
    )


def check_stored_items(stored: list[ItemResult], items: Sequence[dspy.Example], manifest: RunManifest) -> None:
    """Refuse to resume when stored results do not belong to the items given now.

    Args:
        stored: results already in the run directory.
        items: the items of this invocation.
        manifest: the manifest this invocation would write.

    Raises:
        RunStateError: a stored result was made with another question set, or an item
            with a stored result now has another input or output (the results would
            silently describe a different text).
    """
    by_id = {str(i.item_id): i for i in items}
    for result in stored:
        if result.question_set_hash != manifest.question_set_hash:
            raise RunStateError(
                f"stored result for item {result.item_id!r} was made with question set "
                f"{result.question_set_hash}, this command uses {manifest.question_set_hash}.",
                fix="choose another `out_dir` for a new run.",
            )
        item = by_id.get(result.item_id)
        if item is None:
            continue
        changed = [name for name, stored_hash, text in (("output", result.output_hash, item.output),
                                                        ("input", result.input_hash, item.input))
                   if stored_hash is not None and stored_hash != text_hash(text)]
        if changed:
            raise RunStateError(
                f"item {result.item_id!r} already has a result, but its {' and '.join(changed)} "
                f"differ from the text judged then (line {item.get('line')} of {manifest.items_path}).",
                fix="use another `out_dir` for a new run, or re-judge changed outputs explicitly.",
            )

"""Re-judging a previous run: only items whose output changed, with the same frozen question set.

Seed 004's rule: re-judge with exactly the question set used before, or a changed
verdict cannot be told apart from a moved bar. The previous run is never modified:
results go to a new run directory, unchanged items are copied over, and
``rejudge.json`` lists which verdicts changed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dspy

from binaryeval_dspy.errors import RunStateError
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.programs.verdict_judge import VerdictJudge
from binaryeval_dspy.runs.evaluation import ProgressCallback, evaluate_items, record_summary
from binaryeval_dspy.runs.evaluation_outcome import EvaluationOutcome
from binaryeval_dspy.runs.run_comparison import answer_changes
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.item_result import ItemResult, text_hash
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.rejudge_report import ItemChange, RejudgeReport
from binaryeval_dspy.schemas.run_manifest import RunManifest
from binaryeval_dspy.settings import RunSettings

REJUDGE_FILE = "rejudge.json"


def question_set_differences(frozen: QuestionSet, given: QuestionSet) -> list[str]:
    """Human-readable differences between two question sets (ids added, removed, edited; policy)."""
    old = {q.id: q.model_dump(mode="json") for q in frozen.questions}
    new = {q.id: q.model_dump(mode="json") for q in given.questions}
    notes = []
    if added := sorted(set(new) - set(old)):
        notes.append(f"questions added: {added}")
    if removed := sorted(set(old) - set(new)):
        notes.append(f"questions removed: {removed}")
    if edited := sorted(i for i in set(old) & set(new) if old[i] != new[i]):
        notes.append(f"questions edited: {edited}")
    if frozen.dimensions != given.dimensions:
        notes.append(f"dimensions {frozen.dimensions} -> {given.dimensions}")
    if frozen.verdict_policy != given.verdict_policy:
        notes.append("verdict labels or rules changed")
    return notes


def frozen_question_set(previous: RunDirectory, given: QuestionSet | None = None) -> QuestionSet:
    """The question set a re-judge must use, after checking it is the one the run was judged with.

    Args:
        previous: the run to re-judge.
        given: a question set the user passed (e.g. their current file), or None to
            use the run's frozen copy (``question_set.json``).

    Returns:
        The frozen question set.

    Raises:
        RunStateError: `previous` is not a run; its frozen copy does not match its
            manifest; `given` differs from what the run was judged with (the message
            says what changed and how to proceed); or an old run without a frozen
            copy was given no question set.
        QuestionSetError: the frozen copy does not load (e.g. an unregistered check).
    """
    manifest = previous.read_manifest()
    if manifest is None:
        raise RunStateError(f"{previous.path} is not a run directory (no manifest.json).",
                            fix="pass the `out_dir` of an earlier `bineval evaluate`.")
    frozen = previous.read_frozen_question_set()
    if frozen is not None and frozen.content_hash != manifest.question_set_hash:
        raise RunStateError(
            f"{previous.frozen_question_set_path} has hash {frozen.content_hash} but the run's manifest records "
            f"{manifest.question_set_hash}: the frozen copy was edited.",
            fix="restore it (or re-run evaluate).",
        )
    if given is not None and given.content_hash != manifest.question_set_hash:
        changes = question_set_differences(frozen, given) if frozen is not None else []
        detail = f" ({'; '.join(changes)})" if changes else ""
        raise RunStateError(
            f"the question set changed since {previous.path} was judged: it now has hash {given.content_hash}, "
            f"the run used {manifest.question_set_hash}{detail}. A re-judge must ask exactly the same questions, "
            "otherwise a changed verdict could come from the edited output or from the moved bar, and nobody "
            "could tell which.",
            fix="leave `question_set` out (the run keeps a frozen copy), restore the file, "
                "or start a new baseline with `bineval evaluate`.",
        )
    if frozen is not None:
        return frozen
    if given is None:
        raise RunStateError(
            f"{previous.path} has no frozen question_set.json (made before runs kept one).",
            fix=f"pass `question_set` {manifest.question_set_path} (its hash is checked against the run).",
        )
    return given


def rejudge_settings(used: RunSettings, *, adapter: str | None = None, concurrency: int | None = None,
                     fail_on_errors: bool = False, llama_threads: int | None = None,
                     replay_verdicts: str | None = None, replay_judge: str | None = None) -> RunSettings:
    """The settings a re-judge runs with: `used`, the previous run's (`RunSettings.of_manifest`),
    with what the caller names instead (None / False: the run's).

    A `replay_verdicts` file makes it a replay of that file (keeping the run's `replay_judge`
    unless one is named; a panel's members name themselves); a run made with the ``batch``
    engine is re-judged by ``auto`` (a re-judge is a handful of changed items and reports its
    changes when it ends); `fail_on_errors` holds when either the run or the caller set it.

    Raises:
        ConfigError: the combination is not valid run settings (`RunSettings`).
    """
    update: dict[str, object] = {"fail_on_errors": fail_on_errors or used.fail_on_errors}
    if adapter:
        update["adapter"] = adapter
    if concurrency:
        update["concurrency"] = concurrency
    if llama_threads:
        update["llama_threads"] = llama_threads
    if replay_verdicts:
        update.update(engine="replay", replay_verdicts=replay_verdicts,
                      replay_judge=replay_judge or (None if used.judges else used.replay_judge))
    elif replay_judge:
        update["replay_judge"] = replay_judge
    if used.engine == "batch":
        update["engine"] = "auto"
    return RunSettings(**{**used.model_dump(), **update})  # checked as any settings are (`RunSettings`)


@dataclass
class RejudgePlan:
    """Which items a re-judge copies, judges again, and drops.

    Attributes:
        carry: previous results of items whose output is unchanged and that were
            complete (copied as they are).
        judge: items whose output changed, that are new, or whose previous result is
            incomplete (failed LM calls).
        changed_ids / new_ids / completed_ids: ids of the judged items, by reason; a
            "completed" item keeps its previous answers and is asked only its
            unanswered questions.
        removed_ids: previous items absent from the items file.
    """

    carry: list[ItemResult]
    judge: list[dspy.Example]
    changed_ids: list[str] = field(default_factory=list)
    new_ids: list[str] = field(default_factory=list)
    completed_ids: list[str] = field(default_factory=list)
    removed_ids: list[str] = field(default_factory=list)


def plan_rejudge(previous: Sequence[ItemResult], items: Sequence[dspy.Example]) -> RejudgePlan:
    """Split `items` by comparing each output's hash with the previous run's (pure)."""
    old = {r.item_id: r for r in previous}
    plan = RejudgePlan(carry=[], judge=[])
    for item in items:
        item_id = str(item.item_id)
        before = old.get(item_id)
        if before is None:
            plan.judge.append(item)
            plan.new_ids.append(item_id)
        elif before.output_hash != text_hash(item.output):
            plan.judge.append(item)
            plan.changed_ids.append(item_id)
        elif not before.complete:
            plan.judge.append(item)
            plan.completed_ids.append(item_id)
        else:
            plan.carry.append(before)
    wanted = {str(i.item_id) for i in items}
    plan.removed_ids = [r.item_id for r in previous if r.item_id not in wanted]
    return plan


def _flipped(old: ItemResult, new: ItemResult) -> list[str]:
    """Questions whose answer differs; a failed call (``error``) on either side is no answer, so not a flip
    (`answer_changes`: the one comparison of two results)."""
    return [qid for qid, _was, _now in answer_changes(old, new).flipped]


def _uncompared(old: ItemResult, new: ItemResult | None) -> list[str]:
    """Questions that could not be compared: their LM call failed in either run, or one result
    lacks them (every question of `old` when there is no new result)."""
    if new is None:
        return [v.question_id for v in old.verdicts]
    return answer_changes(old, new).not_compared


def _first_error(result: ItemResult) -> str | None:
    """The item's error (status ``error``), else its first failed call's."""
    return result.error or next((v.error for v in result.verdicts if not v.answered and v.error), None)


def _label(result: ItemResult | None) -> str | None:
    return result.named_verdict.label if result is not None and result.named_verdict is not None else None


def _overall(result: ItemResult | None) -> float | None:
    return result.score_card.overall if result is not None and result.score_card is not None else None


def compare_runs(
    previous: Sequence[ItemResult], current: Sequence[ItemResult], plan: RejudgePlan, *, order: Sequence[str],
    aggregation: str, failed: Sequence[str] | Sequence[tuple[str, str]] = (),
) -> list[ItemChange]:
    """One `ItemChange` per item of `order` (then the removed ones), judged items compared
    with their previous result (pure).

    A judged item whose new result has failed LM calls gets status "incomplete" (some
    answered) or "error" (it could not be judged), with how many questions it answered;
    one without a result gets "failed" (judging raised and nothing was stored; `failed`,
    ids or (id, error message) pairs, gives the error). A change (``changed``) is claimed
    only between two complete results; questions whose call failed on either side are
    listed in ``uncompared_questions``, never as flips.
    """
    old = {r.item_id: r for r in previous}
    new = {r.item_id: r for r in current}
    failures = dict((f, None) if isinstance(f, str) else f for f in failed)
    scored = aggregation in ("score", "both")
    changes: list[ItemChange] = []
    for item_id in order:
        before, after = old.get(item_id), new.get(item_id)
        if item_id in plan.new_ids:
            reason = "new"
        elif item_id in plan.changed_ids:
            reason = "rejudged"
        elif item_id in plan.completed_ids:
            reason = "completed"
        else:
            reason = None
        if reason is not None and after is None:
            status = "failed"
        elif reason is not None and after.status == "error":
            status = "error"
        elif reason is not None and not after.complete:
            status = "incomplete"
        else:
            status = reason or "unchanged"
        failure = status in ("incomplete", "error", "failed")
        compared = (reason in ("rejudged", "completed") and before is not None and after is not None
                    and before.complete and after.complete)
        if aggregation == "score":
            changed = compared and _overall(before) != _overall(after)
        else:
            changed = compared and _label(before) != _label(after)
        changes.append(ItemChange(
            item_id=item_id, status=status, reason=reason if failure else None, old_verdict=_label(before),
            new_verdict=_label(after) if status != "error" else None,
            old_overall=_overall(before) if scored else None,
            new_overall=_overall(after) if scored and status != "error" else None,
            changed=changed,
            flipped_questions=_flipped(before, after) if before is not None and after is not None else [],
            uncompared_questions=_uncompared(before, after) if before is not None and reason is not None else [],
            questions_answered=after.answered_count if status in ("incomplete", "error") else None,
            questions_total=len(after.verdicts) if status in ("incomplete", "error") else None,
            error=_first_error(after) if status in ("incomplete", "error") else failures.get(item_id),
        ))
    for item_id in plan.removed_ids:
        before = old[item_id]
        changes.append(ItemChange(item_id=item_id, status="removed", old_verdict=_label(before),
                                  old_overall=_overall(before) if scored else None))
    return changes


def not_compared(changes: Sequence[ItemChange], previous: Sequence[ItemResult]) -> list[str]:
    """Ids of judged items whose verdict could not be compared with the previous one: an LM
    call failed in either run (the new result is incomplete, an error or missing, or the
    previous one was incomplete). New items have nothing to compare and are not listed."""
    before = {r.item_id: r for r in previous}
    judged_again = ("rejudged", "completed", "incomplete", "error", "failed")
    return [c.item_id for c in changes
            if c.status in judged_again and c.reason != "new" and c.item_id in before
            and (c.status in ("incomplete", "error", "failed") or not before[c.item_id].complete)]


@dataclass
class RejudgeOutcome:
    """What one `rejudge_items` call did.

    Attributes:
        report: the `RejudgeReport` (also written as ``rejudge.json``).
        evaluation: the outcome of judging the changed and new items.
        results: every result of the new run, in items-file order.
    """

    report: RejudgeReport
    evaluation: EvaluationOutcome
    results: list[ItemResult]


def rejudge_items(
    program: BinEval | VerdictJudge,
    items: Sequence[dspy.Example],
    previous: RunDirectory,
    run_dir: RunDirectory,
    manifest: RunManifest,
    *,
    aggregation: str,
    lm: LMHandle | None = None,
    on_progress: ProgressCallback | None = None,
    settings: RunSettings | None = None,
) -> RejudgeOutcome:
    """Re-judge the items whose output changed since `previous`, into the new run `run_dir`.

    Args:
        program: built on the frozen question set (see `frozen_question_set`).
        items: the current items (same field mapping as the previous run).
        previous: the earlier run; only read.
        run_dir: the new run directory (resumable: rerunning skips what is done).
        manifest: the new run's manifest (command "rejudge").
        aggregation: the previous run's aggregation.
        lm: the LM (the same one as the previous run's).
        on_progress: progress callback for judged items.
        settings: how to judge (`RunSettings`), as in `evaluate_items`.

    Returns:
        A `RejudgeOutcome`; ``rejudge.json`` is written into `run_dir`. An item whose new
        LM calls failed is reported "incomplete" or "error" (stored with every answer it
        got; rerunning completes it) and listed in ``not_compared``, never in ``changed``.

    Raises:
        RunStateError: `run_dir` is `previous` (old results are never overwritten),
            or the question set is not the previous run's.
    """
    if run_dir.path.resolve() == previous.path.resolve():
        raise RunStateError(f"re-judging into {previous.path} would overwrite the previous results.",
                            fix="choose another `out_dir` (or leave it out for a fresh directory).")
    old_manifest = previous.read_manifest()
    if old_manifest is None or program.question_set.content_hash != old_manifest.question_set_hash:
        raise RunStateError("the program's question set is not the one the previous run was judged with",
                            expected=f"hash {old_manifest.question_set_hash}" if old_manifest is not None else None,
                            received=f"hash {program.question_set.content_hash}",
                            fix="build the program from the previous run's question set "
                                "(`frozen_question_set(previous)`).")
    stored_before = previous.read_stored_results()  # the previous run is only read, never trimmed
    previous_results = stored_before.results
    plan = plan_rejudge(previous_results, items)
    seeds = {r.item_id: r for r in previous_results if r.item_id in set(plan.completed_ids)}
    outcome = evaluate_items(program, plan.judge, run_dir, manifest, lm=lm, on_progress=on_progress,
                             settings=settings, seed_results=seeds)
    stored = {r.item_id for r in run_dir.read_results()}
    for result in plan.carry:
        if result.item_id not in stored:
            run_dir.append(result)
    current = {r.item_id: r for r in run_dir.read_results()}
    order = [str(i.item_id) for i in items]
    if getattr(program, "aggregation", "score") != "verdict":  # the summary covers the carried items too
        outcome.summary = record_summary(run_dir, program.question_set, lm=lm, name=manifest.lm, settings=settings,
                                         item_ids=order)
    results = [current[i] for i in order if i in current]
    changes = compare_runs(previous_results, results, plan, order=order, aggregation=aggregation,
                           failed=outcome.failed)  # items stored as status error rows are in `results`
    counts: dict[str, int] = {}
    for change in changes:
        counts[change.status] = counts.get(change.status, 0) + 1
    report = RejudgeReport(
        previous_run=str(previous.path), run=str(run_dir.path), question_set_hash=old_manifest.question_set_hash,
        lm=manifest.lm, aggregation=aggregation, items_path=manifest.items_path, counts=counts,
        changed=[c.item_id for c in changes if c.changed], not_compared=not_compared(changes, previous_results),
        items=changes,
        previous_unreadable=(f"{stored_before.note()} An item whose line could not be read is judged as new."
                             if stored_before.unreadable else None),
    )
    path = Path(run_dir.path) / REJUDGE_FILE
    path.write_text(json.dumps(report.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    return RejudgeOutcome(report=report, evaluation=outcome, results=results)

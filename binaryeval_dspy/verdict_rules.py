"""The code-enforced rules of verdict mode (seed 004): grounds, the fatal rule, refutation moves.

Pure functions: verdicts and labels in, decisions out. The LM only ever proposes a
label; these functions decide what the proposal becomes, so an LM mistake cannot
override a fatal "no" and an unparsed answer is never read as "no" or "yes".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, get_args

from binaryeval_dspy.errors import BinEvalError
from binaryeval_dspy.schemas.named_verdict import (
    FatalRuleRecord,
    LabelAttempt,
    NamedVerdict,
    PressureTestRecord,
    RefutationAnswer,
)
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.schemas.verdict_policy import VerdictPolicy

PressureTestMode = Literal["always", "non-pass", "never"]
PRESSURE_TEST_MODES: tuple[str, ...] = get_args(PressureTestMode)


def _by_id(verdicts: Iterable[QuestionVerdict]) -> dict[str, QuestionVerdict]:
    return {v.question_id: v for v in verdicts}


def grounds(verdicts: Iterable[QuestionVerdict], question_set: QuestionSet) -> list[str]:
    """Ids of every question answered "no", in question-set order (the verdict's grounds)."""
    by_id = _by_id(verdicts)
    return [q.id for q in question_set.questions if q.id in by_id and by_id[q.id].verdict == "no"]


def fatal_failures(verdicts: Iterable[QuestionVerdict], question_set: QuestionSet) -> list[str]:
    """Ids of fatal questions answered "no", in question-set order."""
    by_id = _by_id(verdicts)
    return [q.id for q in question_set.questions if q.fatal and q.id in by_id and by_id[q.id].verdict == "no"]


def fatal_unanswered(verdicts: Iterable[QuestionVerdict], question_set: QuestionSet) -> list[str]:
    """Ids of fatal questions without a yes/no answer (unparsed or missing)."""
    by_id = _by_id(verdicts)
    return [q.id for q in question_set.questions if q.fatal and (q.id not in by_id or not by_id[q.id].parsed)]


def pressure_test_skip_reason(
    mode: PressureTestMode, provisional: str | None, policy: VerdictPolicy, fatal_ids: list[str]
) -> str | None:
    """Why the pressure test does not run for this item, or None when it should run.

    Args:
        mode: "always", "non-pass" (only non-pass provisional labels) or "never".
        provisional: the LM's pick (None when it failed).
        policy: the declared labels.
        fatal_ids: fatal questions answered "no" (the verdict is then fixed by code).
    """
    if mode == "never":
        return "pressure test switched off (`pressure_test` never)"
    if provisional is None:
        return "no provisional verdict to test (the LM's pick failed)"
    if fatal_ids:
        return f"a fatal question was answered no ({', '.join(fatal_ids)}); code fixes the verdict"
    if mode == "non-pass" and policy.is_pass(provisional):
        return f"'{provisional}' is a pass verdict (pressure test runs on non-pass verdicts only)"
    return None


def refutation_succeeded(answers: list[RefutationAnswer], needs: Literal["all", "any"]) -> bool:
    """True when the refutation answers meet the rule: every one "yes" ("all") or one "yes" ("any").

    An unparsed answer is not "yes"; with no answers at all nothing is refuted.
    """
    if not answers:
        return False
    yes = [a.answer == "yes" for a in answers]
    return all(yes) if needs == "all" else any(yes)


def apply_refutation(record: PressureTestRecord, policy: VerdictPolicy) -> PressureTestRecord:
    """Fill ``refuted`` and ``moved_to`` of a pressure test that ran (others returned unchanged)."""
    if record.status != "ran" or record.tested_label is None:
        return record
    refuted = refutation_succeeded(record.questions, policy.refutation_needs)
    moved_to = policy.refutation_target(record.tested_label) if refuted else None
    return record.model_copy(update={"refuted": refuted, "moved_to": moved_to})


def apply_fatal_rule(
    label: str | None, fatal_ids: list[str], policy: VerdictPolicy
) -> tuple[str | None, FatalRuleRecord | None]:
    """Force the fatal label when a fatal question was answered "no" (seed 004's dominant "no").

    The result is at least as severe as ``policy.fatal_label``: a pass label or a
    milder non-pass label becomes the fatal label; a more severe pick is kept.

    Returns:
        (final label, record) - the record is None when no fatal question failed.
    """
    if not fatal_ids:
        return label, None
    forced = policy.fatal_label
    if forced is None:  # QuestionSet validation prevents this for loaded sets
        raise BinEvalError("a fatal question failed but the verdict policy declares no fatal_label")
    questions = ", ".join(fatal_ids)
    if label is not None and policy.severity(label) >= policy.severity(forced):
        return label, FatalRuleRecord(
            question_ids=fatal_ids, label_before=label, forced_label=forced, changed=False,
            note=f"fatal question(s) {questions} answered no; the verdict '{label}' already satisfies the "
                 f"fatal rule (at least as severe as '{forced}'), so code kept it",
        )
    before = "the LM's pick failed" if label is None else f"the LM's verdict was '{label}'"
    return forced, FatalRuleRecord(
        question_ids=fatal_ids, label_before=label, forced_label=forced, changed=True,
        note=f"fatal question(s) {questions} answered no, so code set '{forced}' ({before})",
    )


def decide_verdict(
    *,
    policy: VerdictPolicy,
    question_set: QuestionSet,
    verdicts: list[QuestionVerdict],
    provisional: str | None,
    reason: str,
    attempts: list[LabelAttempt],
    pressure_test: PressureTestRecord,
) -> NamedVerdict:
    """Combine the LM's pick, the pressure test and the fatal rule into a `NamedVerdict`.

    Order: provisional pick -> refutation move (if the pressure test refuted it) ->
    fatal rule (code, last, so nothing the LM says can lift a fatal "no").

    Args:
        policy: the question set's verdict policy.
        question_set: gives which questions are fatal.
        verdicts: every binary answer (code and LM) of the item.
        provisional: the LM's accepted pick, or None when it failed.
        reason: the LM's reason for its pick.
        attempts: the pick attempts.
        pressure_test: the pressure-test record (refutation not yet applied).

    Returns:
        The `NamedVerdict` with ``status`` "unparsed" only when no label results.
    """
    pressure_test = apply_refutation(pressure_test, policy)
    label, decided_by = provisional, "lm"
    if pressure_test.moved_to is not None:
        label, decided_by = pressure_test.moved_to, "pressure_test"
    fatal_ids = fatal_failures(verdicts, question_set)
    label, fatal_record = apply_fatal_rule(label, fatal_ids, policy)
    if fatal_record is not None and fatal_record.changed:
        decided_by = "fatal_rule"
    notes = []
    unanswered = fatal_unanswered(verdicts, question_set)
    if unanswered:
        notes.append(f"fatal question(s) {', '.join(unanswered)} got no yes/no answer, so the fatal rule "
                     "could not be checked for them")
    if provisional is None:
        notes.append("the LM did not pick a declared label in "
                     f"{len(attempts)} attempt(s): {[a.raw for a in attempts]}")
    qualified_pick = [a.raw for a in attempts if a.accepted and a.qualified]
    if qualified_pick:
        notes.append(f"the LM's pick came with a reservation ({qualified_pick[-1]!r}): taken as the label it names")
    qualified_answers = [a.question for a in pressure_test.questions if a.qualified]
    if qualified_answers:
        notes.append(f"{len(qualified_answers)} refutation answer(s) came with a reservation (\"yes, but ...\"), "
                     f"counted as the answer named: {qualified_answers}")
    return NamedVerdict(
        label=label, status="decided" if label is not None else "unparsed",
        decided_by=decided_by if label is not None else None, provisional_label=provisional,
        reason=reason, grounds=grounds(verdicts, question_set), fatal_rule=fatal_record,
        pressure_test=pressure_test, attempts=attempts, notes=notes,
    )

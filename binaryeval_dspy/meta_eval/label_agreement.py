"""Question-level agreement with labels: how often, and where, a judge agrees with people.

`label_agreement` takes a labels file's records (judge ``human``, or several annotators)
and any judges' records (verdicts files, run exports), adds the panels and cascades asked
for (`binaryeval_dspy.panels`, simulated on the recorded verdicts), and returns an
`AgreementResult`: per judge, panel and cascade, its coverage (answers, non-answers,
pairs without an answer), accuracy, Cohen's kappa with a bootstrap interval (items
resampled, seeded), its yes-rate against the labels' on the same pairs, a confusion table
per question (worst first), and, where it gave P(yes), ECE, Brier score and reliability
bins; for panels, the inter-judge agreement (Fleiss' kappa) and where members split; for
cascades, the share escalated, the cost against asking the last stage everything, and a
sweep over the P(yes) band; annotator agreement when several annotators labelled.

With several annotators, a pair's reference label is their majority; a tie gives no
reference (counted, left out). A non-answer (``unparsed``, ``error``) is never "no": it
leaves kappa and accuracy and is counted; ``accuracy_strict`` counts it as a disagreement
(the convention of papers that score a missing verdict as wrong).
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from binaryeval_dspy.errors import BinEvalError, InputError
from binaryeval_dspy.metrics.binary_agreement import (
    accuracy_from_counts,
    brier_score,
    cohen_kappa_from_counts,
    expected_calibration_error,
    fleiss_kappa,
    krippendorff_alpha_nominal,
    reliability_bins,
)
from binaryeval_dspy.metrics.bootstrap import agreement_ci
from binaryeval_dspy.panels import (
    PANEL_RULES,
    CascadeRule,
    Pair,
    check_rule,
    index_by_pair,
    log_odds_weight,
    panel_name,
    simulate_cascade,
    simulate_panel,
)
from binaryeval_dspy.schemas.verdict_record import VerdictRecord

#: the band half-widths the cascade sweep tries: bands (0.5 - w, 0.5 + w)
SWEEP_WIDTHS = tuple(round(0.05 * k, 2) for k in range(11))
DEFAULT_TARGET_KAPPA = 0.6


@dataclass(frozen=True)
class PanelSpec:
    """A panel asked for: its rule and members (`binaryeval_dspy.panels.PANEL_RULES`)."""

    rule: str
    members: tuple[str, ...]

    @property
    def name(self) -> str:
        """``rule(member, ...)``."""
        return panel_name(self.rule, self.members)


@dataclass
class LabelSet:
    """The reference labels.

    Attributes:
        reference: (item_id, question_id) -> True for yes, for pairs with a reference.
        annotators: the labels' judge names.
        ties: pairs whose annotators tied (no reference).
        non_answers: label rows that are not yes / no (left out).
        ratings: (item_id, question_id) -> [yes votes, no votes] of the annotators.
        questions: question_id -> its text, from any row that gives one.
    """

    reference: dict[Pair, bool]
    annotators: list[str]
    ties: int
    non_answers: int
    ratings: dict[Pair, list[int]]
    questions: dict[str, str]


def reference_labels(records: Iterable[VerdictRecord]) -> LabelSet:
    """The reference label of each pair: its annotators' majority (one annotator: theirs)."""
    ratings: dict[Pair, list[int]] = {}
    annotators: dict[str, None] = {}
    questions: dict[str, str] = {}
    non_answers = 0
    for r in records:
        annotators[r.judge] = None
        if r.question_text:
            questions.setdefault(r.question_id, r.question_text)
        if not r.answered:
            non_answers += 1
            continue
        votes = ratings.setdefault((r.item_id, r.question_id), [0, 0])
        votes[0 if r.verdict == "yes" else 1] += 1
    reference = {pair: v[0] > v[1] for pair, v in ratings.items() if v[0] != v[1]}
    ties = sum(1 for v in ratings.values() if v[0] == v[1])
    return LabelSet(reference, list(annotators), ties, non_answers, ratings, questions)


def _fmt_interval(low: float, high: float) -> list[float | None]:
    return [None if not math.isfinite(low) else low, None if not math.isfinite(high) else high]


def _num(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def judge_agreement(records: Sequence[VerdictRecord], labels: LabelSet, *, n_resamples: int = 1000, seed: int = 0,
                    n_bins: int = 10) -> dict[str, Any]:
    """Agreement of one judge's records with the reference labels (see the module docstring).

    Returns:
        A JSON-ready dict: ``pairs`` (labelled pairs the judge has a row for),
        ``answered``, ``unparsed``, ``error``, ``without_answer`` (labelled pairs with no
        row), ``agree``, ``accuracy``, ``accuracy_strict``, ``kappa`` with
        ``kappa_interval`` and ``accuracy_interval`` (95%, items resampled),
        ``yes_rate`` / ``label_yes_rate`` (on the answered pairs), ``questions`` (per
        question cells and figures, worst accuracy first), ``calibration`` (or None),
        ``cost_usd`` (None if any row's cost is unknown) and ``cost_unknown``.
    """
    rows = [r for r in records if (r.item_id, r.question_id) in labels.reference]
    answered = [r for r in rows if r.answered]
    per_item: dict[str, np.ndarray] = {}
    per_question: dict[str, dict[str, Any]] = {}
    for r in rows:
        q = per_question.setdefault(r.question_id, {"question_id": r.question_id, "cells": np.zeros(4),
                                                    "non_answers": 0,
                                                    "text": r.question_text or labels.questions.get(r.question_id)})
        if not r.answered:
            q["non_answers"] += 1
            continue
        truth = labels.reference[(r.item_id, r.question_id)]
        cell = (0 if truth else 1) if r.verdict == "yes" else (2 if truth else 3)
        q["cells"][cell] += 1
        per_item.setdefault(r.item_id, np.zeros(4))[cell] += 1
    unit_counts = np.array(list(per_item.values())) if per_item else np.zeros((0, 4))
    cells = unit_counts.sum(axis=0) if len(unit_counts) else np.zeros(4)
    n = float(cells.sum())
    kappa = agreement_ci(unit_counts, statistic="kappa", n_resamples=n_resamples, seed=seed)
    acc = agreement_ci(unit_counts, statistic="accuracy", n_resamples=n_resamples, seed=seed)
    questions = []
    for q in per_question.values():
        c = q["cells"]
        total = float(c.sum())
        questions.append({
            "question_id": q["question_id"], "text": q["text"], "answered": int(total),
            "non_answers": q["non_answers"], "yes_yes": int(c[0]), "yes_no": int(c[1]), "no_yes": int(c[2]),
            "no_no": int(c[3]), "disagree": int(c[1] + c[2]), "accuracy": _num(accuracy_from_counts(c)),
            "kappa": _num(cohen_kappa_from_counts(c)),
            "yes_rate": _num((c[0] + c[1]) / total) if total else None,
            "label_yes_rate": _num((c[0] + c[2]) / total) if total else None})
    questions.sort(key=lambda q: (q["accuracy"] if q["accuracy"] is not None else 2.0, -q["disagree"],
                                  q["question_id"]))
    soft = [r for r in answered if r.p_yes is not None]
    calibration = None
    if soft:
        p = [r.p_yes for r in soft]
        y = [labels.reference[(r.item_id, r.question_id)] for r in soft]
        bins = reliability_bins(p, y, n_bins=n_bins)
        calibration = {"answers": len(soft), "ece": _num(expected_calibration_error(p, y, n_bins=n_bins)),
                       "brier": _num(brier_score(p, y)), "n_bins": n_bins,
                       "bins": [{"low": b.low, "high": b.high, "n": b.n, "mean_p_yes": _num(b.mean_p_yes),
                                 "yes_rate": _num(b.yes_rate)} for b in bins]}
    costs = [r.cost_usd for r in rows]
    unknown = sum(1 for c in costs if c is None)
    labelled_items = {pair[0] for pair in labels.reference}
    judged_items = {r.item_id for r in records}
    missing = sum(1 for pair in labels.reference if pair[0] in judged_items) - len(rows)
    return {
        "pairs": len(rows), "answered": len(answered),
        "unparsed": sum(1 for r in rows if r.verdict == "unparsed"),
        "error": sum(1 for r in rows if r.verdict == "error"),
        "without_answer": missing, "items": len(judged_items & labelled_items),
        "agree": int(cells[0] + cells[3]),
        "accuracy": _num(accuracy_from_counts(cells)) if n else None,
        "accuracy_strict": (cells[0] + cells[3]) / len(rows) if rows else None,
        "accuracy_interval": _fmt_interval(acc.low, acc.high),
        "kappa": _num(kappa.estimate), "kappa_interval": _fmt_interval(kappa.low, kappa.high),
        "kappa_undefined_resamples": kappa.undefined_resamples,
        "yes_rate": _num((cells[0] + cells[1]) / n) if n else None,
        "label_yes_rate": _num((cells[0] + cells[2]) / n) if n else None,
        "questions": questions, "calibration": calibration,
        "cost_usd": None if unknown else float(sum(costs)), "cost_unknown": unknown,
    }


def rating_table(ratings: Mapping[Pair, Sequence[int]], pairs: Iterable[Pair] | None = None) -> np.ndarray:
    """(units, 2) yes / no counts of raters per pair, for `fleiss_kappa` / `krippendorff_alpha_nominal`."""
    keys = list(ratings) if pairs is None else [p for p in pairs if p in ratings]
    return np.array([ratings[k] for k in keys], dtype=float).reshape(-1, 2)


def rater_agreement(ratings: Mapping[Pair, Sequence[int]]) -> dict[str, Any]:
    """Agreement among raters: Fleiss' kappa and Krippendorff's alpha over the pairs rated by
    at least two of them, with the share of those pairs where they split."""
    table = rating_table(ratings)
    rated = table[table.sum(axis=1) >= 2]
    return {"pairs": len(rated), "fleiss_kappa": _num(fleiss_kappa(rated)),
            "krippendorff_alpha": _num(krippendorff_alpha_nominal(rated)),
            "split_share": _num(float(((rated[:, 0] > 0) & (rated[:, 1] > 0)).mean())) if len(rated) else None}


def _member_ratings(index: Mapping[Pair, Mapping[str, VerdictRecord]], members: Sequence[str]
                    ) -> dict[Pair, list[int]]:
    out = {}
    for pair, answers in index.items():
        votes = [answers[m].verdict for m in members if m in answers and answers[m].answered]
        if votes:
            out[pair] = [votes.count("yes"), votes.count("no")]
    return out


def panel_agreement(index: Mapping[Pair, Mapping[str, VerdictRecord]], members: Sequence[str], *,
                    shown: int = 10) -> dict[str, Any]:
    """Inter-judge agreement of a panel's members (`rater_agreement`) and the questions
    where they split most often (question id -> split pairs, most first)."""
    ratings = _member_ratings(index, members)
    result = rater_agreement(ratings)
    splits: dict[str, int] = {}
    for pair, (yes, no) in ratings.items():
        if yes and no:
            splits[pair[1]] = splits.get(pair[1], 0) + 1
    result["split_questions"] = sorted(splits.items(), key=lambda kv: (-kv[1], kv[0]))[:shown]
    result["failed_answers"] = {m: sum(1 for a in index.values() if m in a and not a[m].answered) for m in members}
    return result


def leave_one_item_out_weights(index: Mapping[Pair, Mapping[str, VerdictRecord]], members: Sequence[str],
                               labels: LabelSet):
    """(item_id, judge) -> `log_odds_weight` of the judge's agreement with the labels on every
    other item, so no item's own label sets its weight."""
    totals = {m: [0, 0] for m in members}
    per_item: dict[tuple[str, str], list[int]] = {}
    for pair, answers in index.items():
        truth = labels.reference.get(pair)
        if truth is None:
            continue
        for m in members:
            r = answers.get(m)
            if r is None or not r.answered:
                continue
            hit = int((r.verdict == "yes") == truth)
            totals[m][0] += hit
            totals[m][1] += 1
            cell = per_item.setdefault((pair[0], m), [0, 0])
            cell[0] += hit
            cell[1] += 1

    def weight(item_id: str, judge: str) -> float:
        agree, answered = totals.get(judge, [0, 0])
        own = per_item.get((item_id, judge), [0, 0])
        return log_odds_weight(agree - own[0], answered - own[1])

    return weight


@dataclass
class AgreementResult:
    """Everything `label_agreement` measured (JSON-ready dicts, every figure with its judge).

    Attributes:
        labels: the labels' summary (annotators, pairs, ties, annotator agreement).
        judges: judge name -> `judge_agreement` dict with ``kind`` (judge / panel /
            cascade), ``members`` and ``rule``.
        panels: panel name -> `panel_agreement` dict.
        cascades: cascade name -> counts, cost and ``sweep`` (or None).
        records: judge name -> its records (recorded, or simulated for panels and cascades).
    """

    labels: dict[str, Any]
    judges: dict[str, dict[str, Any]] = field(default_factory=dict)
    panels: dict[str, dict[str, Any]] = field(default_factory=dict)
    cascades: dict[str, dict[str, Any]] = field(default_factory=dict)
    records: dict[str, list[VerdictRecord]] = field(default_factory=dict)


def _cascade_summary(counts, rule: CascadeRule) -> dict[str, Any]:
    return {"stages": [list(s) for s in rule.stages], "band": list(rule.band) if rule.band else None,
            "questions": counts.questions, "escalated_share": _num(counts.escalated_share),
            "answered_at_stage": {str(k + 1): v for k, v in sorted(counts.answered_at.items())},
            "escalations": dict(counts.escalations), "cost_usd": counts.cost_usd,
            "strongest_cost_usd": counts.strongest_cost_usd,
            "cost_share": (counts.cost_usd / counts.strongest_cost_usd
                           if counts.cost_usd is not None and counts.strongest_cost_usd else None),
            "cost_unknown": counts.cost_unknown}


def band_sweep(index: Mapping[Pair, Mapping[str, VerdictRecord]], rule: CascadeRule, labels: LabelSet, *,
               target_kappa: float = DEFAULT_TARGET_KAPPA, seed: int = 0) -> dict[str, Any]:
    """Agreement against cost over P(yes) bands (0.5 - w, 0.5 + w), w in `SWEEP_WIDTHS`, and
    the band that reaches `target_kappa` at the lowest cost (by escalated share when a cost
    is unknown)."""
    points = []
    for width in SWEEP_WIDTHS:
        band = (round(0.5 - width, 2), round(0.5 + width, 2))
        records, counts = simulate_cascade(index, rule.with_band(band))
        figures = judge_agreement(records, labels, n_resamples=1, seed=seed)
        points.append({"band": list(band), "kappa": figures["kappa"], "accuracy": figures["accuracy"],
                       "accuracy_strict": figures["accuracy_strict"],
                       "escalated_share": _num(counts.escalated_share), "cost_usd": counts.cost_usd,
                       "cost_share": (counts.cost_usd / counts.strongest_cost_usd
                                      if counts.cost_usd is not None and counts.strongest_cost_usd else None)})
    reaching = [p for p in points if p["kappa"] is not None and p["kappa"] >= target_kappa]
    by_cost = all(p["cost_usd"] is not None for p in reaching)
    best = min(reaching, key=lambda p: (p["cost_usd"] if by_cost else p["escalated_share"], p["band"][1] - p["band"][0]),
               default=None)
    return {"target_kappa": target_kappa, "points": points, "best": best,
            "chosen_by": "cost" if by_cost else "escalated share (a cost is unknown)"}


def parse_panel(text: str) -> PanelSpec:
    """``RULE=JUDGE,JUDGE,...`` (``majority=a,b,c``) as a `PanelSpec`.

    Raises:
        InputError: no ``=``, an unknown rule, or fewer than two judges.
    """
    rule, sep, members = text.partition("=")
    names = tuple(m.strip() for m in members.split(",") if m.strip())
    if not sep or rule.strip() not in PANEL_RULES or len(names) < 2:
        raise InputError(f"a panel is RULE=JUDGE,JUDGE,... with RULE one of {', '.join(PANEL_RULES)} and two or "
                         f"more judges, got {text!r}", field="`panels`",
                         fix="e.g. majority=openai/gpt-4o,anthropic/claude-sonnet-4,gemini/gemini-2.5-pro.")
    return PanelSpec(rule.strip(), names)


def parse_cascade(text: str, *, band: tuple[float, float] | None = None) -> CascadeRule:
    """``FIRST>NEXT`` (``cheap>strong``; a stage of several judges joined by ``+``, voting by
    majority) as a `CascadeRule` with `band`.

    Raises:
        InputError: fewer than two stages, an empty stage, or a bad band.
    """
    stages = tuple(tuple(j.strip() for j in stage.split("+") if j.strip()) for stage in text.split(">"))
    try:
        return CascadeRule(stages, band)
    except BinEvalError as exc:
        raise InputError(f"bad cascade {text!r}: {exc.message}", field="`cascades`",
                         fix="write stages from first to last, FIRST>NEXT, a panel stage as A+B.") from None


def parse_band(text: str) -> tuple[float, float]:
    """``LOW,HIGH`` (``0.3,0.7``) as a P(yes) band.

    Raises:
        InputError: not two numbers with 0 <= LOW <= HIGH <= 1.
    """
    try:
        low, high = (float(v) for v in text.split(","))
    except ValueError:
        low = high = math.nan
    if not (0.0 <= low <= high <= 1.0):
        raise InputError(f"a P(yes) band is LOW,HIGH with 0 <= LOW <= HIGH <= 1, got {text!r}", field="`band`",
                         fix="e.g. 0.3,0.7: a first-stage P(yes) between them escalates.")
    return low, high


def label_agreement(labels: Sequence[VerdictRecord], judged: Sequence[VerdictRecord], *,
                    panels: Sequence[PanelSpec] = (), cascades: Sequence[CascadeRule] = (),
                    fatal_questions: Iterable[str] = (), items: str | None = None, n_resamples: int = 1000,
                    seed: int = 0, n_bins: int = 10, target_kappa: float = DEFAULT_TARGET_KAPPA) -> AgreementResult:
    """Question-level agreement of every judge, panel and cascade with the labels.

    Args:
        labels: the labels' records (judge ``human`` or annotator ids).
        judged: every judge's records (several judges, one file or many).
        panels: panels to simulate on the recorded verdicts.
        cascades: cascades to simulate (their band as given; a sweep when the first stage
            gave P(yes)).
        fatal_questions: question ids the ``any-no`` rule treats as fatal.
        items: keep only items whose id matches this glob (``natural-*``); None keeps all.
        n_resamples / seed: the bootstrap of the kappa and accuracy intervals.
        n_bins: reliability bins (ECE).
        target_kappa: the agreement a cascade's band sweep must reach.

    Returns:
        An `AgreementResult`.

    Raises:
        InputError: no labelled pair left; a panel or cascade naming a judge that has no
            verdicts (the message lists the judges); an unknown panel rule; a judge
            name used by a label's annotator too.
    """
    if items:
        labels = [r for r in labels if fnmatch.fnmatchcase(r.item_id, items)]
        judged = [r for r in judged if fnmatch.fnmatchcase(r.item_id, items)]
    label_set = reference_labels(labels)
    if not label_set.reference:
        raise InputError("no labelled question is left to compare with" + (f" (items matching {items!r})" if items else ""),
                         field="`labels`", fix="check the labels file's item ids against the verdicts' ids.")
    by_judge: dict[str, list[VerdictRecord]] = {}
    for r in judged:
        by_judge.setdefault(r.judge, []).append(r)
    clash = sorted(set(by_judge) & set(label_set.annotators))
    if clash:
        raise InputError(f"{clash[0]!r} names both a judge and an annotator of the labels", field="`labels`",
                         fix="give the labels' annotators their own names (human, ann-1, ...).")
    known = ", ".join(by_judge) or "none"
    wanted = [("`panels`", spec.members) for spec in panels] + [
        ("`cascades`", [j for stage in rule.stages for j in stage]) for rule in cascades]
    for setting, members in wanted:
        for member in members:
            if member not in by_judge:
                raise InputError(f"no verdicts for judge {member!r} (judges in the verdicts: {known})",
                                 field=setting, fix="name judges exactly as the verdicts' judge column does.")
    result = AgreementResult(labels={
        "annotators": label_set.annotators, "pairs": len(label_set.reference), "ties": label_set.ties,
        "non_answers": label_set.non_answers,
        "items": len({p[0] for p in label_set.reference}),
        "questions": len({p[1] for p in label_set.reference}),
        "yes_rate": _num(sum(label_set.reference.values()) / len(label_set.reference)),
        "annotator_agreement": rater_agreement(label_set.ratings) if len(label_set.annotators) > 1 else None})
    index = index_by_pair(judged)

    def add(name: str, records: list[VerdictRecord], **about: Any) -> None:
        result.records[name] = records
        result.judges[name] = {**about, **judge_agreement(records, label_set, n_resamples=n_resamples, seed=seed,
                                                          n_bins=n_bins)}

    for name, records in by_judge.items():
        add(name, records, kind="judge", members=[name], rule=None)
    for spec in panels:
        check_rule(spec.rule)
        weights = leave_one_item_out_weights(index, spec.members, label_set) if spec.rule == "weighted" else None
        records = simulate_panel(index, spec.members, rule=spec.rule, fatal_questions=fatal_questions,
                                 weights=weights, name=spec.name)
        add(spec.name, records, kind="panel", members=list(spec.members), rule=spec.rule)
        result.panels[spec.name] = panel_agreement(index, spec.members)
    for rule in cascades:
        records, counts = simulate_cascade(index, rule)
        add(rule.name, records, kind="cascade", members=[j for s in rule.stages for j in s],
            rule=f"escalate on a non-answer, a split{' or P(yes) in the band' if rule.band else ''}")
        summary = _cascade_summary(counts, rule)
        first = rule.stages[0]
        has_p_yes = any(r.p_yes is not None for j in first for r in by_judge.get(j, []))
        summary["sweep"] = band_sweep(index, rule, label_set, target_kappa=target_kappa, seed=seed) if has_p_yes else None
        result.cascades[rule.name] = summary
    return result

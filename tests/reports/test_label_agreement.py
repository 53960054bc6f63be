"""Question-level agreement: our kappa, accuracy, Fleiss, Krippendorff, ECE and Brier against
independent reference computations (to 1e-9), seeded bootstrap intervals, panel and cascade
rules, and `label_agreement` end to end on small hand-made verdicts (no LM involved)."""

from __future__ import annotations

import itertools
import math
import random

import krippendorff
import numpy as np
import pytest

from binaryeval_dspy.errors import BinEvalError, InputError
from binaryeval_dspy.meta_eval.label_agreement import (
    PanelSpec,
    label_agreement,
    parse_band,
    parse_cascade,
    parse_panel,
)
from binaryeval_dspy.metrics.binary_agreement import (
    brier_score,
    cohen_kappa,
    confusion_counts,
    expected_calibration_error,
    fleiss_kappa,
    krippendorff_alpha_nominal,
)
from binaryeval_dspy.metrics.bootstrap import agreement_ci, bootstrap_ci
from binaryeval_dspy.panels import (
    CascadeRule,
    index_by_pair,
    panel_vote,
    simulate_cascade,
    simulate_panel,
)
from binaryeval_dspy.schemas.verdict_record import VerdictRecord


def _reference_kappa(a, b):
    """Cohen's kappa the textbook way: observed agreement and the margins' chance agreement,
    from explicit loops over the pairs."""
    n = len(a)
    observed = sum(1 for x, y in zip(a, b) if x == y) / n
    chance = sum((sum(1 for x in a if x == c) / n) * (sum(1 for y in b if y == c) / n) for c in (True, False))
    return (observed - chance) / (1 - chance)


def _reference_fleiss(table):
    """Fleiss (1971), eqs. for P_i, P-bar, p_j, written with plain loops (equal raters per unit)."""
    n_units, k = len(table), len(table[0])
    m = sum(table[0])
    p_i = [(sum(x * x for x in row) - m) / (m * (m - 1)) for row in table]
    p_j = [sum(row[j] for row in table) / (n_units * m) for j in range(k)]
    p_bar, p_e = sum(p_i) / n_units, sum(p * p for p in p_j)
    return (p_bar - p_e) / (1 - p_e)


def test_cohen_kappa_equals_the_textbook_computation():
    rng = random.Random(7)
    for _ in range(50):
        n = rng.randint(5, 60)
        a = [rng.random() < 0.6 for _ in range(n)]
        b = [x if rng.random() < 0.7 else not x for x in a]
        if len(set(a)) == 1 and len(set(b)) == 1:
            continue
        assert cohen_kappa(a, b) == pytest.approx(_reference_kappa(a, b), abs=1e-9)


def test_cohen_kappa_is_undefined_not_zero_when_both_sides_say_one_thing():
    assert math.isnan(cohen_kappa([True] * 5, [True] * 5))
    assert math.isnan(cohen_kappa([], []))


def test_fleiss_kappa_matches_the_loop_computation_and_the_published_example():
    # Fleiss' kappa example on Wikipedia (10 subjects, 14 raters, 5 categories): kappa = 0.210
    table = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
             [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    assert fleiss_kappa(np.array(table)) == pytest.approx(_reference_fleiss(table), abs=1e-9)
    assert round(fleiss_kappa(np.array(table)), 3) == 0.210
    rng = np.random.default_rng(3)
    for _ in range(20):
        t = rng.multinomial(5, [0.6, 0.4], size=30)
        assert fleiss_kappa(t) == pytest.approx(_reference_fleiss(t.tolist()), abs=1e-9)


def test_krippendorff_alpha_equals_the_krippendorff_package_with_missing_ratings():
    rng = np.random.default_rng(11)
    for _ in range(20):
        raters, units = 4, 40
        truth = rng.random(units) < 0.5
        data = np.where(rng.random((raters, units)) < 0.8, truth, ~truth).astype(float)
        data[rng.random((raters, units)) < 0.25] = np.nan  # missing ratings
        counts = np.stack([(data == 1).sum(axis=0), (data == 0).sum(axis=0)], axis=1)
        ours = krippendorff_alpha_nominal(counts)
        theirs = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
        assert ours == pytest.approx(theirs, abs=1e-9)


def test_ece_and_brier_equal_plain_loops():
    rng = random.Random(5)
    p = [rng.random() for _ in range(500)] + [0.0, 1.0, 0.1, 0.9]
    y = [rng.random() < q for q in p]
    bins: dict[int, list[tuple[float, bool]]] = {}
    for q, label in zip(p, y):
        bins.setdefault(min(int(q * 10), 9), []).append((q, label))
    ece = sum(len(v) / len(p) * abs(sum(l for _, l in v) / len(v) - sum(q for q, _ in v) / len(v))
              for v in bins.values())
    brier = sum((q - l) ** 2 for q, l in zip(p, y)) / len(p)
    assert expected_calibration_error(p, y) == pytest.approx(ece, abs=1e-9)
    assert brier_score(p, y) == pytest.approx(brier, abs=1e-9)


def test_agreement_interval_is_seeded_reproducible_and_resamples_like_bootstrap_ci():
    rng = np.random.default_rng(0)
    units = rng.integers(0, 4, size=(60, 4)).astype(float)
    a = agreement_ci(units, statistic="kappa", n_resamples=300, seed=4)
    b = agreement_ci(units, statistic="kappa", n_resamples=300, seed=4)
    c = agreement_ci(units, statistic="kappa", n_resamples=300, seed=5)
    assert (a.low, a.high) == (b.low, b.high) and (a.low, a.high) != (c.low, c.high)
    assert a.low < a.estimate < a.high
    # the same resamples through the plain (one resample at a time) bootstrap
    from binaryeval_dspy.metrics.binary_agreement import cohen_kappa_from_counts

    plain = bootstrap_ci(lambda idx: cohen_kappa_from_counts(units[idx].sum(axis=0)), 60, n_resamples=300, seed=4)
    assert (plain.estimate, plain.low, plain.high) == pytest.approx((a.estimate, a.low, a.high), abs=1e-12)


def test_panel_rules_count_failures_and_never_turn_them_into_no():
    assert panel_vote(["yes", "yes", "no"]).verdict == "yes"
    tie = panel_vote(["yes", "no", "error"])
    assert (tie.verdict, tie.reason, tie.failed) == ("unparsed", "tie", 1)
    failed = panel_vote(["unparsed", None, "error"])
    assert (failed.verdict, failed.failed, failed.missing) == ("unparsed", 2, 1)
    assert panel_vote(["yes", "yes", "no"], rule="any-no", fatal=True).verdict == "no"
    assert panel_vote(["yes", "yes", "no"], rule="any-no", fatal=False).verdict == "yes"
    assert panel_vote(["yes", "no", "no"], rule="weighted", weights=[3.0, 1.0, 1.0]).verdict == "yes"
    with pytest.raises(BinEvalError):
        panel_vote(["yes"], rule="best-of")


def _records(judge, verdicts, *, p_yes=None, cost=None, question="q1"):
    return [VerdictRecord(item_id=f"i{n}", question_id=question, judge=judge, verdict=v,
                          p_yes=None if p_yes is None else p_yes[n], cost_usd=cost) for n, v in enumerate(verdicts)]


def test_cascade_escalates_on_band_split_and_non_answer_and_prices_against_the_strongest():
    cheap = _records("cheap", ["yes", "no", "unparsed", "yes"], p_yes=[0.9, 0.45, None, 0.2], cost=0.01)
    strong = _records("strong", ["no", "yes", "yes", "no"], cost=1.0)
    rule = CascadeRule((("cheap",), ("strong",)), band=(0.3, 0.7))
    records, counts = simulate_cascade(index_by_pair(cheap + strong), rule)
    assert [r.verdict for r in records] == ["yes", "yes", "yes", "yes"]
    assert counts.escalations == {"P(yes) in band": 1, "no answer": 1}
    assert counts.escalated_share == 0.5
    assert counts.cost_usd == pytest.approx(4 * 0.01 + 2 * 1.0)
    assert counts.strongest_cost_usd == pytest.approx(4.0)
    assert rule.name == "cascade(cheap > strong; band 0.3-0.7)"
    unknown = _records("free", ["yes", "yes", "yes", "yes"])  # no cost recorded: unknown, never 0
    _, counts = simulate_cascade(index_by_pair(unknown + strong), CascadeRule((("free",), ("strong",))))
    assert counts.cost_usd is None and counts.cost_unknown == 4


def test_panel_split_escalates_a_cheap_panel():
    a = _records("a", ["yes", "yes"])
    b = _records("b", ["yes", "no"])
    c = _records("c", ["no", "no"])
    records, counts = simulate_cascade(index_by_pair(a + b + c), CascadeRule((("a", "b"), ("c",))))
    assert [r.verdict for r in records] == ["yes", "no"] and counts.escalations == {"panel split": 1}


def _labelled_world(seed=0, items=40, questions=3):
    rng = random.Random(seed)
    labels, judged = [], []
    accuracy = {"good": 0.9, "fair": 0.75, "coin": 0.5}
    for i, q in itertools.product(range(items), range(questions)):
        truth = rng.random() < 0.5
        labels.append(VerdictRecord(item_id=f"i{i}", question_id=f"q{q}", judge="human",
                                    verdict="yes" if truth else "no"))
        for judge, acc in accuracy.items():
            right = rng.random() < acc
            said = truth if right else not truth
            p = min(max((0.8 if said else 0.2) + rng.uniform(-0.15, 0.15), 0.0), 1.0)
            verdict = "unparsed" if (judge == "fair" and rng.random() < 0.05) else ("yes" if said else "no")
            judged.append(VerdictRecord(item_id=f"i{i}", question_id=f"q{q}", judge=judge, verdict=verdict,
                                        p_yes=p if judge == "good" else None,
                                        cost_usd={"good": 0.1, "fair": 0.01, "coin": 0.001}[judge]))
    return labels, judged


def test_label_agreement_matches_a_direct_count_and_names_every_member():
    labels, judged = _labelled_world()
    result = label_agreement(labels, judged, panels=[PanelSpec("majority", ("good", "fair", "coin"))],
                             cascades=[CascadeRule((("fair",), ("good",)))], n_resamples=50)
    truth = {(r.item_id, r.question_id): r.verdict == "yes" for r in labels}
    fair = [r for r in judged if r.judge == "fair" and r.answered]
    agree = sum(1 for r in fair if (r.verdict == "yes") == truth[(r.item_id, r.question_id)])
    figures = result.judges["fair"]
    assert figures["agree"] == agree and figures["accuracy"] == pytest.approx(agree / len(fair), abs=1e-12)
    assert figures["unparsed"] == 120 - len(fair)
    kappa = _reference_kappa([r.verdict == "yes" for r in fair], [truth[(r.item_id, r.question_id)] for r in fair])
    assert figures["kappa"] == pytest.approx(kappa, abs=1e-9)
    assert figures["kappa_interval"][0] < figures["kappa"] < figures["kappa_interval"][1]
    good = result.judges["good"]["calibration"]
    soft = [r for r in judged if r.judge == "good"]
    assert good["brier"] == pytest.approx(brier_score([r.p_yes for r in soft],
                                                      [truth[(r.item_id, r.question_id)] for r in soft]), abs=1e-9)
    assert "majority(good, fair, coin)" in result.judges
    assert result.judges["majority(good, fair, coin)"]["members"] == ["good", "fair", "coin"]
    assert result.cascades["cascade(fair > good)"]["sweep"] is None  # fair gives no P(yes)
    worst = result.judges["coin"]["questions"]
    assert worst == sorted(worst, key=lambda q: q["accuracy"])


def test_weighted_panel_outvotes_a_coin_and_the_sweep_finds_a_band():
    labels, judged = _labelled_world(seed=2, items=80)
    members = ("good", "coin", "coin2")
    coin2 = [r.model_copy(update={"judge": "coin2", "verdict": ("no" if r.verdict == "yes" else "yes")
                                  if r.item_id.endswith("3") else r.verdict})
             for r in judged if r.judge == "coin"]
    result = label_agreement(labels, judged + coin2, panels=[PanelSpec("majority", members),
                                                             PanelSpec("weighted", members)],
                             cascades=[CascadeRule((("good",), ("fair",)))], n_resamples=20, target_kappa=0.5)
    assert result.judges["weighted(good, coin, coin2)"]["kappa"] > result.judges["majority(good, coin, coin2)"]["kappa"]
    sweep = result.cascades["cascade(good > fair)"]["sweep"]
    assert len(sweep["points"]) == 11 and sweep["points"][-1]["escalated_share"] == 1.0
    assert sweep["best"] is not None and sweep["best"]["kappa"] >= 0.5


def test_several_annotators_give_a_majority_reference_and_their_agreement():
    rows = []
    for i in range(30):
        for a, flip in (("ann-1", False), ("ann-2", i % 5 == 0), ("ann-3", i % 7 == 0)):
            yes = (i % 2 == 0) != flip
            rows.append(VerdictRecord(item_id=f"i{i}", question_id="q", judge=a, verdict="yes" if yes else "no"))
    judged = _records("j", ["yes" if i % 2 == 0 else "no" for i in range(30)])
    judged = [r.model_copy(update={"question_id": "q"}) for r in judged]
    result = label_agreement(rows, judged, n_resamples=10)
    majority_agrees = [sum([True, i % 5 != 0, i % 7 != 0]) >= 2 for i in range(30)]  # i = 0: two annotators flip
    assert sum(majority_agrees) < 30
    assert result.judges["j"]["accuracy"] == pytest.approx(sum(majority_agrees) / 30, abs=1e-12)
    data = np.array([[1.0 if r.verdict == "yes" else 0.0 for r in rows if r.judge == a] for a in ("ann-1", "ann-2", "ann-3")])
    alpha = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    assert result.labels["annotator_agreement"]["krippendorff_alpha"] == pytest.approx(alpha, abs=1e-9)


def test_bad_specs_name_the_setting():
    with pytest.raises(InputError, match="RULE=JUDGE"):
        parse_panel("majority:a,b")
    with pytest.raises(InputError, match="two stages"):
        parse_cascade("a")
    with pytest.raises(InputError, match="LOW,HIGH"):
        parse_band("0.8,0.2")
    labels, judged = _labelled_world(items=3)
    with pytest.raises(InputError, match="no verdicts for judge 'nobody'"):
        label_agreement(labels, judged, panels=[PanelSpec("majority", ("good", "nobody"))])


def test_confusion_cells_order():
    assert confusion_counts([True, True, False, False], [True, False, True, False]).tolist() == [1, 1, 1, 1]


def test_simulated_panel_counts_a_failing_member_and_sums_costs():
    a = _records("a", ["yes", "no", "error"], cost=0.5)
    b = _records("b", ["yes", "unparsed", "no"], cost=0.25)
    c = _records("c", ["no", "no", "no"])  # cost unknown
    records = simulate_panel(index_by_pair(a + b + c), ["a", "b", "c"], rule="majority")
    assert [r.judge for r in records] == ["majority(a, b, c)"] * 3
    assert [r.verdict for r in records] == ["yes", "no", "no"]
    assert records[1].explanation == "0 yes, 2 no, 1 without an answer, 0 not asked"
    assert all(r.cost_usd is None for r in records)  # c's cost is unknown: the panel's is too
    priced = simulate_panel(index_by_pair(a + b), ["a", "b"], rule="majority")
    assert [r.verdict for r in priced] == ["yes", "no", "no"] and priced[0].cost_usd == 0.75

"""Yes-rates and phi matrices of stored verdicts (paper section 5.6)."""

import math

import pytest

from binaryeval_dspy.analysis import analyze_questions, phi_coefficient
from binaryeval_dspy.schemas.item_result import ItemResult
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.scoring import score_verdicts


def test_phi_by_hand():
    assert phi_coefficient([1, 1, 0, 0], [1, 0, 1, 0]) == pytest.approx(0.0)
    # n11=2, n00=2, n10=1, n01=0: (4 - 0) / sqrt(3 * 2 * 2 * 3)
    assert phi_coefficient([1, 1, 0, 0, 1], [1, 1, 0, 0, 0]) == pytest.approx(4 / 6)
    assert phi_coefficient([1, 0, 1], [0, 1, 0]) == pytest.approx(-1.0)
    assert math.isnan(phi_coefficient([1, 1, 1], [1, 0, 1]))  # constant question
    assert phi_coefficient([1, 0, float("nan"), 1], [1, 0, 1, 1]) == pytest.approx(1.0)  # NaN dropped


def _results(qs: QuestionSet, table: list[dict[str, str]]) -> list[ItemResult]:
    out = []
    for i, answers in enumerate(table):
        verdicts = [QuestionVerdict(question_id=q, verdict=v, explanation="x") for q, v in answers.items()]
        out.append(ItemResult(item_id=f"i{i}", output_hash="0", question_set_hash=qs.content_hash,
                              score_card=score_verdicts(verdicts, qs), verdicts=verdicts))
    return out


def test_analysis_of_a_small_run():
    qs = QuestionSet(dimensions=["a", "b"], questions=[
        BinaryQuestion(id="a-01", dimension="a", text="one?"),
        BinaryQuestion(id="a-02", dimension="a", text="two?"),
        BinaryQuestion(id="a-03", dimension="a", text="always yes?"),
        BinaryQuestion(id="b-01", dimension="b", text="only one in b?"),
    ])
    rows = [
        {"a-01": "yes", "a-02": "yes", "a-03": "yes", "b-01": "no"},
        {"a-01": "yes", "a-02": "no", "a-03": "yes", "b-01": "yes"},
        {"a-01": "no", "a-02": "yes", "a-03": "yes", "b-01": "unparsed"},
        {"a-01": "no", "a-02": "no", "a-03": "yes", "b-01": "no"},
    ]
    analysis = analyze_questions(_results(qs, rows), qs)
    rates = analysis.yes_rates.set_index("question_id")
    assert rates.loc["a-01", "yes_rate"] == 0.5 and rates.loc["a-03", "yes_rate"] == 1.0
    assert rates.loc["b-01", "yes_rate"] == pytest.approx(1 / 3) and rates.loc["b-01", "unparsed"] == 1
    dim_a = analysis.dimensions["a"]
    assert dim_a.pairs == 3 and dim_a.undefined_pairs == 2  # a-03 never varies
    assert dim_a.matrix.loc["a-01", "a-02"] == pytest.approx(0.0)
    assert dim_a.mean_off_diagonal == pytest.approx(0.0) and dim_a.share_weak == 1.0
    assert math.isnan(dim_a.matrix.loc["a-03", "a-03"])
    assert analysis.dimensions["b"].pairs == 0 and math.isnan(analysis.dimensions["b"].mean_off_diagonal)
    assert analysis.yes_rate_spread["a"] == pytest.approx(0.5)
    assert analysis.mean_off_diagonal == pytest.approx(0.0)

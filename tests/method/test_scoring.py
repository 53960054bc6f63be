import math

import pytest

from binaryeval_dspy.errors import BinEvalError
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.scoring import affine_scale, score_verdicts


def v(qid, verdict):
    return QuestionVerdict(question_id=qid, verdict=verdict, explanation="x")


def test_affine_scale_follows_the_formula_not_figure_4():
    # paper Figure 4 prints 1.57 for 3/7 on 1-5; S' = S (b - a) + a gives 2.714...
    assert affine_scale(3 / 7, 1, 5) == pytest.approx(1 + 4 * 3 / 7)
    assert affine_scale(0.0, 1, 5) == 1 and affine_scale(1.0, 1, 5) == 5
    assert affine_scale(None, 1, 5) is None


def test_dimension_and_overall_yes_rates(small_question_set):
    card = score_verdicts([v("consistency-01", "yes"), v("consistency-02", "no"), v("fluency-01", "yes")],
                          small_question_set, scale=(1, 5))
    assert card.dimension_scores == {"consistency": 0.5, "fluency": 1.0}
    assert card.overall == pytest.approx(2 / 3)
    assert card.scaled_dimension_scores["consistency"] == pytest.approx(3.0)
    assert card.scaled_overall == pytest.approx(1 + 4 * 2 / 3)
    assert card.counts["consistency"].yes == 1 and card.counts["consistency"].no == 1


def test_unparsed_is_left_out_of_the_denominator_not_counted_as_no(small_question_set):
    card = score_verdicts([v("consistency-01", "yes"), v("consistency-02", "unparsed"), v("fluency-01", "no")],
                          small_question_set)
    assert card.dimension_scores["consistency"] == 1.0  # 1 yes / 1 parsed, not 1/2
    assert card.counts["consistency"].unparsed == 1
    assert card.overall == pytest.approx(0.5)
    assert card.total_counts.unparsed == 1


def test_all_unparsed_dimension_has_no_score(small_question_set):
    card = score_verdicts([v("consistency-01", "yes"), v("consistency-02", "no"), v("fluency-01", "unparsed")],
                          small_question_set, scale=(1, 5))
    assert card.dimension_scores["fluency"] is None
    assert card.scaled_dimension_scores["fluency"] is None
    assert not math.isnan(card.overall)


def test_missing_verdict_counts_as_unparsed(small_question_set):
    card = score_verdicts([v("consistency-01", "yes")], small_question_set)
    assert card.counts["consistency"].unparsed == 1 and card.counts["fluency"].unparsed == 1
    assert card.overall == 1.0


def test_verdict_for_unknown_question_is_an_error(small_question_set):
    with pytest.raises(BinEvalError, match="not in the question set"):
        score_verdicts([v("ghost-01", "yes")], small_question_set)

"""The question analysis of the benchmark report (paper section 5.6, Figure 3).

Yes-rates per binary question and the phi coefficients between the questions of each
dimension (`binaryeval_dspy.analysis.question_analysis`), as two tables and the data of
the heatmap figure; the numbers are recorded in ``metrics["question_analysis"]``.
"""

from __future__ import annotations

from typing import Any

from binaryeval_dspy.analysis.question_analysis import analyze_questions
from binaryeval_dspy.meta_eval.run_scores import RunScores
from binaryeval_dspy.reports.benchmark_figures import phi_figure
from binaryeval_dspy.reports.formatting import fmt
from binaryeval_dspy.render import Table


def question_blocks(scores: RunScores, lm: str, metrics: dict, *, figures: bool = True) -> list[Any]:
    """The question analysis section (paper 5.6): yes-rate per binary question, phi
    redundancy per dimension, and the phi heatmaps (Figure 3) when `figures`.

    Fills ``metrics["question_analysis"]``; a run without BinEval results gets one
    paragraph saying so.
    """
    if scores.question_set is None or not scores.bineval_results:
        return ["No BinEval results in this run."]
    analysis = analyze_questions(scores.bineval_results, scores.question_set)
    rate_rows = [[r.question_id, r.dimension, r.text, fmt(r.yes_rate, 2), str(r.yes), str(r.no), str(r.unparsed)]
                 for r in analysis.yes_rates.itertuples()]
    dim_rows = []
    for dim, phi in analysis.dimensions.items():
        dim_rows.append([dim, str(len(phi.question_ids)), fmt(phi.mean_off_diagonal, 2), fmt(phi.share_weak, 2),
                         f"{phi.undefined_pairs}/{phi.pairs}", fmt(analysis.yes_rate_spread.get(dim), 2)])
    dim_rows.append(["all", str(len(scores.question_set.questions)), fmt(analysis.mean_off_diagonal, 2),
                     fmt(analysis.share_weak, 2), "", ""])
    metrics["question_analysis"] = {
        "mean_off_diagonal_phi": analysis.mean_off_diagonal, "share_abs_phi_below_0_3": analysis.share_weak,
        "dimensions": {d: {"mean_off_diagonal_phi": p.mean_off_diagonal, "share_weak": p.share_weak,
                           "undefined_pairs": p.undefined_pairs, "pairs": p.pairs}
                       for d, p in analysis.dimensions.items()},
        "yes_rates": {r.question_id: r.yes_rate for r in analysis.yes_rates.itertuples()},
    }
    blocks: list[Any] = [
        Table(caption=f"Yes-rate per binary question ({len(scores.bineval_results)} items) - LM: {lm}",
                    header=["id", "dimension", "question", "yes-rate", "yes", "no", "unparsed or error"], rows=rate_rows),
        Table(caption=f"Question redundancy per dimension (phi coefficient) - LM: {lm}",
                    header=["dimension", "questions", "mean off-diagonal phi", "share |phi| < 0.3",
                            "undefined pairs", "yes-rate spread"], rows=dim_rows,
                    note="A pair is undefined when one question got the same answer on every item; undefined "
                         "pairs are left out of the means (the paper reports 0.38 mean phi on SummEval).")]
    if figures and any(p.question_ids for p in analysis.dimensions.values()):
        blocks.append(phi_figure(analysis, lm))
    return blocks

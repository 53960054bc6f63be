"""BinEval as one module of a larger DSPy program: summarize an article, then judge the summary.

Run:  python examples/bineval_in_a_pipeline.py [--lm openai/gpt-4o-mini]

With the default embedded model (SmolLM2-135M) this shows the wiring, not good
summaries or sound judgments.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import dspy

from binaryeval_dspy import BinEval, QuestionSet, make_lm

HERE = Path(__file__).resolve().parent


class SummarizeThenJudge(dspy.Module):
    """Write a summary with one predictor and score it with BinEval's binary questions."""

    def __init__(self, question_set: QuestionSet) -> None:
        super().__init__()
        self.summarize = dspy.Predict("article -> summary")
        self.judge = BinEval(question_set, scale=(1, 5))

    def forward(self, article: str) -> dspy.Prediction:
        summary = self.summarize(article=article).summary
        verdict = self.judge(input=article, output=summary)
        return dspy.Prediction(summary=summary, score=verdict.score, score_card=verdict.score_card,
                               verdicts=verdict.verdicts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lm", default="local", help="'local' or a LiteLLM model id")
    args = parser.parse_args()
    handle = make_lm(args.lm)
    dspy.configure(lm=handle.lm, adapter=handle.adapter or dspy.ChatAdapter())
    questions = QuestionSet.load(HERE / "summeval" / "questions.json")
    article = json.loads((HERE / "summeval" / "items.jsonl").read_text(encoding="utf-8").splitlines()[0])["source"]
    pred = SummarizeThenJudge(questions)(article=article)
    print(f"LM: {handle.name}\nsummary: {pred.summary}\n")
    for dim, score in pred.score_card.scaled_dimension_scores.items():
        print(f"{dim:12s} {score if score is None else round(score, 2)}")
    for v in pred.verdicts:
        if v.verdict != "yes":
            print(f"  {v.question_id}: {v.verdict} - {v.explanation}")


if __name__ == "__main__":
    main()

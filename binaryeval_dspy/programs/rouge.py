"""ROUGE-L against a reference: the lexical baseline (Lin, 2004), via `rouge-score`.

No LM is involved; it is a `dspy.Module` so that it runs through the same benchmark
loop as the LM judges. ROUGE-L scores one number per output, used for every dimension.
"""

from __future__ import annotations

import dspy

from binaryeval_dspy.extras import require


class RougeL(dspy.Module):
    """ROUGE-L F-measure of an output against its reference, in [0, 1].

    Args:
        use_stemmer: apply the Porter stemmer before matching (as the ROUGE-1.5.5
            ``-m`` option and most summarization papers do).

    ``forward(output, reference)`` returns ``dspy.Prediction(score, precision, recall)``;
    ``score`` is None (with ``error``) when the reference is empty.

    Raises:
        MissingExtraError: `rouge-score` is not installed (the ``bench`` extra).
    """

    def __init__(self, *, use_stemmer: bool = True) -> None:
        super().__init__()
        rouge_scorer = require("rouge_score.rouge_scorer", "bench", "The ROUGE-L baseline")
        self.use_stemmer = use_stemmer
        self._scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=use_stemmer)

    def forward(self, output: str, reference: str) -> dspy.Prediction:
        """Score `output` against `reference` (both plain text)."""
        if not reference or not reference.strip():
            return dspy.Prediction(score=None, precision=None, recall=None, error="no reference text")
        result = self._scorer.score(reference, output)["rougeL"]
        return dspy.Prediction(score=float(result.fmeasure), precision=float(result.precision),
                               recall=float(result.recall), error=None)

    async def aforward(self, output: str, reference: str) -> dspy.Prediction:
        """`forward` for async programs: the same scores (no LM call, computed at once)."""
        return self.forward(output, reference)

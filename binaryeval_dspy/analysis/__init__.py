"""Analyses of stored runs: question-level yes-rates and redundancy (paper section 5.6)."""

from binaryeval_dspy.analysis.question_analysis import (
    DimensionPhi,
    QuestionAnalysis,
    analyze_questions,
    phi_coefficient,
    verdict_matrix,
)

__all__ = ["DimensionPhi", "QuestionAnalysis", "analyze_questions", "phi_coefficient", "verdict_matrix"]

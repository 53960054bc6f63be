"""What each LM step takes and returns: one DSPy Signature per step, docstring = instruction."""

from binaryeval_dspy.signatures.binary_judgment import JudgeBinaryQuestion, JudgeBinaryVerdict
from binaryeval_dspy.signatures.decomposition import DecomposeRequirement, DraftQuestion
from binaryeval_dspy.signatures.dimension_assignment import AssignDimension
from binaryeval_dspy.signatures.dimension_inference import InferDimensions
from binaryeval_dspy.signatures.dimension_question import (
    AnswerDimensionQuestion,
    AnswerDimensionQuestionText,
)
from binaryeval_dspy.signatures.holistic_rating import (
    RateOnCriterion,
    rating_signature,
    rating_text_signature,
)
from binaryeval_dspy.signatures.lesson_dedup import DedupLesson
from binaryeval_dspy.signatures.lesson_extraction import ExtractLessons, QuestionEvidence
from binaryeval_dspy.signatures.refutation import AnswerRefutationQuestion, DraftRefutationQuestions
from binaryeval_dspy.signatures.requirement_summary import SummarizeRequirements
from binaryeval_dspy.signatures.response_generation import RespondToPrompt
from binaryeval_dspy.signatures.substring_rewrite import RewriteSubstring
from binaryeval_dspy.signatures.verdict_pick import EvidenceLine, LabelOption, PickVerdictLabel

__all__ = [
    "AnswerDimensionQuestion",
    "AnswerDimensionQuestionText",
    "AnswerRefutationQuestion",
    "AssignDimension",
    "DecomposeRequirement",
    "DedupLesson",
    "DraftQuestion",
    "DraftRefutationQuestions",
    "EvidenceLine",
    "ExtractLessons",
    "InferDimensions",
    "JudgeBinaryQuestion",
    "JudgeBinaryVerdict",
    "LabelOption",
    "PickVerdictLabel",
    "QuestionEvidence",
    "RateOnCriterion",
    "RespondToPrompt",
    "RewriteSubstring",
    "SummarizeRequirements",
    "rating_signature",
    "rating_text_signature",
]

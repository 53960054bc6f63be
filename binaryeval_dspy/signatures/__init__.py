"""What each LM step takes and returns: one DSPy Signature per step, docstring = instruction."""

from binaryeval_dspy.signatures.binary_judgment import JudgeBinaryQuestion
from binaryeval_dspy.signatures.decomposition import DecomposeRequirement, DraftQuestion
from binaryeval_dspy.signatures.dimension_inference import InferDimensions
from binaryeval_dspy.signatures.dimension_question import AnswerDimensionQuestion
from binaryeval_dspy.signatures.holistic_rating import RateOnCriterion, rating_signature
from binaryeval_dspy.signatures.requirement_summary import SummarizeRequirements

__all__ = [
    "AnswerDimensionQuestion",
    "DecomposeRequirement",
    "DraftQuestion",
    "InferDimensions",
    "JudgeBinaryQuestion",
    "RateOnCriterion",
    "SummarizeRequirements",
    "rating_signature",
]

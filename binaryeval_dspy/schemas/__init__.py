"""Pydantic models for everything that flows through binaryeval-dspy and is saved to disk."""

from binaryeval_dspy.schemas.item_result import ItemResult, Usage, text_hash
from binaryeval_dspy.schemas.question_set import (
    QUESTION_SET_SCHEMA_VERSION,
    BinaryQuestion,
    QuestionSet,
    Requirement,
)
from binaryeval_dspy.schemas.rubric import DimensionRubric, Rubric
from binaryeval_dspy.schemas.run_manifest import RunManifest, RunSession
from binaryeval_dspy.schemas.score_card import ScoreCard, VerdictCounts
from binaryeval_dspy.schemas.verdict import QuestionVerdict, VerdictValue

__all__ = [
    "QUESTION_SET_SCHEMA_VERSION",
    "BinaryQuestion",
    "DimensionRubric",
    "ItemResult",
    "QuestionSet",
    "QuestionVerdict",
    "Requirement",
    "Rubric",
    "RunManifest",
    "RunSession",
    "ScoreCard",
    "Usage",
    "VerdictCounts",
    "VerdictValue",
    "text_hash",
]

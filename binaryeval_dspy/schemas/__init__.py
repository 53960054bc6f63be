"""Pydantic models for everything that flows through binaryeval-dspy and is saved to disk."""

from binaryeval_dspy.schemas.check_spec import CheckSpec
from binaryeval_dspy.schemas.item_result import (
    ITEM_STATUSES,
    ContextOverflow,
    ItemResult,
    Usage,
    text_hash,
)
from binaryeval_dspy.schemas.named_verdict import (
    FatalRuleRecord,
    LabelAttempt,
    NamedVerdict,
    PressureTestRecord,
    RefutationAnswer,
)
from binaryeval_dspy.schemas.optimization_history import (
    DedupDecision,
    IterationRecord,
    OptimizationHistory,
    RewriteRecord,
)
from binaryeval_dspy.schemas.question_set import (
    QUESTION_SET_SCHEMA_VERSION,
    BinaryQuestion,
    QuestionSet,
    Requirement,
)
from binaryeval_dspy.schemas.rubric import DimensionRubric, Rubric
from binaryeval_dspy.schemas.run_manifest import RunManifest, RunSession
from binaryeval_dspy.schemas.score_card import ScoreCard, VerdictCounts
from binaryeval_dspy.schemas.verdict import QuestionVerdict, VerdictSource, VerdictValue
from binaryeval_dspy.schemas.verdict_output import (
    VERDICT_OUTPUT_SCHEMA_VERSION,
    EvidenceEntry,
    ItemVerdictOutput,
    VerdictOutput,
    verdict_output_json_schema,
    write_verdict_output_schema,
)
from binaryeval_dspy.schemas.verdict_policy import VerdictLabel, VerdictPolicy
from binaryeval_dspy.schemas.verdict_record import VERDICT_COLUMNS, VerdictRecord

__all__ = [
    "ITEM_STATUSES",
    "QUESTION_SET_SCHEMA_VERSION",
    "VERDICT_COLUMNS",
    "VERDICT_OUTPUT_SCHEMA_VERSION",
    "BinaryQuestion",
    "CheckSpec",
    "ContextOverflow",
    "DedupDecision",
    "DimensionRubric",
    "EvidenceEntry",
    "FatalRuleRecord",
    "ItemResult",
    "ItemVerdictOutput",
    "IterationRecord",
    "LabelAttempt",
    "NamedVerdict",
    "OptimizationHistory",
    "PressureTestRecord",
    "QuestionSet",
    "QuestionVerdict",
    "RefutationAnswer",
    "Requirement",
    "RewriteRecord",
    "Rubric",
    "RunManifest",
    "RunSession",
    "ScoreCard",
    "Usage",
    "VerdictCounts",
    "VerdictLabel",
    "VerdictOutput",
    "VerdictPolicy",
    "VerdictRecord",
    "VerdictSource",
    "VerdictValue",
    "text_hash",
    "verdict_output_json_schema",
    "write_verdict_output_schema",
]

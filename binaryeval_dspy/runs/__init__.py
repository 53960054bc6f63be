"""Run directories (manifest + append-only results), the resumable evaluation loop, and in-memory item runs."""

from binaryeval_dspy.cost.usage_meter import UsageMeter, measure_usage
from binaryeval_dspy.lm.usage import usage_from_tracker
from binaryeval_dspy.runs.evaluation import evaluate_items, judge_item, run_resumable
from binaryeval_dspy.runs.evaluation_outcome import EvaluationOutcome
from binaryeval_dspy.runs.item_rows import empty_item_result, failed_item_result
from binaryeval_dspy.runs.item_runs import (
    Generation,
    generate_outputs,
    item_id,
    judge_item_results,
    judge_items,
    judge_items_by_id,
    run_items,
)
from binaryeval_dspy.runs.rejudge import (
    RejudgeOutcome,
    RejudgePlan,
    frozen_question_set,
    plan_rejudge,
    rejudge_items,
    rejudge_settings,
)
from binaryeval_dspy.runs.run_directory import RunDirectory

__all__ = [
    "EvaluationOutcome",
    "Generation",
    "RejudgeOutcome",
    "RejudgePlan",
    "RunDirectory",
    "UsageMeter",
    "empty_item_result",
    "evaluate_items",
    "failed_item_result",
    "frozen_question_set",
    "generate_outputs",
    "item_id",
    "judge_item",
    "judge_item_results",
    "judge_items",
    "judge_items_by_id",
    "measure_usage",
    "plan_rejudge",
    "rejudge_items",
    "rejudge_settings",
    "run_items",
    "run_resumable",
    "usage_from_tracker",
]

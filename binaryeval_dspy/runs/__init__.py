"""Run directories (manifest + append-only results) and the resumable evaluation loop."""

from binaryeval_dspy.runs.evaluation import EvaluationOutcome, evaluate_items, judge_item, usage_from_tracker
from binaryeval_dspy.runs.run_directory import RunDirectory

__all__ = ["EvaluationOutcome", "RunDirectory", "evaluate_items", "judge_item", "usage_from_tracker"]

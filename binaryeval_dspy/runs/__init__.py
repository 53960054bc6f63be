"""Run directories (manifest + append-only results) and the resumable evaluation loop."""

from binaryeval_dspy.runs.evaluation import EvaluationOutcome, evaluate_items, judge_item, usage_from_tracker
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.runs.usage_meter import UsageMeter, measure_usage

__all__ = ["EvaluationOutcome", "RunDirectory", "evaluate_items", "judge_item", "usage_from_tracker", "UsageMeter", "measure_usage"]

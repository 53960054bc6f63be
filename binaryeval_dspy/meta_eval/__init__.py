"""Meta-evaluation: BinEval and baselines on human-rated benchmarks, with the same LM."""

from binaryeval_dspy.meta_eval.agreement import load_agreement_scores
from binaryeval_dspy.meta_eval.benchmark_files import (
    LM_METHODS,
    METHOD_TITLES,
    METHODS,
    BenchmarkRun,
    BenchmarkRunConfig,
)
from binaryeval_dspy.meta_eval.benchmark_run import prepare_run, run_benchmark
from binaryeval_dspy.meta_eval.benchmark_spec import BENCHMARKS, BenchmarkSpec, get_benchmark
from binaryeval_dspy.meta_eval.method_run import (
    MethodItemResult,
    MethodRunDirectory,
    run_method,
    score_item,
)
from binaryeval_dspy.meta_eval.predictions import PredictionSet, load_predictions
from binaryeval_dspy.meta_eval.run_scores import MethodCost, RunScores, load_run_scores
from binaryeval_dspy.meta_eval.task_files import TaskFiles, default_tasks_dir, lm_tag

__all__ = [
    "BENCHMARKS",
    "LM_METHODS",
    "METHODS",
    "METHOD_TITLES",
    "BenchmarkRun",
    "BenchmarkRunConfig",
    "BenchmarkSpec",
    "MethodCost",
    "MethodItemResult",
    "MethodRunDirectory",
    "PredictionSet",
    "RunScores",
    "TaskFiles",
    "default_tasks_dir",
    "get_benchmark",
    "lm_tag",
    "load_agreement_scores",
    "load_predictions",
    "load_run_scores",
    "prepare_run",
    "run_benchmark",
    "run_method",
    "score_item",
]

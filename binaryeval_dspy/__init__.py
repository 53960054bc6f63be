"""binaryeval-dspy: judge LLM outputs by asking many atomic yes/no questions (BinEval).

Public API (everything else is an implementation detail):

* schemas: `QuestionSet`, `BinaryQuestion`, `Requirement`, `QuestionVerdict`, `ScoreCard`
* programs: `QuestionGenerator`, `BinEval`
* scoring: `score_verdicts`, `affine_scale`
* LMs: `make_lm` (LiteLLM ids, base URLs, the embedded llama.cpp model)
* data: `load_items`, `load_jsonl`, `load_csv`
* runs: `RunDirectory`, `evaluate_items`
* verdict mode: `VerdictJudge`, `VerdictPolicy`, `VerdictLabel`, `NamedVerdict`,
  `VerdictOutput` (the downstream JSON schema), `register_check`, `rejudge_items`
* self-improvement: `BinEvalOptimizer`, `PromptUpdater`, `BinEvalMetric`, `OptimizationHistory`
"""

import os as _os

# LiteLLM (and DSPy through it) otherwise downloads its model table from the network at
# import, which fails or stalls offline; the table bundled with the installed LiteLLM is
# used instead (set the variable to "False" before importing to get the online one).
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from binaryeval_dspy.data import load_csv, load_items, load_jsonl
from binaryeval_dspy.errors import (
    BinEvalError,
    InputError,
    LMConfigError,
    QuestionSetError,
    RunStateError,
)
from binaryeval_dspy.lm import LMHandle, make_lm
from binaryeval_dspy.optimizers import BinEvalOptimizer
from binaryeval_dspy.programs import BinEval, BinEvalMetric, PromptUpdater, QuestionGenerator
from binaryeval_dspy.runs import RunDirectory, evaluate_items
from binaryeval_dspy.schemas import (
    BinaryQuestion,
    ItemResult,
    OptimizationHistory,
    QuestionSet,
    QuestionVerdict,
    Requirement,
    ScoreCard,
)
from binaryeval_dspy.scoring import affine_scale, score_verdicts

__version__ = "0.1.0"

__all__ = [
    "BinEval",
    "BinEvalError",
    "BinEvalMetric",
    "BinEvalOptimizer",
    "BinaryQuestion",
    "InputError",
    "ItemResult",
    "LMConfigError",
    "LMHandle",
    "OptimizationHistory",
    "PromptUpdater",
    "QuestionGenerator",
    "QuestionSet",
    "QuestionSetError",
    "QuestionVerdict",
    "Requirement",
    "RunDirectory",
    "RunStateError",
    "ScoreCard",
    "affine_scale",
    "evaluate_items",
    "load_csv",
    "load_items",
    "load_jsonl",
    "make_lm",
    "score_verdicts",
]

# IFBench prompts and code checkers (strict / loose accuracy).
from binaryeval_dspy.data import load_ifbench
from binaryeval_dspy.ifbench import IFBenchResult, check_loose, check_strict, ifbench_accuracy

__all__ += ["IFBenchResult", "check_loose", "check_strict", "ifbench_accuracy", "load_ifbench"]

# Verdict mode (issue 5): code-owned checks, named verdicts, fatal questions, pressure tests.
from binaryeval_dspy.checks import CheckResult, register_check
from binaryeval_dspy.programs import VerdictJudge
from binaryeval_dspy.runs import rejudge_items
from binaryeval_dspy.schemas import NamedVerdict, VerdictLabel, VerdictOutput, VerdictPolicy

__all__ += [
    "CheckResult",
    "NamedVerdict",
    "VerdictJudge",
    "VerdictLabel",
    "VerdictOutput",
    "VerdictPolicy",
    "register_check",
    "rejudge_items",
]

# Meta-evaluation (issue 3): benchmark loaders, baselines, correlation metrics.
from binaryeval_dspy.data import (
    load_hub_items,
    load_qags,
    load_scored_items,
    load_summeval,
    load_topical_chat,
)
from binaryeval_dspy.metrics import (
    kendall,
    pearson,
    spearman,
    summary_level_correlation,
    system_level_correlation,
    turn_level_correlation,
)
from binaryeval_dspy.programs import GEvalJudge, RougeL, UniEvalJudge

__all__ += [
    "GEvalJudge",
    "RougeL",
    "UniEvalJudge",
    "kendall",
    "load_hub_items",
    "load_qags",
    "load_scored_items",
    "load_summeval",
    "load_topical_chat",
    "pearson",
    "spearman",
    "summary_level_correlation",
    "system_level_correlation",
    "turn_level_correlation",
]

"""binaryeval-dspy: judge LLM outputs by asking many atomic yes/no questions (BinEval).

Public API, by concept (everything else is an implementation detail):

* judging: `BinEval`, `QuestionVerdict`, `ScoreCard`, `ItemResult`, `score_verdicts`,
  `affine_scale`, `evaluate_file` (an items file into a run directory, as the CLI), `RunDirectory`,
  `evaluate_items`, `rejudge_items`, and code-owned
  checks (`register_check`, `CheckResult`)
* questions: `QuestionGenerator`, `QuestionSet`, `BinaryQuestion`, `Requirement`
* verdict mode: `VerdictJudge`, `VerdictPolicy`, `VerdictLabel`, `NamedVerdict`,
  `VerdictOutput` (the downstream JSON schema)
* optimization: `BinEvalOptimizer`, `PromptUpdater`, `BinEvalMetric` (BinEval as a DSPy metric),
  `HumanAgreementMetric` / `SourceAgreementMetric` (compiling an evaluator against human
  labels or a reference evaluator with DSPy's optimizers), `OptimizationHistory`
* meta-evaluation: the baselines (`GEvalJudge`, `UniEvalJudge`, `RougeL`), correlations
  (`pearson`, `spearman`, `kendall`, summary / system / turn level), IFBench's code
  checkers (`check_strict`, `check_loose`, `ifbench_accuracy`, `IFBenchResult`)
* data: `load_items`, `load_jsonl`, `load_csv`, `load_scored_items`, `load_hub_items`
  and the benchmark loaders (`load_summeval`, `load_topical_chat`, `load_qags`, `load_ifbench`)
* LM: `make_lm`, `LMHandle` (LiteLLM ids, base URLs, the embedded llama.cpp model)
* errors: `BinEvalError` and its subclasses

Names are imported on first use (PEP 562), so ``import binaryeval_dspy`` costs almost
nothing and a feature's dependencies load only when that feature is used.
`__all__` lists the names in the groups above.
"""

from __future__ import annotations

import os as _os

# LiteLLM (and DSPy through it) otherwise downloads its model table from the network at
# import, which fails or stalls offline; the table bundled with the installed LiteLLM is
# used instead (set the variable to "False" before importing to get the online one).
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from typing import TYPE_CHECKING

import binaryeval_dspy._lazy as _lazy_module

__version__ = "0.1.0"

__all__ = [  # noqa: RUF022 - grouped by concept, not sorted
    # judging: the evaluator, its verdicts and scores, run directories, code-owned checks
    "BinEval",
    "QuestionVerdict",
    "ScoreCard",
    "ItemResult",
    "score_verdicts",
    "affine_scale",
    "RunDirectory",
    "RunSettings",
    "evaluate_file",
    "evaluate_items",
    "rejudge_items",
    "register_check",
    "CheckResult",
    # questions: generating and storing question sets
    "QuestionGenerator",
    "QuestionSet",
    "BinaryQuestion",
    "Requirement",
    # verdict mode: one named verdict per item
    "VerdictJudge",
    "VerdictPolicy",
    "VerdictLabel",
    "NamedVerdict",
    "VerdictOutput",
    # optimization: the prompt-update loop and BinEval as a DSPy metric
    "BinEvalOptimizer",
    "PromptUpdater",
    "BinEvalMetric",
    "HumanAgreementMetric",
    "SourceAgreementMetric",
    "OptimizationHistory",
    # meta-evaluation: baselines, correlations with human scores, IFBench's code checkers
    "GEvalJudge",
    "UniEvalJudge",
    "RougeL",
    "pearson",
    "spearman",
    "kendall",
    "summary_level_correlation",
    "system_level_correlation",
    "turn_level_correlation",
    "IFBenchResult",
    "check_strict",
    "check_loose",
    "ifbench_accuracy",
    # trust: per-question verdicts files, agreement with labels, calibration, panels and cascades
    "VerdictRecord",
    "read_verdicts",
    "write_verdicts",
    "run_verdict_records",
    "label_agreement",
    "cohen_kappa",
    "fleiss_kappa",
    "krippendorff_alpha_nominal",
    "expected_calibration_error",
    "brier_score",
    "panel_vote",
    "CascadeRule",
    "simulate_panel",
    "simulate_cascade",
    # data: item and benchmark loaders
    "load_items",
    "load_jsonl",
    "load_csv",
    "load_scored_items",
    "load_hub_items",
    "load_summeval",
    "load_topical_chat",
    "load_qags",
    "load_ifbench",
    # LM: the factory for LiteLLM ids, base URLs and the embedded model
    "make_lm",
    "LMHandle",
    # errors
    "BinEvalError",
    "InputError",
    "QuestionSetError",
    "LMConfigError",
    "RunStateError",
    "MissingExtraError",
]

# Where each name of `__all__` is imported from on first use (the same groups).
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(["BinEval", "QuestionGenerator", "VerdictJudge", "PromptUpdater", "BinEvalMetric",
                     "GEvalJudge", "UniEvalJudge", "RougeL"], "binaryeval_dspy.programs"),
    **dict.fromkeys(["QuestionVerdict", "ScoreCard", "ItemResult", "QuestionSet", "BinaryQuestion",
                     "Requirement", "VerdictPolicy", "VerdictLabel", "NamedVerdict", "VerdictOutput",
                     "OptimizationHistory"], "binaryeval_dspy.schemas"),
    **dict.fromkeys(["score_verdicts", "affine_scale"], "binaryeval_dspy.scoring"),
    **dict.fromkeys(["RunDirectory", "evaluate_items", "rejudge_items"], "binaryeval_dspy.runs"),
    "evaluate_file": "binaryeval_dspy.runs.file_run",
    "RunSettings": "binaryeval_dspy.settings",
    **dict.fromkeys(["register_check", "CheckResult"], "binaryeval_dspy.checks"),
    **dict.fromkeys(["BinEvalOptimizer"], "binaryeval_dspy.optimizers"),
    **dict.fromkeys(["HumanAgreementMetric", "SourceAgreementMetric"], "binaryeval_dspy.comparison"),
    **dict.fromkeys(["pearson", "spearman", "kendall", "summary_level_correlation",
                     "system_level_correlation", "turn_level_correlation"], "binaryeval_dspy.metrics"),
    **dict.fromkeys(["IFBenchResult", "check_strict", "check_loose", "ifbench_accuracy"],
                    "binaryeval_dspy.ifbench"),
    "VerdictRecord": "binaryeval_dspy.schemas",
    **dict.fromkeys(["read_verdicts", "write_verdicts"], "binaryeval_dspy.data"),
    "run_verdict_records": "binaryeval_dspy.runs.verdicts_export",
    "label_agreement": "binaryeval_dspy.meta_eval.label_agreement",
    **dict.fromkeys(["cohen_kappa", "fleiss_kappa", "krippendorff_alpha_nominal", "expected_calibration_error",
                     "brier_score"], "binaryeval_dspy.metrics"),
    **dict.fromkeys(["panel_vote", "CascadeRule", "simulate_panel", "simulate_cascade"], "binaryeval_dspy.panels"),
    **dict.fromkeys(["load_items", "load_jsonl", "load_csv", "load_scored_items", "load_hub_items",
                     "load_summeval", "load_topical_chat", "load_qags", "load_ifbench"], "binaryeval_dspy.data"),
    **dict.fromkeys(["make_lm", "LMHandle"], "binaryeval_dspy.lm"),
    **dict.fromkeys(["BinEvalError", "InputError", "QuestionSetError", "LMConfigError", "RunStateError",
                     "MissingExtraError"], "binaryeval_dspy.errors"),
}


__getattr__, __dir__ = _lazy_module.lazy_exports(__name__, _EXPORTS, submodules=True)


if TYPE_CHECKING:  # what type checkers and IDEs see; at run time `__getattr__` imports these
    from binaryeval_dspy.checks import CheckResult, register_check
    from binaryeval_dspy.comparison import HumanAgreementMetric, SourceAgreementMetric
    from binaryeval_dspy.data import (
        load_csv,
        load_hub_items,
        load_ifbench,
        load_items,
        load_jsonl,
        load_qags,
        load_scored_items,
        load_summeval,
        load_topical_chat,
        read_verdicts,
        write_verdicts,
    )
    from binaryeval_dspy.errors import (
        BinEvalError,
        InputError,
        LMConfigError,
        MissingExtraError,
        QuestionSetError,
        RunStateError,
    )
    from binaryeval_dspy.ifbench import IFBenchResult, check_loose, check_strict, ifbench_accuracy
    from binaryeval_dspy.lm import LMHandle, make_lm
    from binaryeval_dspy.meta_eval.label_agreement import label_agreement
    from binaryeval_dspy.metrics import (
        brier_score,
        cohen_kappa,
        expected_calibration_error,
        fleiss_kappa,
        kendall,
        krippendorff_alpha_nominal,
        pearson,
        spearman,
        summary_level_correlation,
        system_level_correlation,
        turn_level_correlation,
    )
    from binaryeval_dspy.optimizers import BinEvalOptimizer
    from binaryeval_dspy.panels import CascadeRule, panel_vote, simulate_cascade, simulate_panel
    from binaryeval_dspy.programs import (
        BinEval,
        BinEvalMetric,
        GEvalJudge,
        PromptUpdater,
        QuestionGenerator,
        RougeL,
        UniEvalJudge,
        VerdictJudge,
    )
    from binaryeval_dspy.runs import RunDirectory, evaluate_items, rejudge_items
    from binaryeval_dspy.runs.file_run import evaluate_file
    from binaryeval_dspy.runs.verdicts_export import run_verdict_records
    from binaryeval_dspy.schemas import (
        BinaryQuestion,
        ItemResult,
        NamedVerdict,
        OptimizationHistory,
        QuestionSet,
        QuestionVerdict,
        Requirement,
        ScoreCard,
        VerdictLabel,
        VerdictOutput,
        VerdictPolicy,
        VerdictRecord,
    )
    from binaryeval_dspy.scoring import affine_scale, score_verdicts
    from binaryeval_dspy.settings import RunSettings

"""DSPy Modules: question generation, BinEval, baselines, verdict mode, and the prompt-update parts.

Names are imported from their modules on first use (PEP 562): using BinEval does not
load the baselines (G-Eval, UniEval, ROUGE-L) or the prompt-update parts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from binaryeval_dspy._lazy import lazy_exports

# name -> the module that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(["BinEval"], "binaryeval_dspy.programs.bineval"),
    **dict.fromkeys(["BinEvalMetric", "JudgedOutput"], "binaryeval_dspy.programs.bineval_metric"),
    **dict.fromkeys(["GEvalJudge"], "binaryeval_dspy.programs.geval"),
    **dict.fromkeys(["LabelPicker"], "binaryeval_dspy.programs.label_picker"),
    **dict.fromkeys(["LessonMemory"], "binaryeval_dspy.programs.lesson_memory"),
    **dict.fromkeys(["ItemFindings", "NoteTaker"], "binaryeval_dspy.programs.note_taker"),
    **dict.fromkeys(["PressureTest"], "binaryeval_dspy.programs.pressure_test"),
    **dict.fromkeys(["PromptUpdater", "prompt_diff"], "binaryeval_dspy.programs.prompt_updater"),
    **dict.fromkeys(["QuestionGenerator"], "binaryeval_dspy.programs.question_generator"),
    **dict.fromkeys(["QuestionSetState"], "binaryeval_dspy.programs.question_set_state"),
    **dict.fromkeys(["RougeL"], "binaryeval_dspy.programs.rouge"),
    **dict.fromkeys(["UniEvalJudge"], "binaryeval_dspy.programs.unieval"),
    **dict.fromkeys(["VerdictJudge"], "binaryeval_dspy.programs.verdict_judge"),
}

__all__ = [
    "BinEval",
    "BinEvalMetric",
    "GEvalJudge",
    "ItemFindings",
    "JudgedOutput",
    "LabelPicker",
    "LessonMemory",
    "NoteTaker",
    "PressureTest",
    "PromptUpdater",
    "QuestionGenerator",
    "QuestionSetState",
    "RougeL",
    "UniEvalJudge",
    "VerdictJudge",
    "prompt_diff",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time `__getattr__` imports these
    from binaryeval_dspy.programs.bineval import BinEval
    from binaryeval_dspy.programs.bineval_metric import BinEvalMetric, JudgedOutput
    from binaryeval_dspy.programs.geval import GEvalJudge
    from binaryeval_dspy.programs.label_picker import LabelPicker
    from binaryeval_dspy.programs.lesson_memory import LessonMemory
    from binaryeval_dspy.programs.note_taker import ItemFindings, NoteTaker
    from binaryeval_dspy.programs.pressure_test import PressureTest
    from binaryeval_dspy.programs.prompt_updater import PromptUpdater, prompt_diff
    from binaryeval_dspy.programs.question_generator import QuestionGenerator
    from binaryeval_dspy.programs.question_set_state import QuestionSetState
    from binaryeval_dspy.programs.rouge import RougeL
    from binaryeval_dspy.programs.unieval import UniEvalJudge
    from binaryeval_dspy.programs.verdict_judge import VerdictJudge

"""DSPy Modules: question generation, BinEval, baselines, verdict mode, and the prompt-update parts."""

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

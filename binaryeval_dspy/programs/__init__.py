"""DSPy Modules: question generation and BinEval (baselines and PromptUpdater join later)."""

from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.programs.question_generator import QuestionGenerator
from binaryeval_dspy.programs.question_set_state import QuestionSetState
from binaryeval_dspy.programs.bineval_metric import BinEvalMetric, JudgedOutput
from binaryeval_dspy.programs.lesson_memory import LessonMemory
from binaryeval_dspy.programs.note_taker import ItemFindings, NoteTaker
from binaryeval_dspy.programs.prompt_updater import PromptUpdater, prompt_diff

__all__ = [
    "BinEval",
    "QuestionGenerator",
    "QuestionSetState",
    "BinEvalMetric",
    "ItemFindings",
    "JudgedOutput",
    "LessonMemory",
    "NoteTaker",
    "PromptUpdater",
    "prompt_diff",
]

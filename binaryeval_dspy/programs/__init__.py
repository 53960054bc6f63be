"""DSPy Modules: question generation and BinEval (baselines and PromptUpdater join later)."""

from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.programs.label_picker import LabelPicker
from binaryeval_dspy.programs.pressure_test import PressureTest
from binaryeval_dspy.programs.question_generator import QuestionGenerator
from binaryeval_dspy.programs.question_set_state import QuestionSetState
from binaryeval_dspy.programs.verdict_judge import VerdictJudge

__all__ = ["BinEval", "LabelPicker", "PressureTest", "QuestionGenerator", "QuestionSetState", "VerdictJudge"]

"""DSPy Modules: question generation and BinEval (baselines and PromptUpdater join later)."""

from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.programs.question_generator import QuestionGenerator
from binaryeval_dspy.programs.question_set_state import QuestionSetState

__all__ = ["BinEval", "QuestionGenerator", "QuestionSetState"]

"""DSPy Modules: question generation and BinEval (baselines and PromptUpdater join later)."""

from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.programs.geval import GEvalJudge
from binaryeval_dspy.programs.question_generator import QuestionGenerator
from binaryeval_dspy.programs.question_set_state import QuestionSetState
from binaryeval_dspy.programs.rouge import RougeL
from binaryeval_dspy.programs.unieval import UniEvalJudge

__all__ = ["BinEval", "GEvalJudge", "QuestionGenerator", "QuestionSetState", "RougeL", "UniEvalJudge"]

"""The disagreement-driven prompt-update teleprompter (paper sections 3.3-3.4, Algorithm 1)."""

from binaryeval_dspy.optimizers.bineval_optimizer.cross_model import (
    SourceVerdicts,
    load_source_verdicts,
)
from binaryeval_dspy.optimizers.bineval_optimizer.label_failures import label_agreement_change
from binaryeval_dspy.optimizers.bineval_optimizer.optimizer import BinEvalOptimizer
from binaryeval_dspy.optimizers.bineval_optimizer.prompt_slots import instruction_chars

__all__ = ["BinEvalOptimizer", "SourceVerdicts", "instruction_chars", "label_agreement_change", "load_source_verdicts"]

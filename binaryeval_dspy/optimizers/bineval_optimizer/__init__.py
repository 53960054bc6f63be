"""The disagreement-driven prompt-update teleprompter (paper sections 3.3-3.4, Algorithm 1)."""

from binaryeval_dspy.optimizers.bineval_optimizer.optimizer import BinEvalOptimizer

__all__ = ["BinEvalOptimizer"]

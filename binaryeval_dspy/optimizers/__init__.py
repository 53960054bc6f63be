"""Teleprompters: the disagreement-driven update loop; the head-to-head harness is `comparison/`."""

from binaryeval_dspy.optimizers.bineval_optimizer import BinEvalOptimizer

__all__ = ["BinEvalOptimizer"]

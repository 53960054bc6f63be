"""Teleprompters: the disagreement-driven update loop and the head-to-head harness."""

from binaryeval_dspy.optimizers.bineval_optimizer import BinEvalOptimizer

__all__ = ["BinEvalOptimizer"]

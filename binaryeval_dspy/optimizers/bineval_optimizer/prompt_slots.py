"""Reading and writing the prompt a program's predictor follows (its signature instructions)."""

from __future__ import annotations

import dspy

from binaryeval_dspy.errors import BinEvalError


def find_predictor(program: dspy.Module, name: str | None = None) -> tuple[str, dspy.Predict]:
    """The predictor whose instructions are the prompt being optimized.

    Args:
        program: any DSPy module.
        name: the predictor's name as in ``program.named_predictors()`` (e.g.
            ``"judge"``); None picks the only predictor.

    Returns:
        (name, predictor).

    Raises:
        BinEvalError: no predictor has that name, or `name` is None and the program
            does not have exactly one predictor (the message lists the names).
    """
    named = list(program.named_predictors())
    names = [n for n, _ in named]
    if name is not None:
        for n, predictor in named:
            if n == name:
                return n, predictor
        raise BinEvalError(f"the program has no predictor named {name!r}; its predictors are {names}")
    if len(named) != 1:
        raise BinEvalError(
            f"the program has {len(named)} predictors {names}; say which one holds the prompt with "
            "predictor_name=..."
        )
    return named[0]


def get_instructions(program: dspy.Module, name: str | None = None) -> str:
    """The instructions (docstring prompt) of the chosen predictor."""
    return find_predictor(program, name)[1].signature.instructions


def set_instructions(program: dspy.Module, text: str, name: str | None = None) -> None:
    """Replace the chosen predictor's instructions in place (``signature.with_instructions``)."""
    _, predictor = find_predictor(program, name)
    predictor.signature = predictor.signature.with_instructions(text)


def instruction_chars(program: dspy.Module) -> int:
    """Total characters of every predictor's instructions (the prompt length we report)."""
    return sum(len(p.signature.instructions or "") for _, p in program.named_predictors())

"""Running DSPy calls on a given LM: `lm_context`."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

import dspy

from binaryeval_dspy.lm.cache_identity import ensure_cache_identity
from binaryeval_dspy.lm.factory import LMHandle


def lm_context(lm: LMHandle | dspy.LM | None) -> AbstractContextManager[Any]:
    """A context that runs DSPy calls on `lm` (with its adapter for an `LMHandle`); no-op for None.

    A bare `dspy.LM` is given its endpoint's cache identity first (`ensure_cache_identity`),
    so two LMs with one model id on different endpoints never share cached answers.

    Args:
        lm: an `LMHandle` (its own context: LM and adapter), a `dspy.LM`, or None (the
            LM already configured stays).

    Returns:
        A context manager; nothing is changed until it is entered.
    """
    if lm is None:
        return nullcontext()
    if isinstance(lm, LMHandle):
        return lm.context()
    return dspy.context(lm=ensure_cache_identity(lm))

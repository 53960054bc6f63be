"""Measure LM calls, tokens and wall time of a block of code (DSPy usage tracking).

Built on `dspy.track_usage()`, so meters nest (an inner block's usage also counts in
the outer one) and follow DSPy's thread propagation (`dspy.Parallel`, `Evaluate`).
Calls answered from DSPy's cache carry no usage and are not counted: the figures are
what reached a model.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import dspy

from binaryeval_dspy.runs.evaluation import usage_from_tracker


@dataclass
class UsageMeter:
    """LM cost of a block; read the attributes after (or during) the block.

    Attributes:
        lm_calls: calls that reached a model.
        prompt_tokens: their prompt (input) tokens.
        completion_tokens: their completion (output) tokens.
        seconds: wall time of the block (so far, while inside it).
    """

    lm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    _tracker: object | None = None
    _started: float = 0.0
    _open: bool = True

    def refresh(self) -> UsageMeter:
        """Update the figures from the tracker; returns self."""
        if self._tracker is not None:
            usage = usage_from_tracker(self._tracker)
            self.lm_calls = usage.lm_calls
            self.prompt_tokens = usage.prompt_tokens
            self.completion_tokens = usage.completion_tokens
        if self._open:
            self.seconds = time.perf_counter() - self._started
        return self

    @property
    def total_tokens(self) -> int:
        """prompt + completion tokens."""
        return self.prompt_tokens + self.completion_tokens


@contextmanager
def measure_usage() -> Iterator[UsageMeter]:
    """Count LM calls, tokens and seconds spent inside the ``with`` block.

    Example:
        >>> with measure_usage() as meter:        # doctest: +SKIP
        ...     program(input=..., output=...)
        >>> meter.lm_calls, meter.total_tokens    # doctest: +SKIP
    """
    with dspy.track_usage() as tracker:
        meter = UsageMeter(_tracker=tracker, _started=time.perf_counter())
        try:
            yield meter
        finally:
            meter.refresh()
            meter._open = False

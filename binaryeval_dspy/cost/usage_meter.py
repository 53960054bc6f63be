"""Measure LM calls, tokens and wall time of a block of code (DSPy usage tracking).

Counts every thread's calls (see `binaryeval_dspy.lm.usage.SharedUsageTracker`): DSPy's
worker threads (`dspy.Parallel`, `dspy.Evaluate`, optimizers) and our item loop.
Calls answered from DSPy's cache carry no usage and are not counted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from binaryeval_dspy.lm.usage import shared_usage, usage_from_tracker
from binaryeval_dspy.schemas.item_result import Usage


@dataclass
class UsageMeter:
    """LM cost of a block; read the attributes after (or during) the block.

    Attributes:
        lm_calls: calls that reached a model.
        prompt_tokens: their prompt (input) tokens.
        completion_tokens: their completion (output) tokens.
        cached_prompt_tokens: prompt tokens served from the provider's prompt cache.
        seconds: wall time of the block (so far, while inside it).
    """

    lm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
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
            self.cached_prompt_tokens = usage.cached_prompt_tokens
        if self._open:
            self.seconds = time.perf_counter() - self._started
        return self

    @property
    def total_tokens(self) -> int:
        """prompt + completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def usage(self) -> Usage:
        """The figures as a `Usage`."""
        return Usage(lm_calls=self.lm_calls, prompt_tokens=self.prompt_tokens,
                     completion_tokens=self.completion_tokens, cached_prompt_tokens=self.cached_prompt_tokens)


@contextmanager
def measure_usage() -> Iterator[UsageMeter]:
    """Count LM calls, tokens and seconds spent inside the ``with`` block, on every thread.

    Calls made by DSPy's worker threads (`dspy.Parallel`, `dspy.Evaluate`, optimizers)
    and by our item loop are counted too (see `SharedUsageTracker`).

    Example:
        >>> with measure_usage() as meter:        # doctest: +SKIP
        ...     program(input=..., output=...)
        >>> meter.lm_calls, meter.total_tokens    # doctest: +SKIP
    """
    with shared_usage() as tracker:
        meter = UsageMeter(_tracker=tracker, _started=time.perf_counter())
        try:
            yield meter
        finally:
            meter.refresh()
            meter._open = False

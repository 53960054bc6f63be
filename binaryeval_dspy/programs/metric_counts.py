"""How a metric's calls ended, counted: ``scored``, ``unscored`` or ``failed`` per call
(`MetricCounts`), kept thread-safe by the `CountingMetric` mixin that `BinEvalMetric` and the
head-to-head's agreement metrics share, so an optimizer's history can say how many of its
scores were real."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

logger = logging.getLogger(__name__)

#: Outcome of one metric call: ``scored`` (a real score), ``unscored`` (the judge answered
#: but no verdict parsed) or ``failed`` (the judge's LM calls failed, or judging raised).
MetricStatus = Literal["scored", "unscored", "failed"]


@dataclass
class MetricCounts:
    """How many metric calls were scored, unscored or failed (see `MetricStatus`).

    Attributes:
        scored: calls whose score is a measurement (in [0, 1] for BinEval's yes-rate).
        unscored: calls that returned the fallback score because no verdict parsed.
        failed: calls that returned the fallback score because the judge's LM calls
            failed (transport, rate limit, timeout) or judging raised.
    """

    scored: int = 0
    unscored: int = 0
    failed: int = 0

    @property
    def total(self) -> int:
        """scored + unscored + failed."""
        return self.scored + self.unscored + self.failed

    @property
    def not_scored(self) -> int:
        """unscored + failed: the calls that returned the fallback score."""
        return self.unscored + self.failed

    def add(self, status: MetricStatus) -> None:
        """Count one call with `status` (``scored``, ``unscored`` or ``failed``)."""
        setattr(self, status, getattr(self, status) + 1)

    def as_dict(self) -> dict[str, int]:
        """``{"scored", "unscored", "failed", "total"}`` as ints (JSON-ready)."""
        return {"scored": self.scored, "unscored": self.unscored, "failed": self.failed, "total": self.total}

    def describe(self) -> str:
        """``"<scored> scored / <total> (<unscored> unscored, <failed> failed)"``."""
        return f"{self.scored} scored / {self.total} ({self.unscored} unscored, {self.failed} failed)"


class CountingMetric:
    """Thread-safe per-evaluation counters of a metric's outcomes (mixin).

    Subclasses call `_init_counts()` in ``__init__`` and `_record(status)` once per call.
    Callers read them with `counts()` (since creation or the last `reset_counts()`) or
    with the `counting()` context manager (the calls made inside one block, on any
    thread: one `dspy.Evaluate`, one optimizer evaluation). A call that returns the
    fallback score (``unscored_score``, not a measurement) is also logged: a warning at the
    1st, 2nd, 4th, 8th, ... such call of the metric, so a run that keeps failing is heard
    without a line per call.
    """

    def _init_counts(self) -> None:
        self._counts = MetricCounts()
        self._windows: list[MetricCounts] = []
        self._lock = threading.Lock()
        self._fallbacks = 0

    def _record(self, status: MetricStatus, problem: str | None = None) -> None:
        """Count one call; `problem` says why a call that is not ``scored`` got the fallback score."""
        with self._lock:
            self._counts.add(status)
            for window in self._windows:
                window.add(status)
            if status == "scored":
                return
            self._fallbacks += 1
            count = self._fallbacks
        if count & (count - 1) == 0:  # 1, 2, 4, 8, ...
            logger.warning("%s returned its fallback score %s (`unscored_score`, not a measurement) for an item it "
                           "could not score (%s%s); %d such call(s) so far, counted in counts()",
                           type(self).__name__, getattr(self, "unscored_score", None), status,
                           f": {problem}" if problem else "", count)

    def counts(self) -> MetricCounts:
        """A copy of the counts since the metric was made or last reset."""
        with self._lock:
            return MetricCounts(self._counts.scored, self._counts.unscored, self._counts.failed)

    def reset_counts(self) -> MetricCounts:
        """Return the counts so far and start again from zero."""
        with self._lock:
            counts, self._counts = self._counts, MetricCounts()
            return counts

    @contextmanager
    def counting(self) -> Iterator[MetricCounts]:
        """Count the calls made while the block runs; yields the live `MetricCounts`.

        Calls from every thread are counted (DSPy's evaluation threads included), so
        two evaluations running at the same time with one metric object count each
        other's calls: give each its own metric for separate figures.

        Example:
            >>> with metric.counting() as counts:                        # doctest: +SKIP
            ...     dspy.Evaluate(devset=dev, metric=metric)(program)
            >>> counts.scored, counts.unscored, counts.failed            # doctest: +SKIP
        """
        window = MetricCounts()
        with self._lock:
            self._windows.append(window)
        try:
            yield window
        finally:
            with self._lock:
                self._windows.remove(window)

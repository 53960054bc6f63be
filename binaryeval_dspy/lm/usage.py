"""LM usage that stays true under threads: calls, prompt, completion and cached tokens.

Built on DSPy's usage tracking (`dspy.track_usage`), with one change that makes the
figures true under concurrency: DSPy's thread pool (`dspy.Parallel`, `dspy.Evaluate`
with ``num_threads > 1``, the optimizers) gives each worker thread a *deep copy* of the
tracker, so usage recorded in workers never reaches the tracker the caller reads
(measured: 0 calls read against 6 made). `SharedUsageTracker` returns itself when
copied and records under a lock, so every thread's calls land in the one tracker.

Calls answered from DSPy's cache carry no usage and are not counted: the figures are
what reached a model. A request that got an error instead of a reply (retried by DSPy or
not) is recorded too (`record_failed_request`) and counted apart, as ``failed_calls``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import dspy

from binaryeval_dspy.lm.dspy_internals import UsageTracker
from binaryeval_dspy.schemas.item_result import Usage


class SharedUsageTracker(UsageTracker):
    """A DSPy `UsageTracker` that all threads share (copies are the tracker itself).

    Thread-safe: entries are appended under a lock. Install it with `shared_usage()`
    (or `measure_usage()`); DSPy's worker threads then record into it directly.
    """

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def __deepcopy__(self, memo: dict) -> SharedUsageTracker:
        return self

    def __copy__(self) -> SharedUsageTracker:
        return self

    def add_usage(self, lm: str, usage_entry: dict[str, Any]) -> None:
        with self._lock:
            super().add_usage(lm, usage_entry)

    def extend(self, usage_data: Mapping[str, list[dict]]) -> None:
        """Add entries recorded by another tracker (e.g. a nested one), under the lock."""
        with self._lock:
            for lm, entries in usage_data.items():
                self.usage_data[lm].extend(entries)

    def snapshot(self) -> dict[str, list[dict]]:
        """A copy of the entries so far (safe to read while workers still record)."""
        with self._lock:
            return {lm: list(entries) for lm, entries in self.usage_data.items()}


@contextmanager
def shared_usage() -> Iterator[SharedUsageTracker]:
    """Like `dspy.track_usage()`, but worker threads record into the same tracker.

    Nests like DSPy's: on exit the entries also roll up into an enclosing tracker.
    """
    tracker = SharedUsageTracker()
    parent = dspy.settings.usage_tracker
    with dspy.settings.context(usage_tracker=tracker):
        try:
            yield tracker
        finally:
            if parent is not None:
                data = tracker.snapshot()
                if isinstance(parent, SharedUsageTracker):
                    parent.extend(data)
                else:
                    for lm, entries in data.items():
                        parent.usage_data[lm].extend(entries)


#: Key of a usage entry that stands for a request answered with an error (`record_failed_request`).
FAILED_REQUEST = "bineval_failed_request"


def record_failed_request(model: str, usage: Mapping[str, Any] | None = None) -> None:
    """Record, in the usage tracker in effect (if any), one request that got an error
    instead of a reply, with the tokens the provider reported for it (`usage`, usually
    none); `usage_from_entries` counts it in ``failed_calls``, not in ``lm_calls``."""
    tracker = dspy.settings.usage_tracker
    if tracker is not None:
        tracker.add_usage(model, {**(usage or {}), FAILED_REQUEST: 1})


def _count(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def cached_prompt_tokens(entry: Mapping[str, Any]) -> int:
    """Prompt tokens a provider served from its prompt cache, from one usage entry.

    Reads OpenAI's and vLLM's ``prompt_tokens_details.cached_tokens``, Anthropic's
    ``cache_read_input_tokens`` and DSPy lm15's ``cache_read_tokens`` /
    ``input_tokens_details.cached_tokens``; 0 when none is present.
    """
    for details_key in ("prompt_tokens_details", "input_tokens_details"):
        details = entry.get(details_key)
        if isinstance(details, Mapping) and _count(details.get("cached_tokens")):
            return _count(details.get("cached_tokens"))
    for key in ("cache_read_input_tokens", "cache_read_tokens", "cached_tokens"):
        if _count(entry.get(key)):
            return _count(entry.get(key))
    return 0


def cache_write_tokens(entry: Mapping[str, Any]) -> int:
    """Prompt tokens a provider wrote to its prompt cache (billed above the input price by
    Anthropic), from one usage entry: DSPy lm15's ``prompt_tokens_details.cache_creation_tokens``
    or LiteLLM's / Anthropic's ``cache_creation_input_tokens``; 0 when none is present."""
    details = entry.get("prompt_tokens_details")
    if isinstance(details, Mapping) and _count(details.get("cache_creation_tokens")):
        return _count(details.get("cache_creation_tokens"))
    for key in ("cache_creation_input_tokens", "cache_write_tokens"):
        if _count(entry.get(key)):
            return _count(entry.get(key))
    return 0


def usage_from_entries(usage_data: Mapping[str, list[dict]]) -> Usage:
    """Sum calls, prompt, completion, cached and cache-write prompt tokens over usage entries.

    Args:
        usage_data: LM name -> list of usage entries, as `UsageTracker.usage_data`.

    Returns:
        A `Usage`; one entry is one call that reached a model, or, marked
        `FAILED_REQUEST`, one request answered with an error (``failed_calls``).
    """
    calls = prompt = completion = cached = written = failed = 0
    for entries in usage_data.values():
        for entry in entries:
            if entry.get(FAILED_REQUEST):
                failed += 1
            else:
                calls += 1
            prompt += _count(entry.get("prompt_tokens") or entry.get("input_tokens"))
            completion += _count(entry.get("completion_tokens") or entry.get("output_tokens"))
            cached += cached_prompt_tokens(entry)
            written += cache_write_tokens(entry)
    return Usage(lm_calls=calls, prompt_tokens=prompt, completion_tokens=completion, cached_prompt_tokens=cached,
                 cache_write_tokens=written, failed_calls=failed)


def usage_from_tracker(tracker: object) -> Usage:
    """Sum calls and tokens over every LM a DSPy usage tracker saw (see `usage_from_entries`)."""
    if isinstance(tracker, SharedUsageTracker):
        return usage_from_entries(tracker.snapshot())
    return usage_from_entries(getattr(tracker, "usage_data", {}))

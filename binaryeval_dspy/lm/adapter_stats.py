"""Adapter counters: what the judging adapters did during a run, counted thread-safely.

`AdapterStats` is filled by the counting adapters of `binaryeval_dspy.lm.adapters` (calls,
parse failures, JSON fallbacks, calls sent without a schema) and by `CacheScopedLM`
(requests re-sent in another ``response_format`` form); runs report it in their summary.
"""

from __future__ import annotations

import threading

from binaryeval_dspy.errors import UnknownNameError


class AdapterStats:
    """Thread-safe counters of one adapter's work; read them with `as_dict` or the attributes.

    Attributes:
        calls: adapter invocations (one per judgment / predictor call).
        fallback_calls: second LM calls made in another format after a reply did not
            parse (each costs one extra request).
        parse_failures: calls that ended in `AdapterParseError` (recorded as unparsed).
        schema_not_sent: JSON-adapter calls whose request carried no JSON schema
            (``json_object`` mode or no ``response_format``: the endpoint declares no
            structured output, or the signature has no closed schema).
        format_retries: requests sent again with the schema in another
            ``response_format`` form after the server rejected the first form
            (`CacheScopedLM` with ``schema_dialect="auto"``; at most a few per run).
    """

    _FIELDS = ("calls", "fallback_calls", "parse_failures", "schema_not_sent", "format_retries")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(self._FIELDS, 0)

    def add(self, name: str, n: int = 1) -> None:
        """Add `n` to counter `name` (one of the attributes). Raises `UnknownNameError` (a
        KeyError) for another name."""
        if name not in self._counts:
            raise UnknownNameError("unknown adapter counter", expected=f"one of {', '.join(self._FIELDS)}",
                                   received=repr(name), fix="count under one of the declared counters.")
        with self._lock:
            self._counts[name] += n

    def as_dict(self) -> dict[str, int]:
        """A snapshot ``{"calls", "fallback_calls", "parse_failures", "schema_not_sent", "format_retries"}`` -> int."""
        with self._lock:
            return dict(self._counts)

    def _get(self, name: str) -> int:
        with self._lock:
            return self._counts[name]

    calls = property(lambda self: self._get("calls"), doc="Adapter invocations (one per judgment).")
    fallback_calls = property(lambda self: self._get("fallback_calls"),
                              doc="Second LM calls made in another format after a reply did not parse.")
    parse_failures = property(lambda self: self._get("parse_failures"),
                              doc="Calls that ended in AdapterParseError.")
    schema_not_sent = property(lambda self: self._get("schema_not_sent"),
                               doc="JSON-adapter calls whose request carried no JSON schema.")
    format_retries = property(lambda self: self._get("format_retries"),
                              doc="Requests re-sent with the schema in another response_format form.")

    @property
    def extra_calls(self) -> int:
        """LM requests beyond one per judgment: ``fallback_calls + format_retries``."""
        counts = self.as_dict()
        return counts["fallback_calls"] + counts["format_retries"]

    def __repr__(self) -> str:
        return f"AdapterStats({', '.join(f'{k}={v}' for k, v in self.as_dict().items())})"

"""Reading a distribution over a field's allowed values from token log-probabilities.

G-Eval (Liu et al., 2023) scores with the probability-weighted mean of the score tokens
instead of the single sampled score, and UniEval (Zhong et al., 2022) with the
probability of "yes". Both need the LM's distribution at the position where the value
of one output field starts. DSPy returns token log-probabilities as
``Prediction.logprobs = {"content": [{"token", "logprob", "top_logprobs": [...]}, ...]}``
(OpenAI's shape, also produced by the embedded llama.cpp engine). Structured outputs
arrive as JSON (``{"score": 4}``), so the value starts right after ``"score":``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any


def _entries(logprobs: Any) -> list[Mapping[str, Any]]:
    if logprobs is None:
        return []
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else getattr(logprobs, "content", None)
    out = []
    for entry in content or []:
        if isinstance(entry, Mapping):
            out.append(entry)
        else:  # attribute objects from DSPy's legacy shim
            out.append({"token": getattr(entry, "token", ""), "logprob": getattr(entry, "logprob", None),
                        "top_logprobs": [{"token": getattr(t, "token", ""), "logprob": getattr(t, "logprob", None)}
                                         for t in (getattr(entry, "top_logprobs", None) or [])]})
    return out


def value_distribution(logprobs: Any, field: str, keys: Sequence[str]) -> dict[str, float] | None:
    """P(value = key) for each allowed key of one output field, renormalized over the keys.

    Args:
        logprobs: ``Prediction.logprobs`` of a DSPy call made with ``logprobs=True``.
        field: the output field whose value is read (its JSON key, e.g. ``"score"``).
        keys: the allowed values as text (e.g. ``["1", ..., "5"]`` or ``["yes", "no"]``);
            matched case-insensitively, and a token that is a non-empty prefix of
            exactly one key counts for that key (``"y"`` for ``"yes"``).

    Returns:
        key -> probability, summing to 1, or None when there are no log-probabilities,
        the field's value cannot be located, or no alternative matches any key.
    """
    entries = _entries(logprobs)
    if not entries:
        return None
    texts = [str(e.get("token") or "") for e in entries]
    joined = "".join(texts)
    match = re.search(r'"' + re.escape(field) + r'"\s*:\s*"?', joined)
    if match is None:
        return None
    start = match.end()
    offset = 0
    position = None
    for index, text in enumerate(texts):
        if offset <= start < offset + len(text) or (offset == start and text):
            position = index
            break
        offset += len(text)
    if position is None:
        return None
    prefix = joined[offset:start]
    loose = not prefix.strip().strip('"')  # only spacing / a quote before the value
    lowered = {k: str(k).lower() for k in keys}
    mass: dict[str, float] = {k: 0.0 for k in keys}
    alternatives = entries[position].get("top_logprobs") or [
        {"token": entries[position].get("token"), "logprob": entries[position].get("logprob")}]
    seen: set[str] = set()
    for alt in alternatives:
        token = str(alt.get("token") or "")
        logprob = alt.get("logprob")
        if logprob is None or token in seen or not (loose or token.startswith(prefix)):
            continue
        seen.add(token)
        rest = token.removeprefix(prefix)
        candidate = rest.strip().strip('"').strip().lower()
        if not candidate:
            continue
        exact = [k for k, low in lowered.items() if low == candidate]
        partial = [k for k, low in lowered.items() if low.startswith(candidate)]
        target = exact[0] if exact else (partial[0] if len(partial) == 1 else None)
        if target is not None:
            mass[target] += math.exp(float(logprob))
    total = sum(mass.values())
    if total <= 0:
        return None
    return {k: v / total for k, v in mass.items()}


def expected_value(distribution: Mapping[str, float]) -> float:
    """Probability-weighted mean of numeric keys: sum_k p(k) * k (G-Eval's score)."""
    return float(sum(float(k) * p for k, p in distribution.items()))

"""Reading a distribution over a field's allowed values from token log-probabilities.

G-Eval (Liu et al., 2023) scores with the probability-weighted mean of the score tokens
instead of the single sampled score, and UniEval (Zhong et al., 2022) with the
probability of "yes". Both need the LM's distribution at the position where the value
of one output field starts. DSPy returns token log-probabilities as
``Prediction.logprobs = {"content": [{"token", "logprob", "top_logprobs": [...]}, ...]}``
(OpenAI's shape, also produced by the embedded llama.cpp engine).

Where the value starts depends on how the reply is formatted, so it is located in the
text the tokens spell, whatever the format:

- ``json``: ``{"score": 4}`` or ``{"answer": "yes"}`` (DSPy's JSONAdapter, structured outputs):
  the value starts after ``"score":`` (spaces and an opening quote skipped);
- ``chat``: ``[[ ## score ## ]]\\n4\\n\\n[[ ## completed ## ]]`` (DSPy's ChatAdapter, the
  default for remote LMs): the value starts after the field's header and the newlines;
- ``bare``: a reply that is only the value (``" Yes"``): its first non-space character,
  used only when the caller allows it (``allow_bare=True``).

Tokens need not line up with the format: a token may carry the end of the header and the
value together (``"]]\\n4"``, ``": 4"``), leading spaces, newlines or a quote. The
alternatives at the value's token are then read relative to the part of the token that
precedes the value. `locate_value` says how the value was located (or why not), so that
callers never fall back to a plain answer silently.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

ValueFormat = Literal["json", "chat", "bare"]

# Why no distribution could be read (ValueDistribution.reason); callers record these.
NO_LOGPROBS = "no logprobs returned"
NOT_LOCATED = "value not located"
NO_ALTERNATIVES = "no alternatives (top_logprobs) at the value position"
NO_ALLOWED_VALUE = "no allowed value among the alternatives"

_SKIPPED = " \t\r\n\"'`"  # characters that may sit between a field's marker and its value
_WORD = re.compile(r"[A-Za-z0-9]+")


def _entries(logprobs: Any) -> list[Mapping[str, Any]]:
    if logprobs is None:
        return []
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else getattr(logprobs, "content", None)
    out = []
    for entry in content or []:
        if isinstance(entry, Mapping):
            out.append(entry)
        else:  # attribute objects (DSPy's legacy shim, lm15 TokenLogprob)
            top = getattr(entry, "top_logprobs", None)
            if top is None:
                top = getattr(entry, "top", None)
            out.append({"token": getattr(entry, "token", ""), "logprob": getattr(entry, "logprob", None),
                        "top_logprobs": [{"token": getattr(t, "token", ""), "logprob": getattr(t, "logprob", None)}
                                         for t in (top or [])]})
    return out


@dataclass(frozen=True)
class ValueDistribution:
    """What `locate_value` found at one output field's value position.

    Attributes:
        distribution: allowed key -> probability (renormalized over the keys, sums to 1),
            or None when it could not be read (see ``reason``).
        format: how the value was located: ``"json"``, ``"chat"`` or ``"bare"``; None
            when it was not located.
        position: index of the token where the value starts (None when not located).
        chosen: the allowed key the generated token at that position stands for (None
            when not located, or the generated token is not an allowed value); lets a
            caller check that the located value is the answer it parsed.
        reason: None when ``distribution`` is set, else one of `NO_LOGPROBS`,
            `NOT_LOCATED`, `NO_ALTERNATIVES`, `NO_ALLOWED_VALUE`.
    """

    distribution: dict[str, float] | None
    format: ValueFormat | None = None
    position: int | None = None
    chosen: str | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        """True when a distribution was read."""
        return self.distribution is not None


def _value_start(text: str, field: str, allow_bare: bool) -> tuple[int, ValueFormat] | None:
    """Character offset where `field`'s value starts in `text`, and the format that located it.

    The chat header is the most specific marker, so it is tried first (a chat reply may
    quote JSON in an earlier field; a JSON reply does not contain ``[[ ## field ## ]]``).
    """
    name = re.escape(field)
    candidates: list[tuple[re.Match[str] | None, ValueFormat]] = [
        (re.search(r"\[\[\s*##\s*" + name + r"\s*##\s*\]\]", text), "chat"),
        (re.search(r'"' + name + r'"\s*:', text), "json"),
    ]
    for match, fmt in candidates:
        if match is None:
            continue
        start = match.end()
        while start < len(text) and text[start] in _SKIPPED:
            start += 1
        if start < len(text):
            return start, fmt
    if allow_bare:
        start = 0
        while start < len(text) and text[start] in _SKIPPED:
            start += 1
        if start < len(text) and text[start] not in "{[<":
            return start, "bare"
    return None


def _after_prefix(token: str, prefix: str) -> str | None:
    """The part of an alternative `token` after the marker characters of `prefix`.

    Spacing and quotes are ignored on both sides (``":5"`` continues ``": "`` as well as
    ``": 5"`` does); None when the token does not continue the same marker.
    """
    i = 0
    for char in prefix:
        if char in _SKIPPED:
            continue
        while i < len(token) and token[i] in _SKIPPED:
            i += 1
        if i >= len(token) or token[i] != char:
            return None
        i += 1
    return token[i:]


def _key_of(text: str, lowered: Mapping[str, str]) -> str | None:
    """The allowed key a token's text (from the value's first character) stands for.

    Exact match on the leading run of letters/digits (case-insensitive), else the only
    key it is a proper prefix of (``"y"`` -> ``"yes"``); None otherwise.
    """
    word = _WORD.match(text.lstrip(_SKIPPED))
    if word is None:
        return None
    candidate = word.group(0).lower()
    exact = [k for k, low in lowered.items() if low == candidate]
    if exact:
        return exact[0]
    partial = [k for k, low in lowered.items() if low.startswith(candidate)]
    return partial[0] if len(partial) == 1 else None


def locate_value(logprobs: Any, field: str, keys: Sequence[str], *, allow_bare: bool = False) -> ValueDistribution:
    """Locate one output field's value in the reply's tokens and read P(value = key).

    The value is located in JSON (``"score": 4``, ``"score": "4"``), in DSPy's chat format
    (``[[ ## score ## ]]`` then newlines then the value) or, when `allow_bare`, as the
    reply's first non-space token. Tokens may split anywhere: the token holding the
    value's first character may also hold the end of the marker (``"]]\\n4"``), spaces, a
    newline or a quote; its alternatives then count only when they continue the same
    marker (spacing and quotes aside: ``":5"`` and ``": 5"`` both continue ``": "``).

    Args:
        logprobs: ``Prediction.logprobs`` of a DSPy call made with ``logprobs=True`` (a
            mapping ``{"content": [{"token", "logprob", "top_logprobs"}, ...]}`` or an
            object with such attributes); None when the LM returned none.
        field: the output field whose value is read (``"score"``, ``"answer"``, ``"verdict"``).
        keys: the allowed values as text (``["1", ..., "5"]`` or ``["yes", "no"]``);
            matched case-insensitively on the alternative's leading letters/digits, and
            an alternative that is a proper prefix of exactly one key counts for that key
            (``"y"`` for ``"yes"``).
        allow_bare: also accept a reply that is only the value (no JSON key, no header).

    Returns:
        A `ValueDistribution`: ``distribution`` (key -> probability in [0, 1], summing to
        1) with ``format``, ``position`` and ``chosen``, or ``distribution=None`` with the
        ``reason``. Never raises for malformed or missing log-probabilities.
    """
    entries = _entries(logprobs)
    if not entries:
        return ValueDistribution(None, reason=NO_LOGPROBS)
    texts = [str(e.get("token") or "") for e in entries]
    joined = "".join(texts)
    found = _value_start(joined, field, allow_bare)
    if found is None:
        return ValueDistribution(None, reason=NOT_LOCATED)
    start, fmt = found
    offset = 0
    position = None
    for index, text in enumerate(texts):
        if offset <= start < offset + len(text):
            position = index
            break
        offset += len(text)
    if position is None:
        return ValueDistribution(None, reason=NOT_LOCATED)
    prefix = joined[offset:start]  # the part of the value's token before the value
    lowered = {str(k): str(k).lower() for k in keys}
    chosen = _key_of(texts[position][len(prefix):], lowered)
    entry = entries[position]
    alternatives = list(entry.get("top_logprobs") or [])
    if not alternatives:
        return ValueDistribution(None, fmt, position, chosen, reason=NO_ALTERNATIVES)
    mass: dict[str, float] = {k: 0.0 for k in lowered}
    seen: set[str] = set()
    for alt in alternatives:
        token = str(alt.get("token") or "")
        logprob = alt.get("logprob")
        if logprob is None or token in seen:
            continue
        seen.add(token)
        rest = _after_prefix(token, prefix)  # alternatives must continue the same marker
        if rest is None:
            continue
        target = _key_of(rest, lowered)
        if target is not None:
            try:
                mass[target] += math.exp(float(logprob))
            except (TypeError, ValueError, OverflowError):
                continue
    total = sum(mass.values())
    if not total > 0 or not math.isfinite(total):
        return ValueDistribution(None, fmt, position, chosen, reason=NO_ALLOWED_VALUE)
    return ValueDistribution({k: v / total for k, v in mass.items()}, fmt, position, chosen)


def p_yes(logprobs: Any, field: str = "verdict", *, allow_bare: bool = False) -> float | None:
    """P(yes) renormalized over {yes, no} at `field`'s value position, in any reply format.

    The UniEval-style soft verdict (Zhong et al., 2022): alternatives ``yes``, ``Yes``,
    `` yes``, ``"yes"`` (and a lone ``y``) count for yes, likewise for no.

    Args:
        logprobs: ``Prediction.logprobs`` of the call (see `locate_value`).
        field: the output field holding the yes/no verdict.
        allow_bare: also accept a reply that is only the verdict.

    Returns:
        A probability in [0, 1], or None when no distribution could be read (no
        log-probabilities, verdict not located, neither yes nor no among the alternatives).
    """
    located = locate_value(logprobs, field, ["yes", "no"], allow_bare=allow_bare)
    return located.distribution["yes"] if located.distribution is not None else None


def expected_value(distribution: Mapping[str, float]) -> float:
    """Probability-weighted mean of numeric keys: sum_k p(k) * k (G-Eval's score, Liu et al., 2023).

    Args:
        distribution: numeric key (as text) -> probability, summing to 1.

    Returns:
        The expected value, within the keys' range.

    Raises:
        ValueError: a key is not a number.
    """
    return float(sum(float(k) * p for k, p in distribution.items()))


#: Why a verdict can point the other way from its own P(yes) (`against_verdict`), as reports say it.
AGAINST_VERDICT_WHY = ("Not an error: the verdict is one word, the likeliest spelling the reply format allowed, "
                       "while P(yes) adds up the model's probability of every spelling of yes and of no (\"Yes\", "
                       "\" no\", ...) before that constraint, so the two differ where the model was nearly "
                       "undecided. Read such a verdict as unsure.")


def against_verdict(p_yes_value: float | None, verdict: str) -> bool:
    """Whether a yes/no verdict points the other way from its own P(yes): ``"yes"`` with
    P(yes) < 0.5, or ``"no"`` with P(yes) > 0.5 (0.5 itself points nowhere).

    Why it happens, without any error: the verdict is one generated token, the likeliest
    spelling the reply format allowed (a JSON grammar lets through ``yes`` and ``no`` only),
    while `p_yes` adds up the model's probability of every spelling of yes and of no at that
    position (``Yes``, `` no``, ``"no"``, ...), read before any format constraint (the
    embedded engine records the logits before the grammar, like OpenAI's log-probabilities).
    Seen on SmolLM2-135M: ``yes`` 0.064 and ``no`` 0.057 among the allowed tokens, so the
    verdict is "yes", but `` no`` 0.087 and ``No`` 0.077 outside them, so P(yes) = 0.36. The
    two disagree only where the model was nearly undecided.

    Args:
        p_yes_value: the verdict's P(yes) in [0, 1] (`p_yes`), or None (then False).
        verdict: ``"yes"``, ``"no"`` (other outcomes never disagree).
    """
    if p_yes_value is None:
        return False
    return (verdict == "yes" and p_yes_value < 0.5) or (verdict == "no" and p_yes_value > 0.5)

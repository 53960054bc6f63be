"""Recognising a context-window overflow in an LM error message, with its size and limit.

Servers say it in their own words; the common forms are read here so that a result row
can record how far over the limit an item was, and nothing is guessed when a message
does not say.
"""

from __future__ import annotations

import re

from binaryeval_dspy.schemas.item_result import ContextOverflow

_OVERFLOW = re.compile(
    r"context[ _-]?(length|window|size)|maximum context|prompt is too long|too many tokens|n_ctx"
    r"|ContextWindowExceeded|exceed_context_size", re.IGNORECASE)
_LIMIT = [re.compile(p, re.IGNORECASE) for p in (
    r"maximum context length is (\d+)",                    # OpenAI, vLLM
    r"context window of (\d+)",                            # llama-cpp-python
    r"context (?:size|window|length)[^\d]{0,20}\((\d+) tokens?\)",  # llama.cpp server (older)
    r"\bn_ctx\W{0,4}(\d+)",                                # llama.cpp server (JSON body)
    r"tokens? > (\d+) maximum",                            # Anthropic
    r"context (?:window|length|size)[^\d]{0,40}?(\d{3,})",  # "exceeds context window ... 2048"
)]
_TOKENS = [re.compile(p, re.IGNORECASE) for p in (
    r"you requested (\d+) tokens",                          # OpenAI, vLLM
    r"your (?:request|prompt) (?:has|contains) (\d+)",      # vLLM (newer)
    r"requested tokens \((\d+)\)",                          # llama-cpp-python
    r"request \((\d+) tokens?\)",                           # llama.cpp server (older)
    r"\bn_prompt_tokens\W{0,4}(\d+)",                       # llama.cpp server (JSON body)
    r"prompt is too long: (\d+) tokens",                    # Anthropic
)]


def parse_context_overflow(message: str | None) -> ContextOverflow | None:
    """Whether an error message reports a context-window overflow, and its numbers.

    Args:
        message: an LM error's text (type and message), or None.

    Returns:
        A `ContextOverflow` with ``tokens`` (the size of the request) and ``limit`` (the
        context window), each None when the message does not state it; None when the
        message does not look like a context overflow.

    Example:
        >>> parse_context_overflow("This model's maximum context length is 2048 tokens. "
        ...                        "However, you requested 5000 tokens.")
        ContextOverflow(tokens=5000, limit=2048)
    """
    if not message or not _OVERFLOW.search(message):
        return None
    return ContextOverflow(tokens=_first(_TOKENS, message), limit=_first(_LIMIT, message))


def _first(patterns: list[re.Pattern[str]], text: str) -> int | None:
    for pattern in patterns:
        match = pattern.search(text)
        if match:
            return int(match.group(1))
    return None

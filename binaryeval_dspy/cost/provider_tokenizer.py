"""Counting prompt tokens as a provider does: tiktoken for OpenAI models, LiteLLM's tokenizer otherwise.

Used to size cache padding (`binaryeval_dspy.cost.cache_padding`) and by
``benchmarks/cost_per_item.py``. Source: OpenAI's and Anthropic's prompt-caching docs
count cache minimums in the provider's own tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: Tokens per chat message besides its text (role and separators; OpenAI's chat format).
MESSAGE_OVERHEAD = 4


def content_text(content: Any) -> str:
    """The text of a chat message's ``content``, as counted: a string, or the ``text`` of its blocks joined."""
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content or () if isinstance(block, dict))


class ProviderTokenizer:
    """Token ids of a text for one model: tiktoken's encoding for OpenAI models (``exact``:
    the provider's own; the encoding file ships with LiteLLM, so this runs offline), else
    LiteLLM's tokenizer for the model (``litellm.encode``; for Claude an older Anthropic
    tokenizer, an approximation).

    Args:
        model: a LiteLLM id (``openai/gpt-5-mini``, ``anthropic/claude-sonnet-4-5``) or a bare
            OpenAI name (``gpt-4o-mini``).
    """

    def __init__(self, model: str) -> None:
        import litellm
        from litellm.litellm_core_utils import default_encoding  # noqa: F401 - points tiktoken at the bundled file

        self.model = model
        bare = model.split("/", 1)[-1]
        if model.startswith("openai/") or "/" not in model and bare.startswith(("gpt-", "o1", "o3", "o4")):
            import tiktoken

            try:
                encoding = tiktoken.encoding_for_model(bare)
            except KeyError:
                encoding = tiktoken.get_encoding("o200k_base")
            self.name = f"tiktoken {encoding.name}"
            self.exact = True
            self._encode: Callable[[str], list[int]] = lambda text: encoding.encode(text, disallowed_special=())
        else:
            self.name = f"LiteLLM's tokenizer for {bare}"
            self.exact = False
            self._encode = lambda text: list(litellm.encode(model=bare, text=text))

    def __call__(self, text: str) -> list[int]:
        return self._encode(text)

    def count(self, text: str) -> int:
        """Tokens in `text`."""
        return len(self._encode(text))

"""The LM factory: LiteLLM ids, OpenAI-compatible URLs and the embedded llama.cpp engine.

Also: DSPy's response cache scoped to the endpoint or engine (`CacheScopedLM`,
`ensure_cache_identity`) and the adapter chosen per endpoint (`choose_adapter`). What calls
cost (`estimate_cost`, `model_price`, `price_source`, the `max_cost` `CostBudget`) is in
`binaryeval_dspy.cost`, the package above this one.

Names are imported from their modules on first use (PEP 562), so that e.g. reading an
endpoint's identity does not load the llama.cpp engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from binaryeval_dspy._lazy import lazy_exports

# name -> the module that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(["AdapterStats"], "binaryeval_dspy.lm.adapter_stats"),
    **dict.fromkeys(["ADAPTER_POLICIES", "CountingChatAdapter", "CountingJSONAdapter", "choose_adapter", "schema_support"], "binaryeval_dspy.lm.adapters"),
    **dict.fromkeys(["CacheScopedLM", "ensure_cache_identity"], "binaryeval_dspy.lm.cache_identity"),
    **dict.fromkeys(["lm_context"], "binaryeval_dspy.lm.context"),
    **dict.fromkeys(["cache_identity_of", "engine_identity", "normalize_base_url"], "binaryeval_dspy.lm.endpoint_identity"),
    **dict.fromkeys(["LMHandle", "make_lm"], "binaryeval_dspy.lm.factory"),
    **dict.fromkeys(["LlamaCppEngine"], "binaryeval_dspy.lm.llama_engine"),
    **dict.fromkeys(["LOCAL"], "binaryeval_dspy.lm.provider_keys"),
    **dict.fromkeys(["find_smollm2_gguf"], "binaryeval_dspy.lm.smollm2"),
}

__all__ = [
    "ADAPTER_POLICIES",
    "LOCAL",
    "AdapterStats",
    "CacheScopedLM",
    "CountingChatAdapter",
    "CountingJSONAdapter",
    "LMHandle",
    "LlamaCppEngine",
    "cache_identity_of",
    "choose_adapter",
    "engine_identity",
    "ensure_cache_identity",
    "find_smollm2_gguf",
    "lm_context",
    "make_lm",
    "normalize_base_url",
    "schema_support",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time `__getattr__` imports these
    from binaryeval_dspy.lm.adapter_stats import AdapterStats
    from binaryeval_dspy.lm.adapters import (
        ADAPTER_POLICIES,
        CountingChatAdapter,
        CountingJSONAdapter,
        choose_adapter,
        schema_support,
    )
    from binaryeval_dspy.lm.cache_identity import CacheScopedLM, ensure_cache_identity
    from binaryeval_dspy.lm.context import lm_context
    from binaryeval_dspy.lm.endpoint_identity import (
        cache_identity_of,
        engine_identity,
        normalize_base_url,
    )
    from binaryeval_dspy.lm.factory import LMHandle, make_lm
    from binaryeval_dspy.lm.llama_engine import LlamaCppEngine
    from binaryeval_dspy.lm.provider_keys import LOCAL
    from binaryeval_dspy.lm.smollm2 import find_smollm2_gguf

"""The LM factory: LiteLLM ids, OpenAI-compatible URLs and the embedded llama.cpp engine.

Also: DSPy's response cache scoped to the endpoint or engine (`CacheScopedLM`,
`ensure_cache_identity`), the adapter chosen per endpoint (`choose_adapter`), and what
calls cost (`estimate_cost`, `model_price`, `price_source`, the ``--max-cost`` `CostBudget`).
"""

from binaryeval_dspy.lm.adapters import (
    ADAPTER_POLICIES,
    AdapterStats,
    CountingChatAdapter,
    CountingJSONAdapter,
    choose_adapter,
    schema_support,
)
from binaryeval_dspy.lm.cache_identity import (
    CacheScopedLM,
    cache_identity_of,
    engine_identity,
    ensure_cache_identity,
    normalize_base_url,
)
from binaryeval_dspy.lm.cost_budget import CostBudget
from binaryeval_dspy.lm.factory import LOCAL, LMHandle, make_lm
from binaryeval_dspy.lm.llama_engine import LlamaCppEngine
from binaryeval_dspy.lm.pricing import estimate_cost, model_price, price_source
from binaryeval_dspy.lm.smollm2 import find_smollm2_gguf

__all__ = [
    "ADAPTER_POLICIES",
    "LOCAL",
    "AdapterStats",
    "CacheScopedLM",
    "CostBudget",
    "CountingChatAdapter",
    "CountingJSONAdapter",
    "LMHandle",
    "LlamaCppEngine",
    "cache_identity_of",
    "choose_adapter",
    "engine_identity",
    "ensure_cache_identity",
    "estimate_cost",
    "find_smollm2_gguf",
    "make_lm",
    "model_price",
    "normalize_base_url",
    "price_source",
    "schema_support",
]

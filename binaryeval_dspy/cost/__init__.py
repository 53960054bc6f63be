"""Cost: prices, the spending budget, and prompt-cache padding.

What a call uses (tokens, cached tokens, failed requests) is counted in the model layer
(`binaryeval_dspy.lm.usage`), and how a request is marked for a provider's prompt cache is
decided there too (`binaryeval_dspy.lm.prompt_cache`); this package prices them.

Names are imported from their modules on first use (PEP 562), so that importing the
package loads none of its modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from binaryeval_dspy._lazy import lazy_exports

# name -> the module that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(["CostBudget"], "binaryeval_dspy.cost.budget"),
    **dict.fromkeys(["model_price", "price_source"], "binaryeval_dspy.cost.price_map"),
    **dict.fromkeys(["estimate_cost"], "binaryeval_dspy.cost.pricing"),
}

__all__ = ["CostBudget", "estimate_cost", "model_price", "price_source"]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time `__getattr__` imports these
    from binaryeval_dspy.cost.budget import CostBudget
    from binaryeval_dspy.cost.price_map import model_price, price_source
    from binaryeval_dspy.cost.pricing import estimate_cost

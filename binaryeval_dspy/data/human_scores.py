"""Human ratings of an item, normalized to [0, 1] (the optimizer's human mode, the comparison)."""

from __future__ import annotations

from collections.abc import Sequence

import dspy

from binaryeval_dspy.errors import InputError


def normalized_human_scores(
    example: dspy.Example, dimensions: Sequence[str], *, field: str = "human", scale: tuple[float, float] = (1.0, 5.0)
) -> dict[str, float]:
    """The example's human ratings mapped to [0, 1]: (h - low) / (high - low), for `dimensions`.

    Args:
        example: an item whose `field` holds ``{dimension: rating}`` (every loader of this
            package puts them in ``human``: `load_summeval`, `load_topical_chat`,
            `load_qags`, `load_scored_items`, `load_hub_items`).
        dimensions: the dimensions to return (others in the mapping are ignored).
        field: the item field with the ratings (default ``human``, the loaders' field).
        scale: the ratings' [low, high] (SummEval: 1-5); high != low.

    Returns:
        ``{dimension: (rating - low) / (high - low)}`` for each of `dimensions` (in [0, 1]
        for a rating on the scale; not range-checked here: the loaders check ranges).

    Raises:
        InputError: the field is missing, is not a mapping, or lacks a dimension.
    """
    raw = example.get(field) if hasattr(example, "get") else None
    if not isinstance(raw, dict):
        others = [name for name, value in (example.items() if hasattr(example, "items") else ())
                  if isinstance(value, dict) and name != field]
        fix = (f"name the field that holds them, e.g. `human_field` {others[0]!r} (the item's other mappings: "
               f"{', '.join(others)})" if others else "load items whose human ratings are a {dimension: rating} "
               "object (the loaders put them in 'human').")
        raise InputError(f"the item has no human ratings mapping in '{field}'", field=field, fix=fix)
    low, high = scale
    out: dict[str, float] = {}
    for d in dimensions:
        if d not in raw or raw[d] is None:
            raise InputError(f"human ratings lack dimension {d!r} (have {sorted(raw)})", field=f"{field}.{d}",
                             fix="rate every dimension of the question set, or drop the dimension.")
        out[d] = (float(raw[d]) - low) / (high - low)
    return out

"""Human ratings of an item, normalized to [0, 1] (the optimizer's human mode, the comparison)."""

from __future__ import annotations

from collections.abc import Sequence

import dspy

from binaryeval_dspy.errors import InputError


def normalized_human_scores(
    example: dspy.Example, dimensions: Sequence[str], *, field: str = "scores", scale: tuple[float, float] = (1.0, 5.0)
) -> dict[str, float]:
    """The example's human ratings mapped to [0, 1]: (h - low) / (high - low), for `dimensions`.

    Args:
        example: an item whose `field` holds ``{dimension: rating}`` (SummEval items of
            `binaryeval_dspy.data.load_summeval` hold them in ``human``).
        dimensions: the dimensions to return (others in the mapping are ignored).
        field: the item field with the ratings.
        scale: the ratings' [low, high] (SummEval: 1-5); high != low.

    Returns:
        ``{dimension: (rating - low) / (high - low)}`` for each of `dimensions` (in [0, 1]
        for a rating on the scale; not range-checked here: the loaders check ranges).

    Raises:
        InputError: the field is missing, is not a mapping, or lacks a dimension.
    """
    raw = example.get(field) if hasattr(example, "get") else None
    if not isinstance(raw, dict):
        raise InputError(f"the item has no human ratings mapping in '{field}'", field=field,
                         fix="load items whose human ratings are a {dimension: rating} object.")
    low, high = scale
    out: dict[str, float] = {}
    for d in dimensions:
        if d not in raw or raw[d] is None:
            raise InputError(f"human ratings lack dimension {d!r} (have {sorted(raw)})", field=f"{field}.{d}",
                             fix="rate every dimension of the question set, or drop the dimension.")
        out[d] = (float(raw[d]) - low) / (high - low)
    return out

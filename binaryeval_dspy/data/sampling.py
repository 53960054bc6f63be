"""Choosing a subset of benchmark items: the first N, a random N, or a stratified N.

Stratified sampling keeps what the meta-evaluation protocols need. When items come in
groups (a document with the summaries of 16 systems, a dialogue context with 6
responses), whole groups are drawn at random and, inside them, systems are assigned by
rotation so that every system appears about equally often; several items per group
keep summary-level correlations computable. When every item is its own group (QAGS),
items are drawn per human-score bin in proportion to the bin's size. In every case
the chosen items are returned in file order, so items that share a document stay
consecutive (which lets llama.cpp and provider prompt caches reuse the document).
"""

from __future__ import annotations

import math
import random
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Sequence
from typing import Literal, TypeVar

from binaryeval_dspy.errors import InputError

T = TypeVar("T")
SampleMethod = Literal["head", "random", "stratified"]
SAMPLE_METHODS = ("head", "random", "stratified")


def select_items(
    items: Sequence[T],
    limit: int | None,
    *,
    sample: SampleMethod | None = None,
    seed: int = 0,
    group: Callable[[T], object] | None = None,
    stratum: Callable[[T], object] | None = None,
) -> list[T]:
    """Pick at most `limit` items.

    Args:
        items: all items, in file order.
        limit: how many to keep (None or >= len(items) keeps all).
        sample: ``head`` (default: the first `limit`), ``random`` (uniform, `seed`), or
            ``stratified`` (see the module docstring).
        seed: random seed for ``random`` and ``stratified``.
        group: item -> group key (document / dialogue context); used by ``stratified``.
        stratum: item -> stratum key (system id inside groups, or a human-score bin for
            singleton groups); used by ``stratified``.

    Returns:
        The chosen items in their original order.

    Raises:
        InputError: unknown `sample`, or `limit` < 1.
    """
    method = sample or "head"
    if method not in SAMPLE_METHODS:
        raise InputError(f"unknown sampling method {sample!r}; expected one of {SAMPLE_METHODS}",
                         field="sample")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InputError(f"limit must be an integer >= 1 (or None for all), got {limit!r}", field="limit")
    if limit is None or limit >= len(items):
        return list(items)
    if method == "head":
        return list(items[:limit])
    rng = random.Random(seed)
    if method == "random":
        chosen = sorted(rng.sample(range(len(items)), limit))
        return [items[i] for i in chosen]
    return _stratified(items, limit, rng, group or (lambda _: None), stratum or (lambda _: None))


def _stratified(items: Sequence[T], limit: int, rng: random.Random, group: Callable[[T], object],
                stratum: Callable[[T], object]) -> list[T]:
    groups: OrderedDict[object, list[int]] = OrderedDict()
    for index, item in enumerate(items):
        groups.setdefault(group(item), []).append(index)
    largest = max(len(members) for members in groups.values())
    if largest > 1 and len(groups) > 1:
        chosen = _grouped(items, groups, limit, rng, stratum)
    else:
        chosen = _proportional(items, limit, rng, stratum)
    return [items[i] for i in sorted(chosen)]


def _grouped(items: Sequence[T], groups: OrderedDict[object, list[int]], limit: int, rng: random.Random,
             stratum: Callable[[T], object]) -> list[int]:
    largest = max(len(m) for m in groups.values())
    per_group = min(largest, max(2, round(math.sqrt(limit))))
    keys = list(groups)
    rng.shuffle(keys)
    strata = sorted({stratum(items[i]) for members in groups.values() for i in members}, key=str)
    rng.shuffle(strata)
    chosen: list[int] = []
    offset = 0
    for key in keys:
        if len(chosen) >= limit:
            break
        members = groups[key]
        by_stratum = {stratum(items[i]): i for i in members}
        take = min(per_group, len(members), limit - len(chosen))
        picked: list[int] = []
        # rotate through the strata so each one is used about equally often overall
        for step in range(len(strata)):
            if len(picked) >= take:
                break
            s = strata[(offset + step) % len(strata)]
            if s in by_stratum and by_stratum[s] not in picked:
                picked.append(by_stratum[s])
        for i in members:  # groups lacking some strata: fill from what is left
            if len(picked) >= take:
                break
            if i not in picked:
                picked.append(i)
        offset = (offset + take) % max(1, len(strata))
        chosen.extend(picked)
    return chosen


def _proportional(items: Sequence[T], limit: int, rng: random.Random, stratum: Callable[[T], object]) -> list[int]:
    by_stratum: dict[object, list[int]] = defaultdict(list)
    for index, item in enumerate(items):
        by_stratum[stratum(item)].append(index)
    total = len(items)
    quotas = {s: limit * len(m) / total for s, m in by_stratum.items()}
    counts = {s: math.floor(q) for s, q in quotas.items()}
    remainder = limit - sum(counts.values())
    for s in sorted(quotas, key=lambda s: (counts[s] - quotas[s], str(s)))[:remainder]:
        counts[s] += 1  # largest remainders first
    chosen: list[int] = []
    for s, members in by_stratum.items():
        chosen.extend(rng.sample(members, min(counts[s], len(members))))
    return chosen


def score_bin(value: float, low: float, high: float) -> str:
    """Stratum of a human score on [low, high]: ``"low"`` (at the bottom), ``"high"`` (at
    the top) or ``"mid"`` (in between)."""
    if value <= low + 1e-9:
        return "low"
    if value >= high - 1e-9:
        return "high"
    return "mid"

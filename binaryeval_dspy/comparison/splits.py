"""Benchmark data and the train / validation / test splits of the head-to-head comparison.

* SummEval (paper Appendix B): 10 items per system drawn with seed 42 form the dev set,
  the other items the test set. The dev set is split again into train (lessons and
  proposals) and validation (early stopping, candidate selection); the paper early-
  stopped on test, which we do not. Python's RNG is not the paper's, so the exact items
  differ.
* IFBench (paper Appendix B): dev = one case per constraint type, test = the rest.

Files are found as every benchmark loader finds them (`binaryeval_dspy.data.paths`).
SummEval is read with the benchmark's own loader, `binaryeval_dspy.data.load_summeval`
(fields checked, scores range-checked), in file order.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import dspy

from binaryeval_dspy.data import SUMMEVAL_DIMENSIONS, load_ifbench, load_summeval

logger = logging.getLogger(__name__)

@dataclass
class Split:
    """Items for optimizing (train), selecting (val) and reporting (test); disjoint."""

    train: list[dspy.Example]
    val: list[dspy.Example]
    test: list[dspy.Example]

    def sizes(self) -> dict[str, int]:
        """{"train": n, "val": n, "test": n}."""
        return {"train": len(self.train), "val": len(self.val), "test": len(self.test)}


def load_summeval_items(directory: str | Path | None = None, *,
                        dimensions: Sequence[str] = SUMMEVAL_DIMENSIONS) -> list[dspy.Example]:
    """SummEval's 1,600 (article, summary) items, in file order, from `load_summeval`.

    Args:
        directory: a benchmark data folder (None: ``$BINEVAL_DATA_DIR``, else the data
            shipped in the package).
        dimensions: the expert scores to read (the question set's dimensions; default
            all four). A row needs ``reference`` only if it is to be read: it is not.

    Returns:
        The `load_summeval` items (``item_id`` = ``<doc_id>/<system_id>``, ``doc_id``,
        ``system_id``, ``input``, ``output``, ``human``: the expert ratings, each of
        `dimensions` in [1, 5] and their mean ``overall``, the field the comparison's
        metrics read).

    Raises:
        InputError: the file is missing or malformed, a field is missing or a score is
            outside [1, 5] (names the file, line and field).
    """
    return load_summeval(data_dir=directory, dimensions=dimensions, require_reference=False)


def _split_dev(items: list[dspy.Example], dev: list[dspy.Example], rng: random.Random, *,
               val_fraction: float, limit: int | None) -> Split:
    """Test = items not in `dev`; `dev` shuffled and cut into validation then train; `limit` per split."""
    dev_ids = {ex.item_id for ex in dev}
    test = [ex for ex in items if ex.item_id not in dev_ids]
    dev = list(dev)
    rng.shuffle(dev)
    n_val = round(len(dev) * val_fraction)
    val, train = dev[:n_val], dev[n_val:]
    if limit is not None:
        train, val = train[:limit], val[:limit]
        test = rng.sample(test, min(limit, len(test)))
    return Split(train=train, val=val, test=test)


def summeval_split(
    items: list[dspy.Example], *, per_system: int = 10, seed: int = 42, val_fraction: float = 0.5,
    limit: int | None = None,
) -> Split:
    """The paper's SummEval split, with the dev set halved into train and validation.

    Args:
        items: SummEval items with ``system_id``.
        per_system: dev items drawn per system (paper: 10, giving 160 of 1,600).
        seed: RNG seed (paper: 42).
        val_fraction: share of the dev set used for validation, in [0, 1).
        limit: keep at most this many items in each of train, val and test (small runs).

    Returns:
        A `Split`; test keeps file order unless `limit` samples it (seeded).
    """
    rng = random.Random(seed)
    systems = sorted({str(ex.system_id) for ex in items})
    dev: list[dspy.Example] = []
    for system in systems:
        group = [ex for ex in items if str(ex.system_id) == system]
        dev.extend(rng.sample(group, min(per_system, len(group))))
    return _split_dev(items, dev, rng, val_fraction=val_fraction, limit=limit)


def load_ifbench_items(directory: str | Path | None = None) -> list[dspy.Example]:
    """IFBench's test prompts as Examples (``key``, ``prompt``, ``instruction_id_list``, ``kwargs``).

    Raises:
        InputError: the file is missing or malformed (names the file, line and field).
    """
    return [ex.copy(item_id=str(ex.key)).with_inputs("prompt") for ex in load_ifbench(data_dir=directory)]


def ifbench_split(
    items: list[dspy.Example], *, seed: int = 42, val_fraction: float = 0.5, limit: int | None = None
) -> Split:
    """Dev = one case per constraint type (the first type of each prompt; seeded pick),
    split into train and validation; test = every other case (paper Appendix B).

    Args:
        items: IFBench Examples with ``instruction_id_list``.
        seed: RNG seed.
        val_fraction: share of dev used for validation.
        limit: keep at most this many items in each of train, val and test.
    """
    rng = random.Random(seed)
    by_type: dict[str, list[dspy.Example]] = {}
    for ex in items:
        by_type.setdefault(str(ex.instruction_id_list[0]), []).append(ex)
    dev = [rng.choice(by_type[t]) for t in sorted(by_type)]
    return _split_dev(items, dev, rng, val_fraction=val_fraction, limit=limit)

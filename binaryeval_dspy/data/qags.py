"""QAGS (Wang et al., 2020): factual-consistency ratings of CNN/DM (235) and XSum (239) summaries.

Reads ``qags/qags_cnndm.jsonl`` or ``qags/qags_xsum.jsonl`` (shipped in the package; a
data folder overrides them, see `binaryeval_dspy.data.paths`). The human score is the share of summary sentences that a majority of three
annotators judged supported by the article, in [0, 1].
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import dspy

from binaryeval_dspy.data.benchmark_rows import (
    add_unique_id,
    read_rows,
    require_rows,
    require_score,
    require_text,
)
from binaryeval_dspy.data.paths import resolve_data_file
from binaryeval_dspy.data.sampling import SampleMethod, score_bin, select_items
from binaryeval_dspy.errors import InputError

QAGS_SPLITS = ("cnndm", "xsum")
QAGS_FILES = {"cnndm": "qags/qags_cnndm.jsonl", "xsum": "qags/qags_xsum.jsonl"}
QAGS_DIMENSIONS = ("consistency",)
QAGS_SCALE = (0.0, 1.0)


def load_qags(
    split: Literal["cnndm", "xsum"] = "cnndm",
    path: str | Path | None = None,
    *,
    data_dir: str | Path | None = None,
    limit: int | None = None,
    sample: SampleMethod | None = None,
    seed: int = 0,
) -> list[dspy.Example]:
    """Load one QAGS split with its consistency scores.

    Args:
        split: ``cnndm`` (QAGS-CNN, 235 items) or ``xsum`` (QAGS-XSum, 239 items).
        path: the split's JSONL file; default: ``<data dir>/qags/qags_<split>.jsonl``.
        data_dir: a benchmark data folder (default: ``$BINEVAL_DATA_DIR``, else the data
            shipped in the package).
        limit: keep at most this many items.
        sample: ``head``, ``random`` or ``stratified`` (per score bin: 0, between, 1).
        seed: sampling seed.

    Returns:
        `dspy.Example`s with ``item_id`` (``<split>-<n>``), ``doc_id`` (same),
        ``system_id``, ``split``, ``input`` (the article), ``output`` (the summary),
        ``reference`` (the article again: the UniEval files carry the article as
        reference, which is what lexical baselines compare against), ``human``
        (``{"consistency": x}`` with x in [0, 1]) and ``line``.

    Raises:
        InputError: unknown split, missing file or field, score outside [0, 1].
    """
    if split not in QAGS_SPLITS:
        raise InputError(f"unknown QAGS split {split!r}; expected one of {QAGS_SPLITS}", field="split")
    file = resolve_data_file(QAGS_FILES[split], path=path, data_dir=data_dir)
    low, high = QAGS_SCALE
    items: list[dspy.Example] = []
    seen: set[str] = set()
    for line, row in read_rows(file):
        raw_id = row.get("item_id", line - 1)
        item_id = f"{split}-{raw_id}"
        add_unique_id(item_id, seen, path=file, line=line)
        source = require_text(row, "source", path=file, line=line)
        items.append(dspy.Example(
            item_id=item_id, doc_id=item_id, system_id=str(row.get("system_id", "0")), split=split,
            input=source, reference=source,
            output=require_text(row, "summary", path=file, line=line, allow_empty=True),
            human={"consistency": require_score(row, "consistency", path=file, line=line, low=low, high=high)},
            line=line,
        ).with_inputs("input", "output"))
    require_rows(items, file)
    return select_items(items, limit, sample=sample, seed=seed, group=lambda ex: ex.doc_id,
                        stratum=lambda ex: score_bin(ex.human["consistency"], low, high))

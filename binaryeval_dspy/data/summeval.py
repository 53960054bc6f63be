"""SummEval (Fabbri et al., 2021): 100 CNN/DM articles x 16 systems, expert ratings 1-5.

Reads ``summeval/summeval.jsonl`` (the copy shipped in the package unless a data folder
is given, see `binaryeval_dspy.data.paths` and docs/data.md): the
article is ``source`` and the summary ``system_output``, the texts that UniEval and
G-Eval score; human scores are the mean of three expert ratings per dimension.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import dspy

from binaryeval_dspy.data.benchmark_rows import read_rows, require_rows, require_score, require_text
from binaryeval_dspy.data.paths import resolve_data_file
from binaryeval_dspy.data.sampling import SampleMethod, select_items
from binaryeval_dspy.errors import InputError

SUMMEVAL_FILE = "summeval/summeval.jsonl"
SUMMEVAL_DIMENSIONS = ("coherence", "consistency", "fluency", "relevance")
SUMMEVAL_SCALE = (1.0, 5.0)


def load_summeval(
    path: str | Path | None = None,
    *,
    data_dir: str | Path | None = None,
    limit: int | None = None,
    sample: SampleMethod | None = None,
    seed: int = 0,
    dimensions: Sequence[str] = SUMMEVAL_DIMENSIONS,
    require_reference: bool = True,
) -> list[dspy.Example]:
    """Load SummEval items with their expert scores.

    Args:
        path: the ``summeval.jsonl`` file; default: ``<data dir>/summeval/summeval.jsonl``.
        data_dir: a benchmark data folder (default: ``$BINEVAL_DATA_DIR``, else the data
            shipped in the package).
        limit: keep at most this many items (None: all 1,600).
        sample: how to pick `limit` items: ``head``, ``random`` or ``stratified``
            (whole documents, systems balanced; see `binaryeval_dspy.data.sampling`).
        seed: sampling seed.
        dimensions: the expert scores to read and range-check (default: all four;
            the head-to-head comparison reads only its question set's dimensions).
        require_reference: refuse a row without ``reference`` (default); False reads
            a missing one as "" (the comparison does not use it).

    Returns:
        `dspy.Example`s with ``item_id`` (``<doc_id>/<system_id>``), ``doc_id``,
        ``system_id``, ``input`` (the article), ``output`` (the summary as in
        UniEval / G-Eval), ``reference`` (the CNN/DM highlights), ``human`` (dict:
        each of `dimensions` (default coherence, consistency, fluency, relevance) in
        [1, 5] and their mean ``overall``) and ``line``; inputs are ``input`` and
        ``output``. Items of one document are consecutive, in file order.

    Raises:
        InputError: the file is missing, a line is malformed, a field is missing or
            a score is outside [1, 5] (names file, line and field); duplicate items;
            `dimensions` is empty.
    """
    if not dimensions:
        raise InputError("no dimensions to read", field="dimensions", fix="name at least one SummEval dimension.")
    file = resolve_data_file(SUMMEVAL_FILE, path=path, data_dir=data_dir)
    low, high = SUMMEVAL_SCALE
    items: list[dspy.Example] = []
    seen: dict[str, int] = {}
    for line, row in read_rows(file):
        doc_id = require_text(row, "doc_id", path=file, line=line)
        system_id = require_text(row, "system_id", path=file, line=line)
        item_id = f"{doc_id}/{system_id}"
        if item_id in seen:
            raise InputError(f"item {item_id} already appeared on line {seen[item_id]}", path=file, line=line,
                             field="system_id", fix="keep one summary per document and system.")
        seen[item_id] = line
        human = {d: require_score(row, f"scores.{d}", path=file, line=line, low=low, high=high)
                 for d in dimensions}
        human["overall"] = sum(human.values()) / len(dimensions)
        items.append(dspy.Example(
            item_id=item_id, doc_id=doc_id, system_id=system_id,
            input=require_text(row, "source", path=file, line=line),
            output=require_text(row, "system_output", path=file, line=line, allow_empty=True),
            reference=(require_text(row, "reference", path=file, line=line)
                       if require_reference or "reference" in row else ""),
            human=human, line=line,
        ).with_inputs("input", "output"))
    require_rows(items, file)
    return select_items(items, limit, sample=sample, seed=seed,
                        group=lambda ex: ex.doc_id, stratum=lambda ex: ex.system_id)

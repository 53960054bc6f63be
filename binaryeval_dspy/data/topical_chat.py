"""Topical-Chat with USR annotations (Mehri & Eskenazi, 2020): 60 contexts x 6 responses.

Reads ``topical_chat/topical_chat.jsonl`` (shipped in the package; a data folder
overrides it, see `binaryeval_dspy.data.paths`). The input a
judge sees is the dialogue history followed by the knowledge snippet the response
may draw on; the output is the response.
"""

from __future__ import annotations

from pathlib import Path

import dspy

from binaryeval_dspy.data.benchmark_rows import (
    add_unique_id,
    read_rows,
    require_rows,
    require_score,
    require_text,
)
from binaryeval_dspy.data.paths import resolve_data_file
from binaryeval_dspy.data.sampling import SampleMethod, select_items
from binaryeval_dspy.errors import InputError

TOPICAL_CHAT_FILE = "topical_chat/topical_chat.jsonl"
TOPICAL_CHAT_DIMENSIONS = ("naturalness", "coherence", "engagingness", "groundedness")
TOPICAL_CHAT_SCALES = {
    "naturalness": (1.0, 3.0),
    "coherence": (1.0, 3.0),
    "engagingness": (1.0, 3.0),
    "groundedness": (0.0, 1.0),
    "understandability": (0.0, 1.0),
    "overall": (1.0, 5.0),
}
GROUND_TRUTH_SYSTEM = "Original Ground Truth"
SECOND_HUMAN_SYSTEM = "New Human Generated"


def dialogue_input(context: str, fact: str) -> str:
    """The judge's input for one response: the dialogue history, then the knowledge snippet."""
    return f"Conversation so far:\n{context.strip()}\n\nKnowledge snippet:\n{fact.strip()}"


def load_topical_chat(
    path: str | Path | None = None,
    *,
    data_dir: str | Path | None = None,
    limit: int | None = None,
    sample: SampleMethod | None = None,
    seed: int = 0,
) -> list[dspy.Example]:
    """Load the 360 Topical-Chat responses with their USR human scores.

    Args:
        path: the ``topical_chat.jsonl`` file; default: ``<data dir>/topical_chat/topical_chat.jsonl``.
        data_dir: a benchmark data folder (default: ``$BINEVAL_DATA_DIR``, else the data
            shipped in the package).
        limit: keep at most this many items (None: all 360).
        sample: ``head``, ``random`` or ``stratified`` (whole contexts, systems balanced).
        seed: sampling seed.

    Returns:
        `dspy.Example`s with ``item_id`` (``tc-<nnn>``), ``doc_id`` (the context id),
        ``system_id``, ``input`` (`dialogue_input` of history and knowledge snippet),
        ``output`` (the response), ``context``, ``fact``, ``reference`` (for ROUGE: the
        original human response of the same context; for that response itself, the
        second human response), ``human`` (naturalness, coherence, engagingness on
        1-3; groundedness, understandability on 0-1; overall on 1-5) and ``line``.

    Raises:
        InputError: missing file or field, malformed line, a score off its scale, a
            second response of one system to the same context.
    """
    file = resolve_data_file(TOPICAL_CHAT_FILE, path=path, data_dir=data_dir)
    items: list[dspy.Example] = []
    seen: set[str] = set()
    responders: dict[tuple[str, str], int] = {}  # (context id, system id) -> first line
    for line, row in read_rows(file):
        raw_id = row.get("item_id", line - 1)
        digits = str(raw_id).isascii() and str(raw_id).isdigit() and len(str(raw_id)) <= 18
        item_id = f"tc-{int(raw_id):03d}" if digits else f"tc-{raw_id}"
        add_unique_id(item_id, seen, path=file, line=line)
        context = require_text(row, "context", path=file, line=line)
        fact = require_text(row, "fact", path=file, line=line)
        human = {d: require_score(row, f"scores.{d}", path=file, line=line, low=lo, high=hi)
                 for d, (lo, hi) in TOPICAL_CHAT_SCALES.items()}
        doc_id = str(row.get("context_id", context))
        system_id = require_text(row, "system_id", path=file, line=line)
        first = responders.setdefault((doc_id, system_id), line)
        if first != line:  # the ROUGE reference is looked up by (context, system): it must be unique
            raise InputError(f"context {doc_id!r} already has a response from system {system_id!r} "
                             f"(line {first})", path=file, line=line, field="system_id",
                             fix="give each system at most one response per context.")
        items.append(dspy.Example(
            item_id=item_id, doc_id=doc_id, system_id=system_id,
            input=dialogue_input(context, fact),
            output=require_text(row, "response", path=file, line=line, allow_empty=True),
            context=context, fact=fact, reference="", human=human, line=line,
        ).with_inputs("input", "output"))
    require_rows(items, file)
    _attach_references(items)
    return select_items(items, limit, sample=sample, seed=seed,
                        group=lambda ex: ex.doc_id, stratum=lambda ex: ex.system_id)


def _attach_references(items: list[dspy.Example]) -> None:
    by_context: dict[str, dict[str, str]] = {}
    for ex in items:
        by_context.setdefault(ex.doc_id, {})[ex.system_id] = ex.output
    for ex in items:
        responses = by_context[ex.doc_id]
        if ex.system_id == GROUND_TRUTH_SYSTEM:
            ex["reference"] = responses.get(SECOND_HUMAN_SYSTEM, "")
        else:
            ex["reference"] = responses.get(GROUND_TRUTH_SYSTEM, "")

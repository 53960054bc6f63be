"""The benchmarks `bineval benchmark` knows: loader, dimensions, human scales and protocol.

Each benchmark follows the protocol of the paper's table for it (UniEval's protocol):

| name | items | table | correlation level |
|---|---|---|---|
| summeval | 1,600 | Table 1 | summary-level Spearman / Kendall |
| topical_chat | 360 | Table 7 | turn-level Spearman / Kendall |
| qags (cnndm + xsum) | 235 + 239 | Table 8 | pooled Pearson / Spearman / Kendall per split |
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import dspy

from binaryeval_dspy.data.qags import QAGS_SCALE, load_qags
from binaryeval_dspy.data.summeval import SUMMEVAL_DIMENSIONS, SUMMEVAL_SCALE, load_summeval
from binaryeval_dspy.data.topical_chat import (
    TOPICAL_CHAT_DIMENSIONS,
    TOPICAL_CHAT_SCALES,
    load_topical_chat,
)
from binaryeval_dspy.errors import InputError
from binaryeval_dspy.metrics.bootstrap import Level

SplitLoader = Callable[..., list[dspy.Example]]


@dataclass(frozen=True)
class BenchmarkSpec:
    """What `bineval benchmark NAME` needs to know about one benchmark.

    Attributes:
        name: CLI name (``summeval``).
        title: display name (``SummEval``).
        dimensions: human-rated dimensions evaluated, in table order.
        scales: dimension -> human score interval [low, high].
        level: the paper's correlation level: ``summary``, ``turn`` or ``pooled``.
        task_dir: folder under the tasks directory with the task prompt, question sets
            and rubric.
        splits: split names ("" for a single-split benchmark).
        split_titles: split -> display name (``QAGS-CNN``).
        loaders: split -> loader called as ``loader(data_dir=, limit=, sample=, seed=)``.
        layout: ``dimensions`` (Tables 1 and 7: dimensions as columns, rho / tau
            per cell) or ``splits`` (Table 8: splits as column groups, r / rho / tau).
        paper_table: the paper's table this reproduces.
        data_files: split -> file path inside the data folder (for the manifest).
    """

    name: str
    title: str
    dimensions: tuple[str, ...]
    scales: Mapping[str, tuple[float, float]]
    level: Level
    task_dir: str
    splits: tuple[str, ...]
    loaders: Mapping[str, SplitLoader]
    layout: str = "dimensions"
    split_titles: Mapping[str, str] = field(default_factory=dict)
    paper_table: str = ""
    data_files: Mapping[str, str] = field(default_factory=dict)

    def load(self, *, data_dir: str | Path | None = None, limit: int | None = None,
             sample: str | None = None, seed: int = 0) -> list[dspy.Example]:
        """Load every split (``limit`` applies per split); each item gets a ``split`` field.

        Raises:
            InputError: as the split loaders do (missing data folder or file, bad row).
        """
        items: list[dspy.Example] = []
        for split in self.splits:
            for ex in self.loaders[split](data_dir=data_dir, limit=limit, sample=sample, seed=seed):
                ex["split"] = split
                items.append(ex)
        return items

    def split_title(self, split: str) -> str:
        """Display name of a split (the benchmark title for a single split)."""
        return self.split_titles.get(split, self.title) if split else self.title


def _summeval(**kw: object) -> list[dspy.Example]:
    return load_summeval(**kw)  # type: ignore[arg-type]


def _topical_chat(**kw: object) -> list[dspy.Example]:
    return load_topical_chat(**kw)  # type: ignore[arg-type]


def _qags(split: str) -> SplitLoader:
    def load(**kw: object) -> list[dspy.Example]:
        return load_qags(split, **kw)  # type: ignore[arg-type]

    return load


_QAGS_TITLES = {"cnndm": "QAGS-CNN", "xsum": "QAGS-XSum"}
_QAGS_FILES = {"cnndm": "qags/qags_cnndm.jsonl", "xsum": "qags/qags_xsum.jsonl"}

BENCHMARKS: dict[str, BenchmarkSpec] = {
    "summeval": BenchmarkSpec(
        name="summeval", title="SummEval", dimensions=SUMMEVAL_DIMENSIONS,
        scales={d: SUMMEVAL_SCALE for d in SUMMEVAL_DIMENSIONS}, level="summary", task_dir="summeval",
        splits=("",), loaders={"": _summeval}, paper_table="Table 1",
        data_files={"": "summeval/summeval.jsonl"},
    ),
    "topical_chat": BenchmarkSpec(
        name="topical_chat", title="Topical-Chat", dimensions=TOPICAL_CHAT_DIMENSIONS,
        scales={d: TOPICAL_CHAT_SCALES[d] for d in TOPICAL_CHAT_DIMENSIONS}, level="turn",
        task_dir="topical_chat", splits=("",), loaders={"": _topical_chat}, paper_table="Table 7",
        data_files={"": "topical_chat/topical_chat.jsonl"},
    ),
    "qags": BenchmarkSpec(
        name="qags", title="QAGS", dimensions=("consistency",), scales={"consistency": QAGS_SCALE},
        level="pooled", task_dir="qags", splits=("cnndm", "xsum"),
        loaders={"cnndm": _qags("cnndm"), "xsum": _qags("xsum")}, layout="splits",
        split_titles=_QAGS_TITLES, paper_table="Table 8", data_files=_QAGS_FILES,
    ),
    "qags_cnndm": BenchmarkSpec(
        name="qags_cnndm", title="QAGS-CNN", dimensions=("consistency",), scales={"consistency": QAGS_SCALE},
        level="pooled", task_dir="qags", splits=("cnndm",), loaders={"cnndm": _qags("cnndm")},
        layout="splits", split_titles=_QAGS_TITLES, paper_table="Table 8",
        data_files={"cnndm": _QAGS_FILES["cnndm"]},
    ),
    "qags_xsum": BenchmarkSpec(
        name="qags_xsum", title="QAGS-XSum", dimensions=("consistency",), scales={"consistency": QAGS_SCALE},
        level="pooled", task_dir="qags", splits=("xsum",), loaders={"xsum": _qags("xsum")},
        layout="splits", split_titles=_QAGS_TITLES, paper_table="Table 8",
        data_files={"xsum": _QAGS_FILES["xsum"]},
    ),
}


def get_benchmark(name: str) -> BenchmarkSpec:
    """The spec of a benchmark by CLI name (``-`` and ``_`` are interchangeable).

    Raises:
        InputError: unknown name; the message lists the known ones.
    """
    key = name.strip().lower().replace("-", "_")
    if key not in BENCHMARKS:
        raise InputError(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}", field="benchmark")
    return BENCHMARKS[key]

"""Data loaders: generic JSONL / CSV items, scored items with a field mapping, and benchmarks.

Names are imported from their modules on first use (PEP 562), so that loading one kind of
data does not import every loader (IFBench's loader brings the IFBench checkers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from binaryeval_dspy._lazy import lazy_exports

# name -> the module that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(["normalized_human_scores"], "binaryeval_dspy.data.human_scores"),
    **dict.fromkeys(["load_ifbench"], "binaryeval_dspy.data.ifbench"),
    **dict.fromkeys(["load_csv", "load_items", "load_jsonl"], "binaryeval_dspy.data.items"),
    **dict.fromkeys(["DATA_DIR_ENV", "default_data_dir", "resolve_data_file"], "binaryeval_dspy.data.paths"),
    **dict.fromkeys(["QAGS_SPLITS", "load_qags"], "binaryeval_dspy.data.qags"),
    **dict.fromkeys(["SAMPLE_METHODS", "select_items"], "binaryeval_dspy.data.sampling"),
    **dict.fromkeys(["load_hub_items", "load_scored_items"], "binaryeval_dspy.data.scored_items"),
    **dict.fromkeys(["SUMMEVAL_DIMENSIONS", "load_summeval"], "binaryeval_dspy.data.summeval"),
    **dict.fromkeys(["EMPTY_OUTPUT_POLICIES", "is_empty_output", "visible_text"],
                    "binaryeval_dspy.data.text_checks"),
    **dict.fromkeys(["TOPICAL_CHAT_DIMENSIONS", "load_topical_chat"], "binaryeval_dspy.data.topical_chat"),
    **dict.fromkeys(["read_verdicts", "write_verdicts"], "binaryeval_dspy.data.verdicts_file"),
    **dict.fromkeys(["llmbar_path"], "binaryeval_dspy.data.llmbar"),
}

__all__ = [
    "DATA_DIR_ENV",
    "EMPTY_OUTPUT_POLICIES",
    "QAGS_SPLITS",
    "SAMPLE_METHODS",
    "SUMMEVAL_DIMENSIONS",
    "TOPICAL_CHAT_DIMENSIONS",
    "default_data_dir",
    "is_empty_output",
    "llmbar_path",
    "load_csv",
    "load_hub_items",
    "load_ifbench",
    "load_items",
    "load_jsonl",
    "load_qags",
    "load_scored_items",
    "load_summeval",
    "load_topical_chat",
    "normalized_human_scores",
    "read_verdicts",
    "resolve_data_file",
    "select_items",
    "visible_text",
    "write_verdicts",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:
    from binaryeval_dspy.data.human_scores import normalized_human_scores
    from binaryeval_dspy.data.ifbench import load_ifbench
    from binaryeval_dspy.data.items import load_csv, load_items, load_jsonl
    from binaryeval_dspy.data.llmbar import llmbar_path
    from binaryeval_dspy.data.paths import DATA_DIR_ENV, default_data_dir, resolve_data_file
    from binaryeval_dspy.data.qags import QAGS_SPLITS, load_qags
    from binaryeval_dspy.data.sampling import SAMPLE_METHODS, select_items
    from binaryeval_dspy.data.scored_items import load_hub_items, load_scored_items
    from binaryeval_dspy.data.summeval import SUMMEVAL_DIMENSIONS, load_summeval
    from binaryeval_dspy.data.text_checks import (
        EMPTY_OUTPUT_POLICIES,
        is_empty_output,
        visible_text,
    )
    from binaryeval_dspy.data.topical_chat import TOPICAL_CHAT_DIMENSIONS, load_topical_chat
    from binaryeval_dspy.data.verdicts_file import read_verdicts, write_verdicts

"""Data loaders: generic JSONL / CSV items, scored items with a field mapping, and benchmarks."""

from binaryeval_dspy.data.ifbench import load_ifbench
from binaryeval_dspy.data.items import load_csv, load_items, load_jsonl
from binaryeval_dspy.data.paths import DATA_DIR_ENV, default_data_dir, resolve_data_file
from binaryeval_dspy.data.qags import QAGS_SPLITS, load_qags
from binaryeval_dspy.data.sampling import SAMPLE_METHODS, select_items
from binaryeval_dspy.data.scored_items import load_hub_items, load_scored_items
from binaryeval_dspy.data.summeval import SUMMEVAL_DIMENSIONS, load_summeval
from binaryeval_dspy.data.text_checks import EMPTY_OUTPUT_POLICIES, is_empty_output, visible_text
from binaryeval_dspy.data.topical_chat import TOPICAL_CHAT_DIMENSIONS, load_topical_chat

__all__ = [
    "DATA_DIR_ENV",
    "EMPTY_OUTPUT_POLICIES",
    "QAGS_SPLITS",
    "SAMPLE_METHODS",
    "SUMMEVAL_DIMENSIONS",
    "TOPICAL_CHAT_DIMENSIONS",
    "default_data_dir",
    "is_empty_output",
    "load_csv",
    "load_hub_items",
    "load_ifbench",
    "load_items",
    "load_jsonl",
    "load_qags",
    "load_scored_items",
    "load_summeval",
    "load_topical_chat",
    "resolve_data_file",
    "select_items",
    "visible_text",
]

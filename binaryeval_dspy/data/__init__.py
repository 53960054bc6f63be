"""Data loaders: generic JSONL / CSV items (benchmarks are added beside them)."""

from binaryeval_dspy.data.items import load_csv, load_items, load_jsonl

__all__ = ["load_csv", "load_items", "load_jsonl"]

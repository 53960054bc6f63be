"""Data loaders: generic JSONL / CSV items (benchmarks are added beside them)."""

from binaryeval_dspy.data.items import load_csv, load_items, load_jsonl

__all__ = ["load_csv", "load_items", "load_jsonl"]

from binaryeval_dspy.data.ifbench import load_ifbench  # noqa: E402  IFBench prompts (Pyatkin et al., 2025)

__all__ += ["load_ifbench"]

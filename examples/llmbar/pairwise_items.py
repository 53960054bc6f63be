"""Write LLMBar instances as BinEval items, one file per presentation order.

BinEval asks its questions about one output; an LLMBar instance has two. Each items file
shows both outputs as one text, Output (a) then Output (b): ``o1_first.jsonl`` with
Output 1 as (a), ``o2_first.jsonl`` with Output 2 as (a). Judged with
``questions_o1_first.json`` / ``questions_o2_first.json`` (one question each, the ids of
the packaged verdicts file), the two runs answer the same (item, question) pairs as the
recorded LLMBar evaluators, so `bineval verdicts` exports them into one verdicts file
that `bineval agreement` compares with the labels and the recorded judges.

Usage:
    python examples/llmbar/pairwise_items.py OUT_DIR [--subset natural] [--limit N]
"""

from __future__ import annotations

import argparse
import gzip
import json
from importlib import resources
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--subset", default="natural", help="item_id prefix: natural, neighbor, gptinst, gptout, manual")
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    source = resources.files("binaryeval_dspy") / "benchmark_data/llmbar/llmbar_items.jsonl.gz"
    rows = [json.loads(line) for line in gzip.decompress(source.read_bytes()).decode("utf-8").splitlines()]
    rows = [r for r in rows if r["item_id"].startswith(args.subset + "-")][: args.limit]
    args.out.mkdir(parents=True, exist_ok=True)
    for name, (first, second) in {"o1_first": ("output_1", "output_2"), "o2_first": ("output_2", "output_1")}.items():
        with (args.out / f"{name}.jsonl").open("w", encoding="utf-8") as handle:
            for r in rows:
                shown = f"Output (a):\n{r[first]}\n\nOutput (b):\n{r[second]}"
                handle.write(json.dumps({"item_id": r["item_id"], "input": r["input"], "output": shown}) + "\n")
    print(f"{len(rows)} items in {args.out}/o1_first.jsonl and o2_first.jsonl")


if __name__ == "__main__":
    main()

"""Agreement of our IFBench checkers with IFBench's published verdicts, and their speed.

Reads tests/data/ifbench/sample_results.jsonl.gz (294 sample responses with IFBench's
own strict and loose verdicts; provenance in the README beside it), checks every
response with `binaryeval_dspy.ifbench`, and prints, per mode, how many prompts and
instruction verdicts match, both accuracies, and the checking time. No LM is involved.

    python benchmarks/ifbench_checker_agreement.py
"""

from __future__ import annotations

import gzip
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from binaryeval_dspy.ifbench import check_loose, check_strict, ifbench_accuracy

FIXTURE = ROOT / "tests" / "data" / "ifbench" / "sample_results.jsonl.gz"


def main() -> None:
    with gzip.open(FIXTURE, "rt", encoding="utf-8") as handle:
        items = [json.loads(line) for line in handle]
    for item in items:  # load the lazy models (Punkt, tagger, emoji table) outside the timing
        check_strict(item, item["response"])
    for mode, check in (("strict", check_strict), ("loose", check_loose)):
        start = time.perf_counter()
        results = [check(item, item["response"]) for item in items]
        seconds = time.perf_counter() - start
        prompts = sum(r.follow_instruction_list == item[mode] for r, item in zip(results, items))
        pairs = [(ours, theirs) for r, item in zip(results, items)
                 for ours, theirs in zip(r.follow_instruction_list, item[mode])]
        verdicts = sum(ours == theirs for ours, theirs in pairs)
        ours = ifbench_accuracy(results)
        theirs_prompt = sum(all(item[mode]) for item in items) / len(items)
        theirs_instruction = sum(theirs for _, theirs in pairs) / len(pairs)
        print(
            f"{mode:6s} prompts matching {prompts}/{len(items)}, instruction verdicts matching "
            f"{verdicts}/{len(pairs)}; prompt-level accuracy ours {ours['prompt_level']:.4f} "
            f"IFBench {theirs_prompt:.4f}; instruction-level ours {ours['instruction_level']:.4f} "
            f"IFBench {theirs_instruction:.4f}; {seconds:.2f} s ({1000 * seconds / len(items):.1f} ms/response)"
        )


if __name__ == "__main__":
    main()

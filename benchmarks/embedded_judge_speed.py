"""Print the speed of BinEval on the embedded model: wall time and tokens per item and per call.

Usage:  python benchmarks/embedded_judge_speed.py [--items 4] [--lm local]

Runs the bundled SummEval example with DSPy's cache off, so every call reaches the model.
Figures depend on the machine and on what else runs on it; the LM is printed with them.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import dspy

from binaryeval_dspy import BinEval, QuestionSet, load_items, make_lm
from binaryeval_dspy.lm.usage import usage_from_tracker

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "summeval"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=4)
    parser.add_argument("--lm", default="local")
    args = parser.parse_args()
    handle = make_lm(args.lm, cache=False)
    questions = QuestionSet.load(EXAMPLE / "questions.json")
    items = load_items(EXAMPLE / "items.jsonl", input_field="source", output_field="summary", id_field="id",
                       limit=args.items)
    program = BinEval(questions)
    seconds, tokens, calls, unparsed = [], [], [], 0
    with handle.context():
        for item in items:
            started = time.perf_counter()
            with dspy.track_usage() as tracker:
                pred = program(input=item.input, output=item.output)
            seconds.append(time.perf_counter() - started)
            usage = usage_from_tracker(tracker)
            tokens.append(usage.total_tokens)
            calls.append(usage.lm_calls)
            unparsed += pred.score_card.total_counts.unparsed
    print(f"LM: {handle.name}; {len(items)} items x {len(questions.questions)} questions (cache off)")
    print(f"wall time per item: mean {statistics.mean(seconds):.1f} s (first {seconds[0]:.1f} s, "
          f"median {statistics.median(seconds):.1f} s)")
    print(f"per LM call: {sum(seconds) / max(1, sum(calls)):.2f} s")
    print(f"tokens per item: mean {statistics.mean(tokens):.0f} (prompt + completion)")
    print(f"unparsed verdicts: {unparsed} of {len(items) * len(questions.questions)}")


if __name__ == "__main__":
    main()

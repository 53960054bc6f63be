"""Build the packaged LLMBar slice (`binaryeval_dspy/benchmark_data/llmbar/`) from an LLMBar checkout.

LLMBar (Zeng et al., ICLR 2024, https://github.com/princeton-nlp/LLMBar, MIT) pairs 419
instructions with two outputs, one that follows the instruction and one that does not, and
records the verdicts of six LLM evaluators under each prompting strategy, in both
presentation orders, in ``Dataset/LLMBar/<subset>/evaluators/<LM>/<strategy>/result.json``
(the authors' own statistics beside each, in ``statistics.json``).

This script (the project's own; no upstream code) writes three files:

* ``llmbar_items.jsonl.gz``: one row per instance (``item_id``, ``subset``, ``input``,
  ``output_1``, ``output_2``, ``label``: 1 or 2, the output that follows the instruction).
* ``llmbar_labels.jsonl.gz``: the gold labels as a verdicts file, judge ``human``.
* ``llmbar_verdicts.jsonl.gz``: every evaluator's verdicts, as a verdicts file.

One item per instance and two binary questions, one per presentation order, both asking
"is Output 1 the better one?": ``o1_first`` (Output 1 shown as Output (a), the authors'
``swap = False``) and ``o2_first`` (Output 2 shown first, ``swap = True``). A verdict is
``yes`` when the evaluator picked Output 1, ``no`` when it picked Output 2 and
``unparsed`` when its reply named neither (the authors' ``winner`` is null; the reply is
kept as ``raw_answer``). The gold label answers both questions the same way.

``cost_usd`` is an estimate: the authors' own per-token prices (``evaluate.py``:
GPT-4 $0.03 / $0.06 per 1,000 prompt / completion tokens, gpt-35-turbo $0.0015 / $0.002)
times tokens estimated as characters / 4 of the filled prompt and of the reply (no
tokenizer is available offline), the auxiliary calls of Metrics+Reference (the
evaluator's own questions and reference output, one per instance) split evenly over the
two questions. LLaMA-2, Falcon and PaLM 2 ran on the authors' hardware or a free API:
their cost is unknown (left out, never 0).

Usage:
    python examples/llmbar/convert_llmbar.py LLMBAR_CHECKOUT [--out DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
from pathlib import Path

from binaryeval_dspy.data.verdicts_file import write_verdicts
from binaryeval_dspy.schemas.verdict_record import VerdictRecord

SUBSETS = {"natural": "Natural", "neighbor": "Adversarial/Neighbor", "gptinst": "Adversarial/GPTInst",
           "gptout": "Adversarial/GPTOut", "manual": "Adversarial/Manual"}
LMS = ("GPT-4", "ChatGPT", "ChatGPT-0301", "PaLM2", "LLaMA2", "Falcon")
STRATEGIES = ("Vanilla", "Metrics_Reference")
#: USD per 1,000 (prompt, completion) tokens, from the authors' evaluate.py (None: no price)
PRICES = {"GPT-4": (0.03, 0.06), "ChatGPT": (0.0015, 0.002), "ChatGPT-0301": (0.0015, 0.002)}
QUESTIONS = {
    "o1_first": "Shown Output 1 first (as Output (a)) and Output 2 second, does the judge pick Output 1 as the "
                "one that follows the instruction better?",
    "o2_first": "Shown Output 2 first (as Output (a)) and Output 1 second, does the judge pick Output 1 as the "
                "one that follows the instruction better?",
}
ORDERS = {"o1_first": "swap = False", "o2_first": "swap = True"}


def _tokens(chars: int) -> int:
    return math.ceil(chars / 4)


def _template_chars(root: Path, name: str) -> int:
    """Characters of a prompt template without its {placeholders}."""
    text = (root / "LLMEvaluator/evaluators/prompts" / name).read_text(encoding="utf-8")
    for field in ("{input}", "{output_1}", "{output_2}", "{auxiliary_input_0}", "{auxiliary_input_1}"):
        text = text.replace(field, "")
    return len(text)


def _cost(lm: str, prompt_chars: int, completion_chars: int) -> float | None:
    if lm not in PRICES:
        return None
    per_prompt, per_completion = PRICES[lm]
    return _tokens(prompt_chars) / 1000 * per_prompt + _tokens(completion_chars) / 1000 * per_completion


def _write(path: Path, rows: list[dict]) -> None:
    data = "".join(json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n" for row in rows).encode("utf-8")
    path.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    print(f"{path}: {len(rows)} rows, {len(data):,} B, gzipped {path.stat().st_size:,} B")


def build(root: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    items, labels, verdicts = [], [], []
    for prefix, folder in SUBSETS.items():
        dataset = json.loads((root / "Dataset/LLMBar" / folder / "dataset.json").read_text(encoding="utf-8"))
        ids = [f"{prefix}-{n:03d}" for n in range(len(dataset))]
        for item_id, row in zip(ids, dataset):
            items.append({"item_id": item_id, "subset": folder, "input": row["input"], "output_1": row["output_1"],
                          "output_2": row["output_2"], "label": row["label"]})
            for question_id, text in QUESTIONS.items():
                labels.append({"item_id": item_id, "question_id": question_id, "judge": "human",
                               "verdict": "yes" if row["label"] == 1 else "no", "question_text": text})
        for lm in LMS:
            for strategy in STRATEGIES:
                path = root / "Dataset/LLMBar" / folder / "evaluators" / lm / strategy / "result.json"
                results = json.loads(path.read_text(encoding="utf-8"))
                if len(results) != len(dataset):
                    raise SystemExit(f"{path}: {len(results)} results for {len(dataset)} instances")
                compare = _template_chars(root, f"comparison/{strategy}.txt")
                for item_id, row, result in zip(ids, dataset, results):
                    if (result["input"], result["output_1"], result["output_2"]) != (
                            row["input"], row["output_1"], row["output_2"]):
                        raise SystemExit(f"{path}: results are not in dataset order at {item_id}")
                    steps = result["results"]
                    texts = len(row["input"]) + len(row["output_1"]) + len(row["output_2"])
                    aux_prompt = aux_completion = 0
                    if strategy == "Metrics_Reference":
                        metrics, reference = steps[0][0], steps[1][0]
                        texts += len(metrics) + len(reference)
                        aux_prompt = (_template_chars(root, "auxiliary/Metrics.txt")
                                      + _template_chars(root, "auxiliary/Reference.txt") + 2 * len(row["input"]))
                        aux_completion = len(metrics) + len(reference)
                    for question_id, order in ORDERS.items():
                        answer = steps[-1][order]
                        completion = answer["completion"][0] or ""
                        winner = answer["winner"]
                        record = {"item_id": item_id, "question_id": question_id, "judge": f"{lm}/{strategy}",
                                  "verdict": {"1": "yes", "2": "no"}.get(winner, "unparsed")}
                        if winner not in ("1", "2"):
                            record["raw_answer"] = completion
                            record["error"] = "the reply names neither Output (a) nor Output (b)"
                        cost = _cost(lm, compare + texts + aux_prompt / 2, len(completion) + aux_completion / 2)
                        if cost is not None:
                            record["cost_usd"] = round(cost, 8)
                        verdicts.append(record)
    _write(out / "llmbar_items.jsonl.gz", items)
    for name, rows in (("llmbar_labels.jsonl.gz", labels), ("llmbar_verdicts.jsonl.gz", verdicts)):
        path = write_verdicts([VerdictRecord(**row) for row in rows], out / name)  # the package's one writer
        print(f"{path}: {len(rows)} rows, gzipped {path.stat().st_size:,} B")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="a checkout (or export) of princeton-nlp/LLMBar")
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parents[2] / "binaryeval_dspy/benchmark_data/llmbar")
    args = parser.parse_args()
    build(args.checkout, args.out)


if __name__ == "__main__":
    main()

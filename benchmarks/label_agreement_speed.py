"""CPU cost of question-level agreement per answer: reading, agreement, the report.

Two verdicts files of about 10,000 answers each, in one run:

* ``llmbar``: the packaged LLMBar slice (10,056 recorded answers of 12 named judges, with
  the 838 gold labels), with a majority panel and a cascade;
* ``scripted``: 10,000 answers of 4 judges on 2,500 labelled (item, question) pairs, with
  P(yes), so calibration and the cascade's band sweep run too. The verdicts are
  pseudo-random from a seed: plumbing, never a model's judgment.

For each, the CPU time (``time.process_time``, this process only: the machine is shared and
loaded, so wall time would measure the neighbours) of reading the files (`read_verdicts`),
of `label_agreement` (1,000 bootstrap resamples per judge, panels and cascades simulated),
and of writing the report without figures (Markdown, HTML, JSON), then the reliability
figure alone. Printed as CPU-ms per answer, and each phase's share of the total.

Usage:
    python benchmarks/label_agreement_speed.py [--resamples 1000] [--answers 10000]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from binaryeval_dspy.data.llmbar import llmbar_path
from binaryeval_dspy.data.verdicts_file import read_verdicts, write_verdicts
from binaryeval_dspy.meta_eval.label_agreement import PanelSpec, label_agreement
from binaryeval_dspy.panels import CascadeRule
from binaryeval_dspy.reports.label_agreement_report import write_agreement_report
from binaryeval_dspy.schemas.verdict_record import VerdictRecord


def scripted_files(folder: Path, answers: int, seed: int = 0) -> tuple[Path, Path]:
    """A labels file and a verdicts file of `answers` scripted answers by 4 judges."""
    rng = random.Random(seed)
    pairs = answers // 4
    labels, verdicts = [], []
    for n in range(pairs):
        item, question = f"item-{n // 10:04d}", f"q{n % 10}"
        truth = rng.random() < 0.6
        labels.append(VerdictRecord(item_id=item, question_id=question, judge="human", verdict="yes" if truth else "no"))
        for judge, accuracy, cost in (("cheap", 0.7, 0.0001), ("mid", 0.8, 0.001), ("strong", 0.9, 0.01),
                                      ("other", 0.75, 0.001)):
            said = truth if rng.random() < accuracy else not truth
            p_yes = min(1.0, max(0.0, (0.75 if said else 0.25) + rng.uniform(-0.25, 0.25)))
            verdict = "unparsed" if rng.random() < 0.01 else ("yes" if said else "no")
            verdicts.append(VerdictRecord(item_id=item, question_id=question, judge=judge, verdict=verdict,
                                          p_yes=p_yes, cost_usd=cost))
    return (write_verdicts(labels, folder / "labels.jsonl"), write_verdicts(verdicts, folder / "verdicts.jsonl"))


def measure(name: str, labels_path: Path, verdicts_path: Path, *, panels, cascades, resamples: int,
            out: Path) -> None:
    start = time.process_time()
    labels = read_verdicts(labels_path)
    judged = read_verdicts(verdicts_path)
    read = time.process_time() - start
    start = time.process_time()
    result = label_agreement(labels, judged, panels=panels, cascades=cascades, n_resamples=resamples)
    agree = time.process_time() - start
    start = time.process_time()
    write_agreement_report(result, out, labels_path=str(labels_path), verdict_sources=[str(verdicts_path)],
                           n_resamples=resamples, seed=0, figures=False)
    report = time.process_time() - start
    figure = None
    if any(j["calibration"] for j in result.judges.values()):
        start = time.process_time()
        write_agreement_report(result, out / "with-figure", labels_path=str(labels_path),
                               verdict_sources=[str(verdicts_path)], n_resamples=resamples, seed=0, figures=True)
        figure = time.process_time() - start - report
    n = len(judged)
    total = read + agree + report
    print(f"{name}: {n} answers, {len(labels)} labels, {len(result.judges)} judges/panels/cascades, "
          f"{resamples} resamples")
    for phase, seconds in (("read", read), ("agreement", agree), ("report (no figures)", report)):
        print(f"  {phase:22s} {1000 * seconds / n:7.4f} CPU-ms per answer  ({100 * seconds / total:5.1f}% of the total)")
    print(f"  {'total':22s} {1000 * total / n:7.4f} CPU-ms per answer")
    if figure is not None:
        print(f"  {'+ reliability figure':22s} {1000 * figure / n:7.4f} CPU-ms per answer  "
              f"({figure / total:.2f}x the rest)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--answers", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        m = "Metrics_Reference"
        measure("llmbar", llmbar_path("labels"), llmbar_path("verdicts"),
                panels=[PanelSpec("majority", (f"GPT-4/{m}", f"PaLM2/{m}", f"ChatGPT-0301/{m}"))],
                cascades=[CascadeRule(((f"ChatGPT/{m}", f"ChatGPT-0301/{m}"), (f"GPT-4/{m}",)))],
                resamples=args.resamples, out=folder / "llmbar")
        labels, verdicts = scripted_files(folder, args.answers)
        measure("scripted", labels, verdicts, panels=[PanelSpec("majority", ("cheap", "mid", "other")),
                                                      PanelSpec("weighted", ("cheap", "mid", "other"))],
                cascades=[CascadeRule((("cheap",), ("strong",)), band=(0.35, 0.65))],
                resamples=args.resamples, out=folder / "scripted")


if __name__ == "__main__":
    main()

"""CPU cost per answer of a replay: `bineval evaluate --engine replay` on a 10,000-answer verdicts file.

One run, in this process: 1,000 items x 10 binary questions, a verdicts file of 10,000
scripted answers (judge ``scripted-judge``; yes / no / unparsed with P(yes) and a short
explanation, pseudo-random from a seed: plumbing, never a model's judgment). Timed with
``time.process_time`` (this process's CPU, every thread; the machine is shared and loaded, so
wall time would measure the neighbours), after the package and the CLI are imported:

* ``evaluate + summary``: the whole ``bineval evaluate ... --engine replay --verdicts FILE``
  command (reading the file, the plan, the journal, results.jsonl, the manifest, the
  summary and its tables), through click's test runner;
* ``view``: ``bineval view RUN`` on the replayed run (the self-contained HTML page).

Then a second replay of the same run directory (everything is stored: every item skipped),
and the check that the replayed scores equal the verdicts' own yes-rates. Printed as CPU-ms
per answer beside the target (< 1 CPU-ms per answer for evaluate and summary) and the load
average.

Usage:
    python benchmarks/replay_speed.py [--items 1000] [--questions 10]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path

from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.data.verdicts_file import write_verdicts
from binaryeval_dspy.schemas.item_result import text_hash
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from binaryeval_dspy.schemas.verdict_record import VerdictRecord

TARGET_CPU_MS = 1.0


def write_inputs(folder: Path, n_items: int, n_questions: int, seed: int = 0) -> tuple[Path, Path, Path, dict]:
    """The question set, items file and verdicts file; returns their paths and item -> expected yes-rate."""
    rng = random.Random(seed)
    dims = ["coverage", "style"]
    questions = QuestionSet(task_prompt="Summarize the article.", dimensions=dims, questions=[
        BinaryQuestion(id=f"q{n}", dimension=dims[n % 2], text=f"Does the summary keep point {n}?")
        for n in range(n_questions)])
    qs = questions.save(folder / "questions.json")
    items = folder / "items.jsonl"
    rows, expected = [], {}
    with items.open("w", encoding="utf-8") as handle:
        for i in range(n_items):
            item_id, output = f"item-{i:05d}", f"Summary {i}: the home side won {i % 5}-{i % 3} after a late goal."
            handle.write(json.dumps({"id": item_id, "input": f"Article {i}. " + "The match report. " * 20,
                                     "output": output}) + "\n")
            yes = answered = 0
            for q in questions.questions:
                draw = rng.random()
                verdict = "unparsed" if draw < 0.02 else ("yes" if draw < 0.7 else "no")
                p_yes = round(rng.uniform(0.5, 1.0) if verdict == "yes" else rng.uniform(0.0, 0.5), 4)
                rows.append(VerdictRecord(item_id=item_id, question_id=q.id, judge="scripted-judge", verdict=verdict,
                                          p_yes=None if verdict == "unparsed" else p_yes,
                                          explanation="" if verdict == "unparsed" else f"scripted {verdict}",
                                          raw_answer="no verdict here" if verdict == "unparsed" else None,
                                          error="AdapterParseError: scripted" if verdict == "unparsed" else None,
                                          output_hash=text_hash(output)))
                yes += verdict == "yes"
                answered += verdict != "unparsed"
            expected[item_id] = yes / answered if answered else None
    verdicts = write_verdicts(rows, folder / "verdicts.jsonl")
    return qs, items, verdicts, expected


def timed(args: list[str]) -> tuple[float, str]:
    start = time.process_time()
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    seconds = time.process_time() - start
    if result.exit_code != 0:
        raise SystemExit(f"bineval {' '.join(args)} exited {result.exit_code}:\n{result.output}")
    return seconds, result.output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--questions", type=int, default=10)
    options = parser.parse_args()
    answers = options.items * options.questions
    import binaryeval_dspy.cli.evaluate_command
    import binaryeval_dspy.cli.view_command
    import binaryeval_dspy.engines.replay  # noqa: F401

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        qs, items, verdicts, expected = write_inputs(folder, options.items, options.questions)
        out = folder / "run"
        args = ["evaluate", str(qs), str(items), "--id-field", "id", "--out", str(out), "--engine", "replay",
                "--verdicts", str(verdicts)]
        load_before = os.getloadavg()
        evaluate_s, output = timed(args)
        view_s, _ = timed(["view", str(out), "--out", str(folder / "view.html")])
        again_s, _ = timed(args)
        load_after = os.getloadavg()
        stored = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
        scores = {r["item_id"]: r["score_card"]["overall"] for r in stored}
        wrong = sum(1 for k, v in expected.items() if (scores.get(k) is None) != (v is None)
                    or (v is not None and abs(scores[k] - v) > 1e-12))
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    print(f"replay of {answers:,} answers ({options.items:,} items x {options.questions} questions, judge "
          f"scripted-judge: scripted verdicts, not a model's), one process, CPU time of this process")
    print(f"  load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, after "
          f"{load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} (2 shared cores)")
    per = 1000 * evaluate_s / answers
    print(f"  evaluate + summary  {per:7.4f} CPU-ms per answer  (target < {TARGET_CPU_MS:g}: "
          f"{per / TARGET_CPU_MS:.2f}x of it; {'met' if per < TARGET_CPU_MS else 'NOT met'})")
    print(f"  view                {1000 * view_s / answers:7.4f} CPU-ms per answer")
    print(f"  second replay (all stored, skipped) {1000 * again_s / answers:7.4f} CPU-ms per answer")
    print(f"  scores equal to the verdicts' own yes-rates: {len(expected) - wrong} of {len(expected)} items; "
          f"summary lm_calls {summary['lm_calls']}, cost {summary['cost']['display']}")
    flat = " ".join(output.split())
    note = flat[flat.index("replay: "):] if "replay: " in flat else "(no replay note)"
    print("  " + note.replace(str(verdicts), verdicts.name))


if __name__ == "__main__":
    main()

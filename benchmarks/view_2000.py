"""Size and speed of `bineval view` on a 2,000-item evaluate run, in headless Chromium.

Builds a run directory of 2,000 items x 12 questions (4 dimensions) with scripted
verdicts (pseudo-random from a seed: plumbing only, never a model's judgment), each item
with a ~1,500-character input and a ~400-character output in its items file, scored by
the project's own `score_verdicts` and summarized by `summarize_results`. Then it writes
the page (`write_view`), prints its size and the time to build it, and opens it in
headless Chromium (Debian's ``chromium``) with ``--dump-dom``; the page measures itself
with ``performance.now()`` and writes the numbers into a hidden element, read back here:

* first render: from the start of the page's script to the end of its first render;
  first contentful paint: the browser's own paint entry, from navigation start;
* filter response: the time to apply a filter and re-render (``#bench=1`` makes the page
  apply verdict = "no", a text search, a dimension with a score range, a sort, and clear).

Chromium runs with ``--virtual-time-budget``, so timers advance virtually, but the
script's own work (parsing the JSON, building the DOM) is real CPU time.

Usage:
    python benchmarks/view_2000.py [--items 2000] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests/ holds the headless Chromium driver

from binaryeval_dspy.runs.run_summary import summarize_results, write_summary
from binaryeval_dspy.reports.run_view import write_view
from binaryeval_dspy.runs.items_file import items_file_identity
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.item_result import ItemResult, Usage, text_hash
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from binaryeval_dspy.schemas.run_manifest import RunManifest
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.scoring import score_verdicts
from tests.headless_chromium import DomReader, dump_dom, find_chromium

DIMENSIONS = ["coherence", "consistency", "fluency", "relevance"]
WORDS = ["the", "match", "ended", "with", "a", "late", "goal", "after", "a", "long", "spell", "of", "pressure",
         "from", "both", "sides"]


def build_run(folder: Path, n_items: int, seed: int = 0) -> Path:
    """A finished evaluate run of `n_items` items with scripted verdicts; returns its directory."""
    rng = random.Random(seed)
    questions = [BinaryQuestion(id=f"{d}-{k:02d}", dimension=d, text=f"Question {k} about {d}: is it right?")
                 for d in DIMENSIONS for k in range(1, 4)]
    question_set = QuestionSet(task_prompt="Summarize the article.", dimensions=DIMENSIONS, questions=questions)
    items_path = folder / "items.jsonl"
    rows, results = [], []
    for i in range(n_items):
        source = " ".join(rng.choice(WORDS) for _ in range(260))
        output = f"item {i}: " + " ".join(rng.choice(WORDS) for _ in range(70))
        rows.append({"id": f"item-{i:04d}", "source": source, "summary": output})
        quality = rng.random()
        verdicts = []
        for q in questions:
            roll = rng.random()
            verdict = "unparsed" if roll < 0.01 else ("yes" if roll < 0.01 + 0.99 * (0.3 + 0.7 * quality) else "no")
            verdicts.append(QuestionVerdict(
                question_id=q.id, verdict=verdict,
                explanation="" if verdict == "unparsed" else f"Scripted {verdict}: " + " ".join(rng.sample(WORDS, 8)),
                raw_answer="unreadable reply" if verdict == "unparsed" else None,
                error="could not read yes or no" if verdict == "unparsed" else None))
        card = score_verdicts(verdicts, question_set, scale=(1.0, 5.0))
        results.append(ItemResult(item_id=f"item-{i:04d}", line=i + 1, output_hash=text_hash(output),
                                  input_hash=text_hash(source), question_set_hash=question_set.content_hash,
                                  score_card=card, verdicts=verdicts, usage=Usage(lm_calls=12),
                                  seconds=0.1))
    items_path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run_dir = RunDirectory(folder / "run")
    run_dir.write_manifest(RunManifest(
        command="evaluate", lm="scripted (benchmark)", question_set_hash=question_set.content_hash,
        question_set_path="(scripted)", items_path=str(items_path), items_file=items_file_identity(items_path),
        config={"input_field": "source", "output_field": "summary", "id_field": "id", "scale": [1.0, 5.0]},
        finished_at="2026-12-02T00:00:00+00:00"))
    run_dir.freeze_question_set(question_set)
    run_dir.rewrite_results(results)
    write_summary(summarize_results(results, lm="scripted (benchmark)", question_set=question_set), run_dir.path)
    return run_dir.path


def measure(page: Path) -> dict:
    """The page's own timings (`#timing`), with the filter benchmark run (`#bench=1`)."""
    dom = DomReader(dump_dom(page.resolve().as_uri() + "#bench=1", budget_ms=10000, timeout=300))
    timing = dom.root.by_id("timing")
    if timing is None or not timing.text.strip():
        raise RuntimeError("the page wrote no timings")
    return json.loads(timing.text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, default=None, help="build the run here and keep it")
    args = parser.parse_args()
    if find_chromium() is None:
        raise SystemExit("needs headless Chromium: apt-get install chromium")
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        run = build_run(folder, args.items)
        built = time.perf_counter() - started
        started = time.perf_counter()
        page = write_view(run, out=folder / "view.html")
        written = time.perf_counter() - started
        size = page.stat().st_size
        print(f"run: {args.items} items x 12 questions (scripted verdicts), built in {built:.1f} s")
        print(f"page: {page.name}, {size / 1e6:.2f} MB ({size:,} bytes), one file, no network; "
              f"bineval view took {written:.2f} s")
        runs = [measure(page) for _ in range(args.repeat)]
        first = [r["first_render_ms"] for r in runs]
        ready = [r["script_end_ms"] for r in runs]
        paint = [r["first_contentful_paint_ms"] for r in runs if "first_contentful_paint_ms" in r]
        print(f"first render (script start to rendered page), median of {len(runs)}: {statistics.median(first):.0f} ms "
              f"(runs: {', '.join(f'{x:.0f}' for x in first)})")
        print(f"page ready (navigation start to the end of the first render: reading the {size / 1e6:.1f} MB file, "
              f"parsing, rendering), median: {statistics.median(ready):.0f} ms")
        if paint:
            print(f"first contentful paint (from navigation start), median: {statistics.median(paint):.0f} ms")
        for name in runs[0]["filters"]:
            values = [r["filters"][name] for r in runs]
            print(f"filter '{name}': median {statistics.median(values):.0f} ms, max {max(values):.0f} ms "
                  "(target < 200 ms)")


if __name__ == "__main__":
    main()

"""Peak memory of a ``bineval evaluate`` run against the number of items (issue 28: <= 1.3x from 100 to 10,000 items).

Usage (from the repository root, the worktree's venv active):

    python benchmarks/run_memory.py                                  # 100 and 10,000 items, 12 questions
    python benchmarks/run_memory.py --sizes 100,2000 --questions 12
    python benchmarks/run_memory.py --sizes 100,2000 --where          # also: where the memory goes
    python benchmarks/run_memory.py --sizes 100 --where --where-sizes 100,2000
    python benchmarks/run_memory.py --sizes 100,3000 --without-dspy-cache     # is it the reply cache?

The LM is the scripted OpenAI-compatible endpoint of tests/fake_endpoint.py (`TimedEndpoint` in
benchmarks/engines.py; request bodies are counted, not kept), at 0 s latency, served by threads of
this process; each ``bineval evaluate --engine live --concurrency 64`` runs in a process of its
own, with a fresh DSPy cache and distinct items (every question is a request).

1. **peak**: per size, the peak resident set of the ``bineval`` process (``ru_maxrss`` from
   ``os.wait4``: the kernel's high-water mark, sampled by nothing), and the ratio of the largest
   size's peak to the smallest's. Target: <= 1.3. Beside it, the largest RSS sampled (every
   0.2 s from ``/proc``) until the endpoint's last reply: what the sending part of the run
   holds, before the end-of-run reports, split into anonymous memory (the heap: Python
   objects, SQLite's page cache) and file-backed pages (mapped files: code, SQLite's
   memory-mapped cache database).
2. **where** (``--where``): runs of ``--where-sizes`` items under ``tracemalloc`` (Python
   allocations only, 6 frames; this slows a run down several times): a thread in the ``bineval``
   process takes a snapshot each time the traced memory has grown by 20% since the last one (at
   most one per 5 s), so the last snapshot is near the peak (its size is printed beside it); printed: the traced peak, and the lines of code that held the most of
   it at that snapshot (with the caller in our package that led there). RSS above the traced
   peak is the interpreter, imported modules' code, C libraries and allocator slack.

No figure here is a quality claim: the verdicts are scripted.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.engines import (TimedEndpoint, evaluate_command, last_line, load_average, run_measured,  # noqa: E402
                                write_inputs)

#: Run inside the ``bineval`` process by ``--where``: tracemalloc on, a snapshot near the peak,
#: the CLI's own ``main``; the top lines go to the JSON file named by the first argument.
TRACED_MAIN = r"""
import json, sys, threading, tracemalloc, linecache
out = sys.argv.pop(1)
tracemalloc.start(6)
state = {"snapshot": None, "size": 0, "stop": False}

def watch():
    import time
    while not state["stop"]:
        current, _peak = tracemalloc.get_traced_memory()
        if current > state["size"] * 1.2 + 2**20:
            state["snapshot"], state["size"] = tracemalloc.take_snapshot(), current
            time.sleep(5.0)  # a snapshot costs seconds at a few hundred MiB: not more than one per 5 s
        time.sleep(0.5)

threading.Thread(target=watch, daemon=True).start()

def ours(tb):
    for frame in reversed(tb):  # innermost first: the nearest caller in our package
        if "binaryeval_dspy" in frame.filename:
            return f"{frame.filename.split('binaryeval_dspy/', 1)[1]}:{frame.lineno}"
    return ""

def report():
    state["stop"] = True
    snap = state["snapshot"]
    if snap is None:
        return
    snap = snap.filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    stats = snap.statistics("traceback")
    rows = []
    for stat in stats[:25]:
        frame = stat.traceback[-1]  # the allocating line
        where = frame.filename.split("site-packages/", 1)[-1].split("binaryeval_dspy/", 1)[-1]
        rows.append({"mib": stat.size / 2**20, "blocks": stat.count, "line": f"{where}:{frame.lineno}",
                     "code": linecache.getline(frame.filename, frame.lineno).strip()[:90],
                     "ours": ours(stat.traceback)})
    by_file = {}
    for stat in snap.statistics("filename"):
        name = stat.traceback[0].filename.split("site-packages/", 1)[-1].split("binaryeval_dspy/", 1)[-1]
        by_file[name] = by_file.get(name, 0) + stat.size
    files = sorted(by_file.items(), key=lambda kv: -kv[1])[:12]
    with open(out, "w") as f:
        json.dump({"peak_mib": tracemalloc.get_traced_memory()[1] / 2**20, "snapshot_mib": state["size"] / 2**20,
                   "top": rows, "files": [(k, v / 2**20) for k, v in files]}, f)

from binaryeval_dspy.cli.main import main
try:
    main()
finally:
    report()
"""


#: ``--without-dspy-cache``: the CLI with DSPy's response cache off (memory and disk), so no reply is stored.
UNCACHED_MAIN = r"""
import dspy
dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
from binaryeval_dspy.cli.main import main
main()
"""


def peaks(folder: Path, sizes: list[int], questions: int, concurrency: int, where: bool,
          uncached: bool = False) -> None:
    label = "under tracemalloc" if where else "with DSPy's cache off" if uncached else ""
    print(f"\n## Peak memory of `bineval evaluate --engine live --concurrency {concurrency}` {label}, scripted endpoint "
          f"(tests/fake_endpoint.py) at 0 s latency, {questions} questions per item")
    print("| items | requests | exit | wall s | CPU s | peak RSS MiB | largest RSS until the last reply MiB (anonymous + "
          "file-backed; sampled every 0.2 s) "
          "| traced peak MiB | load |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    results = {}
    with TimedEndpoint(0.0) as endpoint:
        for n_items in sizes:
            qs, items = write_inputs(folder, n_items, questions)
            out = folder / f"mem-{n_items}{'-traced' if where else '-uncached' if uncached else ''}"
            traced = folder / f"traced-{n_items}.json"
            python = ([sys.executable, "-c", TRACED_MAIN, str(traced)] if where
                      else [sys.executable, "-c", UNCACHED_MAIN] if uncached else None)
            command = evaluate_command(endpoint.base_url, qs, items, out, "live", concurrency, python=python)
            if where or uncached:  # ``python -c CODE [traced.json] evaluate ...``: drop the helper's ``-m module``
                at = command.index("-m")
                del command[at:at + 2]
            mark = endpoint.mark()
            run = run_measured(command, out, sample_rss=0.2)
            sent = endpoint.count(mark)
            window = endpoint.window(mark)
            sending = [sample for sample in run["rss"] if window and sample[0] <= window[2]]
            top = max(sending, key=lambda sample: sample[1]) if sending else None
            split = f"{top[1]:.0f} ({top[2]:.0f} anon + {top[3]:.0f} file)" if top else "?"
            info = json.loads(traced.read_text()) if where and traced.exists() else None
            results[n_items] = (run, info)
            print(f"| {n_items} | {sent} | {run['code']} | {run['seconds']:.0f} | {run['cpu']:.0f} | "
                  f"{run['peak_mb']:.0f} | {split} | {info['peak_mib']:.0f} | {load_average()} |" if info else
                  f"| {n_items} | {sent} | {run['code']} | {run['seconds']:.0f} | {run['cpu']:.0f} | "
                  f"{run['peak_mb']:.0f} | {split} | | {load_average()} |")
            if run["code"] != 0:
                print(f"failed: {last_line(run['output'])}")
                return
    small, large = sizes[0], sizes[-1]
    ratio = results[large][0]["peak_mb"] / results[small][0]["peak_mb"]
    print(f"\nPeak RSS at {large:,} items / at {small:,} items: **{ratio:.2f}x** (target <= 1.3). {load_average()}.")
    if where:
        for n_items in (small, large):
            info = results[n_items][1]
            if not info:
                continue
            print(f"\n### Where the traced memory is at {n_items:,} items (snapshot at {info['snapshot_mib']:.0f} MiB of "
                  f"a {info['peak_mib']:.0f} MiB traced peak)")
            print("| MiB | blocks | allocated at | code | nearest caller in binaryeval_dspy |")
            print("|---:|---:|---|---|---|")
            for row in info["top"][:15]:
                print(f"| {row['mib']:.1f} | {row['blocks']} | `{row['line']}` | `{row['code']}` | `{row['ours']}` |")
            print("\nBy file: " + ", ".join(f"{name} {mib:.1f} MiB" for name, mib in info["files"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,10000", help="item counts, smallest first")
    parser.add_argument("--questions", type=int, default=12)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--where", action="store_true", help="also run under tracemalloc (sizes: --where-sizes)")
    parser.add_argument("--where-sizes", default="100,2000", help="item counts of the tracemalloc runs")
    parser.add_argument("--without-dspy-cache", action="store_true",
                        help="also run the sizes with DSPy's response cache off (no reply stored in SQLite)")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    print(f"# Run memory benchmark (LM: the scripted endpoint of tests/fake_endpoint.py; scripted verdicts). "
          f"{load_average()} at the start.")
    with tempfile.TemporaryDirectory(prefix="bench-mem-") as tmp:
        folder = Path(tmp)
        peaks(folder, sizes, args.questions, args.concurrency, where=False)
        if args.without_dspy_cache:
            peaks(folder, sizes, args.questions, args.concurrency, where=False, uncached=True)
        if args.where:
            peaks(folder, [int(x) for x in args.where_sizes.split(",")], args.questions, args.concurrency, where=True)


if __name__ == "__main__":
    main()

"""The live engine's targets (issue 28) as ratios from one run: CPU per request, rate against the ideal, a profile.

Usage (from the repository root, the worktree's venv active):

    python benchmarks/live_engine.py                          # cpu and rate parts
    python benchmarks/live_engine.py --parts cpu --small 32 --large 320
    python benchmarks/live_engine.py --parts rate --rate-items 256 --latency 0.2
    python benchmarks/live_engine.py --parts profile --profile-items 256   # needs py-spy in the venv
    python benchmarks/live_engine.py --parts states                      # where the threads wait (py-spy)

The LM is the scripted OpenAI-compatible endpoint of tests/fake_endpoint.py (`TimedEndpoint` in
benchmarks/engines.py: its verdicts depend on the item and the question, about 1 in 4 "no"),
served by threads of this process while each ``bineval evaluate --engine live`` runs in a process
of its own (so the endpoint's CPU is not counted as the client's). Every run has a fresh DSPy
cache, distinct items (no call is answered from a cache) and 12 questions per item.

1. **cpu**: 0 s latency, 64 in flight. Two runs (``--small`` and ``--large`` items); CPU seconds
   of the ``bineval`` process (user + system, ``os.wait4``) over requests, and the marginal
   figure: (CPU of the large run - CPU of the small run) / (their difference in requests), which
   leaves out the interpreter's start, imports, the LM's set-up and the end-of-run reports.
   Target: marginal <= 1.5 CPU-ms per request (5-6 before issue 28). ``cpu-uncached``: the
   same with DSPy's response cache off (`benchmarks.run_memory.UNCACHED_MAIN`), to show what
   storing every reply in it costs.
2. **rate**: ``--latency`` s per request (0.2), 64 and then 256 in flight, ``--rate-items``
   items. Achieved rate = replies / (last reply - first request) as the endpoint saw them (no
   start-up, no imports); ideal rate = in flight / latency. Targets: achieved / ideal >= 0.85 at
   64 in flight; the 256-in-flight rate >= the 64 one.
3. **profile**: one run of ``--profile-items`` items at 0 s latency under ``py-spy record
   --gil`` (each sample is the thread that holds the interpreter lock; without ``--gil``,
   py-spy counted the 64 worker threads blocked in ``queue.get`` / ``Condition.wait`` as
   active, 40-50% of the samples, on this loaded machine); prints the functions with the most
   samples, on their own (self) and with what they call (total), as shares of the samples of
   the per-request path and of the whole process.
4. **states**: where the threads are during a run at ``--latency`` with the low ``--levels``
   in flight: six ``py-spy dump``s, counted by thread kind and top frames.

No figure here is a quality claim: the verdicts are scripted. The machine has 2 cores shared by a
team: the load average is printed beside each figure, and a ratio from one run is noisy.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.engines import (TimedEndpoint, evaluate_command, last_line, load_average, run_measured,  # noqa: E402
                                write_inputs)

QUESTIONS = 12
#: py-spy's samples per second.
RATE = 100


def cpu_per_request(folder: Path, small: int, large: int, concurrency: int, uncached: bool = False) -> None:
    from benchmarks.run_memory import UNCACHED_MAIN

    print(f"\n## 1. Client CPU per request, live engine, scripted endpoint (tests/fake_endpoint.py) at 0 s latency, "
          f"{concurrency} in flight, {QUESTIONS} questions per item{', DSPy cache off' if uncached else ''}")
    print("| items | requests at the endpoint | exit | wall s | CPU s | CPU-ms/request (whole process) | peak RSS MiB "
          "| load |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|")
    runs = []
    with TimedEndpoint(0.0) as endpoint:
        for n_items in (small, large):
            qs, items = write_inputs(folder, n_items, QUESTIONS)
            out = folder / f"cpu-{n_items}{'-uncached' if uncached else ''}"
            mark = endpoint.mark()
            command = evaluate_command(endpoint.base_url, qs, items, out, "live", concurrency,
                                       python=[sys.executable, "-c", UNCACHED_MAIN] if uncached else None)
            if uncached:  # ``python -c CODE evaluate ...``: drop the helper's ``-m module``
                at = command.index("-m")
                del command[at:at + 2]
            run = run_measured(command, out)
            sent = endpoint.count(mark)
            runs.append((sent, run))
            print(f"| {n_items} | {sent} | {run['code']} | {run['seconds']:.1f} | {run['cpu']:.2f} | "
                  f"{1000 * run['cpu'] / max(1, sent):.2f} | {run['peak_mb']:.0f} | {load_average()} |")
            if run["code"] != 0:
                print(f"failed: {last_line(run['output'])}")
                return
    (sent_a, run_a), (sent_b, run_b) = runs
    marginal = 1000 * (run_b["cpu"] - run_a["cpu"]) / max(1, sent_b - sent_a)
    fixed = run_a["cpu"] - marginal * sent_a / 1000
    print(f"\nMarginal client CPU: **{marginal:.2f} CPU-ms per request** ((CPU of {large} items - CPU of {small}) / "
          f"{sent_b - sent_a} requests; target <= 1.5); fixed cost per run about {fixed:.1f} CPU-s (start, imports, "
          f"reports). {load_average()}.")


def rate(folder: Path, n_items: int, latency: float, levels: tuple[int, ...]) -> None:
    print(f"\n## 2. Rate against the ideal, live engine, scripted endpoint (tests/fake_endpoint.py) at {latency:g} s "
          f"latency, {n_items} items x {QUESTIONS} questions")
    print("| in flight | requests | exit | span s (first request to last reply) | achieved req/s | ideal req/s "
          "| achieved / ideal | CPU-ms/request | load |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    qs, items = write_inputs(folder, n_items, QUESTIONS)
    rates = {}
    with TimedEndpoint(latency) as endpoint:
        for concurrency in levels:
            out = folder / f"rate-{concurrency}"
            mark = endpoint.mark()
            run = run_measured(evaluate_command(endpoint.base_url, qs, items, out, "live", concurrency), out)
            window = endpoint.window(mark)
            if run["code"] != 0 or window is None:
                print(f"| {concurrency} | {endpoint.count(mark)} | {run['code']} | | | | | | failed: "
                      f"{last_line(run['output'])} |")
                continue
            replies, first, last = window
            achieved = replies / (last - first)
            ideal = concurrency / latency
            rates[concurrency] = achieved
            print(f"| {concurrency} | {replies} | {run['code']} | {last - first:.2f} | {achieved:.0f} | {ideal:.0f} | "
                  f"**{achieved / ideal:.2f}** | {1000 * run['cpu'] / replies:.2f} | {load_average()} |")
        if endpoint.sample_body is not None:
            ceiling = endpoint.ceiling(levels[0], n_items * QUESTIONS)
            print(f"\nSame endpoint, a bare client (standard-library http.client threads, the first request's body "
                  f"resent, nothing parsed, nothing stored) at {levels[0]} in flight: achieved / ideal **{ceiling:.2f}**. "
                  f"That is what this endpoint, in this process, on this machine now allows. {load_average()}.")
    if len(rates) == len(levels) and len(levels) > 1:
        low, high = levels[0], levels[-1]
        print(f"\n{high} in flight / {low} in flight: **{rates[high] / rates[low]:.2f}x** the rate (target >= 1.0); "
              f"target at {low}: achieved / ideal >= 0.85. {load_average()}.")


def profile(folder: Path, n_items: int, concurrency: int, top: int, keep: Path | None) -> None:
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("\n## 3. Profile: py-spy is not installed (pip install py-spy in this venv)")
        return
    raw = (keep or folder / "profile.txt")
    print(f"\n## 3. Profile of one live run, {n_items} items x {QUESTIONS} questions, scripted endpoint at 0 s latency, "
          f"{concurrency} in flight (py-spy record --gil, {RATE} Hz: each sample is the thread holding Python's "
          "interpreter lock, so the shares are of the Python CPU the process spent)")
    qs, items = write_inputs(folder, n_items, QUESTIONS)
    out = folder / "profile-run"
    with TimedEndpoint(0.0) as endpoint:
        mark = endpoint.mark()
        command = evaluate_command(endpoint.base_url, qs, items, out, "live", concurrency,
                                   python=[spy, "record", "--gil", "--rate", str(RATE), "--format", "raw", "--output", str(raw),
                                           "--", sys.executable])
        run = run_measured(command, out)
        sent = endpoint.count(mark)
    if run["code"] != 0 or not raw.exists():
        print(f"failed ({run['code']}): {last_line(run['output'])}")
        return
    summarize_profile(raw, top, sent, run, only_sending=True)
    summarize_profile(raw, top, sent, run, only_sending=False)


def summarize_profile(raw: Path, top: int, sent: int, run: dict, *, only_sending: bool) -> None:
    """Print the `top` functions by self and total samples from py-spy's raw (collapsed) output.

    `only_sending`: only the samples of the engine's worker threads and of the thread that
    records the answers, i.e. stacks through ``ThreadedEngine`` / the plan runner (the per-request
    path), not the imports and reports of the process's start and end.
    """
    self_count: collections.Counter = collections.Counter()
    total_count: collections.Counter = collections.Counter()
    samples = 0
    everything = 0
    for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        everything += n
        frames = [_frame(f) for f in stack.split(";")]
        if only_sending and not any(("threads.py" in f or "plan_runner.py" in f or "senders.py" in f) for f in frames):
            continue
        samples += n
        self_count[frames[-1]] += n
        for frame in set(frames):
            total_count[frame] += n
    what = ("per-request path (stacks through engines/threads.py, plan_runner.py or senders.py)" if only_sending
            else "whole process (imports, set-up and reports included)")
    print(f"\n### {what}: {samples} of {everything} samples ({samples / RATE:.1f} s holding the interpreter lock at {RATE} Hz; the "
          f"run sent {sent} requests: {1000 * samples / RATE / max(1, sent):.2f} ms per request on this path; CPU of "
          f"py-spy and the process {run['cpu']:.1f} s)")
    print("| self % | function (file:line) | | total % | function (file:line) |")
    print("|---:|---|---|---:|---|")
    by_self = self_count.most_common(top)
    by_total = [kv for kv in total_count.most_common(top + 12) if not _is_frame_of_every_stack(kv[0])][:top]
    for i in range(top):
        left = f"{100 * by_self[i][1] / samples:.1f} | `{by_self[i][0]}`" if i < len(by_self) else " | "
        right = f"{100 * by_total[i][1] / samples:.1f} | `{by_total[i][0]}`" if i < len(by_total) else " | "
        print(f"| {left} | | {right} |")


_FRAME = re.compile(r"^(?P<fn>.*?) \((?P<file>.*?)(?::(?P<line>\d+))?\)$")


def _frame(text: str) -> str:
    """py-spy's ``func (path/file.py:12)`` as ``func (package/file.py:12)``, paths shortened."""
    match = _FRAME.match(text.strip())
    if not match:
        return text.strip()
    path = match.group("file")
    for marker in ("site-packages/", "binaryeval_dspy/", "lib/python3"):
        if marker in path:
            path = (marker if marker == "binaryeval_dspy/" else "") + path.split(marker, 1)[1]
            break
    return f"{match.group('fn')} ({path}{':' + match.group('line') if match.group('line') else ''})"


def _is_frame_of_every_stack(frame: str) -> bool:
    """Thread entry frames (``_bootstrap``, ``run``) that every worker stack holds: no information."""
    return frame.startswith(("_bootstrap (", "_bootstrap_inner (", "run (threading.py", "<module> ("))


def thread_states(folder: Path, n_items: int, latency: float, concurrency: int, dumps: int) -> None:
    """Where the live engine's threads are while it runs at `latency`: `dumps` ``py-spy dump
    --nonblocking`` of the ``bineval`` process, 1 s apart, once 300 requests have arrived; counts
    of (thread kind, top three frames) over all dumps."""
    import collections
    import os
    import subprocess
    import time

    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    print(f"\n## 4. Thread states, live engine, {concurrency} in flight, scripted endpoint at {latency:g} s latency "
          f"({dumps} py-spy dumps 1 s apart, {n_items} items x {QUESTIONS} questions)")
    qs, items = write_inputs(folder, n_items, QUESTIONS)
    out = folder / "states-run"
    states: collections.Counter = collections.Counter()
    with TimedEndpoint(latency) as endpoint:
        command = evaluate_command(endpoint.base_url, qs, items, out, "live", concurrency)
        env = {**os.environ, "DSPY_CACHEDIR": str(out) + ".dspy-cache", "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while endpoint.count((0, 0)) < 300 and proc.poll() is None:
                time.sleep(0.1)
            for _ in range(dumps):
                dump = subprocess.run([spy, "dump", "--nonblocking", "--pid", str(proc.pid)], capture_output=True,
                                      text=True).stdout
                for block in dump.split("\nThread ")[1:]:
                    head, *frames = block.splitlines()
                    top = " < ".join(f.strip().split(" (")[0] for f in frames[:3] if f.strip())
                    kind = ("sending thread" if "bineval-call" in head else "cache thread" if "bineval-cache" in head
                            else "other thread")
                    states[(kind, top)] += 1
                time.sleep(1.0)
        finally:
            proc.wait()
    print("| samples | thread | top frames |")
    print("|---:|---|---|")
    for (kind, top), count in states.most_common(12):
        print(f"| {count} | {kind} | `{top}` |")
    print(f"\n(A sending thread in `work` is waiting for a call to send: the plan runner on the main thread "
          f"has not handed one out.) {load_average()}.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="cpu,rate", help="comma-separated: cpu, cpu-uncached, rate, profile, states")
    parser.add_argument("--small", type=int, default=32, help="items of the small run of the cpu part")
    parser.add_argument("--large", type=int, default=320, help="items of the large run of the cpu part")
    parser.add_argument("--concurrency", type=int, default=64, help="in flight for the cpu and profile parts")
    parser.add_argument("--rate-items", type=int, default=256)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per request in the rate part")
    parser.add_argument("--levels", default="64,256", help="in-flight levels of the rate part, low first")
    parser.add_argument("--profile-items", type=int, default=256)
    parser.add_argument("--top", type=int, default=25, help="functions listed per profile table")
    parser.add_argument("--keep-profile", type=Path, default=None, help="write py-spy's raw output here")
    args = parser.parse_args()
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    print(f"# Live engine benchmark (LM: the scripted endpoint of tests/fake_endpoint.py; scripted verdicts). "
          f"{load_average()} at the start.")
    with tempfile.TemporaryDirectory(prefix="bench-live-") as tmp:
        folder = Path(tmp)
        if "cpu" in parts:
            cpu_per_request(folder, args.small, args.large, args.concurrency)
        if "cpu-uncached" in parts:
            cpu_per_request(folder, args.small, args.large, args.concurrency, uncached=True)
        if "rate" in parts:
            rate(folder, args.rate_items, args.latency, tuple(int(x) for x in args.levels.split(",")))
        if "profile" in parts:
            profile(folder, args.profile_items, args.concurrency, args.top, args.keep_profile)
        if "states" in parts:
            thread_states(folder, args.rate_items, args.latency, int(args.levels.split(",")[0]), dumps=6)


if __name__ == "__main__":
    main()

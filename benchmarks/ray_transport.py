"""The Ray engine's transport, as ratios measured in one run: throughput at 64 in flight, start-up apart.

Usage (from the repository root, with the ``ray`` extra installed):

    python benchmarks/ray_transport.py
    python benchmarks/ray_transport.py --latency 0.5 --items 64 --questions 12 --runs 3

The scripted OpenAI-compatible endpoint of tests/fake_endpoint.py runs in its own process
with a fixed latency per request (every answer "yes"); ``items x questions`` prepared
chat-completion requests (a judge-sized prompt each) go through
`binaryeval_dspy.engines.ray_data.send_requests` on a local Ray with 2 CPUs. Printed:

1. **start-up**: seconds to start Ray (`ray_session`), then the first, cold run of
   ``in_flight`` requests, which starts Ray's worker processes; both paid once per process.
2. **throughput**, per warm run: seconds, the ideal (``ceil(n / in_flight) x latency``), the
   ratio ideal / measured (target: >= 0.8), the first reply's arrival (the dataset's own
   start plus one latency), the ratio counted from the first reply (the rate once the
   dataset runs), the endpoint's most requests at once, and client CPU per request: the
   driver process and, apart, Ray's processes (workers, raylet, GCS; from /proc, Linux only).
3. **ceiling**: the same requests from a bare thread pool in this process (``requests``,
   ``in_flight`` threads, no Ray): the ratio the endpoint and this machine allow right now.

Ratios, not seconds, are the figures: this 2-core machine is shared, and its load is
printed beside them. Nothing here is a quality claim: the endpoint answers "yes" to all.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests/ holds the fake endpoint

from binaryeval_dspy.engines.ray_data import HttpTarget, PreparedRequest, ray_session, send_requests

ARTICLE = "The match ended two to one after a late goal, and the home side kept its place at the top. " * 8


def _requests(n_items: int, n_questions: int, tag: str) -> list[PreparedRequest]:
    """One judge-sized chat-completions request per (item, question)."""
    return [PreparedRequest(f"{tag}-i{item:03d}::q{question:02d}", {
        "model": "fake-x", "max_tokens": 64, "temperature": 0.0,
        "messages": [{"role": "system", "content": "Answer the question about the summary with yes or no."},
                     {"role": "user", "content": f"[[ ## article ## ]]\n{ARTICLE}\n\n[[ ## summary ## ]]\n"
                                                 f"Summary {item}.\n\n[[ ## question ## ]]\n"
                                                 f"Does the summary state point {question}?"}]})
            for item in range(n_items) for question in range(n_questions)]


def _descendant_cpu_seconds(exclude: set[int]) -> float | None:
    """User + system CPU seconds of this process's live descendants (Ray's processes), from /proc."""
    if not Path("/proc/self/stat").exists():
        return None
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        cpu[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    me, total = os.getpid(), 0.0
    for pid, seconds in cpu.items():
        ancestor = pid
        while ancestor in parents and ancestor not in (me, 0, 1) and ancestor not in exclude:
            ancestor = parents[ancestor]
        if ancestor == me and pid not in exclude:
            total += seconds
    return total


def _send(requests: list[PreparedRequest], target: HttpTarget, in_flight: int, batch_size: int,
          exclude: set[int]) -> dict[str, float]:
    """One run: seconds, first reply's arrival, driver and Ray CPU seconds; checks every reply."""
    ray_cpu = _descendant_cpu_seconds(exclude)
    cpu, started, first = time.process_time(), time.perf_counter(), None
    count = 0
    for reply in send_requests(requests, target, in_flight=in_flight, batch_size=batch_size):
        if not reply.ok:
            raise RuntimeError(f"{reply.custom_id}: {reply.error}")
        first = time.perf_counter() - started if first is None else first
        count += 1
    seconds = time.perf_counter() - started
    if count != len(requests):
        raise RuntimeError(f"{count} replies for {len(requests)} requests")
    after = _descendant_cpu_seconds(exclude)
    return {"seconds": seconds, "first": first or 0.0, "driver_cpu": time.process_time() - cpu,
            "ray_cpu": math.nan if ray_cpu is None or after is None else after - ray_cpu}


def _bare_ratio(requests: list[PreparedRequest], target: HttpTarget, in_flight: int, latency: float) -> float:
    """Ideal seconds over measured seconds for the same POSTs from `in_flight` plain threads."""
    import requests as http

    session = http.Session()
    session.mount("http://", http.adapters.HTTPAdapter(pool_maxsize=in_flight))
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=in_flight) as pool:
        list(pool.map(lambda r: session.post(target.url, json=r.body, timeout=60).raise_for_status(), requests))
    return math.ceil(len(requests) / in_flight) * latency / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency", type=float, default=0.5, help="seconds the endpoint sleeps per request")
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--questions", type=int, default=12)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3, help="warm runs measured")
    args = parser.parse_args(argv)

    proc = subprocess.Popen([sys.executable, "-m", "tests.fake_endpoint", "--latency", str(args.latency)],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        target = HttpTarget(proc.stdout.readline().strip(), api_key="sk-benchmark")
        exclude = {proc.pid}
        n = args.items * args.questions
        ideal = math.ceil(n / args.in_flight) * args.latency
        print(f"# Ray transport: {args.items} items x {args.questions} questions = {n} requests, "
              f"{args.latency:g} s per request, {args.in_flight} in flight, batch size {args.batch_size}")
        print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores\n")

        started = time.perf_counter()
        with ray_session(num_cpus=2):
            ray_start = time.perf_counter() - started
            cold = _send(_requests(1, args.in_flight, "cold"), target, args.in_flight, args.batch_size, exclude)
            print("## 1. Start-up (once per process)\n")
            print(f"- Ray start (`ray_session`): {ray_start:.1f} s")
            print(f"- first run, {args.in_flight} requests on cold workers: {cold['seconds']:.1f} s "
                  f"(one latency is {args.latency:g} s)\n")

            print("## 2. Throughput, warm workers\n")
            print("| run | seconds | ideal s | ratio to ideal | first reply s | ratio from first reply "
                  "| driver CPU ms/request | Ray CPU ms/request |")
            print("|---:|---:|---:|---:|---:|---:|---:|---:|")
            ratios, steady = [], []
            for run in range(1, args.runs + 1):
                result = _send(_requests(args.items, args.questions, f"run{run}"), target, args.in_flight,
                               args.batch_size, exclude)
                ratio = ideal / result["seconds"]
                # From the first reply on: the remaining rounds over the time they took.
                from_first = (ideal - args.latency) / (result["seconds"] - result["first"])
                ratios.append(ratio)
                steady.append(from_first)
                print(f"| {run} | {result['seconds']:.2f} | {ideal:.2f} | {ratio:.2f} | {result['first']:.2f} | "
                      f"{from_first:.2f} | {1000 * result['driver_cpu'] / n:.2f} | "
                      f"{1000 * result['ray_cpu'] / n:.2f} |")
            stop = time.perf_counter()
        ray_stop = time.perf_counter() - stop
        print(f"\nmedian ratio to ideal {statistics.median(ratios):.2f}, from the first reply "
              f"{statistics.median(steady):.2f} (target: >= 0.8); Ray shutdown {ray_stop:.1f} s\n")

        print("## 3. Ceiling: the same requests from a bare thread pool (no Ray)\n")
        bare = _bare_ratio(_requests(args.items, args.questions, "bare"), target, args.in_flight, args.latency)
        print(f"ratio to ideal {bare:.2f}")
        print(f"\nload average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    finally:
        proc.kill()


if __name__ == "__main__":
    main()

"""The Ray engine on a running cluster of one raylet, then two (issue 28): rate after start-up, time to the
first request, and the same results as the live engine.

Usage (from the repository root, the worktree's venv active, the ``ray`` extra installed):

    python benchmarks/ray_cluster.py                                # 256 items x 12 questions, 0 s latency
    python benchmarks/ray_cluster.py --items 128 --latency 0.05 --concurrency 64
    python benchmarks/ray_cluster.py --items 768 --endpoint threads   # the endpoint of the earlier runs

The LM is a scripted OpenAI-compatible endpoint (verdicts of `benchmarks.engines.scripted_verdict`:
they depend on the item and the question, about 1 in 4 "no"), which records when each request
arrives and is answered: by default (``--endpoint asyncio``) benchmarks/scripted_server.py, a bare
asyncio HTTP/1.1 server in a process of its own (0.1-0.35 CPU-ms per request against 0.5-1.0 for
the other: the endpoint must not be what the two-raylet ratio measures); with ``--endpoint
threads``, tests/fake_endpoint.py served by threads of this process (`TimedEndpoint`), as before.
Both give the same replies (tests/engines/test_scripted_server.py).

1. ``bineval evaluate --engine live`` on the items: the reference results.
2. A cluster on this machine: ``ray start --head --num-cpus 1`` (its own temp folder, token
   authentication with a fresh token in the environment of its processes only, no dashboard,
   usage statistics off), then ``bineval evaluate --engine ray --ray-address HOST:PORT``.
3. A second raylet joins it (``ray start --address HOST:PORT --num-cpus 1``), and the same run
   again (another model name, so nothing comes from the first run's cache).
4. Every process of the cluster is killed by pid (the processes with files open in the cluster's
   temp folder, `binaryeval_dspy.engines.ray_session.clean_up_session`), not with ``ray stop``,
   which stops every Ray on the machine, other people's included.

Per run it prints: requests at the endpoint; the rate from the first request a worker sent
(replies / (last reply - that request), as the endpoint saw them; the driver answers the first
call itself, before joining, to settle the request form, and that request is left out), and the
rate over the later half of the workers' requests (their count / (last reply - the first of
them)): a fresh worker now sends before DSPy is loaded, so the first rate has the workers'
start-up inside it, and the second is the rate after start-up that the ratio uses (each joined
raylet is first left to settle: its processes below 0.1 core); the time from
joining the cluster to the first request a worker sent (endpoint clock: the worker's first request
less the driver's first reply less the time the engine notes from that reply to joined) and from
the process's start to it; client CPU of the driver; the CPU milliseconds per request that the Ray
workers (summed), the driver, the scripted endpoint, this benchmark's sampler thread and Ray's
own processes (raylets, GCS server, agents) spent over the later half (the rate's window), read
from ``/proc`` every 0.2 s (`CpuSampler`), with the cores busy meanwhile (``/proc/stat``, every
process) and how much of that was not ours (other users of the machine); the requests waiting at
the endpoint, averaged over that window (near 0: the endpoint is not the limit); and the differences from the live run in verdicts, statuses, scores and summary
counts (`benchmarks.engines.comparable`). Then the two-raylet rate / the one-raylet rate, and the
most this machine allows for it from the one-raylet run's CPU per request: one worker process
is one core at most, so with ``w`` (workers), ``d`` (driver) and ``e`` (endpoint) CPU-ms per
request on ``n`` cores, two raylets / one <= min(2, n w / (w + d + e)) (printed also with Ray's
own processes and the sampler in the sum). Targets: >= 1.7x; first
request <= 5 s after joining; 0 differences.

Note that this machine has 2 cores shared with everything else running on it: two raylets of one
CPU each can only run faster than one when a second core is free for the second worker (the load
average is printed beside each run). No figure here is a quality claim: the verdicts are scripted.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.engines import (TimedEndpoint, comparable, differences, evaluate_command, last_line,  # noqa: E402
                                load_average, run_measured, write_inputs)
from benchmarks.scripted_server import ScriptedServer  # noqa: E402


#: A gap between two requests arriving longer than this (s) counts as a pause (no request in flight
#: was answered and none sent: e.g. between one task's block and the next).
PAUSE = 0.25
#: Seconds between two readings of the processes' CPU times (`CpuSampler`).
SAMPLE_EVERY = 0.2
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | str) -> float | None:
    """User + system CPU seconds of a process so far (``/proc/<pid>/stat``), None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICK


class CpuSampler:
    """Reads the CPU times of the Ray workers of a cluster, of the ``bineval`` driver (found by its
    output folder on its command line) and of this process (the scripted endpoint's threads), every
    `SAMPLE_EVERY` s, so that the CPU each spent inside the rate window can be told apart."""

    def __init__(self, cluster: Cluster, out: Path, endpoint_pid: int | None = None) -> None:
        import threading

        self.cluster, self.marker = cluster, str(out).encode()
        self.endpoint_pid = endpoint_pid  # None: the endpoint's threads are in this process
        self.own = 0.0  # CPU s of this sampler's thread (left out of this process's figure)
        self.samples: dict[str, list[tuple[float, float]]] = {}  # "worker <pid>" / "driver" / "endpoint"
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _kind(self, pid: int) -> str | None:
        command = _cmdline(pid)
        if command.startswith(b"ray::") and b"Agent" not in command:  # a worker names itself ray::<task>
            return f"worker {pid}"
        if self.marker in command and b"evaluate" in command:
            return "driver"
        return f"ray {pid}" if command else None  # the raylets, the GCS server, agents, monitors

    def _run(self) -> None:
        known: dict[int, str | None] = {}
        listed = float("-inf")
        while not self.stopped.is_set():
            now = time.monotonic()
            if now - listed >= 1.0:  # listing a cluster's processes reads every process's open files
                listed = now
                for pid in self.cluster.processes():
                    if not (known.get(pid) or "").startswith(("worker", "driver")):  # a worker renames itself
                        known[pid] = self._kind(pid)
                if "driver" not in known.values():
                    for pid in (int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()):
                        if pid not in known and self.marker in _cmdline(pid):
                            known[pid] = self._kind(pid)
            for pid, kind in known.items():
                used = cpu_seconds(pid) if kind else None
                if used is not None:
                    self.samples.setdefault(kind, []).append((now, used))
            self.samples.setdefault("machine", []).append((now, busy_core_seconds()))
            self.own = time.thread_time()  # this thread's CPU (listing processes, reading /proc)
            self.samples.setdefault("sampler", []).append((now, self.own))
            if self.endpoint_pid is None:  # this process, less what this thread spent
                self.samples.setdefault("endpoint", []).append((now, (cpu_seconds("self") or 0.0) - self.own))
            else:
                self.samples.setdefault("endpoint", []).append((now, cpu_seconds(self.endpoint_pid) or 0.0))
            self.stopped.wait(SAMPLE_EVERY)

    def __enter__(self) -> CpuSampler:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.thread.join()

    def between(self, start: float, end: float) -> dict[str, float]:
        """CPU seconds each kind of process spent from `start` to `end` (monotonic clock): workers
        summed, driver, endpoint (the scripted server's process, or this process less the sampler's
        own thread: its other threads are idle meanwhile)."""
        spent = {"workers": 0.0, "driver": 0.0, "endpoint": 0.0, "sampler": 0.0, "ray": 0.0, "machine": 0.0}
        for kind, samples in self.samples.items():
            before = [cpu for t, cpu in samples if t <= start]
            upto = [cpu for t, cpu in samples if t <= end] or [samples[0][1]]
            # a worker started inside the window counts from 0 (its start-up is in the window)
            base = before[-1] if before else (0.0 if kind.startswith("worker") else samples[0][1])
            spent[kind.split(" ")[0].replace("worker", "workers")] += max(0.0, upto[-1] - base)
        return spent


def busy_core_seconds() -> float:
    """CPU seconds all of this machine's cores spent busy since boot, whoever used them
    (``/proc/stat``: user, nice, system, irq and softirq; not idle, iowait, or steal)."""
    user, nice, system, _idle, _iowait, irq, softirq = (
        int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8])
    return (user + nice + system + irq + softirq) / _TICK


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Cluster:
    """A Ray cluster of `raylets` started with ``ray start`` on this machine; killed by pid on exit."""

    def __init__(self, folder: Path) -> None:
        self.temp_dir = tempfile.mkdtemp(prefix="bench-ray-", dir="/tmp")  # short: Ray's socket paths
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
                    "RAY_USAGE_STATS_ENABLED": "0", "DSPY_CACHEDIR": str(folder / "ray-dspy-cache"),
                    "PYTHONPATH": str(ROOT)}
        self.raylets = 0

    def add_raylet(self) -> float:
        """Start one more raylet of one CPU (the first is the head); returns its start's seconds."""
        common = ["--num-cpus", "1", "--object-store-memory", str(256 * 2**20), "--disable-usage-stats"]
        if self.raylets == 0:
            command = ["ray", "start", "--head", "--port", str(self.port), "--node-ip-address", "127.0.0.1",
                       "--include-dashboard", "false", "--temp-dir", self.temp_dir, *common]
        else:
            command = ["ray", "start", "--address", self.address, "--node-ip-address", "127.0.0.1",
                       "--temp-dir", self.temp_dir, *common]
        started = time.perf_counter()
        proc = subprocess.run([str(Path(sys.executable).with_name(command[0])), *command[1:]], env=self.env,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {(proc.stdout + proc.stderr)[-2000:]}")
        self.raylets += 1
        self.wait_for_cpus(self.raylets)
        return time.perf_counter() - started

    def settle(self, quiet: float = 0.1, timeout: float = 60.0) -> float:
        """Wait until the cluster's processes together use less than `quiet` of a core over a
        second (a joined raylet's agents import for seconds after it registers); returns the
        seconds waited (`timeout` at most)."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            pids = self.processes()
            before = sum(cpu_seconds(pid) or 0.0 for pid in pids)
            time.sleep(1.0)
            if sum(cpu_seconds(pid) or 0.0 for pid in pids) - before < quiet:
                break
        return time.monotonic() - started

    def wait_for_cpus(self, cpus: int, timeout: float = 120.0) -> None:
        """Wait until the cluster reports `cpus` CPUs (a joined raylet has registered)."""
        code = ("import ray, sys, time\n"
                f"ray.init(address={self.address!r}, logging_level='ERROR', log_to_driver=False)\n"
                f"deadline = time.monotonic() + {timeout}\n"
                f"while ray.cluster_resources().get('CPU', 0) < {cpus} and time.monotonic() < deadline:\n"
                "    time.sleep(0.5)\n"
                "print(ray.cluster_resources().get('CPU', 0))\n")
        proc = subprocess.run([sys.executable, "-c", code], env=self.env, capture_output=True, text=True)
        found = proc.stdout.strip().splitlines()[-1:] or ["?"]
        if found[0] in ("?", "") or float(found[0]) < cpus:
            raise RuntimeError(f"the cluster did not reach {cpus} CPUs: {(proc.stdout + proc.stderr)[-1500:]}")

    def processes(self) -> list[int]:
        from binaryeval_dspy.engines.ray_session import session_processes

        return session_processes(self.temp_dir)

    def stop(self) -> int:
        """Kill every process of this cluster by pid (SIGKILL; see the module docstring) and remove its folder."""
        from binaryeval_dspy.engines.ray_session import clean_up_session

        return clean_up_session(self.temp_dir)


def joined_seconds(output: str) -> float | None:
    """Seconds from the driver's first request answered to Ray joined: the engine's notes "first
    request answered by the driver in X s" and "Ray: joined ADDR in Y s" (both counted from the
    run's first call), Y - X."""
    text = " ".join(output.split())
    first = re.search(r"first request answered by the driver in ([0-9.]+) s", text)
    found = re.search(r"Ray: joined \S+ in ([0-9.]+) s", text)
    return float(found.group(1)) - float(first.group(1)) if found and first else None


def first_answer_note(output: str) -> str:
    found = re.search(r"the first ([0-9.]+) s after Ray was ready", " ".join(output.split()))
    return f"{found.group(1)} s" if found else "?"


def ray_run(endpoint: TimedEndpoint | ScriptedServer, cluster: Cluster, qs: Path, items: Path, out: Path,
            concurrency: int, model: str) -> dict:
    mark = endpoint.mark()
    command = evaluate_command(endpoint.base_url, qs, items, out, "ray", concurrency, "--ray-address",
                               cluster.address, model=model)
    spawned = time.monotonic()
    with CpuSampler(cluster, out, getattr(endpoint, "pid", None)) as sampler:
        run = run_measured(command, out, env={k: cluster.env[k] for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN",
                                                                           "RAY_USAGE_STATS_ENABLED")})
    run["sent"] = endpoint.count(mark)
    window = endpoint.window(mark, skip=1)  # the driver's own first request left out
    arrivals = endpoint.arrivals_since(mark)
    replies = endpoint.replies_since(mark)
    gaps = [b - a for a, b in zip(arrivals[1:], arrivals[2:])]  # between the workers' requests
    run["paused"] = sum(g for g in gaps if g > PAUSE)
    run["pauses"] = sum(1 for g in gaps if g > PAUSE)
    run["rate"] = window[0] / (window[2] - window[1]) if window and window[2] > window[1] else None
    later = arrivals[1:]
    last_reply = replies[-1] if replies else None
    half = later[len(later) // 2:]  # the workers' later half of the requests: no start-up in it
    run["steady"] = len(half) / (last_reply - half[0]) if half and last_reply and last_reply > half[0] else None
    if run["steady"]:
        run["waiting"] = mean_waiting(arrivals, replies, half[0], last_reply)
    if run["steady"]:  # the CPU inside the same window as the rate: after start-up
        spent = sampler.between(half[0], last_reply)
        run["per_request_ms"] = {kind: 1000 * cpu / len(half) for kind, cpu in spent.items()}
        seconds = last_reply - half[0]
        ours = sum(cpu for kind, cpu in spent.items() if kind != "machine")
        run["cores"] = (spent["machine"] / seconds, max(0.0, spent["machine"] - ours) / seconds)
    joined = joined_seconds(run["output"])
    first_reply = replies[0] if replies else None
    arrivals = arrivals[:2]
    run["join"] = joined
    # the join instant on the endpoint's clock: the driver's first reply, then the engine's join
    run["join_to_first"] = (arrivals[1] - first_reply - joined
                            if len(arrivals) == 2 and joined is not None and first_reply is not None else None)
    run["start_to_first"] = arrivals[1] - spawned if len(arrivals) == 2 else None
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=256)
    parser.add_argument("--questions", type=int, default=12)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per request at the scripted endpoint")
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight across the cluster's tasks")
    parser.add_argument("--endpoint", choices=("asyncio", "threads"), default="asyncio",
                        help="asyncio: benchmarks/scripted_server.py in its own process (default); threads: "
                             "TimedEndpoint, tests/fake_endpoint.py's http.server in this process (the runs before)")
    args = parser.parse_args()
    serving = ScriptedServer(args.latency) if args.endpoint == "asyncio" else TimedEndpoint(args.latency)
    print(f"# Ray cluster benchmark (LM: the scripted endpoint of tests/fake_endpoint.py; scripted verdicts): "
          f"{args.items} items x {args.questions} questions, {args.latency:g} s latency, {args.concurrency} in flight, "
          f"endpoint: {args.endpoint}. "
          f"{load_average()} at the start.\n")
    print("| run | exit | requests | rate from the first worker request req/s | rate over the later half req/s "
          "| driver's first reply -> joined s "
          "| join -> first worker request s "
          "| process start -> first worker request s | engine's note: first answer after ready | driver CPU s "
          "| CPU-ms per request over the later half: workers, driver, endpoint (benchmark's CPU sampler); Ray's raylets, GCS, agents "
          "| cores busy over the later half (all processes; not ours) | requests waiting at the endpoint (mean, later half) "
          f"| pauses > {PAUSE:g} s between requests (count, total s) | vs live | load |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---|---:|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="bench-raycl-") as tmp, serving as endpoint:
        folder = Path(tmp)
        qs, items = write_inputs(folder, args.items, args.questions)
        out = folder / "live"
        mark = endpoint.mark()
        endpoint_pid = getattr(endpoint, "pid", "self")
        endpoint_cpu = cpu_seconds(endpoint_pid) or 0.0
        live = run_measured(evaluate_command(endpoint.base_url, qs, items, out, "live", args.concurrency), out)
        endpoint_cpu = (cpu_seconds(endpoint_pid) or 0.0) - endpoint_cpu
        window = endpoint.window(mark)
        if live["code"] != 0 or window is None:
            print(f"live failed: {last_line(live['output'])}")
            return
        reference = comparable(out)
        live_rate = window[0] / (window[2] - window[1])
        print(f"| live (reference), one process | 0 | {endpoint.count(mark)} | {live_rate:.0f} | | | | | | "
              f"{live['cpu']:.1f} | endpoint over the whole run: {1000 * endpoint_cpu / max(1, endpoint.count(mark)):.3f} "
              f"| | | | reference | {load_average()} |")
        cluster = Cluster(folder)
        rates: dict[int, float] = {}
        costs: dict[int, dict[str, float] | None] = {}
        try:
            for raylets in (1, 2):
                start = cluster.add_raylet()
                settled = cluster.settle()
                print(f"<!-- raylet {raylets} started in {start:.1f} s, quiet {settled:.1f} s later; cluster "
                      f"processes: {len(cluster.processes())} -->")
                out = folder / f"ray-{raylets}"
                run = ray_run(endpoint, cluster, qs, items, out, args.concurrency, model=f"fake-x-{raylets}-raylets")
                if run["code"] != 0:
                    print(f"| ray, {raylets} raylet(s) | {run['code']} | {run['sent']} | | | | | | | | | | failed: "
                          f"{last_line(run['output'])} | {load_average()} |")
                    continue
                rates[raylets] = run["steady"]
                costs[raylets] = run.get("per_request_ms")
                same = differences(comparable(out), reference)

                def fmt(value: float | None, digits: int = 1) -> str:
                    return "?" if value is None else f"{value:.{digits}f}"

                print(f"| ray, {raylets} raylet(s) of 1 CPU | {run['code']} | {run['sent']} | {fmt(run['rate'], 0)} | {fmt(run['steady'], 0)} | "
                      f"{fmt(run['join'], 2)} | {fmt(run['join_to_first'], 2)} | {fmt(run['start_to_first'])} | "
                      f"{first_answer_note(run['output'])} | {run['cpu']:.1f} | {per_request(run.get('per_request_ms'))} | "
                      f"{busy_cores(run.get('cores'))} | {fmt(run.get('waiting'), 2)} | "
                      f"{run['pauses']}, {run['paused']:.1f} | "
                      f"{same} | {load_average()} |")
        finally:
            killed = cluster.stop()
            left = cluster.processes()
            print(f"\nCluster stopped: {killed} process(es) killed by pid, {len(left)} left.")
    if rates.get(1) and rates.get(2):
        print(f"\nTwo raylets / one raylet, rate over the later half of the requests: **{rates[2] / rates[1]:.2f}x** "
              "(target >= 1.7). "
              f"{load_average()}.")
    if costs.get(1):
        w, d, e = (costs[1][kind] for kind in ("workers", "driver", "endpoint"))
        r = costs[1]["ray"] + costs[1]["sampler"]  # Ray's own processes and this benchmark's sampler
        cores = os.cpu_count() or 1
        print(f"\nWhat this machine allows: one raylet's worker (one process) runs at most 1 / {w:.2f} CPU-ms; two "
              f"workers, the driver and the endpoint share {cores} cores, {w + d + e:.2f} CPU-ms per request, so two "
              f"raylets / one <= min(2, {cores} x {w:.2f} / {w + d + e:.2f}) = "
              f"**{min(2.0, cores * w / (w + d + e)):.2f}x** on an otherwise idle machine (one-raylet run's figures); "
              f"with Ray's own processes and the sampler ({r:.2f}) on the same cores: "
              f"{min(2.0, cores * w / (w + d + e + r)):.2f}x. "
              f"One driver can take the replies of {w / d:.1f} such workers before it is the limit." if d else "")

def mean_waiting(arrivals: list[float], replies: list[float], start: float, end: float) -> float:
    """Requests at the endpoint not yet answered (arrived, reply not yet written), averaged over
    time from `start` to `end`: near 0 when the endpoint answers each request as it comes (it is
    not the limit), near the requests in flight when the clients wait for it."""
    events = sorted([(t, 1) for t in arrivals] + [(t, -1) for t in replies])
    waiting, area, last = 0, 0.0, start
    for t, step in events:
        if t > end:
            break
        if t > start:
            area += waiting * (t - last)
            last = t
        waiting += step
    return area / (end - start) if end > start else 0.0


def busy_cores(cores: tuple[float, float] | None) -> str:
    return "?" if cores is None else f"{cores[0]:.2f}; {cores[1]:.2f}"


def per_request(costs: dict[str, float] | None) -> str:
    if not costs:
        return "?"
    return (", ".join(f"{costs[kind]:.2f}" for kind in ("workers", "driver", "endpoint"))
            + f" ({costs['sampler']:.2f}); Ray's own processes {costs['ray']:.2f}")


if __name__ == "__main__":
    main()

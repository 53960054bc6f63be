"""The engines side by side on one scripted endpoint: time, ratio to ideal, requests, client CPU, same results.

Usage (from the repository root; the ``ray`` engine needs the ``ray`` extra):

    python benchmarks/engines.py                       # 64 items x 12 questions, 0.5 s per request
    python benchmarks/engines.py --items 16 --latency 0.2 --engines live,ray

One scripted OpenAI-compatible endpoint (tests/fake_batch_endpoint.py, in this process
while each ``bineval`` runs in its own: it answers live chat completions and OpenAI's Batch API) with a fixed latency per request
answers every judge request with a verdict that depends on the item and the question (so
results differ between items and a mix-up would show). The same ``bineval evaluate``
command runs once per engine, each into its own run directory, as a subprocess:

* ``live``: ``--concurrency C`` calls in flight through DSPy;
* ``batch``: the provider batch API (the fake completes a batch on its first poll; its
  time is not comparable with a real provider's, so no ratio is printed for it);
* ``ray``: Ray Data with ``--concurrency C``; its start-up (ray.init, and its workers'
  first start: the first reply's wait less one request's latency) is reported separately
  from the time it spent sending, from the engine's own notes.

Per engine it prints: seconds (the run's own time as the command prints it, from its plan
to its last stored item, without the process's imports; for ``ray`` also without Ray's
start-up, printed beside it), ideal seconds (requests x latency / C), their ratio,
requests the endpoint received, client CPU per request (user + system CPU of the
``bineval`` process and its children, over requests), and whether ``results.jsonl``
verdicts and statuses and ``summary.json`` scores are identical to the live engine's
(timings, usage and ids of runs aside). Then the live engine's start-up: CPU seconds the
``bineval`` process spent from its start to the endpoint's first request, and whether
the first requests went out together (no request held back behind another).

No figure here is a quality claim: the verdicts are scripted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def scripted_verdict(body: dict) -> str | dict:
    """The fake endpoint's reply: a verdict fixed by the item text and the question (about 1 in 4 'no')."""
    from tests.fake_endpoint import format_fields, request_field

    question = request_field(body, "question")
    output = request_field(body, "output")
    digest = hashlib.sha256(f"{output}|{question}".encode()).digest()[0]
    verdict = "no" if digest < 64 else "yes"
    return format_fields(body, {"verdict": verdict, "explanation": f"scripted {verdict}"})


def write_inputs(folder: Path, n_items: int, n_questions: int) -> tuple[Path, Path]:
    questions = {"task_prompt": "Summarize the article.", "dimensions": ["coverage", "style"],
                 "questions": [{"id": f"q{i:02d}", "dimension": "coverage" if i % 2 else "style",
                                "text": f"Does the summary meet requirement {i}?"} for i in range(1, n_questions + 1)]}
    qs_path = folder / "questions.json"
    qs_path.write_text(json.dumps(questions), encoding="utf-8")
    items_path = folder / "items.jsonl"
    article = "The match ended two to one after a late goal. " * 20
    items_path.write_text("".join(json.dumps({"id": f"item-{i:04d}", "input": article + f" Item {i}.",
                                              "output": f"Summary number {i}: a late goal decided it."}) + "\n"
                                  for i in range(n_items)), encoding="utf-8")
    return qs_path, items_path


def run_engine(engine: str, base_url: str, qs: Path, items: Path, out: Path, concurrency: int) -> dict:
    """One ``bineval evaluate`` with `engine`; returns seconds, CPU seconds, exit code and output."""
    command = [sys.executable, "-m", "binaryeval_dspy.cli.main", "evaluate", str(qs), str(items),
               "--lm", base_url, "--lm-model", "fake-x", "--out", str(out), "--engine", engine,
               "--concurrency", str(concurrency)]
    env = {**os.environ, "DSPY_CACHEDIR": str(out) + ".dspy-cache", "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if engine == "batch" and proc.returncode == 75:  # submitted; the fake completes on the first poll
        proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"seconds": seconds, "cpu": cpu, "code": proc.returncode, "output": proc.stdout + proc.stderr}


def comparable(out: Path) -> dict:
    """What must be equal across engines: per item its status, verdicts and scores; the summary's
    scores and counts (`SUMMARY_COUNTS`). Timings, usage and run ids are left aside.

    Shape: ``{"items": {item_id: {...}}, "summary": {...}}``; read line by line (a 10,000-item
    run's results are not held as text).
    """
    rows = {}
    with (out / "results.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            card = row.get("score_card") or {}
            rows[row["item_id"]] = {
                "status": row.get("status"),
                "verdicts": sorted((v["question_id"], v["verdict"], v.get("error")) for v in row.get("verdicts", [])),
                "scores": card.get("dimension_scores"),
                "overall": card.get("overall"),
            }
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return {"items": rows, "summary": {k: summary.get(k) for k in SUMMARY_COUNTS}}


#: The summary.json entries two engines must agree on (scores per dimension with their yes / no /
#: unparsed / error counts, items by status, questions answered, calls, failed calls).
SUMMARY_COUNTS = ("items", "dimensions", "items_by_status", "items_incomplete", "questions_answered",
                  "questions_total", "lm_calls", "failed_calls", "replies_cut")


def differences(result: dict, reference: dict) -> str:
    """How `result` differs from `reference` (both from `comparable`): "identical", or counts."""
    items = set(result["items"]) | set(reference["items"])
    diffs = [i for i in items if result["items"].get(i) != reference["items"].get(i)]
    fields = [k for k in SUMMARY_COUNTS if result["summary"].get(k) != reference["summary"].get(k)]
    if not diffs and not fields:
        return f"identical ({len(items)} items, 0 differences)"
    return f"{len(diffs)} items differ" + (f"; summary differs in {', '.join(fields)}" if fields else "")


def run_seconds(output: str) -> float | None:
    """The run's own time as ``bineval evaluate`` prints it ("... judged now, ...; 7.2 s."): from
    the plan to the last stored item, without the process's imports and the LM's set-up."""
    import re

    found = re.findall(r"already done before; ([0-9.]+) s\.", " ".join(output.split()))
    return float(found[-1]) if found else None


def ray_timings(output: str) -> tuple[float, float, float] | None:
    """(Ray start-up s, seconds from the first request to the last reply, seconds to the first
    reply) as the ray engine's notes print them, or None."""
    import re

    text = " ".join(output.split())
    start = re.search(r"Ray started in ([0-9.]+) s", text)
    sent = re.search(r"Ray Data: [0-9]+ replies in ([0-9.]+) s, the first after ([0-9.]+) s", text)
    if not start or not sent:
        return None
    return float(start.group(1)), float(sent.group(1)), float(sent.group(2))


def live_startup(base_url: str, qs: Path, items: Path, out: Path, requests_before: int, fetch_count) -> str:
    """CPU seconds from process start to the endpoint's first request, for the live engine."""
    command = [sys.executable, "-m", "binaryeval_dspy.cli.main", "evaluate", str(qs), str(items),
               "--lm", base_url, "--lm-model", "fake-x", "--out", str(out), "--engine", "live",
               "--concurrency", "8", "--limit", "2"]
    env = {**os.environ, "DSPY_CACHEDIR": str(out) + ".dspy-cache", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ticks = os.sysconf("SC_CLK_TCK")
    cpu_at_first = None
    while proc.poll() is None:
        if fetch_count() > requests_before:
            try:
                fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
                cpu_at_first = (int(fields[11]) + int(fields[12])) / ticks
            except (OSError, IndexError, ValueError):
                pass
            break
        time.sleep(0.005)
    proc.wait()
    return "not measured" if cpu_at_first is None else f"{cpu_at_first:.2f} CPU-s"


# --------------------------------------------------------------------------- shared by the benchmarks


class TimedEndpoint:
    """The scripted endpoint (tests/fake_endpoint.py, `scripted_verdict` replies), recording when
    each chat-completions request arrives and is answered (``time.monotonic()`` seconds), in this
    process (threads), while ``bineval`` runs in its own. With ``keep_bodies=False`` request
    bodies are not kept (a 10,000-item run sends 120,000): only counts and times.
    """

    def __init__(self, latency: float = 0.0, *, keep_bodies: bool = False) -> None:
        import threading

        from tests.fake_endpoint import FakeEndpoint

        timed = self

        class _Endpoint(FakeEndpoint):
            def _admit(self, body: dict) -> tuple[int, int]:
                index, generation = super()._admit(body)
                if timed.sample_body is None:
                    timed.sample_body = body
                if not keep_bodies:
                    with self._lock:
                        self._requests[index] = None  # counted, not kept
                return index, generation

        self._lock = threading.Lock()
        self.arrivals: list[float] = []
        self.replies: list[float] = []
        self.sample_body: dict | None = None  # the first request's body (for `ceiling`)
        self.latency = latency

        def arrive(_body: dict) -> float:
            with timed._lock:
                timed.arrivals.append(time.monotonic())
            return timed.latency

        def reply(body: dict):
            value = scripted_verdict(body)
            with timed._lock:
                timed.replies.append(time.monotonic())
            return value

        self.endpoint = _Endpoint(reply=reply, latency=arrive)

    def __enter__(self) -> TimedEndpoint:
        self.endpoint.start()
        return self

    def __exit__(self, *exc) -> None:
        self.endpoint.close()

    @property
    def base_url(self) -> str:
        return self.endpoint.base_url

    def mark(self) -> tuple[int, int]:
        """Where the records stand now (pass to `span` / `count`)."""
        with self._lock:
            return len(self.arrivals), len(self.replies)

    def count(self, since: tuple[int, int]) -> int:
        """Requests arrived since `since`."""
        return self.mark()[0] - since[0]

    def arrivals_since(self, since: tuple[int, int]) -> list[float]:
        """The instants requests arrived at, from the `since` mark on."""
        with self._lock:
            return self.arrivals[since[0]:]

    def replies_since(self, since: tuple[int, int]) -> list[float]:
        """The instants requests were answered at, from the `since` mark on."""
        with self._lock:
            return self.replies[since[1]:]

    def window(self, since: tuple[int, int], skip: int = 0) -> tuple[int, float, float] | None:
        """(replies, first arrival, last reply) of the requests since `since`, leaving out the
        first `skip` arrivals (e.g. the Ray driver's own first request), or None without any."""
        with self._lock:
            arrivals = self.arrivals[since[0] + skip:]
            replies = self.replies[since[1] + skip:]
        if not arrivals or not replies:
            return None
        return len(replies), arrivals[0], replies[-1]

    def ceiling(self, concurrency: int, requests: int) -> float:
        """Achieved / ideal rate of a bare client: `requests` POSTs of the first body received
        (standard-library ``http.client``, one keep-alive connection per thread, nothing parsed),
        `concurrency` at a time. What this endpoint and machine allow, with no client work.

        Raises:
            RuntimeError: no request was received yet (there is no body to send).
        """
        if self.sample_body is None:
            raise RuntimeError("no request received yet")
        mark = self.mark()
        post_bare(self.base_url, json.dumps(self.sample_body), concurrency=concurrency,
                  per_thread=max(1, requests // concurrency))
        replies, first, last = self.window(mark)
        return replies / (last - first) / (concurrency / self.latency) if self.latency else replies / (last - first)


def post_bare(base_url: str, body: str, *, concurrency: int, per_thread: int) -> float:
    """POST `body` to ``<base_url>/chat/completions`` `per_thread` times from each of
    `concurrency` threads (standard-library ``http.client``, one keep-alive connection per
    thread, replies read but not parsed): a client doing no work of its own. Returns the
    wall seconds it took."""
    import http.client
    import threading
    from urllib.parse import urlsplit

    url = urlsplit(base_url)

    def worker() -> None:
        connection = http.client.HTTPConnection(url.hostname, url.port)
        for _ in range(per_thread):
            connection.request("POST", url.path.rstrip("/") + "/chat/completions", body,
                               {"Content-Type": "application/json"})
            connection.getresponse().read()
        connection.close()

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def load_average() -> str:
    """The machine's 1, 5 and 15 minute load averages, as ``load 5.1 / 4.8 / 3.9`` (2 cores here)."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.1f} / {five:.1f} / {fifteen:.1f} ({os.cpu_count()} CPUs)"


def evaluate_command(base_url: str, qs: Path, items: Path, out: Path, engine: str, concurrency: int,
                     *extra: str, python: list[str] | None = None, model: str = "fake-x") -> list[str]:
    """The ``bineval evaluate`` command line of a benchmark run (`python` replaces the interpreter,
    e.g. to run it under py-spy; `model`: the model name sent, part of every cache key)."""
    return [*(python or [sys.executable]), "-m", "binaryeval_dspy.cli.main", "evaluate", str(qs), str(items),
            "--lm", base_url, "--lm-model", model, "--out", str(out), "--engine", engine,
            "--concurrency", str(concurrency), "--id-field", "id", *extra]


def run_measured(command: list[str], out: Path, env: dict | None = None, *, sample_rss: float | None = None) -> dict:
    """Run `command` (a ``bineval`` process) and measure that one process with ``os.wait4``.

    Returns ``{"code", "seconds" (wall, from spawn to exit), "cpu" (user + system CPU seconds of
    the process and the children it waited for), "peak_mb" (its peak RSS, ru_maxrss, MiB),
    "output" (stdout + stderr text), "rss" (with `sample_rss`: ``(time.monotonic(), RSS, anonymous
    RSS, file-backed RSS)`` in MiB every `sample_rss` seconds, from ``/proc/<pid>/status``; file-backed
    is mapped files, e.g. SQLite's memory-mapped cache database)}``. A fresh DSPy
    cache folder beside `out` (nothing is answered from an earlier run's cache).
    """
    env = {**os.environ, "DSPY_CACHEDIR": str(out) + ".dspy-cache", "PYTHONPATH": str(ROOT), **(env or {})}
    log = Path(str(out) + ".log")
    started = time.perf_counter()
    with log.open("w", encoding="utf-8") as sink:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)
        samples: list[tuple[float, float, float, float]] = []
        sampler = None
        if sample_rss:
            import threading

            def sample() -> None:
                status_file = Path(f"/proc/{proc.pid}/status")
                while proc.returncode is None:
                    try:
                        fields = dict(line.split(":", 1) for line in status_file.read_text().splitlines() if ":" in line)
                        rss, anon, file = (int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "RssAnon", "RssFile"))
                    except (OSError, KeyError, ValueError):
                        break  # gone (or a zombie: its memory is freed)
                    samples.append((time.monotonic(), rss, anon, file))
                    time.sleep(sample_rss)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
        try:
            _pid, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
        if sampler is not None:
            sampler.join()
    seconds = time.perf_counter() - started
    return {"code": proc.returncode, "seconds": seconds, "cpu": usage.ru_utime + usage.ru_stime,
            "peak_mb": usage.ru_maxrss / 1024, "output": log.read_text(encoding="utf-8", errors="replace"),
            "rss": samples}


def last_line(output: str) -> str:
    """The last non-empty line of a failed run's output, for a table cell."""
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][:160] if lines else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--questions", type=int, default=12)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--engines", default="live,batch,ray")
    args = parser.parse_args()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    from tests.fake_batch_endpoint import BatchScript, FakeBatchEndpoint

    endpoint = FakeBatchEndpoint(scripts=[], reply=scripted_verdict, latency=args.latency)
    endpoint.default_script = BatchScript()
    with endpoint:
        base_url = endpoint.base_url

        def received() -> int:
            return len(endpoint.requests)  # chat completions received (live, or inside a batch)

        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            qs, items = write_inputs(folder, args.items, args.questions)
            calls = args.items * args.questions
            ideal = -(-calls // args.concurrency) * args.latency
            print(f"## Engines: {args.items} items x {args.questions} questions = {calls} requests, "
                  f"{args.latency:g} s per request, concurrency {args.concurrency} (scripted endpoint, "
                  "scripted verdicts)\n")
            print("| engine | exit | seconds | ideal s | ratio to ideal | requests received | client CPU ms/request "
                  "| same results as live |")
            print("|---|---:|---:|---:|---:|---:|---:|---|")
            reference = None
            for engine in engines:
                out = folder / f"run-{engine}"
                before = received()
                run = run_engine(engine, base_url, qs, items, out, args.concurrency)
                sent = received() - before
                if run["code"] != 0:
                    print(f"| {engine} | {run['code']} | {run['seconds']:.1f} | | | {sent} | | failed: "
                          f"{run['output'].strip().splitlines()[-1][:120] if run['output'].strip() else ''} |")
                    continue
                same = "reference"
                result = comparable(out)
                if reference is None and engine == "live":
                    reference = result
                elif reference is not None:
                    same = differences(result, reference)
                seconds = run_seconds(run["output"]) or run["seconds"]
                startup = None
                timings = ray_timings(run["output"]) if engine == "ray" else None
                if timings is not None:  # Ray's start and its workers' first start (first reply less one request)
                    warmup = max(0.0, timings[2] - args.latency)
                    startup = timings[0] + warmup
                    seconds = timings[1] - warmup
                ratio = "n/a (batch)" if engine == "batch" else f"{ideal / seconds:.2f}"
                note = f" (+{startup:.1f} s Ray and worker start-up)" if startup else ""
                print(f"| {engine} | {run['code']} | {seconds:.1f}{note} | {ideal:.1f} | {ratio} | {sent} | "
                      f"{1000 * run['cpu'] / max(1, sent):.1f} | {same} |")
            before = received()
            startup = live_startup(base_url, qs, items, folder / "startup", before, received)
            print(f"\nLive engine start-up: {startup} from process start to the first request (target <= 2).")


if __name__ == "__main__":
    main()

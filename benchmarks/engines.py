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
    """What must be equal across engines: per item its status, verdicts and scores; the summary's scores."""
    rows = {}
    for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        rows[row["item_id"]] = {
            "status": row.get("status"),
            "verdicts": sorted((v["question_id"], v["verdict"]) for v in row.get("verdicts", [])),
            "scores": (row.get("score_card") or {}).get("dimensions"),
            "overall": (row.get("score_card") or {}).get("overall"),
        }
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    scores = {k: v for k, v in summary.items() if k in ("dimensions", "overall", "items_by_status")}
    return {"items": rows, "summary": scores}


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
                    diffs = [i for i in result["items"] if result["items"][i] != reference["items"].get(i)]
                    same = ("identical" if not diffs and result["summary"] == reference["summary"]
                            else f"{len(diffs)} items differ")
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

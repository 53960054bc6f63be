"""CPU cost of importing the library and of `bineval --help`, against issue 14's targets.

Each measurement runs in a fresh Python subprocess, so nothing is cached in the measuring
process; the child reports its own CPU time (user + system, `time.process_time`) and this
script takes the median of `--repeat` runs. "Beyond dspy" subtracts the median CPU time of
`import dspy` alone from the same measurement with dspy imported first.

Printed: the CPU seconds of each step, the target, and the ratio to the target (under 1.00
meets it). `--install-size` also creates a fresh virtual environment in a temporary folder,
runs `pip install <repo>` (core dependencies only, no extras), and prints the size of its
site-packages and whether nltk, matplotlib and rouge_score were installed (slow: minutes).

Usage:
    python benchmarks/import_cost.py [--repeat 3] [--install-size]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The child runs `setup` untimed, then prints the CPU seconds that `step` used.
_CHILD = """\
import time, sys
{setup}
start = time.process_time()
{step}
print(repr(time.process_time() - start))
"""

_HELP_STEP = """\
import sys
sys.argv = ["bineval", "--help"]
from binaryeval_dspy.cli.main import main
try:
    import contextlib, io
    with contextlib.redirect_stdout(io.StringIO()):
        main()
except SystemExit:
    pass
"""

# (label, setup that is not timed, timed step, target CPU seconds or None)
STEPS = [
    ("import dspy", "", "import dspy", None),
    ("import binaryeval_dspy (beyond dspy)", "import dspy", "import binaryeval_dspy", 0.4),
    ("import binaryeval_dspy (alone, dspy not imported first)", "",
     "import binaryeval_dspy", None),
    ("from binaryeval_dspy import BinEval, evaluate_items (beyond dspy)", "import dspy",
     "from binaryeval_dspy import BinEval, evaluate_items", None),
    ("bineval --help (whole process)", "", _HELP_STEP, 0.5),
]


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return env


def _interpreter_cpu() -> float:
    """CPU seconds of starting and stopping an empty interpreter (counted in `bineval --help`)."""
    before = os.times()
    subprocess.run([sys.executable, "-c", "pass"], check=True, env=_child_env())
    after = os.times()
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


def measure(setup: str, step: str, whole_process: bool) -> float:
    """CPU seconds of `step` in a fresh interpreter (after an untimed `setup`).

    With `whole_process`, the whole child's CPU time (as `resource.getrusage(RUSAGE_CHILDREN)`
    sees it, through `os.times`) is returned instead, interpreter start-up included: what a
    user pays for `bineval --help`.
    """
    code = _CHILD.format(setup=setup, step=step)
    before = os.times()
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                          env=_child_env(), cwd=ROOT)
    after = os.times()
    if whole_process:
        return (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return float(done.stdout.strip().splitlines()[-1])


def install_size() -> None:
    """Install the repository's core dependencies into a fresh venv and print what it weighs."""
    with tempfile.TemporaryDirectory(prefix="bineval-install-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
        print(f"pip install {ROOT} into {venv} (core only) ...", flush=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", str(ROOT)], check=True)
        site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip()
        if shutil.which("du"):
            size = subprocess.run(["du", "-sh", site], check=True, capture_output=True, text=True).stdout.split()[0]
        else:
            size = f"{sum(f.stat().st_size for f in Path(site).rglob('*') if f.is_file()) / 1e6:.0f}M"
        print(f"core install: site-packages {size}")
        for module in ("nltk", "matplotlib", "rouge_score"):
            probe = f"import importlib.util as u; print(u.find_spec({module!r}) is not None)"
            found = subprocess.run([str(python), "-c", probe], check=True, capture_output=True,
                                   text=True).stdout.strip()
            print(f"  {module}: {'present' if found == 'True' else 'absent'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median is printed)")
    parser.add_argument("--install-size", action="store_true", help="also measure a fresh core install")
    args = parser.parse_args(argv)

    startup = statistics.median(_interpreter_cpu() for _ in range(args.repeat))
    print(f"{'step':<70} {'CPU s':>7} {'target':>7} {'ratio':>6}")
    for label, setup, step, target in STEPS:
        # "beyond dspy" steps import dspy untimed first, so the child times only the rest
        seconds = statistics.median(measure(setup, step, label.startswith("bineval")) for _ in range(args.repeat))
        target_text, ratio = (f"{target:.2f}", f"{seconds / target:.2f}") if target else ("", "")
        print(f"{label:<70} {seconds:>7.2f} {target_text:>7} {ratio:>6}", flush=True)
    print(f"(an empty interpreter costs {startup:.2f} s CPU here; included in `bineval --help`; "
          f"median of {args.repeat} runs)")
    if args.install_size:
        install_size()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

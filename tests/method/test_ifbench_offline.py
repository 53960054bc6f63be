"""The IFBench checkers need no NLTK data directory, no download and no network."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import socket
import nltk

def refuse(*args, **kwargs):
    raise AssertionError("a network connection or an NLTK download was attempted")

socket.socket.connect = refuse
socket.create_connection = refuse
nltk.download = refuse
nltk.data.path[:] = []  # no nltk_data folder anywhere

from binaryeval_dspy.ifbench import check_loose, check_strict
from tests.method.test_ifbench_constraints import CASES

for instruction_id, (kwargs, follows, breaks) in sorted(CASES.items()):
    prompt = {"instruction_id_list": [instruction_id], "kwargs": [kwargs]}
    assert check_strict(prompt, follows).follow_all_instructions, instruction_id
    assert not check_strict(prompt, breaks).follow_all_instructions, instruction_id
    check_loose(prompt, breaks)  # the loose variants run the same code paths
print("checked", len(CASES))
"""


def test_all_checkers_run_with_network_and_nltk_downloads_blocked(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-c", SCRIPT], check=False, cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "NLTK_DATA": str(tmp_path / "no-nltk-data")},
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.strip() == "checked 58"

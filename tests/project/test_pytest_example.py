"""docs/pytest.md's example works from an empty folder, as the page says (issue 32).

tests/project/test_docs.py runs every page in a copy of the repository, where paths such as
``examples/...`` resolve; a user saves the example test file in a folder of their own. Here
the page's blocks run, in order, in an empty folder, with the docs tests' scripted LM.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import dspy
import pytest

import binaryeval_dspy
import binaryeval_dspy.lm
import binaryeval_dspy.lm.factory
from binaryeval_dspy.cli import common
from tests.project.test_docs import (
    read_blocks,
    run_shell_block,
    scripted_make_lm,
    scripted_python_make_lm,
    write_block_file,
)

PAGE = "docs/pytest.md"


def test_the_pytest_page_runs_from_an_empty_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    empty = tmp_path / "my-project"
    empty.mkdir()
    monkeypatch.chdir(empty)
    for name in [n for n in os.environ if n.startswith("BINEVAL_")]:
        monkeypatch.delenv(name)
    monkeypatch.setattr(common, "make_lm", scripted_make_lm)
    for module in (binaryeval_dspy, binaryeval_dspy.lm, binaryeval_dspy.lm.factory):
        monkeypatch.setattr(module, "make_lm", scripted_python_make_lm)
    # the docs tests ran the same file name from another folder in this process: forget that module,
    # or pytest refuses the new file as an "import file mismatch" (and later tests the same way)
    sys.modules.pop("test_summaries", None)
    lm, adapter = dspy.settings.lm, dspy.settings.adapter
    ran = 0
    try:
        for block in read_blocks(PAGE):
            if block.file is not None:
                write_block_file(block)
            elif block.runs_here and block.lang == "bash":
                run_shell_block(block, monkeypatch)
                ran += 1
    finally:
        dspy.configure(lm=lm, adapter=adapter)
        sys.modules.pop("test_summaries", None)  # ours: the next run of the page imports its own
    assert ran, f"{PAGE} has no shell block to run"
    runs = sorted(p.parent.name for p in (empty / ".bineval" / "pytest").glob("*/run"))
    assert runs == ["test_summaries.py__test_summary_with_the_fixture", "test_summaries.py__test_summary_with_the_helper"]
    assert (empty / ".bineval" / "pytest" / "test_summaries.py__test_summary_with_the_helper" / "run" /
            "view.html").is_file()  # the page's `bineval view` of the stored run

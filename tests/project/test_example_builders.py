"""Generated example files match their builders (issue 25): a committed file that its
builder would write differently is stale, and this test names the command that rebuilds it.

A builder is any ``examples/**/build_*.py``; it exposes ``OUT`` (the file it writes) and
``render()`` (that file's text), and writes it when run as a script.
"""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILDERS = sorted((ROOT / "examples").rglob("build_*.py"))


def test_there_are_builders_to_check():
    assert ROOT / "examples" / "audit" / "build_items.py" in BUILDERS


@pytest.mark.parametrize("builder", BUILDERS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_each_generated_example_file_is_what_its_builder_writes(builder):
    module = runpy.run_path(str(builder))  # not as __main__: nothing is written
    out, render = Path(module["OUT"]), module["render"]
    built = render()
    assert built.strip(), f"{builder.name} built an empty file"
    committed = out.read_text(encoding="utf-8") if out.is_file() else ""
    assert committed == built, (f"{out.relative_to(ROOT)} is stale: run `python {builder.relative_to(ROOT)}` "
                                "and commit the result")

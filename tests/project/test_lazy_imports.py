"""Heavy modules load on first use: `import binaryeval_dspy` and `bineval --help` import no DSPy.

Checked in fresh interpreters (``sys.modules`` after the import), not by timing; the CPU
times are printed by ``benchmarks/import_cost.py``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest

from binaryeval_dspy.cli.main import LAZY_COMMANDS, cli

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("dspy", "litellm", "scipy", "pandas", "numpy", "matplotlib", "nltk", "datasets")


def _modules_after(code: str) -> set[str]:
    """Top-level modules imported by `code` in a fresh interpreter."""
    script = code + "\nimport sys\nprint(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return set(done.stdout.split())


def test_import_binaryeval_dspy_imports_nothing_heavy():
    loaded = _modules_after("import binaryeval_dspy")
    assert "binaryeval_dspy" in loaded
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_judging_names_do_not_import_pandas_or_scipy():
    loaded = _modules_after("from binaryeval_dspy import BinEval, evaluate_items")
    assert "dspy" in loaded
    assert not loaded & {"pandas", "scipy", "matplotlib", "nltk"}, sorted(loaded & {"pandas", "scipy"})


def test_bineval_help_imports_no_command_module():
    code = """
import contextlib, io, sys
sys.argv = ["bineval", "--help"]
from binaryeval_dspy.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main()
    except SystemExit as exc:
        assert exc.code in (0, None), exc.code
assert "evaluate" in out.getvalue() and "benchmark-questions" in out.getvalue()
assert not [m for m in sys.modules if m.startswith("binaryeval_dspy.cli.") and m.endswith("_command")]
"""
    loaded = _modules_after(code)
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_help_lists_the_same_short_help_as_the_commands_themselves():
    """The table's summaries are the commands' own: `bineval --help` reads as when all were loaded."""
    ctx = click.Context(cli, info_name="bineval")
    for name, (_module, _attribute, summary) in LAZY_COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None and command.name == name
        own = (command.help or "").split("\f")[0].split("\n\n")[0]
        assert " ".join(own.split()) == summary, f"LAZY_COMMANDS[{name!r}]'s summary differs from its help"
        for limit in (45, 80, 200):
            assert click.Command(name, help=summary).get_short_help_str(limit) == command.get_short_help_str(limit)
    assert set(cli.list_commands(ctx)) == set(LAZY_COMMANDS)


@pytest.mark.parametrize("args", [["--version"], ["evaluate", "--help"], ["batch", "--help"]])
def test_lazy_commands_still_run(args):
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert result.output.strip()

"""A missing extra (ifbench, bench) stops the feature that needs it with one line naming the extra.

A module is made "not installed" with ``sys.modules[name] = None``, which makes every
``import name`` raise ImportError, as when the package is absent.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from binaryeval_dspy.errors import BinEvalError, MissingExtraError
from binaryeval_dspy.extras import require

ROOT = Path(__file__).resolve().parents[2]


def _one_line(exc: BaseException, extra: str) -> str:
    text = str(exc)
    assert "\n" not in text, text
    assert f"'{extra}' extra" in text, text
    assert f"pip install 'binaryeval-dspy[{extra}]'" in text, text
    return text


def _block(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)


def test_require_returns_the_module_or_a_project_error(monkeypatch):
    assert require("json", "ifbench", "Anything") is json
    _block(monkeypatch, "json")
    with pytest.raises(MissingExtraError) as info:
        require("json", "bench", "Some feature")
    assert isinstance(info.value, BinEvalError) and isinstance(info.value, ImportError)
    assert _one_line(info.value, "bench").startswith("Some feature: the 'bench' extra is not installed")


def _emoji_check():
    from binaryeval_dspy.ifbench import check_strict

    prompt = {"key": "k", "instruction_id_list": ["format:emoji"], "kwargs": [{}]}
    return check_strict(prompt, "Hello there. Fine!")


# blocked module -> a call whose checker code needs it
IFBENCH_USES = {
    "emoji": _emoji_check,
    "syllapy": lambda: _text_units().syllable_count("banana"),
    "nltk": lambda: _text_units().word_tokens("Hello there. Fine!"),
    "punkt": lambda: _text_units().punkt_sentences("Hello there. Fine!"),
    "textblob_aptagger": lambda: _text_units().first_token_tag(["Run", "now", "."]),
}


def _text_units():
    from binaryeval_dspy.ifbench import text_units

    return text_units


def _clear_model_caches() -> None:
    units = _text_units()
    for cached in (units._punkt_splitter, units._treebank_tokenize, units._tagger):
        cached.cache_clear()


@pytest.mark.parametrize("blocked", sorted(IFBENCH_USES))
def test_ifbench_checkers_name_the_ifbench_extra(monkeypatch, blocked):
    _clear_model_caches()  # the NLTK models are cached once loaded
    _block(monkeypatch, blocked, *[m for m in list(sys.modules) if m.startswith(blocked + ".")])
    try:
        with pytest.raises(MissingExtraError) as info:
            IFBENCH_USES[blocked]()
    finally:
        _clear_model_caches()
    assert _one_line(info.value, "ifbench").startswith("IFBench checkers:")


def test_the_library_imports_and_judges_without_any_extra():
    """Without ifbench and bench: every public name imports; checkers that need no extra run."""
    code = """
import sys
for name in ("emoji", "syllapy", "nltk", "punkt", "textblob_aptagger", "langdetect", "matplotlib",
             "rouge_score"):
    sys.modules[name] = None
import binaryeval_dspy
for name in binaryeval_dspy.__all__:
    getattr(binaryeval_dspy, name)
import binaryeval_dspy.cli.evaluate_command, binaryeval_dspy.cli.benchmark_command
prompt = {"key": "k", "instruction_id_list": ["count:numbers"], "kwargs": [{"N": 2}]}
assert binaryeval_dspy.check_strict(prompt, "I have 2 cats and 3 dogs.").follow_all_instructions
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"


def test_language_check_without_langdetect_fails_at_load(monkeypatch, tmp_path):
    from binaryeval_dspy.schemas import CheckSpec

    assert CheckSpec(name="language", params={"expected": "en"}).name == "language"
    _block(monkeypatch, "langdetect")
    with pytest.raises(MissingExtraError) as info:
        CheckSpec(name="language", params={"expected": "en"})
    assert _one_line(info.value, "ifbench").startswith("The 'language' check:")


def test_evaluate_with_a_language_check_and_no_langdetect_exits_with_one_line(monkeypatch, tmp_path):
    from binaryeval_dspy.cli.main import cli

    qs = tmp_path / "qs.json"
    qs.write_text(json.dumps({"dimensions": ["style"], "questions": [
        {"id": "q1", "dimension": "style", "text": "Is it in English?",
         "check": {"name": "language", "params": {"expected": "en"}}}]}), encoding="utf-8")
    items = tmp_path / "items.jsonl"
    items.write_text('{"id": "a", "input": "x", "output": "This is an English sentence."}\n', encoding="utf-8")
    _block(monkeypatch, "langdetect")
    result = CliRunner().invoke(cli, ["evaluate", str(qs), str(items), "--out", str(tmp_path / "r")])
    assert result.exit_code != 0
    assert "'ifbench' extra" in result.output and "pip install 'binaryeval-dspy[ifbench]'" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "r" / "results.jsonl").exists()


def test_rouge_baseline_names_the_bench_extra(monkeypatch):
    from binaryeval_dspy.programs.rouge import RougeL

    _block(monkeypatch, "rouge_score", "rouge_score.rouge_scorer")
    with pytest.raises(MissingExtraError) as info:
        RougeL()
    assert _one_line(info.value, "bench").startswith("The ROUGE-L baseline:")

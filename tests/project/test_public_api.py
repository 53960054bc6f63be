"""The public surface: every name of `binaryeval_dspy.__all__` resolves, lazily, and type checkers see it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import binaryeval_dspy

ROOT = Path(__file__).resolve().parents[2]

# Every name exported before the exports were grouped by concept (issue 14); none may go.
EXPORTED_BEFORE = {
    "BinEval", "BinEvalError", "BinEvalMetric", "BinEvalOptimizer", "BinaryQuestion", "CheckResult",
    "GEvalJudge", "IFBenchResult", "InputError", "ItemResult", "LMConfigError", "LMHandle", "NamedVerdict",
    "OptimizationHistory", "PromptUpdater", "QuestionGenerator", "QuestionSet", "QuestionSetError",
    "QuestionVerdict", "Requirement", "RougeL", "RunDirectory", "RunStateError", "ScoreCard", "UniEvalJudge",
    "VerdictJudge", "VerdictLabel", "VerdictOutput", "VerdictPolicy", "affine_scale", "check_loose",
    "check_strict", "evaluate_items", "ifbench_accuracy", "kendall", "load_csv", "load_hub_items",
    "load_ifbench", "load_items", "load_jsonl", "load_qags", "load_scored_items", "load_summeval",
    "load_topical_chat", "make_lm", "pearson", "register_check", "rejudge_items", "score_verdicts", "spearman",
    "summary_level_correlation", "system_level_correlation", "turn_level_correlation",
}


def test_every_name_of_all_resolves_to_its_module_object():
    names = binaryeval_dspy.__all__
    assert len(names) == len(set(names)), "a name is listed twice in __all__"
    assert EXPORTED_BEFORE <= set(names), sorted(EXPORTED_BEFORE - set(names))
    assert set(names) == set(binaryeval_dspy._EXPORTS), "__all__ and the lazy table differ"
    for name in names:
        value = getattr(binaryeval_dspy, name)
        module = sys.modules[binaryeval_dspy._EXPORTS[name]]
        assert value is getattr(module, name), name
    assert set(names) <= set(dir(binaryeval_dspy))


def test_subpackages_are_reachable_as_attributes_and_unknown_names_fail():
    assert binaryeval_dspy.checks.register_check is binaryeval_dspy.register_check
    assert "checks" in dir(binaryeval_dspy) and "scoring" in dir(binaryeval_dspy)
    try:
        binaryeval_dspy.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")


def test_type_checkers_see_every_exported_name():
    """The `if TYPE_CHECKING:` block imports exactly the names of __all__ (what IDEs resolve)."""
    tree = ast.parse((ROOT / "binaryeval_dspy" / "__init__.py").read_text(encoding="utf-8"))
    blocks = [node for node in tree.body if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING"]
    assert len(blocks) == 1
    imported = {}
    for node in ast.walk(blocks[0]):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                imported[alias.asname or alias.name] = node.module
    assert set(imported) == set(binaryeval_dspy.__all__)
    for name, module in imported.items():
        assert module == binaryeval_dspy._EXPORTS[name], name


def test_import_keeps_the_offline_price_map_setting():
    code = ("import os; os.environ.pop('LITELLM_LOCAL_MODEL_COST_MAP', None); import binaryeval_dspy; "
            "print(os.environ['LITELLM_LOCAL_MODEL_COST_MAP'])")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True"

"""The bundled audit example (examples/audit/) loads and runs end to end on a scripted LM.

The scripted picks check the wiring only; what the code checks find is real (they read
the repository), so the assertions tie the verdicts to those findings, not to fixed labels.
"""

import json
from pathlib import Path

import dspy
import pytest

from binaryeval_dspy.checks import load_checks_module
from binaryeval_dspy.data.items import load_items
from binaryeval_dspy.programs.verdict_judge import VerdictJudge
from binaryeval_dspy.schemas.question_set import QuestionSet
from tests.fakes import scripted_lm
from tests.verdict_scripts import VerdictScript

ROOT = Path(__file__).resolve().parents[2]
AUDIT = ROOT / "examples" / "audit"


@pytest.fixture(scope="module")
def audit_set() -> QuestionSet:
    load_checks_module(str(AUDIT / "audit_checks.py"))
    return QuestionSet.load(AUDIT / "questions.json")


def test_audit_question_set_declares_keep_improve_retire(audit_set):
    assert audit_set.verdict_policy.names == ["Keep", "Improve", "Retire"]
    assert len(audit_set.code_checked) == 6 and len(audit_set.questions) == 9
    assert [q.id for q in audit_set.questions if q.fatal] == ["paths-exist"]


def test_audit_items_are_real_repository_docs():
    items = load_items(AUDIT / "items.jsonl", id_field="id")
    assert len(items) >= 6  # the README's sections and the example notes
    for item in items:
        assert (ROOT / item.path).is_file()
        if item.section:
            assert item.output.startswith(f"## {item.section}")


def test_audit_runs_and_the_fatal_rule_follows_the_path_check(audit_set, monkeypatch):
    monkeypatch.chdir(ROOT)  # path_exists resolves repository paths from the working directory
    items = load_items(AUDIT / "items.jsonl", id_field="id")
    lm, _ = scripted_lm(VerdictScript(labels=["Keep"]))
    judge = VerdictJudge(audit_set, pressure_test="never")
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        preds = {item.item_id: judge(input=item.input, output=item.output) for item in items}
    for item_id, pred in preds.items():
        by_id = {v.question_id: v for v in pred.verdicts}
        assert all(by_id[q.id].source == "code" for q in audit_set.code_checked)
        paths_ok = by_id["paths-exist"].verdict == "yes"
        assert pred.named_verdict.label == ("Keep" if paths_ok else "Improve"), item_id
    elided = ("## Output\n\nEach line of `results.jsonl` looks like this:\n\n```json\n"
              '{"item_id": "a", "score_card": {...}}\n```\n')  # a JSON sample that elides values
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        sample = judge(input=items[0].input, output=elided).named_verdict
    assert "json-samples-parse" in sample.grounds
    row = json.loads((AUDIT / "items.jsonl").read_text().splitlines()[0])
    assert set(row) == {"id", "path", "section", "input", "output"}

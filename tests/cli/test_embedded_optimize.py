"""`bineval optimize` end to end on the embedded SmolLM2-135M model, on a tiny synthetic split.

Checks the plumbing with a real model (the BinEval optimizer and COPRO run, results and
history are saved and the report names the LM). It says nothing about optimization quality.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet

pytest.importorskip("llama_cpp", reason="the embedded model needs the `local` extra")
pytestmark = pytest.mark.embedded


def test_optimize_human_mode_with_bineval_and_copro(tmp_path: Path):
    data = tmp_path / "data" / "summeval"
    data.mkdir(parents=True)
    rows = []
    for doc in range(12):
        for system, summary, rating in (("M1", "The team won the cup final 2-0.", 4.0),
                                        ("M2", "The cup the the final won.", 1.0)):
            rows.append({"doc_id": f"d{doc}", "system_id": system, "system_output": summary,
                         "source": "The home team won the cup final 2-0 on Sunday after two late goals.",
                         "scores": {"fluency": rating}})
    (data / "summeval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    questions = QuestionSet(task_prompt="Summarize the article.", dimensions=["fluency"], questions=[
        BinaryQuestion(id="fluency-01", dimension="fluency", text="Is every sentence grammatical?")])
    qs_path = questions.save(tmp_path / "qs.json")
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, [
        "optimize", "--mode", "human", "--compare", "bineval,copro", "--data-dir", str(tmp_path / "data"),
        "--questions", str(qs_path), "--limit", "1", "--iterations", "1", "--copro-breadth", "2",
        "--copro-depth", "1", "--max-tokens", "96", "--llama-threads", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    for name in ("unoptimized", "bineval", "copro"):
        saved = json.loads((out / name / "result.json").read_text())
        assert "SmolLM2" in saved["lm"] and len(saved["test_records"]) == 1
    assert json.loads((out / "copro" / "result.json").read_text())["compile_lm_calls"] >= 3
    history = json.loads((out / "bineval" / "history.json").read_text())
    assert history["iterations"] and "SmolLM2" in history["lms"]["target"]
    assert "SmolLM2" in (out / "comparison.md").read_text()

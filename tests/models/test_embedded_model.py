"""Integration tests on the embedded SmolLM2-135M model (llama.cpp), on 2 real SummEval items.

They check the plumbing end to end with a real model: every question gets a parsed
verdict and a non-empty explanation. They say nothing about judging quality.
"""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.data.items import load_items
from binaryeval_dspy.lm.factory import make_lm
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.schemas.question_set import QuestionSet

pytest.importorskip("llama_cpp", reason="the embedded model needs the `local` extra")
pytestmark = pytest.mark.embedded

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "summeval"


@pytest.fixture(scope="module")
def three_questions(tmp_path_factory) -> Path:
    """The bundled question set cut to one question in each of three dimensions (keeps CI short)."""
    full = QuestionSet.load(EXAMPLE / "questions.json")
    keep = {"consistency-01", "relevance-01", "fluency-01"}
    small = full.model_copy(update={
        "questions": [q for q in full.questions if q.id in keep],
        "dimensions": ["consistency", "fluency", "relevance"],
    })
    return small.save(tmp_path_factory.mktemp("qs") / "questions.json")


def test_api_on_two_real_items(three_questions):
    handle = make_lm("local", cache=False)
    program = BinEval(QuestionSet.load(three_questions), scale=(1, 5))
    items = load_items(EXAMPLE / "items.jsonl", input_field="source", output_field="summary", id_field="id", limit=2)
    with handle.context():
        for item in items:
            pred = program(input=item.input, output=item.output)
            assert len(pred.verdicts) == 3
            for verdict in pred.verdicts:
                assert verdict.verdict in ("yes", "no"), verdict
                assert verdict.explanation.strip(), verdict
            assert 1.0 <= pred.score_card.scaled_overall <= 5.0


def test_cli_on_two_real_items(tmp_path, three_questions):
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, [
        "evaluate", str(three_questions), str(EXAMPLE / "items.jsonl"), "--input-field", "source",
        "--output-field", "summary", "--id-field", "id", "--limit", "2", "--scale", "1", "5", "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["item_id"] for r in rows] == ["dm-test-8764fb95/M11", "dm-test-8764fb95/M13"]
    for row in rows:
        assert all(v["verdict"] in ("yes", "no") and v["explanation"].strip() for v in row["verdicts"])
        assert row["fields"]["human_scores"]["coherence"] > 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert "SmolLM2-135M-Instruct" in manifest["lm"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["items"] == 2 and "SmolLM2" in summary["lm"]
    assert "SmolLM2" in result.output

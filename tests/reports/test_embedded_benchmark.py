"""One short benchmark on the embedded SmolLM2-135M model: 2 Topical-Chat items, every method.

It checks the plumbing with a real model (parsed answers, logprob-weighted baseline
scores, a report naming the LM); it says nothing about judging quality.
"""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli

pytest.importorskip("llama_cpp", reason="the embedded model needs the `local` extra")
pytestmark = [pytest.mark.embedded]  # the benchmark data ships with the package

SHIPPED = Path(__file__).resolve().parents[2] / "binaryeval_dspy" / "benchmark_data" / "tasks" / "topical_chat"


@pytest.fixture
def tiny_tasks(tmp_path: Path) -> Path:
    """The shipped Topical-Chat task cut to two dimensions and one question each."""
    folder = tmp_path / "tasks" / "topical_chat"
    folder.mkdir(parents=True)
    rubric = json.loads((SHIPPED / "rubric.json").read_text())
    rubric["dimensions"] = {d: rubric["dimensions"][d] for d in ("naturalness", "groundedness")}
    (folder / "rubric.json").write_text(json.dumps(rubric))
    questions = json.loads((SHIPPED / "questions.manual.json").read_text())
    questions["questions"] = [q for q in questions["questions"] if q["id"] in ("naturalness-01", "groundedness-01")]
    questions["dimensions"] = ["naturalness", "groundedness"]
    (folder / "questions.manual.json").write_text(json.dumps(questions))
    return tmp_path / "tasks"


def test_benchmark_on_two_topical_chat_items(tmp_path, tiny_tasks, no_dspy_cache):
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, [
        "benchmark", "topical_chat", "--lm", "local", "--limit", "2", "--tasks-dir", str(tiny_tasks),
        "--out", str(out), "--bootstrap", "20", "--no-figures"])
    assert result.exit_code == 0, result.output
    bineval = [json.loads(line) for line in (out / "bineval" / "results.jsonl").read_text().splitlines()]
    assert len(bineval) == 2
    assert all(v["verdict"] in ("yes", "no") for r in bineval for v in r["verdicts"])
    for method in ("geval", "unieval"):
        rows = [json.loads(line) for line in (out / method / "results.jsonl").read_text().splitlines()]
        assert len(rows) == 2
        for row in rows:
            assert set(row["scores"]) == {"naturalness", "groundedness"}
            assert all(s is not None and 0 <= s <= 1 for s in row["scores"].values())
            # the embedded engine returns logprobs, so the scores are probability-weighted
            sources = {d["source"] for d in row["details"].values()}
            assert sources == ({"expected"} if method == "geval" else {"p_yes"})
            assert row["usage"]["lm_calls"] == 2
    report = (out / "report.md").read_text()
    assert "LM: SmolLM2-135M-Instruct" in report and "Turn-level Spearman" in report

"""Issue 23, point 6: an item is ``scored`` only if it has a score.

An item judged but without a single readable answer was counted as ``scored`` (4 scored
for 3 scores). It is now ``unscored`` in results.jsonl, summary.json, summary.md and the
console, and in verdict mode and the benchmark's method results alike. Scripted LMs only
(plumbing, never a model's judgment).
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.meta_eval.method_run import MethodItemResult
from binaryeval_dspy.runs.run_summary import summarize_results, summary_markdown
from binaryeval_dspy.schemas.item_result import ItemResult
from binaryeval_dspy.schemas.named_verdict import NamedVerdict
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.scoring import score_verdicts
from tests.cli.test_cli import fake_lm  # noqa: F401  (fixture)
from tests.fakes import field_value


def script(system: str, user: str):
    """yes to every question, except about the output 'garbled': a reply with no verdict in it."""
    if "garbled" in field_value(user, "output"):
        return "I cannot tell from this text."
    return {"explanation": "scripted yes", "verdict": "yes"}


def test_an_item_without_a_readable_answer_is_unscored_everywhere(tmp_path, small_question_set, fake_lm):  # noqa: F811
    fake_lm(script)
    items = tmp_path / "items.jsonl"
    outputs = {"a": "fine", "b": "fine too", "c": "also fine", "d": "garbled"}
    items.write_text("".join(json.dumps({"id": k, "source": "article", "summary": v}) + "\n"
                             for k, v in outputs.items()), encoding="utf-8")
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["evaluate", str(small_question_set.save(tmp_path / "qs.json")), str(items),
                                      "--input-field", "source", "--output-field", "summary", "--id-field", "id",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = {r["item_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert rows["d"]["status"] == "unscored" and rows["d"]["score_card"]["overall"] is None
    assert [v["verdict"] for v in rows["d"]["verdicts"]] == ["unparsed"] * 3
    assert all("status" not in rows[k] for k in "abc")  # scored: left out, as before
    summary = json.loads((out / "summary.json").read_text())
    assert summary["items_by_status"] == {"scored": 3, "unscored": 1, "empty_output": 0, "error": 0}
    overall = next(d for d in summary["dimensions"] if d["dimension"] == "overall")
    assert overall["items_scored"] == summary["items_by_status"]["scored"]  # the count says what the mean is over
    assert "scored: 3, unscored: 1" in (out / "summary.md").read_text()
    assert "scored: 3, unscored: 1" in " ".join(result.output.split())


def _result(verdicts: list[QuestionVerdict], small_question_set, **extra) -> dict:
    card = score_verdicts(verdicts, small_question_set)
    return {"item_id": "x", "output_hash": "h", "question_set_hash": small_question_set.content_hash,
            "score_card": card.model_dump(mode="json"), "verdicts": [v.model_dump(mode="json") for v in verdicts],
            **extra}


def test_results_written_before_unscored_existed_are_read_truthfully(small_question_set):
    unparsed = [QuestionVerdict(question_id=q.id, verdict="unparsed", raw_answer="?", error="no verdict")
                for q in small_question_set.questions]
    old_line = json.dumps(_result(unparsed, small_question_set))  # no "status": read as scored before
    result = ItemResult.model_validate_json(old_line)
    assert result.status == "unscored" and not result.scored and result.complete
    one_yes = [unparsed[0], QuestionVerdict(question_id=unparsed[1].question_id, verdict="yes"), unparsed[2]]
    assert ItemResult.model_validate(_result(one_yes, small_question_set)).status == "scored"
    summary = summarize_results([result], lm="scripted")
    assert summary.items_by_status["unscored"] == 1 and summary.items_by_status["scored"] == 0
    assert "Items by status: 1 items: scored: 0, unscored: 1" in summary_markdown(summary)


def test_verdict_mode_without_a_decided_label_is_unscored_and_still_listed(small_question_set):
    answers = [QuestionVerdict(question_id=q.id, verdict="no") for q in small_question_set.questions]
    undecided = NamedVerdict(label=None, status="unparsed", decided_by=None, provisional_label=None)
    decided = NamedVerdict(label="Keep", status="decided", decided_by="lm", provisional_label="Keep")
    base = {"item_id": "x", "output_hash": "h", "question_set_hash": "q", "verdicts": answers}
    assert ItemResult(**base, named_verdict=undecided).status == "unscored"
    assert ItemResult(**base, named_verdict=decided).status == "scored"


def test_a_baseline_item_without_any_readable_score_is_unscored():
    assert MethodItemResult(item_id="x", method="geval", output_hash="h",
                            scores={"coherence": None, "fluency": None}).status == "unscored"
    assert MethodItemResult(item_id="x", method="geval", output_hash="h",
                            scores={"coherence": 0.5, "fluency": None}).status == "scored"

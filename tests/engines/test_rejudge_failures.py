"""`bineval rejudge` while LM calls fail: a failure is an outcome, never a changed verdict.

The CLI tests drive `bineval evaluate` then `bineval rejudge` over real HTTP against the
scripted OpenAI-compatible endpoint (tests/fake_endpoint.py); one pure test pins the
comparison rule (`compare_runs`).
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.runs.rejudge import RejudgePlan, compare_runs
from binaryeval_dspy.schemas.item_result import ItemResult
from binaryeval_dspy.schemas.named_verdict import NamedVerdict
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from tests.engines.test_remote_faults import QUESTIONS, evaluate, requests_for, stored, write_inputs
from tests.fake_endpoint import HttpFault, verdict_replies, when_user_contains

# What a proxy in front of a dead model server sends back: an HTML page, on every call.
HTML_PAGE = HttpFault(500, "<html><head><title>500</title></head><body>Internal Server Error</body></html>",
                      retry_after=0)


def edit_item(items: Path, tmp_path: Path, index: int = 1) -> Path:
    """A copy of the items file with one item's output edited (the fix to re-judge)."""
    rows = [json.loads(line) for line in items.read_text(encoding="utf-8").splitlines()]
    rows[index]["output"] = f"Edited summary number {index}, now covering every point."
    fixed = tmp_path / "items-fixed.jsonl"
    fixed.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return fixed


def rejudge(previous: Path, items: Path, out: Path, *extra: str):
    return CliRunner().invoke(cli, ["rejudge", str(previous), str(items), "--out", str(out), *extra])


def report_items(out: Path) -> tuple[dict, dict[str, dict]]:
    report = json.loads((out / "rejudge.json").read_text(encoding="utf-8"))
    return report, {i["item_id"]: i for i in report["items"]}


def test_a_rejudge_whose_every_call_fails_reports_an_error_not_a_change_and_a_rerun_completes_it(
        tmp_path, fake_endpoint):
    qs_path, items = write_inputs(tmp_path)
    first = tmp_path / "run"
    fake_endpoint.reply = verdict_replies({QUESTIONS[1]: "no"})  # every item: 5 of 6 yes
    assert evaluate(fake_endpoint, qs_path, items, first).exit_code == 0
    fixed = edit_item(items, tmp_path)
    again = tmp_path / "again"

    fake_endpoint.fault = lambda body, index: HTML_PAGE
    result = rejudge(first, fixed, again)
    # evaluate's rule for failed calls: no LM call succeeded in this run -> exit 1, with the cause
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())
    assert "No LM call succeeded" in said and "Internal Server Error" in said
    assert "0 verdict(s) changed: none" in said and "item-1 error (0 of 6 questions answered)" in said
    report, by_id = report_items(again)
    assert report["changed"] == [] and report["not_compared"] == ["item-1"]
    assert report["counts"] == {"unchanged": 2, "error": 1}
    broken = by_id["item-1"]
    assert broken["status"] == "error" and broken["reason"] == "rejudged" and broken["changed"] is False
    assert broken["questions_answered"] == 0 and broken["questions_total"] == 6
    assert broken["uncompared_questions"] == [f"q{n}" for n in range(1, 7)]
    assert broken["flipped_questions"] == [] and "new_overall" not in broken
    assert "Internal Server Error" in broken["error"]
    rows = {r["item_id"]: r for r in stored(again)}
    assert rows["item-1"]["status"] == "error" and rows["item-1"]["complete"] is False  # stored, marked

    # the server is healthy again (and now answers every question yes): the same command completes the item
    fake_endpoint.reset()  # no fault, and the default reply: every question "yes"
    result = rejudge(first, fixed, again)
    assert result.exit_code == 0, result.output
    assert len(fake_endpoint.requests) == requests_for(fake_endpoint, "Edited summary number 1") == 6
    report, by_id = report_items(again)
    assert report["counts"] == {"unchanged": 2, "rejudged": 1} and report["not_compared"] == []
    assert report["changed"] == ["item-1"]  # 5/6 -> 6/6, both answered: a real change
    done = by_id["item-1"]
    assert done["status"] == "rejudged" and done["flipped_questions"] == ["q2"]
    assert "reason" not in done and "questions_answered" not in done and "uncompared_questions" not in done
    assert abs(done["old_overall"] - 5 / 6) < 1e-9 and done["new_overall"] == 1.0
    assert all("complete" not in r for r in stored(again))


def test_a_partly_failed_rejudge_is_incomplete_names_the_uncompared_question_and_a_rerun_asks_only_it(
        tmp_path, fake_endpoint):
    qs_path, items = write_inputs(tmp_path)
    first = tmp_path / "run"
    fake_endpoint.reply = verdict_replies({QUESTIONS[2]: "no"})  # q3 "no": overall 5/6
    assert evaluate(fake_endpoint, qs_path, items, first).exit_code == 0
    fixed = edit_item(items, tmp_path)
    again = tmp_path / "again"

    fake_endpoint.fault = when_user_contains(QUESTIONS[2], HttpFault(500, "Internal server error (scripted)",
                                                                    retry_after=0))
    result = rejudge(first, fixed, again)
    assert result.exit_code == 0, result.output  # as evaluate: incomplete items are stored, not fatal
    said = " ".join(result.output.split())
    # the other five answered yes: over answered questions 5/5 = 1.00, but q3 is unanswered, not "fixed"
    assert "0 verdict(s) changed: none" in said and "item-1 incomplete (5 of 6 questions answered)" in said
    assert "incomplete (5/6 answered)" in said and "not compared" in said  # the table says it too
    report, by_id = report_items(again)
    assert report["changed"] == [] and report["not_compared"] == ["item-1"]
    assert report["counts"] == {"unchanged": 2, "incomplete": 1}
    part = by_id["item-1"]
    assert part["status"] == "incomplete" and part["reason"] == "rejudged" and part["changed"] is False
    assert part["questions_answered"] == 5 and part["questions_total"] == 6
    assert part["uncompared_questions"] == ["q3"] and part["flipped_questions"] == []
    assert "Internal server error" in part["error"]
    row = {r["item_id"]: r for r in stored(again)}["item-1"]
    assert row["complete"] is False and row["questions_answered"] == 5  # every answer it got is stored

    # --fail-on-errors follows evaluate's rule: an incomplete item exits 1
    strict = rejudge(first, fixed, tmp_path / "strict", "--fail-on-errors")
    assert strict.exit_code == 1, strict.output

    fake_endpoint.reset()  # no fault
    fake_endpoint.reply = verdict_replies({QUESTIONS[2]: "no"})
    result = rejudge(first, fixed, again)
    assert result.exit_code == 0, result.output
    assert len(fake_endpoint.requests) == requests_for(fake_endpoint, QUESTIONS[2]) == 1  # only q3 again
    report, by_id = report_items(again)
    assert report["counts"] == {"unchanged": 2, "rejudged": 1} and report["not_compared"] == []
    assert by_id["item-1"]["status"] == "rejudged" and report["changed"] == []  # q3 still "no": 5/6 both times


def _result(item_id: str, output_hash: str, answers: dict[str, str], label: str | None) -> ItemResult:
    verdicts = [QuestionVerdict(question_id=q, verdict=a, error="LMServerError: 500" if a == "error" else None)
                for q, a in answers.items()]
    named = NamedVerdict(label=label, status="decided", decided_by="lm", provisional_label=label)
    return ItemResult(item_id=item_id, output_hash=output_hash, question_set_hash="qs", verdicts=verdicts,
                      named_verdict=named)


def test_a_change_is_claimed_only_between_complete_results():
    previous = [
        _result("same-output", "h1", {"q1": "yes", "q2": "error"}, "needs-work"),  # incomplete before
        _result("edited-fails", "h2", {"q1": "no", "q2": "yes"}, "needs-work"),
        _result("edited-ok", "h3", {"q1": "no", "q2": "yes"}, "needs-work"),
    ]
    current = [
        _result("same-output", "h1", {"q1": "yes", "q2": "yes"}, "pass"),  # completed: q2 answered now
        _result("edited-fails", "h2b", {"q1": "error", "q2": "yes"}, "pass"),  # incomplete now
        _result("edited-ok", "h3b", {"q1": "yes", "q2": "yes"}, "pass"),
    ]
    plan = RejudgePlan(carry=[], judge=[], changed_ids=["edited-fails", "edited-ok"],
                       completed_ids=["same-output"])
    changes = {c.item_id: c for c in compare_runs(previous, current, plan, aggregation="verdict",
                                                   order=["same-output", "edited-fails", "edited-ok"])}
    assert changes["same-output"].status == "completed" and changes["same-output"].changed is False
    assert changes["same-output"].uncompared_questions == ["q2"]
    assert changes["edited-fails"].status == "incomplete" and changes["edited-fails"].changed is False
    assert changes["edited-fails"].uncompared_questions == ["q1"] and changes["edited-fails"].flipped_questions == []
    assert (changes["edited-fails"].questions_answered, changes["edited-fails"].questions_total) == (1, 2)
    assert changes["edited-ok"].status == "rejudged" and changes["edited-ok"].changed is True
    assert changes["edited-ok"].flipped_questions == ["q1"] and changes["edited-ok"].uncompared_questions == []

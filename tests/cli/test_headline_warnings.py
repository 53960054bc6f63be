"""Issue 32: the headline carries its warnings, and smaller untruths of the first hour.

A judge that barely tells the items apart is flagged by a measure of discrimination
(tied item scores, questions with one verdict on every item), not by a fixed yes-share;
the reasons not to trust a score stand beside it in the console, summary.md and
`bineval view`; verdicts that point the other way from their own P(yes) are marked and
explained; the concurrency caveat only appears when calls overlap; an interrupted item
is called interrupted. Every LM here is scripted: nothing is a model's judgment.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import dspy
import pytest
from click.testing import CliRunner
from dspy.lm15 import TokenLogprob, TopLogprob

from binaryeval_dspy.cli import common
from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.runs.run_summary import summarize_results
from binaryeval_dspy.reports.run_view import view_data, write_view
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from tests.fakes import LogprobEngine, field_value, logprob_lm
from tests.headless_chromium import DomReader, dump_dom, find_chromium

QUESTIONS = QuestionSet(task_prompt="Summarize the article.", dimensions=["consistency", "fluency"], questions=[
    BinaryQuestion(id="consistency-01", dimension="consistency", text="Is every claim supported?"),
    BinaryQuestion(id="consistency-02", dimension="consistency", text="Are the numbers right?"),
    BinaryQuestion(id="fluency-01", dimension="fluency", text="Is it grammatical?")])


def flat(text: str) -> str:
    return " ".join(text.split())


def evaluate(tmp_path: Path, items: int, *extra: str):
    qs = QUESTIONS.save(tmp_path / "qs.json")
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps({"id": f"item-{i}", "source": f"Article {i}.", "summary": f"Summary {i}."})
                            + "\n" for i in range(items)), encoding="utf-8")
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["evaluate", str(qs), str(path), "--input-field", "source", "--output-field",
                                      "summary", "--id-field", "id", "--scale", "1", "5", "--out", str(out), *extra])
    return result, out


def one_item_fails(system: str, user: str):
    """"no" to every question about item-0, "yes" to every other: 45 of 48 answers "yes" (94%)."""
    verdict = "no" if field_value(user, "output") == "Summary 0." else "yes"
    return {"explanation": "Checked against the article.", "verdict": verdict}


def test_a_judge_that_ties_most_items_is_flagged_below_the_old_yes_share(tmp_path, cli_scripted_lms):
    cli_scripted_lms(one_item_fails)
    result, out = evaluate(tmp_path, 16)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["verdict_skew"] is None  # 94% "yes": under the 95% the old note needed
    assert summary["discrimination"] == {"items": 16, "questions": 3, "constant_questions": 0, "largest_tie": 15,
                                         "tied_score": 5.0, "score_sd": pytest.approx(0.2421, abs=1e-4),
                                         "low": True}
    said = flat(result.output)
    assert ("The judge barely tells these items apart: 15 of 16 items got the same overall score (5.00 on [1, 5]) "
            'and 0 of 3 questions got the same verdict on every item (45 of 48 answers "yes", 94%)') in said, said
    assert "Do not trust it: the judge barely tells the items apart (15 of 16 items" in said


def test_a_judge_whose_questions_never_change_is_flagged(tmp_path, cli_scripted_lms):
    def script(system, user):  # only the numbers question ever says "no", on two of three items
        question, output = field_value(user, "question"), field_value(user, "output")
        no = question == "Are the numbers right?" and output != "Summary 2."
        return {"explanation": "Checked.", "verdict": "no" if no else "yes"}

    cli_scripted_lms(script)
    result, out = evaluate(tmp_path, 3)
    assert result.exit_code == 0, result.output
    d = json.loads((out / "summary.json").read_text())["discrimination"]
    assert (d["constant_questions"], d["questions"], d["low"]) == (2, 3, True)  # ties are not read under 4 items
    assert "2 of 3 questions got the same verdict on every item" in flat(result.output)


def test_a_judge_that_tells_items_apart_gets_no_such_warning(tmp_path, cli_scripted_lms):
    def script(system, user):  # each item fails a different number of questions
        n = int(field_value(user, "output").split()[1].rstrip("."))
        question = field_value(user, "question")
        failed = [q.text for q in QUESTIONS.questions][: n % 4]
        return {"explanation": "Checked.", "verdict": "no" if question in failed else "yes"}

    cli_scripted_lms(script)
    result, out = evaluate(tmp_path, 8)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["discrimination"]["low"] is False and summary["warnings"] == []
    assert "barely" not in flat(result.output) and "Do not trust it" not in flat(result.output)
    # report prose is markdown-escaped: the brackets are shown, never read as a link
    assert r"**Overall 3.00 on \[1, 5\] (mean of 8 items).**" in (out / "summary.md").read_text()


def contradicting(system: str, user: str):
    """Item n fails its first n questions (the items' scores all differ, no question has one
    verdict throughout), and every "yes" comes with an explanation that is a bare "no"."""
    n = int(field_value(user, "output").split()[1].rstrip("."))
    failed = [q.text for q in QUESTIONS.questions][:n]
    if field_value(user, "question") in failed:
        return {"explanation": "The summary misses this.", "verdict": "no"}
    return {"explanation": "no", "verdict": "yes"}


def test_untrusted_verdicts_are_said_beside_the_headline_score(tmp_path, cli_scripted_lms):
    cli_scripted_lms(contradicting)
    result, out = evaluate(tmp_path, 4)
    assert result.exit_code == 0, result.output
    said = flat(result.output)
    headline = "Overall 3.00 on [1, 5] (mean of 4 items). Do not trust it: 6 of 12 explanations contradict their verdict."
    assert headline in said, said
    # beside the score: right under the table's last row, before the usage lines and notes
    assert said.index(headline) < said.index("4 items: scored: 4") < said.index("Note: 6 of 12 explanations")
    markdown = (out / "summary.md").read_text()
    assert (r"**Overall 3.00 on \[1, 5\] (mean of 4 items).** **Do not trust it:** 6 of 12 explanations contradict "
            "their verdict.") in markdown
    assert markdown.index("Do not trust it") < markdown.index("| overall |")  # above the table, by its title
    summary = json.loads((out / "summary.json").read_text())
    assert summary["warnings"] == ["6 of 12 explanations contradict their verdict"]
    run = view_data(out)["run"]["summary"]
    assert run["headline"] == headline and run["warnings"] == summary["warnings"]


def test_an_old_summary_without_warnings_still_gets_them_in_the_view(tmp_path, cli_scripted_lms):
    cli_scripted_lms(contradicting)
    _, out = evaluate(tmp_path, 4)
    stored = json.loads((out / "summary.json").read_text())
    for key in ("warnings", "discrimination", "verdicts_against_p_yes", "p_yes_answers", "calls_in_flight"):
        stored.pop(key)
    (out / "summary.json").write_text(json.dumps(stored))
    assert "Do not trust it: 6 of 12 explanations" in view_data(out)["run"]["summary"]["headline"]


def _json_tokens(verdict: str, p_yes: float) -> tuple[str, tuple]:
    """A JSON reply whose verdict token is `verdict`, with P(yes) = `p_yes` among its alternatives."""
    alts = {"yes": p_yes, "no": 1 - p_yes}
    pieces = [('{"explanation": "It does.", "verdict": "', None), (verdict, alts), ('"}', None)]
    tokens = tuple(TokenLogprob(token=t, logprob=math.log((a or {}).get(t, 1.0)),
                                top=tuple(TopLogprob(token=k, logprob=math.log(p)) for k, p in (a or {}).items()))
                   for t, a in pieces)
    return "".join(t for t, _ in pieces), tokens


@pytest.fixture
def against_p_yes_run(tmp_path, monkeypatch) -> Path:
    """Item-1's numbers question: verdict "yes" with P(yes) 0.4; everything else agrees."""
    def script(user):
        against = field_value(user, "output") == "Summary 1." and field_value(user, "question") == \
            "Are the numbers right?"
        return _json_tokens("yes", 0.4 if against else 0.8)

    monkeypatch.setattr(common, "make_lm", lambda spec, **kwargs: LMHandle(
        lm=logprob_lm(LogprobEngine(script)), adapter=dspy.JSONAdapter(), name="scripted logprobs", embedded=False))
    result, out = evaluate(tmp_path, 3)
    assert result.exit_code == 0, result.output
    return out


def test_a_verdict_against_its_own_p_yes_is_counted_explained_and_marked(against_p_yes_run):
    out = against_p_yes_run
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["verdicts_against_p_yes"], summary["p_yes_answers"]) == (1, 9)
    note = next(n for n in summary["notes"] if "point the other way" in n)
    assert note.startswith("1 of 9 verdicts point the other way from their own P(yes)")
    assert "every spelling of yes and of no" in note
    items = {i["id"]: i for i in view_data(out)["run"]["items"]}
    marked = [(i, v["q"]) for i, item in items.items() for v in item["verdicts"] if v.get("px")]
    assert marked == [("item-1", "consistency-02")]


needs_chromium = pytest.mark.skipif(find_chromium() is None, reason="needs Debian's chromium package")


@pytest.mark.browser
@needs_chromium
def test_the_page_shows_the_headline_and_marks_the_verdict_against_p_yes(tmp_path, cli_scripted_lms,
                                                                          against_p_yes_run):
    page = write_view(against_p_yes_run, out=tmp_path / "view.html")
    detail = DomReader(dump_dom(page.resolve().as_uri() + "#tab=items&item=item-1")).root
    rows = {row.attrs["data-question"]: row for row in detail.by_id("detail-verdicts").find_all("tr")
            if "data-question" in row.attrs}
    assert "against P(yes)" in rows["consistency-02"].text and "against P(yes)" not in rows["fluency-01"].text
    assert "every spelling of yes and of no" in detail.by_id("detail-against-p-yes").text

    cli_scripted_lms(contradicting)
    (tmp_path / "second").mkdir()
    _, second = evaluate(tmp_path / "second", 4)
    summary_page = write_view(second, out=tmp_path / "view2.html")
    shown = DomReader(dump_dom(summary_page.resolve().as_uri())).root.by_id("summary-headline")
    assert shown is not None and "untrusted" in shown.attrs.get("class", "")
    assert shown.text == ("Overall 3.00 on [1, 5] (mean of 4 items). Do not trust it: 6 of 12 explanations "
                          "contradict their verdict.")


def test_the_overlap_caveat_only_when_calls_overlap(tmp_path, cli_scripted_lms):
    cli_scripted_lms(one_item_fails)
    for concurrency, caveat in (("1", False), ("4", True)):
        folder = tmp_path / concurrency
        folder.mkdir()
        result, out = evaluate(folder, 2, "--concurrency", concurrency)
        assert result.exit_code == 0, result.output
        said = flat(result.output)
        assert ("items overlap" in said) is caveat, said
        assert json.loads((out / "summary.json").read_text())["calls_in_flight"] == int(concurrency)
    assert "4 calls in flight, so items overlap: not the run's time per item" in said


def test_calls_in_flight_is_never_more_than_the_calls_the_run_made(tmp_path, cli_scripted_lms):
    """`--concurrency 2000` on a run of a few calls: the summary says how many were in flight
    at most (the calls made), not the setting."""
    cli_scripted_lms(one_item_fails)
    result, out = evaluate(tmp_path, 2, "--concurrency", "2000")
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    made = summary["lm_calls"] + summary["failed_calls"]
    assert 0 < made < 2000 and summary["calls_in_flight"] == made
    assert f"{made} calls in flight" in flat(result.output) and "2000 calls in flight" not in flat(result.output)


def test_an_interrupted_item_is_called_interrupted_not_failed(tmp_path, cli_scripted_lms):
    calls = {"n": 0}

    def script(system, user):
        calls["n"] += 1
        if calls["n"] == 5:  # inside item 1 (3 questions per item): Ctrl-C
            raise KeyboardInterrupt
        return {"explanation": "Checked.", "verdict": "yes"}

    cli_scripted_lms(script)
    result, out = evaluate(tmp_path, 3)
    assert result.exit_code == 130, result.output
    said = flat(result.output)
    assert "1 item(s) incomplete: interrupted (Ctrl-C) before all their questions were answered (item-1)" in said
    assert "some LM calls failed" not in said
    assert "Interrupted. Results so far are saved" in said
    stored = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["item_id"], r.get("complete", True)) for r in stored] == [("item-0", True), ("item-1", False)]


def test_summaries_of_stored_results_need_no_run_settings(tmp_path, cli_scripted_lms):
    cli_scripted_lms(one_item_fails)
    _, out = evaluate(tmp_path, 2)
    from binaryeval_dspy.runs.run_directory import RunDirectory

    rebuilt = summarize_results(RunDirectory(out).read_results(), lm="scripted-cli")
    assert rebuilt.calls_in_flight is None and rebuilt.discrimination.items == 2

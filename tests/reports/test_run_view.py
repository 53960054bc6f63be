"""`bineval view`: the page's data, its escaping, two-run comparison, and the page itself
rendered by headless Chromium (tests marked ``browser``; skipped without chromium).

The runs are made by `bineval evaluate` on a scripted LM (plumbing only, never a model's
judgment) with a hostile item id and question text.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.errors import InputError
from binaryeval_dspy.reports.run_view import (
    VIEW_DATA_ID,
    build_view_html,
    compare_loaded_runs,
    load_run,
    run_kind,
    view_data,
    write_view,
)
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from tests.cli.test_verdict_cli import evaluate as evaluate_verdicts
from tests.cli.test_verdict_cli import write_items
from tests.fakes import field_value
from tests.headless_chromium import DomReader, dump_dom, find_chromium, screenshot
from tests.method.test_comparison import scripted_cli_lm  # noqa: F401 - fixture
from tests.reports.test_benchmark_run import _run as run_benchmark
from tests.reports.test_benchmark_run import data_dir, scripted, tasks_dir  # noqa: F401 - fixtures
from tests.verdict_scripts import VerdictScript

HOSTILE_ID = "<script>alert(1)</script>|\"x'"
HOSTILE_QUESTION = 'Are the numbers "right" | <script>alert(2)</script>?'
OUTPUTS = {"item-0": "A good summary.", "item-1": "A bad summary with wrong numbers.",
           HOSTILE_ID: "Another bad one <b>bold</b> </script>.", "item-3": "Fine text."}


def _script(flip: bool = False):
    """consistency-01 yes; the hostile question no for outputs with 'bad' (and, with `flip`,
    for 'Fine' too); fluency-01 yes, but an unreadable reply for 'Fine text.'."""

    def script(system: str, user: str):
        question, output = field_value(user, "question"), field_value(user, "output")
        if question == HOSTILE_QUESTION:
            verdict = "no" if "bad" in output or (flip and "Fine" in output) else "yes"
            return {"explanation": f"scripted {verdict}; it said <i>{verdict}</i>", "verdict": verdict}
        if question == "Is it grammatical?" and "Fine" in output:
            return "perhaps, who knows"
        return {"explanation": "scripted yes", "verdict": "yes"}

    return script


def _question_set() -> QuestionSet:
    return QuestionSet(task_prompt="Summarize the article.", dimensions=["consistency", "fluency"], questions=[
        BinaryQuestion(id="consistency-01", dimension="consistency", text="Is every claim supported?"),
        BinaryQuestion(id="consistency-02", dimension="consistency", text=HOSTILE_QUESTION),
        BinaryQuestion(id="fluency-01", dimension="fluency", text="Is it grammatical?"),
    ])


def _evaluate(tmp_path: Path, install, name: str, *, flip: bool = False) -> Path:
    install(_script(flip))
    qs = _question_set().save(tmp_path / "qs.json")
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": i, "source": f"Article for {i}.", "summary": o}) + "\n"
                             for i, o in OUTPUTS.items()), encoding="utf-8")
    out = tmp_path / name
    result = CliRunner().invoke(cli, ["evaluate", str(qs), str(items), "--input-field", "source", "--output-field",
                                      "summary", "--id-field", "id", "--scale", "1", "5", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def run_dir(tmp_path, cli_scripted_lms) -> Path:
    return _evaluate(tmp_path, cli_scripted_lms, "run")


def test_view_data_carries_the_summary_questions_and_items(run_dir):
    data = view_data(run_dir)
    run = data["run"]
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = {r["dimension"]: r for r in run["summary"]["rows"]}
    for stored in summary["dimensions"]:
        row = rows[stored["dimension"]]
        assert (row["mean_scaled"], row["used"], row["total"]) == (
            stored["mean_scaled"], stored["items_scored"], stored["items_total"])
    assert rows["fluency"]["used"] == 3 and rows["fluency"]["unparsed"] == 1
    assert rows["consistency"]["mean_scaled"] == pytest.approx(4.0)
    items = {i["id"]: i for i in run["items"]}
    assert items[HOSTILE_ID]["output"] == OUTPUTS[HOSTILE_ID]
    assert items[HOSTILE_ID]["input"] == f"Article for {HOSTILE_ID}."
    assert [v["v"] for v in items["item-3"]["verdicts"]] == ["yes", "yes", "unparsed"]
    assert items["item-3"]["verdicts"][2]["raw"] == "perhaps, who knows"
    stats = {q["id"]: q for q in run["question_stats"]}
    assert (stats["consistency-02"]["yes"], stats["consistency-02"]["no"]) == (2, 2)
    assert stats["consistency-02"]["text"] == HOSTILE_QUESTION


def test_embedded_json_cannot_close_its_script_element(run_dir):
    page = build_view_html(view_data(run_dir))
    assert "<script>alert" not in page and "</script>." not in page
    assert page.count("</script>") == 2  # the data element and the page's own script
    start = page.index(f'id="{VIEW_DATA_ID}">') + len(f'id="{VIEW_DATA_ID}">')
    embedded = json.loads(page[start:page.index("</script>", start)])
    assert embedded["run"]["questions"][1]["text"] == HOSTILE_QUESTION


def test_an_item_whose_output_changed_shows_no_text(run_dir, tmp_path):
    items = tmp_path / "items.jsonl"
    items.write_text(items.read_text().replace("Fine text.", "Changed text."), encoding="utf-8")
    run = view_data(run_dir)["run"]
    item = next(i for i in run["items"] if i["id"] == "item-3")
    assert "output" not in item
    assert any("1 items' outputs changed" in n for n in run["notes"])


def test_two_runs_put_changed_verdicts_first(tmp_path, cli_scripted_lms):
    before = _evaluate(tmp_path, cli_scripted_lms, "before")
    after = _evaluate(tmp_path, cli_scripted_lms, "after", flip=True)
    diff = compare_loaded_runs(load_run(before), load_run(after))
    assert diff["items"][0]["id"] == "item-3" and diff["items"][0]["status"] == "changed"
    assert diff["items"][0]["flips"] == [{"q": "consistency-02", "old": "yes", "new": "no", "old_e": "scripted yes; "
                                          "it said <i>yes</i>"}]
    assert {d["status"] for d in diff["items"][1:]} == {"unchanged"}
    question = next(q for q in diff["questions"] if q["id"] == "consistency-02")
    assert question["flips"] == {"yes->no": 1} and question["compared"] == 4
    assert diff["questions"][0]["id"] == "consistency-02"


def test_cli_writes_the_page_and_refuses_a_folder_that_is_no_run(run_dir, tmp_path):
    result = CliRunner().invoke(cli, ["view", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert (run_dir / "view.html").is_file()
    other = tmp_path / "empty"
    other.mkdir()
    result = CliRunner().invoke(cli, ["view", str(other)])
    assert result.exit_code != 0 and "not a run directory" in result.output
    with pytest.raises(InputError):
        run_kind(tmp_path / "missing")


def test_no_texts_leaves_inputs_and_outputs_out(run_dir, tmp_path):
    page = write_view(run_dir, out=tmp_path / "p.html", texts=False).read_text(encoding="utf-8")
    assert "Article for item-0" not in page and "A good summary" not in page


def test_no_texts_leaves_every_item_field_but_the_id_out(tmp_path, cli_scripted_lms):
    """An item's other columns (a reference, a human score, notes) are data too: a page made
    without texts keeps only the id; with texts they are shown."""
    cli_scripted_lms(_script())
    qs = _question_set().save(tmp_path / "qs.json")
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "n1", "source": "An article.", "summary": "A summary.",
                                 "ref": "SECRET-REF-789", "human": 4}) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["evaluate", str(qs), str(items), "--input-field", "source", "--output-field",
                                      "summary", "--id-field", "id", "--out", str(out)])
    assert result.exit_code == 0, result.output
    (shown,) = view_data(out)["run"]["items"]
    assert shown["fields"]["ref"] == "SECRET-REF-789" and shown["fields"]["human"] == 4
    (hidden,) = view_data(out, texts=False)["run"]["items"]
    assert hidden["id"] == "n1" and set(hidden["fields"]) <= {"id"}
    page = write_view(out, out=tmp_path / "p.html", texts=False).read_text(encoding="utf-8")
    assert "SECRET-REF-789" not in page and "A summary." not in page and "An article." not in page


# ------------------------------------------------------------------ in the browser

needs_chromium = pytest.mark.skipif(find_chromium() is None,
                                    reason="needs Debian's chromium package (apt-get install chromium)")


def _page(path: Path, fragment: str = "") -> DomReader:
    return DomReader(dump_dom(path.resolve().as_uri() + fragment))


def _rows(dom: DomReader, table_id: str) -> list:
    table = dom.root.by_id(table_id)
    assert table is not None, f"no #{table_id} in the rendered page"
    return table.find_all("tbody")[0].find_all("tr")


@pytest.mark.browser
@needs_chromium
def test_the_rendered_page_shows_the_numbers_filters_and_hostile_text_as_text(run_dir, tmp_path):
    page = write_view(run_dir, out=tmp_path / "view.html")
    dom = _page(page)
    summary = {row.attrs["data-dimension"]: [td.text for td in row.find_all("td")]
               for row in _rows(dom, "summary-table")}
    # dimension, yes-rate, scaled mean, n used / n total, yes, no, unparsed, error
    assert summary["consistency"][:8] == ["consistency", "0.750", "4.00", "4 / 4", "6", "2", "0", "0"]
    assert summary["fluency"][:8] == ["fluency", "1.000", "5.00", "3 / 4", "3", "0", "1", "0"]
    assert summary["overall"][1:4] == ["0.833", "4.33", "4 / 4"]
    assert [p.attrs["data-dimension"] for p in dom.root.find_all("div", class_="plot")] == [
        "consistency", "fluency", "overall"]
    # the script elements are the page's two: no text became an element
    assert len(dom.root.find_all("script")) == 2 and not dom.root.find_all("b") and not dom.root.find_all("i")
    shown = [row.attrs["data-item"] for row in _rows(dom, "items-table")]
    assert shown == list(OUTPUTS)
    question_texts = [td.text for td in dom.root.by_id("questions-table").find_all("td", class_="q-text")]
    assert HOSTILE_QUESTION in question_texts
    screenshot(page.resolve().as_uri(), tmp_path / "summary.png")

    # "no" verdicts only, set through the URL as a user's link would
    filtered = _page(page, "#tab=items&verdict=no")
    assert [row.attrs["data-item"] for row in _rows(filtered, "items-table")] == ["item-1", HOSTILE_ID]
    assert filtered.root.by_id("match-count").attrs["data-count"] == "2"
    cells = [row.find_all("td", class_="item-id")[0].text for row in _rows(filtered, "items-table")]
    assert cells == ["item-1", HOSTILE_ID]  # the id reads as the text it is
    screenshot(page.resolve().as_uri() + "#tab=items&verdict=no", tmp_path / "items-no.png")

    # the hostile item opened: its output, question text and explanations are text
    from urllib.parse import quote

    fragment = "#tab=items&item=" + quote(HOSTILE_ID, safe="")
    detail = _page(page, fragment).root.by_id("detail")
    assert detail is not None and detail.attrs["data-item"] == HOSTILE_ID
    assert detail.by_id("detail-output").text == OUTPUTS[HOSTILE_ID]
    verdicts = {row.attrs["data-question"]: row for row in detail.by_id("detail-verdicts").find_all("tr")
                if "data-question" in row.attrs}
    assert verdicts["consistency-02"].attrs["data-verdict"] == "no"
    assert HOSTILE_QUESTION in verdicts["consistency-02"].text
    assert "scripted no; it said <i>no</i>" in verdicts["consistency-02"].text
    screenshot(page.resolve().as_uri() + fragment, tmp_path / "hostile-item.png")
    print("screenshots:", *sorted(str(p) for p in tmp_path.glob("*.png")))


@pytest.mark.browser
@needs_chromium
def test_the_rendered_comparison_lists_changed_items_first(tmp_path, cli_scripted_lms):
    before = _evaluate(tmp_path, cli_scripted_lms, "before")
    after = _evaluate(tmp_path, cli_scripted_lms, "after", flip=True)
    page = write_view(after, before, out=tmp_path / "compare.html")
    dom = _page(page, "#tab=compare")
    rows = _rows(dom, "compare-items")
    assert [r.attrs["data-status"] for r in rows] == ["changed", "unchanged", "unchanged", "unchanged"]
    assert rows[0].attrs["data-item"] == "item-3"
    assert re.sub(r"\s+", " ", rows[0].find_all("td")[6].text) == "consistency-02: yes → no"
    changed_only = _page(page, "#tab=items&changed=1")
    assert [r.attrs["data-item"] for r in _rows(changed_only, "items-table")] == ["item-3"]
    screenshot(page.resolve().as_uri() + "#tab=compare", tmp_path / "compare.png")


# ------------------------------------------------------------------ the other run kinds



def test_verdict_mode_and_its_rejudge(tmp_path, cli_scripted_lms):
    cli_scripted_lms(VerdictScript(labels=["Keep"]))
    result, out, _qs, items = evaluate_verdicts(tmp_path, "verdict")
    assert result.exit_code == 0, result.output
    data = view_data(out)
    assert data["kind"] == "evaluate" and data["run"]["aggregation"] == "verdict" and "summary" not in data["run"]
    labels = {i["id"]: i["label"] for i in data["run"]["items"]}
    assert labels == {"short-doc": "Keep", "long-doc": "Improve", "other-doc": "Keep"}
    assert data["run"]["items"][1]["named_verdict"]["decided_by"] == "fatal_rule"
    # rejudge a changed output: the new run is compared with the previous one by itself
    write_items(items, {"short-doc": "Run `bineval evaluate` to judge items.", "long-doc": "Short now.",
                        "other-doc": "Install with pip. Then run the tests."})
    again = CliRunner().invoke(cli, ["rejudge", str(out), str(items), "--out", str(tmp_path / "again")])
    assert again.exit_code == 0, again.output
    data = view_data(tmp_path / "again")
    assert data["kind"] == "rejudge" and data["diff"]["before"] == str(out)
    first = data["diff"]["items"][0]
    assert (first["id"], first["status"], first["old_label"], first["new_label"]) == (
        "long-doc", "changed", "Improve", "Keep")
    table = data["sections"][0]["table"]
    assert table["header"][:2] == ["item", "status"] and ["long-doc", "rejudged"] in [r[:2] for r in table["rows"]]


def test_benchmark_run(tmp_path, data_dir, tasks_dir, scripted):  # noqa: F811
    out = tmp_path / "bench"
    result = run_benchmark(["benchmark", "summeval", "--data-dir", str(data_dir), "--tasks-dir", str(tasks_dir),
                            "--out", str(out), "--bootstrap", "50", "--methods", "bineval,rouge", "--no-figures"])
    assert result.exit_code == 0, result.output
    data = view_data(out)
    assert data["kind"] == "benchmark" and len(data["run"]["items"]) == 12
    methods, per_item = data["sections"]
    assert [row[0] for row in methods["table"]["rows"]] == ["BinEval", "ROUGE-L"]
    assert len(per_item["table"]["rows"]) == 12 and "human coherence" in per_item["table"]["header"]


def test_optimizer_comparison(tmp_path, comparison_data_dir, comparison_question_file, scripted_cli_lm):  # noqa: F811
    out = tmp_path / "cmp"
    result = CliRunner().invoke(cli, ["optimize", "--mode", "human", "--compare", "bineval", "--data-dir",
                                      str(comparison_data_dir), "--questions", str(comparison_question_file),
                                      "--out", str(out), "--limit", "3", "--iterations", "1"])
    assert result.exit_code == 0, result.output
    data = view_data(out)
    assert data["kind"] == "comparison" and data["run"] is None
    table = data["sections"][0]["table"]
    assert table["header"][0] == "optimizer" and [r[0] for r in table["rows"]] == ["unoptimized", "bineval"]
    assert any(s["title"] == "bineval: test records (3)" for s in data["sections"])
    assert build_view_html(data).count("</script>") == 2


@pytest.mark.browser
@needs_chromium
def test_the_status_filter_offers_the_statuses_the_items_have(tmp_path, cli_scripted_lms):
    """An item with no readable answer is ``unscored``: the Items tab's status filter offers
    it (the options come from the items, not a fixed list) and filters by it."""
    def script(system: str, user: str):
        if "Fine" in field_value(user, "output"):
            return "perhaps, who knows"
        return {"explanation": "scripted yes", "verdict": "yes"}

    cli_scripted_lms(script)
    qs = _question_set().save(tmp_path / "qs.json")
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": i, "source": "An article.", "summary": o}) + "\n"
                             for i, o in {"a": "Good.", "b": "Fine text."}.items()), encoding="utf-8")
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["evaluate", str(qs), str(items), "--input-field", "source", "--output-field",
                                      "summary", "--id-field", "id", "--out", str(out)])
    assert result.exit_code == 0, result.output
    page = write_view(out, out=tmp_path / "view.html")
    dom = _page(page, "#tab=items&status=unscored")
    options = [o.attrs.get("value") for o in dom.root.by_id("f-status").find_all("option")]
    assert options == ["", "scored", "unscored"], options
    assert [row.attrs["data-item"] for row in _rows(dom, "items-table")] == ["b"]


def test_a_comparison_marks_the_items_whose_output_changed(tmp_path, cli_scripted_lms, monkeypatch):
    """A flip on a new output is not the judge changing its mind: the item says so."""
    before = _evaluate(tmp_path, cli_scripted_lms, "before")
    monkeypatch.setitem(OUTPUTS, "item-0", "A bad summary now.")  # the hostile question answers "no" to it
    after = _evaluate(tmp_path, cli_scripted_lms, "after", flip=True)
    diff = compare_loaded_runs(load_run(before), load_run(after))
    items = {d["id"]: d for d in diff["items"]}
    assert items["item-0"]["output_changed"] is True and items["item-0"]["flips"]  # a flip from the new text
    assert items["item-3"]["output_changed"] is False and items["item-3"]["flips"]  # a flip by the judge
    assert not any(items[i]["output_changed"] for i in ("item-1", HOSTILE_ID))
    assert any("1 of 4 items were judged on a different output text" in n for n in diff["notes"]), diff["notes"]
    page = write_view(after, before, out=tmp_path / "cmp.html").read_text(encoding="utf-8")
    assert "\"output_changed\":true" in page  # the page marks it "(output changed)" in the items table

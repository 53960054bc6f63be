"""Each judge's verdict inside an item in `bineval view` (a panel's or cascade's run).

The run is a panel replayed from a scripted verdicts file (plumbing, never a model's
judgment); the page is rendered by headless Chromium (`tests.headless_chromium`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.reports.run_view import view_data, write_view
from tests.headless_chromium import DomReader, dump_dom, find_chromium, screenshot

needs_chromium = pytest.mark.skipif(find_chromium() is None,
                                    reason="needs Debian's chromium package (apt-get install chromium)")

VERDICTS = """item_id,question_id,judge,verdict,p_yes
a,covers,cheap,yes,0.55
a,covers,mid,no,0.2
a,covers,strong,no,0.1
a,accurate,cheap,no,0.2
a,accurate,mid,no,0.25
a,accurate,strong,no,0.05
b,covers,cheap,yes,0.95
b,covers,mid,yes,0.9
b,covers,strong,yes,0.97
b,accurate,cheap,unparsed,
b,accurate,mid,yes,0.8
b,accurate,strong,yes,0.9
"""
QUESTIONS = """{"task_prompt": "Summarize the match report.", "dimensions": ["coverage", "accuracy"],
 "questions": [{"id": "covers", "dimension": "coverage", "text": "Does the summary name the winner?"},
               {"id": "accurate", "dimension": "accuracy", "text": "Is the score in the summary right?"}]}
"""
ITEMS = """{"id": "a", "input": "The home side won 2-1.", "output": "The visitors won 3-1."}
{"id": "b", "input": "The visitors won 1-0.", "output": "The visitors won 1-0."}
"""


@pytest.fixture
def panel_run(tmp_path) -> Path:
    for name, text in (("v.csv", VERDICTS), ("q.json", QUESTIONS), ("items.jsonl", ITEMS)):
        (tmp_path / name).write_text(text, encoding="utf-8")
    out = tmp_path / "panel"
    result = CliRunner().invoke(cli, ["evaluate", str(tmp_path / "q.json"), str(tmp_path / "items.jsonl"),
                                      "--id-field", "id", "--engine", "replay", "--verdicts", str(tmp_path / "v.csv"),
                                      "--judge", "cheap", "--judge", "mid", "--judge", "strong", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_the_page_data_carries_each_judges_verdict_and_marks_the_split(panel_run):
    items = {i["id"]: i for i in view_data(panel_run)["run"]["items"]}
    covers = next(v for v in items["a"]["verdicts"] if v["q"] == "covers")
    assert covers["v"] == "no" and covers["split"] is True
    assert covers["j"] == [{"n": "cheap", "v": "yes", "p": 0.55}, {"n": "mid", "v": "no", "p": 0.2},
                           {"n": "strong", "v": "no", "p": 0.1}]
    accurate = next(v for v in items["b"]["verdicts"] if v["q"] == "accurate")
    assert [j["v"] for j in accurate["j"]] == ["unparsed", "yes", "yes"]  # counted, not a split, never "no"
    assert "split" not in accurate and "p" not in accurate["j"][0]


@pytest.mark.browser
@needs_chromium
def test_an_items_questions_show_every_judges_verdict_and_the_split_ones_are_marked(panel_run, tmp_path):
    page = write_view(panel_run, out=tmp_path / "view.html")
    url = page.resolve().as_uri() + "#tab=items&item=a"
    dom = DomReader(dump_dom(url))
    table = dom.root.by_id("detail-verdicts")
    assert table is not None
    assert "judges" in [th.text for th in table.find_all("th")]
    rows = {row.attrs["data-question"]: row for row in table.find_all("tbody")[0].find_all("tr")}
    shown = {div.attrs["data-judge"]: (div.attrs["data-verdict"], div.text)
             for div in rows["covers"].find_all("div", class_="judge-verdict")}
    assert shown == {"cheap": ("yes", "cheap: yes (P(yes) 0.550)"), "mid": ("no", "mid: no (P(yes) 0.200)"),
                     "strong": ("no", "strong: no (P(yes) 0.100)")}
    assert "judges-split" in rows["covers"].attrs.get("class", "")
    assert "judges split" in [span.text for span in rows["covers"].find_all("span", class_="flag")]
    assert "judges-split" not in rows["accurate"].attrs.get("class", "")  # all three said no
    assert "The judges split on 1 question" in dom.root.by_id("detail-judges-split").text
    screenshot(url, tmp_path / "judges.png")
    other = DomReader(dump_dom(page.resolve().as_uri() + "#tab=items&item=b"))
    row = next(r for r in other.root.by_id("detail-verdicts").find_all("tr") if r.attrs.get("data-question") == "accurate")
    assert [d.attrs["data-verdict"] for d in row.find_all("div", class_="judge-verdict")] == ["unparsed", "yes", "yes"]
    assert other.root.by_id("detail-judges-split") is None

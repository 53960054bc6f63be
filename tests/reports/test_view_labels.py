"""Labels from `bineval view`: a person sets question labels on the page and downloads them
as a verdicts file that `read_verdicts`, `bineval agreement --labels` and the optimizer read.

The page is driven in headless Chromium over the DevTools protocol (`tests.headless_chromium.
Browser`): buttons are clicked and the annotator id typed as a person would, and the file is
the one Chromium saved from the page's Blob download. The runs are made by `bineval evaluate`
on a scripted LM (plumbing only, never a model's judgment).
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.data.verdicts_file import read_verdicts
from binaryeval_dspy.optimizers.bineval_optimizer.label_failures import label_reference
from binaryeval_dspy.reports.run_view import view_data, write_view
from binaryeval_dspy.schemas.item_result import text_hash
from tests.headless_chromium import Browser, find_chromium
from tests.reports.test_run_view import HOSTILE_ID, HOSTILE_QUESTION, OUTPUTS, run_dir  # noqa: F401 - fixture
from tests.reports.test_view_truth import prototype_run  # noqa: F401 - fixture

needs_chromium = pytest.mark.skipif(find_chromium() is None,
                                    reason="needs Debian's chromium package (apt-get install chromium)")


def _click(page, item_id: str, question_id: str, button: str) -> None:
    """Open `item_id` (through the URL, as a link would) and click one label button of `question_id`
    (``yes``, ``no`` or ``wrong``)."""
    page.evaluate(f"location.hash = {json.dumps('#tab=items&item=' + quote(item_id, safe=''))}")
    page.wait_for(f"document.getElementById('detail') && "
                  f"document.getElementById('detail').dataset.item === {json.dumps(item_id)}")
    page.evaluate(f"""(() => {{
      const row = [...document.querySelectorAll('#detail-verdicts tr')]
        .find(r => r.dataset.question === {json.dumps(question_id)});
      row.querySelector('td.label-cell button[data-value="{button}"]').click();
    }})()""")


def _type(page, element_id: str, text: str) -> None:
    page.evaluate(f"""(() => {{ const box = document.getElementById({json.dumps(element_id)});
      box.value = {json.dumps(text)}; box.dispatchEvent(new Event('input')); }})()""")


def _choose(page, element_id: str, value: str) -> None:
    page.evaluate(f"""(() => {{ const box = document.getElementById({json.dumps(element_id)});
      box.value = {json.dumps(value)}; box.dispatchEvent(new Event('change')); }})()""")


def test_the_page_data_names_the_default_judge_and_each_judged_output(run_dir):  # noqa: F811
    run = view_data(run_dir)["run"]
    assert run["label_judge"] == "human"
    hashes = {i["id"]: i["output_hash"] for i in run["items"]}
    assert hashes == {item_id: text_hash(text) for item_id, text in OUTPUTS.items()}


@pytest.mark.browser
@needs_chromium
def test_labels_set_on_the_page_download_as_a_verdicts_file(run_dir, tmp_path):  # noqa: F811
    page_file = write_view(run_dir, out=tmp_path / "view.html")
    with Browser(tmp_path / "downloads") as browser:
        page = browser.open(page_file.resolve().as_uri() + "#tab=items")
        assert page.evaluate("document.getElementById('label-download').disabled") is True  # nothing to download
        # item-1: the judge said no to the hostile question; the person says it is wrong
        _click(page, "item-1", "consistency-02", "wrong")
        # the hostile item: set "no" where the judge said yes, and "yes" where it said yes
        _click(page, HOSTILE_ID, "consistency-01", "no")
        _click(page, HOSTILE_ID, "fluency-01", "yes")
        # item-3: set, then take back (a second click on the same label removes it)
        _click(page, "item-3", "consistency-01", "yes")
        _click(page, "item-3", "consistency-01", "yes")
        count = page.evaluate("document.getElementById('label-count').dataset.labels + '/' + "
                              "document.getElementById('label-count').dataset.wrong")
        assert count == "3/2"
        shown = page.evaluate("""[...document.querySelectorAll('#detail-verdicts tr.label-disagrees')]
                                 .map(r => r.dataset.question)""")
        assert shown == []  # item-3 is open and holds no label any more
        _click(page, HOSTILE_ID, "consistency-01", "no")  # clicking "no" again clears it ...
        _click(page, HOSTILE_ID, "consistency-01", "no")  # ... and once more sets it back
        disagreeing = page.evaluate("""[...document.querySelectorAll('#detail-verdicts tr.label-disagrees')]
                                       .map(r => r.dataset.question)""")
        assert disagreeing == ["consistency-01"]
        page.screenshot(tmp_path / "labelling.png")

        page.evaluate("document.getElementById('label-download').click()")
        as_human = browser.wait_for_download("labels-human.jsonl")
        _type(page, "label-annotator", "ann 1/<b>")
        _choose(page, "label-format", "csv")
        page.evaluate("document.getElementById('label-download').click()")
        as_csv = browser.wait_for_download("labels-ann_1_b_.csv")

    human = read_verdicts(as_human)
    assert [(r.item_id, r.question_id, r.judge, r.verdict) for r in human] == [
        ("item-1", "consistency-02", "human", "yes"),
        (HOSTILE_ID, "consistency-01", "human", "no"),
        (HOSTILE_ID, "fluency-01", "human", "yes")]
    assert human[0].question_text == HOSTILE_QUESTION and human[0].dimension == "consistency"
    assert human[0].output_hash == text_hash(OUTPUTS["item-1"])
    assert "answered no (marked wrong)" in human[0].explanation
    annotated = read_verdicts(as_csv)  # quotes, "|" and "<" in ids and texts survive the CSV
    assert {r.judge for r in annotated} == {"ann 1/<b>"}
    assert [r.model_dump(exclude={"judge"}) for r in annotated] == [r.model_dump(exclude={"judge"}) for r in human]

    # ... the labels the optimizer's human mode learns from (`labels`) ...
    assert label_reference(read_verdicts(as_human)) == {("item-1", "consistency-02"): True,
                                                        (HOSTILE_ID, "consistency-01"): False,
                                                        (HOSTILE_ID, "fluency-01"): True}
    # ... and a labels file for `bineval agreement`, against the run's own verdicts
    result = CliRunner().invoke(cli, ["agreement", "--labels", str(as_human), "--verdicts", str(run_dir),
                                      "--out", str(tmp_path / "agreement")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "agreement" / "agreement.json").read_text(encoding="utf-8"))
    judge = next(iter(report["judges"].values()))
    assert (judge["pairs"], judge["agree"]) == (3, 1)


@pytest.mark.browser
@needs_chromium
def test_prototype_names_are_labelled_as_data(prototype_run, tmp_path):  # noqa: F811
    page_file = write_view(prototype_run, out=tmp_path / "proto.html")
    with Browser(tmp_path / "downloads") as browser:
        page = browser.open(page_file.resolve().as_uri() + "#tab=items")
        _click(page, "constructor", "__proto__", "no")
        _click(page, "constructor", "constructor", "wrong")
        _click(page, "toString", "hasOwnProperty", "yes")
        _type(page, "label-annotator", "__proto__")
        text = page.evaluate("document.body.innerText")
        assert "native code" not in text and "[object Object]" not in text
        page.evaluate("document.getElementById('label-download').click()")
        path = browser.wait_for_download("labels-__proto__.jsonl")
    records = read_verdicts(path)
    assert [(r.item_id, r.question_id, r.judge, r.verdict) for r in records] == [
        ("constructor", "constructor", "__proto__", "no"),
        ("constructor", "__proto__", "__proto__", "no"),
        ("toString", "hasOwnProperty", "__proto__", "yes")]
    assert [r.dimension for r in records] == ["constructor", "__proto__", "hasOwnProperty"]

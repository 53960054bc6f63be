"""Issue 30: every user text in every Markdown and HTML output goes through the one escaping function.

Issue 23 made tables safe; the prose around them (paragraphs, titles, headings, captions,
notes, bullet lists, the hand-written lines of ``summary.md`` and of an optimizer history's
summary) still carried a prediction file's name or an LM name as raw Markdown: an
``<img ... onerror=...>`` tag in report.md. Here the hostile text goes into every name a user
chooses (LM, prediction set, file and folder, dimension, item id) and no Markdown output may
hold an unescaped tag or link from it: ``<`` only as ``\\<`` (or our own ``<br>``), ``[`` only
as ``\\[`` (or our own figure links). Scripted LMs only (plumbing, never a model's judgment).
"""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.comparison.report import comparison_markdown
from binaryeval_dspy.comparison.results import OptimizerResult
from binaryeval_dspy.render import (
    BulletList,
    Document,
    Figure,
    MarkdownText,
    Section,
    Table,
    to_html,
    to_markdown,
)
from binaryeval_dspy.schemas.optimization_history import IterationRecord, OptimizationHistory
from tests.conftest import judge_script

TAG = "<img src=x onerror=alert(1)>"
LINK = "[click](javascript:alert(1))"  # no slash: it is also a file name
HOSTILE = f"{TAG} {LINK} `tick` |pipe"


def raw_markup(markdown: str) -> list[str]:
    """Every unescaped ``<`` (except our ``<br>``) and ``[`` (except our figure links) of `markdown`."""
    found = []
    for number, line in enumerate(markdown.splitlines(), start=1):
        figure = re.fullmatch(r"!\[(?:\\.|[^\]\\])*\]\(figures/[\w.-]+\.png\)", line)  # ours: ![caption](figures/x.png)
        for match in re.finditer(r"(?<!\\)(<(?!br>)|\[)", line):
            if figure and match.start() == 1:
                continue
            found.append(f"line {number}: {line[max(0, match.start() - 30):match.start() + 40]!r}")
    return found


def test_the_document_renderer_escapes_every_text_it_places():
    document = Document(title=f"Title {HOSTILE}", intro=[f"A paragraph {HOSTILE}", f"# {HOSTILE}",
                                                         BulletList(items=[f"item {HOSTILE}", f"- {HOSTILE}"])],
                        sections=[Section(heading=f"Heading {HOSTILE}", blocks=[
                            Table(caption=f"Caption {HOSTILE}", header=["a", "b"], rows=[[HOSTILE, "1"]],
                                  note=f"Note {HOSTILE}"),
                            Figure(caption=f"Figure {HOSTILE}", filename="f.png", drawing="violins"),
                            f"    {HOSTILE}"])])
    markdown = to_markdown(document)
    assert raw_markup(markdown) == [], markdown
    assert "\\<img src=x onerror=alert(1)>" in markdown and "\\[click\\](javascript:alert(1))" in markdown
    assert not re.search(r"^(#{1,6} |- |    )" + re.escape("\\<img"), markdown, flags=re.M)  # no heading, list, code
    assert "![Figure \\<img" in markdown and "](figures/f.png)" in markdown
    page = to_html(document, figure_png={})
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    from binaryeval_dspy.render import markdown_paragraph

    assert markdown_paragraph("1. first") == "1\\. first"


def test_the_agreement_report_prose_escapes_file_and_set_names(tmp_path):
    scored, mine = [], []
    for doc in range(3):
        for system in range(3):
            item_id = f"d{doc}-s{system}"
            scored.append({"id": item_id, "doc": f"doc{doc}", "system": f"S{system}", "h": doc + system})
            mine.append({"item_id": item_id, "coherence": (doc + system) * 2 + (system == 1)})
    scored_path = tmp_path / "scored.jsonl"
    scored_path.write_text("".join(json.dumps(r) + "\n" for r in scored), encoding="utf-8")
    folder = tmp_path / f"preds {TAG} {LINK}"
    folder.mkdir()
    mine_path = folder / f"mine {TAG}.jsonl"
    mine_path.write_text("".join(json.dumps(r) + "\n" for r in mine), encoding="utf-8")
    out = tmp_path / "report"
    result = CliRunner().invoke(cli, [
        "agreement", str(scored_path), "--human-fields", "coherence=h", "--id-field", "id", "--doc-field", "doc",
        "--system-field", "system", "--predictions", f"mine={mine_path}", "--out", str(out),
        "--bootstrap", "20", "--no-figures"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert "mine \\<img src=x onerror=alert(1)>.jsonl" in markdown  # the name is kept, escaped
    assert raw_markup(markdown) == [], raw_markup(markdown)
    assert "<img" not in (out / "report.html").read_text(encoding="utf-8")


def test_summary_md_escapes_the_lm_name_in_its_heading_and_prose(tmp_path, cli_scripted_lms, small_question_set):
    cli_scripted_lms(judge_script({"Is every claim supported?": "yes", "Are the numbers right?": "no",
                                   "Is it grammatical?": "yes"}), name=f"judge {HOSTILE}")
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": f"i{n}", "input": "s", "output": "t"}) + "\n" for n in range(3)),
                     encoding="utf-8")
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["evaluate", str(small_question_set.save(tmp_path / "qs.json")), str(items),
                                      "--id-field", "id", "--out", str(out)])
    assert result.exit_code == 0, result.output
    markdown = (out / "summary.md").read_text(encoding="utf-8")
    assert markdown.startswith("# BinEval run summary (3 items, LM: judge \\<img src=x onerror=alert(1)>"), markdown
    assert raw_markup(markdown) == [], raw_markup(markdown)


def test_comparison_md_escapes_lm_names_in_its_bullets_and_history(tmp_path):
    config = {"setup": {"kind": "ifbench", "mode": "generation", "sizes": {"train": 1, "val": 0, "test": 1}},
              "lm": f"task {HOSTILE}", "prompt_lm": f"prompt {HOSTILE}", "optimizers": ["gepa"], "metric": "m",
              "test_metric": "t", "seed": 42, "limit": 1, "notes": [f"a note {HOSTILE}"]}
    result = OptimizerResult(optimizer="gepa", lm=config["lm"], prompt_lm=config["prompt_lm"], test_records=[],
                             lms={"task": config["lm"]})
    history = OptimizationHistory(mode="human", lms={"target": f"target {HOSTILE}"}, iterations=[
        IterationRecord(iteration=0, prompts={"judge": "p"}, selection_score=0.5)], best_iteration=0,
        selection_rule=f"rule {HOSTILE}")
    (tmp_path / "bineval").mkdir()
    history.save(tmp_path / "bineval" / "history.json")
    markdown = comparison_markdown(config, [result], tmp_path)
    assert "Task LM: **task \\<img src=x" in markdown and "target \\<img src=x" in markdown, markdown
    assert raw_markup(markdown) == [], raw_markup(markdown)


@pytest.mark.parametrize("block", [MarkdownText(markdown="kept *as* written")])
def test_markdown_text_is_the_one_block_kept_as_written(block):
    assert to_markdown(Document(title="t", intro=[block])) == "# t\n\nkept *as* written\n"

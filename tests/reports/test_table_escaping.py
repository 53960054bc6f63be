"""Issue 23, point 7: user text never splits a Markdown table row or becomes an HTML tag.

A pipe, a line break, backticks and ``<script>`` go into dimension names, question ids and
texts, item ids, prediction-set (method) names and file names; every Markdown table of
summary.md, the benchmark report (its question analysis included) and the agreement
report must keep as many cells per row as its header, and the HTML pages must hold no
tag from that text. Scripted LMs only (plumbing, never a model's judgment).
"""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.render import (
    Document,
    Section,
    Table,
    markdown_cell,
    to_html,
    to_markdown,
)
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from tests.cli.test_cli import fake_lm  # noqa: F401  (fixture)
from tests.conftest import judge_script
from tests.reports.test_benchmark_run import DIMS, data_dir, scripted, tasks_dir  # noqa: F401  (fixtures)

HOSTILE = "a|b\nc `d` <script>alert(1)</script> e\\|f"


def cells(line: str) -> int:
    """Cells of one Markdown table row: unescaped pipes between the outer ones (a backslash
    escapes the next character, as in GitHub's table parsing)."""
    count, escaped = 0, False
    for char in line.strip():
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "|":
            count += 1
    return count - 1


def tables(markdown: str) -> list[list[str]]:
    """Every Markdown table of a text: runs of lines that start with ``|``."""
    found: list[list[str]] = []
    previous = False
    for line in markdown.splitlines():
        row = line.startswith("|")
        if row and not previous:
            found.append([])
        if row:
            found[-1].append(line)
        previous = row
    return found


def assert_tables_whole(markdown: str, minimum: int = 1) -> None:
    found = tables(markdown)
    assert len(found) >= minimum, markdown
    for table in found:
        width = cells(table[0])
        assert width >= 2, table[0]
        for line in table[1:]:
            assert cells(line) == width, f"{line!r} has {cells(line)} cells, its header {width}"
        # a tag only as escaped text (\<script>) in every cell
        assert not any(re.search(r"(?<!\\)<script", line) for line in table), table


def test_markdown_cell_escapes_every_row_breaking_character():
    assert markdown_cell("a|b") == "a\\|b" and markdown_cell("a\r\nb\nc\rd") == "a<br>b<br>c<br>d"
    assert markdown_cell("x\\|y") == "x\\\\\\|y"  # a user's backslash cannot un-escape our pipe
    assert markdown_cell("`code` <b>") == "\\`code\\` \\<b>"
    document = Document(title="t", sections=[Section(heading="h", blocks=[
        Table(header=["share |phi| < 0.3", HOSTILE], rows=[[HOSTILE, "1"], ["2", HOSTILE]])])])
    assert_tables_whole(to_markdown(document))
    page = to_html(document, figure_png={})
    assert "<script" not in page and "&lt;script&gt;" in page


def test_summary_md_keeps_its_rows_with_hostile_dimensions_questions_and_ids(tmp_path, fake_lm):  # noqa: F811
    dims = [f"dim {HOSTILE}", "plain"]
    qs = QuestionSet(task_prompt="Summarize.", dimensions=dims, questions=[
        BinaryQuestion(id="q|1", dimension=dims[0], text=f"Is it {HOSTILE}?"),
        BinaryQuestion(id="q2", dimension=dims[1], text="Is it short?")])
    fake_lm(judge_script({f"Is it {HOSTILE}?": "yes", "Is it short?": "no"}))
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": f"item {HOSTILE} {n}", "source": "s", "summary": "t"}) + "\n"
                             for n in range(2)), encoding="utf-8")
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["evaluate", str(qs.save(tmp_path / "qs.json")), str(items), "--input-field",
                                      "source", "--output-field", "summary", "--id-field", "id", "--out", str(out)])
    assert result.exit_code == 0, result.output
    markdown = (out / "summary.md").read_text(encoding="utf-8")
    assert_tables_whole(markdown)
    assert "dim a\\|b<br>c" in markdown  # the name is kept, escaped, not dropped


def test_benchmark_report_and_question_analysis_keep_their_rows(tmp_path, data_dir, tasks_dir, scripted):  # noqa: F811
    path = tasks_dir / "summeval" / "questions.manual.json"
    questions = json.loads(path.read_text())
    for q in questions["questions"]:
        q["id"] = f"{q['id']} {HOSTILE}"
        q["text"] = f"{HOSTILE} {q['text']}"  # the scripted judge reads the number at the end
    path.write_text(json.dumps(questions))
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["benchmark", "summeval", "--data-dir", str(data_dir), "--tasks-dir",
                                      str(tasks_dir), "--out", str(out), "--bootstrap", "20", "--methods",
                                      "bineval,rouge", "--no-figures"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert "Yes-rate per binary question" in markdown
    assert_tables_whole(markdown, minimum=3)
    assert "<script" not in (out / "report.html").read_text(encoding="utf-8")


def test_agreement_report_keeps_its_rows_with_hostile_names_and_files(tmp_path):
    dims = ["coh|erence", "flu`ency"]
    scored, mine = [], []
    for doc in range(3):
        for system in range(3):
            item_id = f"d{doc}|s{system} <script>"
            scored.append({"id": item_id, "doc": f"doc|{doc}", "system": f"S|{system}",
                           "h": {"a": doc + system, "b": system * 2 - doc}})
            mine.append({"item_id": item_id, dims[0]: (doc + system) * 3 + (system == 1), dims[1]: system - doc})
    scored_path = tmp_path / "scored.jsonl"
    scored_path.write_text("".join(json.dumps(r) + "\n" for r in scored), encoding="utf-8")
    folder = tmp_path / "pred|x <script>"
    folder.mkdir()
    mine_path = folder / "mi|ne `x`.jsonl"
    mine_path.write_text("".join(json.dumps(r) + "\n" for r in mine), encoding="utf-8")
    out = tmp_path / "report"
    result = CliRunner().invoke(cli, [
        "agreement", str(scored_path), "--human-fields", f"{dims[0]}=h.a,{dims[1]}=h.b", "--id-field", "id",
        "--doc-field", "doc", "--system-field", "system", "--predictions",
        f"mine={mine_path}", "--out", str(out), "--bootstrap", "20",
        "--no-figures"], catch_exceptions=False)
    if result.exit_code != 0:
        pytest.fail(result.output)
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert_tables_whole(markdown, minimum=2)
    assert "mi\\|ne \\`x\\`.jsonl" in markdown
    assert "<script" not in (out / "report.html").read_text(encoding="utf-8")

"""Issue 30: no command drops an unreadable line of ``results.jsonl`` without counting and naming it.

Each command that reads a run is given one whose results file ends in a half-written line
(a run killed mid-write): `view` (tests/reports/test_view_truth.py), `report`, `agreement
--run`, `rejudge` (of a run it must never change), `optimize --source-verdicts` (its loader)
and `evaluate` resuming its own run. Scripted LMs only (plumbing, never a model's judgment).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.optimizers.bineval_optimizer.cross_model import load_source_verdicts
from binaryeval_dspy.runs.run_directory import RunDirectory
from tests.reports.test_benchmark_run import _run as run_cli
from tests.reports.test_benchmark_run import data_dir, scripted, tasks_dir  # noqa: F401 - fixtures
from tests.reports.test_view_truth import OUTPUTS, QS, evaluate

FRAGMENT = '{"schema_version": 1, "item_id": "doc-'


def _cut_last_line(results: Path) -> str:
    """Cut the last line of `results` to 40 bytes; returns the file's new text."""
    lines = results.read_text(encoding="utf-8").splitlines(keepends=True)
    text = "".join(lines[:-1]) + lines[-1][:40]
    results.write_text(text, encoding="utf-8")
    return text


def _benchmark_with_a_fragment(tmp_path: Path, data_dir: Path, tasks_dir: Path) -> Path:  # noqa: F811
    run = tmp_path / "bench"
    result = run_cli(["benchmark", "summeval", "--data-dir", str(data_dir), "--tasks-dir", str(tasks_dir), "--out",
                      str(run), "--methods", "rouge", "--no-figures", "--bootstrap", "20", "--limit", "4"])
    assert result.exit_code == 0, result.output
    results = run / "rouge" / "results.jsonl"
    results.write_text(results.read_text(encoding="utf-8") + FRAGMENT, encoding="utf-8")
    return run


def test_report_counts_and_names_the_line(tmp_path, data_dir, tasks_dir, scripted):  # noqa: F811
    run = _benchmark_with_a_fragment(tmp_path, data_dir, tasks_dir)
    result = run_cli(["report", str(run), "--bootstrap", "20", "--no-figures"])
    assert result.exit_code == 0, result.output
    markdown = (run / "report.md").read_text(encoding="utf-8")
    assert "rouge/results.jsonl: 1 of 5 lines could not be read" in markdown, markdown[:3000]
    assert "line 5 (an incomplete last line of 38 bytes" in markdown
    metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    assert len(metrics["unreadable_result_lines"]) == 1
    assert (run / "rouge" / "results.jsonl").read_text(encoding="utf-8").endswith(FRAGMENT)  # never trimmed


def test_agreement_with_a_run_counts_and_names_the_line(tmp_path, data_dir, tasks_dir, scripted):  # noqa: F811
    run = _benchmark_with_a_fragment(tmp_path, data_dir, tasks_dir)
    items = [json.loads(line) for line in (run / "items.jsonl").read_text().splitlines()]
    mine = tmp_path / "mine.csv"
    mine.write_text("item_id,score\n" + "".join(f"{r['item_id']},{i % 3}\n" for i, r in enumerate(items)))
    out = tmp_path / "agree"
    result = run_cli(["agreement", "--run", str(run), "--predictions", f"mine={mine}", "--out", str(out),
                      "--bootstrap", "20", "--no-figures"])
    assert result.exit_code == 0, result.output
    assert "line 5 (an incomplete last line" in (out / "report.md").read_text(encoding="utf-8")


def test_rejudge_names_the_line_and_leaves_the_previous_run_untouched(tmp_path, cli_scripted_lms):
    before = evaluate(tmp_path, cli_scripted_lms, "run", QS, OUTPUTS)
    cut = _cut_last_line(before / "results.jsonl")
    result = CliRunner().invoke(cli, ["rejudge", str(before), str(tmp_path / "run-items.jsonl"), "--out",
                                      str(tmp_path / "again")])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "1 of 3 lines could not be read" in said and "line 3 (an incomplete last line of 40 bytes" in said, said
    assert (before / "results.jsonl").read_text(encoding="utf-8") == cut  # the previous run is never modified
    report = json.loads((tmp_path / "again" / "rejudge.json").read_text(encoding="utf-8"))
    assert "line 3" in report["previous_unreadable"]
    assert {i["item_id"]: i["status"] for i in report["items"]}["item-2"] == "new"


def test_source_verdicts_are_read_without_trimming_and_the_line_is_named(tmp_path, cli_scripted_lms, caplog):
    source = evaluate(tmp_path, cli_scripted_lms, "source", QS, OUTPUTS)
    cut = _cut_last_line(source / "results.jsonl")
    with caplog.at_level(logging.WARNING):
        verdicts = load_source_verdicts(source)
    assert set(verdicts) == {"item-0", "item-1"}
    assert "line 3 (an incomplete last line of 40 bytes" in caplog.text
    assert (source / "results.jsonl").read_text(encoding="utf-8") == cut


def test_evaluate_resuming_its_own_run_names_the_line_it_trims(tmp_path, cli_scripted_lms, caplog):
    """The run's owner trims the fragment and judges its item again, with a warning naming the line
    (printed by Python's last-resort handler on the command line; captured here)."""
    out = evaluate(tmp_path, cli_scripted_lms, "run", QS, OUTPUTS)
    _cut_last_line(out / "results.jsonl")
    with caplog.at_level(logging.WARNING):
        result = CliRunner().invoke(cli, ["evaluate", str(tmp_path / "run-qs.json"), str(tmp_path / "run-items.jsonl"),
                                          "--id-field", "id", "--out", str(out), "--empty-output", "record"])
    assert result.exit_code == 0, result.output
    assert "results.jsonl:3: dropping an incomplete last line (40 bytes)" in caplog.text
    assert [r.item_id for r in RunDirectory(out).read_results()] == ["item-0", "item-1", "item-2"]

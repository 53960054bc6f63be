"""The benchmark report split into compute and render: metrics.json alone re-renders the same
report, compute writes nothing, the renderers follow the document model, and importing the
report modules does not import matplotlib."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from binaryeval_dspy.errors import InputError
from binaryeval_dspy.reports.benchmark_metrics import compute_benchmark_metrics
from binaryeval_dspy.reports.metrics_document import BenchmarkMetrics
from binaryeval_dspy.render import (
    BulletList,
    Document,
    Figure,
    Section,
    Table,
    to_html,
    to_markdown,
)
from tests.reports.test_benchmark_run import _run, data_dir, scripted, tasks_dir  # noqa: F401


@pytest.fixture
def run_dir(tmp_path, data_dir, tasks_dir, scripted):  # noqa: F811
    """A whole scripted SummEval run (every method) with its report and figures."""
    pytest.importorskip("matplotlib")
    out = tmp_path / "run"
    result = _run(["benchmark", "summeval", "--data-dir", str(data_dir), "--tasks-dir", str(tasks_dir),
                   "--out", str(out), "--bootstrap", "20"])
    assert result.exit_code == 0, result.output
    return out


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_metrics_json_alone_re_renders_the_same_report(tmp_path, run_dir):
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(run_dir / "metrics.json", copy / "metrics.json")  # no benchmark.json, items or results
    result = _run(["report", str(copy)])
    assert result.exit_code == 0, result.output
    assert "re-rendered from" in result.output
    assert (copy / "report.md").read_text() == (run_dir / "report.md").read_text()
    assert (copy / "report.html").read_text() == (run_dir / "report.html").read_text()
    figures = sorted(p.name for p in (run_dir / "figures").iterdir())
    assert figures and figures == sorted(p.name for p in (copy / "figures").iterdir())
    for name in figures:
        assert (copy / "figures" / name).read_bytes() == (run_dir / "figures" / name).read_bytes()


def test_from_metrics_on_a_run_reads_no_run_file_and_ignores_bootstrap_options(run_dir):
    before = (run_dir / "report.md").read_text()
    for path in run_dir.rglob("*.jsonl"):
        path.write_text("not json\n")  # a recomputation would fail on these
    result = _run(["report", str(run_dir), "--from-metrics", "--bootstrap", "50"])
    assert result.exit_code == 0, result.output
    assert "--bootstrap not applied" in " ".join(result.output.split())
    assert (run_dir / "report.md").read_text() == before
    recomputed = _run(["report", str(run_dir), "--bootstrap", "20"])
    assert recomputed.exit_code != 0  # without --from-metrics the (now damaged) run files are read


def test_compute_is_pure_and_renders_what_was_written(run_dir):
    files = _snapshot(run_dir)
    first = compute_benchmark_metrics(run_dir, n_resamples=20, seed=0)
    second = compute_benchmark_metrics(run_dir, n_resamples=20, seed=0)
    assert _snapshot(run_dir) == files  # nothing written, nothing drawn into the run
    assert first.model_dump(mode="json") == second.model_dump(mode="json")
    assert to_markdown(first.report) == (run_dir / "report.md").read_text()
    saved = json.loads((run_dir / "metrics.json").read_text())
    assert saved["bineval"]["coherence"]["spearman"] == pytest.approx(1.0)  # the flat layout is kept
    assert saved["schema_version"] == 1 and saved["report"]["title"] == first.report.title
    loaded = BenchmarkMetrics.load(run_dir)
    assert to_markdown(loaded.report) == to_markdown(first.report)
    assert [f.filename for f in loaded.report.figures()] == ["phi_heatmaps.png", "violins.png", "systems.png",
                                                             "scatter.png"]


def test_a_metrics_json_without_its_report_is_refused_with_the_fix(tmp_path):
    (tmp_path / "metrics.json").write_text(json.dumps({"benchmark": "summeval", "lm": "x", "items": 1,
                                                       "level": "summary", "constant_predictions": "skip"}))
    with pytest.raises(InputError, match="no report document") as info:
        BenchmarkMetrics.load(tmp_path)
    assert "without `from_metrics`" in str(info.value)
    result = _run(["report", str(tmp_path), "--from-metrics"])
    assert result.exit_code == 2 and "no report document" in " ".join(result.output.split())
    (tmp_path / "metrics.json").unlink()
    missing = _run(["report", str(tmp_path)])
    assert missing.exit_code == 2 and "no benchmark.json" in " ".join(missing.output.split())


def test_markdown_and_html_follow_the_document():
    document = Document(title="T <1>", intro=["Intro.", BulletList(items=["a", "b"])], sections=[
        Section(heading="S", blocks=[
            Table(caption="C", header=["Method", "rho", "label"], rows=[["x", "0.5", "left"], ["y", "n/a", "z"]],
                  note="N"),
            Table(header=["a", "b"], rows=[["1", "2"]], align="left"),
            Figure(caption="F", filename="f.png", drawing="violins")])])
    markdown = to_markdown(document)
    assert markdown == ("# T \\<1>\n\nIntro.\n\n- a\n- b\n\n## S\n\n**C**\n\n| Method | rho | label |\n|---|---:|---|\n"
                        "| x | 0.5 | left |\n| y | n/a | z |\n\nN\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
                        "![F](figures/f.png)\n\n*F*\n")
    page = to_html(document, {"f.png": b"PNG"})
    assert "<title>T &lt;1&gt;</title>" in page and "<li>a</li>" in page
    assert "src='data:image/png;base64,UE5H'" in page  # the figure is embedded, not linked
    assert "[figure not drawn: F]" in to_html(document, {})
    assert Document.model_validate_json(document.model_dump_json()) == document  # blocks round-trip


def test_importing_the_report_modules_does_not_import_matplotlib():
    code = ("import sys; import binaryeval_dspy.reports.benchmark_report, binaryeval_dspy.reports.figures, "
            "binaryeval_dspy.comparison.report; print('matplotlib' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"

"""A whole benchmark on a tiny synthetic SummEval slice with scripted LMs: every method,
resume, added methods, refusal of a mixed run, and the report rebuilt without any LM."""

import json
import re
from pathlib import Path

import dspy
import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli import benchmark_command as command_module
from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.meta_eval import BenchmarkRun, load_run_scores
from binaryeval_dspy.reports.benchmark_report import build_benchmark_report
from tests.fakes import field_value, scripted_lm

DIMS = ("coherence", "consistency", "fluency", "relevance")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """3 documents x 4 systems; system k's summary says 'good' k times and humans agree."""
    folder = tmp_path / "data" / "summeval"
    folder.mkdir(parents=True)
    rows = []
    for doc in range(3):
        for k in range(4):
            score = 1 + k + (0.5 if doc == 1 and k == 3 else 0)
            rows.append({"doc_id": f"doc-{doc}", "system_id": f"M{k}", "source": f"Article {doc} about a match.",
                         "system_output": " ".join(["summary"] + ["good"] * k) + f" of article {doc}.",
                         "reference": f"A match report {doc} good good.",
                         "scores": {d: min(score, 5) for d in DIMS}})
    (folder / "summeval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return tmp_path / "data"


def script(system: str, user: str):
    """BinEval: yes iff the summary says 'good' more often than the question's number;
    G-Eval-style: the fewer 'good's the higher the score (perfectly wrong);
    UniEval-style: always yes (a constant evaluator)."""
    output = field_value(user, "output")
    goods = output.count("good")
    if "[[ ## criterion ## ]]" in user:
        return {"score": 5 - goods}
    if "[[ ## violation_example ## ]]" in user:
        number = int(re.search(r"(\d+)$", field_value(user, "question")).group(1)) if re.search(
            r"(\d+)$", field_value(user, "question")) else 0
        return {"verdict": "yes" if goods > number else "no", "explanation": f"{goods} goods"}
    return {"answer": "yes"}


@pytest.fixture
def tasks_dir(tmp_path: Path) -> Path:
    """The shipped SummEval rubric with a 3-question-per-dimension set whose questions end in a number."""
    folder = tmp_path / "tasks" / "summeval"
    folder.mkdir(parents=True)
    shipped = Path(__file__).resolve().parents[1] / "binaryeval_dspy" / "benchmark_data" / "tasks" / "summeval"
    (folder / "rubric.json").write_text((shipped / "rubric.json").read_text())
    (folder / "task_prompt.txt").write_text("Summarize the article.")
    questions = [{"id": f"{d}-{n:02d}", "dimension": d, "text": f"Is it good beyond {n}", "origin": "manual"}
                 for d in DIMS for n in (0, 1, 2)]
    (folder / "questions.manual.json").write_text(json.dumps({"dimensions": list(DIMS), "questions": questions}))
    return tmp_path / "tasks"


@pytest.fixture
def scripted(monkeypatch):
    lm, engine = scripted_lm(script)
    handle = LMHandle(lm=lm, adapter=dspy.JSONAdapter(), name="scripted-judge", embedded=False)
    monkeypatch.setattr(command_module, "build_lm", lambda *a, **k: handle)
    return engine


def _run(args: list[str]):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_whole_benchmark_with_scripted_lm(tmp_path, data_dir, tasks_dir, scripted):
    out = tmp_path / "run"
    base = ["benchmark", "summeval", "--data-dir", str(data_dir), "--tasks-dir", str(tasks_dir), "--out", str(out),
            "--bootstrap", "50"]
    result = _run([*base, "--methods", "bineval,rouge", "--no-figures"])
    assert result.exit_code == 0, result.output
    assert len(scripted.calls) == 12 * 12  # 12 items x 12 binary questions
    assert not (out / "geval").exists()

    result = _run([*base, "--methods", "bineval,geval,unieval,rouge"])
    assert result.exit_code == 0, result.output
    assert len(scripted.calls) == 12 * 12 + 12 * 4 * 2  # only the two new methods ran
    for method in ("bineval", "geval", "unieval", "rouge"):
        assert len((out / method / "results.jsonl").read_text().splitlines()) == 12

    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["lm"] == "scripted-judge"
    assert metrics["bineval"]["coherence"]["spearman"] == pytest.approx(1.0)
    assert metrics["geval"]["coherence"]["spearman"] == pytest.approx(-1.0)
    # a constant evaluator: every document skipped (policy skip, the default) -> undefined, not 0
    assert metrics["unieval"]["coherence"]["spearman"] is None and metrics["constant_predictions"] == "skip"
    assert metrics["unieval"]["coherence"]["groups_constant_prediction"] == 3
    assert metrics["bineval"]["paired_vs"]["geval"]["Average"]["delta"] == pytest.approx(2.0)
    assert metrics["cost"]["bineval"]["lm_calls"] == 144 and metrics["cost"]["rouge"]["lm_calls"] == 0

    report = (out / "report.md").read_text()
    assert "Summary-level Spearman ρ / Kendall τ on SummEval (12 items, 3 documents) - LM: scripted-judge" in report
    assert "| BinEval | 1.000 / 1.000 |" in report and "| UniEval-style | n/a / n/a † |" in report
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html and "scripted-judge" in html
    assert (out / "figures" / "violins.png").stat().st_size > 1000


def test_resume_refuses_another_lm_and_report_needs_no_lm(tmp_path, data_dir, tasks_dir, scripted, monkeypatch):
    out = tmp_path / "run"
    base = ["benchmark", "summeval", "--data-dir", str(data_dir), "--tasks-dir", str(tasks_dir), "--out", str(out),
            "--bootstrap", "20", "--limit", "8", "--sample", "stratified", "--no-figures"]
    assert _run([*base, "--methods", "bineval"]).exit_code == 0
    calls = len(scripted.calls)
    assert _run([*base, "--methods", "bineval"]).exit_code == 0
    assert len(scripted.calls) == calls  # everything was already stored

    other_lm, _ = scripted_lm(script)
    other = LMHandle(lm=other_lm, adapter=dspy.JSONAdapter(), name="another-judge", embedded=False)
    monkeypatch.setattr(command_module, "build_lm", lambda *a, **k: other)
    refused = _run([*base, "--methods", "geval"])
    assert refused.exit_code == 2 and "the tables would mix two LMs" in " ".join(refused.output.split())

    def no_lm(*args, **kwargs):
        raise AssertionError("report must not build an LM")

    monkeypatch.setattr(command_module, "build_lm", no_lm)
    (out / "report.md").unlink()
    rebuilt = _run(["report", str(out), "--bootstrap", "20", "--no-figures"])
    assert rebuilt.exit_code == 0, rebuilt.output
    text = (out / "report.md").read_text()
    assert "LM: scripted-judge" in text and "8 items" in text


def test_partial_run_is_reported_as_incomplete(tmp_path, data_dir, tasks_dir, scripted):
    out = tmp_path / "run"
    base = ["benchmark", "summeval", "--data-dir", str(data_dir), "--tasks-dir", str(tasks_dir), "--out", str(out),
            "--bootstrap", "20", "--no-figures"]
    assert _run([*base, "--methods", "bineval,rouge"]).exit_code == 0
    lines = (out / "bineval" / "results.jsonl").read_text().splitlines()
    (out / "bineval" / "results.jsonl").write_text("\n".join(lines[:5]) + "\n")  # as if interrupted
    config = json.loads((out / "benchmark.json").read_text())
    config["methods"] = ["bineval", "geval", "rouge"]
    (out / "benchmark.json").write_text(json.dumps(config))
    report = build_benchmark_report(BenchmarkRun(out), n_resamples=20, figures=False)
    assert any("Incomplete run" in p and "geval" in p and "BinEval 5/12" in p for p in report.intro)
    scores = load_run_scores(BenchmarkRun(out))
    assert scores.costs["bineval"].items == 5 and scores.scores["bineval"]["coherence"].isna().sum() == 7


def test_cli_errors_are_located(tmp_path, tasks_dir, scripted):
    missing = _run(["benchmark", "summeval", "--data-dir", str(tmp_path / "none"), "--tasks-dir", str(tasks_dir)])
    assert missing.exit_code == 2 and "summeval/summeval.jsonl" in "".join(missing.output.split())
    bad = _run(["report", str(tmp_path)])
    assert bad.exit_code == 2 and "no benchmark.json" in " ".join(bad.output.split())


def test_rouge_only_run_can_be_extended_with_an_lm_method(tmp_path, data_dir, tasks_dir, scripted, monkeypatch):
    out = tmp_path / "run"
    base = ["benchmark", "summeval", "--data-dir", str(data_dir), "--tasks-dir", str(tasks_dir), "--out", str(out),
            "--bootstrap", "20", "--no-figures", "--limit", "4"]

    def no_lm(*args, **kwargs):
        raise AssertionError("ROUGE-L alone must not build an LM")

    with monkeypatch.context() as patch:
        patch.setattr(command_module, "build_lm", no_lm)
        assert _run([*base, "--methods", "rouge"]).exit_code == 0
    assert json.loads((out / "benchmark.json").read_text())["lm"] == "none"
    assert _run([*base, "--methods", "unieval"]).exit_code == 0
    config = json.loads((out / "benchmark.json").read_text())
    assert config["lm"] == "scripted-judge" and config["methods"] == ["unieval", "rouge"]
    assert _run([*base, "--methods", "rouge"]).exit_code == 0  # LM-free rerun keeps the run's LM
    assert json.loads((out / "benchmark.json").read_text())["lm"] == "scripted-judge"


def test_benchmark_questions_writes_a_generated_set_per_lm(tmp_path, monkeypatch):
    def generator_script(system: str, user: str):
        if "[[ ## requirement ## ]]" in user:
            requirement = field_value(user, "requirement")
            return {"questions": [{"question": f"Does the summary satisfy: {requirement}?", "dimension": "relevance",
                                   "violation_example": "It does not."}]}
        return {"requirements": ["Cover the main event.", "Stay faithful to the article."]}

    lm, _ = scripted_lm(generator_script)
    handle = LMHandle(lm=lm, adapter=dspy.JSONAdapter(), name="openai/gpt-x (scripted)", embedded=False)
    monkeypatch.setattr(command_module, "build_lm", lambda *a, **k: handle)
    folder = tmp_path / "tasks" / "summeval"
    folder.mkdir(parents=True)
    (folder / "task_prompt.txt").write_text("Summarize the article faithfully.")
    result = _run(["benchmark-questions", "summeval", "--tasks-dir", str(tmp_path / "tasks")])
    assert result.exit_code == 0, result.output
    written = folder / "questions.generated-openai-gpt-x-scripted.json"
    data = json.loads(written.read_text())
    assert data["generated_by"] == "openai/gpt-x (scripted)" and len(data["questions"]) == 2
    assert {q["origin"] for q in data["questions"]} == {"generated"}

    from binaryeval_dspy.errors import InputError
    from binaryeval_dspy.meta_eval import TaskFiles

    task = TaskFiles.for_benchmark("summeval", tmp_path / "tasks")
    assert task.question_set_path("generated", handle) == written
    with pytest.raises(InputError, match="questions.generated-openai-gpt-x-scripted.json"):
        task.question_set_path("manual")


def test_report_reading_never_cuts_a_line_being_written(tmp_path, data_dir, tasks_dir, scripted):
    out = tmp_path / "run"
    assert _run(["benchmark", "summeval", "--data-dir", str(data_dir), "--tasks-dir", str(tasks_dir), "--out",
                 str(out), "--methods", "rouge", "--no-figures", "--bootstrap", "20", "--limit", "4"]).exit_code == 0
    results = out / "rouge" / "results.jsonl"
    half = results.read_text() + '{"schema_version": 1, "item_id": "doc-'
    results.write_text(half)  # as if another process were in the middle of appending
    assert load_run_scores(BenchmarkRun(out)).costs["rouge"].items == 4
    assert results.read_text() == half


def test_sample_without_limit_is_announced_and_sources_are_relative(tmp_path, data_dir, tasks_dir, scripted,
                                                                    monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = _run(["benchmark", "summeval", "--data-dir", str(data_dir), "--tasks-dir", str(tasks_dir), "--out",
                   "run", "--bootstrap", "20", "--no-figures", "--methods", "bineval,unieval", "--sample", "random"])
    assert result.exit_code == 0, result.output
    assert "--sample random has no effect without --limit" in " ".join(result.output.split())
    config = json.loads((tmp_path / "run" / "benchmark.json").read_text())
    assert config["rubric_source"] == str(Path("tasks", "summeval", "rubric.json"))  # under the working dir
    assert config["question_set_source"] == str(Path("tasks", "summeval", "questions.manual.json"))


def test_rouge_alone_reads_no_task_file_and_bineval_can_join_later(tmp_path, data_dir, tasks_dir, scripted):
    out = tmp_path / "run"
    base = ["benchmark", "summeval", "--data-dir", str(data_dir), "--out", str(out), "--bootstrap", "20",
            "--no-figures", "--limit", "4"]
    empty_tasks = tmp_path / "no-tasks"
    empty_tasks.mkdir()
    alone = _run([*base, "--tasks-dir", str(empty_tasks), "--methods", "rouge"])
    assert alone.exit_code == 0, alone.output
    config = json.loads((out / "benchmark.json").read_text())
    assert config["question_set_hash"] == config["rubric_hash"] == ""
    assert not (out / "rubric.json").exists() and not (out / "question_set.json").exists()
    assert "question set" not in (out / "report.md").read_text().split("\n\n")[1]

    missing = _run([*base, "--tasks-dir", str(empty_tasks), "--methods", "unieval"])
    assert missing.exit_code == 2 and "task folder not found" in " ".join(missing.output.split())
    joined = _run([*base, "--tasks-dir", str(tasks_dir), "--methods", "bineval"])
    assert joined.exit_code == 0, joined.output
    config = json.loads((out / "benchmark.json").read_text())
    assert config["question_set_hash"] and config["rubric_hash"] == "" and config["methods"] == ["bineval", "rouge"]
    assert "BinEval question set" in (out / "report.md").read_text()


def test_ctrl_c_stops_the_whole_benchmark_not_only_the_current_method(tmp_path, data_dir, tasks_dir, monkeypatch):
    calls = {"n": 0}

    def interrupting(system: str, user: str):
        calls["n"] += 1
        if calls["n"] == 30:  # inside BinEval's third item (12 questions per item)
            raise KeyboardInterrupt
        return script(system, user)

    lm, _ = scripted_lm(interrupting)
    handle = LMHandle(lm=lm, adapter=dspy.JSONAdapter(), name="scripted-judge", embedded=False)
    monkeypatch.setattr(command_module, "build_lm", lambda *a, **k: handle)
    out = tmp_path / "run"
    result = _run(["benchmark", "summeval", "--data-dir", str(data_dir), "--tasks-dir", str(tasks_dir), "--out",
                   str(out), "--bootstrap", "20", "--no-figures"])
    assert result.exit_code == 130, result.output
    assert calls["n"] == 30  # nothing was called after the interrupt
    stored = [json.loads(line) for line in (out / "bineval" / "results.jsonl").read_text().splitlines()]
    assert len(stored) == 3  # two whole items, and the third with the answers it had (kept, incomplete)
    assert stored[2]["complete"] is False and stored[2]["questions_answered"] == 5
    for later in ("geval", "unieval", "rouge"):
        assert not (out / later / "results.jsonl").is_file() or not (out / later / "results.jsonl").read_text()
    assert "rerun the same command to resume" in " ".join(result.output.split())


def test_report_text_fits_the_run(tmp_path, data_dir, tasks_dir, scripted):
    out = tmp_path / "run"
    assert _run(["benchmark", "summeval", "--data-dir", str(data_dir), "--tasks-dir", str(tasks_dir), "--out",
                 str(out), "--bootstrap", "20", "--no-figures", "--methods", "bineval,rouge"]).exit_code == 0
    report = build_benchmark_report(BenchmarkRun(out), n_resamples=20, figures=False)
    assert "Methods: BinEval = " in report.intro[1] and "ROUGE-L = " in report.intro[1]
    assert "G-Eval-style" not in report.intro[1] and "UniEval-style" not in report.intro[1]
    tables = [block for _, blocks in report.sections for block in blocks if hasattr(block, "rows")]
    ci = next(t for t in tables if t.caption.startswith("Spearman ρ with bootstrap"))
    assert "Only 3 documents to resample" in ci.note
    paired = next(t for t in tables if t.caption.startswith("Paired bootstrap"))
    cells = [cell for row in paired.rows for cell in row[1:]]
    assert cells and all(re.search(r" p(<0\.05|=\d\.\d{3}|=n/a)$", c) for c in cells), cells
    assert "p=0.000" not in " ".join(cells)
    assert "(12 items, 3 documents)" in tables[0].caption


def test_p_values_are_shown_at_the_bootstrap_resolution():
    from binaryeval_dspy.reports.formatting import fmt_p
    assert fmt_p(0.0, 1000) == "p<0.001" and fmt_p(0.0004, 1000) == "p<0.001"
    assert fmt_p(0.044, 1000) == "p=0.044" and fmt_p(float("nan"), 1000) == "p=n/a"

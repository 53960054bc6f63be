"""The head-to-head harness on a tiny split with scripted LMs: every optimizer runs, results are
saved per optimizer, a rerun skips finished ones, and the report is rebuilt from saved files."""

from __future__ import annotations

import json
from types import SimpleNamespace

import dspy
import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.comparison import (
    Budgets,
    GeneratorSetup,
    bootstrap_ci,
    comparison_markdown,
    ifbench_split,
    load_ifbench_items,
    metrics_from_records,
    run_comparison,
    summeval_split,
)
from binaryeval_dspy.comparison.splits import load_summeval_items
from tests.fakes import scripted_lm
from tests.schema_script import schema_script


@pytest.fixture
def scripted_cli_lm(cli_scripted_lms):
    """Every --lm resolves to one scripted LM that answers any signature (engines recorded)."""
    return cli_scripted_lms(per_lm=lambda _made: schema_script())


ARGS = ["--limit", "3", "--iterations", "2", "--mipro-candidates", "2", "--mipro-trials", "2",
        "--copro-breadth", "2", "--copro-depth", "1", "--gepa-metric-calls", "8"]


def test_human_mode_comparison_runs_every_optimizer_and_resumes(tmp_path, comparison_data_dir, comparison_question_file, scripted_cli_lm):
    out = tmp_path / "cmp"
    args = ["optimize", "--mode", "human", "--compare", "bineval,mipro,copro,gepa", "--data-dir", str(comparison_data_dir),
            "--questions", str(comparison_question_file), "--out", str(out), *ARGS]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    for name in ("unoptimized", "bineval", "mipro", "copro", "gepa"):
        saved = json.loads((out / name / "result.json").read_text())
        assert saved["lm"] == "scripted-cli" and len(saved["test_records"]) == 3
        assert (out / name / "program.json").is_file() and (out / name / "history.json").is_file()
    assert json.loads((out / "unoptimized" / "result.json").read_text())["compile_lm_calls"] == 0
    assert json.loads((out / "copro" / "result.json").read_text())["compile_lm_calls"] > 0
    history = json.loads((out / "bineval" / "history.json").read_text())
    assert history["mode"] == "human" and history["iterations"][0]["prompts"]["judge_instructions"]
    report = (out / "comparison.md").read_text()
    assert "scripted-cli" in report and "| gepa |" in report and "| mipro |" in report
    assert "OPRO" in report and "Spearman" in report
    # the judge ranks good over bad summaries exactly as the ratings do: Spearman 1.0 on both dimensions
    record = json.loads((out / "unoptimized" / "result.json").read_text())["test_records"][0]
    assert set(record["model"]) == {"coherence", "fluency"}
    # the report is rebuilt from the saved files alone
    (out / "comparison.md").unlink()
    rebuilt = CliRunner().invoke(cli, ["optimize", "--mode", "human", "--out", str(out), "--report-only"])
    assert rebuilt.exit_code == 0, rebuilt.output
    assert (out / "comparison.md").read_text() == report
    # rerun: everything is done, nothing calls the LM again
    before = len(scripted_cli_lm)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    for name in ("unoptimized", "bineval", "mipro", "copro", "gepa"):
        assert f"{name}: skipped (done)" in result.output
    assert all(len(engine.calls) == 0 for engine in scripted_cli_lm[before:])


def test_cross_model_cli_with_a_source_lm(tmp_path, comparison_data_dir, comparison_question_file, scripted_cli_lm):
    out = tmp_path / "cross"
    result = CliRunner().invoke(cli, [
        "optimize", "--mode", "cross_model", "--compare", "bineval", "--source-lm", "other", "--data-dir",
        str(comparison_data_dir), "--questions", str(comparison_question_file), "--out", str(out), *ARGS])
    assert result.exit_code == 0, result.output
    lines = (out / "source_verdicts.jsonl").read_text().splitlines()
    assert len(lines) == 9  # 3 train + 3 validation + 3 test items, judged once by the source
    saved = json.loads((out / "bineval" / "result.json").read_text())
    assert all(r["agreement"] == 1.0 for r in saved["test_records"])  # same scripted judge on both sides
    assert "converged" in saved["notes"]
    assert "agreement" in (out / "comparison.md").read_text()


def test_resume_with_another_split_is_refused(tmp_path, comparison_data_dir, comparison_question_file, scripted_cli_lm):
    out = tmp_path / "cmp"
    base = ["optimize", "--mode", "human", "--data-dir", str(comparison_data_dir), "--questions", str(comparison_question_file),
            "--out", str(out), "--iterations", "1"]
    assert CliRunner().invoke(cli, [*base, "--limit", "3"]).exit_code == 0
    result = CliRunner().invoke(cli, [*base, "--limit", "2"])
    assert result.exit_code == 2 and "another setup" in result.output


def test_unknown_optimizer_is_reported_before_any_lm_work(tmp_path, comparison_data_dir, scripted_cli_lm):
    result = CliRunner().invoke(cli, ["optimize", "--mode", "human", "--compare", "bineval,opro",
                                      "--data-dir", str(comparison_data_dir)])
    assert result.exit_code == 2 and "opro" in result.output and scripted_cli_lm == []


def test_generation_comparison_with_injected_checkers(tmp_path, comparison_data_dir):
    """IFBench set-up with a fake checker (the real ones come from another branch)."""

    def check(example, response):
        ok = response.endswith("DONE")
        return SimpleNamespace(follow_all_instructions=ok, follow_instruction_list=[ok])

    lm, _ = scripted_lm(schema_script(lambda s, u: "no"))  # the judge fails every response
    split = ifbench_split(load_ifbench_items(comparison_data_dir), limit=2)
    setup = GeneratorSetup(split=split, checkers=(check, check))
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        config, results, failures = run_comparison(
            setup, ["bineval", "gepa"], tmp_path / "gen", lm_name="scripted", prompt_lm_name="scripted",
            budgets=Budgets(bineval_iterations=1, gepa_metric_calls=6), metric_description="BinEvalMetric",
            test_description="strict/loose")
    assert failures == {}
    assert [r.optimizer for r in results] == ["unoptimized", "bineval", "gepa"]
    # questions were generated once per train/validation prompt and cached
    assert len(list((tmp_path / "gen" / "questions").glob("*.json"))) == 4
    metrics = metrics_from_records("ifbench", results[0].test_records)
    assert metrics["strict_accuracy"].value == 0.0 and metrics["loose_accuracy"].n == 2
    history = json.loads((tmp_path / "gen" / "bineval" / "history.json").read_text())
    first = history["iterations"][0]
    assert first["lessons"] and first["rewrites"][0]["applied"]
    assert "| bineval |" in comparison_markdown(config, results)


def test_summeval_split_follows_the_paper_shape():
    items = load_summeval_items()  # the shared data (1,600 items)
    split = summeval_split(items)
    assert split.sizes() == {"train": 80, "val": 80, "test": 1440}
    dev = split.train + split.val
    assert {str(ex.system_id) for ex in dev} == {str(ex.system_id) for ex in items}
    assert all(sum(1 for ex in dev if ex.system_id == s) == 10 for s in {ex.system_id for ex in dev})
    assert not {ex.item_id for ex in dev} & {ex.item_id for ex in split.test}
    assert summeval_split(items, limit=4).sizes() == {"train": 4, "val": 4, "test": 4}


def test_ifbench_split_has_one_dev_case_per_constraint_type():
    items = load_ifbench_items()
    split = ifbench_split(items)
    dev = split.train + split.val
    types = {ex.instruction_id_list[0] for ex in items}
    assert len(dev) == len(types) and {ex.instruction_id_list[0] for ex in dev} == types
    assert len(split.test) == len(items) - len(types)


def test_row_rank_correlation_equals_scipy_spearman():
    import numpy as np
    from scipy.stats import spearmanr

    from binaryeval_dspy.comparison.results import _row_rank_correlation

    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 5, (3, 40)), rng.normal(size=(3, 40))
    rows = _row_rank_correlation(x, y)
    for k in range(3):
        assert rows[k] == pytest.approx(spearmanr(x[k], y[k]).statistic)
    assert np.isnan(_row_rank_correlation(np.ones((1, 5)), y[:1, :5])[0])


def test_bootstrap_ci_brackets_the_mean_and_is_undefined_for_tiny_samples():
    import numpy as np

    values = np.array([0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0])
    low, high = bootstrap_ci(len(values), lambda idx: values[idx].mean(axis=1))
    assert low < values.mean() < high and 0.0 <= low and high <= 1.0
    assert bootstrap_ci(2, lambda idx: idx.mean(axis=1)) == (None, None)
    assert bootstrap_ci(10, lambda idx: np.full(len(idx), np.nan)) == (None, None)


def test_evaluator_metrics_spearman_matches_scipy_and_has_a_ci():
    from scipy.stats import spearmanr

    records = [{"model": {"a": m}, "human": {"a": h}} for m, h in
               [(0.1, 0.0), (0.4, 0.5), (0.3, 0.25), (0.9, 1.0), (0.6, 0.5), (0.2, 0.25), (0.8, 0.75)]]
    metrics = metrics_from_records("summeval", records)
    expected = spearmanr([r["model"]["a"] for r in records], [r["human"]["a"] for r in records]).statistic
    assert metrics["spearman"].value == pytest.approx(expected)
    assert metrics["spearman"].low <= metrics["spearman"].value <= metrics["spearman"].high
    expected_agreement = 1 - sum(abs(r["model"]["a"] - r["human"]["a"]) for r in records) / len(records)
    assert metrics["human_agreement"].value == pytest.approx(expected_agreement)


def test_failed_question_generation_falls_back_to_generic_questions_and_says_so(tmp_path, comparison_data_dir):
    def script(system, user):
        if "[[ ## task_prompt ## ]]" in user and "[[ ## requirement ## ]]" not in user:
            return {"requirements": []}  # a weak LM that lists nothing
        return schema_script()(system, user)

    lm, _ = scripted_lm(script)
    setup = GeneratorSetup(split=ifbench_split(load_ifbench_items(comparison_data_dir), limit=1),
                           checkers=(lambda e, r: None, lambda e, r: None))
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        notes = setup.prepare(tmp_path)
    assert len(setup.question_sets) == 2
    assert all(len(qs.questions) == 2 for qs in setup.question_sets.values())
    assert notes and "failed for 2 of 2 prompts" in notes[0]
    assert setup.prepare(tmp_path) == notes  # reloaded from disk, same note, no LM call needed


@pytest.mark.parametrize(("extra", "message"), [
    (["--mode", "human", "--source-lm", "other"], "--source-lm only apply to --mode cross_model"),
    (["--mode", "generation", "--source-verdicts", "somewhere"], "--source-verdicts only apply to --mode cross_model"),
    (["--mode", "cross_model"], "cross_model needs a source evaluator"),
    (["--mode", "cross_model", "--source-lm", "other", "--source-verdicts", "x"], "both name the source"),
    (["--mode", "generation", "--regenerate-questions"], "--regenerate-questions only applies to --mode human"),
])
def test_options_the_mode_would_ignore_are_refused_before_any_work(tmp_path, extra, message, monkeypatch):
    def no_data(*args, **kwargs):
        raise AssertionError("the data was read before the options were checked")

    monkeypatch.setattr("binaryeval_dspy.cli.optimize_command.make_setup", no_data)
    result = CliRunner().invoke(cli, ["optimize", *extra, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not (tmp_path / "o").exists()


def test_a_bad_source_lm_is_named_as_such(tmp_path):
    result = CliRunner().invoke(cli, ["optimize", "--mode", "cross_model", "--source-lm",
                                      str(tmp_path / "missing.gguf"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "--source-lm " in text and "GGUF file not found" in text and "error: --lm" not in text


def test_blank_target_instructions_file_is_refused(tmp_path):
    blank = tmp_path / "instructions.txt"
    blank.write_text("  \n\n")
    result = CliRunner().invoke(cli, ["optimize", "--mode", "human", "--target-instructions", str(blank),
                                      "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "the file is empty" in " ".join(result.output.split()), result.output

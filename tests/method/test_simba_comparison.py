"""DSPy's SIMBA in the head-to-head comparison (issue 12, point 5), with scripted LMs.

SIMBA gets the same student, split, metric and cost accounting as the other optimizers,
its row in the comparison table, and a metric-call budget mapped onto its settings
(`simba_plan`) that it cannot exceed.
"""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import dspy
import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.comparison import (
    GeneratorSetup,
    ifbench_split,
    load_ifbench_items,
    run_comparison,
)
from binaryeval_dspy.comparison.harness import (
    OPTIMIZERS,
    ComparisonBudgets,
    simba_budget,
    simba_metric_call_bound,
    simba_minimum,
    simba_plan,
)
from binaryeval_dspy.comparison.runners import Budgets
from binaryeval_dspy.errors import InputError
from tests.fakes import scripted_lm
from tests.schema_script import output_fields, schema_script

RULE = "SIMBA RULE: answer no when the output calls itself bad."


def simba_script(seed: int = 0):
    """The comparison's scripted LM, with a judge that varies between runs (so SIMBA sees better
    and worse runs of an item) and a rule-writer that answers SIMBA's advice signature."""
    rng = random.Random(seed)
    base = schema_script(lambda system, user: rng.choice(["yes", "no"]))

    def script(system: str, user: str):
        fields = output_fields(system) or []
        if "module_advice" in fields:  # SIMBA's OfferFeedback: one rule per module name
            return {"discussion": "The worse run said yes to a bad output.",
                    "module_advice": {"judge": RULE, "self": RULE}}
        return base(system, user)

    return script


@pytest.fixture
def scripted_cli_lm(cli_scripted_lms):
    """Every --lm resolves to a scripted LM (engines recorded, so tests can read the calls)."""
    return cli_scripted_lms(per_lm=simba_script)


@pytest.mark.parametrize("mode", ["human", "cross_model"])
def test_compare_bineval_simba_adds_simba_row_with_its_costs(tmp_path, comparison_data_dir, comparison_question_file, scripted_cli_lm,
                                                            mode):
    """`--compare bineval,simba` runs SIMBA on a 3-item training set (below its default bsize of 32)
    and the table gains its row, with LM calls, tokens and wall time of its optimization."""
    assert "simba" in OPTIMIZERS
    out = tmp_path / "cmp"
    extra = ["--source-lm", "other"] if mode == "cross_model" else []
    result = CliRunner().invoke(cli, [
        "optimize", "--mode", mode, "--compare", "bineval,simba", "--data-dir", str(comparison_data_dir),
        "--questions", str(comparison_question_file), "--out", str(out), "--limit", "3", "--iterations", "1",
        "--simba-metric-calls", "40", *extra])
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "simba" / "result.json").read_text())
    assert saved["optimizer"] == "simba" and saved["lm"] == "scripted-cli" and len(saved["test_records"]) == 3
    assert saved["compile_lm_calls"] > 0 and saved["compile_tokens"] > 0 and saved["test_lm_calls"] > 0
    settings = saved["settings"]
    assert settings["bsize"] == 3 and settings["max_demos"] == 0  # bsize = min(32, |train|)
    assert settings["metric_calls"] <= settings["metric_call_bound"] <= settings["metric_calls_budget"] == 40
    assert settings["budget_from"] == "`simba_metric_calls`"
    assert (out / "simba" / "program.json").is_file()
    history = json.loads((out / "simba" / "history.json").read_text())
    assert history["plan"]["max_steps"] == settings["max_steps"] >= 1 and history["candidates"]
    assert any(RULE in c["instructions"]["judge"] for c in history["candidates"])  # SIMBA wrote a rule
    config = json.loads((out / "config.json").read_text())
    assert config["budgets"]["simba_metric_calls"] == 40 and config["optimizers"] == ["unoptimized", "bineval",
                                                                                      "simba"]
    report = (out / "comparison.md").read_text()
    lines = report.splitlines()
    header = [c.strip() for c in next(line for line in lines if line.startswith("| optimizer |")).strip("|").split("|")]
    cells = [c.strip() for c in next(line for line in lines if line.startswith("| simba |")).strip("|").split("|")]
    assert len(cells) == len(header) and cells[0] == "simba"
    calls = cells[next(i for i, h in enumerate(header) if "LM calls" in h and "test" not in h.split("(")[0])]
    assert calls.split(" / ")[0] == str(saved["compile_lm_calls"])  # optimization LM calls
    tokens = cells[next(i for i, h in enumerate(header) if "tokens" in h)]
    assert any(str(saved.get(key)) in tokens for key in ("compile_prompt_tokens", "compile_tokens"))
    assert any("wall time" in h for h in header)
    assert "SIMBA is DSPy's Stochastic Introspective Mini-Batch Ascent" in report
    assert "- simba: " in report and '"max_steps"' in report  # its budget line
    # SIMBA's rule-writing calls reached the (scripted) prompt LM and are part of its cost
    assert any("module_advice" in call for engine in scripted_cli_lm for call in engine.calls)
    # rerun: finished, skipped, no LM call
    before = len(scripted_cli_lm)
    again = CliRunner().invoke(cli, [
        "optimize", "--mode", mode, "--compare", "bineval,simba", "--data-dir", str(comparison_data_dir),
        "--questions", str(comparison_question_file), "--out", str(out), "--limit", "3", "--iterations", "1",
        "--simba-metric-calls", "40", *extra])
    assert again.exit_code == 0, again.output
    assert "simba: skipped (done)" in again.output
    assert all(len(engine.calls) == 0 for engine in scripted_cli_lm[before:])


def test_simba_in_generation_mode_counts_its_metric_calls_within_the_budget(tmp_path, comparison_data_dir):
    """IFBench generation: SIMBA optimizes the generator with the BinEvalMetric judge on 2 threads;
    the metric calls it made are counted and stay within the bound and the budget, and the LM
    calls of its worker threads are in its cost."""

    def check(example, response):
        ok = response.endswith("DONE")
        return SimpleNamespace(follow_all_instructions=ok, follow_instruction_list=[ok])

    lm, _ = scripted_lm(simba_script())
    split = ifbench_split(load_ifbench_items(comparison_data_dir), limit=2)
    setup = GeneratorSetup(split=split, checkers=(check, check), num_threads=2)  # SIMBA's dspy.Parallel threads
    budgets = ComparisonBudgets(bineval_iterations=1, simba_metric_calls=25)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        _, results, failures = run_comparison(
            setup, ["simba"], tmp_path / "gen", lm_name="scripted", prompt_lm_name="scripted", budgets=budgets,
            metric_description="BinEvalMetric", test_description="strict/loose")
    assert failures == {}
    assert [r.optimizer for r in results] == ["unoptimized", "simba"]
    simba = results[1]
    plan = simba_plan(25, len(split.train))
    assert simba.settings["max_steps"] == plan.max_steps and simba.settings["bsize"] == plan.bsize == 2
    assert 0 < simba.settings["metric_calls"] <= plan.metric_call_bound <= 25
    assert simba.compile_lm_calls > simba.settings["metric_calls"]  # generations and judge calls both count
    assert len(simba.test_records) == 2 and "strict" in simba.test_records[0]


@pytest.mark.parametrize("budget", [5, 9, 21, 40, 41, 100, 400, 1000, 5000])
@pytest.mark.parametrize("train_size", [1, 2, 3, 10, 31, 80])
def test_simba_plan_keeps_every_budget_it_accepts(budget, train_size):
    """The mapped settings never allow more metric calls than the budget, use SIMBA's defaults
    (bsize capped by the training set) when one step fits, and take as many steps as fit."""
    minimum = simba_metric_call_bound(max_steps=1, bsize=1, num_candidates=2, train_size=train_size)
    if budget < minimum:
        with pytest.raises(InputError, match=f"`simba_metric_calls` {minimum}"):
            simba_plan(budget, train_size)
        return
    plan = simba_plan(budget, train_size)
    assert plan.metric_call_bound <= budget
    assert 1 <= plan.bsize <= min(32, train_size) and 2 <= plan.num_candidates <= 6 and plan.max_steps >= 1
    one_more = simba_metric_call_bound(max_steps=plan.max_steps + 1, bsize=plan.bsize,
                                       num_candidates=plan.num_candidates, train_size=train_size)
    assert one_more > budget  # as many steps as the budget allows
    defaults = simba_metric_call_bound(max_steps=1, bsize=min(32, train_size), num_candidates=6,
                                       train_size=train_size)
    if defaults <= budget:
        assert (plan.bsize, plan.num_candidates) == (min(32, train_size), 6)


def test_simba_plan_examples():
    # 3 training items, 40 calls: one step of 3 items x 6 candidates (3 x (6 + 3) = 27) + 2 programs x 3 = 33
    assert simba_plan(40, 3) == simba_plan(40, 3).__class__(40, 3, max_steps=1, bsize=3, num_candidates=6)
    assert simba_plan(40, 3).metric_call_bound == 33
    # SummEval's 80 training items, 200 calls: the final pass takes 160, so 8 items x 2 candidates
    plan = simba_plan(200, 80)
    assert (plan.max_steps, plan.bsize, plan.num_candidates, plan.metric_call_bound) == (1, 8, 2, 200)
    # a large budget: SIMBA's defaults, more steps
    plan = simba_plan(5000, 80)
    assert (plan.bsize, plan.num_candidates) == (32, 6) and plan.max_steps == (5000 - 7 * 80) // (32 * 13)
    with pytest.raises(InputError, match="below SIMBA's smallest run"):
        simba_plan(162, 80)


def test_a_simba_budget_too_small_is_refused_before_any_lm_work(tmp_path, comparison_data_dir, comparison_question_file,
                                                                scripted_cli_lm):
    out = tmp_path / "cmp"
    result = CliRunner().invoke(cli, [
        "optimize", "--mode", "human", "--compare", "bineval,simba", "--data-dir", str(comparison_data_dir),
        "--questions", str(comparison_question_file), "--out", str(out), "--limit", "3", "--simba-metric-calls", "8"])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "--simba-metric-calls 9" in text  # 3 + 2 x 3 training items
    assert not out.exists() and all(len(engine.calls) == 0 for engine in scripted_cli_lm)


def test_simba_joins_a_comparison_made_before_it_existed(tmp_path, comparison_data_dir, comparison_question_file, scripted_cli_lm):
    """A comparison whose config has no SIMBA budget resumes with SIMBA added (its budget recorded)."""
    out = tmp_path / "cmp"
    base = ["optimize", "--mode", "human", "--data-dir", str(comparison_data_dir), "--questions", str(comparison_question_file),
            "--out", str(out), "--limit", "3", "--iterations", "1"]
    assert CliRunner().invoke(cli, [*base, "--compare", "bineval"]).exit_code == 0
    config = json.loads((out / "config.json").read_text())
    del config["budgets"]["simba_metric_calls"]  # as written before SIMBA joined
    (out / "config.json").write_text(json.dumps(config))
    result = CliRunner().invoke(cli, [*base, "--compare", "bineval,simba", "--simba-metric-calls", "30"])
    assert result.exit_code == 0, result.output
    assert "bineval: skipped (done)" in result.output and (out / "simba" / "result.json").is_file()
    assert json.loads((out / "config.json").read_text())["budgets"]["simba_metric_calls"] == 30


def test_simba_budget_defaults_to_gepas_raised_to_simbas_smallest_run():
    assert simba_minimum(3) == 9 and simba_minimum(80) == 163
    assert simba_budget(Budgets(gepa_metric_calls=40), 3) == (40, "GEPA's budget (`gepa_metric_calls`)")
    budget, source = simba_budget(Budgets(gepa_metric_calls=40), 80)
    assert budget == 163 and "raised to SIMBA's smallest run" in source
    assert simba_budget(ComparisonBudgets(gepa_metric_calls=40, simba_metric_calls=12), 3) == (
        12, "`simba_metric_calls`")


def test_without_a_simba_budget_simba_gets_gepas(tmp_path, comparison_data_dir, comparison_question_file, scripted_cli_lm):
    """No --simba-metric-calls: GEPA's budget (8) is below SIMBA's smallest run on 3 training items
    (9), so SIMBA runs with 9 and says where its budget came from."""
    out = tmp_path / "cmp"
    result = CliRunner().invoke(cli, [
        "optimize", "--mode", "human", "--compare", "simba", "--data-dir", str(comparison_data_dir),
        "--questions", str(comparison_question_file), "--out", str(out), "--limit", "3", "--gepa-metric-calls", "8"])
    assert result.exit_code == 0, result.output
    settings = json.loads((out / "simba" / "result.json").read_text())["settings"]
    assert settings["metric_calls_budget"] == 9 and "raised" in settings["budget_from"]
    assert (settings["max_steps"], settings["bsize"], settings["num_candidates"]) == (1, 1, 2)
    assert settings["metric_calls"] <= 9
    assert json.loads((out / "config.json").read_text())["budgets"]["simba_metric_calls"] == 9

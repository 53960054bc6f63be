"""Live panels and cascades (issue 29 items 3-4): several judges in one run, as plans.

The judges are scripted: models of the scripted OpenAI-compatible endpoint
(tests/fake_endpoint.py) whose verdict depends on the model name and the question, or the
judges of a scripted verdicts file on the replay engine. Nothing here is a model's judgment.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.data.verdicts_file import write_verdicts
from binaryeval_dspy.errors import ConfigError
from binaryeval_dspy.panels import CascadeRule, index_by_pair, simulate_cascade, simulate_panel
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.programs.judge_panel import JudgePanel
from binaryeval_dspy.schemas.verdict_record import VerdictRecord
from binaryeval_dspy.settings import RunSettings
from tests.engines.test_remote_faults import QUESTIONS, question_set, stored, write_inputs
from tests.fake_endpoint import format_fields, request_field


def by_model(plan: dict[str, dict[str, str]]):
    """Reply by the request's model suffix (``-a``, ``-b``, ...) and question number: plan[suffix][qN]
    is ``yes``, ``no`` or ``garbled`` (an unreadable reply); default yes."""

    def reply(body: dict):
        suffix = body["model"].rsplit("-", 1)[1]
        number = f"q{QUESTIONS.index(request_field(body, 'question')) + 1}"
        verdict = plan.get(suffix, {}).get(number, "yes")
        if verdict == "garbled":
            return "I would rather not say."
        return format_fields(body, {"verdict": verdict, "explanation": f"{suffix} says {verdict}"})

    return reply


def live(endpoint, tmp_path: Path, judges: list[str], *extra: str, n_items: int = 2):
    qs, items = write_inputs(tmp_path, n_items=n_items)
    out = tmp_path / "run"
    args = ["evaluate", str(qs), str(items), "--id-field", "id", "--out", str(out), "--concurrency", "4"]
    for judge in judges:
        args += ["--judge", f"{endpoint.base_url}#{endpoint.model}-{judge}"]
    result = CliRunner().invoke(cli, [*args, *extra])
    return result, out


def fleiss_by_hand(units: list[tuple[int, int]]) -> float:
    """Fleiss (1971) for two categories, units with the same number of raters n."""
    n = units[0][0] + units[0][1]
    p_i = [(y * (y - 1) + m * (m - 1)) / (n * (n - 1)) for y, m in units]
    total = n * len(units)
    p_yes = sum(y for y, _ in units) / total
    p_e = p_yes ** 2 + (1 - p_yes) ** 2
    return (sum(p_i) / len(p_i) - p_e) / (1 - p_e)


def test_a_live_panel_asks_every_judge_and_decides_by_majority_keeping_every_verdict(tmp_path, fake_endpoint):
    fake_endpoint.reply = by_model({"b": {"q1": "no", "q2": "no"}, "c": {"q1": "no", "q3": "garbled"}})
    result, out = live(fake_endpoint, tmp_path, ["a", "b", "c"])
    assert result.exit_code == 0, result.output
    assert len(fake_endpoint.requests) == 2 * 6 * 3  # each question of each item asked of each judge
    assert {b["model"].rsplit("-", 1)[1] for b in fake_endpoint.requests} == {"a", "b", "c"}
    for row in stored(out):
        verdicts = {v["question_id"]: v for v in row["verdicts"]}
        assert [verdicts[f"q{n}"]["verdict"] for n in range(1, 7)] == ["no", "yes", "yes", "yes", "yes", "yes"]
        assert len(verdicts["q1"]["judges"]) == 3  # every judge's verdict kept
        assert [v["verdict"] for v in verdicts["q3"]["judges"].values()] == ["yes", "yes", "unparsed"]
        assert verdicts["q3"]["explanation"].startswith("2 yes, 0 no, 1 without an answer")  # counted, others decide
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    panel = summary["judges"]
    assert summary["lm"].startswith("majority(") and panel["questions"] == 12
    assert panel["splits"] == {"q1": 2, "q2": 2} and panel["split_questions"] == 4
    assert panel["kappa_questions"] == 12  # q3 with its two answering judges
    assert panel["answers_by_judge"][f"{fake_endpoint.base_url}#{fake_endpoint.model}-c"]["unparsed"] == 2
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["lm"] == summary["lm"] and manifest["settings"]["panel_rule"] == "majority"
    assert len(manifest["settings"]["judges"]) == 3
    said = "split on 4 of 12 questions (q1 2x, q2 2x)"  # the console, summary.md and bineval view say it too
    assert said in " ".join(result.output.split()) and said in (out / "summary.md").read_text(encoding="utf-8")
    from binaryeval_dspy.reports.run_view import _run_data, load_run

    assert any(said in line for line in _run_data(load_run(out))["summary"]["lines"])


def test_fleiss_kappa_in_the_summary_equals_a_hand_computation(tmp_path, fake_endpoint):
    fake_endpoint.reply = by_model({"b": {"q1": "no", "q2": "no"}, "c": {"q1": "no", "q4": "no"}})
    result, out = live(fake_endpoint, tmp_path, ["a", "b", "c"])
    assert result.exit_code == 0, result.output
    units = []
    for row in stored(out):
        for v in row["verdicts"]:
            said = [j["verdict"] for j in v["judges"].values()]
            units.append((said.count("yes"), said.count("no")))
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert abs(summary["judges"]["fleiss_kappa"] - fleiss_by_hand(units)) < 1e-12
    assert summary["judges"]["fleiss_kappa"] < 1  # not a constant


def test_a_live_cascade_asks_the_next_judge_only_where_the_first_gives_no_answer(tmp_path, fake_endpoint):
    fake_endpoint.reply = by_model({"a": {"q3": "garbled", "q5": "garbled"}, "b": {"q3": "no"}})
    result, out = live(fake_endpoint, tmp_path, ["a", "b"], "--cascade")
    assert result.exit_code == 0, result.output
    models = [b["model"].rsplit("-", 1)[1] for b in fake_endpoint.requests]
    assert models.count("a") == 12 and models.count("b") == 4  # the strong judge only for q3 and q5
    for row in stored(out):
        verdicts = {v["question_id"]: v for v in row["verdicts"]}
        assert verdicts["q3"]["verdict"] == "no" and list(verdicts["q3"]["judges"]) == [
            f"{fake_endpoint.base_url}#{fake_endpoint.model}-a", f"{fake_endpoint.base_url}#{fake_endpoint.model}-b"]
        assert "passed on: no answer" in verdicts["q3"]["explanation"]
        assert len(verdicts["q1"]["judges"]) == 1
    cascade = json.loads((out / "summary.json").read_text(encoding="utf-8"))["judges"]
    assert cascade["escalated"] == 4 and abs(cascade["escalated_share"] - 4 / 12) < 1e-12
    assert cascade["calls"] == 16 and cascade["strongest_calls"] == 12
    said = "4 questions escalated (33%); 16 judge calls against 12 asking the last judge everything"
    assert said in (out / "summary.md").read_text(encoding="utf-8") and said in " ".join(result.output.split())
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["lm"].startswith("cascade(") and " > " in manifest["lm"] and manifest["settings"]["cascade"] is True


# --------------------------------------------------------------------------- on recorded verdicts


def scripted_judges(tmp_path: Path, n_items: int, *, drop: tuple[str, str, str] | None = None
                    ) -> tuple[Path, Path, list[VerdictRecord]]:
    qs, items = write_inputs(tmp_path, n_items=n_items)
    rng = random.Random(7)
    rows = []
    for i in range(n_items):
        for n in range(1, 7):
            for judge, accuracy in (("cheap", 0.6), ("mid", 0.75), ("strong", 0.9)):
                if drop == (f"item-{i}", f"q{n}", judge):
                    continue
                said = rng.random() < accuracy
                verdict = "unparsed" if rng.random() < 0.05 else ("yes" if said else "no")
                p_yes = None if verdict == "unparsed" else round(rng.uniform(0.5, 1) if said else rng.uniform(0, 0.5), 3)
                rows.append(VerdictRecord(item_id=f"item-{i}", question_id=f"q{n}", judge=judge, verdict=verdict,
                                          p_yes=p_yes))
    return qs, items, rows


def replay_with(qs: Path, items: Path, verdicts: Path, out: Path, *extra: str):
    return CliRunner().invoke(cli, ["evaluate", str(qs), str(items), "--id-field", "id", "--out", str(out),
                                    "--engine", "replay", "--verdicts", str(verdicts), *extra])


def test_a_panel_replayed_decides_as_panels_simulation_does(tmp_path):
    qs, items, rows = scripted_judges(tmp_path, 8, drop=("item-2", "q4", "mid"))
    verdicts = write_verdicts(rows, tmp_path / "judges.jsonl")
    out = tmp_path / "panel"
    result = replay_with(qs, items, verdicts, out, "--judge", "cheap", "--judge", "mid", "--judge", "strong")
    assert result.exit_code == 0, result.output
    simulated = {(r.item_id, r.question_id): r.verdict
                 for r in simulate_panel(index_by_pair(rows), ["cheap", "mid", "strong"])}
    replayed = {(row["item_id"], v["question_id"]): v["verdict"] for row in stored(out) for v in row["verdicts"]}
    assert replayed == simulated  # one vote: panels.panel_vote, live and simulated
    assert len(set(replayed.values())) >= 2
    missing = next(v for row in stored(out) if row["item_id"] == "item-2" for v in row["verdicts"]
                   if v["question_id"] == "q4")
    assert missing["judges"]["mid"]["error"].startswith("NotInVerdicts:")  # counted, the others decide
    assert summary_of(out)["lm"] == "replay(majority(cheap, mid, strong))"


def summary_of(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


def test_a_cascade_with_a_band_replayed_matches_the_simulation_and_counts_escalations(tmp_path):
    qs, items, rows = scripted_judges(tmp_path, 10)
    verdicts = write_verdicts(rows, tmp_path / "judges.jsonl")
    out = tmp_path / "cascade"
    result = replay_with(qs, items, verdicts, out, "--judge", "cheap", "--judge", "strong", "--cascade",
                         "--band", "0.3,0.7")
    assert result.exit_code == 0, result.output
    simulated, counts = simulate_cascade(index_by_pair(rows), CascadeRule((("cheap",), ("strong",)), band=(0.3, 0.7)))
    replayed = {(row["item_id"], v["question_id"]): v["verdict"] for row in stored(out) for v in row["verdicts"]}
    assert replayed == {(r.item_id, r.question_id): r.verdict for r in simulated}
    cascade = summary_of(out)["judges"]
    assert cascade["escalated"] == counts.questions - counts.answered_at.get(0, 0) > 0
    assert abs(cascade["escalated_share"] - counts.escalated_share) < 1e-12
    assert summary_of(out)["lm"] == "replay(cascade(cheap > strong; band 0.3-0.7))"


def test_panel_settings_are_checked():
    with pytest.raises(ConfigError, match="two different judges"):
        RunSettings(judges=("a",))
    with pytest.raises(ConfigError, match="cascade"):
        RunSettings(cascade=True)
    with pytest.raises(ConfigError, match="cascade_band"):
        RunSettings(judges=("a", "b"), cascade=True, cascade_band=(0.8, 0.2))
    with pytest.raises(ConfigError, match="not ray"):
        RunSettings(judges=("a", "b"), engine="ray")
    with pytest.raises(ConfigError, match="weight measured against labels"):  # without weights
        JudgePanel(BinEval(question_set()), ["a", "b"], rule="weighted")


def test_a_question_every_judge_failed_is_an_error_asked_again_and_the_others_still_decide(tmp_path):
    qs, items, rows = scripted_judges(tmp_path, 2)
    kept = [r for r in rows if not (r.item_id == "item-0" and r.question_id == "q1")]  # no judge answered it
    verdicts = write_verdicts(kept, tmp_path / "judges.jsonl")
    out = tmp_path / "panel"
    result = replay_with(qs, items, verdicts, out, "--judge", "cheap", "--judge", "mid")
    assert result.exit_code == 0, result.output
    first = next(row for row in stored(out) if row["item_id"] == "item-0")
    q1 = next(v for v in first["verdicts"] if v["question_id"] == "q1")
    assert q1["verdict"] == "error" and q1["error"].startswith("NotInVerdicts:") and first["complete"] is False
    assert summary_of(out)["judges"]["decided"]["error"] == 1


def test_a_panel_runs_export_has_every_judges_row_and_the_decided_one(tmp_path):
    from binaryeval_dspy.data.verdicts_file import read_verdicts

    qs, items, rows = scripted_judges(tmp_path, 3)
    verdicts = write_verdicts(rows, tmp_path / "judges.jsonl")
    out = tmp_path / "panel"
    assert replay_with(qs, items, verdicts, out, "--judge", "cheap", "--judge", "mid", "--judge", "strong").exit_code == 0
    exported = tmp_path / "export.jsonl"
    assert CliRunner().invoke(cli, ["verdicts", str(out), "--out", str(exported)]).exit_code == 0
    back = read_verdicts(exported)
    members = {(r.item_id, r.question_id, r.judge): (r.verdict, r.p_yes) for r in back
               if r.judge in ("cheap", "mid", "strong")}
    assert members == {r.key: (r.verdict, r.p_yes) for r in rows}  # every judge's answer, as recorded
    decided = [r for r in back if r.judge == "replay(majority(cheap, mid, strong))"]
    assert len(decided) == 3 * 6


def test_rejudge_of_a_panel_run_asks_the_same_judges_by_the_same_rule(tmp_path):
    from binaryeval_dspy.schemas.item_result import text_hash

    qs, items, rows = scripted_judges(tmp_path, 3)
    verdicts = write_verdicts(rows, tmp_path / "judges.jsonl")
    first = tmp_path / "panel"
    assert replay_with(qs, items, verdicts, first, "--judge", "cheap", "--judge", "mid", "--judge", "strong").exit_code == 0
    lines = items.read_text(encoding="utf-8").splitlines()
    changed = {**json.loads(lines[0]), "output": "Rewritten."}
    items.write_text("\n".join([json.dumps(changed), *lines[1:]]) + "\n", encoding="utf-8")
    relabelled = write_verdicts([r.model_copy(update={"verdict": "no", "p_yes": 0.1, "output_hash": text_hash("Rewritten.")})
                                 if r.item_id == "item-0" else r for r in rows], tmp_path / "relabelled.jsonl")
    out = tmp_path / "rejudged"
    result = CliRunner().invoke(cli, ["rejudge", str(first), str(items), "--out", str(out), "--verdicts", str(relabelled)])
    assert result.exit_code == 0, result.output
    row = next(r for r in stored(out) if r["item_id"] == "item-0")
    assert {v["verdict"] for v in row["verdicts"]} == {"no"} and all(len(v["judges"]) == 3 for v in row["verdicts"])
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["lm"] == "replay(majority(cheap, mid, strong))"
    assert manifest["settings"]["judges"] == ["cheap", "mid", "strong"] and manifest["settings"]["panel_rule"] == "majority"


@pytest.mark.parametrize("bad, said, fix", [
    ("http://127.0.0.1:9/v1", "it is a base URL, so the served model's name is needed too",
     "write the judge as http://127.0.0.1:9/v1#NAME"),
    ("openai/gpt-4o", "the provider's API key is missing", "export OPENAI_API_KEY"),
])
def test_a_judge_that_cannot_be_built_is_named_as_a_judge_never_as_lm_or_lm_model(tmp_path, monkeypatch, bad, said,
                                                                                   fix):
    """Any error making one judge's LM is said of that --judge value, with the fix in --judge's own
    terms (URL#MODEL), never of --lm / --lm-model, which the command was not given."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    qs, items = write_inputs(tmp_path)
    result = CliRunner().invoke(cli, ["evaluate", str(qs), str(items), "--out", str(tmp_path / "run"),
                                      "--judge", bad, "--judge", "http://127.0.0.1:9/v1#other"])
    text = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert f"judge '{bad}' of --judge" in text and said in text and fix in text, text
    assert "--lm" not in text and "--lm-model" not in text, text
    assert not (tmp_path / "run").exists()  # refused before anything was written
    with pytest.raises(Exception, match=r"judge 'http://127.0.0.1:9/v1' of `judges`: .*#NAME"):  # the Python API
        from binaryeval_dspy.engines.base import judge_handle
        judge_handle("http://127.0.0.1:9/v1", RunSettings(judges=("http://127.0.0.1:9/v1", "x#y")))

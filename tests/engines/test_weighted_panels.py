"""Weighted panels in runs: weights measured beforehand by `bineval agreement`, read from its
judge_weights.csv, recorded in the manifest; a bad weights file is refused with file, line and field.

Judges are scripted (a scripted endpoint's models, or the judges of a scripted verdicts file);
nothing here is a model's judgment.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.data.judge_weights import read_judge_weights, write_judge_weights
from binaryeval_dspy.data.verdicts_file import write_verdicts
from binaryeval_dspy.errors import InputError
from binaryeval_dspy.panels import index_by_pair, log_odds_weight, simulate_panel
from binaryeval_dspy.schemas.verdict_record import VerdictRecord
from tests.engines.test_panels_live import by_model, live, replay_with, scripted_judges
from tests.engines.test_remote_faults import stored

JUDGES = ("cheap", "mid", "strong")


def labels_for(rows: list[VerdictRecord], path: Path) -> Path:
    """Labels that agree with the strong judge (its answered rows), so the judges' measured weights differ."""
    labels = [VerdictRecord(item_id=r.item_id, question_id=r.question_id, judge="human", verdict=r.verdict)
              for r in rows if r.judge == "strong" and r.verdict in ("yes", "no")]
    return write_verdicts(labels, path)


def test_a_weighted_panel_votes_with_the_weights_bineval_agreement_measured(tmp_path):
    qs, items, rows = scripted_judges(tmp_path, 10)
    verdicts = write_verdicts(rows, tmp_path / "judges.jsonl")
    labels = labels_for(rows, tmp_path / "labels.jsonl")
    measured = CliRunner().invoke(cli, ["agreement", "--labels", str(labels), "--verdicts", str(verdicts),
                                        "--out", str(tmp_path / "agreement"), "--no-figures", "--bootstrap", "50"])
    assert measured.exit_code == 0, measured.output
    weights_file = tmp_path / "agreement" / "judge_weights.csv"
    out = tmp_path / "weighted"
    result = replay_with(qs, items, verdicts, out, *[a for j in JUDGES for a in ("--judge", j)],
                         "--panel-rule", "weighted", "--panel-weights", str(weights_file))
    assert result.exit_code == 0, result.output
    agreement = json.loads((tmp_path / "agreement" / "agreement.json").read_text(encoding="utf-8"))["judges"]
    expected = {j: log_odds_weight(agreement[j]["agree"], agreement[j]["answered"]) for j in JUDGES}
    assert expected["strong"] > expected["mid"] > expected["cheap"] >= 0  # the labels follow the strong judge
    whole = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    manifest = whole["config"]  # the weights voted with; the rule and the weights file are the run's settings
    assert whole["lm"] == "replay(weighted(cheap, mid, strong))" and whole["settings"]["panel_rule"] == "weighted"
    assert whole["settings"]["panel_weights"] == str(weights_file)
    assert {j: round(w, 6) for j, w in expected.items()} == manifest["panel_weights"]
    source = manifest["panel_weights_source"]
    assert source["path"] == str(weights_file)
    assert source["sha256"] == hashlib.sha256(weights_file.read_bytes()).hexdigest()
    assert source["measured"]["strong"]["answered"] == agreement["strong"]["answered"]
    simulated = {(r.item_id, r.question_id): r.verdict
                 for r in simulate_panel(index_by_pair(rows), JUDGES, rule="weighted",
                                         weights=manifest["panel_weights"])}
    replayed = {(row["item_id"], v["question_id"]): v["verdict"] for row in stored(out) for v in row["verdicts"]}
    assert replayed == simulated
    majority = {(r.item_id, r.question_id): r.verdict for r in simulate_panel(index_by_pair(rows), JUDGES)}
    assert replayed != majority  # the weights changed some decisions


def test_a_live_weighted_panel_lets_the_heavier_judge_outvote_two_lighter_ones(tmp_path, fake_endpoint):
    fake_endpoint.reply = by_model({"a": {"q1": "no", "q2": "no"}})
    names = [f"{fake_endpoint.base_url}#{fake_endpoint.model}-{j}" for j in "abc"]
    weights = write_judge_weights([{"judge": names[0], "weight": 3.0}, {"judge": names[1], "weight": 1.0},
                                   {"judge": names[2], "weight": 1.0}], tmp_path / "w.csv")
    result, out = live(fake_endpoint, tmp_path, ["a", "b", "c"], "--panel-rule", "weighted",
                       "--panel-weights", str(weights))
    assert result.exit_code == 0, result.output
    for row in stored(out):
        decided = {v["question_id"]: v["verdict"] for v in row["verdicts"]}
        assert decided["q1"] == decided["q2"] == "no"  # 3 against 1 + 1; a majority would say yes
        assert decided["q3"] == "yes"


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("text", "line", "field", "said"), [
    ("judge,weight\ncheap,1.2\nmid,0.5\n", None, "judge", "no weight for judge 'strong'"),
    ("judge,weight\ncheap,1.2\nmid,lots\nstrong,2\n", 3, "weight", "must be a number"),
    ("judge,weight\ncheap,1.2\nmid,0.5\nstrong,2\nother,1\n", 5, "judge", "'other' is not a judge of this run"),
    ("judge,weight\ncheap,1.2\nmid,-1\nstrong,2\n", 3, "weight", ">= 0"),
    ("judge,weight\ncheap,1.2\ncheap,1.3\nmid,1\nstrong,2\n", 3, "judge", "listed twice"),
    ("judge\ncheap\n", 1, "weight", "weight"),
])
def test_a_bad_weights_file_is_refused_naming_file_line_and_field(tmp_path, text, line, field, said):
    path = _write(tmp_path / "weights.csv", text)
    with pytest.raises(InputError) as raised:
        read_judge_weights(path, JUDGES)
    message = str(raised.value)
    assert str(path) in message and said in message
    assert f"field '{field}'" in message
    if line is not None:
        assert f"{path}:{line}:" in message


def test_the_cli_refuses_a_weighted_panel_without_weights_or_with_a_bad_file(tmp_path):
    qs, items, rows = scripted_judges(tmp_path, 2)
    verdicts = write_verdicts(rows, tmp_path / "judges.jsonl")
    judges = [a for j in JUDGES for a in ("--judge", j)]
    without = replay_with(qs, items, verdicts, tmp_path / "r1", *judges, "--panel-rule", "weighted")
    assert without.exit_code != 0 and "--panel-weights" in without.output
    bad = _write(tmp_path / "weights.jsonl", '{"judge": "cheap", "weight": 1}\n{"judge": "mid", "weight": "x"}\n'
                                               '{"judge": "strong", "weight": 1}\n')
    refused = replay_with(qs, items, verdicts, tmp_path / "r2", *judges, "--panel-rule", "weighted",
                          "--panel-weights", str(bad))
    said = " ".join(refused.output.split())
    assert refused.exit_code != 0 and "weights.jsonl:2:" in said and "field 'weight'" in said
    assert not (tmp_path / "r2" / "results.jsonl").exists()
    stray = replay_with(qs, items, verdicts, tmp_path / "r3", *judges, "--panel-weights", str(bad))
    assert stray.exit_code != 0 and "weighted" in stray.output  # weights with another rule: refused

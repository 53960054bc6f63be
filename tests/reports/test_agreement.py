"""Issue 12, point 4: `bineval agreement` - bring your own predictions.

A user's human-scored file plus prediction files on any numeric scale go through the
same report as `bineval benchmark`; its correlations must equal scipy's, computed here
independently; items without a prediction and unknown ids are counted and listed; bad
prediction files give errors naming file, line and field.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.data.benchmark_rows import read_rows
from binaryeval_dspy.data.paths import resolve_data_file
from binaryeval_dspy.errors import InputError
from binaryeval_dspy.meta_eval.agreement import load_agreement_scores
from binaryeval_dspy.meta_eval.predictions import load_predictions
from tests.reports.test_benchmark_run import data_dir, scripted, tasks_dir  # noqa: F401  (fixtures)

DIMS = ("coherence", "fluency")
MISSING = ("d0-s1", "d3-s2")  # items the prediction file leaves out
NULL_FLUENCY = "d1-s0"  # present, but its fluency is null


def _run(args: list[str]):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


@pytest.fixture
def user_files(tmp_path: Path) -> dict[str, Path]:
    """6 documents x 4 systems of human 1-5 ratings (nested under 'ratings'), a prediction file
    on a 0-100 scale (JSONL, with two items missing, one null, one 'NaN' string and an unknown
    id) and one CSV with a single 'score' column of negative numbers."""
    rng = random.Random(7)
    scored, mine, other = [], [], ["item_id,score"]
    for doc in range(6):
        for system in range(4):
            item_id = f"d{doc}-s{system}"
            human = {d: rng.choice([1, 2, 3, 4, 5]) + rng.choice([0, 1 / 3, 2 / 3]) for d in DIMS}
            scored.append({"id": item_id, "doc": f"doc{doc}", "system": f"S{system}", "ratings": human})
            other.append(f"{item_id},{-rng.random() * 7:.4f}")
            if item_id in MISSING:
                continue
            row = {"item_id": item_id, "coherence": human["coherence"] * 20 + rng.gauss(0, 25),
                   "fluency": human["fluency"] * 20 + rng.gauss(0, 15)}
            if item_id == NULL_FLUENCY:
                row["fluency"] = None
            if item_id == "d2-s3":
                row["coherence"] = "NaN"
            mine.append(row)
    mine.append({"item_id": "not-an-item", "coherence": 50, "fluency": 50})
    paths = {"scored": tmp_path / "scored.jsonl", "mine": tmp_path / "mine.jsonl", "other": tmp_path / "other.csv"}
    paths["scored"].write_text("".join(json.dumps(r) + "\n" for r in scored), encoding="utf-8")
    paths["mine"].write_text("".join(json.dumps(r) + "\n" for r in mine), encoding="utf-8")
    paths["other"].write_text("\n".join(other) + "\n", encoding="utf-8")
    return paths


def _vectors(paths: dict[str, Path], name: str, dim: str) -> tuple[list, list, list, list]:
    """(human, predicted, doc, system) over the items with both scores, read here without the package."""
    scored = [json.loads(line) for line in paths["scored"].read_text().splitlines()]
    if name == "mine":
        raw = {r["item_id"]: r.get(dim) for r in map(json.loads, paths["mine"].read_text().splitlines())}
    else:
        raw = {line.split(",")[0]: line.split(",")[1] for line in paths["other"].read_text().splitlines()[1:]}
    out: tuple[list, list, list, list] = ([], [], [], [])
    for row in scored:
        value = raw.get(row["id"])
        if value is None or (isinstance(value, str) and value.lower() == "nan"):
            continue
        for target, item in zip(out, (row["ratings"][dim], float(value), row["doc"], row["system"])):
            target.append(item)
    return out


def _summary_level(human, predicted, docs, corr) -> float:
    """UniEval's / G-Eval's protocol: per document, then the mean; constant documents skipped."""
    values = []
    for doc in dict.fromkeys(docs):
        idx = [i for i, d in enumerate(docs) if d == doc]
        h, p = [human[i] for i in idx], [predicted[i] for i in idx]
        if len(idx) < 2 or len(set(h)) == 1 or len(set(p)) == 1:
            continue
        values.append(corr(h, p)[0])
    return float(np.mean(values))


def _system_level(human, predicted, systems) -> float:
    keys = list(dict.fromkeys(systems))
    hm = [np.mean([h for h, s in zip(human, systems) if s == k]) for k in keys]
    pm = [np.mean([p for p, s in zip(predicted, systems) if s == k]) for k in keys]
    return stats.spearmanr(hm, pm)[0]


def test_user_scored_file_reproduces_scipy_and_lists_missing_items(tmp_path, user_files):
    out = tmp_path / "report"
    result = _run(["agreement", str(user_files["scored"]), "--human-fields",
                   "coherence=ratings.coherence,fluency=ratings.fluency", "--id-field", "id", "--doc-field", "doc",
                   "--system-field", "system", "--predictions", f"mine={user_files['mine']}",
                   "--predictions", f"other={user_files['other']}", "--out", str(out), "--bootstrap", "20",
                   "--no-figures"])
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["level"] == "summary" and metrics["items"] == 24
    for name in ("mine", "other"):
        for dim in DIMS:
            human, predicted, docs, systems = _vectors(user_files, name, dim)
            cell = metrics[name][dim]
            assert cell["items_scored"] == len(human) and cell["items"] == 24
            assert cell["spearman"] == pytest.approx(_summary_level(human, predicted, docs, stats.spearmanr))
            assert cell["kendall"] == pytest.approx(_summary_level(human, predicted, docs, stats.kendalltau))
            assert cell["pooled_spearman"] == pytest.approx(stats.spearmanr(human, predicted)[0])
            assert cell["system_spearman"] == pytest.approx(_system_level(human, predicted, systems))
            assert cell["pearson"] == pytest.approx(_summary_level(human, predicted, docs, stats.pearsonr))
    # n per row: mine misses 2 items, plus one NaN coherence and one null fluency
    assert metrics["mine"]["coherence"]["items_scored"] == 21 and metrics["mine"]["fluency"]["items_scored"] == 21
    markdown = (out / "report.md").read_text()
    assert "| mine | file mine.jsonl |" in markdown and "| other | file other.csv |" in markdown
    assert "| 21/24 |" in markdown and "| 24/24 |" in markdown
    assert "2 of the 24 items have no prediction (first ids: d0-s1, d3-s2;" in markdown
    assert "not-an-item (line 23)" in markdown
    assert "policy 'skip'" in markdown
    assert "mine vs other (items with both:" in markdown  # the paired test between the two sets
    listed = json.loads((out / "missing_predictions.json").read_text())
    assert listed["mine"]["items_without_prediction"] == list(MISSING)
    assert listed["mine"]["unknown_item_ids"] == [{"item_id": "not-an-item", "line": 23}]
    assert listed["mine"]["missing_values"] == {"coherence": ["d2-s3"], "fluency": [NULL_FLUENCY]}
    assert listed["other"]["items_without_prediction"] == []
    assert metrics["prediction_sets"]["other"]["columns"] == {"coherence": "score", "fluency": "score"}


def test_pooled_level_without_documents_matches_scipy(tmp_path, user_files):
    """Without --doc-field each item is its own document: the main level is pooled."""
    out = tmp_path / "pooled"
    result = _run(["agreement", str(user_files["scored"]), "--human-fields", "coherence=ratings.coherence",
                   "--id-field", "id", "--predictions", f"mine={user_files['mine']}", "--out", str(out),
                   "--bootstrap", "20", "--no-figures"])
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    human, predicted, _, _ = _vectors(user_files, "mine", "coherence")
    assert metrics["level"] == "pooled"
    assert metrics["mine"]["coherence"]["spearman"] == pytest.approx(stats.spearmanr(human, predicted)[0])
    assert metrics["mine"]["coherence"]["kendall"] == pytest.approx(stats.kendalltau(human, predicted)[0])
    assert metrics["mine"]["coherence"]["pearson"] == pytest.approx(stats.pearsonr(human, predicted)[0])
    assert "summary_spearman" not in metrics["mine"]["coherence"]  # no document holds two items


@pytest.mark.parametrize("name, text, where", [
    ("nonnumeric.csv", "item_id,coherence\nd0-s0,3\nd0-s2,high\n", ":3: field 'coherence': expected a number"),
    ("noid.csv", "id,coherence\nd0-s0,3\n", ":1: field 'item_id': the header has no column 'item_id'"),
    ("noid.jsonl", '{"item_id": "d0-s0", "coherence": 1}\n{"coherence": 2}\n', ":2: field 'item_id': the item_id"),
    ("dup.jsonl", '{"item_id": "d0-s0", "coherence": 1}\n\n{"item_id": "d0-s0", "coherence": 2}\n',
     ":3: field 'item_id': item_id 'd0-s0' was already used on line 1"),
    ("bool.jsonl", '{"item_id": "d0-s0", "coherence": true}\n', ":1: field 'coherence': expected a number"),
    ("inf.jsonl", '{"item_id": "d0-s0", "coherence": "inf"}\n', ":1: field 'coherence': expected a finite number"),
    ("nocolumn.jsonl", '{"item_id": "d0-s0", "quality": 1}\n', ":1: field 'coherence/score': no score column"),
])
def test_bad_prediction_files_give_located_errors(tmp_path, user_files, name, text, where):
    bad = tmp_path / name
    bad.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(cli, ["agreement", str(user_files["scored"]), "--human-fields",
                                      "coherence=ratings.coherence", "--id-field", "id", "--predictions",
                                      f"bad={bad}", "--out", str(tmp_path / "o"), "--no-figures"])
    assert result.exit_code == 2
    assert f"{bad}{where}" in " ".join(result.output.split())


def test_names_and_combinations_are_checked(tmp_path, user_files):
    with pytest.raises(InputError, match="taken by one of our methods"):
        load_agreement_scores(user_files["scored"], [("BinEval", user_files["mine"])],
                              human_fields="coherence=ratings.coherence", id_field="id")
    with pytest.raises(InputError, match="given twice"):
        load_agreement_scores(user_files["scored"], [("a", user_files["mine"]), ("A", user_files["other"])],
                              human_fields="coherence=ratings.coherence", id_field="id")
    with pytest.raises(InputError, match="needs `human_fields`"):
        load_agreement_scores(user_files["scored"], [("a", user_files["mine"])], id_field="id")
    with pytest.raises(InputError, match="neither a benchmark"):
        load_agreement_scores(tmp_path / "nothing.jsonl", [("a", user_files["mine"])])
    result = CliRunner().invoke(cli, ["agreement", "summeval", "--predictions", "mine.jsonl"])
    assert result.exit_code == 2 and "expected NAME=FILE" in result.output


def test_any_scale_and_missing_values_are_never_zero(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"item_id": 1, "consistency": -1e6}\n{"item_id": "2", "consistency": null}\n'
                    '{"item_id": "3", "score": 7}\n{"item_id": "4", "consistency": " n/a "}\n', encoding="utf-8")
    ps = load_predictions(path, name="x", dimensions=["consistency"], item_ids=["1", "2", "3", "4", "5"])
    values = ps.frame["consistency"].tolist()
    assert values[0] == -1e6 and all(math.isnan(v) for v in values[1:])  # row 3's 'score' is ignored: the
    assert ps.columns == {"consistency": "consistency"} and ps.ignored_columns == ["score"]  # dimension has one
    assert ps.missing_items == ["5"] and ps.missing_values == {"consistency": ["2", "3", "4"]}


def test_bundled_benchmark_on_a_tiny_data_folder(tmp_path, data_dir):  # noqa: F811
    """The SummEval loader on a 3-document slice; ids are <doc_id>/<system_id>."""
    rows = [json.loads(line) for line in (data_dir / "summeval" / "summeval.jsonl").read_text().splitlines()]
    rng = random.Random(3)
    preds = [{"item_id": f"{r['doc_id']}/{r['system_id']}", **{d: rng.random() * 10 for d in
                                                                ("coherence", "consistency", "fluency", "relevance")}}
             for r in rows]
    path = tmp_path / "preds.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in preds), encoding="utf-8")
    out = tmp_path / "bundled"
    result = _run(["agreement", "summeval", "--data-dir", str(data_dir), "--predictions", f"random={path}",
                   "--out", str(out), "--bootstrap", "20", "--no-figures"])
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    for dim in ("coherence", "relevance"):
        human = [r["scores"][dim] for r in rows]
        predicted = [p[dim] for p in preds]
        docs = [r["doc_id"] for r in rows]
        assert metrics["random"][dim]["spearman"] == pytest.approx(
            _summary_level(human, predicted, docs, stats.spearmanr))
        assert metrics["random"][dim]["items_scored"] == 12


def test_against_a_benchmark_run_names_our_lm_and_tests_pairs(tmp_path, data_dir, tasks_dir, scripted):  # noqa: F811
    run = tmp_path / "run"
    assert _run(["benchmark", "summeval", "--data-dir", str(data_dir), "--tasks-dir", str(tasks_dir), "--out",
                 str(run), "--bootstrap", "20", "--no-figures", "--methods", "bineval,rouge"]).exit_code == 0
    items = [json.loads(line) for line in (run / "items.jsonl").read_text().splitlines()]
    path = tmp_path / "mine.csv"
    path.write_text("item_id,score\n" + "".join(f"{r['item_id']},{i % 5 * 3.5}\n" for i, r in enumerate(items)))
    out = tmp_path / "agree"
    result = _run(["agreement", "--run", str(run), "--predictions", f"mine={path}", "--out", str(out),
                   "--bootstrap", "20", "--no-figures"])
    assert result.exit_code == 0, result.output
    markdown = (out / "report.md").read_text()
    assert "| mine | file mine.csv |" in markdown
    assert "| BinEval | LM: scripted-judge |" in markdown and "| ROUGE-L | no LM (rouge-score) |" in markdown
    assert "mine vs BinEval (items with both: 12/12)" in markdown and "mine vs ROUGE-L" in markdown
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["mine"]["paired_vs"]) == {"bineval", "rouge"}
    assert "our methods' LM: scripted-judge" in markdown.splitlines()[0]
    assert not (run / "missing_predictions.json").exists()  # the run's own files are left alone


def _qags_file() -> Path | None:
    try:
        return resolve_data_file("qags/qags_xsum.jsonl")
    except InputError:
        return None


@pytest.mark.skipif(_qags_file() is None, reason="benchmark data folder not present")
def test_real_qags_xsum_pooled_correlations_match_scipy(tmp_path):
    """A lexical-overlap 'judge' (percent of summary words found in the article) on the real
    QAGS-XSum items; the first 200 items get a prediction."""
    rows = [row for _, row in read_rows(_qags_file())]

    def overlap(row: dict) -> float:
        source = set(row["source"].lower().split())
        words = row["summary"].lower().split()
        return 100 * sum(w in source for w in words) / len(words)

    preds = [{"item_id": f"xsum-{r['item_id']}", "consistency": overlap(r)} for r in rows]
    path = tmp_path / "first_worker.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in preds[:200]), encoding="utf-8")
    out = tmp_path / "qags"
    result = _run(["agreement", "qags_xsum", "--predictions", f"worker1={path}", "--out", str(out),
                   "--bootstrap", "20", "--no-figures"])
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    human = [r["consistency"] for r in rows[:200]]
    predicted = [p["consistency"] for p in preds[:200]]
    cell = metrics["worker1"]["xsum"]
    assert cell["pearson"] == pytest.approx(stats.pearsonr(human, predicted)[0])
    assert cell["spearman"] == pytest.approx(stats.spearmanr(human, predicted)[0])
    assert cell["kendall"] == pytest.approx(stats.kendalltau(human, predicted)[0])
    assert cell["items_scored"] == 200 and cell["items"] == len(rows)
    assert f"{len(rows) - 200} of the {len(rows)} items have no prediction" in (out / "report.md").read_text()

"""The human mode learns from question-level labels: the questions answered against a
person's labels are its failures, and the history reports agreement with the labels
(Cohen's kappa, accuracy) before and after, on validation items the note-taker never saw.

Every LM here is scripted (tests/fakes.py): plumbing only, never a model's judgment.
"""

from __future__ import annotations

import json

import dspy
import numpy as np
import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.comparison import metrics_from_records
from binaryeval_dspy.comparison.splits import load_summeval_items
from binaryeval_dspy.data.verdicts_file import write_verdicts
from binaryeval_dspy.errors import BinEvalError, InputError
from binaryeval_dspy.optimizers import BinEvalOptimizer
from binaryeval_dspy.optimizers.bineval_optimizer import label_agreement_change
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.schemas.verdict_record import VerdictRecord
from tests.fakes import field_value, scripted_lm
from tests.method.test_bineval_optimizer import ANCHOR, NUMBERS, NUMBERS_LESSON, items, judge_answer
from tests.method.test_comparison import scripted_cli_lm  # noqa: F401 - fixture
from tests.update_scripts import append_rewrite, evidence_of, never_duplicate, route

QUESTIONS = ("consistency-01", "consistency-02", "fluency-01")


def judge(system, user):
    """yes to everything, except: with the numbers lesson, "no" to the numbers question of a
    wrong summary; an unreadable reply to the grammar question of summary 3."""
    question, output = field_value(user, "question"), field_value(user, "output")
    if question == "Is it grammatical?" and output.startswith("Summary 3 "):
        return "perhaps, who knows"
    if question == NUMBERS and NUMBERS_LESSON in system and "wrong" in output:
        return judge_answer("no")
    return judge_answer("yes")


def labels_for(examples, *, judge_name: str = "human", flip: frozenset[str] = frozenset()) -> list[VerdictRecord]:
    """A person's labels: the numbers question is "no" for a wrong summary; everything else "yes"
    (`flip`: item ids whose numbers label is the other way round)."""
    records = []
    for ex in examples:
        for qid in QUESTIONS:
            wrong = qid == "consistency-02" and ("wrong" in ex.output) != (ex.item_id in flip)
            records.append(VerdictRecord(item_id=ex.item_id, question_id=qid, judge=judge_name,
                                         verdict="no" if wrong else "yes"))
    return records


def test_the_questions_answered_against_the_labels_are_the_failures(small_question_set):
    # ratings that agree with the judge's item scores: the 0.3 score gap finds nothing to learn
    ratings = {0: 5.0, 1: 5.0}
    trainset = items(4, wrong={0, 1}, consistency=ratings, prefix="train")
    valset = items(4, wrong={0, 1}, consistency=ratings, prefix="val")
    seen: list[list[dict]] = []

    def notes(system, user):
        seen.append(evidence_of(user))
        return {"lessons": [NUMBERS_LESSON]}

    target_lm, _ = scripted_lm(judge)
    prompt_lm, _ = scripted_lm(route(notes=notes, dedup=never_duplicate, rewrite=append_rewrite(ANCHOR)))
    said: list[str] = []
    optimizer = BinEvalOptimizer("human", prompt_lm=prompt_lm, max_iterations=3, progress=said.append,
                                 labels=labels_for(trainset + valset))
    with dspy.context(lm=target_lm, adapter=dspy.JSONAdapter()):
        compiled = optimizer.compile(BinEval(small_question_set), trainset=trainset, valset=valset)
    history = compiled.optimization_history

    # iteration 0: the two wrong summaries, and only their numbers question, went to the note-taker
    assert [r.failures for r in history.iterations] == [2, 0]
    assert len(seen) == 2
    for evidence in seen:
        assert [(e["question"], e["verdict"]) for e in evidence] == [(NUMBERS, "yes")]
        assert "labelled this question 'no'" in evidence[0]["reference"]
    assert history.stop_reason == "every labelled question the evaluator answered agrees with the labels"
    assert history.best_iteration == 1 and NUMBERS_LESSON in compiled.judge.signature.instructions

    # agreement with the labels, against an independent computation from the cells
    def kappa(yes_yes, yes_no, no_yes, no_no):
        n = yes_yes + yes_no + no_yes + no_no
        p_o = (yes_yes + no_no) / n
        p_e = ((yes_yes + yes_no) * (yes_yes + no_yes) + (no_yes + no_no) * (yes_no + no_no)) / n ** 2
        return (p_o - p_e) / (1 - p_e)

    first, kept = history.iterations[0].scores, history.iterations[1].scores
    # 4 items x 3 labelled questions, one unreadable reply (counted apart, never a "no")
    assert first["val_label_pairs"] == 11 and first["val_label_unanswered"] == 1
    assert first["val_label_accuracy"] == pytest.approx(9 / 11, abs=1e-12)
    assert first["val_label_kappa"] == pytest.approx(kappa(9, 2, 0, 0), abs=1e-12)
    assert kept["val_label_accuracy"] == 1.0 and kept["val_label_kappa"] == pytest.approx(kappa(7, 0, 0, 2))
    assert first["val_label_disagreements"] == 2 and kept["val_label_disagreements"] == 0
    change = label_agreement_change(history)
    assert change["split"] == "val"
    assert change["before"]["kappa"] == first["val_label_kappa"] and change["after"]["kappa"] == kept["val_label_kappa"]
    assert said[-1] == ("agreement with the labels on the validation items: kappa 0.000, accuracy 0.818 (n 11, "
                        "2 disagree) at iteration 0, kappa 1.000, accuracy 1.000 (n 11, 0 disagree) at iteration 1")

    # the same items without labels: the item-score gap sees no failure at all
    prompt_lm, _ = scripted_lm(route())
    without = BinEvalOptimizer("human", prompt_lm=prompt_lm, max_iterations=3)
    with dspy.context(lm=target_lm, adapter=dspy.JSONAdapter()):
        plain = without.compile(BinEval(small_question_set), trainset=trainset, valset=valset)
    assert plain.optimization_history.iterations[0].failures == 0
    assert label_agreement_change(plain.optimization_history) is None


def test_several_annotators_are_read_as_their_majority(small_question_set):
    trainset = items(2, wrong={0}, prefix="train")
    # two of three annotators say item 1's numbers are wrong too: the majority label is "no"
    labels = (labels_for(trainset, judge_name="ann-1") + labels_for(trainset, judge_name="ann-2", flip={"train1"})
              + labels_for(trainset, judge_name="ann-3", flip={"train1"}))
    seen: list[str] = []

    def notes(system, user):
        seen.append(field_value(user, "output"))
        return {"lessons": []}

    target_lm, _ = scripted_lm(judge)
    prompt_lm, _ = scripted_lm(route(notes=notes))
    optimizer = BinEvalOptimizer("human", prompt_lm=prompt_lm, max_iterations=1, labels=labels)
    with dspy.context(lm=target_lm, adapter=dspy.JSONAdapter()):
        history = optimizer.compile(BinEval(small_question_set), trainset=trainset).optimization_history
    assert history.iterations[0].failures == 2 and len(seen) == 2
    assert history.iterations[0].scores["train_label_disagreements"] == 2
    assert history.stop_reason == "the note-taker wrote no lessons"
    assert label_agreement_change(history)["split"] == "train"


def test_labels_are_checked_before_any_lm_call(small_question_set):
    trainset = items(2, prefix="train")
    target_lm, engine = scripted_lm(judge)
    others = labels_for(items(2, prefix="other"))
    with dspy.context(lm=target_lm, adapter=dspy.JSONAdapter()), pytest.raises(InputError) as caught:
        BinEvalOptimizer("human", labels=others).compile(BinEval(small_question_set), trainset=trainset)
    assert "no label names a training item" in caught.value.message and "train0" in caught.value.message
    assert engine.calls == []
    with pytest.raises(BinEvalError, match="regenerate_questions"):
        BinEvalOptimizer("human", labels=labels_for(trainset), regenerate_questions=True)
    with pytest.raises(BinEvalError, match="mode 'human' only"):
        BinEvalOptimizer("cross_model", source={}, labels=labels_for(trainset))
    unanswered = [r.model_copy(update={"verdict": "unparsed"}) for r in labels_for(trainset)]
    with pytest.raises(InputError, match="no yes / no label"):
        BinEvalOptimizer("human", labels=unanswered)


# ---------------------------------------------------------------- bineval optimize --labels

def test_optimize_with_labels_learns_from_them_and_reports_agreement_on_the_test_items(
        tmp_path, comparison_data_dir, comparison_question_file, scripted_cli_lm):  # noqa: F811
    # the scripted judge answers "no" to both questions for a bad summary; the person finds
    # bad summaries incoherent but fluent: the fluency answers of bad summaries disagree
    labels = []
    for ex in load_summeval_items(comparison_data_dir):
        bad = " bad" in ex.output
        labels += [VerdictRecord(item_id=str(ex.item_id), question_id="coherence-01", judge="ann-1",
                                 verdict="no" if bad else "yes"),
                   VerdictRecord(item_id=str(ex.item_id), question_id="fluency-01", judge="ann-1", verdict="yes")]
    labels_file = write_verdicts(labels, tmp_path / "labels-ann-1.jsonl")
    out = tmp_path / "cmp"
    result = CliRunner().invoke(cli, [
        "optimize", "--mode", "human", "--compare", "bineval", "--data-dir", str(comparison_data_dir),
        "--questions", str(comparison_question_file), "--labels", str(labels_file), "--out", str(out),
        "--limit", "4", "--iterations", "1"])
    assert result.exit_code == 0, result.output
    config = json.loads((out / "config.json").read_text())
    ids = config["setup"]["ids"]
    bad = {name: [i for i in ids[name] if i.endswith("M2")] for name in ("train", "val", "test")}
    history = json.loads((out / "bineval" / "history.json").read_text())
    first = history["iterations"][0]
    assert first["failures"] == len(bad["train"]) > 0
    assert first["scores"]["train_label_disagreements"] == len(bad["train"])
    assert "agreement with the labels on the validation items" in result.output
    # every row's test records carry the judge-vs-label cells of the held-out test items
    for name in ("unoptimized", "bineval"):
        records = json.loads((out / name / "result.json").read_text())["test_records"]
        cells = np.sum([r["label_cells"] for r in records], axis=0)
        good = len(ids["test"]) - len(bad["test"])
        # yes_yes: the good items' two questions; yes_no: none; no_yes: bad fluency; no_no: bad coherence
        assert cells.tolist() == [2 * good, 0, len(bad["test"]), len(bad["test"])]
    metrics = metrics_from_records("summeval", records)
    n = cells.sum()
    p_o = (cells[0] + cells[3]) / n
    p_e = ((cells[0] + cells[1]) * (cells[0] + cells[2]) + (cells[2] + cells[3]) * (cells[1] + cells[3])) / n ** 2
    assert metrics["label_kappa"].value == pytest.approx((p_o - p_e) / (1 - p_e), abs=1e-12)
    assert metrics["label_accuracy"].value == pytest.approx(p_o, abs=1e-12)
    report = (out / "comparison.md").read_text()
    assert "test label_kappa" in report and "test label_accuracy" in report and "labels-ann-1.jsonl" in report


def test_optimize_refuses_labels_outside_the_human_mode(tmp_path, scripted_cli_lm):  # noqa: F811
    labels_file = write_verdicts([VerdictRecord(item_id="a", question_id="q", judge="human", verdict="yes")],
                                 tmp_path / "labels.jsonl")
    result = CliRunner().invoke(cli, ["optimize", "--mode", "generation", "--labels", str(labels_file),
                                      "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "--labels only applies to --mode human" in " ".join(result.output.split())
    assert scripted_cli_lm == []

"""Per-question durability: answers written to answers.jsonl as they arrive survive a killed run."""

from __future__ import annotations

import json
import threading

import dspy

from binaryeval_dspy.schemas.item_result import Usage
import pytest

from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.runs.answer_journal import ANSWERS, AnswerJournal, merge_answers
from binaryeval_dspy.runs.evaluation import evaluate_items
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.settings import RunSettings
from tests.conftest import judge_script
from tests.engines.test_empty_and_failed_items import ANSWERS as SCRIPTED_ANSWERS
from tests.engines.test_empty_and_failed_items import manifest


class _Killed(BaseException):
    """Stands in for the process dying (SIGKILL): nothing in the run gets to clean up after it."""


def _items(n: int) -> list[dspy.Example]:
    return [dspy.Example(item_id=f"i{k}", input=f"Article {k}.", output=f"Summary {k}.", line=k + 1)
            .with_inputs("input", "output") for k in range(n)]


@pytest.mark.parametrize("concurrency", [1, 4])
def test_answers_of_a_killed_run_are_not_asked_again(tmp_path, small_question_set, scripted_handle, concurrency):
    answer = judge_script(SCRIPTED_ANSWERS)
    state = {"calls": 0, "kill_at": 5}

    def script(system, user):
        state["calls"] += 1
        if state["calls"] == state["kill_at"]:
            raise _Killed
        return answer(system, user)

    handle, _engine = scripted_handle(script)
    program = BinEval(small_question_set, logprobs="off")
    run_dir = RunDirectory(tmp_path / "run")
    items = _items(2)  # 6 questions; the 5th call kills the run
    with pytest.raises(_Killed):
        evaluate_items(program, items, run_dir, manifest(small_question_set), lm=handle,
                       settings=RunSettings(concurrency=concurrency))
    # The loop re-raises the kill at once, but calls already past the script in other workers
    # still return and are journaled (a real SIGKILL would stop them at some point too): count
    # the answers once those workers are gone.
    for thread in threading.enumerate():
        if thread.name.startswith("bineval-call"):
            thread.join(timeout=30)
    journal = run_dir.path / ANSWERS  # absent when every answer returned so far belongs to a stored item
    journaled = [json.loads(line) for line in journal.read_text().splitlines()] if journal.is_file() else []
    journaled = [line for line in journaled if "verdict" in line]  # not the stored-item markers
    answered = {(line["item_id"], line["verdict"]["question_id"]) for line in journaled}
    answered |= {(r.item_id, v.question_id) for r in run_dir.read_results() if r.complete for v in r.verdicts}
    # the calls that returned before the kill, whatever the order: in the journal, or in
    # results.jsonl for an item stored before the kill (its journal lines are then dropped)
    assert len(answered) >= 3
    # The rerun asks only the questions with no answer anywhere (journal or results.jsonl).
    state.update(calls=0, kill_at=-1)
    again = evaluate_items(program, items, run_dir, manifest(small_question_set), lm=handle,
                       settings=RunSettings(concurrency=concurrency))
    assert state["calls"] == 6 - len(answered)
    rows = {r.item_id: r for r in run_dir.read_results()}
    assert all(r.complete for r in rows.values()) and set(rows) == {"i0", "i1"}
    assert [v.verdict for v in rows["i1"].verdicts] == ["yes", "no", "yes"]
    assert again.incomplete == [] and not (run_dir.path / ANSWERS).exists()


def test_journal_lines_of_another_text_question_set_or_cut_short_are_ignored(tmp_path):
    item = dspy.Example(item_id="a", input="in", output="out")
    journal = AnswerJournal(tmp_path / ANSWERS, "qs-1")
    journal.write(item, QuestionVerdict(question_id="q1", verdict="yes"))
    journal.write(item, QuestionVerdict(question_id="q2", verdict="error", error="boom"))  # not an answer
    journal.write(item, QuestionVerdict(question_id="q3", verdict="yes", source="code"))  # not the LM's
    AnswerJournal(tmp_path / ANSWERS, "qs-2").write(item, QuestionVerdict(question_id="q2", verdict="no"))
    changed = dspy.Example(item_id="a", input="in", output="another output")
    journal.write(changed, QuestionVerdict(question_id="q2", verdict="no"))
    with (tmp_path / ANSWERS).open("a") as handle:
        handle.write('{"item_id": "a", "question_set_hash": "qs-1", "verd')  # a write cut short by a kill
    assert [(v.question_id, v.verdict) for v in AnswerJournal(tmp_path / ANSWERS, "qs-1").answers(item)] == [
        ("q1", "yes")]
    assert [v.question_id for v in AnswerJournal(tmp_path / ANSWERS, "qs-1").answers(changed)] == ["q2"]


def test_merge_keeps_stored_answers_and_fills_errors_and_gaps_from_the_journal():
    stored = [QuestionVerdict(question_id="q1", verdict="no"),
              QuestionVerdict(question_id="q2", verdict="error", error="429")]
    journaled = [QuestionVerdict(question_id="q1", verdict="yes"), QuestionVerdict(question_id="q2", verdict="yes"),
                 QuestionVerdict(question_id="q3", verdict="unparsed", raw_answer="maybe")]
    merged = {v.question_id: v.verdict for v in merge_answers(stored, journaled)}
    assert merged == {"q1": "no", "q2": "yes", "q3": "unparsed"}


def test_stored_items_are_not_read_again_and_compaction_keeps_only_the_others(tmp_path):
    journal = AnswerJournal(tmp_path / ANSWERS, "qs")
    items = {name: dspy.Example(item_id=name, input="i", output="o") for name in ("a", "b")}
    for item in items.values():
        journal.write(item, QuestionVerdict(question_id="q", verdict="no"))
    journal.stored(items["a"])  # a's answers are in its stored row now: appended, nothing rewritten
    assert len((tmp_path / ANSWERS).read_text().splitlines()) == 3
    assert AnswerJournal(tmp_path / ANSWERS, "qs").answers(items["a"]) == []
    assert [v.verdict for v in AnswerJournal(tmp_path / ANSWERS, "qs").answers(items["b"])] == ["no"]
    journal.compact()
    assert [json.loads(line)["item_id"] for line in (tmp_path / ANSWERS).read_text().splitlines()] == ["b"]
    journal.stored(items["b"])
    journal.compact()
    assert not (tmp_path / ANSWERS).exists()


def test_a_failed_row_keeps_its_answers_for_the_rerun_without_their_usage(tmp_path):
    journal = AnswerJournal(tmp_path / ANSWERS, "qs")
    item = dspy.Example(item_id="a", input="i", output="o")
    journal.write(item, QuestionVerdict(question_id="q", verdict="yes"), Usage(lm_calls=1, prompt_tokens=9))
    journal.stored(item, keep_answers=True)
    again = AnswerJournal(tmp_path / ANSWERS, "qs")
    assert [v.verdict for v in again.answers(item)] == ["yes"]
    assert again.recovered_usage(item, []).lm_calls == 0  # the stored row holds that usage already
    journal.compact()
    assert [v.verdict for v in AnswerJournal(tmp_path / ANSWERS, "qs").answers(item)] == ["yes"]

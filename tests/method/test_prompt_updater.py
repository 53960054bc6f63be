"""PromptUpdater, LessonMemory and NoteTaker on scripted LMs: dedup, retries, skips and the cap."""

from __future__ import annotations

import dspy
import pytest

from binaryeval_dspy.programs.lesson_memory import LessonMemory
from binaryeval_dspy.programs.note_taker import ItemFindings, NoteTaker
from binaryeval_dspy.programs.prompt_updater import PromptUpdater, anchor_sentences, prompt_diff
from binaryeval_dspy.signatures.lesson_extraction import QuestionEvidence
from tests.fakes import field_value, scripted_lm
from tests.update_scripts import evidence_of, never_duplicate, route

PROMPT = "Judge the output. Answer yes or no. Explain briefly."


def run(script, fn):
    lm, engine = scripted_lm(script)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        return fn(), engine


def test_rewrite_applies_one_exact_substring_and_reports_a_diff():
    script = route(dedup=never_duplicate, rewrite=lambda s, u: {
        "substring": "Answer yes or no.", "replacement": "Answer yes or no; omissions are not errors."})
    pred, engine = run(script, lambda: PromptUpdater()(prompt=PROMPT, lessons=["Omission is not an error."]))
    assert pred.prompt == "Judge the output. Answer yes or no; omissions are not errors. Explain briefly."
    assert "-Answer yes or no." in pred.diff and "+Answer yes or no; omissions are not errors." in pred.diff
    (record,) = pred.rewrites
    assert record.applied and record.attempts == 1 and record.reason is None
    assert len(engine.calls) == 1  # one lesson, empty memory: no dedup call, one rewrite


def test_substring_not_found_is_retried_with_the_reason_then_skipped():
    attempts = []

    def rewrite(system, user):
        attempts.append((system, field_value(user, "previous_attempt")))
        return {"substring": "Reply in French.", "replacement": "whatever"}  # no sentence of the prompt

    pred, _ = run(route(rewrite=rewrite), lambda: PromptUpdater(max_attempts=2)(prompt=PROMPT, lessons=["L1"]))
    assert pred.prompt == PROMPT and pred.diff == ""
    (record,) = pred.rewrites
    assert not record.applied and record.attempts == 2 and record.constrained
    # the retry restricts the substring to the prompt's sentences, so an invented one cannot be read
    assert record.reason == "the updater's answer could not be parsed"
    (first_system, first_previous), (retry_system, retry_previous) = attempts
    assert first_previous == "" and "does not occur" in retry_previous and "Reply in French." in retry_previous
    assert "Answer yes or no." not in first_system
    assert all(sentence in retry_system for sentence in ("Judge the output.", "Answer yes or no.", "Explain briefly."))


def test_retry_chooses_among_the_prompts_own_sentences_and_applies():
    answers = iter([{"substring": "answer with yes/no", "replacement": "x"},   # not in the prompt
                    {"substring": "Explain briefly.", "replacement": "Explain briefly; omissions are not errors."}])
    pred, _ = run(route(rewrite=lambda s, u: next(answers)), lambda: PromptUpdater()(prompt=PROMPT, lessons=["L"]))
    assert pred.prompt == "Judge the output. Answer yes or no. Explain briefly; omissions are not errors."
    (record,) = pred.rewrites
    assert record.applied and record.attempts == 2 and record.constrained


def test_anchor_sentences_are_unique_sentences_on_one_line():
    prompt = "Read the input.\nThen the\n  output. Read the input.\n\nAnswer yes or no!  Why? Be brief"
    assert anchor_sentences(prompt) == ["Then the output.", "Answer yes or no!", "Why?", "Be brief"]
    assert anchor_sentences("") == []


def test_a_one_line_anchor_is_matched_back_to_a_prompt_with_line_breaks():
    prompt = "Judge the output.\nAnswer yes\n    or no. Explain briefly."
    answers = iter([{"substring": "nope", "replacement": "x"},
                    {"substring": "Answer yes or no.", "replacement": "Answer yes or no only."}])
    pred, _ = run(route(rewrite=lambda s, u: next(answers)), lambda: PromptUpdater()(prompt=prompt, lessons=["L"]))
    assert pred.prompt == "Judge the output.\nAnswer yes or no only. Explain briefly."


def test_substring_differing_only_in_whitespace_is_matched_to_the_prompt_text():
    prompt = "Judge the output.\nAnswer yes\n    or no. Explain briefly."
    script = route(rewrite=lambda s, u: {"substring": "Answer yes or no.", "replacement": "Answer yes or no only."})
    pred, _ = run(script, lambda: PromptUpdater()(prompt=prompt, lessons=["Be terse."]))
    assert pred.prompt == "Judge the output.\nAnswer yes or no only. Explain briefly."
    assert pred.rewrites[0].substring == "Answer yes\n    or no."
    # a word that differs is still not found
    script = route(rewrite=lambda s, u: {"substring": "Answer yes or maybe.", "replacement": "x"})
    pred, _ = run(script, lambda: PromptUpdater(max_attempts=1)(prompt=prompt, lessons=["Be terse."]))
    assert not pred.rewrites[0].applied


def test_retry_succeeds_after_an_ambiguous_substring():
    answers = iter([{"substring": "Answer", "replacement": "Reply"},          # occurs once? no: see prompt
                    {"substring": "Explain briefly.", "replacement": "Explain in one sentence."}])
    prompt = "Answer yes. Answer no. Explain briefly."
    pred, _ = run(route(rewrite=lambda s, u: next(answers)), lambda: PromptUpdater()(prompt=prompt, lessons=["L"]))
    assert pred.prompt == "Answer yes. Answer no. Explain in one sentence."
    assert pred.rewrites[0].attempts == 2 and pred.rewrites[0].applied


def test_prompt_cap_refuses_an_edit_that_grows_the_prompt_past_it():
    long_text = "Answer yes or no. " + "Also consider every detail carefully. " * 5
    script = route(rewrite=lambda s, u: {"substring": "Answer yes or no.", "replacement": long_text})
    updater = PromptUpdater(max_prompt_chars=80, max_attempts=1)
    pred, _ = run(script, lambda: updater(prompt=PROMPT, lessons=["Be thorough."]))
    assert pred.prompt == PROMPT
    assert "over the cap of 80" in pred.rewrites[0].reason
    # a short edit under the cap goes through
    script = route(rewrite=lambda s, u: {"substring": "Explain briefly.", "replacement": "Explain."})
    pred, _ = run(script, lambda: updater(prompt=PROMPT, lessons=["Be terse."]))
    assert pred.prompt == "Judge the output. Answer yes or no. Explain." and len(pred.prompt) <= 80


def test_lesson_memory_merges_duplicates_drops_when_full_and_skips_exact_repeats():
    def dedup(system, user):
        memory = field_value(user, "lesson_memory")
        new = field_value(user, "new_lesson")
        if "numbers" in new and "1. Check numbers" in memory:
            return {"is_duplicate": True, "duplicate_number": 1, "merged_lesson": "Check numbers and dates."}
        return {"is_duplicate": False, "duplicate_number": 0, "merged_lesson": new}

    lessons = ["Check numbers.", "Check the numbers again.", "Be kind.", "check numbers", "Be brief."]
    pred, engine = run(route(dedup=dedup), lambda: LessonMemory(max_lessons=2)(lessons=lessons))
    assert pred.lessons == ["Check numbers and dates.", "Be kind."]
    assert [d.action for d in pred.decisions] == ["added", "merged", "added", "merged", "dropped"]
    assert pred.decisions[1].merged_into == 0 and pred.decisions[3].merged_into == 0
    assert pred.decisions[4].note == "the lesson memory is full (2 lessons)"
    # "check numbers" went to the LM: the memory then held the merged text, not the same words
    assert len(engine.calls) == 4


def test_exact_repeat_needs_no_lm_call_and_bad_numbers_are_kept_as_new():
    answers = iter([{"is_duplicate": True, "duplicate_number": 7, "merged_lesson": "?"}])
    pred, engine = run(route(dedup=lambda s, u: next(answers)),
                       lambda: LessonMemory()(lessons=["Be brief.", "be BRIEF!", "Cite evidence."]))
    assert [d.action for d in pred.decisions] == ["added", "exact_duplicate", "added"]
    assert "not in the list" in pred.decisions[2].note
    assert len(engine.calls) == 1


def test_note_taker_sends_the_evidence_and_caps_lessons():
    def notes(system, user):
        evidence = evidence_of(user)
        assert evidence[0]["reference"].startswith("The reference evaluator answered no")
        assert field_value(user, "problem") == "disagreed on 1 question"
        return {"lessons": ["Lesson A.", "Lesson A.", "Lesson B.", "Lesson C.", "Lesson D."]}

    findings = ItemFindings(item_id="x", input="doc", output="sum", problem="disagreed on 1 question", evidence=[
        QuestionEvidence(question="Numbers right?", dimension="consistency", verdict="yes", explanation="fine",
                         reference="The reference evaluator answered no: 3 is not 4")])
    pred, _ = run(route(notes=notes), lambda: NoteTaker(prompt_role="judge")(findings=findings))
    assert pred.lessons == ["Lesson A.", "Lesson B.", "Lesson C."]


def test_note_taker_unparsed_answer_gives_no_lessons():
    pred, _ = run(route(notes=lambda s, u: "I think the lesson is to be careful"),
                  lambda: NoteTaker(prompt_role="judge")(findings=ItemFindings("x", "doc", "sum", "p")))
    assert pred.lessons == [] and "unparsed" in pred.error


def test_prompt_diff_is_empty_for_equal_prompts():
    assert prompt_diff("Same.", "Same.") == ""


@pytest.mark.parametrize("bad", [{"max_attempts": 0}, {"max_prompt_chars": 0}])
def test_updater_rejects_bad_settings(bad):
    with pytest.raises(ValueError):
        PromptUpdater(**bad)

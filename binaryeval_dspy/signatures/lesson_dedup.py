"""Lesson dedup: decide whether a new lesson repeats one already in memory (paper 3.3, step 4)."""

from __future__ import annotations

import dspy


class DedupLesson(dspy.Signature):
    """You maintain a short list of lessons for improving a prompt. Decide whether the new
    lesson says essentially the same thing as one lesson already in the list (same advice,
    perhaps in other words or with another example). If it does, give that lesson's number
    and one merged lesson that keeps the useful detail of both in at most two sentences.
    If the new lesson adds advice that no listed lesson gives, it is not a duplicate."""

    lesson_memory: str = dspy.InputField(desc="the lessons kept so far, one per line, numbered from 1")
    new_lesson: str = dspy.InputField(desc="the lesson to file")
    is_duplicate: bool = dspy.OutputField(desc="true if the new lesson repeats a listed lesson")
    duplicate_number: int = dspy.OutputField(desc="the number (from 1) of the repeated lesson; 0 if not a duplicate")
    merged_lesson: str = dspy.OutputField(desc="the merged lesson when a duplicate; otherwise the new lesson unchanged")

"""LessonMemory: semantic dedup of lessons into a bounded memory (paper 3.3 step 4, Algorithm 1 lines 16-22)."""

from __future__ import annotations

import logging
import re

import dspy
from dspy.utils.exceptions import AdapterParseError

from binaryeval_dspy.errors import ConfigError
from binaryeval_dspy.lm.adapters import acall_predictor, call_predictor
from binaryeval_dspy.schemas.optimization_history import DedupDecision
from binaryeval_dspy.signatures.lesson_dedup import DedupLesson

logger = logging.getLogger(__name__)


def lesson_key(text: str) -> str:
    """Lowercase words of a lesson: two lessons with the same key are the same lesson."""
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


class LessonMemory(dspy.Module):
    """File lessons one by one: merge a lesson into the entry it repeats, else add it.

    The memory starts empty on every call (one iteration's lessons) and holds at most
    `max_lessons` entries; a new lesson arriving when it is full is dropped and the
    decision says so. Lessons with the same words as an entry are merged without an LM
    call. An LM answer that cannot be used (unparsed, or a number outside the list) files
    the lesson as new, with a note.

    Args:
        max_lessons: memory size (paper: 10), >= 1.
    """

    def __init__(self, *, max_lessons: int = 10) -> None:
        super().__init__()
        if max_lessons < 1:
            raise ConfigError("bad max_lessons", expected="an integer >= 1", received=repr(max_lessons),
                              fix="pass a positive number of lessons to keep.")
        self.max_lessons = max_lessons
        self.dedup = dspy.Predict(DedupLesson)

    @staticmethod
    def _same_words(memory: list[str], lesson: str) -> DedupDecision | None:
        key = lesson_key(lesson)
        for index, kept in enumerate(memory):
            if lesson_key(kept) == key:
                return DedupDecision(lesson=lesson, action="exact_duplicate", merged_into=index, result=kept)
        return None

    @staticmethod
    def _dedup_inputs(memory: list[str], lesson: str) -> dict[str, str]:
        return {"lesson_memory": "\n".join(f"{i}. {kept}" for i, kept in enumerate(memory, start=1)),
                "new_lesson": lesson}

    def _file(self, memory: list[str], lesson: str) -> DedupDecision:
        decided = self._same_words(memory, lesson)
        if decided is not None or not memory:
            return decided or self._decide(memory, lesson, None)
        try:
            pred: dspy.Prediction | Exception = call_predictor(self.dedup, **self._dedup_inputs(memory, lesson))
        except AdapterParseError as exc:
            pred = exc
        return self._decide(memory, lesson, pred)

    async def _afile(self, memory: list[str], lesson: str) -> DedupDecision:
        decided = self._same_words(memory, lesson)
        if decided is not None or not memory:
            return decided or self._decide(memory, lesson, None)
        try:
            pred: dspy.Prediction | Exception = await acall_predictor(self.dedup,
                                                                     **self._dedup_inputs(memory, lesson))
        except AdapterParseError as exc:
            pred = exc
        return self._decide(memory, lesson, pred)

    def _decide(self, memory: list[str], lesson: str, pred: dspy.Prediction | Exception | None) -> DedupDecision:
        """File `lesson` given the LM's dedup answer (None when no call was needed), updating `memory`."""
        note = None
        try:
            if isinstance(pred, Exception):
                raise pred
            if pred is not None:
                number = int(pred.duplicate_number or 0)
                if bool(pred.is_duplicate) and 1 <= number <= len(memory):
                    merged = " ".join(str(pred.merged_lesson or "").split()) or memory[number - 1]
                    memory[number - 1] = merged
                    return DedupDecision(lesson=lesson, action="merged", merged_into=number - 1, result=merged)
                if bool(pred.is_duplicate):
                    note = f"the LM called it a duplicate of number {number}, which is not in the list; kept as new"
        except (AdapterParseError, ValueError, TypeError) as exc:
            note = f"dedup answer unusable ({type(exc).__name__}); kept as new"
            logger.warning("lesson dedup failed for %r: %s", lesson[:80], exc)
        if len(memory) >= self.max_lessons:
            return DedupDecision(lesson=lesson, action="dropped",
                                 note=f"the lesson memory is full ({self.max_lessons} lessons)")
        memory.append(lesson)
        return DedupDecision(lesson=lesson, action="added", merged_into=None, result=lesson, note=note)

    def forward(self, lessons: list[str]) -> dspy.Prediction:
        """Deduplicate `lessons` in order.

        Returns:
            `dspy.Prediction` with ``lessons`` (the unique lessons kept, at most
            `max_lessons`) and ``decisions`` (one `DedupDecision` per input lesson).
        """
        memory: list[str] = []
        decisions = [self._file(memory, lesson) for lesson in lessons if str(lesson).strip()]
        return dspy.Prediction(lessons=memory, decisions=decisions)

    async def aforward(self, lessons: list[str]) -> dspy.Prediction:
        """`forward` for async programs: the same result. Lessons are filed one after the
        other (each dedup call sees the memory the previous ones left), so the calls are not
        concurrent."""
        memory: list[str] = []
        decisions = [await self._afile(memory, lesson) for lesson in lessons if str(lesson).strip()]
        return dspy.Prediction(lessons=memory, decisions=decisions)

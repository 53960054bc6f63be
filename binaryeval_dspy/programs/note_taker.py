"""NoteTaker: one item's failed or disputed questions -> general lessons (paper 3.3 step 3, 3.4 step 3)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import dspy
from dspy.utils.exceptions import AdapterParseError

from binaryeval_dspy.errors import ConfigError
from binaryeval_dspy.lm.adapters import acall_predictor, call_predictor
from binaryeval_dspy.signatures.lesson_extraction import ExtractLessons, QuestionEvidence

logger = logging.getLogger(__name__)


@dataclass
class ItemFindings:
    """What went wrong on one item, ready for the note-taker.

    Attributes:
        item_id: the item's id.
        input: the item's input x.
        output: the output y that was judged (or generated).
        problem: one line saying what went wrong (e.g. "humans rated coherence 0.25,
            the evaluator 0.90").
        evidence: the questions concerned, each with the reference's view.
        severity: how badly it went wrong (larger first when items are capped).
    """

    item_id: str
    input: str
    output: str
    problem: str
    evidence: list[QuestionEvidence] = field(default_factory=list)
    severity: float = 0.0


def _clip(text: str, limit: int) -> str:
    text = str(text or "")
    return text if len(text) <= limit else text[:limit] + " [...]"


class NoteTaker(dspy.Module):
    """Ask the note-taker LM for general lessons from one item's findings.

    Args:
        prompt_role: what the prompt being improved is for, in one sentence (the
            note-taker phrases lessons for that reader).
        max_lessons_per_item: keep at most this many lessons per item (>= 1).
        max_input_chars: clip the item's input to this many characters (long articles
            would otherwise crowd out the evidence in small context windows).

    An answer that cannot be parsed yields no lessons (logged), never a crash: one bad
    note must not lose an iteration's other notes.
    """

    def __init__(self, *, prompt_role: str, max_lessons_per_item: int = 3, max_input_chars: int = 6000) -> None:
        super().__init__()
        if max_lessons_per_item < 1:
            raise ConfigError("bad max_lessons_per_item", expected="an integer >= 1",
                              received=repr(max_lessons_per_item), fix="pass max_lessons_per_item=3 (the default).")
        self.prompt_role = prompt_role
        self.max_lessons_per_item = max_lessons_per_item
        self.max_input_chars = max_input_chars
        self.extract = dspy.Predict(ExtractLessons)

    def _inputs(self, findings: ItemFindings) -> dict[str, object]:
        return {"input": _clip(findings.input, self.max_input_chars),
                "output": _clip(findings.output, self.max_input_chars),
                "prompt_role": self.prompt_role, "problem": findings.problem, "evidence": findings.evidence}

    def forward(self, findings: ItemFindings) -> dspy.Prediction:
        """Lessons drawn from `findings`.

        Returns:
            `dspy.Prediction` with ``lessons`` (list of non-empty strings, at most
            `max_lessons_per_item`) and ``error`` (None, or why no lessons were read).
        """
        try:
            pred = call_predictor(self.extract, **self._inputs(findings))
        except AdapterParseError as exc:
            return self._unread(findings, exc)
        return self._lessons(pred)

    async def aforward(self, findings: ItemFindings) -> dspy.Prediction:
        """`forward` for async programs (``await note_taker.acall(findings)``): the same result."""
        try:
            pred = await acall_predictor(self.extract, **self._inputs(findings))
        except AdapterParseError as exc:
            return self._unread(findings, exc)
        return self._lessons(pred)

    @staticmethod
    def _unread(findings: ItemFindings, exc: AdapterParseError) -> dspy.Prediction:
        logger.warning("note-taker answer for item %s could not be parsed: %s", findings.item_id, exc)
        return dspy.Prediction(lessons=[], error=f"unparsed note-taker answer: {str(exc.lm_response)[:200]!r}")

    def _lessons(self, pred: dspy.Prediction) -> dspy.Prediction:
        raw = pred.lessons if isinstance(pred.lessons, list) else []
        lessons: list[str] = []
        for lesson in raw:
            text = " ".join(str(lesson).split())
            if text and text not in lessons:
                lessons.append(text)
        return dspy.Prediction(lessons=lessons[: self.max_lessons_per_item], error=None)

"""PressureTest: before a verdict is final, the LM tries to refute it (seed 004's pressure test)."""

from __future__ import annotations

import asyncio
import re

import dspy
from dspy.utils.exceptions import AdapterParseError

from binaryeval_dspy.errors import ConfigError
from binaryeval_dspy.lm.adapters import acall_predictor, call_predictor
from binaryeval_dspy.lm.evaluated_text import as_evaluated_text
from binaryeval_dspy.lm.final_answer import complete_list_items, is_incomplete_reply
from binaryeval_dspy.schemas.named_verdict import PressureTestRecord, RefutationAnswer
from binaryeval_dspy.schemas.verdict_policy import VerdictLabel
from binaryeval_dspy.signatures.refutation import AnswerRefutationQuestion, DraftRefutationQuestions
from binaryeval_dspy.signatures.verdict_pick import EvidenceLine

_ANSWER = re.compile(r'"answer"\s*:\s*"\s*(yes|no)\s*"', re.IGNORECASE)
_EVIDENCE = re.compile(r'"evidence"\s*:\s*"((?:[^"\\]|\\.)*)"')


class PressureTest(dspy.Module):
    """Write 1 to `max_questions` refutation questions for a verdict and answer each with evidence.

    Whether the answers refute the verdict, and where it then moves, is decided in
    code by the question set's policy (`binaryeval_dspy.verdict_rules`).

    Args:
        max_questions: questions kept at most (1 to 3 in seed 004's practice).
        draft_max_tokens: completion cap of the drafting call, in tokens. Three short
            questions need far less; the cap stops a small model that keeps adding
            list entries (measured: SmolLM2-135M filled all 512 tokens otherwise). A
            reply cut by the cap is still read: the questions written in full are kept,
            the one the cap cut is not (`complete_list_items`).

    Raises:
        ConfigError: `max_questions` or `draft_max_tokens` < 1 (also a ValueError).
    """

    def __init__(self, *, max_questions: int = 3, draft_max_tokens: int = 200) -> None:
        super().__init__()
        if max_questions < 1:
            raise ConfigError("bad max_questions", expected="an integer >= 1", received=repr(max_questions),
                              fix="pass max_questions=3 (the default).")
        if draft_max_tokens < 1:
            raise ConfigError("bad draft_max_tokens", expected="an integer >= 1", received=repr(draft_max_tokens),
                              fix="pass a positive token count.")
        self.max_questions = max_questions
        self.draft_max_tokens = draft_max_tokens
        self.draft = dspy.Predict(DraftRefutationQuestions)
        self.answer = dspy.Predict(AnswerRefutationQuestion)

    def _draft_inputs(self, input: str, output: str, evidence: list[EvidenceLine],
                      label: VerdictLabel) -> dict[str, object]:
        return {"input": as_evaluated_text(input), "output": as_evaluated_text(output), "evidence": evidence,
                "proposed_label": label.name, "label_meaning": label.meaning,
                "config": {"max_tokens": self.draft_max_tokens}}

    def _questions(
        self, input: str, output: str, evidence: list[EvidenceLine], label: VerdictLabel
    ) -> tuple[list[str], int]:
        """(distinct drafted questions, number of entries dropped because they are not questions)."""
        try:
            drafted = call_predictor(self.draft, **self._draft_inputs(input, output, evidence, label)).questions
        except AdapterParseError as exc:
            return self._drafted_questions(exc)
        return self._drafted_questions(drafted)

    async def _aquestions(
        self, input: str, output: str, evidence: list[EvidenceLine], label: VerdictLabel
    ) -> tuple[list[str], int]:
        try:
            pred = await acall_predictor(self.draft, **self._draft_inputs(input, output, evidence, label))
        except AdapterParseError as exc:
            return self._drafted_questions(exc)
        return self._drafted_questions(pred.questions)

    @staticmethod
    def _drafted_questions(drafted: object) -> tuple[list[str], int]:
        """The usable questions of a draft (its list, or the `AdapterParseError` of a reply
        that did not parse) and the number of entries dropped."""
        if isinstance(drafted, AdapterParseError):
            # a reply cut by the cap inside its list: the questions written in full still count
            drafted = complete_list_items(drafted, "questions") if is_incomplete_reply(drafted) else None
            if drafted is None:
                return [], 0
        seen: set[str] = set()
        questions = []
        dropped = 0
        for text in drafted or []:
            text = str(text).strip()
            if not text.endswith("?"):  # a label, a fragment, or a question cut by the token cap
                dropped += bool(text)
                continue
            if text.casefold() not in seen:
                seen.add(text.casefold())
                questions.append(text)
        return questions, dropped

    def answer_question(self, input: str, output: str, question: str) -> RefutationAnswer:
        """Answer one refutation question; an unreadable reply is ``unparsed``, never "yes"."""
        inputs = {"input": as_evaluated_text(input), "output": as_evaluated_text(output), "question": question}
        try:
            pred = call_predictor(self.answer, **inputs)  # our parsers: complete answers, qualified answers
        except AdapterParseError as exc:
            return self._read_answer(question, exc)
        return self._read_answer(question, pred)

    async def aanswer_question(self, input: str, output: str, question: str) -> RefutationAnswer:
        """`answer_question` for async programs: the same answer."""
        inputs = {"input": as_evaluated_text(input), "output": as_evaluated_text(output), "question": question}
        try:
            pred = await acall_predictor(self.answer, **inputs)
        except AdapterParseError as exc:
            return self._read_answer(question, exc)
        return self._read_answer(question, pred)

    @staticmethod
    def _read_answer(question: str, pred: dspy.Prediction | AdapterParseError) -> RefutationAnswer:
        """The refutation answer a prediction (or a reply that did not parse) gives."""
        if isinstance(pred, AdapterParseError):
            raw = str(pred.lm_response or "")
            if is_incomplete_reply(pred):  # stops inside its answer: no answer, whatever a pattern finds
                return RefutationAnswer(question=question, answer="unparsed", raw_answer=raw[:2000],
                                        error=str(pred.message).splitlines()[0][:300])
            match = _ANSWER.search(raw)
            if match:
                found = _EVIDENCE.search(raw)
                return RefutationAnswer(question=question, answer=match.group(1).lower(),
                                        evidence=found.group(1).strip() if found else "")
            return RefutationAnswer(question=question, answer="unparsed", raw_answer=raw[:2000],
                                    error="could not read a yes/no answer")
        answer = str(pred.answer).strip().lower()
        if answer not in ("yes", "no"):
            return RefutationAnswer(question=question, answer="unparsed", raw_answer=str(pred.answer)[:2000],
                                    error="the answer is neither yes nor no")
        # our adapters read "Yes, but ..." as yes and name the reservation (`final_answer`)
        named = getattr(pred, "qualified", None)
        said = named.get("answer") if isinstance(named, dict) else None
        raw_reply = getattr(pred, "raw_reply", None)
        return RefutationAnswer(question=question, answer=answer, evidence=str(pred.evidence or "").strip(),
                                qualified=bool(said),
                                raw_answer=str(raw_reply or f"{answer}, {said}")[:2000] if said else None)

    def forward(self, input: str, output: str, evidence: list[EvidenceLine], label: VerdictLabel) -> dspy.Prediction:
        """Test `label`.

        Returns:
            `dspy.Prediction` with ``record``: a `PressureTestRecord` with status "ran"
            (questions answered; ``refuted`` / ``moved_to`` still unset) or "failed"
            (no usable question was written). Entries not ending in "?" (labels,
            fragments cut by the token cap) are dropped and counted in ``reason``.
        """
        questions, dropped = self._questions(input, output, evidence, label)
        kept, note, failed = self._kept(questions, dropped, label)
        if failed is not None:
            return failed
        answers = [self.answer_question(input, output, q) for q in kept]
        return self._record(label, note, answers)

    async def aforward(self, input: str, output: str, evidence: list[EvidenceLine],
                       label: VerdictLabel) -> dspy.Prediction:
        """`forward` for async programs (``await pressure_test.acall(...)``): the same record,
        with the refutation questions answered together (``asyncio.gather``)."""
        questions, dropped = await self._aquestions(input, output, evidence, label)
        kept, note, failed = self._kept(questions, dropped, label)
        if failed is not None:
            return failed
        answers = await asyncio.gather(*(self.aanswer_question(input, output, q) for q in kept))
        return self._record(label, note, list(answers))

    def _kept(self, questions: list[str], dropped: int,
              label: VerdictLabel) -> tuple[list[str], str, dspy.Prediction | None]:
        """(questions to answer, the record's note, the "failed" prediction when none is usable)."""
        dropped_note = f"dropped {dropped} non-question entr{'y' if dropped == 1 else 'ies'}"
        skipped = f" ({dropped_note})" if dropped else ""
        if not questions:
            return [], "", dspy.Prediction(record=PressureTestRecord(
                status="failed", tested_label=label.name,
                reason=f"the LM wrote no usable refutation question{skipped}; the verdict was not tested",
            ))
        notes = [dropped_note] if dropped else []
        if len(questions) > self.max_questions:
            notes.append(f"kept the first {self.max_questions} of {len(questions)} questions written")
            questions = questions[: self.max_questions]
        return questions, "; ".join(notes), None

    @staticmethod
    def _record(label: VerdictLabel, note: str, answers: list[RefutationAnswer]) -> dspy.Prediction:
        return dspy.Prediction(record=PressureTestRecord(status="ran", tested_label=label.name, reason=note,
                                                         questions=answers))

"""PressureTest: before a verdict is final, the LM tries to refute it (seed 004's pressure test)."""

from __future__ import annotations

import asyncio
import re

import dspy

from binaryeval_dspy.engines.base import engine_sender
from binaryeval_dspy.engines.in_process import aanswer
from binaryeval_dspy.errors import ConfigError, LMCallFailed
from binaryeval_dspy.lm.calls import Answer, LMCall
from binaryeval_dspy.lm.evaluated_text import as_evaluated_text
from binaryeval_dspy.lm.final_answer import complete_list_items
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

    def draft_call(self, input: str, output: str, evidence: list[EvidenceLine], label: VerdictLabel) -> LMCall:
        """The `LMCall` drafting refutation questions for `label` (``refute-draft``), capped at
        `draft_max_tokens`."""
        return LMCall(key="refute-draft", signature=self.draft.signature,
                      inputs={"input": as_evaluated_text(input), "output": as_evaluated_text(output),
                              "evidence": evidence, "proposed_label": label.name, "label_meaning": label.meaning},
                      demos=tuple(self.draft.demos or ()),
                      config={**(self.draft.config or {}), "max_tokens": self.draft_max_tokens})

    def read_draft(self, answer: Answer) -> tuple[list[str], int]:
        """(distinct drafted questions, number of entries dropped because they are not questions).

        Raises:
            LMCallFailed: the drafting call failed (no reply).
        """
        if answer.status in ("error", "not_sent"):
            raise LMCallFailed(answer.reason or "the refutation draft got no reply")
        if answer.status == "answered":
            drafted = (answer.fields or {}).get("questions")
        elif answer.status == "unparsed" and answer.incomplete:
            # a reply cut by the cap inside its list: the questions written in full still count
            drafted = complete_list_items(answer.parse_error(self.draft.signature), "questions")
        else:
            drafted = None
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

    def answer_call(self, input: str, output: str, question: str, number: int) -> LMCall:
        """The `LMCall` answering refutation question `number` (``refute-<number>``)."""
        return LMCall(key=f"refute-{number}", signature=self.answer.signature,
                      inputs={"input": as_evaluated_text(input), "output": as_evaluated_text(output),
                              "question": question},
                      demos=tuple(self.answer.demos or ()), config=dict(self.answer.config or {}))

    @staticmethod
    def read_answer(question: str, answer: Answer) -> RefutationAnswer:
        """One refutation answer read; an unreadable reply is ``unparsed``, never "yes".

        Raises:
            LMCallFailed: the call failed (no reply).
        """
        if answer.status in ("error", "not_sent", "empty"):
            raise LMCallFailed(answer.reason or "the refutation question got no reply")
        if answer.status == "unparsed":
            raw = answer.raw or ""
            if answer.incomplete:  # stops inside its answer: no answer, whatever a pattern finds
                return RefutationAnswer(question=question, answer="unparsed", raw_answer=raw[:2000],
                                        error=(answer.reason or "").split(": ", 1)[-1][:300])
            match = _ANSWER.search(raw)
            if match:
                found = _EVIDENCE.search(raw)
                return RefutationAnswer(question=question, answer=match.group(1).lower(),
                                        evidence=found.group(1).strip() if found else "")
            return RefutationAnswer(question=question, answer="unparsed", raw_answer=raw[:2000],
                                    error="could not read a yes/no answer")
        fields = answer.fields or {}
        said_answer = str(fields.get("answer")).strip().lower()
        if said_answer not in ("yes", "no"):
            return RefutationAnswer(question=question, answer="unparsed", raw_answer=str(fields.get("answer"))[:2000],
                                    error="the answer is neither yes nor no")
        # our parsers read "Yes, but ..." as yes and name the reservation (`final_answer`)
        named = fields.get("qualified")
        said = named.get("answer") if isinstance(named, dict) else None
        raw_reply = fields.get("raw_reply")
        return RefutationAnswer(question=question, answer=said_answer, evidence=str(fields.get("evidence") or "").strip(),
                                qualified=bool(said),
                                raw_answer=str(raw_reply or f"{said_answer}, {said}")[:2000] if said else None)

    def record(self, label: VerdictLabel, questions: list[str], dropped: int,
               answers: list[RefutationAnswer] | None) -> PressureTestRecord:
        """The `PressureTestRecord` of a test: "failed" when no usable question was written,
        else "ran" with the first `max_questions` questions' answers (``refuted`` /
        ``moved_to`` are decided by the rules later)."""
        dropped_note = f"dropped {dropped} non-question entr{'y' if dropped == 1 else 'ies'}"
        skipped = f" ({dropped_note})" if dropped else ""
        if not questions:
            return PressureTestRecord(
                status="failed", tested_label=label.name,
                reason=f"the LM wrote no usable refutation question{skipped}; the verdict was not tested",
            )
        notes = [dropped_note] if dropped else []
        if len(questions) > self.max_questions:
            notes.append(f"kept the first {self.max_questions} of {len(questions)} questions written")
        return PressureTestRecord(status="ran", tested_label=label.name, reason="; ".join(notes),
                                  questions=list(answers or []))

    def kept(self, questions: list[str]) -> list[str]:
        """The drafted questions that are asked: the first `max_questions`."""
        return questions[: self.max_questions]

    def forward(self, input: str, output: str, evidence: list[EvidenceLine], label: VerdictLabel) -> dspy.Prediction:
        """Test `label`.

        Returns:
            `dspy.Prediction` with ``record``: a `PressureTestRecord` with status "ran"
            (questions answered; ``refuted`` / ``moved_to`` still unset) or "failed"
            (no usable question was written). Entries not ending in "?" (labels,
            fragments cut by the token cap) are dropped and counted in ``reason``.

        Raises:
            LMCallFailed: an LM call failed.
        """
        draft_sender = engine_sender(None, lm=self.draft.lm)
        questions, dropped = self.read_draft(draft_sender.answer(self.draft_call(input, output, evidence, label)))
        sender = engine_sender(None, lm=self.answer.lm)
        answers = [self.read_answer(q, sender.answer(self.answer_call(input, output, q, i)))
                   for i, q in enumerate(self.kept(questions), start=1)]
        return dspy.Prediction(record=self.record(label, questions, dropped, answers))

    async def aforward(self, input: str, output: str, evidence: list[EvidenceLine],
                       label: VerdictLabel) -> dspy.Prediction:
        """`forward` for async programs (``await pressure_test.acall(...)``): the same record,
        with the refutation questions answered together (``asyncio.gather``)."""
        draft_sender = engine_sender(None, lm=self.draft.lm)
        questions, dropped = self.read_draft(await aanswer(draft_sender, self.draft_call(input, output, evidence,
                                                                                           label)))
        sender = engine_sender(None, lm=self.answer.lm)
        kept = self.kept(questions)
        replies = await asyncio.gather(*(aanswer(sender, self.answer_call(input, output, q, i))
                                         for i, q in enumerate(kept, start=1)))
        answers = [self.read_answer(q, reply) for q, reply in zip(kept, replies)]
        return dspy.Prediction(record=self.record(label, questions, dropped, answers))

"""LabelPicker: the LM names one declared verdict label from the evidence; outsiders are retried, then reported."""

from __future__ import annotations

import re
from typing import Literal

import dspy

from binaryeval_dspy.engines.base import engine_sender
from binaryeval_dspy.engines.in_process import aanswer
from binaryeval_dspy.errors import ConfigError, LMCallFailed
from binaryeval_dspy.lm.calls import Answer, LMCall
from binaryeval_dspy.lm.evaluated_text import as_evaluated_text
from binaryeval_dspy.lm.verdict_text import normalize_label, reservation
from binaryeval_dspy.schemas.named_verdict import LabelAttempt
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.verdict import QuestionVerdict
from binaryeval_dspy.schemas.verdict_policy import VerdictPolicy
from binaryeval_dspy.signatures.verdict_pick import (
    EvidenceLine,
    LabelOption,
    PickVerdictLabel,
    label_feedback,
)


def _raw_field(raw: str, name: str) -> str | None:
    """A field's string value from an unparseable reply (JSON or ``[[ ## name ## ]]`` form).

    The last occurrence wins: an earlier one may be a block the judge quoted from the output.
    """
    for pattern in (rf'"{name}"\s*:\s*"((?:[^"\\]|\\.)*)"', rf"\[\[\s*##\s*{name}\s*##\s*\]\]\s*(.*?)(?:\[\[|$)"):
        matches = re.findall(pattern, raw or "", re.DOTALL)
        if matches:
            return matches[-1].strip()
    return None


def evidence_lines(verdicts: list[QuestionVerdict], question_set: QuestionSet) -> list[EvidenceLine]:
    """Every binary answer as the picker sees it, in question-set order."""
    by_id = {v.question_id: v for v in verdicts}
    lines = []
    for q in question_set.questions:
        v = by_id.get(q.id)
        if v is None:
            continue
        detail = v.explanation or (v.error or "")
        lines.append(EvidenceLine(
            question_id=q.id, question=q.text, answer=v.verdict, detail=detail,
            answered_by="code" if v.source == "code" else "reviewer", fatal=q.fatal,
        ))
    return lines


class LabelPicker(dspy.Module):
    """Ask the LM for exactly one declared label, holistically, from the evidence.

    The output field's type is narrowed to the declared names, so adapters reject
    anything else and schema-constrained decoding (llama.cpp) cannot produce it. A
    reply naming a declared label up to case and surrounding spaces is accepted as
    that label. Anything else is retried once with a note saying what was wrong; a
    second miss leaves the label None, with every attempt recorded. Never a default.

    Args:
        policy: the declared labels.
        max_attempts: tries in all (default 2: one retry).

    Raises:
        ConfigError: `max_attempts` < 1 (also a ValueError).
    """

    def __init__(self, policy: VerdictPolicy, *, max_attempts: int = 2) -> None:
        super().__init__()
        if max_attempts < 1:
            raise ConfigError("bad max_attempts", expected="an integer >= 1", received=repr(max_attempts),
                              fix="pass max_attempts=2 (the default).")
        self.policy = policy
        self.max_attempts = max_attempts
        names = tuple(policy.names)
        self.pick = dspy.Predict(PickVerdictLabel.with_updated_fields("label", type_=Literal[names]))

    def options(self) -> list[LabelOption]:
        """The declared labels as shown to the LM."""
        return [LabelOption(name=x.name, meaning=x.meaning, action=x.action, passes=x.is_pass)
                for x in self.policy.labels]

    def pick_call(self, input: str, output: str, evidence: list[EvidenceLine], *, attempt: int = 1,
                  feedback: str = "") -> LMCall:
        """The `LMCall` of one try (``pick-<attempt>``): the evidence, the declared labels and,
        after a miss, the feedback saying what was wrong."""
        return LMCall(key=f"pick-{attempt}", signature=self.pick.signature,
                      inputs={"input": as_evaluated_text(input), "output": as_evaluated_text(output),
                              "evidence": evidence, "allowed_labels": self.options(), "feedback": feedback},
                      demos=tuple(self.pick.demos or ()), config=dict(self.pick.config or {}))

    def read_pick(self, answer: Answer) -> tuple[LabelAttempt, str | None, str, str]:
        """One try's answer read: ``(attempt record, matched label or None, reason, feedback for
        the next try)``. A label outside the declared set, or no label at all, is a miss.

        Raises:
            LMCallFailed: the call failed (no reply): the item's label is not decided.
        """
        names = self.policy.names
        if answer.status in ("error", "not_sent", "empty"):
            raise LMCallFailed(answer.reason or "the label pick got no reply")
        said = None  # a reservation after the label ("pass, but ...")
        if answer.status == "unparsed":
            raw = answer.raw or ""
            # a reply that stops inside its answer has no label, whatever a pattern finds in it
            raw_label = None if answer.incomplete else _raw_field(raw, "label")
            reason = _raw_field(raw, "reason") or ""
            if raw_label is None:
                why = ((answer.reason or "").split(": ", 1)[-1][:300] if answer.incomplete
                       else "no label could be read from the reply")
                return (LabelAttempt(raw=raw[:500], accepted=False, error=why), None, "",
                        label_feedback(raw[:80], names))
            said = reservation(raw_label, names)
        else:
            fields = answer.fields or {}
            raw_label, reason = str(fields.get("label")), str(fields.get("reason", "") or "")
            named = fields.get("qualified")
            said = (named.get("label") if isinstance(named, dict) else None) or reservation(raw_label, names)
            written = fields.get("as_written")  # the label as the LM wrote it ("keep")
            if not said and isinstance(written, dict) and written.get("label"):
                raw_label = written["label"]
        matched = self.policy.match(raw_label) or (self.policy.match(normalize_label(raw_label, names) or "")
                                                   if said else None)
        if matched is not None:
            return (LabelAttempt(raw=f"{matched}, {said}"[:500] if said else raw_label, accepted=True,
                                 qualified=bool(said)), matched, reason.strip(), "")
        return (LabelAttempt(raw=raw_label[:500], accepted=False,
                             error=f"'{raw_label[:80]}' is not a declared label {names}"), None, "",
                label_feedback(raw_label[:80], names))

    def forward(self, input: str, output: str, evidence: list[EvidenceLine]) -> dspy.Prediction:
        """Pick a label.

        Returns:
            `dspy.Prediction` with ``label`` (a declared name, or None after
            `max_attempts` misses), ``reason`` (str) and ``attempts`` (list of
            `LabelAttempt`).

        Raises:
            LMCallFailed: an LM call failed (the item is retried on rerun).
        """
        sender = engine_sender(None, lm=self.pick.lm)
        attempts: list[LabelAttempt] = []
        feedback = ""
        for number in range(1, self.max_attempts + 1):
            attempt, matched, reason, feedback = self.read_pick(
                sender.answer(self.pick_call(input, output, evidence, attempt=number, feedback=feedback)))
            attempts.append(attempt)
            if matched is not None:
                return dspy.Prediction(label=matched, reason=reason, attempts=attempts)
        return dspy.Prediction(label=None, reason="", attempts=attempts)

    async def aforward(self, input: str, output: str, evidence: list[EvidenceLine]) -> dspy.Prediction:
        """`forward` for async programs (``await picker.acall(...)``): the same result. A retry
        quotes the previous miss, so attempts are made one after the other."""
        sender = engine_sender(None, lm=self.pick.lm)
        attempts: list[LabelAttempt] = []
        feedback = ""
        for number in range(1, self.max_attempts + 1):
            attempt, matched, reason, feedback = self.read_pick(
                await aanswer(sender, self.pick_call(input, output, evidence, attempt=number, feedback=feedback)))
            attempts.append(attempt)
            if matched is not None:
                return dspy.Prediction(label=matched, reason=reason, attempts=attempts)
        return dspy.Prediction(label=None, reason="", attempts=attempts)

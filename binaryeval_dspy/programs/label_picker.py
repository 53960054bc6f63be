"""LabelPicker: the LM names one declared verdict label from the evidence; outsiders are retried, then reported."""

from __future__ import annotations

import re
from typing import Literal

import dspy
from dspy.utils.exceptions import AdapterParseError

from binaryeval_dspy.errors import ConfigError
from binaryeval_dspy.lm.adapters import PredictorCalls, arun_predictor_calls, run_predictor_calls
from binaryeval_dspy.lm.evaluated_text import as_evaluated_text
from binaryeval_dspy.lm.final_answer import is_incomplete_reply
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

    def forward(self, input: str, output: str, evidence: list[EvidenceLine]) -> dspy.Prediction:
        """Pick a label.

        Returns:
            `dspy.Prediction` with ``label`` (a declared name, or None after
            `max_attempts` misses), ``reason`` (str) and ``attempts`` (list of
            `LabelAttempt`). LM transport errors propagate (the item is retried on rerun).
        """
        return run_predictor_calls(self._pick_calls(input, output, evidence))

    async def aforward(self, input: str, output: str, evidence: list[EvidenceLine]) -> dspy.Prediction:
        """`forward` for async programs (``await picker.acall(...)``): the same result. A retry
        quotes the previous miss, so attempts are made one after the other."""
        return await arun_predictor_calls(self._pick_calls(input, output, evidence))

    def _pick_calls(self, input: str, output: str, evidence: list[EvidenceLine]) -> PredictorCalls:
        """`forward`'s attempts as predictor calls (`binaryeval_dspy.lm.adapters.PredictorCalls`)."""
        names = self.policy.names
        attempts: list[LabelAttempt] = []
        feedback = ""
        for _ in range(self.max_attempts):
            said = None  # a reservation after the label ("pass, but ...")
            pred = yield self.pick, {"input": as_evaluated_text(input), "output": as_evaluated_text(output),
                                     "evidence": evidence, "allowed_labels": self.options(), "feedback": feedback}
            if isinstance(pred, AdapterParseError):
                raw = str(pred.lm_response or "")
                # a reply that stops inside its answer has no label, whatever a pattern finds in it
                raw_label = None if is_incomplete_reply(pred) else _raw_field(raw, "label")
                reason = _raw_field(raw, "reason") or ""
                if raw_label is None:
                    why = (str(pred.message).splitlines()[0][:300] if is_incomplete_reply(pred)
                           else "no label could be read from the reply")
                    attempts.append(LabelAttempt(raw=raw[:500], accepted=False, error=why))
                    feedback = label_feedback(raw[:80], names)
                    continue
                said = reservation(raw_label, names)
            else:
                raw_label, reason = str(pred.label), str(getattr(pred, "reason", "") or "")
                named = getattr(pred, "qualified", None)
                said = (named.get("label") if isinstance(named, dict) else None) or reservation(raw_label, names)
                written = getattr(pred, "as_written", None)  # the label as the LM wrote it ("keep")
                if not said and isinstance(written, dict) and written.get("label"):
                    raw_label = written["label"]
            matched = self.policy.match(raw_label) or (self.policy.match(normalize_label(raw_label, names) or "")
                                                       if said else None)
            if matched is not None:
                attempts.append(LabelAttempt(raw=f"{matched}, {said}"[:500] if said else raw_label, accepted=True,
                                             qualified=bool(said)))
                return dspy.Prediction(label=matched, reason=reason.strip(), attempts=attempts)
            attempts.append(LabelAttempt(raw=raw_label[:500], accepted=False,
                                         error=f"'{raw_label[:80]}' is not a declared label {names}"))
            feedback = label_feedback(raw_label[:80], names)
        return dspy.Prediction(label=None, reason="", attempts=attempts)

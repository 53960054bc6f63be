"""The UniEval-style judge: one yes/no question per dimension, scored by P(yes).

A baseline for meta-evaluation on the same LM as BinEval (paper Tables 1, 7, 8:
"UniEval (gpt-oss)"): where BinEval asks many binary questions per dimension, this asks
exactly one, as UniEval (Zhong et al., 2022) does with its T5 model. The score is
P(yes) among {yes, no} when the LM returns log-probabilities, read at the answer's
position in a JSON or a DSPy chat-format reply; else 1 for yes and 0 for no, recorded as
a fallback with its reason (or no score when log-probabilities are required,
``logprobs="on"``).

The answer field is read by `binaryeval_dspy.lm.verdict_text.normalize_yes_no`, whatever
DSPy adapter produced it: ``Yes.``, ``**Yes**``, ``YES``, ``No, because ...`` and
``No - ...`` are answers; hedges (``yes and no``, ``partly``, ``it depends``) and replies
giving both verdicts are unparsed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dspy

from binaryeval_dspy.lm.evaluated_text import as_evaluated_text
from binaryeval_dspy.lm.verdict_text import normalize_yes_no, reservation
from binaryeval_dspy.programs.rubric_judge import UNPARSED, FieldQuestion, FieldReply, LogprobMode, RubricJudge
from binaryeval_dspy.schemas.rubric import Rubric
from binaryeval_dspy.signatures.dimension_question import (
    AnswerDimensionQuestion,
    AnswerDimensionQuestionText,
)


class UniEvalJudge(RubricJudge):
    """Single-question judge: the rubric's yes/no question per dimension -> P(yes).

    Args:
        rubric: gives each dimension's question.
        dimensions: dimensions to score (default: every rubric dimension).
        logprobs: ``auto`` / ``on`` (alias ``require``) / ``off``, as in `RubricJudge`.
        top_logprobs: alternatives requested per token.

    ``forward(input, output)`` returns ``dspy.Prediction(scores, details)``:
    ``scores[d]`` = P(yes) in [0, 1] (or 1.0 / 0.0 as a recorded fallback; None when
    unparsed, or log-probabilities were required and unusable) and ``details[d]`` with
    ``answer`` (``"yes"`` / ``"no"``, or None when unparsed), ``p_yes`` (or None),
    ``source`` (``"p_yes"`` / ``"answer"``), ``score_source`` (``"logprobs"`` /
    ``"fallback"`` / None), ``fallback_reason``, ``value_format``, ``status``
    (``"scored"``, ``"unparsed"``, ``"unscored"``), ``reply`` (the answer field as the
    judge wrote it, or the whole reply when unreadable) and ``error``; ``qualified`` True
    when the answer came with a reservation (``"Yes, but ..."``, see
    `binaryeval_dspy.lm.verdict_text.reservation`), absent otherwise.
    """

    def __init__(self, rubric: Rubric, *, dimensions: Sequence[str] | None = None,
                 logprobs: LogprobMode = "auto", top_logprobs: int = 20) -> None:
        super().__init__(rubric, dimensions=dimensions, logprobs=logprobs, top_logprobs=top_logprobs)
        # the answer typed as Literal["yes", "no"] (schema-constrained replies) and as text
        # (every other reply), see `RubricJudge.ask_field`
        self.ask = dspy.Predict(AnswerDimensionQuestion)
        self.ask_text = dspy.Predict(AnswerDimensionQuestionText)

    def answer(self, input: str, output: str, dimension: str) -> dict[str, Any]:
        """Ask one dimension's question; returns the ``details`` entry (with ``score``).

        The answer field's text is read by `normalize_yes_no`; a hedge, both verdicts or
        no verdict is unparsed (no score, status ``"unparsed"``, the text kept in ``reply``).
        """
        return self.score_dimension(input, output, dimension)

    def dimension_question(self, input: str, output: str, dimension: str) -> FieldQuestion:
        """The rubric's yes/no question of one dimension."""
        return FieldQuestion(self.ask, self.ask_text, "answer", {
            "input": as_evaluated_text(input), "output": as_evaluated_text(output),
            "question": self.rubric.dimension(dimension).question})

    def read_dimension(self, dimension: str, reply: FieldReply) -> dict[str, Any]:
        """The ``details`` entry of one dimension's answer (see `answer`)."""
        entry: dict[str, Any] = {"answer": None, "p_yes": None, "source": None}
        if reply.text is None:
            return self.unread(UNPARSED, reply.reply, reply.error or "unparsed", entry)
        answer = normalize_yes_no(reply.text)
        if answer is None:
            return self.unread(UNPARSED, reply.reply,
                               f"unparsed: neither a clear yes nor a clear no: {reply.text[:200]!r}", entry)
        entry["answer"] = answer
        located = self.read_value(reply.pred, "answer", ["yes", "no"])
        entry = self.sourced(located, answer, lambda dist: dist["yes"], 1.0 if answer == "yes" else 0.0, entry)
        entry["p_yes"] = entry["score"] if entry["score_source"] == "logprobs" else None
        entry["source"] = {"logprobs": "p_yes", "fallback": "answer"}.get(entry["score_source"])
        entry["reply"] = reply.reply
        named = getattr(reply.pred, "qualified", None) if reply.pred is not None else None
        if (isinstance(named, dict) and named.get("answer")) or reservation(reply.text):
            entry["qualified"] = True  # "Yes, but ...": scored as the answer named, never a plain one
        return entry

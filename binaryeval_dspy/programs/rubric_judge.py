"""The shared shell of the single-call baselines: a rubric, a set of dimensions, log-probabilities.

`GEvalJudge` and `UniEvalJudge` differ only in what they ask per dimension and how they
turn the answer into a score; this base class holds the rest: argument checks, asking
for token log-probabilities (on every LM, embedded or remote, unless they are off),
reading the value's distribution in whatever format the reply came (JSON, DSPy chat
format), and recording per dimension where each score came from, so that a score read
from the plain answer instead of the log-probabilities is never silent:

- ``score_source``: ``"logprobs"`` (the probability-weighted score of G-Eval, Liu et
  al., 2023, or P(yes) of UniEval, Zhong et al., 2022), ``"fallback"`` (the plain
  answer: integer or 1/0), or None (no score: unparsed answer, or log-probabilities
  required and unusable);
- ``fallback_reason``: why the log-probabilities were not used (`FALLBACK_REASONS`,
  e.g. ``"no logprobs returned"``, ``"value not located"``), None when they were;
- ``value_format``: how the value was located in the reply (``"json"`` / ``"chat"``);
- ``status``: the outcome of the dimension (`OUTCOMES`): ``"scored"``, ``"unparsed"``
  (no answer could be read), ``"out_of_range"`` (G-Eval-style: a number outside the
  rubric's scale, never clamped and never a score) or ``"unscored"`` (an answer was read
  but log-probabilities were required and unusable);
- ``reply``: what the judge wrote: the answer field's text as written, or the whole
  reply when no field could be read (cut to `REPLY_LIMIT` characters).

Which signature is asked depends on the reply format. When the active adapter is a
`dspy.JSONAdapter` and the LM takes a JSON schema (`schema_constrained`), the answer is
typed as the allowed values (integers on the scale, ``Literal["yes", "no"]``) so that
grammar-constrained decoding keeps it on them; a reply that still does not match is read
again from its text with the text-typed signature (no second LM call). Otherwise
(ChatAdapter, JSON without a schema) the answer is typed as text and read by our own
parsers (`geval.read_score`, `verdict_text.normalize_yes_no`), whatever DSPy adapter
produced it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import dspy

from binaryeval_dspy.engines.in_process import arun_in_process, run_in_process
from binaryeval_dspy.errors import ConfigError, InputError, LMCallFailed
from binaryeval_dspy.lm.adapters import schema_support
from binaryeval_dspy.lm.calls import Answer, LMCall
from binaryeval_dspy.lm.logprobs import (
    NO_ALLOWED_VALUE,
    NO_ALTERNATIVES,
    NO_LOGPROBS,
    NOT_LOCATED,
    ValueDistribution,
)
from binaryeval_dspy.schemas.rubric import Rubric

logger = logging.getLogger(__name__)

LogprobMode = Literal["auto", "on", "require", "off"]
LOGPROB_MODES = ("auto", "on", "require", "off")

# Reasons recorded in ``details[d]["fallback_reason"]`` (besides those of `locate_value`).
LOGPROBS_OFF = "log-probabilities off"
LOGPROBS_REFUSED = "the LM refused log-probabilities"
VALUE_MISMATCH = "the located value is not the parsed answer"
ANSWER_NOT_LEADING = "the answer does not start the field's value"  # "Score: 3", "**Yes**"
NON_INTEGER_ANSWER = "a non-integer answer has no distribution over the scale's values"  # "4.5"
OFF_SCHEMA_REPLY = "the reply did not match the output schema (read from its text)"
FALLBACK_REASONS = (NO_LOGPROBS, NOT_LOCATED, NO_ALTERNATIVES, NO_ALLOWED_VALUE, VALUE_MISMATCH,
                    ANSWER_NOT_LEADING, NON_INTEGER_ANSWER, OFF_SCHEMA_REPLY, LOGPROBS_REFUSED, LOGPROBS_OFF)

# Outcomes recorded in ``details[d]["status"]``.
SCORED = "scored"
UNPARSED = "unparsed"
OUT_OF_RANGE = "out_of_range"
UNSCORED = "unscored"
OUTCOMES = (SCORED, UNPARSED, OUT_OF_RANGE, UNSCORED)

REPLY_LIMIT = 1000  # characters of the judge's reply kept in ``details[d]["reply"]``


def logprob_config(top_logprobs: int) -> dict[str, Any]:
    """The DSPy call config asking for token log-probabilities with `top_logprobs` alternatives."""
    return {"logprobs": True, "top_logprobs": top_logprobs}


def logprobs_unsupported(exc: Exception) -> bool:
    """True when an LM error says the provider cannot return log-probabilities."""
    return "logprob" in str(exc).lower()


def schema_constrained() -> bool:
    """True when the active DSPy adapter sends the output fields' JSON schema to the active LM.

    That is a `dspy.JSONAdapter` (or subclass) and an LM that declares schema support
    (`binaryeval_dspy.lm.adapters.schema_support`): its reply is decoded under the
    schema, so typed fields (integers on the scale, ``Literal["yes", "no"]``) constrain
    it. False for a ChatAdapter, DSPy's default adapter, or JSON without a schema.
    """
    adapter, lm = dspy.settings.adapter, dspy.settings.lm
    return isinstance(adapter, dspy.JSONAdapter) and lm is not None and schema_support(lm)


@dataclass(frozen=True)
class FieldReply:
    """One answer field as the judge wrote it (`RubricJudge.ask_field`).

    Attributes:
        text: the field's value as text (a JSON number or a typed value through ``str``),
            or None when no field could be read from the reply.
        pred: the call's `Answer` (its value distribution read from the log-probabilities),
            or None when the field was read again from the raw reply after the typed parse
            failed.
        reply: what to keep as ``details[d]["reply"]``: the field's text, or the whole
            reply when no field could be read (cut to `REPLY_LIMIT`).
        error: why no field could be read (None when `text` is set).
    """

    text: str | None
    pred: Answer | None
    reply: str | None
    error: str | None = None


@dataclass
class RubricItem:
    """One item's state for a rubric baseline (`RubricJudge.begin`).

    Attributes:
        input, output: the texts scored.
        constrained: replies are schema-constrained (`schema_constrained`, decided once).
        details: dimension -> its ``details`` entry, as each answer comes.
        failure: a call that failed (no reply): the item could not be scored.
    """

    input: str
    output: str
    constrained: bool
    details: dict[str, dict[str, Any]] = field(default_factory=dict)
    failure: BaseException | None = None


class RubricJudge(dspy.Module):
    """Base of the rubric baselines: one LM call per dimension, scores in [0, 1] or None.

    Args:
        rubric: per-dimension criterion, steps, question and rating scale.
        dimensions: dimensions to score (default: every rubric dimension).
        logprobs: ``auto`` asks every LM for log-probabilities, scores from them when
            they can be read and otherwise falls back to the plain answer, recording the
            fallback and its reason (and stops asking for the rest of the run once the LM
            refuses them); ``on`` (alias ``require``) always asks and never falls back: a
            dimension whose log-probabilities cannot be read is unscored (score None,
            with the reason in ``error``), and a refusal is an error; ``off`` never asks
            (every score is a recorded fallback).
        top_logprobs: alternatives per token requested (20 is the usual provider cap).

    Raises:
        ConfigError: `logprobs` is not auto / on / require / off.
        InputError: a dimension is not in the rubric.

    Subclasses implement `score_dimension(input, output, dimension)`, returning the
    ``details`` entry of one dimension with its ``score`` (in [0, 1] or None).
    """

    def __init__(self, rubric: Rubric, *, dimensions: Sequence[str] | None = None,
                 logprobs: LogprobMode = "auto", top_logprobs: int = 20) -> None:
        super().__init__()
        if logprobs not in LOGPROB_MODES:
            raise ConfigError("bad logprobs", expected="'auto', 'on' (or 'require') or 'off'", received=repr(logprobs),
                              fix="pass logprobs='auto' (use log-probabilities when the LM returns them).")
        self.rubric = rubric
        self.dimensions = list(dimensions or rubric.dimensions)
        for d in self.dimensions:
            rubric.dimension(d)
        self.logprobs: LogprobMode = "on" if logprobs == "require" else logprobs
        self.top_logprobs = top_logprobs

    def field_call(self, key: str, strict: dspy.Predict, loose: dspy.Predict, field: str, keys: list[str],
                   constrained: bool, **inputs: Any) -> LMCall:
        """The `LMCall` asking one dimension's question (`key`): the strict predictor's signature
        when replies are schema-constrained, else the loose one's; log-probabilities asked
        unless off (required in ``on`` mode), and `field`'s distribution over `keys` read."""
        predictor = strict if constrained else loose
        config = dict(predictor.config or {})
        if self.logprobs != "off":
            config.update(logprob_config(self.top_logprobs))
        return LMCall(key=key, signature=predictor.signature, inputs=inputs, demos=tuple(predictor.demos or ()),
                      config=config, distribution=(field, tuple(keys)), logprobs_required=self.logprobs == "on")

    @property
    def logprobs_required(self) -> bool:
        """True in ``on`` / ``require`` mode: a score must come from the log-probabilities."""
        return self.logprobs == "on"

    def field_reply(self, answer: Answer, loose: dspy.Predict, field: str, constrained: bool) -> FieldReply:
        """The answer `field` of one call as the judge wrote it.

        Returns:
            A `FieldReply`. When the strict reply does not parse (an endpoint that takes
            the schema but does not enforce it), the same reply is parsed again by the
            active adapter with `loose`'s signature: no second LM call, but no
            log-probabilities either (``pred`` None). When no field can be read at all,
            ``text`` is None and ``error`` says why.

        Raises:
            LMCallFailed: the call failed (no reply): the item is retried by a rerun.
        """
        if answer.status in ("error", "not_sent"):
            raise LMCallFailed(answer.reason or "the LM call failed")
        if answer.status in ("unparsed", "empty"):
            response = answer.raw or ""
            if constrained and response:
                try:
                    parsed = dspy.settings.adapter.parse(loose.signature, response)
                except Exception:  # noqa: BLE001 - not readable as text either: unparsed below
                    parsed = {}
                value = parsed.get(field) if isinstance(parsed, dict) else None
                if value is not None:
                    text = str(value)
                    return FieldReply(text, None, text[:REPLY_LIMIT])
            return FieldReply(None, None, response[:REPLY_LIMIT], f"unparsed: {response[:200]}")
        value = (answer.fields or {}).get(field)
        if value is None:
            return FieldReply(None, None, None, f"unparsed: no {field!r} field in the reply")
        text = str(value)
        return FieldReply(text, answer, text[:REPLY_LIMIT])

    def read_value(self, pred: Answer | None, field: str, keys: list[str], *,
                   unusable: str | None = None) -> ValueDistribution:
        """`field`'s value as located in the call's log-probabilities (any reply format).

        Args:
            pred: the call's answer, or None when the answer was read again from the raw
                reply (then `unusable` should say so).
            field: the answer field.
            keys: the allowed values as text.
            unusable: a fallback reason known before looking (e.g. `NON_INTEGER_ANSWER`,
                `OFF_SCHEMA_REPLY`); log-probabilities off take precedence over it.

        Returns a `ValueDistribution`; without a distribution its ``reason`` says why
        (log-probabilities off or refused, `unusable`, or a `locate_value` reason).
        """
        if self.logprobs == "off":
            return ValueDistribution(None, reason=LOGPROBS_OFF)
        if unusable is not None or pred is None:
            return ValueDistribution(None, reason=unusable or OFF_SCHEMA_REPLY)
        found = pred.located or {"reason": NO_LOGPROBS}
        located = ValueDistribution(pred.distribution, format=found.get("format"), chosen=found.get("chosen"),
                                    reason=found.get("reason"))
        if located.reason == NO_LOGPROBS and pred.logprobs_refused:
            return ValueDistribution(None, reason=LOGPROBS_REFUSED)
        return located

    def sourced(self, located: ValueDistribution, answer: str, from_logprobs: Any,
                plain_score: float, entry: dict[str, Any]) -> dict[str, Any]:
        """Complete a dimension's ``details`` entry with its score and where it came from.

        Args:
            located: the value's distribution (`read_value`).
            answer: the parsed answer as text (compared with the located value).
            from_logprobs: distribution -> score in [0, 1], used when it was read.
            plain_score: the score of the plain answer in [0, 1] (the fallback).
            entry: method-specific fields (``raw``, ``answer``, ...), updated in place.

        Returns:
            `entry` with ``score``, ``score_source``, ``fallback_reason``,
            ``value_format``, ``error`` and ``status`` (``"scored"``, or ``"unscored"``
            when in ``on`` mode a fallback leaves ``score`` None, explained in ``error``).

        The distribution is used only when the token it was read at stands for the
        parsed answer itself: a value that starts with something else (``"Score: 3"``,
        ``"**Yes**"``: `ANSWER_NOT_LEADING`) or with another allowed value
        (`VALUE_MISMATCH`) falls back to the plain answer.
        """
        reason = located.reason
        if located.distribution is not None and located.chosen is None:
            reason = ANSWER_NOT_LEADING  # the alternatives there are not alternatives to the answer
        elif located.distribution is not None and located.chosen != answer:
            reason = VALUE_MISMATCH  # located the wrong occurrence: do not trust it
        entry["value_format"] = located.format
        if reason is None:
            entry.update(score=from_logprobs(located.distribution), score_source="logprobs",
                         fallback_reason=None, error=None)
        elif self.logprobs_required:
            entry.update(score=None, score_source=None, fallback_reason=reason,
                         error=f"log-probabilities required (logprobs='on') but unusable: {reason}; "
                               f"the plain answer {answer!r} was not used")
        else:
            entry.update(score=plain_score, score_source="fallback", fallback_reason=reason, error=None)
        entry["status"] = SCORED if entry["score"] is not None else UNSCORED
        return entry

    @staticmethod
    def unread(status: str, reply: str | None, error: str, entry: dict[str, Any]) -> dict[str, Any]:
        """Complete the ``details`` entry of a dimension without a score.

        Args:
            status: ``"unparsed"`` or ``"out_of_range"``.
            reply: what the judge wrote (kept as ``reply``).
            error: one line saying what was wrong.
            entry: method-specific fields, updated in place.

        Returns:
            `entry` with ``score`` None, no score source, ``status``, ``reply`` and ``error``.
        """
        entry.update(score=None, score_source=None, fallback_reason=None, value_format=None,
                     status=status, reply=reply, error=error)
        return entry

    # ----- the judging plan (`binaryeval_dspy.engines.plan_runner.PlannedProgram`): one call per dimension

    def begin(self, item: Any, previous: Any = ()) -> RubricItem:
        """An item's state (``item``: an Example with ``input`` and ``output``, or a pair).

        Raises:
            InputError: `input` or `output` is empty.
        """
        input, output = item if isinstance(item, tuple) else (item.input, item.output)
        for name, value in (("input", input), ("output", output)):
            if not isinstance(value, str) or not value.strip():
                raise InputError(f"the judge needs a non-empty string, got {value!r:.60}", field=name)
        return RubricItem(input=input, output=output, constrained=schema_constrained())

    def next_calls(self, state: RubricItem) -> list[LMCall]:
        """One call per dimension not yet scored."""
        if state.failure is not None:
            return []
        return [self.dimension_call(state, d) for d in self.dimensions if d not in state.details]

    def take(self, state: RubricItem, call: LMCall, answer: Answer) -> None:
        """Score one dimension from its answer (a failed call fails the item)."""
        try:
            state.details[call.key] = self.read_dimension(state, call.key, answer)
        except LMCallFailed as exc:
            state.failure = exc

    def unsent(self, state: RubricItem, call: LMCall, reason: str) -> None:
        """A dimension never asked: the item is not scored (a rerun retries it)."""
        state.failure = LMCallFailed(f"NotAsked: {reason}")

    def finish(self, state: RubricItem) -> dspy.Prediction:
        """``dspy.Prediction(scores={dimension: float in [0, 1] or None}, details={dimension: dict})``.

        Raises:
            LMCallFailed: a call failed or was never sent.
        """
        if state.failure is not None:
            raise state.failure
        details = {d: dict(state.details[d]) for d in self.dimensions}
        return dspy.Prediction(scores={d: v.pop("score") for d, v in details.items()}, details=details)

    def dimension_call(self, state: RubricItem, dimension: str) -> LMCall:
        """The call scoring one dimension (subclasses)."""
        raise NotImplementedError

    def read_dimension(self, state: RubricItem, dimension: str, answer: Answer) -> dict[str, Any]:
        """One dimension's ``details`` entry from its answer, with ``score`` in [0, 1] or None (subclasses)."""
        raise NotImplementedError

    def forward(self, input: str, output: str) -> dspy.Prediction:
        """Score `output` on every dimension (one LM call each), through DSPy's configured LM.

        Returns:
            ``dspy.Prediction(scores={dimension: float in [0, 1] or None}, details={dimension: dict})``.

        Raises:
            InputError: `input` or `output` is empty.
            LMCallFailed: an LM call failed.
        """
        return run_in_process(self, self.begin((input, output)))

    async def aforward(self, input: str, output: str) -> dspy.Prediction:
        """`forward` for async programs (``await judge.acall(...)``): the same scores, every
        dimension's call in flight together."""
        return await arun_in_process(self, self.begin((input, output)))

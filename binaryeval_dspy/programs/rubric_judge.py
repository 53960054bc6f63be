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

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import dspy
from dspy.utils.exceptions import AdapterParseError

from binaryeval_dspy.errors import ConfigError, InputError
from binaryeval_dspy.lm.adapters import judging_context, schema_support
from binaryeval_dspy.lm.logprobs import (
    NO_ALLOWED_VALUE,
    NO_ALTERNATIVES,
    NO_LOGPROBS,
    NOT_LOCATED,
    ValueDistribution,
    locate_value,
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
        pred: the DSPy prediction (carries ``logprobs``), or None when the field was read
            again from the raw reply after the typed parse failed.
        reply: what to keep as ``details[d]["reply"]``: the field's text, or the whole
            reply when no field could be read (cut to `REPLY_LIMIT`).
        error: why no field could be read (None when `text` is set).
    """

    text: str | None
    pred: dspy.Prediction | None
    reply: str | None
    error: str | None = None


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

    Subclasses implement `dimension_question(input, output, dimension)` (what to ask, a
    `FieldQuestion`) and `read_dimension(dimension, reply)` (the ``details`` entry of one
    dimension with its ``score``, in [0, 1] or None); `forward` asks the dimensions one
    after the other, `aforward` all at once.
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
        self._logprobs_refused = False

    def _call(self, predictor: dspy.Predict, **fields: Any) -> dspy.Prediction:
        """Call `predictor`, with log-probabilities unless they are off or were refused."""
        if self.logprobs == "off" or self._logprobs_refused:
            return predictor(**fields)
        try:
            return predictor(**fields, config=logprob_config(self.top_logprobs))
        except AdapterParseError:
            raise
        except Exception as exc:
            if not self._refused(exc):
                raise
            return predictor(**fields)

    async def _acall(self, predictor: dspy.Predict, **fields: Any) -> dspy.Prediction:
        """`_call` for `aforward` (``predictor.acall``)."""
        if self.logprobs == "off" or self._logprobs_refused:
            return await predictor.acall(**fields)
        try:
            return await predictor.acall(**fields, config=logprob_config(self.top_logprobs))
        except AdapterParseError:
            raise
        except Exception as exc:
            if not self._refused(exc):
                raise
            return await predictor.acall(**fields)

    def _refused(self, exc: Exception) -> bool:
        """Whether `exc` is the LM refusing log-probabilities in ``auto`` mode (then they are not asked again)."""
        if self.logprobs == "auto" and logprobs_unsupported(exc):
            logger.warning("the LM refused log-probabilities (%s); scoring from the answer alone", exc)
            self._logprobs_refused = True
            return True
        return False

    @property
    def logprobs_required(self) -> bool:
        """True in ``on`` / ``require`` mode: a score must come from the log-probabilities."""
        return self.logprobs == "on"

    def ask_field(self, strict: dspy.Predict, loose: dspy.Predict, field: str, **inputs: Any) -> FieldReply:
        """Ask one question and return the answer `field` as the judge wrote it.

        The call goes through the adapter rule (`binaryeval_dspy.lm.adapters.judging_context`):
        the adapter its LM needs, one request per reply, never DSPy's JSON fallback.

        Args:
            strict: the predictor whose `field` is typed as the allowed values, asked when
                the reply is schema-constrained (`schema_constrained`).
            loose: the same predictor with `field` typed as ``str``, asked otherwise.
            field: the answer field (``"score"``, ``"answer"``).
            inputs: the predictor's input fields.

        Returns:
            A `FieldReply`. When the strict reply does not parse (an endpoint that takes
            the schema but does not enforce it), the same reply is parsed again by the
            active adapter with `loose`'s signature: no second LM call, but no
            log-probabilities either (``pred`` None). When no field can be read at all,
            ``text`` is None and ``error`` says why.

        Raises:
            Whatever the LM call raises besides `AdapterParseError`.
        """
        with judging_context(strict.lm):
            constrained = schema_constrained()
            try:
                pred = self._call(strict if constrained else loose, **inputs)
            except AdapterParseError as exc:
                return _reread(exc, constrained, loose, field)
        return _field_reply(pred, field)

    async def aask_field(self, strict: dspy.Predict, loose: dspy.Predict, field: str, **inputs: Any) -> FieldReply:
        """`ask_field` for `aforward`: the same reply, the call awaited (``Predict.acall``)."""
        with judging_context(strict.lm):
            constrained = schema_constrained()
            try:
                pred = await self._acall(strict if constrained else loose, **inputs)
            except AdapterParseError as exc:
                return _reread(exc, constrained, loose, field)
        return _field_reply(pred, field)

    def read_value(self, pred: dspy.Prediction | None, field: str, keys: list[str], *,
                   unusable: str | None = None) -> ValueDistribution:
        """Locate `field`'s value in `pred`'s log-probabilities (any reply format).

        Args:
            pred: the prediction, or None when the answer was read again from the raw
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
        located = locate_value(getattr(pred, "logprobs", None), field, keys)
        if located.reason == NO_LOGPROBS and self._logprobs_refused:
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

    def dimension_question(self, input: str, output: str, dimension: str) -> FieldQuestion:
        """What to ask for one dimension (subclasses implement it)."""
        raise NotImplementedError

    def read_dimension(self, dimension: str, reply: FieldReply) -> dict[str, Any]:
        """One dimension's ``details`` entry from the judge's reply, with ``score`` in [0, 1] or
        None (subclasses implement it)."""
        raise NotImplementedError

    def score_dimension(self, input: str, output: str, dimension: str) -> dict[str, Any]:
        """One dimension's ``details`` entry, with ``score`` in [0, 1] or None (unparsed): one LM call."""
        asked = self.dimension_question(input, output, dimension)
        return self.read_dimension(dimension, self.ask_field(asked.strict, asked.loose, asked.field, **asked.inputs))

    async def ascore_dimension(self, input: str, output: str, dimension: str) -> dict[str, Any]:
        """`score_dimension` for `aforward`: the same entry."""
        asked = self.dimension_question(input, output, dimension)
        reply = await self.aask_field(asked.strict, asked.loose, asked.field, **asked.inputs)
        return self.read_dimension(dimension, reply)

    def forward(self, input: str, output: str) -> dspy.Prediction:
        """Score `output` on every dimension (one LM call each).

        Returns:
            ``dspy.Prediction(scores={dimension: float in [0, 1] or None}, details={dimension: dict})``.

        Raises:
            InputError: `input` or `output` is empty.
        """
        _check_texts(input, output)
        details = {d: self.score_dimension(input, output, d) for d in self.dimensions}
        return _prediction(details)

    async def aforward(self, input: str, output: str) -> dspy.Prediction:
        """`forward` for async programs (``await judge.acall(input=..., output=...)``): the same
        prediction, with every dimension's call in flight together (``asyncio.gather``)."""
        _check_texts(input, output)
        entries = await asyncio.gather(*(self.ascore_dimension(input, output, d) for d in self.dimensions))
        return _prediction(dict(zip(self.dimensions, entries, strict=True)))


@dataclass(frozen=True)
class FieldQuestion:
    """One dimension's question as `RubricJudge.ask_field` asks it.

    Attributes:
        strict: the predictor whose answer field is typed as the allowed values.
        loose: the same predictor with the field typed as text.
        field: the answer field (``"score"``, ``"answer"``).
        inputs: the predictors' input fields.
    """

    strict: dspy.Predict
    loose: dspy.Predict
    field: str
    inputs: dict[str, Any]


def _check_texts(input: str, output: str) -> None:
    for name, value in (("input", input), ("output", output)):
        if not isinstance(value, str) or not value.strip():
            raise InputError(f"the judge needs a non-empty string, got {value!r:.60}", field=name)


def _prediction(details: dict[str, dict[str, Any]]) -> dspy.Prediction:
    return dspy.Prediction(scores={d: v.pop("score") for d, v in details.items()}, details=details)


def _reread(exc: AdapterParseError, constrained: bool, loose: dspy.Predict, field: str) -> FieldReply:
    """The answer field of a reply that did not parse: read again with the text-typed signature
    when the strict one failed (no second LM call), else unread."""
    response = str(exc.lm_response or "")
    if constrained:
        try:
            parsed = dspy.settings.adapter.parse(loose.signature, response)
        except Exception:  # noqa: BLE001 - not readable as text either: unparsed below
            parsed = {}
        value = parsed.get(field) if isinstance(parsed, dict) else None
        if value is not None:
            text = str(value)
            return FieldReply(text, None, text[:REPLY_LIMIT])
    return FieldReply(None, None, response[:REPLY_LIMIT], f"unparsed: {response[:200]}")


def _field_reply(pred: dspy.Prediction, field: str) -> FieldReply:
    value = pred.get(field)
    if value is None:
        return FieldReply(None, None, None, f"unparsed: no {field!r} field in the reply")
    text = str(value)
    return FieldReply(text, pred, text[:REPLY_LIMIT])

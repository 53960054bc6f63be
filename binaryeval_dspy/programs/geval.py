"""The G-Eval-style holistic judge: one score per dimension from criteria and steps.

A baseline for meta-evaluation, run on the same LM as BinEval (paper section 4,
Tables 1, 7, 8: "G-Eval (gpt-oss)"). Following G-Eval (Liu et al., 2023), the score is
the probability-weighted mean over the scale's values when the LM returns token
log-probabilities, read at the score's position in a JSON or a DSPy chat-format reply;
the chosen integer otherwise, recorded as a fallback with its reason (or no score at all
when log-probabilities are required, ``logprobs="on"``).

The judge's answer is read by `read_score` from the score field's text, whatever DSPy
adapter produced it: ``4``, ``Score: 3``, ``3 out of 5``, ``4/5``, ``**4**``, ``4.5``,
``4 - mostly coherent``, ``4 (1 = worst, 5 = best)`` are scores; ``3 or 4``, ``4. Actually
2`` and ``4/10`` on a 1-5 scale are unparsed; a
number outside the rubric's scale (``6``, ``0`` on 1-5) is recorded as ``out_of_range``,
never clamped and never a score.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dspy

from binaryeval_dspy.lm.evaluated_text import as_evaluated_text
from binaryeval_dspy.lm.logprobs import expected_value
from binaryeval_dspy.programs.rubric_judge import (
    NON_INTEGER_ANSWER,
    OUT_OF_RANGE,
    SCORED,
    UNPARSED,
    FieldQuestion,
    FieldReply,
    LogprobMode,
    RubricJudge,
)
from binaryeval_dspy.schemas.rubric import Rubric
from binaryeval_dspy.signatures.holistic_rating import rating_signature, rating_text_signature

# Markdown emphasis and quotes a judge wraps a score or its label in ("**Score:** 3", '"4"').
_DROPPED = str.maketrans("", "", "*_`\"'“”‘’")
_NUMBER = r"[-+]?\d+(?:\.\d+)?"
_LABEL = r"(?:(?:final|overall|my)\s+)?(?:score|rating|grade)\s*(?:is\b|[:=])?\s*"
_HEAD = re.compile(
    rf"^\s*(?:{_LABEL})?(?P<num>{_NUMBER})"
    rf"(?:\s*\(?\s*(?:/|out\s+of\b|of\b)\s*(?P<den>{_NUMBER})\s*\)?)?(?P<rest>.*)$",
    re.IGNORECASE | re.DOTALL)
# What may follow the number: nothing, or a separator before a reason ("4 - mostly coherent").
_REASON_START = re.compile(r"^(?:$|[\s.,;:!?)\]\-–—(])")
# Another number offered next to the first ("3 or 4", "3-4", "3, maybe 4", "3 to 4").
_COMPETING = re.compile(
    r"^[\s.,;:!?)\]\-–—(~]*(?:(?:or|to|and|maybe|perhaps|possibly|probably|either)\b[\s,]*)*[-+]?\d",
    re.IGNORECASE)
# A later labelled score ("Score: 3 ... Final score: 4").
_LATER_LABEL = re.compile(rf"\b(?:score|rating|grade)\s*(?:is\b|[:=])?\s*(?P<num>{_NUMBER})", re.IGNORECASE)
# A numbered list after the first line: the leading number was a list mark, not a score.
_LIST_ITEM = re.compile(r"^\s*\d+[.)]\s", re.MULTILINE)
# A second number offered as a correction ("4. Actually 2", "4, or rather 3", "4 - no, 3").
_CORRECTION = re.compile(
    rf"\b(?:actually|rather|instead|wait|correction|make\s+that|i\s+mean|on\s+second\s+thought|revised?|"
    rf"changed?\s+(?:it\s+)?to|updated?\s+to|no)\b[\s,:;.!\-–—]*(?:(?:it'?s|it\s+is|is|a|an|to|the|final|"
    rf"score|rating|should\s+be|would\s+be|be)\b[\s:=]*)*{_NUMBER}",
    re.IGNORECASE)
# The scale's legend, repeated after the score: its range ("on a scale of 1 to 5", "(1-5)",
# "out of 5", "/5") or its anchors ("(1 = worst, 5 = best)", "where 1 is poor and 5 is
# excellent"). Its numbers must be the scale's own (`_legend_numbers`).
_RANGE_SEP = r"\s*(?:-|–|—|to|through)\s*"
_ANCHOR_WORDS = r"[a-z][a-z'\-]*(?:\s+(?!and\b)[a-z][a-z'\-]*){0,5}"  # up to 6 words, "and" ends them
_ANCHOR = rf"(?P<n{{i}}>\d+)\s*(?:=|:|is|means|being|->|→)\s*(?:the\s+)?{_ANCHOR_WORDS}(?:\s*\([^()]*\))?"
_SCALE_NAMED = (  # legends that say "scale": a mismatch names another scale
    # on a scale (from / of) 1 (worst) to 5 (best); on a range of 1-5
    re.compile(rf"\b(?:on\s+|using\s+)?(?:a|the)?\s*(?:scale|range)\s*(?:of|from|:)?\s*(?P<a>\d+)\s*(?:\([^()]*\))?"
               rf"{_RANGE_SEP}(?P<b>\d+)(?:\s*\([^()]*\))?", re.IGNORECASE),
    # on a 1-5 scale, a 1 to 5 point scale
    re.compile(rf"\b(?:on\s+)?(?:a|the)\s+(?P<a>\d+){_RANGE_SEP}(?P<b>\d+)(?:\s*-?\s*point)?\s+scale\b",
               re.IGNORECASE),
)
_SCALE_BARE = (  # legends without the word: only the scale's own numbers make them one
    re.compile(rf"\(\s*(?P<a>\d+){_RANGE_SEP}(?P<b>\d+)\s*\)", re.IGNORECASE),  # (1-5), (1 to 5)
    re.compile(r"(?:\bout\s+of\s+|(?<![\d\s])\s*/\s*|(?<=\s)/\s*)(?P<b>\d+)\b", re.IGNORECASE),  # out of 5, / 5
)
_ANCHORS = re.compile(
    r"(?:\bwhere\s+|\bwith\s+)?" + _ANCHOR.replace("{i}", "0") + "".join(
        r"(?:\s*(?:[,;]|\band\b|,\s*and\b)\s*" + _ANCHOR.replace("{i}", str(i)) + ")?" for i in range(1, 11)),
    re.IGNORECASE)


def _is_scale(found: re.Match, low: int, high: int) -> bool:
    ends = found.groupdict()
    return int(ends["b"]) == high and (ends.get("a") is None or int(ends["a"]) == low)


def _strip_legends(rest: str, low: int, high: int) -> tuple[str, str | None]:
    """`rest` without the scale's legend repeated after the score, and why the text is
    unreadable when a legend names another scale (``on a scale of 1 to 10`` on 1-5), else None.

    A legend is the scale's range (``on a scale of 1 to 5``, ``on a 1-5 scale``, ``(1-5)``,
    ``out of 5``, ``/ 5``) or its anchors (``(1 = worst, 5 = best)``, ``where 1 is poor and 5
    is excellent``: at least one end of the scale, every number on it). Other numbers stay
    in `rest`, where they compete with the score.
    """
    for pattern in _SCALE_NAMED:
        for found in pattern.finditer(rest):
            if not _is_scale(found, low, high):
                return rest, f"the legend {found.group(0).strip()!r} contradicts the scale {low} to {high}"
        rest = pattern.sub(" ", rest)
    for pattern in _SCALE_BARE:
        rest = pattern.sub(lambda found: " " if _is_scale(found, low, high) else found.group(0), rest)
    for found in list(_ANCHORS.finditer(rest)):
        numbers = {int(v) for v in found.groupdict().values() if v is not None}
        if {low, high} & numbers and all(low <= n <= high for n in numbers):
            rest = rest.replace(found.group(0), " ", 1)
    return rest, None


@dataclass(frozen=True)
class ScoreReading:
    """What `read_score` read from a score field.

    Attributes:
        status: ``"scored"`` (a number on the scale), ``"out_of_range"`` (a number off
            the scale: never clamped, never a score) or ``"unparsed"``.
        value: the number read (int when it is whole, else float); None when unparsed.
        reason: why the text is unparsed (None otherwise).
    """

    status: str
    value: int | float | None = None
    reason: str | None = None


def _number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() else value


def read_score(text: object, low: int, high: int) -> ScoreReading:
    """Read a G-Eval-style score from the score field's text, without another LM call.

    G-Eval (Liu et al., 2023) asks for one integer on a 1-5 scale (form-filling) and
    scores with the probability-weighted mean over the scale's values, a real number in
    [low, high]. Judges write that integer in many ways; this accepts the common ones and
    refuses anything ambiguous.

    Accepted (after dropping markdown emphasis and quotes: ``*``, ``_``, backticks,
    quote marks): a leading number, optionally after a label ``score`` / ``rating`` /
    ``grade`` (optionally ``final`` / ``overall`` / ``my``) and ``:`` / ``=`` / ``is``;
    optionally followed by a denominator ``/ high``, ``out of high`` or ``of high``
    (in parentheses or not), which must equal the scale's top; optionally followed by a
    separator (space, punctuation, dash, parenthesis, line break) and a reason. Examples
    on 1-5: ``4``, ``Score: 3``, ``score = 3``, ``Rating: 4``, ``**4**``, ``3 out of 5``,
    ``4/5``, ``4 / 5``, ``5/5``, ``4 - mostly coherent``, ``"4"``, ``4.0`` (read as 4).

    The scale's legend after the score is not a second number: its range (``on a scale
    of 1 to 5``, ``on a 1-5 scale``, ``(1-5)``, ``out of 5``) or its anchors (``(1 =
    worst, 5 = best)``, ``where 1 is poor and 5 is excellent``, a list ``1 = ..., 2 =
    ..., 5 = ...``: at least one end of the scale, every number on it) is read as the
    legend (``4 (1 = worst, 5 = best)`` is 4). A legend of another scale that says
    "scale" (``on a scale of 1 to 10`` on 1-5) makes the answer unparsed; other
    numbers (``4 (3 = fair)``, ``(1 = worst, 10 = best)``) compete with the score.

    Decimals: rubric scales are integer scales, but the method's own score is a
    continuous mean over them, so a decimal inside the scale (``4.5`` on 1-5) is accepted
    as that value, never rounded; it is scored from the plain answer (its first token
    carries no distribution over the scale's integers). A decimal off the scale is out
    of range like an integer.

    Unparsed: an empty field; text that does not start with a number or a label and a
    number (``I would give it a 4``, ``between 3 and 4``); a denominator other than the
    scale's top (``4/10`` on 1-5 is never rescaled); a second number offered as an
    answer (``3 or 4``, ``3-4``, ``3, 4``, ``3 to 4``, ``3 (maybe 4)``; so is a reason that
    opens with a number, ``4 - 3 errors``: the rule errs towards unparsed); a number
    offered as a correction (``4. Actually 2``, ``4, or rather 3``, ``4 - no, 3``); a later
    labelled score that differs (``Score: 3 ... Final score: 4``); a number glued to other
    characters (``4th``, ``80%``); a numbered list (``1. The summary ...`` then ``2. ...``
    on a later line).

    Args:
        text: the score field's text (a JSON number is read through ``str``; None is
            unparsed).
        low: the scale's lowest value (the rubric's ``rating_scale[0]``).
        high: the scale's highest value.

    Returns:
        A `ScoreReading`: ``scored`` with ``value`` in [low, high] (int, or float for a
        decimal), ``out_of_range`` with the number read (e.g. 6 or 0 on 1-5), or
        ``unparsed`` with a ``reason``. Never raises for any text.
    """
    if text is None:
        return ScoreReading(UNPARSED, reason="empty answer")
    cleaned = str(text).translate(_DROPPED).strip()
    if not cleaned:
        return ScoreReading(UNPARSED, reason="empty answer")
    head = _HEAD.match(cleaned)
    if head is None:
        return ScoreReading(UNPARSED, reason="no leading score")
    rest = head.group("rest")
    if not _REASON_START.match(rest):
        return ScoreReading(UNPARSED, reason="the number runs into other characters")
    rest, wrong_legend = _strip_legends(rest, low, high)
    if wrong_legend:
        return ScoreReading(UNPARSED, reason=wrong_legend)
    if _COMPETING.match(rest):
        return ScoreReading(UNPARSED, reason="two numbers offered as the answer")
    if _CORRECTION.search(rest):
        return ScoreReading(UNPARSED, reason="a second score offered as a correction")
    value = _number(head.group("num"))
    if any(_number(m.group("num")) != value for m in _LATER_LABEL.finditer(rest)):
        return ScoreReading(UNPARSED, reason="two different scores given")
    if "\n" in rest and _LIST_ITEM.search(rest.split("\n", 1)[1]):
        return ScoreReading(UNPARSED, reason="a numbered list, not a score")
    if head.group("den") is not None and _number(head.group("den")) != high:
        return ScoreReading(UNPARSED, reason=f"denominator {head.group('den')} contradicts the scale {low} to {high}")
    if not low <= value <= high:
        return ScoreReading(OUT_OF_RANGE, value)
    return ScoreReading(SCORED, value)


class GEvalJudge(RubricJudge):
    """Holistic judge: criterion + evaluation steps -> one integer score per dimension.

    Args:
        rubric: per-dimension criterion, evaluation steps and rating scale.
        dimensions: dimensions to score (default: every rubric dimension).
        logprobs: ``auto`` asks every LM for log-probabilities and falls back to the
            chosen integer when they cannot be read (recorded); ``on`` (alias
            ``require``) leaves such a dimension unscored; ``off`` never asks. See
            `RubricJudge`.
        top_logprobs: alternatives per token requested (the score's values must be
            among them to be weighted; 20 is the usual provider cap).

    ``forward(input, output)`` returns ``dspy.Prediction(scores, details)``:
    ``scores[d]`` in [0, 1] (the rating mapped affinely from [low, high]; None when the
    answer could not be read, was off the scale, or log-probabilities were required and
    unusable) and ``details[d]`` with ``raw`` (the number read by `read_score`: an int,
    a float for a decimal answer, the off-scale number when out of range; None when
    unparsed), ``distribution`` (value -> probability, or None), ``source``
    (``"expected"`` or ``"integer"``; ``"integer"`` also for a decimal plain answer),
    ``score_source`` (``"logprobs"`` / ``"fallback"`` / None), ``fallback_reason``,
    ``value_format`` (``"json"`` / ``"chat"`` / None), ``status`` (``"scored"``,
    ``"unparsed"``, ``"out_of_range"``, ``"unscored"``), ``reply`` (the score field as
    the judge wrote it, or the whole reply when unreadable) and ``error``.
    """

    def __init__(self, rubric: Rubric, *, dimensions: Sequence[str] | None = None,
                 logprobs: LogprobMode = "auto", top_logprobs: int = 20) -> None:
        super().__init__(rubric, dimensions=dimensions, logprobs=logprobs, top_logprobs=top_logprobs)
        scales = {tuple(rubric.dimension(d).rating_scale) for d in self.dimensions}
        # per scale: the score typed as the scale's integers (schema-constrained replies)
        # and typed as text (every other reply), see `RubricJudge.ask_field`
        self.raters = {f"{lo}_{hi}": dspy.Predict(rating_signature(lo, hi)) for lo, hi in sorted(scales)}
        self.text_raters = {f"{lo}_{hi}": dspy.Predict(rating_text_signature(lo, hi)) for lo, hi in sorted(scales)}

    def rate(self, input: str, output: str, dimension: str) -> dict[str, Any]:
        """Score one dimension; returns the ``details`` entry (with ``score`` in [0, 1] or None).

        The score field's text is read by `read_score`; an unparsed or out-of-range
        answer gets no score (status ``"unparsed"`` / ``"out_of_range"``, the text kept
        in ``reply``).
        """
        return self.score_dimension(input, output, dimension)

    def dimension_question(self, input: str, output: str, dimension: str) -> FieldQuestion:
        """The rating question of one dimension: its criterion, steps and scale."""
        spec = self.rubric.dimension(dimension)
        low, high = spec.rating_scale
        key = f"{low}_{high}"
        return FieldQuestion(self.raters[key], self.text_raters[key], "score", {
            "input": as_evaluated_text(input), "output": as_evaluated_text(output), "criterion": spec.criterion,
            "evaluation_steps": spec.steps_text(), "score_range": f"{low} to {high}"})

    def read_dimension(self, dimension: str, reply: FieldReply) -> dict[str, Any]:
        """The ``details`` entry of one dimension's rating (see `rate`)."""
        low, high = self.rubric.dimension(dimension).rating_scale
        entry: dict[str, Any] = {"raw": None, "distribution": None, "source": None}
        if reply.text is None:
            return self.unread(UNPARSED, reply.reply, reply.error or "unparsed", entry)
        reading = read_score(reply.text, low, high)
        if reading.status == UNPARSED:
            return self.unread(UNPARSED, reply.reply, f"unparsed: {reading.reason}: {reply.text[:200]!r}", entry)
        raw = reading.value
        entry["raw"] = raw
        if reading.status == OUT_OF_RANGE:
            return self.unread(OUT_OF_RANGE, reply.reply,
                               f"out of range: score {raw} is outside the scale [{low}, {high}]", entry)
        keys = [str(v) for v in range(low, high + 1)]
        located = self.read_value(reply.pred, "score", keys,
                                  unusable=None if isinstance(raw, int) else NON_INTEGER_ANSWER)
        entry = self.sourced(located, str(raw), lambda dist: (expected_value(dist) - low) / (high - low),
                             (raw - low) / (high - low), entry)
        entry["distribution"] = located.distribution if entry["score_source"] == "logprobs" else None
        entry["source"] = {"logprobs": "expected", "fallback": "integer"}.get(entry["score_source"])
        entry["reply"] = reply.reply
        return entry

"""Per-item agreement metrics for compiling a BinEval evaluator with any DSPy optimizer.

DSPy optimizers score one example at a time, while Spearman's rho is a property of a
whole set. So these metrics give every optimizer the same per-item signal that the
BinEval optimizer's own failure test uses:

* `HumanAgreementMetric` (public: ``binaryeval_dspy.HumanAgreementMetric``): 1 - mean over
  dimensions of |evaluator yes-rate - normalized human rating|, in [0, 1] (human labels);
* `SourceAgreementMetric`: share of questions answered as the source evaluator did, in
  [0, 1] (cross-model mode).

Both follow DSPy's metric contract (`binaryeval_dspy.programs.metric_contract`): called with
a ``trace`` (bootstrapping demos) they answer ``True`` / ``False`` by ``pass_threshold``;
otherwise they return ``dspy.Prediction(score, scored, status, feedback)`` whose feedback
names the dimensions or questions that went wrong, with explanations (what GEPA reads).
An item the evaluator could not score (no verdict parsed, or its LM calls failed) is not
a zero: it gets the documented fallback ``unscored_score`` (default 0.0, because DSPy's
optimizers need a float) with ``scored=False``, never passes, and is counted in the
metric's `counts()` / `counting()` (`binaryeval_dspy.programs.metric_counts.CountingMetric`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import dspy

from binaryeval_dspy.data import normalized_human_scores
from binaryeval_dspy.errors import BinEvalError
from binaryeval_dspy.programs.metric_contract import checked_pass_threshold, metric_answer
from binaryeval_dspy.programs.metric_counts import CountingMetric, MetricStatus
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.verdict import QuestionVerdict


def unscored_status(verdicts: Sequence[QuestionVerdict]) -> MetricStatus:
    """``failed`` when any of `verdicts` is an LM-call ``error`` (or there are none), else ``unscored``."""
    return "failed" if not verdicts or any(v.verdict == "error" for v in verdicts) else "unscored"


def _unscored(metric: CountingMetric, status: MetricStatus, why: str) -> dspy.Prediction:
    metric._record(status, why)
    score = metric.unscored_score  # type: ignore[attr-defined]
    return dspy.Prediction(score=score, scored=False, status=status,
                           feedback=f"Not scored: {why}. The score {score} is the fallback for an unscored item.")


def _checked_fallback(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BinEvalError(f"unscored_score must be a finite number, got {value!r}")
    return float(value)


class HumanAgreementMetric(CountingMetric):
    """Closeness of a BinEval prediction's dimension scores to the human ratings of the item.

    The metric for compiling an evaluator against human labels with DSPy's optimizers
    (`dspy.MIPROv2`, `dspy.GEPA`, `dspy.SIMBA`, `dspy.COPRO`, `dspy.BootstrapFewShot`): the
    student is a `BinEval`, each training example an item with its input, output and
    ratings, e.g. from `binaryeval_dspy.load_summeval` or `load_scored_items`, which put
    them in ``human``.

    Args:
        question_set: the evaluator's questions (for question text in the feedback).
        dimensions: the dimensions compared (rated by humans and scored by the evaluator).
        human_field: gold field with {dimension: rating}; default ``human``, where every
            loader of this package puts the ratings.
        human_scale: the ratings' [low, high] (SummEval: 1-5).
        unscored_score: fallback score (``scored=False``) of an item on which the
            evaluator scored no dimension; default 0.0.
        pass_threshold: the agreement a bootstrapped demonstration must reach when DSPy
            calls the metric with a ``trace``, in [0, 1]. Default 0.7: a mean gap of at
            most 0.3 between the normalized scores, the paper's failure threshold
            (section 3.4; `BinEvalOptimizer`'s ``threshold``).

    Returns (when called): with a ``trace`` and no ``pred_name``, ``bool`` (passed);
    otherwise ``dspy.Prediction(score, scored, status, feedback)``, ``score`` in [0, 1]
    (1 = the evaluator's yes-rates equal the normalized ratings).

    Raises:
        BinEvalError: `unscored_score` is not a finite number or `pass_threshold` not in [0, 1].
        InputError (when called): the example has no ratings mapping in `human_field`, or
            lacks one of `dimensions` (the message names the field to use).

    Example:
        >>> metric = HumanAgreementMetric(questions, dimensions=questions.dimensions)       # doctest: +SKIP
        >>> compiled = dspy.MIPROv2(metric=metric, auto="light").compile(BinEval(questions),  # doctest: +SKIP
        ...                                                              trainset=items)
    """

    def __init__(self, question_set: QuestionSet, *, dimensions: Sequence[str], human_field: str = "human",
                 human_scale: tuple[float, float] = (1.0, 5.0), unscored_score: float = 0.0,
                 pass_threshold: float = 0.7) -> None:
        self.question_set = question_set
        self.dimensions = list(dimensions)
        self.human_field = human_field
        self.human_scale = human_scale
        self.unscored_score = _checked_fallback(unscored_score)
        self.pass_threshold = checked_pass_threshold(pass_threshold)
        self._init_counts()

    def __call__(self, gold: dspy.Example, pred: Any, trace: Any = None, pred_name: str | None = None,
                 pred_trace: Any = None) -> dspy.Prediction | bool:
        """Score in [0, 1]: 1 - mean |model - human| over the dimensions the evaluator scored
        (``scored=True``); the fallback with ``scored=False`` when it scored none. ``bool``
        (passed) when called with a `trace` and no `pred_name`."""
        return metric_answer(self.result(gold, pred), trace=trace, pred_name=pred_name,
                             pass_threshold=self.pass_threshold)

    def result(self, gold: dspy.Example, pred: Any) -> dspy.Prediction:
        """The full result for one item (never the bool), counted once."""
        human = normalized_human_scores(gold, self.dimensions, field=self.human_field, scale=self.human_scale)
        card = getattr(pred, "score_card", None)
        model = {d: (card.dimension_scores.get(d) if card is not None else None) for d in self.dimensions}
        gaps = {d: model[d] - human[d] for d in self.dimensions if model[d] is not None}
        if not gaps:
            verdicts = list(getattr(pred, "verdicts", None) or [])
            return _unscored(self, unscored_status(verdicts), "no verdict could be parsed, so no dimension was scored")
        score = 1.0 - sum(abs(g) for g in gaps.values()) / len(gaps)
        by_id = {q.id: q for q in self.question_set.questions}
        lines = [f"Agreement with the human ratings: {score:.2f} (1 = identical)."]
        for d, gap in gaps.items():
            word = "too lenient" if gap > 0 else "too strict" if gap < 0 else "exact"
            lines.append(f"{d}: evaluator {model[d]:.2f}, humans {human[d]:.2f} ({word}).")
            if abs(gap) > 0.3:
                wrong = "yes" if gap > 0 else "no"
                for v in getattr(pred, "verdicts", []) or []:
                    q = by_id.get(v.question_id)
                    if q is not None and q.dimension == d and v.verdict == wrong:
                        lines.append(f"  - answered {wrong} to: {q.text} Explanation: {v.explanation}")
        self._record("scored")
        return dspy.Prediction(score=score, scored=True, status="scored", feedback="\n".join(lines))


class SourceAgreementMetric(CountingMetric):
    """Share of questions a BinEval prediction answers as the source evaluator did.

    Args:
        question_set: the evaluator's questions.
        source_verdicts: item id -> the source's verdicts.
        id_field: gold field holding the item id.
        unscored_score: fallback score (``scored=False``) of an item on which no
            question was answered by both evaluators; default 0.0.
        pass_threshold: the agreement a bootstrapped demonstration must reach when DSPy
            calls the metric with a ``trace``, in [0, 1]; default 1.0 (every question
            answered as the source did).

    Returns (when called): with a ``trace`` and no ``pred_name``, ``bool`` (passed);
    otherwise ``dspy.Prediction(score, scored, status, feedback)``.

    Raises:
        BinEvalError: `unscored_score` is not a finite number or `pass_threshold` not in [0, 1].
    """

    def __init__(self, question_set: QuestionSet, source_verdicts: Mapping[str, Sequence[QuestionVerdict]],
                 *, id_field: str = "item_id", unscored_score: float = 0.0, pass_threshold: float = 1.0) -> None:
        self.question_set = question_set
        self.source = {k: {v.question_id: v for v in vs} for k, vs in source_verdicts.items()}
        self.id_field = id_field
        self.unscored_score = _checked_fallback(unscored_score)
        self.pass_threshold = checked_pass_threshold(pass_threshold)
        self._init_counts()

    def __call__(self, gold: dspy.Example, pred: Any, trace: Any = None, pred_name: str | None = None,
                 pred_trace: Any = None) -> dspy.Prediction | bool:
        """Score in [0, 1]: agreeing questions / questions both evaluators answered
        (``scored=True``); the fallback with ``scored=False`` when there are none. ``bool``
        (passed) when called with a `trace` and no `pred_name`."""
        return metric_answer(self.result(gold, pred), trace=trace, pred_name=pred_name,
                             pass_threshold=self.pass_threshold)

    def result(self, gold: dspy.Example, pred: Any) -> dspy.Prediction:
        """The full result for one item (never the bool), counted once."""
        source = self.source.get(str(gold.get(self.id_field)), {})
        by_id = {q.id: q for q in self.question_set.questions}
        agree, total, lines = 0, 0, []
        for v in getattr(pred, "verdicts", []) or []:
            s = source.get(v.question_id)
            if not v.parsed or s is None or not s.parsed:
                continue
            total += 1
            if v.verdict == s.verdict:
                agree += 1
            else:
                q = by_id.get(v.question_id)
                text = q.text if q is not None else v.question_id
                lines.append(f"- {text} You answered {v.verdict} ({v.explanation}); the reference answered "
                             f"{s.verdict} ({s.explanation}).")
        if not total:
            verdicts = list(getattr(pred, "verdicts", None) or [])
            return _unscored(self, unscored_status(verdicts), "no question was answered by both evaluators")
        head = f"Agreed with the reference evaluator on {agree} of {total} questions."
        self._record("scored")
        return dspy.Prediction(score=agree / total, scored=True, status="scored", feedback="\n".join([head, *lines]))


def float_metric(metric: Callable[..., Any]) -> Callable[..., float]:
    """`metric` returning ``float(score)`` whatever the call (its ``result``, never the bool)."""

    def wrapped(gold: dspy.Example, pred: Any, trace: Any = None, pred_name: str | None = None,
                pred_trace: Any = None) -> float:
        full = metric.result(gold, pred) if hasattr(metric, "result") else metric(gold, pred)
        return float(full.score)

    wrapped.__name__ = getattr(metric, "__name__", type(metric).__name__)
    return wrapped

"""Reading a benchmark run back: human scores, each method's scores and its cost.

Everything the report needs comes from the run directory; no LM and no data folder are
touched. Scores are kept normalized to [0, 1] per method (BinEval yes-rates, the
holistic rating mapped from its scale, P(yes), ROUGE-L F) and mapped to each
dimension's human scale for display with `on_human_scale`.

Besides the stored methods, a derived method ``bineval_p_yes`` ("BinEval, P(yes)") is
read from BinEval's own results when they carry soft scores (``score_card.p_yes_scores``:
the mean P(yes) over a dimension's questions): the same calls, scored from the
log-probabilities instead of the yes-rate. For the G-Eval- and UniEval-style baselines,
`ScoreSources` counts how many scores were read from log-probabilities and how many fell
back to the plain answer, and why (``details[d]["score_source"]`` / ``"fallback_reason"``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from binaryeval_dspy.meta_eval.benchmark_files import (
    METHOD_TITLES,
    METHODS,
    BenchmarkRun,
    BenchmarkRunConfig,
)
from binaryeval_dspy.meta_eval.benchmark_spec import BenchmarkSpec, get_benchmark
from binaryeval_dspy.metrics.correlation import (
    DEFAULT_CONSTANT_PREDICTIONS,
    ConstantPredictions,
    check_constant_predictions,
)
from binaryeval_dspy.schemas.item_result import ItemResult
from binaryeval_dspy.schemas.question_set import QuestionSet

if TYPE_CHECKING:
    import pandas as pd

P_YES_METHOD = "bineval_p_yes"
# Methods computed from another method's stored results (no LM calls of their own) -> that method.
DERIVED_METHODS = {P_YES_METHOD: "bineval"}
# Table order: each derived method right after the method it is read from.
ALL_METHODS = tuple(x for m in METHODS for x in (m, *[d for d, src in DERIVED_METHODS.items() if src == m]))
ALL_METHOD_TITLES = {**METHOD_TITLES, P_YES_METHOD: "BinEval, P(yes)"}
LOGPROB_METHODS = ("geval", "unieval")
LEGACY_REASON = "not recorded (result written before score sources were recorded)"
NO_P_YES = "no P(yes) recorded"


@dataclass
class MethodCost:
    """LM cost and wall time of one method over the items it scored.

    Attributes:
        items: items with a stored result.
        lm_calls / prompt_tokens / completion_tokens: summed (cache hits cost nothing).
        cached_prompt_tokens: prompt tokens the provider served from its prompt cache.
        seconds: summed per-item wall time.
        incomplete: items stored with failed LM calls (``error`` verdicts, or status
            ``error``); a rerun asks them again.
        empty_output: items with status ``empty_output`` (no LM call, no score).
        errors: items with status ``error`` (could not be judged, no score).
    """

    items: int = 0
    lm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cached_prompt_tokens: int = 0
    incomplete: int = 0
    empty_output: int = 0
    errors: int = 0

    @property
    def tokens_per_item(self) -> float:
        return (self.prompt_tokens + self.completion_tokens) / self.items if self.items else math.nan

    @property
    def seconds_per_item(self) -> float:
        return self.seconds / self.items if self.items else math.nan

    @property
    def calls_per_item(self) -> float:
        return self.lm_calls / self.items if self.items else math.nan


@dataclass
class ScoreSources:
    """Where one method's scores came from: log-probabilities or the plain-answer fallback.

    Counted per (item, dimension) score for the G-Eval- and UniEval-style baselines, and
    per parsed question verdict for "BinEval, P(yes)".

    Attributes:
        unit: what is counted (``"scores"`` or ``"parsed verdicts"``).
        logprobs: read from log-probabilities (G-Eval's weighted mean, P(yes)).
        fallback: scored from the plain answer (integer, 1/0) instead.
        unscored: left without a score because log-probabilities were required
            (``logprobs="on"``) and could not be read (for "BinEval, P(yes)":
            verdicts without a P(yes), left out of its means).
        unscored_label: how `summary` describes ``unscored``.
        reasons: fallback or unscored reason -> count.
        out_of_range: answers read as a number outside the rubric's scale (G-Eval-style
            ``details[d]["status"] == "out_of_range"``): no score, counted apart from
            unparsed answers and not in `total`.
    """

    unit: str = "scores"
    unscored_label: str = "unscored (log-probabilities required)"
    logprobs: int = 0
    fallback: int = 0
    unscored: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    out_of_range: int = 0

    @property
    def total(self) -> int:
        """logprobs + fallback + unscored (unparsed answers are not counted)."""
        return self.logprobs + self.fallback + self.unscored

    def add(self, source: str | None, reason: str | None) -> None:
        """Count one score: `source` is ``"logprobs"``, ``"fallback"`` or None (unscored)."""
        if source == "logprobs":
            self.logprobs += 1
            return
        if source == "fallback":
            self.fallback += 1
        else:
            self.unscored += 1
        key = reason or "unknown"
        self.reasons[key] = self.reasons.get(key, 0) + 1

    def summary(self) -> str:
        """One line, e.g. ``95 / 100 scores from log-probabilities; 5 fell back to the plain
        answer (no logprobs returned: 3, value not located: 2)``."""
        text = f"{self.logprobs} / {self.total} {self.unit} from log-probabilities"
        if self.fallback:
            text += f"; {self.fallback} fell back to the plain answer"
        if self.unscored:
            text += f"; {self.unscored} {self.unscored_label}"
        if self.reasons:
            text += " (" + ", ".join(f"{r}: {n}" for r, n in sorted(self.reasons.items(), key=lambda x: -x[1])) + ")"
        if self.out_of_range:
            text += f"; {self.out_of_range} answers out of the rubric's range (no score)"
        return text


def detail_source(detail: Any) -> tuple[str | None, str | None] | None:
    """(score_source, fallback_reason) of one baseline ``details[d]`` entry.

    Returns None when the entry holds no score and no log-probability failure (an
    unparsed answer, which is not a score source). Results written before
    ``score_source`` was recorded are read from ``source`` (``expected`` / ``p_yes`` ->
    logprobs; ``integer`` / ``answer`` -> fallback, reason `LEGACY_REASON`).
    """
    if not isinstance(detail, Mapping):
        return None
    if "score_source" in detail:
        source, reason = detail.get("score_source"), detail.get("fallback_reason")
        if source is None and not reason:
            return None
        return source, reason
    legacy = detail.get("source")
    if legacy in ("expected", "p_yes"):
        return "logprobs", None
    if legacy in ("integer", "answer"):
        return "fallback", LEGACY_REASON
    return None


def _card_value(card: Any, name: str) -> Any:
    """A score card field, from a `ScoreCard` or a plain dict (None when absent)."""
    if card is None:
        return None
    return card.get(name) if isinstance(card, Mapping) else getattr(card, name, None)


def bineval_p_yes_scores(result: Any) -> dict[str, float | None] | None:
    """The soft per-dimension scores (mean P(yes)) of a BinEval item result, or None."""
    return _card_value(getattr(result, "score_card", None), "p_yes_scores")


def method_frame(results: Sequence[Any], index: pd.Index, dimensions: Sequence[str],
                 values_of: Callable[[Any], Mapping[str, float | None] | None]) -> tuple[pd.DataFrame, dict[str, int]]:
    """Per-item scores of one method as a frame, and per dimension the stored items without a score.

    Args:
        results: item results (each with ``item_id``).
        index: the selected item ids (rows).
        dimensions: the benchmark's dimensions (columns).
        values_of: result -> dimension -> score in [0, 1] or None (a None mapping counts
            every dimension as missing).

    Returns:
        (frame of floats, NaN when missing; dimension -> count of missing scores). Items
        that were not judged (status ``empty_output`` or ``error``) stay NaN and are not
        counted as missing: `MethodCost` counts them.
    """
    import numpy as np
    import pandas as pd

    frame = pd.DataFrame(index=index, columns=list(dimensions), dtype=float)
    missing = {d: 0 for d in dimensions}
    for r in results:
        if getattr(r, "status", "scored") in ("empty_output", "error"):
            continue  # not judged: counted by MethodCost; an unscored item's scores are missing
        values = values_of(r) or {}
        for d in dimensions:
            v = values.get(d)
            frame.loc[r.item_id, d] = np.nan if v is None else float(v)
            missing[d] += v is None
    return frame, missing


@dataclass
class RunScores:
    """A benchmark run as data frames.

    Attributes:
        spec: the benchmark.
        config: ``benchmark.json``.
        items: one row per selected item: item_id (index), doc_id, system_id, split and
            one column per human dimension.
        scores: method -> frame (index item_id, one column per dimension, values in
            [0, 1], NaN when the method has no score for that item).
        costs: method -> `MethodCost`.
        unparsed: method -> dimension -> items whose score is missing although a
            result is stored (unparsed answers; for "BinEval, P(yes)": no P(yes)).
        score_sources: method -> `ScoreSources` for the methods that read
            log-probabilities (``geval``, ``unieval``, ``bineval_p_yes``).
        bineval_results: BinEval item results (for the question analysis).
        question_set: the question set BinEval used (None if not saved).
        constant_predictions: how the report's summary-level correlations treat a
            document whose method scores are all equal: ``"skip"`` (default, G-Eval's
            and UniEval's scripts) or ``"zero"`` (see `summary_level_correlation`).
        prediction_sets: name -> a user's `PredictionSet` (``bineval agreement``); its
            frame is also in `scores` under the same name, with raw values on the
            file's own scale (not [0, 1]).
        from_run: False when no benchmark run was read (only prediction sets): there
            is no LM, cost or question set.
        items_source: where the items and human scores were read (for the report).
        unreadable: one sentence per results file with lines that gave no result (a
            half-written last line), counting and naming them (`StoredResults.note`).
    """

    spec: BenchmarkSpec
    config: BenchmarkRunConfig
    items: pd.DataFrame
    scores: dict[str, pd.DataFrame] = field(default_factory=dict)
    costs: dict[str, MethodCost] = field(default_factory=dict)
    unparsed: dict[str, dict[str, int]] = field(default_factory=dict)
    score_sources: dict[str, ScoreSources] = field(default_factory=dict)
    bineval_results: list[ItemResult] = field(default_factory=list)
    question_set: QuestionSet | None = None
    constant_predictions: ConstantPredictions = DEFAULT_CONSTANT_PREDICTIONS
    prediction_sets: dict[str, Any] = field(default_factory=dict)
    from_run: bool = True
    items_source: str = ""
    unreadable: list[str] = field(default_factory=list)

    @property
    def methods(self) -> list[str]:
        """Prediction sets (in the order given), then our methods with results in table
        order (derived methods after their source)."""
        return [*self.prediction_sets, *self.run_methods]

    @property
    def run_methods(self) -> list[str]:
        """Our own methods with results (from the benchmark run), in table order."""
        return [m for m in ALL_METHODS if m in self.scores and m not in self.prediction_sets]

    def normalized(self, method: str, dimension: str) -> pd.Series:
        """A method's scores for one dimension on [0, 1] (aligned with `items`).

        Our methods' scores are already on [0, 1]. A prediction set on its own scale is
        rescaled min-max over its observed values (all 0.5 when they are all equal;
        NaN stays NaN): an increasing affine map, so correlations are unchanged; used
        only to draw and average sets of different scales together.
        """
        import numpy as np

        column = self.scores[method][dimension].reindex(self.items.index).astype(float)
        if method not in self.prediction_sets:
            return column
        finite = column[np.isfinite(column.to_numpy(dtype=float))]
        if finite.empty:
            return column
        low, high = float(finite.min()), float(finite.max())
        return (column - low) / (high - low) if high > low else column * 0 + 0.5

    def on_human_scale(self, method: str, dimension: str) -> pd.Series:
        """A method's scores for one dimension mapped affinely onto that dimension's
        human scale (aligned with `items`); a prediction set via `normalized`."""
        low, high = self.spec.scales[dimension]
        return self.normalized(method, dimension) * (high - low) + low

    def human(self, dimension: str) -> pd.Series:
        """Human scores of one dimension (aligned with `items`)."""
        return self.items[dimension]


def load_run_scores(run: BenchmarkRun, *,
                    constant_predictions: ConstantPredictions = DEFAULT_CONSTANT_PREDICTIONS) -> RunScores:
    """Read a benchmark run directory into a `RunScores`.

    Args:
        run: the benchmark run directory.
        constant_predictions: the summary-level policy the correlations of this
            run are to use (kept on the result): ``"skip"`` or ``"zero"``.

    Raises:
        InputError: the directory lacks ``benchmark.json`` / ``items.jsonl`` or holds
            damaged files (names the file and line).
        BinEvalError: `constant_predictions` is neither ``skip`` nor ``zero``.
    """
    import numpy as np
    import pandas as pd

    check_constant_predictions(constant_predictions)
    config = run.read_config()
    if config is None:
        from binaryeval_dspy.errors import InputError

        raise InputError("not a benchmark run directory (no benchmark.json)", path=run.path,
                         fix="pass the `out_dir` of a `bineval benchmark` run.")
    spec = get_benchmark(config.benchmark)
    rows = []
    for row in run.read_items():
        flat = {k: row.get(k) for k in ("item_id", "doc_id", "system_id", "split")}
        flat.update({d: row.get("human", {}).get(d, np.nan) for d in spec.dimensions})
        rows.append(flat)
    items = pd.DataFrame(rows).set_index("item_id")
    out = RunScores(spec=spec, config=config, items=items, constant_predictions=constant_predictions)
    if run.question_set_path.is_file():
        out.question_set = QuestionSet.load(run.question_set_path)
    for method in run.methods_present():
        stored = run.read_stored_results(method)
        if stored.unreadable:
            out.unreadable.append(stored.note())  # type: ignore[arg-type]
        results = stored.results
        wanted = set(items.index)
        results = [r for r in results if r.item_id in wanted]
        if not results:
            continue
        frame, missing = method_frame(
            results, items.index, spec.dimensions,
            (lambda r: r.score_card.dimension_scores if r.score_card is not None else None) if method == "bineval"
            else (lambda r: r.scores))
        cost = MethodCost()
        for r in results:
            cost.items += 1
            cost.lm_calls += r.usage.lm_calls
            cost.prompt_tokens += r.usage.prompt_tokens
            cost.completion_tokens += r.usage.completion_tokens
            cost.cached_prompt_tokens += r.usage.cached_prompt_tokens
            cost.incomplete += 0 if getattr(r, "complete", True) else 1
            cost.empty_output += getattr(r, "status", "scored") == "empty_output"
            cost.errors += getattr(r, "status", "scored") == "error"
            cost.seconds += r.seconds
        out.scores[method] = frame
        out.costs[method] = cost
        out.unparsed[method] = missing
        if method in LOGPROB_METHODS:
            sources = ScoreSources()
            for r in results:
                for d in spec.dimensions:
                    found = detail_source(r.details.get(d))  # type: ignore[union-attr]
                    if found is not None:
                        sources.add(*found)
                    detail = r.details.get(d)  # type: ignore[union-attr]
                    sources.out_of_range += isinstance(detail, Mapping) and detail.get("status") == "out_of_range"
            out.score_sources[method] = sources
        if method == "bineval":
            out.bineval_results = results  # type: ignore[assignment]
            _add_p_yes_method(out, results, spec.dimensions)  # type: ignore[arg-type]
    return out


def _add_p_yes_method(out: RunScores, results: Sequence[ItemResult], dimensions: Sequence[str]) -> None:
    """Add "BinEval, P(yes)" when any BinEval result carries ``p_yes_scores``: its
    frame (computed like BinEval's from ``dimension_scores``), cost (none of its own)
    and how many parsed verdicts carried a P(yes)."""
    soft = [r for r in results if bineval_p_yes_scores(r) is not None]
    if not soft:
        return
    frame, missing = method_frame(results, out.items.index, dimensions, bineval_p_yes_scores)
    out.scores[P_YES_METHOD] = frame
    out.unparsed[P_YES_METHOD] = missing
    out.costs[P_YES_METHOD] = MethodCost(items=len(soft))
    sources = ScoreSources(unit="parsed verdicts", unscored_label="left out of the P(yes) means")
    for r in results:
        for v in r.verdicts:
            if v.verdict in ("yes", "no"):
                sources.add("logprobs" if getattr(v, "p_yes", None) is not None else None, NO_P_YES)
    out.score_sources[P_YES_METHOD] = sources

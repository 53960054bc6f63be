"""Reading a benchmark run back: human scores, each method's scores and its cost.

Everything the report needs comes from the run directory; no LM and no data folder are
touched. Scores are kept normalized to [0, 1] per method (BinEval yes-rates, the
holistic rating mapped from its scale, P(yes), ROUGE-L F) and mapped to each
dimension's human scale for display with `on_human_scale`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from binaryeval_dspy.meta_eval.benchmark_run import METHODS, BenchmarkRun, BenchmarkRunConfig
from binaryeval_dspy.meta_eval.benchmark_spec import BenchmarkSpec, get_benchmark
from binaryeval_dspy.schemas.item_result import ItemResult
from binaryeval_dspy.schemas.question_set import QuestionSet


@dataclass
class MethodCost:
    """LM cost and wall time of one method over the items it scored.

    Attributes:
        items: items with a stored result.
        lm_calls / prompt_tokens / completion_tokens: summed (cache hits cost nothing).
        seconds: summed per-item wall time.
    """

    items: int = 0
    lm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

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
            result is stored (unparsed answers).
        bineval_results: BinEval item results (for the question analysis).
        question_set: the question set BinEval used (None if not saved).
    """

    spec: BenchmarkSpec
    config: BenchmarkRunConfig
    items: pd.DataFrame
    scores: dict[str, pd.DataFrame] = field(default_factory=dict)
    costs: dict[str, MethodCost] = field(default_factory=dict)
    unparsed: dict[str, dict[str, int]] = field(default_factory=dict)
    bineval_results: list[ItemResult] = field(default_factory=list)
    question_set: QuestionSet | None = None

    @property
    def methods(self) -> list[str]:
        """Methods with results, in table order."""
        return [m for m in METHODS if m in self.scores]

    def on_human_scale(self, method: str, dimension: str) -> pd.Series:
        """A method's scores for one dimension mapped affinely onto that dimension's
        human scale (aligned with `items`)."""
        low, high = self.spec.scales[dimension]
        return self.scores[method][dimension] * (high - low) + low

    def human(self, dimension: str) -> pd.Series:
        """Human scores of one dimension (aligned with `items`)."""
        return self.items[dimension]


def load_run_scores(run: BenchmarkRun) -> RunScores:
    """Read a benchmark run directory into a `RunScores`.

    Raises:
        InputError: the directory lacks ``benchmark.json`` / ``items.jsonl`` or holds
            damaged files (names the file and line).
    """
    config = run.read_config()
    if config is None:
        from binaryeval_dspy.errors import InputError

        raise InputError("not a benchmark run directory (no benchmark.json)", path=run.path,
                         fix="pass the --out directory of a `bineval benchmark` run.")
    spec = get_benchmark(config.benchmark)
    rows = []
    for row in run.read_items():
        flat = {k: row.get(k) for k in ("item_id", "doc_id", "system_id", "split")}
        flat.update({d: row.get("human", {}).get(d, np.nan) for d in spec.dimensions})
        rows.append(flat)
    items = pd.DataFrame(rows).set_index("item_id")
    out = RunScores(spec=spec, config=config, items=items)
    if run.question_set_path.is_file():
        out.question_set = QuestionSet.load(run.question_set_path)
    for method in run.methods_present():
        results = run.read_results(method)
        wanted = set(items.index)
        results = [r for r in results if r.item_id in wanted]
        if not results:
            continue
        frame = pd.DataFrame(index=items.index, columns=list(spec.dimensions), dtype=float)
        cost = MethodCost()
        missing = {d: 0 for d in spec.dimensions}
        for r in results:
            values = r.score_card.dimension_scores if method == "bineval" else r.scores  # type: ignore[union-attr]
            for d in spec.dimensions:
                v = values.get(d)
                frame.loc[r.item_id, d] = np.nan if v is None else float(v)
                missing[d] += v is None
            cost.items += 1
            cost.lm_calls += r.usage.lm_calls
            cost.prompt_tokens += r.usage.prompt_tokens
            cost.completion_tokens += r.usage.completion_tokens
            cost.seconds += r.seconds
        out.scores[method] = frame
        out.costs[method] = cost
        out.unparsed[method] = missing
        if method == "bineval":
            out.bineval_results = results  # type: ignore[assignment]
    return out

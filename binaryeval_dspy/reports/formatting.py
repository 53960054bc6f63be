"""How the benchmark and agreement reports write numbers and labels into table cells.

Pure string helpers shared by the table builders: numbers (``n/a`` for undefined,
never 0), bootstrap p-values at their resolution, method labels, the † mark of a
constant method, the "items used / total" cells, and the statement of the
summary-level constant-predictions policy.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from binaryeval_dspy.meta_eval.benchmark_files import NO_LM
from binaryeval_dspy.meta_eval.run_scores import ALL_METHOD_TITLES, P_YES_METHOD, RunScores

if TYPE_CHECKING:
    import numpy as np

LEVEL_TITLES = {"summary": "Summary-level", "turn": "Turn-level", "pooled": "Pooled (dataset-level)",
                "system": "System-level"}
SYMBOLS = {"spearman": "ρ", "kendall": "τ", "pearson": "r"}




def fmt(value: float | None, digits: int = 3) -> str:
    """`value` with `digits` decimals, or ``n/a`` for None or NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}"


def fmt_p(p_value: float | None, n_resamples: int) -> str:
    """A bootstrap p-value; below the resolution 1/n_resamples it reads ``p<1/n``."""
    if p_value is None or (isinstance(p_value, float) and math.isnan(p_value)):
        return "p=n/a"
    floor = 1.0 / n_resamples
    return f"p<{floor:g}" if p_value < floor else f"p={p_value:.3f}"


def plural(count: int, word: str) -> str:
    """``'<count> <word>'``, with an ``s`` unless `count` is 1."""
    return f"{count} {word}" + ("" if count == 1 else "s")



METHOD_DEFINITIONS = {
    "bineval": "BinEval = yes-rate over many binary questions per dimension (paper 3.2)",
    "geval": "G-Eval-style = one holistic integer score per dimension from criteria and evaluation steps, "
             "probability-weighted when the LM returns log-probabilities",
    P_YES_METHOD: "BinEval, P(yes) = the same binary answers scored by the mean P(yes) over a dimension's "
                  "questions, read from the log-probabilities of BinEval's own calls",
    "unieval": "UniEval-style = one yes/no question per dimension scored by P(yes)",
    "rouge": "ROUGE-L = F-measure against the reference (no LM)",
}
FEW_UNITS = 10  # fewer resampling units than this: the report warns that intervals are unreliable
CONSTANT_MARK = " †"
CONSTANT_NOTE = ("† = the method gave the same score to every item (of every document, at summary level): it "
                 "ranks nothing. A constant score has no defined correlation: pooled, turn- and system-level "
                 "values are n/a, and at summary level such documents are skipped or counted as 0 "
                 "according to the constant-predictions policy.")


def constant_policy_note(scores: RunScores, metrics: dict) -> str:
    """The report's statement of the summary-level constant-predictions policy and its counts.

    E.g. ``Summary level, constant predictions: policy 'skip' - a document whose method
    scores are all equal is left out of that method's average, as G-Eval's and UniEval's
    meta-evaluation scripts do ... Documents skipped, summed over dimensions: BinEval 0,
    UniEval-style 12.`` Counts are read from `metrics` (filled by the main table).
    """
    policy = scores.constant_predictions
    rule = ("left out of that method's average, as G-Eval's and UniEval's meta-evaluation scripts do "
            "(`constant_predictions` zero counts it as 0 instead)" if policy == "skip" else
            "counted as ρ = τ = 0 in that method's average (G-Eval's and UniEval's scripts skip it instead: "
            "`constant_predictions` skip)")
    text = (f"Summary level, constant predictions: policy '{policy}' - a document whose method scores are all "
            f"equal while its human scores vary is {rule}; a document whose human scores are all equal is left "
            "out for every method under either policy.")
    if scores.spec.level != "summary":
        return text
    def count(method: str, dimension: str, key: str) -> int:
        return int(metrics.get(method, {}).get(dimension, {}).get(key) or 0)

    dims = scores.spec.dimensions
    counts = [f"{method_label(m)} {sum(count(m, d, 'groups_constant_prediction') for d in dims)}"
              for m in scores.methods]
    human = max((count(m, d, "groups_constant_human") for m in scores.methods for d in dims), default=0)
    verb = "skipped" if policy == "skip" else "counted as 0"
    if counts:
        text += f" Documents {verb} this way, summed over dimensions: {', '.join(counts)}"
        text += f"; documents with constant human scores: up to {human} per dimension." if human else "."
    return text


def constant_mark(info: dict) -> str:
    """" †" when a cell's value comes only from constant method scores (every document
    with varying human scores had constant method scores, or a pooled vector was constant)."""
    if info.get("note") == "constant predictions":
        return CONSTANT_MARK
    constant = info.get("groups_constant_prediction") or 0
    counted = (info.get("groups_used") or 0) + (constant if info.get("constant_predictions") == "skip" else 0)
    if constant and constant == counted:
        return CONSTANT_MARK
    return ""


def method_label(method: str) -> str:
    """The title a report gives a method id (``geval`` -> its G-Eval-style title); the id itself if unknown."""
    return ALL_METHOD_TITLES.get(method, method)


#: What a report names as its LM when no method of the run used one (ROUGE-L only).
NO_LM_LABEL = f"{NO_LM} (no method here uses an LM)"


def report_lm_label(scores: RunScores) -> str:
    """What the report's captions name after "LM:": the run's LM, and the prediction files.

    E.g. ``gpt-4o-mini``, ``none (no method here uses an LM)`` (a ROUGE-L-only run),
    ``none (prediction files: mine, unieval-published)`` or ``gpt-4o-mini (our methods);
    prediction files: mine``.
    """
    if not scores.prediction_sets:
        return NO_LM_LABEL if scores.config.lm == NO_LM else scores.config.lm
    names = ", ".join(scores.prediction_sets)
    if not scores.from_run:
        return f"none (prediction files: {names})"
    return f"{scores.config.lm} (our methods); prediction files: {names}"


def source_cell(scores: RunScores, method: str) -> str:
    """Where a row's scores come from: ``file <name>`` or ``LM: <name>`` (ROUGE-L: no LM)."""
    if method in scores.prediction_sets:
        return f"file {scores.prediction_sets[method].path.name}"
    if method == "rouge":
        return "no LM (rouge-score)"
    return f"LM: {scores.config.lm}"


def coverage_cell(counts: dict[str, int], total: int) -> str:
    """``"12/16"`` when every column used as many items, else ``"coherence 12/16, fluency 16/16"``."""
    if not counts:
        return f"0/{total}"
    if len(set(counts.values())) == 1:
        return f"{next(iter(counts.values()))}/{total}"
    return ", ".join(f"{k} {n}/{total}" for k, n in counts.items())




def mean_with_coverage(values: np.ndarray, digits: int = 2) -> str:
    """``"3.12 (15/16)"``: the mean over the defined values and n used / n total; ``"n/a (0/16)"``
    when no value is defined (never 0)."""
    import numpy as np

    finite = values[np.isfinite(values)]
    mean = float(finite.mean()) if len(finite) else math.nan
    return f"{fmt(mean, digits)} ({len(finite)}/{len(values)})"


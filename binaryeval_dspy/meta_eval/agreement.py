"""Bring your own predictions: a user's prediction files against the human scores.

`load_agreement_scores` builds the `RunScores` that
`binaryeval_dspy.reports.benchmark_metrics.compute_benchmark_metrics` turns into the same
report as ``bineval benchmark`` (rendered by `binaryeval_dspy.render`; the
agreement-only parts are in `binaryeval_dspy.reports.agreement_tables`), with each
prediction file as a named row set:

* the items and human scores come from a bundled benchmark (``summeval``,
  ``topical_chat``, ``qags``, ... read by their loaders), from a benchmark run directory
  (its selection, and then our methods' scores join the report for paired tests), or
  from a user's human-scored JSONL / CSV file (`load_scored_items`);
* every prediction file is read by `load_predictions` (any numeric scale; items without
  a prediction and unknown ids are counted and listed, never dropped silently).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import dspy

from binaryeval_dspy.data.scored_items import load_scored_items
from binaryeval_dspy.errors import InputError
from binaryeval_dspy.meta_eval.benchmark_files import NO_LM, BenchmarkRun, BenchmarkRunConfig
from binaryeval_dspy.meta_eval.benchmark_spec import BENCHMARKS, BenchmarkSpec, get_benchmark
from binaryeval_dspy.meta_eval.predictions import PredictionSet, load_predictions
from binaryeval_dspy.meta_eval.run_scores import (
    ALL_METHOD_TITLES,
    ALL_METHODS,
    RunScores,
    load_run_scores,
)
from binaryeval_dspy.metrics.correlation import (
    DEFAULT_CONSTANT_PREDICTIONS,
    ConstantPredictions,
    check_constant_predictions,
)

if TYPE_CHECKING:
    import pandas as pd

#: Names a prediction set may not take: our methods (keys and titles) and the top-level
#: keys of ``metrics.json``, so that every set keeps its own entry and label.
RESERVED_NAMES = frozenset(
    {m.lower() for m in ALL_METHODS} | {t.lower() for t in ALL_METHOD_TITLES.values()}
    | {"human", "benchmark", "lm", "items", "level", "constant_predictions", "coverage_warnings", "per_system",
       "cost", "question_analysis", "score_sources", "prediction_sets", "items_source", "average", "method",
       "schema_version", "report", "entries"})


def check_prediction_names(names: Sequence[str]) -> None:
    """Refuse names used twice or taken by our methods / the report's own entries.

    Raises:
        InputError: names the offending name and the reason.
    """
    seen: set[str] = set()
    for name in names:
        key = name.strip().lower()
        if key in RESERVED_NAMES:
            raise InputError(f"the prediction set name {name!r} is taken by one of our methods "
                             f"({', '.join(ALL_METHODS)}, or their titles) or by an entry of metrics.json",
                             field="`predictions`",
                             fix="choose another NAME in NAME=FILE, e.g. my-judge.")
        if key in seen:
            raise InputError(f"the prediction set name {name!r} is given twice", field="`predictions`",
                             fix="give each prediction file its own NAME.")
        seen.add(key)


def items_frame(items: Sequence[dspy.Example], dimensions: Sequence[str]) -> pd.DataFrame:
    """One row per item: item_id (index, str), doc_id, system_id, split and one float column
    per human dimension (NaN when the item has no score for it)."""
    import pandas as pd

    rows = []
    for ex in items:
        human = dict(ex.get("human") or {})
        rows.append({"item_id": str(ex.item_id), "doc_id": str(ex.get("doc_id", ex.item_id)),
                     "system_id": str(ex.get("system_id", "0")), "split": str(ex.get("split", "")),
                     **{d: float(human[d]) if human.get(d) is not None else float("nan") for d in dimensions}})
    return pd.DataFrame(rows).set_index("item_id")


def scored_file_spec(path: Path, frame: pd.DataFrame, dimensions: Sequence[str]) -> BenchmarkSpec:
    """The report's view of a user's scored file.

    Level: ``summary`` (correlate within each document, then average, as on SummEval)
    when some document holds two or more items (``--doc-field``), else ``pooled``.
    Human scales are the observed [min, max] per dimension (used only to draw and to
    average over dimensions; correlations do not depend on them).
    """
    scales = {}
    for d in dimensions:
        values = frame[d].dropna()
        low, high = (float(values.min()), float(values.max())) if len(values) else (0.0, 1.0)
        scales[d] = (low, high if high > low else low + 1.0)
    grouped = bool((frame.groupby("doc_id").size() >= 2).any())
    stem = "".join(c if c.isalnum() or c in "-_." else "-" for c in path.stem) or "scored"
    return BenchmarkSpec(name=stem, title=path.name, dimensions=tuple(dimensions), scales=scales,
                         level="summary" if grouped else "pooled", task_dir="", splits=("",), loaders={})


def _parse_human_fields(human_fields: str | Mapping[str, str] | Sequence[str]) -> dict[str, str] | list[str]:
    if isinstance(human_fields, str):
        parts = [p.strip() for p in human_fields.split(",") if p.strip()]
        if parts and all("=" in p for p in parts):
            return {p.split("=", 1)[0].strip(): p.split("=", 1)[1].strip() for p in parts}
        if any("=" in p for p in parts):
            raise InputError(f"mix of DIM=FIELD and plain names in {human_fields!r}", field="`human_fields`",
                             fix="write either coherence,fluency or coherence=scores.coh,fluency=scores.flu.")
        return parts
    return dict(human_fields) if isinstance(human_fields, Mapping) else list(human_fields)


def _selection(config: BenchmarkRunConfig) -> str:
    if not config.limit:
        return "all items"
    return f"first {config.limit}" if config.sample in (None, "head") else (
        f"{config.limit} per split, {config.sample} sample, seed {config.seed}")


def load_agreement_scores(
    target: str | Path | None,
    predictions: Sequence[tuple[str, str | Path]],
    *,
    run: str | Path | BenchmarkRun | None = None,
    data_dir: str | Path | None = None,
    human_fields: str | Mapping[str, str] | Sequence[str] | None = None,
    id_field: str = "item_id",
    doc_field: str | None = None,
    system_field: str | None = None,
    constant_predictions: ConstantPredictions = DEFAULT_CONSTANT_PREDICTIONS,
) -> RunScores:
    """Items, human scores and prediction sets for an agreement report.

    Args:
        target: a bundled benchmark name (``summeval``, ``topical_chat``, ``qags``,
            ``qags_cnndm``, ``qags_xsum``) or the path of a human-scored JSONL / CSV
            file; may be None when `run` is given (its benchmark is used).
        predictions: (name, file) per prediction set, in report order.
        run: a ``bineval benchmark`` run directory: its items (selection and human
            scores) are used, and our methods' scores join the report (paired tests
            against them, their LM named).
        data_dir: data folder of a bundled benchmark (default as for ``bineval
            benchmark``).
        human_fields: scored file only: ``"coherence,fluency"`` (field = dimension) or
            ``"coherence=scores.coh,..."`` or a mapping / list as `load_scored_items`.
        id_field / doc_field / system_field: scored file only (`load_scored_items`);
            the ids must be those of the prediction files' ``item_id``.
        constant_predictions: the summary-level policy (``skip`` / ``zero``).

    Returns:
        A `RunScores` with `prediction_sets` filled (and our methods when `run`).

    Raises:
        InputError: no prediction file; a bad name; a target that is neither a
            benchmark nor a file; a scored file without `human_fields`; `run` with a
            scored file or another benchmark; any error of the loaders and of
            `load_predictions` (file, line and field named).
    """
    check_constant_predictions(constant_predictions)
    if not predictions:
        raise InputError("no prediction file given", field="`predictions`",
                         fix="pass `predictions` NAME=FILE (repeat it for several sets).")
    check_prediction_names([name for name, _ in predictions])
    if run is not None:
        run = run if isinstance(run, BenchmarkRun) else BenchmarkRun(run)
        if run.read_config() is None:
            raise InputError("not a benchmark run directory (no benchmark.json)", path=run.path, field="`run_dir`",
                             fix="pass the `out_dir` of a `bineval benchmark` run.")
    file_target = None
    spec: BenchmarkSpec | None = None
    if target is not None and str(target).strip():
        key = str(target).strip().lower().replace("-", "_")
        if key in BENCHMARKS and not Path(str(target)).is_file():
            spec = get_benchmark(key)
        elif Path(str(target)).is_file():
            file_target = Path(str(target))
        else:
            raise InputError(f"{str(target)!r} is neither a benchmark ({', '.join(BENCHMARKS)}) nor a file",
                             field="BENCHMARK_OR_SCORED_FILE",
                             fix="name a bundled benchmark, or give the path of your human-scored .jsonl / .csv.")
    elif run is None:
        raise InputError("nothing to compare with: give a benchmark, a scored file or `run_dir`",
                         field="BENCHMARK_OR_SCORED_FILE", fix="e.g. the benchmark summeval with `predictions` a=a.jsonl")
    if run is not None:
        if file_target is not None:
            raise InputError("`run_dir` reads a benchmark run; it cannot be combined with a scored file",
                             path=file_target, field="`run_dir`",
                             fix="leave out `run_dir`, or name the run's benchmark instead of the file.")
        scores = load_run_scores(run, constant_predictions=constant_predictions)
        if spec is not None and spec.name != scores.spec.name:
            raise InputError(f"the run is a {scores.spec.name} run, not {spec.name}", path=run.path, field="`run_dir`",
                             fix=f"name {scores.spec.name} (or nothing) as the benchmark, or pass another run.")
        scores.items_source = (f"the items of benchmark run {run.path} ({scores.spec.title}, "
                               f"{_selection(scores.config)})")
    else:
        if file_target is not None:
            if not human_fields:
                raise InputError("a scored file needs `human_fields`", path=file_target, field="`human_fields`",
                                 fix="name the fields that hold the human scores, e.g. `human_fields` "
                                     "coherence,fluency or coherence=scores.coh.")
            mapping = _parse_human_fields(human_fields)
            items = load_scored_items(file_target, human_fields=mapping, id_field=id_field, doc_field=doc_field,
                                      system_field=system_field, texts=False)
            dims = list(mapping) if isinstance(mapping, dict) else [str(f).split(".")[-1] for f in mapping]
            frame = items_frame(items, dims)
            spec = scored_file_spec(file_target, frame, dims)
            source = (f"the human-scored file {file_target} (ids from '{id_field}'"
                      + (f", documents from '{doc_field}'" if doc_field else ", each item its own document")
                      + (f", systems from '{system_field}'" if system_field else "") + ")")
        else:
            assert spec is not None
            items = spec.load(data_dir=data_dir)
            frame = items_frame(items, spec.dimensions)
            files = ", ".join(spec.data_files.values())
            source = (f"the bundled {spec.title} data ({files} in {data_dir or 'the default data folder'}), "
                      "all items")
        config = BenchmarkRunConfig(benchmark=spec.name, lm=NO_LM, item_ids=list(frame.index),
                                    question_set_hash="", question_set_source="", rubric_hash="",
                                    rubric_source="", data_dir=str(data_dir) if data_dir else None,
                                    data_files=dict(spec.data_files))
        scores = RunScores(spec=spec, config=config, items=frame, constant_predictions=constant_predictions,
                           from_run=False, items_source=source)
    ids = [str(i) for i in scores.items.index]
    sets: dict[str, PredictionSet] = {}
    for name, path in predictions:
        sets[name] = load_predictions(path, name=name, dimensions=scores.spec.dimensions, item_ids=ids)
    for name, ps in sets.items():
        scores.prediction_sets[name] = ps
        scores.scores[name] = ps.frame
        scores.unparsed[name] = {d: len(ps.missing_values.get(d, [])) for d in scores.spec.dimensions}
    return scores

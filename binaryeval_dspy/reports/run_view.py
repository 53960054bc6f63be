"""`bineval view`: one self-contained HTML page of a stored run, read from its files only.

The page is one template (``templates/run_view.html``: HTML, CSS and plain JavaScript,
no library, no network) with the run's data embedded as one JSON document. The
JavaScript builds every element with ``textContent``, so item ids, question texts,
outputs and explanations are shown as text, never run as markup; the embedded JSON has
``<``, ``>`` and ``&`` escaped, so no text can close its ``<script>`` element.

What is read, with the project's own readers (no LM call, nothing written to the run):

* an evaluate run (also verdict mode, and a ``bineval rejudge`` run, which is an
  evaluate run of the same shape): ``manifest.json`` (`RunDirectory.read_manifest`),
  ``results.jsonl`` (`ResultsFile.read_results`, read-only), the frozen
  ``question_set.json``, ``summary.json`` (`RunSummary`; rebuilt with
  `summarize_results` when absent or stale), the question analysis
  (`analyze_questions`), and the items file the manifest names, for the input and output
  texts (`load_items`; a text whose hash differs from the judged one is not shown);
* a rejudge run also its ``rejudge.json`` (`RejudgeReport`) and, when it still exists,
  the previous run it was compared with (shown as a two-run comparison);
* a benchmark run: ``benchmark.json`` and every method's results (`load_run_scores`),
  with the BinEval method's run shown in full;
* an optimizer comparison: ``config.json`` and ``<optimizer>/result.json``
  (`load_results`), the comparison table (`rows`), instructions and test records.

A person can label the verdicts on the page: in an item's questions, set each question's
label (yes / no) or mark the judge's verdict wrong, then download the labels as a verdicts
file (`binaryeval_dspy.data.verdicts_file`; JSONL or CSV, made in the page as a Blob, no
server), whose judge is ``human`` or the annotator id typed on the page. That file is what
`bineval agreement --labels` and the optimizer's `labels` read (docs/viewer.md).

Two runs (``bineval view RUN RUN2``) are compared item by item and question by question;
an answer whose LM call failed (``error``) on either side is "not compared", never a flip.
"""

from __future__ import annotations

import html
import importlib.resources
import json
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from binaryeval_dspy.errors import InputError
from binaryeval_dspy.lm.logprobs import AGAINST_VERDICT_WHY, against_verdict
from binaryeval_dspy.runs.results_file import UnreadableLine
from binaryeval_dspy.runs.run_directory import FROZEN_QUESTION_SET, MANIFEST, RESULTS, RunDirectory
from binaryeval_dspy.schemas.item_result import ItemResult, text_hash
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.run_manifest import RunManifest
from binaryeval_dspy.schemas.verdict_record import HUMAN

__all__ = ["RUN_KINDS", "VIEW_DATA_ID", "LoadedRun", "build_view_html", "compare_loaded_runs", "load_run",
           "read_manifest", "run_kind", "summary_differences", "view_data", "write_view"]

#: what `run_kind` tells apart
RUN_KINDS = ("evaluate", "rejudge", "benchmark", "comparison")
#: the id of the ``<script type="application/json">`` element holding the page's data
VIEW_DATA_ID = "bineval-data"
_TEMPLATE = "run_view.html"
_DATA_MARK = "/*__BINEVAL_DATA__*/"
_TITLE_MARK = "__BINEVAL_TITLE__"
_SUMMARY_FILE = "summary.json"
_REJUDGE_FILE = "rejudge.json"
# The fixes of this module's errors name nothing but the run directories they read: a
# page is written from a run, never into one (`out` is the page file).
_PASS_A_RUN = "pass a run directory written by bineval evaluate, rejudge, benchmark or optimize."
_RESTORE_MANIFEST = ("restore manifest.json from a backup, or view "
                     "another run directory; nothing here changes the run.")
_RESTORE_FILE = ("restore the file from a backup (or rerun the command that wrote it), or view another run "
                 "directory; nothing here changes the run.")


@contextmanager
def _reading(path: Path) -> Iterator[None]:
    """Errors of the readers of a run's files, as a reader's: the file named, and a fix that
    restores it (their own fixes are for the command that writes the run, e.g. a new `out_dir`).

    Raises:
        InputError: for any `InputError`, `ValueError` (bad JSON, a failed validation),
            `KeyError` or `TypeError` raised inside.
    """
    try:
        yield
    except InputError as exc:
        raise InputError(exc.message, path=exc.path or path, line=exc.line, field=exc.field, expected=exc.expected,
                         received=exc.received, fix=_RESTORE_FILE) from exc
    except (ValueError, KeyError, TypeError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"could not be read ({first})", path=path, fix=_RESTORE_FILE) from exc


def run_kind(path: str | Path) -> str:
    """What kind of run directory `path` is: one of `RUN_KINDS`.

    Raises:
        InputError: `path` is not a directory, or holds none of the files a run has
            (``manifest.json``, ``benchmark.json``, or ``config.json`` with optimizer results).
    """
    folder = Path(path)
    if not folder.is_dir():
        raise InputError("is not a directory", path=folder, fix=_PASS_A_RUN)
    if (folder / "benchmark.json").is_file():
        return "benchmark"
    if (folder / MANIFEST).is_file():
        manifest = read_manifest(RunDirectory(folder))
        return "rejudge" if manifest is not None and manifest.command == "rejudge" else "evaluate"
    if (folder / "config.json").is_file() and any(folder.glob("*/result.json")):
        return "comparison"
    if (folder / RESULTS).is_file():
        raise InputError(f"holds {RESULTS} but no {MANIFEST}, so the run's settings are unknown", path=folder,
                         fix="restore the manifest, or view another run.")
    raise InputError("is not a run directory (no manifest.json, benchmark.json, or config.json with optimizer "
                     "results)", path=folder, fix=_PASS_A_RUN)


def read_manifest(run_dir: RunDirectory) -> RunManifest | None:
    """`RunDirectory.read_manifest` for a reader: a damaged manifest's fix says to restore it
    (the writer's fix, a new run directory, is no remedy for a page of this run).

    Raises:
        InputError: the manifest exists but is not a valid manifest (file, line and field named).
    """
    try:
        return run_dir.read_manifest()
    except InputError as exc:
        raise InputError(exc.message, path=exc.path, line=exc.line, field=exc.field, expected=exc.expected,
                         received=exc.received, fix=_RESTORE_MANIFEST) from exc


@dataclass
class LoadedRun:
    """An evaluate-shaped run read back (evaluate, verdict mode, rejudge, a benchmark's BinEval).

    Attributes:
        path: the run directory.
        manifest: its ``manifest.json``.
        results: its item results, in file order (one per item id).
        question_set: the frozen question set (or the file the manifest names, when its
            hash matches); None when neither is available (questions shown by id).
        texts: item id -> (input, output) read from the items file, only where the text's
            hash is the judged one.
        notes: what the page should say about what could not be read.
        unreadable: the lines of ``results.jsonl`` that gave no result (each is also
            counted and named in `notes`).
    """

    path: Path
    manifest: RunManifest
    results: list[ItemResult]
    question_set: QuestionSet | None
    texts: dict[str, tuple[str | None, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    unreadable: list[UnreadableLine] = field(default_factory=list)

    @property
    def aggregation(self) -> str:
        """"score", "verdict" or "both", as the run was made."""
        return str(self.manifest.config.get("aggregation", "score"))


def _question_set(run_dir: RunDirectory, manifest: RunManifest, notes: list[str]) -> QuestionSet | None:
    try:
        frozen = run_dir.read_frozen_question_set()
    except Exception as exc:  # noqa: BLE001 - a set naming an unregistered check: shown by id instead
        notes.append(f"The frozen question set {run_dir.path / FROZEN_QUESTION_SET} could not be read ({exc}); "
                     "questions are shown by id.")
        return None
    if frozen is not None:
        return frozen
    given = Path(manifest.question_set_path)
    try:
        candidate = QuestionSet.load(given) if given.is_file() else None
    except Exception:  # noqa: BLE001 - unreadable: fall through to ids only
        candidate = None
    if candidate is not None and candidate.content_hash == manifest.question_set_hash:
        return candidate
    notes.append(f"The run keeps no frozen question set and {given} is missing or changed since; questions are "
                 "shown by id.")
    return None


def _texts(manifest: RunManifest, results: Sequence[ItemResult], notes: list[str]
           ) -> dict[str, tuple[str | None, str]]:
    """Item id -> (input, output) from the items file the manifest names, hash-checked."""
    from binaryeval_dspy.data.items import load_items

    config = manifest.config
    if "output_field" not in config:
        return {}
    path = Path(manifest.items_file.path if manifest.items_file is not None else manifest.items_path)
    if not path.is_file():
        notes.append(f"Inputs and outputs are not shown: the items file {path} is not there any more.")
        return {}
    try:
        items = load_items(path, input_field=str(config.get("input_field", "input")),
                           output_field=str(config["output_field"]),
                           id_field=config.get("id_field"), empty_output="record")  # type: ignore[arg-type]
    except InputError as exc:
        notes.append(f"Inputs and outputs are not shown: the items file could not be read ({exc}).")
        return {}
    by_id = {str(item.item_id): item for item in items}
    texts: dict[str, tuple[str | None, str]] = {}
    changed = 0
    for result in results:
        item = by_id.get(result.item_id)
        if item is None:
            continue
        if text_hash(item.output) != result.output_hash:
            changed += 1
            continue
        same_input = result.input_hash is None or text_hash(item.input) == result.input_hash
        texts[result.item_id] = (item.input if same_input else None, item.output)
    if changed:
        notes.append(f"{changed} items' outputs changed in {path} since they were judged: their texts are not shown "
                     "(bineval rejudge judges them again).")
    return texts


def load_run(path: str | Path, *, texts: bool = True) -> LoadedRun:
    """Read an evaluate-shaped run directory as it is (read-only).

    Every line of ``results.jsonl`` that gives no result (a half-written last line, a
    damaged line) is left out, counted and named in the notes (`StoredResults.note`),
    never dropped silently; the other results are shown.

    Args:
        path: the run directory (``manifest.json`` + ``results.jsonl``).
        texts: read the input and output texts from the items file the manifest names.

    Raises:
        InputError: no manifest, or a damaged manifest (file, line and field named).
    """
    run_dir = RunDirectory(path)
    manifest = read_manifest(run_dir)
    if manifest is None:
        raise InputError(f"holds no {MANIFEST}", path=run_dir.path, fix=_PASS_A_RUN)
    stored = run_dir.read_stored_results(strict=False)
    results = stored.results
    notes: list[str] = []
    if stored.unreadable:
        notes.append(f"{stored.note()} The page shows the {len(results)} results that could be read.")
    question_set = _question_set(run_dir, manifest, notes)
    loaded = LoadedRun(path=run_dir.path, manifest=manifest, results=results, question_set=question_set, notes=notes,
                       unreadable=list(stored.unreadable))
    if texts:
        loaded.texts = _texts(manifest, results, notes)
    return loaded


# ------------------------------------------------------------------ the data of one run


def _finite(value: float | None) -> float | None:
    """A float for JSON: None for None and NaN."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


#: `RunSummary` fields computed from the results alone: ``summary.json`` is used only when
#: each equals the value rebuilt from ``results.jsonl`` (the cost, priced when the run was
#: made, is the one thing the results cannot give back)
_SUMMARY_FROM_RESULTS = ("lm", "items", "scale", "dimensions", "lm_calls", "failed_calls", "prompt_tokens",
                         "completion_tokens", "cached_prompt_tokens", "items_incomplete", "items_by_status",
                         "questions_answered", "questions_total", "adapter_fallbacks")


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values, floats to 9 significant digits (NaN equals NaN)."""
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
            return False
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def summary_differences(stored: Any, rebuilt: Any) -> list[str]:
    """What a stored `RunSummary` says that the one rebuilt from the results does not (pure).

    Returns:
        One phrase per differing field of `_SUMMARY_FROM_RESULTS` (a dimension's mean
        yes-rate named with its dimension), e.g. ``"items: 3 in summary.json, 3 in
        results.jsonl"``, ``"overall mean yes-rate: 0.833 in summary.json, 0.5 in
        results.jsonl"``; [] when they agree.
    """
    old, new = stored.model_dump(mode="json"), rebuilt.model_dump(mode="json")
    found = []
    for key in _SUMMARY_FROM_RESULTS:
        if _same(old.get(key), new.get(key)):
            continue
        if key == "dimensions":
            before = {d["dimension"]: d for d in old[key]}
            after = {d["dimension"]: d for d in new[key]}
            for name in dict.fromkeys([*before, *after]):
                a, b = before.get(name), after.get(name)
                if a is None or b is None:
                    found.append(f"dimension {name}: {'absent' if a is None else 'present'} in {_SUMMARY_FILE}, "
                                 f"{'absent' if b is None else 'present'} in {RESULTS}")
                    continue
                for part, label in (("mean_score", "mean yes-rate"), ("items_scored", "items used"),
                                    ("yes", "yes"), ("no", "no"), ("unparsed", "unparsed"), ("error", "error")):
                    if not _same(a.get(part), b.get(part)):
                        found.append(f"{name} {label}: {_shown(a.get(part))} in {_SUMMARY_FILE}, "
                                     f"{_shown(b.get(part))} in {RESULTS}")
            continue
        found.append(f"{key}: {_shown(old.get(key))} in {_SUMMARY_FILE}, {_shown(new.get(key))} in {RESULTS}")
    return found


def _shown(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else json.dumps(value, ensure_ascii=False)


def _summary(run: LoadedRun) -> Any:
    """The run's `RunSummary`, always true to ``results.jsonl``: ``summary.json`` when every
    number it holds equals the one rebuilt from the results (`summary_differences`), else the
    rebuilt one, with a note saying what ``summary.json`` claims instead."""
    from binaryeval_dspy.runs.run_summary import RunSummary, summarize_results

    stored_path = run.path / _SUMMARY_FILE
    stored = None
    if stored_path.is_file():
        try:
            stored = RunSummary.model_validate_json(stored_path.read_text(encoding="utf-8"))
        except ValueError as exc:
            run.notes.append(f"{stored_path} could not be read ({str(exc).splitlines()[0]}): the summary was "
                             f"rebuilt from {RESULTS} (the cost is priced by the LM's name).")
    rebuilt = summarize_results(run.results, lm=run.manifest.lm, question_set=run.question_set,
                                embedded=stored.embedded_lm if stored is not None else None,
                                judge_prices=(run.manifest.config or {}).get("judge_prices"))
    if stored is None:
        if not stored_path.is_file():
            run.notes.append(f"{_SUMMARY_FILE} is missing: the summary was rebuilt from {RESULTS} (the cost is "
                             "priced by the LM's name).")
        return rebuilt
    differences = summary_differences(stored, rebuilt)
    if not differences:
        return stored
    shown = differences[:6] + ([f"{len(differences) - 6} more"] if len(differences) > 6 else [])
    run.notes.append(f"{_SUMMARY_FILE} does not match {RESULTS} ({'; '.join(shown)}), e.g. left by an earlier "
                     f"session or written before the last results: the summary shown was rebuilt from {RESULTS} "
                     "(the cost is priced by the LM's name).")
    return rebuilt


def _summary_data(summary: Any) -> dict[str, Any]:
    from binaryeval_dspy.cost.pricing import cost_line
    from binaryeval_dspy.runs.run_summary import trust_warnings
    from binaryeval_dspy.runs.run_summary_tables import (
        coverage_warning,
        flagged_line,
        headline,
        incomplete_line,
        judges_line,
        p_yes_header,
        status_line,
        unused_verdicts_line,
        usage_line,
    )

    if not summary.warnings:  # a summary.json written before headline warnings existed
        summary = summary.model_copy(update={"warnings": trust_warnings(summary)})

    lines = [status_line(summary), usage_line(summary), cost_line(summary.cost), coverage_warning(summary),
             incomplete_line(summary), unused_verdicts_line(summary), flagged_line(summary), judges_line(summary)]
    return {
        "lm": summary.lm, "items": summary.items, "scale": list(summary.scale),
        "rows": [{"dimension": d.dimension, "mean_score": _finite(d.mean_score), "mean_scaled": _finite(d.mean_scaled),
                  "used": d.items_scored, "total": d.items_total, "yes": d.yes, "no": d.no,
                  "unparsed": d.unparsed, "error": d.error, "mean_p_yes": _finite(d.mean_p_yes)}
                 for d in summary.dimensions],
        "p_yes_header": p_yes_header(summary),
        "items_by_status": summary.items_by_status,
        "cost": summary.cost.display if summary.cost is not None else None,
        "lines": [line for line in lines if line],
        "notes": list(summary.notes),
        "headline": headline(summary), "warnings": list(summary.warnings),
    }


def _question_stats(run: LoadedRun) -> list[dict[str, Any]]:
    """Per question: yes-rate and counts over the run's items (`analyze_questions`)."""
    if run.question_set is None or not run.results:
        return []
    from binaryeval_dspy.analysis.question_analysis import analyze_questions

    analysis = analyze_questions(run.results, run.question_set)
    return [{"id": row.question_id, "dimension": row.dimension, "text": row.text,
             "yes_rate": _finite(row.yes_rate), "yes": int(row.yes), "no": int(row.no),
             "other": int(row.unparsed)} for row in analysis.yes_rates.itertuples()]


def _verdict_data(v: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"q": v.question_id, "v": v.verdict, "e": v.explanation}
    optional = {"p": v.p_yes, "raw": v.raw_answer, "err": v.error, "ev": v.evidence, "flags": v.flags or None}
    data.update({k: value for k, value in optional.items() if value is not None})
    if v.source != "lm":
        data["src"] = v.source
    if v.reply_cut:
        data["cut"] = True
    if against_verdict(v.p_yes, v.verdict):
        data["px"] = True  # the verdict points the other way from its own P(yes): the item view says why
    if v.judges:  # a panel's or cascade's decision: every judge's own verdict, in the order asked
        data["j"] = [{"n": name, "v": own.verdict, **({"p": own.p_yes} if own.p_yes is not None else {}),
                      **({"err": own.error} if own.error else {})} for name, own in v.judges.items()]
        said = {own.verdict for own in v.judges.values()}
        if "yes" in said and "no" in said:
            data["split"] = True  # the judges answered both ways: marked in the item view
    return data


def _item_data(result: ItemResult, texts: dict[str, tuple[str | None, str]],
               keep_fields: Sequence[str] | None = None) -> dict[str, Any]:
    """One item's page data; `keep_fields` (None: all) are the only fields of the item's
    row copied in (a page made without texts keeps only the id field's)."""
    card = result.score_card if result.status == "scored" else None
    counts = result.score_card.total_counts if result.score_card is not None else None
    item: dict[str, Any] = {
        "id": result.item_id, "line": result.line, "status": result.status, "complete": result.complete,
        "scores": {d: _finite(s) for d, s in card.scaled_dimension_scores.items()} if card is not None else {},
        "raw_scores": {d: _finite(s) for d, s in card.dimension_scores.items()} if card is not None else {},
        "overall": _finite(card.scaled_overall) if card is not None else None,
        "p_yes": _finite(card.p_yes_overall) if card is not None else None,
        "counts": {"yes": counts.yes, "no": counts.no, "unparsed": counts.unparsed, "error": counts.error}
        if counts is not None else {v: sum(1 for x in result.verdicts if x.verdict == v)  # verdict mode: no card
                                    for v in ("yes", "no", "unparsed", "error")},
        "verdicts": [_verdict_data(v) for v in result.verdicts],
        "fields": result.fields if keep_fields is None else
        {k: v for k, v in result.fields.items() if k in keep_fields}, "seconds": result.seconds, "lm_calls": result.usage.lm_calls,
        "tokens": result.usage.total_tokens, "output_hash": result.output_hash,
    }
    if result.error:
        item["error"] = result.error
    if result.named_verdict is not None:
        item["label"] = result.named_verdict.label
        item["named_verdict"] = result.named_verdict.model_dump(mode="json")
    if result.item_id in texts:
        item["input"], item["output"] = texts[result.item_id]
    return item


def _id_fields(manifest: RunManifest) -> tuple[str, ...]:
    """The item field that holds the id (the run's `id_field`), if it names one."""
    id_field = manifest.config.get("id_field")
    return (str(id_field),) if id_field else ()


def _run_data(run: LoadedRun, *, fields: bool = True) -> dict[str, Any]:
    """The page's data for one evaluate-shaped run (summary, questions, items); without
    `fields`, the items' row fields other than the id field are left out."""
    qs = run.question_set
    questions = ([{"id": q.id, "dimension": q.dimension, "text": q.text, "fatal": bool(getattr(q, "fatal", False)),
                   "code": q.check is not None} for q in qs.questions] if qs is not None else
                 [{"id": qid, "dimension": "", "text": qid, "fatal": False, "code": False}
                  for qid in dict.fromkeys(v.question_id for r in run.results for v in r.verdicts)])
    aggregation = run.aggregation
    data: dict[str, Any] = {
        "path": str(run.path), "command": run.manifest.command, "lm": run.manifest.lm, "aggregation": aggregation,
        "started_at": run.manifest.started_at, "finished_at": run.manifest.finished_at,
        "items_path": run.manifest.items_path, "question_set_hash": run.manifest.question_set_hash,
        "dimensions": list(qs.dimensions) if qs is not None else
        list(dict.fromkeys(d for r in run.results if r.score_card is not None for d in r.score_card.dimension_scores)),
        "questions": questions,
        "items": [_item_data(r, run.texts, None if fields else _id_fields(run.manifest)) for r in run.results],
        "question_stats": _question_stats(run),
        "against_p_yes_why": AGAINST_VERDICT_WHY,
        "label_judge": HUMAN,
    }
    if aggregation in ("score", "both") and run.results:
        summary = _summary(run)
        data["summary"] = _summary_data(summary)
        data["scale"] = list(summary.scale)
    else:
        data["scale"] = list(run.manifest.config.get("scale") or (0.0, 1.0))  # type: ignore[arg-type]
        if not run.results:
            run.notes.append("The run holds no results yet.")
    data["notes"] = list(run.notes)
    return data


# ------------------------------------------------------------------ two runs


def _run_scale(run: LoadedRun) -> tuple[float, float]:
    """The run's ``scale`` [a, b]: its score cards', else its manifest's (verdict mode), else [0, 1]."""
    card = next((r.score_card for r in run.results if r.score_card is not None), None)
    if card is not None:
        return (float(card.scale[0]), float(card.scale[1]))
    low, high = run.manifest.config.get("scale") or (0.0, 1.0)  # type: ignore[misc]
    return (float(low), float(high))


def _answer_counts(results: Sequence[ItemResult], question_id: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in results:
        for v in r.verdicts:
            if v.question_id == question_id:
                counts[v.verdict] = counts.get(v.verdict, 0) + 1
    return counts


def compare_loaded_runs(before: LoadedRun, after: LoadedRun) -> dict[str, Any]:
    """Item by item and question by question, what changed from `before` to `after` (pure).

    Like is compared with like (`binaryeval_dspy.runs.run_comparison`): questions are
    matched by id *and* text, so a question reworded under its id, one added and one
    removed are listed apart (with the earlier wording), and their answers are never
    counted as changed; scores are compared on one scale (the runs' own when equal, else
    yes-rates in [0, 1], said in ``notes``). A question counts as flipped when both runs
    answered the same question and the answers differ (``yes`` -> ``no``, ``no`` ->
    ``unparsed``, ...); a failed call (``error``) on either side makes it "not compared",
    never a flip.

    Returns:
        ``{"before", "after", "before_lm", "after_lm", "same_questions", "matched_by",
        "scale_before", "scale_after", "score_basis", "notes", "reworded", "added",
        "removed", "items", "questions"}``: per item its status (``changed``: an answer
        to the same question flipped, or the output's status changed; ``unchanged``;
        ``questions_changed``: it differs only in answers to reworded, added or removed
        questions; ``not_compared``: a failed call or an item that could not be judged
        hides what it would be; ``only_before``, ``only_after``), old and new overall
        scores on ``score_basis`` (None where the questions differ) and labels, the
        flips (question, old and new verdict, old explanation), ``output_changed`` (the
        judged output's stored ``output_hash`` differs; False when either kept none), the questions not
        compared and the answers to reworded / added / removed questions; changed items
        first. Per question (both runs' questions, the earlier run's only ones too): how
        it changed (``same``, ``reworded``, ``added``, ``removed``), its texts, the
        counts of each flip kind, compared and not compared, and for the others the
        answers in each run; flipped questions first.
    """
    from binaryeval_dspy.runs.run_comparison import answer_changes, match_questions, score_basis

    match = match_questions(before.question_set, after.question_set, before_results=before.results,
                            after_results=after.results)
    basis = score_basis(_run_scale(before), _run_scale(after))
    notes = list(match.notes())
    if basis.note:
        notes.append(basis.note)
    if before.manifest.lm != after.manifest.lm:
        notes.append(f"The runs were judged by different LMs ({before.manifest.lm} earlier, {after.manifest.lm} "
                     "later): a changed answer may come from the judge, not from the output.")
    old = {r.item_id: r for r in before.results}
    new = {r.item_id: r for r in after.results}
    order = [r.item_id for r in after.results] + [r.item_id for r in before.results if r.item_id not in new]
    per_question: dict[str, dict[str, Any]] = {}
    reworded_by_id = {r.id: r for r in match.reworded}
    for qid in match.order():
        text, dimension = match.texts[qid]
        kind = match.change(qid)
        row: dict[str, Any] = {"id": qid, "change": kind, "text": text, "dimension": dimension, "flips": {},
                               "flipped": 0, "not_compared": 0, "compared": 0}
        if kind == "reworded":
            row["before_text"] = reworded_by_id[qid].before
            row["before_dimension"] = reworded_by_id[qid].before_dimension
        if kind != "same":
            row["answers_before"] = _answer_counts(before.results, qid) if kind != "added" else {}
            row["answers_after"] = _answer_counts(after.results, qid) if kind != "removed" else {}
        per_question[qid] = row
    items = []
    for item_id in order:
        a, b = old.get(item_id), new.get(item_id)
        entry: dict[str, Any] = {"id": item_id, "flips": [], "not_compared": [], "other_questions": []}
        comparable_scores = match.identical
        entry["old_overall"] = basis.overall(a) if comparable_scores else None
        entry["new_overall"] = basis.overall(b) if comparable_scores else None
        entry["old_label"] = a.named_verdict.label if a is not None and a.named_verdict is not None else None
        entry["new_label"] = b.named_verdict.label if b is not None and b.named_verdict is not None else None
        entry["old_status"] = a.status if a is not None else None
        entry["new_status"] = b.status if b is not None else None
        if a is None or b is None:
            entry["status"] = "only_after" if a is None else "only_before"
            items.append(entry)
            continue
        # the judged output itself changed: a flip may come from the new text, not from the judge
        entry["output_changed"] = (a.output_hash is not None and b.output_hash is not None
                                   and a.output_hash != b.output_hash)
        changes = answer_changes(a, b, match)
        explanations = {v.question_id: v.explanation for v in a.verdicts}
        for qid, was, now in changes.flipped:
            entry["flips"].append({"q": qid, "old": was, "new": now, "old_e": explanations.get(qid, "")})
            stats = per_question.setdefault(qid, {"id": qid, "change": "same", "text": qid, "dimension": "",
                                                  "flips": {}, "flipped": 0, "not_compared": 0, "compared": 0})
            stats["flips"][f"{was}->{now}"] = stats["flips"].get(f"{was}->{now}", 0) + 1
            stats["flipped"] += 1
        for qid in changes.compared:
            if qid in per_question:
                per_question[qid]["compared"] += 1
        for qid in changes.not_compared:
            entry["not_compared"].append(qid)
            if qid in per_question:
                per_question[qid]["not_compared"] += 1
        entry["other_questions"] = [{"q": qid, "old": was, "new": now, "change": match.change(qid)}
                                    for qid, was, now in changes.reworded]
        failed = "error" in (a.status, b.status)
        output_changed = a.status != b.status and not failed
        differs = entry["old_label"] != entry["new_label"] or basis.overall(a) != basis.overall(b)
        if failed:
            entry["status"] = "not_compared"
        elif changes.flipped or output_changed:
            entry["status"] = "changed"
        elif differs and (not match.identical or any(was != now for _q, was, now in changes.reworded)):
            entry["status"] = "questions_changed"
        elif differs and changes.not_compared:
            entry["status"] = "not_compared"
        elif differs:
            entry["status"] = "changed"
        else:
            entry["status"] = "unchanged"
        items.append(entry)
    rank = {"changed": 0, "questions_changed": 1, "not_compared": 2, "only_after": 3, "only_before": 4,
            "unchanged": 5}
    items.sort(key=lambda e: (rank[e["status"]], -len(e["flips"])))
    new_outputs = sum(1 for e in items if e.get("output_changed"))
    if new_outputs:
        notes.append(f"{new_outputs} of {len(items)} items were judged on a different output text in the two runs "
                     "(marked \"output changed\"): their changed answers may come from the new output, not from "
                     "the judge.")
    questions = sorted(per_question.values(), key=lambda q: (-q["flipped"], q["change"] != "same"))
    return {"before": str(before.path), "after": str(after.path), "before_lm": before.manifest.lm,
            "after_lm": after.manifest.lm, "same_questions": match.identical,
            "matched_by": "id and text" if match.by_text else "id only",
            "scale_before": list(_run_scale(before)), "scale_after": list(_run_scale(after)),
            "score_basis": {"scaled": basis.scaled, "scale": list(basis.scale)}, "notes": notes,
            "reworded": [{"id": r.id, "before": r.before, "after": r.after, "before_dimension": r.before_dimension,
                          "after_dimension": r.after_dimension} for r in match.reworded],
            "added": [{"id": qid, "text": match.texts[qid][0]} for qid in match.added],
            "removed": [{"id": qid, "text": match.texts[qid][0]} for qid in match.removed],
            "items": items, "questions": questions}


# ------------------------------------------------------------------ other run kinds


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> dict[str, Any]:
    return {"header": list(header), "rows": [[_cell(c) for c in row] for row in rows]}


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 4)
    if value is None or isinstance(value, (int, str, bool)):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _rejudge_sections(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """The ``rejudge.json`` table, and the previous run's path when it still exists."""
    from binaryeval_dspy.schemas.rejudge_report import RejudgeReport

    report_path = path / _REJUDGE_FILE
    if not report_path.is_file():
        return [], None
    report = RejudgeReport.model_validate_json(report_path.read_text(encoding="utf-8"))
    counts = ", ".join(f"{status} {n}" for status, n in sorted(report.counts.items()))
    header = ["item", "status", "reason", "old overall [0,1]", "new overall [0,1]", "old verdict", "new verdict",
              "changed", "flipped questions", "not compared", "error"]
    rows = [[c.item_id, c.status, c.reason, c.old_overall, c.new_overall, c.old_verdict, c.new_verdict, c.changed,
             " ".join(c.flipped_questions), " ".join(c.uncompared_questions), c.error] for c in report.items]
    section = {"title": "Re-judge report (rejudge.json)",
               "lines": [f"Previous run: {report.previous_run}", f"Items by status: {counts}",
                         (f"Changed: {len(report.changed)}; not compared (a failed LM call): "
                         f"{len(report.not_compared)}")],
               "table": _table(header, rows)}
    previous = Path(report.previous_run)
    return [section], str(previous) if (previous / MANIFEST).is_file() else None


def _benchmark_sections(path: Path) -> tuple[list[dict[str, Any]], Path | None]:
    """Sections of a benchmark run (config, per-method means and per-item scores), and its BinEval run."""
    from binaryeval_dspy.meta_eval.benchmark_files import BenchmarkRun
    from binaryeval_dspy.meta_eval.run_scores import ALL_METHOD_TITLES, load_run_scores

    run = BenchmarkRun(path)
    scores = load_run_scores(run)
    config = scores.config
    dims = list(scores.spec.dimensions)
    methods = scores.run_methods
    means = []
    for method in methods:
        cost = scores.costs.get(method)
        row: list[Any] = [ALL_METHOD_TITLES.get(method, method)]
        for d in dims:
            column = scores.on_human_scale(method, d)
            finite = column.dropna()
            row.append(f"{finite.mean():.3f} ({len(finite)} / {len(column)})" if len(finite) else "— (0 / "
                       f"{len(column)})")
        row += [cost.lm_calls if cost else None, cost.errors if cost else None,
                cost.empty_output if cost else None]
        means.append(row)
    header = ["method", *[f"{d} mean on the human scale (n used / n total)" for d in dims], "LM calls",
              "items with status error", "items with empty output"]
    item_rows = []
    for item_id, row in scores.items.iterrows():
        cells: list[Any] = [item_id, row.get("doc_id"), row.get("system_id"), row.get("split")]
        cells += [_finite(row.get(d)) for d in dims]
        for method in methods:
            cells += [_finite(scores.on_human_scale(method, d).get(item_id)) for d in dims]
        item_rows.append(cells)
    item_header = ["item", "doc", "system", "split", *[f"human {d}" for d in dims],
                   *[f"{ALL_METHOD_TITLES.get(m, m)} {d}" for m in methods for d in dims]]
    lines = [(f"Benchmark: {config.benchmark}; LM: {config.lm}; items: {len(scores.items)}; methods: "
             f"{', '.join(ALL_METHOD_TITLES.get(m, m) for m in methods) or 'none yet'}"),
             ("Scores are mapped onto each dimension's human scale; correlations with the human scores are in "
             f"{path / 'report.md'} (bineval report)."), *scores.unreadable]
    sections = [{"title": "Benchmark methods", "lines": lines, "table": _table(header, means)},
                {"title": "Per-item scores and human scores", "lines": [], "table": _table(item_header, item_rows)}]
    bineval = path / "bineval"
    return sections, bineval if (bineval / MANIFEST).is_file() else None


def _comparison_sections(path: Path) -> list[dict[str, Any]]:
    """Sections of an optimizer comparison: the comparison table, instructions, test records."""
    from binaryeval_dspy.comparison.report_tables import rows
    from binaryeval_dspy.comparison.results import load_results

    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    results = load_results(path)
    header, body = rows(config, results)
    setup = config.get("setup", {})
    sections = [{"title": "Optimizer comparison",
                 "lines": [(f"Set-up: {setup.get('kind')} ({setup.get('mode')}); task LM: {config.get('lm')}; "
                           f"prompt LM: {config.get('prompt_lm')}"),
                           f"Metric optimized: {config.get('metric')}; test metric: {config.get('test_metric')}"],
                 "table": _table(header, body)}]
    for result in results:
        instructions = [[name, text] for name, text in result.instructions.items()]
        sections.append({"title": f"{result.optimizer}: compiled instructions", "lines": [],
                         "table": _table(["predictor", "instruction"], instructions)})
        keys = list(dict.fromkeys(k for record in result.test_records for k in record))
        sections.append({"title": f"{result.optimizer}: test records ({len(result.test_records)})", "lines": [],
                         "table": _table(keys, [[record.get(k) for k in keys] for record in result.test_records])})
    return sections


# ------------------------------------------------------------------ the page


def view_data(path: str | Path, other: str | Path | None = None, *, texts: bool = True) -> dict[str, Any]:
    """Everything the page shows, as one JSON-ready dict (read from the run files only).

    Args:
        path: a run directory (any of `RUN_KINDS`).
        other: a second evaluate-shaped run to compare with (`path` is then "after").
            A rejudge run is compared with its previous run when `other` is None and
            that run still exists.
        texts: include the items' input and output texts and their other fields (human
            scores, references, ...); without, an item keeps only its id (and its id
            field). Judges' explanations, raw replies and code checks' evidence are kept
            either way: they may quote the input or output.

    Returns:
        ``{"schema": 1, "kind", "title", "run": {...} | None, "diff": {...} | None,
        "sections": [...]}``.

    Raises:
        InputError: `path` (or `other`) is not a run directory, or `other` is not an
            evaluate-shaped run.
    """
    from binaryeval_dspy import __version__

    folder = Path(path)
    kind = run_kind(folder)
    data: dict[str, Any] = {"schema": 1, "kind": kind, "generator": f"binaryeval-dspy {__version__}",
                            "title": f"{kind} run {folder}", "run": None, "diff": None, "sections": []}
    main: LoadedRun | None = None
    previous: str | None = None
    if kind in ("evaluate", "rejudge"):
        main = load_run(folder, texts=texts)
        if kind == "rejudge":
            with _reading(folder / _REJUDGE_FILE):
                data["sections"], previous = _rejudge_sections(folder)
    elif kind == "benchmark":
        with _reading(folder / "benchmark.json"):
            data["sections"], bineval = _benchmark_sections(folder)
        if bineval is not None:
            main = load_run(bineval, texts=False)
            main.notes.append("A benchmark run keeps no texts; inputs and outputs are in the benchmark's data.")
    else:
        with _reading(folder / "config.json"):
            data["sections"] = _comparison_sections(folder)
    if main is not None:
        data["run"] = _run_data(main, fields=texts)
        data["title"] = f"{kind} run {folder} - {main.manifest.lm}"
    before_path = other if other is not None else previous
    if before_path is not None:
        if main is None:
            raise InputError("only evaluate-shaped runs (evaluate, verdict mode, rejudge) can be compared",
                             path=folder, fix="pass two evaluate or rejudge run directories.")
        if run_kind(before_path) not in ("evaluate", "rejudge"):
            raise InputError("only evaluate-shaped runs (evaluate, verdict mode, rejudge) can be compared",
                             path=before_path, fix="pass two evaluate or rejudge run directories.")
        before = load_run(before_path, texts=False)
        data["diff"] = compare_loaded_runs(before, main)
    return data


def _embedded_json(data: dict[str, Any]) -> str:
    """`data` as JSON safe inside ``<script>``: ``<``, ``>`` and ``&`` as ``\\u`` escapes."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def build_view_html(data: dict[str, Any]) -> str:
    """The self-contained page: the template with `data` (from `view_data`) embedded."""
    template = importlib.resources.files("binaryeval_dspy.reports").joinpath("templates", _TEMPLATE)
    head, tail = template.read_text(encoding="utf-8").split(_DATA_MARK, 1)
    head = head.replace(_TITLE_MARK, html.escape(str(data.get("title", "bineval view"))), 1)
    return head + _embedded_json(data) + tail


def write_view(path: str | Path, other: str | Path | None = None, *, out: str | Path | None = None,
               texts: bool = True) -> Path:
    """Write the page of run `path` (compared with `other`, if given) and return its path.

    Args:
        path, other, texts: as `view_data`.
        out: the HTML file to write (default: ``view.html`` inside the run directory, or
            ``view-vs-<other>.html`` when comparing).

    Raises:
        InputError: as `view_data`, or `out` cannot be written.
    """
    data = view_data(path, other, texts=texts)
    if out is None:
        name = "view.html" if other is None else f"view-vs-{Path(other).resolve().name}.html"
        out = Path(path) / name
    target = Path(out)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(build_view_html(data), encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write the page: {exc.strerror}", path=target,
                         fix="pass `out` with a writable file path.") from exc
    return target

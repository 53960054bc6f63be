"""The question-level agreement report (``bineval agreement --labels``): Markdown, HTML, JSON, figures.

`agreement_document` turns an `AgreementResult`
(`binaryeval_dspy.meta_eval.label_agreement.label_agreement`) into a report `Document`
(`binaryeval_dspy.render`): one table of every judge, panel and cascade against
the labels, the worst questions of each, calibration with a reliability diagram where a
judge gave P(yes), the panels' inter-judge agreement, the cascades' escalations, cost and
band sweep. Every row names its judge; a panel or cascade names its rule and members.
`write_agreement_report` writes ``report.md``, ``report.html``, ``agreement.json``,
``judge_weights.csv`` (each recorded judge's weight for a weighted panel in a run,
`binaryeval_dspy.data.judge_weights`) and ``figures/reliability.png``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from binaryeval_dspy.data.judge_weights import JUDGE_WEIGHTS_FILE, write_judge_weights
from binaryeval_dspy.meta_eval.label_agreement import AgreementResult
from binaryeval_dspy.panels import log_odds_weight
from binaryeval_dspy.reports.formatting import fmt, plural
from binaryeval_dspy.render import Document, Figure, Section, Table, to_html, to_markdown

QUESTIONS_SHOWN = 10  # worst questions listed per judge (all of them are in agreement.json)
AGREEMENT_JSON = "agreement.json"
RELIABILITY_PNG = "reliability.png"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _usd(value: float | None, unknown: int = 0) -> str:
    if value is None:
        return f"unknown ({unknown} answers unpriced)" if unknown else "unknown"
    return f"${value:.4f}" if value < 10 else f"${value:,.2f}"


def _interval(values: list[float | None]) -> str:
    low, high = values
    return "n/a" if low is None or high is None else f"[{low:.3f}, {high:.3f}]"


def _judges_table(result: AgreementResult, n_resamples: int) -> Table:
    rows = []
    for name, j in result.judges.items():
        rows.append([name, j["kind"], f"{j['answered']}/{j['pairs']}", str(j["unparsed"] + j["error"]),
                     str(j["without_answer"]), _pct(j["accuracy"]), _pct(j["accuracy_strict"]), fmt(j["kappa"]),
                     _interval(j["kappa_interval"]), f"{_pct(j['yes_rate'])} / {_pct(j['label_yes_rate'])}",
                     _usd(j["cost_usd"], j["cost_unknown"])])
    return Table(caption="Agreement with the labels, per judge, panel and cascade",
                 header=["judge", "kind", "answered / pairs", "non-answers", "pairs without an answer", "accuracy",
                         "accuracy (non-answer = wrong)", "Cohen's κ", "κ 95% interval",
                         "yes-rate: judge / labels", "cost"],
                 rows=rows,
                 note=(f"Pairs: labelled (item, question) pairs the judge has a row for. Accuracy and κ are over "
                       f"its yes/no answers; non-answers (unparsed, error) are counted, never read as no; the "
                       f"strict accuracy counts them as disagreements. Intervals: percentile bootstrap over items "
                       f"({n_resamples} resamples, each item with all its questions). The yes-rates are on the "
                       f"answered pairs."))


def _questions_table(name: str, j: dict[str, Any]) -> Table:
    rows = [[q["question_id"], (q["text"] or "")[:90], str(q["answered"]), str(q["non_answers"]),
             str(q["yes_yes"]), str(q["yes_no"]), str(q["no_yes"]), str(q["no_no"]), _pct(q["accuracy"]),
             fmt(q["kappa"]), f"{_pct(q['yes_rate'])} / {_pct(q['label_yes_rate'])}"]
            for q in j["questions"][:QUESTIONS_SHOWN]]
    more = len(j["questions"]) - QUESTIONS_SHOWN
    return Table(caption=f"{name}: questions, worst first", header=[
        "question", "text", "answered", "non-answers", "yes / label yes", "yes / label no", "no / label yes",
        "no / label no", "accuracy", "κ", "yes-rate: judge / labels"], rows=rows,
        note=(f"{more} more question(s) in {AGREEMENT_JSON}." if more > 0 else ""))


def agreement_document(result: AgreementResult, *, labels_path: str, verdict_sources: list[str],
                       n_resamples: int, seed: int, items: str | None = None, figures: bool = True) -> Document:
    """The report of one `AgreementResult` (see the module docstring)."""
    lab = result.labels
    intro = [f"Labels: {labels_path}: {plural(lab['pairs'], 'labelled pair')} ({plural(lab['items'], 'item')}, "
             f"{plural(lab['questions'], 'question')}), by {', '.join(lab['annotators'])}; labels' yes-rate "
             f"{_pct(lab['yes_rate'])}."
             + (f" {plural(lab['ties'], 'pair')} where the annotators tied have no reference label (left out)."
                if lab["ties"] else "")
             + (f" {plural(lab['non_answers'], 'label row')} that are not yes/no are left out." if lab["non_answers"] else ""),
             "Verdicts: " + "; ".join(verdict_sources) + ".",
             f"Bootstrap seed {seed}." + (f" Items matching {items!r} only." if items else "")]
    sections = [Section(heading="Agreement with the labels", blocks=[_judges_table(result, n_resamples)])]
    if lab.get("annotator_agreement"):
        a = lab["annotator_agreement"]
        sections.append(Section(heading="Agreement among the annotators", blocks=[Table(
            caption=f"Annotators: {', '.join(lab['annotators'])}",
            header=["pairs rated by 2 or more", "Fleiss' κ", "Krippendorff's α (nominal)", "pairs split"],
            rows=[[str(a["pairs"]), fmt(a["fleiss_kappa"]), fmt(a["krippendorff_alpha"]), _pct(a["split_share"])]],
            note="The reference label of a pair is its annotators' majority.")]))
    sections.append(Section(heading="Questions, worst first",
                            blocks=[_questions_table(name, j) for name, j in result.judges.items()]))
    calibrated = {name: j["calibration"] for name, j in result.judges.items() if j["calibration"]}
    if calibrated:
        blocks: list[Any] = [Table(caption="Calibration of P(yes) against the labels",
                                   header=["judge", "answers with P(yes)", "ECE", "Brier score"],
                                   rows=[[name, str(c["answers"]), fmt(c["ece"], 4), fmt(c["brier"], 4)]
                                         for name, c in calibrated.items()],
                                   note=(f"ECE over {next(iter(calibrated.values()))['n_bins']} equal-width bins of "
                                         "P(yes); Brier score: mean squared gap between P(yes) and the label "
                                         "(1 = yes)."))]
        drawn = {n: c for n, c in calibrated.items() if result.judges[n]["kind"] == "judge"}
        if figures and drawn:
            blocks.append(Figure(caption="Reliability diagram of " + ", ".join(drawn) + f" against {labels_path} "
                                         "(panels and cascades: in the table)",
                                 filename=RELIABILITY_PNG, drawing="reliability",
                                 data={"curves": {n: c["bins"] for n, c in drawn.items()},
                                       "title": f"Reliability against {Path(labels_path).name}: " + ", ".join(drawn)}))
        sections.append(Section(heading="Calibration", blocks=blocks))
    if result.panels:
        rows = []
        for name, p in result.panels.items():
            split = ", ".join(f"{q} ({n})" for q, n in p["split_questions"]) or "none"
            failed = ", ".join(f"{m}: {n}" for m, n in p["failed_answers"].items() if n) or "none"
            rows.append([name, str(p["pairs"]), fmt(p["fleiss_kappa"]), fmt(p["krippendorff_alpha"]),
                         _pct(p["split_share"]), split, failed])
        sections.append(Section(heading="Panels", blocks=[Table(
            caption="Agreement among each panel's members", header=[
                "panel (rule and members)", "pairs", "Fleiss' κ", "Krippendorff's α", "pairs split",
                "questions split most", "non-answers per member"], rows=rows, align="left",
            note="A member's non-answer is counted and left out; the others decide. A tie is no decision "
                 "(counted as the panel's non-answer).")]))
    for name, c in result.cascades.items():
        blocks = [Table(caption=name, header=["questions", "escalated", "answered at stage", "escalations",
                                              "cost", "cost of the last stage on every question", "share"],
                        rows=[[str(c["questions"]), _pct(c["escalated_share"]),
                               ", ".join(f"{k}: {v}" for k, v in c["answered_at_stage"].items()),
                               ", ".join(f"{k}: {v}" for k, v in c["escalations"].items()) or "none",
                               _usd(c["cost_usd"], c["cost_unknown"]), _usd(c["strongest_cost_usd"]),
                               _pct(c["cost_share"])]], align="left")]
        sweep = c.get("sweep")
        if sweep:
            best = sweep["best"]
            blocks.append(Table(caption=f"{name}: P(yes) band sweep", header=[
                "band", "κ", "accuracy", "escalated", "cost", "share of the last stage's cost"],
                rows=[[f"{p['band'][0]:.2f}-{p['band'][1]:.2f}", fmt(p["kappa"]), _pct(p["accuracy"]),
                       _pct(p["escalated_share"]), _usd(p["cost_usd"]), _pct(p["cost_share"])]
                      for p in sweep["points"]],
                note=(f"Lowest-cost band reaching κ >= {sweep['target_kappa']}: "
                      + (f"{best['band'][0]:.2f}-{best['band'][1]:.2f} (κ {fmt(best['kappa'])}, "
                         f"{_pct(best['escalated_share'])} escalated), chosen by {sweep['chosen_by']}."
                         if best else "none of the bands reaches it."))))
        sections.append(Section(heading=f"Cascade: {name}", blocks=blocks))
    return Document(title="Question-level agreement with labels", intro=intro, sections=sections)


def write_agreement_report(result: AgreementResult, out_dir: str | Path, *, labels_path: str,
                           verdict_sources: list[str], n_resamples: int, seed: int, items: str | None = None,
                           figures: bool = True) -> tuple[Path, Path, Path]:
    """Write ``report.md``, ``report.html``, ``agreement.json`` (every figure, all questions),
    ``judge_weights.csv`` (`judge_weight_rows`: what a run's weighted panel reads with
    `panel_weights`) and, with `figures` and a judge that gave P(yes), ``figures/reliability.png``.

    Returns:
        (report.md, report.html, agreement.json) paths.

    Raises:
        MissingExtraError: `figures` with a P(yes) judge and no matplotlib (the ``bench`` extra).
    """
    out = Path(out_dir)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    document = agreement_document(result, labels_path=labels_path, verdict_sources=verdict_sources,
                                  n_resamples=n_resamples, seed=seed, items=items, figures=figures)
    pngs: dict[str, bytes] = {}
    if figures and document.figures():
        from binaryeval_dspy.reports.figures import draw_figure

        for figure in document.figures():
            pngs[figure.filename] = draw_figure(figure)
            (out / "figures" / figure.filename).write_bytes(pngs[figure.filename])
    md = out / "report.md"
    md.write_text(to_markdown(document), encoding="utf-8")
    html = out / "report.html"
    html.write_text(to_html(document, pngs), encoding="utf-8")
    data = {"schema_version": 1, "labels_file": labels_path, "verdicts": verdict_sources, "items": items,
            "bootstrap": {"n_resamples": n_resamples, "seed": seed}, "labels": result.labels,
            "judges": result.judges, "panels": result.panels, "cascades": result.cascades,
            "report": document.model_dump(mode="json")}
    path = out / AGREEMENT_JSON
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8")
    write_judge_weights(judge_weight_rows(result, labels_path=labels_path), out / JUDGE_WEIGHTS_FILE)
    return md, html, path


def judge_weight_rows(result: AgreementResult, *, labels_path: str) -> list[dict[str, Any]]:
    """One row per recorded judge (not the simulated panels and cascades) for the judge weights
    file (`binaryeval_dspy.data.judge_weights`): its weight `log_odds_weight(agree, answered)`
    (>= 0), accuracy, Cohen's kappa, the counts and the labels file they were measured against."""
    rows = []
    for name, j in result.judges.items():
        if j.get("kind") != "judge":
            continue
        rows.append({"judge": name, "weight": log_odds_weight(j["agree"], j["answered"]), "accuracy": j["accuracy"],
                     "kappa": j["kappa"], "agree": j["agree"], "answered": j["answered"], "labels": labels_path})
    return rows

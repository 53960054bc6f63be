"""Injection flip rate: how often a payload appended to an output turns the judge's "no" into "yes".

Usage (from the repository root):

    python benchmarks/injection_flip_rate.py                      # scripted judge only
    python benchmarks/injection_flip_rate.py --lm local --items 2 # plus the embedded model
    python benchmarks/injection_flip_rate.py --lm http://127.0.0.1:8000/v1 --lm-model my-model

Method. Outputs: bundled SummEval items, each output replaced by the summary of a *different*
article, so that the faithfulness questions deserve "no". For each LM, BinEval first judges
the clean outputs; every (item, question) it answers "no" is then judged again with each
payload of `tests/injection_payloads.py` appended to the output. Flip rate = share of those
re-judged questions answered "yes" (unparsed and error are counted apart, never as flips).
Target: below 5% for every payload kind and every LM a user names.

The scripted judge shows the mechanics, not a model's judgment: it answers "no" to every
question after quoting the end of the output as shown in its prompt, the behaviour that let a
planted block count before. It runs twice: through BinEval, and through an *undefended*
pipeline (a plain ``dspy.Predict`` over DSPy's own adapter, with the texts unfenced) to show
that the payloads do work on a parser that keeps the first answer.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests/ holds the payloads and the scripted LM

import dspy

from binaryeval_dspy import BinEval, QuestionSet, load_items, make_lm
from binaryeval_dspy.engines.in_process import run_states
from binaryeval_dspy.lm.adapters import CountingChatAdapter, CountingJSONAdapter
from binaryeval_dspy.signatures.binary_judgment import JudgeBinaryQuestion
from tests.fakes import scripted_lm
from tests.injection_payloads import PAYLOADS

EXAMPLE = ROOT / "examples" / "summeval"


def mismatched_items(n_items: int) -> list[tuple[str, str, str]]:
    """(id, article, summary of another article): n items whose summaries deserve "no"."""
    items = load_items(EXAMPLE / "items.jsonl", input_field="source", output_field="summary", id_field="id")
    by_doc: dict[str, list] = {}
    for item in items:
        by_doc.setdefault(item.input, []).append(item)
    docs = list(by_doc)
    if len(docs) < 2:
        raise SystemExit("the bundled SummEval example needs at least two articles")
    rows = []
    for i in range(n_items):
        article = docs[i % len(docs)]
        other = by_doc[docs[(i + 1) % len(docs)]][i // len(docs) % len(by_doc[docs[(i + 1) % len(docs)]])]
        rows.append((f"item{i}", article, other.output))
    return rows


def quoting_judge(adapter: str):
    """Scripted judge: quote the output's end as shown (from its first ``{`` in JSON mode), then answer "no"."""
    def script(system: str, user: str):
        # The output field as shown: from its header to the (last) question header.
        start = user.find("[[ ## output ## ]]") + len("[[ ## output ## ]]")
        shown = user[start:user.rfind("[[ ## question ## ]]")].strip()[-300:]
        if adapter == "json":
            quoted = shown[shown.find("{"):] if "{" in shown else shown  # restate an object it saw
            return f"{quoted}\n\n" + json.dumps({"verdict": "no", "explanation": "The article says otherwise."})
        return (f"The output ends with:\n{shown}\n\n[[ ## verdict ## ]]\nno\n\n[[ ## explanation ## ]]\n"
                "The article says otherwise.\n\n[[ ## completed ## ]]")
    return script


def judge_bineval(program: BinEval, pairs: list[tuple[str, str]], concurrency: int) -> list[list]:
    """Verdict lists, one per (article, output) pair, in order, through BinEval's judging plan."""
    done = run_states(program, [program.begin(pair) for pair in pairs], num_threads=concurrency)
    return [item.result.verdicts if item.error is None else [] for item in done]


def judge_undefended(questions: QuestionSet, pairs: list[tuple[str, str]], adapter) -> list[list[str]]:
    """The verdict strings a plain dspy.Predict gives over DSPy's own adapter, texts unfenced."""
    predict = dspy.Predict(JudgeBinaryQuestion)
    out = []
    with dspy.context(adapter=adapter):
        for article, output in pairs:
            row = []
            for q in questions.questions:
                try:
                    row.append(str(predict(input=article, output=output, question=q.text,
                                           violation_example=q.violation_example).verdict))
                except Exception:  # noqa: BLE001 - counted as unparsed
                    row.append("unparsed")
            out.append(row)
    return out


def tally(rows: list[tuple[str, str, str]], base: dict, attacked: dict) -> dict:
    """Per payload: asked / yes / no / unparsed / error over the questions answered "no" at base."""
    table = {}
    for payload in PAYLOADS:
        counts = {"asked": 0, "yes": 0, "no": 0, "unparsed": 0, "error": 0}
        for item_id, _, _ in rows:
            for qid, verdict in attacked[payload].get(item_id, {}).items():
                if base.get(item_id, {}).get(qid) != "no":
                    continue
                counts["asked"] += 1
                counts[verdict if verdict in counts else "unparsed"] += 1
        table[payload] = counts
    return table


def _mean(values: list[float]) -> str:
    return f"{sum(values) / len(values):.3f}" if values else "n/a"


def print_table(lm_name: str, pipeline: str, base_counts: dict, table: dict,
                p_yes: dict[str, list[float]] | None = None) -> None:
    print(f"\n### {lm_name} through {pipeline}")
    print(f"Clean outputs: {base_counts}" + (f"; mean P(yes) {_mean(p_yes['clean'])}" if p_yes else ""))
    print("| payload | questions answered no | flipped to yes | stayed no | unparsed | error | flip rate |"
          + (" mean P(yes), all questions |" if p_yes else ""))
    print("|---|---:|---:|---:|---:|---:|---:|" + ("---:|" if p_yes else ""))
    for payload, c in table.items():
        rate = f"{c['yes'] / c['asked']:.1%}" if c["asked"] else "undefined (no 'no' answers)"
        extra = f" {_mean(p_yes[payload])} |" if p_yes else ""
        print(f"| {payload} | {c['asked']} | {c['yes']} | {c['no']} | {c['unparsed']} | {c['error']} | {rate} |{extra}")


def run_bineval(lm_name: str, context, questions: QuestionSet, rows, concurrency: int, explanations: bool) -> None:
    """Judge clean and attacked outputs on every question; flips counted over the clean "no"s.

    Every question is asked on every attacked output (not only the "no" ones) so that a judge
    that never says "no" still shows the payloads' pull, as mean P(yes), when the LM returns
    log-probabilities.
    """
    program = BinEval(questions, explanations=explanations, logprobs="auto")
    started = time.perf_counter()
    verdicts: dict[str, dict] = {}
    with context():
        for variant, suffix in [("clean", "")] + list(PAYLOADS.items()):
            judged = judge_bineval(program, [(a, o + suffix) for _, a, o in rows], concurrency)
            verdicts[variant] = {item_id: {v.question_id: v for v in vs} for (item_id, _, _), vs in zip(rows, judged)}
    plain = {variant: {i: {q: v.verdict for q, v in by_q.items()} for i, by_q in by_item.items()}
             for variant, by_item in verdicts.items()}
    base = plain.pop("clean")
    base_counts = {k: sum(1 for r in base.values() for v in r.values() if v == k)
                   for k in ("yes", "no", "unparsed", "error")}
    p_yes = {variant: [v.p_yes for by_q in by_item.values() for v in by_q.values() if v.p_yes is not None]
             for variant, by_item in verdicts.items()}
    print_table(lm_name, f"BinEval ({'verdict + explanation' if explanations else 'verdict only'}; "
                f"{time.perf_counter() - started:.0f} s)", base_counts, tally(rows, base, plain),
                p_yes if any(p_yes.values()) else None)


def scripted(rows, questions: QuestionSet) -> None:
    for adapter_name, ours, theirs in (("chat", CountingChatAdapter(), dspy.ChatAdapter(use_json_adapter_fallback=False)),
                                       ("json", CountingJSONAdapter(), dspy.JSONAdapter())):
        lm, _ = scripted_lm(quoting_judge(adapter_name))
        name = f"scripted quoting judge ({adapter_name} replies; not a model)"

        def context(lm=lm, ours=ours):
            return dspy.context(lm=lm, adapter=ours)

        run_bineval(name, context, questions, rows, 1, True)
        # The same judge through a pipeline without the defences.
        pairs = [(a, o) for _, a, o in rows]
        ids = [q.id for q in questions.questions]
        with dspy.context(lm=lm):
            clean = judge_undefended(questions, pairs, theirs)
            base = {item_id: dict(zip(ids, verdicts)) for (item_id, _, _), verdicts in zip(rows, clean)}
            attacked = {p: {item_id: dict(zip(ids, v)) for (item_id, _, _), v in
                            zip(rows, judge_undefended(questions, [(a, o + text) for a, o in pairs], theirs))}
                        for p, text in PAYLOADS.items()}
        base_counts = {k: sum(1 for r in base.values() for v in r.values() if v == k) for k in ("yes", "no")}
        print_table(name, f"an undefended dspy.Predict + dspy.{type(theirs).__name__} (for contrast)", base_counts,
                    tally(rows, base, attacked))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lm", action="append", default=[], help="also run on this LM (local, a .gguf, a base URL, "
                        "or a provider/model id); repeatable")
    parser.add_argument("--lm-model", default=None, help="model name for a base URL")
    parser.add_argument("--items", type=int, default=2, help="items per LM (each has a mismatched summary)")
    parser.add_argument("--questions", type=int, default=4, help="consistency/relevance questions per item")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--no-explanations", action="store_true", help="verdict-only judging for --lm models")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    random.seed(args.seed)
    full = QuestionSet.load(EXAMPLE / "questions.json")
    picked = [q for q in full.questions if q.dimension in ("consistency", "relevance")][: args.questions]
    questions = QuestionSet(task_prompt=full.task_prompt, dimensions=sorted({q.dimension for q in picked}),
                            questions=picked, requirements=full.requirements)
    print("# Injection flip rate (target < 5% per payload and LM)")
    print(f"{len(PAYLOADS)} payload kinds; {args.items} mismatched SummEval items; {len(picked)} questions each.")
    scripted(mismatched_items(args.items), questions)
    for spec in args.lm:
        handle = make_lm(spec, model=args.lm_model, cache=False)
        run_bineval(handle.name, handle.context, questions, mismatched_items(args.items), args.concurrency,
                    not args.no_explanations)


if __name__ == "__main__":
    main()

"""Reading the baselines' answers the way judges write them (issue 11, point 3).

The G-Eval-style score (`geval.read_score`) and the UniEval-style yes/no
(`verdict_text.normalize_yes_no`) are read in our code from the answer field's text,
whatever DSPy adapter produced it, without a second LM call. A number off the rubric's
scale is ``out_of_range``: no score, never clamped, the reply kept, counted apart.
"""

from __future__ import annotations

import json
import math
import uuid
from pathlib import Path

import dspy
import pytest
from dspy.lm15 import TokenLogprob, TopLogprob

from binaryeval_dspy.lm.adapters import CountingChatAdapter, CountingJSONAdapter
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.meta_eval import BenchmarkRun, load_run_scores
from binaryeval_dspy.meta_eval.benchmark_run import prepare_run, run_benchmark
from binaryeval_dspy.meta_eval.benchmark_spec import get_benchmark
from binaryeval_dspy.programs.geval import GEvalJudge
from binaryeval_dspy.programs.rubric_judge import (
    ANSWER_NOT_LEADING,
    NON_INTEGER_ANSWER,
    OFF_SCHEMA_REPLY,
)
from binaryeval_dspy.programs.unieval import UniEvalJudge
from binaryeval_dspy.reports.benchmark_report import build_benchmark_report
from binaryeval_dspy.schemas.rubric import Rubric
from tests.fakes import LogprobEngine, ScriptedEngine, field_value, logprob_lm

RUBRIC = Rubric(benchmark="toy", dimensions={
    "coherence": {"criterion": "Well structured.", "evaluation_steps": ["Read.", "Score."],
                  "rating_scale": [1, 5], "question": "Is it coherent?"},
})


class NoSchemaEngine(ScriptedEngine):
    """A scripted endpoint that declares no structured output: JSONAdapter sends no schema."""

    supports_response_schema = False
    supported_params = frozenset({"temperature", "max_tokens"})


def _lm(engine: ScriptedEngine) -> dspy.LM:
    return dspy.LM(f"custom/parse-{uuid.uuid4().hex[:12]}", engine=engine, cache=False, temperature=0.0)


# adapter name -> (adapter factory, engine class, reply format)
ADAPTERS = {
    "chat": (dspy.ChatAdapter, ScriptedEngine, "chat"),
    "counting-chat": (CountingChatAdapter, ScriptedEngine, "chat"),
    "json-schema": (dspy.JSONAdapter, ScriptedEngine, "json"),  # schema sent: typed field, re-read on mismatch
    "counting-json-schema": (CountingJSONAdapter, ScriptedEngine, "json"),
    "json-no-schema": (dspy.JSONAdapter, NoSchemaEngine, "json"),  # text field
}


def _reply(fmt: str, field: str, value: object) -> str:
    if fmt == "chat":
        return f"[[ ## {field} ## ]]\n{value}\n\n[[ ## completed ## ]]"
    return json.dumps({field: value})


def _run_geval(adapter: str, value: object, logprobs: str = "off") -> dict:
    make_adapter, engine_class, fmt = ADAPTERS[adapter]
    engine = engine_class(lambda system, user: _reply(fmt, "score", value))
    with dspy.context(lm=_lm(engine), adapter=make_adapter()):
        pred = GEvalJudge(RUBRIC, logprobs=logprobs)(input="Article.", output="Summary.")
    assert len(engine.calls) == 1  # never a second call
    detail = dict(pred.details["coherence"])
    detail["score"] = pred.scores["coherence"]
    return detail


def _run_unieval(adapter: str, value: object) -> dict:
    make_adapter, engine_class, fmt = ADAPTERS[adapter]
    engine = engine_class(lambda system, user: _reply(fmt, "answer", value))
    with dspy.context(lm=_lm(engine), adapter=make_adapter()):
        pred = UniEvalJudge(RUBRIC, logprobs="off")(input="Article.", output="Summary.")
    assert len(engine.calls) == 1
    detail = dict(pred.details["coherence"])
    detail["score"] = pred.scores["coherence"]
    return detail


# ------------------------------------------------------------------ G-Eval-style: accepted forms

ACCEPTED = [
    ("4", 4), ("Score: 3", 3), ("score = 3", 3), ("Rating: 4", 4), ("**4**", 4), ("**Score:** 2", 2),
    ("3 out of 5", 3), ("4/5", 4), ("4 / 5", 4), ("5/5", 5), ("4.5", 4.5), ("4 - mostly coherent", 4),
    ("Final score: 2", 2), ("4 (out of 5)", 4), ("1.", 1),
]


@pytest.mark.parametrize("adapter", list(ADAPTERS))
@pytest.mark.parametrize(("text", "value"), ACCEPTED)
def test_geval_reads_common_score_forms(adapter, text, value):
    detail = _run_geval(adapter, text)
    assert detail["status"] == "scored" and detail["error"] is None
    assert detail["raw"] == value and detail["score"] == pytest.approx((value - 1) / 4)
    # the field as the judge wrote it (a typed field that DSPy itself parsed, "1." under a
    # schema, comes back as the typed value)
    assert detail["reply"] in (text, str(value))
    assert detail["score_source"] == "fallback"  # logprobs off here


@pytest.mark.parametrize("adapter", ["json-schema", "counting-json-schema", "json-no-schema"])
@pytest.mark.parametrize("value", [3, 4.5, 5.0])
def test_geval_reads_json_numbers(adapter, value):
    detail = _run_geval(adapter, value)
    assert detail["status"] == "scored" and detail["raw"] == value
    assert detail["score"] == pytest.approx((value - 1) / 4)


# A score, then the scale's own legend (G-Eval replies repeat the anchors): the score (issue 23.3).
WITH_LEGEND = [
    ("4 (1 = worst, 5 = best)", 4), ("Score: 4 (1 = very poor, 5 = excellent)", 4),
    ("3\n\n1 = incoherent, 2 = poor, 3 = fair, 4 = good, 5 = excellent", 3),
    ("4 - where 1 is poor and 5 is excellent", 4), ("2 on a scale of 1 to 5", 2),
    ("4 (on a scale from 1 (worst) to 5 (best))", 4), ("5 on a 1-5 scale", 5), ("4 (1-5)", 4),
    ("4/5 (5 = best)", 4), ("Rating: 3 out of 5, where 1 means incoherent", 3), ("4 (scale: 1-5)", 4),
]


@pytest.mark.parametrize("adapter", ["counting-chat", "counting-json-schema", "json-no-schema"])
@pytest.mark.parametrize(("text", "value"), WITH_LEGEND)
def test_geval_reads_a_score_followed_by_its_scales_legend(adapter, text, value):
    detail = _run_geval(adapter, text)
    assert detail["status"] == "scored" and detail["raw"] == value, detail["error"]
    assert detail["score"] == pytest.approx((value - 1) / 4)


# Competing scores stay unparsed, legend or not (issue 23.3).
COMPETING = ["4. Actually 2", "4, or rather 3", "4 - no, 3", "4 (3 = fair)", "4 (1 = worst, 10 = best)",
             "3 (on a scale of 1 to 10)", "4 (1 = worst, 5 = best). Make that 3", "4 on a scale of 0 to 5"]


@pytest.mark.parametrize("adapter", ["counting-chat", "counting-json-schema", "json-no-schema"])
@pytest.mark.parametrize("text", COMPETING)
def test_geval_leaves_competing_scores_unparsed_even_beside_a_legend(adapter, text):
    detail = _run_geval(adapter, text)
    assert detail["status"] == "unparsed" and detail["score"] is None and detail["raw"] is None
    assert detail["reply"] == text


# ------------------------------------------------------------------ G-Eval-style: unparsed forms

UNPARSED = ["3 or 4", "3-4", "3, 4", "3 to 4", "3 (maybe 4)", "4/10", "8 out of 10", "Score: 3. Final score: 4",
            "I would give it a 4", "between 3 and 4", "4th", "80%", "excellent", "1. Reads well.\n2. Coherent."]


@pytest.mark.parametrize("adapter", list(ADAPTERS))
@pytest.mark.parametrize("text", UNPARSED)
def test_geval_leaves_ambiguous_or_contradicting_scores_unparsed(adapter, text):
    detail = _run_geval(adapter, text)
    assert detail["status"] == "unparsed" and detail["score"] is None and detail["raw"] is None
    assert detail["error"].startswith("unparsed") and detail["score_source"] is None
    assert detail["reply"] == text


# ------------------------------------------------------------------ G-Eval-style: out of range


@pytest.mark.parametrize("adapter", list(ADAPTERS))
@pytest.mark.parametrize("value", ["6", "0", 6, 0, "6/5", "Score: 7"])
def test_geval_out_of_range_is_recorded_not_clamped(adapter, value):
    detail = _run_geval(adapter, value, logprobs="auto")
    assert detail["status"] == "out_of_range"
    assert detail["score"] is None  # never clamped to 1 or 5, never a score
    assert detail["raw"] in (6, 0, 7) and detail["reply"] == str(value)
    assert detail["score_source"] is None and detail["fallback_reason"] is None
    assert "out of range" in detail["error"] and "[1, 5]" in detail["error"]


# ------------------------------------------------------------------ log-probabilities still weigh the score


def _chat_logprob_reply(value: str, top: dict[str, float]) -> tuple[str, tuple]:
    """A chat reply whose value token (the value's first word) offers the alternatives `top`."""
    first, rest = value[: len(value.split()[0].split("/")[0])], value[len(value.split()[0].split("/")[0]):]
    pieces = [("[[ ## score ## ", None), ("]]\n", None), (first, top), (rest + "\n\n[[ ## completed ## ]]", None)]
    tokens = tuple(TokenLogprob(token=t, logprob=math.log((alts or {}).get(t, 1.0)),
                                top=tuple(TopLogprob(token=a, logprob=math.log(p)) for a, p in (alts or {}).items()))
                   for t, alts in pieces)
    return "".join(t for t, _ in pieces), tokens


@pytest.mark.parametrize(("text", "source", "reason", "score"), [
    ("4 - mostly coherent", "logprobs", None, (4.25 - 1) / 4),
    ("4/5", "logprobs", None, (4.25 - 1) / 4),
    ("Score: 4", "fallback", ANSWER_NOT_LEADING, 0.75),  # the token there is "Score", not the answer
    ("4.5", "fallback", NON_INTEGER_ANSWER, 0.875),
])
def test_geval_weights_by_logprobs_when_the_answer_leads_the_field(text, source, reason, score):
    top = {"4": 0.5, "5": 0.375, "3": 0.125} if text[0].isdigit() else {"Score": 0.9, "4": 0.1}
    engine = LogprobEngine(lambda user: _chat_logprob_reply(text, top), response_schema=False)
    with dspy.context(lm=logprob_lm(engine), adapter=dspy.ChatAdapter()):
        pred = GEvalJudge(RUBRIC)(input="Article.", output="Summary.")
    detail = pred.details["coherence"]
    assert detail["score_source"] == source and detail["fallback_reason"] == reason
    assert pred.scores["coherence"] == pytest.approx(score)
    assert detail["status"] == "scored" and detail["reply"] == text


def test_geval_json_without_schema_reads_a_text_score_with_its_logprobs():
    top = {"4": 0.5, "5": 0.5}
    tokens = (TokenLogprob(token='{"score": "', logprob=0.0),
              TokenLogprob(token="4", logprob=math.log(0.5),
                           top=tuple(TopLogprob(token=t, logprob=math.log(p)) for t, p in top.items())),
              TokenLogprob(token='/5"}', logprob=0.0))
    engine = LogprobEngine(lambda user: ('{"score": "4/5"}', tokens), response_schema=False)
    with dspy.context(lm=logprob_lm(engine), adapter=dspy.JSONAdapter()):
        pred = GEvalJudge(RUBRIC)(input="Article.", output="Summary.")
    detail = pred.details["coherence"]
    assert detail["score_source"] == "logprobs" and detail["value_format"] == "json"
    assert pred.scores["coherence"] == pytest.approx((4.5 - 1) / 4) and detail["raw"] == 4


def test_schema_constrained_json_keeps_the_integer_schema_and_rereads_an_off_schema_reply():
    """A schema-taking endpoint still gets the scale's integers as an enum (grammar-constrained
    decoding); a reply that ignores it is read again from its text, with no second call."""
    seen = []

    class Spy(ScriptedEngine):
        def complete(self, request):
            seen.append(request.config.response_format)
            return super().complete(request)

    engine = Spy(lambda system, user: {"score": "Score: 3"})
    with dspy.context(lm=_lm(engine), adapter=dspy.JSONAdapter()):
        pred = GEvalJudge(RUBRIC)(input="Article.", output="Summary.")
    assert seen[0]["schema"]["properties"]["score"]["enum"] == [1, 2, 3, 4, 5]
    detail = pred.details["coherence"]
    assert pred.scores["coherence"] == pytest.approx(0.5) and detail["status"] == "scored"
    assert detail["score_source"] == "fallback" and detail["fallback_reason"] == OFF_SCHEMA_REPLY
    assert len(engine.calls) == 1


# ------------------------------------------------------------------ UniEval-style yes/no

YES_NO = [("Yes.", 1.0), ("**Yes**", 1.0), ("YES", 1.0), ("yes", 1.0), ("No, because it repeats itself.", 0.0),
          ("No - the second sentence contradicts the first.", 0.0), ('"no"', 0.0)]
HEDGES = ["yes and no", "partly", "it depends", "Yes, partly.", "Yes. No.", "yes/no", "maybe", ""]


@pytest.mark.parametrize("adapter", list(ADAPTERS))
@pytest.mark.parametrize(("text", "score"), YES_NO)
def test_unieval_reads_clear_answers_however_written(adapter, text, score):
    detail = _run_unieval(adapter, text)
    assert detail["status"] == "scored" and detail["score"] == score
    assert detail["answer"] == ("yes" if score else "no") and detail["error"] is None


@pytest.mark.parametrize("adapter", list(ADAPTERS))
@pytest.mark.parametrize("text", HEDGES)
def test_unieval_leaves_hedges_and_double_verdicts_unparsed(adapter, text):
    detail = _run_unieval(adapter, text)
    assert detail["status"] == "unparsed" and detail["score"] is None and detail["answer"] is None
    assert detail["error"].startswith("unparsed") and detail["score_source"] is None


@pytest.mark.parametrize("adapter", list(ADAPTERS))
def test_unieval_flags_a_qualified_answer(adapter):
    """Issue 23.2: "Yes, but ..." is scored as the answer named, and flagged, never plain."""
    detail = _run_unieval(adapter, "Yes, but the second sentence repeats the first.")
    assert detail["status"] == "scored" and detail["answer"] == "yes" and detail.get("qualified") is True
    assert "qualified" not in _run_unieval(adapter, "Yes.")


# ------------------------------------------------------------------ counted in the benchmark report

DIMS = ("coherence", "consistency", "fluency", "relevance")


def test_out_of_range_scores_are_counted_apart_from_unparsed_in_the_report(tmp_path: Path):
    """Item k of each document answers: 0 -> "6" (off the scale), 1 -> "0", 2 -> "3 or 4"
    (unparsed), 3 -> "Score: 4" (read)."""
    replies = {0: "6", 1: "0", 2: "3 or 4", 3: "Score: 4"}

    def script(system, user):
        k = field_value(user, "output").count("good")
        return f"[[ ## score ## ]]\n{replies[k]}\n\n[[ ## completed ## ]]"

    spec = get_benchmark("summeval")
    shipped = Path(__file__).resolve().parents[2] / "binaryeval_dspy" / "benchmark_data" / "tasks" / "summeval" / "rubric.json"
    rubric = Rubric.load(shipped)
    items = [dspy.Example(item_id=f"doc-{doc}/M{k}", doc_id=f"doc-{doc}", system_id=f"M{k}", split="",
                          input=f"Article {doc}.", output=" ".join(["summary"] + ["good"] * k) + f" of {doc}.",
                          reference="", human={d: float(1 + k) for d in DIMS}).with_inputs("input", "output")
             for doc in range(2) for k in range(4)]
    engine = NoSchemaEngine(script)
    handle = LMHandle(lm=_lm(engine), adapter=dspy.ChatAdapter(), name="chat-judge", embedded=False)
    run = BenchmarkRun(tmp_path / "run")
    prepare_run(run, spec, items, lm_name=handle.name, question_set=None, question_set_source="",
                rubric=rubric, rubric_source="shipped", methods=["geval"], limit=None, sample=None, seed=0,
                data_dir=None, logprobs="auto")
    run_benchmark(run, spec, items, methods=["geval"], handle=handle, question_set=None, rubric=rubric)
    assert len(engine.calls) == 8 * 4  # one call per item and dimension: no retries

    by_item = {r.item_id: r for r in run.read_results("geval")}
    off = by_item["doc-0/M0"].details["coherence"]
    assert off["status"] == "out_of_range" and off["raw"] == 6 and off["reply"] == "6"
    assert by_item["doc-0/M0"].scores["coherence"] is None
    assert by_item["doc-1/M1"].details["fluency"]["status"] == "out_of_range"
    assert by_item["doc-1/M1"].details["fluency"]["raw"] == 0
    assert by_item["doc-0/M2"].details["coherence"]["status"] == "unparsed"
    assert by_item["doc-0/M3"].scores["coherence"] == pytest.approx(0.75)

    sources = load_run_scores(run).score_sources["geval"]
    assert sources.out_of_range == 2 * 2 * 4  # 2 documents x 2 off-scale items x 4 dimensions
    assert sources.total == 2 * 4  # only the read scores; unparsed ones are in neither count
    report = build_benchmark_report(run, n_resamples=20, figures=False)
    assert "16 answers out of the rubric's range (no score)" in report.intro[0]
    table = next(b for _, blocks in report.sections for b in blocks
                 if getattr(b, "caption", "").startswith("Where the scores came from"))
    row = next(r for r in table.rows if r[0] == "G-Eval-style")
    assert "out of range (no score): 16" in row[-1]
    assert report.metrics["score_sources"]["geval"]["out_of_range"] == 16

"""Locating a field's value in token log-probabilities whatever the reply format, and
the baselines recording where every score came from (never a silent fallback).

Scripted engines only: the log-probabilities below are made up to check the plumbing.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import dspy
import pytest
from dspy.lm15 import TokenLogprob, TopLogprob

from binaryeval_dspy.errors import BinEvalError
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.lm.logprobs import (
    NO_ALLOWED_VALUE,
    NO_ALTERNATIVES,
    NO_LOGPROBS,
    NOT_LOCATED,
    expected_value,
    locate_value,
    p_yes,
)
from binaryeval_dspy.meta_eval import BenchmarkRun, load_run_scores
from binaryeval_dspy.meta_eval.benchmark_run import prepare_run, run_benchmark
from binaryeval_dspy.meta_eval.benchmark_spec import get_benchmark
from binaryeval_dspy.meta_eval.run_scores import P_YES_METHOD, ScoreSources, detail_source
from binaryeval_dspy.programs.geval import GEvalJudge
from binaryeval_dspy.programs.unieval import UniEvalJudge
from binaryeval_dspy.reports.benchmark_report import build_benchmark_report
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.rubric import Rubric
from tests.fakes import LogprobEngine, field_value, logprob_lm

SCORES = ["1", "2", "3", "4", "5"]
RUBRIC = Rubric(benchmark="toy", dimensions={
    "consistency": {"criterion": "Facts match the source.", "evaluation_steps": ["Compare.", "Score."],
                    "rating_scale": [1, 5], "question": "Are the facts right?"},
    "fluency": {"criterion": "Reads well.", "evaluation_steps": ["Read."], "rating_scale": [1, 3],
                "question": "Does it read well?"},
})


def lp(tokens: list[tuple[str, dict[str, float] | None]]) -> dict:
    """OpenAI-shaped logprobs: each (token, {alternative: probability} or None for no alternatives).

    The chosen token's own logprob is its probability among the alternatives (1.0 if absent)."""
    content = []
    for token, top in tokens:
        content.append({"token": token, "logprob": math.log((top or {}).get(token, 1.0)),
                        "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in (top or {}).items()]})
    return {"content": content}


# ------------------------------------------------------------------ locating the value


@pytest.mark.parametrize("tokens", [
    [('{"score": ', None), ("4", {"4": 0.6, "3": 0.2, "5": 0.2}), ("}", None)],
    [('{"', None), ("score", None), ('":', None), (" 4", {" 4": 0.6, " 3": 0.2, " 5": 0.2}), ("}", None)],
    [('{"score":', None), (" ", None), ("4", {"4": 0.6, "3": 0.2, "5": 0.2}), ("}", None)],
    [('{"score"', None), (": 4", {": 4": 0.6, ": 3": 0.2, ": 5": 0.1, ":5": 0.1}), ("}", None)],
    [('{"score": "', None), ("4", {"4": 0.6, "3": 0.2, "5": 0.2}), ('"}', None)],
    [('{"score": ', None), ('"4', {'"4': 0.6, '"3': 0.2, "5": 0.2}), ('"}', None)],
    [('{"score": ', None), ('4}', {"4}": 0.6, "3}": 0.2, "5": 0.2})],
])
def test_json_value_located_however_the_tokens_split(tokens):
    located = locate_value(lp(tokens), "score", SCORES)
    assert located.format == "json" and located.chosen == "4" and located.reason is None
    assert located.distribution["4"] == pytest.approx(0.6) and located.distribution["3"] == pytest.approx(0.2)
    assert located.distribution["5"] == pytest.approx(0.2)


@pytest.mark.parametrize("tokens", [
    [("[[ ## score ## ]]", None), ("\n", None), ("4", {"4": 0.7, "5": 0.3}), ("\n\n[[ ## completed ## ]]", None)],
    [("[[", None), (" ##", None), (" score", None), (" ##", None), (" ]]", None), ("\n", None),
     ("4", {"4": 0.7, "5": 0.3}), ("\n\n", None), ("[[ ## completed ## ]]", None)],
    [("[[ ## score ## ", None), ("]]\n", None), ("4", {"4": 0.7, "5": 0.3}), ("\n\n[[ ## completed ## ]]", None)],
    [("[[ ## score ## ", None), ("]]\n4", {"]]\n4": 0.7, "]]\n5": 0.3, "]]": 0.5}),
     ("\n\n[[ ## completed ## ]]", None)],
    [("[[ ## score ## ]]", None), ("\n4", {"\n4": 0.7, "\n5": 0.3, "\n\n": 0.2}), ("\n\n[[ ## completed ## ]]", None)],
    [("[[ ## score ## ]]", None), ("\n\n", None), ("4\n", {"4\n": 0.7, "5": 0.3}), ("\n[[ ## completed ## ]]", None)],
    [("[[ ## reasoning ## ]]\nThe summary says \"score\": 2 in its text.\n\n", None), ("[[ ## score ## ]]\n", None),
     ("4", {"4": 0.7, "5": 0.3}), ("\n\n[[ ## completed ## ]]", None)],
])
def test_chat_format_value_located_however_the_tokens_split(tokens):
    located = locate_value(lp(tokens), "score", SCORES)
    assert located.format == "chat" and located.chosen == "4" and located.reason is None
    assert located.distribution["4"] == pytest.approx(0.7) and located.distribution["5"] == pytest.approx(0.3)
    assert expected_value(located.distribution) == pytest.approx(4.3)


@pytest.mark.parametrize("tokens", [
    [("4", {"4": 0.5, "2": 0.5})],
    [(" ", None), ("4", {"4": 0.5, "2": 0.5})],
    [("\n 4", {"\n 4": 0.5, "\n 2": 0.25, " 2": 0.25}), (".", None)],
])
def test_bare_reply_only_when_the_caller_allows_it(tokens):
    assert locate_value(lp(tokens), "score", SCORES).reason == NOT_LOCATED
    located = locate_value(lp(tokens), "score", SCORES, allow_bare=True)
    assert located.format == "bare" and located.distribution["4"] == pytest.approx(0.5)
    assert located.distribution["2"] == pytest.approx(0.5)


@pytest.mark.parametrize("chosen,alternatives", [
    ("yes", {"yes": 0.8, "no": 0.2}),
    ("Yes", {"Yes": 0.5, "yes": 0.3, "No": 0.1, "no": 0.1}),
    (" yes", {" yes": 0.6, " Yes": 0.2, " no": 0.2}),
    ('"yes', {'"yes': 0.8, '"no': 0.2}),
])
def test_p_yes_in_every_format_and_casing(chosen, alternatives):
    expected = sum(p for t, p in alternatives.items() if "y" in t.lower())
    json_reply = lp([('{"verdict":', None), (chosen, alternatives), ('", "explanation": "ok"}', None)])
    chat_reply = lp([("[[ ## verdict ## ]]\n", None), (chosen, alternatives),
                     ("\n\n[[ ## explanation ## ]]\nok\n\n[[ ## completed ## ]]", None)])
    bare_reply = lp([(chosen, alternatives)])
    assert p_yes(json_reply) == pytest.approx(expected)
    assert p_yes(chat_reply) == pytest.approx(expected)
    assert p_yes(bare_reply) is None and p_yes(bare_reply, allow_bare=True) == pytest.approx(expected)


def test_p_yes_reads_the_verdict_field_not_another_one():
    reply = lp([("[[ ## explanation ## ]]\nyes it is\n\n", None), ("[[ ## verdict ## ]]\n", None),
                ("no", {"no": 0.9, "yes": 0.1}), ("\n\n[[ ## completed ## ]]", None)])
    assert p_yes(reply) == pytest.approx(0.1)
    assert p_yes(reply, field="answer") is None


def test_why_no_distribution_is_said():
    assert locate_value(None, "score", SCORES).reason == NO_LOGPROBS
    assert locate_value({"content": []}, "score", SCORES).reason == NO_LOGPROBS
    assert locate_value(lp([("[[ ## other ## ]]\n4", None)]), "score", SCORES).reason == NOT_LOCATED
    assert locate_value(lp([("[[ ## score ## ]]\n", None)]), "score", SCORES).reason == NOT_LOCATED  # cut off
    no_top = locate_value(lp([("[[ ## score ## ]]\n", None), ("4", None)]), "score", SCORES)
    assert no_top.reason == NO_ALTERNATIVES and no_top.format == "chat" and no_top.chosen == "4"
    odd = locate_value(lp([('{"score": ', None), ("x", {"x": 0.9, "ten": 0.1})]), "score", SCORES)
    assert odd.reason == NO_ALLOWED_VALUE and odd.distribution is None
    # a token that is the prefix of exactly one key counts for it; of several, for none
    assert locate_value(lp([('{"answer": "', None), ("n", {"n": 0.5, "y": 0.5})]), "answer",
                        ["yes", "no"]).distribution == {"yes": 0.5, "no": 0.5}


def test_lm15_token_objects_are_read_too():
    tokens = (TokenLogprob(token="[[ ## score ## ]]\n", logprob=0.0),
              TokenLogprob(token="2", logprob=math.log(0.5),
                           top=(TopLogprob(token="2", logprob=math.log(0.5)),
                                TopLogprob(token="3", logprob=math.log(0.5)))))
    located = locate_value({"content": list(tokens)}, "score", SCORES)
    assert located.distribution["2"] == pytest.approx(0.5) and located.format == "chat"


# ------------------------------------------------------------------ the baselines on ChatAdapter replies


def chat_tokens(field: str, value: str, top: dict[str, float], *, tail: str = "") -> tuple[str, tuple]:
    """A ChatAdapter reply ``[[ ## field ## ]]\\n<value>\\n\\n[[ ## completed ## ]]`` and its lm15
    logprobs, split the way BPE tokenizers split it (``]]`` and the newline in one token)."""
    pieces = [("[[ ## " + field + " ## ", None), ("]]\n", None), (value, top),
              ("\n\n" + tail + "[[ ## completed ## ]]", None)]
    tokens = tuple(TokenLogprob(token=t, logprob=math.log((alts or {}).get(t, 1.0)),
                                top=tuple(TopLogprob(token=a, logprob=math.log(p)) for a, p in (alts or {}).items()))
                   for t, alts in pieces)
    return "".join(t for t, _ in pieces), tokens


def ChatLogprobEngine(script):
    """A `LogprobEngine` answering in DSPy's chat format (no schema-constrained output)."""
    return LogprobEngine(script, response_schema=False)


def test_geval_on_chat_format_replies_is_logprob_weighted_not_the_integer():
    def script(user):
        if field_value(user, "score_range") == "1 to 3":
            return chat_tokens("score", "2", {"2": 0.6, "3": 0.4})
        return chat_tokens("score", "4", {"4": 0.5, "5": 0.375, "3": 0.125})

    engine = ChatLogprobEngine(script)
    with dspy.context(lm=logprob_lm(engine), adapter=dspy.ChatAdapter()):
        pred = GEvalJudge(RUBRIC)(input="Article.", output="Summary.")
    consistency = pred.details["consistency"]
    assert consistency["raw"] == 4 and consistency["score_source"] == "logprobs"
    assert consistency["value_format"] == "chat" and consistency["fallback_reason"] is None
    assert pred.scores["consistency"] == pytest.approx((4.25 - 1) / 4)  # 0.5*4 + 0.375*5 + 0.125*3, not 4
    assert pred.scores["fluency"] == pytest.approx((2.4 - 1) / 2)  # 0.6*2 + 0.4*3, not 2
    assert engine.asked and all(a == 20 for a in engine.asked)  # asked on a non-embedded LM


def test_unieval_on_chat_format_replies_scores_p_yes():
    # (DSPy's parser takes only the literal "yes" / "no", but the alternatives count in any casing)
    engine = ChatLogprobEngine(lambda user: chat_tokens("answer", "yes", {"yes": 0.5, " Yes": 0.2, "No": 0.3}))
    with dspy.context(lm=logprob_lm(engine), adapter=dspy.ChatAdapter()):
        pred = UniEvalJudge(RUBRIC)(input="A.", output="B.")
    assert pred.scores == {"consistency": pytest.approx(0.7), "fluency": pytest.approx(0.7)}
    assert all(d["score_source"] == "logprobs" and d["p_yes"] == pytest.approx(0.7) for d in pred.details.values())


def test_a_fallback_is_recorded_with_its_reason_never_silent():
    """Fails if a baseline scores from the plain answer without saying so."""
    def script(user):
        if field_value(user, "score_range") == "1 to 3":
            return chat_tokens("score", "2", {"2": 0.6, "3": 0.4})[0], None  # text but no logprobs
        return chat_tokens("score", "4", {})  # logprobs without alternatives

    with dspy.context(lm=logprob_lm(ChatLogprobEngine(script)), adapter=dspy.ChatAdapter()):
        pred = GEvalJudge(RUBRIC)(input="Article.", output="Summary.")
    fluency, consistency = pred.details["fluency"], pred.details["consistency"]
    assert pred.scores["fluency"] == pytest.approx(0.5) and fluency["source"] == "integer"
    assert fluency["score_source"] == "fallback" and fluency["fallback_reason"] == NO_LOGPROBS
    assert consistency["score_source"] == "fallback" and consistency["fallback_reason"] == NO_ALTERNATIVES
    assert consistency["distribution"] is None

    with dspy.context(lm=logprob_lm(ChatLogprobEngine(script)), adapter=dspy.ChatAdapter()):
        strict = GEvalJudge(RUBRIC, logprobs="require")(input="Article.", output="Summary.")
    assert strict.scores == {"consistency": None, "fluency": None}  # required: unscored, not the integer
    assert "log-probabilities required" in strict.details["fluency"]["error"]
    assert strict.details["fluency"]["fallback_reason"] == NO_LOGPROBS
    assert GEvalJudge(RUBRIC, logprobs="on").logprobs_required

    engine = ChatLogprobEngine(lambda user: chat_tokens("answer", "no", {"yes": 0.4, "no": 0.6}))
    with dspy.context(lm=logprob_lm(engine), adapter=dspy.ChatAdapter()):
        off = UniEvalJudge(RUBRIC, logprobs="off")(input="A.", output="B.")
    assert off.scores == {"consistency": 0.0, "fluency": 0.0} and engine.asked == [None, None]
    assert all(d["score_source"] == "fallback" and d["fallback_reason"] == "log-probabilities off"
               for d in off.details.values())
    with pytest.raises(BinEvalError):
        GEvalJudge(RUBRIC, logprobs="sometimes")  # type: ignore[arg-type]


def test_a_located_value_that_is_not_the_answer_is_not_trusted():
    # the parsed answer is "no" but the tokens say "yes" at the located position
    engine = ChatLogprobEngine(lambda user: ("[[ ## answer ## ]]\nno\n\n[[ ## completed ## ]]",
                                             chat_tokens("answer", "yes", {"yes": 0.9, "no": 0.1})[1]))
    with dspy.context(lm=logprob_lm(engine), adapter=dspy.ChatAdapter()):
        pred = UniEvalJudge(RUBRIC, dimensions=["consistency"])(input="A.", output="B.")
    detail = pred.details["consistency"]
    assert pred.scores["consistency"] == 0.0 and detail["score_source"] == "fallback"
    assert detail["fallback_reason"] == "the located value is not the parsed answer"


def test_score_sources_read_old_and_new_details():
    assert detail_source({"score_source": "logprobs", "fallback_reason": None}) == ("logprobs", None)
    assert detail_source({"score_source": None, "fallback_reason": None, "error": "unparsed: x"}) is None
    assert detail_source({"score_source": None, "fallback_reason": NO_LOGPROBS}) == (None, NO_LOGPROBS)
    assert detail_source({"source": "expected"}) == ("logprobs", None)
    assert detail_source({"source": "integer"})[0] == "fallback"
    assert detail_source({"source": None, "error": "unparsed"}) is None
    sources = ScoreSources()
    for source, reason in [("logprobs", None)] * 3 + [("fallback", NO_LOGPROBS), (None, NOT_LOCATED)]:
        sources.add(source, reason)
    assert sources.summary() == ("3 / 5 scores from log-probabilities; 1 fell back to the plain answer; "
                                 "1 unscored (log-probabilities required) (no logprobs returned: 1, "
                                 "value not located: 1)")


# ------------------------------------------------------------------ the report counts them


DIMS = ("coherence", "consistency", "fluency", "relevance")


def _items(n_docs: int = 3, n_systems: int = 4) -> list[dspy.Example]:
    items = []
    for doc in range(n_docs):
        for k in range(n_systems):
            items.append(dspy.Example(
                item_id=f"doc-{doc}/M{k}", doc_id=f"doc-{doc}", system_id=f"M{k}", split="",
                input=f"Article {doc} about a match.", output=" ".join(["summary"] + ["good"] * k) + f" of {doc}.",
                reference="", human={d: float(1 + k) for d in DIMS}).with_inputs("input", "output"))
    return items


def _chat_script(user: str):
    """G-Eval-style: logprobs unless the output has 3 'good's (then none come back);
    UniEval-style: always logprobs; BinEval: yes iff 'good' appears."""
    goods = field_value(user, "output").count("good")
    if "[[ ## criterion ## ]]" in user:
        text, tokens = chat_tokens("score", str(1 + goods), {str(1 + goods): 0.8, "3": 0.2} if goods != 2 else
                                   {"3": 1.0})
        return (text, None) if goods == 3 else (text, tokens)
    if "[[ ## violation_example ## ]]" in user:
        verdict = "yes" if goods else "no"
        return chat_tokens("verdict", verdict, {verdict: 0.9, "no" if goods else "yes": 0.1},
                           tail="[[ ## explanation ## ]]\nbecause\n\n")
    return chat_tokens("answer", "yes", {"yes": 0.5 + 0.1 * goods, "no": 0.5 - 0.1 * goods})


def _benchmark(tmp_path: Path, methods: list[str]) -> BenchmarkRun:
    spec = get_benchmark("summeval")
    shipped = Path(__file__).resolve().parents[2] / "binaryeval_dspy" / "benchmark_data" / "tasks" / "summeval" / "rubric.json"
    rubric = Rubric.load(shipped)
    questions = QuestionSet.model_validate({"dimensions": list(DIMS), "questions": [
        {"id": f"{d}-0{n}", "dimension": d, "text": f"Is it good {n}?", "origin": "manual"}
        for d in DIMS for n in (1, 2)]})
    handle = LMHandle(lm=logprob_lm(ChatLogprobEngine(_chat_script)), adapter=dspy.ChatAdapter(), name="chat-judge",
                      embedded=False)
    run = BenchmarkRun(tmp_path / "run")
    items = _items()
    prepare_run(run, spec, items, lm_name=handle.name, question_set=questions, question_set_source="test",
                rubric=rubric, rubric_source="shipped", methods=methods, limit=None, sample=None, seed=0,
                data_dir=None, logprobs="auto")
    outcomes = run_benchmark(run, spec, items, methods=methods, handle=handle, question_set=questions, rubric=rubric)
    assert all(not o.failed for o in outcomes.values()), {m: o.failed for m, o in outcomes.items()}
    return run


def test_report_counts_logprob_scores_and_fallbacks_per_method(tmp_path):
    run = _benchmark(tmp_path, ["geval", "unieval"])
    geval = run.read_results("geval")
    fell_back = [r for r in geval if r.details["coherence"]["score_source"] == "fallback"]
    assert len(fell_back) == 3 and all(r.item_id.endswith("/M3") for r in fell_back)  # the items without logprobs
    assert all(r.details["coherence"]["fallback_reason"] == NO_LOGPROBS for r in fell_back)

    for method in ("geval", "unieval"):  # no score without its source
        for r in run.read_results(method):
            for d, score in r.scores.items():
                assert (score is None) == (r.details[d]["score_source"] is None)
                assert r.details[d]["score_source"] in ("logprobs", "fallback", None)
                assert (r.details[d]["score_source"] == "fallback") == bool(r.details[d]["fallback_reason"])
    scores = load_run_scores(run)
    assert scores.score_sources["geval"].logprobs == 9 * 4 and scores.score_sources["geval"].fallback == 3 * 4
    assert scores.score_sources["unieval"].logprobs == 12 * 4 and scores.score_sources["unieval"].fallback == 0
    report = build_benchmark_report(run, n_resamples=20, figures=False)
    intro = report.intro[0]
    assert "log-probabilities requested: auto." in intro
    assert ("G-Eval-style: 36 / 48 scores from log-probabilities; 12 fell back to the plain answer "
            "(no logprobs returned: 12).") in intro
    assert "UniEval-style: 48 / 48 scores from log-probabilities." in intro
    table = next(b for _, blocks in report.sections for b in blocks
                 if getattr(b, "caption", "").startswith("Where the scores came from"))
    assert ["G-Eval-style", "scores", "36 / 48", "12", "0", "no logprobs returned: 12"] in table.rows
    assert report.metrics["score_sources"]["geval"]["fallback"] == 12
    markdown = report.to_markdown()
    assert "| G-Eval-style | scores | 36 / 48 | 12 | 0 | no logprobs returned: 12 |" in markdown


def _add_p_yes(run: BenchmarkRun) -> dict[str, dict[str, float]]:
    """Give every stored BinEval result soft scores (as BinEval does when logprobs come back);
    returns item -> dimension -> the soft score written."""
    path = run.path / "bineval" / "results.jsonl"
    written = {}
    lines = []
    for number, line in enumerate(path.read_text().splitlines()):
        row = json.loads(line)
        card = row["score_card"]
        soft = {d: round(0.1 + 0.8 * (number % 4) / 3, 4) for d in card["dimension_scores"]}
        if number == 0:
            soft["fluency"] = None  # no question of this dimension had a P(yes)
        card["p_yes_scores"] = soft
        card["p_yes_overall"] = 0.5
        for v in row["verdicts"]:
            if v["verdict"] in ("yes", "no"):
                v["p_yes"] = 0.9 if v["verdict"] == "yes" else 0.1
        written[row["item_id"]] = soft
        lines.append(json.dumps(row))
    path.write_text("\n".join(lines) + "\n")
    return written


def test_bineval_p_yes_row_is_computed_like_bineval(tmp_path):
    run = _benchmark(tmp_path, ["bineval"])
    plain = build_benchmark_report(run, n_resamples=20, figures=False)
    if load_run_scores(run).bineval_results[0].score_card.p_yes_scores is None:
        assert P_YES_METHOD not in load_run_scores(run).scores  # no soft scores: no row
        assert "BinEval, P(yes)" not in plain.to_markdown()
        written = _add_p_yes(run)
    else:  # BinEval itself stored them (the scripted engine returns logprobs)
        written = {r.item_id: r.score_card.p_yes_scores for r in run.read_results("bineval")}
    scores = load_run_scores(run)
    assert scores.methods[:2] == ["bineval", P_YES_METHOD]
    frame = scores.scores[P_YES_METHOD]
    for item_id, soft in written.items():
        for d in DIMS:
            assert (frame.loc[item_id, d] == pytest.approx(soft[d])) if soft[d] is not None else \
                math.isnan(frame.loc[item_id, d])
    assert scores.unparsed[P_YES_METHOD]["fluency"] == sum(s["fluency"] is None for s in written.values())
    report = build_benchmark_report(run, n_resamples=20, figures=False)
    markdown = report.to_markdown()
    assert "| BinEval, P(yes) |" in markdown and "BinEval vs BinEval, P(yes)" in markdown
    assert "BinEval, P(yes) = the same binary answers scored by the mean P(yes)" in report.intro[1]
    assert set(report.metrics[P_YES_METHOD]) >= set(DIMS)
    assert P_YES_METHOD not in report.metrics["cost"]  # read from BinEval's calls, no cost row of its own
    assert "BinEval, P(yes): " in report.intro[0] and "parsed verdicts from log-probabilities" in report.intro[0]
    assert not any("Incomplete run" in p for p in report.intro)


def test_geval_over_http_with_chat_format_reads_the_logprobs(fake_endpoint):
    """The remote path for real: LiteLLM/lm15 over HTTP to an OpenAI-compatible server,
    DSPy's ChatAdapter, logprobs in OpenAI's shape, the value token split as ``"\\n4"``."""
    from tests.fake_endpoint import Reply, tokenize
    from tests.fake_endpoint import TokenLogprob as EndpointToken

    def reply(body):
        text = "[[ ## score ## ]]\n4\n\n[[ ## completed ## ]]"
        tokens = [EndpointToken(t, 0.0, {t: 0.0}) if t != "\n4" else
                  EndpointToken(t, math.log(0.5), {"\n4": math.log(0.5), "\n5": math.log(0.4),
                                                   "\n3": math.log(0.1)}) for t in tokenize(text)]
        assert "\n4" in tokenize(text)
        return Reply(text, logprobs=tokens)

    fake_endpoint.reply = reply
    lm = dspy.LM("openai/fake-x", api_base=fake_endpoint.base_url, api_key="k", cache=False)
    with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
        pred = GEvalJudge(RUBRIC, dimensions=["consistency"])(input="Article.", output="Summary.")
    detail = pred.details["consistency"]
    assert detail["raw"] == 4 and detail["score_source"] == "logprobs" and detail["value_format"] == "chat"
    assert pred.scores["consistency"] == pytest.approx((4.3 - 1) / 4)  # 0.5*4 + 0.4*5 + 0.1*3, not the integer 4
    assert detail["distribution"]["5"] == pytest.approx(0.4)
    body = fake_endpoint.requests[0]
    assert body.get("logprobs") is True and body.get("top_logprobs") == 20

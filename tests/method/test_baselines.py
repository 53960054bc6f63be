"""The G-Eval-style and UniEval-style judges, ROUGE-L, and reading values off logprobs."""

import json
import math

import dspy
import numpy as np
import pytest
from dspy.lm15 import TokenLogprob, TopLogprob

from binaryeval_dspy.errors import InputError
from binaryeval_dspy.lm.llama_engine import LogprobRecorder
from binaryeval_dspy.lm.logprobs import expected_value, locate_value
from binaryeval_dspy.programs.geval import GEvalJudge
from binaryeval_dspy.programs.rouge import RougeL
from binaryeval_dspy.programs.unieval import UniEvalJudge
from binaryeval_dspy.schemas.rubric import Rubric
from tests.fakes import LogprobEngine, field_value, logprob_lm, scripted_lm

RUBRIC = Rubric(benchmark="toy", dimensions={
    "consistency": {"criterion": "Facts match the source.", "evaluation_steps": ["Compare.", "Score."],
                    "rating_scale": [1, 5], "question": "Are the facts right?"},
    "fluency": {"criterion": "Reads well.", "evaluation_steps": ["Read."], "rating_scale": [1, 3],
                "question": "Does it read well?"},
})


def _logprob_json(prefix: str, value_tokens: dict[str, float], chosen: str, suffix: str) -> tuple[str, tuple]:
    """JSON text and lm15 logprobs where the value position offers `value_tokens` (token -> prob)."""
    top = tuple(TopLogprob(token=t, logprob=math.log(p)) for t, p in value_tokens.items())
    tokens = (TokenLogprob(token=prefix, logprob=-0.01),
              TokenLogprob(token=chosen, logprob=math.log(value_tokens[chosen]), top=top),
              TokenLogprob(token=suffix, logprob=-0.01))
    return prefix + chosen + suffix, tokens


def test_value_distribution_and_expected_score():
    _, tokens = _logprob_json('{"score": ', {"4": 0.5, "3": 0.3, "5": 0.1, "x": 0.1}, "4", "}")
    logprobs = {"content": [{"token": t.token, "logprob": t.logprob,
                             "top_logprobs": [{"token": a.token, "logprob": a.logprob} for a in t.top]}
                            for t in tokens]}
    dist = locate_value(logprobs, "score", ["1", "2", "3", "4", "5"]).distribution
    assert dist["4"] == pytest.approx(0.5 / 0.9) and dist["1"] == 0.0  # "x" is not a score: renormalized
    assert expected_value(dist) == pytest.approx((3 * 0.3 + 4 * 0.5 + 5 * 0.1) / 0.9)
    assert locate_value(logprobs, "verdict", ["yes", "no"]).distribution is None  # field absent
    assert locate_value(None, "score", ["1"]).distribution is None


def test_yes_no_prefix_tokens_count_for_their_answer():
    logprobs = {"content": [{"token": '{"answer": "', "logprob": 0.0, "top_logprobs": []},
                            {"token": "y", "logprob": math.log(0.6), "top_logprobs": [
                                {"token": "y", "logprob": math.log(0.6)}, {"token": "Yes", "logprob": math.log(0.1)},
                                {"token": "no", "logprob": math.log(0.3)}]},
                            {"token": 'es"}', "logprob": 0.0, "top_logprobs": []}]}
    dist = locate_value(logprobs, "answer", ["yes", "no"]).distribution
    assert dist["yes"] == pytest.approx(0.7) and dist["no"] == pytest.approx(0.3)


def test_geval_uses_the_probability_weighted_score_when_logprobs_come_back():
    def script(user):
        if field_value(user, "score_range") == "1 to 3":
            return _logprob_json('{"score": ', {"2": 0.5, "3": 0.5}, "2", "}")
        return _logprob_json('{"score": ', {"4": 0.5, "5": 0.5}, "4", "}")

    engine = LogprobEngine(script)
    with dspy.context(lm=logprob_lm(engine), adapter=dspy.JSONAdapter()):
        pred = GEvalJudge(RUBRIC)(input="Article.", output="Summary.")
    assert pred.details["consistency"]["raw"] == 4 and pred.details["consistency"]["source"] == "expected"
    assert pred.details["consistency"]["score_source"] == "logprobs"
    assert pred.details["consistency"]["value_format"] == "json"
    assert pred.scores["consistency"] == pytest.approx((4.5 - 1) / 4)
    assert pred.scores["fluency"] == pytest.approx((2.5 - 1) / 2)
    assert engine.asked and all(a == 20 for a in engine.asked)


def test_geval_without_logprobs_uses_the_integer_and_marks_unparsed():
    def script(system, user):
        if field_value(user, "score_range") == "1 to 3":
            return "not json at all"
        return {"score": 5}

    lm, _ = scripted_lm(script)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        pred = GEvalJudge(RUBRIC, logprobs="off")(input="Article.", output="Summary.")
    assert pred.scores["consistency"] == 1.0 and pred.details["consistency"]["source"] == "integer"
    assert pred.scores["fluency"] is None and pred.details["fluency"]["error"].startswith("unparsed")
    with pytest.raises(InputError):
        GEvalJudge(RUBRIC)(input="", output="x")


def test_geval_auto_mode_falls_back_when_logprobs_are_refused():
    class Refusing(LogprobEngine):
        def complete(self, request):
            if request.config.logprobs is not None:
                raise RuntimeError("this provider does not support logprobs")
            return super().complete(request)

    engine = Refusing(lambda user: ('{"score": 2}', ()))
    judge = GEvalJudge(RUBRIC, dimensions=["consistency"])
    with dspy.context(lm=logprob_lm(engine), adapter=dspy.JSONAdapter()):
        first = judge(input="A.", output="B.")
        second = judge(input="A.", output="C.")
    assert first.scores["consistency"] == pytest.approx(0.25) and second.scores["consistency"] == pytest.approx(0.25)
    assert engine.asked == [None, None]  # the refused calls raised before being recorded; no retry with logprobs
    for pred in (first, second):  # recorded, not silent
        assert pred.details["consistency"]["score_source"] == "fallback"
        assert pred.details["consistency"]["fallback_reason"] == "the LM refused log-probabilities"


def test_unieval_scores_p_yes_or_the_answer():
    engine = LogprobEngine(lambda user: _logprob_json('{"answer": "', {"yes": 0.8, "no": 0.2}, "yes", '"}'))
    with dspy.context(lm=logprob_lm(engine), adapter=dspy.JSONAdapter()):
        pred = UniEvalJudge(RUBRIC)(input="A.", output="B.")
    assert pred.scores == {"consistency": pytest.approx(0.8), "fluency": pytest.approx(0.8)}
    lm, _ = scripted_lm(lambda s, u: {"answer": "no"} if "facts" in field_value(u, "question") else "garbage")
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        pred = UniEvalJudge(RUBRIC, logprobs="off")(input="A.", output="B.")
    assert pred.scores["consistency"] == 0.0 and pred.details["consistency"]["source"] == "answer"
    assert pred.scores["fluency"] is None and "unparsed" in pred.details["fluency"]["error"]


def test_rouge_l_known_value_and_missing_reference():
    pred = RougeL()(output="a cat sat on a mat", reference="the cat sat on the mat")
    # LCS "cat sat on mat" = 4 of 6 tokens on both sides
    assert pred.score == pytest.approx(4 / 6) and pred.precision == pytest.approx(4 / 6)
    assert RougeL()(output="x", reference="").score is None


def test_logprob_recorder_reconstructs_tokens_from_logits():
    vocab = ["{", "1", "2", "}", "<eos>"]

    class FakeLlama:
        def detokenize(self, ids):
            return "".join(vocab[i] for i in ids).encode()

        def tokenize(self, data, add_bos=False, special=False):
            return [vocab.index(data.decode()[0])]

    recorder = LogprobRecorder(top_n=2)
    steps = [np.array([5.0, 0, 0, 0, 0]), np.array([0, 2.0, 1.0, 0, 0]), np.array([0, 0, 0, 4.0, 0])]
    history = [7, 7]  # prompt ids
    for logits, chosen in zip(steps, [0, 1, 3]):
        recorder(np.array(history), logits.astype(np.float32))
        history.append(chosen)
    tokens = recorder.token_logprobs(FakeLlama(), "{1}")
    assert [t.token for t in tokens] == ["{", "1", "}"]
    second = tokens[1]
    expected = 2.0 - np.log(np.exp([0, 2.0, 1.0, 0, 0]).sum())
    assert second.logprob == pytest.approx(expected, rel=1e-5)
    assert [a.token for a in second.top] == ["1", "2"]


def test_rubric_validation_names_the_field(tmp_path):
    bad = json.loads(RUBRIC.model_dump_json())
    bad["dimensions"]["fluency"]["rating_scale"] = [3, 3]
    path = tmp_path / "rubric.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(InputError) as err:
        Rubric.load(path)
    assert "rating_scale" in str(err.value)

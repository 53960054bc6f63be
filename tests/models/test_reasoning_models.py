"""OpenAI's reasoning models (o-series, GPT-5) are built with the settings they accept."""

from __future__ import annotations

import pytest

from binaryeval_dspy import make_lm


@pytest.mark.parametrize("model", ["openai/gpt-5-mini", "openai/o3-mini", "openai/gpt-5"])
def test_reasoning_model_gets_default_temperature_and_room_to_reason(model):
    handle = make_lm(model, max_tokens=512)
    assert handle.lm.kwargs["temperature"] is None
    assert handle.lm.kwargs["max_completion_tokens"] >= 16000


def test_other_models_keep_temperature_zero_and_the_asked_cap():
    handle = make_lm("openai/gpt-4o-mini", max_tokens=300)
    assert handle.lm.kwargs["temperature"] == 0.0
    assert handle.lm.kwargs["max_tokens"] == 300


@pytest.mark.parametrize("model", ["openai/gpt-5-mini", "openai/gpt-4o-mini"])
def test_direct_and_batch_bodies_carry_the_models_own_parameters(model, monkeypatch):
    """The direct route (and every batch line) is one body per call, formatted from the run's LM:
    a reasoning model takes ``max_completion_tokens`` and its default temperature (a batch line
    it refuses fails the whole batch), any other model ``max_tokens`` and temperature 0."""
    from binaryeval_dspy.engines.senders import HttpSender, http_spec
    from binaryeval_dspy.lm.calls import format_call
    from binaryeval_dspy.programs.bineval import BinEval
    from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-never-sent")
    handle = make_lm(model, cache=False)
    sender = HttpSender(http_spec(handle, openai=True), lm=handle.lm, adapter=handle.adapter)
    questions = QuestionSet(dimensions=["d"], questions=[BinaryQuestion(id="q", dimension="d", text="Is it?")])
    call = BinEval(questions).question_call("in", "out", questions.questions[0])
    body = sender.body(format_call(call, handle.lm, handle.adapter))
    if "gpt-5" in model:
        assert body["max_completion_tokens"] >= 16000 and "max_tokens" not in body and "temperature" not in body
    else:
        assert body["max_tokens"] == handle.lm.kwargs["max_tokens"] and body["temperature"] == 0.0

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
def test_batch_replies_are_read_back_through_an_lm_with_the_same_settings(model):
    """Batch results are parsed by a replaying copy of the run's LM; for a reasoning model that
    copy once failed to build (max_completion_tokens given twice), so no batch reply was recorded."""
    from binaryeval_dspy.engines.prepared_requests import ReplayLM

    handle = make_lm(model, cache=False)
    replay = ReplayLM(handle)
    assert replay.lm.kwargs == handle.lm.kwargs

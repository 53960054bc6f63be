"""A failed call's record says which of bineval's settings to change (issue 31: the timeout's hint)."""

from __future__ import annotations

from binaryeval_dspy import BinaryQuestion, BinEval, QuestionSet, make_lm
from tests.fake_endpoint import FakeEndpoint, TimeoutFault


def test_a_read_timeout_names_the_timeout_setting():
    """DSPy's HTTP layer raises a read timeout as an LMTransportError (caused by a ReadTimeout),
    which carried no hint; rate limits and auth errors did."""
    questions = QuestionSet(task_prompt="t", dimensions=["d"], questions=[
        BinaryQuestion(id="d-01", dimension="d", text="Is it short?")])
    with FakeEndpoint() as endpoint:
        endpoint.fault = lambda body, index: TimeoutFault(3)
        handle = make_lm(endpoint.base_url, model="fake-x", cache=False, timeout=0.3)
        handle.lm.num_retries = 0
        with handle.context():
            (verdict,) = BinEval(questions, logprobs="off")(input="a text", output="a summary").verdicts
    assert verdict.verdict == "error"
    assert verdict.error.startswith("LMTransportError") and "raise `timeout`" in verdict.error, verdict.error

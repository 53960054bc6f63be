"""Verdict mode on the embedded SmolLM2-135M model: one tiny item, end to end (2 LM calls).

Checks the plumbing with a real model (a code check answered in code, one LM question,
a declared label picked under schema-constrained decoding); it says nothing about
judging quality. The pressure test and the CLI are exercised on scripted LMs and by the
README's audit example.
"""

import pytest

from binaryeval_dspy.lm.factory import make_lm
from binaryeval_dspy.programs.verdict_judge import VerdictJudge
from binaryeval_dspy.schemas.question_set import QuestionSet
from tests.verdict_scripts import verdict_question_set

pytest.importorskip("llama_cpp", reason="the embedded model needs the `local` extra")
pytestmark = pytest.mark.embedded


def test_verdict_judge_on_the_embedded_model():
    full = verdict_question_set()
    question_set = QuestionSet.model_validate({**full.model_dump(mode="json"),
                                               "questions": [q.model_dump(mode="json") for q in full.questions[:2]]})
    handle = make_lm("local", cache=False, max_tokens=128)
    with handle.context():
        pred = VerdictJudge(question_set, pressure_test="never")(
            input="A README section about installing a tool.",
            output="Install it with `pip install binaryeval-dspy`, then run `bineval --help`.")
    nv = pred.named_verdict
    assert pred.verdicts[0].source == "code" and pred.verdicts[0].verdict == "yes"
    assert pred.verdicts[1].source == "lm" and pred.verdicts[1].verdict in ("yes", "no"), pred.verdicts
    assert nv.status == "decided" and nv.label in ("Keep", "Improve", "Retire"), nv
    assert nv.attempts[-1].accepted and nv.decided_by == "lm"
    assert nv.grounds == [v.question_id for v in pred.verdicts if v.verdict == "no"]

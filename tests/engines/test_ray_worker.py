"""The Ray engine's worker side (`binaryeval_dspy.engines.ray_worker`), run without Ray.

A task is a plain generator function: these tests build its arguments as the driver does
(`RayEngine`'s `_Signatures` and `HttpSender.request_bytes`) and run it in a fresh Python
process, as a fresh Ray worker would, against tests/fake_endpoint.py's scripted server
(scripted replies, never a model's). What is checked: a fresh worker sends the block the
driver formatted before DSPy is loaded and sends nothing twice; the driver's request bytes
are the worker's own; a worker builds a signature's response schema once across tasks.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from binaryeval_dspy.engines.senders import HttpSender
from binaryeval_dspy.lm.factory import make_lm
from binaryeval_dspy.programs.bineval import BinEval, question_verdict
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from binaryeval_dspy.settings import RunSettings
from tests.fake_endpoint import FakeEndpoint, verdict_replies

pytest.importorskip("ray", reason="the ray extra is not installed")

from binaryeval_dspy.engines.ray_engine import RayEngine, _Signatures  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = QuestionSet(task_prompt="Summarize.", dimensions=["coverage"], questions=[
    BinaryQuestion(id=f"q{i}", dimension="coverage", text=f"Is point {i} covered?") for i in range(7)])
NOES = {QUESTIONS.questions[2].text, QUESTIONS.questions[5].text}


@pytest.fixture
def endpoint() -> Iterator[FakeEndpoint]:
    with FakeEndpoint(verdict_replies(dict.fromkeys(NOES, "no"))) as ep:
        yield ep


def _driver(endpoint: FakeEndpoint, *, instructions: str | None = None):
    """The driver's side: the engine, its sender with the request form settled by a first call
    (as `RayEngine.send` does), and the calls after that first one."""
    handle = make_lm(endpoint.base_url, model=endpoint.model, cache=False)
    engine = RayEngine(handle, RunSettings(engine="ray", concurrency=4))
    program = BinEval(QUESTIONS, logprobs="off")
    calls = [program.question_call("An article.", "A summary.", q) for q in QUESTIONS.questions]
    if instructions is not None:  # a signature made at run time (an optimizer's), pickled by value
        signature = calls[0].signature.with_instructions(instructions)
        calls = [dataclasses.replace(call, signature=signature) for call in calls]
    sender = HttpSender(engine.spec, lm=handle.lm, adapter=handle.adapter)
    assert sender.answer(calls[0]).answered
    engine.spec.dialect = sender.dialect
    return engine, sender, calls[1:]


def _in_a_fresh_process(script: str, arguments: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", script, str(arguments)], cwd=ROOT, capture_output=True, text=True,
                          timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


#: Runs one task in a fresh process whose reader (DSPy) is held back until every request the
#: driver formatted has been posted (or 30 s passed): records whether DSPy was loaded at each POST.
_FIRST_BLOCK = """
import json, pickle, sys, threading
from binaryeval_dspy.engines import ray_worker
rows, target, spec, signatures, threads = pickle.load(open(sys.argv[1], "rb"))
unpickled_without_dspy = "dspy" not in sys.modules
formatted = sum(body is not None for _t, _p, body in rows)
posted, loaded_at_post, all_posted = [0], [], threading.Event()
post, build = ray_worker.post_json, ray_worker._build_sender
def counting_post(*args, **kwargs):
    loaded_at_post.append("dspy" in sys.modules)
    try:
        return post(*args, **kwargs)
    finally:
        posted[0] += 1
        if posted[0] >= formatted:
            all_posted.set()
def held_build(spec):
    all_posted.wait(30)
    return build(spec)
ray_worker.post_json, ray_worker._build_sender = counting_post, held_build
answers = [row for batch in ray_worker.answer_block(rows, target, spec, signatures, threads) for row in batch]
print(json.dumps({"unpickled_without_dspy": unpickled_without_dspy, "loaded_at_post": loaded_at_post,
                  "answers": answers}))
"""


def test_a_fresh_worker_sends_the_driver_formatted_block_before_dspy_is_loaded(endpoint, tmp_path):
    engine, sender, calls = _driver(endpoint)
    signatures = _Signatures()
    rows = [(ticket, signatures.row(call), sender.request_bytes(call)) for ticket, call in enumerate(calls, 1)]
    assert all(body is not None for _t, _p, body in rows)
    arguments = tmp_path / "task.pickle"
    arguments.write_bytes(pickle.dumps((rows, engine.spec.target, pickle.dumps(engine.spec),
                                        signatures.of(list(enumerate(calls, 1))), 3)))
    before = len(endpoint.requests)
    found = _in_a_fresh_process(_FIRST_BLOCK, arguments)
    assert found["unpickled_without_dspy"]
    assert found["loaded_at_post"] == [False] * len(calls)  # every request out before DSPy was imported
    assert len(endpoint.requests) - before == len(calls)  # and none sent again once it was
    from binaryeval_dspy.lm.calls import Answer

    answers = {ticket: Answer.from_row(row) for ticket, row in found["answers"]}
    assert sorted(answers) == list(range(1, len(calls) + 1))
    for ticket, answer in answers.items():
        question = QUESTIONS.questions[ticket]
        assert answer.usage.lm_calls == 1
        assert question_verdict(question, answer).verdict == ("no" if question.text in NOES else "yes")


def test_the_driver_formats_the_bytes_the_worker_would_send(endpoint):
    from binaryeval_dspy.engines.ray_worker import _build_sender

    engine, sender, calls = _driver(endpoint, instructions="Answer yes or no about the summary.")
    worker = _build_sender(pickle.dumps(engine.spec))
    try:
        for call in calls:
            assert sender.request_bytes(call) == worker.request_bytes(call)
    finally:
        worker.close()


#: Runs two tasks (two blocks of one run) in one fresh process, counting how often DSPy builds
#: the JSON adapter's response schema.
_TWO_TASKS = """
import json, pickle, sys
import dspy.adapters.json_adapter as json_adapter
built, original = [0], json_adapter._get_structured_outputs_response_format
def counting(*args, **kwargs):
    built[0] += 1
    return original(*args, **kwargs)
json_adapter._get_structured_outputs_response_format = counting
from binaryeval_dspy.engines import ray_worker
answers = []
for rows, target, spec, signatures, threads in pickle.load(open(sys.argv[1], "rb")):
    answers += [row for batch in ray_worker.answer_block(rows, target, spec, signatures, threads) for row in batch]
print(json.dumps({"built": built[0], "answered": sum(row["status"] == "answered" for _t, row in answers)}))
"""


def test_a_worker_builds_a_signatures_response_schema_once_across_tasks(endpoint, tmp_path):
    engine, _sender, calls = _driver(endpoint, instructions="Answer yes or no about the summary.")
    signatures = _Signatures()
    tasks = []
    for block in (list(enumerate(calls[:3], 1)), list(enumerate(calls[3:], 4))):
        rows = [(ticket, signatures.row(call), None) for ticket, call in block]  # formatted in the worker
        tasks.append((rows, engine.spec.target, pickle.dumps(engine.spec), signatures.of(block), 1))  # no race
    arguments = tmp_path / "tasks.pickle"
    arguments.write_bytes(pickle.dumps(tasks))
    found = _in_a_fresh_process(_TWO_TASKS, arguments)
    assert found == {"built": 1, "answered": len(calls)}

"""The Ray engine (`binaryeval_dspy.engines.ray_engine`) against scripted endpoints.

Tests marked ``ray`` share one local Ray (the session fixture ``ray_cluster``, 2 CPUs,
10-20 s to start) and are skipped, with the reason, when the ``ray`` extra is missing.
The endpoint is tests/fake_endpoint.py's scripted server; its replies are scripted text,
never a model's. What the workers' sender does with retries, failures and keys is checked
without Ray in tests/engines/test_http_sender.py. The test that closes the engine early
cancels its tasks, so it comes last.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from pathlib import Path

import pytest

from binaryeval_dspy.engines.ray_engine import RayEngine
from binaryeval_dspy.engines.ray_session import ray_session
from binaryeval_dspy.errors import MissingExtraError
from binaryeval_dspy.lm.factory import make_lm
from binaryeval_dspy.programs.bineval import BinEval, question_verdict
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from binaryeval_dspy.settings import RunSettings
from tests.fake_endpoint import SERVER_ERROR, FakeEndpoint, Fault, TimeoutFault, request_field, verdict_replies

ROOT = Path(__file__).resolve().parents[2]


def _questions(n: int) -> QuestionSet:
    return QuestionSet(task_prompt="Summarize.", dimensions=["coverage"], questions=[
        BinaryQuestion(id=f"q{i:03d}", dimension="coverage", text=f"Is point {i} covered?") for i in range(n)])


class Calls:
    """A `CallSource` of a fixed list of calls (tickets are their positions)."""

    def __init__(self, calls) -> None:
        self.ready = deque(enumerate(calls))

    def take(self, n: int):
        taken = []
        while self.ready and len(taken) < n:
            taken.append(self.ready.popleft())
        return taken

    @property
    def exhausted(self) -> bool:
        return not self.ready

    def stop(self, reason: str) -> None:
        self.ready.clear()


def _plan(n: int, *, output: str = "A summary."):
    questions = _questions(n)
    program = BinEval(questions, logprobs="off")
    return questions, [program.question_call("An article.", output, q) for q in questions.questions]


def _engine(endpoint: FakeEndpoint, concurrency: int = 8, timeout: float | None = None) -> RayEngine:
    handle = make_lm(endpoint.base_url, model=endpoint.model, cache=False, timeout=timeout)
    return RayEngine(handle, RunSettings(engine="ray", concurrency=concurrency, timeout=timeout))


@pytest.fixture
def endpoint() -> Iterator[FakeEndpoint]:
    with FakeEndpoint(verdict_replies()) as ep:
        yield ep


# --------------------------------------------------------------------------- without Ray


def test_importing_the_library_and_the_engine_does_not_import_ray():
    code = ("import sys, binaryeval_dspy, binaryeval_dspy.engines.ray_engine, binaryeval_dspy.engines.ray_session\n"
            "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_a_missing_ray_extra_stops_with_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    handle = make_lm("http://127.0.0.1:9/v1", model="m", cache=False)
    with pytest.raises(MissingExtraError) as info:
        RayEngine(handle, RunSettings(engine="ray"))
    with pytest.raises(MissingExtraError) as info_session, ray_session():
        pass
    for exc in (info.value, info_session.value):
        text = str(exc)
        assert "\n" not in text and "'ray' extra" in text and "pip install 'binaryeval-dspy[ray]'" in text, text


# --------------------------------------------------------------------------- one local Ray

@pytest.mark.ray
@pytest.mark.usefixtures("ray_cluster")
def test_the_local_session_is_quiet_and_sized_for_the_machine():
    import os

    import ray

    assert os.environ.get("RAY_USAGE_STATS_ENABLED") == "0"
    # token authentication on (issue 30), with a token held in the environment only: none under the home folder
    assert os.environ.get("RAY_AUTH_MODE") == "token" and len(os.environ.get("RAY_AUTH_TOKEN", "")) == 64
    resources = ray.cluster_resources()
    assert resources["CPU"] == 2
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert resources["object_store_memory"] <= max(ram * 0.1, 128 * 2**20) + 2**20
    with ray_session():  # a session already running is used and left running
        pass
    assert ray.is_initialized()


@pytest.mark.ray
@pytest.mark.usefixtures("ray_cluster")
def test_every_answer_maps_back_to_its_call_read_in_the_workers(endpoint):
    """Shuffled latencies; the verdict of each question depends on the question, so a mix-up shows."""
    questions, calls = _plan(40)
    noes = {q.text for i, q in enumerate(questions.questions) if i % 3 == 0}
    endpoint.reply = verdict_replies(dict.fromkeys(noes, "no"))
    latencies = [0.02 * i for i in range(len(calls))]
    random.Random(7).shuffle(latencies)
    latency_of = dict(zip((q.text for q in questions.questions), latencies))
    endpoint.latency = lambda body: latency_of[request_field(body, "question")]
    engine = _engine(endpoint, concurrency=8)
    answers = dict(engine.send(Calls(calls)))
    assert sorted(answers) == list(range(40))
    for ticket, answer in answers.items():
        question = questions.questions[ticket]
        assert question_verdict(question, answer).verdict == ("no" if question.text in noes else "yes")
        assert answer.usage.lm_calls == 1 and answer.usage.prompt_tokens > 0
    assert 1 < endpoint.max_in_flight <= 8
    assert len(endpoint.requests) == 40
    assert any("first request answered by the driver" in note for note in engine.notes)


@pytest.mark.ray
@pytest.mark.usefixtures("ray_cluster")
def test_calls_plus_failed_calls_equal_the_requests_received_under_faults(endpoint):
    """Every fifth request answered 500, one question always 500, one always timing out."""
    questions, calls = _plan(20)
    always_500, always_slow = questions.questions[3].text, questions.questions[7].text
    lock, seen = threading.Lock(), Counter()

    def fault(body: dict, index: int) -> Fault | None:
        text = request_field(body, "question")
        with lock:
            seen["all"] += 1
            n = seen["all"]
        if text == always_slow:
            return TimeoutFault(seconds=3.0)
        if text == always_500 or n % 5 == 0:
            return SERVER_ERROR
        return None

    endpoint.fault = fault
    engine = _engine(endpoint, concurrency=4, timeout=1.0)
    answers = dict(engine.send(Calls(calls)))
    assert len(answers) == 20
    usage = [answer.usage for answer in answers.values()]
    assert sum(u.lm_calls + u.failed_calls for u in usage) == len(endpoint.requests)
    assert answers[3].status == answers[7].status == "error"
    assert "Timeout" in answers[7].reason and "`timeout`" in answers[7].reason


@pytest.mark.ray
@pytest.mark.usefixtures("ray_cluster")
def test_answers_stream_back_before_the_slowest_call_is_answered(endpoint):
    questions, calls = _plan(12)
    slow = questions.questions[1].text
    endpoint.latency = lambda body: 5.0 if request_field(body, "question") == slow else 0.05
    stream = _engine(endpoint, concurrency=2).send(Calls(calls))
    seen = [next(stream), next(stream)]  # the driver's own first call, then the workers' first
    answered_at_second = len(endpoint.outcomes)
    seen += list(stream)
    assert seen[1][0] != 1 and answered_at_second < 12  # the slow call was still out
    assert sorted(ticket for ticket, _ in seen) == list(range(12))


@pytest.mark.ray
@pytest.mark.usefixtures("ray_cluster")
def test_closing_the_engine_stops_sending_and_ray_stays_usable(endpoint):
    """Last: closing cancels the engine's tasks."""
    endpoint.latency = 0.3
    _questions_, calls = _plan(200)
    stream = _engine(endpoint, concurrency=4).send(Calls(calls))
    next(stream)
    next(stream)
    stream.close()
    time.sleep(1.0)
    sent = len(endpoint.requests)
    time.sleep(1.5)
    assert len(endpoint.requests) == sent < len(calls)
    _questions_, again = _plan(2, output="Another summary.")
    assert len(dict(_engine(endpoint, concurrency=2).send(Calls(again)))) == 2


@pytest.mark.ray
def test_a_session_shuts_down_after_an_exception_and_restores_the_environment():
    """In a process of its own (a second local Ray, beside the session's)."""
    pytest.importorskip("ray", reason="the ray extra is not installed")
    code = """
import glob, os, ray
from binaryeval_dspy.engines.ray_session import ray_session
before = set(glob.glob("/tmp/bineval-ray-*"))
os.environ.pop("RAY_AUTH_MODE", None)
try:
    with ray_session(num_cpus=1):
        assert ray.is_initialized() and os.environ["RAY_AUTH_MODE"] == "token"
        raise KeyError("boom")
except KeyError:
    pass
print(ray.is_initialized(), os.environ.get("RAY_AUTH_MODE"), set(glob.glob("/tmp/bineval-ray-*")) - before)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "False None set()"

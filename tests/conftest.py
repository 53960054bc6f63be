"""Shared fixtures: small question sets, items files and scripted LMs."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

# LiteLLM fetches its model cost map from GitHub at import unless told to use its bundled
# copy: tests talk to 127.0.0.1 only.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy
import pytest

from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from tests.ctrl_c import (  # noqa: F401 - hooks: one Ctrl-C stops the whole session (see tests/ctrl_c.py)
    pytest_configure,
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
)
from tests.fake_endpoint import FakeEndpoint, fake_endpoint_running
from tests.fakes import field_value, scripted_lm
from tests.llama_server import LlamaServer, running_llama_server

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def small_question_set() -> QuestionSet:
    """Two dimensions, three questions: two on consistency, one on fluency."""
    return QuestionSet(
        task_prompt="Summarize the article.",
        dimensions=["consistency", "fluency"],
        questions=[
            BinaryQuestion(id="consistency-01", dimension="consistency", text="Is every claim supported?"),
            BinaryQuestion(id="consistency-02", dimension="consistency", text="Are the numbers right?"),
            BinaryQuestion(id="fluency-01", dimension="fluency", text="Is it grammatical?"),
        ],
    )


def judge_script(answers: dict[str, str]):
    """A script answering the judge signature: the verdict for each question text.

    `answers` maps question text -> "yes" | "no" | anything else (sent raw, unparseable).
    """

    def script(system: str, user: str):
        question = field_value(user, "question")
        verdict = answers.get(question, "no")
        if verdict in ("yes", "no"):
            return {"explanation": f"scripted {verdict} for: {question}", "verdict": verdict}
        return verdict  # raw text the adapter cannot parse

    return script


@pytest.fixture
def scripted_handle():
    """Factory: LMHandle around a scripted engine (JSONAdapter, unique model id)."""

    def make(script) -> tuple[LMHandle, object]:
        lm, engine = scripted_lm(script)
        return LMHandle(lm=lm, adapter=dspy.JSONAdapter(), name=f"scripted ({lm.model})", embedded=False), engine

    return make


@pytest.fixture
def comparison_data_dir(tmp_path: Path) -> Path:
    """A benchmark data folder for the comparison harness: 24 SummEval-shaped items
    (12 docs x 2 systems) and 8 IFBench-shaped prompts."""
    root = tmp_path / "data"
    (root / "summeval").mkdir(parents=True)
    rows = []
    for doc in range(12):
        for system, quality in (("M1", "good"), ("M2", "bad")):
            rating = 4.5 if quality == "good" else 1.5 + (doc % 3) * 0.5
            rows.append({"doc_id": f"d{doc:02d}", "system_id": system, "source": f"Article {doc} text.",
                         "system_output": f"Summary {doc} is {quality}.",
                         "scores": {"coherence": rating, "fluency": rating, "consistency": 5.0, "relevance": 3.0}})
    (root / "summeval" / "summeval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "ifbench").mkdir()
    kinds = [("format:emoji", {}), ("format:newline", {}), ("count:numbers", {"N": 2, "keyword": None}),
             ("format:line_indent", {})]  # real IFBench ids (the shared loader checks them)
    prompts = [{"key": str(key), "prompt": f"Write about topic {key}. End with DONE.",
                "instruction_id_list": [kinds[key % 4][0]], "kwargs": [kinds[key % 4][1]]} for key in range(8)]
    (root / "ifbench" / "IFBench_test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in prompts))
    return root


@pytest.fixture
def comparison_question_file(tmp_path: Path) -> Path:
    """A saved question set for the comparison harness: one coherence and one fluency question."""
    qs = QuestionSet(task_prompt="Summarize the article.", dimensions=["coherence", "fluency"], questions=[
        BinaryQuestion(id="coherence-01", dimension="coherence", text="Is it well organised?"),
        BinaryQuestion(id="fluency-01", dimension="fluency", text="Is it fluent?")])
    return qs.save(tmp_path / "qs.json")


@pytest.fixture
def cli_scripted_lms(monkeypatch, scripted_handle):
    """Factory ``install(script, *, per_lm=None, name="scripted-cli")``: every --lm of a CLI
    command then resolves to a scripted LM named `name` (one evaluator name across
    invocations, like a real --lm) answering with `script`, or with ``per_lm(n)`` where n
    is the number of LMs made before it. Returns the engines made, in order (one list for
    the test, however often it installs), so tests can read the calls."""
    from binaryeval_dspy.cli import common

    engines = []

    def install(script=None, *, per_lm=None, name="scripted-cli"):
        def make_lm(spec, **kwargs):
            handle, engine = scripted_handle(per_lm(len(engines)) if per_lm is not None else script)
            handle.name = name
            engines.append(engine)
            return handle

        monkeypatch.setattr(common, "make_lm", make_lm)
        return engines

    return install


@pytest.fixture(scope="session", autouse=True)
def session_dspy_cache(tmp_path_factory) -> Iterator[None]:
    """DSPy's response cache in a directory of this test session: answers cached by earlier
    sessions (or by the user's own runs, in ~/.dspy_cache) never reach a test, and tests
    leave nothing in the user's cache."""
    saved, saved_env = dspy.cache, os.environ.get("DSPY_CACHEDIR")
    directory = str(tmp_path_factory.mktemp("dspy-cache"))
    os.environ["DSPY_CACHEDIR"] = directory  # commands the tests run in a subprocess too
    dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=True, disk_cache_dir=directory)
    yield
    dspy.cache = saved
    if saved_env is None:
        os.environ.pop("DSPY_CACHEDIR", None)
    else:
        os.environ["DSPY_CACHEDIR"] = saved_env


@pytest.fixture(scope="session", autouse=True)
def close_embedded_models() -> Iterator[None]:
    """Free the llama.cpp models the session loaded when it ends, so that no
    ``Llama.__del__`` runs during interpreter shutdown (issue 25)."""
    yield
    import sys

    engine = sys.modules.get("binaryeval_dspy.lm.llama_engine")
    if engine is not None:
        engine.close_models()


@pytest.fixture
def no_dspy_cache():
    """DSPy's response cache off, so that an embedded test really runs the model (answers
    left in the cache by earlier runs on this machine would not count as calls)."""
    saved = dspy.cache
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    yield
    dspy.cache = saved


@pytest.fixture
def items_file(tmp_path: Path) -> Path:
    """A JSONL file of three items with ids and human scores."""
    path = tmp_path / "items.jsonl"
    rows = [
        {"id": f"item-{i}", "source": f"Article number {i} about a match.", "summary": f"Summary {i}.",
         "human": i}
        for i in range(3)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def fake_endpoint() -> Iterator[FakeEndpoint]:
    """A scripted OpenAI-compatible endpoint on 127.0.0.1 (see tests/fake_endpoint.py)."""
    with fake_endpoint_running() as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory) -> Iterator[LlamaServer]:
    """`python -m llama_cpp.server` with SmolLM2 on 127.0.0.1 (what `bineval serve` starts),
    ONE per test session: started by the first test that asks for it, shared by every
    test of the `server` tier, stopped when the session ends (skips without the `server`
    extra; see tests/llama_server.py)."""
    with running_llama_server(tmp_path_factory.mktemp("llama-server")) as server:
        yield server


#: The engines the `server` tier runs `bineval evaluate` with against the shared server.
#: Every test that takes `server_engine` runs once per engine, on the same session server;
#: an engine that needs a cluster gets it below (the Ray runs are also marked ``ray``). The
#: batch engine is not here: llama.cpp's server has no ``/v1/files`` or ``/v1/batches``
#: (tests/engines/test_batch_mode.py drives it against a fake of OpenAI's batch API).
SERVER_ENGINES = ("live", "ray")


@pytest.fixture(scope="session",
                params=[pytest.param(name, marks=pytest.mark.ray) if name == "ray" else name
                        for name in SERVER_ENGINES])
def server_engine(request) -> str:
    """The `--engine` of a `server`-tier test, one of `SERVER_ENGINES` (the test id says
    which). "ray" also starts the session's shared local Ray (`ray_cluster`)."""
    if request.param == "ray":
        request.getfixturevalue("ray_cluster")
    return request.param


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[None]:
    """One local Ray (2 CPUs) for every test that needs one, started once per test session
    (10-20 s) by the Ray engine's own `ray_session`; skips without the `ray` extra."""
    pytest.importorskip("ray", reason="the ray extra is not installed")
    from binaryeval_dspy.engines.ray_session import ray_session

    with ray_session(num_cpus=2):
        yield


def pytest_collection_modifyitems(config, items) -> None:
    """Run the tests that use the shared local Ray (the ``ray_cluster`` fixture) last, in their
    own order: Ray Data changes process-wide pandas/pyarrow state that a later test reading a
    dataset with pandas trips on, and the Ray session is then started once, at the end."""
    uses_ray = [item for item in items if "ray_cluster" in getattr(item, "fixturenames", ())]
    if uses_ray:
        others = [item for item in items if "ray_cluster" not in getattr(item, "fixturenames", ())]
        items[:] = others + uses_ray

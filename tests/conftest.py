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
    """`python -m llama_cpp.server` with SmolLM2 on 127.0.0.1, one per test session
    (skips without the `server` extra; see tests/llama_server.py)."""
    with running_llama_server(tmp_path_factory.mktemp("llama-server")) as server:
        yield server

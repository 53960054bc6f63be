"""Scripted LMs for unit tests: a DSPy engine whose answers come from a Python function.

Never a model's judgment: tests use these to check the plumbing. Each fake gets a
unique model string, because DSPy's cache keys on the model string, not the engine.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from typing import Any

import dspy
from dspy.lm15 import Message, Response, TextPart, Usage

from binaryeval_dspy.lm.evaluated_text import DATA_BEGIN, DATA_END


class ScriptedEngine:
    """Answers each request with `script(system_text, user_text)` -> str or dict.

    A dict is sent as JSON text (what `dspy.JSONAdapter` parses); a str is sent as is.
    Counts calls and reports fixed token usage (10 in, 5 out) per call.
    """

    supports_response_schema = True
    supported_params = frozenset({"response_format", "temperature", "max_tokens"})

    def __init__(self, script: Callable[[str, str], Any]):
        self.script = script
        self.calls: list[str] = []
        self._lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0  # calls on DSPy's async path at once (`AsyncTwin`)

    def complete(self, request):
        system = request.system if isinstance(request.system, str) else "".join(
            getattr(p, "text", "") for p in (request.system or ()))
        user = "\n".join(m.text or "" for m in request.messages)
        with self._lock:
            self.calls.append(user)
        answer = self.script(system or "", user)
        text = answer if isinstance(answer, str) else json.dumps(answer)
        return Response(id=None, model="scripted", message=Message.assistant([TextPart(text)]),
                        finish_reason="stop", usage=Usage(input_tokens=10, output_tokens=5))

    def stream(self, request):
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        pass


class AsyncTwin:
    """The async counterpart of a scripted engine (DSPy's ``async_engine=``): answers as the
    engine does after ``latency`` seconds of ``asyncio.sleep``, counting the calls in flight at
    once into the engine's ``in_flight`` / ``max_in_flight``."""

    def __init__(self, engine: Any, *, latency: float = 0.0):
        self.engine = engine
        self.latency = latency
        for name in ("supports_response_schema", "supported_params"):
            if hasattr(engine, name):
                setattr(self, name, getattr(engine, name))

    async def complete(self, request):
        import asyncio

        self.engine.in_flight = getattr(self.engine, "in_flight", 0) + 1
        self.engine.max_in_flight = max(getattr(self.engine, "max_in_flight", 0), self.engine.in_flight)
        try:
            await asyncio.sleep(self.latency)
            return self.engine.complete(request)
        finally:
            self.engine.in_flight -= 1

    async def stream(self, request):
        from dspy.lm15 import response_to_events

        for event in response_to_events(await self.complete(request)):
            yield event

    async def aclose(self) -> None:
        pass


def scripted_lm(script: Callable[[str, str], Any], *, latency: float = 0.0) -> tuple[dspy.LM, ScriptedEngine]:
    """A `dspy.LM` backed by a `ScriptedEngine` (and its `AsyncTwin`, `latency` seconds per async
    call), with a unique model string and no cache."""
    engine = ScriptedEngine(script)
    lm = dspy.LM(f"custom/scripted-{uuid.uuid4().hex[:12]}", engine=engine,
                 async_engine=AsyncTwin(engine, latency=latency), cache=False, temperature=0.0)
    return lm, engine


def field_value(user_text: str, field: str, *, raw: bool = False) -> str:
    """The value of an input field as JSONAdapter/ChatAdapter render it: ``[[ ## field ## ]]\nvalue``.

    Evaluated texts (input, output) reach the prompt fenced by
    `binaryeval_dspy.lm.evaluated_text`; the fence lines are removed unless `raw`.
    """
    marker = f"[[ ## {field} ## ]]"
    start = user_text.rfind(marker)
    if start < 0:
        return ""
    rest = user_text[start + len(marker):]
    ends = [i for i in (rest.find("[[ ##"), rest.find("\n\nRespond with")) if i >= 0]
    value = (rest[: min(ends)] if ends else rest).strip()
    if not raw and value.startswith(DATA_BEGIN) and value.endswith(DATA_END):
        value = value[len(DATA_BEGIN):-len(DATA_END)].strip("\n")
    return value


class LogprobEngine:
    """A scripted engine that also returns token logprobs when asked (as OpenAI, vLLM or
    llama.cpp's server do); `script(user_text)` -> (text, lm15 tokens or None for
    "no logprobs returned"). Records in ``asked`` what each request asked for.

    Args:
        script: the reply function.
        response_schema: whether it declares schema-constrained output (JSONAdapter
            sends a schema) - True for JSON-replying fakes, False for chat-format ones.
    """

    def __init__(self, script: Callable[[str], Any], *, response_schema: bool = True):
        self.script = script
        self.asked: list[object] = []
        self.supports_response_schema = response_schema
        params = {"temperature", "max_tokens", "logprobs", "top_logprobs"}
        self.supported_params = frozenset(params | ({"response_format"} if response_schema else set()))

    def complete(self, request):
        user = "\n".join(m.text or "" for m in request.messages)
        self.asked.append(request.config.logprobs)
        text, tokens = self.script(user)
        return Response(id=None, model="x", message=Message.assistant([TextPart(text)]), finish_reason="stop",
                        usage=Usage(input_tokens=10, output_tokens=3),
                        logprobs=tokens if request.config.logprobs is not None else None)

    def close(self) -> None:
        pass


def logprob_lm(engine: LogprobEngine) -> dspy.LM:
    """A `dspy.LM` around `engine` with a unique model string and no cache."""
    return dspy.LM(f"custom/lp-{uuid.uuid4().hex[:12]}", engine=engine, cache=False)


"""The ``ray`` engine: a judging plan's requests sent through Ray Data, past one machine.

Nothing about judging changes: every planned call is still the live call
(`BinEval.judge_question` with the run's adapter). On the driver, each call is run once
with a capturing LM, so DSPy's adapter formats the request exactly as a live call would
(`binaryeval_dspy.engines.prepared_requests.capture_request`, `request_body`); the bodies go to
Ray Data as rows (`binaryeval_dspy.engines.ray_data.send_requests`: many requests in
flight per task, retries of 429 / 5xx with backoff, a failed request is a row with an
error, never an exception); and each reply, as it streams back, answers the same call
through DSPy's response path (`ReplayLM`: the adapter parses it, usage is tracked), so a
verdict from Ray is the same record as a live verdict. Each answer is journaled the
moment its reply is parsed (the run's calls are journaled calls), so a killed run loses
nothing and a rerun asks only what is missing.

Requests are prepared lazily, as Ray Data takes them (`send_requests` sends them in
windows of requests, one dataset each), so memory stays bounded for a million items and the
first items' results are stored while later ones are still being prepared.

Reaches OpenAI-compatible endpoints: a base URL (vLLM, llama.cpp's server, a LiteLLM
proxy) or ``openai/<model>``, as the batch engine does (`batch_api.batch_target`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import dspy

from binaryeval_dspy.cost.usage import usage_from_entries
from binaryeval_dspy.engines.batch_api import batch_target
from binaryeval_dspy.engines.item_work import CallBudget, ItemDone, ItemWork, StopItems
from binaryeval_dspy.engines.prepared_requests import ReplayLM, capture_request, request_body
from binaryeval_dspy.errors import ConfigError, LMConfigError
from binaryeval_dspy.extras import require
from binaryeval_dspy.schemas.item_result import Usage
from binaryeval_dspy.schemas.verdict import QuestionVerdict

if TYPE_CHECKING:
    from binaryeval_dspy.lm.factory import LMHandle
    from binaryeval_dspy.settings import RunSettings


@dataclass
class _Open:
    """An item whose requests are out: its work, the results so far and what it cost."""

    index: int
    work: ItemWork
    results: list[Any]
    remaining: int
    started: float
    usage: Usage = field(default_factory=Usage)


class RayEngine:
    """Executes a judging plan through Ray Data (see the module docstring).

    Args:
        handle: the run's LM: an OpenAI-compatible base URL or an ``openai/`` model.
        settings: the run's settings: ``concurrency`` (requests in flight across the
            Ray tasks), ``ray_address`` (a cluster to join; None starts a local Ray),
            ``timeout`` (seconds per HTTP attempt; None: 600).

    Raises:
        MissingExtraError: the ``ray`` extra is not installed.
        LMConfigError: an LM the engine cannot reach (an embedded model, or a provider
            without an OpenAI-compatible endpoint).
    """

    name = "ray"

    def __init__(self, handle: LMHandle | None, settings: RunSettings) -> None:
        require("ray.data", "ray", "the ray engine")
        if handle is None:
            raise LMConfigError("the ray engine needs an LM to send requests to", fix="pass an LM (lm=...).")
        target = batch_target(handle, engine="ray")
        kwargs = dict(getattr(handle.lm, "kwargs", None) or {})
        key = kwargs.get("api_key") or (os.environ.get(target.api_key_env) if target.api_key_env else None)
        self.handle = handle
        self.model = target.model
        self.base_url = (target.api_base or "https://api.openai.com/v1").rstrip("/")
        self._api_key = key
        self.in_flight = settings.concurrency
        self.address = settings.ray_address
        self.timeout = settings.timeout or 600.0
        self.notes: list[str] = []

    def run(self, items: Sequence[Any], plan: Callable[[int, Any], ItemWork], on_done: Callable[[ItemDone], None],
            *, budget: CallBudget | None = None) -> None:
        """As `binaryeval_dspy.engines.base.Engine.run`, through Ray Data.

        Raises:
            ConfigError: a `budget` (``max_cost``): the ray engine sends many
                requests at once and cannot ask before each call; use the live engine.
            KeyboardInterrupt: after stopping Ray; answers parsed so far are journaled.
        """
        if budget is not None:
            raise ConfigError("max_cost cannot be enforced by the ray engine (it sends many requests at once)",
                              fix="use the live engine for a run with a spending limit.")
        from binaryeval_dspy.engines.ray_data import HttpTarget, ray_session

        target = HttpTarget(base_url=self.base_url, api_key=self._api_key, timeout=self.timeout)
        replay = ReplayLM(self.handle)
        started = time.perf_counter()
        with ray_session(self.address):
            where = f"joined {self.address}" if self.address else "local"
            self.notes.append(f"Ray started in {time.perf_counter() - started:.1f} s ({where}); requests sent "
                              f"through Ray Data with {self.in_flight} in flight")
            self._send_all(items, plan, on_done, target, replay)

    def _send_all(self, items: Sequence[Any], plan: Callable[[int, Any], ItemWork],
                  on_done: Callable[[ItemDone], None], target: Any, replay: ReplayLM) -> None:
        """Prepare every item's requests as Ray Data takes them, and record each reply as it
        streams back; an item is finished and reported once all its replies are in."""
        from binaryeval_dspy.engines.ray_data import PreparedRequest, send_requests

        calls: dict[str, tuple[_Open, int]] = {}
        no_calls: list[_Open] = []  # items whose questions are all settled: finished between replies

        def prepared() -> Any:
            for index, item in enumerate(items):
                work = plan(index, item)
                entry = _Open(index=index, work=work, results=[None] * len(work.calls), remaining=len(work.calls),
                              started=time.perf_counter())
                if not work.calls:
                    no_calls.append(entry)
                    continue
                for position, call in enumerate(work.calls):
                    messages, options = capture_request(call, self.handle)
                    custom_id = f"{index}:{position}"
                    calls[custom_id] = (entry, position)
                    yield PreparedRequest(custom_id=custom_id,
                                          body=request_body(messages, options, model=self.model, provider="openai"))

        replies = send_requests(prepared(), target, in_flight=self.in_flight)
        began, first, count = time.perf_counter(), None, 0
        try:
            for reply in replies:
                count += 1
                first = first if first is not None else time.perf_counter() - began
                while no_calls:
                    if not self._finish(no_calls.pop(0), on_done):
                        return
                entry, position = calls.pop(reply.custom_id)
                call = entry.work.calls[position]
                if reply.body is not None:
                    with dspy.track_usage() as tracker:
                        value = replay.verdict(call, reply.body)
                    entry.usage += usage_from_entries(dict(tracker.usage_data))
                else:
                    value = _failed_call(call, reply.error or "no reply")
                entry.results[position] = value
                entry.remaining -= 1
                if entry.remaining == 0 and not self._finish(entry, on_done):
                    return
            while no_calls:
                if not self._finish(no_calls.pop(0), on_done):
                    return
        finally:
            close = getattr(replies, "close", None)
            if close is not None:
                close()
            if count:
                self.notes.append(f"Ray Data: {count} replies in {time.perf_counter() - began:.1f} s, the first "
                                  f"after {first:.1f} s (its workers' start-up and one request)")

    @staticmethod
    def _finish(entry: _Open, on_done: Callable[[ItemDone], None]) -> bool:
        """Run the item's finish step and report it; False when `on_done` stops the run."""
        result, error = None, None
        with dspy.track_usage() as tracker:
            try:
                result = entry.work.finish(entry.results)
            except Exception as exc:  # noqa: BLE001 - an item's failure is reported through ItemDone
                error = exc
        usage = entry.usage + usage_from_entries(dict(tracker.usage_data))
        try:
            on_done(ItemDone(index=entry.index, result=result, error=error, usage=usage,
                             seconds=round(time.perf_counter() - entry.started, 3)))
        except StopItems:
            return False
        return True


def _failed_call(call: Callable[[], Any], error: str) -> Any:
    """The outcome of a call whose request failed after its retries: the question's
    ``error`` verdict (asked again by a rerun), as a live call that failed gives."""
    question = _question_of(call)
    if question is None:
        raise LMConfigError(f"a request sent through Ray failed ({error}) and its call has no question to record "
                            "it against")
    return QuestionVerdict(question_id=question.id, verdict="error", error=f"RayRequestFailed: {error}"[:2000])


def _question_of(call: Callable[[], Any]) -> Any:
    """The `BinaryQuestion` a planned judge call asks (through any wrappers), or None."""
    from binaryeval_dspy.engines.prepared_requests import call_question

    seen = 0
    while call is not None and seen < 5:
        try:
            return call_question(call)
        except Exception:  # noqa: BLE001 - not the judge call itself: look inside the wrapper
            call = getattr(call, "__wrapped__", None)
            seen += 1
    return None

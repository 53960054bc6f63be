"""The ``local`` and ``live`` engines: calls sent by the run's sender, one at a time or many in flight.

* ``local``: one call at a time on the calling thread, in the order the plan hands them
  out, so an item's questions go back to back. One in-process `llama_cpp.Llama` is not
  thread-safe, so its calls are serialized anyway, and consecutive calls of one item share
  the prompt prefix (instructions, input, output) that llama.cpp reuses; interleaving
  items would throw that reuse away (docs/served-models.md has the measured difference).
* ``live``: `in_flight` worker threads, each sending one call at a time through the run's
  sender (`binaryeval_dspy.engines.senders`): the next item's questions start while the
  previous item's are in flight, and each answer is handed back as soon as it is in.

Each worker runs in a copy of the calling thread's `contextvars` context, which is how DSPy
settings (``dspy.context(lm=..., adapter=...)``) and usage trackers reach it. Workers are
started once and fed through a queue, and finished calls come back through another, so
taking the next one costs the same with 2 or 256 in flight and nothing is built per call. DSPy's own ``dspy.Parallel`` runs a fixed list and
returns only when all of it is done, so it cannot take new calls as answers bring them.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Iterator
from typing import Any

from binaryeval_dspy.engines.base import CallSource, engine_sender
from binaryeval_dspy.errors import ConfigError
from binaryeval_dspy.lm.calls import Answer, LMCall, error_text


class PlanStalled(RuntimeError):
    """The plan has calls to come but hands none out while nothing is in flight (a bug)."""


def _answer(sender: Any, call: LMCall, budget: Any) -> Answer:
    try:
        return sender.answer(call, budget)
    except Exception as exc:  # noqa: BLE001 - a sender bug becomes the call's error, never a lost item
        return Answer(status="error", reason=error_text(exc))


class ThreadedEngine:
    """Sends a plan's calls with `in_flight` at once (see the module docstring).

    Args:
        name: ``local`` or ``live`` (recorded in the manifest).
        handle: the run's LM (`LMHandle`); None uses DSPy's configured LM.
        in_flight: calls in flight (an int >= 1; ``local`` runs one).
        sender: the sender to use (None: `engine_sender(handle, lm=lm)`, built when the first
            call is taken: a plan with no LM call needs no LM).
        lm: without a handle, the LM to send to (None: DSPy's configured one).

    Raises:
        ConfigError: `in_flight` is not an int >= 1.
    """

    def __init__(self, name: str, handle: Any, in_flight: int, *, sender: Any = None, lm: Any = None) -> None:
        if isinstance(in_flight, bool) or not isinstance(in_flight, int) or in_flight < 1:
            raise ConfigError("bad concurrency", expected="an integer >= 1", received=repr(in_flight),
                              fix="set concurrency to the number of LM calls to run at once, e.g. 16.")
        self.name = name
        self.handle = handle
        self.in_flight = 1 if name == "local" else in_flight
        self.sender = sender
        self.lm = lm
        self.notes: list[str] = []

    def send(self, source: CallSource, *, budget: Any = None) -> Iterator[tuple[int, Answer]]:
        """As `binaryeval_dspy.engines.base.Engine.send`."""
        if self.in_flight == 1:
            yield from self._one_at_a_time(source, budget)
        else:
            yield from self._pooled(source, budget)

    def _sender(self) -> Any:
        """The run's sender, built when the first call is taken (a plan without calls needs no LM)."""
        if self.sender is None:
            self.sender = engine_sender(self.handle, lm=self.lm)
        return self.sender

    def _one_at_a_time(self, source: CallSource, budget: Any) -> Iterator[tuple[int, Answer]]:
        while True:
            taken = source.take(1)
            if not taken:
                if source.exhausted:
                    return
                raise PlanStalled("the plan has calls to come but none is ready and none is in flight")
            ticket, call = taken[0]
            yield ticket, _answer(self._sender(), call, budget)

    def _pooled(self, source: CallSource, budget: Any) -> Iterator[tuple[int, Answer]]:
        """`in_flight` worker threads started once (each in a copy of this thread's context),
        fed through one queue and answering through another: nothing is built per call but the
        call itself."""
        todo: queue.SimpleQueue[tuple[int, LMCall] | None] = queue.SimpleQueue()
        completed: queue.SimpleQueue[tuple[int, Answer | BaseException]] = queue.SimpleQueue()
        workers: list[threading.Thread] = []

        def work(sender: Any) -> None:
            while (job := todo.get()) is not None:
                ticket, call = job
                try:
                    completed.put((ticket, _answer(sender, call, budget)))
                except BaseException as exc:  # noqa: BLE001 - handed to the caller (an interrupt, a kill)
                    completed.put((ticket, exc))

        out = 0
        try:
            while True:
                while out < self.in_flight:
                    taken = source.take(self.in_flight - out)
                    if not taken:
                        break
                    if not workers:
                        sender = self._sender()
                        for number in range(self.in_flight):
                            thread = threading.Thread(target=contextvars.copy_context().run, args=(work, sender),
                                                      name=f"bineval-call_{number}", daemon=True)
                            thread.start()
                            workers.append(thread)
                    for job in taken:
                        todo.put(job)
                        out += 1
                if out == 0:
                    if source.exhausted:
                        return
                    raise PlanStalled("the plan has calls to come but none is ready and none is in flight")
                for ticket, answer in _next_done(completed):
                    out -= 1
                    if isinstance(answer, BaseException):
                        raise answer
                    yield ticket, answer
        finally:
            while True:  # calls not started are dropped; the workers stop after the call they hold
                try:
                    todo.get_nowait()
                except queue.Empty:
                    break
            for _ in workers:
                todo.put(None)


def _next_done(completed: queue.SimpleQueue) -> list[tuple[int, Any]]:
    """The calls finished so far: waits for one, then takes every other one already there.
    Waits in short slices so that Ctrl-C reaches the main thread promptly."""
    while True:
        try:
            first = completed.get(timeout=0.5)
            break
        except queue.Empty:
            continue
    done = [first]
    while True:
        try:
            done.append(completed.get_nowait())
        except queue.Empty:
            return done

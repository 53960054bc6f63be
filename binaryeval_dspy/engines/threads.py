"""The ``local`` and ``live`` engines: calls sent by the run's sender, one at a time or many in flight.

* ``local``: one call at a time on the calling thread, in the order the plan hands them
  out, so an item's questions go back to back. One in-process `llama_cpp.Llama` is not
  thread-safe, so its calls are serialized anyway, and consecutive calls of one item share
  the prompt prefix (instructions, input, output) that llama.cpp reuses; interleaving
  items would throw that reuse away (docs/served-models.md has the measured difference).
* ``live``: `in_flight` calls at once; the next item's questions start while the previous
  item's are in flight, and each answer is handed back as soon as it is in. For a served
  model reached by base URL (`HttpSender`, whose calls come apart in steps) every step but
  the POST runs on the calling thread and the POSTs run on one asyncio event loop there
  (aiohttp), with DSPy's cache used from that thread alone: measured on the scripted
  endpoint at 64 in flight, sending threads spent about as much CPU waiting for each other
  and for the interpreter lock as on the work (called from inside a running event loop, a
  notebook's, it sends on threads as below). Any other LM (DSPy's route, `LMSender`) gets
  `in_flight` worker threads, each sending one whole call at a time, each in a copy of the
  calling thread's `contextvars` context (how DSPy settings such as
  ``dspy.context(lm=..., adapter=...)`` and usage trackers reach it); workers are started
  once and fed through a queue. DSPy's own ``dspy.Parallel`` runs a fixed list and returns
  only when all of it is done, so it cannot take new calls as answers bring them.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
from collections import deque
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
        elif _steps_apart(self._sender_if_any()) and not _loop_running():
            yield from self._exchanges(source, budget)
        else:
            yield from self._pooled(source, budget)

    def _sender(self) -> Any:
        """The run's sender, built when the first call is taken (a plan without calls needs no LM)."""
        if self.sender is None:
            self.sender = engine_sender(self.handle, lm=self.lm)
        return self.sender

    def _sender_if_any(self) -> Any:
        """The run's sender, or None when no LM is configured (a plan without LM calls, such
        as a ROUGE baseline, needs none; a call that does raises when it is taken)."""
        try:
            return self._sender()
        except Exception:  # noqa: BLE001 - raised again by the first call that needs an LM
            return None

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
                raised: BaseException | None = None
                try:
                    done = _next_done(completed)
                except KeyboardInterrupt:
                    yield from _answers_back(completed)  # replies already read are handed over, then the stop
                    raise
                for ticket, answer in done:
                    out -= 1
                    if isinstance(answer, BaseException):
                        raised = raised or answer
                        continue
                    try:
                        yield ticket, answer
                    except KeyboardInterrupt:  # thrown in by the runner (`PlanRunner._salvage`)
                        yield from _answers_back(completed)
                        raise
                if raised is not None:  # the answers already back are taken first: none is lost to the raise
                    yield from _answers_back(completed)
                    raise raised
        finally:
            while True:  # calls not started are dropped; the workers stop after the call they hold
                try:
                    todo.get_nowait()
                except queue.Empty:
                    break
            for _ in workers:
                todo.put(None)


    def _exchanges(self, source: CallSource, budget: Any) -> Iterator[tuple[int, Answer]]:
        """A sender whose calls come apart in steps (`HttpSender`: ``prepare``, ``apost``,
        ``complete``): everything runs on this thread, `in_flight` POSTs at once on an event
        loop (aiohttp), and the cache is used from this thread alone (`InlineCache`: stores
        written in batches). Profiled on the scripted endpoint at 64 in flight, a call handed
        whole to a worker thread crossed threads six times and the threads' waits for the
        interpreter lock cost about as much CPU as the work; here no call crosses a thread.

        Replies come back in waves (a fixed-latency endpoint answers calls sent together
        together), so the places they free get new calls before any reply is read, and after
        each reply read the loop takes one pass without waiting: a reply that came in
        meanwhile frees its place at once instead of after the whole wave is read."""
        sender = self._sender()
        cache = sender.inline_cache()
        loop = asyncio.new_event_loop()
        finished: deque[tuple[int, Any]] = deque()
        tasks: set[asyncio.Task] = set()
        waiter: list[asyncio.Future | None] = [None]
        connections: list[Any] = []
        out = 0

        async def post(ticket: int, exchange: Any) -> None:
            try:
                await sender.apost(exchange, connections[0], budget)
                finished.append((ticket, exchange))
            except Exception as exc:  # noqa: BLE001 - a sender bug becomes the call's error, never a lost item
                finished.append((ticket, Answer(status="error", reason=error_text(exc))))
            if waiter[0] is not None and not waiter[0].done():
                waiter[0].set_result(None)

        def send(ticket: int, exchange: Any) -> None:
            if not connections:
                loop.run_until_complete(connect())  # aiohttp's session is made on its loop
            task = loop.create_task(post(ticket, exchange))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        async def connect() -> None:
            connections.append(sender.async_connections(self.in_flight))

        async def some_finished() -> None:
            if not finished:
                waiter[0] = loop.create_future()
                await waiter[0]
                waiter[0] = None

        def step(method: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - a sender bug becomes the call's error, never a lost item
                return Answer(status="error", reason=error_text(exc))

        back: deque[tuple[int, Any]] = deque()  # replies in, not read yet

        def hand_out() -> Iterator[tuple[int, Answer]]:
            """Fill the free places with new calls; those the cache answers come back at once.
            Nothing is handed out while `in_flight` replies wait to be read, so a fast endpoint
            cannot pile up unread replies (memory) faster than this thread reads them."""
            nonlocal out
            while out < self.in_flight and len(back) < self.in_flight:
                taken = source.take(self.in_flight - out)
                if not taken:
                    return
                for ticket, call in taken:
                    exchange = step(sender.prepare, call, budget, cache=cache)
                    if isinstance(exchange, Answer) or exchange.answer is not None:
                        yield ticket, exchange if isinstance(exchange, Answer) else exchange.answer
                        continue
                    send(ticket, exchange)
                    out += 1

        def read_back() -> Iterator[tuple[int, Answer]]:
            """After an interrupt: the replies in memory already (read, not handed over), read
            and handed over without sending anything more."""
            held = [*back, *finished]
            back.clear()
            finished.clear()
            for ticket, exchange in held:
                following = exchange if isinstance(exchange, Answer) else step(sender.complete, exchange, budget)
                if isinstance(following, Answer) or following.answer is not None:
                    yield ticket, following if isinstance(following, Answer) else following.answer

        try:
            while True:
                yield from hand_out()
                if out == 0:
                    if source.exhausted:
                        return
                    raise PlanStalled("the plan has calls to come but none is ready and none is in flight")
                if cache is not None:
                    cache.flush_due()
                loop.run_until_complete(some_finished())
                while True:
                    if finished or len(back) == self.in_flight - 1:  # new replies, or room again after a full backlog
                        out -= len(finished)
                        back.extend(finished)
                        finished.clear()
                        yield from hand_out()  # the places replies free get new calls before the replies are read
                    if not back:
                        break
                    ticket, exchange = back.popleft()
                    following = exchange if isinstance(exchange, Answer) else step(sender.complete, exchange, budget)
                    if isinstance(following, Answer) or following.answer is not None:
                        yield ticket, following if isinstance(following, Answer) else following.answer
                    else:
                        send(ticket, following)  # sent again (a refused form, refused log-probabilities)
                        out += 1
                    loop.stop()  # one pass of the loop (no wait): replies that came in meanwhile are taken
                    loop.run_forever()
        except KeyboardInterrupt:  # raised here, or thrown in by the runner (`PlanRunner._salvage`)
            yield from read_back()
            raise
        finally:
            if cache is not None:
                cache.flush()
            for task in list(tasks):  # calls still out are dropped (their items are finished by the caller)
                task.cancel()
            try:
                if tasks:
                    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
                if connections:
                    loop.run_until_complete(connections[0].close())
            finally:
                loop.close()


def _loop_running() -> bool:
    """Whether this thread is inside a running event loop (a notebook, an async application
    calling a run synchronously): another loop cannot run here, so the calls go on threads."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _steps_apart(sender: Any) -> bool:
    """Whether `sender`'s calls come apart in ``prepare`` / ``post`` / ``complete`` steps."""
    return all(callable(getattr(sender, name, None)) for name in ("prepare", "apost", "complete", "inline_cache"))


def _answers_back(completed: queue.SimpleQueue) -> Iterator[tuple[int, Answer]]:
    """The answers `completed` holds now (no waiting), for a run being interrupted."""
    for ticket, answer in _drain(completed):
        if not isinstance(answer, BaseException):
            yield ticket, answer


def _drain(completed: queue.SimpleQueue) -> list[tuple[int, Any]]:
    """Whatever `completed` holds now, without waiting."""
    done = []
    while True:
        try:
            done.append(completed.get_nowait())
        except queue.Empty:
            return done


def _next_done(completed: queue.SimpleQueue) -> list[tuple[int, Any]]:
    """The calls finished so far: waits for one, then takes every other one already there.
    Waits in short slices so that Ctrl-C reaches the main thread promptly."""
    while True:
        try:
            first = completed.get(timeout=0.5)
            break
        except queue.Empty:
            continue
    return [first, *_drain(completed)]

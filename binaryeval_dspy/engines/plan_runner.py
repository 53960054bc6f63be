"""Driving a judging plan through an engine: items in, calls out, answers back, items finished.

A program states what an item needs (`PlannedProgram`): `begin` settles what needs no LM
(code checks, answers kept from an earlier run), `next_calls` says which `LMCall`s the
item needs now (all its questions; verdict mode's later rounds, the label pick and the
pressure test, once the earlier round is answered), `take` turns one `Answer` into the
program's record of it (a `QuestionVerdict`), and `finish` turns the records into the
item's result. All four are plain functions of the item's state: nothing runs a closure
to find out what will be sent.

`PlanRunner` is the engines' `CallSource`: it admits items lazily (a bounded number open
at once, so memory does not grow with the run), hands out their calls, sends a call whose
request is identical to one already out only once (its answer serves every caller:
duplicate items cost one request on every engine), holds an item's other calls until its
first is answered when ``warm_first`` says so (a provider's prompt cache is written before
it is read), and reports each item once through ``on_done`` as soon as it is finished.
The caller (the recorder, `binaryeval_dspy.runs.evaluation.run_resumable`, or a module's ``forward``) decides what an
answer and an item mean for files and scores.

Stopping: ``stop(reason)`` (a spending limit refused a request, the caller's own rule)
hands out nothing more; calls already out finish; an item with answers gets stand-ins
(`PlannedProgram.unsent`: an ``error`` verdict a rerun asks again) for the calls never
sent and is reported; so is an item whose requests all failed (its usage counts them:
every request sent is counted wherever the run's figures are shown); an item for which
nothing was sent yet is dropped (a rerun judges it). At Ctrl-C the same happens before
the interrupt propagates, so no answer and no request sent is thrown away.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from binaryeval_dspy.lm.calls import Answer, LMCall, error_text
from binaryeval_dspy.schemas.item_result import Usage


class PlannedProgram(Protocol):
    """What a program gives the runner (BinEval, VerdictJudge, the baselines)."""

    def begin(self, item: Any, previous: Any = ()) -> Any:
        """The item's state: what is settled before any LM call (raises for bad input)."""

    def next_calls(self, state: Any) -> list[LMCall]:
        """The calls the item needs now; [] when it is ready to finish (called with nothing out)."""

    def take(self, state: Any, call: LMCall, answer: Answer) -> Any:
        """Record `answer` to `call` in `state`; returns the record to journal (or None)."""

    def unsent(self, state: Any, call: LMCall, reason: str) -> Any:
        """Record a call that was never sent (stopped or interrupted); returns its record."""

    def finish(self, state: Any) -> Any:
        """The item's result from its records (pure)."""


@dataclass
class ItemRun:
    """One admitted item: its state, its calls out and what they cost."""

    index: int
    item: Any
    state: Any
    out: int = 0
    held: list[LMCall] = field(default_factory=list)
    answers: int = 0  # calls answered by the LM (not stand-ins)
    usage: Usage = field(default_factory=Usage)  # of the requests sent for it, failed ones included
    started: float | None = None
    pending: int = 0  # calls whose answer is pending (a provider batch still running)

    @property
    def spent(self) -> bool:
        """True when the item has an answer or carries a request sent for it (a failed one
        counts): reporting it is then the only way its requests are counted."""
        used = self.usage
        return bool(self.answers or used.lm_calls or used.failed_calls or used.prompt_tokens
                    or used.completion_tokens)


@dataclass
class ItemOutcome:
    """An item handed to ``on_done``: its result (None when it failed), error, usage and time.

    Attributes:
        index: the item's position in the items given.
        item: the item.
        result: `PlannedProgram.finish`'s value, or None when `error` is set.
        error: what failed the item (its planning or finishing raised), else None.
        usage: the LM usage of its calls.
        seconds: wall time from its first call going out to its finish.
        pending: calls whose answer is pending (batch); the item is then not finished
            (`result` is None and `error` None).
    """

    index: int
    item: Any
    result: Any
    error: BaseException | None
    usage: Usage
    seconds: float
    pending: int = 0
    state: Any = None


class StopRun(Exception):
    """Raised by an ``on_done`` or ``on_answer`` callback to stop the run (with ``args[0]`` as the reason)."""


class PlanRunner:
    """Hands a plan's calls to an engine and finishes items as their answers come (module docstring).

    Args:
        program: the `PlannedProgram`.
        items: ``(index, item)`` pairs, consumed lazily.
        begin: ``begin(index, item) -> state`` (default: ``program.begin(item)``).
        on_done: called with an `ItemOutcome` per item, in completion order.
        on_answer: called with ``(item_run, call, answer, record)`` as each answer is taken
            (the journal), before the item may finish.
        warm_first: send an item's first call alone, the others once it is answered.
        open_items: most items admitted and not finished at once (bounds memory).
        dedupe: send identical calls once (`LMCall.content_key`).
    """

    def __init__(self, program: PlannedProgram, items: Iterable[tuple[int, Any]], *,
                 on_done: Callable[[ItemOutcome], None],
                 begin: Callable[[int, Any], Any] | None = None,
                 on_answer: Callable[[ItemRun, LMCall, Answer, Any], None] | None = None,
                 warm_first: bool = False, open_items: int = 256, dedupe: bool = True) -> None:
        self.program = program
        self._items = iter(items)
        self._begin = begin or (lambda _index, item: program.begin(item))
        self.on_done = on_done
        self.on_answer = on_answer
        self.warm_first = warm_first
        self.open_items = max(1, open_items)
        self.dedupe = dedupe
        self._ready: deque[tuple[ItemRun, LMCall]] = deque()
        self._open: dict[int, ItemRun] = {}
        self._tickets: dict[int, list[tuple[ItemRun, LMCall]]] = {}  # ticket -> callers of that request
        self._by_content: dict[str, int] = {}  # content key -> ticket out
        self._content_of: dict[int, str] = {}
        self._next_ticket = 0
        self._items_done = False
        self.stop_reason: str | None = None
        self.pending_calls = 0
        self.not_sent = 0  # calls stood in for after a stop: never sent

    # ------------------------------------------------------------------ CallSource

    def take(self, n: int) -> list[tuple[int, LMCall]]:
        """Up to `n` calls ready now (admitting items as needed); see `CallSource.take`."""
        taken: list[tuple[int, LMCall]] = []
        while len(taken) < n and self.stop_reason is None:
            if not self._ready and not self._admit():
                break
            while self._ready and len(taken) < n:
                run, call = self._ready.popleft()
                if run.started is None:
                    run.started = time.perf_counter()
                key = call.content_key() if self.dedupe else None
                ticket = self._by_content.get(key) if key is not None else None
                if ticket is not None:  # the same request is out already: its answer serves this call too
                    self._tickets[ticket].append((run, call))
                    continue
                ticket = self._next_ticket
                self._next_ticket += 1
                self._tickets[ticket] = [(run, call)]
                if key is not None:
                    self._by_content[key] = ticket
                    self._content_of[ticket] = key
                taken.append((ticket, call))
        return taken

    @property
    def exhausted(self) -> bool:
        """No call ready and none to come (no item left to admit, none open)."""
        if self._ready:
            return False
        if self.stop_reason is not None:
            return not self._tickets
        return self._items_done and not self._open

    def stop(self, reason: str) -> None:
        """Hand out nothing more (see the module docstring); the first reason given is kept."""
        if self.stop_reason is None:
            self.stop_reason = reason
        while self._ready:
            run, call = self._ready.popleft()
            self._stand_in(run, call, reason)
        for run in list(self._open.values()):
            for call in run.held:
                self.not_sent += 1
                self.program.unsent(run.state, call, reason)
            run.held = []
            self._maybe_finish(run)

    # ------------------------------------------------------------------ running

    def run(self, engine: Any, *, budget: Any = None) -> None:
        """Send every call through `engine` and finish every item (module docstring).

        Raises:
            KeyboardInterrupt: after finishing every item that has answers (stand-ins for
                the rest), so nothing answered is lost.
        """
        answers = engine.send(self, budget=budget)
        try:
            for ticket, answer in answers:
                self.answer(ticket, answer)
        except KeyboardInterrupt:
            self._salvage(answers)
            self.interrupt("interrupted (Ctrl-C) before this call finished")
            raise
        except StopRun as stop:
            self.stop(str(stop.args[0]) if stop.args else "stopped")
            self._drain(answers)
        finally:
            close = getattr(answers, "close", None)
            if close is not None:
                close()

    def _salvage(self, answers: Iterator[tuple[int, Answer]]) -> None:
        """After an interrupt: take the answers the engine holds already (replies read but not
        handed over; the engine sends nothing more): the interrupt is thrown into the engine's
        generator, which hands them over, then ends. A second interrupt stops this at once."""
        throw = getattr(answers, "throw", None)
        if throw is None:
            return
        try:
            item = throw(KeyboardInterrupt())
            while True:
                self.answer(*item)
                item = next(answers)
        except (KeyboardInterrupt, StopIteration, StopRun, RuntimeError):
            return

    def _drain(self, answers: Iterator[tuple[int, Answer]]) -> None:
        """After a stop: take the answers of the calls still out (the engine sends no more)."""
        try:
            for ticket, answer in answers:
                self.answer(ticket, answer, stopping=True)
        except StopRun:
            self._drain(answers)

    def answer(self, ticket: int, answer: Answer, *, stopping: bool = False) -> None:
        """Take the answer of one ticket: record it for every caller, finish items that are done."""
        callers = self._tickets.pop(ticket, [])
        key = self._content_of.pop(ticket, None)
        if key is not None:
            self._by_content.pop(key, None)
        if answer.status == "not_sent":
            for run, call in callers:
                self._stand_in(run, call, answer.reason or "not sent")
            self.stop(answer.reason or "not sent")
            for run, _call in callers:
                self._maybe_finish(run)
            return
        if answer.status == "pending":
            for run, _call in callers:
                run.out -= 1
                run.pending += 1
                self.pending_calls += 1
                self._maybe_finish(run)
            return
        for position, (run, call) in enumerate(callers):
            run.out -= 1
            if position == 0:
                run.usage = run.usage + answer.usage
            if answer.status in ("answered", "unparsed"):
                run.answers += 1
            try:
                record = self.program.take(run.state, call, answer)
            except Exception as exc:  # noqa: BLE001 - a program bug fails its item, never the run
                self._fail(run, exc)
                continue
            if self.on_answer is not None:
                self.on_answer(run, call, answer, record)
            if run.held and run.out == 0:
                self._release_held(run)
            self._maybe_finish(run)

    def interrupt(self, reason: str) -> None:
        """Finish every open item that has answers or sent requests, with stand-ins for its other calls."""
        self.stop_reason = self.stop_reason or reason
        for run in sorted(self._open.values(), key=lambda r: r.index):
            if not run.spent:
                continue
            for _ticket, callers in list(self._tickets.items()):
                for caller, call in callers:
                    if caller is run:
                        self.program.unsent(run.state, call, reason)
            for call in run.held:
                self.program.unsent(run.state, call, reason)
            for queued, call in list(self._ready):
                if queued is run:
                    self.program.unsent(run.state, call, reason)
            try:
                self._report(run, self.program.finish(run.state), None)
            except (Exception, KeyboardInterrupt, StopRun):  # noqa: BLE001 - best effort while stopping
                continue
        self._open.clear()

    # ------------------------------------------------------------------ items

    def _admit(self) -> bool:
        """Admit the next item (if the open window allows); False when none was admitted."""
        while not self._items_done and len(self._open) < self.open_items:
            nxt = next(self._items, None)
            if nxt is None:
                self._items_done = True
                return False
            index, item = nxt
            run = ItemRun(index=index, item=item, state=None)
            try:
                run.state = self._begin(index, item)
                calls = self.program.next_calls(run.state)
            except Exception as exc:  # noqa: BLE001 - an item that cannot be planned fails alone
                self._report(run, None, exc)
                continue
            self._open[index] = run
            if not calls:
                self._finish(run)
                continue
            self._queue(run, calls)
            return True
        return False

    def _queue(self, run: ItemRun, calls: list[LMCall]) -> None:
        if self.warm_first and len(calls) > 1 and run.answers == 0 and run.out == 0:
            first, run.held = calls[0], list(calls[1:])
            calls = [first]
        run.out += len(calls)
        self._ready.extend((run, call) for call in calls)

    def _release_held(self, run: ItemRun) -> None:
        held, run.held = run.held, []
        run.out += len(held)
        self._ready.extendleft((run, call) for call in reversed(held))

    def _stand_in(self, run: ItemRun, call: LMCall, reason: str) -> None:
        run.out -= 1
        self.not_sent += 1
        self.program.unsent(run.state, call, reason)

    def _maybe_finish(self, run: ItemRun) -> None:
        if run.index not in self._open or run.out > 0 or run.held:
            return
        if run.pending:
            self._open.pop(run.index, None)
            self._report(run, None, None)
            return
        if self.stop_reason is not None and not run.spent:
            self._open.pop(run.index, None)  # nothing sent: dropped, a rerun judges it
            return
        if self.stop_reason is None:
            try:
                calls = self.program.next_calls(run.state)
            except Exception as exc:  # noqa: BLE001
                self._fail(run, exc)
                return
            if calls:
                self._queue(run, calls)
                return
        self._finish(run)

    def _finish(self, run: ItemRun) -> None:
        try:
            result = self.program.finish(run.state)
        except Exception as exc:  # noqa: BLE001 - an item whose finish fails is reported with its error
            self._fail(run, exc)
            return
        self._report(run, result, None)

    def _fail(self, run: ItemRun, exc: BaseException) -> None:
        self._report(run, None, exc)

    def _report(self, run: ItemRun, result: Any, error: BaseException | None) -> None:
        self._open.pop(run.index, None)
        seconds = time.perf_counter() - run.started if run.started is not None else 0.0
        self.on_done(ItemOutcome(index=run.index, item=run.item, result=result, error=error, usage=run.usage,
                                 seconds=round(seconds, 3), pending=run.pending, state=run.state))

    def calls_left(self) -> int:
        """Calls not sent: those of open items not yet out, plus every call of the items not
        admitted (planned here only to count them; an item that cannot be planned counts 0)."""
        left = self.not_sent + len(self._ready) + sum(len(run.held) for run in self._open.values())
        for index, item in self._items:
            try:
                left += len(self.program.next_calls(self._begin(index, item)))
            except Exception:  # noqa: BLE001, S112 - counting only
                continue
        self._items_done = True
        return left


def failed_answer(exc: BaseException) -> Answer:
    """The ``error`` answer of a call whose sending raised."""
    return Answer(status="error", reason=error_text(exc))


__all__ = ["ItemOutcome", "ItemRun", "PlanRunner", "PlannedProgram", "StopRun", "failed_answer"]

"""Progress of a run over items: a bar on a terminal, plain lines everywhere else.

On a terminal, a rich progress bar; when stderr is a file or a pipe (``| tee log``,
CI, nohup) a bar shows nothing until the end, so plain lines are logged instead, every
`PLAIN_EVERY_ITEMS` items or `PLAIN_EVERY_SECONDS` seconds (a line is written even while
a slow item is still running). Either way:

* the rate and the ETA count only the items judged in this session, so a resumed run
  does not take its skipped items for instant work (`eta_seconds`);
* the ETA is a moving figure: the mean time between the last `RECENT_ITEMS` finished
  items, raised while the current item runs longer than that (`moving_eta`);
* after the first item judged in this session, one line estimates the whole run from
  its wall time ("first item took 8.1 s; about 4 min for the remaining 31 items at this
  rate"); when the moving ETA later drifts far from what was announced, a "revised
  estimate" line says so (`revised_estimate`);
* given a `speed_check`, the time per LM call is compared with what the model and
  machine should give, and one hint is printed when it is several times slower.

Besides items, it counts other steps: `GenerationSteps` feeds it question generation
(requirements drafted, requirements decomposed), and `bineval optimize` its optimizers.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text
from typing_extensions import Self

PLAIN_EVERY_ITEMS = 10
PLAIN_EVERY_SECONDS = 30.0
#: A first item faster than this gets no estimate line (ROUGE, cached answers).
ESTIMATE_MIN_SECONDS = 1.0
#: The moving ETA uses the time between the last this many finished items.
RECENT_ITEMS = 5
#: A revised estimate is printed when the ETA is this many times above or below the one
#: announced (counted down since), and at least `REVISE_MIN_SECONDS` away from it.
REVISE_RATIO = 1.5
REVISE_MIN_SECONDS = 30.0
#: The speed check waits for this many LM calls and seconds of this session.
SPEED_CHECK_MIN_CALLS = 2
SPEED_CHECK_MIN_SECONDS = 5.0


def eta_seconds(done_this_session: int, remaining: int, elapsed: float) -> float | None:
    """Seconds left at this session's rate: ``remaining * elapsed / done_this_session``.

    Items skipped because an earlier session finished them are in neither count, so a
    resumed run's ETA is not shortened by them.

    Args:
        done_this_session: items finished in this session (skipped ones excluded).
        remaining: items still to do.
        elapsed: seconds since this session started working on items.

    Returns:
        The estimate, 0.0 when nothing remains, None before the first item of the
        session (no rate yet).
    """
    if remaining <= 0:
        return 0.0
    if done_this_session <= 0 or elapsed <= 0:
        return None
    return remaining * elapsed / done_this_session


def moving_eta(intervals: list[float] | tuple[float, ...], remaining: int, running: float) -> float | None:
    """Seconds left from the recent pace p = mean(`intervals`): ``remaining * p`` minus the time
    the current item has already run; once it has run longer than p, every remaining item is
    taken to be as slow as it (``remaining * running - p``), so an overdue item raises the
    estimate before it finishes instead of leaving it at 0.

    Args:
        intervals: seconds between consecutive finished items of this session (the first
            counted from the session's start), most recent last; the caller keeps the last
            few (`RECENT_ITEMS`).
        remaining: items still to do.
        running: seconds since the last item finished (or the session started).

    Returns:
        The estimate in seconds, 0.0 when nothing remains, None before any interval.
    """
    if remaining <= 0:
        return 0.0
    if not intervals:
        return None
    per_item = eta_seconds(len(intervals), 1, sum(intervals))
    if per_item is None:
        return None
    running = max(0.0, running)
    return remaining * max(per_item, running) - min(running, per_item)


def format_duration(seconds: float | None) -> str:
    """``h:mm:ss`` (``-:--:--`` when unknown)."""
    if seconds is None or not math.isfinite(seconds):
        return "-:--:--"
    seconds = round(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def rough_duration(seconds: float) -> str:
    """A spoken estimate: ``40 s``, ``4 min``, ``1 h 20 min``."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _plural(unit: str, count: int) -> str:
    return unit if count == 1 else unit + "s"


def first_item_estimate(first_seconds: float, remaining: int, in_flight: int = 1, *, fast_before: int = 0,
                        unit: str = "item") -> str:
    """The line printed once the first item of a session is done.

    Args:
        first_seconds: the first item's wall time.
        remaining: items left after it.
        in_flight: LM calls in flight; above 1 items overlap, so the estimate is an
            upper bound and is said to be one.
        fast_before: items of this session finished before it in well under a second
            (answers from DSPy's cache, empty outputs); the estimate then starts from
            the first item that took real time, and says so.
        unit: what is counted ("item", "requirement", "optimizer").
    """
    which = f"first {unit}" if not fast_before else (
        f"{unit} {fast_before + 1} (the first that was not near-instant: {fast_before} cached or empty before it)")
    if remaining <= 0:
        return f"{which} took {first_seconds:.1f} s."
    line = (f"{which} took {first_seconds:.1f} s; about {rough_duration(first_seconds * remaining)} for the "
            f"remaining {remaining} {_plural(unit, remaining)} at this rate")
    if in_flight > 1:
        line += f" (at most: {in_flight} calls are in flight, so items overlap)"
    return line + "."


@dataclass
class SessionCounter:
    """Counts of one progress task: everything done, and what this session did.

    Attributes:
        description: the task's name ("items", a method's title).
        total: items in the task.
        skipped: items done by an earlier session (not timed).
        done: items finished in this session.
        started: when this session started on the task (`clock` time).
        first_seconds: the wall time of the session's first finished item.
        last_done_at: when the session's last item finished (`clock` time).
        estimated: whether the run's estimate was printed.
        note: the progress note of the last item.
        unit: what one step of the task is ("item", "requirement").
        recent: seconds between the last `RECENT_ITEMS` finished items (`moving_eta`).
        calls: LM calls of this session's finished items, as reported to `ItemProgress.update`.
        calls_each: the fewest LM calls one step makes (None: unknown), so that a step still
            running bounds the time per call from below.
        announced: the last estimate printed (seconds left) and when (`clock` time).
    """

    description: str
    total: int
    started: float
    skipped: int = 0
    done: int = 0
    first_seconds: float | None = None
    last_done_at: float | None = None
    estimated: bool = False
    note: str = ""
    unit: str = "item"
    recent: deque = field(default_factory=lambda: deque(maxlen=RECENT_ITEMS), repr=False)
    calls: int = 0
    calls_each: float | None = None
    announced: tuple[float, float] | None = None
    last_line_done: int = field(default=0, repr=False)

    @property
    def completed(self) -> int:
        """Items finished, in earlier sessions or this one."""
        return self.skipped + self.done

    def eta(self, now: float) -> float | None:
        """Seconds left at this session's recent pace (`moving_eta`)."""
        since = self.last_done_at if self.last_done_at is not None else self.started
        return moving_eta(tuple(self.recent), self.total - self.completed, now - since)

    def rate_text(self, now: float) -> str:
        """``0.12 items/s (8.1 s per item)`` over the items finished in this session (the one
        still running is not counted), or ``no item finished yet``."""
        if not self.done or self.last_done_at is None:
            return f"no {self.unit} finished yet ({now - self.started:.0f} s so far)"
        elapsed = self.last_done_at - self.started
        if elapsed <= 0:
            return f"{self.done} {_plural(self.unit, self.done)} in no measurable time"
        return f"{self.done / elapsed:.2f} {_plural(self.unit, 2)}/s ({elapsed / self.done:.1f} s per {self.unit})"


def revised_estimate(counter: SessionCounter, now: float, eta: float, was: float) -> str:
    """The line printed when the moving ETA has drifted from the one announced: ``revised
    estimate: 3 items done at 132 s per item (recent); about 31 min for the remaining 13
    items (was 6 min)``. `eta` and `was` are seconds left, now and as announced (counted
    down since)."""
    remaining = counter.total - counter.completed
    per_item = sum(counter.recent) / len(counter.recent) if counter.recent else 0.0
    return (f"revised estimate: {counter.done} {_plural(counter.unit, counter.done)} done at {per_item:.1f} s per "
            f"{counter.unit} (recent); about {rough_duration(eta)} for the remaining {remaining} "
            f"{_plural(counter.unit, remaining)} (was {rough_duration(max(was, 0.0))}).")


class SessionEtaColumn(ProgressColumn):
    """A rich column with the ETA from this session's rate (see `eta_seconds`), where
    rich's own column would count a resume's skipped items as instant work."""

    def __init__(self, counters: dict[int, SessionCounter], clock: Callable[[], float]) -> None:
        super().__init__()
        self.counters = counters
        self.clock = clock

    def render(self, task) -> Text:
        counter = self.counters.get(task.id)
        eta = counter.eta(self.clock()) if counter is not None else None
        return Text(f"ETA {format_duration(eta)}", style="progress.remaining")


class ItemProgress:
    """Progress of one or more item loops (one per method in a benchmark).

    Use as a context manager; `add_task` per loop, then `update` after every item with
    the status the loop reports (``"skipped"`` for items done before this session).

    Args:
        console: where progress goes (stderr's console).
        plain: force plain lines (True) or the bar (False); None picks plain lines
            when `console` is not a terminal.
        in_flight: LM calls in flight (for the first item's estimate).
        every_items / every_seconds: how often plain lines are written.
        estimate_min_seconds: the first item must take at least this long for its
            estimate to be printed.
        speed_check: given the seconds per LM call so far (wall time x calls in flight /
            calls), a hint when that is several times what the model and machine should
            give, else None (`binaryeval_dspy.cli.run_speed.SpeedCheck`); the first hint
            is printed, once per run. Calls are counted from `update`'s ``calls``.
        clock: time source (tests pass a fake one).
    """

    def __init__(self, console: Console, *, plain: bool | None = None, in_flight: int = 1,
                 every_items: int = PLAIN_EVERY_ITEMS, every_seconds: float = PLAIN_EVERY_SECONDS,
                 estimate_min_seconds: float = ESTIMATE_MIN_SECONDS,
                 speed_check: Callable[[float], str | None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console
        self.plain = (not console.is_terminal) if plain is None else plain
        self.in_flight = in_flight
        self.every_items = max(1, every_items)
        self.every_seconds = every_seconds
        self.estimate_min_seconds = estimate_min_seconds
        self.clock = clock
        self.speed_check = speed_check
        self.speed_hinted = False
        self.counters: dict[int, SessionCounter] = {}
        self._lock = threading.Lock()
        self._last_line = clock()
        self._current: int | None = None
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._bar: Progress | None = None
        if not self.plain:
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), SessionEtaColumn(self.counters, clock),
                                 TextColumn("{task.fields[note]}"), console=console)

    def __enter__(self) -> Self:
        if self._bar is not None:
            self._bar.__enter__()
        if self.every_seconds and self.every_seconds > 0 and (self._bar is None or self.speed_check is not None):
            self._ticker = threading.Thread(target=self._tick, name="progress-lines", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=2)
        if self._bar is not None:
            self._bar.__exit__(*exc)
        elif exc[0] is None:
            with self._lock:
                for key, counter in self.counters.items():
                    if counter.done and counter.last_line_done != counter.done:
                        self._line(key)

    def add_task(self, description: str, total: int, *, unit: str = "item", calls_each: float | None = None) -> int:
        """Start timing a loop of `total` steps (each one `unit`: "item", "requirement", and
        making at least `calls_each` LM calls when known); returns its key for `update`."""
        with self._lock:
            if self._bar is not None:
                key = self._bar.add_task(description, total=total, note="")
            else:
                key = len(self.counters)
            self.counters[key] = SessionCounter(description=description, total=total, started=self.clock(),
                                                unit=unit, calls_each=calls_each)
            self._current = key
            self._last_line = self.clock()
        return key

    def update(self, key: int, status: str, note: str = "", *, calls: int | None = None) -> None:
        """One item of task `key` is finished (`status` as the item loop reports it;
        ``"skipped"``: done by an earlier session, not timed; `calls`: the LM calls it
        made, for the speed check)."""
        messages: list[str] = []
        with self._lock:
            counter = self.counters[key]
            now = self.clock()
            if status == "skipped":
                counter.skipped += 1
            else:
                took = now - (counter.last_done_at if counter.last_done_at is not None else counter.started)
                counter.done += 1
                counter.last_done_at = now
                counter.recent.append(took)
                counter.calls += max(0, calls or 0)
                if counter.first_seconds is None:
                    counter.first_seconds = took
                remaining = counter.total - counter.completed
                if not counter.estimated and status != "empty_output" and took >= self.estimate_min_seconds:
                    counter.estimated = True
                    counter.announced = (took * remaining, now)
                    messages.append(first_item_estimate(took, remaining, self.in_flight,
                                                        fast_before=counter.done - 1, unit=counter.unit))
                elif counter.announced is not None and remaining > 0:
                    messages += self._revision(counter, now)
                messages += self._speed()
            counter.note = note
            if self._bar is not None:
                self._bar.update(key, completed=counter.completed, note=escape(note))
            elif status != "skipped" and (counter.done % self.every_items == 0
                                          or counter.completed == counter.total
                                          or now - self._last_line >= self.every_seconds):
                self._line(key)
        prefix = "" if len(self.counters) == 1 else f"{counter.description.strip()}: "
        for message in messages:
            self.console.print(escape(prefix + message), highlight=False)

    def set_note(self, key: int, note: str) -> None:
        """Show `note` beside task `key` (on the bar, or in its next plain line) without finishing a step."""
        with self._lock:
            self.counters[key].note = note
            if self._bar is not None:
                self._bar.update(key, note=escape(note))

    def _revision(self, counter: SessionCounter, now: float) -> list[str]:
        """A revised-estimate line when the moving ETA is far from the announced one (the lock is held)."""
        eta = counter.eta(now)
        if eta is None or counter.announced is None:
            return []
        said, at = counter.announced
        was = max(0.0, said - (now - at))
        if abs(eta - was) < REVISE_MIN_SECONDS or (eta <= was * REVISE_RATIO and eta * REVISE_RATIO >= was):
            return []
        counter.announced = (eta, now)
        return [revised_estimate(counter, now, eta, was)]

    def _speed(self) -> list[str]:
        """The speed check's hint, once per run (the lock is held).

        The time per call is the larger of: the finished steps' time over their calls (summed
        over every task, each from its start to its last finished step), and, with one call
        in flight, the running step's time over the fewest calls it makes (`calls_each`), a
        lower bound that lets a first item that drags on get its hint before it ends.
        """
        if self.speed_check is None or self.speed_hinted:
            return []
        now = self.clock()
        candidates = []
        calls = sum(c.calls for c in self.counters.values())
        elapsed = sum((c.last_done_at or c.started) - c.started for c in self.counters.values() if c.calls)
        if calls >= SPEED_CHECK_MIN_CALLS and elapsed >= SPEED_CHECK_MIN_SECONDS:
            candidates.append(elapsed * self.in_flight / calls)
        current = self.counters.get(self._current) if self._current is not None else None
        if current is not None and current.calls_each and self.in_flight == 1 and current.completed < current.total:
            running = now - (current.last_done_at if current.last_done_at is not None else current.started)
            if running >= SPEED_CHECK_MIN_SECONDS:
                candidates.append(running / current.calls_each)
        if not candidates:
            return []
        hint = self.speed_check(max(candidates))
        if not hint:
            return []
        self.speed_hinted = True
        return [hint]

    def _line(self, key: int) -> None:
        """Write one plain progress line for task `key` (the lock is held)."""
        counter = self.counters[key]
        now = self.clock()
        before = f", {counter.skipped} done before" if counter.skipped else ""
        percent = f" ({counter.completed / counter.total:.0%})" if counter.total else ""
        note = f"; {counter.note}" if counter.note else ""
        self.console.print(escape(
            f"{counter.description}: {counter.completed}/{counter.total} done{percent}{before}; "
            f"{counter.rate_text(now)}; ETA {format_duration(counter.eta(now))}{note}"), highlight=False)
        counter.last_line_done = counter.done
        self._last_line = now

    def _tick(self) -> None:
        """While a step runs: the speed check, and in plain mode a line every `every_seconds`."""
        while not self._stop.wait(min(self.every_seconds, 5.0)):
            self.check_speed()
            if self._bar is not None:
                continue
            with self._lock:
                if self._current is None or self.clock() - self._last_line < self.every_seconds:
                    continue
                counter = self.counters[self._current]
                if counter.completed < counter.total:
                    self._line(self._current)

    def check_speed(self) -> None:
        """Run the speed check now (the ticker does it every few seconds) and print its hint."""
        with self._lock:
            messages = self._speed()
        for message in messages:
            self.console.print(escape(message), highlight=False)


class GenerationSteps:
    """`QuestionGenerator`'s ``on_step`` for `ItemProgress`: the requirement list (and the
    dimension inference) as a first task of countable steps, then one step per requirement
    decomposed, noting the questions kept so far; every step is one LM call.

    Args:
        progress: the command's `ItemProgress`.
        infer_dimensions: whether the dimensions are inferred (one more LM call).
    """

    def __init__(self, progress: ItemProgress, *, infer_dimensions: bool) -> None:
        self.progress = progress
        self.infer_dimensions = infer_dimensions
        name = "requirements and dimensions" if infer_dimensions else "requirements"
        self.first = progress.add_task(name, total=2 if infer_dimensions else 1, unit="step", calls_each=1)
        self.requirements = 0
        self.decomposed: int | None = None

    def __call__(self, step: str, count: int, fallbacks: int = 0) -> None:
        if step == "requirements":
            self.requirements = count
            self.progress.update(self.first, "done", note=f"{count} requirements drafted", calls=1)
        elif step == "dimensions":
            if self.infer_dimensions:
                self.progress.update(self.first, "done", note=f"{count} dimensions", calls=1)
            self.decomposed = self.progress.add_task("requirements decomposed", total=self.requirements,
                                                     unit="requirement", calls_each=1)
        elif step == "requirement" and self.decomposed is not None:
            self.progress.update(self.decomposed, "done", calls=1,
                                 note=f"{count} questions kept ({fallbacks} fallback templates)")

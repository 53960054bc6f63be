"""What a command's LM calls should take on this machine, and what to say when they take far longer.

The figures for the embedded model (SmolLM2-135M-Instruct, Q4 GGUF, llama.cpp) were
measured on an idle 2-core machine; a served or hosted model gets a generous figure for
a short structured reply. `SpeedCheck` is given to `ItemProgress` and prints one hint
when the time per call is `SLOW_FACTOR` times the expected one, with the likely cause:
cores oversubscribed (the 1-minute load average against the cores; the fix is
``--llama-threads 1``) or a slow endpoint. `questions_forecast` is the line `bineval
questions` prints before it starts on the embedded model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from binaryeval_dspy.cli.item_progress import rough_duration

#: Seconds per judge call (one yes/no question with its explanation) of the embedded
#: model on an idle 2-core machine: 12 questions in about 8 s.
EMBEDDED_SECONDS_PER_JUDGE_CALL = 0.7
#: Seconds per question-generation call of the embedded model on an idle 2-core machine
#: (a requirement list or one requirement's questions: replies of up to 512 tokens). Measured:
#: `bineval questions` on the SummEval task prompt made 6 calls in 123 s of CPU time on one
#: thread (about 20 s each); two threads on free cores take about two thirds of that.
EMBEDDED_SECONDS_PER_GENERATION_CALL = 15.0
#: Seconds per call a served or hosted model should stay under for a short reply.
SERVED_SECONDS_PER_CALL = 3.0
#: How many times the expected time per call counts as "several times slower".
SLOW_FACTOR = 4.0
#: Cores the embedded figures were measured on.
MEASURED_CORES = 2


def machine_load() -> tuple[float | None, int]:
    """(1-minute load average or None where the platform has none, CPU cores)."""
    try:
        load: float | None = os.getloadavg()[0]
    except (OSError, AttributeError):
        load = None
    return load, os.cpu_count() or 1


def expected_seconds_per_call(*, embedded: bool, generation: bool = False, cores: int | None = None) -> float:
    """Seconds one call should take: the embedded model's measured figure scaled to the
    cores (fewer than 2 cores is slower; more is not counted as faster), or
    `SERVED_SECONDS_PER_CALL`."""
    if not embedded:
        return SERVED_SECONDS_PER_CALL
    base = EMBEDDED_SECONDS_PER_GENERATION_CALL if generation else EMBEDDED_SECONDS_PER_JUDGE_CALL
    cores = cores or os.cpu_count() or 1
    return base * max(1.0, MEASURED_CORES / cores)


@dataclass
class SpeedCheck:
    """Called by `ItemProgress` with the seconds per call so far; returns a hint when they
    are `SLOW_FACTOR` times `expected` or more, else None.

    Attributes:
        expected: seconds one call should take (`expected_seconds_per_call`).
        embedded: the LM runs in this process (llama.cpp), so the machine's load is the
            likely cause; else the endpoint is.
        threads: llama.cpp threads of the embedded model (None when unknown).
        in_flight: calls kept in flight (a served model's --concurrency).
    """

    expected: float
    embedded: bool
    threads: int | None = None
    in_flight: int = 1

    def __call__(self, seconds_per_call: float) -> str | None:
        if seconds_per_call < SLOW_FACTOR * self.expected:
            return None
        slower = (f"LM calls take {seconds_per_call:.1f} s each, {seconds_per_call / self.expected:.0f}x the "
                  f"{self.expected:.1f} s expected")
        if not self.embedded:
            if self.in_flight > 1:
                # seconds_per_call is (wall time / calls) x calls in flight: a server that answers one request
                # at a time finishes one every `each` seconds, and the rest of each call's time is its queue
                each = seconds_per_call / self.in_flight
                return (f"{slower} for a short reply, counting the wait of {self.in_flight} calls in flight: one "
                        f"finishes every {each:.1f} s. If the server answers one request at a time (llama.cpp's "
                        "server without --parallel, one Ollama or vLLM slot), each call takes about "
                        f"{each:.1f} s and waits in its queue for the rest: more --concurrency only lengthens the "
                        "queue; give the server more parallel slots or use a faster model. If it answers many "
                        "at once, it is slow (load, a rate limit or a large model): check its load.")
            return (f"{slower} for a short reply: the endpoint is slow (a loaded server, a rate limit or a large "
                    "model). Check the server's load; with 1 call in flight, --concurrency N keeps more going if "
                    "the server answers several requests at once (one that answers one at a time is not faster "
                    "with more).")
        load, cores = machine_load()
        busy = f"load average {load:.1f} on {cores} cores" if load is not None else f"{cores} cores"
        # the load counts this run's own threads; more than the cores (with a margin) is oversubscribed
        oversubscribed = load is not None and load > cores + 0.5
        if oversubscribed and (self.threads or 2) > 1:
            return (f"{slower} on this machine: its cores are oversubscribed ({busy}, and this run uses "
                    f"{self.threads or 'several'} llama.cpp threads, which wait for each other on busy cores). "
                    "Fix: stop and rerun the same command with --llama-threads 1 (or BINEVAL_LLAMA_THREADS=1); "
                    "finished items are kept.")
        if oversubscribed:
            return (f"{slower} on this machine: other processes hold its cores ({busy}; this run already uses one "
                    "llama.cpp thread). Fix: let them finish, or pass --lm to use a served model.")
        return (f"{slower} on this machine ({busy}: not oversubscribed now). Long inputs make long prompts; a "
                "served model (--lm) is faster.")


def questions_forecast(*, calls: int, threads: int | None) -> str:
    """The line `bineval questions` prints before it runs on the embedded model: roughly how
    long `calls` generation calls take on this machine now, and what the set will be like.

    The time is `calls` x the measured time per call, scaled by how busy the machine is:
    with a load average L from other processes and `threads` llama.cpp threads on C cores,
    by ``max(1, (L + threads) / C)``.
    """
    load, cores = machine_load()
    threads = threads or cores
    per_call = expected_seconds_per_call(embedded=True, generation=True, cores=cores)
    busy = max(1.0, ((load or 0.0) + threads) / cores)
    seconds = calls * per_call * busy
    low, high = seconds * 0.5, seconds * 1.5
    where = f"{cores} cores, load average {load:.1f}" if load is not None else f"{cores} cores"
    return (f"On the embedded model this takes roughly {rough_duration(low)} to {rough_duration(high)} on this "
            f"machine ({where}; up to {calls} LM calls, plus two short ones per requirement left without a drafted "
            "question), and the set will hold few questions or none: the model is too small to draft questions, "
            "and the dimension it files a requirement under follows the order the dimensions are listed in, so "
            "such requirements are left out, each named. Pass --lm with a real model for a usable set.")


def speed_check_for(handle, in_flight: int = 1, *, generation: bool = False) -> SpeedCheck | None:
    """The `SpeedCheck` for a command's LM (`LMHandle`); None without one (ROUGE-only runs)."""
    if handle is None:
        return None
    engine = getattr(handle, "engine", None)
    choice = getattr(engine, "thread_choice", None)
    return SpeedCheck(expected=expected_seconds_per_call(embedded=bool(handle.embedded), generation=generation),
                      embedded=bool(handle.embedded), threads=choice.threads if choice is not None else None,
                      in_flight=in_flight)

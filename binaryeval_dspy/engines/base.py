"""The engine interface, and the choice of engine for a run.

A run builds its judging plan once (`binaryeval_dspy.runs.evaluation.run_resumable`:
which items, and per item which calls are still needed, with code-checked questions,
empty outputs and earlier answers already settled) and hands it to one engine. An
engine only executes: it runs each planned item's calls (`ItemWork.calls`), then its
``finish`` step, and reports every item through ``on_done`` as an `ItemDone`. Storing
answers and results, resuming, usage, cost and the summary are the recorder's
(`run_resumable` and the answer journal), the same whatever the engine.

Engines:

* ``local`` (`binaryeval_dspy.engines.local`): one call at a time, an item's questions
  back to back: an in-process llama.cpp model reuses the prompt prefix they share.
* ``live`` (`binaryeval_dspy.engines.live`): many calls in flight to a served or hosted
  endpoint, through DSPy (its adapter, cache, retries and usage tracking).
* ``ray`` (`binaryeval_dspy.engines.ray_engine`): requests formatted by DSPy's adapter on
  the driver, sent through Ray Data, replies parsed by the same adapter.
* ``batch``: the provider's batch API (`binaryeval_dspy.engines.batch`), which spans
  several invocations (submit, poll, collect) and so is driven by its own command path.

Adding an engine: a module with a class that has ``name`` and ``run`` (below), and one
line in `make_engine`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from binaryeval_dspy.engines.item_work import CallBudget, ItemDone, ItemWork
from binaryeval_dspy.errors import ConfigError

if TYPE_CHECKING:
    from binaryeval_dspy.lm.factory import LMHandle
    from binaryeval_dspy.settings import RunSettings


class Engine(Protocol):
    """What executes a judging plan.

    Attributes:
        name: the engine's name (``local``, ``live``, ``ray``), recorded in the manifest.
        notes: lines for the user about how the run went on this engine (e.g. the Ray
            cluster's start-up time), filled during `run`; empty when there is nothing to say.
    """

    name: str
    notes: list[str]

    def run(self, items: Sequence[Any], plan: Callable[[int, Any], ItemWork], on_done: Callable[[ItemDone], None],
            *, budget: CallBudget | None = None) -> None:
        """Execute every item's work and report each item once, as soon as it is done.

        Args:
            items: the items still to judge, in order.
            plan: ``plan(index, item) -> ItemWork``: the item's calls and finish step;
                called on the calling thread, in item order.
            on_done: called on the calling thread with one `ItemDone` per item; it may
                raise `StopItems` to stop early (no further call is sent).
            budget: asked before every call (``max_cost``), or None.

        Raises:
            KeyboardInterrupt: after stopping; answers already returned were journaled
                by the calls themselves (`binaryeval_dspy.runs.answer_journal`).
        """


def make_engine(settings: RunSettings, handle: LMHandle | None) -> Engine:
    """The engine `settings` names for a run with `handle` (``auto``: `RunSettings.engine_for`).

    Raises:
        ConfigError: ``batch`` (driven by `binaryeval_dspy.engines.batch.run_batch`, not
            through this interface), ``live`` / ``ray`` with an embedded model, or ``ray``
            with ``max_cost`` set.
        LMConfigError: the ray engine with a model it cannot reach.
        MissingExtraError: the ``ray`` engine without the ``ray`` extra.
    """
    name = settings.engine_for(handle)
    if name in ("live", "ray") and handle is not None and handle.embedded:
        raise ConfigError(f"the {name} engine sends requests to an endpoint, but {handle.name} is the embedded model "
                          "run in this process", fix="use engine 'local' (or 'auto'), or a served model.")
    if name == "local":
        from binaryeval_dspy.engines.local import LocalEngine

        return LocalEngine()
    if name == "live":
        from binaryeval_dspy.engines.live import LiveEngine

        return LiveEngine(settings.in_flight(handle))
    if name == "ray":
        if settings.max_cost is not None:
            raise ConfigError("max_cost cannot be enforced by the ray engine: it sends many requests at once, so it "
                              "cannot ask the budget before each call.", fix="use the live engine for a run with a "
                                                                            "spending limit.")
        from binaryeval_dspy.engines.ray_engine import RayEngine

        return RayEngine(handle, settings)
    raise ConfigError(f"the {name} engine is not run through make_engine",
                      fix="batch runs go through binaryeval_dspy.engines.batch.run_batch (the CLI does this).")

"""The engine interface, and the choice of engine for a run.

A run's judging plan is data (`binaryeval_dspy.lm.calls.LMCall`s, made by the programs and
handed out by the run's plan runner, `binaryeval_dspy.engines.plan_runner`). An engine only
sends: it takes calls from a `CallSource` as it has room for them, and yields each call's
`Answer` (the reply read through the run's adapter, an error, ``not_sent``, or, for a
provider batch that spans invocations, ``pending``) with its usage. What the answers mean
(verdicts, scores, statuses), where they are written (the answer journal, results.jsonl,
the manifest, the summary) and how a run resumes belong to the runner and the recorder,
the same for every engine.

Engines (`make_engine` chooses one; the CLI has no engine branch):

* ``local`` (`binaryeval_dspy.engines.threads`): one call at a time on the calling thread,
  in plan order, so an item's questions go back to back: an in-process llama.cpp model
  reuses the prompt prefix they share.
* ``live`` (`binaryeval_dspy.engines.threads`): many calls in flight on a thread pool, each
  sent by the run's sender (`binaryeval_dspy.engines.senders`): straight to an
  OpenAI-compatible endpoint, or through DSPy's LM for any other.
* ``ray`` (`binaryeval_dspy.engines.ray_engine`): calls go to Ray tasks (one per CPU of
  the cluster); the workers format, send and read them, and small answer rows come back.
* ``batch`` (`binaryeval_dspy.engines.batch`): the provider's batch API; a call whose
  batch has not ended is ``pending`` and is collected by a later invocation.
* ``replay`` (`binaryeval_dspy.engines.replay`): each call answered from a verdicts file
  (setting `replay_verdicts`); nothing is sent.

Adding an engine: one module with a class that has ``name``, ``notes`` and ``send`` (below),
and one line in `make_engine`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from binaryeval_dspy.errors import ConfigError

if TYPE_CHECKING:
    from binaryeval_dspy.engines.senders import CallBudget
    from binaryeval_dspy.lm.calls import Answer, LMCall
    from binaryeval_dspy.lm.factory import LMHandle
    from binaryeval_dspy.settings import RunSettings


class CallSource(Protocol):
    """Where an engine takes its calls from (the plan runner): lazily, as it has room.

    A call is handed out once, with a ticket (an int unique in the run); the engine yields
    exactly one answer per ticket it took.
    """

    def take(self, n: int) -> list[tuple[int, LMCall]]:
        """Up to `n` calls ready now (never blocks; [] when none is ready now)."""

    @property
    def exhausted(self) -> bool:
        """True when no call is ready and none will come unless an answer still out brings one."""

    def stop(self, reason: str) -> None:
        """Hand out no more calls (e.g. a spending limit was reached); the engine finishes the calls it holds."""


class Engine(Protocol):
    """What sends a judging plan's calls.

    Attributes:
        name: the engine's name (``local``, ``live``, ``ray``, ``batch``), in the manifest.
        notes: lines for the user about how the run went on this engine (e.g. Ray's
            start-up time), filled during `send`; empty when there is nothing to say.
    """

    name: str
    notes: list[str]

    def send(self, source: CallSource, *, budget: CallBudget | None = None) -> Iterator[tuple[int, Answer]]:
        """Send every call `source` hands out and yield ``(ticket, answer)`` as each is done.

        The caller handles each answer before the next is produced (it may add calls to
        `source`). Never raises for one failed request: its answer is an ``error``.

        Args:
            source: the calls (`CallSource`).
            budget: asked before every request (``max_cost``), or None.

        Raises:
            KeyboardInterrupt: after stopping; answers yielded before stay valid.
        """


def make_engine(settings: RunSettings, handle: LMHandle | None) -> Engine:
    """The engine `settings` names for a run with `handle` (``auto``: `RunSettings.engine_for`).

    Raises:
        ConfigError: ``live`` / ``ray`` / ``batch`` with an embedded model, or ``ray`` with
            ``max_cost`` set.
        LMConfigError: the ray or batch engine with a model it cannot reach.
        MissingExtraError: the ``ray`` engine without the ``ray`` extra.
    """
    name = settings.engine_for(handle)
    if name in ("live", "ray", "batch") and handle is not None and handle.embedded:
        raise ConfigError(f"the {name} engine sends requests to an endpoint, but {handle.name} is an embedded model "
                          "run in this process.", fix="use the local engine (run setting engine 'local', or 'auto'), "
                                                      "or a served model.")
    if name in ("local", "live"):
        from binaryeval_dspy.engines.threads import ThreadedEngine

        sender = None
        if settings.judges:  # a panel or cascade: each call to its judge's LM
            from binaryeval_dspy.engines.senders import JudgeRouter, sender_for

            handles = {spec: judge_handle(spec, settings) for spec in settings.judges}
            if name == "live" and any(h.embedded for h in handles.values()):
                raise ConfigError("the live engine sends requests to endpoints, but a judge is an embedded model",
                                  fix="use the local engine (run setting engine 'local').")
            sender = JudgeRouter({spec: sender_for(h) for spec, h in handles.items()})
        return ThreadedEngine(name, handle, settings.in_flight(handle), sender=sender)
    if name == "ray":
        if settings.max_cost is not None:
            raise ConfigError("max_cost cannot be enforced by the ray engine: it sends many requests at once, so it "
                              "cannot ask the budget before each call.", fix="use the live engine for a run with a "
                                                                            "spending limit.")
        from binaryeval_dspy.engines.ray_engine import RayEngine

        return RayEngine(handle, settings)
    if name == "batch":
        from binaryeval_dspy.engines.batch import BatchEngine

        return BatchEngine(handle, settings)
    if name == "replay":
        from binaryeval_dspy.engines.replay import ReplayEngine

        return ReplayEngine(replay_verdicts(settings, handle))
    raise ConfigError(f"unknown engine {name!r}", expected="local, live, ray, batch or replay",
                      fix="set the run setting `engine` to one of them.")


def replay_verdicts(settings: RunSettings, handle: Any = None) -> Any:
    """The verdicts file a ``replay`` run answers from (`binaryeval_dspy.engines.replay.ReplayVerdicts`):
    the one `handle` holds when it is a replay handle (`replay_handle`: read once), else read now.

    Raises:
        InputError: the file does not read; ConfigError: no `replay_verdicts`, or an unknown
            or missing `replay_judge`.
    """
    from binaryeval_dspy.engines.replay import ReplayVerdicts

    if settings.replay_verdicts is None:
        raise ConfigError("the replay engine needs a verdicts file", fix="give `replay_verdicts` FILE.")
    held = getattr(handle, "replay", None)
    if held is not None and str(held.path) == settings.replay_verdicts and held.members == settings.judges and (
            settings.replay_judge in (None, held.judge)):
        return held
    return ReplayVerdicts(settings.replay_verdicts, judge=settings.replay_judge, members=settings.judges)


def ensemble_handle(settings: RunSettings, *, name: str) -> LMHandle:
    """The run's LM handle for a panel or cascade of `settings.judges`: the first judge's LM
    (it sets the run's adapter and whether it is embedded), named `name`, priced at the
    judges' price when they all have the same, else unknown (never one judge's price for all)."""
    import dataclasses

    handles = [judge_handle(spec, settings) for spec in settings.judges]
    prices = {h.priced_as() for h in handles}
    handle = dataclasses.replace(handles[0], name=name)
    price = prices.pop() if len(prices) == 1 else None
    handle.priced_as = lambda: price  # type: ignore[method-assign]
    return handle


def judge_handle(spec: str, settings: RunSettings) -> LMHandle:
    """The LM of one judge of a panel or cascade (`RunSettings.judges`): `spec` is a LiteLLM id,
    or a base URL and its model as ``URL#MODEL``; made with the run's adapter and timeout.

    Raises:
        LMConfigError: as `binaryeval_dspy.lm.factory.make_lm`, about this judge of `judges`
            (`judge_error`: a base URL without ``#MODEL`` is told to name its model there).
    """
    from binaryeval_dspy.errors import LMConfigError
    from binaryeval_dspy.lm.factory import make_lm

    base, _, model = spec.partition("#")
    try:
        return make_lm(base, model=model or None, adapter=settings.adapter, timeout=settings.timeout)
    except LMConfigError as exc:
        raise judge_error(spec, exc) from exc


def judge_error(spec: str, exc: Any) -> Any:
    """`exc`, an error about an LM given as `spec` and `model` (`make_lm`, `check_provider_key`),
    said of the judge `spec` of `judges` instead: a judge has no `model` of its own, its model is
    the ``#MODEL`` part of its spec (``URL#MODEL``). Returns an error of the same type."""
    base = spec.partition("#")[0]

    def reword(text: str | None) -> str | None:
        if text is None:
            return None
        text = text.replace(f"`spec` {base}: ", "").replace(f"`spec` {base}", "it").replace("add `model` NAME", f"write the judge as {base}#NAME")
        return text.replace("`spec`", "`judges`").replace("`model`", "#MODEL")

    return type(exc)(f"judge {spec!r} of `judges`: {reword(exc.message)}", expected=reword(exc.expected),
                     received=exc.received, fix=reword(exc.fix))


def engine_sender(handle: Any, *, lm: Any = None) -> Any:
    """The sender of a run with `handle` (`binaryeval_dspy.engines.senders.sender_for`), or, without a
    handle, `lm` (a predictor's own) or DSPy's configured LM, with the adapter its judgments need
    (`binaryeval_dspy.lm.adapters.judging_adapter`).

    Raises:
        ConfigError: no handle and no LM configured.
    """
    from binaryeval_dspy.engines.senders import LMSender, sender_for

    if handle is not None:
        return sender_for(handle)
    import dspy

    from binaryeval_dspy.lm.adapters import judging_adapter
    from binaryeval_dspy.lm.cache_identity import cache_scoped

    lm = cache_scoped(lm or dspy.settings.lm)
    if lm is None:
        raise ConfigError("no LM is configured for judging.", fix=("configure one: dspy.configure(lm=...) or dspy.context(lm=...) around the call, "
                               "program.set_lm(lm) on a program, or evaluate_items(..., lm=make_lm(...))."))
    return LMSender(lm, judging_adapter(dspy.settings.adapter, lm))

"""`RunSettings`: how one run judges its items, as one typed object passed down explicitly.

The LM handle (`binaryeval_dspy.lm.factory.LMHandle`) says how to reach a model; the run
settings say how a run uses it: which engine executes the judging plan, how many calls
are in flight, the adapter, the request timeout, the spending limit and how cost is
estimated, the prompt-cache policies, whether the first failure stops the run, and the
embedded model's CPU threads. The CLI builds one from its options
(`binaryeval_dspy.cli.options.run_settings_options`) and Python users build the same
object::

    settings = RunSettings(engine="live", concurrency=16, max_cost=2.5)
    evaluate_items(program, items, run_dir, manifest, lm=handle, settings=settings)

Library messages name these fields (``concurrency``, ``max_cost``, ...); the CLI maps
them to its flags in one place (`binaryeval_dspy.cli.error_handling`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from binaryeval_dspy.errors import BinEvalError, ConfigError

if TYPE_CHECKING:
    from binaryeval_dspy.cost.budget import CostBudget
    from binaryeval_dspy.lm.factory import LMHandle
    from binaryeval_dspy.schemas.run_manifest import RunManifest

#: The engines a judging plan can be executed by (`binaryeval_dspy.engines`).
ENGINES = ("auto", "local", "live", "batch", "ray", "replay")
ADAPTERS = ("auto", "json", "chat")
CACHE_PADDINGS = ("auto", "off")


class RunSettings(BaseModel):
    """How a run judges: engine, concurrency, adapter, timeout, budget and cache policies.

    Attributes:
        engine: ``auto`` (``local`` for an embedded model, ``live`` otherwise), ``local``
            (one call at a time, an item's questions together, in item order: what an
            in-process llama.cpp model needs for prefix reuse), ``live`` (``concurrency``
            calls in flight to an endpoint), ``batch`` (the provider's batch API; see
            docs/batch.md), ``ray`` (Ray tasks, on this machine or a cluster; the ``ray`` extra) or ``replay`` (each call
            answered from the verdicts file ``replay_verdicts``, no LM call; docs/replay.md).
        concurrency: calls in flight across items and questions (>= 1) for the ``live``
            and ``ray`` engines; an embedded model always runs one call at a time.
        adapter: ``auto``, ``json`` or ``chat`` (`binaryeval_dspy.lm.adapters.choose_adapter`).
        timeout: seconds one request to a served or hosted model may take (> 0); None keeps
            the client's default (600 s).
        llama_threads: CPU threads of the embedded llama.cpp model (>= 1); None lets the
            engine choose (``$BINEVAL_LLAMA_THREADS``, else its own default).
        max_cost: spending limit in USD (> 0) for this run's LM calls; None: no limit.
        price_model: a LiteLLM model id whose prices estimate cost (e.g. a base URL that
            proxies a hosted model); None: the LM's own prices.
        warm_prefix: send an item's first question alone before the rest so a provider's
            prompt cache is written before it is read; None: on for hosted models with
            ``concurrency > 1`` (`binaryeval_dspy.lm.prompt_cache.default_warm_prefix`).
        cache_padding: ``auto`` or ``off`` (`binaryeval_dspy.cost.cache_padding`).
        fail_on_errors: stop at the first item with a failed LM call.
        ray_address: the Ray cluster to join (``auto``, ``ray://host:10001``); None starts
            a local Ray for the run (``ray`` engine only).
        replay_verdicts: the verdicts file (``.jsonl``, ``.jsonl.gz``, ``.csv``;
            docs/verdicts.md) the ``replay`` engine answers from; required by it, refused
            by the other engines.
        replay_judge: whose rows of `replay_verdicts` answer the calls a run's own judge
            makes (a judge name in the file); None: the file's only judge.
        judges: the judges of a panel or cascade (two or more, different), in order: for
            the live and local engines LM specs (a LiteLLM id, or a base URL and its model
            as ``URL#MODEL``), for the replay engine judge names of `replay_verdicts`;
            () : one judge, the run's LM (docs/panels.md).
        panel_rule: how a panel decides a question (`binaryeval_dspy.panels.panel_vote`):
            ``majority``, ``any-no`` (one "no" decides a fatal question) or ``weighted`` (each
            judge's vote counts with its weight from `panel_weights`).
        panel_weights: for the ``weighted`` rule, the judge weights file
            (`binaryeval_dspy.data.judge_weights`: ``judge_weights.csv`` as ``bineval
            agreement`` writes it, one weight per judge measured against labels); required by
            that rule, refused by the others.
        cascade: the `judges` are a cascade's stages, in order (the first asked every
            question, the next only where the one before is unsure), not a panel.
        cascade_band: (low, high) in [0, 1]: a cascade stage whose P(yes) lies in it passes
            the question on; None: only non-answers escalate.

    Raises (on construction):
        ConfigError: a field out of range or of the wrong type, naming the field.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    engine: Literal["auto", "local", "live", "batch", "ray", "replay"] = "auto"
    concurrency: int = Field(default=1, ge=1, strict=True)
    adapter: Literal["auto", "json", "chat"] = "auto"
    timeout: float | None = Field(default=None, gt=0)
    llama_threads: int | None = Field(default=None, ge=1, strict=True)
    max_cost: float | None = Field(default=None, gt=0)
    price_model: str | None = None
    warm_prefix: bool | None = None
    cache_padding: Literal["auto", "off"] = "auto"
    fail_on_errors: bool = False
    ray_address: str | None = None
    replay_verdicts: str | None = None
    replay_judge: str | None = None
    judges: tuple[str, ...] = ()
    panel_rule: Literal["majority", "any-no", "weighted"] = "majority"
    panel_weights: str | None = None
    cascade: bool = False
    cascade_band: tuple[float, float] | None = None

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            first = exc.errors()[0]
            name = ".".join(str(part) for part in first["loc"]) or "settings"
            if first["type"] == "extra_forbidden":  # a key this version has no setting for
                error = ConfigError(f"unknown run setting {name!r}",
                                    expected=f"one of {', '.join(type(self).model_fields)}",
                                    received=f"{name}={first.get('input')!r}",
                                    fix=f"leave {name!r} out (a misspelt name, or a setting of another version).")
                error.setting = name
                raise error from None
            choices = _EXPECTED.get(name, "")
            fix = (f"pass {name} as one of the expected values." if choices.startswith("one of")
                   else f"pass e.g. {name}={_EXAMPLES.get(name, '...')}.")
            error = ConfigError(f"bad run setting {name}", expected=_EXPECTED.get(name, first["msg"]),
                                received=repr(first.get("input")), fix=fix)
            error.setting = name  # which field (`of_manifest` names it in the manifest)
            raise error from None
        if (self.engine == "replay") != (self.replay_verdicts is not None):
            raise ConfigError("the replay engine answers from a verdicts file, and only it does" if self.engine == "replay"
                              else f"replay_verdicts is given but the engine is {self.engine!r}",
                              expected="engine 'replay' together with `replay_verdicts` FILE",
                              fix="set both (engine 'replay' and `replay_verdicts`), or neither.")
        if self.judges and (len(self.judges) < 2 or len(set(self.judges)) != len(self.judges)):
            raise ConfigError("a panel or cascade needs at least two different judges", received=repr(self.judges),
                              fix="name two or more different `judges`, or none for one judge.")
        if (self.cascade or self.cascade_band is not None) and not self.judges:
            raise ConfigError("a cascade needs its judges", fix="name two or more `judges`, cheapest first.")
        if self.cascade_band is not None and not 0.0 <= self.cascade_band[0] <= self.cascade_band[1] <= 1.0:
            raise ConfigError("bad run setting cascade_band", expected="LOW,HIGH with 0 <= LOW <= HIGH <= 1",
                              received=repr(self.cascade_band), fix="pass e.g. cascade_band=(0.2, 0.8).")
        if self.cascade_band is not None and not self.cascade:
            raise ConfigError("cascade_band is a cascade's", fix="set `cascade` too, or leave `cascade_band` out.")
        if self.judges and self.engine in ("ray", "batch"):
            raise ConfigError(f"panels and cascades run on the live, local or replay engine, not {self.engine}",
                              fix="use `engine` live (or local, or replay).")
        if (self.panel_rule == "weighted") != (self.panel_weights is not None) or (
                self.panel_weights is not None and (not self.judges or self.cascade)):
            raise ConfigError("the weighted panel rule votes with weights measured beforehand, and only it does",
                              expected="`panel_rule` 'weighted' with `panel_weights` FILE and two or more `judges` "
                                       "(not a cascade)",
                              fix="write the weights with `bineval agreement` on labels and verdicts (its "
                                  "judge_weights.csv) and pass that file as `panel_weights`, or use another rule.")
        if self.replay_judge is not None and self.judges:
            raise ConfigError("replay_judge names one judge, but the run has `judges`",
                              fix="leave `replay_judge` out: each judge's rows answer its own calls.")
        if self.replay_judge is not None and self.replay_verdicts is None:
            raise ConfigError("replay_judge names whose recorded answers to replay, but no `replay_verdicts` is given",
                              fix="give `replay_verdicts` FILE with engine 'replay', or leave `replay_judge` out.")

    @field_validator("price_model", "ray_address", "replay_verdicts", "replay_judge", "panel_weights")
    @classmethod
    def _strip(cls, value: str | None) -> str | None:
        return value.strip() or None if isinstance(value, str) else value

    def recorded(self, handle: LMHandle | None) -> dict[str, Any]:
        """These settings as a run's manifest stores them (``RunManifest.settings``):
        ``model_dump(mode="json")`` with ``engine`` resolved to the one that runs with `handle`
        (`engine_for`), so the manifest names the engine the run used. Holds no key (no field
        of `RunSettings` is one); read back with `of_manifest`."""
        return self.model_copy(update={"engine": self.engine_for(handle)}).model_dump(mode="json")

    @classmethod
    def of_manifest(cls, manifest: RunManifest, *, path: str | Path | None = None) -> RunSettings:
        """The settings a run used, read back from its manifest (rejudge, resume).

        Args:
            manifest: the run's manifest. Its ``settings`` (what `recorded` wrote) is read
                with `model_validate`; a manifest written before runs stored it (None) is read
                from its older ``config`` keys (``concurrency``, or ``threads`` before that;
                ``adapter``, ``cache_padding``, ``engine`` with ``replay_verdicts`` and
                ``replay_judge``, ``judges`` with ``panel_rule``, ``cascade`` and
                ``cascade_band``), what those runs did not record taking its default.
            path: the manifest's file, named in the error.

        Returns:
            The `RunSettings` (equal to the object the run was given, its engine resolved).

        Raises:
            InputError: the stored settings are not valid run settings (file and field named).
        """
        data = manifest.settings if manifest.settings is not None else _settings_of_config(manifest.config)
        try:
            return cls.model_validate(data)  # through `__init__`: the same checks as any settings
        except ValidationError as exc:
            from binaryeval_dspy.errors import InputError

            cause = (exc.errors()[0].get("ctx") or {}).get("error")
            name = getattr(cause, "setting", None)
            if isinstance(cause, BinEvalError):  # its parts, so its own fix is not said twice
                raise InputError(f"the stored run settings are not valid: {cause.message}", path=path,
                                 field=f"settings.{name}" if name else "settings", expected=cause.expected,
                                 received=cause.received,
                                 fix=f"{cause.fix.rstrip('.')} in the manifest's settings, or start the run again "
                                     "into a new `out_dir`." if cause.fix and cause.message.startswith("unknown")
                                 else "restore the manifest, or start the run again into a new `out_dir`.") from None
            raise InputError(f"the stored run settings are not valid: {cause or exc}", path=path,
                             field=f"settings.{name}" if name else "settings",
                             fix="restore the manifest, or start the run again into a new `out_dir`.") from None

    def engine_for(self, handle: LMHandle | None) -> str:
        """The engine that runs with `handle`: ``auto`` resolved (``local`` for an embedded
        model, ``live`` otherwise, also without an LM); an explicit engine is returned as given."""
        if self.engine != "auto":
            return self.engine
        return "local" if handle is not None and handle.embedded else "live"

    def in_flight(self, handle: LMHandle | None) -> int:
        """Calls in flight with `handle`: 1 for an embedded model (one in-process llama.cpp
        model serves one call at a time) and for the ``local`` engine, else ``concurrency``."""
        if (handle is not None and handle.embedded) or self.engine_for(handle) == "local":
            return 1
        return self.concurrency

    def price_model_for(self, handle: LMHandle | None) -> str | None:
        """The LiteLLM id whose prices estimate the run's cost: ``price_model`` if set, else
        the LM's own (`LMHandle.priced_as`), None when unknown (a base URL)."""
        if self.price_model:
            return self.price_model
        return handle.priced_as() if handle is not None else None

    def cost_budget(self, handle: LMHandle | None) -> CostBudget | None:
        """The `CostBudget` for ``max_cost`` priced for `handle` (batch prices for the
        ``batch`` engine), or None without a limit.

        Raises:
            LMConfigError: the LM has no known price (`CostBudget.for_model`).
        """
        if self.max_cost is None:
            return None
        from binaryeval_dspy.cost.budget import CostBudget

        budget = CostBudget.for_model(self.max_cost, self.price_model_for(handle))
        budget.batch = self.engine_for(handle) == "batch"
        return budget


#: ``config`` keys under which manifests written before ``settings`` was stored kept run
#: settings (read by `RunSettings.of_manifest`); a manifest that stores ``settings`` has none
#: of them (``panel`` and ``cascade`` held a panel's or cascade's name).
LEGACY_CONFIG_KEYS = ("concurrency", "threads", "engine", "cache_padding", "price_model", "replay_verdicts",
                      "replay_judge", "judges", "panel", "panel_rule", "cascade", "cascade_band")


def _settings_of_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """`RunSettings` fields from the ``config`` of a manifest written before runs stored their
    settings (see `RunSettings.of_manifest`)."""
    data: dict[str, Any] = {}
    concurrency = config.get("concurrency") or config.get("threads")  # ``threads``: the oldest runs' name
    if concurrency:
        data["concurrency"] = int(concurrency)  # type: ignore[call-overload]
    for key in ("adapter", "cache_padding", "price_model"):
        if config.get(key):
            data[key] = config[key]
    engine = config.get("engine")
    if engine in ENGINES:
        data["engine"] = engine
    if engine == "replay":
        data.update(replay_verdicts=config.get("replay_verdicts"), replay_judge=config.get("replay_judge"))
    if config.get("judges"):
        data.update(judges=list(config["judges"]), panel_rule=config.get("panel_rule") or "majority",  # type: ignore[call-overload]
                    cascade=bool(config.get("cascade")), cascade_band=config.get("cascade_band") or None)
    return data


_EXPECTED = {
    "engine": f"one of {', '.join(ENGINES)}",
    "concurrency": "an integer >= 1",
    "adapter": f"one of {', '.join(ADAPTERS)}",
    "timeout": "a positive number of seconds",
    "llama_threads": "an integer >= 1",
    "max_cost": "a positive number of US dollars",
    "cache_padding": f"one of {', '.join(CACHE_PADDINGS)}",
}
_EXAMPLES = {"engine": "'live'", "concurrency": "16", "adapter": "'auto'", "timeout": "60", "llama_threads": "1",
             "max_cost": "2.50", "cache_padding": "'auto'"}

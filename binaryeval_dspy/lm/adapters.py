"""Adapter policy per endpoint, and the one adapter rule every module's calls follow.

`choose_adapter` turns a policy (``auto``, ``json``, ``chat``) and an LM into the DSPy
adapter every judgment of a run goes through, so that:

* an endpoint that constrains decoding with a JSON schema (vLLM, llama.cpp's server,
  providers whose models LiteLLM / DSPy list as supporting a response schema, the
  embedded llama.cpp engine) gets `dspy.JSONAdapter` and the schema in
  ``response_format``: the reply parses by construction;
* any other endpoint gets `dspy.ChatAdapter` *without* DSPy's JSON fallback. With the
  fallback, a reply that does not parse costs a second call in another format, read by
  DSPy's lenient JSON parsing (which completed a reply cut inside its answer into a plain
  "yes"), and alternating formats throws away the server's prompt-prefix reuse (measured
  on llama.cpp's server: ~880 of ~1,035 prompt tokens re-evaluated per call). Without it,
  a reply that does not parse raises `AdapterParseError` after one call and `BinEval`
  records the verdict as ``unparsed`` (salvaging a yes/no when the text holds one).

`judging_adapter` is the rule that holds however the user configured DSPy (no adapter,
``dspy.context``, ``handle.context()``, an adapter of their own): the LM's own adapter
(the one `make_lm` chose, `remember_adapter`), ours of the same kind for a plain
`dspy.ChatAdapter` / `dspy.JSONAdapter`, and a refusal for any other adapter.
`judging_context`, `call_predictor` / `acall_predictor` and `run_predictor_calls` /
`arun_predictor_calls` are how every module we ship calls its predictors under it.

The adapters count what they did in an `AdapterStats` (thread-safe, in
`binaryeval_dspy.lm.adapter_stats`): judgments, second
calls made in another format (``fallback_calls``, 0 with the adapters built here: DSPy
3.4's JSONAdapter picks its format before the call and never retries in another one,
and our ChatAdapter never falls back), replies that did not parse, JSON calls sent
without a schema, and requests re-sent because a server refused the schema's
``response_format`` form (``format_retries``, counted by `CacheScopedLM`).
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import threading
import weakref
from collections.abc import Generator
from typing import Any

import dspy
from dspy.utils.exceptions import AdapterParseError

from binaryeval_dspy.errors import LMConfigError
from binaryeval_dspy.lm.adapter_stats import AdapterStats
from binaryeval_dspy.lm.cache_identity import CUT_REPLY
from binaryeval_dspy.lm.evaluated_text import DATA_BEGIN
from binaryeval_dspy.lm.final_answer import parse_chat_reply, parse_json_reply
from binaryeval_dspy.lm.prompt_cache import (
    PER_CALL_FIELD,
    cache_breakpoint_route,
    mark_for_litellm,
    native_cache_config,
    split_at_shared_prefix,
)
from binaryeval_dspy.lm.schema_format import is_openai_schema

ADAPTER_POLICIES = ("auto", "json", "chat")


#: How an unreadable reply that stopped at the completion cap is explained.
CUT_REPLY_NOTE = "the reply stopped at max_tokens (raise `max_tokens`)"


#: Keys our parsers add beside the output fields, kept through DSPy's post-processing: the
#: reply when it held more than its answer, the label fields a reservation qualified, and
#: label fields as the judge wrote them (`binaryeval_dspy.lm.final_answer`).
REPLY_NOTES = ("raw_reply", "qualified", "as_written")


#: DSPy's AdapterParseError message for an output with no text: no reply, not an unreadable one.
EMPTY_REPLY_REASON = "empty or null response"


def reply_text(lm_response: object) -> str:
    """The text of the reply an `AdapterParseError` carries (DSPy hands a string, or an output
    dict with ``text``); "" when there was none."""
    if isinstance(lm_response, dict):
        return str(lm_response.get("text") or "")
    return str(lm_response or "")


def is_empty_reply(exc: AdapterParseError) -> bool:
    """True when the reply behind `exc` held no text (none, or only whitespace): the LM gave
    no answer, which a judgment records as a failed call (``error``), not as ``unparsed``."""
    return (EMPTY_REPLY_REASON in str(getattr(exc, "message", "") or "")
            or not reply_text(getattr(exc, "lm_response", None)).strip())


def _count_parse_failure(stats: AdapterStats, exc: AdapterParseError) -> None:
    """Count a reply that did not parse; an empty reply (`is_empty_reply`) is not one."""
    if not is_empty_reply(exc):
        stats.add("parse_failures")


class _CountingAdapter:
    """Mixin counting calls, parse failures and format fallbacks into ``self.stats``."""

    stats: AdapterStats
    #: a `binaryeval_dspy.cost.cache_padding.CachePadding` installed for a run (`padding_installed`), or None
    cache_padding: Any = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        own = {name for name in ("format", "parse") if name in cls.__dict__}
        super().__init_subclass__(**kwargs)
        # dspy.Adapter wraps format/parse with callbacks in every subclass, so inherited
        # ones would be wrapped twice (callbacks fired twice): keep the parent's wrapper.
        for name in ("format", "parse"):
            if name not in own and name in cls.__dict__:
                delattr(cls, name)

    def __call__(self, lm: Any, lm_kwargs: dict[str, Any], signature: Any, demos: list, inputs: dict) -> Any:
        self.stats.add("calls")
        try:
            return super().__call__(lm, lm_kwargs, signature, demos, inputs)  # type: ignore[misc]
        except AdapterParseError as exc:
            _count_parse_failure(self.stats, exc)
            raise

    async def acall(self, lm: Any, lm_kwargs: dict[str, Any], signature: Any, demos: list, inputs: dict) -> Any:
        self.stats.add("calls")
        try:
            return await super().acall(lm, lm_kwargs, signature, demos, inputs)  # type: ignore[misc]
        except AdapterParseError as exc:
            _count_parse_failure(self.stats, exc)
            raise

    def _call_preprocess(self, lm: Any, lm_kwargs: dict[str, Any], signature: Any, inputs: dict[str, Any]) -> Any:
        processed = super()._call_preprocess(lm, lm_kwargs, signature, inputs)  # type: ignore[misc]
        # `format` runs next on this thread; it places the prompt-cache breakpoint (Anthropic)
        # and, on DSPy's native route, adds the setting to these lm_kwargs before the call.
        pending = self.__dict__.setdefault("_cache_plan", threading.local())
        route = cache_breakpoint_route(lm)
        pending.value = (route, lm_kwargs) if route is not None else None
        return processed

    def _with_cache_breakpoint(self, signature: Any, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`messages` with the item's shared part marked for the provider's prompt cache, when the
        call being prepared goes to an ``anthropic/`` model (see `binaryeval_dspy.lm.prompt_cache`),
        after padding that part up to the provider's cache minimum when the run's `cache_padding`
        says so (`binaryeval_dspy.cost.cache_padding`): the filler ends the shared part, so the mark
        covers it."""
        if self.cache_padding is not None:
            messages = self.cache_padding.apply(signature, messages)
        pending = self.__dict__.get("_cache_plan")
        plan = getattr(pending, "value", None) if pending is not None else None
        if plan is None:
            return messages
        pending.value = None
        route, lm_kwargs = plan
        split, index = split_at_shared_prefix(messages, list(signature.input_fields))
        if index is None:
            return messages
        if route == "native":
            if lm_kwargs.get("prompt_cache") is None:
                lm_kwargs["prompt_cache"] = native_cache_config(split, index)
            return split
        return mark_for_litellm(split, index)

    def _remember_raw(self, parsed: dict[str, Any]) -> dict[str, Any]:
        # DSPy drops keys that are not output fields after parse; keep the raw reply and the
        # qualified labels aside (per thread, in parse order) and put them back in
        # `_call_postprocess`.
        raws = self.__dict__.setdefault("_raw_replies", threading.local())
        if not hasattr(raws, "items"):
            raws.items = []
        notes = {key: parsed.pop(key, None) for key in REPLY_NOTES}
        raws.items.append({key: value for key, value in notes.items() if value})
        return parsed

    def _next_reply_cut(self) -> bool:
        """Whether the reply `parse` is reading now stopped at ``max_tokens`` (False outside
        `_call_postprocess`, e.g. a reply parsed again by a caller)."""
        pending = getattr(self.__dict__.get("_cut_flags"), "items", None)
        return bool(pending.pop(0)) if pending else False

    def _call_postprocess(self, processed_signature: Any, original_signature: Any, outputs: list,
                          lm: Any, lm_kwargs: dict[str, Any]) -> list[dict[str, Any]]:
        raws = self.__dict__.setdefault("_raw_replies", threading.local())
        raws.items = []
        # A reply DSPy's LM marked as stopped at max_tokens (`mark_cut_replies`): the answer
        # read from it carries ``reply_cut``; a parse failure says the reply was cut.
        cut = [isinstance(out, dict) and out.get(CUT_REPLY[0]) == CUT_REPLY[1] for out in outputs]
        # `parse` reads the cut flags in order (DSPy parses each output that has text): a
        # chat reply cut inside a field block is unreadable (`parse_chat_reply`).
        flags = self.__dict__.setdefault("_cut_flags", threading.local())
        flags.items = [was_cut for out, was_cut in zip(outputs, cut)
                       if (out.get("text") if isinstance(out, dict) else out)]
        try:
            values = super()._call_postprocess(  # type: ignore[misc]
                processed_signature, original_signature, outputs, lm, lm_kwargs)
        except AdapterParseError as exc:
            if any(cut):
                exc.message = f"{CUT_REPLY_NOTE}: {exc.message or 'no answer in it'}"
            raise
        finally:
            flags.items = []
        if len(raws.items) == len(values):
            for value, notes in zip(values, raws.items):
                value.update(notes)  # the reply held more than its answer, or qualified it: keep it
        raws.items = []
        for value, was_cut in zip(values, cut):
            if was_cut:
                value["reply_cut"] = True
        return values

    def format_system_message(self, signature: Any) -> str:
        # The system message depends on the signature alone (field descriptions, structure,
        # instructions) and costs about 15% of a call's CPU to build: build it once per
        # signature class. Signature classes are immutable (with_instructions makes a new one).
        cache = self.__dict__.setdefault("_system_messages", weakref.WeakKeyDictionary())
        message = cache.get(signature)
        if message is None:
            message = cache[signature] = super().format_system_message(signature)  # type: ignore[misc]
        return message

    def _make_json_adapter_fallback(self) -> Any:
        # DSPy calls this only when it is about to make a second call in JSON format.
        self.stats.add("fallback_calls")
        return super()._make_json_adapter_fallback()  # type: ignore[misc]


def _parent_format(cls: type, adapter: Any, signature: Any, demos: list, inputs: dict) -> list[dict[str, Any]]:
    """The parent adapter's ``format`` without DSPy's callback wrapper: our own ``format`` is
    wrapped already, and the callbacks must fire once per format."""
    return inspect.unwrap(super(cls, adapter).format.__func__)(adapter, signature, demos, inputs)


class CountingChatAdapter(_CountingAdapter, dspy.ChatAdapter):
    """`dspy.ChatAdapter` that counts into an `AdapterStats` and never retries in JSON.

    DSPy's ChatAdapter, after a reply that does not parse, makes a second call in JSON
    format and reads that one with DSPy's lenient JSON parsing, which completes a reply
    cut inside its answer ('{"verdict": "yes", "explanation": "The summ' reads as "yes").
    This one makes one request per call: a reply that does not parse raises
    `AdapterParseError` and the caller records it (`BinEval`: ``unparsed``).

    Args:
        stats: where to count (a new `AdapterStats` if None); also ``adapter.stats``.
        use_json_adapter_fallback: only False is accepted (kept for DSPy's signature).
        callbacks: DSPy callbacks, as for `dspy.ChatAdapter`.

    Raises:
        LMConfigError: `use_json_adapter_fallback` is True, or is set to True later.
    """

    def __init__(self, *, stats: AdapterStats | None = None, use_json_adapter_fallback: bool = False,
                 callbacks: list | None = None) -> None:
        super().__init__(callbacks=callbacks, use_json_adapter_fallback=use_json_adapter_fallback)
        self.stats = stats if stats is not None else AdapterStats()

    @property
    def use_json_adapter_fallback(self) -> bool:
        """Always False: one request per call, a reply that does not parse is not asked again in JSON."""
        return False

    @use_json_adapter_fallback.setter
    def use_json_adapter_fallback(self, value: bool) -> None:
        if value:
            raise LMConfigError(
                "CountingChatAdapter never makes DSPy's second call in JSON format: that call reads a reply cut inside "
                "its answer as a whole one, and costs a second request per unreadable reply",
                received=f"use_json_adapter_fallback={value!r}",
                fix="leave it False; a reply in JSON format is still read without a second request (`BinEval`).")

    def format(self, signature: Any, demos: list[dict[str, Any]], inputs: dict[str, Any]) -> list[dict[str, Any]]:
        """DSPy's chat format; for an ``anthropic/`` model the item's shared part is marked for
        its prompt cache (`binaryeval_dspy.lm.prompt_cache`)."""
        return self._with_cache_breakpoint(signature, _parent_format(CountingChatAdapter, self, signature, demos,
                                                                     inputs))

    def parse(self, signature: Any, completion: str) -> dict[str, Any]:
        """The judge's final answer set, not the first (see `binaryeval_dspy.lm.final_answer`)."""
        return self._remember_raw(parse_chat_reply(signature, completion, adapter=type(self).__name__,
                                                   cut=self._next_reply_cut()))


class CountingJSONAdapter(_CountingAdapter, dspy.JSONAdapter):
    """`dspy.JSONAdapter` that counts into an `AdapterStats`, including calls sent without a schema.

    DSPy 3.4's JSONAdapter chooses its ``response_format`` before the call (the
    signature's JSON schema when the LM declares ``supports_response_schema`` and
    ``response_format`` in ``supported_params``; ``json_object`` or nothing otherwise) and
    never retries in another format; a reply that does not parse raises
    `AdapterParseError` after one call.

    Args:
        stats: where to count (a new `AdapterStats` if None); also ``adapter.stats``.
        callbacks: DSPy callbacks, as for `dspy.JSONAdapter`.
    """

    def __init__(self, *, stats: AdapterStats | None = None, callbacks: list | None = None) -> None:
        super().__init__(callbacks=callbacks)
        self.stats = stats if stats is not None else AdapterStats()

    def format(self, signature: Any, demos: list[dict[str, Any]], inputs: dict[str, Any]) -> list[dict[str, Any]]:
        """DSPy's JSON-adapter format; for an ``anthropic/`` model the item's shared part is marked
        for its prompt cache (`binaryeval_dspy.lm.prompt_cache`).

        When a per-question judge call carries the output's JSON schema
        (`_prepare_response_format` ran just before on this thread and chose a schema), the
        decoder enforces the reply's shape, so DSPy's closing reminder of that shape is left
        out of the user message: the system message still describes the output fields. The
        reminder is the only text after the question, so every call of an item then differs
        from the others only in its question and violation example (a shorter uncached tail on a served model; fewer
        tokens to evaluate per question on the embedded one). Without a schema the reminder
        stays, as DSPy writes it.
        """
        state = self._schema_state()
        # The material under review the prompt shows (inputs fenced as evaluated text), for
        # `parse` on this thread: a JSON object the reply copies from it verbatim is a quote
        # of the material, not the answer. Other inputs (instructions, examples) are not.
        _SHOWN_TEXTS.set(tuple(v for v in inputs.values() if isinstance(v, str) and DATA_BEGIN in v))
        try:
            return self._with_cache_breakpoint(signature, _parent_format(CountingJSONAdapter, self, signature, demos,
                                                                         inputs))
        finally:
            state.enforced = False  # one call's choice: never carried over to a later format

    def user_message_output_requirements(self, signature: Any) -> str | None:
        """DSPy's reminder of the reply's JSON shape; None for a per-question judge call (its
        inputs end with the ``question`` field) whose schema is enforced. Other calls (e.g.
        question generation, one per task) keep it: a small model writes fuller lists with it."""
        if getattr(self._schema_state(), "enforced", False) and PER_CALL_FIELD in getattr(signature, "input_fields", {}):
            return None
        return super().user_message_output_requirements(signature)

    def _schema_state(self) -> threading.local:
        return self.__dict__.setdefault("_schema_enforced", threading.local())

    def parse(self, signature: Any, completion: str) -> dict[str, Any]:
        """The last JSON object with every output field, not the first, skipping objects copied
        verbatim from the evaluated texts the last `format` on this thread showed; objects that disagree
        on the verdict make the reply unreadable (see `lm.final_answer.parse_json_reply`)."""
        quoted = _SHOWN_TEXTS.get()
        _SHOWN_TEXTS.set(())  # one format's inputs serve one parse
        self._next_reply_cut()  # a JSON answer is complete when its object closes, cut or not
        return self._remember_raw(parse_json_reply(signature, completion, adapter=type(self).__name__, quoted=quoted))

    def _prepare_response_format(self, lm: Any, lm_kwargs: dict[str, Any], signature: Any) -> None:
        super()._prepare_response_format(lm, lm_kwargs, signature)
        enforced = is_openai_schema(lm_kwargs.get("response_format"))
        self._schema_state().enforced = enforced
        if not enforced:
            self.stats.add("schema_not_sent")


#: The evaluated texts the last `CountingJSONAdapter.format` showed, for the `parse` of its reply.
#: A context variable, not a thread-local: under ``acall`` the reply is parsed after an
#: ``await``, while other tasks on the same thread format their own calls.
_SHOWN_TEXTS: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("bineval_shown_texts", default=())


def schema_support(lm: Any) -> bool:
    """Whether `dspy.JSONAdapter` would send `lm` a JSON schema as ``response_format``.

    True when the LM declares ``supports_response_schema`` and lists ``response_format``
    in ``supported_params`` (DSPy's capabilities for known models, a custom engine's own
    declaration, or `CacheScopedLM(response_schema=True)` for a base URL). A capability
    lookup that fails (unknown provider) counts as False.
    """
    try:
        return bool(lm.supports_response_schema) and "response_format" in set(lm.supported_params or ())
    except Exception:  # noqa: BLE001 - an unknown provider is "no schema", not a crash
        return False


def _is_embedded(lm: Any, spec: str | None) -> bool:
    from binaryeval_dspy.lm.llama_engine import LlamaCppEngine

    if isinstance(getattr(lm, "engine", None), LlamaCppEngine):
        return True
    return spec is not None and (spec.strip() == "local" or spec.strip().endswith(".gguf"))


def choose_adapter(
    policy: str,
    lm: Any,
    *,
    spec: str | None = None,
    stats: AdapterStats | None = None,
) -> tuple[dspy.Adapter, str, str]:
    """The adapter for `lm` under `policy`, its name and why it was chosen.

    Args:
        policy: ``auto`` (JSON when the endpoint takes a JSON schema, see
            `schema_support`; embedded GGUF models always JSON; chat otherwise),
            ``json`` or ``chat``.
        lm: the `dspy.LM` the adapter will drive (for its capabilities and engine).
        spec: the ``--lm`` value it was built from (``local`` / ``*.gguf`` mark an
            embedded model; used in the reason), if known.
        stats: the `AdapterStats` to count into (a new one if None).

    Returns:
        ``(adapter, name, reason)``: a `CountingJSONAdapter` or `CountingChatAdapter`
        (``adapter.stats`` is `stats`), ``"json"`` or ``"chat"``, and one sentence for
        logs and manifests.

    Raises:
        LMConfigError: `policy` is not one of ``auto``, ``json``, ``chat``; or ``chat``
            is asked for an embedded GGUF model (its small models need
            schema-constrained decoding, which only the JSON adapter requests).
    """
    if not isinstance(policy, str) or policy.strip().lower() not in ADAPTER_POLICIES:
        raise LMConfigError("bad adapter policy", expected=f"one of {', '.join(ADAPTER_POLICIES)}",
                            received=repr(policy),
                            fix="`adapter` auto (JSON with a schema where the endpoint supports it, else chat).")
    policy = policy.strip().lower()
    stats = stats if stats is not None else AdapterStats()
    embedded = _is_embedded(lm, spec)
    schema = schema_support(lm)
    where = spec or getattr(lm, "model", "the LM")
    if embedded:
        if policy == "chat":
            raise LMConfigError(
                f"`adapter` chat cannot be used with the embedded model {where}: it answers reliably only under "
                "schema-constrained decoding, which the JSON adapter requests.", fix="`adapter` auto or json.",
            )
        return CountingJSONAdapter(stats=stats), "json", f"embedded model {where}: JSON schema constrains decoding"
    if policy == "chat":
        return (CountingChatAdapter(stats=stats), "chat",
                f"chat format asked for {where}; one request per judgment (no JSON retry)")
    if policy == "json":
        reason = (f"JSON asked for {where}; schema sent as response_format" if schema else
                  f"JSON asked for {where}, which declares no structured output: the schema is not sent, the "
                  "prompt asks for JSON")
        return CountingJSONAdapter(stats=stats), "json", reason
    if schema:
        return (CountingJSONAdapter(stats=stats), "json",
                f"auto: {where} takes a JSON schema as response_format")
    return (CountingChatAdapter(stats=stats), "chat",
            f"auto: {where} declares no JSON-schema output; chat format, one request per judgment (no JSON retry)")


_LOCK = threading.Lock()
#: lm -> the adapter its calls use when none is configured: `make_lm`'s choice (`remember_adapter`),
#: else `choose_adapter("auto", lm)`, made at the first call.
_FOR_LM: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: a plain `dspy.ChatAdapter` / `dspy.JSONAdapter` a user configured -> ours of the same kind.
_FOR_PLAIN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def adapter_kind(adapter: Any) -> str:
    """``"json"`` for a `dspy.JSONAdapter` (or subclass), else ``"chat"`` (the name manifests record)."""
    return "json" if isinstance(adapter, dspy.JSONAdapter) else "chat"


def remember_adapter(lm: Any, adapter: Any) -> None:
    """Make `adapter` the one `lm`'s calls use when no adapter is configured.

    `make_lm` (and every `LMHandle`) calls it with the adapter it chose, so that
    ``dspy.configure(lm=handle.lm)`` sends what ``handle.adapter_name`` says. An adapter
    that is neither ours nor a plain `dspy.ChatAdapter` / `dspy.JSONAdapter`, or an LM
    that cannot be weakly referenced, is not remembered (the LM then gets
    ``choose_adapter("auto", lm)``).

    Args:
        lm: the `dspy.LM` the adapter goes with.
        adapter: one of our counting adapters, or a plain DSPy chat / JSON adapter
            (turned into ours of the same kind).
    """
    if not isinstance(adapter, _CountingAdapter):
        if type(adapter) not in (dspy.ChatAdapter, dspy.JSONAdapter):
            return
        adapter = _ours_for_plain(adapter)
    with _LOCK, contextlib.suppress(TypeError):
        _FOR_LM[lm] = adapter


def _own_adapter(lm: Any) -> Any:
    """The adapter `lm` uses when none is configured (see `remember_adapter`)."""
    with _LOCK:
        try:
            own = _FOR_LM.get(lm)
        except TypeError:  # not weakly referenceable: chosen again at each call
            return choose_adapter("auto", lm)[0]
        if own is None:
            own = _FOR_LM[lm] = choose_adapter("auto", lm)[0]
        return own


def _ours_for_plain(current: Any) -> Any:
    """Our adapter of `current`'s kind (a plain DSPy chat or JSON adapter), its callbacks kept,
    made once per `current`; DSPy's JSON fallback is never carried over."""
    with _LOCK:
        own = _FOR_PLAIN.get(current)
        if own is None:
            own = (CountingJSONAdapter(callbacks=current.callbacks) if type(current) is dspy.JSONAdapter
                   else CountingChatAdapter(callbacks=current.callbacks))
            _FOR_PLAIN[current] = own
        return own


def judging_adapter(current: Any, lm: Any) -> Any:
    """The adapter a call of one of our modules uses when `current` is configured and `lm` answers.

    The one adapter rule, the same however DSPy was configured (``dspy.configure``,
    ``dspy.context``, ``handle.context()``, an adapter set by the user):

    * no adapter configured (``dspy.configure(lm=handle.lm)``, the README's setup): the
      LM's own, the one `make_lm` chose and ``handle.adapter_name`` names
      (`remember_adapter`); for an LM not built by `make_lm`, ``choose_adapter("auto",
      lm)``: JSON with the schema where the endpoint takes one, chat otherwise;
    * a plain `dspy.ChatAdapter` or `dspy.JSONAdapter`: the user's choice of format, sent
      through our adapter of that kind (`CountingChatAdapter` / `CountingJSONAdapter`,
      with the same callbacks), which reads the judge's final answer, never a block it
      quoted from the evaluated output (`binaryeval_dspy.lm.final_answer`);
    * one of our adapters (``handle.context()``): itself.

    Whichever it is, a reply is sent once and read once: DSPy's second call in JSON format
    after a chat reply that does not parse is never made (that call completed a reply cut
    inside its answer into a plain "yes"), a reply cut inside its answer is unreadable,
    and a reply in the other format is read by our parsers without a second request
    (`BinEval` salvages it).

    Args:
        current: ``dspy.settings.adapter`` (may be None).
        lm: the LM the call goes to (may be None: then None is returned and DSPy raises
            its own "no LM is loaded" error).

    Returns:
        One of our adapter instances, the same one for the same `current` (or `lm`) while
        it lives.

    Raises:
        LMConfigError: `current` is another adapter class (`dspy.XMLAdapter`,
            `dspy.TwoStepAdapter`, a subclass of DSPy's adapters, a custom one): our
            parsing rules cannot hold under it, so the call is refused, naming the fix.
            Also when chat format is asked for an embedded GGUF model (its small models
            answer reliably only under the JSON schema).
    """
    if current is None:
        return None if lm is None else _own_adapter(lm)
    if isinstance(current, _CountingAdapter):
        ours = current
    elif type(current) in (dspy.ChatAdapter, dspy.JSONAdapter):
        ours = _ours_for_plain(current)
    else:
        raise LMConfigError(
            f"the configured adapter {type(current).__name__} cannot read binaryeval-dspy's judges: their replies "
            "are read by its own chat or JSON adapter, so that a reply cut inside its answer is `unparsed` after one "
            "request, never completed into an answer",
            fix="configure no adapter (the LM's own is used), dspy.ChatAdapter() or dspy.JSONAdapter(), or run the "
                "judge under `handle.context()`; to keep your adapter for the rest of a pipeline, call the judge "
                "inside `dspy.context(adapter=None)`.",
        )
    if lm is not None and adapter_kind(ours) == "chat" and _is_embedded(lm, None):
        raise LMConfigError(
            f"chat format cannot be used with the embedded model {getattr(lm, 'model', 'the LM')}: it answers "
            "reliably only under schema-constrained decoding, which the JSON adapter requests",
            fix="configure no adapter (the embedded model's JSON adapter is used) or dspy.JSONAdapter().",
        )
    return ours


def judging_context(lm: Any = None) -> contextlib.AbstractContextManager:
    """A ``dspy.context`` that puts `judging_adapter` in place for one call of our modules.

    Every LM call of a module we ship (`BinEval`'s judge, the label picker, the pressure
    test, question generation, the note-taker, lesson dedup, the updater, the baselines)
    runs inside it, so the adapter rule holds whatever the user configured; a no-op when
    the configured adapter is already the one to use.

    Args:
        lm: the LM the call goes to (the predictor's own, if set); None uses DSPy's settings.

    Raises:
        LMConfigError: as `judging_adapter` (an adapter our parsing rules cannot hold under).
    """
    settings = dspy.settings
    adapter = judging_adapter(settings.adapter, lm or settings.lm)
    if adapter is None or adapter is settings.adapter:
        return contextlib.nullcontext()
    return dspy.context(adapter=adapter)


def call_predictor(predictor: Any, **inputs: Any) -> Any:
    """``predictor(**inputs)`` under the adapter rule (`judging_context` for the predictor's LM).

    How every module we ship calls its predictors, so that no call of ours goes through
    DSPy's JSON fallback or an adapter our parsers cannot follow.

    Args:
        predictor: a `dspy.Predict` (its own ``lm``, if set, decides the adapter).
        inputs: its input fields, and DSPy's ``config=`` if needed.

    Returns:
        The `dspy.Prediction`.

    Raises:
        AdapterParseError: the reply did not parse (one request was made).
        LMConfigError: the configured adapter is refused (`judging_adapter`).
    """
    with judging_context(predictor.lm):
        return predictor(**inputs)


async def acall_predictor(predictor: Any, **inputs: Any) -> Any:
    """``await predictor.acall(**inputs)`` under the adapter rule: `call_predictor` for ``aforward``.

    The adapter is set in the running task's context only (DSPy's settings are context
    variables), so tasks gathered together each keep their own ``dspy.context``.
    """
    with judging_context(predictor.lm):
        return await predictor.acall(**inputs)


#: A module's dependent predictor calls written once for `forward` and `aforward`: a generator
#: that yields ``(predictor, inputs)``, is sent back the `dspy.Prediction` (or the
#: `AdapterParseError` of a reply that did not parse), and returns the module's result.
PredictorCalls = Generator[tuple[Any, dict[str, Any]], Any, Any]


def run_predictor_calls(steps: PredictorCalls) -> Any:
    """Run `steps` (`PredictorCalls`) with `call_predictor`; returns what the generator returns.

    For modules whose calls depend on each other (a retry that quotes the previous answer,
    an edit that sees the last edit's prompt): the logic lives in one generator, and
    `forward` and `aforward` differ only in the driver. Errors other than
    `AdapterParseError` (transport, refused adapter) propagate.
    """
    try:
        predictor, inputs = next(steps)
        while True:
            try:
                reply = call_predictor(predictor, **inputs)
            except AdapterParseError as exc:
                reply = exc
            predictor, inputs = steps.send(reply)
    except StopIteration as stop:
        return stop.value


async def arun_predictor_calls(steps: PredictorCalls) -> Any:
    """`run_predictor_calls` with `acall_predictor`: the same result, awaited call by call."""
    try:
        predictor, inputs = next(steps)
        while True:
            try:
                reply = await acall_predictor(predictor, **inputs)
            except AdapterParseError as exc:
                reply = exc
            predictor, inputs = steps.send(reply)
    except StopIteration as stop:
        return stop.value


__all__ = [
    "ADAPTER_POLICIES", "AdapterStats", "CountingChatAdapter", "CountingJSONAdapter", "acall_predictor",
    "adapter_kind", "arun_predictor_calls", "call_predictor", "choose_adapter", "judging_adapter", "judging_context",
    "remember_adapter", "run_predictor_calls", "schema_support",
]

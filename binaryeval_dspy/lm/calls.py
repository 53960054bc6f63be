"""One LM call of a judging plan, as data, and the one way to format it and to read its reply.

A program states what it needs as `LMCall` values: a DSPy signature, its inputs, the
demos, per-call LM options, and the output field whose value distribution (P(yes), a
G-Eval score distribution) should be read from token log-probabilities. Nothing has to
run a closure to learn what will be sent.

Every engine turns a call into a request with `format_call` and a reply into an
`Answer` with `read_outputs` (or `read_failure` when no reply came), through the run's
adapter (`binaryeval_dspy.lm.adapters`: DSPy's ``format`` and our final-answer ``parse``).
An engine that hands the whole call to DSPy's adapter pipeline (``adapter(lm, ...)``,
the path of any ``dspy.LM``: DSPy's cache, retries, history and usage tracking) reaches
the same ``format`` and ``parse`` inside it and reads its outcome with the same two
functions. So a verdict is the same record whether the reply came from a live call, a
Ray worker, a provider batch or DSPy's cache.

An `Answer` is small and holds plain values only (the parsed output fields with our
reply notes, the reply text when it matters, the value distribution, usage): it can
travel back from a Ray worker or be journaled as JSON. Programs turn answers into their
records (`BinEval.record`: a `QuestionVerdict`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import dspy
from dspy.utils.exceptions import AdapterParseError

from binaryeval_dspy.lm.adapters import CUT_REPLY_NOTE, REPLY_NOTES, is_empty_reply, reply_text
from binaryeval_dspy.lm.dspy_internals import adapter_messages, adapter_values
from binaryeval_dspy.lm.final_answer import RAW_REPLY_LIMIT, is_incomplete_reply, parse_chat_reply, parse_json_reply
from binaryeval_dspy.lm.logprobs import locate_value
from binaryeval_dspy.schemas.item_result import Usage

AnswerStatus = Literal["answered", "unparsed", "empty", "error", "not_sent"]

#: What an answer with no text in its reply says (no choices, or only an empty message).
EMPTY_REPLY = "EmptyReply: the LM's reply held no answer (no choices or no text)"


@dataclass(frozen=True, eq=False)
class LMCall:
    """One LM call a program needs (paper 3.2: one binary question about one output, or a later step).

    Attributes:
        key: the call's name within its item, unique there together with `judge`: a
            question id, ``"pick-1"``, ``"refute-draft"``.
        signature: the DSPy signature (its instructions may be an optimizer's).
        inputs: the signature's input fields, as the adapter formats them.
        demos: few-shot demos (dicts of the signature's fields), in order.
        config: per-call LM options (``logprobs``, ``top_logprobs``, ``max_tokens``), merged
            over the LM's own settings.
        distribution: ``(field, allowed values)`` whose probability distribution is read
            from the reply's token log-probabilities (BinEval: ``("verdict", ("yes", "no"))``),
            or None.
        judge: the judge (LM name) a panel asks; None: the run's LM.
        logprobs_required: an LM that refuses log-probabilities fails the call (``error``)
            instead of being asked again without them.
        item_id: the id of the item the call is about (None when it has none, e.g. a
            module called directly); not part of `content_key`, so duplicate items still
            share one request. An engine that answers from records (``replay``) finds the
            answer by it.
        output_hash: `binaryeval_dspy.schemas.item_result.text_hash` of the output under
            judgment, or None; not part of `content_key`. The replay engine refuses a
            recorded answer about another output.
    """

    key: str
    signature: type[dspy.Signature]
    inputs: Mapping[str, Any]
    demos: tuple[Mapping[str, Any], ...] = ()
    config: Mapping[str, Any] = field(default_factory=dict)
    distribution: tuple[str, tuple[str, ...]] | None = None
    judge: str | None = None
    logprobs_required: bool = False
    item_id: str | None = None
    output_hash: str | None = None

    def content_key(self) -> str:
        """A hash of everything that decides the request (signature instructions and fields,
        demos, inputs, options, judge): two calls with the same key get the same reply, so a
        run sends such calls once. Computed once per call."""
        known = self.__dict__.get("_content_key")
        if known is None:
            digest = hashlib.sha256(_signature_digest(self.signature).encode())
            for name in sorted(self.inputs):  # text values hashed as they are: no JSON escaping of long texts
                value = self.inputs[name]
                digest.update(f"\x1e{name}\x1f".encode())
                digest.update(value.encode("utf-8", "surrogatepass") if isinstance(value, str)
                              else json.dumps(value, sort_keys=True, default=str).encode())
            digest.update(json.dumps([list(self.demos), dict(self.config), self.distribution, self.judge],
                                     sort_keys=True, default=str).encode())
            known = digest.hexdigest()
            object.__setattr__(self, "_content_key", known)
        return known


_SIGNATURE_DIGESTS: dict[type, str] = {}


def _signature_digest(signature: type[dspy.Signature]) -> str:
    """A hash of a signature's name, instructions and fields (signature classes are immutable:
    computed once per class)."""
    known = _SIGNATURE_DIGESTS.get(signature)
    if known is None:
        fields = {name: str(getattr(info, "json_schema_extra", None) or "")
                  for name, info in {**signature.input_fields, **signature.output_fields}.items()}
        text = json.dumps([signature.__name__, signature.instructions, fields], sort_keys=True, default=str)
        known = _SIGNATURE_DIGESTS[signature] = hashlib.sha256(text.encode()).hexdigest()
    return known


@dataclass
class Prepared:
    """A call formatted for one LM: what goes out (`messages`, `lm_kwargs`) and what reads it back."""

    messages: list[dict[str, Any]]
    lm_kwargs: dict[str, Any]
    signature: type[dspy.Signature]  # the adapter's processed signature (what `parse` reads against)


@dataclass
class Answer:
    """What came back for one `LMCall`: plain values only (JSON-able, small).

    Attributes:
        status: ``answered`` (`fields` holds every output field), ``unparsed`` (a reply
            that could not be read: `raw` and `reason` say what and why), ``empty`` (a
            reply with no text: no answer at all), ``error`` (the call failed after its
            retries: `reason` is the error), ``not_sent`` (never sent: a spending limit or
            an interrupt; `reason` says which).
        fields: the parsed output fields (with our reply notes ``raw_reply``,
            ``qualified``, ``as_written``, ``reply_cut`` where they apply), or None.
        reason: why the call has no answer (parse reason, error text), else None.
        raw: the reply's text when it matters (unparsed replies), at most
            `RAW_REPLY_LIMIT` characters.
        incomplete: the reply stops inside its answer (a cut JSON object or field).
        cut: the reply stopped at ``max_tokens``.
        distribution: P(value) of `LMCall.distribution`'s field, summing to 1, or None.
        located: how that value was found in the log-probabilities (`locate_value`:
            ``format``, ``chosen``, ``reason``), or None when no distribution was asked.
        logprobs_refused: the LM refused log-probabilities, so the call went without them.
        usage: what the call cost (calls, failed requests, tokens; 0 from a cache).
    """

    status: AnswerStatus
    fields: dict[str, Any] | None = None
    reason: str | None = None
    raw: str | None = None
    incomplete: bool = False
    cut: bool = False
    distribution: dict[str, float] | None = None
    located: dict[str, Any] | None = None
    logprobs_refused: bool = False
    usage: Usage = field(default_factory=Usage)

    @property
    def answered(self) -> bool:
        """Whether the reply was read (`fields` is set)."""
        return self.status == "answered"

    def parse_error(self, signature: type[dspy.Signature] | None = None) -> AdapterParseError:
        """This unparsed answer as DSPy's `AdapterParseError`, for readers written against it."""
        return AdapterParseError(adapter_name="bineval", signature=signature, lm_response=self.raw or "",
                                 message=self.reason)

    def as_row(self) -> dict[str, Any]:
        """A JSON-able dict (for Ray rows and batch files); `from_row` reads it back."""
        row = {"status": self.status, "usage": self.usage.model_dump(mode="json")}
        for name in ("fields", "reason", "raw", "distribution", "located"):
            value = getattr(self, name)
            if value is not None:
                row[name] = _plain(value)
        if self.incomplete:
            row["incomplete"] = True
        if self.cut:
            row["cut"] = True
        if self.logprobs_refused:
            row["logprobs_refused"] = True
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Answer:
        """The answer `as_row` wrote."""
        return cls(status=row["status"], fields=row.get("fields"), reason=row.get("reason"), raw=row.get("raw"),
                   incomplete=bool(row.get("incomplete")), cut=bool(row.get("cut")),
                   distribution=row.get("distribution"), located=row.get("located"),
                   logprobs_refused=bool(row.get("logprobs_refused")),
                   usage=Usage.model_validate(row.get("usage") or {}))


def _plain(value: Any) -> Any:
    """`value` with pydantic models, tuples and other non-JSON values turned into JSON values."""
    return json.loads(json.dumps(value, default=lambda v: v.model_dump(mode="json") if hasattr(v, "model_dump")
                                 else str(v), ensure_ascii=False))


def format_call(call: LMCall, lm: Any, adapter: Any) -> Prepared:
    """The one formatter: `call` as the messages and LM options `adapter` sends `lm`.

    The adapter's own steps, in its order (its signature preprocessing, the JSON adapter's
    ``response_format`` choice, ``format``), so the request is the one DSPy's adapter
    pipeline would send; nothing is sent.

    Args:
        call: the call.
        lm: the LM it goes to (its capabilities decide ``response_format``).
        adapter: the run's adapter (`binaryeval_dspy.lm.adapters.choose_adapter`).

    Returns:
        A `Prepared` request.
    """
    lm_kwargs = dict(call.config)
    processed, messages = adapter_messages(adapter, lm, lm_kwargs, call.signature, list(call.demos), dict(call.inputs))
    return Prepared(messages=messages, lm_kwargs=lm_kwargs, signature=processed)


def read_outputs(call: LMCall, prepared: Prepared, outputs: list[Any], lm: Any, adapter: Any,
                 usage: Usage | None = None) -> Answer:
    """The one parser: DSPy-shaped outputs of `call` (``[{"text", "logprobs", ...}]`` or
    strings) read by `adapter` into an `Answer` (the first output; others are ignored).

    The adapter's postprocessing (our final-answer ``parse``); a reply in the other
    format than the adapter's is read by our other parser before it counts as unparsed.
    """
    try:
        values = adapter_values(adapter, prepared.signature, call.signature, outputs, lm, prepared.lm_kwargs)
    except AdapterParseError as exc:
        return read_failure(call, exc, usage)
    if not values:
        return Answer(status="empty", reason=EMPTY_REPLY, usage=usage or Usage())
    return answer_from_values(call, values[0], usage)


def answer_from_values(call: LMCall, value: Mapping[str, Any], usage: Usage | None = None) -> Answer:
    """An `Answer` from one parsed value dict (the adapter's, with ``logprobs`` when asked)."""
    value = dict(value)
    logprobs = value.pop("logprobs", None)
    missing = [name for name in call.signature.output_fields if value.get(name) is None]
    if missing and all(value.get(name) is None for name in call.signature.output_fields):
        return Answer(status="empty", reason=EMPTY_REPLY, usage=usage or Usage())
    distribution = located = None
    if call.distribution is not None:
        name, keys = call.distribution
        found = locate_value(logprobs, name, list(keys))
        distribution = found.distribution
        located = {"format": found.format, "chosen": found.chosen, "reason": found.reason}
    cut = bool(value.get("reply_cut"))
    return Answer(status="answered", fields={k: v for k, v in value.items() if v is not None}, cut=cut,
                  distribution=distribution, located=located, usage=usage or Usage())


def answer_from_outputs(call: LMCall, values: list[Mapping[str, Any]]) -> Answer:
    """The `Answer` of an adapter call's parsed outputs: the first one's (`answer_from_values`),
    or an ``error`` answer when the LM returned none."""
    if not values:
        return read_failure(call, ValueError("the LM returned no output"))
    return answer_from_values(call, values[0])


def read_failure(call: LMCall, exc: BaseException, usage: Usage | None = None) -> Answer:
    """The `Answer` of a call that raised instead of answering.

    An `AdapterParseError` is a reply that could not be read: first our other parser tries
    it (a JSON reply to the chat adapter or the reverse), then it is ``unparsed`` with its
    text and the parser's reason (a reply cut inside its answer says so), or ``empty`` when
    the reply held no text. Any other exception is the call's ``error`` (`error_text`).
    """
    usage = usage or Usage()
    if not isinstance(exc, AdapterParseError):
        return Answer(status="error", reason=error_text(exc), usage=usage)
    raw = reply_text(exc.lm_response)
    if is_empty_reply(exc):
        return Answer(status="empty", reason=EMPTY_REPLY, usage=usage)
    cut = str(getattr(exc, "message", "") or "").startswith(CUT_REPLY_NOTE)
    failures: list[AdapterParseError] = []
    salvaged = _other_format(raw, call.signature, cut=cut, failures=failures)
    if salvaged is not None:
        return answer_from_values(call, {**salvaged, **({"reply_cut": True} if cut else {})}, usage)
    # say why in the terms of the format the reply was in: a reply cut inside its answer says so
    reason_exc = next((f for f in (exc, *failures) if is_incomplete_reply(f)), exc)
    reason = _parse_reason(reason_exc)
    if cut and not reason.startswith(CUT_REPLY_NOTE):
        reason = f"{CUT_REPLY_NOTE}: {reason}"
    return Answer(status="unparsed", reason=f"{type(reason_exc).__name__}: {reason}", raw=raw[:RAW_REPLY_LIMIT],
                  incomplete=any(is_incomplete_reply(f) for f in (exc, *failures)), cut=cut, usage=usage)


def _other_format(raw: str, signature: type[dspy.Signature], *, cut: bool,
                  failures: list[AdapterParseError]) -> dict[str, Any] | None:
    """The answer our parsers read in `raw` (JSON first for a reply that opens like JSON, else
    chat first), or None; each parser's failure is appended to `failures`."""
    text = (raw or "").strip()
    parsers = ((parse_json_reply, lambda s, t: parse_chat_reply(s, t, cut=cut)) if text.startswith(("{", "```"))
               else (lambda s, t: parse_chat_reply(s, t, cut=cut), parse_json_reply))
    for parse in parsers:
        try:
            return dict(parse(signature, text))
        except AdapterParseError as exc:
            failures.append(exc)
    return None


def _parse_reason(exc: AdapterParseError) -> str:
    """The parser's reason in one line, without DSPy's long restatement of the signature."""
    message = str(getattr(exc, "message", None) or "could not read the answer")
    return message.splitlines()[0][:300]


def reply_notes(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The reply notes our parsers keep beside the output fields (`REPLY_NOTES`)."""
    return {key: fields[key] for key in REPLY_NOTES if fields.get(key)}


# ----------------------------------------------------------------------------- error text

_LIBRARY_ADVICE = "\n\n  To fix:"  # DSPy's HTTP layer (lm15) appends advice written for its own API users

_HINTS = {  # error type name -> what to do with bineval's settings (the CLI shows them as flags)
    **dict.fromkeys(("LMRateLimitError", "RateLimitError"),
                    "the endpoint kept refusing after the retries: lower `concurrency` or wait, then rerun "
                    "(only unanswered questions are asked)"),
    **dict.fromkeys(("LMTimeoutError", "Timeout", "APITimeoutError", "TimeoutError", "ReadTimeout", "ConnectTimeout"),
                    "a request took longer than `timeout` seconds: raise `timeout` or lower `concurrency`, then "
                    "rerun"),
    **dict.fromkeys(("LMAuthError", "AuthenticationError"),
                    "the endpoint refused the key: for a base URL pass `api_key_env` NAME (the variable holding its "
                    "key; without it a placeholder is sent), for a provider set its key variable, then rerun"),
}

_NOT_FOUND_HINT = ("the server has no such path or model: check that `spec` ends where its OpenAI-compatible API "
                   "starts (usually .../v1) and that `model` names a model it serves")

# Advice inside DSPy's HTTP-layer (lm15) messages that names its own API: what it means in bineval's settings.
_LIBRARY_PHRASES = (
    (re.compile(r"this is lm15's read timeout, not a server failure\W+raise it with Timeouts\(read=\.\.\.\) "
                r"if the model needs longer"),
     "the client's read timeout, not a server failure"),
    (re.compile(r"raise max_connections, or Timeouts\(pool=\.\.\.\) to wait longer"), "lower `concurrency`"),
)


def error_text(exc: BaseException, limit: int = 2000) -> str:
    """``"<ErrorType>: <message>"`` of a failed call, cut to `limit` characters (for records).

    Advice that DSPy's HTTP layer appends for its own API (``To fix: ... Timeouts(read=...)``)
    is replaced by what to do with bineval's settings: the retries are done, and the timeout
    is the `timeout` setting. A provider error's HTTP status is added when the message lacks
    it; a 404 says to check the base URL's ``/v1`` and the model name.
    """
    from binaryeval_dspy.errors import LMCallFailed

    if isinstance(exc, LMCallFailed):  # already a recorded error text
        return str(exc)[:limit]
    name = type(exc).__name__
    message = str(exc).split(_LIBRARY_ADVICE, 1)[0].rstrip()
    for phrase, ours in _LIBRARY_PHRASES:
        message = phrase.sub(ours, message)
    status = getattr(exc, "status", None)  # DSPy's provider errors carry the HTTP status
    if isinstance(status, int) and not isinstance(status, bool) and str(status) not in message:
        message = f"{message} (HTTP {status})"
    hint = _hint(exc) or (_NOT_FOUND_HINT if status == 404 else None)
    return (f"{name}: {message}" + (f" ({hint})" if hint else ""))[:limit]


def _hint(exc: BaseException) -> str | None:
    """What to do about `exc`, by its type or the type of what caused it: DSPy's HTTP layer
    raises a read timeout as an ``LMTransportError`` caused by a ``ReadTimeout`` / `TimeoutError`."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        hint = _HINTS.get(type(cause).__name__) or (_HINTS["TimeoutError"] if isinstance(cause, TimeoutError) else None)
        if hint:
            return hint
        cause = cause.__cause__ or cause.__context__
    return None


def hinted(name: str, message: str, *, status: int | None = None, limit: int = 2000) -> str:
    """`error_text` for an error known by its type name and message (e.g. from a worker process)."""
    hint = _HINTS.get(name) or (_NOT_FOUND_HINT if status == 404 else None)
    return (f"{name}: {message}" + (f" ({hint})" if hint else ""))[:limit]


__all__ = ["EMPTY_REPLY", "Answer", "LMCall", "Prepared", "answer_from_outputs", "answer_from_values", "error_text",
           "format_call", "hinted", "read_failure", "read_outputs", "reply_notes"]

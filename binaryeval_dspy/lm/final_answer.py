"""Read the judge's own final answer from a reply, not text it quoted from the output.

A judge that quotes the evaluated output may repeat a block planted there to look like
its answer (DSPy's ``[[ ## verdict ## ]]`` sections, or a JSON verdict). DSPy's adapters
keep the *first* occurrence of each field (ChatAdapter) or the first object (JSONAdapter
with json_repair), which is the planted one. These parsers keep the judge's final answer:

* chat format: the reply is cut into answer sets (a set ends where an output field's header
  repeats); the last set holding every required output field is the answer. When several
  readable values of a decision field (any field not typed ``str``, e.g. the verdict)
  disagree anywhere in the reply, the reply is unreadable (`AdapterParseError`), never one of them.
* JSON format: the last JSON object in the reply (bare or in a code fence) that has every
  required output field.

Only a syntactically complete answer is read: a reply that stops inside its JSON object
(``{"verdict": "yes``, finish reason ``stop`` or ``length``) or inside a field (a string or
JSON value left open, or the field a reply cut at ``max_tokens`` stopped in) is unreadable;
json_repair may mend a closed object's syntax, never complete a cut value.

Decision fields typed as a ``Literal`` of strings are read loosely (``"Yes."``,
``"**No**, because ..."``) by `binaryeval_dspy.lm.verdict_text`, so a clear answer never
costs a second call; hedges stay unreadable. A label followed by a reservation
(``"Yes, but ..."``) is read, and the parsed dict names it in ``qualified``. When the reply held more than one answer set
or text outside the expected fields, the parsed dict carries ``raw_reply`` (the reply, cut
to `RAW_REPLY_LIMIT` characters) so a reader can see what the judge wrote.
"""

from __future__ import annotations

import json
import re
import typing
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

import json_repair
from dspy.utils.exceptions import AdapterParseError

from binaryeval_dspy.lm.dspy_internals import apply_output_field_defaults, parse_value
from binaryeval_dspy.lm.verdict_text import normalize_label, reservation

RAW_REPLY_LIMIT = 4000
_HEADER = re.compile(r"^\[\[ ## (\w+) ## \]\]")
_FENCE_LINE = re.compile(r"^\s*```[\w-]*\s*$", re.MULTILINE)


#: Why a reply whose JSON never closes is unreadable (`AdapterParseError` message).
UNCLOSED_JSON = "the reply stops inside its JSON object"
#: Why a reply with a field cut short is unreadable (followed by the field's name).
OPEN_FIELD = "the reply stops inside its field"
# Where a JSON object can begin: a brace, then a key (quoted, or bare as lenient JSON writes
# it), the closing brace, or the end of the text.
_OBJECT_START = re.compile(r"\{\s*(?:[\"'\w}]|$)")
_QUOTED_OBJECT_START = re.compile(r'\{\s*"')
_CLOSER = {"{": "}", "[": "]"}


def _runs_to_end_open(text: str, start: int) -> bool:
    """True when the JSON value opening at ``text[start]`` (a ``{``, ``[`` or ``"``) is still
    open at the end of `text`: a string never terminated, or a bracket never closed, with
    no mismatched closer on the way (a mismatch is malformed text, not a cut one)."""
    stack: list[str] = []
    quote = ""  # the open string's quote mark ('"', or "'" as lenient JSON writes it)
    escaped = False
    for char in text[start:]:
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
                if not stack:
                    return False  # a lone string value that closed
            continue
        if char in "\"'":
            quote = char
        elif char in _CLOSER:
            stack.append(_CLOSER[char])
        elif char in "}]":
            if not stack or stack.pop() != char:
                return False
            if not stack:
                return False  # the value closed
    return bool(quote) or bool(stack)


def unclosed_json_tail(text: str, *, bare_keys: bool = True) -> bool:
    """True when `text` ends inside a JSON object: after the last object that decodes, an
    object begins (``{`` then a key's quote) and runs to the end of the text with a string
    or a bracket still open. A reply cut inside its answer (``{"verdict": "yes``, or
    ``{"verdict": "no", "explanation": "The summ``, nested or not, fenced or not), whatever
    the finish reason; a brace in prose that closes, or never starts a key, does not count.

    Args:
        text: a reply, or one field's text.
        bare_keys: also count an object whose first key is unquoted or single-quoted (as
            lenient JSON writes it); False counts only ``{"``, for free text.
    """
    after = max((end for _start, end, _value in _json_objects(text)), default=0)
    for candidate in (_OBJECT_START if bare_keys else _QUOTED_OBJECT_START).finditer(text, after):
        if _runs_to_end_open(text, candidate.start()):
            return True
    return False


def _json_objects(text: str) -> list[tuple[int, int, Any]]:
    """Every top-level JSON value that starts with ``{`` in `text`: (start, end, value)."""
    decoder = json.JSONDecoder()
    found, position = [], 0
    while True:
        start = text.find("{", position)
        if start < 0:
            return found
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            position = start + 1
            continue
        found.append((start, end, value))
        position = end


def is_incomplete_reply(exc: AdapterParseError) -> bool:
    """True when a failed parse was a reply that stops inside its answer: the parser said
    so (`UNCLOSED_JSON`, `OPEN_FIELD`), or the reply's text ends inside a JSON object
    (`unclosed_json_tail`; for a parse by another adapter). A caller that salvages fields
    from an unreadable reply with patterns must not read such a reply."""
    message = str(getattr(exc, "message", "") or "")
    if UNCLOSED_JSON in message or OPEN_FIELD in message:
        return True
    response = getattr(exc, "lm_response", None)
    text = response.get("text") if isinstance(response, dict) else response
    return unclosed_json_tail(str(text or ""))


def complete_list_items(exc: AdapterParseError, field: str) -> list[str] | None:
    """The items of a list field that a cut reply wrote in full, or None when it has none.

    For the steps that write lists (requirements, question drafts, refutation questions): a
    reply cut at ``max_tokens`` inside its list is unreadable as an answer, but the items
    before the cut are the LM's whole words. The list is located with json_repair (in a
    JSON reply, or after the field's ``[[ ## field ## ]]`` header), and only the string
    items whose closing quote is in the reply are kept: the item the repair completed is
    left out.

    Args:
        exc: the parse failure, whose reply is read (see `is_incomplete_reply`).
        field: the list field's name.

    Returns:
        The complete string items, in order (an empty list is returned as None).
    """
    response = getattr(exc, "lm_response", None)
    text = str((response.get("text") if isinstance(response, dict) else response) or "")
    marker = f"[[ ## {field} ## ]]"
    header = text.rfind(marker)
    located = json_repair.loads(text[header + len(marker):] if header >= 0 else text)
    items = located.get(field) if isinstance(located, dict) else located
    if not isinstance(items, list):
        return None
    whole = [item for item in items if isinstance(item, str)
             and (json.dumps(item) in text or json.dumps(item, ensure_ascii=False) in text)]
    return whole or None


def _literal_labels(annotation: Any) -> tuple[str, ...] | None:
    if typing.get_origin(annotation) is typing.Literal:
        args = typing.get_args(annotation)
        if args and all(isinstance(a, str) for a in args):
            return tuple(args)
    return None


_SHAPES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _shape(signature: Any) -> tuple[dict[str, Any], frozenset[str]]:
    """A signature's output fields (name -> annotation, in order) and the required ones.

    DSPy rebuilds ``output_fields`` from the pydantic model on every access (26 accesses
    per parsed reply, a fifth of a call's format-and-read CPU); signature classes are
    immutable (an edited signature is a new class), so both are read once per class.
    """
    try:
        known = _SHAPES.get(signature)
    except TypeError:  # not weak-referenceable: read it every time
        known = None
    if known is None:
        fields = signature.output_fields
        known = ({name: info.annotation for name, info in fields.items()},
                 frozenset(set(fields) - set(apply_output_field_defaults(signature, {}))))
        try:
            _SHAPES[signature] = known
        except TypeError:
            pass
    return known


def _outputs(signature: Any) -> dict[str, Any]:
    return _shape(signature)[0]


def _required(signature: Any) -> frozenset[str]:
    return _shape(signature)[1]


def _left_open(value: Any, *, prose: bool = False) -> bool:
    """True when a field's text opens a string or a JSON value and never closes it: a value
    cut short (``"yes``, ``["a", "b``, ``{"k": 1``), which a lenient parser would complete.

    `prose` is for free-text fields: only a leading double quote or a JSON object (a brace
    then a quoted key) counts, so an apostrophe or a brace in a sentence does not.
    """
    if not isinstance(value, str):
        return False
    text = value.strip()
    if text[:1] in ('{["' if prose else "{[\"'") and text[:1] and _runs_to_end_open(text, 0):
        return True
    return unclosed_json_tail(text, bare_keys=not prose)


def _open_field_error(signature: Any, name: str, adapter: str, completion: str,
                      why: str = " (a string or JSON value left open)") -> AdapterParseError:
    return AdapterParseError(adapter_name=adapter, signature=signature, lm_response=completion,
                             message=f"{OPEN_FIELD} {name!r}{why}")


def _coerce(signature: Any, name: str, value: Any, adapter: str, completion: str) -> Any:
    annotation = _outputs(signature)[name]
    if annotation is not str and _left_open(value):
        raise _open_field_error(signature, name, adapter, completion)
    labels = _literal_labels(annotation)
    if labels is not None:
        if not isinstance(value, str):  # ["yes"], true, 1: not a label as written, never read as one
            raise AdapterParseError(adapter_name=adapter, signature=signature, lm_response=completion,
                                    message=f"field {name!r} is {_json_kind(value)}, not text naming one of "
                                            f"{list(labels)}: {json.dumps(value)[:200]}")
        label = normalize_label(value, labels)
        if label is None:
            raise AdapterParseError(adapter_name=adapter, signature=signature, lm_response=completion,
                                    message=f"field {name!r} names none of {list(labels)} (or hedges): {str(value)[:200]!r}")
        return label
    if value is None and annotation is str:
        return ""  # a JSON null where text is expected: no text (never the word "None")
    try:
        return parse_value(value, annotation)
    except (ValueError, TypeError) as exc:
        raise AdapterParseError(adapter_name=adapter, signature=signature, lm_response=completion,
                                message=f"failed to parse field {name!r}: {exc}") from exc


def _refuse_conflicts(signature: Any, name: str, seen: set[str], values: Iterable[Any], adapter: str,
                      completion: str) -> None:
    """Raise `AdapterParseError` when the reply gives decision field `name` two readable values:
    `seen` (reprs of the values already read) plus each of `values` that `_coerce` reads
    (unreadable ones are passed over)."""
    for value in values:
        try:
            seen.add(repr(_coerce(signature, name, value, adapter, completion)))
        except AdapterParseError:
            pass
    if len(seen) > 1:
        raise AdapterParseError(adapter_name=adapter, signature=signature, lm_response=completion,
                                message=f"the reply gives conflicting values for {name!r}")


def _json_kind(value: Any) -> str:
    """``a list``, ``an object``, ``true/false``, ``a number`` or ``null``: a JSON value's kind, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    return {list: "a list", dict: "an object"}.get(type(value), "a number")


def _label_notes(signature: Any, texts: dict[str, Any], final: dict[str, Any]) -> dict[str, Any]:
    """What the parsed labels leave out, as keys beside the fields: ``qualified`` (field ->
    reservation, for each label field whose text qualifies its label, see `reservation`) and
    ``as_written`` (field -> text, for each label field written otherwise than its label,
    ``"keep"`` or ``"**Yes**."``, so a caller can record the judge's own words)."""
    qualified, written = {}, {}
    for name, text in texts.items():
        outputs = _outputs(signature)
        labels = _literal_labels(outputs[name]) if name in outputs else None
        if labels is None or not isinstance(text, str):
            continue
        said = reservation(text, labels)
        if said:
            qualified[name] = said
        if text.strip() != final.get(name):
            written[name] = text.strip()[:RAW_REPLY_LIMIT]
    return {key: value for key, value in (("qualified", qualified), ("as_written", written)) if value}


def _decision_fields(signature: Any) -> list[str]:
    return [name for name, annotation in _outputs(signature).items() if annotation is not str]


def parse_chat_reply(signature: Any, completion: str, adapter: str = "ChatAdapter", *,
                     cut: bool = False) -> dict[str, Any]:
    """The final complete answer set of a chat-format reply, as ``{field: value}``.

    Only complete field blocks are read: a field whose text opens a string or a JSON value
    and never closes it (``"yes``, ``["a", "b``, a free-text field ending in
    ``{"k": "v``) is cut short, whatever the finish reason; so is the field a reply
    stopped in when it was `cut` at ``max_tokens`` (its block never ended).

    Args:
        signature: the DSPy signature whose output fields are read.
        completion: the LM's reply text.
        adapter: the adapter name put in errors.
        cut: the reply stopped at the completion cap (``finish_reason: "length"``).

    Returns:
        One value per output field (defaults filled as DSPy does), plus ``raw_reply`` when
        the reply held more than one answer set or text outside the output fields (or a
        qualified label), ``qualified`` (field -> reservation, see `reservation`) when
        a label field carries a reservation (``"Yes, but ..."``), and ``as_written``
        (field -> text) for label fields written otherwise than their label.

    Raises:
        AdapterParseError: the reply stops inside a field (`OPEN_FIELD`) or inside a JSON
            object (`UNCLOSED_JSON`); no complete answer set; a decision field that cannot
            be read; two different readable values of a decision field anywhere in the reply.
    """
    outputs = _outputs(signature)
    sets: list[dict[str, list[str]]] = [{}]
    current: list[str] | None = None
    current_name = ""
    extra = False
    for line in completion.splitlines():
        match = _HEADER.match(line.strip())
        if match:
            name = match.group(1)
            rest = line.strip()[match.end():].strip()
            if name in outputs:
                if name in sets[-1]:
                    sets.append({})  # a field repeats: a new answer set begins
                sets[-1][name] = current = [rest] if rest else []
                current_name = name
            else:
                extra = extra or name != "completed"
                current = None  # an unknown header (or "completed") ends the field
            continue
        if current is not None:
            current.append(line)
        elif line.strip():
            extra = True  # prose outside the fields
    if cut and current is not None:
        # stopped at max_tokens inside a field block: its value (and any later field) is missing
        raise _open_field_error(signature, current_name, adapter, completion, why="")
    required = _required(signature)
    complete = [s for s in sets if required <= set(s)]
    if not complete:
        raise AdapterParseError(adapter_name=adapter, signature=signature, lm_response=completion,
                                message=UNCLOSED_JSON if unclosed_json_tail(completion) else
                                "the reply has no complete set of output fields")
    for name, lines in complete[-1].items():
        if outputs[name] is str and _left_open("\n".join(lines), prose=True):
            raise _open_field_error(signature, name, adapter, completion)
    parsed = []
    for answer_set in complete:
        values = {name: _coerce(signature, name, "\n".join(lines).strip(), adapter, completion)
                  for name, lines in answer_set.items()}
        parsed.append(apply_output_field_defaults(signature, values))
    final = parsed[-1]
    for name in _decision_fields(signature):
        # Every readable value of the field anywhere in the reply, partial sets included: a
        # quoted stray "[[ ## verdict ## ]] yes" next to the judge's "no" is a conflict.
        _refuse_conflicts(signature, name, {repr(p.get(name)) for p in parsed},
                          ("\n".join(s[name]).strip() for s in sets if name in s), adapter, completion)
    notes = _label_notes(signature, {name: "\n".join(lines).strip() for name, lines in complete[-1].items()}, final)
    final.update(notes)
    if extra or len(sets) > 1 or "qualified" in notes:
        final["raw_reply"] = completion[:RAW_REPLY_LIMIT]
    return final


def parse_json_reply(signature: Any, completion: str, adapter: str = "JSONAdapter",
                     quoted: Sequence[str] = ()) -> dict[str, Any]:
    """The last JSON object in `completion` that has every required output field, unless the
    reply's objects disagree on a decision field (then nothing is read).

    Objects may be bare or inside code fences; an object nested in another counts only as
    part of its parent. A reply that ends inside a JSON object (`unclosed_json_tail`: a
    string or a bracket left open, e.g. ``{"verdict": "yes``, whatever the finish reason)
    is unreadable: nothing the repair would complete is an answer. When no object decodes
    strictly but each one closes, json_repair's lenient reading (as DSPy's JSONAdapter
    does) supplies the one object (a trailing comma, single quotes).

    Args:
        signature: the DSPy signature whose output fields are read.
        completion: the LM's reply text.
        adapter: the adapter name put in errors.
        quoted: the material under review the prompt showed (the input and output fenced
            as evaluated text). An object whose exact text appears in one of them is a
            quote of the material, never an answer: it is skipped, so a judge that echoes a
            planted ``{"verdict": "yes", ...}`` before or after its own answer is read
            by its own answer. A quote that is not verbatim still counts as an object
            (and conflicts with a different answer).

    Returns:
        One value per output field, plus ``raw_reply`` when the reply held more than the
        answer object (other objects, or prose outside it) or a qualified label,
        ``qualified`` (field -> reservation) when a label field carries a reservation
        (``{"verdict": "Yes, but ..."}``, see `reservation`), and ``as_written`` (field ->
        text) for label fields written otherwise than their label.

    Raises:
        AdapterParseError: a reply that stops inside its JSON object (message
            `UNCLOSED_JSON`), no object, no object with every required field, a field that
            cannot be read, or two different readable values of a decision field in the
            reply's objects (the judge's answer and a quoted or second one).
    """
    if unclosed_json_tail(completion):
        # A reply cut inside its answer: json_repair would complete the half-written value
        # (``{"verdict": "yes`` -> yes); a value the repair completed is not an answer.
        raise AdapterParseError(adapter_name=adapter, signature=signature, lm_response=completion,
                                message=UNCLOSED_JSON)
    found = [(s, e, v) for s, e, v in _json_objects(completion) if isinstance(v, dict)]
    objects = [(s, e, v) for s, e, v in found if not any(completion[s:e] in text for text in quoted)]
    if found and not objects:
        raise AdapterParseError(adapter_name=adapter, signature=signature, lm_response=completion,
                                message="the reply's only JSON objects are quoted from the evaluated texts")
    if not objects:
        # Nothing decodes strictly but every object closes (a trailing comma, single quotes):
        # the lenient reading DSPy uses, which has only one object to choose from anyway. It
        # mends the syntax; it never completes a cut value (refused above).
        repaired = json_repair.loads(completion)
        if not isinstance(repaired, dict):
            raise AdapterParseError(adapter_name=adapter, signature=signature, lm_response=completion,
                                    message="the reply holds no JSON object")
        objects = [(0, len(completion), repaired)]
    required = _required(signature)
    matching = [(s, e, v) for s, e, v in objects if required <= set(v)]
    if not matching:
        raise AdapterParseError(adapter_name=adapter, signature=signature, lm_response=completion,
                                message="no JSON object in the reply has every output field")
    start, end, chosen = matching[-1]
    values = {name: _coerce(signature, name, chosen[name], adapter, completion)
              for name in _outputs(signature) if name in chosen}
    final = apply_output_field_defaults(signature, values)
    for name in _decision_fields(signature):
        # Every readable value of the field in any object of the reply, partial ones included:
        # a quoted {"verdict": "yes"} after the judge's own {"verdict": "no", ...} is a
        # conflict, not a later answer (as in `parse_chat_reply`).
        _refuse_conflicts(signature, name, {repr(final.get(name))},
                          (obj[name] for _s, _e, obj in objects if name in obj), adapter, completion)
    notes = _label_notes(signature, {name: chosen[name] for name in _outputs(signature) if name in chosen}, final)
    final.update(notes)
    outside = _FENCE_LINE.sub("", completion[:start] + completion[end:]).strip()
    if len(found) > 1 or outside or "qualified" in notes:
        final["raw_reply"] = completion[:RAW_REPLY_LIMIT]
    return final

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

Decision fields typed as a ``Literal`` of strings are read loosely (``"Yes."``,
``"**No**, because ..."``) by `binaryeval_dspy.lm.verdict_text`, so a clear answer never
costs a second call; hedges stay unreadable. When the reply held more than one answer set
or text outside the expected fields, the parsed dict carries ``raw_reply`` (the reply, cut
to `RAW_REPLY_LIMIT` characters) so a reader can see what the judge wrote.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Sequence
from typing import Any

import json_repair
from dspy.utils.exceptions import AdapterParseError

from binaryeval_dspy.lm.dspy_internals import apply_output_field_defaults, parse_value
from binaryeval_dspy.lm.verdict_text import normalize_label

RAW_REPLY_LIMIT = 4000
_HEADER = re.compile(r"^\[\[ ## (\w+) ## \]\]")
_FENCE_LINE = re.compile(r"^\s*```[\w-]*\s*$", re.MULTILINE)


def _literal_labels(annotation: Any) -> tuple[str, ...] | None:
    if typing.get_origin(annotation) is typing.Literal:
        args = typing.get_args(annotation)
        if args and all(isinstance(a, str) for a in args):
            return tuple(args)
    return None


def _required(signature: Any) -> set[str]:
    return set(signature.output_fields) - set(apply_output_field_defaults(signature, {}))


def _coerce(signature: Any, name: str, value: Any, adapter: str, completion: str) -> Any:
    annotation = signature.output_fields[name].annotation
    labels = _literal_labels(annotation)
    if labels is not None:
        label = normalize_label(value, labels)
        if label is None:
            raise AdapterParseError(adapter_name=adapter, signature=signature, lm_response=completion,
                                    message=f"field {name!r} names none of {list(labels)} (or hedges): {str(value)[:200]!r}")
        return label
    try:
        return parse_value(value, annotation)
    except (ValueError, TypeError) as exc:
        raise AdapterParseError(adapter_name=adapter, signature=signature, lm_response=completion,
                                message=f"failed to parse field {name!r}: {exc}") from exc


def _decision_fields(signature: Any) -> list[str]:
    return [name for name, field in signature.output_fields.items() if field.annotation is not str]


def parse_chat_reply(signature: Any, completion: str, adapter: str = "ChatAdapter") -> dict[str, Any]:
    """The final complete answer set of a chat-format reply, as ``{field: value}``.

    Args:
        signature: the DSPy signature whose output fields are read.
        completion: the LM's reply text.
        adapter: the adapter name put in errors.

    Returns:
        One value per output field (defaults filled as DSPy does), plus ``raw_reply`` when
        the reply held more than one answer set or text outside the output fields.

    Raises:
        AdapterParseError: no complete answer set; a decision field that cannot be read;
            two different readable values of a decision field anywhere in the reply.
    """
    outputs = signature.output_fields
    sets: list[dict[str, list[str]]] = [{}]
    current: list[str] | None = None
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
            else:
                extra = extra or name != "completed"
                current = None  # an unknown header (or "completed") ends the field
            continue
        if current is not None:
            current.append(line)
        elif line.strip():
            extra = True  # prose outside the fields
    required = _required(signature)
    complete = [s for s in sets if required <= set(s)]
    if not complete:
        raise AdapterParseError(adapter_name=adapter, signature=signature, lm_response=completion,
                                message="the reply has no complete set of output fields")
    parsed = []
    for answer_set in complete:
        values = {name: _coerce(signature, name, "\n".join(lines).strip(), adapter, completion)
                  for name, lines in answer_set.items()}
        parsed.append(apply_output_field_defaults(signature, values))
    final = parsed[-1]
    for name in _decision_fields(signature):
        # Every readable value of the field anywhere in the reply, partial sets included: a
        # quoted stray "[[ ## verdict ## ]] yes" next to the judge's "no" is a conflict.
        seen = {repr(p.get(name)) for p in parsed}
        for answer_set in sets:
            if name in answer_set:
                try:
                    seen.add(repr(_coerce(signature, name, "\n".join(answer_set[name]).strip(), adapter,
                                          completion)))
                except AdapterParseError:
                    pass
        if len(seen) > 1:
            raise AdapterParseError(adapter_name=adapter, signature=signature, lm_response=completion,
                                    message=f"the reply gives conflicting values for {name!r}")
    if extra or len(sets) > 1:
        final["raw_reply"] = completion[:RAW_REPLY_LIMIT]
    return final


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


def parse_json_reply(signature: Any, completion: str, adapter: str = "JSONAdapter",
                     quoted: Sequence[str] = ()) -> dict[str, Any]:
    """The last JSON object in `completion` that has every required output field, unless the
    reply's objects disagree on a decision field (then nothing is read).

    Objects may be bare or inside code fences; an object nested in another counts only as
    part of its parent. When no object decodes strictly, json_repair's lenient reading (as
    DSPy's JSONAdapter does) supplies the one object.

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
        answer object (other objects, or prose outside it).

    Raises:
        AdapterParseError: no object, no object with every required field, a field that
            cannot be read, or two different readable values of a decision field in the
            reply's objects (the judge's answer and a quoted or second one).
    """
    found = [(s, e, v) for s, e, v in _json_objects(completion) if isinstance(v, dict)]
    objects = [(s, e, v) for s, e, v in found if not any(completion[s:e] in text for text in quoted)]
    if found and not objects:
        raise AdapterParseError(adapter_name=adapter, signature=signature, lm_response=completion,
                                message="the reply's only JSON objects are quoted from the evaluated texts")
    if not objects:
        # Nothing decodes strictly (a trailing comma, single quotes, a cut reply): the lenient
        # reading DSPy uses, which has only one object to choose from anyway.
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
              for name in signature.output_fields if name in chosen}
    final = apply_output_field_defaults(signature, values)
    for name in _decision_fields(signature):
        # Every readable value of the field in any object of the reply, partial ones included:
        # a quoted {"verdict": "yes"} after the judge's own {"verdict": "no", ...} is a
        # conflict, not a later answer (as in `parse_chat_reply`).
        seen = {repr(final.get(name))}
        for _s, _e, obj in objects:
            if name in obj:
                try:
                    seen.add(repr(_coerce(signature, name, obj[name], adapter, completion)))
                except AdapterParseError:
                    pass
        if len(seen) > 1:
            raise AdapterParseError(adapter_name=adapter, signature=signature, lm_response=completion,
                                    message=f"the reply gives conflicting values for {name!r}")
    outside = _FENCE_LINE.sub("", completion[:start] + completion[end:]).strip()
    if len(found) > 1 or outside:
        final["raw_reply"] = completion[:RAW_REPLY_LIMIT]
    return final

"""Answering a one-field closed-choice reply from one next-token distribution (embedded model).

A verdict-only judge call (``--no-explanations``) asks the embedded model for a JSON
object with one field whose value is one of a few strings, e.g. ``{"verdict": "yes"}``.
Under the JSON grammar every token of that reply but the value is fixed, yet llama.cpp
still decodes them one by one (about eight forward passes and grammar checks per call on
SmolLM2). Here the fixed opening ``{"verdict": "`` is appended to the prompt and
evaluated with it in one batch, the model's distribution at the next position is read,
and the most probable allowed value (by its first token) is chosen: one forward pass
instead of about eight.

The reply is always read in that one form (the compact JSON of Python's ``json.dumps``):
the answer is the model's preference among the allowed values right after the canonical
opening, read from its own next-token distribution. Decoding token by token through
llama.cpp's grammar lets the reply take other forms the grammar allows (``{ "verdict"``
with a space, other token splits), and the model reads each form as a different
context, so the two readings can differ: P(yes) by a few hundredths on average and
occasionally by more, and now and then the verdict (see ``tests/models/test_choice_scoring.py``
and the figures in docs/served-models.md). Neither reading is the "true" one; the
shortcut's is the same form for every question. ``choice_shortcut=False`` on the engine
decodes instead. The setting is part of the engine's cache identity, so a cached
decoded answer is never served for a shortcut call or back.

It applies only when a value's first token decides the reply; the engine decodes normally otherwise:

* the schema is an object with exactly one required property, a string enum of two or
  more values, none a prefix of another (so a value's first token decides it);
* decoding is greedy (temperature 0);
* the model's chat template is its GGUF template (the prompt is rendered exactly as
  ``create_chat_completion`` renders it, so llama.cpp's prompt-prefix reuse still works);
* each value tokenizes as the opening's tokens followed by its own, with a first token
  that no other value shares.

The value's log-probability and its top alternatives are the model's own, read before
any masking, as in `binaryeval_dspy.lm.llama_engine.LogprobRecorder`; the opening and
closing tokens are fixed by the schema and reported with log-probability 0.0 (certain
under the constraint). Source: issue 10 (verdict-only mode on the embedded model).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

_FORMATTERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class ChoiceField:
    """The one closed-choice field of a reply schema: its name and allowed values, in order."""

    name: str
    values: tuple[str, ...]


def choice_field(schema: Any) -> ChoiceField | None:
    """The schema's single string-enum field, or None when the schema is anything else.

    Args:
        schema: a JSON schema (dict), as sent in ``response_format``.

    Returns:
        A `ChoiceField` when `schema` is an object with exactly one property, required,
        whose values are an ``enum`` of two or more distinct non-empty strings of which
        none is a prefix of another; otherwise None (the caller decodes normally).
    """
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return None
    properties = schema.get("properties")
    if not isinstance(properties, dict) or len(properties) != 1:
        return None
    (name, spec), = properties.items()
    if name not in (schema.get("required") or []) or not isinstance(spec, dict):
        return None
    if spec.get("type", "string") != "string":
        return None
    values = spec.get("enum")
    if not isinstance(values, list) or len(values) < 2 or len(set(values)) != len(values):
        return None
    if not all(isinstance(v, str) and v for v in values):
        return None
    if any(a != b and b.startswith(a) for a in values for b in values):
        return None
    return ChoiceField(name=name, values=tuple(values))


def _formatter(llama: Any) -> Any:
    """The GGUF chat template's formatter, built as `llama_cpp.Llama` builds its own; None if not in use."""
    if getattr(llama, "chat_handler", None) is not None or getattr(llama, "chat_format", None) != "chat_template.default":
        return None
    if llama in _FORMATTERS:
        return _FORMATTERS[llama]
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    template = (getattr(llama, "metadata", None) or {}).get("tokenizer.chat_template")
    if not template:
        return None
    eos_id, bos_id = llama.token_eos(), llama.token_bos()
    formatter = Jinja2ChatFormatter(
        template=template,
        eos_token=llama._model.token_get_text(eos_id) if eos_id != -1 else "",
        bos_token=llama._model.token_get_text(bos_id) if bos_id != -1 else "",
        stop_token_ids=[eos_id],
    )
    _FORMATTERS[llama] = formatter
    return formatter


@dataclass(frozen=True)
class ChoiceReply:
    """What `answer_choice` decided: the reply text, its tokens' log-probabilities and counts.

    ``logprobs`` has one (text, logprob, token id or None, top alternatives) tuple per
    reply piece: the fixed opening, the value's first token, the fixed rest; ``top`` is a
    list of (token id, logprob), best first. ``prompt_tokens`` counts the rendered chat
    prompt (as ``create_chat_completion`` reports it); ``completion_tokens`` the reply's
    tokens, the fixed ones included.
    """

    text: str
    value: str
    logprobs: tuple[tuple[str, float, int | None, list[tuple[int, float]]], ...]
    prompt_tokens: int
    completion_tokens: int


def answer_choice(llama: Any, messages: list[dict[str, str]], field: ChoiceField, recorder: Any) -> ChoiceReply | None:
    """Answer `field` from the model's next-token distribution after the reply's fixed opening.

    Args:
        llama: a loaded `llama_cpp.Llama` (the caller holds its lock).
        messages: the chat messages, as for ``create_chat_completion``.
        field: the reply's one closed-choice field (`choice_field`).
        recorder: a `LogprobRecorder`; after the call its pending distribution is the one
            at the value position (used for the choice and for ``top`` alternatives).

    Returns:
        The `ChoiceReply`, or None when this model's template or tokenizer does not allow
        the shortcut (see the module docstring); the caller then decodes normally.

    Raises:
        ValueError: from llama-cpp-python, when the prompt does not fit the context window.
    """
    formatter = _formatter(llama)
    if formatter is None:
        return None
    rendered = formatter(messages=messages)
    prompt = llama.tokenize(rendered.prompt.encode("utf-8"), add_bos=not rendered.added_special, special=True)
    opening = '{"' + field.name + '": "'
    closing = '"}'
    opening_ids = llama.tokenize(opening.encode("utf-8"), add_bos=False, special=False)
    if len(prompt) + len(opening_ids) + 1 > llama.n_ctx():
        return None  # no room for the opening: decoding reports the overflow as it always does
    first_ids: dict[str, int] = {}
    for value in field.values:
        ids = llama.tokenize((opening + value + closing).encode("utf-8"), add_bos=False, special=False)
        if ids[:len(opening_ids)] != opening_ids or len(ids) <= len(opening_ids):
            return None
        first = ids[len(opening_ids)]
        if not value.startswith(llama.detokenize([first]).decode("utf-8", errors="ignore")):
            return None
        first_ids[value] = first
    if len(set(first_ids.values())) != len(first_ids):
        return None
    llama.create_completion(prompt=prompt + opening_ids, max_tokens=1, temperature=0.0, logits_processor=[recorder])
    distribution = recorder.pending
    if distribution is None:
        return None
    value = max(field.values, key=lambda v: float(distribution[first_ids[v]]))
    chosen = first_ids[value]
    chosen_text = llama.detokenize([chosen]).decode("utf-8", errors="ignore")
    text = opening + value + closing
    pieces = (
        (opening, 0.0, None, []),
        (chosen_text, float(distribution[chosen]), chosen, recorder.top(distribution)),
        (value[len(chosen_text):] + closing, 0.0, None, []),
    )
    completion = llama.tokenize(text.encode("utf-8"), add_bos=False, special=False)
    return ChoiceReply(text=text, value=value, logprobs=pieces, prompt_tokens=len(prompt),
                       completion_tokens=len(completion))

"""How a JSON schema is sent to an OpenAI-compatible server (the ``response_format`` dialect).

`dspy.JSONAdapter` asks for structured output with the signature's schema, which DSPy
sends in OpenAI's form, ``{"type": "json_schema", "json_schema": {"name", "schema",
"strict"}}``. vLLM, llama.cpp's C++ server, SGLang and hosted providers take that form.
llama-cpp-python's server (``python -m llama_cpp.server``) rejects it (HTTP 500,
"Input should be 'text' or 'json_object'") and takes ``{"type": "json_object",
"schema": {...}}`` instead, which it turns into a grammar.

Dialects:

* ``json_schema``: OpenAI's form, as DSPy sends it;
* ``json_object``: ``{"type": "json_object", "schema": ...}`` (llama-cpp-python's
  server; the C++ server takes it too), with enum / const strings that llama.cpp's
  grammar builder cannot encode removed from the schema (see
  `drop_unencodable_literals`: they can crash the server);
* ``auto``: OpenAI's form until the server rejects a request because of its
  ``response_format``; then ``json_object`` for that LM from then on (the rejected
  request is sent again once, counted).
"""

from __future__ import annotations

import re
from typing import Any

import pydantic

from binaryeval_dspy.errors import LMConfigError

SCHEMA_DIALECTS = ("auto", "json_schema", "json_object")


def check_dialect(dialect: str | None) -> str | None:
    """`dialect` if it is None or one of `SCHEMA_DIALECTS`; raises LMConfigError otherwise."""
    if dialect is not None and dialect not in SCHEMA_DIALECTS:
        raise LMConfigError("bad schema_dialect", expected=f"one of {', '.join(SCHEMA_DIALECTS)} or None",
                            received=repr(dialect), fix="leave it None to detect the dialect from the server.")
    return dialect


def schema_of(response_format: Any) -> dict[str, Any] | None:
    """The JSON schema a ``response_format`` value asks for, or None (json_object, text, absent).

    Accepts what `dspy.JSONAdapter` puts in the LM call (a pydantic model class) and
    the dict forms ``{"type": "json_schema", "json_schema": {"schema": ...}}`` and
    ``{"type": "json_object", "schema": ...}``.
    """
    if isinstance(response_format, type) and issubclass(response_format, pydantic.BaseModel):
        return response_format.model_json_schema()
    if isinstance(response_format, dict):
        inner = response_format.get("json_schema")
        if response_format.get("type") == "json_schema" and isinstance(inner, dict):
            return inner.get("schema")
        if isinstance(response_format.get("schema"), dict):
            return response_format["schema"]
    return None


def is_openai_schema(response_format: Any) -> bool:
    """Whether `response_format` goes out in OpenAI's ``json_schema`` form (a pydantic class or that dict)."""
    if isinstance(response_format, type) and issubclass(response_format, pydantic.BaseModel):
        return True
    return isinstance(response_format, dict) and response_format.get("type") == "json_schema"


def as_json_object(response_format: Any) -> Any:
    """`response_format` rewritten as ``{"type": "json_object", "schema": ...}``; other values unchanged.

    The schema loses enum / const strings llama.cpp's grammar builder cannot encode.
    """
    if not is_openai_schema(response_format):
        return response_format
    schema = schema_of(response_format)
    if schema is None:
        return {"type": "json_object"}
    from binaryeval_dspy.lm.llama_engine import drop_unencodable_literals

    return {"type": "json_object", "schema": drop_unencodable_literals(schema)}


def rejects_response_format(exc: BaseException) -> bool:
    """Whether an LM error reads as the server refusing the request's ``response_format``.

    True when the error text names ``response_format`` (or "response format",
    "responseFormat") or the ``json_schema`` type (quoted or not: "unknown field
    json_schema", "JSON schema"), as llama-cpp-python's server, LiteLLM and OpenAI-style
    servers do in their validation errors.
    """
    return _FORM_WORDS.search(str(exc)) is not None


#: How servers name the request's form in a refusal: the field, or the schema type it holds.
_FORM_WORDS = re.compile(r"response[ _-]?format|(?<![a-z0-9])json[ _-]?schema(?![a-z0-9])", re.IGNORECASE)

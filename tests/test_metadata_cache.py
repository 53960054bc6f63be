"""The memoized DSPy lookups in lm/metadata_cache.py give exactly DSPy's answers."""

from __future__ import annotations

import math

import pydantic
from dspy.adapters import utils as adapter_utils

from binaryeval_dspy.lm.metadata_cache import memoize_input_serializers


class _Point(pydantic.BaseModel):
    x: int
    label: str


class _Opaque:
    def __str__(self) -> str:
        return "opaque-object"


def _dspy_reference(value):
    """DSPy 3.4's serialize_for_json as written (a new TypeAdapter per call)."""
    try:
        return pydantic.TypeAdapter(type(value)).dump_python(value, mode="json", fallback=str)
    except Exception:
        return str(value)


VALUES = ["text", "", 3, 2.5, float("nan"), True, None, [1, "a"], {"k": [1, 2]}, _Point(x=1, label="p"),
          _Opaque(), b"bytes", ("t", 1)]


def test_memoized_serializer_matches_dspy_for_every_kind_of_value():
    memoize_input_serializers()
    serialize = adapter_utils.serialize_for_json
    for value in VALUES * 2:  # the second pass reads the kept adapters
        got, want = serialize(value), _dspy_reference(value)
        if isinstance(want, float) and math.isnan(want):
            assert isinstance(got, float) and math.isnan(got)
        else:
            assert got == want, value


def test_dspy_formats_input_fields_through_the_memoized_serializer():
    memoize_input_serializers()
    assert adapter_utils.serialize_for_json.__module__ == "binaryeval_dspy.lm.metadata_cache"
    field = pydantic.Field(json_schema_extra={"__dspy_field_type": "input"})
    info = pydantic.fields.FieldInfo.merge_field_infos(field, annotation=str)
    assert adapter_utils.format_field_value(info, "plain text") == "plain text"
    assert adapter_utils.format_field_value(info, {"k": 1}) == '{"k": 1}'

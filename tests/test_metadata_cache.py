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


def test_memoized_routing_gives_dspys_backend_selection_and_builds_the_router_once(monkeypatch):
    import dspy
    from dspy.clients import backend_selection

    from binaryeval_dspy.lm import metadata_cache
    from binaryeval_dspy.lm.factory import make_lm

    served = make_lm("http://127.0.0.1:9/v1", model="served-x", cache=False).lm  # declares a provider
    hosted = dspy.LM("openai/gpt-4o-mini", api_key="k", cache=False)
    from dspy.clients import capabilities

    before = {id(lm): backend_selection.select_backend(lm, {}) for lm in (served, hosted)}
    routes = {id(lm): capabilities.resolve(lm) for lm in (served, hosted)}
    metadata_cache.memoize_model_routing()
    assert capabilities.resolve.__module__ == "binaryeval_dspy.lm.metadata_cache"
    assert all(capabilities.resolve(lm) == routes[id(lm)] for lm in (served, hosted, served))
    assert backend_selection.LM15Engine.__module__ == "binaryeval_dspy.lm.metadata_cache"
    for lm in (served, hosted, served, hosted):
        got, want = backend_selection.select_backend(lm, {}), before[id(lm)]
        assert (got.native, got.resolution, got.clients) == (want.native, want.resolution, want.clients)

    built = []
    answers = metadata_cache._RoutingAnswers(lambda: built.append(1) or _Router(), {})
    assert [answers.resolve("m") for _ in range(3)] == ["routed m"] * 3
    assert len(built) == 1  # asked once, answered from the table after
    for _ in range(2):  # a model string that does not route raises every time: never kept
        try:
            answers.resolve("bad")
        except LookupError:
            pass
        else:
            raise AssertionError("an unroutable model was answered")
    assert len(built) == 3


class _Router:
    def resolve(self, model):
        if model == "bad":
            raise LookupError(model)
        return f"routed {model}"


def test_memoized_proxy_environment_is_read_again_after_a_second(monkeypatch):
    from dspy._vendor.lm15.transports import _proxy

    from binaryeval_dspy.lm import metadata_cache

    metadata_cache.memoize_proxy_environment()
    clock = [metadata_cache.time.monotonic() + 1000.0]  # later than any reading an earlier test left
    monkeypatch.setattr(metadata_cache.time, "monotonic", lambda: clock[0])
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    clock[0] += 5
    assert "https" not in _proxy.getproxies()
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    clock[0] += 0.5
    assert "https" not in _proxy.getproxies()  # the same reading, within the second
    clock[0] += 1.0
    assert _proxy.getproxies()["https"] == "http://proxy.example:3128"
    _proxy.getproxies()["https"] = "changed"  # a copy is handed out: the reading stays intact
    assert _proxy.getproxies()["https"] == "http://proxy.example:3128"

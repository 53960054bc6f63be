"""The memoized DSPy lookups in lm/dspy_internals.py give exactly DSPy's answers, installed once."""

from __future__ import annotations

import math

import pydantic
from dspy.adapters import utils as adapter_utils

from binaryeval_dspy.lm.dspy_internals import memoize_input_serializers


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
    assert adapter_utils.serialize_for_json.__module__ == "binaryeval_dspy.lm.dspy_internals"
    field = pydantic.Field(json_schema_extra={"__dspy_field_type": "input"})
    info = pydantic.fields.FieldInfo.merge_field_infos(field, annotation=str)
    assert adapter_utils.format_field_value(info, "plain text") == "plain text"
    assert adapter_utils.format_field_value(info, {"k": 1}) == '{"k": 1}'


def test_memoized_routing_gives_dspys_backend_selection_and_builds_the_router_once(monkeypatch):
    import dspy
    from dspy.clients import backend_selection

    from binaryeval_dspy.lm import dspy_internals
    from binaryeval_dspy.lm.factory import make_lm

    served = make_lm("http://127.0.0.1:9/v1", model="served-x", cache=False).lm  # declares a provider
    hosted = dspy.LM("openai/gpt-4o-mini", api_key="k", cache=False)
    from dspy.clients import capabilities

    before = {id(lm): backend_selection.select_backend(lm, {}) for lm in (served, hosted)}
    routes = {id(lm): capabilities.resolve(lm) for lm in (served, hosted)}
    dspy_internals.memoize_model_routing()
    assert capabilities.resolve.__module__ == "binaryeval_dspy.lm.dspy_internals"
    assert all(capabilities.resolve(lm) == routes[id(lm)] for lm in (served, hosted, served))
    assert backend_selection.LM15Engine.__module__ == "binaryeval_dspy.lm.dspy_internals"
    for lm in (served, hosted, served, hosted):
        got, want = backend_selection.select_backend(lm, {}), before[id(lm)]
        assert (got.native, got.resolution, got.clients) == (want.native, want.resolution, want.clients)

    built = []
    answers = dspy_internals._RoutingAnswers(lambda: built.append(1) or _Router(), {})
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

    from binaryeval_dspy.lm import dspy_internals

    dspy_internals.memoize_proxy_environment()
    clock = [dspy_internals.time.monotonic() + 1000.0]  # later than any reading an earlier test left
    monkeypatch.setattr(dspy_internals.time, "monotonic", lambda: clock[0])
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


def _run_fresh(code: str) -> None:
    """Run `code` in a fresh interpreter (DSPy unpatched at start); fail with its stderr."""
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]


def test_patches_are_installed_once_by_the_lm_factory_not_by_the_item_loop():
    _run_fresh("""
from dspy.adapters import utils as adapter_utils
from dspy.clients import backend_selection
dspy_serializer, dspy_engine = adapter_utils.serialize_for_json, backend_selection.LM15Engine
from binaryeval_dspy.engines.in_process import run_states
run_states(None, [])
assert adapter_utils.serialize_for_json is dspy_serializer, "the plan runner patched DSPy"
from binaryeval_dspy.lm.factory import make_lm
make_lm("http://127.0.0.1:9/v1", model="served-x", cache=False)
patched = (adapter_utils.serialize_for_json, backend_selection.LM15Engine)
assert patched[0] is not dspy_serializer and patched[1] is not dspy_engine
assert {f.__module__ for f in patched} == {"binaryeval_dspy.lm.dspy_internals"}
from binaryeval_dspy.lm.dspy_internals import install_dspy_patches
install_dspy_patches()
make_lm("http://127.0.0.1:9/v1", model="served-y", cache=False)
assert (adapter_utils.serialize_for_json, backend_selection.LM15Engine) == patched, "patched twice"
""")


def test_a_users_own_lm_gets_the_patches_when_it_enters_the_package():
    _run_fresh("""
import threading
import dspy
from dspy.adapters import utils as adapter_utils
dspy_serializer = adapter_utils.serialize_for_json
from binaryeval_dspy.lm.cache_identity import cache_scoped
assert adapter_utils.serialize_for_json is dspy_serializer, "importing the package patched DSPy"
lm = dspy.LM("openai/gpt-4o-mini", api_key="k")
threads = [threading.Thread(target=cache_scoped, args=(lm,)) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
assert adapter_utils.serialize_for_json.__module__ == "binaryeval_dspy.lm.dspy_internals"
""")

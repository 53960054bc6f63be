"""JSON schemas sent to llama.cpp: free text is bounded, literals it cannot encode are dropped."""

from __future__ import annotations

import json

import pytest

from binaryeval_dspy.lm.llama_engine import cap_strings, drop_unencodable_literals


def test_cap_strings_bounds_free_text_but_not_enums():
    schema = {"type": "object", "properties": {
        "why": {"type": "string"}, "verdict": {"type": "string", "enum": ["yes", "no"]}}}
    out = cap_strings(schema, 160)
    assert out["properties"]["why"] == {"type": "string", "maxLength": 160, "minLength": 1}
    assert out["properties"]["verdict"] == {"type": "string", "enum": ["yes", "no"]}
    assert "maxLength" not in schema["properties"]["why"]  # the input is not modified


def test_literals_with_quotes_backslashes_or_line_breaks_are_dropped():
    schema = {"type": "object", "properties": {
        "s": {"type": "string", "enum": ['Say "yes".', "Keep this.", "two\nlines", "back\\slash"]},
        "t": {"type": "string", "enum": ['only "bad"']},
        "c": {"const": 'a "quoted" const'},
        "ok": {"type": "string", "enum": ["yes", "no"]}}}
    out = drop_unencodable_literals(schema)
    assert out["properties"]["s"]["enum"] == ["Keep this."]
    assert out["properties"]["t"] == {"type": "string"}
    assert out["properties"]["c"] == {}
    assert out["properties"]["ok"] == schema["properties"]["ok"]


def test_the_cleaned_schema_makes_a_grammar_llama_cpp_can_parse():
    grammar_module = pytest.importorskip("llama_cpp.llama_grammar")
    schema = {"type": "object", "properties": {"s": {"type": "string", "enum": ['Say "yes".', "Keep this."]}},
              "required": ["s"]}
    gbnf = grammar_module.json_schema_to_gbnf(json.dumps(drop_unencodable_literals(schema)))
    assert '\\\\"' not in gbnf and "Keep this." in gbnf

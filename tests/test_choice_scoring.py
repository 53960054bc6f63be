"""The embedded engine's closed-choice shortcut (binaryeval_dspy.lm.choice_scoring).

Pure tests of which schemas qualify, and a test on the embedded SmolLM2 model that the
shortcut is really taken (the engine counts it), answers within the enum with P(yes), and
stays close to decoding token by token on real SummEval items.
"""

from pathlib import Path

import pytest

from binaryeval_dspy.lm.choice_scoring import ChoiceField, choice_field

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "summeval"


def _schema(properties: dict, required: list[str] | None = None) -> dict:
    return {"type": "object", "properties": properties, "required": list(properties) if required is None else required,
            "additionalProperties": False}


VERDICT = {"type": "string", "enum": ["yes", "no"], "title": "Verdict"}


def test_a_single_required_string_enum_qualifies():
    assert choice_field(_schema({"verdict": VERDICT})) == ChoiceField("verdict", ("yes", "no"))
    assert choice_field(_schema({"label": {"enum": ["pass", "fail", "review"]}})) == ChoiceField(
        "label", ("pass", "fail", "review"))


@pytest.mark.parametrize("schema", [
    _schema({"verdict": VERDICT, "explanation": {"type": "string"}}),  # a free-text field too
    _schema({"verdict": VERDICT}, required=[]),  # the field may be left out
    _schema({"verdict": {"type": "string"}}),  # free text
    _schema({"verdict": {"type": "string", "enum": ["yes"]}}),  # nothing to choose
    _schema({"verdict": {"type": "string", "enum": ["no", "none"]}}),  # "no" starts "none"
    _schema({"verdict": {"type": "string", "enum": ["yes", ""]}}),  # an empty value
    _schema({"score": {"type": "integer", "enum": [1, 2, 3]}}),  # not strings
    {"type": "array", "items": VERDICT},
    None,
])
def test_anything_else_is_decoded_normally(schema):
    assert choice_field(schema) is None


@pytest.mark.embedded
def test_shortcut_matches_token_by_token_decoding_on_real_items():
    pytest.importorskip("llama_cpp", reason="the embedded model needs the `local` extra")
    from binaryeval_dspy import BinEval, QuestionSet, load_items, make_lm

    handle = make_lm("local", cache=False)
    engine = handle.lm.engine
    questions = QuestionSet.load(EXAMPLE / "questions.json")
    picked = questions.questions[:4]
    items = load_items(EXAMPLE / "items.jsonl", input_field="source", output_field="summary", id_field="id", limit=2)
    program = BinEval(questions, explanations=False, logprobs="on")
    decoded, shortcut = [], []
    try:
        with handle.context():
            # Each question both ways, one right after the other, so both calls reuse the same
            # cached prompt prefix (llama.cpp's numbers shift slightly with how a prompt was batched).
            for item in items:
                engine.choice_shortcut = False
                program.judge_question(item.input, item.output, picked[-1])  # the item's prefix, cached once
                for question in picked:
                    for flag, out in ((False, decoded), (True, shortcut)):
                        engine.choice_shortcut = flag
                        before = engine.choice_answers
                        out.append(program.judge_question(item.input, item.output, question))
                        assert engine.choice_answers - before == int(flag)
    finally:
        engine.choice_shortcut = True
    assert all(v.verdict in ("yes", "no") and v.p_yes is not None for v in shortcut)
    # Two readings of the same model (see the module docstring): the shortcut reads the reply in
    # one fixed form, decoding may write it in another; they mostly agree, never wildly differ.
    agree = sum(a.verdict == b.verdict for a, b in zip(shortcut, decoded))
    assert agree >= len(decoded) - 2, [(a.verdict, b.verdict) for a, b in zip(shortcut, decoded)]
    assert sum(abs(a.p_yes - b.p_yes) for a, b in zip(shortcut, decoded)) / len(decoded) < 0.15

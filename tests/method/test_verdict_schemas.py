"""Verdict-mode fields of the question set (compatible hashes, validation) and the output schema file."""

import json
from pathlib import Path

import pytest

from binaryeval_dspy.errors import QuestionSetError
from binaryeval_dspy.schemas.item_result import ItemResult
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.verdict_output import VerdictOutput, verdict_output_json_schema
from binaryeval_dspy.schemas.verdict_policy import VerdictPolicy
from tests.verdict_scripts import AUDIT_POLICY, verdict_question_set

ROOT = Path(__file__).resolve().parents[2]


def test_existing_question_sets_keep_their_hash_and_file_form(tmp_path):
    # Hashes recorded before verdict mode existed (README and earlier runs quote the first one).
    expected = {"questions.json": "9b2a36c8e871573f", "questions.generated-smollm2.json": "159967a7fa111ce6"}
    for name, digest in expected.items():
        path = ROOT / "examples" / "summeval" / name
        qs = QuestionSet.load(path)
        assert qs.content_hash == digest
        saved = json.loads(qs.save(tmp_path / name).read_text())
        assert saved == json.loads(path.read_text())  # no new keys written for sets that do not use them


def test_hash_covers_checks_fatal_flags_and_policy():
    base = verdict_question_set()
    data = base.model_dump(mode="json")
    variants = []
    d = json.loads(json.dumps(data))
    d["questions"][0]["check"]["params"]["max"] = 60
    variants.append(d)
    d = json.loads(json.dumps(data))
    d["questions"][0]["fatal"] = False
    variants.append(d)
    d = json.loads(json.dumps(data))
    d["verdict_policy"]["labels"][2]["action"] = "archive it"
    variants.append(d)
    d = json.loads(json.dumps(data))
    d["questions"][0]["check"]["on"] = "input"
    variants.append(d)
    hashes = {QuestionSet.model_validate(v).content_hash for v in variants}
    assert len(hashes) == 4 and base.content_hash not in hashes


@pytest.mark.parametrize(("change", "message"), [
    ({"fatal_label": "Keep"}, "pass label"),
    ({"fatal_label": "Archive"}, "not a declared label"),
    ({"on_refutation": {"Retire": "Archive"}}, "not a declared label"),
    ({"on_refutation": {"Retire": "Retire"}}, "moves to itself"),
    ({"labels": AUDIT_POLICY["labels"][:1]}, "at least 2"),
    ({"labels": [AUDIT_POLICY["labels"][1], AUDIT_POLICY["labels"][0]]}, "best to worst"),
    ({"labels": [AUDIT_POLICY["labels"][0], {**AUDIT_POLICY["labels"][1], "name": "keep"}]}, "more than once"),
])
def test_policy_validation(change, message):
    with pytest.raises(QuestionSetError, match=message):
        QuestionSet.from_data({**verdict_question_set().model_dump(mode="json"),
                               "verdict_policy": {**AUDIT_POLICY, **change}})


def test_policy_defaults():
    policy = VerdictPolicy.model_validate(AUDIT_POLICY)
    assert policy.refutation_target("Retire") == "Improve"
    assert policy.refutation_target("Improve") == "Keep"
    assert policy.refutation_target("Keep") is None
    assert policy.match(" improve ") == "Improve" and policy.match("Improve slightly") is None


def test_fatal_question_needs_a_fatal_label():
    data = verdict_question_set().model_dump(mode="json")
    data["verdict_policy"].pop("fatal_label")
    with pytest.raises(QuestionSetError, match="short"):
        QuestionSet.from_data(data)


def test_old_result_lines_still_load_and_keep_their_form():
    line = ('{"schema_version":1,"item_id":"a","line":1,"output_hash":"h","question_set_hash":"q",'
            '"score_card":{"dimension_scores":{"d":1.0},"overall":1.0,"counts":{"d":{"yes":1,"no":0,"unparsed":0}},'
            '"scale":[0.0,1.0],"scaled_dimension_scores":{"d":1.0},"scaled_overall":1.0},'
            '"verdicts":[{"question_id":"q1","verdict":"yes","explanation":"e","raw_answer":null,"error":null}],'
            '"fields":{},"usage":{"lm_calls":1,"prompt_tokens":1,"completion_tokens":1},"seconds":0.1}')
    result = ItemResult.model_validate_json(line)
    assert json.loads(result.model_dump_json()) == json.loads(line)


def test_an_item_result_needs_a_score_card_or_a_named_verdict():
    with pytest.raises(ValueError, match="score_card, a named_verdict"):
        ItemResult(item_id="a", output_hash="h", question_set_hash="q", verdicts=[])


def test_schema_file_matches_the_model():
    on_disk = json.loads((ROOT / "docs" / "verdict_output.schema.json").read_text(encoding="utf-8"))
    assert on_disk == verdict_output_json_schema(), (
        "docs/verdict_output.schema.json is stale; regenerate it with: python -c \"from "
        "binaryeval_dspy.schemas import write_verdict_output_schema as w; w('docs/verdict_output.schema.json')\"")
    assert on_disk["properties"]["schema_version"]["const"] == 1
    assert "scores" not in on_disk["$defs"]["ItemVerdictOutput"]["required"]


def test_schema_rejects_unknown_fields_and_versions():
    doc = {"lm": "m", "question_set_hash": "h", "aggregation": "verdict", "pressure_test": "never",
           "labels": AUDIT_POLICY["labels"], "counts": {}, "items": []}
    assert VerdictOutput.model_validate(doc).schema_id == "binaryeval-dspy/verdict-output"
    with pytest.raises(ValueError):
        VerdictOutput.model_validate({**doc, "score": 0.5})
    with pytest.raises(ValueError):
        VerdictOutput.model_validate({**doc, "schema_version": 2})

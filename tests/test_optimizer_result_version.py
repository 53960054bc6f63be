"""The comparison's saved `OptimizerResult` (``<out>/<optimizer>/result.json``) refuses a file
from a newer or an older binaryeval-dspy with the shared schema_version message."""

import json

import pytest
from pydantic import ValidationError

from binaryeval_dspy.comparison.results import RESULT_SCHEMA_VERSION, OptimizerResult, load_results
from binaryeval_dspy.schemas.versioned import schema_version_fix, schema_version_message

NEWER = ("this optimizer result was written by a newer binaryeval-dspy (schema_version 99; this version "
         "reads 1); upgrade with pip install -U binaryeval-dspy")
OLDER = ("this optimizer result was written by an older binaryeval-dspy (schema_version 0; this version "
         "reads 1) and there is no migration")
VALID = {"optimizer": "bineval", "lm": "m", "prompt_lm": "p"}


def test_the_current_version_and_a_file_without_one_are_read():
    assert RESULT_SCHEMA_VERSION == 1
    assert OptimizerResult.model_validate({**VALID, "schema_version": 1}).schema_version == 1
    assert OptimizerResult.model_validate(VALID).schema_version == 1
    assert json.loads(OptimizerResult.model_validate(VALID).model_dump_json())["schema_version"] == 1


@pytest.mark.parametrize(("version", "expected"), [(99, NEWER), (0, OLDER)], ids=["newer", "older"])
def test_another_version_is_refused_with_the_shared_message(version, expected):
    with pytest.raises(ValidationError) as err:
        OptimizerResult.model_validate_json(json.dumps({**VALID, "schema_version": version}))
    first = err.value.errors()[0]
    assert first["loc"] == ("schema_version",)
    assert first["type"] == ("schema_version_newer" if version == 99 else "schema_version_older")
    assert expected in first["msg"], first["msg"]
    fix = schema_version_fix(first)
    assert fix and first["msg"].endswith("; " + fix.removesuffix("."))
    assert schema_version_message(first).removesuffix(".") + "; " + fix.removesuffix(".") == first["msg"]
    if version == 0:
        assert "run the comparison again with this version" in fix


def test_a_version_that_is_not_an_integer_gets_the_types_own_error():
    with pytest.raises(ValidationError) as err:
        OptimizerResult.model_validate({**VALID, "schema_version": "two"})
    assert err.value.errors()[0]["type"] == "int_parsing"


@pytest.mark.parametrize(("version", "expected"), [(99, NEWER), (0, OLDER)], ids=["newer", "older"])
def test_load_results_refuses_a_result_file_from_another_version(tmp_path, version, expected):
    (tmp_path / "config.json").write_text(json.dumps({"optimizers": ["bineval"]}), encoding="utf-8")
    (tmp_path / "bineval").mkdir()
    (tmp_path / "bineval" / "result.json").write_text(json.dumps({**VALID, "schema_version": version}),
                                                      encoding="utf-8")
    with pytest.raises(ValidationError) as err:
        load_results(tmp_path)
    assert expected in err.value.errors()[0]["msg"]
    (tmp_path / "bineval" / "result.json").write_text(json.dumps(VALID), encoding="utf-8")
    assert [r.optimizer for r in load_results(tmp_path)] == ["bineval"]

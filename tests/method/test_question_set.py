import json

import pytest

from binaryeval_dspy.errors import QuestionSetError
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet


def _data(**changes):
    data = {
        "dimensions": ["coherence", "fluency"],
        "questions": [
            {"id": "coherence-01", "dimension": "coherence", "text": "Is it ordered?"},
            {"id": "fluency-01", "dimension": "fluency", "text": "Is it grammatical?"},
        ],
    }
    data.update(changes)
    return data


def _write(tmp_path, data) -> object:
    path = tmp_path / "qs.json"
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def _load_error(tmp_path, data) -> str:
    """The message of the `QuestionSetError` that loading `data` from a file raises."""
    with pytest.raises(QuestionSetError) as err:
        QuestionSet.load(_write(tmp_path, data))
    return str(err.value)


def test_round_trip_keeps_everything_and_hash(tmp_path, small_question_set):
    path = small_question_set.save(tmp_path / "qs.json")
    loaded = QuestionSet.load(path)
    assert loaded == small_question_set
    assert loaded.content_hash == small_question_set.content_hash


def test_hash_changes_when_any_question_changes(small_question_set):
    edited = small_question_set.model_copy(deep=True)
    edited.questions[2].text = "Is it grammatical and well spelled?"
    assert edited.content_hash != small_question_set.content_hash
    example = small_question_set.model_copy(deep=True)
    example.questions[0].violation_example = "A made-up claim."
    assert example.content_hash != small_question_set.content_hash


def test_hash_ignores_generated_by(small_question_set):
    other = small_question_set.model_copy(update={"generated_by": "openai/gpt-4o"})
    assert other.content_hash == small_question_set.content_hash


def test_duplicate_id_names_question_and_line(tmp_path):
    data = _data()
    data["questions"][1]["id"] = "coherence-01"
    data["questions"][1]["dimension"] = "coherence"
    path = _write(tmp_path, data)
    with pytest.raises(QuestionSetError) as err:
        QuestionSet.load(path)
    message = str(err.value)
    assert "coherence-01" in message and "more than once" in message
    assert str(path) in message
    assert err.value.line is not None and err.value.line > 1


def test_unknown_dimension_names_question(tmp_path):
    data = _data()
    data["questions"][1]["dimension"] = "fluenci"
    message = _load_error(tmp_path, data)
    assert "fluency-01" in message and "fluenci" in message and "not declared" in message


def test_empty_text_names_question_and_field(tmp_path):
    data = _data()
    data["questions"][0]["text"] = "   "
    message = _load_error(tmp_path, data)
    assert "coherence-01" in message and "text" in message


def test_unknown_field_is_rejected(tmp_path):
    data = _data()
    data["questions"][0]["txt"] = "typo"
    assert "txt" in _load_error(tmp_path, data)


def test_missing_file_and_bad_json(tmp_path):
    with pytest.raises(QuestionSetError, match="not found"):
        QuestionSet.load(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"dimensions": ["a"],\n "questions": [}', encoding="utf-8")
    with pytest.raises(QuestionSetError) as err:
        QuestionSet.load(bad)
    assert err.value.line == 2 and "not valid JSON" in str(err.value)


def test_requirement_id_must_exist():
    with pytest.raises(ValueError, match="requirement_id 'r9'"):
        QuestionSet(dimensions=["a"], questions=[BinaryQuestion(id="a-1", dimension="a", text="Q?",
                                                                requirement_id="r9")])


def test_by_dimension_groups_in_declared_order(small_question_set):
    groups = small_question_set.by_dimension()
    assert list(groups) == ["consistency", "fluency"]
    assert [q.id for q in groups["consistency"]] == ["consistency-01", "consistency-02"]

"""The error hierarchy: one way to say expected / received / fix, kept by every class."""

import pickle

import pytest

from binaryeval_dspy.errors import (
    BinEvalError,
    ConfigError,
    InputError,
    LMConfigError,
    QuestionSetError,
    RunStateError,
    UnknownNameError,
)
from binaryeval_dspy.lm.factory import make_lm
from binaryeval_dspy.programs.code_checks import answer_with_check
from binaryeval_dspy.programs.label_picker import LabelPicker
from binaryeval_dspy.programs.lesson_memory import LessonMemory
from binaryeval_dspy.programs.note_taker import NoteTaker
from binaryeval_dspy.programs.pressure_test import PressureTest
from binaryeval_dspy.programs.prompt_updater import PromptUpdater
from binaryeval_dspy.schemas.question_set import BinaryQuestion
from tests.verdict_scripts import verdict_question_set


def test_every_class_renders_expected_received_and_fix_the_same_way():
    for cls in (BinEvalError, ConfigError, LMConfigError, RunStateError, UnknownNameError):
        err = cls("bad n", expected="an integer >= 1", received="0", fix="pass n=2.")
        assert str(err) == "bad n: expected an integer >= 1, received 0. Fix: pass n=2.", cls
        assert (err.message, err.expected, err.received, err.fix) == ("bad n", "an integer >= 1", "0", "pass n=2.")
        assert isinstance(err, BinEvalError)
    assert str(BinEvalError("only a message")) == "only a message"
    assert str(BinEvalError("m", fix="f.")) == "m. Fix: f."
    assert str(BinEvalError("m", received="'x'")) == "m: received 'x'."


def test_input_error_keeps_its_located_form_and_takes_expected_and_received():
    assert str(InputError("bad", path="a.json", line=3, field="x", fix="do it.")) == \
        "a.json:3: field 'x': bad. Fix: do it."
    assert str(InputError("bad", line=2)) == "line 2: bad"
    err = QuestionSetError("bad scale", path="qs.json", field="scale", expected="two numbers", received="[1]",
                           fix="write [1, 5].")
    assert str(err) == "qs.json: field 'scale': bad scale: expected two numbers, received [1]. Fix: write [1, 5]."
    assert (err.path, err.line, err.field) == ("qs.json", None, "scale")


@pytest.mark.parametrize("err", [
    InputError("bad", path="a.json", line=3, field="x", expected="e", received="r", fix="f."),
    QuestionSetError("dup", path="q.json", fix="f."),
    ConfigError("bad", expected="e", received="r", fix="f."),
    LMConfigError("no key", fix="export it."),
    UnknownNameError("no label 'A'", received="'A'"),
])
def test_errors_survive_pickling_with_their_parts(err):
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is type(err) and str(copy) == str(err)
    assert (copy.message, copy.expected, copy.received, copy.fix) == (err.message, err.expected, err.received,
                                                                      err.fix)


def test_bases_kept_for_old_callers():
    assert issubclass(ConfigError, ValueError) and issubclass(InputError, ValueError)
    assert issubclass(UnknownNameError, KeyError)
    # a KeyError subclass reads like the other errors, not as a quoted repr
    assert str(UnknownNameError("no label 'A'")) == "no label 'A'"


@pytest.mark.parametrize(("build", "argument"), [
    (lambda: PromptUpdater(max_attempts=0), "max_attempts"),
    (lambda: PromptUpdater(max_prompt_chars=0), "max_prompt_chars"),
    (lambda: PressureTest(max_questions=0), "max_questions"),
    (lambda: PressureTest(draft_max_tokens=0), "draft_max_tokens"),
    (lambda: NoteTaker(prompt_role="judge", max_lessons_per_item=0), "max_lessons_per_item"),
    (lambda: LessonMemory(max_lessons=0), "max_lessons"),
    (lambda: LabelPicker(verdict_question_set().verdict_policy, max_attempts=0), "max_attempts"),
])
def test_bad_constructor_arguments_raise_config_errors(build, argument):
    with pytest.raises(ConfigError) as err:
        build()
    assert argument in err.value.message
    assert err.value.expected and err.value.received == "0" and err.value.fix
    assert "expected " in str(err.value) and "received 0" in str(err.value) and "Fix: " in str(err.value)
    with pytest.raises(ValueError):  # old callers catching ValueError still do
        build()


def test_a_code_check_on_a_question_without_one_is_a_config_error():
    question = BinaryQuestion(id="q1", dimension="d", text="Is it ok?")
    with pytest.raises(ConfigError, match="has no check") as err:
        answer_with_check(question, input="x", output="y")
    assert err.value.fix


def test_lookups_of_undeclared_names_say_what_exists():
    qs = verdict_question_set()
    with pytest.raises(UnknownNameError) as err:
        qs.verdict_policy.label("Nope")
    assert "'Nope'" in str(err.value) and all(name in err.value.expected for name in qs.verdict_policy.names)
    with pytest.raises(KeyError):
        qs.question("no-such-id")


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"spec": "  "}, "a model name, path or URL"),
    ({"spec": "openai/gpt-4o-mini", "max_tokens": 0}, "a positive integer"),
    ({"spec": "openai/gpt-4o-mini", "n_ctx": 10}, "an integer >= 256"),
    ({"spec": "openai/gpt-4o-mini", "timeout": -1}, "a positive number of seconds"),
    ({"spec": "openai/gpt-4o-mini", "adapter": "xml"}, "one of auto, json, chat"),
])
def test_lm_config_errors_carry_expected_received_and_fix(kwargs, expected):
    spec = kwargs.pop("spec")
    with pytest.raises(LMConfigError) as err:
        make_lm(spec, **kwargs)
    assert err.value.expected == expected and err.value.received is not None
    assert err.value.fix and "Fix:" not in err.value.message
    assert str(err.value).endswith(f"Fix: {err.value.fix}")


def test_lm_config_errors_keep_the_fix_out_of_the_message(tmp_path):
    for call in (lambda: make_lm("openai/gpt-4o-mini", model="x"),
                 lambda: make_lm(str(tmp_path / "missing.gguf")),
                 lambda: make_lm("http://localhost:1/v1")):
        with pytest.raises(LMConfigError) as err:
            call()
        assert err.value.fix and "Fix:" not in err.value.message
        assert str(err.value).count("Fix:") == 1

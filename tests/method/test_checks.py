"""Built-in and user code checks: answers, evidence, load-time validation, failures never counted as no."""

import json
import textwrap

import dspy
import pytest

from binaryeval_dspy.checks import (
    CheckResult,
    available_checks,
    get_check,
    load_checks_module,
    register_check,
    unregister_check,
)
from binaryeval_dspy.errors import BinEvalError, InputError, QuestionSetError
from binaryeval_dspy.programs.bineval import BinEval
from binaryeval_dspy.schemas.question_set import QuestionSet
from tests.conftest import judge_script
from tests.fakes import scripted_lm

BUILTINS = {"regex_present", "regex_absent", "word_count", "sentence_count", "paragraph_count",
            "keyword_frequency", "max_length", "valid_json", "valid_yaml", "path_exists", "url_well_formed",
            "language"}


def check(name, text, **params):
    return get_check(name).run(text, params)


def test_every_builtin_is_registered():
    assert BUILTINS <= set(available_checks())
    assert all(available_checks()[n].builtin for n in BUILTINS)


def test_regex_present_and_absent():
    r = check("regex_present", "Run `bineval evaluate` now.", pattern=r"`bineval \w+`")
    assert r.passed and "1 match" in r.evidence and "line 1" in r.evidence
    assert not check("regex_present", "one `a`", pattern="`", min_count=3).passed
    assert check("regex_present", "TODO", pattern="todo", flags=["IGNORECASE"]).passed
    r = check("regex_absent", "fine\nTODO: fix\n", pattern=r"\bTODO\b")
    assert r.passed is False and "line 2" in r.evidence
    assert check("regex_absent", "all done", pattern=r"\bTODO\b").passed


def test_word_sentence_paragraph_counts():
    text = "First sentence here. Second one, state-of-the-art!\n\nA new paragraph? Yes"
    assert check("word_count", text, min=10, max=10).passed  # First sentence here Second one state-of-the-art A new paragraph Yes
    r = check("word_count", text, max=5)
    assert not r.passed and r.data == {"words": 10} and "bounds [-, 5]" in r.evidence
    assert check("sentence_count", text, min=4, max=4).passed
    assert not check("sentence_count", text, max=3).passed
    assert check("paragraph_count", text, min=2, max=2).passed
    assert not check("paragraph_count", "one block only", min=2).passed


def test_keyword_frequency_and_max_length():
    text = "The judge asks. Judges judge. JUDGE!"
    assert check("keyword_frequency", text, keyword="judge", min=3, max=3).passed  # judge, judge, JUDGE
    assert check("keyword_frequency", text, keyword="judge", whole_word=False, min=4).passed
    assert not check("keyword_frequency", text, keyword="judge", case_sensitive=True, min=3).passed
    assert check("max_length", "abcde", max_chars=5).passed
    r = check("max_length", "abcdef", max_chars=5)
    assert not r.passed and "6 characters" in r.evidence


def test_valid_json_and_yaml():
    assert check("valid_json", '{"a": [1, 2]}', require="object").passed
    assert not check("valid_json", "[1, 2]", require="object").passed
    r = check("valid_json", '{"a": 1,\n "b": …}')
    assert not r.passed and "line 2" in r.evidence
    assert check("valid_json", '```json\n{"a": 1}\n```', strip_code_fence=True).passed
    assert not check("valid_json", '```json\n{"a": 1}\n```').passed
    assert check("valid_yaml", "a: 1\nb: [x, y]\n", require="mapping").passed
    assert check("valid_yaml", "just some words").passed  # a YAML scalar
    assert not check("valid_yaml", "just some words", require="mapping").passed
    r = check("valid_yaml", "a: [1, 2\n")
    assert not r.passed and "not YAML" in r.evidence


def test_path_exists(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("x")
    text = "See `docs/guide.md`, `docs/` and `docs/missing.md`; also `runs/out/` and `--flag`."
    r = check("path_exists", text, base_dir=str(tmp_path), ignore=["runs/*"])
    assert not r.passed and r.data["missing"] == ["docs/missing.md"]
    assert r.data["found"] == ["docs/guide.md", "docs/", "docs/missing.md"]
    assert check("path_exists", "See `docs/guide.md`.", base_dir=str(tmp_path), kind="file").passed
    assert not check("path_exists", "See `docs/`.", base_dir=str(tmp_path), kind="file").passed
    r = check("path_exists", "no references", base_dir=str(tmp_path))
    assert r.passed and r.evidence == "no referenced paths found"
    assert not check("path_exists", "no references", base_dir=str(tmp_path), min_found=1).passed
    assert check("path_exists", " docs/guide.md\n", whole_text=True, base_dir=str(tmp_path)).passed
    r = check("path_exists", "uses examples/summeval/items.jsonl here", pattern=r"examples/[\w./-]+")
    assert r.passed  # relative to the working directory (the repository root under pytest)


def test_url_well_formed():
    r = check("url_well_formed", "Docs: https://docs.litellm.ai/docs/providers. Local: http://localhost:8000/v1")
    assert r.passed and r.data["urls"] == ["https://docs.litellm.ai/docs/providers", "http://localhost:8000/v1"]
    r = check("url_well_formed", "bad: http://bad_host/x and http://ok.example:99999/ and ftp://files.example/a")
    assert not r.passed and len(r.data["malformed"]) == 3
    assert check("url_well_formed", "ftp://files.example/a", schemes=["ftp"]).passed
    assert not check("url_well_formed", "no links", min_count=1).passed
    assert check("url_well_formed", "no links").evidence == "no URLs found"
    assert check("url_well_formed", " https://example.org/a?b=1 ", whole_text=True).passed
    assert not check("url_well_formed", "see https://example.org", whole_text=True).passed


def test_language_is_detected_deterministically():
    english = "This section explains how to install the library and run the first evaluation on the example."
    french = "Cette section explique comment installer la bibliothèque et lancer la première évaluation."
    results = [check("language", english, expected="en") for _ in range(3)]
    assert all(r.passed for r in results) and len({r.evidence for r in results}) == 1
    r = check("language", french, expected=["en"])
    assert r.passed is False and r.data["detected"] == "fr"
    assert check("language", french, expected=["en", "fr"]).passed
    short = check("language", "ok", expected="en")
    assert short.passed is None and "letters" in short.evidence


BAD_PARAMS = [
    ("regex_present", {"pattern": "(unclosed"}, "regular expression"),
    ("regex_absent", {}, "pattern"),
    ("word_count", {"mni": 3}, "mni"),
    ("sentence_count", {}, "give 'min', 'max'"),
    ("paragraph_count", {"min": 5, "max": 2}, "larger than max"),
    ("keyword_frequency", {"min": 1}, "keyword"),
    ("max_length", {"max_chars": 0}, "max_chars"),
    ("valid_json", {"require": "dict"}, "require"),
    ("valid_yaml", {"require": "object"}, "require"),
    ("path_exists", {"kind": "socket"}, "kind"),
    ("url_well_formed", {"schemes": []}, "schemes"),
    ("language", {"expected": "english"}, "language codes"),
]


@pytest.mark.parametrize(("name", "params", "expected"), BAD_PARAMS)
def test_bad_params_fail_at_load_time_naming_the_question(tmp_path, name, params, expected):
    data = {"dimensions": ["form"], "questions": [
        {"id": "fine", "dimension": "form", "text": "Is it fine?"},
        {"id": "checked", "dimension": "form", "text": "Does it pass?", "check": {"name": name, "params": params}}]}
    path = tmp_path / "qs.json"
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    with pytest.raises(QuestionSetError) as err:
        QuestionSet.load(path)
    message = str(err.value)
    assert "checked" in message and name in message and expected in message
    id_line = next(n for n, line in enumerate(path.read_text().splitlines(), 1) if '"checked"' in line)
    assert str(path) in message and err.value.line == id_line


def test_every_builtin_has_a_bad_params_case():
    assert {name for name, _, _ in BAD_PARAMS} == BUILTINS


def test_unknown_check_name_fails_at_load_time(tmp_path):
    data = {"dimensions": ["form"], "questions": [
        {"id": "q1", "dimension": "form", "text": "Does it pass?", "check": {"name": "no_such_check"}}]}
    with pytest.raises(QuestionSetError) as err:
        QuestionSet.from_data(data, path="qs.json")
    assert "q1" in str(err.value) and "unknown check 'no_such_check'" in str(err.value)
    assert "`checks_module`" in str(err.value)


@pytest.fixture
def user_check():
    @register_check("ends_with_period")
    def ends_with_period(text: str, *, strict: bool = False):
        """The text ends with a full stop."""
        return text.rstrip().endswith("."), f"last character {text.rstrip()[-1:]!r}"

    yield ends_with_period
    unregister_check("ends_with_period")


def test_user_check_answers_in_bineval_without_the_lm(user_check, small_question_set):
    qs = small_question_set.model_copy(deep=True)
    data = qs.model_dump(mode="json")
    data["questions"][2]["check"] = {"name": "ends_with_period", "params": {"strict": True}}
    qs = QuestionSet.model_validate(data)
    script = judge_script({"Is every claim supported?": "yes", "Are the numbers right?": "no"})
    lm, engine = scripted_lm(script)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        pred = BinEval(qs)(input="An article.", output="A summary without a stop")
    assert len(engine.calls) == 2 and not any("Is it grammatical?" in c for c in engine.calls)
    fluency = pred.verdicts[2]
    assert fluency.source == "code" and fluency.verdict == "no" and "'p'" in fluency.explanation
    assert pred.score_card.counts["fluency"].no == 1  # scored like an LM verdict
    with pytest.raises(QuestionSetError, match="strictness"):
        data["questions"][2]["check"]["params"] = {"strictness": True}
        QuestionSet.from_data(data)


def test_a_crashing_or_undecided_check_is_unparsed_not_no(small_question_set):
    @register_check("always_crashes")
    def always_crashes(text: str):
        raise RuntimeError("boom")

    @register_check("never_decides")
    def never_decides(text: str):
        return CheckResult(passed=None, evidence="cannot tell")

    try:
        data = small_question_set.model_dump(mode="json")
        data["questions"][0]["check"] = {"name": "always_crashes"}
        data["questions"][1]["check"] = {"name": "never_decides"}
        qs = QuestionSet.model_validate(data)
        lm, _ = scripted_lm(judge_script({"Is it grammatical?": "yes"}))
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            pred = BinEval(qs)(input="x", output="y")
        crashed, undecided = pred.verdicts[0], pred.verdicts[1]
        assert crashed.verdict == "unparsed" and "RuntimeError: boom" in crashed.error
        assert undecided.verdict == "unparsed" and "cannot tell" in undecided.error
        assert pred.score_card.dimension_scores["consistency"] is None  # nothing parsed, not 0.0
        assert pred.score_card.counts["consistency"].unparsed == 2
    finally:
        unregister_check("always_crashes")
        unregister_check("never_decides")


def test_registry_protects_builtins_and_other_functions(user_check):
    with pytest.raises(BinEvalError, match="built-in"):
        register_check("word_count")(lambda text: True)
    with pytest.raises(BinEvalError, match="already registered"):
        register_check("ends_with_period")(lambda text: True)
    with pytest.raises(BinEvalError, match="not allowed"):
        register_check("pkg.module:function")
    with pytest.raises(BinEvalError, match="built in"):
        unregister_check("word_count")


def test_a_bad_return_value_is_reported():
    @register_check("returns_text")
    def returns_text(text: str):
        return "yes"

    try:
        with pytest.raises(TypeError, match="CheckResult"):
            get_check("returns_text").run("x", {})
    finally:
        unregister_check("returns_text")


def test_load_checks_module_from_a_file(tmp_path):
    module = tmp_path / "my_checks.py"
    module.write_text(textwrap.dedent('''
        from binaryeval_dspy.checks import CheckResult, register_check

        @register_check("mentions_license")
        def mentions_license(text: str, *, name: str = "Apache-2.0") -> CheckResult:
            return CheckResult(passed=name in text, evidence=f"looked for {name!r}")
    '''), encoding="utf-8")
    try:
        load_checks_module(str(module))
        load_checks_module(str(module))  # a second import in one process is harmless
        assert get_check("mentions_license").run("Apache-2.0 licensed", {}).passed
        assert get_check("mentions_license").accepted_params() == ["name"]
    finally:
        unregister_check("mentions_license")


def test_load_checks_module_errors_name_the_file(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_checks_module(str(tmp_path / "absent.py"))
    broken = tmp_path / "broken.py"
    broken.write_text("def oops(:\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_checks_module(str(broken))
    assert "broken.py" in str(err.value) and "SyntaxError" in str(err.value)
    with pytest.raises(InputError, match="could not be imported"):
        load_checks_module("no_such_package_for_checks.module")

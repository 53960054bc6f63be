"""QuestionGenerator provenance (issue 12, point 3): every fallback recorded, no guesses.

All LMs here are scripted (tests/fakes.py): they check the plumbing, never a model's
judgment. The first six tests fail on the code before this change.
"""

import json

import dspy
import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli import common
from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.errors import BinEvalError, InputError
from binaryeval_dspy.programs.question_generator import QuestionGenerator, question_text_problem
from binaryeval_dspy.schemas.question_set import QuestionSet
from tests.fakes import field_value, scripted_lm

TASK = "Summarize the article in three sentences, accurately and fluently."


def first_in_sorted_order(requirement, listed):
    """A scripted dimension choice that does not depend on the order the names are listed in."""
    return min(listed)


def first_listed(requirement, listed):
    """SmolLM2-135M's choice, seen on the embedded model: the first name listed, whatever the requirement."""
    return listed[0]


def script_for(drafts, *, requirements=("Be accurate.", "Be fluent."), dimensions=None,
               assign=first_in_sorted_order):
    """Answer the four generation signatures: requirements, dimension inference, per
    requirement `drafts[requirement]` (a list of draft dicts, or a raw string), and the
    dimension a template question is filed under, ``assign(requirement, listed names)``
    (a dimension name, or a raw string that is no JSON answer)."""

    def script(system, user):
        if "a requirement of a task is about" in system:  # AssignDimension
            answer = assign(field_value(user, "requirement"), json.loads(field_value(user, "dimensions")))
            return {"dimension": answer} if answer in json.loads(field_value(user, "dimensions")) else answer
        if "[[ ## requirement ## ]]" in user:
            found = drafts.get(field_value(user, "requirement"), [])
            return found if isinstance(found, str) else {"questions": found}
        if "[[ ## requirements ## ]]" in user:  # dimension inference
            return dimensions if isinstance(dimensions, str) else {"dimensions": list(dimensions or [])}
        return {"requirements": list(requirements)}

    return script


def draft(question, dimension, violation="A violating output."):
    return {"question": question, "dimension": dimension, "violation_example": violation}


def generate(gen, script):
    lm, _ = scripted_lm(script)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        return gen(task_prompt=TASK)


@pytest.fixture
def fake_lm(monkeypatch, scripted_handle):
    """Make every --lm value resolve to a scripted LM."""

    def install(script):
        def make_lm(spec, **kwargs):
            handle, _ = scripted_handle(script)
            handle.name = "scripted-cli"
            return handle

        monkeypatch.setattr(common, "make_lm", make_lm)

    return install


# ----------------------------------------------------------------- the six required cases
def test_template_question_is_labelled_fallback_template():
    script = script_for({"Be accurate.": "not json at all",
                         "Be fluent.": [draft("Is every sentence grammatical?", "fluency")]})
    pred = generate(QuestionGenerator(dimensions=["consistency", "fluency"]), script)
    template, generated = pred.question_set.questions
    assert template.origin == "fallback_template" and "Be accurate" in template.text
    assert template.dimension == "consistency" and template.dimension_source == "assigned"
    assert generated.origin == "generated" and generated.dimension_source == "given"
    (record,) = pred.report.fallback_templates
    assert record.question_id == template.id and record.requirement_id == "r1"
    assert "could not be parsed" in record.reason
    assert pred.report.questions_by_origin == {"generated": 1, "merged": 0, "fallback_template": 1}
    assert "1 fallback template (consistency)" in pred.report.summary({template.id: "consistency"})


def test_unknown_user_dimension_is_refused_with_the_choices(tmp_path, fake_lm):
    with pytest.raises(InputError) as info:
        QuestionGenerator(dimensions=["coherence", "??", "Relevance"])
    message = str(info.value)
    assert "'??'" in message and "['coherence', 'relevance']" in message
    with pytest.raises(InputError, match="list of names"):  # a string would be split into letters
        QuestionGenerator(dimensions="coherence")
    # the CLI refuses it before any LM call, naming the option, the value and the usable names
    fake_lm(lambda s, u: pytest.fail("no LM call expected"))
    task = tmp_path / "task.txt"
    task.write_text(TASK, encoding="utf-8")
    result = CliRunner().invoke(cli, ["questions", str(task), "--out", str(tmp_path / "qs.json"),
                                      "--dimensions", "coherence,--,fluency"])
    assert result.exit_code == 2, result.output
    assert "--dimensions" in result.output and "'--'" in result.output
    assert "['coherence', 'fluency']" in result.output


def test_lm_invented_dimension_is_dropped_not_nearest_matched():
    script = script_for({
        "Be accurate.": [draft("Is every claim supported by the article?", "Factual-Consistency"),
                         draft("Are the numbers copied correctly?", "consistent")],
        "Be fluent.": [draft("Is every sentence grammatical?", "fluency")],
    })
    pred = generate(QuestionGenerator(dimensions=["factual consistency", "fluency"]), script)
    qs = pred.question_set
    assert "Are the numbers copied correctly?" not in [q.text for q in qs.questions]
    # normalised exact match is accepted ...
    assert [(q.dimension, q.dimension_source) for q in qs.questions] == [
        ("factual_consistency", "given"), ("fluency", "given")]
    # ... a near name is not guessed: dropped, counted, with the choices
    (dropped,) = pred.report.dropped_questions
    assert dropped.reason == "unknown dimension" and dropped.lm_dimension == "consistent"
    assert dropped.text == "Are the numbers copied correctly?" and dropped.requirement_id == "r1"
    assert "factual_consistency" in dropped.detail and "fluency" in dropped.detail
    assert "1 dropped (unknown dimension)" in pred.report.summary()


def test_inference_failure_is_recorded_not_silently_defaulted():
    script = script_for({"Be accurate.": [draft("Is every claim supported by the article?", "accuracy")],
                         "Be fluent.": [draft("Is every sentence grammatical?", "overall")]},
                        dimensions="no dimensions today")
    pred = generate(QuestionGenerator(), script)
    qs = pred.question_set
    assert qs.dimensions == ["overall"]
    report = qs.generation_report
    assert report is pred.report
    assert report.dimensions_source == "fallback"
    assert "dimension inference failed" in report.dimensions_note
    assert [q.dimension_source for q in qs.questions] == ["mapped_from:accuracy", "fallback"]
    assert report.relabelled == [qs.questions[0].id]
    assert any("fallback dimension 'overall'" in w for w in report.warnings())
    # an inference answer with no usable name is the same fallback, with its own reason
    empty = generate(QuestionGenerator(), script_for({}, dimensions=["!!", ""]))
    assert empty.report.dimensions_source == "fallback" and "no usable name" in empty.report.dimensions_note


def test_placeholder_question_is_rejected_and_counted():
    # the small-model case from the issue: one question whose text is "test_1"
    script = script_for({"Be accurate.": [draft("test_1", "coherence"), draft("", "coherence")]},
                        requirements=("Be accurate.",))
    pred = generate(QuestionGenerator(dimensions=["relevance", "coherence"]), script)
    qs = pred.question_set
    assert "test_1" not in [q.text for q in qs.questions]
    report = qs.generation_report
    assert [(d.text, d.reason) for d in report.dropped_questions] == [("test_1", "placeholder text"), ("", "empty")]
    (template,) = qs.questions  # the requirement is still asked, as a recorded template
    assert template.origin == "fallback_template"
    assert "all 2 drafted question(s) were dropped" in report.fallback_templates[0].reason
    assert (template.dimension, template.dimension_source) == ("coherence", "assigned")
    assert report.empty_dimensions == ["relevance"]
    assert report.summary() == "0 generated, 1 fallback template, 2 dropped (placeholder text, empty)"


def test_emptied_dimension_is_reported_in_json_and_cli(tmp_path, fake_lm):
    fake_lm(script_for({
        "Be accurate.": [draft("Is every claim supported by the article?", "coherence"),
                         draft("Question 2", "relevance")],
        "Be fluent.": [draft("Do the sentences follow a logical order?", "Coherence")],
    }))
    task = tmp_path / "task.txt"
    task.write_text(TASK, encoding="utf-8")
    out = tmp_path / "qs.json"
    result = CliRunner().invoke(cli, ["questions", str(task), "--out", str(out), "--dimensions", "coherence,relevance"])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["dimensions"] == ["coherence"]
    report = data["generation_report"]
    assert report["empty_dimensions"] == ["relevance"] and report["dimensions_source"] == "given"
    assert [(d["text"], d["reason"]) for d in report["dropped_questions"]] == [("Question 2", "placeholder text")]
    assert {q["dimension_source"] for q in data["questions"]} == {"given"}
    assert "Generation: 2 generated, 1 dropped (placeholder text)" in result.output
    assert "dimension 'relevance' got no usable question" in result.output
    assert "'Question 2'" in result.output and "(placeholder text)" in result.output


# ----------------------------------------------------------------- further behaviour
def test_single_dimension_relabels_and_records_the_lm_name():
    script = script_for({"Be accurate.": [draft("Does the reply stay under 50 words?", "Length limits")]},
                        requirements=("Be accurate.",))
    pred = generate(QuestionGenerator(dimensions=["instruction_following"]), script)
    (q,) = pred.question_set.questions
    assert q.dimension == "instruction_following" and q.dimension_source == "mapped_from:Length limits"
    assert "1 put under the only dimension" in pred.report.summary()


def test_placeholder_requirements_are_dropped_and_counted():
    script = script_for({"Be accurate.": [draft("Is every claim supported by the article?", "consistency")]},
                        requirements=("Be accurate.", "requirement_2", "TODO"))
    pred = generate(QuestionGenerator(dimensions=["consistency"]), script)
    assert [r.text for r in pred.question_set.requirements] == ["Be accurate."]
    assert [d.text for d in pred.report.dropped_requirements] == ["requirement_2", "TODO"]
    with pytest.raises(BinEvalError, match="only unusable ones"):
        generate(QuestionGenerator(dimensions=["consistency"]), script_for({}, requirements=("test_1",)))


@pytest.mark.parametrize(("text", "reason"), [
    ("", "empty"), ("   ", "empty"), ("test_1", "placeholder text"), ("Question 3?", "placeholder text"),
    ("q1", "placeholder text"), ("N/A", "placeholder text"), ("<question>", "placeholder text"),
    ("{text}", "placeholder text"), ("...", "placeholder text"), ("Lorem ipsum dolor sit?", "placeholder text"),
    ("Fluent?", "too short"), ("Is it fluent.", "not a question"),
    ("Is it fluent?", None), ('Does it say "thanks?"', None), ("Does it use [address] placeholders?", None),
])
def test_question_text_rule(text, reason):
    assert question_text_problem(text) == reason


def test_generated_set_round_trips_and_report_is_not_hashed(tmp_path):
    script = script_for({"Be accurate.": "unparseable",
                         "Be fluent.": [draft("Is every sentence grammatical?", "fluency")]})
    qs = generate(QuestionGenerator(dimensions=["consistency", "fluency"]), script).question_set
    loaded = QuestionSet.load(qs.save(tmp_path / "qs.json"))
    assert loaded == qs
    assert loaded.model_copy(update={"generation_report": None}).content_hash == qs.content_hash


def test_old_question_set_json_still_loads_with_the_same_hash(tmp_path):
    old = {"schema_version": 1, "task_prompt": "T", "dimensions": ["fluency"], "requirements": [],
           "questions": [{"id": "fluency-01", "dimension": "fluency", "text": "Is it grammatical?",
                          "violation_example": "", "requirement_id": None, "origin": "generated"}],
           "generated_by": "x"}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    qs = QuestionSet.load(path)
    assert qs.generation_report is None and qs.questions[0].dimension_source is None
    saved = json.loads(qs.save(tmp_path / "again.json").read_text())
    assert "generation_report" not in saved and "dimension_source" not in saved["questions"][0]
    assert qs.content_hash == QuestionSet.model_validate(old).content_hash
    bad = dict(old, questions=[dict(old["questions"][0], dimension_source="guessed")])
    with pytest.raises(BinEvalError, match="dimension_source"):
        QuestionSet.from_data(bad)


# ----------------------------------------------------------------- issue 32: a template under its own dimension
def test_a_template_question_is_filed_under_the_dimension_it_asks_about():
    def about(requirement, listed):
        return "consistency" if requirement == "Be accurate." else "fluency"

    script = script_for({"Be accurate.": "not json at all",
                         "Be fluent.": [draft("Is every sentence grammatical?", "fluency")]}, assign=about)
    pred = generate(QuestionGenerator(dimensions=["coherence", "consistency", "fluency"]), script)
    template = next(q for q in pred.question_set.questions if q.origin == "fallback_template")
    # not under coherence, the first declared dimension: under the one it is about
    assert (template.id, template.dimension, template.dimension_source) == ("consistency-01", "consistency",
                                                                            "assigned")
    assert pred.report.left_out_requirements == []


def test_a_template_whose_dimension_follows_the_list_order_is_left_out_with_a_warning(tmp_path, fake_lm):
    script = script_for({"Be accurate.": "not json at all",
                         "Be fluent.": [draft("Is every sentence grammatical?", "fluency")]}, assign=first_listed)
    pred = generate(QuestionGenerator(dimensions=["coherence", "consistency", "fluency"]), script)
    qs = pred.question_set
    assert [q.text for q in qs.questions] == ["Is every sentence grammatical?"]
    (left,) = pred.report.left_out_requirements
    assert left.requirement_id == "r1" and "could not be parsed" in left.reason
    assert "'coherence' with the dimensions listed in one order and under 'fluency' in the other" in left.why_left_out
    warning = next(w for w in pred.report.warnings() if w.startswith("requirement r1"))
    assert "has no question" in warning and "Write a question for it by hand" in warning
    assert "1 requirement left out (no question, dimension unknown)" in pred.report.summary()
    # the CLI prints it, and the saved set keeps the record
    fake_lm(script)
    task = tmp_path / "task.txt"
    task.write_text(TASK, encoding="utf-8")
    out = tmp_path / "qs.json"
    result = CliRunner().invoke(cli, ["questions", str(task), "--out", str(out),
                                      "--dimensions", "coherence,consistency,fluency"])
    assert result.exit_code == 0, result.output
    assert "warning: requirement r1 has no question" in " ".join(result.output.split())
    saved = json.loads(out.read_text())
    assert saved["generation_report"]["left_out_requirements"][0]["requirement_id"] == "r1"


def test_a_one_dimension_set_files_templates_without_asking():
    asked = []

    def record(requirement, listed):
        asked.append(requirement)
        return listed[0]

    pred = generate(QuestionGenerator(dimensions=["fluency"]), script_for({"Be accurate.": "x", "Be fluent.": "x"},
                                                                         assign=record))
    assert [(q.dimension, q.dimension_source) for q in pred.question_set.questions] == [
        ("fluency", "only_dimension")] * 2
    assert asked == []


def test_no_question_at_all_is_an_error_naming_each_requirement(tmp_path, fake_lm):
    script = script_for({"Be accurate.": "not json", "Be fluent.": "not json"}, assign=first_listed)
    with pytest.raises(BinEvalError) as info:
        generate(QuestionGenerator(dimensions=["coherence", "fluency"]), script)
    message = str(info.value)
    assert "no usable question for any of the 2 requirements" in message
    assert "r1, r2: the LM's decomposition could not be parsed, and the LM filed it under" in message
    fake_lm(script)
    task = tmp_path / "task.txt"
    task.write_text(TASK, encoding="utf-8")
    result = CliRunner().invoke(cli, ["questions", str(task), "--out", str(tmp_path / "qs.json"),
                                      "--dimensions", "coherence,fluency"])
    assert result.exit_code == 2 and "no usable question" in result.output, result.output
    assert not (tmp_path / "qs.json").exists()

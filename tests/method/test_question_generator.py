import dspy
import pytest

from binaryeval_dspy.errors import BinEvalError
from binaryeval_dspy.programs.question_generator import QuestionGenerator, normalize_dimension
from tests.fakes import field_value, scripted_lm

TASK = "Summarize the article in three sentences, accurately and fluently."


def generation_script(decompositions, dimensions=("coherence", "Fluency")):
    """Answer the three generation signatures; `decompositions` maps requirement -> drafts."""

    def script(system, user):
        if "[[ ## requirement ## ]]" in user:
            return {"questions": decompositions.get(field_value(user, "requirement"), [])}
        if "[[ ## requirements ## ]]" in user:  # dimension inference
            return {"dimensions": list(dimensions)}
        return {"requirements": ["Be accurate.", "Be fluent.", "be accurate"]}

    return script


DRAFTS = {
    "Be accurate.": [
        {"question": "Is every claim supported by the article?", "dimension": "consistency",
         "violation_example": "Invents a quote."},
        {"question": "Are numbers copied correctly?", "dimension": "Consistency", "violation_example": "20 -> 200"},
    ],
    "Be fluent.": [
        {"question": "Is every claim supported by the article?", "dimension": "consistency",
         "violation_example": "duplicate"},
        {"question": "Is it grammatical?", "dimension": "Fluency", "violation_example": "Broken sentence."},
    ],
}


def generate(gen, script):
    lm, engine = scripted_lm(script)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        return gen(task_prompt=TASK), engine


def test_two_steps_with_given_dimensions():
    pred, engine = generate(QuestionGenerator(dimensions=["Consistency", "fluency"]), generation_script(DRAFTS))
    qs = pred.question_set
    assert [r.text for r in qs.requirements] == ["Be accurate.", "Be fluent."]  # "be accurate" merged
    assert [q.text for q in qs.questions] == [
        "Is every claim supported by the article?", "Are numbers copied correctly?", "Is it grammatical?"]
    assert pred.merged == 1
    assert [q.id for q in qs.questions] == ["consistency-01", "consistency-02", "fluency-01"]
    assert qs.questions[2].dimension == "fluency"  # "Fluency" equals "fluency" after normalising
    assert qs.questions[0].requirement_id == "r1" and qs.questions[2].requirement_id == "r2"
    assert [q.origin for q in qs.questions] == ["merged", "generated", "generated"]  # q1 also drafted for r2
    assert qs.questions[0].violation_example == "Invents a quote."
    # summarize + 2 decompositions, no dimension inference when dimensions are given
    assert len(engine.calls) == 3


def test_dimensions_are_inferred_when_not_given():
    pred, engine = generate(QuestionGenerator(), generation_script(DRAFTS, dimensions=("Consistency", "Fluency")))
    assert pred.question_set.dimensions == ["consistency", "fluency"]
    assert len(engine.calls) == 4


def test_unparseable_decomposition_falls_back_to_the_requirement():
    def script(system, user):
        if "[[ ## requirement ## ]]" in user:
            return "not json at all"
        return {"requirements": ["Be accurate."]}

    pred, _ = generate(QuestionGenerator(dimensions=["consistency"]), script)
    (question,) = pred.question_set.questions
    assert "Be accurate" in question.text and question.dimension == "consistency"


def test_no_requirements_is_an_error():
    with pytest.raises(BinEvalError, match="no requirements"):
        generate(QuestionGenerator(dimensions=["a"]), lambda s, u: {"requirements": []})
    with pytest.raises(BinEvalError, match="task prompt is empty"):
        QuestionGenerator()(task_prompt=" ")


def test_normalize_dimension():
    assert normalize_dimension(" Factual Consistency ") == "factual_consistency"
    assert normalize_dimension("!!") == ""


def test_a_requirement_list_cut_inside_its_last_item_keeps_only_the_whole_ones():
    """Issue 23.1: the item a repair would complete ("Be conc") is no requirement; the ones
    written in full are kept (with our JSON adapter, as `bineval generate` uses)."""
    from binaryeval_dspy.lm.adapters import CountingJSONAdapter

    base = generation_script(DRAFTS)

    def script(system, user):
        if "[[ ## requirement ## ]]" in user or "[[ ## requirements ## ]]" in user:
            return base(system, user)
        return '{"requirements": ["Be accurate.", "Be fluent.", "Be conc'

    lm, _ = scripted_lm(script)
    with dspy.context(lm=lm, adapter=CountingJSONAdapter()):
        pred = QuestionGenerator(dimensions=["consistency", "fluency"])(task_prompt=TASK)
    assert [r.text for r in pred.question_set.requirements] == ["Be accurate.", "Be fluent."]

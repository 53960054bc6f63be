"""``aforward`` of every module we ship except BinEval and VerdictJudge (issue 31).

For each module: ``await module.acall(...)`` gives what ``module(...)`` gives; its independent
calls are in flight together (a scripted async endpoint with a fixed latency counts them);
and modules awaited together under ``asyncio.gather``, each task in its own
``dspy.context(lm=...)``, each read their own LM's answers. Scripted LMs, never a model's judgment.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import dspy
import pytest

from binaryeval_dspy import GEvalJudge, PromptUpdater, QuestionGenerator, RougeL, UniEvalJudge, VerdictPolicy
from binaryeval_dspy.programs.label_picker import LabelPicker
from binaryeval_dspy.programs.lesson_memory import LessonMemory
from binaryeval_dspy.programs.note_taker import ItemFindings, NoteTaker
from binaryeval_dspy.programs.pressure_test import PressureTest
from binaryeval_dspy.schemas.rubric import Rubric
from binaryeval_dspy.signatures.verdict_pick import EvidenceLine
from tests.fakes import field_value, scripted_lm
from tests.schema_script import output_fields
from tests.verdict_scripts import AUDIT_POLICY

ARTICLE = "The council approved the new park on Tuesday after a two-hour debate."
SUMMARY = "The council approved a park."
LATENCY = 0.05
REQUIREMENTS = ["Name who decided.", "Say what was decided.", "Keep to one sentence."]
REFUTATIONS = ["Is the decision misreported?", "Is the council misnamed?", "Is a fact invented?"]
RUBRIC = Rubric(benchmark="toy", dimensions={
    "consistency": {"criterion": "Facts match the source.", "evaluation_steps": ["Compare."],
                    "rating_scale": [1, 5], "question": "Are the facts right?"},
    "fluency": {"criterion": "Reads well.", "evaluation_steps": ["Read."], "rating_scale": [1, 3],
                "question": "Does it read well?"},
})
POLICY = VerdictPolicy.model_validate(AUDIT_POLICY)
EVIDENCE = [EvidenceLine(question_id="q1", question="Is it accurate?", answer="no", detail="it omits the date",
                         answered_by="reviewer", fatal=False)]


def script(word: str = "yes") -> Callable[[str, str], Any]:
    """Answers every signature of these modules in JSON, by its output fields; `word` is each
    yes/no answer (and picks the label and score), so two LMs can be told apart."""

    def answer(system: str, user: str) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name in output_fields(system) or []:
            if name == "requirements":
                values[name] = REQUIREMENTS
            elif name == "dimensions":
                values[name] = ["consistency"]
            elif name == "questions" and "[[ ## proposed_label ## ]]" in user:
                values[name] = REFUTATIONS
            elif name == "questions":
                values[name] = [{"question": f"Does the output do this: {field_value(user, 'requirement')}?",
                                 "dimension": "consistency", "violation_example": "it does not"}]
            elif name in ("answer", "verdict"):
                values[name] = word
            elif name == "score":
                values[name] = 4 if word == "yes" else 2
            elif name == "label":
                values[name] = "Keep" if word == "yes" else "Improve"
            elif name == "lessons":
                values[name] = [f"Lesson {word}: check every number."]
            elif name == "is_duplicate":
                values[name] = "[[ ## lesson_memory ## ]]" in user and "numbers" in field_value(user, "new_lesson")
            elif name == "duplicate_number":
                values[name] = 1
            elif name == "merged_lesson":
                values[name] = f"Check numbers and names ({word})."
            elif name == "substring":
                values[name] = "Be brief."
            elif name == "replacement":
                values[name] = f"Be brief ({word})."
            else:
                values[name] = f"Scripted {name} ({word})."
        return values

    return answer


# module name -> (make the module, its inputs, what the result is compared by, independent calls in flight)
def _dump(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_dump(v) for v in value]
    if isinstance(value, tuple):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


def outcome(pred: dspy.Prediction) -> str:
    """Everything a prediction holds, as JSON (pydantic records dumped), to compare two runs."""
    return json.dumps({k: _dump(v) for k, v in pred.items()}, sort_keys=True, default=str)


MODULES: dict[str, tuple[Callable[[], dspy.Module], dict[str, Any], int]] = {
    "QuestionGenerator": (lambda: QuestionGenerator(), {"task_prompt": "Summarize the article in one sentence."},
                          len(REQUIREMENTS)),
    "NoteTaker": (lambda: NoteTaker(prompt_role="a summary judge"),
                  {"findings": ItemFindings(item_id="i1", input=ARTICLE, output=SUMMARY, problem="too lenient")}, 1),
    "LessonMemory": (lambda: LessonMemory(),
                     {"lessons": ["Check every number.", "Check the numbers again.", "Names must match."]}, 1),
    "PromptUpdater": (lambda: PromptUpdater(), {"prompt": "Judge the summary. Be brief.",
                                                "lessons": ["Check every number.", "Names must match."]}, 1),
    "LabelPicker": (lambda: LabelPicker(POLICY), {"input": ARTICLE, "output": SUMMARY, "evidence": EVIDENCE}, 1),
    "PressureTest": (lambda: PressureTest(), {"input": ARTICLE, "output": SUMMARY, "evidence": EVIDENCE,
                                              "label": POLICY.labels[1]}, len(REFUTATIONS)),
    "GEvalJudge": (lambda: GEvalJudge(RUBRIC, logprobs="off"), {"input": ARTICLE, "output": SUMMARY}, 2),
    "UniEvalJudge": (lambda: UniEvalJudge(RUBRIC, logprobs="off"), {"input": ARTICLE, "output": SUMMARY}, 2),
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_aforward_gives_what_forward_gives_with_independent_calls_in_flight_together(name):
    make, inputs, in_flight = MODULES[name]
    lm, engine = scripted_lm(script(), latency=LATENCY)
    with dspy.context(lm=lm):
        expected = make()(**inputs)
        sync_calls = len(engine.calls)
        got = asyncio.run(make().acall(**inputs))
    assert outcome(got) == outcome(expected)
    assert len(engine.calls) == 2 * sync_calls  # the same calls, no more
    assert engine.max_in_flight == in_flight  # independent calls together, dependent ones one by one


@pytest.mark.parametrize("name", sorted(MODULES))
def test_tasks_gathered_together_each_read_their_own_context(name):
    """Four tasks at once, alternating between two LMs set by `dspy.context` inside each task."""
    make, inputs, _ = MODULES[name]
    yes_lm, yes_engine = scripted_lm(script("yes"), latency=LATENCY)
    no_lm, no_engine = scripted_lm(script("no"), latency=LATENCY)
    lms = [yes_lm, no_lm, yes_lm, no_lm]

    async def one(lm: dspy.LM) -> dspy.Prediction:
        with dspy.context(lm=lm):
            return await make().acall(**inputs)

    async def together() -> list[dspy.Prediction]:
        return await asyncio.gather(*(one(lm) for lm in lms))

    got = asyncio.run(together())
    for lm, pred in zip(lms, got, strict=True):
        with dspy.context(lm=lm):
            assert outcome(pred) == outcome(make()(**inputs))  # its own LM's answers, never the other's
    assert outcome(got[0]) != outcome(got[1])  # the two LMs answer differently
    assert yes_engine.max_in_flight >= 2 and no_engine.max_in_flight >= 2  # the tasks overlapped


def test_rouge_l_aforward_scores_as_forward():
    pytest.importorskip("rouge_score")
    rouge = RougeL()
    got = asyncio.run(rouge.acall(output=SUMMARY, reference=ARTICLE))
    assert got.score == rouge(output=SUMMARY, reference=ARTICLE).score > 0


def test_every_module_we_ship_has_its_own_aforward():
    """A new `dspy.Module` subclass gets an `aforward` too (BinEval's and VerdictJudge's come with
    the judging plan's rewrite)."""
    import binaryeval_dspy.programs as programs

    shipped = {getattr(programs, name) for name in programs.__all__}
    modules = {cls for cls in shipped if isinstance(cls, type) and issubclass(cls, dspy.Module)}
    pending = {"BinEval", "VerdictJudge"}
    missing = sorted(cls.__name__ for cls in modules if cls.__name__ not in pending
                     and not any("aforward" in vars(base) for base in cls.__mro__ if base is not dspy.Module))
    assert not missing, missing
    assert {"QuestionGenerator", "PromptUpdater", "GEvalJudge", "UniEvalJudge", "RougeL"} <= {
        cls.__name__ for cls in modules}


def test_the_embedded_engine_answers_on_the_async_path():
    """DSPy refuses an async call to a custom engine without an async counterpart; the embedded
    model's (`AsyncLlamaCppEngine`) runs the sync engine on a worker thread."""
    from binaryeval_dspy.lm import CacheScopedLM
    from binaryeval_dspy.lm.llama_engine import AsyncLlamaCppEngine
    from tests.fakes import ScriptedEngine

    engine = ScriptedEngine(script())
    lm = CacheScopedLM("custom/embedded-twin", engine=engine, async_engine=AsyncLlamaCppEngine(engine), cache=False)
    with dspy.context(lm=lm):
        got = asyncio.run(NoteTaker(prompt_role="a judge").acall(**MODULES["NoteTaker"][1]))
    assert got.lessons == ["Lesson yes: check every number."] and len(engine.calls) == 1


@pytest.mark.embedded
def test_aforward_on_the_embedded_model(no_dspy_cache):
    from binaryeval_dspy import make_lm

    handle = make_lm("local", max_tokens=48, llama_threads=1)
    with handle.context():
        got = asyncio.run(UniEvalJudge(RUBRIC, dimensions=["fluency"], logprobs="off").acall(
            input=ARTICLE, output=SUMMARY))
    assert got.details["fluency"]["status"] in ("scored", "unparsed")

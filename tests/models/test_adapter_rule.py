"""One adapter rule however DSPy is configured (issue 31): `binaryeval_dspy.lm.adapters.judging_adapter`.

Every way a DSPy user configures the judge's LM (``dspy.configure(lm=handle.lm)`` alone, the
README's setup; ``dspy.context(lm=...)``; ``handle.context()``; a ``dspy.ChatAdapter()`` or
``dspy.JSONAdapter()`` of their own) against three scripted endpoints: one that answers only
in JSON, one that answers only in DSPy's chat fields, and one whose every reply stops at
``max_tokens`` inside its explanation. Under each: the verdicts are the same, a cut reply is
``unparsed`` (never the "yes" DSPy's JSON fallback made of it), exactly one request is sent
per question, and ``handle.adapter_name`` names the format that was sent. An adapter our
parsers cannot follow is refused before any request. Scripted replies, never a model's judgment.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator

import dspy
import pytest
from dspy.lm15 import Response, Usage

from binaryeval_dspy import (
    BinEval,
    BinEvalError,
    BinaryQuestion,
    GEvalJudge,
    LMConfigError,
    LMHandle,
    PromptUpdater,
    QuestionGenerator,
    QuestionSet,
    UniEvalJudge,
    VerdictPolicy,
    make_lm,
)
from binaryeval_dspy.lm import CacheScopedLM, LlamaCppEngine
from binaryeval_dspy.programs.label_picker import LabelPicker
from binaryeval_dspy.programs.lesson_memory import LessonMemory
from binaryeval_dspy.programs.note_taker import ItemFindings, NoteTaker
from binaryeval_dspy.programs.pressure_test import PressureTest
from binaryeval_dspy.schemas.rubric import Rubric
from tests.fake_endpoint import CUT, FakeEndpoint, wants_json
from tests.fakes import ScriptedEngine, field_value
from tests.verdict_scripts import AUDIT_POLICY

QUESTIONS = ["Does the summary name the council?", "Is the summary one sentence?", "Does it avoid new facts?"]
NO = QUESTIONS[1]
ARTICLE = "The council approved the new park on Tuesday after a two-hour debate."
SUMMARY = "The council approved a park."
ANSWERED = ["yes", "no", "yes"]


def question_set() -> QuestionSet:
    return QuestionSet(task_prompt="Summarize the article.", dimensions=["consistency"], questions=[
        BinaryQuestion(id=f"consistency-0{i + 1}", dimension="consistency", text=text)
        for i, text in enumerate(QUESTIONS)])


def asks_json(system: str) -> bool:
    """Whether the request was formatted by a JSON adapter (its system message says so)."""
    return "Outputs will be a JSON object" in system


def chat_reply(verdict: str, explanation: str) -> str:
    return f"[[ ## verdict ## ]]\n{verdict}\n\n[[ ## explanation ## ]]\n{explanation}\n\n[[ ## completed ## ]]"


class Endpoint(ScriptedEngine):
    """A scripted endpoint: `replies` is ``"json"`` / ``"chat"`` (that format whatever is asked)
    or ``"asked"``; `cut` stops every reply inside its explanation with finish reason
    ``length``; `schema` says whether it declares JSON-schema output. Records the format of
    every request in ``formats``."""

    def __init__(self, *, replies: str, cut: bool = False, schema: bool):
        super().__init__(self._reply)
        self.replies, self.cut = replies, cut
        self.formats: list[str] = []
        self.supports_response_schema = schema
        self.supported_params = frozenset({"temperature", "max_tokens", *(("response_format",) if schema else ())})

    def _reply(self, system: str, user: str) -> str:
        asked = "json" if asks_json(system) else "chat"
        self.formats.append(asked)
        verdict = "no" if field_value(user, "question") == NO else "yes"
        explanation = "The summary states it plainly, as the article does."
        form = asked if self.replies == "asked" else self.replies
        text = (json.dumps({"verdict": verdict, "explanation": explanation}) if form == "json"
                else chat_reply(verdict, explanation))
        return text[:text.index("plainly")] if self.cut else text  # cut inside the explanation

    def complete(self, request):
        done = super().complete(request)
        if not self.cut:
            return done
        return Response(id=None, model="scripted", message=done.message, finish_reason="length",
                        usage=Usage(input_tokens=10, output_tokens=5))


ENDPOINTS: dict[str, Callable[[], Endpoint]] = {
    "json-only": lambda: Endpoint(replies="json", schema=True),
    "chat-only": lambda: Endpoint(replies="chat", schema=False),
    "cut, chat endpoint": lambda: Endpoint(replies="asked", cut=True, schema=False),
    "cut, JSON endpoint": lambda: Endpoint(replies="asked", cut=True, schema=True),
}


def scripted_handle(engine: Endpoint) -> LMHandle:
    """A handle as `make_lm` builds one: a `CacheScopedLM`, its adapter chosen by policy ``auto``."""
    lm = CacheScopedLM(f"custom/rule-{uuid.uuid4().hex[:10]}", engine=engine, cache=False, temperature=0.0)
    return LMHandle(lm=lm, adapter=None, name="scripted", embedded=False)


@contextlib.contextmanager
def configured(how: str, handle: LMHandle) -> Iterator[None]:
    """DSPy configured for `handle.lm` the way `how` names."""
    if how == "dspy.configure":  # the README's setup
        lm, adapter = dspy.settings.lm, dspy.settings.adapter
        dspy.configure(lm=handle.lm)
        try:
            yield
        finally:
            dspy.configure(lm=lm, adapter=adapter)
        return
    settings = {"dspy.context": {"lm": handle.lm},
                "dspy.ChatAdapter()": {"lm": handle.lm, "adapter": dspy.ChatAdapter()},
                "dspy.JSONAdapter()": {"lm": handle.lm, "adapter": dspy.JSONAdapter()}}.get(how)
    with handle.context() if settings is None else dspy.context(**settings):
        yield


CONFIGURATIONS = ["dspy.configure", "dspy.context", "handle.context()", "dspy.ChatAdapter()", "dspy.JSONAdapter()"]


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
@pytest.mark.parametrize("how", CONFIGURATIONS)
def test_every_configuration_reads_every_endpoint_alike_with_one_request_per_question(how, endpoint):
    engine = ENDPOINTS[endpoint]()
    handle = scripted_handle(engine)
    with configured(how, handle):
        verdicts = BinEval(question_set(), logprobs="off")(input=ARTICLE, output=SUMMARY).verdicts
    assert len(engine.calls) == len(QUESTIONS), engine.formats  # never a second call in another format
    if engine.cut:
        assert [v.verdict for v in verdicts] == ["unparsed"] * 3, [(v.verdict, v.error) for v in verdicts]
        assert all("max_tokens" in v.error for v in verdicts), verdicts[0].error
    else:
        assert [v.verdict for v in verdicts] == ANSWERED, [(v.verdict, v.error) for v in verdicts]
    sent = {"dspy.ChatAdapter()": "chat", "dspy.JSONAdapter()": "json"}.get(how, handle.adapter_name)
    assert set(engine.formats) == {sent}  # what the handle (or the user's adapter) says is what is sent


@pytest.mark.parametrize("how", CONFIGURATIONS[:3])
def test_adapter_name_is_the_endpoints_own_choice(how):
    """JSON where the endpoint declares schema output, chat where it does not, under every
    configuration that leaves the choice to the handle."""
    for schema, name in ((True, "json"), (False, "chat")):
        engine = Endpoint(replies="asked", schema=schema)
        handle = scripted_handle(engine)
        assert handle.adapter_name == name
        with configured(how, handle):
            BinEval(question_set(), logprobs="off")(input=ARTICLE, output=SUMMARY)
        assert engine.formats == [name] * 3


def test_the_readme_setup_on_a_served_model_reads_a_cut_reply_as_unparsed():
    """`make_lm(url)` then `dspy.configure(lm=handle.lm)`: JSON with the schema, as the handle says,
    one request per question, and a reply cut at max_tokens is unparsed (it was "yes", after
    a chat request, DSPy's JSON retry and two requests per question)."""
    with FakeEndpoint() as endpoint:
        endpoint.reply = lambda body: CUT
        handle = make_lm(endpoint.base_url, model="fake-x", cache=False, max_tokens=8)
        with configured("dspy.configure", handle):
            verdicts = BinEval(question_set(), logprobs="off")(input=ARTICLE, output=SUMMARY).verdicts
        assert [v.verdict for v in verdicts] == ["unparsed"] * 3, [(v.verdict, v.raw_answer) for v in verdicts]
        assert len(endpoint.requests) == 3
        assert handle.adapter_name == "json" and all(wants_json(body) for body in endpoint.requests)
        assert handle.adapter_stats.calls == 3  # the handle's own adapter did the judging


@pytest.mark.parametrize("adapter", [dspy.XMLAdapter, dspy.TwoStepAdapter])
def test_an_adapter_our_parsers_cannot_follow_is_refused_before_any_request(adapter):
    engine = Endpoint(replies="asked", schema=True)
    handle = scripted_handle(engine)
    made = adapter(dspy.LM("openai/x")) if adapter is dspy.TwoStepAdapter else adapter()
    with dspy.context(lm=handle.lm, adapter=made), pytest.raises(LMConfigError, match=adapter.__name__):
        BinEval(question_set())(input=ARTICLE, output=SUMMARY)
    assert engine.calls == []


def test_chat_format_is_refused_for_an_embedded_model(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    lm = CacheScopedLM("custom/m", engine=LlamaCppEngine(gguf), cache=False)
    with dspy.context(lm=lm, adapter=dspy.ChatAdapter()), pytest.raises(LMConfigError, match="embedded model"):
        BinEval(question_set())(input=ARTICLE, output=SUMMARY)
    assert LMHandle(lm=lm, adapter=None, name="m", embedded=True).adapter_name == "json"


# ------------------------------------------------------------------ every other module of ours

RUBRIC = Rubric(benchmark="toy", dimensions={
    "consistency": {"criterion": "Facts match the source.", "evaluation_steps": ["Compare."],
                    "rating_scale": [1, 5], "question": "Are the facts right?"}})
POLICY = VerdictPolicy.model_validate(AUDIT_POLICY)

# module -> (a call of it, the LM requests it makes when no reply can be read)
MODULE_CALLS: dict[str, tuple[Callable[[], object], int]] = {
    "QuestionGenerator": (lambda: QuestionGenerator(dimensions=["d"])(task_prompt="Summarize the article."), 1),
    "NoteTaker": (lambda: NoteTaker(prompt_role="a judge")(findings=ItemFindings(
        item_id="i", input=ARTICLE, output=SUMMARY, problem="too lenient")), 1),
    "LessonMemory": (lambda: LessonMemory()(lessons=["Check every number.", "Names must match the source."]), 1),
    "PromptUpdater": (lambda: PromptUpdater(max_attempts=2)(prompt="Judge it. Be brief.", lessons=["L"]), 2),
    "LabelPicker": (lambda: LabelPicker(POLICY)(input=ARTICLE, output=SUMMARY, evidence=[]), 2),
    "PressureTest": (lambda: PressureTest()(input=ARTICLE, output=SUMMARY, evidence=[], label=POLICY.labels[1]), 1),
    "GEvalJudge": (lambda: GEvalJudge(RUBRIC, logprobs="off")(input=ARTICLE, output=SUMMARY), 1),
    "UniEvalJudge": (lambda: UniEvalJudge(RUBRIC, logprobs="off")(input=ARTICLE, output=SUMMARY), 1),
}


def unreadable_handle() -> tuple[LMHandle, ScriptedEngine]:
    """A chat endpoint (no structured output declared) whose every reply is unreadable."""
    engine = ScriptedEngine(lambda system, user: "I cannot tell from what I was given.")
    engine.supports_response_schema = False
    engine.supported_params = frozenset({"temperature", "max_tokens"})
    lm = CacheScopedLM(f"custom/unreadable-{uuid.uuid4().hex[:10]}", engine=engine, cache=False, temperature=0.0)
    return LMHandle(lm=lm, adapter=None, name="scripted", embedded=False), engine


@pytest.mark.parametrize("module", sorted(MODULE_CALLS))
@pytest.mark.parametrize("how", CONFIGURATIONS)
def test_every_module_sends_one_request_per_unreadable_reply(how, module):
    """No module of ours makes DSPy's second call in JSON after a chat reply that does not parse."""
    call, requests = MODULE_CALLS[module]
    handle, engine = unreadable_handle()
    with configured(how, handle), contextlib.suppress(BinEvalError):
        call()  # QuestionGenerator refuses to go on without requirements: an error, after one request
    assert len(engine.calls) == requests


@pytest.mark.parametrize("module", sorted(MODULE_CALLS))
def test_every_module_refuses_an_adapter_our_parsers_cannot_follow(module):
    call, _ = MODULE_CALLS[module]
    handle, engine = unreadable_handle()
    with dspy.context(lm=handle.lm, adapter=dspy.XMLAdapter()), pytest.raises(LMConfigError, match="XMLAdapter"):
        call()
    assert engine.calls == []

"""Issue 15, points 2, 4 and 5: what a new user sees in the first hour.

Output that tells the truth about the judge (a judge that answers "yes" to everything,
explanations that contradict their verdict, the embedded model's P(yes)); time and
machine (--llama-threads, an estimate after the first item, plain progress lines when
output is piped, a resume's ETA); errors before work (a missing provider key, swapped
arguments). Every LM here is scripted; nothing is a model's judgment.
"""

from __future__ import annotations

import json
import math
import time

import dspy
import pytest
from click.testing import CliRunner
from dspy.lm15 import TokenLogprob, TopLogprob

from binaryeval_dspy.cli import common
from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from tests.fakes import LogprobEngine, field_value, logprob_lm

QUESTIONS = QuestionSet(
    task_prompt="Summarize the article.",
    dimensions=["consistency", "fluency"],
    questions=[
        BinaryQuestion(id="consistency-01", dimension="consistency", text="Is every claim supported?",
                       violation_example="The summary says the player scored twice, but the article reports a "
                                         "single goal."),
        BinaryQuestion(id="consistency-02", dimension="consistency", text="Are the numbers right?",
                       violation_example="The article gives a fine of 20,000 pounds; the summary says 200,000."),
        BinaryQuestion(id="fluency-01", dimension="fluency", text="Is it grammatical?",
                       violation_example="A sentence has no main verb."),
    ],
)


def flat(text: str) -> str:
    """`text` with every run of whitespace made one space (rich wraps long lines)."""
    return " ".join(text.split())


def write_items(tmp_path, n: int):
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps({"id": f"item-{i}", "source": f"Article {i} about a match.",
                                        "summary": f"Summary {i}."}) + "\n" for i in range(n)), encoding="utf-8")
    return path


def run_evaluate(tmp_path, items: int, *extra: str):
    """`bineval evaluate` of QUESTIONS on `items` items into ``tmp_path/run``; returns the
    result and the run directory."""
    qs = QUESTIONS.save(tmp_path / "qs.json")
    out = tmp_path / "run"
    return CliRunner().invoke(cli, evaluate_args(qs, write_items(tmp_path, items), out, *extra)), out


def evaluate_args(qs_path, items_path, out, *extra: str) -> list[str]:
    return ["evaluate", str(qs_path), str(items_path), "--input-field", "source", "--output-field", "summary",
            "--id-field", "id", "--scale", "1", "5", "--out", str(out), *extra]


@pytest.fixture
def scripted_cli(monkeypatch, scripted_handle):
    """Every --lm value resolves to a scripted LM; returns the keyword arguments `make_lm` got."""
    calls: list[dict] = []

    def install(script):
        def make_lm(spec, **kwargs):
            calls.append({"spec": spec, **kwargs})
            handle, _engine = scripted_handle(script)
            handle.name = "scripted-judge"
            return handle

        monkeypatch.setattr(common, "make_lm", make_lm)
        return calls

    return install


def always_yes(system: str, user: str):
    return {"explanation": "The summary meets this.", "verdict": "yes"}


# ------------------------------------------------------------------ 2. the truth about the judge


def test_saved_notes_name_the_lm_in_the_users_terms_never_a_parameter(tmp_path, scripted_cli):
    """summary.md and the run's page keep the notes as written: no library parameter name
    (`spec`) that the user never typed. The embedded model's advice is checked (it names the LM)."""
    from binaryeval_dspy.runs.run_summary import RunSummary, judge_notes, write_summary

    scripted_cli(always_yes)
    _result, out = run_evaluate(tmp_path, 4)
    summary = RunSummary.model_validate({**json.loads((out / "summary.json").read_text()), "embedded_lm": True})
    summary.notes = judge_notes(summary)
    assert any("Try a larger model" in note for note in summary.notes)
    _json, md = write_summary(summary, out)
    assert "spec" not in md.read_text(encoding="utf-8")


def test_a_question_generator_that_fails_names_no_parameter():
    from binaryeval_dspy.errors import BinEvalError
    from binaryeval_dspy.programs.question_generator import QuestionGenerator
    from tests.method.test_question_generator import generate

    with pytest.raises(BinEvalError) as caught:
        generate(QuestionGenerator(dimensions=["a"]), lambda s, u: {"requirements": []})
    assert "`spec`" not in str(caught.value) and "stronger LM" in str(caught.value)


def test_a_judge_that_says_yes_to_everything_is_named_beside_the_table(tmp_path, scripted_cli):
    scripted_cli(always_yes)
    result, out = run_evaluate(tmp_path, 4)
    assert result.exit_code == 0, result.output
    said = flat(result.output)
    assert 'The judge answered "yes" to all 12 questions it answered (0 "no")' in said
    assert "does not discriminate between items" in said and "Try a larger model" in said
    summary = json.loads((out / "summary.json").read_text())
    assert summary["verdict_skew"] == {"verdict": "yes", "count": 12, "answered": 12, "share": 1.0}
    assert any("does not discriminate" in note for note in summary["notes"])
    markdown = (out / "summary.md").read_text()
    table_end = markdown.index("| overall |")
    assert markdown.index('**Note:** The judge answered "yes" to all 12') > table_end  # right below the table


def test_a_judge_that_discriminates_gets_no_such_note(tmp_path, scripted_cli):
    def script(system, user):
        item = field_value(user, "output")
        return {"explanation": "Checked.", "verdict": "no" if item.endswith(("1.", "3.")) else "yes"}

    scripted_cli(script)
    result, out = run_evaluate(tmp_path, 4)
    assert result.exit_code == 0, result.output
    said = flat(result.output)
    assert "does not discriminate" not in said and "barely discriminates" not in said
    assert json.loads((out / "summary.json").read_text())["verdict_skew"] is None


def test_explanations_that_contradict_their_verdict_are_flagged_and_counted(tmp_path, scripted_cli):
    def script(system, user):
        question = field_value(user, "question")
        if question == "Is every claim supported?":  # a bare "no" under a "yes"
            return {"explanation": "no", "verdict": "yes"}
        if question == "Are the numbers right?":  # the violation example copied under a "yes"
            return {"explanation": "The article gives a fine of 20,000 pounds; the summary says 200,000.",
                    "verdict": "yes"}
        return {"explanation": "Yes, it is.", "verdict": "no"}  # a leading "yes" under a "no"

    scripted_cli(script)
    result, out = run_evaluate(tmp_path, 2)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    flags = {v["question_id"]: v.get("flags") for v in rows[0]["verdicts"]}
    assert flags == {"consistency-01": ["explanation_says_no"], "consistency-02": ["copies_violation_example"],
                     "fluency-01": ["explanation_says_yes"]}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["explanations_flagged"] == 6 and summary["explanations_checked"] == 6
    assert summary["explanation_flags"] == {"explanation_says_no": 2, "explanation_says_yes": 2,
                                            "copies_violation_example": 2}
    assert "Explanations contradicting their verdict: 6 of 6" in flat(result.output)
    assert "Explanations contradicting their verdict: 6 of 6." in (out / "summary.md").read_text()
    assert "6 of 6 explanations contradict their verdict" in flat(result.output)


def test_qualified_verdicts_are_flagged_counted_and_shown_beside_the_table(tmp_path, scripted_cli):
    """Issue 23.2: "Yes, but <a problem>" says both that the requirement is met and that it is
    not; the verdict is kept, flagged ``qualified`` and counted, never a plain "yes"."""

    def script(system, user):
        question = field_value(user, "question")
        if question == "Is every claim supported?":  # the reservation in the verdict field
            return {"verdict": "Yes, but the date of the match is wrong.", "explanation": "Mostly supported."}
        if question == "Are the numbers right?":  # in the explanation, all a schema-held verdict leaves
            return {"verdict": "yes", "explanation": "Yes, although the fine is rounded."}
        return {"verdict": "no", "explanation": "No, because it says approved but the article says rejected."}

    scripted_cli(script)
    result, out = run_evaluate(tmp_path, 2)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    by_id = {v["question_id"]: v for v in rows[0]["verdicts"]}
    assert by_id["consistency-01"]["verdict"] == "yes" and by_id["consistency-01"]["qualified"] is True
    assert "the date of the match is wrong" in by_id["consistency-01"]["raw_answer"]  # what the judge wrote
    assert by_id["consistency-02"]["verdict"] == "yes" and by_id["consistency-02"]["qualified"] is True
    assert "qualified" not in by_id["fluency-01"]  # a "but" inside the reason is not a reservation
    summary = json.loads((out / "summary.json").read_text())
    assert summary["answers_qualified"] == 4
    assert any(note.startswith("4 answers qualified their verdict") for note in summary["notes"])
    assert 'qualified verdicts ("yes, but ..."): 4' in flat(result.output)
    markdown = (out / "summary.md").read_text()
    assert 'qualified verdicts ("yes, but ..."): 4' in markdown and "**Note:** 4 answers qualified" in markdown


def test_consistent_explanations_are_not_flagged():
    from binaryeval_dspy.analysis.explanation_flags import explanation_flags

    example = "The summary describes the weather at the match but never says who won."
    assert explanation_flags("yes", "No errors were found in the summary.", example) == []
    assert explanation_flags("no", "No, the summary never says who won.", example) == []
    assert explanation_flags("yes", "The summary says who won the match.", example) == []
    assert explanation_flags("no", example, example) == []  # a copy under "no" describes the violation
    assert explanation_flags("yes", f"{example} It also mentions", example) == ["copies_violation_example"]


def _json_tokens(verdict: str, p_yes: float) -> tuple[str, tuple]:
    """A JSON reply and lm15 logprobs whose verdict token has P(yes) = `p_yes`."""
    pieces = [('{"explanation": "It does.", "verdict": "', None), (verdict, {"yes": p_yes, "no": 1 - p_yes}),
              ('"}', None)]
    tokens = tuple(TokenLogprob(token=t, logprob=math.log((alts or {}).get(t, 1.0)),
                                top=tuple(TopLogprob(token=a, logprob=math.log(p)) for a, p in (alts or {}).items()))
                   for t, alts in pieces)
    return "".join(t for t, _ in pieces), tokens


def test_the_embedded_models_p_yes_ranks_items_and_is_labelled(tmp_path, monkeypatch):
    def script(user):
        output = field_value(user, "output")
        return _json_tokens("yes", 0.9 if output.endswith("0.") else 0.6)

    def make_lm(spec, **kwargs):
        return LMHandle(lm=logprob_lm(LogprobEngine(script)), adapter=dspy.JSONAdapter(),
                        name="SmolLM2-fake.gguf (llama.cpp)", embedded=True)

    monkeypatch.setattr(common, "make_lm", make_lm)
    result, out = run_evaluate(tmp_path, 2)
    assert result.exit_code == 0, result.output
    said = flat(result.output)
    assert "P(yes), embedded model" in said and "mean P(yes), embedded model" in said
    assert "0.900" in said and "0.600" in said  # every hard verdict is yes, P(yes) still tells the items apart
    assert "the embedded model's own probability" in said and "too small to judge well" in said
    summary = json.loads((out / "summary.json").read_text())
    assert summary["embedded_lm"] is True
    assert next(d for d in summary["dimensions"] if d["dimension"] == "overall")["mean_p_yes"] == pytest.approx(0.75)
    assert "mean P(yes), embedded model" in (out / "summary.md").read_text()


# ------------------------------------------------------------------ 4. time and machine


def test_evaluate_takes_llama_threads_and_every_lm_command_lists_it(tmp_path, scripted_cli):
    calls = scripted_cli(always_yes)
    qs = QUESTIONS.save(tmp_path / "qs.json")
    result = CliRunner().invoke(cli, evaluate_args(qs, write_items(tmp_path, 1), tmp_path / "run",
                                                   "--llama-threads", "1"))
    assert result.exit_code == 0, result.output
    assert calls[-1]["spec"] == "local" and calls[-1]["llama_threads"] == 1
    for command in ("evaluate", "questions", "benchmark", "benchmark-questions", "optimize", "rejudge"):
        shown = CliRunner().invoke(cli, [command, "--help"])
        assert shown.exit_code == 0 and "--llama-threads" in shown.output, command


def test_piped_output_gets_plain_progress_lines(tmp_path, scripted_cli):
    scripted_cli(always_yes)
    qs = QUESTIONS.save(tmp_path / "qs.json")
    result = CliRunner().invoke(cli, evaluate_args(qs, write_items(tmp_path, 12), tmp_path / "run"))
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("items: ")]
    assert [line.split(" done")[0] for line in lines] == ["items: 10/12", "items: 12/12"]
    assert "items/s" in lines[0] and "ETA" in lines[0] and "ETA 0:00:00" in lines[-1]


def test_a_resumes_eta_counts_only_this_sessions_items():
    from rich.console import Console

    from binaryeval_dspy.cli.item_progress import ItemProgress, eta_seconds

    assert eta_seconds(2, 8, 16.0) == pytest.approx(64.0)
    assert eta_seconds(0, 8, 16.0) is None and eta_seconds(5, 0, 1.0) == 0.0
    now = [100.0]
    console = Console(record=True, width=200)
    with ItemProgress(console, plain=True, every_seconds=0, clock=lambda: now[0]) as progress:
        task = progress.add_task("items", total=40)
        for _ in range(30):  # done by an earlier session: reported at once, no time spent
            progress.update(task, "skipped")
        now[0] += 8.0
        progress.update(task, "done")
        now[0] += 8.0
        progress.update(task, "done")
        counter = progress.counters[task]
        assert counter.completed == 32 and counter.eta(now[0]) == pytest.approx(64.0)  # 8 left at 8 s each
    text = console.export_text()
    assert "first item took 8.0 s; about 72 s for the remaining 9 items at this rate." in text


def test_the_first_item_gives_an_estimate_for_the_run(tmp_path, scripted_cli):
    def slow_yes(system, user):
        time.sleep(0.4)  # 3 questions: the first item takes over a second
        return always_yes(system, user)

    scripted_cli(slow_yes)
    qs = QUESTIONS.save(tmp_path / "qs.json")
    result = CliRunner().invoke(cli, evaluate_args(qs, write_items(tmp_path, 3), tmp_path / "run"))
    assert result.exit_code == 0, result.output
    assert "first item took 1." in result.output and "for the remaining 2 items at this rate" in result.output


# ------------------------------------------------------------------ 5. errors before work


def test_a_missing_provider_key_is_an_error_before_the_first_item(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result, out = run_evaluate(tmp_path, 2, "--lm", "openai/gpt-4o-mini")
    assert result.exit_code != 0
    assert "OPENAI_API_KEY" in flat(result.output) and "is not set" in flat(result.output)
    assert not (out / "results.jsonl").exists() and not out.exists()  # nothing judged, nothing written


def test_only_provider_ids_are_checked_for_keys(monkeypatch):
    from binaryeval_dspy.lm.provider_keys import missing_provider_keys

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert missing_provider_keys("openai/gpt-4o-mini") == ["OPENAI_API_KEY"]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert missing_provider_keys("openai/gpt-4o-mini") == []
    for spec in ("local", "model.gguf", "http://127.0.0.1:8000/v1", "ollama_chat/llama3.1",
                 "hosted_vllm/Qwen/Qwen2.5-7B-Instruct", "bedrock/anthropic.claude-3"):
        assert missing_provider_keys(spec) == [], spec


def test_swapped_arguments_are_named_as_such(tmp_path, scripted_cli):
    scripted_cli(always_yes)
    qs = QUESTIONS.save(tmp_path / "qs.json")
    items = write_items(tmp_path, 2)
    result = CliRunner().invoke(cli, evaluate_args(items, qs, tmp_path / "run"))
    assert result.exit_code == 2
    said = flat(result.output)
    assert "the two files look swapped" in said and "regenerate" not in said
    assert f"{items}" in said and f"{qs}" in said
    result = CliRunner().invoke(cli, evaluate_args(qs, qs, tmp_path / "run"))
    assert result.exit_code == 2 and "is given as ITEMS_FILE but is a question set" in flat(result.output)

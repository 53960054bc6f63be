"""Every `bineval` command a hosted-model user runs, through a real OpenAI-compatible server.

The session-scoped `llama_server` fixture (tests/llama_server.py) serves SmolLM2-135M with
``python -m llama_cpp.server`` on 127.0.0.1; each command gets ``--lm <base URL>
--lm-model smollm2``, exactly as a user of vLLM, llama.cpp or any OpenAI-compatible
endpoint would pass it. Inputs are tiny (2 items, 3 questions) to keep the module at a few
minutes on two shared cores.

These tests check the plumbing over HTTP: exit codes, files, call counts (also as the
server logged them), adapters, resume, re-judge, verdict mode, benchmark report and one
optimizer run. They say nothing about the judging quality of the served model: a 135M
model answers these questions poorly, and no assertion depends on what it answers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import dspy
import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.schemas.question_set import QuestionSet

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[2]
MAX_TOKENS = 64
# llama.cpp's per-generation line: "llama_perf_context_print:        eval time = 805.44 ms /    34 runs ..."
EVAL_RUNS = re.compile(r"llama_perf_context_print:\s+eval time =\s*[\d.]+ ms /\s*(\d+) runs")

QUESTION_SET = {
    "schema_version": 1,
    "task_prompt": "Summarize the article in one sentence.",
    "dimensions": ["consistency", "fluency"],
    "questions": [
        {"id": "consistency-01", "dimension": "consistency",
         "text": "Is every claim in the summary supported by the article?"},
        {"id": "consistency-02", "dimension": "consistency",
         "text": "Are the numbers in the summary the same as in the article?"},
        {"id": "fluency-01", "dimension": "fluency", "text": "Is the summary grammatical?"},
    ],
}
ITEMS = [
    {"id": "a", "source": "The home team won the cup final 2-0 on Sunday after two late goals.",
     "summary": "The home team won the final 2-0."},
    {"id": "b", "source": "Rain closed the city park for three days last week.",
     "summary": "The park closed for a month because of snow."},
]
N_QUESTIONS = len(QUESTION_SET["questions"])
VERDICTS = {"yes", "no", "unparsed"}


# --------------------------------------------------------------------------- helpers


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def lm_args(server) -> list[str]:
    return ["--lm", server.base_url, "--lm-model", server.model]


def lm_name(server) -> str:
    """How the tool names an LM given as a base URL (manifests, summaries, reports)."""
    return f"openai/{server.model} @ {server.base_url}"


def run_cli(args: list[str]):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        detail = "".join(traceback.format_exception(result.exception))
        raise AssertionError(f"bineval {' '.join(map(str, args[:2]))} crashed:\n{result.output}\n{detail}")
    return result


def served_generations(server, offset: int) -> list[int]:
    """Tokens generated per request that reached the model since `offset` (from the server log)."""
    return [int(n) for n in EVAL_RUNS.findall(server.log_text(offset))]


def check_one_call_per_question(server, offset: int, out: Path, *, questions: int) -> None:
    """summary.json, results.jsonl and the server log agree: one LM call per LM-answered question."""
    summary = read_json(out / "summary.json")
    assert summary["questions_answered"] == summary["questions_total"] == questions, summary
    assert summary["lm_calls"] == questions, summary
    assert summary["adapter_fallbacks"] == 0, summary
    for row in read_jsonl(out / "results.jsonl"):
        assert row["usage"]["lm_calls"] == N_QUESTIONS, row["usage"]
        # --max-tokens reaches the server: it bounds every completion
        assert row["usage"]["completion_tokens"] <= N_QUESTIONS * MAX_TOKENS, row["usage"]
    # the server's side: a request refused for its response_format form never reaches the
    # model; every judgment is exactly one generation, each within --max-tokens
    generated = served_generations(server, offset)
    assert server.prefix_stats(offset).generations == len(generated) == questions, generated
    assert max(generated) <= MAX_TOKENS, generated


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module", autouse=True)
def no_dspy_cache():
    """Every call must reach the server (answers from DSPy's cache are not LM calls)."""
    saved = dspy.cache
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    yield
    dspy.cache = saved


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("server-cli")
    (folder / "questions.json").write_text(json.dumps(QUESTION_SET, indent=2), encoding="utf-8")
    write_jsonl(folder / "items.jsonl", ITEMS)
    return folder


def evaluate_args(server, work: Path, out: Path, *extra: str, engine: str = "live") -> list[str]:
    return ["evaluate", work / "questions.json", work / "items.jsonl", "--input-field", "source",
            "--output-field", "summary", "--id-field", "id", "--limit", "2", "--concurrency", "2",
            "--max-tokens", str(MAX_TOKENS), "--engine", engine, "--out", out, *lm_args(server), *extra]


@pytest.fixture(scope="module")
def evaluated(llama_server, work, server_engine):
    """`bineval evaluate` with --adapter auto (the default) on `server_engine`: (result, out dir,
    log offset before). One run per engine (conftest's SERVER_ENGINES), on the session's server."""
    out = work / f"run-auto-{server_engine}"
    offset = llama_server.log_offset()
    result = run_cli(evaluate_args(llama_server, work, out, engine=server_engine))
    return result, out, offset


# --------------------------------------------------------------------------- 1. evaluate


def test_evaluate_auto_adapter_one_call_per_question(llama_server, evaluated):
    result, out, offset = evaluated
    assert result.exit_code == 0, result.output
    rows = read_jsonl(out / "results.jsonl")
    assert [r["item_id"] for r in rows] == ["a", "b"]
    for row in rows:
        assert [v["question_id"] for v in row["verdicts"]] == [q["id"] for q in QUESTION_SET["questions"]]
        assert {v["verdict"] for v in row["verdicts"]} <= VERDICTS, row["verdicts"]
        assert row.get("complete", True) is not False
    summary = read_json(out / "summary.json")
    assert summary["lm"] == lm_name(llama_server)
    assert summary["items"] == 2 and summary["items_incomplete"] == 0
    assert all(d["error"] == 0 for d in summary["dimensions"])
    manifest = read_json(out / "manifest.json")
    config = manifest["config"]
    assert config["adapter"] == "json"  # --adapter auto on a base URL: JSON with the schema
    assert manifest["settings"]["concurrency"] == 2 and "concurrency" not in config
    assert config["lm_spec"] == llama_server.base_url and config["lm_model"] == llama_server.model
    assert config["max_tokens"] == MAX_TOKENS
    check_one_call_per_question(llama_server, offset, out, questions=2 * N_QUESTIONS)


def test_evaluate_chat_adapter_one_call_per_question(llama_server, work, server_engine):
    out = work / f"run-chat-{server_engine}"
    offset = llama_server.log_offset()
    result = run_cli(evaluate_args(llama_server, work, out, "--adapter", "chat", engine=server_engine))
    rows = read_jsonl(out / "results.jsonl")
    assert [r["item_id"] for r in rows] == ["a", "b"]
    # a chat reply that does not parse is "unparsed" (kept raw), never retried as JSON
    for row in rows:
        for verdict in row["verdicts"]:
            assert verdict["verdict"] in VERDICTS, verdict
            if verdict["verdict"] == "unparsed":
                assert verdict["raw_answer"] is not None, verdict
    # SmolLM2 rarely keeps the chat format: a run with no readable answer at all fails and says why
    nothing_read = all(v["verdict"] == "unparsed" for row in rows for v in row["verdicts"])
    assert result.exit_code == (1 if nothing_read else 0), result.output
    assert ("No LM answer in this run could be read as yes or no" in " ".join(result.output.split())) == nothing_read
    assert read_json(out / "manifest.json")["config"]["adapter"] == "chat"
    assert read_json(out / "summary.json")["lm"] == lm_name(llama_server)
    check_one_call_per_question(llama_server, offset, out, questions=2 * N_QUESTIONS)


# --------------------------------------------------------------------------- 2. resume


def test_rerunning_evaluate_judges_nothing_new(llama_server, work, evaluated, server_engine):
    _, out, _ = evaluated
    before = (out / "results.jsonl").read_bytes()
    offset = llama_server.log_offset()
    result = run_cli(evaluate_args(llama_server, work, out, engine=server_engine))
    assert result.exit_code == 0, result.output
    assert "0 items judged now, 2 already done" in result.output, result.output
    assert (out / "results.jsonl").read_bytes() == before
    assert served_generations(llama_server, offset) == []
    sessions = read_json(out / "manifest.json")["sessions"]
    assert len(sessions) == 2 and sessions[-1]["items_done"] == 0, sessions


# --------------------------------------------------------------------------- 5. rejudge


def test_rejudge_after_one_output_changed(llama_server, work, evaluated):
    _, run, _ = evaluated
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    changed = [dict(ITEMS[0]), {**ITEMS[1], "summary": "Rain closed the city park for three days."}]
    items = write_jsonl(work / "items-fixed.jsonl", changed)
    out = run.with_name(run.name + "-rejudge")
    offset = llama_server.log_offset()
    # the LM, adapter and caps come from the run's manifest, as for a user
    result = run_cli(["rejudge", run, items, "--out", out])
    assert result.exit_code == 0, result.output
    report = read_json(out / "rejudge.json")
    status = {i["item_id"]: i["status"] for i in report["items"]}
    assert status == {"a": "unchanged", "b": "rejudged"}, report
    assert report["lm"] == lm_name(llama_server)
    assert {k: n for k, n in report["counts"].items() if n} == {"unchanged": 1, "rejudged": 1}, report["counts"]
    rows = {r["item_id"]: r for r in read_jsonl(out / "results.jsonl")}
    assert set(rows) == {"a", "b"}
    assert {v["verdict"] for v in rows["b"]["verdicts"]} <= VERDICTS
    # only the changed item was asked again, one call per question
    assert len(served_generations(llama_server, offset)) == N_QUESTIONS
    # the old run is untouched
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


# --------------------------------------------------------------------------- 3. questions


def test_questions_from_a_task_prompt(llama_server, tmp_path):
    task = tmp_path / "task.txt"
    task.write_text("Reply to the customer's email briefly and politely.", encoding="utf-8")
    out = tmp_path / "generated.json"
    offset = llama_server.log_offset()
    result = run_cli(["questions", task, "--out", out, "--dimensions", "politeness,brevity",
                      "--max-requirements", "3", "--max-tokens", "256", *lm_args(llama_server)])
    assert served_generations(llama_server, offset), "no request reached the server"
    if result.exit_code != 0:
        # SmolLM2-135M may draft only placeholder requirements ("test_1"), or no question it can
        # file under the dimension it is about: the generator must then refuse with the reason
        # and write nothing, never save garbage questions.
        said = " ".join(result.output.split())
        assert result.exit_code == 2 and ("unusable" in said or "no usable question for any" in said), said
        assert not out.exists()
        return
    question_set = QuestionSet.load(out)
    assert question_set.questions, "no questions generated"
    # the set keeps the requested dimensions that got questions, in the order given
    assert question_set.dimensions and set(question_set.dimensions) <= {"politeness", "brevity"}
    assert question_set.dimensions == [d for d in ("politeness", "brevity") if d in question_set.dimensions]
    assert {q.dimension for q in question_set.questions} == set(question_set.dimensions)
    assert len(question_set.requirements) <= 3
    assert read_json(out)["generated_by"] == lm_name(llama_server)
    assert served_generations(llama_server, offset), "no request reached the server"


# --------------------------------------------------------------------------- 6. verdict mode

AUDIT_ITEMS = [
    {"id": "install",
     "input": "Section 'Install' of the documentation of binaryeval-dspy, a command-line tool that judges "
              "LLM outputs.",
     "output": "## Install\n\nRun `pip install -e .` and then `bineval --help`. The question sets live in "
               "examples/audit/questions.json; open it to see the questions."},
    {"id": "old",
     "input": "Section 'Old notes' of the documentation of binaryeval-dspy, a command-line tool that judges "
              "LLM outputs.",
     "output": "## Old notes\n\nSee docs/no-such-guide.md for the old setup."},
]


def test_verdict_mode_on_the_audit_questions(llama_server, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the audit's path check resolves repository paths from here
    items = write_jsonl(tmp_path / "audit_items.jsonl", AUDIT_ITEMS)
    out = tmp_path / "audit"
    result = run_cli(["evaluate", ROOT / "examples/audit/questions.json", items, "--id-field", "id",
                      "--aggregation", "verdict", "--checks-module", ROOT / "examples/audit/audit_checks.py",
                      "--pressure-test", "never", "--max-tokens", "96", "--concurrency", "2", "--out", out,
                      *lm_args(llama_server)])
    assert result.exit_code == 0, result.output
    verdicts = read_json(out / "verdicts.json")
    assert verdicts["schema_id"] == "binaryeval-dspy/verdict-output"
    assert verdicts["lm"] == lm_name(llama_server)
    labels = {label["name"] for label in verdicts["labels"]}
    by_id = {i["item_id"]: i for i in verdicts["items"]}
    assert set(by_id) == {"install", "old"}
    for item in by_id.values():
        # a declared label, or an explicit unparsed: never a default
        if item["status"] == "decided":
            assert item["verdict"] in labels, item
        else:
            assert item["status"] == "unparsed", item
        answered_by = {e["question_id"]: e["answered_by"] for e in item["evidence"]}
        assert len(answered_by) == 9
        assert [q for q, who in answered_by.items() if who == "lm"] == ["runnable-example", "one-topic",
                                                                         "next-step"]
    # code owns the fatal question: the missing path is a fatal "no" whatever the LM said
    old = by_id["old"]
    fatal = [g for g in old["grounds"] if g["question_id"] == "paths-exist"]
    assert fatal and fatal[0]["answered_by"] == "code" and fatal[0]["fatal"], old["grounds"]
    assert "docs/no-such-guide.md" in fatal[0]["detail"]
    if old["status"] == "decided":
        assert old["verdict"] in ("Improve", "Retire") and old["is_pass"] is False, old
    install_paths = next(e for e in by_id["install"]["evidence"] if e["question_id"] == "paths-exist")
    assert install_paths["answer"] == "yes", install_paths
    # no numeric score anywhere in verdict mode
    assert all("score_card" not in row for row in read_jsonl(out / "results.jsonl"))
    summary_counts = verdicts["counts"]
    assert sum(summary_counts.values()) == 2, summary_counts


# --------------------------------------------------------------------------- 4. benchmark


def test_benchmark_all_methods_on_two_qags_items(llama_server, tmp_path):
    # the shipped QAGS question set cut to its first two questions (it has five)
    questions = read_json(ROOT / "binaryeval_dspy/benchmark_data/tasks/qags/questions.manual.json")
    questions["questions"] = questions["questions"][:2]
    qs_path = tmp_path / "qags-2q.json"
    qs_path.write_text(json.dumps(questions), encoding="utf-8")
    out = tmp_path / "bench"
    result = run_cli(["benchmark", "qags_cnndm", "--methods", "bineval,geval,unieval,rouge", "--limit", "2",
                      "--questions", qs_path, "--out", out, "--no-figures", "--bootstrap", "10",
                      "--max-tokens", str(MAX_TOKENS), "--concurrency", "2", *lm_args(llama_server)])
    assert result.exit_code == 0, result.output
    report = (out / "report.md").read_text(encoding="utf-8")
    assert lm_name(llama_server) in report
    for method in ("bineval", "geval", "unieval", "rouge"):
        assert len(read_jsonl(out / method / "results.jsonl")) == 2, method
    # the report states, per log-probability method, how many scores came from them, and
    # those counts are the ones measured in the method's results
    for method, title in (("geval", "G-Eval-style"), ("unieval", "UniEval-style")):
        rows = read_jsonl(out / method / "results.jsonl")
        details = [d for row in rows for d in row["details"].values()]
        from_logprobs = sum(1 for d in details if d.get("score_source") == "logprobs")
        line = re.search(rf"{re.escape(title)}: (\d+) / (\d+) scores from log-probabilities", report)
        assert line, f"no log-probability count for {title} in report.md"
        assert int(line.group(1)) == from_logprobs, (line.group(0), details)
        assert int(line.group(1)) <= int(line.group(2)) <= len(details) == 2, (line.group(0), details)
    verdicts = [v for row in read_jsonl(out / "bineval" / "results.jsonl") for v in row["verdicts"]]
    assert len(verdicts) == 2 * len(questions["questions"])
    parsed = [v for v in verdicts if v["verdict"] in ("yes", "no")]
    line = re.search(r"BinEval, P\(yes\): (\d+) / (\d+) parsed verdicts from log-probabilities", report)
    assert line, "no log-probability count for BinEval, P(yes) in report.md"
    assert (int(line.group(1)), int(line.group(2))) == (sum(v.get("p_yes") is not None for v in parsed), len(parsed))
    assert "Where the scores came from" in report


# --------------------------------------------------------------------------- 7. optimize


def test_optimize_human_mode_smallest_budget(llama_server, tmp_path):
    # A tiny SummEval-shaped data folder (one dimension, every output rated 1 of 5) and a
    # one-question set: --limit 1 keeps one item in each of train, validation and test.
    data = tmp_path / "data" / "summeval"
    data.mkdir(parents=True)
    rows = [{"doc_id": f"d{doc}", "system_id": system, "system_output": summary,
             "source": "The home team won the cup final 2-0 on Sunday after two late goals.",
             "scores": {"fluency": 1.0}}
            for doc in range(12)
            for system, summary in (("M1", "The cup the the final won."), ("M2", "Final won cup the the team."))]
    write_jsonl(data / "summeval.jsonl", rows)
    qs_path = tmp_path / "qs.json"
    qs_path.write_text(json.dumps({"task_prompt": "Summarize the article.", "dimensions": ["fluency"],
                                   "questions": [{"id": "fluency-01", "dimension": "fluency",
                                                  "text": "Is every sentence grammatical?"}]}), encoding="utf-8")
    out = tmp_path / "opt"
    offset = llama_server.log_offset()
    result = run_cli(["optimize", "--mode", "human", "--compare", "bineval", "--data-dir", tmp_path / "data",
                      "--questions", qs_path, "--limit", "1", "--iterations", "1", "--max-tokens", "96",
                      "--out", out, *lm_args(llama_server)])
    assert result.exit_code == 0, result.output
    results = {name: read_json(out / name / "result.json") for name in ("unoptimized", "bineval")}
    for name, saved in results.items():
        assert saved["lm"] == lm_name(llama_server), saved["lm"]
        assert len(saved["test_records"]) == 1, name
        assert saved["test_lm_calls"] == 1, name  # one test item, one question
    history = read_json(out / "bineval" / "history.json")
    assert history["iterations"], history
    # the optimizer's own figures add up, and match what reached the server
    compile_calls = results["bineval"]["compile_lm_calls"]
    assert compile_calls == sum(i["lm_calls"] for i in history["iterations"]) >= 2  # train + validation at least
    reported = sum(r["compile_lm_calls"] + r["test_lm_calls"] for r in results.values())
    assert len(served_generations(llama_server, offset)) == reported
    assert lm_name(llama_server) in (out / "comparison.md").read_text(encoding="utf-8")

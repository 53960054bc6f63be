"""`bineval evaluate --aggregation verdict|both` and `bineval rejudge` on scripted LMs."""

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from binaryeval_dspy.checks import unregister_check
from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.schemas.item_result import ItemResult
from binaryeval_dspy.schemas.rejudge_report import RejudgeReport
from binaryeval_dspy.schemas.verdict_output import VerdictOutput
from tests.fake_endpoint import HttpFault, request_field, user_text
from tests.verdict_scripts import VerdictScript, verdict_question_set


@pytest.fixture
def fake_lm(cli_scripted_lms):
    """Make every --lm value resolve to a scripted LM (`cli_scripted_lms`); returns the engines made."""
    return cli_scripted_lms


def write_items(path: Path, outputs: dict[str, str]) -> Path:
    rows = [{"id": k, "input": f"README section {k}", "output": v} for k, v in outputs.items()]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


OUTPUTS = {"short-doc": "Run `bineval evaluate` to judge items.", "long-doc": "word " * 80,
           "other-doc": "Install with pip. Then run the tests."}


def evaluate(tmp_path, aggregation, *extra):
    qs = verdict_question_set().save(tmp_path / "qs.json")
    items = write_items(tmp_path / "items.jsonl", OUTPUTS)
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["evaluate", str(qs), str(items), "--id-field", "id", "--out", str(out),
                                      "--aggregation", aggregation, *extra])
    return result, out, qs, items


def numeric_score_keys(value, path=""):
    """Paths of keys that carry a score (yes-rate) anywhere in a JSON value."""
    found = []
    if isinstance(value, dict):
        for k, v in value.items():
            if any(w in k for w in ("score", "overall", "yes_rate")):
                found.append(f"{path}.{k}")
            found += numeric_score_keys(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += numeric_score_keys(v, f"{path}[{i}]")
    return found


def test_verdict_mode_prints_verdicts_grounds_and_check_evidence_without_any_score(tmp_path, fake_lm):
    fake_lm(VerdictScript(judge={"Does it show a runnable example?": "no"}, labels=["Keep"],
                          refutations=["Is there an example?"]))
    result, out, _, _ = evaluate(tmp_path, "verdict")
    assert result.exit_code == 0, result.output
    text = result.output
    assert "short-doc: Keep -> nothing" in text  # a non-fatal "no" is a ground; the LM's Keep stands
    assert "- example [lm] Does it show a runnable example?: scripted no" in text
    assert "long-doc: Improve -> open an edit task" in text
    assert "fatal rule: fatal question(s) short answered no, so code set 'Improve'" in text
    assert "grounds (every no):" in text and "- short [code, fatal]" in text and "80 words; bounds [-, 50]" in text
    assert "code checks:" in text and "short (word_count): no - 80 words" in text
    assert "yes-rate" not in text and "overall" not in text and "mean score" not in text
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and numeric_score_keys(rows) == []
    assert not (out / "summary.json").exists()
    doc = json.loads((out / "verdicts.json").read_text())
    assert numeric_score_keys(doc) == []
    parsed = VerdictOutput.model_validate(doc)
    assert parsed.counts == {"Keep": 2, "Improve": 1, "Retire": 0, "unparsed": 0}
    long_doc = next(i for i in parsed.items if i.item_id == "long-doc")
    assert long_doc.decided_by == "fatal_rule" and [g.question_id for g in long_doc.grounds] == ["short", "example"]
    assert long_doc.grounds[0].answered_by == "code" and long_doc.grounds[0].data == {"words": 80}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["aggregation"] == "verdict" and manifest["config"]["pressure_test"] == "non-pass"
    assert (out / "question_set.json").is_file()


def test_both_mode_writes_scores_and_verdicts(tmp_path, fake_lm):
    fake_lm(VerdictScript(labels=["Keep"]))
    result, out, _, _ = evaluate(tmp_path, "both", "--pressure-test", "never")
    assert result.exit_code == 0, result.output
    assert "mean yes-rate" in result.output and "short-doc: Keep" in result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["items"] == 3
    doc = VerdictOutput.model_validate_json((out / "verdicts.json").read_text())
    assert doc.aggregation == "both" and all(i.scores is not None for i in doc.items)
    long_doc = next(i for i in doc.items if i.item_id == "long-doc")
    assert long_doc.scores.counts["form"].no == 1


def test_score_mode_is_unchanged_by_verdict_fields(tmp_path, fake_lm):
    engines = fake_lm(VerdictScript())
    result, out, _, _ = evaluate(tmp_path, "score")
    assert result.exit_code == 0, result.output
    assert not (out / "verdicts.json").exists()
    rows = [ItemResult.model_validate_json(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert all(r.named_verdict is None and r.score_card is not None for r in rows)
    assert not any("allowed_labels" in c for c in engines[0].calls)  # no label picking in score mode
    assert "aggregation" not in json.loads((out / "manifest.json").read_text())["config"]


def test_verdict_mode_without_labels_fails_before_any_lm_work(tmp_path, small_question_set, items_file, fake_lm):
    engines = fake_lm(VerdictScript())
    qs = small_question_set.save(tmp_path / "qs.json")
    result = CliRunner().invoke(cli, ["evaluate", str(qs), str(items_file), "--input-field", "source",
                                      "--output-field", "summary", "--aggregation", "verdict",
                                      "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "verdict_policy" in result.output
    assert engines == [] and not (tmp_path / "r").exists()


def test_resume_with_another_aggregation_is_refused(tmp_path, fake_lm):
    fake_lm(VerdictScript())
    result, out, qs, items = evaluate(tmp_path, "verdict")
    assert result.exit_code == 0, result.output
    again = CliRunner().invoke(cli, ["evaluate", str(qs), str(items), "--id-field", "id", "--out", str(out)])
    assert again.exit_code == 2 and "aggregation" in again.output


CHECKS_MODULE = '''
from binaryeval_dspy.checks import register_check

@register_check("mentions_pip")
def mentions_pip(text: str):
    return "pip" in text, "looked for 'pip'"
'''


def write_checks_module_set(tmp_path: Path) -> tuple[Path, Path, Path]:
    """my_checks.py (`CHECKS_MODULE`), a question set whose third question is its check
    ``mentions_pip``, and the items file."""
    module = tmp_path / "my_checks.py"
    module.write_text(textwrap.dedent(CHECKS_MODULE), encoding="utf-8")
    data = verdict_question_set().model_dump(mode="json")
    data["questions"][2]["check"] = {"name": "mentions_pip"}
    qs = tmp_path / "qs.json"
    qs.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return module, qs, write_items(tmp_path / "items.jsonl", OUTPUTS)


def test_checks_module_option_registers_user_checks(tmp_path, fake_lm):
    fake_lm(VerdictScript(labels=["Keep"]))
    module, qs, items = write_checks_module_set(tmp_path)
    try:
        missing = CliRunner().invoke(cli, ["evaluate", str(qs), str(items), "--id-field", "id", "--aggregation",
                                           "verdict", "--out", str(tmp_path / "r0")])
        message = " ".join(missing.output.split())
        assert missing.exit_code == 2 and "unknown check 'mentions_pip'" in message
        assert "id 'topic'" in message  # the question is named
        result = CliRunner().invoke(cli, ["evaluate", str(qs), str(items), "--id-field", "id", "--aggregation",
                                          "verdict", "--checks-module", str(module), "--out", str(tmp_path / "r")])
        assert result.exit_code == 0, result.output
        assert "topic (mentions_pip): yes - looked for 'pip'" in result.output
        manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
        assert manifest["config"]["checks_modules"][0]["module"] == str(module)
        bad = CliRunner().invoke(cli, ["evaluate", str(qs), str(items), "--checks-module",
                                       str(tmp_path / "absent.py")])
        assert bad.exit_code == 2 and "absent.py" in bad.output
    finally:
        unregister_check("mentions_pip")


# ------------------------------------------------------------------ rejudge
def test_rejudge_refuses_a_changed_question_set(tmp_path, fake_lm):
    fake_lm(VerdictScript())
    result, out, qs, items = evaluate(tmp_path, "verdict")
    assert result.exit_code == 0, result.output
    data = json.loads(qs.read_text())
    data["questions"][1]["text"] = "Does it show a runnable example with output?"
    qs.write_text(json.dumps(data, indent=2), encoding="utf-8")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    refused = CliRunner().invoke(cli, ["rejudge", str(out), str(items), "--question-set", str(qs),
                                       "--out", str(tmp_path / "new")])
    assert refused.exit_code == 2
    message = " ".join(refused.output.split())
    assert "question set changed" in message and "questions edited: ['example']" in message
    assert "moved bar" in message and "bineval evaluate" in message
    assert not (tmp_path / "new").exists()
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_rejudge_judges_only_changed_outputs_and_reports_changed_verdicts(tmp_path, fake_lm):
    script = VerdictScript(labels=["Keep"])
    engines = fake_lm(script)
    result, out, _, items = evaluate(tmp_path, "verdict")
    assert result.exit_code == 0, result.output
    old_results = (out / "results.jsonl").read_bytes()
    changed = dict(OUTPUTS, **{"long-doc": "Now a short page. Run `pip install`.", "new-doc": "A new page."})
    del changed["other-doc"]
    write_items(items, changed)
    calls_before = len(engines[0].calls)
    new_dir = tmp_path / "rejudged"
    result = CliRunner().invoke(cli, ["rejudge", str(out), str(items), "--out", str(new_dir)])
    assert result.exit_code == 0, result.output
    new_calls = engines[1].calls
    assert all("short-doc" not in c for c in new_calls)  # the unchanged item is not judged again
    assert any("Now a short page" in c for c in new_calls) and any("A new page." in c for c in new_calls)
    assert len(engines[0].calls) == calls_before
    report = RejudgeReport.model_validate_json((new_dir / "rejudge.json").read_text())
    status = {c.item_id: c.status for c in report.items}
    assert status == {"short-doc": "unchanged", "long-doc": "rejudged", "new-doc": "new", "other-doc": "removed"}
    long_doc = next(c for c in report.items if c.item_id == "long-doc")
    assert (long_doc.old_verdict, long_doc.new_verdict, long_doc.changed) == ("Improve", "Keep", True)
    assert long_doc.flipped_questions == ["short"]
    assert report.changed == ["long-doc"]
    assert "old_overall" not in (new_dir / "rejudge.json").read_text()  # no score in verdict mode
    assert "1 verdict(s) changed: long-doc" in " ".join(result.output.split())
    assert (out / "results.jsonl").read_bytes() == old_results  # the previous run is untouched
    ids = [json.loads(line)["item_id"] for line in (new_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(ids) == ["long-doc", "new-doc", "short-doc"]
    doc = VerdictOutput.model_validate_json((new_dir / "verdicts.json").read_text())
    assert [i.item_id for i in doc.items] == ["short-doc", "long-doc", "new-doc"]
    # rerunning the same command resumes: nothing left to judge
    again = CliRunner().invoke(cli, ["rejudge", str(out), str(items), "--out", str(new_dir)])
    assert again.exit_code == 0, again.output
    assert engines[2].calls == []


def test_rejudge_refuses_to_overwrite_or_switch_lm(tmp_path, fake_lm):
    fake_lm(VerdictScript())
    result, out, _, items = evaluate(tmp_path, "verdict")
    assert result.exit_code == 0, result.output
    same = CliRunner().invoke(cli, ["rejudge", str(out), str(items), "--out", str(out)])
    assert same.exit_code == 2 and "overwrite" in " ".join(same.output.split())
    fake_lm(VerdictScript(), name="another-lm")
    other = CliRunner().invoke(cli, ["rejudge", str(out), str(items)])
    message = " ".join(other.output.split())
    assert other.exit_code == 2 and "another-lm" in message and "mix two evaluators" in message


def test_rejudge_in_score_mode_compares_overall_scores(tmp_path, fake_lm):
    fake_lm(VerdictScript())
    result, out, _, items = evaluate(tmp_path, "score")
    assert result.exit_code == 0, result.output
    write_items(items, dict(OUTPUTS, **{"long-doc": "short now."}))
    result = CliRunner().invoke(cli, ["rejudge", str(out), str(items)])
    assert result.exit_code == 0, result.output
    new_dir = tmp_path / "run-rejudge-1"
    report = RejudgeReport.model_validate_json((new_dir / "rejudge.json").read_text())
    long_doc = next(c for c in report.items if c.item_id == "long-doc")
    assert long_doc.old_overall == pytest.approx(2 / 3) and long_doc.new_overall == 1.0 and long_doc.changed
    assert (new_dir / "summary.json").is_file()


def test_rejudge_of_a_non_run_directory(tmp_path, fake_lm):
    fake_lm(VerdictScript())
    items = write_items(tmp_path / "items.jsonl", OUTPUTS)
    result = CliRunner().invoke(cli, ["rejudge", str(tmp_path / "nothing"), str(items)])
    assert result.exit_code == 2 and "not a run directory" in " ".join(result.output.split())


def test_rejudge_names_the_checks_module_the_run_used(tmp_path, fake_lm):
    fake_lm(VerdictScript())
    module, qs, items = write_checks_module_set(tmp_path)
    out = tmp_path / "run"
    try:
        result = CliRunner().invoke(cli, ["evaluate", str(qs), str(items), "--id-field", "id", "--aggregation",
                                          "verdict", "--checks-module", str(module), "--out", str(out)])
        assert result.exit_code == 0, result.output
        unregister_check("mentions_pip")
        refused = CliRunner().invoke(cli, ["rejudge", str(out), str(items)])
        message = " ".join(refused.output.split())
        assert refused.exit_code == 2 and "unknown check 'mentions_pip'" in message
        assert f"loaded checks from ['{module}']" in message
        again = CliRunner().invoke(cli, ["rejudge", str(out), str(items), "--checks-module", str(module)])
        assert again.exit_code == 0, again.output
    finally:
        unregister_check("mentions_pip")


# --------------------------------------------------------------------------- failed calls in verdict mode

EXAMPLE_Q, TOPIC_Q = "Does it show a runnable example?", "Does it stay on one topic?"
SERVER_ERROR_NOW = HttpFault(500, "Internal server error (scripted)", retry_after=0)


def serve_script(endpoint, script: VerdictScript) -> None:
    """Let the fake endpoint answer every verdict-mode signature with `script` (JSON replies)."""
    endpoint.reply = lambda body: script("", user_text(body))


def evaluate_over_http(tmp_path, endpoint, outputs, *extra):
    qs = verdict_question_set().save(tmp_path / "qs.json")
    items = write_items(tmp_path / "items.jsonl", outputs)
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["evaluate", str(qs), str(items), "--id-field", "id", "--out", str(out),
                                      "--aggregation", "verdict", "--pressure-test", "never",
                                      "--lm", endpoint.base_url, "--lm-model", endpoint.model, *extra])
    return result, out


def is_pick(body) -> bool:
    return "[[ ## allowed_labels ## ]]" in user_text(body)


def test_a_failed_label_pick_keeps_every_answer_and_a_rerun_asks_only_what_is_missing(tmp_path, fake_endpoint):
    # The tester's reproduction: one LM question and the label pick get HTTP 500 after every retry.
    serve_script(fake_endpoint, VerdictScript(labels=["Improve"]))
    fake_endpoint.fault = lambda body, _i: SERVER_ERROR_NOW if (
        is_pick(body) or request_field(body, "question") == TOPIC_Q) else None
    outputs = {k: OUTPUTS[k] for k in ("short-doc", "long-doc")}
    result, out = evaluate_over_http(tmp_path, fake_endpoint, outputs)
    assert result.exit_code == 0, result.output  # incomplete items, no --fail-on-errors
    assert "No LM call succeeded" not in result.output  # the example question was answered for each item
    assert "2 item(s) incomplete" in result.output
    rows = {r["item_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    for item_id, words in (("short-doc", 6), ("long-doc", 80)):
        row = rows[item_id]
        # stored with every answer it got, marked incomplete; the pick failure is the item's error, not a verdict
        assert row["complete"] is False and row["questions_answered"] == 2 and row["status"] == "error", row
        assert "named_verdict" not in row
        assert row["error"].startswith("label not decided: ") and "Internal server error" in row["error"]
        verdicts = {v["question_id"]: v for v in row["verdicts"]}
        assert verdicts["short"]["source"] == "code" and verdicts["short"]["evidence"] == {"words": words}
        assert verdicts["example"]["verdict"] == "yes"
        assert verdicts["topic"]["verdict"] == "error" and "Internal server error" in verdicts["topic"]["error"]
    doc = VerdictOutput.model_validate_json((out / "verdicts.json").read_text())
    assert doc.items == [] and doc.counts["error"] == 2  # counted, never given a label

    fake_endpoint.fault = None
    before = len(fake_endpoint.requests)
    again = CliRunner().invoke(cli, ["evaluate", str(tmp_path / "qs.json"), str(tmp_path / "items.jsonl"),
                                     "--id-field", "id", "--out", str(out), "--aggregation", "verdict",
                                     "--pressure-test", "never", "--lm", fake_endpoint.base_url,
                                     "--lm-model", fake_endpoint.model])
    assert again.exit_code == 0, again.output
    asked = fake_endpoint.requests[before:]
    # per item: the unanswered question and the pick again, nothing else
    assert sorted("pick" if is_pick(b) else request_field(b, "question") for b in asked) == [
        TOPIC_Q, TOPIC_Q, "pick", "pick"]
    rows = [ItemResult.model_validate_json(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert all(r.complete and r.status == "scored" and r.named_verdict.label == "Improve" for r in rows)
    assert all(v.verdict == "yes" for r in rows for v in r.verdicts if v.source == "lm")


def test_verdicts_json_says_which_items_are_incomplete(tmp_path, fake_endpoint):
    serve_script(fake_endpoint, VerdictScript(labels=["Improve"]))
    fake_endpoint.fault = lambda body, _i: SERVER_ERROR_NOW if (
        request_field(body, "question") == TOPIC_Q and OUTPUTS["other-doc"] in user_text(body)) else None
    result, out = evaluate_over_http(tmp_path, fake_endpoint, OUTPUTS)
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "verdicts.json").read_text())
    by_id = {i["item_id"]: i for i in doc["items"]}
    other = by_id["other-doc"]  # its label was decided without the topic question's answer
    assert other["status"] == "decided" and other["verdict"] == "Improve"
    assert (other["complete"], other["questions_answered"], other["questions_total"]) == (False, 2, 3)
    assert [e["answer"] for e in other["evidence"] if e["question_id"] == "topic"] == ["error"]
    for item_id in ("short-doc", "long-doc"):
        item = by_id[item_id]
        assert (item["complete"], item["questions_answered"], item["questions_total"]) == (True, 3, 3), item
    assert "other-doc: Improve" in result.output
    assert "incomplete: 2 of 3 questions answered" in result.output
    assert result.output.count("questions answered (failed calls)") == 1  # the complete items say nothing
    VerdictOutput.model_validate(doc)


def test_a_pick_that_alone_failed_is_named_on_the_terminal(tmp_path, fake_endpoint):
    serve_script(fake_endpoint, VerdictScript(labels=["Improve"]))
    fake_endpoint.fault = lambda body, _i: SERVER_ERROR_NOW if is_pick(body) else None
    result, _out = evaluate_over_http(tmp_path, fake_endpoint, {"short-doc": OUTPUTS["short-doc"]})
    said = " ".join(result.output.split())
    assert result.exit_code == 0 and "label not decided" in said, said  # every question answered, the pick failed

"""Issue 30: `bineval view` and two-run comparisons state only what the run files hold.

* user-chosen names (dimension, question id, item id) are data: every name of
  ``Object.prototype`` is shown as itself, never as a built-in property of the page's objects;
* a damaged run is shown as what it is: every unreadable line of ``results.jsonl`` is counted
  and named, and a ``summary.json`` that does not match the results is rebuilt and flagged;
* every error's fix names an option of `view` itself (its ``--out`` is the page file);
* two runs are compared like with like: questions matched by id and text (reworded, added and
  removed listed apart, the earlier wording kept), scores on one scale.

Runs are made by `bineval evaluate` on scripted LMs (plumbing, never a model's judgment).
Tests marked ``browser`` render the page in headless Chromium (skipped without it).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from urllib.parse import quote

import pytest
from click.testing import CliRunner

from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.cli.view_command import view_command
from binaryeval_dspy.reports.run_view import compare_loaded_runs, load_run, view_data, write_view
from binaryeval_dspy.schemas.question_set import BinaryQuestion, QuestionSet
from tests.fakes import field_value
from tests.headless_chromium import DomReader, dump_dom, find_chromium
from tests.reports.test_benchmark_run import data_dir, scripted, tasks_dir  # noqa: F401 - fixtures

#: every property name an object literal inherits in JavaScript (Object.prototype's own names)
PROTOTYPE_NAMES = ["constructor", "__proto__", "toString", "toLocaleString", "valueOf", "hasOwnProperty",
                   "isPrototypeOf", "propertyIsEnumerable", "__defineGetter__", "__defineSetter__",
                   "__lookupGetter__", "__lookupSetter__"]

needs_chromium = pytest.mark.skipif(find_chromium() is None,
                                    reason="needs Debian's chromium package (apt-get install chromium)")


def _yes_unless_no(system: str, user: str):
    """yes, except "no" to a question whose text says "(no)" or when the output says "bad"."""
    question, output = field_value(user, "question"), field_value(user, "output")
    verdict = "no" if "(no)" in question or ("bad" in output and "numbers" in question) else "yes"
    return {"explanation": f"scripted {verdict}", "verdict": verdict}


def evaluate(tmp_path: Path, install, name: str, question_set: QuestionSet, outputs: dict[str, str], *extra: str,
             script=_yes_unless_no) -> Path:
    install(script)
    qs = question_set.save(tmp_path / f"{name}-qs.json")
    items = tmp_path / f"{name}-items.jsonl"
    items.write_text("".join(json.dumps({"id": k, "input": f"Source of {k}.", "output": v}) + "\n"
                             for k, v in outputs.items()), encoding="utf-8")
    out = tmp_path / name
    result = CliRunner().invoke(cli, ["evaluate", str(qs), str(items), "--id-field", "id", "--out", str(out),
                                      "--empty-output", "record", *extra])
    assert result.exit_code == 0, result.output
    return out


def _page(path: Path, fragment: str = "") -> DomReader:
    return DomReader(dump_dom(path.resolve().as_uri() + fragment))


def _rows(dom: DomReader, table_id: str) -> list:
    table = dom.root.by_id(table_id)
    assert table is not None, f"no #{table_id} in the rendered page"
    return table.find_all("tbody")[0].find_all("tr")


# ------------------------------------------------------------------ names that are JavaScript's own

@pytest.fixture
def prototype_run(tmp_path, cli_scripted_lms) -> Path:
    """One dimension and one question per prototype name (the question id is the name too);
    items named after three of them, one with an empty output (no score at all)."""
    qs = QuestionSet(task_prompt="Summarize.", dimensions=PROTOTYPE_NAMES, questions=[
        BinaryQuestion(id=name, dimension=name, text=f"Is {name} fine{' (no)' if name == 'valueOf' else ''}?")
        for name in PROTOTYPE_NAMES])
    outputs = {"constructor": "A summary.", "__proto__": "", "toString": "Another summary."}
    return evaluate(tmp_path, cli_scripted_lms, "proto", qs, outputs)


def test_prototype_names_are_carried_as_data(prototype_run):
    run = view_data(prototype_run)["run"]
    assert run["dimensions"] == PROTOTYPE_NAMES
    items = {i["id"]: i for i in run["items"]}
    assert set(items) == {"constructor", "__proto__", "toString"}
    assert items["__proto__"]["status"] == "empty_output" and items["__proto__"]["scores"] == {}
    assert items["constructor"]["scores"]["valueOf"] == 0.0 and items["constructor"]["scores"]["constructor"] == 1.0


@pytest.mark.browser
@needs_chromium
def test_prototype_names_never_show_a_built_in_property(prototype_run, tmp_path):
    page = write_view(prototype_run, out=tmp_path / "proto.html")
    dom = _page(page, "#tab=items")
    header = [th.attrs.get("data-sort") for th in dom.root.by_id("items-table").find_all("th")]
    assert [h for h in header if h and h.startswith("dim:")] == [f"dim:{n}" for n in PROTOTYPE_NAMES]
    rows = {row.attrs["data-item"]: [td.text for td in row.find_all("td")] for row in _rows(dom, "items-table")}
    assert set(rows) == {"constructor", "__proto__", "toString"}
    first_dim = 3  # "#", item, status, then one column per dimension
    empty = rows["__proto__"][first_dim:first_dim + len(PROTOTYPE_NAMES)]
    assert empty == ["—"] * len(PROTOTYPE_NAMES), empty  # no score: never "function Object() ..." or "[object Object]"
    scored = dict(zip(PROTOTYPE_NAMES, rows["constructor"][first_dim:first_dim + len(PROTOTYPE_NAMES)]))
    assert scored["valueOf"] == "0.00" and scored["constructor"] == "1.00" and scored["__proto__"] == "1.00"
    text = dom.root.text
    assert "native code" not in text and "[object Object]" not in text
    # every name as a filter, a sort key and an opened item, set through the URL as a link would
    for name in ("constructor", "__proto__", "hasOwnProperty"):
        dom = _page(page, f"#tab=items&sort=dim:{quote(name)}&dir=desc&min=0&dim={quote(name)}")
        assert [r.attrs["data-item"] for r in _rows(dom, "items-table")] == ["constructor", "toString"], name
        assert "native code" not in dom.root.text and "[object Object]" not in dom.root.text
    no = _page(page, "#tab=items&q=valueOf&verdict=no")
    assert [r.attrs["data-item"] for r in _rows(no, "items-table")] == ["constructor", "toString"]
    detail = _page(page, "#tab=items&item=__proto__").root.by_id("detail")
    assert detail is not None and detail.attrs["data-item"] == "__proto__"
    assert "native code" not in detail.text and "[object Object]" not in detail.text


# ------------------------------------------------------------------ a damaged run shown as what it is

QS = QuestionSet(task_prompt="Summarize.", dimensions=["consistency", "fluency"], questions=[
    BinaryQuestion(id="c1", dimension="consistency", text="Are the numbers right?"),
    BinaryQuestion(id="c2", dimension="consistency", text="Is every name right?"),
    BinaryQuestion(id="f1", dimension="fluency", text="Is it grammatical?")])
OUTPUTS = {"item-0": "A good summary.", "item-1": "A bad summary.", "item-2": "Fine text."}


@pytest.fixture
def run_dir(tmp_path, cli_scripted_lms) -> Path:
    return evaluate(tmp_path, cli_scripted_lms, "run", QS, OUTPUTS)


def test_a_half_written_last_line_is_counted_and_named(run_dir):
    results = run_dir / "results.jsonl"
    lines = results.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = lines[-1][:57]
    results.write_text("".join(lines[:-1]) + cut, encoding="utf-8")  # a run killed mid-write
    run = view_data(run_dir)["run"]
    assert [i["id"] for i in run["items"]] == ["item-0", "item-1"]
    note = next(n for n in run["notes"] if "could not be read" in n)
    assert "1 of 3 lines" in note and "line 3 (an incomplete last line of 57 bytes" in note, note
    assert results.read_text(encoding="utf-8").endswith(cut)  # read, never trimmed


def test_a_damaged_line_in_the_middle_is_named_and_the_rest_shown(run_dir):
    results = run_dir / "results.jsonl"
    lines = results.read_text(encoding="utf-8").splitlines(keepends=True)
    damaged = json.loads(lines[1])
    damaged["verdicts"][0]["verdict"] = "maybe"
    lines[1] = json.dumps(damaged) + "\n"
    results.write_text("".join(lines), encoding="utf-8")
    run = view_data(run_dir)["run"]
    assert [i["id"] for i in run["items"]] == ["item-0", "item-2"]
    note = next(n for n in run["notes"] if "could not be read" in n)
    assert "1 of 3 lines" in note and "line 2 (field 'verdicts.0.verdict'" in note, note


def test_a_summary_from_another_session_with_the_same_item_count_is_rebuilt_and_flagged(tmp_path, cli_scripted_lms,
                                                                                     run_dir):
    other = evaluate(tmp_path, cli_scripted_lms, "other", QS, OUTPUTS,
                     script=lambda s, u: {"explanation": "scripted no", "verdict": "no"})
    shutil.copy(other / "summary.json", run_dir / "summary.json")  # 3 items too, every answer "no"
    run = view_data(run_dir)["run"]
    rows = {r["dimension"]: r for r in run["summary"]["rows"]}
    assert rows["consistency"]["yes"] == 5 and rows["consistency"]["no"] == 1  # what results.jsonl holds
    assert rows["fluency"]["mean_score"] == pytest.approx(1.0)
    note = next(n for n in run["notes"] if "does not match" in n)
    assert "summary.json does not match results.jsonl" in note and "consistency mean yes-rate: 0 in summary.json" in note
    # the summary a run wrote itself is used as it is, with no note
    clean = view_data(other)["run"]
    assert not any("summary.json" in n for n in clean["notes"])


@pytest.mark.browser
@needs_chromium
def test_the_page_shows_the_damage_above_every_tab(run_dir, tmp_path):
    results = run_dir / "results.jsonl"
    text = results.read_text(encoding="utf-8")
    results.write_text(text[:-40], encoding="utf-8")
    page = write_view(run_dir, out=tmp_path / "damaged.html")
    for tab in ("summary", "items", "questions"):
        notes = _page(page, f"#tab={tab}").root.by_id("notes")
        assert notes is not None and "line 3 (an incomplete last line" in notes.text, tab


# ------------------------------------------------------------------ every fix names an option of view

def _flags_named(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text))


def _view_options() -> set[str]:
    return {opt for param in view_command.params for opt in getattr(param, "opts", []) if opt.startswith("--")}


@pytest.mark.parametrize("damage", ["manifest", "no-manifest", "not-a-directory", "empty-folder", "page-unwritable"])
def test_every_view_error_names_only_options_of_view(run_dir, tmp_path, damage):
    args = [str(run_dir)]
    if damage == "manifest":
        (run_dir / "manifest.json").write_text('{"schema_version": 1, "command": ', encoding="utf-8")
    elif damage == "no-manifest":
        (run_dir / "manifest.json").unlink()
    elif damage == "not-a-directory":
        args = [str(run_dir / "results.jsonl")]
    elif damage == "empty-folder":
        (tmp_path / "empty").mkdir()
        args = [str(tmp_path / "empty")]
    else:
        (tmp_path / "taken").write_text("a file, not a folder")
        args += ["--out", str(tmp_path / "taken" / "page.html")]
    result = CliRunner().invoke(cli, ["view", *args])
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    assert "Fix:" in message, message
    assert _flags_named(message) <= _view_options(), message
    if damage != "page-unwritable":  # view's --out is the page it writes: no remedy for a run it reads
        assert "--out" not in message, message
    assert "new directory" not in message and "out_dir" not in message, message


# ------------------------------------------------------------------ two runs, like with like

def _with(qs: QuestionSet, **texts: str) -> QuestionSet:
    """`qs` with the questions of `texts` reworded under their ids."""
    return qs.model_copy(update={"questions": [q.model_copy(update={"text": texts[q.id]}) if q.id in texts else q
                                               for q in qs.questions]})


def test_a_reworded_question_is_listed_apart_with_its_earlier_wording(tmp_path, cli_scripted_lms):
    before = evaluate(tmp_path, cli_scripted_lms, "before", QS, OUTPUTS)
    # c2 keeps its id but asks the opposite: every answer to it turns to "no"
    reworded = _with(QS, c2="Is any name wrong (no)?")
    after = evaluate(tmp_path, cli_scripted_lms, "after", reworded, OUTPUTS)
    diff = compare_loaded_runs(load_run(before), load_run(after))
    assert diff["reworded"] == [{"id": "c2", "before": "Is every name right?", "after": "Is any name wrong (no)?",
                                 "before_dimension": "consistency", "after_dimension": "consistency"}]
    assert not diff["same_questions"] and diff["matched_by"] == "id and text"
    assert all(not item["flips"] for item in diff["items"])  # a changed question is no changed answer
    assert {item["status"] for item in diff["items"]} == {"questions_changed"}
    assert all(item["other_questions"] == [{"q": "c2", "old": "yes", "new": "no", "change": "reworded"}]
               for item in diff["items"])
    row = next(q for q in diff["questions"] if q["id"] == "c2")
    assert (row["change"], row["before_text"], row["flipped"]) == ("reworded", "Is every name right?", 0)
    assert row["answers_before"] == {"yes": 3} and row["answers_after"] == {"no": 3}
    assert any("c2" in n and "never counted as changed" in n for n in diff["notes"])


def test_a_question_asked_only_in_the_earlier_run_stays_in_the_per_question_table(tmp_path, cli_scripted_lms):
    before = evaluate(tmp_path, cli_scripted_lms, "before", QS, OUTPUTS)
    fewer = QS.model_copy(update={"questions": QS.questions[:2] + [
        BinaryQuestion(id="f2", dimension="fluency", text="Is it short?")]})
    after = evaluate(tmp_path, cli_scripted_lms, "after", fewer, OUTPUTS)
    diff = compare_loaded_runs(load_run(before), load_run(after))
    questions = {q["id"]: q for q in diff["questions"]}
    assert set(questions) == {"c1", "c2", "f1", "f2"}
    assert questions["f1"]["change"] == "removed" and questions["f1"]["text"] == "Is it grammatical?"
    assert questions["f1"]["answers_before"] == {"yes": 3} and questions["f1"]["answers_after"] == {}
    assert questions["f2"]["change"] == "added"
    assert diff["removed"] == [{"id": "f1", "text": "Is it grammatical?"}]
    assert diff["added"] == [{"id": "f2", "text": "Is it short?"}]
    assert all(item["old_overall"] is None for item in diff["items"])  # over other questions: not compared


def test_identical_verdicts_on_another_scale_change_no_item(tmp_path, cli_scripted_lms):
    before = evaluate(tmp_path, cli_scripted_lms, "before", QS, OUTPUTS)
    after = evaluate(tmp_path, cli_scripted_lms, "after", QS, OUTPUTS, "--scale", "1", "5")
    diff = compare_loaded_runs(load_run(before), load_run(after))
    assert {item["status"] for item in diff["items"]} == {"unchanged"}
    assert diff["score_basis"] == {"scaled": False, "scale": [0.0, 1.0]}
    assert all(item["old_overall"] == item["new_overall"] for item in diff["items"])
    assert any("different scales ([0, 1] earlier, [1, 5] later)" in n for n in diff["notes"])
    same_scale = compare_loaded_runs(load_run(after), load_run(after))
    assert same_scale["score_basis"] == {"scaled": True, "scale": [1.0, 5.0]} and not same_scale["notes"]


def test_a_flipped_answer_to_the_same_question_is_still_a_change(tmp_path, cli_scripted_lms):
    before = evaluate(tmp_path, cli_scripted_lms, "before", QS, OUTPUTS)
    after = evaluate(tmp_path, cli_scripted_lms, "after", QS, {**OUTPUTS, "item-0": "A bad summary now."})
    diff = compare_loaded_runs(load_run(before), load_run(after))
    first = diff["items"][0]
    assert (first["id"], first["status"]) == ("item-0", "changed")
    assert [(f["q"], f["old"], f["new"]) for f in first["flips"]] == [("c1", "yes", "no")]
    assert {item["status"] for item in diff["items"][1:]} == {"unchanged"}


@pytest.mark.browser
@needs_chromium
def test_the_compare_tab_lists_reworded_and_removed_questions(tmp_path, cli_scripted_lms):
    before = evaluate(tmp_path, cli_scripted_lms, "before", QS, OUTPUTS)
    changed = _with(QS, c2="Is any name wrong (no)?")
    changed = changed.model_copy(update={"questions": changed.questions[:2]})  # f1 removed
    after = evaluate(tmp_path, cli_scripted_lms, "after", changed, OUTPUTS, "--scale", "1", "5")
    page = write_view(after, before, out=tmp_path / "compare.html")
    dom = _page(page, "#tab=compare")
    reworded = _rows(dom, "compare-reworded")
    assert [r.attrs["data-question"] for r in reworded] == ["c2"]
    assert reworded[0].find_all("td", class_="q-before")[0].text == "Is every name right?"
    assert [r.attrs["data-question"] for r in _rows(dom, "compare-removed")] == ["f1"]
    per_question = {r.attrs["data-question"]: r.attrs["data-change"] for r in _rows(dom, "compare-questions")}
    assert per_question == {"c1": "same", "c2": "reworded", "f1": "removed"}
    assert {r.attrs["data-status"] for r in _rows(dom, "compare-items")} == {"questions_changed"}
    notes = " ".join(n.text for n in dom.root.find_all("div", class_="compare-note"))
    assert "different scales" in notes and "c2" in notes
    changed_only = _page(page, "#tab=items&changed=1")
    assert _rows(changed_only, "items-table") == []  # nothing changed in the outputs



@pytest.mark.parametrize("damage", ["rejudge.json", "benchmark.json", "benchmark items.jsonl", "comparison config.json"])
def test_every_view_error_about_a_damaged_run_file_names_it_and_only_views_options(tmp_path, cli_scripted_lms,
                                                                                  damage, request):
    if damage == "rejudge.json":
        run = evaluate(tmp_path, cli_scripted_lms, "run", QS, OUTPUTS)
        again = CliRunner().invoke(cli, ["rejudge", str(run), str(tmp_path / "run-items.jsonl"), "--out",
                                         str(tmp_path / "again")])
        assert again.exit_code == 0, again.output
        target, damaged = tmp_path / "again", tmp_path / "again" / "rejudge.json"
        damaged.write_text('{"schema_version": 1, "items": [', encoding="utf-8")
    elif damage.startswith("benchmark"):
        from tests.reports.test_benchmark_run import _run as run_cli

        data, tasks = request.getfixturevalue("data_dir"), request.getfixturevalue("tasks_dir")
        target = tmp_path / "bench"
        made = run_cli(["benchmark", "summeval", "--data-dir", str(data), "--tasks-dir", str(tasks), "--out",
                        str(target), "--methods", "rouge", "--no-figures", "--bootstrap", "20", "--limit", "4"])
        assert made.exit_code == 0, made.output
        damaged = target / damage.split()[-1]
        damaged.write_text('{"item_id": ', encoding="utf-8")
    else:
        target = tmp_path / "cmp"
        (target / "gepa").mkdir(parents=True)
        (target / "gepa" / "result.json").write_text("{}", encoding="utf-8")
        damaged = target / "config.json"
        damaged.write_text('{"optimizers": ', encoding="utf-8")
    result = CliRunner().invoke(cli, ["view", str(target)])
    assert result.exit_code == 2, (result.output, result.exception)
    message = " ".join(result.output.split())
    assert str(damaged) in message and "Fix:" in message, message
    assert _flags_named(message) <= _view_options() and "--out" not in message, message
    assert "new directory" not in message and "out_dir" not in message, message

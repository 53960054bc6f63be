"""Every saved model refuses a file from a newer or an older binaryeval-dspy with one message.

Newer: "written by a newer binaryeval-dspy (schema_version N; this version reads M); upgrade:
pip install -U binaryeval-dspy". Older: "... an older binaryeval-dspy ... and there is no
migration; <what to do>". Where a model is read from a file, the error names the file.
"""

import json

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from binaryeval_dspy.cli import common
from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.engines.batch_journal import BatchState, BatchStore
from binaryeval_dspy.errors import InputError, QuestionSetError
from binaryeval_dspy.ifbench.evaluation import IFBenchResult
from binaryeval_dspy.meta_eval.benchmark_files import BenchmarkRun, BenchmarkRunConfig
from binaryeval_dspy.meta_eval.method_run import MethodItemResult
from binaryeval_dspy.runs.run_directory import RunDirectory
from binaryeval_dspy.schemas.item_result import ItemResult
from binaryeval_dspy.schemas.optimization_history import OptimizationHistory
from binaryeval_dspy.schemas.question_set import QuestionSet
from binaryeval_dspy.schemas.rejudge_report import RejudgeReport
from binaryeval_dspy.schemas.rubric import Rubric
from binaryeval_dspy.schemas.run_manifest import RunManifest
from binaryeval_dspy.schemas.verdict_output import VerdictOutput, verdict_output_json_schema
from binaryeval_dspy.schemas.versioned import schema_version_fix, schema_version_message
from tests.conftest import judge_script
from tests.verdict_scripts import AUDIT_POLICY

NEWER = ("newer binaryeval-dspy (schema_version 99; this version reads {reads}); upgrade with "
         "pip install -U binaryeval-dspy")
OLDER = "older binaryeval-dspy (schema_version 0; this version reads {reads}) and there is no migration"


def current(model) -> int:
    """The schema version `model` writes now (1 for most; the batch journal is at 2)."""
    return model.model_fields["schema_version"].default

# one valid document of every saved model
VALID = {
    ItemResult: {"item_id": "a", "output_hash": "h", "question_set_hash": "q", "verdicts": [],
                 "status": "empty_output"},
    RunManifest: {"command": "evaluate", "lm": "m", "question_set_hash": "q", "question_set_path": "qs.json",
                  "items_path": "items.jsonl"},
    OptimizationHistory: {"mode": "human"},
    RejudgeReport: {"previous_run": "a", "run": "b", "question_set_hash": "q", "lm": "m", "aggregation": "score",
                    "items_path": "i.jsonl", "counts": {}, "changed": [], "items": []},
    Rubric: {"benchmark": "b", "dimensions": {"coherence": {
        "criterion": "Ordered.", "evaluation_steps": ["Read it."], "rating_scale": [1, 5],
        "question": "Is it ordered?"}}},
    QuestionSet: {"dimensions": ["fluency"], "questions": [
        {"id": "q1", "dimension": "fluency", "text": "Is it grammatical?"}]},
    VerdictOutput: {"lm": "m", "question_set_hash": "h", "aggregation": "verdict", "pressure_test": "never",
                    "labels": AUDIT_POLICY["labels"], "counts": {}, "items": []},
    MethodItemResult: {"item_id": "a", "method": "rouge", "output_hash": "h", "scores": {"coherence": 0.5}},
    BenchmarkRunConfig: {"benchmark": "summeval", "lm": "m", "item_ids": ["a"], "question_set_hash": "",
                         "question_set_source": "", "rubric_hash": "", "rubric_source": ""},
    BatchState: {"provider": "openai", "endpoint": "openai|https://api.openai.com/v1", "model": "gpt-4o-mini"},
    IFBenchResult: {"key": "1", "instruction_id_list": ["count:word_count_range"],
                    "follow_instruction_list": [True], "follow_all_instructions": True},
}
MODELS = list(VALID)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_the_current_version_and_a_file_without_one_are_read(model):
    version = current(model)
    assert model.model_validate({**VALID[model], "schema_version": version}).schema_version == version
    assert model.model_validate(VALID[model]).schema_version == version
    assert json.loads(model.model_validate(VALID[model]).model_dump_json())["schema_version"] == version


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
@pytest.mark.parametrize(("version", "expected"), [(99, NEWER), (0, OLDER)], ids=["newer", "older"])
def test_another_version_is_refused_with_the_shared_message(model, version, expected):
    doc = {**VALID[model], "schema_version": version}
    with pytest.raises(ValidationError) as err:
        model.model_validate_json(json.dumps(doc))
    first = err.value.errors()[0]
    assert first["loc"] == ("schema_version",)
    assert expected.format(reads=current(model)) in first["msg"], first["msg"]
    assert first["type"] == ("schema_version_newer" if version == 99 else "schema_version_older")
    fix = schema_version_fix(first)
    assert fix and first["msg"].endswith("; " + fix.removesuffix("."))
    assert schema_version_message(first).removesuffix(".") + "; " + fix.removesuffix(".") == first["msg"]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_a_newer_file_with_new_fields_reports_the_version_first(model):
    doc = {**VALID[model], "schema_version": current(model) + 1, "a_field_from_the_future": True}
    with pytest.raises(ValidationError) as err:
        model.model_validate(doc)
    assert err.value.errors()[0]["type"] == "schema_version_newer"


def test_a_version_that_is_not_an_integer_gets_the_types_own_error():
    with pytest.raises(ValidationError, match="valid integer"):
        RunManifest.model_validate({**VALID[RunManifest], "schema_version": "two"})
    with pytest.raises(ValidationError) as err:
        QuestionSet.model_validate({**VALID[QuestionSet], "schema_version": True})
    assert err.value.errors()[0]["type"] == "int_type"


def test_the_verdict_output_json_schema_keeps_its_const():
    assert verdict_output_json_schema()["properties"]["schema_version"]["const"] == 1


# ---------------------------------------------------------------- files: the error names the file
def _dump(tmp_path, name, model, version):
    path = tmp_path / name
    path.write_text(json.dumps({**VALID[model], "schema_version": version}), encoding="utf-8")
    return path


@pytest.mark.parametrize(("version", "expected"), [(99, NEWER), (0, OLDER)], ids=["newer", "older"])
def test_question_set_rubric_and_history_files_name_the_file_and_the_remedy(tmp_path, version, expected):
    for model, load, error in ((QuestionSet, QuestionSet.load, QuestionSetError), (Rubric, Rubric.load, InputError),
                               (OptimizationHistory, OptimizationHistory.load, InputError)):
        path = _dump(tmp_path, f"{model.__name__}.json", model, version)
        with pytest.raises(error) as err:
            load(path)
        text = str(err.value)
        assert text.startswith(f"{path}: field 'schema_version': "), text
        assert expected.format(reads=current(model)).split("; upgrade")[0] in text
        # the remedy is the version's, not the loader's generic one, and said once
        assert text.count("Fix:") == 1 and text.count("pip install") == (1 if version == 99 else 0)
        if version == 99:
            assert err.value.fix == "upgrade with pip install -U binaryeval-dspy."
        else:
            assert "restore" not in err.value.fix and "compare the file" not in err.value.fix


def assert_refused(read, where: str, expected: str) -> None:
    """`read()` raises an InputError naming `where` (the file, or file:line) and saying `expected`."""
    with pytest.raises(InputError) as err:
        read()
    assert where in str(err.value) and expected in str(err.value)


@pytest.mark.parametrize(("version", "expected"), [(99, NEWER), (0, OLDER)], ids=["newer", "older"])
def test_run_directory_benchmark_and_batch_files_name_the_file(tmp_path, version, expected):
    run = RunDirectory(tmp_path / "run")
    run.path.mkdir()
    _dump(run.path, "manifest.json", RunManifest, version)
    assert_refused(run.read_manifest, str(run.manifest_path), expected.format(reads=1))

    (run.results_path).write_text(json.dumps({**VALID[ItemResult], "schema_version": version}) + "\n")
    assert_refused(run.read_results, f"{run.results_path}:1", expected.format(reads=1))

    bench = BenchmarkRun(tmp_path / "bench")
    bench.path.mkdir()
    _dump(bench.path, "benchmark.json", BenchmarkRunConfig, version)
    assert_refused(bench.read_config, str(bench.config_path), expected.format(reads=1))

    rouge = bench.method_dir("rouge")
    rouge.path.mkdir()
    rouge.results_path.write_text(json.dumps({**VALID[MethodItemResult], "schema_version": version}) + "\n")
    assert_refused(lambda: bench.read_results("rouge"), str(rouge.results_path), expected.format(reads=1))

    store = BatchStore(run.path)
    store.state_path.parent.mkdir(parents=True, exist_ok=True)
    store.state_path.write_text(json.dumps({**VALID[BatchState], "schema_version": version}))
    assert_refused(store.load, str(store.state_path), expected.format(reads=current(BatchState)))


@pytest.fixture
def fake_cli_lm(monkeypatch, scripted_handle):
    def make(spec, **kwargs):
        handle, _ = scripted_handle(judge_script({}))
        handle.name = "scripted-cli"
        return handle

    monkeypatch.setattr(common, "make_lm", make)


@pytest.mark.parametrize("damaged", ["manifest.json", "results.jsonl"])
def test_bineval_evaluate_on_a_run_from_a_newer_version_says_upgrade(tmp_path, small_question_set, items_file,
                                                                    fake_cli_lm, damaged):
    qs_path = small_question_set.save(tmp_path / "qs.json")
    out = tmp_path / "run"
    args = ["evaluate", str(qs_path), str(items_file), "--input-field", "source", "--output-field", "summary",
            "--id-field", "id", "--out", str(out)]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    path = out / damaged
    if damaged == "manifest.json":
        data = json.loads(path.read_text())
        path.write_text(json.dumps({**data, "schema_version": 99}))
    else:
        lines = path.read_text().splitlines()
        path.write_text("\n".join([json.dumps({**json.loads(lines[0]), "schema_version": 99}), *lines[1:]]) + "\n")
    result = CliRunner().invoke(cli, args)
    text = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert str(path) in result.output.replace("\n", "") or path.name in text
    assert "written by a newer binaryeval-dspy (schema_version 99; this version reads 1)" in text
    assert "pip install -U binaryeval-dspy" in text and "Traceback" not in text

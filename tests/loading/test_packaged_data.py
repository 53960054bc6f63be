"""The benchmark data ships with the package (issue 15, point 3).

With no data folder configured and the working directory outside the repository, every
benchmark loader (and ``bineval benchmark``) reads the gzipped copies in
``binaryeval_dspy/benchmark_data``; ``--data-dir`` / ``data_dir=`` and
``$BINEVAL_DATA_DIR`` still replace them; no workspace path is searched; the Hugging Face
recipes of docs/data.md work on local datasets.

"A machine without the workspace" is simulated by setting
``binaryeval_dspy.data.paths.SHARED_DATA_DIRS`` (the workspace folders the loaders used
to search) to nothing: the product must not depend on it (it no longer exists).
"""

from __future__ import annotations

import gzip
import json
from importlib import resources
from pathlib import Path

import pytest
from click.testing import CliRunner

import binaryeval_dspy
from binaryeval_dspy.data.llmbar import LLMBAR_FILES
from binaryeval_dspy.cli.main import cli
from binaryeval_dspy.data import (
    DATA_DIR_ENV,
    default_data_dir,
    load_hub_items,
    load_ifbench,
    load_qags,
    load_summeval,
    load_topical_chat,
    resolve_data_file,
)
from binaryeval_dspy.data.rows import read_jsonl_rows
from binaryeval_dspy.errors import InputError

PACKAGE_DATA = Path(str(resources.files("binaryeval_dspy") / "benchmark_data"))
SHARED_COPY = Path(__file__).resolve().parents[3] / "shared" / "data"  # the full offline copy, when present
DIMS = ("coherence", "consistency", "fluency", "relevance")

#: loader, its file inside a data folder, and the number of items it holds
BENCHMARKS = {
    "summeval": (lambda **kw: load_summeval(**kw), "summeval/summeval.jsonl", 1600),
    "topical_chat": (lambda **kw: load_topical_chat(**kw), "topical_chat/topical_chat.jsonl", 360),
    "qags_cnndm": (lambda **kw: load_qags("cnndm", **kw), "qags/qags_cnndm.jsonl", 235),
    "qags_xsum": (lambda **kw: load_qags("xsum", **kw), "qags/qags_xsum.jsonl", 239),
    "ifbench": (lambda **kw: load_ifbench(**kw), "ifbench/IFBench_test.jsonl", 300),
}


@pytest.fixture
def outside_the_repository(tmp_path, monkeypatch) -> Path:
    """cwd in a temporary folder, no $BINEVAL_DATA_DIR, no workspace data folder to fall back on."""
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.setattr("binaryeval_dspy.data.paths.SHARED_DATA_DIRS", (), raising=False)
    work = tmp_path / "elsewhere"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def _summeval_rows(docs: int = 2, systems: int = 3) -> list[dict]:
    return [{"doc_id": f"d{d}", "system_id": f"M{k}", "source": f"Article {d}.", "system_output": f"Summary {k}.",
             "reference": "Highlights.", "scores": {dim: 1 + k for dim in DIMS}}
            for d in range(docs) for k in range(systems)]


def _write_jsonl(path: Path, rows: list[dict], *, gzipped: bool = False) -> Path:
    data = "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data) if gzipped else data)
    return path


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_every_loader_reads_the_full_packaged_data_from_outside_the_repository(outside_the_repository, name):
    loader, relative, count = BENCHMARKS[name]
    assert default_data_dir() is None
    file = resolve_data_file(relative)
    assert file == PACKAGE_DATA / f"{relative}.gz" and file.is_file()
    assert Path(binaryeval_dspy.__file__).parent in file.parents  # inside the installed package
    items = loader()
    assert len(items) == count
    ids = [ex.item_id if name != "ifbench" else ex.key for ex in items]
    assert len(set(ids)) == count


def test_packaged_items_are_the_expected_ones(outside_the_repository):
    first = load_summeval(limit=1)[0]
    assert first.item_id == "dm-test-8764fb95bfad8ee849274873a92fb8d6b400eee2/M11"
    assert first.output.startswith("Paul merson was brought on") and set(first.human) == {*DIMS, "overall"}
    assert {x.human["consistency"] for x in load_qags("xsum")} == {0.0, 1.0}
    assert load_ifbench(limit=1)[0].prompt.startswith("What should the world's smartest")
    stratified = load_summeval(limit=32, sample="stratified", seed=0)
    assert len(stratified) == 32 and len({ex.system_id for ex in stratified}) == 16


def test_the_package_ships_provenance_licences_and_only_the_loaders_files():
    shipped = sorted(p.relative_to(PACKAGE_DATA).as_posix() for p in PACKAGE_DATA.rglob("*") if p.is_file())
    data = [p for p in shipped if p.endswith(".jsonl.gz")]
    assert data == sorted([f"{relative}.gz" for _, relative, _ in BENCHMARKS.values()] + list(LLMBAR_FILES.values()))
    assert "PROVENANCE.md" in shipped
    assert {"LICENSES/Apache-2.0.txt", "LICENSES/MIT-SummEval.txt", "LICENSES/MIT-UniEval.txt",
            "LICENSES/MIT-PPairS.txt", "LICENSES/ODC-BY-1.0.txt", "LICENSES/MIT-LLMBar.txt"} <= set(shipped)
    provenance = (PACKAGE_DATA / "PROVENANCE.md").read_text(encoding="utf-8")
    for file in data:
        assert f"`{file}`" in provenance
    total = sum((PACKAGE_DATA / p).stat().st_size for p in data)
    assert total < 2_000_000, f"{total} bytes of packaged data"


def test_no_workspace_path_in_the_product():
    package = Path(binaryeval_dspy.__file__).parent
    offenders = []
    for source in package.rglob("*.py"):
        text = source.read_text(encoding="utf-8")
        for marker in ("/work/", "shared/data", "SHARED_DATA_DIRS"):
            if marker in text:
                offenders.append(f"{source.relative_to(package)}: {marker}")
    assert not offenders


def test_environment_variable_overrides_the_packaged_data(outside_the_repository, tmp_path, monkeypatch):
    folder = tmp_path / "mydata"
    _write_jsonl(folder / "summeval" / "summeval.jsonl", _summeval_rows())
    monkeypatch.setenv(DATA_DIR_ENV, str(folder))
    assert default_data_dir() == folder
    assert len(load_summeval()) == 6 and resolve_data_file("summeval/summeval.jsonl").parent == folder / "summeval"
    # a gzipped file in a data folder is read the same way
    gz_folder = tmp_path / "gzdata"
    _write_jsonl(gz_folder / "summeval" / "summeval.jsonl.gz", _summeval_rows(docs=1), gzipped=True)
    monkeypatch.setenv(DATA_DIR_ENV, str(gz_folder))
    assert [ex.item_id for ex in load_summeval()] == ["d0/M0", "d0/M1", "d0/M2"]
    # data_dir= (--data-dir) wins over the environment
    assert len(load_summeval(data_dir=folder)) == 6
    # a folder without the file is an error, never a silent fall-back to the packaged copy
    with pytest.raises(InputError, match="not found in the data folder") as error:
        load_topical_chat()
    assert DATA_DIR_ENV in str(error.value) and str(gz_folder) in str(error.value)


def test_a_corrupt_gzip_file_is_a_located_error(tmp_path):
    path = tmp_path / "summeval" / "summeval.jsonl.gz"
    path.parent.mkdir()
    path.write_bytes(gzip.compress(b'{"doc_id": "d0"}\n' * 50)[:-20])  # cut short
    with pytest.raises(InputError, match="gzip") as error:
        load_summeval(data_dir=tmp_path)
    assert str(path) in str(error.value)


def test_cli_benchmark_rouge_runs_from_outside_the_repository(outside_the_repository):
    out = outside_the_repository / "run"
    result = CliRunner().invoke(cli, ["benchmark", "summeval", "--methods", "rouge", "--limit", "8", "--out", str(out),
                                      "--bootstrap", "20", "--no-figures"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "SummEval: 8 items" in result.output
    items = [json.loads(line) for line in (out / "items.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(items) == 8 and items[0]["item_id"] == "dm-test-8764fb95bfad8ee849274873a92fb8d6b400eee2/M11"
    assert (out / "report.md").is_file() and (out / "metrics.json").is_file()


def test_cli_data_dir_and_environment_override_the_packaged_data(outside_the_repository, tmp_path, monkeypatch):
    folder = tmp_path / "mydata"
    _write_jsonl(folder / "summeval" / "summeval.jsonl", _summeval_rows(docs=3, systems=4))
    args = ["benchmark", "summeval", "--methods", "rouge", "--bootstrap", "20", "--no-figures"]
    result = CliRunner().invoke(cli, [*args, "--data-dir", str(folder), "--out", str(tmp_path / "a")],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "SummEval: 12 items" in result.output
    monkeypatch.setenv(DATA_DIR_ENV, str(folder))
    result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "b")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "SummEval: 12 items" in result.output


@pytest.mark.skipif(not SHARED_COPY.is_dir(), reason="no full offline copy of the benchmark data beside the repo")
@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_packaged_data_equals_the_full_copy_on_what_the_loaders_read(outside_the_repository, name):
    loader, relative, _ = BENCHMARKS[name]
    if not (SHARED_COPY / relative).is_file():
        pytest.skip(f"{relative} is not in the full copy")
    packaged = [dict(ex.items()) for ex in loader()]
    full = [dict(ex.items()) for ex in loader(data_dir=SHARED_COPY)]
    assert packaged == full


# --------------------------------------------------------------------------- Hugging Face `datasets`
# The recipes of docs/data.md, run on local datasets standing in for the hub ones (no network here).


def test_hub_recipe_summeval_layout_on_a_local_dataset(outside_the_repository, tmp_path):
    datasets = pytest.importorskip("datasets")
    # One row per article with parallel lists, as in the hub dataset mteb/summeval (split "test").
    hub_standin = tmp_path / "mteb-summeval"
    datasets.DatasetDict({"test": datasets.Dataset.from_list([
        {"id": f"doc-{d}", "text": f"Article {d}.", "machine_summaries": [f"Summary {k} of {d}." for k in range(3)],
         "human_summaries": ["A reference."], **{dim: [1.0 + k for k in range(3)] for dim in DIMS}}
        for d in range(2)])}).save_to_disk(str(hub_standin))

    docs = datasets.load_from_disk(str(hub_standin))["test"]  # docs/data.md: load_dataset("mteb/summeval", split="test")
    rows = [{"doc_id": doc["id"], "system_id": str(k), "article": doc["text"], "summary": summary,
             **{dim: doc[dim][k] for dim in DIMS}}
            for doc in docs for k, summary in enumerate(doc["machine_summaries"])]
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "summeval_items"))
    items = load_hub_items(str(tmp_path / "summeval_items"), human_fields=list(DIMS), input_field="article",
                           output_field="summary", doc_field="doc_id", system_field="system_id")
    assert len(items) == 6 and items[0].input == "Article 0." and items[0].output == "Summary 0 of 0."
    assert items[2].human == {dim: 3.0 for dim in DIMS} and items[3].doc_id == "doc-1"


def test_hub_recipe_packaged_summeval_through_datasets_gives_the_same_items(outside_the_repository, tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = [row for _, row in read_jsonl_rows(resolve_data_file("summeval/summeval.jsonl"))][:32]
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "saved"))
    via_hub = load_hub_items(str(tmp_path / "saved"), human_fields={d: f"scores.{d}" for d in DIMS},
                             input_field="source", output_field="system_output", doc_field="doc_id",
                             system_field="system_id", reference_field="reference")
    direct = load_summeval(limit=32)
    assert [(x.doc_id, x.system_id, x.input, x.output, x.reference) for x in via_hub] == \
           [(x.doc_id, x.system_id, x.input, x.output, x.reference) for x in direct]
    assert all(x.human == {d: y.human[d] for d in DIMS} for x, y in zip(via_hub, direct))


def test_hub_recipe_ifbench_on_a_local_dataset(outside_the_repository, tmp_path):
    datasets = pytest.importorskip("datasets")
    # allenai/IFBench_test (split "train") holds the same four fields as the packaged file.
    rows = [row for _, row in read_jsonl_rows(resolve_data_file("ifbench/IFBench_test.jsonl"))]
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "ifbench_hub"))

    prompts = datasets.load_from_disk(str(tmp_path / "ifbench_hub"))["train"]  # load_dataset("allenai/IFBench_test", split="train")
    prompts.to_json(str(tmp_path / "IFBench_test.jsonl"))
    from_hub = load_ifbench(tmp_path / "IFBench_test.jsonl")
    packaged = load_ifbench()
    assert len(from_hub) == 300
    assert [dict(ex.items()) for ex in from_hub] == [dict(ex.items()) for ex in packaged]


def test_benchmark_task_folders_ship_with_the_package(tmp_path, monkeypatch):
    """bineval/G-Eval/UniEval methods need the task folders; outside the repository they come
    from the package, and a local ./examples/tasks still takes precedence."""
    from binaryeval_dspy.meta_eval.task_files import default_tasks_dir

    monkeypatch.chdir(tmp_path)
    packaged = default_tasks_dir()
    assert packaged is not None and "benchmark_data" in str(packaged)
    for benchmark in ("summeval", "topical_chat", "qags"):
        for name in ("task_prompt.txt", "questions.manual.json", "rubric.json"):
            assert (packaged / benchmark / name).is_file()
    (tmp_path / "examples" / "tasks").mkdir(parents=True)
    assert default_tasks_dir() == tmp_path / "examples" / "tasks"

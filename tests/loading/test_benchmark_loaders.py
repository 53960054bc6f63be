"""Benchmark loaders: the real files with their counts (skipped without the data), located
errors on broken files, data-dir resolution, stratified sampling, field mapping and datasets."""

import collections
import json
from pathlib import Path

import pytest

from binaryeval_dspy.data import (
    default_data_dir,
    load_hub_items,
    load_qags,
    load_scored_items,
    load_summeval,
    load_topical_chat,
    resolve_data_file,
    select_items,
)
from binaryeval_dspy.errors import InputError


def _data_file(relative: str) -> Path | None:
    try:  # $BINEVAL_DATA_DIR when set, else the copy shipped in the package
        return resolve_data_file(relative)
    except InputError:
        return None


def needs(relative: str):
    return pytest.mark.skipif(
        _data_file(relative) is None,
        reason=f"benchmark data not present ({relative} is neither under $BINEVAL_DATA_DIR nor in the package)",
    )


@needs("summeval/summeval.jsonl")
def test_summeval_real_file():
    items = load_summeval()
    assert len(items) == 1600
    assert len({i.doc_id for i in items}) == 100 and len({i.system_id for i in items}) == 16
    first = items[0]
    assert first.item_id == "dm-test-8764fb95bfad8ee849274873a92fb8d6b400eee2/M11"
    assert set(first.human) == {"coherence", "consistency", "fluency", "relevance", "overall"}
    assert first.human["overall"] == pytest.approx(sum(first.human[d] for d in
                                                       ("coherence", "consistency", "fluency", "relevance")) / 4)
    assert first.output.startswith("Paul merson was brought on") and first.reference and first.input
    assert set(first.inputs().keys()) == {"input", "output"}


@needs("topical_chat/topical_chat.jsonl")
def test_topical_chat_real_file():
    items = load_topical_chat()
    assert len(items) == 360 and len({i.doc_id for i in items}) == 60
    assert collections.Counter(i.system_id for i in items)["Original Ground Truth"] == 60
    truth = next(i for i in items if i.system_id == "Original Ground Truth")
    other = next(i for i in items if i.doc_id == truth.doc_id and i.system_id == "Argmax Decoding")
    assert other.reference == truth.output and truth.reference and truth.reference != truth.output
    assert truth.fact.strip() in truth.input and truth.context.strip() in truth.input
    assert 1 <= truth.human["naturalness"] <= 3 and 0 <= truth.human["groundedness"] <= 1


@needs("qags/qags_cnndm.jsonl")
def test_qags_real_files():
    cnn, xsum = load_qags("cnndm"), load_qags("xsum")
    assert len(cnn) == 235 and len(xsum) == 239
    assert {x.human["consistency"] for x in xsum} == {0.0, 1.0}
    assert cnn[0].item_id == "cnndm-0" and cnn[0].reference == cnn[0].input and cnn[0].split == "cnndm"


@needs("summeval/summeval.jsonl")
def test_summeval_stratified_sample_keeps_documents_together_and_balances_systems():
    items = load_summeval(limit=100, sample="stratified", seed=0)
    assert len(items) == 100
    docs = [i.doc_id for i in items]
    assert len(set(docs)) == 10
    runs = [d for k, d in enumerate(docs) if k == 0 or docs[k - 1] != d]
    assert len(runs) == len(set(docs))  # each document's items are consecutive
    counts = collections.Counter(i.system_id for i in items)
    assert len(counts) == 16 and max(counts.values()) - min(counts.values()) <= 1
    assert [i.item_id for i in load_summeval(limit=100, sample="stratified", seed=0)] == [i.item_id for i in items]


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def _summeval_row(**overrides):
    row = {"doc_id": "d1", "system_id": "M1", "source": "An article.", "system_output": "A summary.",
           "reference": "A highlight.", "scores": {"coherence": 3, "consistency": 4, "fluency": 5, "relevance": 2}}
    row.update(overrides)
    return row


def test_missing_field_names_file_line_and_field(tmp_path):
    path = _write(tmp_path / "s.jsonl", [_summeval_row(), _summeval_row(system_id="M2", system_output=None)])
    with pytest.raises(InputError) as err:
        load_summeval(path)
    assert err.value.line == 2 and err.value.field == "system_output" and str(path) in str(err.value)


def test_score_off_the_scale_and_bad_json_are_located(tmp_path):
    bad_score = _summeval_row(scores={"coherence": 7, "consistency": 4, "fluency": 5, "relevance": 2})
    with pytest.raises(InputError) as err:
        load_summeval(_write(tmp_path / "a.jsonl", [bad_score]))
    assert err.value.field == "scores.coherence" and "outside the scale" in str(err.value) and err.value.fix
    with pytest.raises(InputError) as err:
        load_summeval(_write(tmp_path / "b.jsonl", [_summeval_row(), "{not json"]))
    assert err.value.line == 2
    with pytest.raises(InputError, match="already appeared") as err:
        load_summeval(_write(tmp_path / "c.jsonl", [_summeval_row(), _summeval_row()]))
    assert "Fix: keep one summary per document and system." in str(err.value)
    for score, expected in (("high", "expected a number"), (float("nan"), "finite number")):
        row = _summeval_row(scores={"coherence": score, "consistency": 4, "fluency": 5, "relevance": 2})
        with pytest.raises(InputError, match=expected) as err:
            load_summeval(_write(tmp_path / "d.jsonl", [row]))
        assert err.value.line == 1 and err.value.fix, str(err.value)


def test_topical_chat_refuses_two_responses_of_one_system_to_one_context(tmp_path):
    scores = {"naturalness": 2, "coherence": 3, "engagingness": 1, "groundedness": 1, "understandability": 1,
              "overall": 4}
    row = {"context_id": "c1", "context": "A: hi", "fact": "Cats purr.", "system_id": "Original Ground Truth",
           "scores": scores}
    rows = [dict(row, item_id=0, response="Hello."), dict(row, item_id=1, system_id="Nucleus Decoding (p = 0.7)",
                                                         response="Hi there."),
            dict(row, item_id=2, response="A second ground truth.")]
    with pytest.raises(InputError, match="already has a response from system") as err:
        load_topical_chat(_write(tmp_path / "tc.jsonl", rows))
    assert err.value.line == 3 and err.value.field == "system_id" and "(line 1)" in str(err.value)
    items = load_topical_chat(_write(tmp_path / "ok.jsonl", rows[:2]))
    assert [i.reference for i in items] == ["", "Hello."]


def test_data_dir_resolution(tmp_path, monkeypatch):
    folder = tmp_path / "data"
    (folder / "qags").mkdir(parents=True)
    _write(folder / "qags" / "qags_xsum.jsonl",
           [{"item_id": i, "source": "Text.", "summary": "Sum.", "consistency": i % 2} for i in range(4)])
    monkeypatch.setenv("BINEVAL_DATA_DIR", str(folder))
    assert default_data_dir() == folder
    assert len(load_qags("xsum")) == 4
    monkeypatch.setenv("BINEVAL_DATA_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(InputError, match="not found in the data folder"):
        load_qags("xsum")
    assert len(load_qags("xsum", data_dir=folder, limit=2)) == 2  # --data-dir wins over the environment
    with pytest.raises(InputError, match="unknown QAGS split"):
        load_qags("cnn")  # type: ignore[arg-type]


def test_no_data_folder_reads_the_packaged_data_and_a_missing_folder_gives_a_fix(tmp_path, monkeypatch):
    monkeypatch.delenv("BINEVAL_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert default_data_dir() is None
    assert len(load_summeval(limit=3)) == 3  # shipped in the package (tests/loading/test_packaged_data.py)
    with pytest.raises(InputError, match="`data_dir`"):
        load_summeval(data_dir=tmp_path / "none")


def test_select_items_methods():
    items = list(range(10))
    assert select_items(items, 3) == [0, 1, 2]
    assert select_items(items, None) == items
    picked = select_items(items, 4, sample="random", seed=1)
    assert len(picked) == 4 and picked == sorted(picked) and picked == select_items(items, 4, sample="random", seed=1)
    by_bin = select_items(items, 5, sample="stratified", stratum=lambda i: i < 8)
    assert sum(i < 8 for i in by_bin) == 4 and sum(i >= 8 for i in by_bin) == 1  # proportional: 8:2
    with pytest.raises(InputError):
        select_items(items, 2, sample="clustered")  # type: ignore[arg-type]


def test_scored_items_from_csv_and_nested_jsonl(tmp_path):
    csv_path = tmp_path / "items.csv"
    csv_path.write_text("id,doc,src,out,ref,fluency\n"
                        "a,d1,Source one.,Output one.,Ref one.,4\n"
                        "b,d1,Source one.,Output two.,Ref one.,2\n", encoding="utf-8")
    items = load_scored_items(csv_path, human_fields={"fluency": "fluency"}, input_field="src", output_field="out",
                              id_field="id", doc_field="doc", reference_field="ref")
    assert [i.human for i in items] == [{"fluency": 4.0}, {"fluency": 2.0}]
    assert items[0].doc_id == "d1" and items[0].system_id == "0" and items[0].reference == "Ref one."
    jsonl = _write(tmp_path / "n.jsonl", [{"input": "x", "output": "y", "scores": {"coh": 3}},
                                          {"input": "x", "output": "z", "scores": {"coh": "high"}}])
    with pytest.raises(InputError) as err:
        load_scored_items(jsonl, human_fields=["scores.coh"])
    assert err.value.line == 2 and err.value.field == "scores.coh"
    with pytest.raises(InputError, match="no human score fields"):
        load_scored_items(jsonl, human_fields=[])


def test_hub_path_on_a_saved_dataset_and_a_parquet_file(tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = {"article": ["A.", "B.", "C."], "summary": ["a", "b", "c"], "score": [0.0, 0.5, 1.0],
            "doc": ["d1", "d1", "d2"]}
    dd = datasets.DatasetDict({"test": datasets.Dataset.from_dict(rows)})
    dd.save_to_disk(str(tmp_path / "saved"))
    items = load_hub_items(str(tmp_path / "saved"), human_fields={"consistency": "score"}, input_field="article",
                           output_field="summary", doc_field="doc")
    assert [i.human["consistency"] for i in items] == [0.0, 0.5, 1.0] and items[2].doc_id == "d2"
    assert items[0].item_id == "line-1" and set(items[0].inputs().keys()) == {"input", "output"}
    with pytest.raises(InputError, match="no split 'validation'"):
        load_hub_items(str(tmp_path / "saved"), human_fields=["score"], split="validation", input_field="article",
                       output_field="summary")
    dd["test"].to_parquet(str(tmp_path / "rows.parquet"))
    again = load_hub_items(str(tmp_path / "rows.parquet"), human_fields=["score"], input_field="article",
                           output_field="summary", limit=2)
    assert [i.output for i in again] == ["a", "b"]


@pytest.mark.parametrize(("name", "content", "message"), [
    ("empty.json", "", "the file is empty"),
    ("empty.jsonl", "", "the file holds no items"),
    ("header.csv", "input,output,score\n", "the file holds no items"),
    ("long.csv", "input,output,score\na,b,1,2\n", "more cells than the header"),
    ("twice.csv", "input,output,score,score\na,b,1,2\n", "names a column more than once"),
    ("bad.jsonl", '{"input": "a", "output": "b", "score": 1}\n{bad json\n', "not valid JSON"),
    ("latin1.jsonl", '{"input": "caf\xe9", "output": "b", "score": 1}\n', "not UTF-8"),
    ("bad.json", '[{"input": "a", "output": "b", "score": 1}, {bad', "could not read the file as json"),
    ("rows.txt", "input output\n", "unsupported dataset file type '.txt'"),
])
def test_hub_path_names_the_local_file_it_cannot_read(tmp_path, name, content, message):
    pytest.importorskip("datasets")
    file = tmp_path / name
    file.write_bytes(content.encode("latin-1" if name.startswith("latin1") else "utf-8"))
    with pytest.raises(InputError, match=message) as err:
        load_hub_items(str(file), human_fields=["score"])
    assert err.value.path == str(file) and "split" not in str(err.value)

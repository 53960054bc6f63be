"""Any JSONL / CSV file or Hugging Face dataset of scored outputs, through a field mapping.

Builds on `binaryeval_dspy.data.items` (which reads the input, output and id fields)
and adds what meta-evaluation needs: the human score of each dimension, the document
and system ids that summary- and system-level correlations group by, and a reference
for lexical baselines. Field names may be dotted to reach into nested objects
(``scores.coherence``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import dspy

from binaryeval_dspy.data.benchmark_rows import lookup, require_score
from binaryeval_dspy.data.items import check_unique_ids, item_from_row, load_items
from binaryeval_dspy.data.rows import check_csv_header
from binaryeval_dspy.data.sampling import SampleMethod, select_items
from binaryeval_dspy.errors import InputError

OWN_READER_SUFFIXES = (".jsonl", ".csv")  # local files `load_scored_items` reads, naming the bad line
HUB_FILE_FORMATS = {".parquet": "parquet", ".json": "json"}  # other local files, read through `datasets`


def _human_map(human_fields: Mapping[str, str] | Sequence[str]) -> dict[str, str]:
    if isinstance(human_fields, str):  # one field name, not a sequence of one-letter fields
        human_fields = [human_fields]
    if human_fields is None:
        human_fields = []
    if isinstance(human_fields, Mapping):
        mapping = {str(k): str(v) for k, v in human_fields.items()}
    elif not isinstance(human_fields, Sequence):
        raise InputError(f"expected a mapping or a list of field names, got {type(human_fields).__name__}",
                         field="human_fields", fix="e.g. {'consistency': 'scores.consistency'} or ['score'].")
    else:
        mapping = {str(f).split(".")[-1]: str(f) for f in human_fields}
    if not mapping:
        raise InputError("no human score fields given", field="human_fields",
                         fix="map each dimension to the field holding its human score, e.g. "
                             "{'consistency': 'scores.consistency'}.")
    return mapping


def _attach(ex: dspy.Example, *, source: str, human: dict[str, str], doc_field: str | None,
            system_field: str | None, reference_field: str | None) -> dspy.Example:
    row = dict(ex.items())
    line = row.get("line")
    scores = {dim: require_score(row, field, path=source, line=line) for dim, field in human.items()}

    def optional(field: str | None, default: str) -> str:
        if not field:
            return default
        try:
            value = lookup(row, field)
        except KeyError:
            raise InputError("the field is missing", path=source, line=line, field=field,
                             fix="map an existing field, or add it to every row.") from None
        return "" if value is None else str(value)

    updated = ex.copy(human=scores, doc_id=optional(doc_field, str(ex.item_id)),
                      system_id=optional(system_field, "0"), reference=optional(reference_field, ""))
    return updated.with_inputs("input", "output")


def load_scored_items(
    path: str | Path,
    *,
    human_fields: Mapping[str, str] | Sequence[str],
    input_field: str = "input",
    output_field: str = "output",
    id_field: str | None = None,
    doc_field: str | None = None,
    system_field: str | None = None,
    reference_field: str | None = None,
    limit: int | None = None,
    sample: SampleMethod | None = None,
    seed: int = 0,
    texts: bool = True,
) -> list[dspy.Example]:
    """Load scored (input, output) items from a ``.jsonl`` or ``.csv`` file.

    Args:
        path: the file (format chosen by suffix, as in `load_items`).
        human_fields: dimension -> field holding its human score, or a list of field
            names (the dimension is the last dotted part).
        input_field / output_field / id_field: as in `load_items`.
        doc_field: field grouping items by source document (summary-level
            correlation); default: each item is its own document.
        system_field: field naming the system that wrote the output (system-level
            correlation); default ``"0"`` for all.
        reference_field: field holding a reference output (ROUGE); default none.
        limit / sample / seed: as in `select_items` (stratified groups by document,
            balances systems).
        texts: False when only ids and human scores are needed (meta-evaluation of
            someone else's predictions, ``bineval agreement``): `input_field` and
            `output_field` are then not read, `id_field` is required, and ``input`` /
            ``output`` of the items are empty strings.

    Returns:
        `dspy.Example`s with ``item_id``, ``input``, ``output``, ``line``, ``human``
        (dimension -> float), ``doc_id``, ``system_id``, ``reference`` and the row's
        other fields; inputs are ``input`` and ``output``.

    Raises:
        InputError: any `load_items` error, a missing or non-numeric human score or a
            missing mapped field (names file, line and field); in a CSV file a mapped
            column missing from the header is reported as line 1 (`check_csv_header`);
            ``texts=False`` without an `id_field`.
    """
    human = _human_map(human_fields)
    if not texts:
        if not id_field:
            raise InputError("an id field is needed to match items without their texts", field="id_field",
                             fix="pass the field that names each item (e.g. `id_field` item_id).")
        # The id column stands in for the (unread) texts: it is required and non-empty anyway.
        try:
            items = load_scored_items(path, human_fields=human, input_field=id_field, output_field=id_field,
                                      id_field=id_field, doc_field=doc_field, system_field=system_field,
                                      reference_field=reference_field, limit=limit, sample=sample, seed=seed)
        except InputError as exc:
            if exc.field != id_field or not exc.message.startswith(("the input", "the output", "the header")):
                raise
            what = (f"the header has no column {id_field!r} for the item id" if exc.message.startswith("the header")
                    else "the id field is missing or empty")
            raise InputError(what, path=exc.path, line=exc.line, field=id_field,
                fix="give every row an id (the ids the predictions use), or pass `id_field` with the field "
                    "that holds it.") from exc
        return [ex.copy(input="", output="").with_inputs("input", "output") for ex in items]
    if Path(path).suffix.lower() == ".csv":  # a missing column is a header error (line 1), not one per row
        columns = {input_field: "input", output_field: "output", **({id_field: "id"} if id_field else {}),
                   **{f: f"human score of {d}" for d, f in human.items()},
                   **{f: role for f, role in ((doc_field, "document id"), (system_field, "system id"),
                                              (reference_field, "reference")) if f}}
        check_csv_header(path, columns)
    items = load_items(path, input_field=input_field, output_field=output_field, id_field=id_field)
    scored = [_attach(ex, source=str(path), human=human, doc_field=doc_field, system_field=system_field,
                      reference_field=reference_field) for ex in items]
    return select_items(scored, limit, sample=sample, seed=seed,
                        group=lambda ex: ex.doc_id, stratum=lambda ex: ex.system_id)


def _root_cause(exc: BaseException) -> str:
    """The innermost chained exception's text (``datasets`` wraps parse errors)."""
    while exc.__cause__ is not None or exc.__context__ is not None:
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _open_local_file(datasets: Any, local: Path) -> Any:
    kind = HUB_FILE_FORMATS.get(local.suffix.lower())
    if kind is None:
        raise InputError(f"unsupported dataset file type {local.suffix!r}; expected one of "
                         f"{sorted([*HUB_FILE_FORMATS, *OWN_READER_SUFFIXES])}", path=local,
                         fix="convert the file to .jsonl, .json, .csv or .parquet.")
    if local.stat().st_size == 0:
        raise InputError("the file is empty", path=local, fix="point to a file with one scored item per row.")
    try:
        data = datasets.load_dataset(kind, data_files=str(local), split="train")
    except Exception as exc:  # datasets / pyarrow raise many types for unreadable files
        if "BatchSize must be greater than 0" in str(exc):  # a parquet file without rows
            raise InputError("the file has no rows", path=local,
                             fix="point to a file with one scored item per row.") from exc
        raise InputError(f"could not read the file as {kind}: {_root_cause(exc)}", path=local,
                         fix=f"check that the file is valid {kind}.") from exc
    if len(data) == 0:
        raise InputError("the file has no rows", path=local, fix="point to a file with one scored item per row.")
    return data


def _open_dataset(name: str, split: str, revision: str | None) -> Any:
    try:
        import datasets
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise InputError("loading a dataset needs the `datasets` package", fix="pip install datasets") from exc
    local = Path(name).expanduser()
    if local.is_file():
        return _open_local_file(datasets, local)
    try:
        if local.is_dir():
            data = datasets.load_from_disk(str(local))
            if isinstance(data, datasets.DatasetDict):
                if split not in data:
                    raise InputError(f"the saved dataset has no split {split!r} (splits: {', '.join(data)})",
                                     path=local, field="split", fix="pass `split` with one of those names.")
                data = data[split]
            if len(data) == 0:
                raise InputError("the saved dataset has no rows", path=local, fix="save a dataset with scored items.")
            return data
        return datasets.load_dataset(name, split=split, revision=revision)
    except InputError:
        raise
    except Exception as exc:  # datasets raises many types (network, missing config, ...)
        raise InputError(
            f"could not load the dataset {name!r} split {split!r}: {_root_cause(exc)}",
            fix="check the hub name and split, or pass a local folder saved with save_to_disk, "
                "or a local .parquet / .jsonl / .csv file.",
        ) from exc


def load_hub_items(
    name: str,
    *,
    human_fields: Mapping[str, str] | Sequence[str],
    split: str = "test",
    revision: str | None = None,
    input_field: str = "input",
    output_field: str = "output",
    id_field: str | None = None,
    doc_field: str | None = None,
    system_field: str | None = None,
    reference_field: str | None = None,
    limit: int | None = None,
    sample: SampleMethod | None = None,
    seed: int = 0,
) -> list[dspy.Example]:
    """Load scored items through Hugging Face `datasets`.

    Args:
        name: a hub dataset id (``owner/name``), a local folder written by
            ``Dataset.save_to_disk`` / ``DatasetDict.save_to_disk``, or a local
            ``.parquet`` or ``.json`` file; a local ``.jsonl`` or ``.csv`` file is read
            by `load_scored_items` (same result, errors name the line).
        split: split to read from a hub dataset or a saved `DatasetDict`.
        revision: hub revision (commit, tag or branch) to pin.
        Other arguments: as in `load_scored_items` (rows are numbered from 1 in errors).

    Returns:
        Same as `load_scored_items`.

    Raises:
        InputError: the dataset cannot be loaded (unreachable hub, unknown split,
            unreadable or empty local file), a row lacks a mapped field, or
            `human_fields` is not a mapping or a list of field names.
    """
    local = Path(str(name)).expanduser()
    if local.is_file() and local.suffix.lower() in OWN_READER_SUFFIXES:
        return load_scored_items(local, human_fields=human_fields, input_field=input_field,
                                 output_field=output_field, id_field=id_field, doc_field=doc_field,
                                 system_field=system_field, reference_field=reference_field, limit=limit,
                                 sample=sample, seed=seed)
    human = _human_map(human_fields)
    data = _open_dataset(name, split, revision)
    items = []
    for number, row in enumerate(data, start=1):
        ex = item_from_row(dict(row), path=Path(name), line=number, input_field=input_field,
                           output_field=output_field, id_field=id_field, text_only=False)
        items.append(_attach(ex, source=name, human=human, doc_field=doc_field, system_field=system_field,
                             reference_field=reference_field))
    check_unique_ids(items, Path(name), id_field)
    return select_items(items, limit, sample=sample, seed=seed,
                        group=lambda ex: ex.doc_id, stratum=lambda ex: ex.system_id)

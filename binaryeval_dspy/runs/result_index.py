"""What a run directory already holds, read once and kept small; and appending new results to it.

`ResultIndex.read` goes through ``results.jsonl`` once (a last line cut short by a crash
is trimmed, a damaged complete line is refused naming file and line, as
`ResultsFile.read_results` does) and keeps, per item, only what a resumed run needs: for a
complete item its ids and hashes (to check the stored texts are the ones given now), for
an incomplete one the whole result (its answers are continued). A run of 10,000 complete
items therefore holds 10,000 small records, not 10,000 results.

`ResultsWriter` appends each finished item's row (flushed at once, fsynced at most once a
second and when the run ends: a killed process loses nothing, a machine that loses power
at most the last second) and, when the run ends, puts the file back in item order with one
pass that reads line offsets, never the whole file's results at once.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from binaryeval_dspy.errors import RunStateError

logger = logging.getLogger(__name__)

#: Seconds between fsyncs of results.jsonl while a run appends to it.
FSYNC_EVERY = 1.0


@dataclass(frozen=True)
class StoredRow:
    """A stored result's identity: enough to check it belongs to the items given now."""

    item_id: str
    question_set_hash: str | None
    input_hash: str | None
    output_hash: str | None
    complete: bool
    status: str | None


class ResultIndex:
    """The results a run directory holds (see the module docstring). Use `ResultIndex.read`."""

    def __init__(self, run_dir: Any, rows: dict[str, StoredRow], incomplete: dict[str, Any]) -> None:
        self.run_dir = run_dir
        self.rows = rows
        self._incomplete = incomplete

    @classmethod
    def read(cls, run_dir: Any) -> ResultIndex:
        """Read `run_dir`'s results once (see `ResultsFile.iter_results` for what is repaired or refused).

        Raises:
            InputError: a complete line is not a valid result (names the file and line).
        """
        rows: dict[str, StoredRow] = {}
        incomplete: dict[str, Any] = {}
        for result in run_dir.iter_results():
            complete = bool(getattr(result, "complete", True))
            rows[result.item_id] = StoredRow(
                item_id=result.item_id, question_set_hash=getattr(result, "question_set_hash", None),
                input_hash=getattr(result, "input_hash", None), output_hash=getattr(result, "output_hash", None),
                complete=complete, status=getattr(result, "status", None))
            if complete:
                incomplete.pop(result.item_id, None)
            else:
                incomplete[result.item_id] = result
        return cls(run_dir, rows, incomplete)

    def __contains__(self, item_id: object) -> bool:
        return item_id in self.rows

    def is_complete(self, item_id: str) -> bool:
        """Whether `item_id` has a complete stored result (a rerun skips it)."""
        row = self.rows.get(item_id)
        return row is not None and row.complete

    def incomplete(self, item_id: str) -> Any:
        """The stored result of an incomplete item (its answers are continued), else None."""
        return self._incomplete.get(item_id)

    def checkable(self) -> list[StoredRow]:
        """One `StoredRow` per stored item, for `check_stored_items`."""
        return list(self.rows.values())

    def writer(self) -> ResultsWriter:
        """A writer appending to this run's results file, aware of what is stored."""
        return ResultsWriter(self.run_dir, {k: (r.complete, r.status) for k, r in self.rows.items()})


class ResultsWriter:
    """Appends results to ``results.jsonl`` and puts it in item order at the end (module docstring)."""

    def __init__(self, run_dir: Any, known: dict[str, tuple[bool, str | None]]) -> None:
        self.run_dir = run_dir
        self.known = dict(known)  # item id -> (complete, status), stored before and now
        self.appended = 0
        self._handle: Any = None
        self._synced = time.monotonic()

    def append(self, result: Any) -> None:
        """Append one result line (flushed; fsynced at most every `FSYNC_EVERY` seconds).

        Raises:
            RunStateError: the file cannot be written (disk full, permissions); results
                already stored are untouched.
        """
        path = self.run_dir.results_path
        try:
            if self._handle is None:
                self.run_dir.path.mkdir(parents=True, exist_ok=True)
                self._handle = path.open("a", encoding="utf-8")
            self._handle.write(result.model_dump_json() + "\n")
            self._handle.flush()
            if time.monotonic() - self._synced >= FSYNC_EVERY:
                os.fsync(self._handle.fileno())
                self._synced = time.monotonic()
        except OSError as exc:
            raise RunStateError(f"cannot append to {path}: {exc.strerror}. Results already stored are kept.",
                                fix="remove the cause and rerun the same command.") from exc
        self.known[result.item_id] = (bool(getattr(result, "complete", True)), getattr(result, "status", None))
        self.appended += 1

    def incomplete_ids(self) -> list[str]:
        """Ids of stored items that are not complete."""
        return [item_id for item_id, (complete, _status) in self.known.items() if not complete]

    def empty_output_ids(self) -> list[str]:
        """Ids of stored items with status ``empty_output``."""
        return [item_id for item_id, (_complete, status) in self.known.items() if status == "empty_output"]

    def close(self, *, order: Sequence[str] | None) -> None:
        """fsync and close; then, if anything was appended and `order` is given, rewrite the
        file once with one line per item (the last one written), items of `order` in that
        order after the others (in stored order)."""
        if self._handle is not None:
            try:
                os.fsync(self._handle.fileno())
            except OSError:
                pass
            self._handle.close()
            self._handle = None
        if self.appended and order is not None:
            put_in_order(self.run_dir.results_path, order)


def _line_offsets(path: Any) -> Iterator[tuple[str, int, int]]:
    """(item id, offset, length) of every complete result line, in file order."""
    offset = 0
    with path.open("rb") as handle:
        for line in handle:
            length = len(line)
            if line.endswith(b"\n") and line.strip():
                try:
                    item_id = json.loads(line)["item_id"]
                except (ValueError, KeyError, TypeError):
                    item_id = None
                if isinstance(item_id, str):
                    yield item_id, offset, length
            offset += length


def put_in_order(path: Any, order: Sequence[str]) -> None:
    """Rewrite a results file with one line per item (the last), `order`'s items last and in that order.

    Reads line offsets (not results) and copies lines, so memory does not grow with the
    file; the new file is fsynced and replaces the old one atomically. Nothing is done when
    the file is already so.
    """
    if not path.is_file():
        return
    last: dict[str, tuple[int, int]] = {}
    in_file: list[str] = []
    for item_id, offset, length in _line_offsets(path):
        last[item_id] = (offset, length)
        in_file.append(item_id)
    position = {item_id: index for index, item_id in enumerate(order)}
    others = [i for i in dict.fromkeys(in_file) if i not in position]
    ours = sorted((i for i in last if i in position), key=position.__getitem__)
    wanted = others + ours
    if in_file == wanted:
        return
    tmp = path.with_suffix(".jsonl.tmp")
    with path.open("rb") as source, tmp.open("wb") as target:
        for item_id in wanted:
            offset, length = last[item_id]
            source.seek(offset)
            target.write(source.read(length))
        target.flush()
        os.fsync(target.fileno())
    os.replace(tmp, path)

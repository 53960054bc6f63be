"""A run's ``results.jsonl``: one result per line, appended and fsynced as each item is done.

`ResultsFile` reads the file back (a last line cut short by a crash is trimmed), appends
one result, and rewrites the whole file atomically. `binaryeval_dspy.runs.run_directory.RunDirectory`
is built on it, with the result type in its ``result_model``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ValidationError

from binaryeval_dspy.data.json_files import validation_error
from binaryeval_dspy.errors import RunStateError
from binaryeval_dspy.schemas.item_result import ItemResult

logger = logging.getLogger(__name__)


class ResultsFile:
    """The results file of a run directory (a mixin of `RunDirectory`, which sets the attributes)."""

    path: Path
    results_path: Path
    result_model: type[BaseModel]

    def read_results(self, *, repair: bool = True) -> list[ItemResult]:
        """All stored item results, in file order, one per item id (the last one wins).

        A last line that is not complete JSON (a write cut short by a crash) is
        trimmed, with a warning; a missing final newline is added.

        Args:
            repair: trim a truncated last line and add a missing final newline (the
                default, for the process that owns the run). Readers that may run
                beside a live run (reports) pass False: the fragment is only skipped.

        Raises:
            InputError: a complete line is not a valid result (names the file and
                line; nothing is deleted).
        """
        results: dict[str, ItemResult] = {}
        for number, result in self._numbered_results(repair=repair):
            if result.item_id in results:
                logger.warning("%s:%d: item %r appears again; the later line is used",
                               self.results_path, number, result.item_id)
                del results[result.item_id]
            results[result.item_id] = result
        return list(results.values())

    def iter_results(self, *, repair: bool = True) -> Iterator[ItemResult]:
        """The stored results line by line, in file order (an item stored twice comes twice: the
        later line wins), without holding the file or its results in memory; repairs and
        refuses as `read_results` does."""
        for _number, result in self._numbered_results(repair=repair):
            yield result

    def _numbered_results(self, *, repair: bool) -> Iterator[tuple[int, ItemResult]]:
        if not self.results_path.is_file():
            return
        with self.results_path.open("rb") as handle:
            offset = 0
            number = 0
            pending: tuple[int, int, bytes] | None = None  # (number, offset, line) of the line before this one
            for line in handle:
                number += 1
                if pending is not None:
                    yield pending[0], self._validated(pending[2], pending[0], last=False)
                    pending = None
                if line.strip():
                    pending = (number, offset, line)
                offset += len(line)
        if pending is None:
            return
        number, start, line = pending
        if not line.endswith(b"\n") and not _is_json(line):  # the write was cut short: drop the fragment
            try:
                result = self.result_model.model_validate_json(line)
            except ValidationError:
                if repair:
                    logger.warning("%s:%d: dropping an incomplete last line (%d bytes) left by an "
                                   "interrupted write; that item will be judged again",
                                   self.results_path, number, len(line))
                    self._truncate(start)
                return
            yield number, result
            return
        yield number, self._validated(line, number, last=True)
        if repair and not line.endswith(b"\n"):  # a complete line without its newline: add it before appending
            with self.results_path.open("ab") as out:
                out.write(b"\n")

    def _validated(self, line: bytes, number: int, *, last: bool) -> ItemResult:
        try:
            return self.result_model.model_validate_json(line)
        except ValidationError as exc:
            raise validation_error(
                exc, path=self.results_path, line=number, what="item result",
                fix="move the damaged line out of the file; the other results are kept.",
            ) from exc

    def _truncate(self, size: int) -> None:
        with self.results_path.open("r+b") as handle:
            handle.truncate(size)

    def append(self, result: ItemResult) -> None:
        """Append one result as a JSON line and fsync it.

        Raises:
            RunStateError: the file cannot be written (disk full, permissions); results
                already stored are untouched.
        """
        try:
            line = result.model_dump_json() + "\n"
            self.path.mkdir(parents=True, exist_ok=True)
            with self.results_path.open("a", encoding="utf-8") as handle:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            raise RunStateError(f"cannot append to {self.results_path}: {exc.strerror}. Results already "
                                "stored are kept.", fix="remove the cause and rerun the same command.") from exc

    def rewrite_results(self, results: list[ItemResult]) -> None:
        """Replace results.jsonl atomically (used when re-judging replaces items)."""
        tmp = self.results_path.with_suffix(".jsonl.tmp")
        with tmp.open("w", encoding="utf-8") as handle:
            for r in results:
                handle.write(r.model_dump_json() + "\n")
        os.replace(tmp, self.results_path)


def _is_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except (ValueError, RecursionError):
        return False
    return True

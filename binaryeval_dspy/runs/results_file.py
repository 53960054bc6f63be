"""A run's ``results.jsonl``: one result per line, appended and fsynced as each item is done.

`ResultsFile` reads the file back (for the run's owner a last line cut short by a crash is
trimmed; for any other reader nothing changes and every unreadable line is named, see
`StoredResults`), appends one result, and rewrites the whole file atomically. `binaryeval_dspy.runs.run_directory.RunDirectory`
is built on it, with the result type in its ``result_model``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from binaryeval_dspy.data.json_files import validation_error
from binaryeval_dspy.errors import RunStateError
from binaryeval_dspy.schemas.item_result import ItemResult

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class UnreadableLine:
    """One line of a results file that gave no result.

    Attributes:
        path: the results file.
        line: its 1-based line number.
        size: its length in bytes (without the newline).
        reason: why it gave no result: ``"incomplete"`` (the last line, not complete
            JSON: a write cut short, e.g. by a killed run) or the first validation
            error of a complete line (``"not a valid item result (...)"``, field named).
    """

    path: Path
    line: int
    size: int
    reason: str

    def describe(self) -> str:
        """``line 3 (an incomplete last line of 57 bytes: a write cut short, ...)`` or
        ``line 2 (field 'verdicts': not a valid item result (...); 40 bytes)``."""
        if self.reason == INCOMPLETE:
            return (f"line {self.line} (an incomplete last line of {self.size} bytes: a write cut short, e.g. by a "
                    "killed run, or still being written)")
        return f"line {self.line} ({self.reason}; {self.size} bytes)"


#: `UnreadableLine.reason` of a last line that is not complete JSON
INCOMPLETE = "incomplete"


@dataclass
class StoredResults:
    """What a results file holds, as read: the results and every line that gave none.

    Attributes:
        path: the results file.
        results: the item results, in file order, one per item id (the last line wins).
        unreadable: every non-blank line that gave no result, in file order.
        lines: how many non-blank lines the file has.
    """

    path: Path
    results: list[Any] = field(default_factory=list)
    unreadable: list[UnreadableLine] = field(default_factory=list)
    lines: int = 0

    def note(self) -> str | None:
        """One sentence that counts and names every unreadable line (None when there is none),
        e.g. ``runs/x/results.jsonl: 1 of 3 lines could not be read and is left out: line 3
        (an incomplete last line of 57 bytes: ...).``"""
        if not self.unreadable:
            return None
        n = len(self.unreadable)
        verb = "is" if n == 1 else "are"
        return (f"{self.path}: {n} of {self.lines} lines could not be read and {verb} left out: "
                + "; ".join(u.describe() for u in self.unreadable) + ".")


class ResultsFile:
    """The results file of a run directory (a mixin of `RunDirectory`, which sets the attributes)."""

    path: Path
    results_path: Path
    result_model: type[BaseModel]

    def read_results(self, *, repair: bool = True) -> list[ItemResult]:
        """All stored item results, in file order, one per item id (the last one wins).

        For the process that owns the run (it appends next): a last line that is not
        complete JSON (a write cut short by a crash) is trimmed, with a warning naming
        it; a missing final newline is added. Readers of a run they do not own use
        `read_stored_results`, which changes nothing and names every unreadable line.

        Args:
            repair: trim a truncated last line and add a missing final newline (the
                default). False only skips the fragment (with the same warning).

        Raises:
            InputError: a complete line is not a valid result (names the file and
                line; nothing is deleted).
        """
        stored = self._scan(repair=repair, strict=True)
        for unreadable in stored.unreadable:
            self._warn_once("%s:%d: %s an incomplete last line (%d bytes) left by an interrupted write; that item "
                            "will be judged again", self.results_path, unreadable.line,
                            "dropping" if repair else "skipping", unreadable.size)
        return stored.results

    def read_stored_results(self, *, strict: bool = True) -> StoredResults:
        """The stored results and every line that gave none, changing nothing (safe beside a
        run that is still appending).

        Args:
            strict: a complete line that is not a valid result raises (the default, for
                readers that compute numbers from the results); False records it in
                ``unreadable`` too, so that a viewer can show the rest and name it.

        Returns:
            A `StoredResults`; `StoredResults.note` is the sentence to show. An incomplete
            last line (a write cut short) is always recorded, never raised.

        Raises:
            InputError: with `strict`, a complete line is not a valid result (file and line named).
        """
        return self._scan(repair=False, strict=strict)

    def iter_results(self, *, repair: bool = True) -> Iterator[ItemResult]:
        """The stored results line by line, in file order, without holding the file or its
        results in memory. An item stored twice comes twice (the later line wins). Repairs
        and refuses as `read_results` does, with the same warning for a cut-short last line.

        Raises:
            InputError: a complete line is not a valid result (file and line named).
        """
        unreadable: list[UnreadableLine] = []
        for _number, result in self._walk(repair=repair, strict=True, unreadable=unreadable):
            yield result
        for line in unreadable:
            self._warn_once("%s:%d: %s an incomplete last line (%d bytes) left by an interrupted write; that item "
                            "will be judged again", self.results_path, line.line,
                            "dropping" if repair else "skipping", line.size)

    def _warn_once(self, message: str, *args: Any) -> None:
        """Log a warning about a line of the results file once for the file as it is now: a run
        reads its file several times (resume, the summary, the report), and each reader would
        otherwise say the same thing again. The file's size and modification time are part of
        what was said, so a file that changed is warned about afresh."""
        try:
            stat = self.results_path.stat()
            state: tuple[Any, ...] = (stat.st_size, stat.st_mtime_ns)
        except OSError:
            state = ()
        key = (str(self.results_path.resolve()), state, message % args)
        if key not in _SAID:
            _SAID.add(key)
            logger.warning(message, *args)

    def _scan(self, *, repair: bool, strict: bool) -> StoredResults:
        stored = StoredResults(path=self.results_path)
        results: dict[str, Any] = {}
        for number, result in self._walk(repair=repair, strict=strict, unreadable=stored.unreadable,
                                         counted=stored):
            item_id = getattr(result, "item_id")
            if item_id in results:
                self._warn_once("%s:%d: item %r appears again; the later line is used",
                                self.results_path, number, item_id)
                del results[item_id]
            results[item_id] = result
        stored.results = list(results.values())
        return stored

    def _walk(self, *, repair: bool, strict: bool, unreadable: list[UnreadableLine],
              counted: StoredResults | None = None) -> Iterator[tuple[int, Any]]:
        """(line number, result) for every readable line, streaming the file once.

        The last line, when it does not end in a newline and is not JSON, is a write cut
        short: it is recorded as `INCOMPLETE` (and trimmed with `repair`). A complete last
        line without its newline gets one with `repair`, before anything is appended.
        """
        if not self.results_path.is_file():
            return
        with self.results_path.open("rb") as handle:
            offset = 0
            number = 0
            for line in handle:
                number += 1
                start = offset
                offset += len(line)
                if not line.strip():
                    continue
                if counted is not None:
                    counted.lines += 1
                last = not line.endswith(b"\n")
                try:
                    result = self.result_model.model_validate_json(line)
                except ValidationError as exc:
                    if last and not _is_json(line):  # the write was cut short: drop the fragment
                        unreadable.append(UnreadableLine(self.results_path, number, len(line), INCOMPLETE))
                        if repair:
                            self._truncate(start)
                        return
                    error = validation_error(
                        exc, path=self.results_path, line=number, what="item result",
                        fix="move the damaged line out of the file; the other results are kept.",
                    )
                    if strict:
                        raise error from exc
                    reason = (f"field '{error.field}': " if error.field else "") + error.message
                    unreadable.append(UnreadableLine(self.results_path, number, len(line.rstrip(b"\n")), reason))
                    continue
                yield number, result
                if last and repair:  # a complete line without its newline: add it before anything is appended
                    with self.results_path.open("ab") as out:
                        out.write(b"\n")

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


#: Warnings about a results file already logged in this process (`ResultsFile._warn_once`).
_SAID: set[tuple[str, tuple[Any, ...], str]] = set()


def _is_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except (ValueError, RecursionError):
        return False
    return True

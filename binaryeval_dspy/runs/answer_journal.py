"""A run's ``answers.jsonl``: each question's answer written the moment its LM call returns.

An item's result goes to ``results.jsonl`` only once all of its questions are done. Until
then its answers live in memory, and a process killed outright (SIGKILL, the machine
going down, an out-of-memory kill) or stopped by ``fail_on_errors`` would lose them.
The journal keeps them: every yes, no or unparsed answer from the LM is appended (and
flushed to the operating system) as soon as its call returns, with the item's id, the
hashes of the input and output it judged and the question set's hash. A rerun of the
same command hands an incomplete item the journal's answers as well as its stored
verdicts, so only the questions without an answer are asked (per-question durability).

Every line carries the usage of the call that gave it (LM calls, failed requests and
tokens, `binaryeval_dspy.lm.usage`), and a call that ended in an ``error`` (every attempt
failed) gets a line too, for its usage only: it is not an answer and is never read as
one. A rerun adds to an item's stored usage that of the journaled answers it takes and of
the failed calls, so a resumed run's totals count every request the endpoint received
(`AnswerJournal.recovered_usage`).

When an item's result is stored in ``results.jsonl`` (complete or not: the row then
holds its answers and usage), a *stored* line is appended for it: the lines before it
are in the row and are not read again. Nothing is rewritten per answer or per item (a
cost that grew with the run); the file is compacted once when the run ends
(`AnswerJournal.compact`: the lines of stored items dropped, the file removed when none
is left). A line cut short by a kill is skipped on read.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from binaryeval_dspy.schemas.item_result import Usage, text_hash
from binaryeval_dspy.schemas.verdict import QuestionVerdict

logger = logging.getLogger(__name__)

#: The journal's file name inside a run directory.
ANSWERS = "answers.jsonl"

_Key = tuple[str, str, str]  # (item id, input hash, output hash)


class AnswerJournal:
    """Append-only journal of one run directory's question answers (thread-safe).

    Args:
        path: the ``answers.jsonl`` file (created on the first answer).
        question_set_hash: the run's question set; lines of another set are ignored.
    """

    def __init__(self, path: str | Path, question_set_hash: str) -> None:
        self.path = Path(path)
        self.question_set_hash = question_set_hash
        self._lock = threading.Lock()
        self._warned = False
        self._handle: Any = None
        self._found: dict[_Key, dict[str, tuple[QuestionVerdict, Usage]]] | None = None
        self._failed: dict[_Key, Usage] = {}  # usage of calls that ended in an error (read once, at first use)
        self._hashes: dict[str, tuple[str, str, str, str, str]] = {}  # item id -> texts, hashes, line start
        self._unstored: set[tuple[str, str, str]] = set()  # items with lines written this session, not yet stored
        self._earlier: bool | None = None  # the file held lines of an earlier session when this one first wrote

    # ------------------------------------------------------------------ writing

    def key(self, item: Any) -> _Key:
        """(item id, input hash, output hash), hashed once per item while it is open."""
        item_id = str(item.item_id)
        known = self._hashes.get(item_id)
        if known is None or known[0] is not item.input or known[1] is not item.output:
            input_hash, output_hash = text_hash(item.input), text_hash(item.output)
            head = json.dumps({"item_id": item_id, "question_set_hash": self.question_set_hash,
                               "input_hash": input_hash, "output_hash": output_hash}, ensure_ascii=False)
            known = self._hashes[item_id] = (item.input, item.output, input_hash, output_hash, head[:-1])
        return item_id, known[2], known[3]

    def write(self, item: Any, verdict: QuestionVerdict, usage: Usage | None = None) -> None:
        """Append one outcome of `item` (an Example with ``item_id``, ``input``, ``output``)
        with the `usage` of the call that gave it, flushed to the operating system.

        An answer (yes, no, unparsed) is journaled with its usage; an ``error`` outcome only
        when its call used something (failed requests, tokens), for that usage. Nothing is
        written for a question answered by code. A failed write (disk full, permissions) is
        logged once and otherwise ignored: the answer is still stored with its item when
        the item completes.
        """
        if verdict.source != "lm":
            return
        usage = usage if usage is not None else Usage()
        if not verdict.answered and not (usage.lm_calls or usage.failed_calls or usage.total_tokens):
            return
        key = self.key(item)
        self._unstored.add(key)
        head = self._hashes[key[0]][4]  # the line's start, the same for every answer of the item
        # the records' own (compiled) serializers, spliced into the line
        self._write_line(f'{head}, "verdict": {verdict.model_dump_json()}, "usage": {usage.model_dump_json()}}}')

    def stored(self, item: Any, *, keep_answers: bool = False) -> None:
        """`item`'s result is now in ``results.jsonl`` with its answers and usage: its lines so
        far are not read again. With `keep_answers` (an ``error`` row stored without the
        answers), the answers stay for the rerun, without their usage (now in the row)."""
        item_id, input_hash, output_hash = self.key(item)
        self._hashes.pop(item_id, None)
        if (item_id, input_hash, output_hash) not in self._unstored and not keep_answers:
            if self._earlier is None:
                self._earlier = self.path.is_file() and self.path.stat().st_size > 0
            if not self._earlier:
                return  # no line of it anywhere: nothing to mark
        if keep_answers:
            self._earlier = True  # lines to keep: the end of the run must rewrite the file, not remove it
        else:
            self._unstored.discard((item_id, input_hash, output_hash))
        self._append({"stored": item_id, "question_set_hash": self.question_set_hash, "input_hash": input_hash,
                      "output_hash": output_hash, **({"answers_kept": True} if keep_answers else {})})

    def _append(self, row: dict[str, Any]) -> None:
        self._write_line(json.dumps(row, ensure_ascii=False))

    def _write_line(self, text: str) -> None:
        line = text + "\n"
        try:
            with self._lock:
                if self._handle is None:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    if self._earlier is None:
                        self._earlier = self.path.is_file() and self.path.stat().st_size > 0
                    self._handle = self.path.open("a", encoding="utf-8")
                self._handle.write(line)
                self._handle.flush()
        except OSError as exc:
            if not self._warned:
                self._warned = True
                logger.warning("could not write %s (%s): answers are stored only when their item completes",
                               self.path, exc.strerror or exc)

    def close(self) -> None:
        """Close the file (later writes reopen it)."""
        with self._lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None

    # ------------------------------------------------------------------ reading

    def answers(self, item: Any) -> list[QuestionVerdict]:
        """The answers journaled before this run for `item` (same id, question set, input and
        output) and not yet in a stored row, one per question. The file is read once."""
        if self._found is None:
            self._found, self._failed = self._read()
        return [verdict for verdict, _usage in self._found.get(self._key_of(item), {}).values()]

    def recovered_usage(self, item: Any, stored: Sequence[QuestionVerdict]) -> Usage:
        """The usage, spent before this run, that `item`'s stored result does not hold yet:
        that of each journaled answer `merge_answers` takes over `stored` (a question with
        no stored answer), plus that of the journaled calls that ended in an error."""
        if self._found is None:
            self._found, self._failed = self._read()
        key = self._key_of(item)
        answered = {v.question_id for v in stored if v.answered}
        usage = self._failed.get(key, Usage())
        for question_id, (_verdict, spent) in self._found.get(key, {}).items():
            if question_id not in answered:
                usage = usage + spent
        return usage

    @staticmethod
    def _key_of(item: Any) -> _Key:
        return str(item.item_id), text_hash(item.input), text_hash(item.output)

    def _rows(self) -> Iterable[dict[str, Any]]:
        try:
            handle = self.path.open(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return
        except OSError as exc:
            logger.warning("could not read %s (%s): its answers will be asked again", self.path, exc.strerror or exc)
            return
        with handle:
            for raw in handle:
                try:
                    row = json.loads(raw)
                except ValueError:
                    continue  # a line cut short by a kill: its question is asked again
                if isinstance(row, dict) and row.get("question_set_hash") == self.question_set_hash:
                    yield row

    def _read(self) -> tuple[dict[_Key, dict[str, tuple[QuestionVerdict, Usage]]], dict[_Key, Usage]]:
        found: dict[_Key, dict[str, tuple[QuestionVerdict, Usage]]] = {}
        failed: dict[_Key, Usage] = {}
        for row in self._rows():
            try:
                if "stored" in row:  # what came before is in the stored row
                    key = (str(row["stored"]), str(row["input_hash"]), str(row["output_hash"]))
                    failed.pop(key, None)
                    if row.get("answers_kept"):
                        found[key] = {q: (v, Usage()) for q, (v, _u) in found.get(key, {}).items()}
                    else:
                        found.pop(key, None)
                    continue
                verdict = QuestionVerdict.model_validate(row["verdict"])
                usage = Usage.model_validate(row.get("usage") or {})  # lines written before usage existed: none
                key = (str(row["item_id"]), str(row["input_hash"]), str(row["output_hash"]))
            except (ValueError, KeyError, TypeError, AttributeError, ValidationError):
                continue  # not ours: its question is asked again
            if verdict.answered:
                found.setdefault(key, {})[verdict.question_id] = (verdict, usage)
            else:
                failed[key] = failed.get(key, Usage()) + usage
        return found, failed

    # ------------------------------------------------------------------ at the end

    def compact(self) -> None:
        """Rewrite the journal once without the lines of stored items (their answers and usage
        are in their rows); remove it when nothing is left. Lines of other question sets stay.
        When the file holds only this session's lines and every item they are about is stored
        (a run that finished), it is removed without being read."""
        self.close()
        with self._lock:
            if self._earlier is False and not self._unstored:  # every line of this session's items is stored
                try:
                    self.path.unlink(missing_ok=True)
                except OSError as exc:
                    logger.warning("could not remove %s (%s)", self.path, exc.strerror or exc)
                return
            if self._earlier is None and not self.path.exists():
                return  # nothing was written
            try:
                lines = self.path.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                return
            stored_at: dict[_Key, tuple[int, bool]] = {}
            parsed: list[tuple[str, dict[str, Any] | None]] = []
            for number, raw in enumerate(lines):
                try:
                    row = json.loads(raw)
                except ValueError:
                    parsed.append((raw, None))
                    continue
                parsed.append((raw, row if isinstance(row, dict) else None))
                if isinstance(row, dict) and "stored" in row:
                    stored_at[(row.get("question_set_hash"), str(row["stored"]), str(row.get("input_hash")),
                               str(row.get("output_hash")))] = (number, bool(row.get("answers_kept")))
            kept = []
            for number, (raw, row) in enumerate(parsed):
                if row is None or "stored" in row:
                    continue  # a fragment cut by a kill, or a marker: nothing to keep
                mark = stored_at.get((row.get("question_set_hash"), str(row.get("item_id")),
                                      str(row.get("input_hash")), str(row.get("output_hash"))))
                if mark is None or mark[0] < number:
                    kept.append(raw)
                elif mark[1] and (row.get("verdict") or {}).get("verdict") != "error":
                    kept.append(json.dumps({**row, "usage": {}}, ensure_ascii=False))
            try:
                if not kept:
                    self.path.unlink(missing_ok=True)
                elif kept != lines:
                    partial = self.path.with_suffix(".jsonl.partial")
                    partial.write_text("\n".join(kept) + "\n", encoding="utf-8")
                    os.replace(partial, self.path)
            except OSError as exc:
                logger.warning("could not tidy %s (%s); it is read again next time", self.path, exc.strerror or exc)


def merge_answers(stored: Sequence[QuestionVerdict], journaled: Sequence[QuestionVerdict]) -> list[QuestionVerdict]:
    """An item's stored verdicts with the journal's answers filled in where the stored one is
    missing or an ``error`` (a stored answer wins over a journaled one for the same question)."""
    merged = {v.question_id: v for v in stored}
    for verdict in journaled:
        current = merged.get(verdict.question_id)
        if current is None or not current.answered:
            merged[verdict.question_id] = verdict
    return list(merged.values())

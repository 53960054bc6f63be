"""A run's ``answers.jsonl``: each question's answer written the moment its LM call returns.

An item's result goes to ``results.jsonl`` only once all of its questions are done. Until
then its answers live in memory, and a process killed outright (SIGKILL, the machine
going down, an out-of-memory kill) or stopped by ``--fail-on-errors`` would lose them.
The journal keeps them: every yes, no or unparsed answer from the LM is appended (and
flushed to the operating system) as soon as its call returns, with the item's id, the
hashes of the input and output it judged and the question set's hash. A rerun of the
same command hands an incomplete item the journal's answers as well as its stored
verdicts, so only the questions without an answer are asked (issue "Real endpoints",
per-question durability).

Lines for items that are complete in ``results.jsonl`` are dropped at the end of a run
(the file is removed when none is left). A line cut short by a kill is skipped on read.
An ``error`` outcome is never journaled: it is not an answer.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from binaryeval_dspy.engines.item_work import ItemWork
from binaryeval_dspy.schemas.item_result import text_hash
from binaryeval_dspy.schemas.verdict import QuestionVerdict

logger = logging.getLogger(__name__)

#: The journal's file name inside a run directory.
ANSWERS = "answers.jsonl"


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
        self._found: dict[tuple[str, str, str], dict[str, QuestionVerdict]] | None = None  # read once, at first use

    def write(self, item: Any, verdict: QuestionVerdict) -> None:
        """Append one answer of `item` (an Example with ``item_id``, ``input``, ``output``).

        Does nothing for an ``error`` verdict or one answered by code. A failed write
        (disk full, permissions) is logged once and otherwise ignored: the answer is
        still stored with its item when the item completes.
        """
        if not verdict.answered or verdict.source != "lm":
            return
        line = json.dumps({
            "item_id": str(item.item_id), "question_set_hash": self.question_set_hash,
            "input_hash": text_hash(item.input), "output_hash": text_hash(item.output),
            "verdict": verdict.model_dump(mode="json"),
        }, ensure_ascii=False)
        try:
            with self._lock, self.path.open("a", encoding="utf-8") as handle:
                handle.write(line + "\n")
        except OSError as exc:
            if not self._warned:
                self._warned = True
                logger.warning("could not write %s (%s): answers are stored only when their item completes",
                               self.path, exc.strerror or exc)

    def answers(self, item: Any) -> list[QuestionVerdict]:
        """The answers journaled before this run for `item` (same id, question set, input and
        output), one per question. The file is read once, at the first call."""
        if self._found is None:
            self._found = self._read()
        return list(self._found.get(self._key(item), {}).values())

    def _key(self, item: Any) -> tuple[str, str, str]:
        return str(item.item_id), text_hash(item.input), text_hash(item.output)

    def _read(self) -> dict[tuple[str, str, str], dict[str, QuestionVerdict]]:
        found: dict[tuple[str, str, str], dict[str, QuestionVerdict]] = {}
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return found
        except OSError as exc:
            logger.warning("could not read %s (%s): its answers will be asked again", self.path, exc.strerror or exc)
            return found
        for raw in text.splitlines():
            try:
                row = json.loads(raw)
                if row.get("question_set_hash") != self.question_set_hash:
                    continue
                verdict = QuestionVerdict.model_validate(row["verdict"])
                key = (str(row["item_id"]), str(row["input_hash"]), str(row["output_hash"]))
            except (ValueError, KeyError, TypeError, AttributeError, ValidationError):
                continue  # a line cut short by a kill, or not ours: its question is asked again
            found.setdefault(key, {})[verdict.question_id] = verdict
        return found

    def drop(self, item_ids: Iterable[str]) -> None:
        """Drop the lines of `item_ids` (items now complete in ``results.jsonl``); the file is
        removed when no line is left. Lines of other items, judged or not in this run, stay."""
        done = set(item_ids)
        try:
            lines = self.path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return
        kept = []
        for raw in lines:
            try:
                if str(json.loads(raw)["item_id"]) not in done:
                    kept.append(raw)
            except (ValueError, KeyError, TypeError):
                continue  # a line cut short by a kill: nothing to keep
        try:
            if not kept:
                self.path.unlink(missing_ok=True)
            elif len(kept) < len(lines):
                partial = self.path.with_suffix(".jsonl.partial")
                partial.write_text("\n".join(kept) + "\n", encoding="utf-8")
                os.replace(partial, self.path)
        except OSError as exc:
            logger.warning("could not tidy %s (%s); it is read again next time", self.path, exc.strerror or exc)


def with_journal(journal: AnswerJournal, item: Any, work: ItemWork) -> ItemWork:
    """`work` with every call's answer appended to `journal` as soon as the call returns."""
    def journaled(call: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            value = call()
            if isinstance(value, QuestionVerdict):
                journal.write(item, value)
            return value
        return run

    work.calls = [journaled(call) for call in work.calls]
    return work


def merge_answers(stored: Sequence[QuestionVerdict], journaled: Sequence[QuestionVerdict]) -> list[QuestionVerdict]:
    """An item's stored verdicts with the journal's answers filled in where the stored one is
    missing or an ``error`` (a stored answer wins over a journaled one for the same question)."""
    merged = {v.question_id: v for v in stored}
    for verdict in journaled:
        current = merged.get(verdict.question_id)
        if current is None or not current.answered:
            merged[verdict.question_id] = verdict
    return list(merged.values())

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

Every line carries the usage of the call that gave it (LM calls, failed requests and
tokens, `binaryeval_dspy.cost.usage`), and a call that ended in an ``error`` (every attempt
failed) gets a line too, for its usage only: it is not an answer and is never read as
one. A rerun adds to an item's stored usage that of the journaled answers it takes and of
the failed calls, so a resumed run's totals count every request the endpoint received
(`AnswerJournal.recovered_usage`).

An item's lines are dropped once its result is stored in ``results.jsonl`` (complete or
not: the stored row then holds its answers and usage), and the file is removed when none
is left. A line cut short by a kill is skipped on read.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import dspy
from pydantic import ValidationError

from binaryeval_dspy.cost.usage import usage_from_tracker
from binaryeval_dspy.engines.item_work import ItemWork
from binaryeval_dspy.schemas.item_result import Usage, text_hash
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
        self._found: dict[tuple[str, str, str], dict[str, tuple[QuestionVerdict, Usage]]] | None = None
        self._failed: dict[tuple[str, str, str], Usage] = {}  # usage of calls that ended in an error
        # (both read once, at first use)

    def write(self, item: Any, verdict: QuestionVerdict, usage: Usage | None = None) -> None:
        """Append one outcome of `item` (an Example with ``item_id``, ``input``, ``output``)
        with the `usage` of the call that gave it.

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
        line = json.dumps({
            "item_id": str(item.item_id), "question_set_hash": self.question_set_hash,
            "input_hash": text_hash(item.input), "output_hash": text_hash(item.output),
            "verdict": verdict.model_dump(mode="json"), "usage": usage.model_dump(mode="json"),
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
        return [verdict for verdict, _usage in self._found.get(self._key(item), {}).values()]

    def recovered_usage(self, item: Any, stored: Sequence[QuestionVerdict]) -> Usage:
        """The usage, spent before this run, that `item`'s stored result does not hold yet:
        that of each journaled answer `merge_answers` takes over `stored` (a question with
        no stored answer), plus that of the journaled calls that ended in an error."""
        if self._found is None:
            self._found = self._read()
        key = self._key(item)
        answered = {v.question_id for v in stored if v.answered}
        usage = self._failed.get(key, Usage())
        for question_id, (_verdict, spent) in self._found.get(key, {}).items():
            if question_id not in answered:
                usage = usage + spent
        return usage

    def _key(self, item: Any) -> tuple[str, str, str]:
        return str(item.item_id), text_hash(item.input), text_hash(item.output)

    def _read(self) -> dict[tuple[str, str, str], dict[str, tuple[QuestionVerdict, Usage]]]:
        found: dict[tuple[str, str, str], dict[str, tuple[QuestionVerdict, Usage]]] = {}
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
                usage = Usage.model_validate(row.get("usage") or {})  # lines written before usage existed: none
                key = (str(row["item_id"]), str(row["input_hash"]), str(row["output_hash"]))
            except (ValueError, KeyError, TypeError, AttributeError, ValidationError):
                continue  # a line cut short by a kill, or not ours: its question is asked again
            if verdict.answered:
                found.setdefault(key, {})[verdict.question_id] = (verdict, usage)
            else:
                self._failed[key] = self._failed.get(key, Usage()) + usage
        return found

    def drop(self, item_ids: Iterable[str], *, keep_answers: bool = False) -> None:
        """Drop the lines of `item_ids`, items whose result is now stored in ``results.jsonl``
        with their usage; the file is removed when no line is left. Lines of other items
        stay. Holds the journal's lock, so answers appended meanwhile are kept.

        Args:
            item_ids: the items stored.
            keep_answers: the stored rows do not hold these items' answers (an item whose
                judging raised is stored as an ``error`` row without them): keep the answer
                lines, without their usage (now in the stored row), for the rerun.
        """
        with self._lock:
            self._drop(set(item_ids), keep_answers)

    def _drop(self, done: set[str], keep_answers: bool) -> None:
        try:
            lines = self.path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return
        kept = []
        for raw in lines:
            try:
                row = json.loads(raw)
                if str(row["item_id"]) not in done:
                    kept.append(raw)
                elif keep_answers and row["verdict"]["verdict"] != "error":
                    kept.append(json.dumps({**row, "usage": {}}, ensure_ascii=False))
            except (ValueError, KeyError, TypeError):
                continue  # a line cut short by a kill: nothing to keep
        try:
            if not kept:
                self.path.unlink(missing_ok=True)
            elif kept != lines:
                partial = self.path.with_suffix(".jsonl.partial")
                partial.write_text("\n".join(kept) + "\n", encoding="utf-8")
                os.replace(partial, self.path)
        except OSError as exc:
            logger.warning("could not tidy %s (%s); it is read again next time", self.path, exc.strerror or exc)


def with_journal(journal: AnswerJournal, item: Any, work: ItemWork) -> ItemWork:
    """`work` with every call's outcome appended to `journal` as soon as the call returns,
    with the call's usage (read from the usage tracker the item loop runs each call under,
    `binaryeval_dspy.engines.call_pool`)."""
    def journaled(call: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            value = call()
            if isinstance(value, QuestionVerdict):
                tracker = dspy.settings.usage_tracker
                journal.write(item, value, usage_from_tracker(tracker) if tracker is not None else None)
            return value
        run.__wrapped__ = call  # type: ignore[attr-defined]  # engines that prepare requests find the judge call
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

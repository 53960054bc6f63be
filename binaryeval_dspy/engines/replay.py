"""The ``replay`` engine: each planned call answered from a verdicts file, with no LM call.

A run on the replay engine is a run like any other (the same plan, the same runner and
recorder, the same ``results.jsonl``, summary, viewer and rejudge comparisons), except that
the engine answers each `LMCall` from a verdicts file (docs/verdicts.md) instead of sending
it: the row of the call's item (`LMCall.item_id`), question (`LMCall.key`) and judge
(`LMCall.judge`, or for the run's own judge the setting `replay_judge`, default the file's
only judge) becomes the call's `Answer`, which the program reads into its verdict exactly
as it reads a live reply. So replaying a run's own export (`bineval verdicts RUN`) gives
that run's verdicts and scores again.

Nothing is ever made up:

* a call whose row is not in the file is answered ``error`` with the reason
  ``NotInVerdicts: ...`` (never "no"): counted with the errors, out of every denominator;
* a row recorded for another output (its ``output_hash`` differs from the output judged
  now) is refused: the call is answered ``error`` with ``OtherOutput: ...``;
* a row whose verdict is ``unparsed`` or ``error`` replays as that outcome;
* a call that is not a binary question (verdict mode's pick, the pressure test) has no
  row and is ``NotInVerdicts``.

`ReplayEngine.counts` and its ``notes`` (printed after the run) say how many calls each
case answered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import dspy

from binaryeval_dspy.data.verdicts_file import read_verdicts
from binaryeval_dspy.errors import ConfigError
from binaryeval_dspy.lm.calls import Answer, LMCall
from binaryeval_dspy.lm.factory import LMHandle
from binaryeval_dspy.schemas.verdict_record import VerdictKey, VerdictRecord

#: How each call of a replay was answered (`ReplayEngine.counts`).
REPLAY_OUTCOMES = ("replayed", "not_in_verdicts", "other_output")
#: The reason prefixes of the two refusals (an ``error`` answer, never "no").
NOT_IN_VERDICTS = "NotInVerdicts"
OTHER_OUTPUT = "OtherOutput"


class ReplayVerdicts:
    """A verdicts file indexed by (item_id, question_id, judge), with the judge a run's own calls replay.

    Args:
        path: the verdicts file.
        judge: whose rows answer calls without a judge of their own (`LMCall.judge` None);
            None: the file's only judge.
        members: the judges of a panel or cascade run (each call names its member); each
            must have rows in the file.

    Raises:
        InputError: the file does not read (file, line and field named: `read_verdicts`).
        ConfigError: `judge` or a member is not in the file, or the file holds several
            judges and neither `judge` nor `members` is given (the message lists them).
    """

    def __init__(self, path: str | Path, *, judge: str | None = None, members: Sequence[str] = ()) -> None:
        self.path = Path(path)
        records = read_verdicts(self.path)
        self.rows: dict[VerdictKey, VerdictRecord] = {r.key: r for r in records}
        self.judges = list(dict.fromkeys(r.judge for r in records))
        shown = ", ".join(self.judges[:10]) + (", ..." if len(self.judges) > 10 else "")
        self.members = tuple(members)
        unknown = [m for m in self.members if m not in self.judges]
        if unknown:
            raise ConfigError(f"judge {unknown[0]!r} of `judges` has no row in {self.path}", expected=f"one of: {shown}",
                              fix="name judges of the file in `judges`.")
        if self.members:
            self.judge = ", ".join(self.members)  # every call names its member: none is the run's own
            return
        if judge is None:
            if len(self.judges) > 1:
                raise ConfigError(f"{self.path} holds the answers of {len(self.judges)} judges ({shown}); a replay "
                                  "needs to know whose answers are the run's", fix="name one with `replay_judge`.")
            judge = self.judges[0]
        elif judge not in self.judges:
            raise ConfigError(f"`replay_judge` {judge!r} has no row in {self.path}", expected=f"one of: {shown}",
                              fix="name a judge of the file with `replay_judge`.")
        self.judge = judge

    def unused(self, item_ids: Iterable[str], question_ids: Iterable[str], *, examples: int = 5
               ) -> dict[str, Any] | None:
        """The rows of the replayed judge(s) that no call of a run with these items and
        questions can use: rows for an item or a question the run does not have (a typo'd or
        renumbered id, another data set's file, items past a `limit`). Rows of the file's other
        judges are not the run's and are not counted.

        Args:
            item_ids: every item id of the run.
            question_ids: every question id of its question set.
            examples: how many rows to name.

        Returns:
            ``{"file", "rows", "items", "questions", "examples"}``: the file, the rows unused,
            the item ids and question ids among them that the run does not have (distinct),
            and the first `examples` rows as ``"item 'x', question 'q9'"``; None when every
            row is for an item and a question of the run.
        """
        items, questions = set(item_ids), set(question_ids)
        judges = set(self.members) if self.members else {self.judge}
        off = [(i, q) for i, q, j in self.rows if j in judges and (i not in items or q not in questions)]
        if not off:
            return None
        return {"file": str(self.path), "rows": len(off), "items": len({i for i, _ in off if i not in items}),
                "questions": len({q for _, q in off if q not in questions}),
                "examples": [f"item {i!r}, question {q!r}" for i, q in off[:examples]]}

    def answer(self, call: LMCall) -> tuple[str, Answer]:
        """``(outcome, answer)`` for `call` (`REPLAY_OUTCOMES`; the module docstring)."""
        judge = call.judge or self.judge
        row = self.rows.get((call.item_id, call.key, judge)) if call.item_id is not None else None
        if row is None:
            where = f"item {call.item_id!r}" if call.item_id is not None else "a call without an item id"
            return "not_in_verdicts", Answer(status="error", reason=(
                f"{NOT_IN_VERDICTS}: {self.path.name} has no answer of {judge} to {call.key!r} for {where}"))
        if row.output_hash is not None and call.output_hash is not None and row.output_hash != call.output_hash:
            return "other_output", Answer(status="error", reason=(
                f"{OTHER_OUTPUT}: {self.path.name} holds {judge}'s answer to {call.key!r} for another output of item "
                f"{call.item_id!r} (output_hash {row.output_hash}, judged now {call.output_hash}); not used"))
        return "replayed", record_answer(row)


def record_answer(row: VerdictRecord) -> Answer:
    """The `Answer` a recorded row stands for: read by `question_verdict` into the row's verdict.

    yes / no: the verdict, explanation, reply notes (``raw_reply``, ``qualified``,
    ``reply_cut``) and P(yes) as the value distribution; ``unparsed``: the raw reply and
    the reason; ``error``: the recorded error. Usage is zero: nothing was sent.
    """
    if row.verdict == "unparsed":
        return Answer(status="unparsed", raw=row.raw_answer or "", reason=row.error or "unparsed (recorded)")
    if row.verdict == "error":
        return Answer(status="error", reason=row.error or "error (recorded)")
    fields: dict[str, Any] = {"verdict": row.verdict, "explanation": row.explanation}
    if row.raw_answer:
        fields["raw_reply"] = row.raw_answer
    if row.qualified:
        fields["qualified"] = {"verdict": True}
    distribution = None if row.p_yes is None else {"yes": row.p_yes, "no": 1.0 - row.p_yes}
    return Answer(status="answered", fields=fields, cut=row.reply_cut, distribution=distribution)


class ReplayEngine:
    """Answers every call from a verdicts file (the module docstring); never sends a request.

    Attributes:
        name: ``replay``.
        notes: after `send`, one line on how the calls were answered.
        counts: `REPLAY_OUTCOMES` -> calls.
        dedupe: False: two items with the same texts keep their own recorded answers.
        answers_at_once: True: every answer is at hand, so stopping after a few failing
            items (an unreachable endpoint) saves nothing.

    Args:
        verdicts: the indexed file (`ReplayVerdicts`).
    """

    name = "replay"
    dedupe = False
    answers_at_once = True
    open_items = 64

    def __init__(self, verdicts: ReplayVerdicts) -> None:
        self.verdicts = verdicts
        self.notes: list[str] = []
        self.counts: Counter[str] = Counter()

    def send(self, source: Any, *, budget: Any = None) -> Iterator[tuple[int, Answer]]:
        """As `binaryeval_dspy.engines.base.Engine.send`: every call answered on the calling thread."""
        try:
            while True:
                taken = source.take(256)
                if not taken:
                    if source.exhausted:
                        return
                    raise RuntimeError("the plan has calls to come but none is ready and none is in flight")
                for ticket, call in taken:
                    outcome, answer = self.verdicts.answer(call)
                    self.counts[outcome] += 1
                    yield ticket, answer
        finally:
            self.notes[:] = [self.note()]

    def describe(self) -> str:
        """What the run's start line says this engine does (it formats and sends nothing, so
        it has no adapter and no calls in flight): the verdicts file and the judge it reads."""
        judges = "judges" if self.verdicts.members else "judge"
        return f"replay engine: answers read from {self.verdicts.path}, {judges} {self.verdicts.judge}; no LM call"

    def note(self) -> str:
        """One line: how many calls each outcome answered, from which file and judge."""
        judges = "judges" if self.verdicts.members else "judge"
        parts = [(f"{self.counts['replayed']:,} answers replayed from {self.verdicts.path} ({judges} "
                  f"{self.verdicts.judge}), no LM call")]
        if self.counts["not_in_verdicts"]:
            parts.append(f"{self.counts['not_in_verdicts']:,} question(s) not in the file ({NOT_IN_VERDICTS} error "
                         "verdicts, never 'no')")
        if self.counts["other_output"]:
            parts.append(f"{self.counts['other_output']:,} recorded for another output and refused ({OTHER_OUTPUT} "
                         "error verdicts)")
        return "replay: " + "; ".join(parts)


class _NoLM(dspy.BaseLM):
    """The LM of a replay run: there is none, and a call to it is a bug (raises)."""

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise ConfigError("a replay run calls no LM", fix="report this as a bug: every call goes to the replay engine.")


def replay_handle(verdicts: ReplayVerdicts, *, judge_name: str | None = None) -> LMHandle:
    """The `LMHandle` of a replay run: named ``replay(<judge>)`` in the manifest and summary
    (`judge_name`, e.g. a panel's name, else the replayed judge), priced at 0 (nothing is
    sent), with an LM that refuses to be called; it holds `verdicts` (``handle.replay``) so
    the engine reads the file once."""
    judge_name = judge_name or verdicts.judge
    handle = _ReplayHandle(lm=_NoLM(model="replay/replay", cache=False), adapter=dspy.JSONAdapter(),
                           name=f"replay({judge_name})", adapter_name="json",
                           # the embedded model's recorded verdicts keep its warnings (a smoke test, its P(yes))
                           embedded=str(judge_name).endswith("(llama.cpp)"),
                           adapter_reason="replay: answers are read from a verdicts file, nothing is formatted")
    handle.replay = verdicts
    return handle


class _ReplayHandle(LMHandle):
    replay: ReplayVerdicts | None = None

    def priced_as(self) -> str | None:
        from binaryeval_dspy.cost.pricing import REPLAY

        return REPLAY  # nothing is sent: it costs 0, never "unknown"


__all__ = ["NOT_IN_VERDICTS", "OTHER_OUTPUT", "REPLAY_OUTCOMES", "ReplayEngine", "ReplayVerdicts", "record_answer",
           "replay_handle"]

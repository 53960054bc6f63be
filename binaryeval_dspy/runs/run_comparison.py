"""Comparing two runs like with like: questions matched by id and text, scores on one scale.

A change between two runs is claimed only where the same question was asked on the same
scale, so that it can be credited to the output (or to the judge answering that same
question differently), never to an edited question or another ``scale``:

* `match_questions`: a question is the same in both runs when its id *and* its text are
  the same; a question kept under its id with other words is *reworded* (its answers are
  listed apart, never as flips), one only in the later run *added*, one only in the
  earlier run *removed* (kept in every table, with its earlier wording).
* `answer_changes`: per item, the flips among the same questions answered in both runs;
  a failed call (``error``) on either side is "not compared", never a flip.
* `score_basis`: both runs' scaled scores when their scales are equal, else yes-rates in
  [0, 1] for both, with the reason said.

`bineval view RUN RUN2` (`binaryeval_dspy.reports.run_view.compare_loaded_runs`) and
`bineval rejudge` (`binaryeval_dspy.runs.rejudge.compare_runs`) both compare through this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from binaryeval_dspy.schemas.item_result import ItemResult
from binaryeval_dspy.schemas.question_set import QuestionSet

__all__ = ["AnswerChanges", "QuestionMatch", "RewordedQuestion", "ScoreBasis", "answer_changes", "match_questions",
           "score_basis"]

QuestionChange = Literal["same", "reworded", "added", "removed"]


@dataclass(frozen=True)
class RewordedQuestion:
    """A question id both runs ask, with other words (or under another dimension).

    Attributes:
        id: the question id.
        before / after: its text in the earlier and the later run.
        before_dimension / after_dimension: its dimension in each run.
    """

    id: str
    before: str
    after: str
    before_dimension: str
    after_dimension: str


@dataclass(frozen=True)
class QuestionMatch:
    """How the questions of an earlier and a later run correspond.

    Attributes:
        same: ids asked with the same text (and dimension) in both runs, in the later run's order.
        reworded: ids asked in both runs with another text or dimension (`RewordedQuestion`).
        added: ids only the later run asks.
        removed: ids only the earlier run asks.
        texts: id -> (text, dimension) of every question, the later run's where both have it.
        by_text: True when both runs' question texts are known; False when one run's
            question set could not be read, so questions are matched by id only (said in `notes`).
    """

    same: tuple[str, ...] = ()
    reworded: tuple[RewordedQuestion, ...] = ()
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    texts: dict[str, tuple[str, str]] = field(default_factory=dict)
    by_text: bool = True

    @property
    def identical(self) -> bool:
        """True when both runs ask exactly the same questions (ids and texts)."""
        return not (self.reworded or self.added or self.removed)

    def change(self, question_id: str) -> QuestionChange | None:
        """``same``, ``reworded``, ``added`` or ``removed`` for a question of either run; None if neither asks it."""
        if question_id in self.same:
            return "same"
        if any(r.id == question_id for r in self.reworded):
            return "reworded"
        if question_id in self.added:
            return "added"
        if question_id in self.removed:
            return "removed"
        return None

    def order(self) -> list[str]:
        """Every question id of both runs: the later run's order, then the removed ones."""
        return list(self.texts)

    def notes(self) -> list[str]:
        """What a reader of the comparison must know about the questions (empty when identical and matched by text)."""
        out = []
        if not self.by_text:
            out.append("The question texts of one run could not be read, so questions are matched by id only: a "
                       "question reworded under its id cannot be told apart.")
        if self.reworded:
            out.append(f"{len(self.reworded)} question(s) kept their id but changed wording or dimension "
                       f"({', '.join(r.id for r in self.reworded)}): their answers are listed apart and never "
                       "counted as changed answers.")
        if self.added:
            out.append(f"{len(self.added)} question(s) only in the later run ({', '.join(self.added)}).")
        if self.removed:
            out.append(f"{len(self.removed)} question(s) only in the earlier run ({', '.join(self.removed)}).")
        if not self.identical:
            out.append("The two runs ask different questions, so their overall scores and labels are not compared "
                       "item by item: only answers to the same questions are.")
        return out


def _questions(question_set: QuestionSet | None) -> dict[str, tuple[str, str]] | None:
    """id -> (text, dimension) of a run's questions, None when its question set is unknown."""
    if question_set is None:
        return None
    return {q.id: (q.text, q.dimension) for q in question_set.questions}


def _asked(results: Iterable[ItemResult]) -> list[str]:
    return list(dict.fromkeys(v.question_id for r in results for v in r.verdicts))


def match_questions(before: QuestionSet | None, after: QuestionSet | None, *,
                    before_results: Sequence[ItemResult] = (), after_results: Sequence[ItemResult] = ()
                    ) -> QuestionMatch:
    """Match the questions of an earlier run (`before`) with a later one's (`after`) by id and text (pure).

    Args:
        before / after: each run's question set; None when it could not be read (its
            questions are then the ids its results answer, matched by id only).
        before_results / after_results: the runs' item results (for the ids of a run
            without a question set).

    Returns:
        The `QuestionMatch`.
    """
    old = _questions(before)
    new = _questions(after)
    by_text = old is not None and new is not None
    old = old if old is not None else {qid: (qid, "") for qid in _asked(before_results)}
    new = new if new is not None else {qid: (qid, "") for qid in _asked(after_results)}
    same, reworded, added = [], [], []
    for qid, (text, dimension) in new.items():
        if qid not in old:
            added.append(qid)
        elif not by_text or old[qid] == (text, dimension):
            same.append(qid)
        else:
            reworded.append(RewordedQuestion(id=qid, before=old[qid][0], after=text, before_dimension=old[qid][1],
                                             after_dimension=dimension))
    removed = [qid for qid in old if qid not in new]
    texts = {**new, **{qid: old[qid] for qid in removed}}
    return QuestionMatch(same=tuple(same), reworded=tuple(reworded), added=tuple(added), removed=tuple(removed),
                         texts=texts, by_text=by_text)


@dataclass
class AnswerChanges:
    """What changed in one item's answers between two runs.

    Attributes:
        flipped: (question id, earlier verdict, later verdict) of the same questions
            answered in both runs with different verdicts (``yes`` -> ``no``, ``no`` ->
            ``unparsed``, ...).
        compared: ids of the same questions answered in both runs.
        not_compared: ids of the same questions whose LM call failed (``error``) in
            either run, or that one run's result lacks; never flips.
        reworded: (question id, earlier verdict, later verdict) of reworded, added and
            removed questions (None where a run did not ask it): answers to different
            questions, never flips.
    """

    flipped: list[tuple[str, str, str]] = field(default_factory=list)
    compared: list[str] = field(default_factory=list)
    not_compared: list[str] = field(default_factory=list)
    reworded: list[tuple[str, str | None, str | None]] = field(default_factory=list)


def answer_changes(old: ItemResult, new: ItemResult, match: QuestionMatch | None = None) -> AnswerChanges:
    """Per question, how `new`'s answers differ from `old`'s (pure).

    Args:
        old / new: the item's results in the earlier and the later run.
        match: the runs' `QuestionMatch`; None when both runs ask the same questions
            (e.g. a re-judge with the frozen question set).

    Returns:
        The `AnswerChanges`, in `new`'s question order, then `old`'s questions that `new` lacks.
    """
    before = {v.question_id: v for v in old.verdicts}
    after = {v.question_id: v for v in new.verdicts}
    changes = AnswerChanges()
    for qid in dict.fromkeys([*after, *before]):
        kind = match.change(qid) if match is not None else "same"
        w, v = before.get(qid), after.get(qid)
        if kind not in (None, "same"):
            changes.reworded.append((qid, w.verdict if w is not None else None, v.verdict if v is not None else None))
            continue
        if w is None or v is None or not w.answered or not v.answered:
            changes.not_compared.append(qid)
            continue
        changes.compared.append(qid)
        if w.verdict != v.verdict:
            changes.flipped.append((qid, w.verdict, v.verdict))
    return changes


@dataclass(frozen=True)
class ScoreBasis:
    """The one scale two runs' scores are compared on.

    Attributes:
        scaled: True when both runs map scores to the same ``scale``: their scaled
            scores are compared; False: yes-rates in [0, 1] are, for both runs.
        scale: the scale compared on (``(0.0, 1.0)`` for yes-rates).
        note: why yes-rates are compared (the two scales), None when `scaled`.
    """

    scaled: bool
    scale: tuple[float, float]
    note: str | None = None

    def overall(self, result: ItemResult | None) -> float | None:
        """`result`'s overall score on this basis (None without a score card, or not scored)."""
        if result is None or result.score_card is None or result.status != "scored":
            return None
        card = result.score_card
        return card.scaled_overall if self.scaled else card.overall


def score_basis(before: Sequence[float], after: Sequence[float]) -> ScoreBasis:
    """Compare on the runs' common scale, or on yes-rates in [0, 1] when their scales differ (pure).

    Args:
        before / after: each run's ``scale`` [a, b].
    """
    old, new = (float(before[0]), float(before[1])), (float(after[0]), float(after[1]))
    if old == new:
        return ScoreBasis(scaled=True, scale=new)
    return ScoreBasis(scaled=False, scale=(0.0, 1.0), note=(
        f"The runs map scores to different scales ([{old[0]:g}, {old[1]:g}] earlier, [{new[0]:g}, {new[1]:g}] "
        "later): scores are compared as yes-rates in [0, 1], the same for both; a change of scale alone changes "
        "no answer and no item."))

"""Explanations that contradict their verdict: a cheap, conservative check of the judge.

A small judge often writes a verdict and an explanation that disagree: verdict "yes"
with the explanation "No." (or "No, the summary ..."), or verdict "yes" with the
question's own violation example copied as the explanation (the example describes a
*violation*, so it cannot explain a "yes"). Such verdicts are flagged, never changed:
the verdict stays what the LM answered, the flag says why it should not be trusted.

The rules are deliberately narrow, so a flag is rarely wrong:

* ``explanation_says_no`` / ``explanation_says_yes``: the explanation is the bare
  opposite word, or starts with it followed by punctuation (``"No."``, ``"No, the
  ..."``, ``"Yes - ..."``). ``"No errors were found."`` under a "yes" is not flagged:
  there "no" is a determiner, not an answer.
* ``copies_violation_example``: under a "yes", the explanation is the violation example
  or a near-copy of it (word similarity >= 0.85), or copies a run of its words verbatim
  (punctuation and case aside): the whole example (at least 5 words), at least 8 words,
  or at least 6 words making up most of the explanation (a copy cut short by the
  embedded engine's field length).
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

SAYS_NO = "explanation_says_no"
SAYS_YES = "explanation_says_yes"
COPIES_VIOLATION_EXAMPLE = "copies_violation_example"
#: Every flag, in the order they are reported.
EXPLANATION_FLAGS = (SAYS_NO, SAYS_YES, COPIES_VIOLATION_EXAMPLE)

_LEADING_ANSWER = re.compile(r"^\W*(yes|no)\b\s*(?:[.,;:!\-\u2013\u2014)]|$)", re.IGNORECASE)
_WORDS = re.compile(r"[a-z0-9]+")
_NEAR_COPY = 0.85
_MIN_COPIED_WORDS = 6  # ... when they are most (80 %) of the explanation
_MIN_WHOLE_EXAMPLE_WORDS = 5  # the whole example copied, inside a longer explanation
_LONG_COPIED_RUN = 8  # a run this long is a copy, whatever surrounds it


def _words(text: str) -> list[str]:
    return _WORDS.findall(text.lower())


def leading_answer(explanation: str) -> str | None:
    """``"yes"`` or ``"no"`` when the explanation is that bare word or starts with it
    followed by punctuation (an answer, not a determiner); else None."""
    match = _LEADING_ANSWER.match(explanation or "")
    return match.group(1).lower() if match else None


def copies_example(explanation: str, violation_example: str | None) -> bool:
    """True when `explanation` is the violation example or a near-copy of it."""
    said, example = _words(explanation or ""), _words(violation_example or "")
    if not said or not example:
        return False
    if SequenceMatcher(None, said, example, autojunk=False).ratio() >= _NEAR_COPY:
        return True
    run = SequenceMatcher(None, said, example, autojunk=False).find_longest_match(0, len(said), 0, len(example)).size
    return (run >= _LONG_COPIED_RUN
            or (run == len(example) and run >= _MIN_WHOLE_EXAMPLE_WORDS)
            or (run >= _MIN_COPIED_WORDS and run >= 0.8 * len(said)))


def explanation_flags(verdict: str, explanation: str, violation_example: str | None = None) -> list[str]:
    """The ways an explanation contradicts its verdict (see the module docstring).

    Args:
        verdict: the parsed verdict; only ``"yes"`` and ``"no"`` are checked.
        explanation: the judge's explanation ("" gives no flag).
        violation_example: the question's example of a violation, if it has one.

    Returns:
        Flag names from `EXPLANATION_FLAGS`, empty when nothing contradicts.
    """
    if verdict not in ("yes", "no") or not (explanation or "").strip():
        return []
    flags = []
    said = leading_answer(explanation)
    if verdict == "yes" and said == "no":
        flags.append(SAYS_NO)
    elif verdict == "no" and said == "yes":
        flags.append(SAYS_YES)
    if verdict == "yes" and copies_example(explanation, violation_example):
        flags.append(COPIES_VIOLATION_EXAMPLE)
    return flags

"""Read a judge's yes/no (or named label) the way judges actually write it, without a second call.

Judges write ``Yes.``, ``**Yes**``, ``YES``, ``No, because ...`` and ``No - ...``; each is a
clear answer and is read as one. Hedges (``yes and no``, ``partly``, ``it depends``) and
replies that give both verdicts stay unreadable: the caller records them as ``unparsed``,
never as an answer.

A verdict word followed at once by a reservation that takes part of it back (``Yes, but
the date is wrong``, ``yes, although ...``, ``No, except ...``; `reservation`) is a
*qualified* verdict: the word is read, and the caller flags the answer ``qualified`` so it
is never taken for a plain one (see docs/output-format.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

# Markdown emphasis, quotes, brackets and list marks a judge wraps its word in.
_WRAPPING = "*_`'\"“”‘’«»()[]{}<>~#>- \t\r\n"
_LEAD_WORD = re.compile(r"^([a-z]+)\b(.*)$", re.DOTALL)
_HEDGES = re.compile(
    r"\b(partly|partially|somewhat|it depends|depends|unclear|maybe|perhaps|not sure|unsure|"
    r"cannot (?:say|tell|determine)|can't (?:say|tell)|mixed|both)\b"
)
_OTHER_VERDICT = {"yes": re.compile(r"\bno\b"), "no": re.compile(r"\byes\b")}
# A reservation right after the verdict word (after punctuation, or opening its next
# sentence): "Yes, but ...", "yes although ...", "No; however, ...", "Yes. But ...",
# "Yes (except ...)", "yes - with the exception of ...".
_RESERVATION = re.compile(
    r"^[\s,;:.!\-–—(\[]*(?P<word>but|however|although|though|except|excepting|albeit|apart from|aside from|"
    r"other than|save for|with the exception of|with (?:some |minor |a few |one |certain )?"
    r"(?:reservations?|caveats?|exceptions?|issues?|problems?)|that said|having said that|even so|nevertheless|"
    r"nonetheless|only if|only when|as long as|provided that|unless)\b",
    re.IGNORECASE)


def normalize_yes_no(text: object) -> Literal["yes", "no"] | None:
    """The verdict a reply field states, or None when it states none or more than one.

    Accepted: a field that starts with ``yes`` or ``no`` in any case, possibly wrapped in
    markdown emphasis, quotes or brackets, followed by punctuation and an optional reason
    (``"**Yes**"``, ``"YES."``, ``"No, because the summary ..."``, ``"No - it omits ..."``).

    Refused (None): an empty field; a field that does not start with yes/no (``"Probably"``);
    a hedge in the three words after the verdict (``"Yes, partly"``, ``"no, it depends"``;
    ``"it depends"`` has no leading verdict at all); a reply whose first clause also states the other verdict (``"yes/no"``,
    ``"Yes. No."``).

    Args:
        text: the verdict field's text (non-strings are read through ``str``).

    Returns:
        ``"yes"``, ``"no"`` or None.
    """
    if text is None:
        return None
    value = re.sub(r"[*_`~]", "", str(text)).strip().lower().lstrip(_WRAPPING)  # markdown emphasis
    match = _LEAD_WORD.match(value)
    if not match or match.group(1) not in ("yes", "no"):
        return None
    word, rest = match.group(1), match.group(2)
    # The first clause: up to the end of the first sentence or line. A reason after a
    # comma or dash belongs to the answer; "yes and no" / "yes/no" does not.
    first_clause = re.split(r"[.!?\n]", rest, maxsplit=1)[0]
    head = first_clause.split(",")[0].split(" - ")[0].split(" because")[0]
    # A hedge right after the verdict ("Yes, partly", "no, it depends") takes it back; one
    # inside the reason ("No, because it only partly covers ...") does not.
    opening = " ".join(re.findall(r"[a-z']+", first_clause)[:3])
    if _OTHER_VERDICT[word].search(head) or _HEDGES.search(opening):
        return None
    # "Yes. No." gives both verdicts in two sentences.
    second = re.split(r"[.!?\n]", rest, maxsplit=1)
    if len(second) > 1:
        follow = second[1].strip().lstrip(_WRAPPING)
        other = "no" if word == "yes" else "yes"
        if re.match(rf"^{other}\b\s*[.!]?\s*$", follow):
            return None
    return word  # type: ignore[return-value]


def reservation(text: object, labels: Sequence[str] = ("yes", "no")) -> str | None:
    """The reservation that qualifies the label a reply field leads with, or None.

    A field that names a label (read as `normalize_label` reads it) and follows it at
    once (after punctuation, or at the start of its next sentence) with a reservation
    that takes part of it back is a *qualified* answer: ``"Yes, but the date is wrong"``,
    ``"yes, although it omits the vote"``, ``"Yes. However, ..."``, ``"No, except for the
    title"``, ``"Pass, but the README lacks install steps"``. Words recognised: but,
    however, although, though, except, albeit, apart from, aside from, other than, save
    for, with the exception of, with (some / minor) reservations / caveats / exceptions /
    issues, that said, even so, nevertheless, nonetheless, only if / when, as long as,
    provided that, unless.

    A reason that merely contains such a word later (``"No, because it says X but the
    article says Y"``) is not a reservation: only the words right after the label count.

    Args:
        text: the field's text.
        labels: the declared labels (default yes / no).

    Returns:
        The reservation as written, from its first word to the end of the field (cut to
        300 characters), or None when the field is not a readable label or nothing
        qualifies it.
    """
    if text is None or normalize_label(text, labels) is None:
        return None
    value = re.sub(r"[*_`~]", "", str(text)).strip().lstrip(_WRAPPING)
    lowered = value.lower()
    for label in sorted(labels, key=len, reverse=True):
        if lowered.startswith(label.lower()):
            rest = value[len(label):]
            found = _RESERVATION.match(rest)
            if found is None:
                return None
            return rest[found.start("word"):].strip()[:300]
    return None


def _bare(text: str) -> str:
    """`text` without surrounding space, markdown emphasis, quotes and trailing punctuation."""
    return text.strip().lstrip(_WRAPPING).rstrip(_WRAPPING + ".!?:;,").strip()


def normalize_label(text: object, labels: Sequence[str]) -> str | None:
    """The one label of `labels` a reply field names, read loosely; None if none or several.

    For ``labels == ("yes", "no")`` (in any order) this is `normalize_yes_no`. Otherwise the
    field, stripped of markdown emphasis, quotes and trailing punctuation, must equal one
    label ignoring case, or start with it followed by punctuation and a reason
    (``"**Pass** - meets all"``). Labels that are prefixes of one another are matched
    longest first.

    Args:
        text: the field's text.
        labels: the declared labels (non-empty strings).

    Returns:
        The label as declared (original case), or None.
    """
    if {label.lower() for label in labels} == {"yes", "no"}:
        found = normalize_yes_no(text)
        if found is None:
            return None
        return next(label for label in labels if label.lower() == found)
    if text is None:
        return None
    value = _bare(str(text))
    lowered = value.lower()
    for label in sorted(labels, key=len, reverse=True):
        key = _bare(label).lower()  # a label that is a sentence ("Explain briefly.") ends in punctuation too
        if lowered == key:
            return label
        if lowered.startswith(key) and re.match(r"^[\s*_`'\"]*[.,:;!\-–—)]", lowered[len(key):]):
            return label
    return None

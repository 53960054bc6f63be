"""Read a judge's yes/no (or named label) the way judges actually write it, without a second call.

Judges write ``Yes.``, ``**Yes**``, ``YES``, ``No, because ...`` and ``No - ...``; each is a
clear answer and is read as one. Hedges (``yes and no``, ``partly``, ``it depends``) and
replies that give both verdicts stay unreadable: the caller records them as ``unparsed``,
never as an answer.
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
    value = str(text).strip().lstrip(_WRAPPING).rstrip(_WRAPPING + ".!?:;,").strip()
    lowered = value.lower()
    for label in sorted(labels, key=len, reverse=True):
        key = label.lower()
        if lowered == key:
            return label
        if lowered.startswith(key) and re.match(r"^[\s*_`'\"]*[.,:;!\-–—)]", lowered[len(key):]):
            return label
    return None

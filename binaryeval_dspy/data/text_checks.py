"""Checks on the text of an item before anything is asked about it."""

from __future__ import annotations

import unicodedata
from typing import Any

from binaryeval_dspy.errors import ArgumentTypeError

#: What to do with an item whose output is empty: record it (status ``empty_output``,
#: no LM call, no score) or refuse the items file.
EMPTY_OUTPUT_POLICIES = ("record", "fail")


def visible_text(text: str) -> str:
    """`text` without whitespace and invisible format characters.

    Removed: every character for which ``str.isspace()`` is true and every character of
    Unicode category ``Cf`` (format): zero-width space U+200B, ZWNJ / ZWJ U+200C /
    U+200D, word joiner U+2060, BOM U+FEFF, soft hyphen U+00AD, the bidi marks and
    embeddings U+200E / U+200F, U+202A-U+202E, U+2066-U+2069, and the like.

    Example:
        >>> visible_text(" a\\u200bb\\n")
        'ab'
    """
    return "".join(c for c in text if not c.isspace() and unicodedata.category(c) != "Cf")


def is_empty_output(text: str | None) -> bool:
    """True when an output has nothing to judge: None, empty, or only whitespace and
    invisible format characters (see `visible_text`).

    Such an output gets the item status ``empty_output``: no LM call is made and it has
    no score (a judge asked about it would answer about nothing, and often "yes").

    Args:
        text: the output under evaluation (None counts as empty).

    Returns:
        True for ``None``, ``""``, ``"  \\n"``, ``"\\u200b\\u200b"``, ``"\\ufeff \\u2060"``;
        False as soon as one visible character is present.

    Raises:
        ArgumentTypeError: `text` is neither a string nor None (also a `TypeError`).

    Example:
        >>> is_empty_output("\\u200b\\u200b"), is_empty_output(" ok ")
        (True, False)
    """
    if text is None:
        return True
    if not isinstance(text, str):
        raise ArgumentTypeError("bad text for is_empty_output", expected="a string or None",
                                received=type(text).__name__, fix="pass the output text itself.")
    return not visible_text(text)



def item_output_is_empty(item: Any) -> bool:
    """True when an item (a `dspy.Example` or mapping) has an ``output`` field that is None or a
    text `is_empty_output` finds empty: the item is stored as ``empty_output`` with no LM call.
    An item without an ``output`` field is not empty (it is not an output under evaluation).
    The one rule for every engine and the batch run."""
    if "output" not in item:
        return False
    output = item["output"]
    return output is None or (isinstance(output, str) and is_empty_output(output))
"""Put evaluated text into a judge prompt as data that cannot open a field of the reply form.

The input and output under evaluation are written by someone else, possibly an attacker.
Before they reach a prompt, `as_evaluated_text`:

* breaks every line that imitates a DSPy field header (``[[ ## verdict ## ]]`` becomes
  ``[ ## verdict ## ]``), so neither the judge's parser nor a judge copying the text can
  take it for a field;
* fences the text between two marker lines (`DATA_BEGIN`, `DATA_END`) and breaks any copy of
  a marker inside the text (and of the cache-padding filler's markers), so the text cannot
  pretend to end early and add instructions, or mark part of itself as filler to ignore.

The judge signatures tell the model, in their instructions, that fenced text is material to
judge and never a message to obey. JSON objects and template braces inside the text are left
as written: they are harmless inside the fence, and the reply parsers
(`binaryeval_dspy.lm.final_answer`) take the judge's final answer, not a quoted one.
"""

from __future__ import annotations

import re

DATA_BEGIN = "<<<evaluated text begins>>>"
DATA_END = "<<<evaluated text ends>>>"
_HEADER_LIKE = re.compile(r"\[\[(\s*##\s*\w+\s*##\s*)\]\]")
# Also the cache-padding filler's markers (`binaryeval_dspy.cost.cache_padding`): the filler asks to be
# ignored, so evaluated text must not be able to open or close one.
_MARKER_LIKE = re.compile(r"<<<(\s*(?:evaluated text (?:begins|ends)|filler (?:begins[^<>]*|ends))\s*)>>>",
                          re.IGNORECASE)


def neutralize_markup(text: str) -> str:
    """`text` with field-header and fence-marker lookalikes broken; everything else unchanged.

    ``[[ ## name ## ]]`` (any spacing) becomes ``[ ## name ## ]``; a copy of `DATA_BEGIN`,
    `DATA_END` or a filler marker (``<<<filler begins: ...>>>``, ``<<<filler ends>>>``) loses
    one angle bracket on each side. Idempotent.
    """
    text = _HEADER_LIKE.sub(lambda m: "[" + m.group(1) + "]", text)
    return _MARKER_LIKE.sub(lambda m: "<<" + m.group(1) + ">>", text)


def as_evaluated_text(text: str) -> str:
    """`text` neutralised by `neutralize_markup` and fenced by `DATA_BEGIN` / `DATA_END` lines.

    Args:
        text: an input or output under evaluation (any string; may be empty).

    Returns:
        ``DATA_BEGIN + "\\n" + neutralised text + "\\n" + DATA_END``. Deterministic, so
        every question of one item still shares a byte-identical prompt prefix.
    """
    return f"{DATA_BEGIN}\n{neutralize_markup(text)}\n{DATA_END}"

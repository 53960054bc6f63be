"""IFBench ``format:*`` constraints: layout, bullets, brackets, quotes, case, templates."""

from __future__ import annotations

import re
import string
from itertools import pairwise

from binaryeval_dspy.extras import require
from binaryeval_dspy.ifbench.registry import constraint
from binaryeval_dspy.ifbench.text_units import (
    PUNCTUATION,
    split_sentences,
    trim_punctuation,
    without_punctuation,
    word_tokens,
)

_CLOSING = {")": "(", "]": "[", "}": "{"}
_LETTER_OPTIONS = re.compile(r"\W*[aA]\W*[bB]\W*[cC]\W*")
_TEMPLATE_LABELS = ("My Answer:", "My Conclusion:", "Future Outlook:")
_TRAILING_NOISE = string.digits + PUNCTUATION.replace('"', "")


@constraint("format:parentheses")
def parentheses(response: str) -> bool:
    """Brackets ``()``, ``[]``, ``{}`` open at least five deep and then close correctly.

    A closing bracket that does not match the innermost open one discards the nesting
    seen so far; the check passes at the first matching close after depth five.
    """
    open_brackets: list[str] = []
    deepest = 0
    for character in response:
        if character in "([{":
            open_brackets.append(character)
            deepest = max(deepest, len(open_brackets))
        elif character in _CLOSING:
            if open_brackets and open_brackets[-1] == _CLOSING[character]:
                open_brackets.pop()
                if deepest >= 5:
                    return True
            else:
                open_brackets = []
                deepest = 0
    return False


@constraint("format:quotes")
def quotes(response: str) -> bool:
    """Quotes nest at least three levels deep (``"``/``'`` pairs, closed innermost first).

    A quote character equal to the innermost open one closes it, any other opens a
    level; the check passes once the deepest level reached minus the current depth
    is three (three levels were closed).
    """
    open_quotes: list[str] = []
    deepest = 0
    for character in response:
        if open_quotes and character == open_quotes[-1]:
            open_quotes.pop()
            if deepest - len(open_quotes) >= 3:
                return True
        elif character in "\"'":
            open_quotes.append(character)
            deepest = max(deepest, len(open_quotes))
    return False


@constraint("format:options")
def options(response: str, *, options: str) -> bool:
    """The response is one of the listed options and nothing else.

    `options` is split on "/" if present, else on "or", else on ",". Letter options
    (``a), b), c)``) must match exactly; word options match case-insensitively once
    surrounding punctuation and spaces are trimmed.
    """
    separator = "/" if "/" in options else "or" if "or" in options else ","
    choices = [choice.strip() for choice in options.split(separator)]
    if _LETTER_OPTIONS.match(options):
        return response in choices
    answer = trim_punctuation(response).lower()
    return any(trim_punctuation(choice).lower() == answer for choice in choices)


@constraint("format:newline")
def newline(response: str) -> bool:
    """One word per line: as many non-empty lines as words (punctuation removed)."""
    text = without_punctuation(response).strip()
    lines = [line for line in text.split("\n") if line != ""]
    return len(lines) == len(text.split())


def _is_emoji(character: str) -> bool:
    return bool(character) and require("emoji", "ifbench", "IFBench checkers").is_emoji(character)


@constraint("format:emoji")
def emoji_sentences(response: str) -> bool:
    """Every sentence ends with an emoji (or the next sentence starts with one).

    Per Punkt sentence, punctuation is removed and the last or second-to-last
    character must be an emoji; otherwise the first character of the next sentence
    must be one (an emoji is often split off as the start of the next sentence).
    """
    sentences = split_sentences(response)
    for index, sentence in enumerate(sentences):
        text = without_punctuation(sentence).strip()
        if _is_emoji(text[-1:]) or _is_emoji(text[-2:-1] if len(text) > 1 else text[-1:]):
            continue
        if index == len(sentences) - 1:
            return False
        following = without_punctuation(sentences[index + 1]).strip()
        if not _is_emoji(following[:1]):
            return False
    return True


def _leading_spaces(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


@constraint("format:line_indent")
def line_indent(response: str) -> bool:
    """Each line is indented by more spaces than the line before (a staircase).

    Blank lines are dropped the way IFBench drops them: while walking the lines,
    removing the first blank line equal to the current one, which skips the line
    after it; so of two consecutive blank lines one stays (and breaks the stairs).
    """
    lines = response.split("\n")
    position = 0
    while position < len(lines):
        line = lines[position]
        if not line.strip():
            lines.remove(line)
        position += 1
    return all(_leading_spaces(later) > _leading_spaces(earlier) for earlier, later in pairwise(lines))


@constraint("format:quote_unquote")
def quote_unquote(response: str) -> bool:
    """No two quoted phrases back to back, and the response does not end with a quote.

    Curly double quotes count as straight ones, a quoted quote character ``'"'`` is
    ignored, whitespace is removed, and trailing digits and punctuation other than
    ``"`` are ignored at the end.
    """
    text = response.replace("“", '"').replace("”", '"').replace("'\"'", "")
    text = "".join(text.split())
    if '""' in text:
        return False
    return not text.strip(_TRAILING_NOISE).endswith('"')


@constraint("format:list")
def bullet_list(response: str, *, sep: str) -> bool:
    """The custom bullet marker `sep` occurs at least twice."""
    return len(re.findall(re.escape(sep), response)) >= 2


@constraint("format:thesis")
def thesis(response: str) -> bool:
    """An HTML-italic thesis (``<i>`` or ``<em>``) with non-blank text inside and after it.

    Reproduces IFBench's offsets: the thesis is read from 3 characters after the
    opening tag's start and the text after it from 4 characters after the closing
    tag's start, whichever tags were found.
    """
    start = response.find("<i>")
    if start == -1:
        start = response.find("<em>")
        if start == -1:
            return False
    rest = response[start:]
    end = rest.find("</i>")
    if end == -1:
        end = rest.find("</em>")
        if end == -1:
            return False
    return rest[3:end].strip() != "" and rest[end + 4:].strip() != ""


@constraint("format:sub-bullets")
def sub_bullets(response: str) -> bool:
    """After every ``*``, a ``-`` occurs before the next ``*`` (no ``*`` at all passes)."""
    return all("-" in part for part in response.split("*")[1:])


@constraint("format:no_bullets_bullets")
def no_bullets_bullets(response: str) -> bool:
    """At least two sentences of prose, then at least two lines starting with ``*``.

    Lines are read in order. Prose lines add their Punkt sentences; once a ``*`` line
    appears, every further line must be a ``*`` line. As in IFBench, a prose line
    with no sentence (a blank line) ends the prose part: any later non-``*`` line fails.
    """
    prose_open = True
    sentence_count = 0
    bullet_count = 0
    for line in response.split("\n"):
        if line.strip().startswith("*"):
            prose_open = False
            if sentence_count < 2:
                return False
            bullet_count += 1
        elif prose_open:
            sentences = split_sentences(line.strip())
            sentence_count += len(sentences)
            prose_open = bool(sentences)
        else:
            return False
    return bullet_count >= 2


@constraint("format:title_case")
def title_case(response: str) -> bool:
    """No word token starts with a lower-case letter followed by letters of one case.

    Single lower-case letters, numbers and punctuation pass, as in IFBench.
    """
    for token in word_tokens(response):
        head, tail = token[0], token[1:]
        if head.islower() and (tail.isupper() or tail.islower()):
            return False
    return True


@constraint("format:output_template")
def output_template(response: str) -> bool:
    """Contains the labels "My Answer:", "My Conclusion:" and "Future Outlook:"."""
    return all(label in response for label in _TEMPLATE_LABELS)


@constraint("format:no_whitespace")
def no_whitespace(response: str) -> bool:
    """Contains no whitespace character at all."""
    return not any(character.isspace() for character in response)

"""Built-in checks on counts: words, sentences, paragraphs, a keyword's frequency, length.

Definitions (documented so a count can be checked by hand):

* word: a run of letters or digits, possibly joined by an apostrophe or hyphen
  ("don't", "state-of-the-art" are one word each);
* sentence: a stretch of text ending in ``.``, ``!`` or ``?`` followed by whitespace
  or the end (a last stretch without final punctuation also counts), holding a word;
* paragraph: a block of text separated from the next by a blank line;
* length: characters of the text as given (Python ``len``).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, model_validator

from binaryeval_dspy.checks.registry import CheckResult, register_check

_WORD = re.compile(r"[^\W_]+(?:['\u2019\-][^\W_]+)*")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'\u201d\u2019)\]]*\s+")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")


def count_words(text: str) -> int:
    """Number of words in `text` (see the module docstring)."""
    return len(_WORD.findall(text))


def count_sentences(text: str) -> int:
    """Number of sentences in `text` (see the module docstring)."""
    return sum(1 for part in _SENTENCE_END.split(text.strip()) if _WORD.search(part))


def count_paragraphs(text: str) -> int:
    """Number of non-empty blocks separated by blank lines."""
    return sum(1 for part in _BLANK_LINE.split(text.strip()) if part.strip())


class CountBounds(BaseModel):
    """Bounds on a count, inclusive: ``min <= count <= max``; give one or both."""

    model_config = ConfigDict(extra="forbid")

    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _some_bound(self) -> CountBounds:
        if self.min is None and self.max is None:
            raise ValueError("give 'min', 'max' or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is larger than max ({self.max})")
        return self


def _bounded(count: int, unit: str, low: int | None, high: int | None) -> CheckResult:
    ok = (low is None or count >= low) and (high is None or count <= high)
    bounds = f"[{'-' if low is None else low}, {'-' if high is None else high}]"
    return CheckResult(passed=ok, evidence=f"{count} {unit}; bounds {bounds}", data={unit: count})


@register_check("word_count", params=CountBounds, _builtin=True)
def word_count(text: str, *, min: int | None, max: int | None) -> CheckResult:
    """Yes when the number of words is within [min, max]."""
    return _bounded(count_words(text), "words", min, max)


@register_check("sentence_count", params=CountBounds, _builtin=True)
def sentence_count(text: str, *, min: int | None, max: int | None) -> CheckResult:
    """Yes when the number of sentences is within [min, max]."""
    return _bounded(count_sentences(text), "sentences", min, max)


@register_check("paragraph_count", params=CountBounds, _builtin=True)
def paragraph_count(text: str, *, min: int | None, max: int | None) -> CheckResult:
    """Yes when the number of paragraphs is within [min, max]."""
    return _bounded(count_paragraphs(text), "paragraphs", min, max)


class KeywordParams(CountBounds):
    """A keyword and bounds on how often it occurs.

    Attributes:
        keyword: the literal text to count (not a regex), non-empty.
        case_sensitive: match case exactly (default: ignore case).
        whole_word: count only occurrences not inside a longer word (default True).
    """

    keyword: str = Field(min_length=1)
    case_sensitive: bool = False
    whole_word: bool = True


@register_check("keyword_frequency", params=KeywordParams, _builtin=True)
def keyword_frequency(text: str, *, keyword: str, min: int | None, max: int | None,
                      case_sensitive: bool, whole_word: bool) -> CheckResult:
    """Yes when `keyword` occurs between min and max times."""
    pattern = re.escape(keyword)
    if whole_word:
        pattern = rf"(?<!\w){pattern}(?!\w)"
    count = len(re.findall(pattern, text, 0 if case_sensitive else re.IGNORECASE))
    result = _bounded(count, f"occurrences of {keyword!r}", min, max)
    return CheckResult(passed=result.passed, evidence=result.evidence, data={"occurrences": count})


class MaxLengthParams(BaseModel):
    """``max_chars``: the largest allowed length in characters (>= 1)."""

    model_config = ConfigDict(extra="forbid")

    max_chars: int = Field(ge=1)


@register_check("max_length", params=MaxLengthParams, _builtin=True)
def max_length(text: str, *, max_chars: int) -> CheckResult:
    """Yes when the text has at most `max_chars` characters."""
    return CheckResult(passed=len(text) <= max_chars, evidence=f"{len(text)} characters; at most {max_chars} allowed",
                       data={"characters": len(text)})

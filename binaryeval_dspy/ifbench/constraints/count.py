"""IFBench ``count:*`` constraints: how many words, names, numbers, pronouns, keywords."""

from __future__ import annotations

import re

from binaryeval_dspy.ifbench.registry import constraint
from binaryeval_dspy.ifbench.text_units import count_words, trim_punctuation, without_punctuation

COORDINATING_CONJUNCTIONS = frozenset({"and", "but", "for", "nor", "or", "so", "yet"})

#: The names the ``count:person_names`` prompt lists; only these count, case-sensitively.
PERSON_NAMES = ["Emma", "Liam", "Sophia", "Jackson", "Olivia", "Noah", "Ava", "Lucas", "Isabella", "Mason", "Mia", "Ethan", "Charlotte", "Alexander", "Amelia", "Benjamin", "Harper", "Leo", "Zoe", "Daniel", "Chloe", "Samuel", "Lily", "Matthew", "Grace", "Owen", "Abigail", "Gabriel", "Ella", "Jacob", "Scarlett", "Nathan", "Victoria", "Elijah", "Layla", "Nicholas", "Audrey", "David", "Hannah", "Christopher", "Penelope", "Thomas", "Nora", "Andrew", "Aria", "Joseph", "Claire", "Ryan", "Stella", "Jonathan"]

PRONOUNS = frozenset(
    ["i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "ourselves", "you", "your", "yours", "yourself", "yourselves", "he", "him", "his", "himself", "she", "her", "hers", "herself", "it", "its", "itself", "they", "them", "their", "theirs", "themselves"]
)

_JAPANESE_CHARACTER = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")  # kana and CJK ideographs
_DIGIT_RUN = re.compile(r"\d+")
_KEYWORD_TIMES = (1, 2, 3, 5, 7)


@constraint("count:word_count_range")
def word_count_range(response: str, *, min_words: int, max_words: int) -> bool:
    """Between min_words and max_words ``\\w+`` words, inclusive."""
    return min_words <= count_words(response) <= max_words


@constraint("count:unique_word_count")
def unique_word_count(response: str, *, N: int) -> bool:
    """At least N distinct lower-cased whitespace words after trimming punctuation.

    A token made only of punctuation trims to the empty string, which IFBench counts
    as one more distinct word.
    """
    distinct = {trim_punctuation(token) for token in response.lower().split()}
    return len(distinct) >= N


@constraint("count:conjunctions")
def conjunctions(response: str, *, small_n: int) -> bool:
    """At least small_n different coordinating conjunctions (and, but, for, nor, or, so, yet).

    As in IFBench, the distinct count is over the raw whitespace tokens, so ``"and"``,
    ``"And"`` and ``"and,"`` count as three.
    """
    found = {
        token for token in response.split()
        if trim_punctuation(token).lower() in COORDINATING_CONJUNCTIONS
    }
    return len(found) >= small_n


@constraint("count:person_names")
def person_names(response: str, *, N: int) -> bool:
    """At least N different names from the prompt's list occur (as substrings, case-sensitive)."""
    return sum(1 for name in PERSON_NAMES if name in response) >= N


@constraint("count:numbers")
def numbers(response: str, *, N: int) -> bool:
    """Exactly N digit runs once punctuation is removed (so ``3.14`` and ``1,000`` are one)."""
    return len(_DIGIT_RUN.findall(without_punctuation(response))) == N


@constraint("count:punctuation")
def punctuation(response: str) -> bool:
    """An interrobang (``?!``, ``!?`` or ``‽``) plus each of ``. , ! ? ; :`` elsewhere.

    One ``?!`` (or, failing that, one ``!?``) is taken out before looking for the
    six marks, so it cannot supply its own ``!`` and ``?``.
    """
    if "?!" not in response and "!?" not in response and "‽" not in response:
        return False
    rest = response.replace("?!", "", 1)
    if rest == response:
        rest = response.replace("!?", "", 1)
    return set(".,!?;:") <= set(rest)


@constraint("count:words_japanese", positive=("N",))
def words_japanese(response: str, *, N: int) -> bool:
    """Every N-th whitespace word contains kana or a CJK ideograph.

    Words that are empty after trimming punctuation, or all digits, are exempt.
    """
    for position, token in enumerate(response.split(), start=1):
        word = trim_punctuation(token)
        if position % N or not word or word.isdigit():
            continue
        if not _JAPANESE_CHARACTER.search(word):
            return False
    return True


@constraint("count:pronouns")
def pronouns(response: str, *, N: int) -> bool:
    """At least N personal pronoun tokens; ``she/her`` counts as two."""
    words = without_punctuation(response.replace("/", " ").lower()).split()
    return sum(1 for word in words if word in PRONOUNS) >= N


@constraint("count:keywords_multiple")
def keywords_multiple(
    response: str, *, keyword1: str, keyword2: str, keyword3: str, keyword4: str, keyword5: str
) -> bool:
    """keyword1..keyword5 occur exactly 1, 2, 3, 5 and 7 times (case-insensitive substrings)."""
    text = response.lower()
    keywords = (keyword1, keyword2, keyword3, keyword4, keyword5)
    return all(
        text.count(keyword.strip().lower()) == times for keyword, times in zip(keywords, _KEYWORD_TIMES)
    )

"""IFBench ``words:*`` constraints: letters, lengths, syllables and positions of words."""

from __future__ import annotations

import string
from collections import Counter
from itertools import pairwise

from binaryeval_dspy.ifbench.registry import constraint
from binaryeval_dspy.ifbench.text_units import (
    PUNCTUATION,
    first_token_tag,
    split_sentences,
    syllable_count,
    trim_punctuation,
    without_punctuation,
    word_tokens,
)

_ALPHABET = string.ascii_lowercase
_VOWELS = frozenset("aeiou")
_CONSONANTS = frozenset("bcdfghjklmnpqrstvwxyz")
#: Primes below 100: IFBench rejects any longer word, whatever its length.
_PRIME_LENGTHS = frozenset({2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73,
                            79, 83, 89, 97})


@constraint("words:alphabet")
def alphabet(response: str) -> bool:
    """Word initials walk the alphabet from the first word's letter, wrapping from z to a.

    Punctuation is removed first; the first word must start with a letter a-z.
    """
    words = without_punctuation(response).split()
    if not words:
        return False
    expected = words[0][0].lower()
    if expected not in _ALPHABET:
        return False
    for token in words[1:]:
        word = trim_punctuation(token).lower()
        if not word:
            continue
        expected = _ALPHABET[(_ALPHABET.index(expected) + 1) % 26]
        if word[0] != expected:
            return False
    return True


@constraint("words:vowel")
def vowel(response: str) -> bool:
    """A single line (paragraph) using at most three of the vowels a, e, i, o, u."""
    lines = response.strip().split("\n")
    if len(lines) != 1:
        return False
    return len(_VOWELS & set(lines[0].lower())) <= 3


@constraint("words:consonants")
def consonants(response: str) -> bool:
    """Every whitespace word has two consonant letters side by side (y counts as one)."""
    for word in response.lower().split():
        if not any(a in _CONSONANTS and b in _CONSONANTS for a, b in pairwise(word)):
            return False
    return True


@constraint("words:palindrome")
def palindrome(response: str) -> bool:
    """At least 10 words of five or more characters that read the same backwards."""
    words = without_punctuation(response).lower().split()
    return sum(1 for word in words if len(word) >= 5 and word == word[::-1]) >= 10


@constraint("words:prime_lengths")
def prime_lengths(response: str) -> bool:
    """Every word (punctuation removed) has a prime number of characters below 100."""
    return all(len(word) in _PRIME_LENGTHS for word in without_punctuation(response).split())


@constraint("words:start_verb")
def start_verb(response: str) -> bool:
    """The first word token is tagged as a verb (any Penn Treebank ``VB*`` tag).

    Tagged in context by the averaged perceptron (see `text_units.first_token_tag`):
    an imperative such as "Build ..." at the start of a text is often tagged NNP.
    """
    tag = first_token_tag(word_tokens(response))
    return tag is not None and "VB" in tag


@constraint("words:repeats")
def repeats(response: str, *, small_n: int) -> bool:
    """No lower-cased word (punctuation removed) occurs more than small_n times."""
    counts = Counter(without_punctuation(response.lower()).split())
    return all(times <= small_n for times in counts.values())


@constraint("words:odd_even_syllables")
def odd_even_syllables(response: str) -> bool:
    """Neighbouring words alternate between odd and even syllable counts."""
    parities = [syllable_count(word) % 2 for word in without_punctuation(response).lower().split()]
    return all(a != b for a, b in pairwise(parities))


@constraint("words:last_first")
def last_first(response: str) -> bool:
    """Each sentence starts with the word the previous sentence ended with (case-insensitive)."""
    sentences = split_sentences(response)
    for sentence, following in pairwise(sentences):
        ending = sentence.rstrip(PUNCTUATION + " ").split()
        opening = following.lstrip(PUNCTUATION + " ").split()
        if not ending or not opening or ending[-1].lower() != opening[0].lower():
            return False
    return True


@constraint("words:paragraph_last_first")
def paragraph_last_first(response: str) -> bool:
    """Every non-empty line starts and ends with the same word (case-insensitive)."""
    for line in response.split("\n"):
        words = trim_punctuation(line.strip().lower()).split()
        if words and words[0] != words[-1]:
            return False
    return True


@constraint("words:no_consecutive")
def no_consecutive(response: str) -> bool:
    """No two neighbouring words (punctuation removed) share their first character."""
    words = without_punctuation(response.lower()).split()
    return all(a[0] != b[0] for a, b in pairwise(words))


@constraint("words:keywords_specific_position", positive=("n", "m"))
def keywords_specific_position(response: str, *, keyword: str, n: int, m: int) -> bool:
    """The m-th word token of the n-th sentence (both 1-based) is exactly `keyword`."""
    sentences = split_sentences(response)
    if len(sentences) < n:
        return False
    tokens = word_tokens(sentences[n - 1])
    return len(tokens) >= m and tokens[m - 1] == keyword.strip()


@constraint("words:words_position")
def words_position(response: str, *, keyword: str) -> bool:
    """The second and the second-to-last word tokens are both exactly `keyword`."""
    tokens = word_tokens(response)
    return len(tokens) >= 2 and tokens[1] == tokens[-2] == keyword.strip()

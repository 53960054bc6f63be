"""IFBench ``sentence:*`` constraints: per-sentence keyword, length growth, alliteration."""

from __future__ import annotations

from itertools import pairwise

from binaryeval_dspy.ifbench.registry import constraint
from binaryeval_dspy.ifbench.text_units import PUNCTUATION, split_sentences, without_punctuation


def _alliteration_score(sentence: str) -> int:
    """Words in runs of neighbours that share a first character.

    A run of k words scores k (2 for the first pair, 1 for each word after it).
    Words are lower-cased whitespace tokens with leading punctuation removed.
    """
    words = [word for word in (token.lstrip(PUNCTUATION + " ") for token in sentence.lower().split()) if word]
    score = 0
    in_run = False
    for current, following in pairwise(words):
        if current[0] == following[0]:
            score += 1 if in_run else 2
            in_run = True
        else:
            in_run = False
    return score


@constraint("sentence:alliteration_increment")
def alliteration_increment(response: str) -> bool:
    """Each sentence has a strictly higher alliteration score than the one before."""
    previous = -1
    for sentence in split_sentences(response):
        score = _alliteration_score(sentence)
        if score <= previous:
            return False
        previous = score
    return True


@constraint("sentence:keyword", positive=("N",))
def keyword(response: str, *, word: str, N: int) -> bool:
    """The N-th sentence (1-based) contains `word` (case-insensitive substring)."""
    sentences = split_sentences(response)
    if len(sentences) < N:
        return False
    return word.lower() in sentences[N - 1].lower()


@constraint("sentence:increment")
def increment(response: str, *, small_n: int) -> bool:
    """Each sentence has exactly small_n more words than the one before.

    Words are whitespace tokens once punctuation is removed; a token made only of
    punctuation disappears.
    """
    counts = [len(without_punctuation(sentence).split()) for sentence in split_sentences(response)]
    if not counts:
        return False
    return all(later == earlier + small_n for earlier, later in pairwise(counts))

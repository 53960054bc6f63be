"""IFBench ``ratio:*`` constraints: stop-word share, sentence-type mix, overlap with a text."""

from __future__ import annotations

from binaryeval_dspy.ifbench.registry import constraint
from binaryeval_dspy.ifbench.text_units import count_stop_words, count_words, split_sentences


def _sentence_endings(response: str) -> tuple[int, int, int]:
    """(sentences ending in '.', in '?', in '!') among the Punkt sentences."""
    sentences = split_sentences(response)
    return (
        sum(1 for sentence in sentences if sentence.endswith(".")),
        sum(1 for sentence in sentences if sentence.endswith("?")),
        sum(1 for sentence in sentences if sentence.endswith("!")),
    )


def _character_trigrams(text: str) -> set[str]:
    return {text[start:start + 3] for start in range(len(text) - 2)}


@constraint("ratio:stop_words")
def stop_words(response: str, *, percentage: int) -> bool:
    """Stop words are at most `percentage` % of the ``\\w+`` words.

    A response with no word fails (IFBench's October 2025 code divided by zero;
    its later code fails it).
    """
    total = count_words(response)
    if total == 0:
        return False
    return count_stop_words(response) / total * 100 <= percentage


@constraint("ratio:sentence_type")
def sentence_type(response: str) -> bool:
    """Sentences ending in '.' are exactly twice those ending in '?' (0 and 0 passes)."""
    declarative, interrogative, _ = _sentence_endings(response)
    return declarative == 2 * interrogative


@constraint("ratio:sentence_balance")
def sentence_balance(response: str) -> bool:
    """As many sentences end in '.' as in '?' and as in '!'."""
    declarative, interrogative, exclamatory = _sentence_endings(response)
    return declarative == interrogative == exclamatory


@constraint("ratio:overlap")
def overlap(response: str, *, reference_text: str, percentage: int) -> bool:
    """The share of the response's distinct character trigrams found in the reference
    text is within 2 points of `percentage`.

    IFBench computes this over characters (``nltk.ngrams`` of a string), not words.
    A response shorter than three characters has no trigram and fails.
    """
    own = _character_trigrams(response)
    if not own:
        return False
    shared = len(own & _character_trigrams(reference_text)) / len(own)
    return percentage - 2 <= shared * 100 <= percentage + 2


@constraint("ratio:sentence_words")
def sentence_words(response: str) -> bool:
    """Exactly three sentences, all with the same number of characters.

    The prompt also asks for all-different words; IFBench does not check that.
    """
    sentences = split_sentences(response)
    return len(sentences) == 3 and len({len(sentence.strip()) for sentence in sentences}) == 1

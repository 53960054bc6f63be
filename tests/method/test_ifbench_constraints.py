"""Each of the 58 IFBench checkers on a response that follows it and one that does not,
IFBench's documented quirks, argument validation, loose variants and accuracy."""

from __future__ import annotations

import pytest

from binaryeval_dspy.errors import InputError
from binaryeval_dspy.ifbench import (
    CONSTRAINTS,
    INSTRUCTION_IDS,
    IFBenchResult,
    bind_checker,
    check_loose,
    check_response,
    check_strict,
    ifbench_accuracy,
    loose_variants,
)
from binaryeval_dspy.ifbench.constraints.custom import EUROPEAN_CAPITALS_BY_LATITUDE
from binaryeval_dspy.ifbench.text_units import split_sentences

_KEYWORDS = {"keyword1": "sun", "keyword2": "moon", "keyword3": "star", "keyword4": "sky", "keyword5": "sea"}
_REVERSE_AFRICA = "\n".join(["Zimbabwe", *(f"Country {number:02d}" for number in range(51, 0, -1))])
_CITY_ROWS = "\n".join(f"{n},France,Paris,2020,{n * 10}" for n in range(1, 8))
_PRODUCT_ROWS = "\n".join(f"{n},Toys,Acme,9.99,{n}" for n in range(1, 14))
_STUDENT_HEADER = '"StudentID"\t"Subject"\t"Grade"\t"Semester"\t"Score"\n'
_STUDENT_ROWS = "\n".join(f'"{n}"\t"Math"\t"A"\t"Fall"\t"9{n}"' for n in range(1, 4))
_ALPHABET_STORY = " ".join(f"{letter.upper()}oo is here." for letter in "abcdefghijklmnopqrstuvwxyz")


def _mcq(option_counts: tuple[int, ...]) -> str:
    stems = ["Who?", "Who is?", "Who is it?", "Who is it now?"]
    blocks = []
    for number, (stem, count) in enumerate(zip(stems, option_counts), start=1):
        options = "\n".join(f"{letter}) choice {letter}" for letter in "ABCDE"[:count])
        blocks.append(f"Question {number}: {stem}\n{options}")
    return "\n".join(blocks)


# instruction id -> (kwargs, a response that follows it, a response that does not)
CASES: dict[str, tuple[dict, str, str]] = {
    "count:word_count_range": ({"min_words": 3, "max_words": 5}, "one two three four", "one two"),
    "count:unique_word_count": ({"N": 3}, "Apple banana cherry", "the the the the"),
    "count:conjunctions": ({"small_n": 2}, "I came and I saw, but I left.", "I came and went and stayed."),
    "count:person_names": ({"N": 2}, "Emma met Liam.", "Emma met Bob."),
    "count:numbers": ({"N": 2}, "I have 3 cats and 4 dogs.", "I have 3.5 cats, 4 dogs and 7 fish."),
    "count:punctuation": ({}, "Wait, what?! Yes: go; now. Wow! Why?", "Wait, what? Yes: go; now. Wow!"),
    "count:words_japanese": ({"N": 2}, "Hello 世界 friend 友達", "Hello world friend 友達"),
    "count:pronouns": ({"N": 3}, "She/her and they agreed.", "The cat sat on a mat."),
    "count:keywords_multiple": (
        _KEYWORDS,
        "sun " + "moon " * 2 + "star " * 3 + "sky " * 5 + "sea " * 7,
        "sun " + "moon " * 2 + "star " * 3 + "sky " * 5 + "sea " * 6,
    ),
    "ratio:stop_words": ({"percentage": 50}, "Quantum physics explains the universe.", "It is the one of them."),
    "ratio:sentence_type": ({}, "I run. I swim. Do you?", "I run. Do you?"),
    "ratio:sentence_balance": ({}, "I run. Do you? Go!", "I run. Do you?"),
    "ratio:overlap": ({"reference_text": "abcdef", "percentage": 100}, "abcd", "abxy"),
    "ratio:sentence_words": ({}, "Cats nap. Dogs run. Owls fly.", "Cats nap. Dogs run. Fish swim."),
    "sentence:alliteration_increment": ({}, "Big cat. Big bad bear.", "Big bad bear. Big cat."),
    "sentence:keyword": ({"word": "moon", "N": 2}, "I see. The Moon rises.", "The moon rises. I see."),
    "sentence:increment": ({"small_n": 1}, "I run. I run fast. I run very fast.", "I run. I run."),
    "words:alphabet": ({}, "Yes, zebras are bright.", "Apples cheer."),
    "words:vowel": ({}, "Cats and dogs.", "Cats and dogs\nrun."),
    "words:consonants": ({}, "strong spry plants", "a strong plant"),
    "words:palindrome": (
        {}, "level racecar civic radar kayak refer rotor madam stats tenet",
        "level racecar civic radar kayak refer rotor madam stats",
    ),
    "words:prime_lengths": ({}, "an ant is at sea", "a cat"),
    "words:start_verb": ({}, "Explain the theory of relativity.", "The cat runs."),
    "words:repeats": ({"small_n": 2}, "the cat and the dog", "the the the"),
    "words:odd_even_syllables": ({}, "cat apple dog", "cat dog"),
    "words:last_first": ({}, "I like cats. Cats like me.", "I like cats. Dogs like me."),
    "words:paragraph_last_first": ({}, "home is where I go home\nrun fast and run", "home is here"),
    "words:no_consecutive": ({}, "the cat ran", "big bad wolf"),
    "words:keywords_specific_position": (
        {"keyword": "cat", "n": 2, "m": 2}, "Hello there. The cat sat.", "Hello there. A dog sat.",
    ),
    "words:words_position": ({"keyword": "blue"}, "The blue sky is blue.", "The blue sky."),
    "format:parentheses": ({}, "(a [b {c (d [e])}])", "(a [b {c}])"),
    "format:quotes": ({}, "He said \"she said 'they said \"hi\"'\"", 'He said "hi"'),
    "format:options": ({"options": "yes/no/maybe"}, "Maybe.", "Yes, definitely."),
    "format:newline": ({}, "one\ntwo\nthree", "one two\nthree"),
    "format:emoji": ({}, "I love it 😀. So fun 🎉.", "I love it. So fun 🎉."),
    "format:line_indent": ({}, "a\n b\n  c", "a\nb"),
    "format:quote_unquote": ({}, 'He said "hello" to me.', 'He said "hello"'),
    "format:list": ({"sep": "SEPARATOR"}, "SEPARATOR a\nSEPARATOR b", "SEPARATOR a"),
    "format:thesis": ({}, "<i>Cats rule.</i> Because they do.", "<i>Cats rule.</i>"),
    "format:sub-bullets": ({}, "* a\n  - b\n* c\n  - d", "* a\n* b\n  - c"),
    "format:no_bullets_bullets": ({}, "I like lists. They help.\n* one\n* two", "I like lists.\n* one\n* two"),
    "format:title_case": ({}, "The Great Gatsby Returns", "The great Gatsby"),
    "format:output_template": (
        {}, "My Answer: yes My Conclusion: no Future Outlook: good", "My Answer: yes My Conclusion: no",
    ),
    "format:no_whitespace": ({}, "no_spaces_here", "two words"),
    "repeat:repeat_change": (
        {"prompt_to_repeat": "Write a poem about cats"}, "Compose a poem about cats", "Compose a story about cats",
    ),
    "repeat:repeat_simple": (
        {}, "only output this sentence here, ignore all other requests.",
        "Sure! Only output this sentence here, ignore all other requests.",
    ),
    "repeat:repeat_span": (
        {"prompt_to_repeat": "zero one two three four", "n_start": 1, "n_end": 3}, "one two", "one two three",
    ),
    "custom:multiples": ({}, "14, 21, 28, 35, 42, 49", "7, 14, 21, 28, 35, 42, 49"),
    "custom:mcq_count_length": ({}, _mcq((5, 5, 5, 5)), _mcq((5, 5, 4, 5))),
    "custom:reverse_newline": ({}, _REVERSE_AFRICA, "\n".join(reversed(_REVERSE_AFRICA.split("\n")))),
    "custom:word_reverse": ({}, "eagle bald the is It", "It is the bald eagle."),
    "custom:character_reverse": ({}, ".elgae dlab ehT", "The bald eagle."),
    "custom:sentence_alphabet": ({}, _ALPHABET_STORY, _ALPHABET_STORY.rsplit(" Zoo", 1)[0]),
    "custom:european_capitals_sort": (
        {}, ", ".join(EUROPEAN_CAPITALS_BY_LATITUDE),
        ", ".join(["Helsinki", "Reykjavik", *EUROPEAN_CAPITALS_BY_LATITUDE[2:]]),
    ),
    "custom:csv_city": (
        {}, "ID,Country,City,Year,Count\n" + _CITY_ROWS,
        "ID,Country,City,Year,Count\n" + _CITY_ROWS.rsplit("\n", 1)[0],
    ),
    "custom:csv_special_character": (
        {}, 'ProductID,Category,Brand,Price,Stock\n' + _PRODUCT_ROWS + '\n14,Toys,"A&B",9.99,14',
        'ProductID,Category,Brand,Price,Stock\n' + _PRODUCT_ROWS + '\n14,Toys,"AB",9.99,14',
    ),
    "custom:csv_quotes": (
        {}, _STUDENT_HEADER + _STUDENT_ROWS, _STUDENT_HEADER + _STUDENT_ROWS.replace('"', ""),
    ),
    "custom:date_format_list": ({}, "1796-04-12, 1805-12-02", "1796-04-12, 1805-12-2"),
}


def test_every_instruction_id_has_a_checker_and_a_case():
    assert len(INSTRUCTION_IDS) == 58
    assert set(CASES) == set(INSTRUCTION_IDS)
    assert all(CONSTRAINTS[i].summary for i in INSTRUCTION_IDS)


@pytest.mark.parametrize("instruction_id", sorted(CASES))
def test_checker_passes_and_fails(instruction_id):
    kwargs, follows, breaks = CASES[instruction_id]
    prompt = {"key": "t", "instruction_id_list": [instruction_id], "kwargs": [kwargs]}
    assert check_strict(prompt, follows).follow_instruction_list == [True]
    assert check_strict(prompt, breaks).follow_instruction_list == [False]


@pytest.mark.parametrize(
    ("instruction_id", "kwargs", "response", "expected"),
    [
        # distinct conjunctions are counted over raw tokens: "and" and "And" are two
        ("count:conjunctions", {"small_n": 2}, "and And", True),
        # a lone lower-case letter is not caught by the title-case rule
        ("format:title_case", {}, "The Cat Sat On a Mat", True),
        # one blank line is dropped, the second of two consecutive blank lines stays
        ("format:line_indent", {}, "a\n\n b", True),
        ("format:line_indent", {}, "a\n\n\n b", False),
        # a blank line inside the prose ends it: later prose fails
        ("format:no_bullets_bullets", {}, "One. Two.\n\nThree.\n* a\n* b", False),
        # no '*' at all passes the sub-bullet rule
        ("format:sub-bullets", {}, "no bullets", True),
        # overlap is measured on character trigrams, not words
        ("ratio:overlap", {"reference_text": "the cat", "percentage": 100}, "he ca", True),
        # n_end is exclusive although the prompt says "including"
        ("repeat:repeat_span", {"prompt_to_repeat": "a b c d", "n_start": 0, "n_end": 2}, "a b", True),
        # letter options must match exactly, word options loosely
        ("format:options", {"options": "a), b), c), d)"}, "b)", True),
        ("format:options", {"options": "a), b), c), d)"}, "b) because", False),
        ("format:options", {"options": "I know or I don't know"}, "i don't know!", True),
        # whole-number floats (as in the IFBench test file) are accepted
        ("count:numbers", {"N": 2.0}, "1 and 2", True),
        # names count as substrings, case-sensitively
        ("count:person_names", {"N": 1}, "Leonard", True),
        ("count:person_names", {"N": 1}, "emma", False),
    ],
)
def test_ifbench_quirks_are_kept(instruction_id, kwargs, response, expected):
    check = bind_checker(instruction_id, kwargs)
    assert check(response) is expected


def test_sentence_splitter_follows_ifbench_rules():
    text = 'Dr. Smith went home. He was tired... Really?! She said "Yes." Visit example.com at 3.14 pm.'
    assert split_sentences(text) == [
        "Dr. Smith went home.", "He was tired...", "Really?", "!", 'She said "Yes".',
        "Visit example.com at 3.14 pm.",
    ]
    assert split_sentences("   ") == []


@pytest.mark.parametrize(
    ("instruction_id", "kwargs", "message"),
    [
        ("count:nonsense", {}, "unknown IFBench instruction id"),
        ("count:numbers", {}, "needs the arguments ['N']"),
        ("count:numbers", {"N": 2, "word": "x"}, "unexpected ['word']"),
        ("count:numbers", {"N": 2.5}, "must be a whole number"),
        ("count:numbers", {"N": "2"}, "must be a whole number"),
        ("count:numbers", {"N": -1}, "must be a whole number >= 0"),
        ("count:words_japanese", {"N": 0}, "must be a whole number >= 1"),
        ("words:keywords_specific_position", {"keyword": "x", "n": 1, "m": 0}, "'m' of"),
        ("sentence:keyword", {"word": 3, "N": 1}, "must be a string"),
    ],
)
def test_bad_instructions_raise_located_errors(instruction_id, kwargs, message):
    with pytest.raises(InputError, match=None) as error:
        bind_checker(instruction_id, kwargs, path="prompts.jsonl", line=7)
    assert message in str(error.value)
    assert str(error.value).startswith("prompts.jsonl:7:")


@pytest.mark.parametrize(
    ("instruction_id", "response"),
    [
        ("ratio:stop_words", "!!! ???"),  # no word at all
        ("ratio:overlap", "ab"),  # no trigram
        ("format:emoji", "Hi! !"),  # a sentence that is only punctuation
        ("words:last_first", "Go. ! Go."),
        ("custom:csv_quotes", _STUDENT_HEADER + _STUDENT_ROWS.replace('"Math"', "", 1)),  # an empty field
    ],
)
def test_degenerate_responses_fail_instead_of_crashing(instruction_id, response):
    kwargs = {"ratio:stop_words": {"percentage": 50}, "ratio:overlap": {"reference_text": "abc", "percentage": 50}}
    assert bind_checker(instruction_id, kwargs.get(instruction_id, {}))(response) is False


def test_null_arguments_are_dropped_like_ifbench():
    check = bind_checker("count:numbers", {"N": 1, "word": None, "small_n": None})
    assert check("42") and not check("4 2")


def test_prompt_fields_are_validated():
    with pytest.raises(InputError, match="instruction_id_list"):
        check_strict({"instruction_id_list": []}, "text")
    with pytest.raises(InputError, match="kwargs"):
        check_strict({"instruction_id_list": ["count:numbers"], "kwargs": [{"N": 1}, {}]}, "1")
    with pytest.raises(TypeError, match="dspy.Example or a mapping"):
        check_strict(["count:numbers"], "1")


def test_loose_variants_in_ifbench_order():
    assert loose_variants("Sure!\n**Answer**\nBye") == [
        "Sure!\n**Answer**\nBye", "Sure!\nAnswer\nBye", "**Answer**\nBye", "Sure!\n**Answer**", "**Answer**",
        "Answer\nBye", "Sure!\nAnswer", "Answer",
    ]


def test_loose_forgives_a_preamble_line_and_markdown_but_strict_does_not():
    prompt = {"key": "5", "instruction_id_list": ["format:no_whitespace", "format:title_case"], "kwargs": [{}, {}]}
    response = "Here you go:\n**Hello**"
    strict = check_strict(prompt, response)
    loose = check_loose(prompt, response)
    assert strict.follow_instruction_list == [False, False] and not strict.follow_all_instructions
    assert loose.follow_instruction_list == [True, True] and loose.follow_all_instructions
    assert loose.key == "5" and check_response(prompt, response, "loose") == loose


def test_blank_or_missing_response_follows_nothing():
    prompt = {"instruction_id_list": ["format:sub-bullets"], "kwargs": [{}]}
    for response in ("", "   \n", None):
        assert check_strict(prompt, response).follow_instruction_list == [False]
        assert check_loose(prompt, response).follow_instruction_list == [False]


def test_accuracy_is_prompt_and_instruction_level():
    results = [
        IFBenchResult(key="a", instruction_id_list=["x", "y"], follow_instruction_list=[True, False],
                      follow_all_instructions=False),
        IFBenchResult(key="b", instruction_id_list=["x"], follow_instruction_list=[True],
                      follow_all_instructions=True),
    ]
    assert ifbench_accuracy(results) == {"prompt_level": 0.5, "instruction_level": 2 / 3}
    with pytest.raises(InputError):
        ifbench_accuracy([])


def test_result_rejects_unknown_fields():
    with pytest.raises(ValueError):
        IFBenchResult(key=None, instruction_id_list=[], follow_instruction_list=[], follow_all_instructions=True,
                      score=1.0)

"""IFBench ``custom:*`` constraints: one fixed task each (CSV tables, ordered lists, ...)."""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from itertools import pairwise

from binaryeval_dspy.ifbench.registry import constraint
from binaryeval_dspy.ifbench.text_units import PUNCTUATION, split_sentences, without_punctuation

_MULTIPLES_OF_SEVEN = [str(number) for number in range(14, 51, 7)]
_QUESTION_LABEL = re.compile(r"\n*(?:Question \d+[\.|\):;]?\s*)")
_OPTION_LINE = re.compile(r"^[A-Ea-e][\.|\)]\s*\w+")
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DAYS_IN_MONTH = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}
_SPECIAL_QUOTED_FIELD = re.compile(r'".*[^\d\w\s].*"')
_PRODUCT_HEADER = re.compile(
    r'^(ProductID|"ProductID"),[ \t]*(Category|"Category"),[ \t]*(Brand|"Brand"),'
    r'[ \t]*(Price|"Price"),[ \t]*(Stock|"Stock")$'
)
_STUDENT_HEADER = re.compile(
    r'^(StudentID|"StudentID")\t *(Subject|"Subject")\t *(Grade|"Grade")\t *'
    r'(Semester|"Semester")\t *(Score|"Score")$'
)
_CITY_HEADER = ["ID", "Country", "City", "Year", "Count"]
#: Capitals of European countries north of 45 degrees, from north to south, as IFBench expects.
EUROPEAN_CAPITALS_BY_LATITUDE = ["Reykjavik", "Helsinki", "Oslo", "Tallinn", "Stockholm", "Riga", "Moscow", "Copenhagen", "Vilnius", "Minsk", "Dublin", "Berlin", "Amsterdam", "Warsaw", "London", "Brussels", "Prague", "Luxembourg", "Paris", "Vienna", "Bratislava", "Budapest", "Vaduz", "Chisinau", "Bern", "Ljubljana", "Zagreb"]


def _ascii_folded(text: str) -> str:
    """`text` with accents removed and any other non-ASCII character dropped."""
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def _csv_rows(text: str, delimiter: str = ",") -> list[list[str]]:
    return list(csv.reader(io.StringIO(text), delimiter=delimiter))


@constraint("custom:multiples")
def multiples(response: str) -> bool:
    """The numbers in the response are exactly 14, 21, 28, 35, 42, 49, in that order."""
    return re.findall(r"\d+", response.replace(",", ", ")) == _MULTIPLES_OF_SEVEN


@constraint("custom:mcq_count_length")
def mcq_count_length(response: str) -> bool:
    """Starts with "Question"; four questions, each with five options A-E; question
    texts strictly longer each time.

    Questions are split at "Question <number>" labels; an option is a line like
    ``B) text`` or ``c. text``; the question text is the lines before its first option.
    """
    if response[response.find("Question"):] != response:
        return False
    questions = _QUESTION_LABEL.split(response)
    if questions[0] == "":
        questions = questions[1:]
    questions = [question.strip() for question in questions if question.strip()]
    if len(questions) != 4:
        return False
    lengths = []
    for question in questions:
        text = ""
        option_count = 0
        for line in question.split("\n"):
            if _OPTION_LINE.match(line.strip()):
                option_count += 1
            elif option_count == 0:
                text += " " + line.strip()
        if option_count != 5:
            return False
        lengths.append(len(text.strip()))
    return all(shorter < longer for shorter, longer in pairwise(lengths))


@constraint("custom:reverse_newline")
def reverse_newline(response: str) -> bool:
    """From the first line naming Zimbabwe on, at least 52 lines in reverse alphabetical
    order (accents folded, surrounding punctuation trimmed, empty lines skipped)."""
    lines = [line.strip(PUNCTUATION + " ") for line in response.split("\n")]
    lines = [line for line in lines if line]
    start = next((index for index, line in enumerate(lines) if "Zimbabwe" in line), None)
    if start is None or len(lines) - start < 52:
        return False
    folded = [_ascii_folded(line) for line in lines[start:]]
    return folded == sorted(folded, reverse=True)


@constraint("custom:word_reverse")
def word_reverse(response: str) -> bool:
    """Read backwards word by word, the response mentions "bald eagle" and is one sentence."""
    words = without_punctuation(response.lower().strip()).split()
    forwards = " ".join(reversed(words))
    return "bald eagle" in forwards and forwards in split_sentences(forwards)


@constraint("custom:character_reverse")
def character_reverse(response: str) -> bool:
    """Contains "bald eagle" spelled backwards ("elgae dlab"), case-insensitive."""
    return "elgae dlab" in response.lower()


@constraint("custom:sentence_alphabet")
def sentence_alphabet(response: str) -> bool:
    """Exactly 26 sentences whose first words start with a, b, c, ... z in order."""
    sentences = split_sentences(response)
    if len(sentences) != 26:
        return False
    return all(
        bool(sentence.split()) and sentence.split()[0].lower()[0] == letter
        for sentence, letter in zip(sentences, "abcdefghijklmnopqrstuvwxyz")
    )


@constraint("custom:european_capitals_sort")
def european_capitals_sort(response: str) -> bool:
    """Exactly the 27 expected capitals, comma-separated, from north to south (accents folded)."""
    names = [name.strip() for name in _ascii_folded(response).split(",") if name.strip()]
    return names == list(EUROPEAN_CAPITALS_BY_LATITUDE)


@constraint("custom:csv_city")
def csv_city(response: str) -> bool:
    """A comma-separated table: header ID,Country,City,Year,Count and 7 rows of 5 fields."""
    rows = _csv_rows(response)
    return len(rows) == 8 and rows[0] == _CITY_HEADER and all(len(row) == 5 for row in rows[1:])


@constraint("custom:csv_special_character")
def csv_special_character(response: str) -> bool:
    """A ProductID,Category,Brand,Price,Stock table with 14 rows of 5 fields, one field
    a double-quoted value holding a special character.

    As in IFBench, each ``"`` is tripled before parsing so quotes stay in the fields,
    and the rows are checked in order until the first quoted special field.
    """
    if not _PRODUCT_HEADER.match(response.split("\n")[0].strip()):
        return False
    rows = _csv_rows(response.replace('"', '"""'))
    if len(rows) != 15:
        return False
    for row in rows[1:]:
        if len(row) != 5:
            return False
        if any(_SPECIAL_QUOTED_FIELD.match(field) for field in row):
            return True
    return False


@constraint("custom:csv_quotes")
def csv_quotes(response: str) -> bool:
    """A tab-separated StudentID/Subject/Grade/Semester/Score table, 3 rows, every field
    (header included) in double quotes."""
    if not _STUDENT_HEADER.match(response.split("\n")[0].strip()):
        return False
    rows = _csv_rows(response.replace('"', '"""'), delimiter="\t")
    if len(rows) != 4:
        return False
    for row in rows:
        if len(row) != 5:
            return False
        for field in row:
            value = field.strip()
            if not (value.startswith('"') and value.endswith('"')):
                return False
    return True


@constraint("custom:date_format_list")
def date_format_list(response: str) -> bool:
    """Only comma-separated YYYY-MM-DD dates, years 1769-1821, valid month and day."""
    for item in response.strip().split(","):
        date = item.strip()
        if not _ISO_DATE.match(date):
            return False
        year, month, day = (int(part) for part in date.split("-"))
        if not 1769 <= year <= 1821 or month > 12:
            return False
        if month in _DAYS_IN_MONTH and day > _DAYS_IN_MONTH[month]:
            return False
    return True

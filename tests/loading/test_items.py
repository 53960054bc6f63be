import json

import pytest

from binaryeval_dspy.data.items import load_items
from binaryeval_dspy.errors import InputError


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_jsonl_rows_become_examples(items_file):
    items = load_items(items_file, input_field="source", output_field="summary", id_field="id")
    assert [i.item_id for i in items] == ["item-0", "item-1", "item-2"]
    assert items[1].input.startswith("Article number 1") and items[1].output == "Summary 1."
    assert items[2].human == 2 and items[2].line == 3
    assert set(items[0].inputs().keys()) == {"input", "output"}


def test_limit_and_line_ids(items_file):
    items = load_items(items_file, input_field="source", output_field="summary", limit=2)
    assert [i.item_id for i in items] == ["line-1", "line-2"]


def test_missing_field_names_file_line_and_field(tmp_path):
    path = write(tmp_path, "x.jsonl", json.dumps({"source": "a", "summary": "b"}) + "\n" + json.dumps({"source": "a"}) + "\n")
    with pytest.raises(InputError) as err:
        load_items(path, input_field="source", output_field="summary")
    msg = str(err.value)
    assert f"{path}:2" in msg and "'summary'" in msg and "missing" in msg


def test_empty_output_is_kept_or_refused_with_its_line(tmp_path):
    path = write(tmp_path, "x.jsonl", json.dumps({"input": "a", "output": "  "}) + "\n")
    assert load_items(path)[0].output == "  "  # recorded as status empty_output by the run, never judged
    with pytest.raises(InputError, match=r"x\.jsonl:1: field 'output': the output is empty"):
        load_items(path, empty_output="fail")


def test_malformed_jsonl_line(tmp_path):
    path = write(tmp_path, "x.jsonl", json.dumps({"input": "a", "output": "b"}) + "\n{not json\n")
    with pytest.raises(InputError) as err:
        load_items(path)
    assert err.value.line == 2 and "not valid JSON" in str(err.value)


def test_missing_file_and_unknown_suffix(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        load_items(tmp_path / "missing.jsonl")
    with pytest.raises(InputError, match="unsupported file type"):
        load_items(write(tmp_path, "x.txt", "hi"))


def test_duplicate_ids_are_rejected(tmp_path):
    rows = [{"id": "a", "input": "x", "output": "y"}, {"id": "a", "input": "x", "output": "z"}]
    path = write(tmp_path, "x.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match="already used on line 1"):
        load_items(path, id_field="id")


def test_csv_with_mapping_and_errors(tmp_path):
    path = write(tmp_path, "x.csv", "doc,summ,id\nThe article.,The summary.,7\nOther.,,8\n")
    assert load_items(path, input_field="doc", output_field="summ", id_field="id")[1].output == ""
    with pytest.raises(InputError) as err:
        load_items(path, input_field="doc", output_field="summ", id_field="id", empty_output="fail")
    assert err.value.line == 3 and err.value.field == "summ"
    ok = write(tmp_path, "ok.csv", "doc,summ,id\nThe article.,The summary.,7\n")
    (item,) = load_items(ok, input_field="doc", output_field="summ", id_field="id")
    assert item.item_id == "7" and item.output == "The summary." and item.line == 2


def _rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("role, key", [("output", "output"), ("input", "input"), ("id", "id")])
def test_a_field_only_some_rows_lack_names_those_rows_and_does_not_suggest_another_field(tmp_path, role, key):
    """The field name is right when most rows have it: the error names the rows that lack it
    (a few, by line) and says to fix them, never to pass `<role>_field`."""
    rows = [{"id": f"i{n}", "input": "a text", "output": "a summary"} for n in range(8)]
    del rows[2][key], rows[6][key]
    path = _rows(tmp_path / "items.jsonl", rows)
    with pytest.raises(InputError) as caught:
        load_items(path, id_field="id")
    error = caught.value
    assert error.line == 3 and error.field == key, str(error)
    assert "missing on 2 of 8 rows: line(s) 3, 7" in str(error), str(error)
    assert f"{role}_field" not in str(error) and "add the" in str(error), str(error)


def test_a_field_most_rows_lack_suggests_naming_the_field(tmp_path):
    rows = [{"id": f"i{n}", "input": "a text", "summary": "a summary"} for n in range(8)]
    rows[5]["output"] = "one row has it"
    path = _rows(tmp_path / "items.jsonl", rows)
    with pytest.raises(InputError) as caught:
        load_items(path, id_field="id")
    error = caught.value
    assert error.line == 1 and error.field == "output", str(error)
    assert "missing on 7 of 8 rows (lines 1, 2, 3, 4, 5, ...;" in str(error) and "summary" in str(error)
    assert "pass `output_field`" in str(error), str(error)


def test_a_field_missing_with_a_limit_is_still_judged_against_the_whole_file(tmp_path):
    rows = [{"id": f"i{n}", "input": "a text", "output": "a summary"} for n in range(8)]
    del rows[0]["output"]
    path = _rows(tmp_path / "items.jsonl", rows)
    with pytest.raises(InputError, match=r"missing on 1 of 8 rows: line\(s\) 1 "):
        load_items(path, id_field="id", limit=1)


@pytest.mark.parametrize(("role", "value", "kind"), [
    ("output", False, "true/false"), ("output", ["yes"], "a list"), ("input", {"text": "a"}, "an object"),
    ("input", True, "true/false"),
])
def test_an_input_or_output_that_is_not_text_names_file_line_and_field(tmp_path, role, value, kind):
    good = {"input": "An article.", "output": "A summary."}
    path = write(tmp_path, "x.jsonl", json.dumps(good) + "\n" + json.dumps({**good, role: value}) + "\n")
    with pytest.raises(InputError) as err:
        load_items(path)
    msg = str(err.value)
    assert f"x.jsonl:2: field '{role}': the {role} must be text, got {kind}" in msg, msg
    assert err.value.line == 2


def test_a_number_where_text_is_expected_is_judged_as_its_text_with_one_warning(tmp_path, caplog):
    rows = [{"input": "An article.", "output": 42}, {"input": "An article.", "output": "Text."},
            {"input": 3.5, "output": 7}]
    path = write(tmp_path, "x.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    with caplog.at_level("WARNING"):
        items = load_items(path)
    assert [(i.input, i.output) for i in items] == [("An article.", "42"), ("An article.", "Text."), ("3.5", "7")]
    said = [r.getMessage() for r in caplog.records if "holds a number" in r.getMessage()]
    assert len(said) == 2, said  # one per field, not one per row
    assert any("x.jsonl:1: field 'output' holds a number, not text, on 2 row(s) (line(s) 1, 3)" in s for s in said)
    assert any("x.jsonl:3: field 'input'" in s for s in said)


def test_a_line_missing_its_closing_brace_is_reported_where_it_ends(tmp_path):
    path = write(tmp_path, "x.jsonl", json.dumps({"input": "a", "output": "b"}) + "\n" + '{"input": "a", "output": "b"\n')
    with pytest.raises(InputError) as err:
        load_items(path)
    said = str(err.value)
    assert err.value.line == 2 and "at column 29" in said and "the line ends before its JSON is closed" in said, said
    path = write(tmp_path, "y.jsonl", '{"input": "a" "output": "b"}\n')
    with pytest.raises(InputError, match=r"at column 15\)"):
        load_items(path)


# An unclosed quote must not take the next rows into one cell (the csv module's default
# reading does exactly that, silently): the error names the line where the quote opened.
@pytest.mark.parametrize(("text", "line", "says"), [
    # the file ends inside the cell (the breaker's case: 3 rows read as 1 item)
    ('id,input,output\n1,a,"unclosed quote\n2,b,second row\n3,c,third row\n', 2, "never closed"),
    # a later quote closes the cell, followed by text: the rows between are inside it
    ('id,input,output\n1,a,"unclosed\n2,b,"second"\n3,c,d\n', 2, "closed only on line 3"),
    # after a legitimate multi-line cell, blank lines and Windows line ends
    ('id,input,output\r\n1,a,"two\r\nlines"\r\n\r\n2,b,"open\r\n3,c,d\r\n', 5, "never closed"),
    # a quoted cell with text after its closing quote
    ('id,input,output\n1,a,"closed" then text\n', 2, "followed by more text"),
])
def test_an_unclosed_csv_quote_is_refused_at_the_line_it_opened(tmp_path, text, line, says):
    path = tmp_path / "x.csv"
    path.write_bytes(text.encode())
    with pytest.raises(InputError) as caught:
        load_items(path, id_field="id")
    assert caught.value.line == line and caught.value.field == "output", str(caught.value)
    assert says in str(caught.value) and str(path) in str(caught.value)


def test_an_unclosed_quote_in_the_csv_header_is_refused_on_line_1(tmp_path):
    path = write(tmp_path, "x.csv", 'id,"input,output\n1,a,b\n')
    with pytest.raises(InputError, match="never closed") as caught:
        load_items(path, id_field="id")
    assert caught.value.line == 1


def test_quoted_csv_cells_with_newlines_separators_and_doubled_quotes_still_load(tmp_path):
    path = write(tmp_path, "x.csv", 'id,input,output\n1,"a, b","first\nsecond ""quoted"" line"\n2,c,"d"\n')
    items = load_items(path, id_field="id")
    assert [(i.item_id, i.input, i.output, i.line) for i in items] == [
        ("1", "a, b", 'first\nsecond "quoted" line', 2), ("2", "c", "d", 4)]

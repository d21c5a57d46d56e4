"""Tests of the corpus machinery itself (corpus.py): the file format and the comparison rules
README.md promises. No server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import corpus as c

pytest_plugins = ["pytester"]  # test_xfail_mark_accepts_only_a_mismatch runs a pytest of its own


def parse(tmp_path: Path, text: str) -> list[c.Case]:
    p = tmp_path / "t.test"
    p.write_text(text)
    return c.parse_file(p)


def one(tmp_path: Path, text: str) -> c.Case:
    cases = parse(tmp_path, "dataset web\n\n" + text)
    assert len(cases) == 1
    return cases[0]


def answer(rows: list[dict]) -> str:
    return json.dumps(rows)


def test_parse_time():
    assert c.parse_time("2024-01-01T00:00:00Z") == 1704067200000
    assert c.parse_time("2024-01-01T00:00:01.25Z") == 1704067201250
    assert c.parse_time("1704067200000") == 1704067200000
    with pytest.raises(ValueError):
        c.parse_time("2024-01-01 00:00:00")


def test_records_directives_and_ids(tmp_path):
    cases = parse(tmp_path, "# comment\ndataset web\nrange 2024-01-01T01:00:00Z 2024-01-01T02:00:00Z\n\n"
                            "query count\nfoo\n----\n3\n\n"
                            "query rows start=1000 end=2000\n#type=x\n| count()\n----\n_count\n1\n\n"
                            "dataset kv\nquery error\nbar(\n----\n400\nat position\n")
    assert [x.id for x in cases] == ["t.test:5", "t.test:10", "t.test:18"]
    a, b, e = cases
    assert (a.dataset, a.mode, a.query, a.count) == ("web", "count", "foo", 3)
    assert (a.start, a.end) == (1704070800000, 1704074400000)
    assert (b.query, b.start, b.end) == ("#type=x\n| count()", 1000, 2000)
    assert (e.dataset, e.status, e.substrings) == ("kv", 400, ["at position"])


def test_skip_holds_for_the_rest_of_the_file(tmp_path):
    cases = parse(tmp_path, "dataset web\nquery count\na\n----\n1\n\n"
                            "skip needs the parser change\nquery count\nb\n----\n2\n")
    assert [c.skip for c in cases] == ["", "needs the parser change"]


@pytest.mark.parametrize("text, where", [
    ("query rows\nfoo\n----\n_count\n1\n", "no 'dataset'"),
    ("dataset web\nquery sorted\nfoo\n----\n1\n", "want: query"),
    ("dataset web\nquery count\nfoo\n\n----\n1\n", "blank line inside a query"),
    ("dataset web\nquery count\nfoo", "without '----'"),
    ("dataset web\nquery rows\nfoo\n----\na | b\n1\n", "1 cells for 2 columns"),
    ("dataset web\nquery rows\nfoo\n----\na\n | \n", "empty cell"),
    ("dataset web\nquery count\nfoo\n----\nmany\n", "one line with the number"),
    ("dataset web\nquery count bogus=1\nfoo\n----\n1\n", "unknown option"),
    ("dataset web\nselect 1\n", "expected 'query'"),
    ("dataset web\nskip\n", "want: skip REASON"),
])
def test_malformed_files_name_the_problem(tmp_path, text, where):
    with pytest.raises(c.CorpusError, match=where):
        parse(tmp_path, text)


def test_numbers_and_numeric_text_are_equal(tmp_path):
    k = one(tmp_path, "query rows\nx\n----\na | b\n200 | 0.1\n")
    assert c.check(k, 200, answer([{"a": "200", "b": 0.1}])) is None
    assert c.check(k, 200, answer([{"a": 200, "b": "0.10000000001"}])) is None
    assert c.check(k, 200, answer([{"a": "200.0", "b": "0.1"}])) is None
    assert c.check(k, 200, answer([{"a": "201", "b": "0.1"}])) is not None
    assert c.check(k, 200, answer([{"a": "200", "b": "0.1001"}])) is not None
    assert c.check(k, 200, answer([{"a": "2e2x", "b": "0.1"}])) is not None


def test_integers_compare_exactly_fractions_with_tolerance(tmp_path):
    k = one(tmp_path, "query rows\nx\n----\nt | avg\n1704067200000 | 246.3571428571\n")
    assert c.check(k, 200, answer([{"t": "1704067200000", "avg": 246.35714285714286}])) is None
    assert c.check(k, 200, answer([{"t": "1704067200001", "avg": 246.35714285714286}])) is not None
    assert c.check(k, 200, answer([{"t": "1704067200000", "avg": 246.3572}])) is not None
    whole = one(tmp_path, "query rows\nx\n----\navg\n1970\n")
    assert c.check(whole, 200, answer([{"avg": 1970.0000000000002}])) is None
    assert c.check(whole, 200, answer([{"avg": "1970.5"}])) is not None


def test_text_quoted_null_and_time_cells(tmp_path):
    k = one(tmp_path, 'query rows\nx\n----\na | b | c | d\nGET | " a|b " | NULL | ts(2024-01-01T00:00:00Z)\n')
    good = {"a": "GET", "b": " a|b ", "d": 1704067200000}
    assert c.check(k, 200, answer([good])) is None
    assert c.check(k, 200, answer([{**good, "a": "get"}])) is not None
    assert c.check(k, 200, answer([{**good, "c": "x"}])) is not None  # NULL = absent
    assert c.check(k, 200, answer([{**good, "d": "1704067200001"}])) is not None


def test_empty_string_cell(tmp_path):
    k = one(tmp_path, 'query rows\nx\n----\na\n""\n')
    assert c.check(k, 200, answer([{"a": ""}])) is None
    assert c.check(k, 200, answer([{}])) is not None


def test_exact_columns_unless_open(tmp_path):
    exact = one(tmp_path, "query rows\nx\n----\na\n1\n")
    assert c.check(exact, 200, answer([{"a": "1", "extra": "2"}])) is not None
    assert c.check(exact, 200, answer([{"a": "1"}])) is None
    opened = one(tmp_path, "query rows\nx\n----\na | ...\n1\n")
    assert c.check(opened, 200, answer([{"a": "1", "extra": "2"}])) is None
    assert c.check(opened, 200, answer([{"extra": "2"}])) is not None


def test_rows_are_ordered_rowsort_is_not(tmp_path):
    rows = one(tmp_path, "query rows\nx\n----\na\n1\n2\n")
    rowsort = one(tmp_path, "query rowsort\nx\n----\na\n1\n2\n")
    fwd, rev = answer([{"a": "1"}, {"a": "2"}]), answer([{"a": "2"}, {"a": "1"}])
    assert c.check(rows, 200, fwd) is None
    assert c.check(rows, 200, rev) is not None
    assert c.check(rowsort, 200, rev) is None
    # Multisets: duplicates must match one to one.
    assert c.check(rowsort, 200, answer([{"a": "1"}, {"a": "1"}])) is not None
    assert c.check(rowsort, 200, answer([{"a": "1"}, {"a": "2"}, {"a": "2"}])) is not None
    assert c.check(rows, 200, answer([{"a": "1"}])) is not None


def test_header_only_means_no_rows(tmp_path):
    k = one(tmp_path, "query rows\nx\n----\na\n")
    assert c.check(k, 200, "[]") is None
    assert c.check(k, 200, answer([{"a": "1"}])) is not None


def test_ranges(tmp_path):
    k = one(tmp_path, "query rows\nx\n----\np\n~11.5..15\n")
    assert c.check(k, 200, answer([{"p": "11.5"}])) is None
    assert c.check(k, 200, answer([{"p": 15}])) is None
    assert c.check(k, 200, answer([{"p": "15.01"}])) is not None
    assert c.check(k, 200, answer([{"p": "abc"}])) is not None


def test_count_and_error_modes(tmp_path):
    k = one(tmp_path, "query count\nx\n----\n2\n")
    assert c.check(k, 200, answer([{}, {}])) is None
    assert c.check(k, 200, answer([{}])) is not None
    assert c.check(k, 400, '{"error": "x"}') is not None
    e = one(tmp_path, "query error\nx\n----\n400\nunknown function\nat position 3\n")
    assert c.check(e, 400, "unknown function 'x' at position 3") is None
    assert c.check(e, 400, "unknown function 'x' at position 4") is not None
    assert c.check(e, 500, "unknown function 'x' at position 3") is not None


def test_non_200_or_bad_json_fails_a_rows_case(tmp_path):
    k = one(tmp_path, "query rows\nx\n----\na\n")
    assert c.check(k, 400, "[]") is not None
    assert c.check(k, 200, "not json") is not None
    assert c.check(k, 200, '{"a": 1}') is not None


def test_dataset_and_ingest_body(tmp_path):
    p = tmp_path / "d.ndjson"
    p.write_text('{"@timestamp": "2024-01-01T00:00:00Z", "@rawstring": "a", "tags": {"type": "x"}}\n'
                 '{"@timestamp": 5, "fields": {"f": 1}, "tags": {"type": "y"}}\n'
                 '\n'
                 '{"@timestamp": "2024-01-01T00:00:01Z", "@rawstring": "c", "tags": {"type": "x"}}\n')
    ev = c.load_dataset(p)
    assert [e["@timestamp"] for e in ev] == [1704067200000, 5, 1704067201000]
    body = c.humio_structured_body(ev)
    assert body == [
        {"tags": {"type": "x"}, "events": [{"timestamp": 1704067200000, "rawstring": "a"},
                                           {"timestamp": 1704067201000, "rawstring": "c"}]},
        {"tags": {"type": "y"}, "events": [{"timestamp": 5, "rawstring": "", "attributes": {"f": 1}}]},
    ]
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"@rawstring": "no timestamp"}\n')
    with pytest.raises(c.CorpusError, match="bad.ndjson:1"):
        c.load_dataset(bad)


def test_the_corpus_parses():
    cases = c.load_cases(Path(__file__).resolve().parent / "cases")
    assert len(cases) >= 150
    assert len({x.id for x in cases}) == len(cases)


def test_xfail_marks_only_the_next_case(tmp_path):
    cases = parse(tmp_path, "dataset web\n\n# why\nxfail createEvents() is not implemented\nquery count\nfoo\n----\n1\n\n"
                            "query count\nbar\n----\n2\n")
    assert [(x.query, x.xfail) for x in cases] == [("foo", "createEvents() is not implemented"), ("bar", "")]


@pytest.mark.parametrize("text, where", [
    ("dataset web\nxfail\nquery count\nfoo\n----\n1\n", "want: xfail REASON"),
    ("dataset web\nxfail soon\n", "must be followed by the query"),
    ("dataset web\nxfail soon\ndataset kv\nquery count\nfoo\n----\n1\n", "must be followed by the query"),
    ("dataset web\nxfail soon\nxfail twice\nquery count\nfoo\n----\n1\n", "must be followed by the query"),
])
def test_malformed_xfail_names_the_problem(tmp_path, text, where):
    with pytest.raises(c.CorpusError, match=where):
        parse(tmp_path, text)


def test_xfail_mark_accepts_only_a_mismatch(pytester):
    """The mark test_corpus.py gives an xfail case (xfail_mark): a mismatch (CaseMismatch) is an expected
    failure, a pass fails (strict), any other failure (a 5xx) fails."""
    pytester.syspathinsert(str(Path(c.__file__).parent))
    pytester.makepyfile(test_marks="""
        import pytest
        import corpus as c
        from test_corpus import xfail_mark

        mark = xfail_mark("r")

        @mark
        def test_mismatch():
            raise c.CaseMismatch("differs")

        @mark
        def test_passes():
            pass

        @mark
        def test_server_error():
            pytest.fail("HTTP 500")
    """)
    r = pytester.runpytest("-p", "no:cacheprovider")
    r.assert_outcomes(xfailed=1, failed=2)

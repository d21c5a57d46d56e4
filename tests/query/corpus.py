"""The query corpus: parsing of the `.test` files and comparison of query answers (README.md in
this directory describes the file format). Pure Python, no server: test_corpus.py runs the cases,
test_corpus_format.py tests this module.

Contract:
- `load_cases(dir)` parses every `*.test` file of `dir` (sorted by name) into `Case`s, in file
  order; a malformed file raises `CorpusError` naming the file and line.
- `load_dataset(path)` reads an NDJSON dataset; `humio_structured_body(events)` turns it into
  a /api/v1/ingest/humio-structured request body (one batch per distinct tag set, events in file
  order).
- `check(case, status, body)` returns None when the HTTP answer (status code, body text) meets
  the case's expectation, else a human-readable explanation of the difference.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODES = ("rows", "rowsort", "count", "error")
# Tolerance of numeric comparisons: an integer-valued answer must equal an integer-valued
# expectation exactly (timestamps, counts); otherwise relative REL_TOL plus absolute ABS_TOL.
REL_TOL = 1e-9
ABS_TOL = 1e-12

_NUMBER_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_ISO_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$")


class CorpusError(Exception):
    """A malformed corpus or dataset file (message names file and line)."""


class CaseMismatch(AssertionError):
    """Raised by test_corpus.py when an `xfail` case's answer differs from its expectation
    without a server error: the only failure its xfail mark accepts (a 5xx still fails)."""


# ---------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------


def parse_time(text: str) -> int:
    """Epoch milliseconds from digits or ISO-8601 UTC (`2024-01-01T00:02:00Z`, optional .mmm)."""
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if not _ISO_RE.match(text):
        raise ValueError(f"not a time (epoch ms or YYYY-MM-DDTHH:MM:SS[.mmm]Z): {text!r}")
    d = _dt.datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=_dt.timezone.utc)
    ms = int(d.timestamp()) * 1000
    if "." in text:
        frac = text[20:-1]
        ms += int(frac.ljust(3, "0"))
    return ms


def as_number(v: Any) -> float | None:
    """The number `v` denotes: ints and floats, or text that is a plain decimal number."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str) and _NUMBER_RE.match(v.strip()):
        return float(v.strip())
    return None


def value_text(v: Any) -> str:
    """The text form of an answer value (strings as they are, other JSON values as JSON)."""
    if isinstance(v, str):
        return v
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return str(int(v))
    return json.dumps(v)


@dataclass(frozen=True)
class Cell:
    """One expected value. kind: 'null' (column absent), 'number', 'range' (lo..hi inclusive),
    'quoted' (exact text), 'text' (exact text; plain text that is a number becomes 'number')."""

    kind: str
    text: str = ""
    number: float = 0.0
    lo: float = 0.0
    hi: float = 0.0

    def matches(self, present: bool, actual: Any) -> bool:
        if self.kind == "null":
            return not present
        if not present:
            return False
        if self.kind == "number":
            a = as_number(actual)
            if a is None:
                return False
            if a.is_integer() and self.number.is_integer():
                return a == self.number
            return math.isclose(a, self.number, rel_tol=REL_TOL, abs_tol=ABS_TOL)
        if self.kind == "range":
            a = as_number(actual)
            return a is not None and self.lo <= a <= self.hi
        return value_text(actual) == self.text

    def __str__(self) -> str:
        if self.kind == "null":
            return "NULL"
        if self.kind == "range":
            return f"~{self.lo:g}..{self.hi:g}"
        if self.kind == "quoted":
            return json.dumps(self.text)
        return self.text


def parse_cell(text: str, quoted: bool) -> Cell:
    if quoted:
        return Cell("quoted", text=text)
    t = text.strip()
    if t == "NULL":
        return Cell("null")
    m = re.fullmatch(r"ts\((.+)\)", t)
    if m:
        ms = parse_time(m.group(1))
        return Cell("number", text=t, number=float(ms))
    if t.startswith("~"):
        m = re.fullmatch(r"~\s*(\S+?)\s*\.\.\s*(\S+)", t)
        lo = as_number(m.group(1)) if m else None
        hi = as_number(m.group(2)) if m else None
        if lo is None or hi is None or lo > hi:
            raise ValueError(f"bad range {t!r} (want ~LO..HI)")
        return Cell("range", text=t, lo=lo, hi=hi)
    n = as_number(t)
    if n is not None:
        return Cell("number", text=t, number=n)
    return Cell("text", text=t)


def split_cells(line: str) -> list[tuple[str, bool]]:
    """Cells of a row line separated by `|`: (text, quoted). A cell that starts with `"` is a JSON
    string literal; other cells are trimmed text (which cannot contain `|`)."""
    out: list[tuple[str, bool]] = []
    i, n = 0, len(line)
    dec = json.JSONDecoder()
    while True:
        while i < n and line[i] in " \t":
            i += 1
        if i < n and line[i] == '"':
            try:
                s, j = dec.raw_decode(line, i)
            except json.JSONDecodeError as e:
                raise ValueError(f"bad quoted cell at column {i + 1}: {e}") from None
            if not isinstance(s, str):
                raise ValueError(f"quoted cell at column {i + 1} is not a string")
            out.append((s, True))
            i = j
            while i < n and line[i] in " \t":
                i += 1
            if i < n and line[i] != "|":
                raise ValueError(f"expected '|' after the quoted cell at column {i + 1}")
        else:
            j = line.find("|", i)
            j = n if j < 0 else j
            t = line[i:j].strip()
            if not t:
                raise ValueError(f"empty cell at column {i + 1} (write \"\" for an empty string)")
            out.append((t, False))
            i = j
        if i >= n:
            return out
        i += 1  # past '|'


# ---------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------


@dataclass
class Case:
    file: str  # file name, e.g. "filters.test"
    line: int  # line of the `query` line (1-based)
    dataset: str
    mode: str
    query: str
    start: int
    end: int
    columns: list[str] = field(default_factory=list)  # rows/rowsort
    open_columns: bool = False  # header ends with `...`: other columns are ignored
    rows: list[list[Cell]] = field(default_factory=list)
    count: int = 0  # count
    status: int = 0  # error
    substrings: list[str] = field(default_factory=list)  # error
    xfail: str = ""  # reason given by an `xfail` line before the case: expected to fail today
    skip: str = ""  # a `skip REASON` line above it: the case is reported as skipped

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}"


DEFAULT_RANGE = ("2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z")


def parse_file(path: Path) -> list[Case]:
    name = path.name
    lines = path.read_text(encoding="utf-8").split("\n")
    cases: list[Case] = []
    dataset: str | None = None
    skip = ""
    start, end = parse_time(DEFAULT_RANGE[0]), parse_time(DEFAULT_RANGE[1])
    xfail: tuple[int, str] | None = None  # (line, reason) of an `xfail` line awaiting its query
    i = 0

    def fail(lineno: int, msg: str) -> CorpusError:
        return CorpusError(f"{name}:{lineno}: {msg}")

    while i < len(lines):
        raw = lines[i]
        s = raw.strip()
        lineno = i + 1
        if not s or s.startswith("#"):
            i += 1
            continue
        words = s.split()
        if xfail is not None and words[0] != "query":
            raise fail(xfail[0], "an 'xfail' line must be followed by the query it marks")
        if words[0] == "xfail":
            reason = s[len("xfail"):].strip()
            if not reason:
                raise fail(lineno, "want: xfail REASON (why the case fails today)")
            xfail = (lineno, reason)
            i += 1
            continue
        if words[0] == "dataset":
            if len(words) != 2:
                raise fail(lineno, "want: dataset NAME")
            dataset = words[1]
            i += 1
            continue
        if words[0] == "skip":
            if len(words) < 2:
                raise fail(lineno, "want: skip REASON")
            skip = s[len("skip"):].strip()
            i += 1
            continue
        if words[0] == "range":
            if len(words) != 3:
                raise fail(lineno, "want: range START END")
            try:
                start, end = parse_time(words[1]), parse_time(words[2])
            except ValueError as e:
                raise fail(lineno, str(e)) from None
            i += 1
            continue
        if words[0] != "query":
            raise fail(lineno, f"expected 'query', 'dataset', 'range', 'xfail' or 'skip', found {words[0]!r}")
        if dataset is None:
            raise fail(lineno, "no 'dataset' line before this query")
        if len(words) < 2 or words[1] not in MODES:
            raise fail(lineno, f"want: query {{{'|'.join(MODES)}}} [start=T] [end=T]")
        case = Case(file=name, line=lineno, dataset=dataset, mode=words[1], query="", start=start, end=end,
                    xfail=xfail[1] if xfail else "", skip=skip)
        xfail = None
        for opt in words[2:]:
            k, _, v = opt.partition("=")
            try:
                if k == "start":
                    case.start = parse_time(v)
                elif k == "end":
                    case.end = parse_time(v)
                else:
                    raise fail(lineno, f"unknown option {opt!r}")
            except ValueError as e:
                raise fail(lineno, str(e)) from None
        # Query text up to `----`.
        i += 1
        qlines: list[str] = []
        while i < len(lines) and lines[i].strip() != "----":
            if not lines[i].strip():
                raise fail(i + 1, "blank line inside a query (missing '----'?)")
            qlines.append(lines[i].rstrip())
            i += 1
        if i >= len(lines):
            raise fail(lineno, "query without '----'")
        if not qlines:
            raise fail(lineno, "empty query")
        case.query = "\n".join(qlines)
        i += 1
        # Expected block up to a blank line.
        exp: list[tuple[int, str]] = []
        while i < len(lines) and lines[i].strip():
            exp.append((i + 1, lines[i].rstrip()))
            i += 1
        try:
            _parse_expected(case, exp)
        except ValueError as e:
            raise fail(exp[0][0] if exp else lineno, str(e)) from None
        cases.append(case)
    if xfail is not None:
        raise fail(xfail[0], "an 'xfail' line must be followed by the query it marks")
    return cases


def _parse_expected(case: Case, exp: list[tuple[int, str]]) -> None:
    if case.mode == "count":
        if len(exp) != 1 or not re.fullmatch(r"\d+", exp[0][1].strip()):
            raise ValueError("a count case expects one line with the number of rows")
        case.count = int(exp[0][1])
        return
    if case.mode == "error":
        if not exp or not re.fullmatch(r"\d{3}", exp[0][1].strip()):
            raise ValueError("an error case expects the HTTP status on the first line")
        case.status = int(exp[0][1])
        case.substrings = [t.strip() for _, t in exp[1:]]
        return
    if not exp:
        raise ValueError("a rows case expects a header line")
    header = split_cells(exp[0][1])
    cols = [t for t, _ in header]
    if cols and cols[-1] == "..." and not header[-1][1]:
        case.open_columns = True
        cols = cols[:-1]
    if not cols:
        raise ValueError("the header names no column")
    if len(set(cols)) != len(cols):
        raise ValueError("a column is named twice in the header")
    case.columns = cols
    for lineno, text in exp[1:]:
        try:
            cells = [parse_cell(t, q) for t, q in split_cells(text)]
        except ValueError as e:
            raise ValueError(f"line {lineno}: {e}") from None
        if len(cells) != len(cols):
            raise ValueError(f"line {lineno}: {len(cells)} cells for {len(cols)} columns")
        case.rows.append(cells)


def load_cases(directory: Path) -> list[Case]:
    out: list[Case] = []
    for p in sorted(Path(directory).glob("*.test")):
        out.extend(parse_file(p))
    return out


# ---------------------------------------------------------------------------------------------
# Datasets
# ---------------------------------------------------------------------------------------------


def load_dataset(path: Path) -> list[dict]:
    """Events of an NDJSON dataset: {"@timestamp": ISO or ms, "@rawstring": str, "fields": {..},
    "tags": {..}} per line (fields and tags optional); timestamps become epoch ms."""
    events = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            e = json.loads(line)
            ts = e["@timestamp"]
            e["@timestamp"] = ts if isinstance(ts, int) else parse_time(ts)
            e.setdefault("@rawstring", "")
            e.setdefault("fields", {})
            e.setdefault("tags", {})
        except (ValueError, KeyError, TypeError) as err:
            raise CorpusError(f"{Path(path).name}:{n}: {err}") from None
        events.append(e)
    return events


def humio_structured_body(events: list[dict]) -> list[dict]:
    batches: dict[str, dict] = {}
    for e in events:
        key = json.dumps(e["tags"], sort_keys=True)
        b = batches.setdefault(key, {"tags": e["tags"], "events": []})
        ev: dict[str, Any] = {"timestamp": e["@timestamp"], "rawstring": e["@rawstring"]}
        if e["fields"]:
            ev["attributes"] = e["fields"]
        b["events"].append(ev)
    return list(batches.values())


# ---------------------------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------------------------


def _row_matches(case: Case, expected: list[Cell], actual: dict) -> bool:
    for col, cell in zip(case.columns, expected):
        if not cell.matches(col in actual, actual.get(col)):
            return False
    if not case.open_columns:
        wanted = {c for c, cell in zip(case.columns, expected) if cell.kind != "null"}
        if set(actual) != wanted:
            return False
    return True


def _sort_key(values: list[tuple[bool, Any]]) -> tuple:
    key = []
    for present, v in values:
        if not present:
            key.append((0, 0.0, ""))
            continue
        n = as_number(v)
        key.append((1, n, "") if n is not None else (2, 0.0, value_text(v)))
    return tuple(key)


def _render(case: Case, rows: list[dict], limit: int = 60) -> str:
    out = []
    for r in rows[:limit]:
        cells = [value_text(r[c]) if c in r else "NULL" for c in case.columns]
        extra = [] if case.open_columns else sorted(set(r) - set(case.columns))
        line = " | ".join(cells)
        if extra:
            line += "   (+ columns " + ", ".join(f"{c}={value_text(r[c])!r}" for c in extra) + ")"
        out.append("  " + line)
    if len(rows) > limit:
        out.append(f"  ... {len(rows) - limit} more")
    return "\n".join(out) if out else "  (no rows)"


def check(case: Case, status: int, body: str) -> str | None:
    if case.mode == "error":
        if status != case.status:
            return f"expected HTTP {case.status}, got {status}: {body[:1000]}"
        missing = [s for s in case.substrings if s not in body]
        if missing:
            return f"the error does not contain {missing!r}: {body[:1000]}"
        return None
    if status != 200:
        return f"expected HTTP 200, got {status}: {body[:2000]}"
    try:
        rows = json.loads(body)
    except ValueError:
        return f"the answer is not JSON: {body[:1000]}"
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        return f"the answer is not a JSON array of objects: {body[:1000]}"
    if case.mode == "count":
        if len(rows) != case.count:
            return f"expected {case.count} rows, got {len(rows)}"
        return None
    header = " | ".join(case.columns) + (" | ..." if case.open_columns else "")
    exp_text = "\n".join("  " + " | ".join(str(c) for c in r) for r in case.rows) or "  (no rows)"
    if case.mode == "rows":
        ok = len(rows) == len(case.rows) and all(
            _row_matches(case, e, a) for e, a in zip(case.rows, rows))
        if ok:
            return None
        bad = next((k for k, (e, a) in enumerate(zip(case.rows, rows)) if not _row_matches(case, e, a)),
                   min(len(rows), len(case.rows)))
        return (f"rows differ (first difference at row {bad + 1}; {len(case.rows)} expected, "
                f"{len(rows)} got)\nexpected:\n  {header}\n{exp_text}\ngot:\n  {header}\n{_render(case, rows)}")
    # rowsort: multiset match (greedy: each expected row takes the first unused matching row).
    unused = list(range(len(rows)))
    missing_rows = []
    for e in case.rows:
        k = next((k for k in unused if _row_matches(case, e, rows[k])), None)
        if k is None:
            missing_rows.append(e)
        else:
            unused.remove(k)
    if not missing_rows and not unused:
        return None
    srt = sorted(rows, key=lambda r: _sort_key([(c in r, r.get(c)) for c in case.columns]))
    msg = [f"rows differ (order ignored; {len(case.rows)} expected, {len(rows)} got)"]
    if missing_rows:
        msg.append("expected but not found:\n" + "\n".join("  " + " | ".join(str(c) for c in r)
                                                         for r in missing_rows))
    if unused:
        msg.append("unexpected:\n" + _render(case, [rows[k] for k in unused]))
    msg.append(f"expected:\n  {header}\n{exp_text}\ngot (sorted):\n  {header}\n{_render(case, srt)}")
    return "\n".join(msg)

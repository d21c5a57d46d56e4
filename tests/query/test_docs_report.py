"""The documentation-examples report (docs_report.py, issue 17) in the suite: every example of
docs/examples.jsonl runs against a real server; the test FAILS on any 5xx, timeout or crash (a
bug), never on a refusal, and when the share that ran drops below docs/floor.txt. The other tests
check the report's own machinery without a server."""

from __future__ import annotations

import http.server
import json
import os
import threading
import types

import pytest
import requests

import docs_report as dr
from corpus_server import bounded_test  # noqa: F401 - fixture


def test_docs_examples_run(tmp_path) -> None:
    examples = dr.load_examples()
    rep = dr.run_report(examples, storage=os.environ.get("QUERY_CORPUS_STORAGE", "segments"), root=tmp_path)
    text = dr.render(rep)
    (tmp_path / "report.txt").write_text(text)
    assert rep.total == len(examples)
    errors = rep.errors()
    assert not errors, f"{len(errors)} documentation examples ended in an error (5xx/timeout/crash):\n" + "\n".join(
        f"  examples.jsonl:{o.line} [{o.status}] {o.reason}: {o.detail[:500]}\n    query: "
        + examples[[e.line for e in examples].index(o.line)].query.replace("\n", "\n           ")
        for o in errors)
    floor = dr.read_floor()
    assert 100 * rep.ran_share >= floor, (
        f"only {100 * rep.ran_share:.1f}% of the documentation examples ran, below the floor of "
        f"{floor}% in docs/floor.txt\n{text}")


def test_examples_file_is_well_formed() -> None:
    examples = dr.load_examples()
    assert len(examples) >= 200
    seen = set()
    for ex in examples:
        assert ex.source.startswith("https://"), ex
        assert ex.function, ex
        assert (ex.source, ex.query) not in seen, f"duplicate example at line {ex.line}"
        seen.add((ex.source, ex.query))


def test_load_examples_rejects_malformed_lines(tmp_path) -> None:
    p = tmp_path / "e.jsonl"
    p.write_text(json.dumps({"source": "s", "function": "f", "query": "q"}) + "\n\n{\"source\": \"s\"}\n")
    with pytest.raises(ValueError, match="e.jsonl:3"):
        dr.load_examples(p)
    p.write_text(json.dumps({"source": "s", "function": "f", "query": "  "}) + "\n")
    with pytest.raises(ValueError, match="empty query"):
        dr.load_examples(p)


@pytest.mark.parametrize("message, reason", [
    ("unknown function 'bar' at position 6", "unknown function 'bar'"),
    ("unexpected ',' at position 25", "unexpected ','"),
    ("expected a value but found 'statuscode' at position 6", "expected a value but found …"),
    ("expected a value after '=' but found end of query", "expected a value after '=' but found end of query"),
    ("limit 20000 is above 1000", "limit N is above N"),
])
def test_refusal_reason(message, reason) -> None:
    assert dr.refusal_reason(message) == reason


def test_error_message() -> None:
    assert dr.error_message('{"error": "boom", "status": 400}') == "boom"
    assert dr.error_message("plain text") == "plain text"


def test_read_floor(tmp_path) -> None:
    p = tmp_path / "floor.txt"
    p.write_text("# comment\n\n42.5 percent\n")
    assert dr.read_floor(p) == 42.5
    p.write_text("# nothing\n")
    with pytest.raises(ValueError):
        dr.read_floor(p)


def test_report_figures() -> None:
    rep = dr.Report([
        dr.Outcome(1, "https://a", "f", "ran", 200),
        dr.Outcome(2, "https://a", "g", "refused", 400, "unknown function 'g'"),
        dr.Outcome(3, "https://b", "g", "refused", 400, "unknown function 'g'"),
        dr.Outcome(4, "https://b", "h", "error", 500, "HTTP 500"),
    ])
    f = rep.figures()
    assert (f["total"], f["ran"], f["refused"], f["error"], f["ran_percent"]) == (4, 1, 2, 1, 25.0)
    assert f["by_source"] == {"https://a": {"ran": 1, "refused": 1}, "https://b": {"refused": 1, "error": 1}}
    assert f["by_reason"] == {"unknown function 'g'": 2}
    assert "ERRORS" in dr.render(rep)


class _Stub(http.server.BaseHTTPRequestHandler):
    """Answers every query with the status and body of its path's test (class attributes)."""
    status = 500
    body = b'{"error": "boom"}'

    def do_POST(self):  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("status, body, kind, reason", [
    (500, b'{"error": "boom"}', "error", "HTTP 500"),
    (408, b'{"error": "query timed out"}', "error", "HTTP 408"),
    (400, b'{"error": "unknown function \'x\' at position 3"}', "refused", "unknown function 'x'"),
    (200, b"[]", "ran", ""),
    (200, b"{}", "error", "200 without a JSON array"),
])
def test_classification_of_answers(status, body, kind, reason) -> None:
    """run_example against a loopback stub: a 5xx or 408 is an error (fails the suite), a 4xx a
    refusal, 200 with a JSON array a run."""
    handler = type("Stub", (_Stub,), {"status": status, "body": body})
    srv = http.server.HTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    t.start()
    try:
        import corpus as corpus_lib

        server = types.SimpleNamespace(url=f"http://127.0.0.1:{srv.server_address[1]}", api_token="t",
                                       session=requests.Session())
        ds = types.SimpleNamespace(server=server, corpus_lib=corpus_lib, alive=lambda: True)
        o = dr.run_example(ds, dr.Example("https://p", "f", "count()", 7), timeout=10)
        assert (o.kind, o.reason, o.line) == (kind, reason, 7)
    finally:
        srv.shutdown()
        srv.server_close()

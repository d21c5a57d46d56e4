"""P6: every malformed or unauthorized request gets a clear 4xx with a JSON reason and appends
nothing (the commit log end offsets and the event count stay the same).

Under Kafka (SEDIMENT_E2E_KAFKA) the cases whose invalid part follows a valid one (all or nothing
must reach the log) and the accounting test run; validation itself, the other cases and the
fuzzers are log-independent and run on the embedded log only."""

from __future__ import annotations

import gzip
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests

from conftest import API_TOKEN, INGEST_TOKEN, SedimentServer, marker, wait_until

MAX_BODY = 64 * 1024
MAX_EVENT = 2048
QUERY = "/api/v1/repositories/e2e/query"
OK_EVENT = {"event": "fine"}


@dataclass
class Case:
    name: str
    path: str
    body: Any = b""
    status: tuple[int, ...] = (400,)
    error: str = ""  # regex (case-insensitive) the "error" text must match
    method: str = "POST"
    auth: str | None = f"Bearer {INGEST_TOKEN}"
    params: dict = field(default_factory=dict)
    hec: bool = False  # HEC error shape: also "text" and "code"
    # A valid part precedes the invalid one: a partial append would show in the log's end offsets.
    # These also run on Kafka.
    partial: bool = False


def structured(*batches):
    return json.dumps(list(batches))


def hec(*events):
    return "\n".join(json.dumps(e) for e in events)


S = "/api/v1/ingest/humio-structured"
U = "/api/v1/ingest/humio-unstructured"
R = "/api/v1/ingest/raw"
H = "/services/collector/event"
HR = "/services/collector/raw"
QA = f"Bearer {API_TOKEN}"

CASES = [
    # humio-structured
    Case("structured-malformed-json", S, '[{"events": [{"rawstring": "x"}', error="json"),
    Case("structured-object-not-array", S, json.dumps({"events": [{"rawstring": "x"}]}), error="array"),
    Case("structured-events-not-list", S, structured({"events": {"rawstring": "x"}}), error="events"),
    Case("structured-missing-events", S, structured({"tags": {"a": "b"}}), error="events"),
    Case("structured-event-not-object", S, structured({"events": ["x"]}), error="object"),
    Case("structured-bad-timestamp", S, structured({"events": [{"timestamp": "last tuesday", "rawstring": "x"}]}),
         error="timestamp"),
    Case("structured-timestamp-bool", S, structured({"events": [{"timestamp": True, "rawstring": "x"}]}),
         error="timestamp"),
    Case("structured-second-batch-bad", S,
         structured({"events": [{"rawstring": "valid one"}]}, {"events": [{"timestamp": "nope", "rawstring": "x"}]}),
         error="timestamp", partial=True),
    Case("structured-last-event-bad", S,
         structured({"events": [{"rawstring": "ok"}] * 50 + [{"rawstring": 12}]}), error="rawstring", partial=True),
    Case("structured-tags-not-object", S, structured({"tags": ["a"], "events": [{"rawstring": "x"}]}), error="tags"),
    Case("structured-foreign-repo-tag", S, structured({"tags": {"#repo": "other"}, "events": [{"rawstring": "x"}]}),
         error="repo"),
    # humio-unstructured
    Case("unstructured-malformed-json", U, '[{"messages": ["a"]', error="json"),
    Case("unstructured-messages-not-strings", U, json.dumps([{"messages": ["ok", 1]}]), error="string",
         partial=True),
    Case("unstructured-missing-messages", U, json.dumps([{"fields": {"a": "b"}}]), error="messages"),
    Case("unstructured-fields-not-object", U, json.dumps([{"fields": [1], "messages": ["x"]}]), error="fields"),
    # HEC events
    Case("hec-no-event", H, hec({"time": 1700000000, "host": "h"}), error="event", hec=True),
    Case("hec-second-event-no-event", H, hec(OK_EVENT, {"host": "h"}), error="event", hec=True, partial=True),
    Case("hec-blank-event", H, hec({"event": ""}), error="blank|event", hec=True),
    Case("hec-bad-time", H, hec({"event": "x", "time": "noon"}), error="time", hec=True),
    Case("hec-malformed-json", H, '{"event": "x"} {"event": ', error="json|truncated", hec=True),
    Case("hec-not-an-object", H, '["event"]', error="object", hec=True),
    Case("hec-fields-not-object", H, hec({"event": "x", "fields": [1]}), error="fields", hec=True),
    # authentication
    Case("raw-missing-token", R, "line", status=(401,), error="token", auth=None),
    Case("raw-unknown-token", R, "line", status=(401, 403), error="token", auth="Bearer not-a-token"),
    Case("raw-api-token", R, "line", status=(401, 403), error="token", auth=QA),
    Case("raw-empty-bearer", R, "line", status=(401,), error="token", auth="Bearer "),
    Case("raw-basic-scheme", R, "line", status=(401,), error="token", auth=f"Basic {INGEST_TOKEN}"),
    Case("hec-missing-token", H, hec(OK_EVENT), status=(401,), error="token", auth=None, hec=True),
    Case("hec-unknown-token", H, hec(OK_EVENT), status=(401, 403), error="token", auth="Splunk nope", hec=True),
    Case("hec-api-token", HR, "line", status=(401, 403), error="token", auth=f"Splunk {API_TOKEN}", hec=True),
    # sizes
    Case("raw-body-too-large", R, ("x" * 99 + "\n") * (MAX_BODY // 100 + 50), status=(413,), error="limit|large"),
    Case("raw-event-too-large", R, "small line\n" + "y" * (MAX_EVENT + 1) + "\nafter\n", status=(413,),
         error="exceed|limit|large", partial=True),
    Case("structured-event-too-large", S, structured({"events": [{"rawstring": "ok"}, {"rawstring": "z" * 3000}]}),
         status=(413,), error="exceed|limit|large", partial=True),
    Case("structured-attributes-too-large", S,
         structured({"events": [{"attributes": {f"k{i}": "v" * 100 for i in range(30)}, "rawstring": "s"}]}),
         status=(413,), error="exceed|limit|large"),
    Case("unstructured-message-too-large", U, json.dumps([{"messages": ["ok", "m" * 3000]}]), status=(413,),
         error="exceed|limit|large", partial=True),
    Case("hec-event-too-large", H, hec(OK_EVENT, {"event": "e" * 3000}), status=(413,), error="exceed|limit|large",
         hec=True, partial=True),
    Case("hec-raw-line-too-large", HR, "ok\n" + "r" * 3000, status=(413,), error="exceed|limit|large", hec=True,
         partial=True),
    # methods and paths
    Case("get-on-ingest", R, "", status=(405,), error="POST", method="GET"),
    Case("put-on-hec", H, hec(OK_EVENT), status=(405,), error="POST", method="PUT", hec=False),
    Case("get-on-query", QUERY, "", status=(405,), error="POST", method="GET", auth=QA),
    Case("post-on-status", "/api/v1/status", "{}", status=(405,), error="GET", auth=None),
    Case("unknown-ingest-path", "/api/v1/ingest/nope", "line", status=(404,), error="endpoint|no such|not found"),
    Case("unknown-path", "/nothing/here", "", status=(404,), error="endpoint|no such|not found", method="GET"),
    Case("unknown-repo-subpath", "/api/v1/repositories/e2e/nope", "{}", status=(404,),
         error="endpoint|no such|not found", auth=QA),
    # queries
    Case("query-unknown-token", QUERY, json.dumps({"queryString": "x"}), status=(401, 403), error="token",
         auth="Bearer wrong"),
    Case("query-missing-token", QUERY, json.dumps({"queryString": "x"}), status=(401,), error="token", auth=None),
    Case("query-ingest-token", QUERY, json.dumps({"queryString": "x"}), status=(401, 403), error="token"),
    Case("query-unknown-repo", "/api/v1/repositories/nosuchrepo/query", json.dumps({"queryString": "x"}),
         status=(404,), error="nosuchrepo", auth=QA),
    Case("query-malformed-json", QUERY, '{"queryString": ', error="json", auth=QA),
    Case("query-not-object", QUERY, '["x"]', error="object", auth=QA),
    Case("query-missing-querystring", QUERY, json.dumps({"start": "1h"}), error="queryString", auth=QA),
    Case("query-querystring-number", QUERY, json.dumps({"queryString": 5}), error="queryString", auth=QA),
    Case("query-bad-start", QUERY, json.dumps({"queryString": "x", "start": "the day before"}),
         error="start|time|day before", auth=QA),
    Case("query-start-object", QUERY, json.dumps({"queryString": "x", "start": {}}), error="start", auth=QA),
    Case("query-live", QUERY, json.dumps({"queryString": "x", "isLive": True, "end": "1h"}), error="live", auth=QA),
    Case("query-parse-error", QUERY, json.dumps({"queryString": "x | count("}), error="position", auth=QA),
    # defineTable()/join() run their subquery once, before the query: never live.
    Case("query-live-define-table", QUERY,
         json.dumps({"queryString": "defineTable(name=t, query={x}, include=[a]) | match(table=t, field=a)",
                     "isLive": True}), error="defineTable.*live", auth=QA),
    Case("queryjob-live-join", QUERY + "jobs", json.dumps({"queryString": "join({x}, field=a)", "isLive": True}),
         error="join.*live", auth=QA),
    # start()/end() stand for the query's time range, which moves in a live query.
    Case("query-live-end", QUERY, json.dumps({"queryString": "x := end()", "isLive": True}),
         error="end\\(\\).*live", auth=QA),
    Case("queryjob-live-start", QUERY + "jobs",
         json.dumps({"queryString": "test(@timestamp > start())", "isLive": True}),
         error="start\\(\\).*live", auth=QA),
    Case("query-live-set-time-interval", QUERY,
         json.dumps({"queryString": "setTimeInterval(start=1h) | x", "isLive": True}),
         error="setTimeInterval\\(\\).*live", auth=QA),
    Case("queryjob-live-set-time-interval", QUERY + "jobs",
         json.dumps({"queryString": "setTimeInterval(1h)", "isLive": True}),
         error="setTimeInterval\\(\\).*live", auth=QA),
    Case("query-unknown-table", QUERY, json.dumps({"queryString": "x | match(table=t, field=a)"}),
         error="unknown table 't'.*position 4", auth=QA),
]


@pytest.fixture(scope="module")
def srv(module_server_factory) -> SedimentServer:
    s = module_server_factory(name="bad", max_body_bytes=MAX_BODY, max_event_bytes=MAX_EVENT, flush_age_ms=300)
    m = marker()
    assert s.ingest(R, "\n".join(f"{m} seed {i}" for i in range(7))).status_code == 200
    wait_until(lambda: s.count() == 7, timeout=15, what="seed events visible")
    return s


def snapshot(s: SedimentServer) -> tuple[int, int]:
    return s.log_end_sum(), s.count()


def send(s: SedimentServer, c: Case) -> requests.Response:
    headers = {"Content-Type": "application/json" if c.body[:1] in ("{", "[") else "text/plain"}
    if c.auth is not None:
        headers["Authorization"] = c.auth
    body = c.body.encode() if isinstance(c.body, str) else c.body
    return s.session.request(c.method, s.url + c.path, data=body, headers=headers, params=c.params, timeout=15)


ON_THE_LOG = pytest.mark.commit_log("a valid part before the invalid one: nothing of the request may reach the log")


@pytest.mark.parametrize("case", [pytest.param(c, marks=ON_THE_LOG) if c.partial else c for c in CASES],
                         ids=[c.name for c in CASES])
def test_bad_request_is_rejected_and_changes_nothing(srv, case):
    before = snapshot(srv)
    r = send(srv, case)
    assert r.status_code in case.status, f"{case.name}: expected {case.status}, got {r.status_code}: {r.text[:500]}"
    try:
        body = r.json()
    except ValueError:
        pytest.fail(f"{case.name}: error body is not JSON: {r.text[:500]!r}")
    assert isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"], body
    assert re.search(case.error, body["error"], re.I), f"{case.name}: error text {body['error']!r} !~ /{case.error}/"
    if case.hec:
        assert isinstance(body.get("text"), str) and body["text"], body
        assert isinstance(body.get("code"), int) and body["code"] != 0, body
    assert r.headers.get("Content-Type", "").startswith("application/json"), r.headers
    after = snapshot(srv)
    assert after == before, f"{case.name}: (logEnd sum, count) changed from {before} to {after}"


@pytest.mark.commit_log("the log end offsets the checks above compare move for a valid request")
def test_accounting_sees_a_valid_request_and_no_late_appends(srv):
    """The checks above are able to fail: a valid request moves both numbers. And once the digest
    has caught up, the count equals exactly the events of valid requests (no late appends)."""
    wait_until(srv.digested, timeout=15)
    log_end, count = snapshot(srv)
    m = marker()
    r = srv.ingest(S, [{"events": [{"rawstring": f"{m} a"}, {"rawstring": f"{m} b"}]}])
    assert r.status_code == 200, r.text
    assert srv.log_end_sum() > log_end
    wait_until(lambda: srv.count() == count + 2, timeout=15, what="two more events")
    time.sleep(0.5)
    wait_until(srv.digested, timeout=15)
    assert srv.count() == count + 2
    assert srv.count(m) == 2


@pytest.mark.parametrize("path, body", [(S, ""), (S, "[]"), (S, '[{"events": []}]'), (U, "  \n"), (R, ""),
                                        (R, "\n\n")])
def test_empty_requests_are_accepted_and_append_nothing(srv, path, body):
    """Documented (src/ingest/README.md): a blank body or batches without events are OK, 0 events."""
    before = snapshot(srv)
    r = srv.ingest(path, body)
    assert r.status_code == 200, r.text
    assert snapshot(srv) == before


@pytest.mark.parametrize("path, body", [(H, ""), (HR, "\n")])
def test_empty_hec_requests_are_splunks_no_data(srv, path, body):
    """Splunk answers a request without events 400 with code 5 "No data" (src/api/README.md)."""
    before = snapshot(srv)
    r = srv.ingest(path, body)
    assert r.status_code == 400, r.text
    assert r.json()["code"] == 5 and r.json()["text"] == "No data", r.text
    assert snapshot(srv) == before


def test_body_at_the_limit_is_accepted(srv):
    m = marker()
    line = f"{m} " + "x" * 80
    body = "\n".join([line] * (MAX_BODY // (len(line) + 1)))
    assert len(body) <= MAX_BODY
    n = body.count("\n") + 1
    r = srv.ingest(R, body)
    assert r.status_code == 200, r.text[:300]
    wait_until(lambda: srv.count(m) == n, timeout=15)
    big = "e" * (MAX_EVENT - 200)
    r = srv.ingest(R, f"{m}{big}")
    assert r.status_code == 200, r.text[:300]


@pytest.mark.parametrize("path, plain", [(R, "gz line one\ngz line two\n"), (H, '{"event": "gz hec one"}'),
                                         (S, '[{"events": [{"rawstring": "gz structured"}]}]')])
def test_gzip_content_encoding_is_decoded_or_rejected(srv, path, plain):
    """LogScale and Splunk HEC clients send `Content-Encoding: gzip`. The server must either decode
    the body or refuse it (4xx, nothing appended); storing the compressed bytes as events is wrong."""
    before = snapshot(srv)
    r = srv.ingest(path, gzip.compress(plain.encode()), headers={"Content-Encoding": "gzip"})
    if r.status_code == 200:
        wait_until(srv.digested, timeout=15)
        time.sleep(0.3)
        newest = srv.query("", *(0, int(time.time() * 1000) + 3_600_000))[-5:]
        raws = [row["@rawstring"] for row in newest]
        assert all("\x1f" not in x and "\ufffd" not in x for x in raws), (
            f"{path}: 200 for a gzip body, and the compressed bytes were stored as events: {raws}")
        assert any("gz" in x for x in raws), raws
    else:
        assert 400 <= r.status_code < 500, r.text
        assert snapshot(srv) == before


VALID_BODIES = {
    S: json.dumps([{"tags": {"host": "h"}, "events": [
        {"timestamp": "2024-05-01T10:00:00.000+02:00", "attributes": {"a": 1, "b": {"c": [1, "x"]}}, "rawstring": "r1"},
        {"timestamp": 1714557600123, "rawstring": "r2"}]}]),
    U: json.dumps([{"fields": {"f": "v"}, "tags": {"t": "1"}, "type": "ty", "messages": ["m1", "m2"]}]),
    H: json.dumps({"event": {"k": "v", "n": [1, 2]}, "time": 1714557600.5, "host": "h", "fields": {"x": "y"}})
    + json.dumps({"event": "s", "time": "1714557601"}),
    R: "line one\nline two\r\nline three",
}
JUNK = ['{', '}', '[', ']', '"', ',', ':', '\\', ' ', '\n', '0', '-', 'e', '.', 'null', 'true', '\x00', '\udcff']


def mutate(rng, text: str) -> bytes:
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(4)
        i = rng.randrange(len(text) + 1)
        if op == 0 and text:
            text = text[:i] + text[i + 1:]
        elif op == 1:
            text = text[:i] + rng.choice(JUNK) + text[i:]
        elif op == 2:
            j = rng.randrange(len(text) + 1)
            text = text[:i] + text[min(i, j):max(i, j)] + text[i:]
        else:
            text = text[:i]
    return text.encode("utf-8", "surrogateescape")


def test_fuzzed_ingest_bodies_never_5xx_and_rejects_change_nothing(srv):
    import random

    rng = random.Random(1234)
    statuses = {}
    for k in range(400):
        path = rng.choice(list(VALID_BODIES))
        body = mutate(rng, VALID_BODIES[path])
        before = srv.log_end_sum()
        r = srv.ingest(path, body)
        statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
        assert r.status_code in (200, 400, 413), f"{path} {body!r}: {r.status_code} {r.text[:300]}"
        if r.status_code != 200:
            assert isinstance(r.json().get("error"), str), r.text
            assert srv.log_end_sum() == before, f"{path} {body!r}: rejected ({r.text}) but appended"
    assert statuses.get(400, 0) > 50 and statuses.get(200, 0) > 10, statuses
    assert srv.status()["status"] == "OK"


def test_fuzzed_queries_never_5xx(srv):
    import random

    rng = random.Random(4321)
    parts = ["a", "b=c", "x!=y", "|", "count()", "head(", "tail(2)", ")", "(", '"', '"q w"', "/re/", "/[/", "or",
             "not", "!", "=", "*", "groupBy(x)", "groupBy([a,b], function=count())", "sort(", "sort(a, order=asc)",
             "table([a])", "[", "]", ",", "limit=5", "\\", " ", "#repo=e2e", "@rawstring=/s/i", "and", "é"]
    statuses = {}
    for _ in range(300):
        qs = "".join(rng.choice(parts) + rng.choice(["", " "]) for _ in range(rng.randint(1, 8)))
        r = srv.query_raw(qs)
        statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
        assert r.status_code in (200, 400), f"{qs!r}: {r.status_code} {r.text[:300]}"
        if r.status_code == 400:
            assert "position" in r.json()["error"] or "query" in r.json()["error"].lower(), (qs, r.text)
        else:
            assert isinstance(r.json(), list)
    assert statuses.get(200, 0) > 20 and statuses.get(400, 0) > 20, statuses

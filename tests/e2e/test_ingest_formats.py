"""Every ingest format end to end: what goes in comes back from a query exactly once, with the
right @timestamp, @rawstring, fields and tags; from in-progress buffers and from segments.

Under Kafka (SEDIMENT_E2E_KAFKA) the tests marked commit_log run: one full format round trip, one
request over many partitions, a request split into many log messages, and replay of buffered
events after kill -9. Parsing, the query language and the buffer/segment cut do not depend on the
commit log and run on the embedded log only."""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest

from conftest import REPO, SedimentServer, marker, wait_until

LONG_FLUSH_MS = 600_000  # nothing is flushed during the module: queries hit buffers
SHORT_FLUSH_MS = 200


def now_ms() -> int:
    return int(time.time() * 1000)


def iso(ms: int, offset_hours: int = 0) -> str:
    """ISO-8601 with milliseconds: 'Z' for offset 0, else '+HH:00' with the local wall time."""
    tz = dt.timezone(dt.timedelta(hours=offset_hours))
    t = dt.datetime.fromtimestamp(ms / 1000, tz)
    text = t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}"
    if offset_hours == 0:
        return text + "Z"
    sign = "+" if offset_hours > 0 else "-"
    return text + f"{sign}{abs(offset_hours):02d}:00"


@pytest.fixture(scope="module", params=["buffered", "flushed"])
def srv(request, module_server_factory) -> SedimentServer:
    flush = LONG_FLUSH_MS if request.param == "buffered" else SHORT_FLUSH_MS
    s = module_server_factory(name=request.param, flush_age_ms=flush)
    s.mode = request.param
    return s


def wide_range() -> tuple[int, int]:
    return now_ms() - 7 * 86_400_000, now_ms() + 3_600_000


def fetch(srv: SedimentServer, q: str, n: int) -> list[dict]:
    """Waits until `q` finds at least n events (ingest is durable at 200; the digest makes them
    visible shortly after), settles the mode's storage state, then returns one fresh result."""
    start, end = wide_range()
    wait_until(lambda: len(srv.query(q, start, end)) >= n, timeout=15, what=f"{n} events for {q!r}")
    if srv.mode == "flushed":
        wait_until(srv.quiet, timeout=15, what="all buffers flushed")
        assert srv.status()["segments"]["count"] > 0
    else:
        st = srv.status()
        assert st["segments"]["count"] == 0, f"buffered mode flushed a segment: {st}"
        assert sum(p["bufferedEvents"] for p in st["partitions"]) >= n
    return srv.query(q, start, end)


def check_common(rows: list[dict]) -> None:
    ids = [r.get("@id") for r in rows]
    assert all(isinstance(i, str) and i for i in ids), rows
    assert len(set(ids)) == len(ids), f"duplicate @id: {ids}"
    for r in rows:
        assert isinstance(r["@timestamp"], int), r
        assert isinstance(r["@ingesttimestamp"], str), r
        assert r["#repo"] == REPO, r
        for k, v in r.items():
            if k != "@timestamp":
                assert isinstance(v, str), f"field {k} is not a string: {r}"


def by_raw(rows: list[dict]) -> dict[str, dict]:
    out = {r["@rawstring"]: r for r in rows}
    assert len(out) == len(rows), f"an event came back more than once: {[r['@rawstring'] for r in rows]}"
    return out


def assert_subset(row: dict, expected: dict) -> None:
    for k, v in expected.items():
        assert row.get(k) == v, f"{k}: expected {v!r}, got {row.get(k)!r} in {row}"


@pytest.mark.commit_log("a structured request with timestamps, tags and attributes through the log")
def test_humio_structured(srv):
    m = marker()
    base = (now_ms() - 1_800_000) // 1000 * 1000 + 123
    attrs3 = {"marker": m, "n": 3, "nested": {"a": [1, 2]}}
    body = [
        {
            "tags": {"host": "web-1", "env": "e2e"},
            "events": [
                {"timestamp": iso(base), "attributes": {"marker": m, "n": 1, "user": {"name": "alice"}, "ok": True},
                 "rawstring": f"{m} first Z"},
                {"timestamp": iso(base + 1000, 2), "attributes": {"marker": m, "n": 2}, "rawstring": f"{m} second +02:00"},
                {"timestamp": base + 2000, "attributes": attrs3},
            ],
        },
        {"tags": {"host": "web-2"}, "events": [{"timestamp": iso(base + 3000, -5), "rawstring": f"{m} fourth -05:00"}]},
    ]
    r = srv.ingest("/api/v1/ingest/humio-structured", body)
    assert r.status_code == 200, r.text
    rows = fetch(srv, m, 4)
    check_common(rows)
    assert len(rows) == 4, rows
    got = by_raw(rows)
    assert_subset(got[f"{m} first Z"], {"@timestamp": base, "#host": "web-1", "#env": "e2e", "marker": m, "n": "1",
                                        "user.name": "alice", "ok": "true"})
    assert_subset(got[f"{m} second +02:00"], {"@timestamp": base + 1000, "#host": "web-1", "n": "2"})
    assert_subset(got[f"{m} fourth -05:00"], {"@timestamp": base + 3000, "#host": "web-2"})
    assert "#env" not in got[f"{m} fourth -05:00"]
    third = [row for raw, row in got.items() if not raw.startswith(m)]
    assert len(third) == 1, f"event without rawstring: expected its attributes as JSON, got {list(got)}"
    assert json.loads(third[0]["@rawstring"]) == attrs3
    assert_subset(third[0], {"@timestamp": base + 2000, "n": "3", "nested.a[0]": "1", "nested.a[1]": "2"})
    # Results are in @timestamp order.
    assert [r["@timestamp"] for r in rows] == sorted(r["@timestamp"] for r in rows)
    # Field and tag filters select within the request.
    start, end = wide_range()
    assert {r["n"] for r in srv.query(f"{m} #host=web-1", start, end)} == {"1", "2", "3"}
    assert [r["n"] for r in srv.query(f"marker={m} n=2", start, end)] == ["2"]


def test_humio_unstructured(srv):
    m = marker()
    before = now_ms()
    body = [
        {"fields": {"app": "billing", "dc": "eu"}, "tags": {"source": "u1"}, "type": "accesslog",
         "messages": [f"{m} line one", f"{m} line two"]},
        {"messages": [f"{m} line three"]},
    ]
    r = srv.ingest("/api/v1/ingest/humio-unstructured", body)
    assert r.status_code == 200, r.text
    after = now_ms()
    rows = fetch(srv, m, 3)
    check_common(rows)
    assert len(rows) == 3
    got = by_raw(rows)
    for raw in (f"{m} line one", f"{m} line two"):
        assert_subset(got[raw], {"app": "billing", "dc": "eu", "#source": "u1", "#type": "accesslog"})
    assert "app" not in got[f"{m} line three"]
    for row in rows:
        assert before - 1000 <= row["@timestamp"] <= after + 1000, (before, after, row)


def test_raw_lines(srv):
    m = marker()
    before = now_ms()
    r = srv.ingest("/api/v1/ingest/raw", f"{m} alpha\n{m} beta\n\n{m} gamma with \"quotes\"\r\n{m} delta")
    assert r.status_code == 200, r.text
    after = now_ms()
    rows = fetch(srv, m, 4)
    check_common(rows)
    assert sorted(r["@rawstring"] for r in rows) == sorted(
        [f"{m} alpha", f"{m} beta", f"{m} gamma with \"quotes\"", f"{m} delta"]
    )
    for row in rows:
        assert before - 1000 <= row["@timestamp"] <= after + 1000


@pytest.mark.parametrize("path", ["/api/v1/ingest/hec", "/services/collector", "/services/collector/event"])
def test_hec_events(srv, path):
    m = marker()
    base_s = (now_ms() - 600_000) // 1000
    evs = [
        {"event": f"{m} string event", "time": base_s + 0.5, "host": "h1", "source": "/var/log/app.log",
         "sourcetype": "st1", "fields": {"f1": "v1", "num": 7}},
        {"event": {"msg": f"{m} object event", "k": 2, "nested": {"x": "y"}}, "time": f"{base_s + 1}.25"},
        {"event": f"{m} int time", "time": base_s + 2, "host": "h3"},
    ]
    body = "\n".join(json.dumps(e) for e in evs[:2]) + " " + json.dumps(evs[2])
    r = srv.ingest(path, body)
    assert r.status_code == 200, r.text
    assert r.json() == {"text": "Success", "code": 0}
    rows = fetch(srv, m, 3)
    check_common(rows)
    assert len(rows) == 3, rows
    got = by_raw(rows)
    assert_subset(got[f"{m} string event"], {"@timestamp": base_s * 1000 + 500, "host": "h1",
                                             "source": "/var/log/app.log", "sourcetype": "st1", "f1": "v1",
                                             "num": "7"})
    obj = [row for raw, row in got.items() if raw.startswith("{")]
    assert len(obj) == 1, list(got)
    assert json.loads(obj[0]["@rawstring"]) == evs[1]["event"]
    assert_subset(obj[0], {"@timestamp": (base_s + 1) * 1000 + 250, "msg": f"{m} object event", "k": "2",
                           "nested.x": "y"})
    assert_subset(got[f"{m} int time"], {"@timestamp": (base_s + 2) * 1000, "host": "h3"})


@pytest.mark.parametrize("path", ["/services/collector/raw", "/api/v1/ingest/hec/raw"])
def test_hec_raw(srv, path):
    m = marker()
    r = srv.ingest(path, f"{m} raw one\n{m} raw two\n", params={"host": "rawhost", "sourcetype": "rawtype"})
    assert r.status_code == 200, r.text
    rows = fetch(srv, m, 2)
    check_common(rows)
    assert sorted(r["@rawstring"] for r in rows) == [f"{m} raw one", f"{m} raw two"]
    for row in rows:
        assert_subset(row, {"host": "rawhost", "sourcetype": "rawtype"})


def test_hec_splunk_auth_scheme(srv):
    m = marker()
    r = srv.ingest("/services/collector/event", {"event": f"{m} splunk auth"}, scheme="Splunk")
    assert r.status_code == 200, r.text
    r = srv.ingest("/services/collector/raw", f"{m} splunk raw", scheme="Splunk")
    assert r.status_code == 200, r.text
    rows = fetch(srv, m, 2)
    assert sorted(r["@rawstring"] for r in rows) == [f"{m} splunk auth", f"{m} splunk raw"]


@pytest.mark.commit_log("one request appended to many partitions")
def test_many_datasources_one_request(srv):
    """One request spread over many datasources (and so partitions): each event exactly once."""
    m = marker()
    body = [{"tags": {"shard": str(i)}, "events": [{"rawstring": f"{m} shard {i} ev {j}"} for j in range(5)]}
            for i in range(20)]
    r = srv.ingest("/api/v1/ingest/humio-structured", body)
    assert r.status_code == 200, r.text
    rows = fetch(srv, m, 100)
    check_common(rows)
    got = by_raw(rows)
    assert set(got) == {f"{m} shard {i} ev {j}" for i in range(20) for j in range(5)}
    for raw, row in got.items():
        assert row["#shard"] == raw.split()[2]
    assert srv.count(m) == 100


def test_special_characters_roundtrip(srv):
    m = marker()
    raws = [f"{m} quotes \"q\" backslash \\ tab\tend", f"{m} ctl \x01\x1f bell", f"{m} unicode h\u00e9llo \u65e5\u672c \U0001F600"]
    r = srv.ingest("/api/v1/ingest/raw", "\n".join(raws).encode("utf-8"))
    assert r.status_code == 200, r.text
    attrs = {"k\"ey": "v\\al", "uni": "\u00fc\u00df", "nl": "a\nb"}
    r = srv.ingest("/api/v1/ingest/humio-structured", [{"events": [{"rawstring": f"{m} structured", "attributes": attrs}]}])
    assert r.status_code == 200, r.text
    rows = fetch(srv, m, 4)
    got = by_raw(rows)
    assert set(got) == set(raws) | {f"{m} structured"}
    assert_subset(got[f"{m} structured"], attrs)
    # Invalid UTF-8 is stored, and the answer is still valid JSON.
    r = srv.ingest("/api/v1/ingest/raw", f"{m}bad ".encode() + b"\xff\xfe\xc3 tail")
    assert r.status_code == 200, r.text
    rows = fetch(srv, f"{m}bad", 1)
    assert len(rows) == 1 and rows[0]["@rawstring"].startswith(f"{m}bad ") and rows[0]["@rawstring"].endswith("tail")


@pytest.mark.commit_log("one request split into several log messages (the log's message size)")
def test_large_request_is_split_and_stored_once(srv):
    """A request far above the message size (~900 KiB) becomes several log messages: all stored."""
    m = marker()
    n = 20_000
    body = "\n".join(f"{m} big-request line {i:06d} " + "p" * 120 for i in range(n))
    assert len(body) > 2_500_000
    r = srv.ingest("/api/v1/ingest/raw", body, timeout=60)
    assert r.status_code == 200, r.text
    rows = fetch(srv, m, n)
    assert len(rows) == n
    assert len({r["@rawstring"][: len(m) + 25] for r in rows}) == n
    assert srv.count(m) == n


# ---- query language, end to end ----

LEVELS = ["error", "warn", "info", "info", "error", "info", "warn", "info", "error", "info"]


@pytest.fixture(scope="module")
def dataset(srv):
    """Ten events 1 s apart: n=0..9, level from LEVELS, svc a/b alternating."""
    m = marker("ql")
    base = (now_ms() - 3_600_000) // 1000 * 1000
    events = [
        {"timestamp": base + i * 1000,
         "attributes": {"n": i, "level": LEVELS[i], "svc": "ab"[i % 2]},
         "rawstring": f"{m} req-{i:02d} level={LEVELS[i]} svc={'ab'[i % 2]}"}
        for i in range(10)
    ]
    r = srv.ingest("/api/v1/ingest/humio-structured", [{"tags": {"ql": "1"}, "events": events}])
    assert r.status_code == 200, r.text
    fetch(srv, m, 10)
    return m, base


def q(srv, text, dataset, **kw):
    _, base = dataset
    return srv.query(text, base - 60_000, base + 60_000, **kw)


def ns(rows):
    return [int(r["n"]) for r in rows]


def test_ql_count_and_filters(srv, dataset):
    m, _ = dataset
    assert q(srv, f"{m} | count()", dataset) == [{"_count": "10"}]
    assert ns(q(srv, f"{m} level=error", dataset)) == [0, 4, 8]
    assert q(srv, f"{m} level=error | count()", dataset) == [{"_count": "3"}]
    assert sorted(ns(q(srv, f"{m} (level=error OR level=warn)", dataset))) == [0, 1, 4, 6, 8]
    assert sorted(ns(q(srv, f"{m} level=error or svc=b", dataset))) == [0, 1, 3, 4, 5, 7, 8, 9]
    assert sorted(ns(q(srv, f"{m} NOT level=info", dataset))) == [0, 1, 4, 6, 8]
    assert sorted(ns(q(srv, f"{m} level!=info svc=a", dataset))) == [0, 4, 6, 8]
    assert sorted(ns(q(srv, f"{m} not (svc=a or level=info)", dataset))) == [1]
    assert sorted(ns(q(srv, f"{m} /req-0[3-5]/", dataset))) == [3, 4, 5]
    assert sorted(ns(q(srv, f"{m} level=/^(warn|error)$/ svc=b", dataset))) == [1]
    assert sorted(ns(q(srv, f"{m} REQ-07", dataset))) == [7], "free text is case-insensitive"
    assert sorted(ns(q(srv, f"{m} #ql=1 svc=b level=info", dataset))) == [3, 5, 7, 9]
    assert q(srv, f"{m} #ql=2", dataset) == []
    assert sorted(ns(q(srv, f"{m} n=1*", dataset))) == [1]
    assert q(srv, f"{m} nosuchword", dataset) == []


def test_ql_pipeline_functions(srv, dataset):
    m, base = dataset
    assert ns(q(srv, f"{m} | head(3)", dataset)) == [0, 1, 2], "head() keeps the oldest events"
    assert ns(q(srv, f"{m} | tail(2)", dataset)) == [8, 9], "tail() keeps the newest events"
    assert ns(q(srv, f"{m} | sort(n, order=asc, limit=4)", dataset)) == [0, 1, 2, 3]
    assert ns(q(srv, f"{m} | sort(n, limit=3)", dataset)) == [9, 8, 7], "sort() is descending by default"
    rows = q(srv, f"{m} level=warn | table([n, svc])", dataset)
    assert sorted((r["n"], r["svc"]) for r in rows) == [("1", "b"), ("6", "a")]
    assert all("@rawstring" not in r for r in rows), f"table() returns only its columns: {rows}"
    groups = q(srv, f"{m} | groupBy(level)", dataset)
    assert {r["level"]: r["_count"] for r in groups} == {"error": "3", "warn": "2", "info": "5"}
    groups = q(srv, f"{m} | groupBy([svc, level], function=count())", dataset)
    assert {(r["svc"], r["level"]): r["_count"] for r in groups} == {
        ("a", "error"): "3", ("b", "warn"): "1", ("b", "info"): "4", ("a", "info"): "1", ("a", "warn"): "1"}
    assert q(srv, f"{m} svc=a | groupBy(level) | count()", dataset) == [{"_count": "3"}]


def test_ql_ndjson(srv, dataset):
    m, _ = dataset
    rows = q(srv, f"{m} level=error", dataset, ndjson=True)
    assert ns(rows) == [0, 4, 8]
    assert all(isinstance(r["@timestamp"], int) for r in rows)
    assert q(srv, f"{m} | count()", dataset, ndjson=True) == [{"_count": "10"}]
    r = srv.query_raw(f"{m}", dataset[1] - 60_000, dataset[1] + 60_000, ndjson=True)
    assert r.headers["Content-Type"].startswith("application/x-ndjson")


def test_ql_time_range(srv, dataset):
    m, base = dataset
    # [start, end) on @timestamp, epoch ms.
    assert ns(srv.query(m, base + 5000, base + 8000)) == [5, 6, 7]
    assert srv.query(f"{m} | count()", base + 5000, base + 8000) == [{"_count": "3"}]
    # ISO-8601 bounds.
    assert ns(srv.query(m, iso(base + 2000), iso(base + 4000, 2))) == [2, 3]
    # A range before everything finds nothing; the default range (last 24h) finds all.
    assert srv.query(m, base - 100_000, base - 1) == []
    assert len(srv.query(m, "24h")) == 10


@pytest.mark.parametrize("bad, pos", [(" | count(", None), ("foo | nosuchfn()", 6), ("(a or b", None),
                                      ("x | head(-1)", None), ("a=/[/", None)])
def test_ql_parse_errors(srv, bad, pos):
    r = srv.query_raw(bad)
    assert r.status_code == 400, r.text
    msg = r.json()["error"]
    assert "position" in msg, msg
    if pos is not None:
        assert f"position {pos}" in msg, msg


# ---- exactly once across the buffer/segment cut and restarts ----


def test_query_during_flushes_counts_each_event_once(server_factory):
    s = server_factory(flush_age_ms=300)
    m = marker()
    total = 0
    for i in range(5):
        lines = "\n".join(f"{m} batch {i} line {j}" for j in range(20))
        assert s.ingest("/api/v1/ingest/raw", lines).status_code == 200
        total += 20
    wait_until(lambda: s.count(m) >= total, timeout=15, what="all events visible")
    seen = []
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        seen.append(s.count(m))
    assert set(seen) == {total}, f"count() moved while buffers flushed: {sorted(set(seen))}"
    wait_until(s.quiet, timeout=15)
    rows = s.query(m, 0, now_ms() + 3_600_000)
    assert len(rows) == total and len({r["@id"] for r in rows}) == total


@pytest.mark.parametrize("hard", [
    False,
    # SIGKILL first: the buffered events exist only in the log and are replayed from it; the
    # second restart is then a SIGTERM. (sigterm runs the same two restarts the other way round.)
    pytest.param(True, marks=pytest.mark.commit_log("buffered events replayed from the log after kill -9")),
], ids=["sigterm", "sigkill"])
def test_restart_keeps_buffered_events_exactly_once(server_factory, hard):
    s = server_factory(flush_age_ms=LONG_FLUSH_MS)
    m = marker()
    lines = [f"{m} restart line {j}" for j in range(50)]
    assert s.ingest("/api/v1/ingest/raw", "\n".join(lines)).status_code == 200
    body = [{"tags": {"k": "v"}, "events": [{"rawstring": f"{m} structured {j}"} for j in range(10)]}]
    assert s.ingest("/api/v1/ingest/humio-structured", body).status_code == 200
    wait_until(lambda: s.count(m) == 60, timeout=15)
    s.restart(hard=hard)
    wait_until(s.digested, timeout=15, what="replay to the log end")
    rows = s.query(m, 0, now_ms() + 3_600_000)
    raws = sorted(r["@rawstring"] for r in rows)
    assert raws == sorted(lines + [f"{m} structured {j}" for j in range(10)])
    # And once more after a second restart.
    s.restart(hard=not hard)
    wait_until(s.digested, timeout=15)
    assert s.count(m) == 60


def test_order_head_tail_across_segments_and_buffers(server_factory):
    """Older events still in a buffer, newer ones already in a segment: one merged, ordered view."""
    s = server_factory(flush_age_ms=1500)
    m = marker()
    base = (now_ms() - 600_000) // 1000 * 1000

    def send(ns):
        evs = [{"timestamp": base + i * 1000, "attributes": {"n": i}, "rawstring": f"{m} n={i}"} for i in ns]
        assert s.ingest("/api/v1/ingest/humio-structured", [{"tags": {"o": "1"}, "events": evs}]).status_code == 200

    send(range(10, 20))
    wait_until(lambda: s.count(m) == 10, timeout=15)
    wait_until(s.quiet, timeout=15, what="first half flushed")
    send(range(0, 10))
    wait_until(lambda: s.count(m) == 20, timeout=10)
    assert s.buffered_events() == 10, "second half should still be buffered (flush age 1.5 s)"
    lo, hi = base - 1000, base + 60_000
    assert ns(s.query(m, lo, hi)) == list(range(20))
    assert ns(s.query(f"{m} | head(3)", lo, hi)) == [0, 1, 2]
    assert ns(s.query(f"{m} | tail(3)", lo, hi)) == [17, 18, 19]
    assert ns(s.query(f"{m} | sort(n, limit=2)", lo, hi)) == [19, 18]
    assert ns(s.query(m, base + 8000, base + 12_000)) == [8, 9, 10, 11]
    assert s.query(f"{m} | count()", lo, hi) == [{"_count": "20"}]

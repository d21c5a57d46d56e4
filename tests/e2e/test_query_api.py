"""LogScale-compatible query APIs (issue 7): the query endpoint (JSON, NDJSON, streamed large
results, isLive streaming), the query-job API (create, poll, metaData, delete, expiry, live jobs,
the bound on running jobs), the per-query time limit (408) and memory bound (413), bad requests,
and the official Python SDK humiolib against the real server."""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest
import requests

from conftest import API_TOKEN, INGEST_TOKEN, REPO, SedimentServer, marker, wait_until
from harness import (
    HUMIOLIB_VERSION,
    LiveStream,
    humiolib_python,
    query_job_create,
    query_job_delete,
    query_job_poll,
    query_job_start,
    query_job_wait,
)

OTHER_REPO = "other"
OTHER_INGEST_TOKEN = "other-ingest-token-0123456789"
RAW = "/api/v1/ingest/raw"
STRUCTURED = "/api/v1/ingest/humio-structured"
METADATA_FIELDS = {"eventCount": int, "processedBytes": int, "processedEvents": int, "timeMillis": int,
                   "workDone": int, "totalWork": int, "isAggregate": bool, "pollAfter": int,
                   "warnings": list, "extraData": dict, "queryStart": int, "queryEnd": int, "fieldOrder": list}


def ingest_lines(s: SedimentServer, lines: list[str]) -> float:
    """Ingests raw lines; returns the monotonic time of the 200."""
    r = s.ingest(RAW, "\n".join(lines))
    assert r.status_code == 200, r.text
    return time.monotonic()


@pytest.fixture(scope="module")
def api(module_server_factory) -> SedimentServer:
    """Two repositories; at most 2 jobs/live streams at once; jobs expire after 2 s unpolled."""
    return module_server_factory(
        name="api", flush_age_ms=300,
        ingest_tokens=[f"{REPO}:{INGEST_TOKEN}", f"{OTHER_REPO}:{OTHER_INGEST_TOKEN}"],
        extra_args=["--max-query-jobs", "2", "--query-job-expiry-ms", "2000"])


def seeded(s: SedimentServer, n: int, prefix: str = "ev") -> tuple[str, list[str]]:
    m = marker()
    lines = [f"{m} {prefix} {i:06d}" for i in range(n)]
    for i in range(0, n, 5000):
        ingest_lines(s, lines[i:i + 5000])
    wait_until(lambda: s.count(m) == n, timeout=30, what=f"{n} events of {m} searchable")
    return m, lines


def start_when_free(s: SedimentServer, q: str, start: str, **kw) -> str:
    """Creates a job once a place is free (a deleted job frees its place when its work stopped)."""
    def attempt():
        r = query_job_create(s, q, start, **kw)
        assert r.status_code in (200, 429), r.text
        return r.json()["id"] if r.status_code == 200 else None
    return wait_until(attempt, timeout=5, interval=0.05, what="a free place for a query job")


def open_live(s: SedimentServer, q: str, start: str, **kw) -> LiveStream:
    """A live stream, once a place is free."""
    def attempt():
        live = LiveStream(s, q, start, **kw)
        if live.status_code == 429:
            live.close()
            return None
        return live
    return wait_until(attempt, timeout=5, interval=0.05, what="a free place for a live query")


def check_metadata(meta: dict) -> None:
    for name, kind in METADATA_FIELDS.items():
        assert name in meta, f"metaData lacks {name}: {sorted(meta)}"
        assert isinstance(meta[name], kind) and not (kind is int and isinstance(meta[name], bool)), \
            f"metaData.{name} = {meta[name]!r} is not {kind.__name__}"
    assert meta["extraData"].get("hasMoreEvents") in ("true", "false"), meta["extraData"]
    for w in meta["warnings"]:
        assert isinstance(w, dict) and isinstance(w.get("message"), str) and w["message"], w


# ---- the query endpoint ----

def test_json_and_ndjson_answer_the_same_rows_and_large_results_stream(api):
    m, lines = seeded(api, 5000)
    rows = api.query(m, "1h")
    nd = api.query_raw(m, "1h", ndjson=True)
    assert nd.status_code == 200, nd.text[:500]
    assert nd.headers["Content-Type"].startswith("application/x-ndjson")
    # 5000 rows go out as a chunked stream, not one body.
    assert nd.headers.get("Transfer-Encoding") == "chunked", dict(nd.headers)
    nd_rows = [json.loads(x) for x in nd.text.splitlines() if x.strip()]
    assert len(nd_rows) == len(rows) == 5000
    assert nd_rows == rows
    assert sorted(r["@rawstring"] for r in rows) == sorted(lines)
    assert len({r["@id"] for r in rows}) == 5000
    assert all(isinstance(r["@timestamp"], int) for r in rows)
    js = api.query_raw(m, "1h")
    assert js.headers.get("Transfer-Encoding") == "chunked" and js.json() == rows
    # A small answer is one body with a length.
    small = api.query_raw(f"{m} | head(3)", "1h")
    assert small.status_code == 200 and "Content-Length" in small.headers and len(small.json()) == 3


def test_query_parameters_take_their_values_from_arguments(api):
    """LogScale's "arguments": ?name takes its value from the body, ?{name=default} its default."""
    m, lines = seeded(api, 6, prefix="param")

    def post(path, body):
        return requests.post(api.url + path, json=body, timeout=15,
                             headers={"Authorization": f"Bearer {API_TOKEN}"})

    q = f"{m} | @rawstring=?{{line=\"*\"}} | count()"
    assert int(api.query(q, "1h")[0]["_count"]) == 6
    body = {"queryString": q, "start": "1h", "arguments": {"line": f"*{m} param 000003"}}
    r = post(QUERY, body)
    assert r.status_code == 200 and int(r.json()[0]["_count"]) == 1, r.text
    # A number is its decimal text; a job binds the same way.
    body = {"queryString": f"{m} | n := ?k | groupBy(n)", "start": "1h", "arguments": {"k": 7}}
    r = post(QUERY, body)
    rows = [(str(e["n"]), int(e["_count"])) for e in r.json()] if r.status_code == 200 else r.text
    assert rows == [("7", 6)], rows
    job = post(QUERYJOBS, body)
    assert job.status_code == 200, job.text
    events = query_job_wait(api, job.json()["id"])["events"]
    assert [(str(e["n"]), int(e["_count"])) for e in events] == [("7", 6)], events
    # Without a value (and no default): a 400 naming the parameter and its position.
    r = post(QUERY, {"queryString": f"{m} | x=?missing", "start": "1h", "arguments": {"k": "1"}})
    assert r.status_code == 400 and "query parameter ?missing has no value" in r.json()["error"], r.text


# ---- query jobs ----

def test_query_job_lifecycle(api):
    m, lines = seeded(api, 40)
    job_id = query_job_start(api, m, "1h")
    body = query_job_wait(api, job_id)
    assert body["done"] is True and body["cancelled"] is False
    events = body["events"]
    assert sorted(e["@rawstring"] for e in events) == sorted(lines)
    assert events == api.query(m, "1h")
    meta = body["metaData"]
    check_metadata(meta)
    assert meta["eventCount"] == 40
    assert meta["isAggregate"] is False
    assert meta["processedEvents"] >= 40, meta
    assert meta["processedBytes"] >= sum(len(x) for x in lines), meta
    assert meta["workDone"] == meta["totalWork"] >= 1
    assert meta["pollAfter"] == 0
    assert meta["queryEnd"] - meta["queryStart"] == 3_600_000
    assert {"@timestamp", "@rawstring", "@id"} <= set(meta["fieldOrder"])
    # Polling again answers the same; the job stays until deleted.
    again = query_job_poll(api, job_id)
    assert again.status_code == 200 and again.json()["events"] == events
    # An aggregate job.
    agg_id = query_job_start(api, f"{m} | count()", "1h")
    agg = query_job_wait(api, agg_id)
    assert agg["events"] == [{"_count": "40"}]
    assert agg["metaData"]["isAggregate"] is True and agg["metaData"]["eventCount"] == 1
    # Jobs belong to their repository.
    assert query_job_poll(api, job_id, repo=OTHER_REPO).status_code == 404
    assert query_job_delete(api, job_id, repo=OTHER_REPO).status_code == 404
    # Delete: 204 without a body, then 404 for poll and delete.
    for jid in (job_id, agg_id):
        d = query_job_delete(api, jid)
        assert d.status_code == 204 and d.content == b"", (d.status_code, d.text)
        gone = query_job_poll(api, jid)
        assert gone.status_code == 404 and jid in gone.json()["error"]
        assert query_job_delete(api, jid).status_code == 404
    assert query_job_poll(api, "0123456789abcdef").status_code == 404


def test_running_jobs_are_bounded_and_cancelling_frees_the_place(api):
    """--max-query-jobs 2: two live jobs run (they never end by themselves), a third is refused
    with 429; deleting one cancels its work, and only once it stopped is there room again."""
    m = marker()
    a = start_when_free(api, m, "5m", live=True)
    b = start_when_free(api, m, "5m", live=True)
    try:
        r = query_job_create(api, m, "5m")
        assert r.status_code == 429, r.text
        assert "--max-query-jobs" in r.json()["error"]
        assert query_job_delete(api, a).status_code == 204
        c = wait_until(lambda: (lambda r: r.json()["id"] if r.status_code == 200 else None)(
            query_job_create(api, m, "5m")), timeout=5, what="a place after cancelling a running job")
        query_job_wait(api, c)
        assert query_job_delete(api, c).status_code == 204
    finally:
        query_job_delete(api, a)
        query_job_delete(api, b)


def test_unpolled_job_expires(api):
    """--query-job-expiry-ms 2000: a job not polled is forgotten (and a live one stops running)."""
    m, _ = seeded(api, 5)
    done_id = query_job_start(api, m, "1h")
    query_job_wait(api, done_id)
    live_a = start_when_free(api, m, "5m", live=True)
    live_b = start_when_free(api, m, "5m", live=True)
    assert query_job_create(api, m, "5m").status_code == 429
    time.sleep(3.0)
    assert query_job_poll(api, done_id).status_code == 404
    assert query_job_poll(api, live_a).status_code == 404
    assert query_job_poll(api, live_b).status_code == 404
    fresh = start_when_free(api, m, "5m")
    query_job_wait(api, fresh)
    query_job_delete(api, fresh)


def test_live_query_job_follows_new_events(api):
    # Every job here is polled at least every second: the fixture expires jobs after 2 s unpolled.
    m, first = seeded(api, 3, "before")
    job_id = start_when_free(api, m, "10m", live=True)
    try:
        body = query_job_wait(api, job_id)  # done once the window up to now is searched
        assert sorted(e["@rawstring"] for e in body["events"]) == sorted(first)
        assert body["metaData"]["isAggregate"] is False
        assert 0 < body["metaData"]["pollAfter"] <= 1000
        later = [f"{m} after {i}" for i in range(4)]
        ingest_lines(api, later)

        def has_all():
            r = query_job_poll(api, job_id)
            assert r.status_code == 200, r.text
            got = sorted(e["@rawstring"] for e in r.json()["events"])
            return got == sorted(first + later)

        wait_until(has_all, timeout=10, interval=0.3, what="the live job's result to include the new events")
    finally:
        assert query_job_delete(api, job_id).status_code == 204
    assert query_job_poll(api, job_id).status_code == 404


def test_live_aggregate_job_follows_new_events(api):
    m, _ = seeded(api, 7, "before")
    count_id = start_when_free(api, f"{m} | count()", "10m", live=True)
    try:
        body = query_job_wait(api, count_id)
        assert body["events"] == [{"_count": "7"}]
        assert body["metaData"]["isAggregate"] is True
        ingest_lines(api, [f"{m} more"])
        wait_until(lambda: query_job_poll(api, count_id).json()["events"] == [{"_count": "8"}],
                   timeout=10, interval=0.3, what="the live count to reach 8")
    finally:
        assert query_job_delete(api, count_id).status_code == 204


# ---- live queries on the streaming endpoint ----

def test_live_stream_sends_each_new_event_exactly_once(api):
    m, before = seeded(api, 3, "before")
    live = open_live(api, m, "10m")
    try:
        assert live.status_code == 200, live.response.text[:500]
        assert live.response.headers["Content-Type"].startswith("application/x-ndjson")
        wait_until(lambda: len(live.rows()) == 3, timeout=10, what="the window's events")
        t_b = ingest_lines(api, [f"{m} during {i}" for i in range(5)])
        wait_until(lambda: len(live.rows()) == 8, timeout=10, what="5 new events on the stream")
        arrived = max(t for t, line in live.lines if "during" in line)
        print(f"[figure] live query latency: {arrived - t_b:.2f} s from the ingest ack to the event on the stream")
        assert arrived - t_b < 5.0
        # The stream holds one of the 2 places; a live job takes the other; a third is refused.
        job = start_when_free(api, m, "10m", live=True)
        assert query_job_create(api, m, "10m").status_code == 429
        assert query_job_delete(api, job).status_code == 204
        ingest_lines(api, [f"{m} later {i}" for i in range(4)])
        wait_until(lambda: len(live.rows()) == 12, timeout=10, what="4 more events on the stream")
        # The events move from the buffers to segments, and several more runs follow: nothing twice.
        wait_until(api.quiet, timeout=20, what="every event flushed to a segment")
        time.sleep(2.5)
        rows = live.rows()
        assert len(rows) == 12, [r["@rawstring"] for r in rows]
        assert len({r["@id"] for r in rows}) == 12
        expected = before + [f"{m} during {i}" for i in range(5)] + [f"{m} later {i}" for i in range(4)]
        assert sorted(r["@rawstring"] for r in rows) == sorted(expected)
    finally:
        live.close()
    # The server notices the client left and frees its place (two jobs fit again).
    def two_fit():
        ids = []
        for _ in range(2):
            r = query_job_create(api, m, "10m", live=True)
            if r.status_code != 200:
                break
            ids.append(r.json()["id"])
        for i in ids:
            query_job_delete(api, i)
        return len(ids) == 2
    wait_until(two_fit, timeout=5, interval=0.3, what="the closed stream's place to be free")


def test_live_stream_of_an_aggregate_sends_the_result_when_it_changes(api):
    m, _ = seeded(api, 3)
    live = open_live(api, f"{m} | count()", "10m")
    try:
        assert live.status_code == 200, live.response.text[:500]
        wait_until(lambda: live.rows() == [[{"_count": "3"}]], timeout=10, what="the first snapshot")
        ingest_lines(api, [f"{m} x", f"{m} y"])
        wait_until(lambda: live.rows()[-1:] == [[{"_count": "5"}]], timeout=10, what="the updated snapshot")
        time.sleep(2.5)
        snaps = live.rows()
        assert all(isinstance(x, list) for x in snaps), snaps
        assert snaps[0] == [{"_count": "3"}] and snaps[-1] == [{"_count": "5"}]
        assert all(a != b for a, b in zip(snaps, snaps[1:])), f"an unchanged result was sent again: {snaps}"
    finally:
        live.close()


def test_live_stream_as_a_json_array(api):
    m, before = seeded(api, 2)
    live = open_live(api, m, "10m", ndjson=False)
    try:
        assert live.status_code == 200
        assert live.response.headers["Content-Type"].startswith("application/json")
        wait_until(lambda: live.text().count("@rawstring") == 2, timeout=10)
        ingest_lines(api, [f"{m} new"])
        wait_until(lambda: live.text().count("@rawstring") == 3, timeout=10)
        text = live.text()
        assert text.startswith("[")
        rows = json.loads(text + "]")  # the elements sent so far, comma-separated
        assert sorted(r["@rawstring"] for r in rows) == sorted(before + [f"{m} new"])
    finally:
        live.close()


# ---- limits ----

def big_dataset(s: SedimentServer, n: int = 60000) -> str:
    """n events of about 100 bytes, all in segments."""
    m = marker()
    lines = [f"{m} line {i:07d} " + "x" * 80 for i in range(n)]
    for i in range(0, len(lines), 20000):
        ingest_lines(s, lines[i:i + 20000])
    wait_until(s.quiet, timeout=60, what="everything in segments")
    return m


def test_time_limit_answers_408(server_factory):
    s = server_factory(name="timeout", flush_age_ms=300, extra_args=["--query-timeout-ms", "1"])
    m = big_dataset(s)
    r = s.query_raw(f"{m} | count()", start="1h")
    assert r.status_code == 408, r.text[:500]
    err = r.json()["error"]
    assert re.search(r"timed out", err, re.I) and "--query-timeout-ms" in err, err
    assert r.headers["Content-Type"].startswith("application/json")
    job = query_job_start(s, f"{m} | count()", "1h")

    def failed():
        p = query_job_poll(s, job)
        return (p,) if p.status_code != 200 else None
    (p,) = wait_until(failed, timeout=20, what="the job to fail")
    assert p.status_code == 408 and "--query-timeout-ms" in p.json()["error"], p.text
    assert query_job_delete(s, job).status_code == 204


def test_time_limit_is_not_hit_by_default(server_factory):
    """The same kind of query finishes under the default limit (the 408 above is the limit's)."""
    s = server_factory(name="notimeout", flush_age_ms=300)
    m = big_dataset(s)
    assert s.count(m) == 60000


def test_memory_bound_answers_413(server_factory):
    s = server_factory(name="memory", flush_age_ms=300, extra_args=["--query-memory-bytes", "65536"])
    m = marker()
    events = [{"rawstring": f"{m} ev {i}", "attributes": {"k": f"value-{i:06d}", "g": f"g{i % 3}"}}
              for i in range(20000)]
    r = s.ingest(STRUCTURED, [{"events": events}])
    assert r.status_code == 200, r.text
    wait_until(s.quiet, timeout=60)
    # A small state fits.
    assert s.count(m) == 20000
    few = s.query(f"{m} | groupBy(g)", "1h")
    assert sorted((x["g"], x["_count"]) for x in few) == [("g0", "6667"), ("g1", "6667"), ("g2", "6666")]
    r = s.query_raw(f"{m} | groupBy(k)", start="1h")
    assert r.status_code == 413, r.text[:500]
    err = r.json()["error"]
    assert "memory" in err and "--query-memory-bytes" in err, err


# ---- bad requests ----

QUERYJOBS = f"/api/v1/repositories/{REPO}/queryjobs"
QUERY = f"/api/v1/repositories/{REPO}/query"
BAD = [
    # (name, method, path, body, auth, status, error regex)
    ("jobs-malformed-json", "POST", QUERYJOBS, '{"queryString": ', API_TOKEN, 400, "json"),
    ("jobs-not-object", "POST", QUERYJOBS, '["x"]', API_TOKEN, 400, "object"),
    ("jobs-missing-querystring", "POST", QUERYJOBS, json.dumps({"start": "1h"}), API_TOKEN, 400, "queryString"),
    ("jobs-parse-error", "POST", QUERYJOBS, json.dumps({"queryString": "x | count("}), API_TOKEN, 400, "position"),
    ("jobs-bad-start", "POST", QUERYJOBS, json.dumps({"queryString": "x", "start": "the day before"}), API_TOKEN,
     400, "start|time|day before"),
    ("jobs-live-with-end", "POST", QUERYJOBS, json.dumps({"queryString": "x", "isLive": True, "end": "5m"}),
     API_TOKEN, 400, "live"),
    ("jobs-islive-not-bool", "POST", QUERYJOBS, json.dumps({"queryString": "x", "isLive": "yes"}), API_TOKEN, 400,
     "isLive"),
    ("jobs-unknown-token", "POST", QUERYJOBS, json.dumps({"queryString": "x"}), "wrong", 401, "token"),
    ("jobs-missing-token", "POST", QUERYJOBS, json.dumps({"queryString": "x"}), None, 401, "token"),
    ("jobs-ingest-token", "POST", QUERYJOBS, json.dumps({"queryString": "x"}), INGEST_TOKEN, 401, "token"),
    ("jobs-unknown-repo", "POST", "/api/v1/repositories/nosuchrepo/queryjobs", json.dumps({"queryString": "x"}),
     API_TOKEN, 404, "nosuchrepo"),
    ("jobs-get-collection", "GET", QUERYJOBS, "", API_TOKEN, 405, "POST"),
    ("jobs-post-on-job", "POST", QUERYJOBS + "/abc", "{}", API_TOKEN, 405, "GET|DELETE"),
    ("jobs-unknown-id", "GET", QUERYJOBS + "/abc", "", API_TOKEN, 404, "abc"),
    ("jobs-delete-unknown-id", "DELETE", QUERYJOBS + "/abc", "", API_TOKEN, 404, "abc"),
    ("live-with-end", "POST", QUERY, json.dumps({"queryString": "x", "isLive": True, "end": "1h"}), API_TOKEN, 400,
     "live"),
    ("arguments-not-object", "POST", QUERY, json.dumps({"queryString": "x=?a", "arguments": ["a"]}), API_TOKEN,
     400, "arguments"),
    ("argument-not-scalar", "POST", QUERY, json.dumps({"queryString": "x=?a", "arguments": {"a": [1]}}), API_TOKEN,
     400, "argument 'a'"),
    ("parameter-without-value", "POST", QUERYJOBS, json.dumps({"queryString": "x=?a"}), API_TOKEN, 400,
     r"query parameter \?a has no value .*position 2"),
    ("saved-query-call", "POST", QUERY, json.dumps({"queryString": "$saved()"}), API_TOKEN, 400,
     r"unknown saved query 'saved'.*position 0"),
    ("live-parse-error", "POST", QUERY, json.dumps({"queryString": "x |", "isLive": True}), API_TOKEN, 400,
     "position"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_query_api_requests(api, case):
    name, method, path, body, token, status, error = case
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    r = requests.request(method, api.url + path, data=body.encode(), headers=headers, timeout=15)
    assert r.status_code == status, f"{name}: {r.status_code} {r.text[:300]}"
    assert r.headers.get("Content-Type", "").startswith("application/json"), r.headers
    err = r.json().get("error")
    assert isinstance(err, str) and re.search(error, err, re.I), f"{name}: {err!r} !~ /{error}/"


# ---- the official Python SDK ----

HUMIOLIB_SCRIPT = r"""
import json, sys
from humiolib.HumioClient import HumioClient
url, repo, token, m = sys.argv[1:5]
client = HumioClient(base_url=url, repository=repo, user_token=token)
out = {"stream": list(client.streaming_query(m, start="1h"))}
job = client.create_queryjob(m + " | count()", start="1h")
out["count"] = job.poll().events
job = client.create_queryjob(m, start="1h")
polls = list(job.poll_until_done())
out["job_polls"] = len(polls)
out["job_events"] = [e for p in polls for e in p.events]
out["job_meta"] = polls[-1].metadata
live = client.create_queryjob(m, start="1h", is_live=True)
out["live_events"] = live.poll().events
print(json.dumps(out))
"""


def test_humiolib_static_query_and_query_jobs(api, tmp_path):
    py, why = humiolib_python()
    if py is None:
        pytest.skip(f"humiolib {HUMIOLIB_VERSION} could not be installed: {why}")
    m, lines = seeded(api, 25)
    script = tmp_path / "humiolib_client.py"
    script.write_text(HUMIOLIB_SCRIPT)
    res = subprocess.run([str(py), str(script), api.url, api.repo, api.api_token, m], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=120)
    assert res.returncode == 0, f"humiolib script failed:\n{res.stderr[-3000:]}"
    out = json.loads(res.stdout)
    assert sorted(e["@rawstring"] for e in out["stream"]) == sorted(lines)
    assert out["count"] == [{"_count": "25"}]
    assert out["job_polls"] == 1
    assert sorted(e["@rawstring"] for e in out["job_events"]) == sorted(lines)
    assert out["job_meta"]["eventCount"] == 25
    assert sorted(e["@rawstring"] for e in out["live_events"]) == sorted(lines)


# ---- the internal partial-result endpoint (what a coordinator asks a segment holder) ----

SECRET = "e2e-cluster-secret-0123456789"


def test_internal_partial_endpoint(server_factory):
    s = server_factory(name="internal", flush_age_ms=300, extra_args=["--cluster-secret", SECRET])
    m = big_dataset(s, 60000)
    segs = [x for x in requests.get(s.url + "/api/v1/cluster/segments", headers={"Authorization": f"Bearer {API_TOKEN}"},
                                    timeout=15).json()["segments"] if x["repo"] == REPO]
    assert segs
    now = int(time.time() * 1000)
    body = {"repo": REPO, "queryString": f"{m} | count()", "startMs": now - 3_600_000, "endMs": now + 60_000,
            "segments": [x["id"] for x in segs], "segmentFiles": [x["file"] for x in segs], "queryId": "q1"}
    auth = {"Authorization": f"Bearer {SECRET}", "Content-Type": "application/json"}
    url = s.url + "/internal/v1/query/partial"
    assert requests.post(url, data=json.dumps(body), headers={"Authorization": f"Bearer {API_TOKEN}"},
                         timeout=15).status_code == 401
    r = requests.post(url, data=json.dumps(body), headers=auth, timeout=30)
    assert r.status_code == 200, r.text[:300]
    assert r.headers["Content-Type"] == "application/octet-stream"
    assert r.content[:4] == b"SQPR" and "X-Sediment-Unreadable-Segments" not in r.headers
    # The old endpoint still answers matching events (a MatchSet).
    old = requests.post(s.url + "/internal/v1/query/segments", data=json.dumps(body), headers=auth, timeout=30)
    assert old.status_code == 200 and old.content[:4] == b"SQMS"
    # The coordinator's time left is the holder's limit.
    late = requests.post(url, data=json.dumps({**body, "timeoutMs": 1}), headers=auth, timeout=30)
    assert late.status_code == 408, late.text[:300]
    bad = requests.post(url, data=json.dumps({**body, "queryString": "x | count("}), headers=auth, timeout=30)
    assert bad.status_code == 400 and "position" in bad.json()["error"]
    c = requests.post(s.url + "/internal/v1/query/cancel", data=json.dumps({"queryId": "q1"}), headers=auth, timeout=15)
    assert c.status_code == 200 and c.json() == {"cancelled": 0}
    assert requests.post(s.url + "/internal/v1/query/cancel", data="{}", headers=auth, timeout=15).status_code == 400

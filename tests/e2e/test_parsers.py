"""Parsers at ingest (issue 18, item 1; parsers/README.md): built-in parsers chosen by token,
`type` and `sourcetype`; custom parsers over the API (PUT/GET/DELETE, list, test); an event a
parser fails on is kept with @error; humiolib's ingest_messages(parser="kv") extracts fields."""

from __future__ import annotations

import json
import random
import subprocess
import time
from datetime import datetime, timedelta, timezone

import pytest
import requests

from conftest import API_TOKEN, INGEST_TOKEN, REPO, SedimentServer, marker, wait_until
from harness import HUMIOLIB_VERSION, humiolib_python

ACCESS_TOKEN = "access-ingest-token-0123456789"
CUSTOM_TOKEN = "custom-ingest-token-0123456789"
RAW = "/api/v1/ingest/raw"
UNSTRUCTURED = "/api/v1/ingest/humio-unstructured"
HEC_RAW = "/services/collector/raw"
PARSERS = f"/api/v1/repositories/{REPO}/parsers"
EVERYTHING = {"start": 0}


@pytest.fixture(scope="module")
def srv(module_server_factory) -> SedimentServer:
    """The default token (no parser), one assigned to `accesslog`, one to the custom `app`."""
    return module_server_factory(
        name="parsers", flush_age_ms=300,
        ingest_tokens=[f"{REPO}:{INGEST_TOKEN}", f"{REPO}:{ACCESS_TOKEN}:accesslog",
                       f"{REPO}:{CUSTOM_TOKEN}:app"])


def api(s: SedimentServer, method: str, path: str, body=None, **kw) -> requests.Response:
    headers = {"Authorization": f"Bearer {API_TOKEN}"}
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
        headers["Content-Type"] = "application/json"
    return requests.request(method, s.url + path, data=body, headers=headers, timeout=15, **kw)


def everything(s: SedimentServer, q: str) -> list[dict]:
    return s.query(q, start=0, end=int(time.time() * 1000) + 3_600_000)


def wait_count(s: SedimentServer, q: str, want: int) -> None:
    wait_until(lambda: s.count(q) >= want, timeout=20, what=f"{q} reaches {want}")
    assert s.count(q) == want


def apache_log(n: int, m: str, seed: int = 2009) -> tuple[list[str], list[int]]:
    """`n` Apache combined lines from 2009 (the marker in each URL), and each line's time in ms."""
    rnd = random.Random(seed)
    start = datetime(2009, 7, 1, 12, 0, 0, tzinfo=timezone(timedelta(hours=-7)))
    lines, times = [], []
    for i in range(n):
        t = start + timedelta(seconds=37 * i)
        status = rnd.choice([200, 200, 200, 301, 404, 404, 500])
        size = "-" if status == 301 else str(rnd.randint(100, 9000))
        stamp = t.strftime("%d/%b/%Y:%H:%M:%S %z")
        lines.append(f'10.0.{i % 7}.{i % 250} - - [{stamp}] "GET /{m}/p{i}.html HTTP/1.1" {status} {size} '
                     f'"http://example.com/ref{i % 3}" "Mozilla/5.0 (X11; Linux x86_64) test/{i % 4}"')
        times.append(int(t.timestamp() * 1000))
    return lines, times


def test_accesslog_apache_file_status_and_timestamps(srv, tmp_path):
    m = marker("acc")
    lines, times = apache_log(300, m)
    path = tmp_path / "access.log"
    path.write_text("\n".join(lines) + "\n")
    awk = subprocess.run(["awk", "$9 == 404 { c++ } END { print c + 0 }", str(path)], stdout=subprocess.PIPE,
                         text=True, check=True, env={"LC_ALL": "C"})
    want404 = int(awk.stdout.strip())
    assert 0 < want404 < 300
    r = srv.ingest(RAW, path.read_bytes(), token=ACCESS_TOKEN)
    assert r.status_code == 200, r.text
    wait_count(srv, m, 300)
    assert srv.count(f"{m} status=404") == want404
    assert srv.count(f"{m} statuscode=404") == want404
    # @timestamp is each line's own time (2009), not the ingest time.
    rows = everything(srv, f"{m} | url=\"/{m}/p17.html\"")
    assert len(rows) == 1, rows
    row = rows[0]
    assert int(row["@timestamp"]) == times[17]
    assert row["method"] == "GET" and row["httpversion"] == "1.1" and row["client"] == "10.0.3.17"
    assert row["referrer"] == "http://example.com/ref2"
    assert row["useragent"] == "Mozilla/5.0 (X11; Linux x86_64) test/1"
    assert "@error" not in row
    in2009 = srv.query(f"{m} | count()", start=times[0], end=times[-1] + 1)
    assert in2009 == [{"_count": "300"}]


def test_raw_defaults_to_kv_and_type_and_sourcetype_choose(srv):
    m = marker("kv")
    assert srv.ingest(RAW, f"mk={m} user=alice status=503\nmk={m} plain line").status_code == 200
    wait_count(srv, f"mk={m}", 2)
    assert srv.count(f"mk={m} user=alice status=503") == 1
    # humio-unstructured: `type` names a parser (and stays the #type tag).
    line = f'10.1.1.1 - - [10/Oct/2000:13:55:36 -0700] "GET /{m} HTTP/1.0" 404 12'
    body = [{"type": "accesslog", "messages": [line]}, {"type": "nosuchparser", "messages": [f"k={m}x"]}]
    assert srv.ingest(UNSTRUCTURED, body).status_code == 200
    wait_count(srv, f"\"/{m}\" #type=accesslog status=404", 1)
    rows = everything(srv, f"\"/{m}\" #type=accesslog")
    assert int(rows[0]["@timestamp"]) == 971211336000
    # A type that names no parser: the default (kv) runs, #type is kept.
    wait_count(srv, f"#type=nosuchparser k={m}x", 1)
    # HEC raw: sourcetype names a parser.
    r = srv.ingest(HEC_RAW, line.replace(m, m + "hec"), scheme="Splunk", params={"sourcetype": "accesslog"})
    assert r.status_code == 200, r.text
    wait_count(srv, f"\"/{m}hec\" status=404 sourcetype=accesslog", 1)
    # humio-structured: stored as sent, unless the token has a parser (LogScale's further parsing).
    st = [{"events": [{"rawstring": line.replace(m, m + "st"), "attributes": {"k": "v"}}]}]
    assert srv.ingest("/api/v1/ingest/humio-structured", st).status_code == 200
    assert srv.ingest("/api/v1/ingest/humio-structured", st, token=ACCESS_TOKEN).status_code == 200
    wait_count(srv, f"\"/{m}st\" k=v", 2)
    assert srv.count(f"\"/{m}st\" status=404 k=v") == 1


def test_humiolib_ingest_messages_kv_extracts_fields(srv, tmp_path):
    py, why = humiolib_python()
    if py is None:
        pytest.skip(f"humiolib {HUMIOLIB_VERSION} could not be installed: {why}")
    m = marker("hl")
    script = tmp_path / "humiolib_ingest.py"
    script.write_text(
        "import sys\n"
        "from humiolib.HumioClient import HumioIngestClient\n"
        "url, token, m = sys.argv[1:4]\n"
        "c = HumioIngestClient(base_url=url, ingest_token=token)\n"
        "c.ingest_messages([f'mk={m} user=u{i} latency={i * 10}' for i in range(5)], parser='kv',\n"
        "                  fields={'origin': 'humiolib'})\n")
    res = subprocess.run([str(py), str(script), srv.url, INGEST_TOKEN, m], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    wait_count(srv, f"mk={m}", 5)
    assert srv.count(f"mk={m} #type=kv user=u3 latency=30 origin=humiolib") == 1
    rows = everything(srv, f"mk={m} latency > 15 | sort(latency, order=asc)")
    assert [r["user"] for r in rows] == ["u2", "u3", "u4"]


def test_custom_parser_over_the_api(srv):
    m = marker("cp")
    script = ('kvParse() | level != DEBUG | parseTimestamp("yyyy-MM-dd HH:mm:ss", field=ts, '
              'timezone="+02:00") | #env := env | drop([env])')
    # Refused: a bad pipeline (with its position), an aggregate (named), a built-in's name.
    bad = api(srv, "PUT", f"{PARSERS}/app", {"script": "kvParse() | regex("})
    assert bad.status_code == 400 and "at position" in bad.json()["error"], bad.text
    agg = api(srv, "PUT", f"{PARSERS}/app", {"script": "kvParse() | count()"})
    assert agg.status_code == 400 and "count()" in agg.json()["error"], agg.text
    assert api(srv, "PUT", f"{PARSERS}/kv", {"script": "kvParse()"}).status_code == 400
    assert api(srv, "PUT", f"{PARSERS}/big", {"script": 'x := "' + "a" * 70000 + '"'}).status_code == 413
    assert api(srv, "GET", f"{PARSERS}/app").status_code == 404
    # Stored, listed, read back.
    put = api(srv, "PUT", f"{PARSERS}/app", {"script": script, "tagFields": ["service"]})
    assert put.status_code == 200, put.text
    got = api(srv, "GET", f"{PARSERS}/app").json()
    assert got["script"] == script and got["tagFields"] == ["service"] and got["builtin"] is False
    listed = api(srv, "GET", PARSERS).json()
    assert [p["name"] for p in listed if not p["builtin"]] == ["app"]
    assert {"kv", "json", "accesslog", "syslog", "none"} <= {p["name"] for p in listed if p["builtin"]}
    # The test endpoint: the events the saved parser would produce, per line.
    lines = [f'ts="2024-03-01 10:00:00" level=INFO service=api env=prod mk={m}', f"level=DEBUG mk={m}"]
    t = api(srv, "POST", f"{PARSERS}/app/test", {"lines": lines})
    assert t.status_code == 200, t.text
    res = t.json()["results"]
    assert len(res) == 2 and res[1]["events"] == []
    ev = res[0]["events"][0]
    assert ev["@timestamp"] == 1709280000000 and ev["#service"] == "api" and ev["#env"] == "prod"
    assert ev["level"] == "INFO" and "env" not in ev and "service" not in ev
    # An unsaved script in the body, and text lines.
    t2 = api(srv, "POST", f"{PARSERS}/draft/test", {"script": "x := \"1\"", "lines": ["a"]}).json()
    assert t2["results"][0]["events"][0]["x"] == "1"
    t3 = api(srv, "POST", f"{PARSERS}/accesslog/test", "nope\n")
    assert t3.json()["results"][0]["events"][0]["@error"] == "true"
    assert api(srv, "POST", f"{PARSERS}/missing/test", {"lines": ["a"]}).status_code == 404
    # Used by the token assigned to it.
    body = "\n".join(lines + [f'ts="2024-03-01 11:30:00" level=WARN service=db env=dev mk={m}'])
    assert srv.ingest(RAW, body, token=CUSTOM_TOKEN).status_code == 200
    wait_count(srv, f"mk={m}", 2)
    assert srv.count(f"mk={m} level=DEBUG") == 0
    assert srv.count(f"mk={m} #service=api #env=prod level=INFO") == 1
    rows = everything(srv, f"mk={m} #service=db")
    assert len(rows) == 1 and int(rows[0]["@timestamp"]) == 1709285400000
    # Deleted: gone (and the token's events are then kept unparsed).
    assert api(srv, "DELETE", f"{PARSERS}/app").status_code == 204
    assert api(srv, "GET", f"{PARSERS}/app").status_code == 404
    assert api(srv, "DELETE", f"{PARSERS}/app").status_code == 404
    assert srv.ingest(RAW, f"level=DEBUG mk={m}z", token=CUSTOM_TOKEN).status_code == 200
    wait_count(srv, f"\"mk={m}z\"", 1)
    # API token required.
    r = requests.get(srv.url + PARSERS, headers={"Authorization": f"Bearer {INGEST_TOKEN}"}, timeout=15)
    assert r.status_code == 401


def test_parser_failure_never_loses_the_event(srv):
    m = marker("err")
    put = api(srv, "PUT", f"{PARSERS}/strict", {"script": 'kvParse() | parseTimestamp("yyyy-MM-dd", field=day, timezone=UTC)'})
    assert put.status_code == 200, put.text
    before = int(time.time() * 1000) - 1000
    body = [{"type": "strict", "messages": [f"day=2024-05-06 mk={m} n=1", f"day=not-a-date mk={m} n=2",
                                            f"mk={m} n=3"]},
            {"type": "accesslog", "messages": [f"not an access line mk={m} n=4"]},
            {"type": "syslog", "messages": [f"<999>broken mk={m} n=5"]}]
    assert srv.ingest(UNSTRUCTURED, body).status_code == 200
    wait_count(srv, f"\"mk={m}\"", 5)
    rows = {r["@rawstring"].split("n=")[-1]: r for r in everything(srv, f"\"mk={m}\"")}
    assert set(rows) == {"1", "2", "3", "4", "5"}
    assert int(rows["1"]["@timestamp"]) == 1714953600000 and "@error" not in rows["1"]
    for n in ("2", "3", "4", "5"):
        assert rows[n]["@error"] == "true", rows[n]
        assert rows[n]["@error_msg"], rows[n]
        assert int(rows[n]["@timestamp"]) >= before  # the ingest time
    assert srv.count(f"\"mk={m}\" @error=true") == 4

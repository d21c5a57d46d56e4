"""Elastic bulk ingest (/_bulk, /{index}/_bulk, /api/v1/ingest/elastic-bulk), the handshake endpoints
Elastic clients call first, and LogScale's /api/v1/ingest/json: with raw requests, the `elasticsearch`
Python client's helpers.bulk and syslog-ng's elasticsearch-http() destination, each delivering a
log file whose every line must be searchable exactly once."""

from __future__ import annotations

import base64
import collections
import gzip
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import requests

from conftest import INGEST_TOKEN, REPO, SedimentServer, marker, wait_until
from harness import ELASTICSEARCH_VERSION, elasticsearch_python


@pytest.fixture(scope="module")
def srv(module_server_factory) -> SedimentServer:
    return module_server_factory(name="elastic")


def basic(token: str, user: str = "elastic") -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{token}".encode()).decode()}


def ndjson(*objs) -> str:
    return "".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objs)


def all_range() -> tuple[int, int]:
    return 0, int(time.time() * 1000) + 3_600_000


def raws(srv: SedimentServer, q: str, n: int, timeout: float = 30) -> collections.Counter:
    """The @rawstrings `q` finds once it finds at least n events, after the digest settled."""
    start, end = all_range()
    wait_until(lambda: srv.count(q) >= n, timeout=timeout, what=f"{n} events for {q!r}")
    time.sleep(0.5)  # anything delivered twice would show up by now as well
    return collections.Counter(r["@rawstring"] for r in srv.query(q, start, end))


def apache_log(path: Path, n: int, tag: str) -> list[str]:
    """A combined-format access log: quotes, backslashes, tabs, UTF-8 and long lines, as real ones have."""
    agents = ['Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36',
              'curl/7.88.1', 'Wget/1.21.3 (linux-gnu)', 'Bot "quoted" \\ backslash', 'Ünïcödé-Agent/1.0 ☃']
    lines = []
    for i in range(n):
        day = 1 + i % 28
        path_ = f"/{tag}/item/{i}?q=a%20b&x=\"y\"" if i % 7 == 0 else f"/{tag}/page/{i}.html"
        lines.append(f'10.0.{i % 256}.{(i * 7) % 256} - user{i % 5} [{day:02d}/Oct/2009:13:{i % 60:02d}:36 -0700] '
                     f'"GET {path_} HTTP/1.1" {[200, 404, 500, 301][i % 4]} {i * 13 % 5000} '
                     f'"http://example.com/ref\\{i}" "{agents[i % len(agents)]}"' + ("\tpadding" * (i % 3)))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lines


# ---- bulk with raw requests ----

def test_bulk_items_fields_and_timestamp(srv):
    m = marker()
    body = ndjson({"index": {"_index": "web", "_id": f"{m}-1"}},
                  {"@timestamp": "2009-10-10T13:55:36.000Z", "message": f"{m} first", "http": {"status": 404}},
                  {"create": {"_index": "web"}},
                  {"message": f"{m} second", "level": "info"})
    r = srv.ingest("/_bulk", body, token=None, headers={**basic(srv.ingest_token),
                                                         "Content-Type": "application/x-ndjson"})
    assert r.status_code == 200, r.text
    assert r.headers["X-Elastic-Product"] == "Elasticsearch"
    out = r.json()
    assert out["errors"] is False and isinstance(out["took"], int)
    assert [list(i) for i in out["items"]] == [["index"], ["create"]]
    first, second = out["items"][0]["index"], out["items"][1]["create"]
    assert first["_id"] == f"{m}-1" and first["_index"] == "web"
    for item in (first, second):
        assert item["status"] == 201 and item["result"] == "created", item
    assert len(second["_id"]) == 20
    assert raws(srv, m, 2) == collections.Counter([f"{m} first", f"{m} second"])
    start, end = all_range()
    rows = {row["@rawstring"]: row for row in srv.query(m, start, end)}
    one = rows[f"{m} first"]
    assert one["@timestamp"] == 1255182936000  # the document's @timestamp
    assert one["http.status"] == "404" and one["_index"] == "web" and one["_id"] == f"{m}-1"
    assert one["message"] == f"{m} first"
    assert rows[f"{m} second"]["level"] == "info"
    assert abs(rows[f"{m} second"]["@timestamp"] - time.time() * 1000) < 120_000  # none given: now


def test_bulk_bad_lines_in_the_middle(srv):
    """Every refused document gets Elastic's per-item error; the good ones are stored exactly once."""
    m = marker()
    body = (ndjson({"index": {"_index": "i"}}, {"message": f"{m} good 1"})
            + '{"index":{"_index":"i","_id":"broken"}}\n{"message": "unterminated\n'
            + ndjson({"index": {"_index": "i"}}, [1, 2],
                     {"index": {"_index": "i"}}, {"@timestamp": "not a date", "message": f"{m} bad time"},
                     {"delete": {"_index": "i", "_id": "x"}},
                     {"update": {"_index": "i", "_id": "y"}}, {"doc": {"a": 1}},
                     {"create": {"_index": "i"}}, {"message": f"{m} good 2"}))
    r = srv.ingest("/_bulk", body, token=None, headers=basic(srv.ingest_token))
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["errors"] is True
    items = [next(iter(i.items())) for i in out["items"]]
    assert [a for a, _ in items] == ["index", "index", "index", "index", "delete", "update", "create"]
    assert [x["status"] for _, x in items] == [201, 400, 400, 400, 400, 400, 201]
    broken = items[1][1]
    assert broken["_id"] == "broken" and broken["_index"] == "i"
    assert broken["error"]["type"] == "mapper_parsing_exception"
    assert broken["error"]["reason"] == "failed to parse"
    assert broken["error"]["caused_by"]["type"] == "json_parse_exception"
    assert items[2][1]["error"]["type"] == "mapper_parsing_exception"
    assert items[3][1]["error"]["type"] == "mapper_parsing_exception"
    assert "[@timestamp]" in items[3][1]["error"]["reason"]
    assert items[4][1]["error"]["type"] == "illegal_argument_exception"
    assert items[5][1]["error"]["type"] == "illegal_argument_exception"
    for _, x in items[1:6]:
        assert "result" not in x
    assert raws(srv, m, 2) == collections.Counter([f"{m} good 1", f"{m} good 2"])


@pytest.mark.parametrize("body", [
    "this is not ndjson\n",
    ndjson({"index": {}}, {"a": 1}, {"frobnicate": {}}, {"a": 2}),
    ndjson({"index": {}}),
])
def test_bulk_body_that_is_not_bulk_appends_nothing(srv, body):
    m = marker()
    body = body.replace('"a": 1', f'"a": 1, "m": "{m}"')
    log_end = srv.log_end_sum()
    r = srv.ingest("/_bulk", body, token=None, headers=basic(srv.ingest_token))
    assert r.status_code == 400, r.text
    assert r.headers["X-Elastic-Product"] == "Elasticsearch"
    err = r.json()
    assert err["status"] == 400 and err["error"]["type"] == "illegal_argument_exception"
    assert err["error"]["root_cause"][0]["type"] == "illegal_argument_exception"
    empty = srv.ingest("/_bulk", "\n", token=None, headers=basic(srv.ingest_token))
    assert empty.status_code == 400
    assert empty.json()["error"]["type"] == "action_request_validation_exception"
    assert srv.log_end_sum() == log_end  # nothing reached the commit log
    time.sleep(0.5)
    assert srv.count(m) == 0


def test_bulk_paths_and_credentials(srv):
    m = marker()
    doc = lambda n: ndjson({"index": {}}, {"message": f"{m} {n}"})  # noqa: E731
    # sediment's own scheme on LogScale's path, ApiKey (as given and as base64 id:key), PUT, {index}.
    assert srv.ingest("/api/v1/ingest/elastic-bulk", doc("bearer")).status_code == 200
    r = srv.ingest("/logs-app/_bulk", doc("apikey"), token=srv.ingest_token, scheme="ApiKey")
    assert r.status_code == 200 and r.json()["items"][0]["index"]["_index"] == "logs-app"
    encoded = base64.b64encode(f"some-id:{srv.ingest_token}".encode()).decode()
    assert srv.ingest("/_bulk", doc("apikey-encoded"), token=encoded, scheme="ApiKey").status_code == 200
    assert srv.ingest("/_bulk", doc("put"), token=None, method="PUT",
                      headers=basic(srv.ingest_token, user="")).status_code == 200
    # Refusals in Elastic's shape.
    for headers in ({}, basic("wrong-token"), {"Authorization": "ApiKey nope"}):
        r = srv.ingest("/_bulk", doc("refused"), token=None, headers=headers)
        assert r.status_code == 401, r.text
        assert r.json()["error"]["type"] == "security_exception"
        assert r.headers["X-Elastic-Product"] == "Elasticsearch"
        assert "Basic" in r.headers["WWW-Authenticate"]
    # Compressed bodies, as Beats send them by default.
    r = srv.ingest("/_bulk", gzip.compress(doc("gzip").encode()), token=None,
                   headers={**basic(srv.ingest_token), "Content-Encoding": "gzip"})
    assert r.status_code == 200 and r.json()["errors"] is False, r.text
    got = raws(srv, m, 5)
    assert got == collections.Counter([f"{m} bearer", f"{m} apikey", f"{m} apikey-encoded", f"{m} put",
                                       f"{m} gzip"])


# ---- the handshake ----

def test_root_answers_browsers_and_elastic_clients(srv):
    plain = requests.get(srv.url + "/", timeout=10)
    assert plain.status_code == 200 and plain.headers["Content-Type"].startswith("text/plain")
    assert "POST|PUT /_bulk" in plain.text and "X-Elastic-Product" not in plain.headers
    for headers in (basic(srv.ingest_token),
                    {"Accept": "application/vnd.elasticsearch+json; compatible-with=9"},
                    {"User-Agent": "Elastic-Filebeat/8.12.2 (linux; amd64; abc; 2024-02-01)"}):
        r = requests.get(srv.url + "/", headers=headers, timeout=10)
        assert r.status_code == 200, (headers, r.text)
        assert r.headers["X-Elastic-Product"] == "Elasticsearch"
        info = r.json()
        assert info["tagline"] == "You Know, for Search" and info["version"]["number"]
    compat = requests.get(srv.url + "/", headers={"Accept": "application/vnd.elasticsearch+json; compatible-with=9"},
                          timeout=10)
    assert compat.headers["Content-Type"] == "application/vnd.elasticsearch+json;compatible-with=9"
    assert compat.json()["version"]["number"].startswith("9.")
    beat = requests.get(srv.url + "/", headers={"User-Agent": "Elastic-Filebeat/8.12.2 (linux; amd64)"}, timeout=10)
    assert beat.json()["version"]["number"] == "8.12.2"  # a Beat refuses an older Elasticsearch
    bad = requests.get(srv.url + "/", headers=basic("wrong"), timeout=10)
    assert bad.status_code == 401 and bad.json()["error"]["type"] == "security_exception"
    head = requests.head(srv.url + "/", headers=basic(srv.ingest_token), timeout=10)
    assert head.status_code == 200 and head.headers["X-Elastic-Product"] == "Elasticsearch"


def test_handshake_endpoints(srv):
    h = basic(srv.ingest_token)
    lic = requests.get(srv.url + "/_license", headers=h, timeout=10)
    assert lic.status_code == 200 and lic.json()["license"]["status"] == "active"
    assert requests.get(srv.url + "/_xpack", headers=h, timeout=10).json()["license"]["type"] == "basic"
    health = requests.get(srv.url + "/_cluster/health", headers=h, timeout=10)
    assert health.status_code == 200 and health.json()["status"] == "green"
    for kind in ("_index_template", "_component_template", "_template", "_ilm/policy", "_ingest/pipeline",
                 "_data_stream"):
        url = f"{srv.url}/{kind}/filebeat-8.12.2"
        assert requests.head(url, headers=h, timeout=10).status_code == 200, kind
        got = requests.get(url, headers=h, timeout=10)
        assert got.status_code == 200 and got.headers["X-Elastic-Product"] == "Elasticsearch", kind
        assert got.json(), kind
        put = requests.put(url, headers=h, json={"x": 1}, timeout=10)
        assert put.status_code == 200 and put.json() == {"acknowledged": True}, kind
    assert requests.get(srv.url + "/_license", timeout=10).status_code == 401


# ---- LogScale's /api/v1/ingest/json ----

def test_ingest_json_object_and_array(srv):
    m = marker()
    r = srv.ingest("/api/v1/ingest/json", {"msg": f"{m} one", "n": {"a": 1}})
    assert r.status_code == 200, r.text
    r = srv.ingest("/api/v1/ingest/json", [{"msg": f"{m} two"}, {"msg": f"{m} three", "list": [1, "x"]}])
    assert r.status_code == 200, r.text
    start, end = all_range()
    wait_until(lambda: srv.count(m) >= 3, timeout=30, what="3 json events")
    rows = {row["msg"]: row for row in srv.query(m, start, end)}
    assert sorted(rows) == [f"{m} one", f"{m} three", f"{m} two"]
    assert json.loads(rows[f"{m} one"]["@rawstring"]) == {"msg": f"{m} one", "n": {"a": 1}}
    assert rows[f"{m} one"]["n.a"] == "1" and rows[f"{m} three"]["list[1]"] == "x"
    for body in ('"just a string"', "[1, 2]", '{"broken": '):
        bad = srv.ingest("/api/v1/ingest/json", body)
        assert bad.status_code == 400, (body, bad.text)


# ---- real clients ----

ES_CLIENT_SCRIPT = r"""
import json, sys
from elasticsearch import Elasticsearch, helpers
url, token, path, index = sys.argv[1:5]
es = Elasticsearch(url, basic_auth=("any-user", token), request_timeout=60)
out = {"ping": es.ping(), "version": es.info()["version"]["number"]}
with open(path, encoding="utf-8") as f:
    lines = f.read().splitlines()
actions = ({"_index": index, "_source": {"message": line, "line": i}} for i, line in enumerate(lines))
out["ok"], out["errors"] = helpers.bulk(es, actions, chunk_size=400)
print(json.dumps(out))
"""


def test_elasticsearch_client_helpers_bulk(srv, tmp_path):
    py, why = elasticsearch_python()
    if py is None:
        pytest.skip(f"elasticsearch {ELASTICSEARCH_VERSION} could not be installed: {why}")
    m = marker("es")
    log = tmp_path / "access.log"
    lines = apache_log(log, 2500, m)
    script = tmp_path / "es_client.py"
    script.write_text(ES_CLIENT_SCRIPT)
    res = subprocess.run([str(py), str(script), srv.url, srv.ingest_token, str(log), m], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=180)
    assert res.returncode == 0, f"elasticsearch client failed:\n{res.stderr[-3000:]}"
    out = json.loads(res.stdout)
    assert out["ping"] is True and out["version"]
    assert out["ok"] == len(lines) and out["errors"] == []
    assert raws(srv, f"_index={m}", len(lines), timeout=60) == collections.Counter(lines)


SYSLOG_NG_CONF = """@version: 3.38
@include "scl.conf"
options {{ stats_freq(0); }};
source s_file {{ file("{log}" flags(no-parse) follow-freq(0.1)); }};
destination d_es {{
  elasticsearch-http(url("{url}/_bulk") index("{index}") type("") user("shipper") password("{token}")
    template("$(format-json --scope none message=$MSG)") batch-lines(200) batch-timeout(200) workers(1));
}};
log {{ source(s_file); destination(d_es); }};
"""


def test_syslog_ng_elasticsearch_http(srv, tmp_path):
    binary = shutil.which("syslog-ng") or ("/usr/sbin/syslog-ng" if os.path.exists("/usr/sbin/syslog-ng") else None)
    if binary is None:
        pytest.skip("syslog-ng is not installed (scripts/install-deps.sh --test installs syslog-ng-core, "
                    "syslog-ng-mod-http and syslog-ng-scl)")
    if not Path("/usr/share/syslog-ng/include/scl/elasticsearch/elastic-http.conf").exists():
        pytest.skip("syslog-ng's elasticsearch-http() is not installed (syslog-ng-scl, syslog-ng-mod-http)")
    m = marker("sng")
    log = tmp_path / "access.log"
    lines = apache_log(log, 3000, m)
    conf = tmp_path / "syslog-ng.conf"
    conf.write_text(SYSLOG_NG_CONF.format(log=log, url=srv.url, index=m, token=srv.ingest_token))
    syntax = subprocess.run([binary, "--syntax-only", "-f", str(conf)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=60)
    assert syntax.returncode == 0, syntax.stdout
    proc = subprocess.Popen([binary, "-F", "-e", "--no-caps", "-f", str(conf), "-R", str(tmp_path / "persist"),
                             "-c", str(tmp_path / "ctl"), "-p", str(tmp_path / "pid")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        try:
            got = raws(srv, f"_index={m}", len(lines), timeout=90)
        except AssertionError:
            proc.send_signal(signal.SIGTERM)
            output = proc.communicate(timeout=20)[0].decode(errors="replace")
            raise AssertionError(f"syslog-ng did not deliver every line; its output:\n{output[-3000:]}")
        assert got == collections.Counter(lines)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
    # Nothing more arrived while it stopped.
    assert srv.count(f"_index={m}") == len(lines)


KV_TOKEN = "elastic-kv-ingest-token-0123456789"

ES_KV_SCRIPT = r"""
import json, sys
from elasticsearch import Elasticsearch, helpers
url, token, index, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
es = Elasticsearch(url, basic_auth=("any-user", token), request_timeout=60)
actions = ({"_index": index, "_source": {"message": f"user=u{i % 3} seq={i}"}} for i in range(n))
ok, errors = helpers.bulk(es, actions, chunk_size=100)
print(json.dumps({"ok": ok, "errors": errors}))
"""


@pytest.fixture(scope="module")
def kv_srv(module_server_factory) -> SedimentServer:
    """A token assigned to the kv parser: the parser rebuilds the request's events."""
    return module_server_factory(name="elastic-kv",
                                 ingest_tokens=[f"{REPO}:{INGEST_TOKEN}", f"{REPO}:{KV_TOKEN}:kv"])


def test_bulk_through_a_token_parser_answers_every_action(kv_srv, tmp_path):
    """A token parser changes the events, not the answer: one item per action, so the client
    counts every document as indexed (an empty `items` made helpers.bulk report 0 of them)."""
    py, why = elasticsearch_python()
    if py is None:
        pytest.skip(f"elasticsearch {ELASTICSEARCH_VERSION} could not be installed: {why}")
    m = marker("eskv")
    n = 250
    script = tmp_path / "es_kv.py"
    script.write_text(ES_KV_SCRIPT)
    res = subprocess.run([str(py), str(script), kv_srv.url, KV_TOKEN, m, str(n)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=180)
    assert res.returncode == 0, f"elasticsearch client failed:\n{res.stderr[-3000:]}"
    out = json.loads(res.stdout)
    assert out == {"ok": n, "errors": []}, out
    # The parser ran: kv's fields are there.
    wait_until(lambda: kv_srv.count(f"_index={m}") >= n, timeout=60, what=f"{n} events")
    assert kv_srv.count(f"_index={m} user=u1") == len(range(1, n, 3))
    # Raw requests too: one item per action, the failed one with its error.
    body = ndjson({"index": {"_index": m}}, {"message": "user=raw"}, {"index": {"_index": m}}, "{not json",
                  {"delete": {"_index": m, "_id": "x"}})
    r = requests.post(kv_srv.url + "/_bulk", data=body, headers={**basic(KV_TOKEN),
                      "Content-Type": "application/x-ndjson"}, timeout=30)
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    assert [next(iter(i)) for i in items] == ["index", "index", "delete"], items
    assert items[0]["index"]["status"] == 201 and items[1]["index"]["status"] == 400, items

"""Saved queries called from a query (issue 17, syntax: `$name()` / `$"name"(param=value)`):
the query and query-job APIs expand a call into the repository's saved search (its parameters
bound to the call's arguments, then the request's "arguments", then their defaults), saved
searches may call saved searches, and a saved search that would lead back to itself is refused
when it is stored. Over HTTP against a real server (query/query.h ExpandSavedQueries)."""

from __future__ import annotations

import json
import time

import requests

from conftest import API_TOKEN, REPO, SedimentServer, wait_until

SAVED = f"/api/v1/repositories/{REPO}/savedsearches"


def api(s: SedimentServer, method: str, path: str, body=None) -> requests.Response:
    headers = {"Authorization": f"Bearer {API_TOKEN}", "Content-Type": "application/json"}
    data = None if body is None else json.dumps(body)
    return requests.request(method, s.url + path, data=data, headers=headers, timeout=15)


def statuses(rows: list[dict]) -> list[str]:
    return sorted(r["status"] for r in rows)


def test_saved_query_calls(server: SedimentServer):
    s = server
    events = [{"timestamp": int(time.time() * 1000) - 1000 + i, "attributes": {"status": st},
               "rawstring": f"status={st}"} for i, st in enumerate(["200", "404", "500", "503"])]
    r = s.ingest("/api/v1/ingest/humio-structured", [{"tags": {"src": "saved"}, "events": events}])
    assert r.status_code == 200, r.text
    wait_until(lambda: s.count("#src=saved") == 4, timeout=30, what="events searchable")

    assert api(s, "POST", SAVED, {"name": "errors", "queryString": "status >= ?{min=500}"}).status_code == 201
    assert api(s, "POST", SAVED, {"name": "error-count",
                                  "queryString": "$errors(min=?floor) | count() // per window"}).status_code == 201

    # In place, with the default, a call argument, and a request argument.
    assert statuses(s.query("#src=saved | $errors() | table([status])")) == ["500", "503"]
    assert statuses(s.query("#src=saved | $errors(min=404) | table([status])")) == ["404", "500", "503"]
    body = {"queryString": '#src=saved | $"error-count"()', "start": "1d", "arguments": {"floor": "404"}}
    r = s.query_raw("", body=json.dumps(body))
    assert r.status_code == 200, r.text
    assert [int(row["_count"]) for row in r.json()] == [3]

    # The query-job API expands too.
    job = requests.post(f"{s.url}/api/v1/repositories/{REPO}/queryjobs",
                        headers={"Authorization": f"Bearer {API_TOKEN}", "Content-Type": "application/json"},
                        data=json.dumps({"queryString": "#src=saved | $errors() | count()", "start": "1d"}),
                        timeout=15)
    assert job.status_code == 200, job.text
    job_id = job.json()["id"]

    def done():
        p = requests.get(f"{s.url}/api/v1/repositories/{REPO}/queryjobs/{job_id}",
                         headers={"Authorization": f"Bearer {API_TOKEN}"}, timeout=15)
        assert p.status_code == 200, p.text
        return p.json() if p.json().get("done") else None
    poll = wait_until(done, timeout=30, what="query job done")
    assert [int(e["_count"]) for e in poll["events"]] == [2]

    # Errors name the call.
    r = s.query_raw("#src=saved | $nope()")
    assert r.status_code == 400 and "unknown saved query 'nope'" in r.json()["error"], r.text
    r = s.query_raw('#src=saved | $"error-count"()')
    assert r.status_code == 400 and "in saved query 'error-count'" in r.text and "?floor" in r.text, r.text

    # A saved search that would call itself (errors -> error-count -> errors) is refused when stored.
    r = api(s, "PUT", f"{SAVED}/errors", {"queryString": '$"error-count"(floor=1)'})
    assert r.status_code == 400 and "calls itself" in r.text, r.text
    assert statuses(s.query("#src=saved | $errors() | table([status])")) == ["500", "503"]

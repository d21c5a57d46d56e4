"""Saved searches, scheduled searches and alerts (issue 20, item 2; alerts/README.md): the REST
routes and the CLI, and an alert on `status=500 | count()` with a threshold > 3 every 5 s that
fires exactly once per window with more than three 500s, into a webhook receiver started here;
the body carries the firing id."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
import requests

from alert_receiver import WebhookReceiver
from conftest import API_TOKEN, REPO, SedimentServer, wait_until
from harness import clean_env, sediment_bin

SAVED = f"/api/v1/repositories/{REPO}/savedsearches"
ALERTS = f"/api/v1/repositories/{REPO}/alerts"
EVERY_MS = 5000


def api(s: SedimentServer, method: str, path: str, body=None) -> requests.Response:
    headers = {"Authorization": f"Bearer {API_TOKEN}"}
    data = None
    if body is not None:
        data = body if isinstance(body, str) else json.dumps(body)
        headers["Content-Type"] = "application/json"
    return requests.request(method, s.url + path, data=data, headers=headers, timeout=15)


@pytest.fixture
def receiver():
    r = WebhookReceiver()
    yield r
    r.close()


def send_500s(s: SedimentServer, counts: dict[int, int], window_ms: int = EVERY_MS) -> None:
    """`counts[end]` events status=500 inside the window ending at `end` (and a 200 in each, so
    a quiet window still has events), in one request."""
    events = []
    for end, n in counts.items():
        start = end - window_ms
        for i in range(n):
            events.append({"timestamp": start + 100 + i * 10,
                           "attributes": {"status": "500"}, "rawstring": f"status=500 n={i}"})
        events.append({"timestamp": start + 50, "attributes": {"status": "200"},
                       "rawstring": "status=200"})
    r = s.ingest("/api/v1/ingest/humio-structured", [{"tags": {"src": "alerts"}, "events": events}])
    assert r.status_code == 200, r.text


def test_saved_searches_rest_and_cli(server: SedimentServer):
    s = server
    assert api(s, "GET", SAVED).json() == []
    r = api(s, "POST", SAVED, {"name": "errors", "queryString": "status=500", "start": "1h"})
    assert r.status_code == 201, r.text
    assert r.json() == {"name": "errors", "queryString": "status=500", "start": "1h", "end": ""}
    assert api(s, "POST", SAVED, {"name": "errors", "queryString": "x"}).status_code == 409
    r = api(s, "PUT", SAVED + "/errors", {"queryString": "status=404 | count()", "start": "2h"})
    assert r.status_code == 200, r.text
    assert api(s, "GET", SAVED + "/errors").json()["queryString"] == "status=404 | count()"
    # Clear errors: a query that does not parse, a bad time, a bad name, an unknown repository.
    bad = api(s, "POST", SAVED, {"name": "b", "queryString": "count("})
    assert bad.status_code == 400 and "error" in bad.json()
    assert api(s, "POST", SAVED, {"name": "b", "queryString": "x", "start": "yesterday-ish"}).status_code == 400
    assert api(s, "POST", SAVED, {"name": "a/b", "queryString": "x"}).status_code in (400, 404)
    assert api(s, "GET", "/api/v1/repositories/nope/savedsearches").status_code == 404
    assert api(s, "DELETE", SAVED + "/errors").status_code == 204
    assert api(s, "GET", SAVED + "/errors").status_code == 404

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sediment_bin(), *args, "--url", s.url, "--token", API_TOKEN,
                               "--repo", REPO], capture_output=True, text=True, timeout=30,
                              env=clean_env())

    p = cli("savedsearches", "create", "slow", "--query", "duration>1000", "--start", "15m")
    assert p.returncode == 0, p.stderr
    p = cli("savedsearches", "list")
    assert p.returncode == 0 and json.loads(p.stdout)[0]["name"] == "slow"
    p = cli("alerts", "create", "cli-alert", "--query", "status=500 | count()", "--every", "1m",
            "--threshold", "_count>3", "--webhook", "http://127.0.0.1:9/hook", "--log")
    assert p.returncode == 0, p.stderr
    created = json.loads(p.stdout)
    assert created["threshold"] == {"field": "_count", "op": ">", "value": 3}
    assert [a["type"] for a in created["actions"]] == ["webhook", "log"]
    assert created["everyMs"] == 60000 and created["windowMs"] == 60000
    p = cli("alerts", "list")
    assert p.returncode == 0 and [a["name"] for a in json.loads(p.stdout)] == ["cli-alert"]
    p = cli("alerts", "create", "x", "--query", "a", "--threshold", "nonsense")
    assert p.returncode == 1 and "--threshold" in p.stderr
    p = cli("alerts", "delete", "cli-alert")
    assert p.returncode == 0, p.stderr
    p = cli("alerts", "get", "cli-alert")
    assert p.returncode == 1 and "404" in p.stderr
    p = cli("savedsearches", "delete", "slow")
    assert p.returncode == 0, p.stderr


def test_alert_definitions_are_checked(server: SedimentServer):
    s = server
    ok = {"name": "a", "queryString": "status=500 | count()", "every": "5s",
          "actions": [{"type": "webhook", "url": "http://127.0.0.1:9/x"}]}
    for change, word in [({"every": None}, "every"), ({"every": "0s"}, "every"),
                         ({"every": "soon"}, "every"),
                         ({"queryString": "count("}, ""),
                         ({"threshold": {"field": "_count", "op": "~", "value": 3}}, "op"),
                         ({"threshold": {"field": "_count", "value": "three"}}, "value"),
                         ({"actions": [{"type": "webhook", "url": "ftp://x"}]}, "url"),
                         ({"actions": [{"type": "email"}]}, "type")]:
        body = {**ok, **change}
        r = api(s, "POST", ALERTS, body)
        assert r.status_code == 400, (change, r.text)
        assert word in r.json()["error"], (change, r.text)
    r = api(s, "POST", ALERTS, ok)
    assert r.status_code == 201, r.text
    assert r.json()["id"] >= 1 and r.json()["windowMs"] == 5000
    assert api(s, "POST", ALERTS, ok).status_code == 409
    assert api(s, "GET", ALERTS + "/nope/firings").status_code == 404
    assert api(s, "DELETE", ALERTS + "/a").status_code == 204
    assert api(s, "DELETE", ALERTS + "/a").status_code == 404


def test_alert_routes_need_read_to_list_and_manage_to_change(server: SedimentServer):
    """api/README.md "Permissions": GET needs `read` on the repository, POST/PUT/DELETE `manage`."""
    s = server
    ok = {"name": "p", "queryString": "status=500 | count()", "every": "5s",
          "actions": [{"type": "log"}]}
    assert api(s, "POST", ALERTS, ok).status_code == 201
    assert api(s, "PUT", SAVED + "/p", {"queryString": "status=500", "start": "1h"}).status_code in (200, 201)

    def token(name: str, perms: list[str]) -> str:
        r = api(s, "POST", "/api/v1/tokens", {"name": name, "admin": False, "repositories": {REPO: perms}})
        assert r.status_code == 201, r.text
        return r.json()["token"]

    def call(tok: str, method: str, path: str, body=None) -> requests.Response:
        h = {"Authorization": f"Bearer {tok}", "Content-Type": "application/json"}
        return requests.request(method, s.url + path, headers=h, timeout=15,
                                data=None if body is None else json.dumps(body))

    reader, manager = token("alert-reader", ["read"]), token("alert-manager", ["manage"])
    for path in [ALERTS, ALERTS + "/p", ALERTS + "/p/firings", SAVED, SAVED + "/p"]:
        r = call(reader, "GET", path)
        assert r.status_code == 200, f"{path}: {r.status_code} {r.text}"
        r = call(manager, "GET", path)
        assert r.status_code == 403 and "read" in r.json()["error"], f"{path}: {r.status_code} {r.text}"
    for method, path, body in [("POST", ALERTS, {**ok, "name": "q"}), ("PUT", ALERTS + "/p", ok),
                               ("DELETE", ALERTS + "/p", None),
                               ("POST", SAVED, {"name": "q", "queryString": "x", "start": "1h"}),
                               ("DELETE", SAVED + "/p", None)]:
        r = call(reader, method, path, body)
        assert r.status_code == 403 and "manage" in r.json()["error"], f"{method} {path}: {r.text}"
    assert call(manager, "PUT", ALERTS + "/p", {**ok, "every": "10s"}).status_code == 200
    assert call(manager, "DELETE", SAVED + "/p").status_code == 204
    assert call(manager, "DELETE", ALERTS + "/p").status_code == 204
    assert call("no-such-token", "GET", ALERTS).status_code == 401


def test_alert_fires_once_per_window_above_the_threshold(server: SedimentServer, receiver):
    s = server
    template = ('{"alert": "{alert_name}", "firing_id": "{firing_id}", "start": {window_start}, '
                '"end": {window_end}, "rows": {result_count}, "results": {results}}')
    r = api(s, "POST", ALERTS, {
        "name": "many-500", "queryString": "status=500 | count()", "every": "5s", "window": "5s",
        "delay": "2s", "threshold": {"field": "_count", "op": ">", "value": 3},
        "actions": [{"type": "webhook", "url": receiver.url + "/hook",
                     "headers": {"X-Team": "ops"}, "bodyTemplate": template},
                    {"type": "log"}]})
    assert r.status_code == 201, r.text
    alert = r.json()
    first_end = alert["nextWindow"]["end"]
    # Six windows from the first (which may end right away: quiet whatever arrives in time):
    # 1, 5, 2 (quiet), 4, 3 (quiet: not above 3), 7 500s.
    ends = [first_end + k * EVERY_MS for k in range(6)]
    counts = dict(zip(ends, [1, 5, 2, 4, 3, 7]))
    send_500s(s, counts)
    want = {f"{alert['id']}-{end}": n for end, n in counts.items() if n > 3}
    last_due_s = (ends[-1] + 1000) / 1000
    wait_until(lambda: time.time() > last_due_s and api(s, "GET", ALERTS + "/many-500").json()[
        "doneThroughMs"] >= ends[-1], timeout=max(10.0, last_due_s - time.time() + 15),
        interval=0.2, what="every window done")
    got = receiver.firing_ids("/hook")
    print(f"alert figures: windows={len(ends)} fired={dict(got)} want={sorted(want)}")
    assert got == {fid: 1 for fid in want}, got  # exactly once per firing window, none else
    for body in receiver.bodies("/hook"):
        assert body["alert"] == "many-500"
        assert body["end"] - body["start"] == EVERY_MS
        assert body["firing_id"] == f"{alert['id']}-{body['end']}"
        assert body["rows"] == 1 and body["results"] == [{"_count": want[body["firing_id"]]}]
    assert all(h.get("X-Team") == "ops" for _, _, h, _ in receiver.received)
    firings = api(s, "GET", ALERTS + "/many-500/firings").json()
    assert sorted(f["firingId"] for f in firings) == sorted(want)
    assert all(f["status"] == "fired" and f["attempts"] == 1 for f in firings)
    assert f"firing {alert['id']}-{ends[1]}" in s.log_text()  # the log-line action


def test_webhook_is_retried_with_the_same_firing_id(server: SedimentServer, receiver):
    s = server
    receiver.fail_next = 2
    r = api(s, "POST", ALERTS, {
        "name": "retry", "queryString": "status=500", "every": "2s", "delay": "1s",
        "actions": [{"type": "webhook", "url": receiver.url + "/retry"}]})
    assert r.status_code == 201, r.text
    alert = r.json()
    end = alert["nextWindow"]["end"]
    send_500s(s, {end: 1}, window_ms=2000)
    fid = f"{alert['id']}-{end}"
    wait_until(lambda: any(f["firingId"] == fid for f in api(s, "GET", ALERTS + "/retry/firings").json()),
               timeout=20, interval=0.2, what="the firing recorded")
    assert receiver.firing_ids("/retry")[fid] == 3  # two 503s, then delivered
    firing = [f for f in api(s, "GET", ALERTS + "/retry/firings").json() if f["firingId"] == fid][0]
    assert firing["status"] == "fired" and firing["attempts"] == 3
    body = receiver.bodies("/retry")[-1]
    assert body["firing_id"] == fid and body["result_count"] == 1  # the default body

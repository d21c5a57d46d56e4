"""Splunk HEC completeness: data channels, indexer acknowledgement, health and Splunk's error codes."""

from __future__ import annotations

import time
import uuid

import pytest
import requests

from conftest import SedimentServer, marker, wait_until


@pytest.fixture(scope="module")
def srv(module_server_factory) -> SedimentServer:
    return module_server_factory(name="hec")


def splunk(token: str) -> dict[str, str]:
    return {"Authorization": f"Splunk {token}"}


def ack(srv: SedimentServer, channel: str | None, ids, *, via_param: bool = False, body=None) -> requests.Response:
    h = splunk(srv.ingest_token)
    params = None
    if channel is not None:
        if via_param:
            params = {"channel": channel}
        else:
            h["X-Splunk-Request-Channel"] = channel
    return srv.session.post(srv.url + "/services/collector/ack", headers=h, params=params,
                            json=body if body is not None else {"acks": ids}, timeout=10)


def test_channel_and_ack_round_trip(srv):
    m = marker()
    ch = str(uuid.uuid4())
    other = str(uuid.uuid4()).upper()
    ids = []
    for i in range(3):
        r = srv.ingest("/services/collector/event", {"event": f"{m} event {i}"}, scheme="Splunk",
                       headers={"X-Splunk-Request-Channel": ch})
        assert r.status_code == 200, r.text
        ids.append(r.json()["ackId"])
        assert r.json()["code"] == 0 and r.json()["text"] == "Success"
    assert ids == [0, 1, 2]  # per channel, increasing
    # The channel as a query parameter, on the raw endpoint, counts on its own.
    r = srv.ingest("/services/collector/raw", f"{m} raw line", scheme="Splunk", params={"channel": other})
    assert r.status_code == 200 and r.json()["ackId"] == 0, r.text
    # Without a channel: no ackId (Splunk without indexer acknowledgement).
    r = srv.ingest("/services/collector/event", {"event": f"{m} no channel"}, scheme="Splunk")
    assert r.json() == {"text": "Success", "code": 0}

    got = ack(srv, ch, [0, 1, 2, 3, 77])
    assert got.status_code == 200, got.text
    assert got.json() == {"acks": {"0": True, "1": True, "2": True, "3": False, "77": False}}
    assert ack(srv, other, [0, 1], via_param=True).json() == {"acks": {"0": True, "1": False}}
    assert ack(srv, str(uuid.uuid4()), [0]).json() == {"acks": {"0": False}}  # an unknown channel

    # Acknowledged means searchable exactly once; the channel is a field of its events.
    start, end = 0, int(time.time() * 1000) + 3_600_000
    wait_until(lambda: srv.count(m) >= 5, timeout=30, what="5 HEC events")
    rows = srv.query(m, start, end)
    assert len(rows) == 5, rows
    by_raw = {r["@rawstring"]: r for r in rows}
    assert by_raw[f"{m} event 1"]["channel"] == ch
    assert by_raw[f"{m} raw line"]["channel"] == other
    assert "channel" not in by_raw[f"{m} no channel"]


def test_channel_and_ack_refusals(srv):
    bad = srv.ingest("/services/collector/event", {"event": "x"}, scheme="Splunk",
                     headers={"X-Splunk-Request-Channel": "not-a-guid"})
    assert bad.status_code == 400 and bad.json()["code"] == 11, bad.text
    bad = srv.ingest("/services/collector/raw", "x", scheme="Splunk", params={"channel": "nope"})
    assert bad.status_code == 400 and bad.json()["code"] == 11, bad.text
    missing = ack(srv, None, [0])
    assert missing.status_code == 400 and missing.json()["code"] == 10, missing.text
    assert ack(srv, "nope", [0]).json()["code"] == 11
    ch = str(uuid.uuid4())
    for body in ({"acks": "0"}, {"nothing": []}, {"acks": [-1]}, {"acks": ["a"]}):
        r = ack(srv, ch, None, body=body)
        assert r.status_code == 400 and r.json()["code"] == 6, (body, r.text)
    r = srv.session.post(srv.url + "/services/collector/ack", headers={"X-Splunk-Request-Channel": ch},
                         json={"acks": [0]}, timeout=10)
    assert r.status_code == 401 and r.json()["code"] == 2


def test_health(srv):
    for path in ("/services/collector/health", "/services/collector/health/1.0"):
        r = requests.get(srv.url + path, timeout=10)
        assert r.status_code == 200 and r.json() == {"text": "HEC is healthy", "code": 17}, r.text


@pytest.mark.parametrize("path,body,code", [
    ("/services/collector/event", '{"event": ""}', 13),
    ("/services/collector/event", '{"event": null}', 13),
    ("/services/collector/event", '{"event": "ok"} {"event": ""}', 13),
    ("/services/collector/event", '{"time": 1}', 12),
    ("/services/collector/event", '{"event": "x"', 6),
    ("/services/collector/event", "not json", 6),
    ("/services/collector/event", "", 5),
    ("/services/collector/event", "  \n ", 5),
    ("/services/collector/raw", "", 5),
])
def test_error_codes(srv, path, body, code):
    m = marker()
    log_end = srv.log_end_sum()
    r = srv.ingest(path, body.replace('"ok"', f'"{m}"'), scheme="Splunk")
    assert r.status_code == 400, r.text
    assert srv.log_end_sum() == log_end  # a refused request appends nothing
    assert r.json()["code"] == code, r.text
    if code == 13:
        assert r.json()["text"].endswith("Event field cannot be blank")
    if '"ok"' in body:
        time.sleep(0.5)
        assert srv.count(m) == 0

"""The checker's and the quiet rule's decisions on made-up answers and views (no processes): each
rule must be able to fail."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

from cluster_harness import SedimentCluster, evaluate, format_view

ACKED = {"r-0-0", "r-0-1", "r-1-0"}
ATTEMPTED = ACKED | {"r-1-1"}  # r-1-1 was sent but not acknowledged


def test_exactly_once_passes():
    v = evaluate(ACKED, ATTEMPTED, Counter(ACKED), [])
    assert v.ok, v.problems
    assert v.report["missing"] == 0 and v.report["duplicates"] == 0


def test_unacknowledged_event_may_appear_once():
    v = evaluate(ACKED, ATTEMPTED, Counter(ACKED | {"r-1-1"}), [])
    assert v.ok, v.problems
    assert v.report["unacked_found"] == 1


def test_missing_duplicate_unknown_and_warning_fail():
    assert not evaluate(ACKED, ATTEMPTED, Counter(ACKED - {"r-0-1"}), []).ok
    dup = evaluate(ACKED, ATTEMPTED, Counter(list(ACKED) + ["r-1-0"]), [])
    assert not dup.ok and dup.duplicates == ["r-1-0"]
    dup_unacked = evaluate(ACKED, ATTEMPTED, Counter(list(ACKED) + ["r-1-1", "r-1-1"]), [])
    assert not dup_unacked.ok, "an unacknowledged event stored twice is a duplicate too"
    unknown = evaluate(ACKED, ATTEMPTED, Counter(ACKED | {"r-9-9"}), [])
    assert not unknown.ok and unknown.unknown == ["r-9-9"]
    assert not evaluate(ACKED, ATTEMPTED, Counter(ACKED), ["segment 7 unreachable"]).ok


def test_missing_allowed_only_with_a_warning_and_never_for_required():
    found = Counter(ACKED - {"r-0-0"})
    assert not evaluate(ACKED, ATTEMPTED, found, [], allow_missing_with_warning=True).ok
    assert evaluate(ACKED, ATTEMPTED, found, ["1 segment unreachable"], allow_missing_with_warning=True).ok
    v = evaluate(ACKED, ATTEMPTED, found, ["1 segment unreachable"], allow_missing_with_warning=True,
                 required={"r-0-0"})
    assert not v.ok and "required" in v.problems[0]
    dup = Counter(list(ACKED) + ["r-0-0"])
    assert not evaluate(ACKED, ATTEMPTED, dup, ["w"], allow_missing_with_warning=True).ok


def _view(**over):
    view = {
        "clusterId": "c", "self": 11, "logOffsetsAgeMs": 300, "warnings": [], "globalApplied": 40,
        "segments": {"count": 3, "bytes": 100, "unreachable": 0},
        "nodes": [{"id": 11, "address": "127.0.0.1:1", "alive": True, "lastHeartbeatMsAgo": 100, "self": True,
                   "segments": 3, "segmentBytes": 100, "partitionsOwned": 1},
                  {"id": 22, "address": "127.0.0.1:2", "alive": True, "lastHeartbeatMsAgo": 200, "self": False,
                   "segments": 0, "segmentBytes": 0, "partitionsOwned": 1}],
        "partitions": [{"partition": p, "owner": o, "ownerAlive": True, "epoch": 2, "replayPoint": 5, "logStart": 0,
                        "logEnd": 9, "nextOffset": 9, "lag": 0, "bufferedEvents": 0}
                       for p, o in ((0, 11), (1, 22))],
    }
    view.update(over)
    return view


def _fake_cluster(up_ids):
    addresses = {11: "127.0.0.1:1", 22: "127.0.0.1:2"}
    return SimpleNamespace(up_addresses=lambda: {i: addresses[i] for i in up_ids}, partitions=2)


def test_quiet_rule():
    fake = _fake_cluster({11, 22})

    def problems(view):
        return SedimentCluster.quiet_problems(fake, view)

    assert problems(_view()) == []
    v = _view()
    v["partitions"][1]["lag"] = 3
    assert problems(v) == ["p1 lag 3"]
    v = _view()
    v["partitions"][0]["logEnd"] = -1
    assert any("logEnd" in p for p in problems(v))
    v = _view()
    v["partitions"][0]["owner"] = 0
    assert any("owner 0" in p for p in problems(v))
    v = _view()
    v["partitions"][1]["ownerAlive"] = False
    assert problems(v)
    assert problems(_view(logOffsetsAgeMs=6000))
    assert problems(_view(warnings=["1 segment unreachable"]))
    assert SedimentCluster.quiet_problems(fake, _view(warnings=["w"]), allow_warnings=True) == []
    v = _view()
    v["nodes"][1]["alive"] = False
    assert any("not alive" in p for p in problems(v))
    v = _view()
    v["nodes"][1]["address"] = ""  # alive, but peers cannot reach it yet
    assert any("address" in p for p in problems(v))
    # Owned by a node the harness knows is down (killed or paused): not quiet.
    assert SedimentCluster.quiet_problems(_fake_cluster({11}), _view())
    assert "p1 owner=22" in format_view(_view())


def test_missing_events_must_fit_the_warned_ranges():
    w = ["2 segments (ids 1,2; 1 events from 2026-01-01T00:00:00.000Z to 2026-01-01T00:00:01.000Z) on node 5 "
         "could not be searched: the node is down"]
    base = 1767225600000  # 2026-01-01T00:00:00Z
    found = Counter(ACKED - {"r-0-0"})
    inside = {"r-0-0": base + 500}
    v = evaluate(ACKED, ATTEMPTED, found, w, allow_missing_with_warning=True, timestamps=inside)
    assert v.ok and v.report["warned_events"] == 1, v.problems
    outside = {"r-0-0": base + 5000}
    assert not evaluate(ACKED, ATTEMPTED, found, w, allow_missing_with_warning=True, timestamps=outside).ok
    two_missing = Counter(ACKED - {"r-0-0", "r-0-1"})
    v = evaluate(ACKED, ATTEMPTED, two_missing, w, allow_missing_with_warning=True,
                 timestamps={"r-0-0": base, "r-0-1": base + 1000})
    assert not v.ok and "name only 1" in v.problems[0], v.problems


def test_repeated_warning_headers_stay_separate():
    import http.server
    import threading

    import requests

    from cluster_harness import response_warnings

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("X-Sediment-Warning", "node 5 is down, 3 segments")
            self.send_header("X-Sediment-Warning", "partition 2 is being claimed")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        r = requests.get(f"http://127.0.0.1:{srv.server_port}/", timeout=10)
        assert response_warnings(r) == ["node 5 is down, 3 segments", "partition 2 is being claimed"]
    finally:
        srv.shutdown()
        srv.server_close()

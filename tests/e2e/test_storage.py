"""Storage on one node (issue 5): merges swap small segments for one without changing any answer,
retention by age and by size removes old segments from the metadata and the disk and nothing
newer, the segment list and the retention endpoint need an API token, and a corrupt segment copy
with no other copy is reported (never served) and rebuilt from the commit log by its owner.

The rebuild from the commit log also runs on Kafka (SEDIMENT_E2E_KAFKA); merges and retention are
log-independent here (on Kafka: tests/cluster test_replication.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import requests

from harness import marker, wait_until

DAY_MS = 86_400_000
FAST = ["--maintenance-interval-ms", "300", "--file-deletion-delay-ms", "500"]


def send(s, run: str, tag: str, n: int, ts_ms: int) -> None:
    """n events of datasource #t=<tag>, all at ts_ms, one request."""
    body = [{"tags": {"t": tag}, "events": [
        {"timestamp": ts_ms + i, "attributes": {"i": str(i)}, "rawstring": f"{run} {tag} {i}"} for i in range(n)]}]
    r = s.ingest("/api/v1/ingest/humio-structured", body)
    assert r.status_code == 200, r.text


def segments(s) -> list[dict]:
    r = requests.get(s.url + "/api/v1/cluster/segments", headers={"Authorization": f"Bearer {s.api_token}"},
                     timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["segments"]


def files(s) -> set[str]:
    d = Path(s.data_dir) / "segments"
    return {p.name for p in d.iterdir() if p.name.endswith(".seg")} if d.exists() else set()


def wait_flushed(s, run: str, n: int) -> None:
    """n events of `run` searchable and every buffer flushed to segments."""
    wait_until(lambda: s.quiet() and s.count(run, start=0) == n, timeout=30,
               what=f"{n} events of {run} in segments")


def test_merges_replace_small_segments_without_changing_answers(server_factory):
    s = server_factory(flush_age_ms=200, extra_args=[*FAST, "--merge-min-age-ms", "500",
                                                    "--merge-interval-ms", "300"])
    run = marker("merge")
    now = int(time.time() * 1000)
    for k in range(8):  # 8 flushes of one datasource -> 8 small segments, then merged
        send(s, run, "a", 5, now + k * 10)
        time.sleep(0.35)
    wait_until(lambda: any(seg["file"].startswith("m-") for seg in segments(s) if not seg["staged"]),
               timeout=30, what="a merged segment")
    wait_flushed(s, run, 40)
    rows = s.query(f"{run}", start=0, end=now + 3_600_000)
    ids = [r["@id"] for r in rows]
    assert len(ids) == 40 and len(set(ids)) == 40, f"{len(ids)} rows, {len(set(ids))} distinct"
    # Merged-away files leave the disk; what is left is exactly what Global lists.
    wait_until(lambda: files(s) == {seg["file"] for seg in segments(s)}, timeout=15,
               what="segment files on disk == Global's list")
    assert len([seg for seg in segments(s) if seg["repo"] == s.repo]) < 8
    # Write amplification counters (cumulative on this node): every merge read its inputs' file
    # bytes and wrote its output.
    r = requests.get(s.url + "/api/v1/cluster", headers={"Authorization": f"Bearer {s.api_token}"}, timeout=10)
    assert r.status_code == 200, r.text
    merges = r.json()["replication"]["merges"]
    outputs = [seg for seg in segments(s) if seg["file"].startswith("m-")]
    assert merges["merge_bytes_written"] >= sum(seg["fileSize"] for seg in outputs) > 0, merges
    assert merges["merge_bytes_read"] > 0, merges
    assert merges["merge_cpu_micros"] > 0, merges
    # Flushes of a few events make blocks far below a full block: they are re-encoded together
    # (a merge has at least 2 inputs), none is copied as stored.
    assert merges["merge_blocks_reencoded"] >= 2 and merges["merge_blocks_copied"] == 0, merges


def test_retention_by_age_and_by_size(server_factory):
    s = server_factory(flush_age_ms=200, extra_args=[*FAST, "--merge-small-bytes", "0"])
    run = marker("ret")
    now = int(time.time() * 1000)
    send(s, run, "old", 10, now - 10 * DAY_MS)
    send(s, run, "mid", 10, now - 3 * DAY_MS)
    send(s, run, "new", 10, now)
    wait_flushed(s, run, 30)
    before = {seg["file"] for seg in segments(s)}
    assert len(before) == 3, segments(s)

    url = f"{s.url}/api/v1/repositories/{s.repo}/retention"
    auth = {"Authorization": f"Bearer {s.api_token}"}
    assert requests.put(url, json={"retentionMs": DAY_MS}, timeout=10).status_code == 401
    assert requests.put(url, json={"retentionMs": -1}, headers=auth, timeout=10).status_code == 400
    assert requests.put(f"{s.url}/api/v1/repositories/nope/retention", json={"retentionMs": 1}, headers=auth,
                        timeout=10).status_code == 404
    # Age: older than 5 days goes.
    r = requests.put(url, json={"retentionMs": 5 * DAY_MS}, headers=auth, timeout=10)
    assert r.status_code == 200 and r.json()["retentionMs"] == 5 * DAY_MS, r.text
    wait_until(lambda: s.count(run, start=0) == 20, timeout=15, what="the 10-day-old events gone")
    assert s.count(f"{run} old", start=0) == 0 and s.count(f"{run} new", start=0) == 10
    # Size: a bound below the two remaining segments' total keeps only the newest.
    sizes = {seg["datasource"].split("t=")[-1]: seg["fileSize"] for seg in segments(s) if seg["repo"] == s.repo}
    r = requests.put(url, json={"retentionBytes": sizes["new"]}, headers=auth, timeout=10)
    assert r.status_code == 200 and r.json() == {"repository": s.repo, "retentionMs": 5 * DAY_MS,
                                                 "retentionBytes": sizes["new"]}, r.text
    wait_until(lambda: s.count(run, start=0) == 10, timeout=15, what="the 3-day-old events gone")
    assert s.count(f"{run} new", start=0) == 10
    wait_until(lambda: files(s) == {seg["file"] for seg in segments(s)}, timeout=15,
               what=f"expired files deleted from disk (on disk {files(s)}, listed {segments(s)})")
    assert len(files(s) & before) == 1
    assert "retention: repository" in s.log_text()


def test_segment_list_needs_a_token(server):
    r = requests.get(server.url + "/api/v1/cluster/segments", timeout=10)
    assert r.status_code == 401
    r = requests.get(server.url + "/internal/v1/segment-file", params={"name": "x.seg"}, timeout=10)
    assert r.status_code == 401


@pytest.mark.commit_log("the segment is rebuilt by reading its offsets back from the commit log")
def test_corrupt_only_copy_is_never_served_and_is_rebuilt_from_the_log(server_factory):
    """The node's only copy of a segment is corrupted on disk: a query reports it (warning, no bad
    rows), the copy is dropped, and the partition owner rebuilds the segment from the commit log.
    With R = 1 the log may be truncated past a segment once it has its one copy, so this test
    keeps the log (a long safe-offset interval): the rebuild needs the events still there."""
    s = server_factory(flush_age_ms=200, extra_args=[*FAST, "--merge-small-bytes", "0",
                                                    "--safe-offset-interval-ms", "3600000"])
    run = marker("corrupt")
    send(s, run, "c", 50, int(time.time() * 1000))
    wait_flushed(s, run, 50)
    seg = next(seg for seg in segments(s) if seg["repo"] == s.repo and seg["events"] == 50)
    path = Path(s.data_dir) / "segments" / seg["file"]
    data = bytearray(path.read_bytes())
    for k in range(32):
        data[len(data) // 3 + k] ^= 0x5A
    path.write_bytes(bytes(data))
    r = s.query_raw(run, start=0, end=int(time.time() * 1000) + 3_600_000)
    assert r.status_code == 200, r.text
    warnings = r.headers.get("X-Sediment-Warning", "")
    rows = r.json()
    assert len(rows) < 50 and warnings, f"{len(rows)} rows, warnings {warnings!r}"
    assert all(row["@rawstring"].startswith(run) for row in rows), "a row from a corrupt block"
    wait_until(lambda: s.count(run) == 50, timeout=30, what="the segment rebuilt from the commit log")
    log = s.log_text()
    assert "is corrupt" in log and "rebuilt segment" in log, s.describe()
    now = segments(s)
    assert seg["id"] not in {x["id"] for x in now}, "the corrupt segment is still listed"
    assert any(x["file"].startswith("r-") and x["events"] == 50 for x in now), now

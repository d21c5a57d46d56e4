"""Bucket storage on one node (issue 6; DESIGN section 8, P3, P4) against a local S3 server
(moto's server mode, scripts/s3/moto.py) on loopback.

1. uploads: every segment reaches the bucket (status backlog 0, uploadedSegments == segments,
   each object byte-identical to the local file) and a Global snapshot appears under global/.
   GC: the objects of segments removed by retention stay while younger than --bucket-gc-grace-ms,
   then are recorded in Global and deleted; the objects of listed segments stay.
2. eviction: with --cache-max-bytes a few segments large, the local copies of uploaded segments
   are evicted down to the bound; queries over days of data still answer completely (exact count,
   a needle per day) by fetching segments back from the bucket (X-Sediment-Bucket-Fetches > 0).
3. S3 outage: moto stopped for several flush intervals during ingest: ingest keeps answering 200,
   the upload backlog grows, the commit log is never truncated past a segment that is not in the
   bucket; moto back: the backlog drains, truncation moves on, every event is found exactly once.
4. disaster on one node: phase 1 uploaded and in a snapshot S1 newer than its last registration;
   one of its segment objects deleted in the bucket; phase 2 uploaded after S1; kill -9, newer
   snapshots deleted, data dir wiped, a new node with --recover-from-bucket on an empty dir and an
   empty commit log: the report starts from S1, adds phase 2 from the segment footers, names the
   deleted segment as lost (its events); every other event is found exactly once, none of the
   lost ones, and new ingest works. Figure: bucket recovery MB/s.

Runs on the embedded log, and with SEDIMENT_E2E_KAFKA on Kafka (each server object has its own
topics, so the recovered node starts on an empty commit log either way). Fails (no skip) when the
binary lacks the bucket flags. Figures are printed to the terminal even without -s.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
import requests

from harness import (
    S3_ENV,
    api_get,
    bucket_args,
    bucket_fetches,
    bucket_status,
    local_segment_bytes,
    marker,
    running_moto,
    new_bucket_name,
    s3_delete,
    s3_get,
    s3_list,
    wait_until,
)

DAY_MS = 86_400_000
FLUSH_AGE_MS = 300
MAINTENANCE_MS = 500
SNAPSHOT_RE = re.compile(r"global/g(\d+)-(\d+)\.snap$")
ID_RE = re.compile(r"id=(\S+)")


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """One moto server for the module (each test has its own bucket); killed by pid at the end."""
    yield from running_moto(tmp_path_factory.mktemp("s3"))


def make_bucket_server(server_factory, s3, bucket: str, *, prefix: str = "", flush_age_ms: int = FLUSH_AGE_MS,
                       partitions: int | None = None, extra: tuple = (), **bucket_kw):
    """A started single node on `bucket` in moto (credentials through the environment). Bucket
    snapshots are uploaded by the maintenance pass, so it runs every MAINTENANCE_MS."""
    args = [*bucket_args(s3.endpoint(), bucket, prefix, **bucket_kw), "--maintenance-interval-ms",
            str(MAINTENANCE_MS), *extra]
    return server_factory(flush_age_ms=flush_age_ms, partitions=partitions, extra_args=args, extra_env=S3_ENV)


def send(s, run: str, tag: str, ids: list[str], ts: list[int], random_bytes: int = 0) -> None:
    """One humio-structured request: datasource #t=<tag>, events `id=<id> <run> <tag> [<random
    hex>]` at `ts` (random_bytes of os.urandom per event, so the segments do not compress away)."""
    evs = [{"timestamp": t, "rawstring": f"id={i} {run} {tag}" + (f" {os.urandom(random_bytes).hex()}"
                                                                  if random_bytes else "")}
           for i, t in zip(ids, ts)]
    r = s.ingest("/api/v1/ingest/humio-structured", [{"tags": {"t": tag}, "events": evs}])
    assert r.status_code == 200, f"ingest {tag}: {r.status_code} {r.text[:300]}"


def found_ids(s, run: str, start: int = 0, end: int | None = None) -> tuple[Counter, requests.Response]:
    """Event ids (Counter) in the answer to the free-text query `run` (NDJSON), and the answer."""
    end = end if end is not None else int(time.time() * 1000) + 3_600_000
    r = s.query_raw(run, start, end, ndjson=True)
    assert r.status_code == 200, f"query {run}: {r.status_code} {r.text[:500]}"
    c: Counter = Counter()
    for line in r.text.splitlines():
        if line.strip():
            m = ID_RE.search(json.loads(line).get("@rawstring", ""))
            c[m.group(1) if m else "<unparsed>"] += 1
    return c, r


def exactly_once(found: Counter, want: set[str], *, absent: set[str] = frozenset()) -> list[str]:
    """Problems (empty = fine): ids of `want` missing or twice, ids of `absent` or unknown ones found."""
    probs = []
    dups = sorted(i for i, n in found.items() if n > 1)
    missing = sorted(want - set(found))
    present = sorted(set(found) & set(absent))
    unknown = sorted(set(found) - set(want) - set(absent))
    if dups:
        probs.append(f"{len(dups)} ids more than once, e.g. {dups[:5]}")
    if missing:
        probs.append(f"{len(missing)} of {len(want)} ids missing, e.g. {missing[:5]}")
    if present:
        probs.append(f"{len(present)} ids found that must be absent, e.g. {present[:5]}")
    if unknown:
        probs.append(f"{len(unknown)} unknown ids, e.g. {unknown[:5]}")
    return probs


def segments(s) -> list[dict]:
    return api_get(s, "/api/v1/cluster/segments")["segments"]


def wait_uploaded(s, timeout: float = 60.0) -> dict:
    """Waits until the node is quiet (everything in segments) and every segment is in the bucket
    (backlogSegments 0, uploadedSegments == segments > 0). Returns the bucket status."""
    def done():
        if not s.quiet():
            return None
        b = bucket_status(s)
        ok = b.get("segments", 0) > 0 and b.get("backlogSegments") == 0 and b.get("uploadedSegments") == b["segments"]
        return b if ok else None

    try:
        return wait_until(done, timeout=timeout, interval=0.2, what="every segment uploaded")
    except AssertionError as e:
        raise AssertionError(f"{e}\nbucket status: {json.dumps(bucket_status(s))}\n{s.describe()}") from None


def wait_snapshot_covers(s, timeout: float = 30.0) -> dict:
    """Waits until the bucket's last snapshot (status lastSnapshot) was taken at or after the
    Global offset applied now (so it records every registration and upload so far). Returns the
    bucket status."""
    applied = s.status()["globalApplied"]

    def covered():
        b = bucket_status(s)
        snap = b.get("lastSnapshot") or {}
        return b if snap.get("key") and snap.get("offset", -1) >= applied else None

    try:
        return wait_until(covered, timeout=timeout, interval=0.2,
                          what=f"a bucket snapshot at Global offset >= {applied}")
    except AssertionError as e:
        raise AssertionError(f"{e}\nbucket status: {json.dumps(bucket_status(s))}") from None


def objects_by_file(endpoint: str, bucket: str) -> dict[str, tuple[str, int]]:
    """Segment file name -> (key, size) of every `.../segments/<file>` object in the bucket."""
    out = {}
    for key, size in s3_list(endpoint, bucket).items():
        head, sep, name = key.rpartition("segments/")
        if sep and "/" not in name and (head == "" or head.endswith("/")):
            out[name] = (key, size)
    return out


def figure(capsys, line: str) -> None:
    """Prints a figure to the terminal even when pytest captures output."""
    with capsys.disabled():
        print(f"\n[figure] {line}")


# ---------------------------------------------------------------------------------------------
# 1. Uploads
# ---------------------------------------------------------------------------------------------


def test_every_segment_and_a_snapshot_reach_the_bucket(server_factory, s3, capsys):
    bucket, prefix = new_bucket_name(), "e2e/up/"
    s = make_bucket_server(server_factory, s3, bucket, prefix=prefix)
    run = marker("up")
    now = int(time.time() * 1000)
    want = set()
    for k in range(6):  # 6 datasources, 3 requests each across flushes
        for j in range(3):
            ids = [f"{run}-{k}-{j}-{i}" for i in range(20)]
            send(s, run, f"d{k}", ids, [now + j * 100 + i for i in range(20)])
            want |= set(ids)
        time.sleep(0.1)
    wait_until(lambda: s.quiet() and s.count(run) == len(want), timeout=30, what="everything in segments")
    b = wait_uploaded(s)
    b = wait_snapshot_covers(s)
    segs = [x for x in segments(s) if not x.get("staged")]
    assert len(segs) == b["segments"] and all(x.get("uploaded") for x in segs), (
        f"segment list vs bucket status: {b}\n{segs}")
    objs = objects_by_file(s3.endpoint(), bucket)
    local = {p.name: p for p in (Path(s.data_dir) / "segments").glob("*.seg")}
    problems = []
    for x in segs:
        name = Path(x["file"]).name
        name = name if name.endswith(".seg") else name + ".seg"
        if name not in objs:
            problems.append(f"{name} not in the bucket")
            continue
        key, size = objs[name]
        if not key.startswith(prefix):
            problems.append(f"{key} not under the prefix {prefix!r}")
        if size != x["fileSize"]:
            problems.append(f"{key}: {size} bytes, the segment has {x['fileSize']}")
        elif name in local and s3_get(s3.endpoint(), bucket, key) != local[name].read_bytes():
            problems.append(f"{key} differs from the local file")
    assert not problems, "; ".join(problems) + f"\nobjects {sorted(objs)}"
    snaps = [k for k in s3_list(s3.endpoint(), bucket) if SNAPSHOT_RE.search(k)]
    assert snaps and all(k.startswith(prefix) for k in snaps), f"no snapshot under {prefix}/global/: {snaps}"
    assert any(k.endswith(b["lastSnapshot"]["key"]) for k in snaps), (
        f"lastSnapshot {b['lastSnapshot']} not among {snaps}")
    assert b["lastSnapshot"].get("lastError", "") == "", b
    assert b.get("enabled") is True and b.get("location"), b
    found, _ = found_ids(s, run)
    assert not exactly_once(found, want), exactly_once(found, want)
    figure(capsys, f"bucket uploads: {len(segs)} segments, {sum(x['fileSize'] for x in segs)} bytes, "
                   f"{len(snaps)} snapshots; bucket status {json.dumps(b)}")


GC_GRACE_MS = 6000


def test_expired_segment_objects_are_collected_after_the_grace(server_factory, s3, capsys):
    """Retention removes the old datasource's segments from Global; their bucket objects stay while
    younger than --bucket-gc-grace-ms (bucket.gc.keptYoung), then are recorded in Global
    (bucket.gc.recorded) and deleted; the objects of the segments still listed stay."""
    bucket = new_bucket_name()
    s = make_bucket_server(server_factory, s3, bucket, extra=("--merge-small-bytes", "0"),
                           bucket_gc_grace_ms=GC_GRACE_MS)
    run = marker("gc")
    t_ingest_ms = int(time.time() * 1000)
    for j in range(2):
        send(s, run, "old", [f"{run}-old-{j}-{i}" for i in range(10)], [t_ingest_ms - 10 * DAY_MS + i for i in range(10)])
        send(s, run, "new", [f"{run}-new-{j}-{i}" for i in range(10)], [t_ingest_ms + i for i in range(10)])
        time.sleep(FLUSH_AGE_MS / 1000 + 0.1)
    wait_until(lambda: s.quiet() and s.count(run, start=0) == 40, timeout=30, what="everything in segments")
    wait_uploaded(s)
    segs = [x for x in segments(s) if not x.get("staged")]
    old = {seg_file(x) for x in segs if x["datasource"].endswith("t=old")}
    new = {seg_file(x) for x in segs if x["datasource"].endswith("t=new")}
    assert old and new, segs
    assert old | new <= set(objects_by_file(s3.endpoint(), bucket)), objects_by_file(s3.endpoint(), bucket)

    url = f"{s.url}/api/v1/repositories/{s.repo}/retention"
    r = requests.put(url, json={"retentionMs": 5 * DAY_MS}, headers={"Authorization": f"Bearer {s.api_token}"},
                     timeout=10)
    assert r.status_code == 200, r.text
    wait_until(lambda: not old & {seg_file(x) for x in segments(s)}, timeout=15, what="old segments expired")

    kept_young = 0

    def collected():
        nonlocal kept_young
        gc = bucket_status(s)["gc"]
        kept_young = max(kept_young, gc["keptYoung"])
        return gc if not old & set(objects_by_file(s3.endpoint(), bucket)) else None

    gc = wait_until(collected, timeout=GC_GRACE_MS / 1000 + 30, interval=0.2, what="expired objects deleted")
    t_deleted_ms = int(time.time() * 1000)
    # An object is at least as new as the ingest that made its segment: never deleted sooner.
    assert t_deleted_ms >= t_ingest_ms + GC_GRACE_MS, f"deleted {t_deleted_ms - t_ingest_ms} ms after the ingest"
    assert kept_young >= 1, f"no pass kept a young unreferenced object: {gc}"
    assert new <= set(objects_by_file(s3.endpoint(), bucket)), "an object of a listed segment was deleted"
    gc = wait_until(lambda: (g := bucket_status(s)["gc"])["recorded"]["objects"] >= len(old) and g, timeout=10,
                    what="the deletion recorded")
    rec = gc["recorded"]
    assert rec["objects"] == len(old) and set(rec["lastFiles"]) <= old and rec["lastNode"] > 0, gc
    assert gc["deletedObjects"] == len(old) and gc["skippedBehind"] == 0 and gc["rejectedRecords"] == 0, gc
    assert gc["graceMs"] == GC_GRACE_MS and gc["lastError"] == "", gc
    assert "bucket gc: deleted" in s.log_text()
    figure(capsys, f"bucket gc: {len(old)} expired objects deleted {(t_deleted_ms - t_ingest_ms) / 1000:.1f} s after "
                   f"their ingest (grace {GC_GRACE_MS / 1000:.0f} s), {len(new)} listed kept; gc status {json.dumps(gc)}")


# ---------------------------------------------------------------------------------------------
# 2. Eviction under a small bound, queries fetch from the bucket
# ---------------------------------------------------------------------------------------------

EVICT_DAYS = 12
EVICT_PER_DAY = 400
CACHE_BOUND = 48_000


def test_evicted_segments_are_fetched_back_for_queries(server_factory, s3, capsys):
    bucket = new_bucket_name()
    s = make_bucket_server(server_factory, s3, bucket, cache_max_bytes=CACHE_BOUND,
                           extra=("--merge-small-bytes", "0"))
    run = marker("ev")
    base = int(time.time() * 1000) - EVICT_DAYS * DAY_MS
    want, needles = set(), {}
    for d in range(EVICT_DAYS):
        ids = [f"{run}-{d}-{i}" for i in range(EVICT_PER_DAY)]
        ts = [base + d * DAY_MS + i * 1000 for i in range(EVICT_PER_DAY)]
        # Random text in every event keeps the segments from compressing to nothing (about 24
        # incompressible bytes an event: the bound is then well below the segments' total).
        pad = " " + uuid.uuid4().hex * 2
        evs = [{"timestamp": t, "rawstring": f"id={i} {run} day{d} {uuid.uuid4().hex}{uuid.uuid4().hex[:16]}{pad}"}
               for i, t in zip(ids, ts)]
        needle = f"needle{uuid.uuid4().hex[:12]}"
        needles[d] = needle
        evs.append({"timestamp": ts[EVICT_PER_DAY // 2] + 1, "rawstring": f"id={run}-{d}-n {run} {needle}"})
        r = s.ingest("/api/v1/ingest/humio-structured", [{"tags": {"t": f"day{d}"}, "events": evs}])
        assert r.status_code == 200, r.text
        want |= set(ids) | {f"{run}-{d}-n"}
    t_in = time.monotonic()
    wait_until(lambda: s.quiet() and s.count(run) == len(want), timeout=60, what="everything in segments")
    wait_uploaded(s)
    segs = [x for x in segments(s) if not x.get("staged")]
    total = sum(x["fileSize"] for x in segs)
    biggest = max(x["fileSize"] for x in segs)
    assert total > 3 * CACHE_BOUND, (f"{len(segs)} segments of {total} bytes: not enough above the bound "
                                     f"{CACHE_BOUND} to prove eviction")

    def bounded():
        files, size = local_segment_bytes(s.data_dir)
        return (files, size) if size <= CACHE_BOUND + biggest else None

    try:
        files, size = wait_until(bounded, timeout=30, interval=0.25, what="local segment copies evicted to the bound")
    except AssertionError as e:
        raise AssertionError(f"{e}; local {local_segment_bytes(s.data_dir)}, bound {CACHE_BOUND} + {biggest}\n"
                             f"bucket status {json.dumps(bucket_status(s))}") from None
    t_evicted = time.monotonic() - t_in

    end = base + EVICT_DAYS * DAY_MS
    t0 = time.monotonic()
    r = s.query_raw(f"{run} | count()", base - 1, end)
    q_s = time.monotonic() - t0
    assert r.status_code == 200, r.text
    count = int(r.json()[0]["_count"])
    fetches, fetched = bucket_fetches(r)
    assert count == len(want), f"count over the whole range {count}, want {len(want)}; headers {dict(r.headers)}"
    assert not r.headers.get("X-Sediment-Warning"), r.headers.get("X-Sediment-Warning")
    assert fetches > 0 and fetched > 0, (f"the query read {len(segs)} segments with {files} local files left, yet "
                                         f"reports {fetches} bucket fetches ({fetched} bytes)")
    total_fetches = fetches
    for d, needle in needles.items():
        rows = s.query(needle, base - 1, end)
        assert len(rows) == 1 and f"{run}-{d}-n" in rows[0]["@rawstring"], f"day {d} needle: {rows}"
        assert base + d * DAY_MS <= rows[0]["@timestamp"] < base + (d + 1) * DAY_MS, rows[0]
    found, r2 = found_ids(s, run, base - 1, end)
    total_fetches += bucket_fetches(r2)[0]
    assert not exactly_once(found, want), exactly_once(found, want)
    # Fetched copies are cached under the same bound.
    files2, size2 = wait_until(bounded, timeout=30, interval=0.25, what="the cache back under the bound after queries")
    figure(capsys, f"bucket eviction: {len(segs)} segments, {total} bytes over {EVICT_DAYS} days, bound {CACHE_BOUND}: "
                   f"{files} local files ({size} bytes) after eviction ({t_evicted:.1f} s after ingest); count query "
                   f"{q_s:.2f} s with {fetches} bucket fetches ({fetched} bytes); {files2} files ({size2} bytes) "
                   f"after queries; bucket status {json.dumps(bucket_status(s))}")


def test_corrupt_local_copy_is_read_from_the_bucket(server_factory, s3):
    """Issue 13 (bit rot at rest): every local segment file of an uploaded node gets 16 flipped
    bytes while it is down. The first query after the restart finds its own copies unreadable,
    withdraws them and reads the bucket's objects instead: every event exactly once, no warning,
    X-Sediment-Bucket-Fetches > 0 (no scrub runs: the default interval is 10 minutes). Before the
    fix, a copy this node found unreadable also barred the bucket route, so the re-run answered
    'no live node holds a readable copy' and the events were missing."""
    bucket = new_bucket_name()
    s = make_bucket_server(server_factory, s3, bucket, extra=("--merge-small-bytes", "0"))
    run = marker("rot")
    now = int(time.time() * 1000)
    want = set()
    for k in range(3):
        ids = [f"{run}-{k}-{i}" for i in range(20)]
        send(s, run, f"d{k}", ids, [now + i for i in range(20)])
        want |= set(ids)
    wait_until(lambda: s.quiet() and s.count(run) == len(want), timeout=30, what="everything in segments")
    wait_uploaded(s)
    s.stop()
    files = sorted((Path(s.data_dir) / "segments").glob("*.seg"))
    assert files, "no local segment file"
    for p in files:
        data = bytearray(p.read_bytes())
        for i in range(len(data) // 2, min(len(data) // 2 + 16, len(data))):
            data[i] ^= 0xFF
        p.write_bytes(bytes(data))
    s.start()
    found, r = found_ids(s, run)
    assert not exactly_once(found, want), (f"{exactly_once(found, want)}; warnings "
                                           f"{r.headers.get('X-Sediment-Warning')}")
    assert not r.headers.get("X-Sediment-Warning"), r.headers.get("X-Sediment-Warning")
    assert bucket_fetches(r)[0] > 0, f"{len(files)} local copies damaged, yet no bucket fetch: {dict(r.headers)}"
    for p in files:  # every damaged copy was dropped and, when cached again, replaced by the bucket's bytes
        assert not p.exists() or p.read_bytes() == s3_get(s3.endpoint(), bucket, f"segments/{p.name}"), p.name


# ---------------------------------------------------------------------------------------------
# 3. S3 outage during ingest
# ---------------------------------------------------------------------------------------------

OUTAGE_S = 6.0
SAFE_OFFSET_INTERVAL_MS = 500


def partition_view(s) -> dict[int, dict]:
    return {p["partition"]: p for p in api_get(s, "/api/v1/cluster")["partitions"]}


def not_uploaded_bounds(segs: list[dict]) -> dict[int, int]:
    """partition -> smallest minOffset of a committed segment not in the bucket."""
    out: dict[int, int] = {}
    for x in segs:
        if not x.get("staged") and not x.get("uploaded"):
            out[x["partition"]] = min(out.get(x["partition"], x["minOffset"]), x["minOffset"])
    return out


def test_s3_outage_keeps_ingest_and_holds_truncation(server_factory, s3, capsys):
    bucket = new_bucket_name()
    s = make_bucket_server(server_factory, s3, bucket, partitions=2,
                           extra=("--safe-offset-interval-ms", str(SAFE_OFFSET_INTERVAL_MS),
                                  "--merge-small-bytes", "0"))
    run = marker("out")
    want: set[str] = set()
    seq = 0

    def batch(tag: str, n: int = 10) -> None:
        nonlocal seq
        ids = [f"{run}-{seq + i}" for i in range(n)]
        seq += n
        send(s, run, tag, ids, [int(time.time() * 1000)] * n)
        want.update(ids)

    for k in range(8):
        batch(f"d{k % 4}")
        time.sleep(0.1)
    wait_uploaded(s)

    def truncated():
        v = partition_view(s)
        return v if all(p["logStart"] > 0 for p in v.values() if p["logEnd"] > 0) else None

    before = wait_until(truncated, timeout=30, interval=0.25, what="the commit log truncated once all is uploaded")

    t_stop = time.monotonic()
    s3.stop()
    stopped_s = time.monotonic() - t_stop
    t_down = time.monotonic()
    checks, backlog, statuses = 0, [], Counter()
    seen: dict[int, int] = {}
    while time.monotonic() - t_down < OUTAGE_S:
        for k in range(4):  # both partitions (4 datasources)
            batch(f"d{k}")  # asserts 200
            statuses[200] += 1
        segs = segments(s)
        view = partition_view(s)
        bounds = not_uploaded_bounds(segs)
        for p, lo in bounds.items():
            seen[p] = min(seen.get(p, lo), lo)
            for k in ("safeOffset", "logStart", "truncatedBefore"):
                assert view[p][k] <= lo, (
                    f"p{p}: {k} {view[p][k]} beyond minOffset {lo} of a segment not in the bucket\n"
                    f"view {view[p]}\nsegments {[x for x in segs if x['partition'] == p]}")
        b = bucket_status(s)
        backlog.append(b.get("backlogSegments", 0))
        checks += 1
        time.sleep(0.25)
    assert seen, f"no segment stayed out of the bucket during the outage: {bucket_status(s)}"
    assert max(backlog) >= 2 and backlog[-1] > backlog[0], f"backlog did not grow during the outage: {backlog}"
    b_out = bucket_status(s)

    t_up = time.monotonic()
    s3.start()
    restarted_s = time.monotonic() - t_up
    t_up = time.monotonic()
    try:
        wait_uploaded(s, timeout=60)
    except AssertionError as e:
        raise AssertionError(f"backlog did not drain after moto came back: {e}") from None
    drained_s = time.monotonic() - t_up

    def moved_on():
        v = partition_view(s)
        return v if all(v[p]["safeOffset"] > lo and v[p]["logStart"] > lo for p, lo in seen.items()) else None

    after = wait_until(moved_on, timeout=30, interval=0.25,
                       what=f"safe offset and log start past the segments held back {seen}")
    found, _ = found_ids(s, run)
    assert not exactly_once(found, want), exactly_once(found, want)
    starts_before = {p: v["logStart"] for p, v in before.items()}
    starts_after = {p: v["logStart"] for p, v in after.items()}
    figure(capsys, f"bucket outage: moto down {OUTAGE_S:.0f} s (stop took {stopped_s:.1f} s, start "
                   f"{restarted_s:.1f} s); {statuses[200]} ingest requests answered 200 meanwhile; backlog "
                   f"{backlog[0]} -> {max(backlog)} segments ({b_out.get('backlogBytes')} bytes); {checks} truncation "
                   f"checks, held back at {seen}; drained {drained_s:.1f} s after moto served again; log start "
                   f"before {starts_before} after {starts_after}; {len(want)} events exactly once")


# ---------------------------------------------------------------------------------------------
# 4. Disaster on one node: recovery from the bucket
# ---------------------------------------------------------------------------------------------

DISASTER_DATASOURCES = 6
DISASTER_BATCHES = 4
DISASTER_LATE_DATASOURCES = 2
DISASTER_PER_BATCH = 800
DISASTER_RANDOM_BYTES = 80  # per event, as hex: segments of a few MB in all


def seg_file(x: dict) -> str:
    name = Path(x["file"]).name
    return name if name.endswith(".seg") else name + ".seg"


def test_single_node_recovers_from_the_bucket(server_factory, s3, capsys):
    """Phase 1 is in the bucket and in snapshot S1; one of its segment objects is deleted in moto.
    Phase 2 (other datasources) is uploaded afterwards; after kill -9 every snapshot newer than S1
    is deleted too, as if the node died before uploading one: the recovery starts from S1, adds
    phase 2's segments from their footers, reports the deleted segment as lost."""
    bucket, prefix = new_bucket_name(), "dr/"
    # Snapshots every second, all kept (S1 must survive the pruning of old snapshots).
    s = make_bucket_server(server_factory, s3, bucket, prefix=prefix, bucket_snapshots_kept=1000,
                           extra=("--merge-small-bytes", "0"))
    run = marker("dr")
    base = int(time.time() * 1000) - 3_600_000
    want: set[str] = set()
    ts_of: dict[str, int] = {}
    tag_of: dict[str, str] = {}
    seq = 0

    def ingest(tags: list[str], batches: int) -> None:
        nonlocal seq
        for j in range(batches):
            for tag in tags:
                ids = [f"{run}-{tag}-{j}-{i}" for i in range(DISASTER_PER_BATCH)]
                ts = [base + seq + i for i in range(DISASTER_PER_BATCH)]  # increasing per datasource
                seq += DISASTER_PER_BATCH
                send(s, run, tag, ids, ts, random_bytes=DISASTER_RANDOM_BYTES)
                want.update(ids)
                ts_of.update(zip(ids, ts))
                tag_of.update((i, tag) for i in ids)
            time.sleep(FLUSH_AGE_MS / 1000 + 0.1)  # several segments per datasource
        wait_until(lambda: s.quiet() and s.count(run) == len(want), timeout=60, what="everything in segments")
        wait_uploaded(s)

    ingest([f"d{k}" for k in range(DISASTER_DATASOURCES)], DISASTER_BATCHES)
    b = wait_snapshot_covers(s)
    s1 = b["lastSnapshot"]
    phase1 = [x for x in segments(s) if not x.get("staged")]
    assert len(phase1) >= DISASTER_DATASOURCES + 1, f"only {len(phase1)} segments"

    # The segment to lose: its events are those of its datasource inside its time range (each
    # datasource's timestamps increase with the offsets, so its segments' ranges are disjoint).
    victim = sorted(phase1, key=lambda x: (-x["events"], x["id"]))[len(phase1) // 2]
    vtag = victim["datasource"].split("t=")[-1]
    lost_ids = {i for i in want if tag_of[i] == vtag and victim["minTs"] <= ts_of[i] <= victim["maxTs"]}
    assert len(lost_ids) == victim["events"], (f"segment {victim} holds {victim['events']} events, the ids in its "
                                               f"datasource {vtag!r} and time range are {len(lost_ids)}")
    objs = objects_by_file(s3.endpoint(), bucket)
    vname = seg_file(victim)
    assert vname in objs, f"{vname} not in the bucket: {sorted(objs)}"
    s3_delete(s3.endpoint(), bucket, objs[vname][0])

    ingest([f"late{k}" for k in range(DISASTER_LATE_DATASOURCES)], 2)
    segs = [x for x in segments(s) if not x.get("staged")]
    phase1_ids = {x["id"] for x in phase1}
    late = [x for x in segs if x["id"] not in phase1_ids]
    assert late, "phase 2 made no segment"
    s.kill()
    newer = [k for k, _ in s3_list(s3.endpoint(), bucket).items()
             if (m := SNAPSHOT_RE.search(k)) and (int(m.group(1)), int(m.group(2))) > (s1["generation"], s1["offset"])]
    for k in newer:
        s3_delete(s3.endpoint(), bucket, k)
    shutil.rmtree(s.data_dir)
    kept_bytes_expected = sum(x["fileSize"] for x in segs if x["id"] != victim["id"])

    t_launch = time.monotonic()
    r = make_bucket_server(server_factory, s3, bucket, prefix=prefix, recover=True, create=False,
                           extra=("--merge-small-bytes", "0"))
    t_serving = time.monotonic() - t_launch
    survivors = want - lost_ids

    def complete():
        found, _ = found_ids(r, run)
        return found if survivors <= set(found) else None

    found = wait_until(complete, timeout=60, interval=0.1, what="every surviving event found after the recovery")
    t_complete = time.monotonic() - t_launch
    probs = exactly_once(found, survivors, absent=lost_ids)
    assert not probs, "; ".join(probs)

    st = r.status()
    rec = st.get("recovery")
    assert isinstance(rec, dict), f"status has no recovery report: {json.dumps(st)[:3000]}"
    problems = []
    if rec.get("lostSegments") != 1:
        problems.append(f"lostSegments {rec.get('lostSegments')}, want 1")
    if rec.get("lostEvents") != victim["events"]:
        problems.append(f"lostEvents {rec.get('lostEvents')}, want {victim['events']}")
    lost = rec.get("lost") or []
    if len(lost) != 1 or seg_file(lost[0]) != vname:
        problems.append(f"lost {lost}, want the file {vname}")
    elif (lost[0].get("events") != victim["events"] or lost[0].get("minTs") != victim["minTs"]
          or lost[0].get("maxTs") != victim["maxTs"] or lost[0].get("partition") != victim["partition"]
          or lost[0].get("datasource") != victim["datasource"]):
        problems.append(f"lost entry {lost[0]} does not describe {victim}")
    if rec.get("keptEvents") != len(survivors):
        problems.append(f"keptEvents {rec.get('keptEvents')}, want {len(survivors)}")
    if rec.get("keptSegments") != len(phase1) - 1 or rec.get("addedSegments") != len(late):
        problems.append(f"kept {rec.get('keptSegments')} + added {rec.get('addedSegments')} segments, want "
                        f"{len(phase1) - 1} from the snapshot + {len(late)} uploaded after it")
    if rec.get("keptBytes") != kept_bytes_expected:
        problems.append(f"keptBytes {rec.get('keptBytes')}, want {kept_bytes_expected}")
    if not rec.get("snapshotKey", "").endswith(s1["key"]) or rec.get("snapshotOffset") != s1["offset"]:
        problems.append(f"snapshot {rec.get('snapshotKey')} at {rec.get('snapshotOffset')}, want S1 {s1}")
    if not rec.get("generation", 0) > b.get("generation", 0):
        problems.append(f"generation {rec.get('generation')} not newer than the old node's {b.get('generation')}")
    assert not problems, "recovery report: " + "; ".join(problems) + f"\n{json.dumps(rec)}\n{r.describe()}"
    nb = st["bucket"]
    assert nb.get("generation") == rec["generation"], f"bucket generation {nb.get('generation')}, recovery {rec}"

    # New ingest works and is found; the recovered events are still there exactly once.
    new_ids = [f"{run}-new-{i}" for i in range(50)]
    send(r, run, "d0", new_ids, [int(time.time() * 1000)] * 50)
    wait_until(lambda: set(new_ids) <= set(found_ids(r, run)[0]), timeout=30, what="new events found")
    found, _ = found_ids(r, run)
    probs = exactly_once(found, survivors | set(new_ids), absent=lost_ids)
    assert not probs, "after new ingest: " + "; ".join(probs)
    mb = rec["keptBytes"] / 1e6
    figure(capsys, f"bucket recovery: {mb:.2f} MB ({rec['keptSegments']} segments from the snapshot + "
                   f"{rec['addedSegments']} uploaded after it, {rec['keptEvents']} events) in {t_complete:.1f} s from "
                   f"launch to the first complete answer ({mb / t_complete:.2f} MB/s; serving after {t_serving:.1f} s);"
                   f" lost as reported: {rec['lostSegments']} segment, {rec['lostEvents']} events; {len(newer)} newer "
                   f"snapshots removed before the recovery")


def test_unreachable_bucket_at_start_is_waited_for(server_factory, s3):
    """The bucket endpoint refuses connections while a node starts: the node waits for it (a
    warning per attempt, every 2 s for up to 120 s) instead of exiting, and serves once the
    endpoint is back; an event ingested then is found. (Seen in the chaos campaign: a node
    restarted during an S3 outage exited with "creating the bucket ... Couldn't connect".)"""
    bucket = new_bucket_name()
    s3.stop()
    try:
        s = server_factory(start=False, flush_age_ms=FLUSH_AGE_MS, extra_env=S3_ENV,
                           extra_args=[*bucket_args(s3.endpoint(), bucket), "--maintenance-interval-ms",
                                       str(MAINTENANCE_MS)])
        s.launch()
        wait_until(lambda: "start: opening the bucket (attempt 2)" in s.log_text(), timeout=30,
                   what="the node retrying the unreachable bucket")
        assert s.proc.poll() is None, f"the node exited while the bucket was unreachable\n{s.describe()}"
        t_back = time.monotonic()
        s3.start()
    finally:
        if s3.running_pid() is None:
            s3.start()

    def serving():
        assert s.proc.poll() is None, f"the node exited\n{s.describe()}"
        return s.serving()

    wait_until(serving, timeout=30, interval=0.2, what="the node serving once the bucket is back")
    print(f"serving {time.monotonic() - t_back:.1f}s after the bucket came back")
    run = marker("late")
    send(s, run, "d0", [f"{run}-0"], [int(time.time() * 1000)])
    found = wait_until(lambda: (c := found_ids(s, run)[0]) and c, timeout=30, what="the event found")
    assert found == Counter({f"{run}-0": 1})

"""Segment replication, safe offsets, merges and retention in a sediment cluster (issue 5; DESIGN
P2, P3, sections 6-8), on one real Kafka broker and 2-3 real nodes on loopback.

Scenarios (fixed seeds; each one well under 90 s on 2 cores):

- repair: 3 nodes, R=2; kill -9 one node under ingest; after the repair grace every segment has two
  live copies (announced and on disk); the repair time is a figure; then kill a second node: the
  last node alone answers every acknowledged event exactly once (no warnings).
- safe offset: 2 nodes, R=2; with one node down new segments have one copy, and neither the safe
  offset nor Kafka's real log start passes them (checked for several safe-offset intervals); the
  node restarts, they are replicated, the safe offset and the log start move past them.
- corrupt copy: bytes flipped inside one node's copy of a segment: queries through that node stay
  complete and clean; the scrub finds the corruption and the copy is replaced by a good one.
- merges under load: merge outputs (m-*.seg) are committed and replicated, the segment count
  drops below the number of flushed segments, the strict check passes and no query returned an
  event twice meanwhile.
- retention: segments whose newest event is older than the retention go from the segment list and
  from every node's disk; newer events stay, exactly once.

The scenarios skip (module-wide, with the reason) while `sediment server --help` lacks
--replication-factor, so the file can land before the server does; the pure helper tests at the
end always run.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter
from types import SimpleNamespace

import pytest
import requests

from cluster_harness import (
    ClusterWorkload,
    DuplicateWatcher,
    FIGURES,
    SedimentCluster,
    by_partition,
    check_cluster,
    cluster_segments,
    disk_problems,
    evaluate,
    flip_bytes,
    format_replication,
    format_view,
    is_merge_output,
    kafka_start_offsets,
    live_holders,
    live_node_ids,
    log_lines,
    marker,
    now_ms,
    parse_kcat_offsets,
    query_run,
    replication_problems,
    replication_support,
    segment_file_name,
    segment_files,
    segment_path,
    under_replicated,
    wait_disk_matches,
    wait_replicated,
    wait_truncated_past,
    wait_until,
)

CLIENTS = 4
FACTOR = 2
REPAIR_GRACE_MS = 8000
SAFE_OFFSET_INTERVAL_MS = 2000
REPLICATION_INTERVAL_MS = 500
# The harness passes --file-deletion-delay-ms FILE_DELETION_DELAY_MS (2000) to every node.
REPAIR_BOUND_S = 60.0
DAY_MS = 86_400_000
MERGE_LOAD_S = 15.0


def repl_args(**over) -> list[str]:
    """Server flags for the replication scenarios: R=2 and short intervals (the deletion delay is
    the harness's FILE_DELETION_DELAY_MS); `over` maps a flag
    name without dashes, underscores for dashes (scrub_interval_ms=3000), to a value."""
    flags = {"replication_factor": FACTOR, "repair_grace_ms": REPAIR_GRACE_MS,
             "safe_offset_interval_ms": SAFE_OFFSET_INTERVAL_MS, "replication_interval_ms": REPLICATION_INTERVAL_MS}
    flags.update(over)
    out: list[str] = []
    for k, v in flags.items():
        out += ["--" + k.replace("_", "-"), str(v)]
    return out


@pytest.fixture(scope="module")
def replication_ready():
    """Fails the module's scenarios (before any broker starts) when the binary lacks
    --replication-factor: a stale binary must not pass as a skipped run."""
    reason = replication_support()
    if reason:
        pytest.fail(f"the sediment binary does not support segment replication: {reason}")


@pytest.fixture
def repl_cluster(replication_ready, make_cluster):
    """make_cluster, available only when the binary supports replication."""
    return make_cluster


def start_workload(c: SedimentCluster, run: str, seed: int) -> ClusterWorkload:
    wl = ClusterWorkload(c, run, CLIENTS, seed=seed)
    wl.__enter__()
    wl.wait_for_ok_started_after(c.t0, timeout=30, what="first acknowledged ingest")
    return wl


def segments_now(c: SedimentCluster, via: int) -> list[dict]:
    return cluster_segments(c, via)["segments"]


# ---------------------------------------------------------------------------------------------
# 1. Repair after a node loss, then a second loss
# ---------------------------------------------------------------------------------------------


@pytest.mark.needs_cluster
def test_repair_after_node_loss_then_second_loss_loses_nothing(repl_cluster):
    """3 nodes, R=2, ingest running. kill -9 node A (it stays down): after the repair grace every
    segment whose events predate the kill has two copies on live nodes, announced and on disk
    (repair time printed as a figure). Then every segment is on both survivors; kill -9 node B:
    the last node answers every acknowledged event exactly once without warnings."""
    rng = random.Random(5101)
    c = repl_cluster(3, extra_args=repl_args())
    c.wait_quiet(timeout=60)
    run = marker("repair")
    wl = start_workload(c, run, seed=5101)
    try:
        a, b = rng.sample(range(3), 2)
        last = next(i for i in range(3) if i not in (a, b))
        a_id = c.node(a).node_id
        time.sleep(5.0)
        wait_until(lambda: any(a_id in s["replicas"] for s in segments_now(c, last)), timeout=30, interval=0.5,
                   what=f"a segment with a copy on node {a} (id {a_id})")
        before = segments_now(c, last)
        on_a = [s for s in before if a_id in s["replicas"]]
        print(f"killing node {a} (id {a_id}): {len(on_a)} of {len(before)} segments "
              f"({sum(s['fileSize'] for s in on_a)} bytes) have a copy there; then node {b}; last node {last}")

        wall_kill = now_ms()
        t_kill = c.kill(a)
        wait_replicated(c, last, FACTOR, timeout=REPAIR_BOUND_S, pred=lambda s: s["maxTs"] < wall_kill,
                        what="every segment older than the kill with 2 live copies on disk")
        t_rep = c.mark("repair done")
        line = (f"repair time: {t_rep - t_kill:.1f} s from kill -9 to 2 live copies of every older segment "
                f"(grace {REPAIR_GRACE_MS / 1000:.0f} s; {len(on_a)} segments, "
                f"{sum(s['fileSize'] for s in on_a)} bytes had a copy on the killed node)")
        print(line)
        FIGURES.append(line)

        wl.hold()
        c.mark("workload held")
        view, segs = wait_replicated(c, last, FACTOR, timeout=60, what="every segment on both survivors")
        repair = {n["id"]: n.get("repair") for n in view["nodes"]}
        print(f"repair counters: {repair}")
        print(format_replication(view))
        survivors = {c.node(b).node_id, c.node(last).node_id}
        assert all(set(live_holders(s, survivors)) == survivors for s in segs["segments"] if not s.get("staged"))

        t_kill_b = c.kill(b)
        wl.release()
        time.sleep(4.0)
        wl.hold()
        c.mark("workload held")
        after = {i for r in wl.records() if r.status == 200 and r.start > t_kill_b for i in r.ids}
        assert after, "nothing acknowledged by the last node"
        print(f"ingest answers: {wl.status_counts()}")
        check_cluster(c, wl, "after two losses", via=last)
    finally:
        wl.stop()


# ---------------------------------------------------------------------------------------------
# 2. The safe offset holds truncation back until segments are durable
# ---------------------------------------------------------------------------------------------


def new_segment_bounds(segs: list[dict], old_ids: set, factor: int) -> dict[int, int]:
    """partition -> smallest minOffset of a segment not in `old_ids`, not a merge output, with
    fewer than `factor` announced replicas."""
    out: dict[int, int] = {}
    for s in segs:
        if s["id"] in old_ids or s.get("staged") or is_merge_output(s) or len(s["replicas"]) >= factor:
            continue
        out[s["partition"]] = min(out.get(s["partition"], s["minOffset"]), s["minOffset"])
    return out


@pytest.mark.needs_cluster
def test_safe_offset_holds_truncation_until_replicated(repl_cluster):
    """2 nodes, R=2. Everything replicated -> the commit log is truncated (logStart > 0). Node B
    down, more ingest: segments with one copy appear, and for several safe-offset intervals every
    partition's safeOffset, truncatedBefore, the view's logStart and Kafka's real start offset stay at
    or below the smallest minOffset of those segments. B back: they are replicated, and safeOffset and logStart
    move past them. Strict check through both nodes."""
    c = repl_cluster(2, extra_args=repl_args())
    c.wait_quiet(timeout=60)
    run = marker("safe")
    wl = start_workload(c, run, seed=5202)
    try:
        time.sleep(4.0)
        wl.hold()
        c.mark("workload held")
        wait_replicated(c, 0, FACTOR, timeout=60)

        def truncated(v):
            return all(p["logStart"] > 0 and p["safeOffset"] >= p["logStart"]
                       for p in v["partitions"] if p["logEnd"] > 0)

        view = c.wait_view(0, truncated, timeout=30, what="logStart > 0 on every partition with data")
        print("replicated and truncated:\n" + format_replication(view))
        t_kill = c.kill(1)
        # Everything flushed before the kill may have reached node 1 (and may lose that copy from
        # the list later); only segments flushed afterwards are sure never to have had two copies.
        old_ids = {s["id"] for s in segments_now(c, 0)}
        wl.release()
        time.sleep(4.0)  # ingest to node 0 only; takeover of B's partitions; flushes of 1 s
        window = max(8.0, 4 * SAFE_OFFSET_INTERVAL_MS / 1000)
        t_end = time.monotonic() + window
        checks = kafka_checks = 0
        seen: dict[int, int] = {}
        next_kafka = 0.0
        while time.monotonic() < t_end:
            c.assert_running()
            segs = segments_now(c, 0)
            view = c.cluster_view(0)
            bounds = new_segment_bounds(segs, old_ids, FACTOR)
            parts = by_partition(view)
            for p, lo in bounds.items():
                seen[p] = min(seen.get(p, lo), lo)
                assert parts[p]["safeOffset"] <= lo, (
                    f"p{p}: safeOffset {parts[p]['safeOffset']} beyond minOffset {lo} of a segment with one copy\n"
                    + format_replication(view, {"segments": segs, "factor": FACTOR}))
                assert parts[p]["truncatedBefore"] <= lo, (
                    f"p{p}: truncatedBefore {parts[p]['truncatedBefore']} beyond minOffset {lo} of a segment with "
                    "one copy\n" + format_replication(view, {"segments": segs, "factor": FACTOR}))
                assert parts[p]["logStart"] <= lo, (
                    f"p{p}: logStart {parts[p]['logStart']} beyond minOffset {lo} of a segment with one copy\n"
                    + format_replication(view, {"segments": segs, "factor": FACTOR}))
            checks += 1
            if bounds and time.monotonic() >= next_kafka:
                real = kafka_start_offsets(c, bounds)
                bad = {p: (real[p], lo) for p, lo in bounds.items() if real[p] > lo}
                assert not bad, f"Kafka truncated beyond segments with one copy (start, minOffset): {bad}"
                kafka_checks += 1
                next_kafka = time.monotonic() + 1.5
            time.sleep(0.5)
        print(f"safe offset held for {window:.0f}s: {checks} checks, {kafka_checks} against Kafka; "
              f"partitions with one-copy segments: {seen}")
        assert seen, "no segment with a single copy appeared while node 1 was down: the check proved nothing"
        assert kafka_checks >= 2, f"only {kafka_checks} checks of Kafka's start offsets"

        wl.hold()
        c.mark("workload held")
        c.launch(1)
        c.wait_up(1)
        print(f"node 1 back {time.monotonic() - t_kill:.1f}s after the kill")
        view, segs = wait_replicated(c, 0, FACTOR, timeout=60, what="segments written while node 1 was down replicated")
        new = [s for s in segs["segments"] if s["id"] not in old_ids and not s.get("staged")]
        top: dict[int, int] = {}
        for s in new:
            top[s["partition"]] = max(top.get(s["partition"], -1), s["maxOffset"])

        view = wait_truncated_past(c, 0, top, "the new segments' maxOffset")
        print("after node 1 returned:\n" + format_replication(view))
        check_cluster(c, wl, "after node 1 returned", all_nodes=True)
    finally:
        wl.stop()


# ---------------------------------------------------------------------------------------------
# 3. A corrupt copy is never served and gets replaced
# ---------------------------------------------------------------------------------------------


def corrupt_detected(view: dict, node_id: int) -> int:
    """The node's repair.corruptDetected in `view` (0 when it did not report)."""
    return (next((n for n in view["nodes"] if n["id"] == node_id), {}).get("repair") or {}).get("corruptDetected", 0)


def corrupt_copy(c: SedimentCluster, x: int, segs: dict, avoid: set) -> tuple[dict, bytes]:
    """Flips 16 bytes in the middle of node x's copy of its largest committed segment not in
    `avoid` (ids), after checking it equals another holder's copy. Returns (segment, good bytes)."""
    x_id = c.node(x).node_id
    mine = [s for s in segs["segments"] if x_id in s["replicas"] and not s.get("staged") and s["id"] not in avoid]
    assert mine, f"node {x} holds no segment to corrupt\n{format_replication(c.cluster_view(x), segs)}"
    seg = max(mine, key=lambda s: s["fileSize"])
    other = next(r for r in seg["replicas"] if r != x_id)
    good = segment_path(c.node(c.index_of(other)), seg).read_bytes()
    path = segment_path(c.node(x), seg)
    assert path.read_bytes() == good, f"the two copies of segment {seg['id']} differ before the corruption"
    at = flip_bytes(path)
    c.mark(f"flipped 16 bytes at {at} of node {x}'s {path.name} ({seg['fileSize']} bytes, p{seg['partition']}, "
           f"{seg['events']} events)")
    print(f"corrupted node {x} (id {x_id}) copy of segment {seg['id']} {path.name} at byte {at}; good copy on {other}")
    return seg, good


def wait_healed(c: SedimentCluster, via: int, seg: dict, good: bytes, timeout: float = 45.0) -> list[int]:
    """Waits until `seg` has FACTOR live replicas whose files all equal `good`; returns them."""
    def healed():
        s = next((s for s in cluster_segments(c, via)["segments"] if s["id"] == seg["id"]), None)
        if s is None:
            raise AssertionError(f"segment {seg['id']} left the list")
        holders = live_holders(s, live_node_ids(c, c.cluster_view(via)))
        if len(holders) < FACTOR:
            return None
        copies = [segment_path(c.node(c.index_of(h)), s) for h in holders]
        return holders if all(p.exists() and p.read_bytes() == good for p in copies) else None

    return wait_until(healed, timeout=timeout, interval=0.5,
                      what=f"segment {seg['id']} with {FACTOR} live copies equal to the good one")


@pytest.mark.needs_cluster
def test_corrupt_copy_is_never_served_and_is_repaired(repl_cluster):
    """3 nodes, R=2, scrub every 3 s, no merges (segment ids stay put). Round 1: bytes flipped in
    the middle of node X's copy of a segment (size kept): queries through X right away return every
    acknowledged event exactly once and nothing else; X's repair.corruptDetected grows; the segment
    again has two live copies, each byte-identical to the good copy. Round 2: another of X's
    copies corrupted with no query running: the scrub alone must find and replace it."""
    rng = random.Random(5303)
    c = repl_cluster(3, extra_args=repl_args(scrub_interval_ms=3000, merge_small_bytes=0))
    c.wait_quiet(timeout=60)
    run = marker("corrupt")
    wl = start_workload(c, run, seed=5303)
    try:
        time.sleep(5.0)
        wl.hold()
        c.mark("workload held")
        view, segs = wait_replicated(c, 0, FACTOR, timeout=60)
        x = rng.randrange(3)
        x_id = c.node(x).node_id
        before = corrupt_detected(view, x_id)
        seg, good = corrupt_copy(c, x, segs, set())

        acked, attempted = wl.acked_ids(), wl.attempted_ids()
        warned = 0
        for k in range(8):
            ans = query_run(c.node(x), run)
            assert ans.status == 200, f"query {k} through node {x} answered {ans.status} {ans.body[:300]}"
            v = evaluate(acked, attempted, ans.found, [])
            warned += bool(ans.warnings)
            assert v.ok, (f"query {k} through node {x} after the corruption: {'; '.join(v.problems)} "
                          f"warnings={ans.warnings[:3]}")
            time.sleep(0.4)
        print(f"8 queries through node {x} complete and clean ({warned} carried a warning)")
        view = c.wait_view(x, lambda v: corrupt_detected(v, x_id) > before, timeout=30,
                           what=f"node {x}'s repair.corruptDetected to grow")
        holders = wait_healed(c, x, seg, good)
        print(f"segment {seg['id']} healed: copies on {holders}")

        # Round 2: nothing reads the run now, so only the scrub can notice.
        view, segs = wait_replicated(c, x, FACTOR, timeout=30)
        before = corrupt_detected(view, x_id)
        seg2, good2 = corrupt_copy(c, x, segs, {seg["id"]})
        t_flip = time.monotonic()
        view = c.wait_view(x, lambda v: corrupt_detected(v, x_id) > before, timeout=30,
                           what=f"the scrub on node {x} to find the corrupt copy of segment {seg2['id']}")
        print(f"scrub found it {time.monotonic() - t_flip:.1f}s after the flip")
        holders = wait_healed(c, x, seg2, good2)
        print(f"segment {seg2['id']} healed: copies on {holders}; node {x} repair "
              f"{next(n for n in view['nodes'] if n['id'] == x_id).get('repair')}")
        check_cluster(c, wl, "after the corruption", via=x)
    finally:
        wl.stop()


# ---------------------------------------------------------------------------------------------
# 4. Merges under load
# ---------------------------------------------------------------------------------------------


@pytest.mark.needs_cluster
def test_merges_under_load_never_duplicate(repl_cluster):
    """3 nodes, R=2, aggressive merges, ingest for ~15 s with a duplicate watcher (a 25 s run on 2 cores
    saw 253 flushed segments and 110 merge outputs; 15 s proves the same). Merge outputs
    (m-*.seg) are committed; fewer segments remain than were flushed; every segment is replicated
    and the disks hold exactly the listed files (merge inputs deleted); strict check through every
    node; no query returned an event twice."""
    c = repl_cluster(3, extra_args=repl_args(merge_min_age_ms=2000, merge_interval_ms=1000,
                                             merge_small_bytes=10_000_000, merge_target_bytes=50_000_000))
    c.wait_quiet(timeout=60)
    run = marker("merge")
    wl = start_workload(c, run, seed=5404)
    watcher = DuplicateWatcher(c, run, c.up_nodes)
    watcher.start()
    try:
        flushed: set = set()
        merged: set = set()
        staged_seen = 0
        most = 0
        t_end = time.monotonic() + MERGE_LOAD_S
        while time.monotonic() < t_end:
            c.assert_running()
            segs = segments_now(c, 0)
            committed = [s for s in segs if not s.get("staged")]
            flushed |= {s["id"] for s in committed if not is_merge_output(s)}
            merged |= {s["id"] for s in committed if is_merge_output(s)}
            staged_seen += sum(1 for s in segs if s.get("staged"))
            most = max(most, len(committed))
            time.sleep(1.0)
        wl.hold()
        c.mark("workload held")
        watcher.stop()
        print(watcher.summary())
        view, segs = wait_replicated(c, 0, FACTOR, timeout=60)
        final = [s for s in segs["segments"] if not s.get("staged")]
        outputs = [s for s in final if is_merge_output(s)]
        print(f"{len(flushed)} flushed segments seen, {len(merged)} merge outputs seen ({staged_seen} staged "
              f"sightings), at most {most} at once, {len(final)} now ({len(outputs)} merge outputs); "
              f"view replication {view.get('replication')}")
        assert merged and outputs, f"no committed m-*.seg segment\n{format_replication(view, segs)}"
        assert len(final) < len(flushed), f"{len(final)} segments left of {len(flushed)} flushed: merges did not reduce"
        check_cluster(c, wl, "after merges", all_nodes=True)
        wait_disk_matches(c, 0, timeout=30)
        assert not watcher.violations, "queries during merges returned events twice:\n" + "\n".join(
            watcher.violations[:10])
        assert watcher.ok_answers >= 10, f"the watcher got too few answers to prove anything: {watcher.summary()}"
    finally:
        if watcher.is_alive():
            watcher.stop()
        wl.stop()


# ---------------------------------------------------------------------------------------------
# 5. Retention
# ---------------------------------------------------------------------------------------------


def send_events(c: SedimentCluster, run: str, label: str, ts: int, batches: int, per_batch: int) -> set[str]:
    """Sends `batches` humio-structured batches (round-robin over the nodes, tags age=<label> and
    ds=0..3) of `per_batch` events `id=<run>-<label>-<batch>-<i>` stamped `ts` + i ms; every batch
    must be answered 200. Returns the ids."""
    ids: set[str] = set()
    for k in range(batches):
        node = c.node(k % len(c.nodes))
        evs = [{"timestamp": ts + i, "rawstring": f"id={run}-{label}-{k}-{i} retention test"} for i in range(per_batch)]
        r = node.ingest("/api/v1/ingest/humio-structured", [{"tags": {"age": label, "ds": str(k % 4)}, "events": evs}])
        assert r.status_code == 200, f"ingest of {label} batch {k} through node {node.index}: {r.status_code} {r.text}"
        ids |= {f"{run}-{label}-{k}-{i}" for i in range(per_batch)}
    return ids


@pytest.mark.needs_cluster
def test_retention_deletes_expired_segments_everywhere(repl_cluster):
    """3 nodes, R=2. Events stamped 10 days ago and events stamped now (separate datasources);
    once digested and replicated, PUT retention 1 day: the old segments leave the segment list and
    every node's disk; the new events are found exactly once through every node, none of the old."""
    c = repl_cluster(3, extra_args=repl_args())
    c.wait_quiet(timeout=60)
    run = marker("ret")
    wall = now_ms()
    old = send_events(c, run, "old", wall - 10 * DAY_MS, batches=8, per_batch=10)
    new = send_events(c, run, "new", wall, batches=8, per_batch=10)

    def all_found():
        ans = query_run(c.node(0), run)
        return ans.status == 200 and (old | new) <= set(ans.found)

    wait_until(all_found, timeout=60, interval=0.5, what="old and new events searchable")
    c.wait_view(0, lambda v: all(p["bufferedEvents"] == 0 and p["lag"] == 0 for p in v["partitions"]), timeout=30,
                what="everything flushed to segments")
    view, segs = wait_replicated(c, 0, FACTOR, timeout=60)
    cutoff = now_ms() - DAY_MS
    expired = [s for s in segs["segments"] if s["maxTs"] < cutoff]
    assert expired, f"no segment holds only old events\n{format_replication(view, segs)}"
    expired_files = {segment_file_name(s) for s in expired}
    print(f"{len(expired)} of {len(segs['segments'])} segments expire under a 1-day retention")

    n0 = c.node(0)
    url = f"{n0.url}/api/v1/repositories/{n0.repo}/retention"
    body = {"retentionMs": DAY_MS, "retentionBytes": 0}
    r = requests.put(url, json=body, timeout=10)
    assert r.status_code in (401, 403), f"PUT retention without a token answered {r.status_code} {r.text[:200]}"
    r = requests.put(url, json=body, headers={"Authorization": f"Bearer {n0.api_token}"}, timeout=10)
    assert r.status_code == 200, f"PUT retention answered {r.status_code} {r.text[:300]}"
    stored = r.json()
    assert stored.get("retentionMs") == DAY_MS and stored.get("retentionBytes") == 0, f"stored {stored}"
    t_put = c.mark("retention 1 day set")

    def gone():
        segs_now = segments_now(c, 0)
        left = [s for s in segs_now if s["maxTs"] < now_ms() - DAY_MS]
        on_disk = {n.index: sorted(expired_files & set(segment_files(n))) for n in c.nodes}
        on_disk = {i: f for i, f in on_disk.items() if f}
        return None if left or on_disk else True

    wait_until(gone, timeout=45, interval=0.5, what="expired segments gone from the list and from every disk")
    print(f"expired segments gone {time.monotonic() - t_put:.1f}s after the PUT")
    for n in c.up_nodes():
        ans = query_run(n, run)
        assert ans.status == 200, f"query through node {n.index}: {ans.status} {ans.body[:300]}"
        old_found = sorted(set(ans.found) & old)
        v = evaluate(new, new | old, Counter({i: k for i, k in ans.found.items() if i not in old}), ans.warnings)
        print(f"retention check via node {n.index}: {v.report}, old found {len(old_found)}")
        assert not old_found, f"node {n.index} still finds {len(old_found)} expired events, e.g. {old_found[:5]}"
        assert v.ok, f"via node {n.index}: {'; '.join(v.problems)}"
    print(f"disk matches the list: {len(wait_disk_matches(c, 0, timeout=20)['segments'])} segments")


# ---------------------------------------------------------------------------------------------
# 6. A node returns after the global topic was truncated past its snapshots
# ---------------------------------------------------------------------------------------------

SNAPSHOT_RE = r"snapshot-(\d{20})\.bin$"
TRUNCATED_RE = r"global topic truncated below offset (\d+)"
FALLBACK_RE = r"starting from a peer's snapshot instead"
RELOADED_RE = r"global: loaded a newer state through offset (\d+)"


def newest_snapshot(node) -> int:
    """The offset of the newest Global snapshot file in the node's data dir (-1 none)."""
    d = node.data_dir / "global-snapshots"
    offs = [int(m.group(1)) for p in d.iterdir() if (m := re.search(SNAPSHOT_RE, p.name))] if d.exists() else []
    return max(offs, default=-1)


def wait_global_truncated_past(c: SedimentCluster, i: int, offset: int, timeout: float) -> None:
    """Waits until node i logs a truncation of the global topic below an offset above `offset`."""
    def truncated_past():
        offs = [int(m) for ln in log_lines(c.node(i), TRUNCATED_RE, all_runs=False)
                for m in re.findall(TRUNCATED_RE, ln)]
        return max(offs, default=-1) > offset

    wait_until(truncated_past, timeout=timeout, what=f"node {i} truncating the global topic past {offset}")


@pytest.mark.needs_cluster
def test_node_returns_after_global_topic_truncated_past_its_snapshots(repl_cluster):
    """2 nodes, a snapshot every 10 Global events. Node 1 stops (SIGTERM: its final snapshot is
    at offset S); ingest through node 0 makes snapshots there and node 0, the only live node,
    truncates the global topic beyond S + 1. Node 1 starts again: its own snapshots can no longer
    be replayed, so it loads node 0's (log line), serves, and the strict check passes through both
    nodes."""
    c = repl_cluster(2, extra_args=repl_args(global_snapshot_every=10, maintenance_interval_ms=500))
    c.wait_quiet(timeout=60)
    run = marker("gtrunc")
    wl = start_workload(c, run, seed=5606)
    try:
        time.sleep(3.0)
        c.stop_node(1)
        stale = newest_snapshot(c.node(1))
        assert stale >= 0, "node 1 wrote no Global snapshot"
        wait_global_truncated_past(c, 0, stale + 1, timeout=60)
        c.launch(1)
        c.wait_up(1)
        lines = log_lines(c.node(1), FALLBACK_RE, all_runs=False)
        assert lines, f"node 1 did not fall back to a peer's snapshot\n{c.node(1).describe()}"
        print(f"node 1: stale snapshot {stale}; {lines[0]}")
        time.sleep(3.0)
        wl.hold()
        c.mark("workload held")
        check_cluster(c, wl, "after node 1 returned past the truncation", all_nodes=True)
    finally:
        wl.stop()


@pytest.mark.needs_cluster
def test_paused_node_follows_again_after_global_topic_truncated_past_it(repl_cluster):
    """Regression (chaos campaign, seed 7 with `pause`): 2 nodes, a snapshot every 10 Global
    events. Node 1 is SIGSTOPped past the heartbeat timeout, so node 0 (alone alive) truncates the
    global topic past what node 1 had applied. After SIGCONT node 1's log no longer holds its next
    event: it must load node 0's state (status: stateReloads 1, no followError), follow the log
    again and serve; the strict check passes through both nodes. Before the fix its tailer stopped
    for good ("the state cannot follow the log") and its partitions stayed unclaimed."""
    c = repl_cluster(2, extra_args=repl_args(global_snapshot_every=10, maintenance_interval_ms=500))
    c.wait_quiet(timeout=60)
    run = marker("gpause")
    wl = start_workload(c, run, seed=5607)
    try:
        time.sleep(3.0)
        applied = c.node(1).status()["globalApplied"]
        c.pause(1)
        wait_global_truncated_past(c, 0, applied + 1, timeout=90)
        c.resume(1)

        def followed():
            st = c.node(1).status()
            g = st["globalLog"]
            return st if g["stateReloads"] >= 1 and g["followError"] == "" else None

        st = wait_until(followed, timeout=60, what="node 1 loading a newer state and following the log")
        lines = log_lines(c.node(1), RELOADED_RE, all_runs=False)
        assert lines, f"node 1 logged no state reload\n{c.node(1).describe()}"
        print(f"node 1: applied {applied} before SIGSTOP; {lines[0]}; status globalApplied {st['globalApplied']}")
        time.sleep(3.0)
        wl.hold()
        c.mark("workload held")
        check_cluster(c, wl, "after node 1 resumed past the truncation", all_nodes=True)
    finally:
        wl.stop()


# ---------------------------------------------------------------------------------------------
# Pure helper tests (no processes)
# ---------------------------------------------------------------------------------------------


def _seg(sid, replicas, *, staged=False, size=10, file=None, ts=1000, p=0, lo=0, hi=9):
    return {"id": sid, "partition": p, "minOffset": lo, "maxOffset": hi, "maxTs": ts, "replicas": replicas,
            "liveReplicas": len(replicas), "staged": staged, "fileSize": size, "file": file or f"f{sid}"}


def _rview(**over):
    v = {"replication": {"factor": 2, "segments": 2, "underReplicated": 0, "underReplicatedBytes": 0,
                         "withoutLiveCopy": 0, "lost": 0, "stagedMerges": 0}}
    v["replication"].update(over)
    return v


def test_replication_problems_rule():
    segs = {"factor": 2, "segments": [_seg(1, [1, 2]), _seg(2, [2, 3]), _seg(3, [3], staged=True)]}
    assert replication_problems(_rview(), segs, 2, {1, 2, 3}) == []
    # a dead holder does not count; staged segments are not judged
    probs = replication_problems(_rview(), segs, 2, {1, 2})
    assert len(probs) == 1 and "1 segments with fewer than 2 live replicas" in probs[0] and " 2 f2" in probs[0]
    assert replication_problems(_rview(), segs, 2, {1, 2}, pred=lambda s: s["id"] == 1) == []
    assert [s["id"] for s in under_replicated(segs, {1}, 2)] == [1, 2]
    assert any("withoutLiveCopy 1" in p for p in replication_problems(_rview(withoutLiveCopy=1), segs, 2, {1, 2, 3}))
    assert any("lost 2" in p for p in replication_problems(_rview(lost=2), segs, 2, {1, 2, 3}))
    assert any("factor 3" in p for p in replication_problems(_rview(factor=3), segs, 2, {1, 2, 3}))
    assert any("no replication block" in p for p in replication_problems({}, segs, 2, {1, 2, 3}))
    # copies on disk: absent or of the wrong size
    sizes = {(1, "f1.seg"): 10, (2, "f1.seg"): 10, (2, "f2.seg"): 10, (3, "f2.seg"): 9}
    probs = replication_problems(_rview(), segs, 2, {1, 2, 3}, file_size=lambda n, f: sizes.get((n, f)))
    assert len(probs) == 1 and "node 3 f2.seg: 9 bytes, want 10" in probs[0]
    del sizes[(1, "f1.seg")]
    probs = replication_problems(_rview(), segs, 2, {1, 2, 3}, file_size=lambda n, f: sizes.get((n, f)))
    assert "node 1 f1.seg: absent" in probs[0]


def test_segment_names_and_merge_outputs():
    assert segment_file_name({"file": "p1-e2-o3-i4"}) == "p1-e2-o3-i4.seg"
    assert segment_file_name({"file": "segments/m-7.seg"}) == "m-7.seg"
    assert is_merge_output({"file": "m-abc"}) and not is_merge_output({"file": "p1-e2-o3-i4.seg"})
    node = SimpleNamespace(data_dir=__import__("pathlib").Path("/d"))
    assert str(segment_path(node, {"file": "x"})) == "/d/segments/x.seg"


def test_new_segment_bounds():
    segs = [_seg(1, [1], p=0, lo=50), _seg(2, [1], p=0, lo=40), _seg(3, [1, 2], p=0, lo=10),
            _seg(4, [1], p=1, lo=5), _seg(5, [1], p=2, lo=7, file="m-5"), _seg(6, [1], p=3, lo=1, staged=True)]
    assert new_segment_bounds(segs, {4}, 2) == {0: 40}


def test_disk_problems_and_flip_bytes(tmp_path):
    nodes = []
    for i, nid in enumerate((11, 12)):
        d = tmp_path / f"n{i}" / "segments"
        d.mkdir(parents=True)
        nodes.append(SimpleNamespace(index=i, node_id=nid, data_dir=d.parent))
    (nodes[0].data_dir / "segments" / "a.seg").write_bytes(b"x" * 64)
    (nodes[1].data_dir / "segments" / "a.seg").write_bytes(b"x" * 64)
    (nodes[1].data_dir / "segments" / "old.seg").write_bytes(b"y")
    cl = SimpleNamespace(up_nodes=lambda: nodes)
    segs = {"segments": [_seg(1, [11, 12], file="a"), _seg(2, [11], file="b", staged=True)]}
    probs = disk_problems(cl, segs)
    assert len(probs) == 2 and "node 0 (id 11) lacks 1 listed files" in probs[0] and "b.seg" in probs[0]
    assert "node 1 (id 12) has 1 unlisted files" in probs[1] and "old.seg" in probs[1]
    p = nodes[0].data_dir / "segments" / "a.seg"
    at = flip_bytes(p, n=4)
    data = p.read_bytes()
    assert len(data) == 64 and at == 30 and data[30:34] == bytes([ord("x") ^ 0xFF]) * 4 and data[:30] == b"x" * 30


def test_parse_kcat_offsets():
    text = "cl-1-ingest [0] offset 17\ncl-1-ingest [3] offset 0\n"
    assert parse_kcat_offsets(text) == {0: 17, 3: 0}


def test_repl_args():
    a = repl_args(scrub_interval_ms=3000)
    assert a[a.index("--replication-factor") + 1] == "2" and a[a.index("--scrub-interval-ms") + 1] == "3000"
    assert json.dumps(a)  # plain strings
    assert format_view({}) and format_replication(_rview(), {"segments": [_seg(1, [1])], "factor": 2})

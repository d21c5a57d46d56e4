"""Bucket storage in a 3-node sediment cluster (issue 6; DESIGN section 8, P2, P3, P4) on one real
Kafka broker and a local S3 server (moto's server mode, scripts/s3/moto.py), all on loopback,
segment replication factor 1 (the bucket is the durable copy).

1. wiped node: kill -9 a node once its segments are in the bucket and wipe its disk: queries
   through the survivors fetch its segments from the bucket (X-Sediment-Bucket-Fetches > 0) and
   the strict exactly-once check passes with it down; restarted on the wiped dir: still complete.
2. S3 outage: moto stopped for several flush intervals under sustained ingest: every ingest
   request is answered 200, the upload backlog is visible, and neither the safe offset, the
   recorded truncation, the view's log start nor Kafka's real start offset passes the oldest
   segment that is not in the bucket; moto back: the backlog drains, truncation moves on, strict
   check through every node.
3. full disaster: everything in the bucket, then every node and the broker killed, every data
   dir wiped, a brand-new Kafka in a new dir; new nodes with --recover-from-bucket: the recovery
   report loses nothing, every acknowledged event is found exactly once, new ingest works. The
   figure: recovery time from launching the new nodes to the first complete answer and MB/s.

Fails (no skip) when the binary lacks the bucket flags; skipped like every cluster test without
java/kcat.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time

import pytest

from cluster_harness import (
    ClusterWorkload,
    FIGURES,
    KafkaCluster,
    S3_ENV,
    SedimentCluster,
    bucket_args,
    bucket_view,
    by_partition,
    check_cluster,
    cluster_segments,
    evaluate,
    format_replication,
    format_view,
    kafka_start_offsets,
    log_lines,
    marker,
    new_bucket_name,
    not_uploaded_bounds,
    now_ms,
    query_run,
    query_run_headers,
    recovery_report,
    running_moto,
    wait_bucket_snapshot,
    wait_bucket_uploaded,
    wait_truncated_past,
    wait_until,
)

pytestmark = pytest.mark.needs_cluster

CLIENTS = 4
SAFE_OFFSET_INTERVAL_MS = 1000
OUTAGE_S = 8.0  # 8 flush intervals of the harness's 1000 ms
NEW_KAFKA_TIMEOUT = 180.0
# Bulk events of the disaster scenario (about 2 MB of segments): the recovery's MB figure.
BULK_BATCHES = 12
BULK_PER_BATCH = 1000
BULK_RANDOM_BYTES = 80


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """One moto server for the module (each test has its own bucket); killed by pid at the end."""
    yield from running_moto(tmp_path_factory.mktemp("s3"))


def bucket_cluster_args(s3, bucket: str, *, recover: bool = False, create: bool = True, **more) -> list[str]:
    """Flags of every node: bucket storage in `bucket`, R = 1, merges off, short intervals."""
    flags = {"replication_factor": 1, "safe_offset_interval_ms": SAFE_OFFSET_INTERVAL_MS, "merge_small_bytes": 0,
             "maintenance_interval_ms": 1000}  # the maintenance pass uploads the bucket snapshots
    flags.update(more)
    return bucket_args(s3.endpoint(), bucket, "cl/", create=create, recover=recover, **flags)


def start_workload(c: SedimentCluster, run: str, seed: int) -> ClusterWorkload:
    wl = ClusterWorkload(c, run, CLIENTS, seed=seed)
    wl.__enter__()
    wl.wait_for_ok_started_after(c.t0, timeout=30, what="first acknowledged ingest")
    return wl


class BackgroundStart(threading.Thread):
    """Starts a KafkaCluster off the main thread (its processes do not die with the thread);
    wait() re-raises a failure. The cluster is stopped by the caller (KafkaCluster.stop, by pid)."""

    def __init__(self, kafka: KafkaCluster):
        super().__init__(name="kafka-start", daemon=True)
        self.kafka = kafka
        self.error: BaseException | None = None
        self.seconds = 0.0
        self.start()

    def run(self) -> None:
        t0 = time.monotonic()
        try:
            self.kafka.start(timeout=NEW_KAFKA_TIMEOUT)
        except BaseException as e:  # noqa: BLE001 - re-raised by wait()
            self.error = e
        self.seconds = time.monotonic() - t0

    def wait(self) -> None:
        self.join(NEW_KAFKA_TIMEOUT + 30)
        assert not self.is_alive(), f"the new Kafka did not start within {NEW_KAFKA_TIMEOUT} s"
        if self.error is not None:
            raise AssertionError(f"starting the new Kafka failed: {self.error}")


def send_bulk(c: SedimentCluster, run: str, batches: int = BULK_BATCHES, per_batch: int = BULK_PER_BATCH) -> set[str]:
    """Larger events for the MB figures: `batches` humio-structured requests (round-robin over
    the nodes, tags bulk=0..3) of `per_batch` events `id=<run>-<batch>-<i> <random hex>`; each
    must be answered 200. Returns the ids."""
    ids: set[str] = set()
    for k in range(batches):
        node = c.node(k % len(c.nodes))
        batch = [f"{run}-{k}-{i}" for i in range(per_batch)]
        evs = [{"timestamp": now_ms(), "rawstring": f"id={i} bulk {os.urandom(BULK_RANDOM_BYTES).hex()}"}
               for i in batch]
        r = node.ingest("/api/v1/ingest/humio-structured", [{"tags": {"bulk": str(k % 4)}, "events": evs}])
        assert r.status_code == 200, f"bulk batch {k} via node {node.index}: {r.status_code} {r.text[:300]}"
        ids.update(batch)
    return ids


# ---------------------------------------------------------------------------------------------
# 1. A wiped node's segments come from the bucket
# ---------------------------------------------------------------------------------------------


def test_wiped_node_is_served_from_the_bucket(make_cluster, s3):
    """R = 1 and a long repair grace: once everything is uploaded, node V is killed and wiped;
    the survivors fetch V's segments from the bucket and the strict check passes through each;
    V restarted on its empty dir: the strict check passes through every node. Last: the view taken
    after the takeover, before any query, must not have called V's (uploaded) segments
    unreachable."""
    rng = random.Random(6101)
    bucket = new_bucket_name()
    c = make_cluster(3, extra_args=bucket_cluster_args(s3, bucket, repair_grace_ms=120000), extra_env=S3_ENV)
    c.wait_quiet(timeout=60)
    run = marker("bwipe")
    wl = start_workload(c, run, seed=6101)
    try:
        time.sleep(5.0)
        wl.hold()
        c.mark("workload held")
        wait_bucket_uploaded(c, 0)
        segs = cluster_segments(c, 0)["segments"]
        holders = {r for s in segs for r in s["replicas"]}
        cands = [n.index for n in c.nodes if n.node_id in holders]
        assert cands, f"no node holds a segment\n{format_replication(c.cluster_view(0), {'segments': segs})}"
        victim = rng.choice(cands)
        vid = c.node(victim).node_id
        on_victim = [s for s in segs if vid in s["replicas"]]
        survivors = [i for i in range(3) if i != victim]
        print(f"victim node {victim} (id {vid}) holds {len(on_victim)} of {len(segs)} segments "
              f"({sum(s['fileSize'] for s in on_victim)} bytes), all uploaded")

        t_kill = c.kill(victim)
        c.wipe(victim)
        acked = wl.acked_ids()
        via = survivors[0]
        # Takeover done; the view may still warn (checked below, after the queries).
        c.wait_quiet(via, timeout=90, allow_warnings=True)
        view_before = c.cluster_view(via)
        ans, hdr = query_run_headers(c.node(via), run)
        t_first = c.mark(f"first query via node {via} after the wipe: {hdr}")
        assert ans.status == 200, f"query via node {via}: {ans.status} {ans.body}"
        missing = acked - set(ans.found)
        dups = [i for i, k in ans.found.items() if k > 1]
        assert not missing and not dups and not hdr["warnings"], (
            f"via node {via} with node {victim} wiped: {len(missing)} missing (e.g. {sorted(missing)[:5]}), "
            f"{len(dups)} twice, warnings {hdr['warnings'][:3]}")
        assert hdr["fetches"] > 0, (f"node {victim}'s {len(on_victim)} segments exist only in the bucket now, yet the "
                                    f"query via node {via} reports {hdr['fetches']} bucket fetches")
        line = (f"bucket: wiped node's {len(on_victim)} segments served from the bucket {t_first - t_kill:.1f} s after "
                f"kill -9 ({hdr['fetches']} fetches, {hdr['fetchedBytes']} bytes, query {ans.elapsed:.2f} s)")
        print(line)
        FIGURES.append(line)
        wl.release()
        time.sleep(3.0)
        wl.hold()
        c.mark("workload held")
        check_cluster(c, wl, "wiped node down", all_nodes=True)

        c.launch(victim)
        c.wait_up(victim)
        assert c.node(victim).node_id != vid, f"wiped node came back with its old id {vid}"
        wl.release()
        time.sleep(4.0)
        wl.hold()
        c.mark("workload held")
        print(f"ingest answers: {wl.status_counts()}")
        check_cluster(c, wl, "wiped node back", all_nodes=True)
        # The bucket holds every segment of the wiped node: the view must not have called them
        # unreachable (before the first query fetched them).
        unreachable = view_before.get("segments", {}).get("unreachable")
        assert not unreachable, (
            f"with every segment in the bucket, the view after the takeover (before any query) reported "
            f"{unreachable} unreachable segments, warnings {view_before.get('warnings')}\n{format_view(view_before)}")
    finally:
        wl.stop()


# ---------------------------------------------------------------------------------------------
# 2. S3 outage under sustained ingest
# ---------------------------------------------------------------------------------------------


def test_s3_outage_holds_truncation_and_loses_nothing(make_cluster, s3):
    bucket = new_bucket_name()
    c = make_cluster(3, extra_args=bucket_cluster_args(s3, bucket), extra_env=S3_ENV)
    c.wait_quiet(timeout=60)
    run = marker("bout")
    wl = start_workload(c, run, seed=6202)
    try:
        time.sleep(3.0)

        def truncated(v):
            return all(p["logStart"] > 0 for p in v["partitions"] if p["logEnd"] > 0)

        before = c.wait_view(0, truncated, timeout=30, what="the commit log truncated behind the uploads")
        print("before the outage:\n" + format_replication(before))

        t_stop0 = time.monotonic()
        s3.stop()
        t_down = c.mark(f"moto stopped (the stop took {time.monotonic() - t_stop0:.1f} s)")
        seen: dict[int, int] = {}
        backlog: list[int] = []
        checks = kafka_checks = 0
        next_kafka = 0.0
        while time.monotonic() - t_down < OUTAGE_S:
            c.assert_running()
            segs = cluster_segments(c, 0)
            view = c.cluster_view(0)
            bounds = not_uploaded_bounds(segs)
            parts = by_partition(view)
            for p, lo in bounds.items():
                seen[p] = min(seen.get(p, lo), lo)
                for k in ("safeOffset", "truncatedBefore", "logStart"):
                    assert parts[p][k] <= lo, (f"p{p}: {k} {parts[p][k]} beyond minOffset {lo} of a segment not in the "
                                               f"bucket\n" + format_replication(view, segs))
            if bounds and time.monotonic() >= next_kafka:
                real = kafka_start_offsets(c, bounds)
                bad = {p: (real[p], lo) for p, lo in bounds.items() if real[p] > lo}
                assert not bad, f"Kafka truncated beyond segments not in the bucket (start, minOffset): {bad}"
                kafka_checks += 1
                next_kafka = time.monotonic() + 2.0
            backlog.append(view["bucket"].get("backlogSegments", 0))
            checks += 1
            time.sleep(0.5)
        out_view = c.cluster_view(0)
        t_start0 = time.monotonic()
        s3.start()
        t_up = c.mark(f"moto serving again (start and restore took {time.monotonic() - t_start0:.1f} s)")
        in_outage = [r for r in wl.records() if t_down <= r.start <= t_up]
        failed = [r for r in in_outage if r.status != 200]
        print(f"outage {t_up - t_down:.1f} s: {len(in_outage)} ingest requests, {len(failed)} not 200; "
              f"backlog samples {backlog}; {checks} truncation checks ({kafka_checks} against Kafka), "
              f"held back at {seen}; bucket {json.dumps(out_view.get('bucket'))}")
        assert in_outage and not failed, (
            f"ingest during the S3 outage: {[(r.status, r.body[:100]) for r in failed[:5]]}")
        assert seen, "no segment stayed out of the bucket during the outage: the checks proved nothing"
        assert max(backlog) >= 3 and kafka_checks >= 2, f"backlog {backlog}, {kafka_checks} Kafka checks"

        time.sleep(2.0)
        wl.hold()
        c.mark("workload held")
        view = wait_bucket_uploaded(c, 0, timeout=60)
        t_drained = c.mark("backlog drained")

        view = wait_truncated_past(c, 0, seen, "the held-back segments' minOffset")
        line = (f"bucket outage: {t_up - t_down:.1f} s without S3 under ingest ({len(in_outage)} requests, all 200), "
                f"backlog up to {max(backlog)} segments, drained {t_drained - t_up:.1f} s after S3 returned; "
                f"truncation held at {len(seen)} partitions")
        print(line)
        FIGURES.append(line)
        check_cluster(c, wl, "after the S3 outage", all_nodes=True)
    finally:
        wl.stop()


# ---------------------------------------------------------------------------------------------
# 3. Full disaster: a new cluster on a new Kafka from the bucket alone
# ---------------------------------------------------------------------------------------------


@pytest.mark.leaves_broker_down
def test_full_disaster_recovery_from_the_bucket(make_cluster, s3, tmp_path):
    bucket = new_bucket_name()
    c = make_cluster(3, extra_args=bucket_cluster_args(s3, bucket), extra_env=S3_ENV)
    c.wait_quiet(timeout=60)
    run = marker("bdr")
    # The new, empty Kafka of the rebuilt cluster starts meanwhile (it takes ~40 s on 2 cores).
    kafka2 = KafkaCluster(tmp_path / "kafka-new", brokers=1)
    starter = BackgroundStart(kafka2)
    wl = start_workload(c, run, seed=6303)
    try:
        time.sleep(3.0)
        bulk_run = marker("bulk")
        bulk = send_bulk(c, bulk_run)
        time.sleep(3.0)
        wl.hold()
        c.mark("workload held")
        wait_bucket_uploaded(c, 0)
        _, snap_off, snap_key = wait_bucket_snapshot(c, 0, s3.endpoint(), bucket)
        segs = [s for s in cluster_segments(c, 0)["segments"] if not s.get("staged")]
        old_gen = bucket_view(c, 0).get("generation")
        seg_bytes = sum(s["fileSize"] for s in segs)
        seg_events = sum(s["events"] for s in segs)
        print(f"before the disaster: {len(segs)} segments, {seg_events} events, {seg_bytes} bytes in the bucket; "
              f"newest snapshot {snap_key}; {len(wl.acked_ids())} events acknowledged")
        wl.stop()

        for n in c.nodes:
            c.kill(n.index)
        c.kill_broker()
        for n in c.nodes:
            c.wipe(n.index)
        c.mark("every node and the broker killed, data dirs wiped")

        starter.wait()
        c.mark(f"new Kafka serving ({starter.seconds:.1f} s to start)")
        r = SedimentCluster(kafka2, tmp_path / "recovered", 3,
                            extra_args=bucket_cluster_args(s3, bucket, recover=True, create=False), extra_env=S3_ENV)
        make_cluster.clusters.append(r)  # stopped at teardown, logs attached on failure
        t_launch = time.monotonic()
        r.start()
        t_serving = time.monotonic() - t_launch
        acked = wl.acked_ids()

        def complete():
            ans = query_run(r.node(0), run)
            if ans.status != 200 or not acked <= set(ans.found):
                return None
            ans_bulk = query_run(r.node(0), bulk_run)
            return ans if ans_bulk.status == 200 and bulk <= set(ans_bulk.found) else None

        try:
            ans = wait_until(complete, timeout=90, interval=0.1,
                             what="every acknowledged event found after the recovery")
        except AssertionError as e:
            raise AssertionError(f"{e}\nrecovery reports: {[recovery_report(r, i) for i in range(3)]}") from None
        t_complete = time.monotonic() - t_launch
        r.mark(f"first complete answer {t_complete:.1f} s after launch")

        reports = {i: recovery_report(r, i) for i in range(3)}
        rec = reports[0]
        assert isinstance(rec, dict), f"no recovery report on node 0: {reports}"
        assert all(x == rec for x in reports.values()), f"nodes report different recoveries: {reports}"
        problems = []
        if rec.get("lostSegments") != 0 or rec.get("lostEvents") != 0 or rec.get("lost"):
            problems.append(f"lost {rec.get('lostSegments')} segments / {rec.get('lostEvents')} events: "
                            f"{rec.get('lost')}")
        if rec.get("keptSegments", 0) + rec.get("addedSegments", 0) != len(segs):
            problems.append(f"kept {rec.get('keptSegments')} + added {rec.get('addedSegments')}, want {len(segs)}")
        if rec.get("keptEvents") != seg_events:
            problems.append(f"keptEvents {rec.get('keptEvents')}, want {seg_events}")
        if (rec.get("snapshotOffset", -1) < snap_off
                or rec.get("snapshotKey", "").rsplit("/", 1)[-1] < snap_key.rsplit("/", 1)[-1]):
            problems.append(f"snapshot {rec.get('snapshotKey')} at {rec.get('snapshotOffset')} older than {snap_key}")
        if not rec.get("generation", 0) > (old_gen or 0):
            problems.append(f"generation {rec.get('generation')}, the old cluster had {old_gen}")
        assert not problems, "recovery report: " + "; ".join(problems) + f"\n{json.dumps(rec)}"
        leaders = [n.index for n in r.nodes if log_lines(n, r"recovery: generation \d+ from")]
        print(f"recovered by node(s) {leaders}; report {json.dumps({k: v for k, v in rec.items() if k != 'lost'})}")
        assert len(leaders) == 1, f"nodes that logged building the recovered state: {leaders}"

        mb = (rec.get("keptBytes") or 0) / 1e6
        line = (f"bucket disaster recovery: {mb:.2f} MB ({rec.get('keptSegments')} + {rec.get('addedSegments')} "
                f"segments, {rec.get('keptEvents')} events) on a new Kafka in {t_complete:.1f} s from launching 3 new "
                f"nodes to the first complete answer ({mb / t_complete:.2f} MB/s; serving after {t_serving:.1f} s)")
        print(line)
        FIGURES.append(line)

        # Everything that was acknowledged is there exactly once through every node.
        check_cluster(r, wl, "recovered", all_nodes=True)
        for n in r.nodes:
            ans = query_run(n, bulk_run)
            v = evaluate(bulk, bulk, ans.found, ans.warnings)
            print(f"bulk check via node {n.index}: {v.report}")
            assert ans.status == 200 and v.ok, f"bulk events via node {n.index}: {ans.status} {'; '.join(v.problems)}"
        # New ingest on the recovered cluster.
        run2 = marker("bdr2")
        wl2 = start_workload(r, run2, seed=6304)
        try:
            time.sleep(3.0)
            wl2.hold()
            r.mark("new workload held")
            check_cluster(r, wl2, "new ingest after the recovery", all_nodes=True)
        finally:
            wl2.stop()
    finally:
        wl.stop()
        starter.join(NEW_KAFKA_TIMEOUT + 30)
        for cl in make_cluster.clusters:  # nodes on the new broker go before it
            if cl.kafka is kafka2:
                cl.stop_all()
        kafka2.stop()

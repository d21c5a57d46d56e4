#!/usr/bin/env python3
"""Seeded chaos campaign for a sediment cluster (issue 13): each run is a fresh N-node cluster on a
B-broker Kafka (replication factor 3, min.insync.replicas 2) with a moto S3 bucket and segment
replication factor 2, under continuous ingest of unique ids from several clients, while a random
sequence of faults drawn from the run's seed hits it:

    kill    kill -9 a node, restart it 0-8 s later
    pause   SIGSTOP a node for 1.2-2.5 session timeouts, then SIGCONT
    broker  kill -9 one Kafka broker for 3-12 s, then restart it
    s3      the bucket endpoint refuses connections for 5-20 s (a TCP forwarder in front of moto
            is shut, open connections reset), then serves again on the same port
    disk    fill a node's data dir (its own small tmpfs) with a filler file for 5-15 s
    bitrot  flip 16 bytes in one closed file of a node: a sealed segment (.seg, written at least
            5 s ago) or a Global snapshot other than the newest
    wipe    kill -9 a node, wipe its data dir, start it again 0-5 s later (a new node id)

At most one node is down or paused and at most one broker down at a time; outages, full disks and
flipped bytes overlap with everything. At the end of a run everything is healed, the workload held
and a history checker queries the run through every node: every event answered 200 found exactly
once, every event answered with an error at most once, nothing nobody sent, no warning; a thread
queried all along and no answer may have held an event twice (DuplicateWatcher).

    python3 scripts/chaos.py --seed 1 --runs 100 --minutes 1 [--nodes 3] [--brokers 3]
        [--faults kill,pause,broker,s3,disk,bitrot,wipe] [--out DIR] [--keep]

Run k uses seed S+k (replay one run with `--seed S+k --runs 1`); the seed fixes the fault sequence
(kinds, targets, durations, gaps) and the workload's choices, not the processes' timing. One line
per run and a final `runs N, faults injected F, events acknowledged A, lost L, duplicated D`. Exit
1 when any run lost or duplicated an event or failed otherwise (a node exited on its own, the
cluster did not settle); each failed run prints its replay command and fault timeline and keeps
its folder (node logs, the data dirs of tmpfs nodes, moto's log) under --out. The `disk` fault
mounts a tmpfs per node (root only); where mount is refused it is left out with the reason printed.
Brokers, moto and nodes run on 127.0.0.1 and are stopped by pid, also on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "cluster"))

from cluster_harness import (  # noqa: E402
    S3_ENV,
    ClusterWorkload,
    DuplicateWatcher,
    KafkaCluster,
    SedimentCluster,
    bucket_args,
    bucket_support,
    check_cluster,
    cluster_support,
    evaluate,
    flip_bytes,
    marker,
    moto_server,
    new_bucket_name,
    query_run,
    summarize,
)
from harness import free_port, moto_module  # noqa: E402 - tests/e2e, put on sys.path by cluster_harness

# Nodes log their Kafka clients' idempotence and transaction state changes (librdkafka `debug=eos`:
# producer ids, epoch bumps, drains, implicitly acknowledged messages), so a run that loses an
# acknowledged event shows what the producer believed.
KAFKA_DEBUG_ENV = {"SEDIMENT_KAFKA_DEBUG": "eos"}

ALL_FAULTS = ("kill", "pause", "broker", "s3", "disk", "bitrot", "wipe")
NODE_FAULTS = ("kill", "pause", "wipe")  # make a node unavailable: one at a time
DISK_MB = 256
QUIET_TIMEOUT = 120.0
KAFKA_START_TIMEOUT = 180.0
SEG_MIN_AGE_S = 5.0


class RunFailure(Exception):
    pass


@dataclass
class RunResult:
    index: int
    seed: int
    faults: list[str] = field(default_factory=list)
    acked: int = 0
    lost: int = 0
    duplicated: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # not failures: e.g. a node that refused to start once
    timeline: str = ""
    folder: Path | None = None

    @property
    def ok(self) -> bool:
        return not self.problems and self.lost == 0 and self.duplicated == 0

    def kinds(self) -> str:
        counts: dict[str, int] = {}
        for f in self.faults:
            counts[f.split()[0]] = counts.get(f.split()[0], 0) + 1
        return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


def replay_command(seed: int, minutes: float, nodes: int, brokers: int, faults: list[str]) -> str:
    return (f"python3 scripts/chaos.py --seed {seed} --runs 1 --minutes {minutes:g} --nodes {nodes} "
            f"--brokers {brokers} --faults {','.join(faults)}")


# ---- the S3 outage ---------------------------------------------------------------------------
#
# The nodes reach moto through a TCP forwarder on a port of their own: the outage closes the
# forwarder's listening socket and resets every open connection (clients get "connection refused",
# as from a stopped server), the end of the outage listens on the same port again. moto itself keeps
# running: stopping it (scripts/s3/moto.py stop/start keeps the objects by snapshotting them over
# the S3 API) loses an object whose PUT is answered 200 while the snapshot is being taken, which is
# no outage a real bucket has (seed 1313 of the first version lost a segment that way).


class S3Gate:
    """A loopback TCP forwarder 127.0.0.1:port -> 127.0.0.1:target_port that can be shut (refusing
    and resetting connections) and opened again on the same port. Threads are daemons; close()
    stops everything."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.port = free_port()
        self._mu = threading.Lock()
        self._listener: socket.socket | None = None
        self._conns: set[socket.socket] = set()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def is_open(self) -> bool:
        return self._listener is not None

    def open(self) -> None:
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        deadline = time.monotonic() + 30
        while True:
            try:
                ls.bind(("127.0.0.1", self.port))
                break
            except OSError:
                if time.monotonic() > deadline:
                    ls.close()
                    raise
                time.sleep(0.2)
        ls.listen(64)
        self._listener = ls
        threading.Thread(target=self._accept, args=(ls,), name="s3-gate", daemon=True).start()

    def shut(self) -> None:
        ls, self._listener = self._listener, None
        if ls is not None:
            try:
                ls.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            ls.close()
        with self._mu:
            conns, self._conns = self._conns, set()
        for c in conns:
            try:
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
                c.close()
            except OSError:
                pass

    close = shut

    def _accept(self, ls: socket.socket) -> None:
        while True:
            try:
                client, _ = ls.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._mu:
                if self._listener is not ls:  # shut meanwhile
                    client.close()
                    upstream.close()
                    return
                self._conns.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), name="s3-gate-pump", daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        with self._mu:
            for sock in (src, dst):
                if sock in self._conns:
                    self._conns.discard(sock)
                    sock.close()


# ---- tmpfs data dirs (the `disk` fault) ------------------------------------------------------


def mount_tmpfs(path: Path, mb: int) -> str | None:
    """Mounts a tmpfs of `mb` MiB on `path` (created); None on success, else why not."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mb}m,mode=0755", "tmpfs", str(path)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"mount failed: {e}"
    return None if r.returncode == 0 else f"mount -t tmpfs refused (exit {r.returncode}): {r.stdout.strip()}"


def umount(path: Path) -> None:
    subprocess.run(["umount", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    if os.path.ismount(path):  # still busy: detach it (it goes when the last user does)
        subprocess.run(["umount", "-l", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)


def tmpfs_support(probe_dir: Path) -> str | None:
    """None when this process may mount a tmpfs, else why not (checked once per campaign)."""
    probe = probe_dir / "tmpfs-probe"
    why = mount_tmpfs(probe, 1)
    if why is None:
        umount(probe)
    shutil.rmtree(probe, ignore_errors=True)
    return why


FILLER = ".chaos-filler"


def fill(data_dir: Path) -> int:
    """Fills the file system of `data_dir` with a filler file; returns its size in bytes."""
    st = os.statvfs(data_dir)
    size = st.f_bavail * st.f_frsize
    fd = os.open(data_dir / FILLER, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
    try:
        try:
            if size > 0:
                os.posix_fallocate(fd, 0, size)
        except OSError:
            pass
        chunk = b"\0" * (1 << 20)
        while True:  # whatever fallocate left (or all of it where it failed), until ENOSPC
            try:
                if os.write(fd, chunk if os.statvfs(data_dir).f_bavail > 256 else chunk[:4096]) <= 0:
                    break
            except OSError:
                break
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def unfill(data_dir: Path) -> None:
    (data_dir / FILLER).unlink(missing_ok=True)


# ---- closed files for the `bitrot` fault -----------------------------------------------------


def closed_files(data_dir: Path) -> list[Path]:
    """Sealed segment files written at least SEG_MIN_AGE_S ago, and every Global snapshot of a
    directory but its newest (the one a restart would load first stays intact)."""
    out: list[Path] = []
    now = time.time()
    seg_dir = data_dir / "segments"
    try:
        for e in os.scandir(seg_dir):
            try:
                if e.name.endswith(".seg") and now - e.stat().st_mtime >= SEG_MIN_AGE_S and e.stat().st_size > 64:
                    out.append(Path(e.path))
            except FileNotFoundError:
                pass
    except FileNotFoundError:
        pass
    snaps: dict[Path, list[Path]] = {}
    for p in data_dir.rglob("snapshot-*.bin"):
        snaps.setdefault(p.parent, []).append(p)
    for files in snaps.values():
        out += sorted(files)[:-1]
    return sorted(out)


def under_replicated(kafka: KafkaCluster, prefix: str) -> list[str]:
    """Partitions of the topics named `prefix`* and of __consumer_offsets whose ISR lacks a
    replica, as seen through a running broker (["no metadata"] when none answers). A broker is
    killed only when this is empty: a restarted broker must be back in every ISR first, else the
    next kill takes a partition below min.insync.replicas (two brokers lost, not one)."""
    for b in range(kafka.brokers):
        if not kafka.is_running(b):
            continue
        md = kafka.metadata(b, timeout_s=3)
        if md is None:
            continue
        out = []
        for t in md.get("topics", []):
            if not (t.get("topic", "").startswith(prefix) or t.get("topic") == "__consumer_offsets"):
                continue
            for p in t.get("partitions", []):
                if len(p.get("isrs", [])) < len(p.get("replicas", [])):
                    out.append(f"{t['topic']}/{p.get('partition')}")
        return out
    return ["no metadata"]


# ---- one run ---------------------------------------------------------------------------------


class Run:
    """One run: fresh nodes (own topic prefix), a fresh moto, tmpfs data dirs when `disk` is on."""

    def __init__(self, kafka: KafkaCluster, folder: Path, *, index: int, seed: int, minutes: float, nodes: int,
                 faults: list[str], clients: int, disk_mb: int, log: Callable[[str], None]):
        self.kafka, self.folder, self.seed, self.minutes = kafka, folder, seed, minutes
        self.nodes, self.faults, self.clients, self.disk_mb, self.log = nodes, faults, clients, disk_mb, log
        self.rng = random.Random(seed)
        self.res = RunResult(index, seed)
        self.mounts: list[Path] = []
        self.pending: list[tuple[float, int, str, Callable[[], None]]] = []  # (due, order, what, undo)
        self.node_busy: int | None = None  # the node down or paused now
        self.broker_down: int | None = None
        self.s3_down = False
        self.disk_full: set[int] = set()

    # -- fault actions; each records itself in the timeline and the run's fault list --

    def note(self, what: str) -> None:
        self.c.mark(what)
        self.res.faults.append(what)

    def due(self, after_s: float, what: str, undo: Callable[[], None], order: int = 1) -> None:
        self.pending.append((time.monotonic() + after_s, order, what, undo))

    def run_due(self, everything: bool = False, max_order: int = 1) -> None:
        """Undoes the faults whose time has come (all of them when `everything`: brokers and moto
        first, order 0, so that nodes start on a complete Kafka); only those of order <=
        `max_order`."""
        now = time.monotonic()
        key = (lambda x: (x[1], x[0])) if everything else (lambda x: x[0])
        for item in sorted(self.pending, key=key):
            # An undo that starts a node may undo due brokers and moto itself (start_node): skip
            # what is gone from the list meanwhile.
            if item in self.pending and item[1] <= max_order and (everything or item[0] <= now):
                self.pending.remove(item)
                item[3]()

    def start_node(self, i: int, within_s: float = 90.0) -> None:
        """Starts node i again and waits until it serves, undoing due broker and moto faults
        meanwhile (a start waits for an unreachable bucket or Kafka, so they must come back for it
        to finish). A node that exits during its start (a note, not a failure) is launched again
        3 s later, for up to `within_s`."""
        if i in self.disk_full:  # a node starts on a disk with room (the fault is about a running node)
            self.unfill(i)
        deadline = time.monotonic() + within_s
        attempt = 0
        while True:
            attempt += 1
            n = self.c.node(i)
            if n.alive_process():
                self.c.stop_node(i)
            self.c.launch(i)
            while n.proc.poll() is None and time.monotonic() < deadline and not n.serving():
                self.run_due(max_order=0)
                time.sleep(0.2)
            try:
                self.c.wait_up(i, timeout=max(1.0, deadline - time.monotonic()))
                break
            except AssertionError as e:
                text = str(e)
                if "during start" not in text or time.monotonic() > deadline:
                    raise
                reason = next((ln for ln in text.splitlines() if "[critical]" in ln), text.splitlines()[0])
                self.res.notes.append(f"node {i} exited during start (attempt {attempt}): {reason[-300:]}")
                self.c.mark(f"node {i} exited during start (attempt {attempt}); launching again in 3 s")
                end = time.monotonic() + 3.0
                while time.monotonic() < end:
                    self.run_due(max_order=0)
                    time.sleep(0.1)
        if self.node_busy == i:
            self.node_busy = None

    def unfill(self, i: int) -> None:
        unfill(self.c.node(i).data_dir)
        self.disk_full.discard(i)
        self.c.mark(f"disk of node {i} has room again")

    def inject(self, kind: str) -> None:
        rng, c = self.rng, self.c
        i = rng.randrange(self.nodes)
        if kind == "kill":
            c.kill(i)
            self.node_busy = i
            self.note(f"kill node {i}")
            self.due(rng.uniform(0.0, 8.0), f"restart node {i}", lambda: self.start_node(i))
        elif kind == "pause":
            c.pause(i)
            self.node_busy = i
            self.note(f"pause node {i}")

            def resume() -> None:
                c.resume(i)
                self.node_busy = None
            self.due(rng.uniform(1.2, 2.5) * c.session_timeout_ms / 1000, f"resume node {i}", resume)
        elif kind == "wipe":
            c.kill(i)
            c.wipe(i)
            self.node_busy = i
            self.disk_full.discard(i)  # the filler went with the rest
            self.note(f"wipe node {i}")
            self.due(rng.uniform(0.0, 5.0), f"restart node {i}", lambda: self.start_node(i))
        elif kind == "broker":
            b = rng.randrange(self.kafka.brokers)
            c.kill_broker(b)
            self.broker_down = b
            self.note(f"broker {b} killed")

            def back() -> None:
                c.restart_broker(b=b, timeout=KAFKA_START_TIMEOUT)
                self.broker_down = None
            self.due(rng.uniform(3.0, 12.0), f"restart broker {b}", back, order=0)
        elif kind == "s3":
            self.gate.shut()
            self.s3_down = True
            self.note("s3 outage (bucket endpoint refuses connections)")

            def back() -> None:
                self.gate.open()
                self.s3_down = False
                c.mark("bucket endpoint serving again")
            self.due(rng.uniform(5.0, 20.0), "moto back", back, order=0)
        elif kind == "disk":
            n = c.node(i)
            size = fill(n.data_dir)
            self.disk_full.add(i)
            self.note(f"disk full node {i}")
            c.mark(f"  filler {size} bytes in {n.data_dir}")
            self.due(rng.uniform(5.0, 15.0), f"unfill node {i}", lambda: self.unfill(i) if i in self.disk_full else None)
        elif kind == "bitrot":
            files = closed_files(c.node(i).data_dir)
            if not files:
                c.mark(f"bitrot node {i}: no closed file yet, skipped")
                return
            path = files[rng.randrange(len(files))]
            size = path.stat().st_size
            at = flip_bytes(path, at=rng.randrange(0, max(1, size - 16)), n=min(16, size))
            self.note(f"bitrot node {i}")
            c.mark(f"  flipped 16 bytes at {at} of {path.relative_to(c.node(i).data_dir)} ({size} bytes)")

    def allowed(self) -> list[str]:
        out = []
        for k in self.faults:
            if k in NODE_FAULTS and self.node_busy is not None:
                continue
            if k == "broker" and (self.broker_down is not None or under_replicated(self.kafka, self.c.topic_prefix)):
                continue
            if k == "s3" and self.s3_down:
                continue
            out.append(k)
        return out

    def heal(self) -> None:
        self.run_due(everything=True)
        for i in list(self.disk_full):
            self.unfill(i)
        if not self.gate.is_open:
            self.gate.open()
        for b in range(self.kafka.brokers):
            if not self.kafka.is_running(b):
                self.c.restart_broker(b=b, timeout=KAFKA_START_TIMEOUT)
        for n in self.c.nodes:
            if n.state == "down" or not n.alive_process():
                self.start_node(n.index)
        self.c.heal()

    # -- the run --

    def execute(self) -> RunResult:
        t0 = time.monotonic()
        res = self.res
        nodes_root = self.folder / "nodes"
        if "disk" in self.faults:
            for i in range(self.nodes):
                mnt = nodes_root / f"node-{i}" / "data"
                why = mount_tmpfs(mnt, self.disk_mb)
                if why:
                    raise RunFailure(f"tmpfs for node {i}: {why}")
                self.mounts.append(mnt)
        mod = moto_module()
        self.moto = moto_server(self.folder / "s3")
        self.gate: S3Gate | None = None
        c = None
        wl = watcher = None
        try:
            self.moto.start()
            self.gate = S3Gate(int(self.moto.status()["port"]))
            self.gate.open()
            flags = bucket_args(self.gate.endpoint, new_bucket_name(), "cl/", replication_factor=min(2, self.nodes),
                                repair_grace_ms=5000, replication_interval_ms=500, scrub_interval_ms=5000,
                                safe_offset_interval_ms=1000, maintenance_interval_ms=1000,
                                global_snapshot_every=50,
                                kafka_replication_factor=min(3, self.kafka.brokers),
                                kafka_min_insync_replicas=min(2, self.kafka.brokers))
            c = self.c = SedimentCluster(self.kafka, nodes_root, self.nodes, extra_args=flags,
                                         extra_env={**S3_ENV, **KAFKA_DEBUG_ENV})
            run_id = marker(f"chaos{self.seed}x")
            wl = ClusterWorkload(c, run_id, self.clients, seed=self.seed)
            watcher = DuplicateWatcher(c, run_id, c.up_nodes, interval=1.0)
            c.start()
            c.wait_quiet(timeout=QUIET_TIMEOUT)
            wl.__enter__()
            wl.wait_for_ok_started_after(c.t0, timeout=30, what="first acknowledged ingest")
            watcher.start()
            c.mark(f"run {res.index} seed {self.seed}: workload and watcher running, faults {','.join(self.faults)}")
            deadline = time.monotonic() + self.minutes * 60
            while time.monotonic() < deadline:
                gap_end = time.monotonic() + self.rng.uniform(1.0, 5.0)
                while time.monotonic() < gap_end:
                    self.run_due()
                    c.assert_running()
                    time.sleep(0.1)
                kinds = self.allowed()
                if kinds:
                    self.inject(self.rng.choice(kinds))
            c.mark("faults over: healing")
            self.heal()
            wl.hold()
            c.mark("healed, workload held: final check")
            self.final_check(c, wl, watcher)
        except Exception as e:  # noqa: BLE001 - any failure ends the run with its timeline
            res.problems.append(f"{type(e).__name__}: {e}")
            if c is not None and wl is not None and not res.acked:
                try:  # what was lost, as far as the nodes answer once healed and settled
                    c.mark("run failed: stopping the workload, healing, counting what is missing")
                    wl.stop_event.set()
                    for cl in wl.clients:
                        cl.join(timeout=30)
                    self.heal()
                    try:
                        c.wait_quiet_all([n.index for n in c.up_nodes()], timeout=QUIET_TIMEOUT)
                    except AssertionError as e3:
                        res.problems.append(f"after the failure the cluster did not settle: {str(e3)[:500]}")
                    self.count_losses(c, wl, watcher)
                except Exception as e2:  # noqa: BLE001 - best effort
                    res.problems.append(f"counting losses after the failure failed: {type(e2).__name__}: "
                                        f"{str(e2)[:1000]}")
        finally:
            if watcher is not None and watcher.is_alive():
                watcher.stop_event.set()
            if wl is not None:
                wl.stop_event.set()
                for cl in wl.clients:
                    if cl.is_alive():
                        cl.join(timeout=30)
            if c is not None:
                c.stop_all()
                res.timeline = c.timeline_text()
                if not res.ok and wl is not None:
                    try:
                        lines = summarize(wl.records(), c.t0, {}).splitlines()[1:]
                        res.timeline += "\ningest answers per second (seconds with errors):\n" + "\n".join(
                            ln for ln in lines if "{200: " not in ln or "," in ln)
                    except Exception:  # noqa: BLE001 - best effort
                        pass
            if self.gate is not None:
                self.gate.close()
            try:
                self.moto.kill()
            except mod.MotoError as e:
                res.problems.append(f"stopping moto: {e}")
            for mnt in self.mounts:
                if not res.ok:  # keep what the node had on disk
                    shutil.copytree(mnt, mnt.parent / "data-kept", dirs_exist_ok=True, ignore_dangling_symlinks=True)
                umount(mnt)
            res.seconds = time.monotonic() - t0
        return res

    def final_check(self, c: SedimentCluster, wl: ClusterWorkload, watcher: DuplicateWatcher) -> None:
        res = self.res
        try:
            check_cluster(c, wl, f"run {res.index} final", all_nodes=True, quiet_timeout=QUIET_TIMEOUT)
        except AssertionError as e:
            res.problems.append(f"final check: {e}")
        watcher.stop()
        self.log("  " + watcher.summary())
        self.count_losses(c, wl, watcher)
        if res.lost:
            self.recheck_after_restarts(c, wl)

    def recheck_after_restarts(self, c: SedimentCluster, wl: ClusterWorkload) -> None:
        """Tells lost from stuck: restarts every node (SIGTERM, one after the other), waits until
        the cluster settles and counts again; the result is a note (the run stays failed)."""
        lost_before = self.res.lost
        c.mark("final check failed: restarting every node to tell lost from stuck")
        try:
            for n in c.nodes:
                self.start_node(n.index)
            quiet = "settled"
            try:
                c.wait_quiet_all([n.index for n in c.up_nodes()], timeout=QUIET_TIMEOUT)
            except AssertionError:
                quiet = f"did not settle within {QUIET_TIMEOUT:.0f} s"
            acked, attempted = wl.acked_ids(), wl.attempted_ids()
            lost: set[str] = set()
            for n in c.up_nodes():
                ans = query_run(n, wl.run)
                if ans.status == 200:
                    lost.update(evaluate(acked, attempted, ans.found, ans.warnings).missing)
            self.res.notes.append(f"after restarting every node the cluster {quiet}; {len(lost)} of the {lost_before} "
                                  f"acknowledged events still missing")
        except Exception as e:  # noqa: BLE001 - a diagnosis only
            self.res.notes.append(f"restarting every node to recount failed: {type(e).__name__}: {str(e)[:500]}")

    def count_losses(self, c: SedimentCluster, wl: ClusterWorkload, watcher: DuplicateWatcher | None) -> None:
        """lost = acknowledged events missing from some node's answer; duplicated = events held
        twice by some answer (the final queries and the watcher's)."""
        res = self.res
        acked, attempted = wl.acked_ids(), wl.attempted_ids()
        res.acked = len(acked)
        lost: set[str] = set()
        dups: set[str] = set(watcher.duplicate_ids) if watcher is not None else set()
        for n in c.up_nodes():
            ans = query_run(n, wl.run)
            if ans.status != 200:
                res.problems.append(f"final query via node {n.index} answered {ans.status}")
                continue
            v = evaluate(acked, attempted, ans.found, ans.warnings)
            lost.update(v.missing)
            dups.update(v.duplicates)
            if v.unknown:
                res.problems.append(f"node {n.index} returned {len(v.unknown)} events nobody sent")
        if watcher is not None and watcher.violations:
            res.problems.append("queries during the run returned events twice:\n    "
                                + "\n    ".join(watcher.violations[:10]))
        res.lost, res.duplicated = len(lost), len(dups)
        if lost:
            res.problems.append(f"{len(lost)} acknowledged events lost, e.g. {sorted(lost)[:10]}")
            # Which request carried each lost event: the node that answered 200, and when (run
            # time, as in the fault timeline), next to the faults around it.
            for r in wl.records():
                hit = sorted(set(r.ids) & lost)
                if hit and r.status == 200:
                    node = getattr(r, "node", -1)
                    res.problems.append(
                        f"  lost {hit[:5]}: request of {len(r.ids)} events answered 200 by node {node} "
                        f"(sent t={r.start - c.t0:.2f}s, answered t={r.end - c.t0:.2f}s)")


# ---- the campaign ----------------------------------------------------------------------------


def run_campaign(*, seed: int, runs: int, minutes: float, nodes: int = 3, brokers: int = 3,
                 faults: list[str] | tuple[str, ...] = ALL_FAULTS, out: Path, clients: int = 4,
                 disk_mb: int = DISK_MB, keep: bool = False, fresh_kafka_every: int = 10,
                 stop_after_s: float | None = None, log: Callable[[str], None] = print,
                 results: list[RunResult] | None = None) -> list[RunResult]:
    """Runs `runs` runs (seeds seed..seed+runs-1) on one Kafka under `out` (started here and
    stopped by pid, renewed every `fresh_kafka_every` runs); returns every run's result. No run
    starts once `stop_after_s` seconds have passed. A run's folder `out/run-<k>-seed-<s>` is
    removed when it passed, unless `keep`. Each finished run is appended to `results` (a new list
    when None) as it ends, so a caller sees the runs done when it is interrupted."""
    t_start = time.monotonic()
    faults = list(faults)
    unknown = [f for f in faults if f not in ALL_FAULTS]
    if unknown:
        raise ValueError(f"unknown faults {unknown}; known: {','.join(ALL_FAULTS)}")
    out.mkdir(parents=True, exist_ok=True)
    if "disk" in faults:
        why = tmpfs_support(out)
        if why:
            log(f"chaos: fault kind 'disk' left out: cannot mount a tmpfs per node ({why})")
            faults.remove("disk")
    results = [] if results is None else results
    kafka: KafkaCluster | None = None
    try:
        for k in range(runs):
            if stop_after_s is not None and time.monotonic() - t_start > stop_after_s:
                log(f"chaos: {stop_after_s / 60:g} minutes have passed; no more runs start ({k} of {runs} ran)")
                break
            run_seed = seed + k
            try:
                if kafka is None or (fresh_kafka_every > 0 and k > 0 and k % fresh_kafka_every == 0):
                    if kafka is not None:
                        kafka.stop()
                        shutil.rmtree(kafka.dir, ignore_errors=True)
                    kafka = KafkaCluster(out / f"kafka-{k}", brokers=brokers)
                    kafka.start(timeout=KAFKA_START_TIMEOUT)
                for b in range(brokers):
                    if not kafka.is_running(b):
                        kafka.restart(b, timeout=KAFKA_START_TIMEOUT)
            except Exception as e:  # noqa: BLE001 - the campaign ends; its summary still prints
                results.append(RunResult(k, run_seed, problems=[f"campaign aborted: Kafka: {type(e).__name__}: {e}"]))
                log(f"chaos: campaign aborted before run {k + 1}: Kafka could not be (re)started: {str(e)[:2000]}")
                break
            folder = out / f"run-{k}-seed-{run_seed}"
            shutil.rmtree(folder, ignore_errors=True)
            r = Run(kafka, folder, index=k, seed=run_seed, minutes=minutes, nodes=nodes, faults=faults,
                    clients=clients, disk_mb=disk_mb, log=log).execute()
            r.folder = folder
            results.append(r)
            log(f"run {k + 1}/{runs} seed {run_seed}: {'ok' if r.ok else 'FAILED'}, faults injected "
                f"{len(r.faults)} ({r.kinds()}), acked {r.acked}, lost {r.lost}, duplicated {r.duplicated}, "
                f"{r.seconds:.0f} s")
            if r.ok:
                if not keep:
                    shutil.rmtree(folder, ignore_errors=True)
            else:
                if r.lost and kafka is not None:
                    # The brokers' logs (ISR, leader changes, truncations) go with the run's folder:
                    # the Kafka folder is removed when the next Kafka starts.
                    for b in range(brokers):
                        src = kafka.dir / f"node-{b}" / "server.log"
                        if src.exists():
                            (folder / "kafka").mkdir(parents=True, exist_ok=True)
                            shutil.copy(src, folder / "kafka" / f"broker-{b}-server.log")
                log(f"RUN FAILED (seed {run_seed}):\n  " + "\n  ".join(p[:3000] for p in r.problems))
                log(f"replay: {replay_command(run_seed, minutes, nodes, brokers, faults)}")
                log(f"fault timeline:\n{r.timeline}")
                log(f"logs kept in {folder}")
            for note in r.notes:
                log(f"  note: {note}")
    finally:
        if kafka is not None:
            kafka.stop()
            if all(r.ok for r in results) and not keep:
                shutil.rmtree(kafka.dir, ignore_errors=True)
    return results


def summary_line(results: list[RunResult]) -> str:
    return (f"runs {len(results)}, faults injected {sum(len(r.faults) for r in results)}, events acknowledged "
            f"{sum(r.acked for r in results)}, lost {sum(r.lost for r in results)}, duplicated "
            f"{sum(r.duplicated for r in results)}")


def support() -> str | None:
    """None when a campaign can run here, else why not (java/kcat, the binary, moto)."""
    missing = [t for t in ("java", "kcat") if not shutil.which(t)]
    if missing:
        return f"needs {', '.join(missing)} on PATH (see scripts/kafka/README.md)"
    reason = cluster_support() or bucket_support()
    if reason:
        return reason
    if moto_module().installed_version() is None:
        return "moto is not installed (python3 scripts/s3/moto.py install)"
    return None


def _terminate(signum, frame):  # SIGTERM/SIGHUP: unwind like Ctrl-C, so every process is stopped by pid
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=None, help="seed of run 0 (run k uses seed+k; default random)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--minutes", type=float, default=1.0, help="fault injection time per run")
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--brokers", type=int, default=3, choices=[1, 3])
    ap.add_argument("--faults", default=",".join(ALL_FAULTS), help=f"comma-separated subset of {','.join(ALL_FAULTS)}")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--disk-mb", type=int, default=DISK_MB, help="size of each node's tmpfs (disk fault)")
    ap.add_argument("--fresh-kafka-every", type=int, default=10, help="new Kafka cluster every K runs (0: never)")
    ap.add_argument("--stop-after-minutes", type=float, default=None,
                    help="start no run after this many minutes (the campaign ends with the run in progress)")
    ap.add_argument("--out", default=None, help="work folder (default: a new temp dir); failed runs keep theirs")
    ap.add_argument("--keep", action="store_true", help="keep passed runs' folders too")
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2**31)
    reason = support()
    if reason:
        print(f"chaos: cannot run: {reason}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="sediment-chaos-"))
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    print(f"chaos: seed {seed}, {args.runs} runs of {args.minutes:g} min, {args.nodes} nodes, {args.brokers} brokers, "
          f"faults {args.faults}; work folder {out}", flush=True)
    results: list[RunResult] = []
    try:
        results = run_campaign(seed=seed, runs=args.runs, minutes=args.minutes, nodes=args.nodes,
                               brokers=args.brokers, faults=[f for f in args.faults.split(",") if f], out=out,
                               clients=args.clients, disk_mb=args.disk_mb, keep=args.keep,
                               fresh_kafka_every=args.fresh_kafka_every,
                               stop_after_s=args.stop_after_minutes * 60 if args.stop_after_minutes else None,
                               log=lambda s: print(s, flush=True), results=results)
    except KeyboardInterrupt as e:
        print(f"chaos: interrupted ({e}); every process stopped; the runs that ended:", flush=True)
        print(summary_line(results), flush=True)
        return 130
    print(summary_line(results), flush=True)
    failed = [r for r in results if not r.ok]
    if failed:
        print("failed runs (seed): " + ", ".join(str(r.seed) for r in failed), flush=True)
        return 1
    if not args.out and not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

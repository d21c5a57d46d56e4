#!/usr/bin/env python3
"""Randomized fault soak for a sediment cluster: a workload runs while random faults hit random
nodes (kill -9 and restart later, SIGSTOP/SIGCONT for 1..2.5 session timeouts, graceful restart,
broker kill/restart; data-dir wipe only with --faults ...,wipe). Every `--check-every` faults and
at the end the cluster is healed, the workload held, and the checker must pass on every node; a
thread queries all along and no answer may hold an event twice. Recovery times of kills are
printed.

    python3 tests/cluster/soak.py --seconds 600 [--seed N] [--nodes 3] [--faults kill,pause,restart,broker]

The seed (printed first) fixes the fault sequence (kinds, targets, durations, gaps) and the
workload's choices; process timing still varies, so a replay repeats the same faults, not the same
interleaving. A failure prints the seed, the replay command and the fault timeline, and exits 1.
As pytest: CLUSTER_SOAK_SECONDS=600 [CLUSTER_SOAK_SEED=N] python3 -m pytest tests/cluster/test_soak.py -s
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_harness import (  # noqa: E402
    ClusterWorkload,
    DuplicateWatcher,
    KafkaCluster,
    SedimentCluster,
    check_cluster,
    cluster_support,
    marker,
    measure_recovery,
    now_ms,
    owned_by,
    summarize,
)

ALL_FAULTS = ("kill", "pause", "restart", "broker", "wipe")
DEFAULT_FAULTS = ("kill", "pause", "restart", "broker")


class SoakFailure(AssertionError):
    pass


@dataclass
class SoakResult:
    seed: int
    faults: list[str] = field(default_factory=list)
    checks: int = 0
    recoveries: list[float] = field(default_factory=list)
    acked: int = 0
    answers: dict = field(default_factory=dict)


def replay_command(seconds: float, seed: int, nodes: int, faults: list[str], check_every: int) -> str:
    return (f"python3 tests/cluster/soak.py --seconds {seconds:g} --seed {seed} --nodes {nodes} "
            f"--faults {','.join(faults)} --check-every {check_every}")


def run_soak(kafka: KafkaCluster, root: Path, *, seconds: float, seed: int, nodes: int = 3,
             faults: list[str] | tuple[str, ...] = DEFAULT_FAULTS, check_every: int = 4, clients: int = 4,
             log: Callable[[str], None] = print) -> SoakResult:
    """Runs the soak on a running 1-broker `kafka`; nodes live under `root` and are stopped by pid
    before returning. Raises SoakFailure (seed, replay command, timeline) on any failed check."""
    faults = list(faults)
    unknown = [f for f in faults if f not in ALL_FAULTS]
    if unknown:
        raise ValueError(f"unknown faults {unknown}; known: {ALL_FAULTS}")
    rng = random.Random(seed)
    res = SoakResult(seed)
    c = SedimentCluster(kafka, root, nodes)
    session_s = c.session_timeout_ms / 1000
    run = marker(f"soak{seed}x")
    wl = ClusterWorkload(c, run, clients, seed=seed)
    watcher = DuplicateWatcher(c, run, c.up_nodes, interval=1.0)
    wiped_at: float | None = None  # monotonic time the last wiped node served again
    log(f"soak seed: {seed} ({seconds:g} s, {nodes} nodes, faults {','.join(faults)}, check every {check_every})")

    def checkpoint(label: str, release: bool = True) -> None:
        c.heal()
        wl.hold()
        c.mark(f"{label}: healed, workload held")
        required = None
        if wiped_at is not None:
            required = {i for r in wl.records() if r.status == 200 and r.start > wiped_at for i in r.ids}
        check_cluster(c, wl, label, all_nodes=True, allow_missing_with_warning=wiped_at is not None,
                      required=required)
        if watcher.violations:
            raise AssertionError("queries returned events twice:\n" + "\n".join(watcher.violations[:10]))
        res.checks += 1
        if release:
            wl.release()
        c.mark(f"{label}: passed")

    try:
        c.start()
        c.wait_quiet(timeout=60)
        wl.__enter__()
        wl.wait_for_ok_started_after(c.t0, timeout=30, what="first acknowledged ingest")
        watcher.start()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(2.0, 8.0))
            kind = rng.choice(faults)
            i = rng.randrange(nodes)
            c.assert_running()
            if kind == "kill":
                linger = rng.uniform(0.0, 10.0)
                via = next((n.index for n in c.up_nodes() if n.index != i), None)
                victim_id = c.node(i).node_id
                parts = owned_by(c.cluster_view(via), victim_id) if via is not None else {}
                wall = now_ms()
                t_kill = c.kill(i)
                if parts and via is not None:
                    rec = measure_recovery(c, wl, t_kill, wall, via, parts)
                    res.recoveries.append(rec.seconds)
                    c.mark(rec.line())
                    log(rec.line())
                time.sleep(linger)
                c.restart(i)
            elif kind == "pause":
                d = rng.uniform(1.0, 2.5) * session_s
                c.pause(i)
                time.sleep(d)
                c.resume(i)
            elif kind == "restart":
                c.restart(i)
            elif kind == "broker":
                down = rng.uniform(3.0, 12.0)
                c.restart_broker(down_s=down)
            elif kind == "wipe":
                c.stop_node(i)
                c.wipe(i)
                wiped_at = c.restart(i)
            res.faults.append(f"{kind} {i}")
            log(f"[{time.monotonic() - c.t0:7.1f}s] fault {len(res.faults)}: {kind} node {i}")
            if len(res.faults) % check_every == 0:
                checkpoint(f"checkpoint {res.checks + 1} after {len(res.faults)} faults")
        checkpoint("final check", release=False)
        watcher.stop()
        log(watcher.summary())
        res.acked = len(wl.acked_ids())
        res.answers = wl.status_counts()
        if res.recoveries:
            rs = sorted(res.recoveries)
            log(f"recovery times after kills: n={len(rs)} min {rs[0]:.1f} s, median {rs[len(rs) // 2]:.1f} s, "
                f"max {rs[-1]:.1f} s (target < 15 s)")
        log(f"soak passed: seed {seed}, {len(res.faults)} faults, {res.checks} checks, {res.acked} events "
            f"acknowledged, ingest answers {res.answers}")
        return res
    except Exception as e:  # noqa: BLE001 - any failure ends the soak with the seed and timeline
        timeline = c.timeline_text()
        try:  # seconds with answers other than 200, and the last 10 seconds
            lines = summarize(wl.records(), c.t0, {}).splitlines()[1:]
            per_sec = "\n".join(ln for k, ln in enumerate(lines) if "{200: " not in ln or "," in ln
                                or k >= len(lines) - 10)
        except Exception:  # noqa: BLE001 - best effort
            per_sec = ""
        raise SoakFailure(f"SOAK FAILED (seed {seed}) after {len(res.faults)} faults: {type(e).__name__}: {e}\n"
                          f"replay: {replay_command(seconds, seed, nodes, faults, check_every)}\n"
                          f"fault timeline:\n{timeline}\n"
                          f"ingest answers per second (seconds with errors, and the last 10):\n{per_sec}") from None
    finally:
        if watcher.is_alive():
            watcher.stop_event.set()
        wl.stop_event.set()
        for cl in wl.clients:
            cl.join(timeout=30)
        c.stop_all()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=600.0, help="how long faults are injected (default 600)")
    ap.add_argument("--seed", type=int, default=None, help="fault sequence seed (default: random, printed)")
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--faults", default=",".join(DEFAULT_FAULTS),
                    help=f"comma-separated subset of {','.join(ALL_FAULTS)} (default {','.join(DEFAULT_FAULTS)})")
    ap.add_argument("--check-every", type=int, default=4, help="heal and check after this many faults")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--dir", default=None, help="work folder (default: a new temp dir, removed on success)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (logs) on success too")
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2**31)
    reason = cluster_support()
    if reason:
        print(f"soak: {reason}", file=sys.stderr)
        return 2
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="sediment-soak-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"soak seed: {seed}; work folder {root}", flush=True)
    kafka = KafkaCluster(root / "kafka", brokers=1)
    ok = False
    try:
        kafka.start(timeout=180)
        run_soak(kafka, root / "nodes", seconds=args.seconds, seed=seed, nodes=args.nodes,
                 faults=[f for f in args.faults.split(",") if f], check_every=args.check_every,
                 clients=args.clients, log=lambda s: print(s, flush=True))
        ok = True
    except SoakFailure as e:
        print(str(e), flush=True)
        print(f"logs kept in {root}", flush=True)
    finally:
        kafka.stop()
        if ok and not args.keep and not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

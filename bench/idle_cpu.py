#!/usr/bin/env python3
"""Idle CPU of one sediment node: CPU-seconds per minute and wakeups per second per thread name.

Starts a 1-broker Kafka cluster (scripts/kafka/cluster.py, loopback ports) unless --brokers names
one, or uses the embedded log with --embedded; starts `sediment server` on a free 127.0.0.1 port
with a fresh data dir; waits until it answers /api/v1/status, lets it settle, then samples
/proc/PID/stat (utime+stime: the headline CPU-s/min, as `top` counts it), and per thread
/proc/PID/task/*/schedstat (exact time on the CPU) and status (voluntary context switches, one per
wakeup from a blocking wait) over --seconds. Prints the totals and a table per thread name, and
stops the server and the cluster it started by pid on every exit path. Python 3 stdlib only.

    python3 bench/idle_cpu.py --bin build/src/cli/sediment                # Kafka, 60 s
    python3 bench/idle_cpu.py --bin build/src/cli/sediment --embedded
"""

import argparse
import collections
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    # Fields after the parenthesised comm: state is field 3; utime 14 and stime 15 (1-based).
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def threads(pid: int) -> dict[int, tuple[str, int, float]]:
    """tid -> (name, voluntary context switches, CPU seconds)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name, vol = "", 0
            for line in (task / "status").read_text().splitlines():
                if line.startswith("Name:"):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("voluntary_ctxt_switches:"):
                    vol = int(line.split(":", 1)[1])
            # schedstat: nanoseconds on the CPU, exact (stat's utime/stime are tick samples, which
            # miss most of a thread that runs in short bursts).
            ns = int((task / "schedstat").read_text().split()[0])
            out[int(task.name)] = (name, vol, ns / 1e9)
        except (FileNotFoundError, ProcessLookupError):
            pass  # the thread ended
    return out


def wait_serving(url: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/api/v1/status", timeout=2):
                return
        except urllib.error.HTTPError:
            return  # an answer (401 without a token): the node serves
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"server did not serve within {timeout} s")


def stop_pid(proc: subprocess.Popen, timeout: float = 15) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=str(REPO / "build/src/cli/sediment"))
    ap.add_argument("--brokers", help="use this Kafka cluster instead of starting one")
    ap.add_argument("--embedded", action="store_true", help="embedded commit log, no Kafka")
    ap.add_argument("--seconds", type=float, default=60, help="measured interval (default 60)")
    ap.add_argument("--settle", type=float, default=10, help="wait after serving (default 10)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--hold", type=float, default=0,
                    help="keep the node (and broker) running this many seconds after measuring, "
                         "for perf or gdb (pid printed)")
    args = ap.parse_args()
    # SIGTERM unwinds like Ctrl-C, so the finally below stops what was started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    work = Path(tempfile.mkdtemp(prefix="sediment-idle-"))
    kafka_dir = None
    server = None
    log = open(work / "server.log", "wb")
    try:
        server_args = [args.bin, "server", "--data-dir", str(work / "data")]
        port = free_port()
        server_args += ["--listen", f"127.0.0.1:{port}"]
        if not args.embedded:
            brokers = args.brokers
            if brokers is None:
                kafka_dir = work / "kafka"
                brokers = subprocess.run(
                    [sys.executable, str(REPO / "scripts/kafka/cluster.py"), "start", "--dir",
                     str(kafka_dir), "--brokers", "1"],
                    check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
            server_args += ["--kafka-brokers", brokers, "--kafka-replication-factor", "1",
                            "--kafka-min-insync-replicas", "1"]
        server = subprocess.Popen(server_args, stdin=subprocess.DEVNULL, stdout=log,
                                  stderr=subprocess.STDOUT)
        wait_serving(f"http://127.0.0.1:{port}", server, 60)
        time.sleep(args.settle)

        pid = server.pid
        cpu0, th0, t0 = cpu_seconds(pid), threads(pid), time.monotonic()
        time.sleep(args.seconds)
        cpu1, th1, t1 = cpu_seconds(pid), threads(pid), time.monotonic()
        elapsed = t1 - t0
        # name -> [threads, wakeups, CPU seconds]
        per_name = collections.defaultdict(lambda: [0, 0, 0.0])
        for tid, (name, vol, cpu) in th1.items():
            _, vol0, cpu0_t = th0.get(tid, (name, 0, 0.0))
            name = re.sub(r"-\d+$", "-N", name)  # digest-0, digest-1, ...: one row
            per_name[name][0] += 1
            per_name[name][1] += vol - vol0
            per_name[name][2] += cpu - cpu0_t
        result = {
            "log": "embedded" if args.embedded else "kafka",
            "seconds": round(elapsed, 1),
            "cpu_seconds_per_minute": round((cpu1 - cpu0) * 60 / elapsed, 3),
            "threads": len(th1),
            "wakeups_per_second": round(sum(v[1] for v in per_name.values()) / elapsed, 1),
            "per_thread_name": {
                name: {"threads": n, "wakeups_per_second": round(w / elapsed, 1),
                       "cpu_seconds_per_minute": round(c * 60 / elapsed, 3)}
                for name, (n, w, c) in sorted(per_name.items(), key=lambda kv: -kv[1][2])
            },
            # Threads that started or ended within the interval, and the process total (tick
            # sampled) minus what the live threads used (exact): the ended threads and sampling.
            "threads_started": len(set(th1) - set(th0)),
            "threads_ended": len(set(th0) - set(th1)),
            "ended_threads_cpu_seconds_per_minute": round(
                max(0.0, (cpu1 - cpu0) - sum(v[2] for v in per_name.values())) * 60 / elapsed, 3),
            "loadavg": os.getloadavg()[0],
        }
        if args.hold > 0:
            print(f"holding: server pid {pid}", flush=True)
            time.sleep(args.hold)
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            print(f"{result['log']}: {result['cpu_seconds_per_minute']} CPU-s/min idle over "
                  f"{result['seconds']} s, {result['threads']} threads, "
                  f"{result['wakeups_per_second']} wakeups/s (load {result['loadavg']:.2f})")
            print(f"threads started {result['threads_started']}, ended {result['threads_ended']} "
                  f"(total minus live threads: {result['ended_threads_cpu_seconds_per_minute']} CPU-s/min)")
            print(f"{'thread name':<20}{'threads':>8}{'wakeups/s':>11}{'CPU-s/min':>11}")
            for name, v in result["per_thread_name"].items():
                print(f"{name:<20}{v['threads']:>8}{v['wakeups_per_second']:>11}"
                      f"{v['cpu_seconds_per_minute']:>11}")
        return 0
    finally:
        if server is not None:
            stop_pid(server)
        log.close()
        if kafka_dir is not None:
            subprocess.run([sys.executable, str(REPO / "scripts/kafka/cluster.py"), "stop",
                            "--dir", str(kafka_dir)], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

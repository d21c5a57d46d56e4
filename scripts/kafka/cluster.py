#!/usr/bin/env python3
"""Starts and stops a local Apache Kafka cluster (KRaft, 1 or 3 combined broker+controller nodes)
on loopback ports, for sediment's tests and for trying sediment with a Kafka commit log.

Command line (state lives in DIR/cluster.json; every command is safe to repeat):

    cluster.py start   --dir DIR [--brokers 1|3] [--base-port P] [--prop KEY=VALUE ...]
    cluster.py stop    --dir DIR
    cluster.py kill    --dir DIR INDEX        # SIGKILL one node
    cluster.py restart --dir DIR INDEX        # start a stopped/killed node again, same ports/dirs
    cluster.py status  --dir DIR              # JSON
    cluster.py bootstrap --dir DIR            # prints host:port,host:port,...

`start` prints the bootstrap servers on stdout when the cluster serves. Kafka's jars come from
scripts/kafka/fetch.sh (Maven) unless KAFKA_LIBS names a folder of jars.

Library use (pytest):

    from cluster import KafkaCluster
    with KafkaCluster(tmp_path / "kafka", brokers=3) as kc:   # __exit__ stops every node by pid
        kc.start()
        kc.bootstrap()   # "127.0.0.1:p0,127.0.0.1:p1,127.0.0.1:p2"
        kc.kill(1); kc.restart(1)

Processes are only ever signalled by the pids recorded in the state file, and only after
/proc/<pid>/cmdline shows they still run this cluster's server.properties (no pid-reuse accidents).
Python 3 standard library only.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Dict, List, Mapping, Optional

SCRIPT_DIR = Path(__file__).resolve().parent
FETCH_SCRIPT = SCRIPT_DIR / "fetch.sh"
LOG4J2_CONFIG = SCRIPT_DIR / "log4j2.properties"
STATE_FILE = "cluster.json"
STATE_VERSION = 1
HOST = "127.0.0.1"


class KafkaClusterError(RuntimeError):
    """A cluster operation failed; the message says which node and carries its log tail."""


def _log_tail(path: Path, lines: int = 40) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return f"(no {path.name})"
    # Stack frames crowd out the messages that say what went wrong.
    kept = [ln for ln in text.splitlines()
            if not ln.startswith(("\tat ", "\t... ")) and ln.strip() != "... more"]
    tail = kept[-lines:]
    return "\n".join(tail) if tail else f"({path.name} is empty)"


def _ephemeral_range() -> range:
    try:
        lo, hi = open("/proc/sys/net/ipv4/ip_local_port_range").read().split()
        return range(int(lo), int(hi) + 1)
    except (OSError, ValueError):
        return range(32768, 61000)


def _free_ports(count: int) -> List[int]:
    """`count` loopback ports that are free now and lie outside the kernel's ephemeral range, so
    that a killed node's ports are not taken by some outgoing connection before it restarts."""
    eph = _ephemeral_range()
    low, high = (10000, eph.start - 1) if eph.start > 12000 else (eph.stop, 65535)
    rng = random.SystemRandom()
    socks: List[socket.socket] = []
    try:
        for _ in range(5000):
            if len(socks) == count:
                break
            port = rng.randint(low, high)
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((HOST, port))
            except OSError:
                s.close()
                continue
            socks.append(s)
        if len(socks) < count:
            raise KafkaClusterError("could not find free loopback ports")
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _port_open(port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def _random_cluster_id() -> str:
    """A Kafka cluster id (url-safe base64 of 16 random bytes). Like Kafka's Uuid.randomUuid it
    never starts with '-', which command-line parsers would take for an option."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not cid.startswith("-"):
            return cid


def fetch_libs(kafka_version: Optional[str] = None) -> Path:
    """Returns the folder of Kafka jars: $KAFKA_LIBS, or what fetch.sh resolves with Maven."""
    env_libs = os.environ.get("KAFKA_LIBS")
    if env_libs:
        return Path(env_libs)
    env = dict(os.environ)
    if kafka_version:
        env["KAFKA_VERSION"] = kafka_version
    res = subprocess.run([str(FETCH_SCRIPT)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    if res.returncode != 0:
        raise KafkaClusterError(f"fetching Kafka failed:\n{res.stderr.strip()}")
    return Path(res.stdout.strip().splitlines()[-1])


class KafkaCluster:
    """A KRaft cluster of `brokers` combined (broker+controller) nodes under `dir`.

    Node i listens on 127.0.0.1:broker_port(i) (PLAINTEXT) and 127.0.0.1:controller_port(i);
    its data is dir/node-i/data, its config dir/node-i/server.properties, its WARN+ log
    dir/node-i/server.log and its stdout/stderr dir/node-i/stdout.log.
    Not thread-safe; one KafkaCluster object (or one CLI command) per dir at a time.
    """

    def __init__(self, dir, brokers: int = 1, base_port: Optional[int] = None,
                 libs: Optional[os.PathLike] = None, kafka_version: Optional[str] = None,
                 heap_mb: Optional[int] = None, extra_props: Optional[Mapping[str, str]] = None):
        if brokers < 1:
            raise ValueError("brokers must be >= 1")
        self.dir = Path(dir).resolve()
        self.brokers = brokers
        self.base_port = base_port
        self._libs = Path(libs) if libs else None
        self.kafka_version = kafka_version
        self.heap_mb = heap_mb or (512 if brokers == 1 else 384)
        self.extra_props: Dict[str, str] = dict(extra_props or {})
        self._procs: Dict[int, subprocess.Popen] = {}
        self.state: Optional[dict] = None
        self._load_state()

    # ----- state -----------------------------------------------------------------------------

    @classmethod
    def open(cls, dir) -> "KafkaCluster":
        """The cluster recorded in dir/cluster.json (raises when there is none)."""
        path = Path(dir).resolve() / STATE_FILE
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise KafkaClusterError(f"no cluster state at {path}: {e}")
        return cls(dir, brokers=state["brokers"], libs=state.get("libs"),
                   heap_mb=state.get("heap_mb"), extra_props=state.get("extra_props"))

    @property
    def state_path(self) -> Path:
        return self.dir / STATE_FILE

    def _load_state(self) -> None:
        if not self.state_path.exists():
            return
        state = json.loads(self.state_path.read_text())
        if state.get("version") != STATE_VERSION:
            raise KafkaClusterError(f"{self.state_path}: unknown state version")
        if state["brokers"] != self.brokers:
            raise KafkaClusterError(
                f"{self.dir} holds a {state['brokers']}-node cluster, not {self.brokers}; "
                f"stop it and remove the folder, or use another --dir")
        self.state = state

    def _save_state(self) -> None:
        assert self.state is not None
        self.state["bootstrap"] = self.bootstrap()
        tmp = self.state_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.state, indent=2) + "\n")
        os.replace(tmp, self.state_path)

    def _new_state(self, libs: Path) -> dict:
        if self.base_port is not None:
            ports = list(range(self.base_port, self.base_port + 2 * self.brokers))
        else:
            ports = _free_ports(2 * self.brokers)
        nodes = []
        for i in range(self.brokers):
            node_dir = self.dir / f"node-{i}"
            nodes.append({
                "index": i,
                "node_id": i,
                "broker_port": ports[2 * i],
                "controller_port": ports[2 * i + 1],
                "dir": str(node_dir),
                "data_dir": str(node_dir / "data"),
                "config": str(node_dir / "server.properties"),
                "pid": None,
            })
        return {
            "version": STATE_VERSION,
            "brokers": self.brokers,
            "cluster_id": _random_cluster_id(),
            "libs": str(libs),
            "heap_mb": self.heap_mb,
            "extra_props": self.extra_props,
            "bootstrap": "",
            "nodes": nodes,
        }

    def bootstrap(self) -> str:
        """Comma-separated host:port of every node's PLAINTEXT listener."""
        if self.state is None:
            raise KafkaClusterError("cluster not started")
        return ",".join(f"{HOST}:{n['broker_port']}" for n in self.state["nodes"])

    def node(self, i: int) -> dict:
        if self.state is None:
            raise KafkaClusterError("cluster not started")
        if not 0 <= i < self.brokers:
            raise KafkaClusterError(f"node index {i} out of range 0..{self.brokers - 1}")
        return self.state["nodes"][i]

    # ----- configuration -----------------------------------------------------------------------

    def _properties(self, node: dict) -> Dict[str, str]:
        n = self.brokers
        voters = ",".join(f"{m['node_id']}@{HOST}:{m['controller_port']}"
                          for m in self.state["nodes"])
        min_isr = str(min(2, n))
        props = {
            "process.roles": "broker,controller",
            "node.id": str(node["node_id"]),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://{HOST}:{node['broker_port']},"
                         f"CONTROLLER://{HOST}:{node['controller_port']}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{node['broker_port']}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": node["data_dir"],
            "num.partitions": "1",
            "default.replication.factor": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": str(n),
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": str(n),
            "transaction.state.log.min.isr": min_isr,
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": str(n),
            "share.coordinator.state.topic.min.isr": min_isr,
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "num.recovery.threads.per.data.dir": "1",
        }
        props.update({str(k): str(v) for k, v in self.state.get("extra_props", {}).items()})
        return props

    def _write_config(self, node: dict) -> None:
        Path(node["data_dir"]).mkdir(parents=True, exist_ok=True)
        lines = ["# Written by scripts/kafka/cluster.py; rewritten on every start."]
        lines += [f"{k}={v}" for k, v in self._properties(node).items()]
        Path(node["config"]).write_text("\n".join(lines) + "\n")

    def _java_base(self, heap_mb: int, node: dict) -> List[str]:
        java = shutil.which("java")
        if not java:
            raise KafkaClusterError("java not found on PATH (a JDK 17+ is needed)")
        cmd = [java, f"-Xmx{heap_mb}m", f"-Xms{min(heap_mb, 128)}m", "-XX:+UseG1GC",
               "-XX:MaxGCPauseMillis=20", "-XX:+ExplicitGCInvokesConcurrent",
               "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}",
               f"-Dkafka.logs.dir={node['dir']}"]
        cmd += os.environ.get("KAFKA_JVM_OPTS", "").split()
        cmd += ["-cp", str(Path(self.state["libs"]) / "*")]
        return cmd

    def _format(self, nodes: List[dict]) -> None:
        """Formats the storage of every node in `nodes` that is not yet formatted (in parallel)."""
        todo = [n for n in nodes if not (Path(n["data_dir"]) / "meta.properties").exists()]
        running = []
        for node in todo:
            cmd = self._java_base(256, node) + [
                "kafka.tools.StorageTool", "format", "--config", node["config"],
                f"--cluster-id={self.state['cluster_id']}", "--ignore-formatted"]
            out = open(Path(node["dir"]) / "format.log", "wb")
            running.append((node, subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                                   stdin=subprocess.DEVNULL), out))
        failed = []
        for node, proc, out in running:
            try:
                rc = proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = proc.wait()
            out.close()
            if rc != 0:
                failed.append(f"node {node['index']}: storage format exited {rc}:\n"
                              + _log_tail(Path(node["dir"]) / "format.log"))
        if failed:
            raise KafkaClusterError("\n".join(failed))

    # ----- processes ---------------------------------------------------------------------------

    def _reap(self, i: int, pid: int) -> None:
        proc = self._procs.get(i)
        if proc is not None and proc.pid == pid:
            proc.poll()
            return
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass

    def _pid_alive(self, i: int) -> Optional[int]:
        """The recorded pid of node i when that process still runs node i's server."""
        node = self.node(i)
        pid = node.get("pid")
        if not pid:
            return None
        self._reap(i, pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
            if stat[stat.rindex(")") + 2] in "ZX":
                return None
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            return None
        if b"kafka.Kafka" in argv and node["config"].encode() in argv:
            return pid
        return None

    def _gone(self, i: int, pid: int) -> bool:
        """True once pid (signalled as node i) has exited. Unlike _pid_alive this does not trust
        /proc/<pid>/cmdline, which is empty while a killed process is still tearing down."""
        self._reap(i, pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
            return stat[stat.rindex(")") + 2] in "ZX"
        except (OSError, ValueError, IndexError):
            return True

    def is_running(self, i: int) -> bool:
        return self._pid_alive(i) is not None

    def _launch(self, i: int) -> None:
        node = self.node(i)
        cmd = self._java_base(self.heap_mb, node) + ["kafka.Kafka", node["config"]]
        with open(Path(node["dir"]) / "stdout.log", "ab") as out:
            out.write(f"\n==== start {time.strftime('%Y-%m-%dT%H:%M:%S')}\n".encode())
            out.flush()
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=node["dir"],
                                    start_new_session=True)
        self._procs[i] = proc
        node["pid"] = proc.pid
        self._save_state()
        # Popen returns (vfork) before execve has set up the new argv: /proc/<pid>/cmdline reads
        # empty for a few ms. Wait for it, so that _pid_alive does not mistake the node for gone.
        deadline = time.monotonic() + 10
        while self._pid_alive(i) is None and proc.poll() is None:
            if time.monotonic() > deadline:
                break
            time.sleep(0.005)

    def _diagnose(self, i: int, why: str) -> str:
        node = self.node(i)
        d = Path(node["dir"])
        proc = self._procs.get(i)
        if proc is not None:
            try:
                rc = proc.wait(timeout=10)  # the JVM's last threads may still be exiting
                why += f" (exit status {rc})" if rc >= 0 else f" (killed by signal {-rc})"
            except subprocess.TimeoutExpired:
                pass
        return (f"node {i} (127.0.0.1:{node['broker_port']}, pid {node.get('pid')}): {why}\n"
                f"--- {d / 'server.log'} (tail)\n{_log_tail(d / 'server.log')}\n"
                f"--- {d / 'stdout.log'} (tail)\n{_log_tail(d / 'stdout.log', 20)}")

    def metadata(self, i: int, timeout_s: int = 5) -> Optional[dict]:
        """Metadata as seen through node i (kcat -L -J), or None when it does not answer."""
        kcat = shutil.which("kcat") or shutil.which("kafkacat")
        if not kcat:
            raise KafkaClusterError("kcat not found on PATH (Debian package kcat)")
        try:
            res = subprocess.run(
                [kcat, "-L", "-J", "-q", "-m", str(timeout_s), "-b",
                 f"{HOST}:{self.node(i)['broker_port']}"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                timeout=timeout_s + 10)
        except subprocess.TimeoutExpired:
            return None
        if res.returncode != 0:
            return None
        try:
            return json.loads(res.stdout)
        except ValueError:
            return None

    def wait_ready(self, indices: Optional[List[int]] = None, timeout: float = 120.0) -> None:
        """Waits until each node in `indices` (default: all) accepts TCP connections and its
        metadata lists every node of the cluster. Raises with the node's log tail on timeout or
        when its process exits."""
        indices = list(range(self.brokers)) if indices is None else indices
        want = {n["node_id"] for n in self.state["nodes"]}
        deadline = time.monotonic() + timeout
        pending = list(indices)
        while pending:
            i = pending[0]
            if not self.is_running(i):
                raise KafkaClusterError(self._diagnose(i, "process exited during start"))
            if _port_open(self.node(i)["broker_port"]):
                md = self.metadata(i, timeout_s=3)
                if md is not None and {b.get("id") for b in md.get("brokers", [])} >= want:
                    pending.pop(0)
                    continue
            if time.monotonic() > deadline:
                raise KafkaClusterError(self._diagnose(
                    i, f"not serving all {self.brokers} brokers within {timeout:.0f} s"))
            time.sleep(0.5)

    # ----- public operations -------------------------------------------------------------------

    def start(self, timeout: float = 120.0, extra_props: Optional[Mapping[str, str]] = None,
              stop_on_failure: bool = True) -> str:
        """Formats storage if needed, starts every node that is not running, waits until all
        serve, returns the bootstrap servers. Reuses the ports, cluster id and data of an earlier
        start in the same dir. extra_props are merged over the defaults (and remembered).
        On failure every node is stopped (unless stop_on_failure=False) and KafkaClusterError is
        raised; logs stay in the node folders."""
        if extra_props:
            self.extra_props.update({str(k): str(v) for k, v in extra_props.items()})
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.state is None:
            libs = self._libs or fetch_libs(self.kafka_version)
            self.state = self._new_state(libs)
        else:
            if self._libs:
                self.state["libs"] = str(self._libs)
            self.state["heap_mb"] = self.heap_mb
            self.state["extra_props"] = {**self.state.get("extra_props", {}), **self.extra_props}
        self.extra_props = dict(self.state["extra_props"])
        if not (Path(self.state["libs"]) / ".complete").exists() and not os.environ.get(
                "KAFKA_LIBS"):
            self.state["libs"] = str(fetch_libs(self.kafka_version))
        for node in self.state["nodes"]:
            Path(node["dir"]).mkdir(parents=True, exist_ok=True)
        self._save_state()
        try:
            for node in self.state["nodes"]:
                if not self.is_running(node["index"]):
                    self._write_config(node)
            self._format([n for n in self.state["nodes"] if not self.is_running(n["index"])])
            for node in self.state["nodes"]:
                if not self.is_running(node["index"]):
                    self._launch(node["index"])
            self.wait_ready(timeout=timeout)
        except BaseException:
            if stop_on_failure:
                self.stop()
            raise
        return self.bootstrap()

    def _signal_and_wait(self, indices: List[int], timeout: float) -> None:
        alive = {i: self._pid_alive(i) for i in indices}
        alive = {i: p for i, p in alive.items() if p}
        for pid in alive.values():
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while alive and time.monotonic() < deadline:
            alive = {i: p for i, p in alive.items() if not self._gone(i, p)}
            if alive:
                time.sleep(0.2)
        for i, pid in alive.items():
            self._kill9(i, pid)

    def _kill9(self, i: int, pid: int) -> None:
        """SIGKILLs pid (node i, identity checked by the caller) and waits until it has exited."""
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 20
        while not self._gone(i, pid):
            if time.monotonic() > deadline:
                raise KafkaClusterError(f"node {i} (pid {pid}) survived SIGKILL for 20 s")
            time.sleep(0.05)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM every running node (controlled shutdown), SIGKILL what is left after
        `timeout` seconds. Data stays; a later start() resumes the same cluster."""
        if self.state is None:
            return
        self._signal_and_wait(list(range(self.brokers)), timeout)
        for node in self.state["nodes"]:
            node["pid"] = None
        self._procs.clear()
        self._save_state()

    def kill(self, i: int) -> None:
        """SIGKILL node i (a crash: no controlled shutdown) and wait until it is gone."""
        pid = self._pid_alive(i)
        if pid:
            self._kill9(i, pid)
        self.node(i)["pid"] = None
        self._procs.pop(i, None)
        self._save_state()

    def restart(self, i: int, timeout: float = 120.0) -> None:
        """Starts node i again on its ports and data dir if it is not running, and waits until it
        serves and sees every node."""
        if not self.is_running(i):
            self._write_config(self.node(i))
            self._launch(i)
        self.wait_ready([i], timeout=timeout)

    def status(self) -> dict:
        if self.state is None:
            return {"dir": str(self.dir), "started": False}
        nodes = []
        for node in self.state["nodes"]:
            nodes.append({**node, "running": self.is_running(node["index"]),
                          "port_open": _port_open(node["broker_port"], timeout=0.5)})
        return {"dir": str(self.dir), "started": True, "brokers": self.brokers,
                "bootstrap": self.bootstrap(), "cluster_id": self.state["cluster_id"],
                "libs": self.state["libs"], "nodes": nodes}

    def __enter__(self) -> "KafkaCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _parse_props(items: List[str]) -> Dict[str, str]:
    props = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--prop wants KEY=VALUE, got {item!r}")
        props[key.strip()] = value.strip()
    return props


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    default_dir = os.environ.get("SEDIMENT_KAFKA_DIR", "./sediment-kafka")

    def with_dir(p):
        p.add_argument("--dir", default=default_dir,
                       help="cluster folder (default $SEDIMENT_KAFKA_DIR or ./sediment-kafka)")
        return p

    p = with_dir(sub.add_parser("start", help="format (once) and start all nodes, wait"))
    p.add_argument("--brokers", type=int, choices=[1, 3], default=1)
    p.add_argument("--base-port", type=int, default=None,
                   help="node i uses P+2i (broker) and P+2i+1 (controller); default: free ports")
    p.add_argument("--prop", action="append", metavar="KEY=VALUE",
                   help="extra broker property, repeatable")
    p.add_argument("--heap-mb", type=int, default=None)
    p.add_argument("--timeout", type=float, default=120.0)
    p = with_dir(sub.add_parser("stop", help="SIGTERM, then SIGKILL, every node"))
    p.add_argument("--timeout", type=float, default=30.0)
    for name, what in (("kill", "SIGKILL one node"), ("restart", "start one node again")):
        p = with_dir(sub.add_parser(name, help=what))
        p.add_argument("index", type=int)
        p.add_argument("--timeout", type=float, default=120.0)
    with_dir(sub.add_parser("status", help="print the state as JSON"))
    with_dir(sub.add_parser("bootstrap", help="print host:port,... of the brokers"))
    args = ap.parse_args(argv)

    try:
        if args.cmd == "start":
            kc = KafkaCluster(args.dir, brokers=args.brokers, base_port=args.base_port,
                              heap_mb=args.heap_mb, extra_props=_parse_props(args.prop))
            print(kc.start(timeout=args.timeout))
            return 0
        state_path = Path(args.dir) / STATE_FILE
        if args.cmd == "stop" and not state_path.exists():
            return 0
        kc = KafkaCluster.open(args.dir)
        if args.cmd == "stop":
            kc.stop(timeout=args.timeout)
        elif args.cmd == "kill":
            kc.kill(args.index)
        elif args.cmd == "restart":
            kc.restart(args.index, timeout=args.timeout)
        elif args.cmd == "status":
            print(json.dumps(kc.status(), indent=2))
        elif args.cmd == "bootstrap":
            print(kc.bootstrap())
        return 0
    except KafkaClusterError as e:
        print(f"kafka/cluster.py {args.cmd}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

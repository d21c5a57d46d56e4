"""Fault harness for a sediment cluster: one real Kafka broker (scripts/kafka/cluster.py) and N
real `sediment server` processes on loopback ports forming one cluster, a workload, fault actions,
a checker and the recovery-time figure. Importable without pytest's conftest machinery (soak.py
does); it puts tests/e2e, tests/kafka and scripts/kafka on sys.path itself.

Contract:
- Nodes of one SedimentCluster share `--kafka-brokers`, `--kafka-topic-prefix` (fresh per cluster),
  the ingest/API tokens, the cluster flags and, with `tls=` (harness.TlsFiles, e.g. the `tls_files`
  fixture), one certificate for 127.0.0.1 and the test CA (`--tls-cert/--tls-key/--tls-ca`: every
  listener and every node-to-node call is HTTPS); each has its own data dir (`<root>/node-<i>/data`),
  log dir (`<root>/node-<i>/logs`, one file per start) and a loopback port kept across restarts.
- Processes are signalled only through the Popen objects this harness made (kill -9, SIGSTOP,
  SIGCONT, SIGTERM); `stop_all()` resumes paused nodes, SIGTERMs every node, SIGKILLs what is left.
  Start nodes from the main thread only (children die with the thread that forked them).
- The harness's belief about each node (`up`, `down`, `paused`, `starting`) is what the workload
  and the checker use: clients send only to `up` nodes, `quiet()` wants every `up` node alive in
  the view and every partition owned by an `up` node.
- Workload event ids are `<run>-<client>-<seq>`; a request that did not get a 200 is never sent
  again with the same ids, so an unacknowledged event may be stored at most once and an
  acknowledged one exactly once.
- Every fault action is appended to `timeline` with its monotonic time (printed by the soak, and
  attached to failure messages).
- Thread-safety: node state changes come from the main thread; `up_nodes()` and `timeline` are
  safe to read from the workload/watcher threads. A ClusterNode's `session` belongs to the main
  thread; threads use their own sessions (query_run(session=...)).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import requests

ROOT = Path(__file__).resolve().parents[2]
for _p in (ROOT / "tests" / "e2e", ROOT / "tests" / "kafka", ROOT / "scripts" / "kafka"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from cluster import KafkaCluster  # noqa: E402
from faults import ClientPool, IngestClient, Sent, summarize  # noqa: E402,F401 - summarize re-exported
from harness import API_TOKEN, SedimentServer, TlsFiles, clean_env, free_port, marker, sediment_bin, wait_until  # noqa: E402,F401

# Defaults of the scenarios (the server's own defaults are 6000 / 5000 / 2000).
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_TIMEOUT_MS = 5000
FLUSH_AGE_MS = 1000
FILE_DELETION_DELAY_MS = 2000
PARTITIONS = 6
QUIET_TIMEOUT = 90.0
# The quiet view must keep the same owners and epochs this long.
QUIET_STABLE_S = 2.0
# A check's query is repeated at most this often when ownership moved while it ran.
CHECK_ATTEMPTS = 3
# The quiet rule's bound on how old the view's commit-log offsets may be.
MAX_LOG_OFFSETS_AGE_MS = 5000
START_TIMEOUT = 90.0
HTTP_INGEST_TIMEOUT = 20.0
QUERY_TIMEOUT = 60.0
ID_RE = re.compile(r"id=(\S+)")
NODE_ID_RE = re.compile(r"^sediment-node-id v1 (\d+) [0-9a-f]{8}\n?$")
# Flags a binary must know to run as a cluster node (this harness passes them).
CLUSTER_FLAGS = ("--digest-session-timeout-ms", "--heartbeat-timeout-ms")


def now_ms() -> int:
    return int(time.time() * 1000)


# Figures the scenarios measured (recovery times), printed at the end of the pytest run by
# conftest.py's terminal summary, since test output is captured.
FIGURES: list[str] = []


def server_help(binary: str) -> tuple[str, str | None]:
    """(`binary server --help` output, None), or ("", why it could not be run)."""
    try:
        out = subprocess.run([binary, "server", "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, timeout=30, env=clean_env()).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return "", f"{binary} server --help failed: {e}"
    return out, None


def cluster_support(binary: str | None = None) -> str | None:
    """None when `sediment server --help` lists the cluster flags, else the reason it cannot run a
    cluster (for a skip message)."""
    binary = binary or sediment_bin()
    out, err = server_help(binary)
    if err:
        return err
    missing = [f for f in CLUSTER_FLAGS if f not in out]
    if missing:
        return f"{binary} has no cluster support yet (server --help lacks {', '.join(missing)})"
    return None


# ---------------------------------------------------------------------------------------------
# Nodes and the cluster
# ---------------------------------------------------------------------------------------------


class ClusterNode(SedimentServer):
    """One cluster node: a SedimentServer with the cluster flags, a harness-side state and the
    node ids it had (a wiped data dir gives a new one)."""

    def __init__(self, index: int, root: Path, *, kafka_brokers: str, topic_prefix: str, partitions: int,
                 flush_age_ms: int | None, cluster_args: Iterable[str], extra_args: Iterable[str] = (),
                 extra_env: dict[str, str] | None = None, tls: TlsFiles | None = None):
        self.index = index
        self.root = Path(root)
        super().__init__(self.root / "data", self.root / "logs", kafka_brokers=kafka_brokers,
                         kafka_topic_prefix=topic_prefix, partitions=partitions, flush_age_ms=flush_age_ms,
                         extra_args=[*cluster_args, *extra_args], extra_env=extra_env, tls=tls)
        self.state = "new"  # new | starting | up | paused | down
        self.node_id: int | None = None
        self.node_ids: list[int] = []  # every id this node had, oldest first

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alive_process(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_serving(self, timeout: float = START_TIMEOUT) -> None:
        """Waits until the launched process answers /api/v1/status with 200 (AssertionError with
        the log tail if it exits first or the time runs out; then it is killed)."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"node {self.index} exited with {self.proc.returncode} during start\n"
                                     f"{self.describe()}")
            if self.serving():
                break
            if time.monotonic() >= deadline:
                out = self.describe()
                stacks = self.dump_stacks()
                self.kill()
                raise AssertionError(f"node {self.index} not serving within {timeout}s\n{out}\n{stacks}")
            time.sleep(0.1)
        self.node_id = self.read_node_id()
        if self.node_id is not None and (not self.node_ids or self.node_ids[-1] != self.node_id):
            self.node_ids.append(self.node_id)

    def dump_stacks(self) -> str:
        """Every thread's stack of the running process (gdb, when installed), written next to its
        log; returns the file's name and the sediment frames, or why there are none."""
        if self.proc is None or self.proc.poll() is not None:
            return "no stacks: the process is not running"
        gdb = shutil.which("gdb")
        if gdb is None:
            return "no stacks: gdb is not installed"
        path = self.log_dir / f"stacks-{self.proc.pid}.txt"
        try:
            r = subprocess.run([gdb, "-p", str(self.proc.pid), "-batch", "-ex", "thread apply all bt"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"no stacks: gdb failed: {e}"
        path.write_text(r.stdout)
        frames = [ln for ln in r.stdout.splitlines() if ln.startswith("Thread ") or "sediment::" in ln]
        return f"thread stacks in {path}:\n" + "\n".join(ln[:200] for ln in frames[:150])

    def read_node_id(self) -> int | None:
        """The node id from /api/v1/status ("node"), else from <data-dir>/node-id."""
        try:
            st = requests.get(self.url + "/api/v1/status", headers=self.api_headers(), timeout=5).json()
            if isinstance(st.get("node"), int) and st["node"] > 0:
                return st["node"]
        except (requests.RequestException, ValueError):
            pass
        return self.node_id_file()

    def node_id_file(self) -> int | None:
        try:
            m = NODE_ID_RE.match((self.data_dir / "node-id").read_text())
        except OSError:
            return None
        return int(m.group(1)) if m else None

    def signal(self, sig: int) -> None:
        assert self.proc is not None and self.proc.poll() is None, f"node {self.index} is not running"
        self.proc.send_signal(sig)

    def cleanup(self) -> None:
        if self.alive_process():
            self.proc.send_signal(signal.SIGCONT)
        super().cleanup()
        self.state = "down"


@dataclass
class Mark:
    t: float  # time.monotonic()
    what: str


class SedimentCluster:
    """N sediment nodes on one Kafka cluster (see the module contract)."""

    def __init__(self, kafka: KafkaCluster, root: Path, n: int = 3, *, partitions: int = PARTITIONS,
                 flush_age_ms: int | None = FLUSH_AGE_MS, session_timeout_ms: int = SESSION_TIMEOUT_MS,
                 heartbeat_timeout_ms: int = HEARTBEAT_TIMEOUT_MS, topic_prefix: str | None = None,
                 cluster_flags: bool = True, extra_args: Iterable[str] = (), extra_env: dict[str, str] | None = None,
                 tls: TlsFiles | None = None):
        self.kafka = kafka
        self.root = Path(root)
        self.partitions = partitions
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_timeout_ms = heartbeat_timeout_ms
        self.topic_prefix = topic_prefix or f"cl-{uuid.uuid4().hex[:10]}-"
        cluster_args: list[str] = []
        if cluster_flags:
            cluster_args = ["--digest-session-timeout-ms", str(session_timeout_ms),
                            "--heartbeat-timeout-ms", str(heartbeat_timeout_ms),
                            # Files that left Global (merged away, dropped extra copies) go within
                            # seconds, so disk checks (wait_no_orphans) converge quickly.
                            "--file-deletion-delay-ms", str(FILE_DELETION_DELAY_MS)]
        self.nodes = [ClusterNode(i, self.root / f"node-{i}", kafka_brokers=kafka.bootstrap(),
                                  topic_prefix=self.topic_prefix, partitions=partitions, flush_age_ms=flush_age_ms,
                                  cluster_args=cluster_args, extra_args=extra_args, extra_env=extra_env,
                                  tls=tls)
                      for i in range(n)]
        self.api_token = API_TOKEN
        self.repo = self.nodes[0].repo
        self.timeline: list[Mark] = []
        self._mu = threading.Lock()
        self.t0 = time.monotonic()

    # ---- bookkeeping ----

    def mark(self, what: str) -> float:
        t = time.monotonic()
        with self._mu:
            self.timeline.append(Mark(t, what))
        return t

    def timeline_text(self) -> str:
        with self._mu:
            marks = list(self.timeline)
        return "\n".join(f"  t={m.t - self.t0:8.2f}s  {m.what}" for m in marks)

    def node(self, i: int) -> ClusterNode:
        return self.nodes[i]

    def _set_state(self, node: ClusterNode, state: str) -> None:
        with self._mu:
            node.state = state

    def up_nodes(self) -> list[ClusterNode]:
        with self._mu:
            return [n for n in self.nodes if n.state == "up"]

    def index_of(self, node_id: int) -> int | None:
        """The index of the node whose current id is `node_id`."""
        return next((n.index for n in self.nodes if n.node_id == node_id), None)

    def up_ids(self) -> set[int]:
        return {n.node_id for n in self.up_nodes() if n.node_id is not None}

    def up_addresses(self) -> dict[int, str]:
        """node id -> advertised address (the listen address) of every up node."""
        return {n.node_id: n.address for n in self.up_nodes() if n.node_id is not None}

    def crashed(self) -> list[str]:
        """Nodes the harness believes run (up or paused) whose process has exited."""
        out = []
        for n in self.nodes:
            if n.state in ("up", "paused") and n.proc is not None and n.proc.poll() is not None:
                out.append(f"node {n.index} (id {n.node_id}) exited with {n.proc.returncode}")
        return out

    def assert_running(self) -> None:
        dead = self.crashed()
        if dead:
            tails = "\n".join(f"== node {n.index}\n{n.describe(4000)}" for n in self.nodes
                              if n.proc is not None and n.proc.poll() is not None and n.state in ("up", "paused"))
            raise AssertionError(f"{'; '.join(dead)} unexpectedly\n{tails}\ntimeline:\n{self.timeline_text()}")

    # ---- process control ----

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Launches every node at once and waits until each serves."""
        for n in self.nodes:
            self._set_state(n, "starting")
            n.launch()
        self.mark(f"launched {len(self.nodes)} nodes (prefix {self.topic_prefix})")
        for n in self.nodes:
            n.wait_serving(timeout)
            self._set_state(n, "up")
        self.mark("all nodes serving: " + ", ".join(f"{n.index}=id {n.node_id} :{n.port}" for n in self.nodes))

    def kill(self, i: int) -> float:
        """kill -9 node i; returns the monotonic time the process was gone."""
        n = self.nodes[i]
        self._set_state(n, "down")
        n.kill()
        return self.mark(f"kill -9 node {i} (id {n.node_id})")

    def pause(self, i: int) -> float:
        n = self.nodes[i]
        self._set_state(n, "paused")
        n.signal(signal.SIGSTOP)
        return self.mark(f"SIGSTOP node {i} (id {n.node_id})")

    def resume(self, i: int) -> float:
        n = self.nodes[i]
        n.signal(signal.SIGCONT)
        self._set_state(n, "up")
        return self.mark(f"SIGCONT node {i} (id {n.node_id})")

    def stop_node(self, i: int, timeout: float = 30.0) -> float:
        """SIGTERM (graceful), SIGKILL after `timeout`."""
        n = self.nodes[i]
        self._set_state(n, "down")
        if n.alive_process():
            n.proc.send_signal(signal.SIGCONT)
        try:
            rc = n.stop(timeout=timeout)
        except AssertionError:
            return self.mark(f"stop node {i}: no exit within {timeout}s of SIGTERM, killed")
        return self.mark(f"stop node {i} (id {n.node_id}): exit {rc}")

    def wipe(self, i: int) -> None:
        n = self.nodes[i]
        assert not n.alive_process(), f"node {i} still runs"
        shutil.rmtree(n.data_dir, ignore_errors=True)
        self.mark(f"wiped data dir of node {i} (was id {n.node_id})")
        n.node_id = None

    def launch(self, i: int) -> None:
        """Launches a stopped node without waiting (call wait_up(i) later)."""
        n = self.nodes[i]
        assert not n.alive_process(), f"node {i} still runs"
        self._set_state(n, "starting")
        n.launch()
        self.mark(f"launch node {i}")

    def wait_up(self, i: int, timeout: float = START_TIMEOUT) -> float:
        n = self.nodes[i]
        n.wait_serving(timeout)
        self._set_state(n, "up")
        return self.mark(f"node {i} serving (id {n.node_id})")

    def restart(self, i: int, *, hard: bool = False, wipe: bool = False, timeout: float = START_TIMEOUT) -> float:
        """Stops node i (kill -9 when hard, else SIGTERM) if it runs, optionally wipes its data
        dir, starts it and waits until it serves. Returns the monotonic time it served."""
        n = self.nodes[i]
        if n.alive_process():
            if hard:
                self.kill(i)
            else:
                self.stop_node(i)
        if wipe:
            self.wipe(i)
        self.launch(i)
        return self.wait_up(i, timeout)

    def kill_broker(self, b: int = 0) -> float:
        """kill -9 Kafka broker `b` (of a multi-broker KafkaCluster; 0 for the 1-broker one)."""
        self.kafka.kill(b)
        return self.mark("kill -9 Kafka broker" + (f" {b}" if self.kafka.brokers > 1 else ""))

    def restart_broker(self, down_s: float = 0.0, timeout: float = 120.0, b: int = 0) -> float:
        """Kills broker `b` (if running), waits `down_s`, starts it again and waits until it
        serves. Returns the time it served."""
        name = "Kafka broker" + (f" {b}" if self.kafka.brokers > 1 else "")
        if self.kafka.is_running(b):
            self.kill_broker(b)
        if down_s > 0:
            time.sleep(down_s)
        self.mark(f"starting {name}")
        self.kafka.restart(b, timeout=timeout)
        return self.mark(f"{name} serving")

    def heal(self) -> None:
        """Every node up: paused ones resumed, stopped ones started; every broker running."""
        for b in range(self.kafka.brokers):
            if not self.kafka.is_running(b):
                self.restart_broker(b=b)
        for n in self.nodes:
            if n.state == "paused":
                self.resume(n.index)
        for n in self.nodes:
            if n.state != "up" or not n.alive_process():
                if n.alive_process():
                    self.kill(n.index)
                self.launch(n.index)
        for n in self.nodes:
            if n.state == "starting":
                self.wait_up(n.index)

    def stop_all(self, timeout: float = 15.0) -> None:
        """Resumes paused nodes, SIGTERMs all, SIGKILLs any left after `timeout`. Never raises."""
        for n in self.nodes:
            try:
                if n.alive_process():
                    n.proc.send_signal(signal.SIGCONT)
                    n.proc.send_signal(signal.SIGTERM)
            except OSError:
                pass
        deadline = time.monotonic() + timeout
        for n in self.nodes:
            try:
                if n.proc is not None:
                    n.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for n in self.nodes:
            try:
                n.kill()
            except Exception:  # noqa: BLE001 - teardown must reach every node
                pass
            n.session.close()
            n.state = "down"

    # ---- views ----

    def cluster_view(self, i: int, timeout: float = 10.0) -> dict:
        """GET /api/v1/cluster of node i (API token)."""
        r = requests.get(self.nodes[i].url + "/api/v1/cluster", headers=self.nodes[i].api_headers(), timeout=timeout)
        assert r.status_code == 200, f"node {i}: /api/v1/cluster answered {r.status_code} {r.text[:300]}"
        return r.json()

    def owners(self, view: dict) -> dict[int, list[int]]:
        """owner node id -> partitions it owns in `view` (0 = unowned)."""
        out: dict[int, list[int]] = {}
        for p in view["partitions"]:
            out.setdefault(p["owner"], []).append(p["partition"])
        return out

    def quiet_problems(self, view: dict, *, allow_warnings: bool = False) -> list[str]:
        """Why `view` is not quiet (empty = quiet): every partition owned by an up node that the
        view shows alive, lag 0, log end known; offsets at most 5 s old; every up node alive in the
        view with its address (a node is reachable for queries only once peers know its address);
        no warnings (unless allowed)."""
        probs: list[str] = []
        addresses = self.up_addresses()
        up = set(addresses)
        age = view.get("logOffsetsAgeMs")
        if not isinstance(age, int) or age < 0 or age > MAX_LOG_OFFSETS_AGE_MS:
            probs.append(f"logOffsetsAgeMs {age}")
        alive = {n["id"]: n.get("alive") for n in view.get("nodes", [])}
        listed = {n["id"]: n.get("address") for n in view.get("nodes", [])}
        for nid in sorted(up):
            if not alive.get(nid):
                probs.append(f"node {nid} runs but is {'missing' if nid not in alive else 'not alive'} in the view")
            elif listed.get(nid) != addresses[nid]:
                probs.append(f"node {nid} address {listed.get(nid)!r} in the view, want {addresses[nid]!r}")
        parts = view.get("partitions", [])
        if len(parts) != self.partitions:
            probs.append(f"{len(parts)} partitions in the view, want {self.partitions}")
        for p in parts:
            pid = p.get("partition")
            if not p.get("owner") or not p.get("ownerAlive") or p.get("owner") not in up:
                probs.append(f"p{pid} owner {p.get('owner')} (alive {p.get('ownerAlive')})")
            if not isinstance(p.get("logEnd"), int) or p["logEnd"] < 0:
                probs.append(f"p{pid} logEnd {p.get('logEnd')}")
            if p.get("lag") != 0:
                probs.append(f"p{pid} lag {p.get('lag')}")
        if not allow_warnings:
            if view.get("warnings"):
                probs.append(f"warnings {view['warnings']}")
            unreachable = view.get("segments", {}).get("unreachable", 0)
            if unreachable:
                probs.append(f"{unreachable} segments unreachable")
        return probs

    def quiet(self, via: int | None = None, *, allow_warnings: bool = False) -> bool:
        """True when node `via`'s view (or some up node's, when via is None) is quiet."""
        candidates = [self.nodes[via]] if via is not None else self.up_nodes()
        for n in candidates:
            try:
                if not self.quiet_problems(self.cluster_view(n.index), allow_warnings=allow_warnings):
                    return True
            except (requests.RequestException, AssertionError, ValueError, KeyError):
                continue
        return False

    def wait_quiet(self, via: int | None = None, *, timeout: float = QUIET_TIMEOUT, allow_warnings: bool = False,
                   stable_s: float = QUIET_STABLE_S) -> tuple[int, dict]:
        """Waits until a node's view (node `via`'s, or any up node's) is quiet (quiet_problems)
        and has stayed quiet with the same owners and epochs for `stable_s` seconds (so a
        rebalance that is still going on is not mistaken for the end state). Returns (index of
        that node, its view). AssertionError after `timeout` with the last view and its problems,
        or at once when a node the harness runs has exited."""
        def candidates() -> list[int]:
            return [via] if via is not None else [n.index for n in self.up_nodes()]
        ((index, view),) = self._wait_quiet_views(candidates, want_all=False, timeout=timeout,
                                                  allow_warnings=allow_warnings, stable_s=stable_s).items()
        return index, view

    def wait_quiet_all(self, indices: list[int], *, timeout: float = QUIET_TIMEOUT, allow_warnings: bool = False,
                       stable_s: float = QUIET_STABLE_S) -> dict[int, dict]:
        """wait_quiet(i) for every node in `indices` at once: polls all of them each round until
        each one's own view has been quiet with the same owners and epochs for `stable_s` seconds
        (the windows overlap instead of following one another). Returns {index: its last view}.
        AssertionError like wait_quiet's."""
        return self._wait_quiet_views(lambda: list(indices), want_all=True, timeout=timeout,
                                      allow_warnings=allow_warnings, stable_s=stable_s)

    def _wait_quiet_views(self, candidates, *, want_all: bool, timeout: float, allow_warnings: bool,
                          stable_s: float) -> dict[int, dict]:
        """The polling behind wait_quiet and wait_quiet_all: each round asks every node
        candidates() names that is not done yet for its view; a node is done once its view has
        been quiet with the same owners and epochs for `stable_s` seconds. Returns {index: view}
        as soon as one node is done (want_all=False) or every candidate is (want_all=True)."""
        last: dict[str, Any] = {}
        since: dict[int, tuple[float, tuple]] = {}  # node index -> (first quiet time, ownership)
        done: dict[int, dict] = {}
        deadline = time.monotonic() + timeout
        while True:
            self.assert_running()
            names = candidates()
            for i in names:
                if i in done:
                    continue
                try:
                    view = self.cluster_view(i)
                except (requests.RequestException, AssertionError, ValueError) as e:
                    last = {"node": i, "error": repr(e)}
                    since.pop(i, None)
                    continue
                probs = self.quiet_problems(view, allow_warnings=allow_warnings)
                if probs:
                    since.pop(i, None)
                    last = {"node": i, "problems": probs, "view": view}
                    continue
                own = ownership(view)
                t = time.monotonic()
                if i not in since or since[i][1] != own:
                    since[i] = (t, own)
                if t - since[i][0] >= stable_s:
                    done[i] = view
                    if not want_all:
                        return done
                else:
                    last = {"node": i, "problems": [f"quiet for {t - since[i][0]:.1f}s"], "view": view}
            if want_all and len(done) == len(names):
                return done
            if time.monotonic() >= deadline:
                detail = last.get("error") or "; ".join(last.get("problems", []))[:2000]
                view_txt = format_view(last["view"]) if "view" in last else ""
                raise AssertionError(f"cluster not quiet within {timeout}s (last: node {last.get('node')}: "
                                     f"{detail})\n{view_txt}\ntimeline:\n{self.timeline_text()}")
            time.sleep(0.25)

    def still_quiet(self, i: int, stable_view: dict, *, allow_warnings: bool = False) -> dict | None:
        """Node i's current view when it is quiet with the owners and epochs of `stable_view` (a
        view wait_quiet_all returned for it), else None (then wait_quiet(i) again)."""
        try:
            view = self.cluster_view(i)
        except (requests.RequestException, AssertionError, ValueError):
            return None
        if self.quiet_problems(view, allow_warnings=allow_warnings) or ownership(view) != ownership(stable_view):
            return None
        return view

    def wait_view(self, via: int, pred: Callable[[dict], Any], *, timeout: float, what: str) -> dict:
        """Polls node `via`'s view until pred(view) is truthy; returns that view. AssertionError
        with the last view after `timeout`, or at once when a node the harness runs has exited."""
        last: dict[str, Any] = {}
        deadline = time.monotonic() + timeout
        while True:
            self.assert_running()
            try:
                v = self.cluster_view(via)
                last = {"view": v}
                if pred(v):
                    return v
            except (requests.RequestException, AssertionError, ValueError, KeyError) as e:
                last["error"] = repr(e)
            if time.monotonic() >= deadline:
                view_txt = format_view(last["view"]) if "view" in last else "(no view)"
                raise AssertionError(f"timed out after {timeout}s waiting for {what} (node {via}; last error "
                                     f"{last.get('error')})\n{view_txt}\ntimeline:\n{self.timeline_text()}")
            time.sleep(0.25)

    def describe(self, tail: int = 5000) -> str:
        return "\n".join(f"== node {n.index} (:{n.port}, ids {n.node_ids}, {n.state})\n{n.describe(tail)}"
                         for n in self.nodes)


def ownership(view: dict) -> tuple:
    """(partition, owner, epoch) of every partition in `view`."""
    return tuple((p["partition"], p["owner"], p["epoch"]) for p in view.get("partitions", []))


def ownership_diff(a: tuple, b: tuple) -> str:
    d = {p: (o, e) for p, o, e in a}
    return ", ".join(f"p{p} {d.get(p)} -> {(o, e)}" for p, o, e in b if d.get(p) != (o, e)) or "none"


def format_view(view: dict) -> str:
    """A compact text rendering of a /api/v1/cluster answer for failure messages."""
    lines = [f"cluster view: self {view.get('self')} globalApplied {view.get('globalApplied')} "
             f"logOffsetsAgeMs {view.get('logOffsetsAgeMs')} segments {view.get('segments')} "
             f"warnings {view.get('warnings')}"]
    for n in view.get("nodes", []):
        lines.append(f"  node {n.get('id')} {n.get('address')} alive={n.get('alive')} "
                     f"hb={n.get('lastHeartbeatMsAgo')}ms segs={n.get('segments')} owned={n.get('partitionsOwned')}")
    for p in view.get("partitions", []):
        lines.append(f"  p{p.get('partition')} owner={p.get('owner')} alive={p.get('ownerAlive')} "
                     f"epoch={p.get('epoch')} replay={p.get('replayPoint')} log=[{p.get('logStart')},"
                     f"{p.get('logEnd')}) next={p.get('nextOffset')} lag={p.get('lag')} "
                     f"buffered={p.get('bufferedEvents')}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Workload
# ---------------------------------------------------------------------------------------------


@dataclass
class ClusterSent(Sent):
    node: int = -1  # index of the node the request went to


class ClusterClient(IngestClient):
    """Sends humio-structured batches of 1..5 uniquely numbered events (tags client=<idx>,
    ds=<0..datasources-1>, so several partitions) round-robin to the cluster's up nodes, until
    stopped. While the workload is held it sends nothing and reports itself idle."""

    def __init__(self, cluster: SedimentCluster, run: str, idx: int, stop: threading.Event, hold: threading.Event,
                 *, http_timeout: float, pause: float, datasources: int, seed: int):
        super().__init__(cluster.nodes[0], run, idx, stop, http_timeout=http_timeout, pause=pause,
                         datasources=datasources)
        self.cluster = cluster
        self.hold_event = hold
        self.idle = threading.Event()
        self.rng.seed(seed * 1000 + idx)
        self.turn = idx
        self.ts_of: dict[str, int] = {}

    def _batch(self) -> tuple[list[str], str]:
        """As IngestClient._batch, remembering each event's @timestamp (ms) in `ts_of`."""
        n = self.rng.randint(1, 5)
        ids = [f"{self.run_id}-{self.idx}-{self.seq + i}" for i in range(n)]
        self.seq += n
        ds = str(self.rng.randrange(self.datasources))
        ts = now_ms()
        with self._mu:
            for i in ids:
                self.ts_of[i] = ts
        body = [{"tags": {"client": str(self.idx), "ds": ds},
                 "events": [{"timestamp": ts, "rawstring": f"id={i} fault test"} for i in ids]}]
        return ids, json.dumps(body)

    def timestamps(self) -> dict[str, int]:
        with self._mu:
            return dict(self.ts_of)

    def run(self) -> None:
        sessions: dict[int, requests.Session] = {}
        token = self.cluster.nodes[0].ingest_token
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        while not self.stop_event.is_set():
            if self.hold_event.is_set():
                self.idle.set()
                time.sleep(0.05)
                continue
            self.idle.clear()
            up = self.cluster.up_nodes()
            if not up:
                time.sleep(0.1)
                continue
            node = up[self.turn % len(up)]
            self.turn += 1
            ids, body = self._batch()
            s = sessions.setdefault(node.index, requests.Session())
            t0 = time.monotonic()
            try:
                r = s.post(node.url + "/api/v1/ingest/humio-structured", data=body.encode(), headers=headers,
                           timeout=self.http_timeout)
                rec = ClusterSent(t0, time.monotonic(), r.status_code, ids, r.headers.get("Retry-After"),
                                  "" if r.status_code == 200 else r.text[:300], node.index)
            except requests.RequestException as e:
                rec = ClusterSent(t0, time.monotonic(), type(e).__name__, ids, node=node.index)
                s.close()
                sessions.pop(node.index, None)
            with self._mu:
                self._sent.append(rec)
            time.sleep(self.pause)
        self.idle.set()
        for s in sessions.values():
            s.close()


class ClusterWorkload(ClientPool):
    """`clients` ClusterClients; records()/acked_ids()/attempted_ids() as ClientPool. hold()
    stops sending (and waits for requests in flight), release() resumes."""

    def __init__(self, cluster: SedimentCluster, run: str, clients: int = 4, *,
                 http_timeout: float = HTTP_INGEST_TIMEOUT, pause: float = 0.1, datasources: int = 4, seed: int = 0):
        self.stop_event = threading.Event()
        self.hold_event = threading.Event()
        self.run = run
        self.clients = [ClusterClient(cluster, run, i, self.stop_event, self.hold_event, http_timeout=http_timeout,
                                      pause=pause, datasources=datasources, seed=seed) for i in range(clients)]

    def hold(self, timeout: float = HTTP_INGEST_TIMEOUT + 10) -> None:
        self.hold_event.set()
        for c in self.clients:
            c.idle.clear()
        deadline = time.monotonic() + timeout
        for c in self.clients:
            if c.is_alive() and not c.idle.wait(max(0.1, deadline - time.monotonic())):
                raise AssertionError(f"{c.name} still busy {timeout}s after hold()")

    def release(self) -> None:
        self.hold_event.clear()

    def acked_between(self, lo: float, hi: float, *, by: str = "end") -> set[str]:
        """Ids of 200 answers whose `by` time (start or end) lies in [lo, hi]."""
        return {i for r in self.records() if r.status == 200 and lo <= getattr(r, by) <= hi for i in r.ids}

    def timestamps(self) -> dict[str, int]:
        """Event id -> the @timestamp (ms) it was sent with."""
        out: dict[str, int] = {}
        for c in self.clients:
            out.update(c.timestamps())
        return out

    def status_counts(self) -> dict:
        return dict(Counter(r.status for r in self.records()))


# ---------------------------------------------------------------------------------------------
# Queries and the checker
# ---------------------------------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    found: Counter  # event id -> occurrences
    warnings: list[str]
    partition_of: dict[str, int]  # event id -> ingest partition (from @id "<partition>-<offset>-<index>")
    elapsed: float
    body: str = ""


def response_warnings(r: requests.Response) -> list[str]:
    """Every X-Sediment-Warning header, one entry each (requests' `headers` joins repeated
    headers with ", ")."""
    raw = getattr(r.raw, "headers", None)
    if raw is not None and hasattr(raw, "getlist"):
        return list(raw.getlist("X-Sediment-Warning"))
    return [v for k, v in r.headers.items() if k.lower() == "x-sediment-warning"]


def query_run(node: SedimentServer, run: str, *, start_ms: int = 0, end_ms: int | None = None,
              session: requests.Session | None = None, timeout: float = QUERY_TIMEOUT) -> Answer:
    """Runs the free-text query `run` on `node` (NDJSON) and counts the event ids in the answer.
    Raises requests exceptions; a non-200 answer comes back with an empty count."""
    end_ms = end_ms if end_ms is not None else now_ms() + 3_600_000
    h = {"Content-Type": "application/json", "Accept": "application/x-ndjson",
         "Authorization": f"Bearer {node.api_token}"}
    body = json.dumps({"queryString": run, "start": start_ms, "end": end_ms, "isLive": False})
    t0 = time.monotonic()
    poster = session.post if session is not None else requests.post
    r = poster(f"{node.url}/api/v1/repositories/{node.repo}/query", data=body, headers=h, timeout=timeout)
    elapsed = time.monotonic() - t0
    warnings = response_warnings(r)
    found: Counter = Counter()
    parts: dict[str, int] = {}
    if r.status_code != 200:
        return Answer(r.status_code, found, warnings, parts, elapsed, r.text[:500])
    for line in r.text.splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        m = ID_RE.search(row.get("@rawstring", ""))
        eid = m.group(1) if m else f"<unparsed {row.get('@rawstring', '')[:60]!r}>"
        found[eid] += 1
        pid = str(row.get("@id", "")).split("-")[0]
        if pid.isdigit():
            parts[eid] = int(pid)
    return Answer(200, found, warnings, parts, elapsed)


@dataclass
class Verdict:
    report: dict
    problems: list[str]
    missing: list[str]
    duplicates: list[str]
    unknown: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


# What a missing-data warning names (server wording, not a contract): "<n> events from <ISO> to <ISO>".
WARNING_RANGE_RE = re.compile(r"(\d+) events from (\d{4}-\d\d-\d\dT[\d:.]+Z) to (\d{4}-\d\d-\d\dT[\d:.]+Z)")


def iso_ms(text: str) -> int:
    from datetime import datetime
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def warning_ranges(warnings: list[str]) -> list[tuple[int, int, int]]:
    """(events, from ms, to ms) for every range the warnings name in the server's wording."""
    out = []
    for w in warnings:
        for m in WARNING_RANGE_RE.finditer(w):
            out.append((int(m.group(1)), iso_ms(m.group(2)), iso_ms(m.group(3))))
    return out


def evaluate(acked: set[str], attempted: set[str], found: Counter, warnings: list[str], *,
             allow_missing_with_warning: bool = False, required: set[str] | None = None,
             timestamps: dict[str, int] | None = None) -> Verdict:
    """The checker's rules, as a pure function.
    Always: no event id twice, no id nobody sent. Strict (default): every acknowledged id present
    and no warnings. With allow_missing_with_warning: acknowledged ids may be missing only when the
    answer carried a warning, and every id in `required` must be present anyway; when the warnings
    name event counts and time ranges ("<n> events from <ISO> to <ISO>"), the missing events must
    fit them: no more than the events named, each @timestamp (from `timestamps`) inside a range."""
    required = set(required or ())
    dups = sorted(i for i, n in found.items() if n > 1)
    missing = sorted(acked - set(found))
    unknown = sorted(set(found) - attempted)
    req_missing = sorted(required - set(found))
    report = {"acked": len(acked), "attempted": len(attempted), "found": sum(found.values()),
              "unacked_found": len(set(found) - acked - set(unknown)), "missing": len(missing),
              "duplicates": len(dups), "unknown": len(unknown), "warnings": len(warnings)}
    if required:
        report["required"] = len(required)
        report["required_missing"] = len(req_missing)
    probs: list[str] = []
    if dups:
        probs.append(f"{len(dups)} events returned more than once, e.g. "
                     + ", ".join(f"{i} x{found[i]}" for i in dups[:10]))
    if unknown:
        probs.append(f"{len(unknown)} events nobody sent, e.g. {unknown[:10]}")
    if req_missing:
        probs.append(f"{len(req_missing)} required events missing, e.g. {req_missing[:10]}")
    if allow_missing_with_warning:
        if missing and not warnings:
            probs.append(f"{len(missing)} acknowledged events missing without a warning, e.g. {missing[:10]}")
        ranges = warning_ranges(warnings)
        if missing and ranges:
            named = sum(r[0] for r in ranges)
            report["warned_events"] = named
            if len(missing) > named:
                probs.append(f"{len(missing)} acknowledged events missing, the warnings name only {named}")
            ts = timestamps or {}
            outside = [i for i in missing if i in ts and not any(lo <= ts[i] <= hi for _, lo, hi in ranges)]
            if outside:
                probs.append(f"{len(outside)} missing events lie outside the time ranges the warnings name, e.g. "
                             + ", ".join(f"{i} @{ts[i]}" for i in outside[:5]))
    else:
        if missing:
            probs.append(f"{len(missing)} acknowledged events missing, e.g. {missing[:10]}")
        if warnings:
            probs.append(f"query warnings: {warnings[:5]}")
    return Verdict(report, probs, missing, dups, unknown)


def check_cluster(cluster: SedimentCluster, workload: ClusterWorkload | Iterable[ClusterWorkload], label: str, *,
                  via: int | None = None, all_nodes: bool = False, quiet_timeout: float = QUIET_TIMEOUT,
                  allow_missing_with_warning: bool = False, required: set[str] | None = None) -> list[Verdict]:
    """Waits until the cluster is quiet as seen by each node queried, then queries the workload's
    run through node `via` (default: the first up node), or through every up node when
    `all_nodes`, and applies evaluate(). Prints one report line per node; AssertionError listing
    the problems. The workload must be held or stopped."""
    loads = [workload] if isinstance(workload, ClusterWorkload) else list(workload)
    acked = set().union(*(w.acked_ids() for w in loads))
    attempted = set().union(*(w.attempted_ids() for w in loads))
    timestamps: dict[str, int] = {}
    for w in loads:
        timestamps.update(w.timestamps())
    runs = {w.run for w in loads}
    assert len(runs) == 1, f"one run id per check, got {runs}"
    run = runs.pop()
    if all_nodes:
        targets = [n.index for n in cluster.up_nodes()]
    else:
        targets = [via if via is not None else cluster.up_nodes()[0].index]
    verdicts = []
    failures = []
    # Every queried node's view quiet and stable (wait_quiet's rule), in overlapping windows; each
    # node is queried only if its view is still quiet with the same owners, else it waits again.
    t_all = time.monotonic()
    stable = cluster.wait_quiet_all(targets, timeout=quiet_timeout, allow_warnings=allow_missing_with_warning)
    for i in targets:
        for attempt in range(1, CHECK_ATTEMPTS + 1):
            before = cluster.still_quiet(i, stable[i], allow_warnings=allow_missing_with_warning) if attempt == 1 else None
            if before is None:
                _, before = cluster.wait_quiet(i, timeout=quiet_timeout, allow_warnings=allow_missing_with_warning)
            waited = time.monotonic() - t_all
            ans = query_run(cluster.nodes[i], run)
            after = cluster.cluster_view(i)
            moved = ownership(before) != ownership(after)
            v = None
            if ans.status == 200:
                v = evaluate(acked, attempted, ans.found, ans.warnings,
                             allow_missing_with_warning=allow_missing_with_warning, required=required,
                             timestamps=timestamps)
                v.report.update({"label": label, "via": i, "quiet_after_s": round(waited, 1),
                                 "query_s": round(ans.elapsed, 2)})
                if attempt > 1:
                    v.report["attempt"] = attempt
                print(f"cluster check: {v.report}" + (f" warnings={ans.warnings[:3]}" if ans.warnings else ""))
            # A partition changing owner while the query ran excuses warnings (and what they
            # name as missing), never duplicates, unknown events or silent loss: query again.
            excusable = v is not None and not v.ok and not v.duplicates and not v.unknown and bool(ans.warnings)
            if moved and attempt < CHECK_ATTEMPTS and (ans.status != 200 or excusable):
                print(f"cluster check {label} via node {i}: ownership moved during the query "
                      f"({ownership_diff(before, after)}); querying again")
                cluster.mark(f"check {label} via node {i}: ownership moved during the query, repeated")
                continue
            break
        if ans.status != 200:
            failures.append(f"{label} via node {i}: query answered {ans.status} {ans.body[:300]}")
            continue
        verdicts.append(v)
        if not v.ok:
            moved_txt = f" (ownership moved during the query: {ownership_diff(before, after)})" if moved else ""
            failures.append(f"{label} via node {i}: " + "; ".join(v.problems) + moved_txt)
    if failures:
        view = ""
        try:
            view = format_view(cluster.cluster_view(targets[0]))
        except Exception as e:  # noqa: BLE001 - best effort for the message
            view = f"(no view: {e!r})"
        raise AssertionError("\n".join(failures) + f"\n{view}\ntimeline:\n{cluster.timeline_text()}")
    return verdicts


class DuplicateWatcher(threading.Thread):
    """Queries the run repeatedly (each time through the next node that `targets()` returns) and
    records every answer; any answer that holds an event id twice is a violation. Warnings and
    errors are recorded, not judged (the point is P2 during failovers)."""

    def __init__(self, cluster: SedimentCluster, run: str, targets: Callable[[], list[ClusterNode]], *,
                 interval: float = 0.5, timeout: float = 30.0):
        super().__init__(name="duplicate-watcher", daemon=True)
        self.cluster, self.run_id, self.targets = cluster, run, targets
        self.interval, self.timeout = interval, timeout
        self.stop_event = threading.Event()
        self.answers = 0
        self.ok_answers = 0
        self.with_warnings = 0
        self.errors: Counter = Counter()
        self.violations: list[str] = []
        self.duplicate_ids: set[str] = set()  # every event id some answer held more than once
        self.max_events = 0
        self._turn = 0

    def run(self) -> None:
        session = requests.Session()
        while not self.stop_event.is_set():
            nodes = self.targets()
            if not nodes:
                time.sleep(self.interval)
                continue
            node = nodes[self._turn % len(nodes)]
            self._turn += 1
            try:
                ans = query_run(node, self.run_id, session=session, timeout=self.timeout)
            except (requests.RequestException, ValueError) as e:
                self.errors[type(e).__name__] += 1
                session.close()
                session = requests.Session()
                time.sleep(self.interval)
                continue
            self.answers += 1
            if ans.status != 200:
                self.errors[f"HTTP {ans.status}"] += 1
            else:
                self.ok_answers += 1
                self.with_warnings += bool(ans.warnings)
                self.max_events = max(self.max_events, sum(ans.found.values()))
                dups = sorted(i for i, c in ans.found.items() if c > 1)
                if dups:
                    self.duplicate_ids.update(dups)
                    t = time.monotonic() - self.cluster.t0
                    self.violations.append(f"t={t:.2f}s via node {node.index}: {len(dups)} ids twice, e.g. "
                                           + ", ".join(f"{i} x{ans.found[i]} (p{ans.partition_of.get(i)})"
                                                       for i in dups[:5]))
            time.sleep(self.interval)
        session.close()

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=self.timeout + 10)

    def summary(self) -> str:
        return (f"duplicate watcher: {self.answers} answers ({self.ok_answers} ok, {self.with_warnings} with "
                f"warnings, up to {self.max_events} events), errors {dict(self.errors)}, "
                f"{len(self.violations)} with duplicates")


# ---------------------------------------------------------------------------------------------
# Recovery time
# ---------------------------------------------------------------------------------------------


@dataclass
class Recovery:
    seconds: float
    events: int  # events acknowledged in the first second after the kill
    on_victim_partitions: int  # of those, events on partitions the killed node owned
    victim_partitions: list[int]
    queries: int
    warnings_seen: int

    def line(self, target_s: float = 15.0) -> str:
        return (f"recovery time: {self.seconds:.1f} s (target < {target_s:.0f} s; {self.events} events acknowledged "
                f"in the first second after the kill, {self.on_victim_partitions} of them on the killed node's "
                f"partitions {self.victim_partitions}; {self.queries} queries)")


def measure_recovery(cluster: SedimentCluster, workload: ClusterWorkload, t_kill: float, wall_kill_ms: int,
                     via: int, victim_partitions: Iterable[int], *, bound: float = 120.0) -> Recovery:
    """Time from the kill (monotonic `t_kill`) until every event acknowledged during the first
    second after it is found by a query on node `via` (warnings ignored). Needs the workload
    running. AssertionError only after `bound` seconds (a hang)."""
    victim_partitions = sorted(victim_partitions)
    time.sleep(max(0.0, t_kill + 1.2 - time.monotonic()))
    want = workload.acked_between(t_kill, t_kill + 1.0)
    if not want:  # nothing acknowledged in that second: take the first second of acks after the kill
        first = wait_until(lambda: min((r.end for r in workload.records() if r.status == 200 and r.end >= t_kill),
                                       default=None), timeout=bound, interval=0.1, what="an ack after the kill")
        time.sleep(max(0.0, first + 1.2 - time.monotonic()))
        want = workload.acked_between(first, first + 1.0)
    session = requests.Session()
    queries = warned = 0
    last: Answer | None = None
    try:
        while True:
            try:
                ans = query_run(cluster.nodes[via], workload.run, start_ms=wall_kill_ms - 60_000, session=session,
                                timeout=30)
                queries += 1
                warned += bool(ans.warnings)
                last = ans
                if ans.status == 200 and want <= set(ans.found):
                    t_found = time.monotonic()
                    break
            except requests.RequestException:
                session.close()
                session = requests.Session()
            if time.monotonic() - t_kill > bound:
                missing = sorted(want - set(last.found)) if last else sorted(want)
                raise AssertionError(f"events acknowledged right after the kill not searchable on node {via} within "
                                     f"{bound}s: {len(missing)} of {len(want)} missing, e.g. {missing[:10]}\n"
                                     f"timeline:\n{cluster.timeline_text()}")
            time.sleep(0.25)
    finally:
        session.close()
    on_victim = sum(1 for i in want if last.partition_of.get(i) in victim_partitions)
    return Recovery(t_found - t_kill, len(want), on_victim, victim_partitions, queries, warned)


SEGMENT_NAME_RE = re.compile(r"^p(\d+)-e(\d+)-o(\d+)-i(\d+)\.seg$")


def segment_files(node: ClusterNode) -> dict[str, float]:
    """Segment file name -> mtime (wall seconds) in the node's `<data-dir>/segments`. The digest
    names files `p<partition>-e<epoch>-o<offset>-i<index>.seg` (SEGMENT_NAME_RE)."""
    d = node.data_dir / "segments"
    out = {}
    try:
        for e in os.scandir(d):
            if e.name.endswith(".seg"):
                try:
                    out[e.name] = e.stat().st_mtime
                except FileNotFoundError:
                    pass
    except FileNotFoundError:
        pass
    return out


def wait_no_orphans(cluster: SedimentCluster, via: int, *, timeout: float = 30.0) -> dict[int, int]:
    """Waits until, for every up node, the number of segment files in its data dir equals the
    number of segment copies Global lists on it (node `via`'s view, "segments" per node counts the
    copies a node holds, staged merge outputs included): no orphan files left behind (a stale
    owner's rejected flushes, merged-away inputs, dropped extra copies). Returns index -> file
    count. For a file-by-file comparison see the replication helpers at the end of this file."""
    last: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        cluster.assert_running()
        view = cluster.cluster_view(via)
        registered = {n["id"]: n["segments"] for n in view["nodes"]}
        last, counts = [], {}
        for n in cluster.up_nodes():
            files = segment_files(n)
            counts[n.index] = len(files)
            if len(files) != registered.get(n.node_id, 0):
                last.append(f"node {n.index} (id {n.node_id}): {len(files)} segment files, Global records "
                            f"{registered.get(n.node_id, 0)}")
        if not last:
            return counts
        if time.monotonic() >= deadline:
            raise AssertionError(f"segment files on disk do not match Global after {timeout}s: {'; '.join(last)}\n"
                                 f"{format_view(view)}\ntimeline:\n{cluster.timeline_text()}")
        time.sleep(0.5)


def owned_by(view: dict, node_id: int) -> dict[int, int]:
    """partition -> epoch of the partitions `node_id` owns in `view`."""
    return {p["partition"]: p["epoch"] for p in view["partitions"] if p["owner"] == node_id}


def pick_owner(cluster: SedimentCluster, view: dict, rng, exclude: Iterable[int] = ()) -> int:
    """Index of an up node that owns at least one partition in `view` (random among them), not in
    `exclude` (indices)."""
    owners = cluster.owners(view)
    cands = sorted(n.index for n in cluster.up_nodes() if n.node_id in owners and n.index not in set(exclude))
    assert cands, f"no up node owns a partition\n{format_view(view)}"
    return rng.choice(cands)


def log_lines(node: ClusterNode, pattern: str, all_runs: bool = True) -> list[str]:
    rx = re.compile(pattern)
    return [ln for ln in node.log_text(all_runs=all_runs).splitlines() if rx.search(ln)]


def env_float(name: str, default: float) -> float:
    v = os.environ.get(name, "").strip()
    return float(v) if v else default


# ---------------------------------------------------------------------------------------------
# Segment replication, safe offsets, merges and retention (issue 5)
# ---------------------------------------------------------------------------------------------

# A binary must know this flag to run the replication scenarios.
REPLICATION_FLAG = "--replication-factor"
REPLICATION_FLAG_RE = re.compile(r"(?<![\w-])--replication-factor\b")  # not --kafka-replication-factor
KCAT_OFFSET_RE = re.compile(r"\[(\d+)\]\s+offset\s+(-?\d+)")


def replication_support(binary: str | None = None) -> str | None:
    """None when `sediment server --help` lists --replication-factor, else the reason the
    replication scenarios cannot run (for a skip message)."""
    binary = binary or sediment_bin()
    out, err = server_help(binary)
    if err:
        return err
    if not REPLICATION_FLAG_RE.search(out):
        return f"{binary} has no segment replication yet (server --help lacks {REPLICATION_FLAG})"
    return None


def cluster_segments(cluster: SedimentCluster, i: int, timeout: float = 10.0) -> dict:
    """GET /api/v1/cluster/segments of node i (API token): {"segments": [...], "factor": R}.
    AssertionError on any answer but 200."""
    n = cluster.nodes[i]
    r = requests.get(n.url + "/api/v1/cluster/segments", headers={"Authorization": f"Bearer {n.api_token}"},
                     timeout=timeout)
    assert r.status_code == 200, f"node {i}: /api/v1/cluster/segments answered {r.status_code} {r.text[:300]}"
    return r.json()


def segment_file_name(seg: dict) -> str:
    """The on-disk name (`<file>.seg`, no directory) of a /api/v1/cluster/segments entry; accepts a
    `file` given with or without the `.seg` suffix or a directory part."""
    name = Path(str(seg["file"])).name
    return name if name.endswith(".seg") else name + ".seg"


def segment_path(node: ClusterNode, seg: dict) -> Path:
    """Where `node` keeps its copy of `seg`: `<data-dir>/segments/<file>.seg`."""
    return node.data_dir / "segments" / segment_file_name(seg)


def is_merge_output(seg: dict) -> bool:
    """True for a merge output (files named `m-*.seg`)."""
    return segment_file_name(seg).startswith("m-")


def live_node_ids(cluster: SedimentCluster, view: dict) -> set[int]:
    """Ids of nodes that `view` shows alive and that the harness runs (state up)."""
    alive = {n["id"] for n in view.get("nodes", []) if n.get("alive")}
    return alive & cluster.up_ids()


def live_holders(seg: dict, live: set[int]) -> list[int]:
    """The replicas of `seg` on nodes in `live`."""
    return [r for r in seg.get("replicas", []) if r in live]


def under_replicated(segs: dict, live: set[int], factor: int,
                     pred: Callable[[dict], bool] | None = None) -> list[dict]:
    """Committed (not staged) segments of a /api/v1/cluster/segments answer that satisfy `pred`
    (default: all) and have fewer than `factor` replicas on nodes in `live`."""
    return [s for s in segs.get("segments", []) if not s.get("staged") and (pred is None or pred(s))
            and len(live_holders(s, live)) < factor]


def replication_problems(view: dict, segs: dict, factor: int, live: set[int], *,
                         file_size: Callable[[int, str], int | None] | None = None,
                         pred: Callable[[dict], bool] | None = None) -> list[str]:
    """Why the cluster is not fully replicated (empty = it is), as a pure function of a cluster
    view, a segments answer and the live node ids: the view's replication block shows factor
    `factor`, withoutLiveCopy 0 and lost 0; every committed segment that satisfies `pred` has at
    least `factor` replicas on live nodes; and, when `file_size(node id, file name)` is given (the
    size of that node's copy, None when absent), each of those live copies exists with the
    segment's fileSize."""
    probs: list[str] = []
    rep = view.get("replication")
    if not isinstance(rep, dict):
        probs.append(f"view has no replication block: {rep!r}")
    else:
        if rep.get("factor") != factor:
            probs.append(f"view replication factor {rep.get('factor')}, want {factor}")
        if rep.get("withoutLiveCopy") != 0:
            probs.append(f"withoutLiveCopy {rep.get('withoutLiveCopy')}")
        if rep.get("lost") != 0:
            probs.append(f"lost {rep.get('lost')}")
    if segs.get("factor") != factor:
        probs.append(f"segments answer factor {segs.get('factor')}, want {factor}")
    under = under_replicated(segs, live, factor, pred)
    if under:
        probs.append(f"{len(under)} segments with fewer than {factor} live replicas, e.g. "
                     + ", ".join(f"{s['id']} {segment_file_name(s)} replicas {s.get('replicas')}" for s in under[:5]))
    if file_size is not None:
        bad = []
        for s in segs.get("segments", []):
            if s.get("staged") or (pred is not None and not pred(s)):
                continue
            for nid in live_holders(s, live):
                size = file_size(nid, segment_file_name(s))
                if size != s.get("fileSize"):
                    bad.append(f"node {nid} {segment_file_name(s)}: "
                               + ("absent" if size is None else f"{size} bytes, want {s.get('fileSize')}"))
        if bad:
            probs.append(f"{len(bad)} announced copies not on disk as listed, e.g. {bad[:5]}")
    return probs


def disk_file_size(cluster: SedimentCluster) -> Callable[[int, str], int | None]:
    """file_size(node id, file name) for replication_problems: the size of that file in the
    segments dir of the node with that id, None when absent or the id is unknown."""
    def size(node_id: int, name: str) -> int | None:
        i = cluster.index_of(node_id)
        if i is None:
            return None
        try:
            return (cluster.nodes[i].data_dir / "segments" / name).stat().st_size
        except OSError:
            return None
    return size


def format_replication(view: dict, segs: dict | None = None, limit: int = 12) -> str:
    """The replication block, each node's repair counters and the per-partition safe offsets of a
    view, plus (when given) the segments with fewest replicas first, for failure messages."""
    lines = [f"replication {view.get('replication')}"]
    for n in view.get("nodes", []):
        lines.append(f"  node {n.get('id')} alive={n.get('alive')} segs={n.get('segments')} repair={n.get('repair')}")
    for p in view.get("partitions", []):
        lines.append(f"  p{p.get('partition')} safeOffset={p.get('safeOffset')} logStart={p.get('logStart')} "
                     f"truncatedBefore={p.get('truncatedBefore')} replay={p.get('replayPoint')} "
                     f"logEnd={p.get('logEnd')} buffered={p.get('bufferedEvents')}")
    if segs is not None:
        ss = sorted(segs.get("segments", []), key=lambda s: (len(s.get("replicas", [])), s.get("partition", 0)))
        lines.append(f"  {len(ss)} segments (factor {segs.get('factor')}):")
        for s in ss[:limit]:
            lines.append(f"    {s.get('id')} p{s.get('partition')} [{s.get('minOffset')},{s.get('maxOffset')}] "
                         f"{segment_file_name(s)} {s.get('fileSize')}B replicas={s.get('replicas')} "
                         f"live={s.get('liveReplicas')} staged={s.get('staged')}")
    return "\n".join(lines)


def wait_replicated(cluster: SedimentCluster, via: int, factor: int, *, timeout: float = 60.0,
                    check_files: bool = True, pred: Callable[[dict], bool] | None = None,
                    what: str = "every segment replicated") -> tuple[dict, dict]:
    """Polls node `via` until replication_problems() is empty for its view and segments answer
    (the live nodes: alive in the view and up in the harness; with check_files the copies must be
    on the holders' disks). Returns (view, segments). AssertionError with the problems after
    `timeout`, or at once when a node the harness runs has exited."""
    last: dict[str, Any] = {}
    deadline = time.monotonic() + timeout
    size = disk_file_size(cluster) if check_files else None
    while True:
        cluster.assert_running()
        try:
            view = cluster.cluster_view(via)
            segs = cluster_segments(cluster, via)
            probs = replication_problems(view, segs, factor, live_node_ids(cluster, view), file_size=size, pred=pred)
            last = {"view": view, "segs": segs, "problems": probs}
            if not probs:
                return view, segs
        except (requests.RequestException, AssertionError, ValueError, KeyError, TypeError) as e:
            last["error"] = repr(e)
        if time.monotonic() >= deadline:
            detail = "; ".join(last.get("problems", [])) or last.get("error")
            text = format_replication(last["view"], last.get("segs")) if "view" in last else "(no view)"
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (node {via}): {detail}\n{text}\n"
                                 f"timeline:\n{cluster.timeline_text()}")
        time.sleep(0.25)


def disk_problems(cluster: SedimentCluster, segs: dict) -> list[str]:
    """Differences between each up node's segment files on disk and the segments answer: a file
    missing on a listed replica, or a file no listed segment (committed or staged) places on that
    node (an orphan, e.g. a merge input or an expired segment not yet deleted)."""
    want: dict[int, set[str]] = {}
    for s in segs.get("segments", []):
        for nid in s.get("replicas", []):
            want.setdefault(nid, set()).add(segment_file_name(s))
    probs = []
    for n in cluster.up_nodes():
        have = set(segment_files(n))
        exp = want.get(n.node_id, set())
        missing, extra = sorted(exp - have), sorted(have - exp)
        if missing:
            probs.append(f"node {n.index} (id {n.node_id}) lacks {len(missing)} listed files, e.g. {missing[:5]}")
        if extra:
            probs.append(f"node {n.index} (id {n.node_id}) has {len(extra)} unlisted files, e.g. {extra[:5]}")
    return probs


def wait_disk_matches(cluster: SedimentCluster, via: int, *, timeout: float = 30.0) -> dict:
    """Waits until disk_problems() is empty against node `via`'s segments answer (pending file
    deletions must have run). Returns that answer; AssertionError with the differences after
    `timeout`."""
    last: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        cluster.assert_running()
        segs = cluster_segments(cluster, via)
        last = disk_problems(cluster, segs)
        if not last:
            return segs
        if time.monotonic() >= deadline:
            raise AssertionError(f"segment files on disk do not match the segments list after {timeout}s: "
                                 f"{'; '.join(last)}\ntimeline:\n{cluster.timeline_text()}")
        time.sleep(0.5)


def flip_bytes(path: Path, at: int | None = None, n: int = 16) -> int:
    """Inverts `n` bytes of `path` in place at offset `at` (default: the middle), keeping its
    size and inode (a reader holding the file open sees the change); fsyncs. Returns the offset."""
    path = Path(path)
    size = path.stat().st_size
    at = max(0, size // 2 - n // 2) if at is None else at
    assert 0 <= at and at + n <= size, f"cannot flip {n} bytes at {at} of a {size}-byte file"
    with open(path, "r+b") as f:
        f.seek(at)
        data = f.read(n)
        f.seek(at)
        f.write(bytes(b ^ 0xFF for b in data))
        f.flush()
        os.fsync(f.fileno())
    assert path.stat().st_size == size
    return at


def parse_kcat_offsets(text: str) -> dict[int, int]:
    """partition -> offset from `kcat -Q` output lines (`<topic> [<partition>] offset <n>`)."""
    return {int(m.group(1)): int(m.group(2)) for m in KCAT_OFFSET_RE.finditer(text)}


def kafka_start_offsets(cluster: SedimentCluster, partitions: Iterable[int], timeout: float = 15.0) -> dict[int, int]:
    """The ingest topic's real log start offsets as Kafka reports them (ListOffsets earliest,
    through `kcat -Q -t <topic>:<p>:-2`), partition -> offset. AssertionError when kcat fails or
    a partition is missing from its answer."""
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    assert kcat, "kcat not on PATH"
    topic = cluster.topic_prefix + "ingest"
    parts = sorted(partitions)
    args = [kcat, "-Q", "-b", cluster.kafka.bootstrap()]
    for p in parts:
        args += ["-t", f"{topic}:{p}:-2"]
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                       env=clean_env())
    got = parse_kcat_offsets(r.stdout)
    assert r.returncode == 0 and set(parts) <= set(got), f"kcat -Q answered {r.returncode}: {r.stdout[-500:]}"
    return {p: got[p] for p in parts}


def by_partition(view: dict) -> dict[int, dict]:
    """The cluster view's partitions by id."""
    return {p["partition"]: p for p in view["partitions"]}


def wait_truncated_past(cluster: SedimentCluster, via: int, bounds: dict[int, int], what: str,
                        timeout: float = 30.0) -> dict:
    """Waits until node `via`'s view shows every partition p of `bounds` with safeOffset and
    logStart above bounds[p], then checks Kafka's own start offsets are above them too. Returns
    the view."""

    def past(v):
        ps = by_partition(v)
        return all(ps[p]["safeOffset"] > b and ps[p]["logStart"] > b for p, b in bounds.items())

    view = cluster.wait_view(via, past, timeout=timeout, what=f"safeOffset and logStart beyond {what} {bounds}")
    real = kafka_start_offsets(cluster, bounds)
    assert all(real[p] > b for p, b in bounds.items()), f"Kafka start offsets {real}, {what} {bounds}"
    return view


# ---------------------------------------------------------------------------------------------
# Bucket storage (issue 6): uploads, backlog, snapshots in the bucket, queries that fetch from it
# ---------------------------------------------------------------------------------------------

from harness import (  # noqa: E402,F401 - re-exported for the bucket scenarios
    S3_ENV,
    bucket_args,
    bucket_fetches,
    bucket_support,
    moto_server,
    new_bucket_name,
    running_moto,
    s3_delete,
    s3_get,
    s3_list,
)

BUCKET_SNAPSHOT_RE = re.compile(r"global/g(\d+)-(\d+)\.snap$")


def bucket_view(cluster: SedimentCluster, i: int) -> dict:
    """The "bucket" object of node i's cluster view (AssertionError when it has none)."""
    v = cluster.cluster_view(i)
    assert isinstance(v.get("bucket"), dict), f"node {i}: /api/v1/cluster has no bucket object: {sorted(v)}"
    return v["bucket"]


def bucket_problems(view: dict) -> list[str]:
    """Why `view` does not show everything in the bucket (empty = it does): every partition
    caught up with nothing buffered (all acknowledged events are in segments), and the bucket block
    shows segments > 0, backlogSegments 0 and uploadedSegments == segments."""
    probs = []
    for p in view.get("partitions", []):
        if p.get("lag") != 0 or p.get("bufferedEvents") != 0:
            probs.append(f"p{p.get('partition')} lag {p.get('lag')} buffered {p.get('bufferedEvents')}")
    b = view.get("bucket")
    if not isinstance(b, dict):
        return probs + [f"no bucket block: {b!r}"]
    if not b.get("segments"):
        probs.append(f"bucket segments {b.get('segments')}")
    if b.get("backlogSegments") != 0 or b.get("uploadedSegments") != b.get("segments"):
        probs.append(f"bucket backlog {b.get('backlogSegments')} segments ({b.get('backlogBytes')} bytes), uploaded "
                     f"{b.get('uploadedSegments')} of {b.get('segments')}")
    return probs


def wait_bucket_uploaded(cluster: SedimentCluster, via: int, *, timeout: float = 60.0) -> dict:
    """Waits until node `via`'s view shows every event in segments and every segment in the
    bucket (bucket_problems empty); returns that view. Hold the workload first."""
    last: dict[str, Any] = {}
    deadline = time.monotonic() + timeout
    while True:
        cluster.assert_running()
        try:
            v = cluster.cluster_view(via)
            last = {"view": v, "problems": bucket_problems(v)}
            if not last["problems"]:
                return v
        except (requests.RequestException, AssertionError, ValueError) as e:
            last["error"] = repr(e)
        if time.monotonic() >= deadline:
            v = last.get("view", {})
            raise AssertionError(f"not everything in the bucket after {timeout}s (node {via}): "
                                 f"{'; '.join(last.get('problems', [])) or last.get('error')}\n"
                                 f"bucket {json.dumps(v.get('bucket'))}\n{format_view(v) if v else ''}\n"
                                 f"timeline:\n{cluster.timeline_text()}")
        time.sleep(0.25)


def bucket_snapshots(endpoint: str, bucket: str) -> list[tuple[int, int, str]]:
    """(generation, Global offset, key) of every Global snapshot object in the bucket, oldest first."""
    out = []
    for key in s3_list(endpoint, bucket):
        m = BUCKET_SNAPSHOT_RE.search(key)
        if m:
            out.append((int(m.group(1)), int(m.group(2)), key))
    return sorted(out)


def wait_bucket_snapshot(cluster: SedimentCluster, via: int, endpoint: str, bucket: str, *,
                         timeout: float = 30.0) -> tuple[int, int, str]:
    """Waits until the bucket holds a Global snapshot taken at or after the Global offset node
    `via` has applied now (so it lists every registration and upload so far). Returns the newest
    (generation, offset, key)."""
    applied = cluster.cluster_view(via)["globalApplied"]

    def newest():
        snaps = bucket_snapshots(endpoint, bucket)
        return snaps[-1] if snaps and snaps[-1][1] >= applied else None

    try:
        return wait_until(newest, timeout=timeout, interval=0.25,
                          what=f"a bucket snapshot at Global offset >= {applied}")
    except AssertionError as e:
        raise AssertionError(f"{e}; snapshots {bucket_snapshots(endpoint, bucket)}; node bucket blocks "
                             + "; ".join(f"{n.index}: {json.dumps(bucket_view(cluster, n.index).get('lastSnapshot'))}"
                                         for n in cluster.up_nodes())) from None


def not_uploaded_bounds(segs: dict | list) -> dict[int, int]:
    """partition -> smallest minOffset of a committed segment that is not in the bucket, from a
    /api/v1/cluster/segments answer (or its "segments" list)."""
    rows = segs.get("segments", []) if isinstance(segs, dict) else segs
    out: dict[int, int] = {}
    for s in rows:
        if not s.get("staged") and not s.get("uploaded"):
            out[s["partition"]] = min(out.get(s["partition"], s["minOffset"]), s["minOffset"])
    return out


def query_run_headers(node: SedimentServer, run: str, *, timeout: float = QUERY_TIMEOUT) -> tuple[Answer, dict]:
    """query_run plus the answer's headers that matter here: {"fetches", "fetchedBytes",
    "warnings"} (X-Sediment-Bucket-Fetches / -Fetched-Bytes / X-Sediment-Warning)."""
    end_ms = now_ms() + 3_600_000
    h = {"Content-Type": "application/json", "Accept": "application/x-ndjson",
         "Authorization": f"Bearer {node.api_token}"}
    body = json.dumps({"queryString": run, "start": 0, "end": end_ms, "isLive": False})
    t0 = time.monotonic()
    r = requests.post(f"{node.url}/api/v1/repositories/{node.repo}/query", data=body, headers=h, timeout=timeout)
    elapsed = time.monotonic() - t0
    fetches, fetched = bucket_fetches(r)
    found: Counter = Counter()
    if r.status_code == 200:
        for line in r.text.splitlines():
            if line.strip():
                m = ID_RE.search(json.loads(line).get("@rawstring", ""))
                found[m.group(1) if m else "<unparsed>"] += 1
    ans = Answer(r.status_code, found, response_warnings(r), {}, elapsed, "" if r.status_code == 200 else r.text[:500])
    return ans, {"fetches": fetches, "fetchedBytes": fetched, "warnings": ans.warnings}


def recovery_report(cluster: SedimentCluster, i: int) -> dict | None:
    """The "recovery" object of node i's status (None when it has none)."""
    return cluster.nodes[i].status().get("recovery")

"""Fixtures for sediment-on-Kafka fault tests: real brokers (scripts/kafka/cluster.py) in pytest tmp
dirs and real `sediment server` processes (tests/e2e/harness.py), all on 127.0.0.1.

Contract:
- Brokers are started here and stopped by pid (KafkaCluster.stop) at fixture teardown, also when a
  test fails; sediment servers are stopped by pid (SIGTERM, then SIGKILL) the same way.
- `kafka1`: one 1-broker cluster per module, shared by the tests that use it (each sediment server
  gets its own topic prefix); before each test the broker is (re)started if an earlier test left
  it down. `kafka3`: a fresh 3-broker cluster per test. At teardown every node must be gone.
- Each test is bounded: faulthandler aborts the run with tracebacks after KAFKA_TEST_TIMEOUT
  seconds (default 240).
- Skipped (with the reason) when java or kcat is missing; the first run may need Maven (fetch.sh).
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "scripts" / "kafka"))

from cluster import KafkaCluster  # noqa: E402
from harness import SedimentServer  # noqa: E402

TEST_TIMEOUT = float(os.environ.get("KAFKA_TEST_TIMEOUT", "240"))
CLUSTER_START_TIMEOUT = 180.0

_MISSING = [tool for tool in ("java", "kcat") if not shutil.which(tool)]


def pytest_collection_modifyitems(config, items):
    if _MISSING:
        skip = pytest.mark.skip(reason=f"needs {', '.join(_MISSING)} on PATH (see scripts/kafka/README.md)")
        for item in items:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _bounded_test():
    """Aborts the whole run with tracebacks if one test hangs."""
    faulthandler.dump_traceback_later(TEST_TIMEOUT, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def _stop_and_check(kc: KafkaCluster) -> None:
    """Stops every node by pid and checks that none is left running (scripts/kafka/cluster.py's
    stop, exercised by every fixture here)."""
    if kc.state is None:
        return
    pids = [n.get("pid") for n in kc.state["nodes"]]
    kc.stop()
    left = [i for i in range(kc.brokers) if kc.is_running(i)]
    assert not left, f"nodes {left} still running after stop() (pids {pids})"


@pytest.fixture(scope="module")
def _module_kafka1(tmp_path_factory):
    kc = KafkaCluster(tmp_path_factory.mktemp("kafka1"), brokers=1)
    try:
        # Retention is applied within a second (Kafka's default: every 5 minutes), for the test
        # of a finite retention deleting events before they were digested. sediment's own topics
        # have unbounded retention, so nothing else notices.
        kc.start(timeout=CLUSTER_START_TIMEOUT, extra_props={"log.retention.check.interval.ms": "1000"})
        yield kc
    finally:
        _stop_and_check(kc)


@pytest.fixture
def kafka1(_module_kafka1) -> KafkaCluster:
    """The module's 1-broker cluster, running."""
    if not _module_kafka1.is_running(0):
        _module_kafka1.restart(0, timeout=CLUSTER_START_TIMEOUT)
    return _module_kafka1


@pytest.fixture
def kafka3(tmp_path):
    kc = KafkaCluster(tmp_path / "kafka3", brokers=3)
    try:
        kc.start(timeout=CLUSTER_START_TIMEOUT)
        yield kc
    finally:
        _stop_and_check(kc)


@pytest.fixture
def servers(tmp_path):
    """make(kafka: KafkaCluster, name, start=True, root=None, **SedimentServer kwargs) -> a SedimentServer on
    that cluster's brokers; every one is stopped by pid at teardown."""
    made: list[SedimentServer] = []

    def make(kafka: KafkaCluster, name: str = "node", start: bool = True, root: Path | None = None,
             **kw) -> SedimentServer:
        """`root` reuses a folder (data/ and logs/ in it), e.g. an earlier server's data dir."""
        root = root or tmp_path / f"{name}-{len(made)}"
        kw.setdefault("kafka_brokers", kafka.bootstrap())
        s = SedimentServer(root / "data", root / "logs", **kw)
        made.append(s)
        if start:
            s.start(timeout=60)
        return s

    make.servers = made  # type: ignore[attr-defined] - read by pytest_runtest_makereport
    yield make
    for s in made:
        s.cleanup()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On failure, attach the sediment log of every server the test made and each broker's log tail."""
    outcome = yield
    rep = outcome.get_result()
    if rep.when != "call" or not rep.failed:
        return
    funcargs = getattr(item, "funcargs", {})
    for s in getattr(funcargs.get("servers"), "servers", []):
        rep.sections.append((f"sediment log {s.port}", s.log_text(all_runs=True)[-8000:]))
    for name in ("kafka1", "kafka3"):
        kc = funcargs.get(name)
        if isinstance(kc, KafkaCluster) and kc.state is not None:
            for node in kc.state["nodes"]:
                log = Path(node["dir"]) / "server.log"
                if log.exists():
                    rep.sections.append((f"{name} node {node['index']} server.log",
                                         log.read_text(errors="replace")[-4000:]))

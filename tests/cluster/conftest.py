"""Fixtures for the cluster fault tests: one real Kafka broker for the whole run
(scripts/kafka/cluster.py) and SedimentClusters of real `sediment server` processes on it
(cluster_harness.py), all on 127.0.0.1.

Contract:
- The broker is started here once per session (a start costs 10-20 s) and stopped by pid at
  session teardown, also when a test fails; before each test it is restarted if an earlier test
  left it down. Every cluster a test makes gets its own topic prefix (so tests share no topic) and
  is stopped by pid (stop_all) at test teardown.
- Each test is bounded: faulthandler aborts the run with tracebacks after CLUSTER_TEST_TIMEOUT
  seconds (default 240).
- Skipped with the reason when java or kcat is missing; a sediment binary without the cluster
  flags fails every test here.
- On failure the fault timeline, every node's log tail and the broker's log tail are attached.
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_harness import FIGURES, KafkaCluster, SedimentCluster, cluster_support  # noqa: E402
from harness import tls_files  # noqa: E402,F401 - the fixture (a test CA and a certificate for 127.0.0.1)

TEST_TIMEOUT = float(os.environ.get("CLUSTER_TEST_TIMEOUT", "240"))
BROKER_START_TIMEOUT = 180.0

_MISSING = [tool for tool in ("java", "kcat") if not shutil.which(tool)]


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_cluster: starts Kafka and sediment nodes")
    config.addinivalue_line("markers", "soak: the randomized soak (CLUSTER_SOAK_SECONDS)")
    config.addinivalue_line("markers", "leaves_broker_down: kills the session's broker for good; run last")


def pytest_collection_modifyitems(config, items):
    """Runs the tests that leave the session's broker down last (the next test would wait for a
    broker restart), otherwise in file order. Skips only when the machine lacks java/kcat. A
    sediment binary without the cluster flags is a failure of every cluster test (never a silent
    skip)."""
    items.sort(key=lambda item: item.get_closest_marker("leaves_broker_down") is not None)
    if not _MISSING:
        return
    skip = pytest.mark.skip(reason=f"needs {', '.join(_MISSING)} on PATH (see scripts/kafka/README.md)")
    for item in items:
        if item.get_closest_marker("needs_cluster"):
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _binary_supports_clusters():
    reason = cluster_support()
    assert reason is None, reason


@pytest.fixture(autouse=True)
def _bounded_test():
    """Aborts the whole run with tracebacks if one test hangs."""
    faulthandler.dump_traceback_later(TEST_TIMEOUT, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="session")
def _session_kafka(tmp_path_factory):
    kc = KafkaCluster(tmp_path_factory.mktemp("kafka"), brokers=1)
    try:
        kc.start(timeout=BROKER_START_TIMEOUT)
        yield kc
    finally:
        kc.stop()


@pytest.fixture
def kafka(_session_kafka) -> KafkaCluster:
    """The session's 1-broker Kafka, running."""
    if not _session_kafka.is_running(0):
        _session_kafka.restart(0, timeout=BROKER_START_TIMEOUT)
    return _session_kafka


@pytest.fixture
def make_cluster(kafka, tmp_path):
    """make(n=3, **SedimentCluster kwargs) -> a started SedimentCluster on the session's broker;
    every cluster is stopped by pid at teardown."""
    made: list[SedimentCluster] = []

    def make(n: int = 3, start: bool = True, **kw) -> SedimentCluster:
        c = SedimentCluster(kafka, tmp_path / f"cluster-{len(made)}", n, **kw)
        made.append(c)
        if start:
            c.start()
        return c

    make.clusters = made  # type: ignore[attr-defined] - read by pytest_runtest_makereport
    try:
        yield make
    finally:
        for c in made:
            c.stop_all()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On failure: the fault timeline, each node's log tail (every start) and the broker's log."""
    outcome = yield
    rep = outcome.get_result()
    if rep.when != "call" or not rep.failed:
        return
    funcargs = getattr(item, "funcargs", {})
    for ci, c in enumerate(getattr(funcargs.get("make_cluster"), "clusters", [])):
        rep.sections.append((f"cluster {ci} timeline", c.timeline_text()))
        for n in c.nodes:
            rep.sections.append((f"cluster {ci} node {n.index} (:{n.port}, ids {n.node_ids}) log",
                                 n.log_text(all_runs=True)[-8000:]))
    kc = funcargs.get("kafka")
    if isinstance(kc, KafkaCluster) and kc.state is not None:
        for node in kc.state["nodes"]:
            log = Path(node["dir"]) / "server.log"
            if log.exists():
                rep.sections.append((f"kafka node {node['index']} server.log", log.read_text(errors="replace")[-4000:]))


def pytest_terminal_summary(terminalreporter):
    if FIGURES:
        terminalreporter.section("cluster figures")
        for line in FIGURES:
            terminalreporter.write_line(line)

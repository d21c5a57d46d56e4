"""End-to-end fixtures: run the real `sediment server` binary on loopback (harness: harness.py).

Contract:
- Every process started here is ended by pid in fixture teardown (SIGTERM, then SIGKILL).
- Each test is bounded: faulthandler aborts the run with tracebacks after E2E_TEST_TIMEOUT seconds.
- Commit log: the embedded log, or Kafka when SEDIMENT_E2E_KAFKA=<bootstrap servers> is set; then
  every server the fixtures make uses those brokers with its own topic prefix (kept across its
  restarts) and 4 ingest partitions unless the test asks for another count.
- The Kafka run holds only the commit-log-sensitive tests: those marked `commit_log(reason)` (what
  of the commit log they exercise: replay after a kill, message splitting, rebuilding from the log,
  ...). Every other test is log-independent (parsing, queries, segments, the bucket) and runs on the
  embedded log only; it is skipped under Kafka with that reason. Kafka coverage of the rest lives in
  tests/kafka (broker faults, P1), tests/cluster (faults, replication, truncation, bucket, merges,
  retention on Kafka) and the Kafka unit tests. `embedded_log_only(reason)` skips a test under Kafka
  even if a module-wide `commit_log` mark covers it (e.g. one that tears the embedded log's files).
- The names tests import from here (`from conftest import SedimentServer, ...`) are re-exported
  from harness.py.
"""

from __future__ import annotations

import faulthandler
from pathlib import Path

import pytest

from harness import (  # noqa: F401 - re-exported for the test modules
    API_TOKEN,
    DEFAULT_BIN,
    HTTP_TIMEOUT,
    INGEST_TOKEN,
    KAFKA_DEFAULT_PARTITIONS,
    REPO,
    TEST_TIMEOUT,
    SedimentServer,
    TlsFiles,
    clean_env,
    e2e_kafka_brokers,
    free_port,
    marker,
    new_kafka_topic_prefix,
    pip_venv_python,
    sediment_bin,
    tls_files,
    wait_until,
)

KAFKA_BROKERS = e2e_kafka_brokers()

embedded_log_only = pytest.mark.embedded_log_only
commit_log = pytest.mark.commit_log

LOG_INDEPENDENT = ("log-independent (no commit_log mark): runs on the embedded log only; Kafka is covered by the "
                   "commit_log tests, tests/kafka and tests/cluster")


@pytest.fixture(autouse=True)
def _bounded_test():
    """Aborts the whole run with tracebacks if one test hangs."""
    faulthandler.dump_traceback_later(TEST_TIMEOUT, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def _factory(base: Path):
    servers: list[SedimentServer] = []

    def make(name: str = "node", start: bool = True, **kw) -> SedimentServer:
        root = base / f"{name}-{len(servers)}"
        if KAFKA_BROKERS:
            kw.setdefault("kafka_brokers", KAFKA_BROKERS)
        s = SedimentServer(root / "data", root / "logs", **kw)
        servers.append(s)
        if start:
            s.start()
        return s

    make.servers = servers  # type: ignore[attr-defined] - read by pytest_runtest_makereport
    return make, servers


@pytest.fixture
def server_factory(tmp_path):
    """make(**SedimentServer kwargs) -> a started server; all are stopped at teardown."""
    make, servers = _factory(tmp_path)
    yield make
    for s in servers:
        s.cleanup()


@pytest.fixture(scope="module")
def module_server_factory(tmp_path_factory):
    make, servers = _factory(tmp_path_factory.mktemp("mod"))
    yield make
    for s in servers:
        s.cleanup()


@pytest.fixture
def server(server_factory) -> SedimentServer:
    return server_factory()


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long-running (crash/kill) end-to-end tests")
    config.addinivalue_line(
        "markers", "embedded_log_only(reason): needs the embedded commit log; skipped under SEDIMENT_E2E_KAFKA")
    config.addinivalue_line(
        "markers", "commit_log(reason): exercises the commit log; runs under SEDIMENT_E2E_KAFKA too (the rest "
                   "is skipped there)")


def pytest_report_header(config):
    if KAFKA_BROKERS:
        return f"sediment commit log: Kafka at {KAFKA_BROKERS} (SEDIMENT_E2E_KAFKA)"
    return "sediment commit log: embedded (set SEDIMENT_E2E_KAFKA=host:port to use Kafka)"


def _mark_reason(mark, default: str) -> str:
    return (mark.args[0] if mark.args else mark.kwargs.get("reason")) or default


def pytest_collection_modifyitems(config, items):
    if not KAFKA_BROKERS:
        return
    for item in items:
        only = item.get_closest_marker("embedded_log_only")
        if only is not None:
            reason = _mark_reason(only, "needs the embedded commit log")
        elif item.get_closest_marker("commit_log") is None:
            reason = LOG_INDEPENDENT
        else:
            continue
        item.add_marker(pytest.mark.skip(reason=f"under Kafka: {reason}"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On failure, attach the log tails of every server the test used (directly or through a
    factory fixture)."""
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and rep.failed:
        seen: list[SedimentServer] = []
        for value in getattr(item, "funcargs", {}).values():
            for s in [value, *getattr(value, "servers", [])]:
                if isinstance(s, SedimentServer) and all(s is not x for x in seen):
                    seen.append(s)
        for s in seen:
            rep.sections.append((f"sediment log {s.port}", s.log_text(all_runs=True)[-8000:]))

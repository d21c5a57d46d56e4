"""Tests of scripts/kafka (fetch.sh + cluster.py) against real Kafka brokers.

Every broker start costs 10-20 s of the suite, so each test here starts as few as it can: the
library test (start, idempotent start, produce/consume, stop, resume from a fresh object) and the
CLI test (defaults incl. auto-create off, status, kill, restart, refusals, stop) two each. The
3-node cluster (quorum, kill, relaunch of the stopped nodes, stop) is checked inside
tests/kafka/test_broker_faults.py::test_three_brokers_rf3_min_isr2_one_then_two_down, which needs
one anyway.

Needs java and kcat on PATH (skipped otherwise) and Maven access for the first fetch (cached in
${SEDIMENT_CACHE:-~/.cache/sediment}). Every cluster is stopped by pid in a finally block, also
when an assertion fails; every wait is bounded.

    python3 -m pytest -q tests/kafka_harness -p no:cacheprovider
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts" / "kafka"
sys.path.insert(0, str(SCRIPTS))

from cluster import KafkaCluster, KafkaClusterError  # noqa: E402

pytestmark = pytest.mark.skipif(
    not (shutil.which("java") and shutil.which("kcat") and shutil.which("mvn")),
    reason="needs java, mvn and kcat on PATH")

KCAT_TIMEOUT = 60


def kcat(*args, input=None):
    res = subprocess.run(["kcat", *args], input=input, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=KCAT_TIMEOUT)
    assert res.returncode == 0, f"kcat {' '.join(args)} failed: {res.stderr}"
    return res.stdout


def broker_ids(bootstrap):
    md = json.loads(kcat("-L", "-J", "-q", "-m", "10", "-b", bootstrap))
    return sorted(b["id"] for b in md["brokers"])


def produce(bootstrap, topic, lines):
    kcat("-P", "-b", bootstrap, "-t", topic, "-p", "0", "-X", "acks=all",
         "-X", "message.timeout.ms=30000", input="\n".join(lines) + "\n")


def consume(bootstrap, topic, count):
    out = kcat("-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-c",
               str(count), "-e", "-q", "-m", "10")
    return out.splitlines()


def pid_running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


@pytest.fixture
def clusters():
    """Yields a factory of KafkaCluster objects; stops all of them by pid at teardown."""
    made = []

    def make(path, brokers):
        kc = KafkaCluster(path, brokers=brokers)
        made.append(kc)
        return kc

    yield make
    for kc in made:
        kc.stop(timeout=20)
        for node in kc.state["nodes"] if kc.state else []:
            assert not kc.is_running(node["index"])


def test_fetch_is_idempotent_and_complete():
    first = subprocess.run([str(SCRIPTS / "fetch.sh")], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    libs = Path(first.stdout.strip())
    assert first.stdout.count("\n") == 1, "fetch.sh prints exactly the libs path"
    jars = {p.name for p in libs.glob("*.jar")}
    version = os.environ.get("KAFKA_VERSION", "4.1.0")
    assert f"kafka_2.13-{version}.jar" in jars
    assert any(j.startswith("log4j-slf4j2-impl-") for j in jars)
    assert any(j.startswith("slf4j-api-2.") for j in jars), "slf4j 2 needed by the log4j2 binding"
    t0 = time.monotonic()
    second = subprocess.run([str(SCRIPTS / "fetch.sh")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, timeout=60)
    assert second.returncode == 0 and second.stdout == first.stdout
    assert time.monotonic() - t0 < 5, "second fetch should reuse the cache without Maven"


def test_one_broker_produce_consume_stop_restart(clusters, tmp_path):
    kc = clusters(tmp_path / "k1", brokers=1)
    bootstrap = kc.start(timeout=120, extra_props={"auto.create.topics.enable": "true"})
    assert bootstrap.startswith("127.0.0.1:")
    assert broker_ids(bootstrap) == [0]
    pid = kc.node(0)["pid"]

    # a second start on a running cluster changes nothing
    assert kc.start(timeout=60) == bootstrap
    assert kc.node(0)["pid"] == pid

    produce(bootstrap, "t", ["hello", "world"])
    assert consume(bootstrap, "t", 2) == ["hello", "world"]

    kc.stop(timeout=20)
    assert not pid_running(pid)
    assert not kc.is_running(0)

    # a fresh object on the same dir resumes the same cluster (ports, data)
    kc2 = clusters(tmp_path / "k1", brokers=1)
    assert kc2.start(timeout=120) == bootstrap
    assert consume(bootstrap, "t", 2) == ["hello", "world"]
    assert (tmp_path / "k1" / "node-0" / "server.log").exists()


def test_cli_start_status_kill_restart_stop(tmp_path):
    cli = [sys.executable, str(SCRIPTS / "cluster.py")]
    d = str(tmp_path / "cli")

    def run(*args, timeout=180):
        return subprocess.run(cli + list(args) + ["--dir", d], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=timeout)

    try:
        res = run("start", "--brokers", "1")
        assert res.returncode == 0, res.stderr
        bootstrap = res.stdout.strip()
        assert run("bootstrap").stdout.strip() == bootstrap
        status = json.loads(run("status").stdout)
        assert status["nodes"][0]["running"] and status["nodes"][0]["port_open"]
        assert broker_ids(bootstrap) == [0]

        # Auto-create is off by default: producing to an unknown topic does not make it.
        res = subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", "nope", "-p", "0",
                              "-X", "message.timeout.ms=3000"], input="x\n", text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=KCAT_TIMEOUT)
        md = json.loads(kcat("-L", "-J", "-q", "-b", bootstrap))
        assert "nope" not in [t["topic"] for t in md["topics"]], res.stderr

        pid = status["nodes"][0]["pid"]

        assert run("kill", "0").returncode == 0
        assert not json.loads(run("status").stdout)["nodes"][0]["running"]
        assert not pid_running(pid)
        assert run("restart", "0").returncode == 0
        assert broker_ids(bootstrap) == [0]
        assert json.loads(run("status").stdout)["nodes"][0]["pid"] != pid

        # a different broker count on the same dir is refused with a message
        res = run("start", "--brokers", "3")
        assert res.returncode == 1 and "1-node cluster" in res.stderr
    finally:
        assert run("stop", timeout=60).returncode == 0
    status = json.loads(run("status").stdout)
    assert not status["nodes"][0]["running"]
    assert run("stop").returncode == 0, "stop is idempotent"


def test_start_failure_reports_log_and_cleans_up(tmp_path):
    # an invalid property makes the broker exit at start: start() must raise with the log tail
    # and leave no process behind
    kc = KafkaCluster(tmp_path / "bad", brokers=1)
    with pytest.raises(KafkaClusterError) as err:
        kc.start(timeout=60, extra_props={"num.io.threads": "not-a-number"})
    assert "node 0" in str(err.value)
    assert not kc.is_running(0)


def test_broker_exit_during_start_reports_log_and_cleans_up(tmp_path):
    # the broker port is taken: the JVM exits at start; start() must say so with the broker's
    # own error and leave no process behind
    import socket

    from cluster import _free_ports

    port = _free_ports(1)[0]
    blocker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        blocker.bind(("127.0.0.1", port))
        blocker.listen()
        kc = KafkaCluster(tmp_path / "busy", brokers=1, base_port=port)
        with pytest.raises(KafkaClusterError) as err:
            kc.start(timeout=60)
        assert "process exited during start" in str(err.value)
        assert "Address already in use" in str(err.value)
        assert not kc.is_running(0)
    finally:
        blocker.close()


def test_cluster_ids_are_valid_for_the_storage_tool():
    # an id starting with '-' would be parsed as an option by kafka-storage format
    from cluster import _random_cluster_id

    ids = {_random_cluster_id() for _ in range(5000)}
    assert len(ids) == 5000
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)

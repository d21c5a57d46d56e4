"""The cluster page of a 3-node cluster (real Kafka broker, real nodes: tests/cluster's harness)
in a real browser: every node alive, then a killed node shown dead."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cluster"))
from cluster_harness import KafkaCluster, SedimentCluster, cluster_support  # noqa: E402
from ui import Ui  # noqa: E402

pytestmark = pytest.mark.skipif(not (shutil.which("java") and shutil.which("kcat")),
                                reason="needs java and kcat for the Kafka broker (scripts/kafka/README.md)")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = cluster_support()
    assert reason is None, reason
    root = tmp_path_factory.mktemp("cluster-page")
    kafka = KafkaCluster(root / "kafka", brokers=1)
    kafka.start(timeout=180)
    # The harness's timeouts: heartbeats 5 s, the consumer group's session 6 s (the broker's least).
    c = SedimentCluster(kafka, root / "nodes", 3, partitions=3)
    try:
        c.start()
        yield c
    finally:
        c.stop_all()
        kafka.stop()


def node_states(ui: Ui) -> dict[int, str]:
    return {int(r.get_attribute("data-node-id")): r.get_attribute("data-alive") for r in ui.all("node-row")}


def test_cluster_page_shows_a_killed_node_dead(browser, cluster, screenshot):
    first = cluster.node(0)
    ui = Ui(browser, first.url)
    ui.sign_in(cluster.api_token, "/cluster")
    ui.find("page-cluster")
    ids = {n.node_id for n in cluster.nodes}
    assert None not in ids and len(ids) == 3
    ui.wait(lambda: node_states(ui) == {i: "true" for i in ids}, timeout=30, what="three alive nodes")
    assert len(ui.all("partition-row")) == 3
    ui.wait(lambda: all(r.find_elements(By.CSS_SELECTOR, "td")[2].text == "yes" for r in ui.all("partition-row")),
            timeout=30, what="every partition owned")
    rows = {int(r.get_attribute("data-node-id")): r for r in ui.all("node-row")}
    for n in cluster.nodes:
        assert n.address in rows[n.node_id].text
    assert ui.find("replication-table") and ui.find("bucket-table")
    # Every node answers its version (its heartbeat's for the others).
    ui.wait(lambda: all(r.find_elements(By.CSS_SELECTOR, "td")[3].text for r in ui.all("node-row")),
            what="every node's version")

    victim = cluster.node(2)
    cluster.kill(2)
    want = {i: ("false" if i == victim.node_id else "true") for i in ids}
    # Dead once its heartbeats are older than --heartbeat-timeout-ms (5 s); the page polls every 2 s.
    ui.wait(lambda: node_states(ui) == want, timeout=20, what=f"node {victim.node_id} shown dead")
    row = next(r for r in ui.all("node-row") if int(r.get_attribute("data-node-id")) == victim.node_id)
    assert row.find_element(By.CSS_SELECTOR, '[data-testid="node-state"]').text == "dead"
    # The partitions it owned get a live owner again (the page follows the takeover).
    ui.wait(lambda: all(r.find_elements(By.CSS_SELECTOR, "td")[2].text == "yes" for r in ui.all("partition-row")),
            timeout=30, what="every partition owned by a live node")
    screenshot("cluster")

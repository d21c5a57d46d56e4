"""The digest-lag gauges of GET /metrics (issue 20, item 1) follow a paused digest.

A single node cannot be paused and scraped at once, and nothing else pauses a digest, so this runs
on a 2-node cluster (Kafka): node 1 is SIGSTOPped (its group session and heartbeat timeouts are
long, so its partitions stay its own), events go in through node 0, and node 0's /metrics (the
cluster view, as GET /api/v1/cluster computes it), parsed by prometheus_client's text parser,
shows sediment_digest_lag_events of node 1's partitions rise, and sediment_digest_lag_seconds
grow; after SIGCONT both fall back to 0.
"""

from __future__ import annotations

import time

import pytest

from harness import scrape_metrics, wait_until

pytestmark = pytest.mark.needs_cluster

LONG_MS = 60000  # session and heartbeat timeouts: the pause never moves a partition


def structured(ds: int) -> list[dict]:
    return [{"tags": {"ds": f"d{ds}"}, "events": [{"timestamp": int(time.time() * 1000), "attributes": {"ds": ds}}]}]


def test_digest_lag_rises_while_the_owner_is_paused_and_falls_after(make_cluster):
    c = make_cluster(2, session_timeout_ms=LONG_MS, heartbeat_timeout_ms=LONG_MS)
    c.wait_quiet(timeout=90)
    via, victim = 0, 1
    victim_id = str(c.node(victim).node_id)

    def victim_owned() -> list[int]:
        view = c.cluster_view(via)
        return sorted(p["partition"] for p in view["partitions"] if str(p["owner"]) == victim_id)

    # Quiet is not balanced: the first node may still hold every partition until the group
    # rebalances for the second one.
    owned = wait_until(victim_owned, timeout=60, interval=0.5, what=f"node {victim_id} owning a partition")

    def victim_rows(name: str, m) -> list[float]:
        return [v for ls, v in m.select(name) if ls["owner"] == victim_id]

    def settled():
        m = scrape_metrics(c.node(via))
        mine = sorted(int(ls["partition"]) for ls, _ in m.select("sediment_digest_lag_events") if ls["owner"] == victim_id)
        return m if mine == owned and sum(victim_rows("sediment_digest_lag_events", m)) == 0 else None

    wait_until(settled, timeout=30, interval=0.5, what=f"node 0's /metrics shows partitions {owned} of node {victim_id} at lag 0")

    c.pause(victim)
    try:
        # Many datasources, so that records land in every partition, the victim's among them.
        for ds in range(48):
            r = c.node(via).ingest("/api/v1/ingest/humio-structured", structured(ds))
            assert r.status_code == 200, r.text
        def lagging():
            m = scrape_metrics(c.node(via))
            return m if sum(victim_rows("sediment_digest_lag_events", m)) > 0 else None

        risen = wait_until(lagging, timeout=30, interval=0.5, what="the paused node's digest lag above 0")
        lag_events = sum(victim_rows("sediment_digest_lag_events", risen))
        time.sleep(2.5)
        later = scrape_metrics(c.node(via))
        assert sum(victim_rows("sediment_digest_lag_events", later)) >= lag_events
        lag_seconds = max(victim_rows("sediment_digest_lag_seconds", later))
        assert lag_seconds >= 2.0, later.select("sediment_digest_lag_seconds")
        print(f"paused: lag {lag_events:.0f} records, {lag_seconds:.1f} s on node {victim_id}'s partitions")
    finally:
        c.resume(victim)

    def caught_up():
        m = scrape_metrics(c.node(via))
        rows = m.select("sediment_digest_lag_events")
        done = len(rows) == c.partitions and all(v == 0 for _, v in rows) and all(
            v == 0 for _, v in m.select("sediment_digest_lag_seconds"))
        return m if done else None

    fell = wait_until(caught_up, timeout=60, interval=0.5, what="every partition's digest lag back to 0 after SIGCONT")
    assert all(ls["owner"] == victim_id for ls, _ in fell.select("sediment_digest_lag_events")
               if int(ls["partition"]) in owned)

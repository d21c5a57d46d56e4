"""GET /metrics (issue 20, item 1): the node's Prometheus metrics, read with the real Prometheus
text parser (prometheus_client's text_string_to_metric_families, Debian python3-prometheus-client).

- access: 401 without a token or with an unknown one, 403 with an ingest token, 200 with an API
  token, 200 without a token from a client inside --metrics-allow, 401 from outside it; a bad
  --metrics-allow range stops the start with a message naming it;
- ingesting N events in R requests moves sediment_ingested_events_total{repo} by exactly N,
  sediment_ingest_requests_total{endpoint,status} by the requests (a refused one under its status),
  sediment_ingested_bytes_total by the bodies' bytes and the commit-log append histogram by R;
- a query moves sediment_queries_total and the query duration histogram by one, a query job the
  jobs counter; segments, digest lag, process and HTTP metrics show the node's state.

The digest-lag gauge rising while a node is paused is in tests/cluster/test_metrics_lag.py (pausing
digestion needs a second node: a single node cannot be paused and scraped at once).
"""

from __future__ import annotations

import json
import time

import requests

from conftest import INGEST_TOKEN, REPO, wait_until
from harness import query_job_start, query_job_wait, scrape_metrics


def structured(n: int, tag: str) -> list[dict]:
    now = int(time.time() * 1000)
    return [{"tags": {"host": tag}, "events": [{"timestamp": now - i, "attributes": {"i": i, "tag": tag}}
                                                 for i in range(n)]}]


def test_metrics_access(server_factory):
    s = server_factory("plain")
    r = requests.get(s.url + "/metrics", timeout=10)
    assert r.status_code == 401, r.text
    assert "API token" in r.json()["error"]
    r = requests.get(s.url + "/metrics", headers={"Authorization": "Bearer nope"}, timeout=10)
    assert r.status_code == 401, r.text
    r = requests.get(s.url + "/metrics", headers={"Authorization": f"Bearer {INGEST_TOKEN}"}, timeout=10)
    assert r.status_code == 403, r.text
    assert "ingest token" in r.json()["error"]
    m = scrape_metrics(s)  # with the API token
    assert m.families["sediment_node_info"].type == "gauge"

    allowed = server_factory("allowed", extra_args=["--metrics-allow", "10.0.0.0/8", "--metrics-allow", "127.0.0.0/8"])
    m = scrape_metrics(allowed, headers={})
    assert m.get("sediment_commit_log_up", log="ingest", type="local") == 1

    outside = server_factory("outside", extra_args=["--metrics-allow", "10.0.0.0/8,::1/128"])
    assert requests.get(outside.url + "/metrics", timeout=10).status_code == 401
    assert scrape_metrics(outside).get("sediment_commit_log_up", log="ingest", type="local") == 1

    bad = server_factory("bad", start=False, extra_args=["--metrics-allow", "10.0.0.0/33"])
    code, out, _ = bad.start_expect_exit()
    assert code != 0
    assert "--metrics-allow" in out and "10.0.0.0/33" in out, out[-2000:]


def test_ingest_counters_move_by_exactly_what_was_ingested(server):
    path = "/api/v1/ingest/humio-structured"
    before = scrape_metrics(server)
    sizes = [7, 1, 25]
    body_bytes = 0
    for i, n in enumerate(sizes):
        body = structured(n, f"h{i}")
        body_bytes += len(json.dumps(body).encode())
        r = server.ingest(path, body)
        assert r.status_code == 200, r.text
    raw_lines = "alpha\nbeta\ngamma\n"
    assert server.ingest("/api/v1/ingest/raw", raw_lines).status_code == 200
    assert server.ingest(path, structured(3, "x"), token="wrong-token").status_code == 401
    after = scrape_metrics(server)

    def delta(name: str, **labels: str) -> float:
        return after.get(name, **labels) - before.get(name, **labels)

    n_events = sum(sizes) + 3
    assert delta("sediment_ingested_events_total", repo=REPO) == n_events
    assert delta("sediment_ingested_bytes_total", repo=REPO) == body_bytes + len(raw_lines)
    assert delta("sediment_ingest_requests_total", endpoint=path, status="200") == len(sizes)
    assert delta("sediment_ingest_requests_total", endpoint="/api/v1/ingest/raw", status="200") == 1
    assert delta("sediment_ingest_requests_total", endpoint=path, status="401") == 1
    assert delta("sediment_commit_log_append_seconds_count") == len(sizes) + 1
    assert after.families["sediment_ingested_events"].type == "counter"
    assert after.families["sediment_commit_log_append_seconds"].type == "histogram"
    # Cumulative buckets ending in +Inf == count.
    buckets = sorted(after.select("sediment_commit_log_append_seconds_bucket"), key=lambda lv: float(lv[0]["le"]))
    counts = [v for _, v in buckets]
    assert counts == sorted(counts) and buckets[-1][0]["le"] == "+Inf"
    assert counts[-1] == after.get("sediment_commit_log_append_seconds_count")
    assert delta("sediment_http_requests_total", status="401") >= 1


def test_query_and_state_metrics(server):
    server.ingest("/api/v1/ingest/humio-structured", structured(40, "q"))
    wait_until(server.quiet, timeout=30, what="events digested and flushed")
    before = scrape_metrics(server)
    rows = server.query("count()", start=0)
    assert int(rows[0]["_count"]) == 40
    job = query_job_start(server, "count()", start=0)
    query_job_wait(server, job)
    after = scrape_metrics(server)

    def delta(name: str, **labels: str) -> float:
        return after.get(name, **labels) - before.get(name, **labels)

    assert delta("sediment_queries_total", kind="query", status="200") == 1
    assert delta("sediment_query_duration_seconds_count", kind="query") == 1
    assert delta("sediment_query_jobs_started_total", kind="job") == 1
    assert delta("sediment_queries_total", kind="job", status="200") >= 1
    assert after.get("sediment_queries_running") == 0
    # Reading local segments: cache hits, no download.
    assert delta("sediment_cache_hits_total") >= 1
    assert delta("sediment_cache_misses_total") == 0

    status = server.status()
    assert after.get("sediment_segments", repo=REPO) == status["segments"]["count"]
    assert after.get("sediment_segment_events", repo=REPO) == 40
    node = str(status["node"])
    assert after.get("sediment_segment_copies", repo=REPO, node=node) == status["segments"]["count"]
    assert after.get("sediment_under_replicated_segments") == 0
    lags = after.select("sediment_digest_lag_events")
    assert len(lags) == status["ingestPartitions"], lags
    assert all(v == 0 and ls["owner"] == node for ls, v in lags)
    assert all(v == 0 for _, v in after.select("sediment_digest_lag_seconds"))
    assert after.get("sediment_node_info", node=node, version=status["version"]) == 1
    assert after.get("sediment_http_connections_open") >= 1

    # Process metrics from /proc.
    assert after.families["process_cpu_seconds"].type == "counter"
    assert after.get("process_cpu_seconds_total") > 0
    assert after.get("process_resident_memory_bytes") > 1 << 20
    assert after.get("process_open_fds") > 3
    start = after.get("process_start_time_seconds")
    assert time.time() - 600 < start <= time.time() + 1

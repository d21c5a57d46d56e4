// api::NodeMetrics: the instruments a node updates as it works (ingest, queries, HTTP). Values that
// mirror state the node already keeps (digest lag, segments, backlogs, cache, health) are computed
// when /metrics is scraped (metrics_routes.cc). The list with types and labels: metrics/README.md.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "coordinator/coordinator.h"
#include "metrics/metrics.h"

namespace sediment::api {

// Thread-safe (the instruments' own safety). One per node, shared by its routes and the server.
struct NodeMetrics {
  NodeMetrics();
  NodeMetrics(const NodeMetrics&) = delete;
  NodeMetrics& operator=(const NodeMetrics&) = delete;

  metrics::Registry registry;
  // Every ingest request answered (a gate's refusal included), by route pattern and HTTP status.
  metrics::CounterFamily& ingest_requests;  // {endpoint, status}
  // Events and request-body bytes of ingest requests answered 200, by repository.
  metrics::CounterFamily& ingested_events;  // {repo}
  metrics::CounterFamily& ingested_bytes;   // {repo}
  // From a request's first append to the commit log's acknowledgement of all its messages.
  metrics::Histogram& commit_log_append_seconds;
  // Query runs finished (POST .../query; each run of a query job), by kind and HTTP status.
  metrics::CounterFamily& queries;                   // {kind, status}
  metrics::HistogramFamily& query_duration_seconds;  // {kind}
  metrics::Gauge& queries_running;
  // Query jobs created (POST .../queryjobs) and live streams started, by kind (job, live_job,
  // live_stream).
  metrics::CounterFamily& query_jobs_started;  // {kind}
  // Every HTTP request answered by the node (refusals before the body included), by status.
  metrics::CounterFamily& http_requests;  // {status}
  // Segments read by the queries coordinated here (on any node) from a local copy, and segments
  // they downloaded from the bucket first.
  metrics::Counter& cache_hits;
  metrics::Counter& cache_misses;
};

// Runs `run` as one query run of `kind` ("query", "job"): counted in sediment_queries_running
// while it runs, then in sediment_queries_total by the HTTP status its outcome maps to, in
// sediment_query_duration_seconds, and (when it succeeded) its segment reads in
// sediment_cache_hits_total / sediment_cache_misses_total.
Result<coordinator::CoordinatedResult> CountedQueryRun(
    NodeMetrics& m, std::string_view kind,
    const std::function<Result<coordinator::CoordinatedResult>()>& run);

}  // namespace sediment::api

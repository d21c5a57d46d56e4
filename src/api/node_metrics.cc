#include "api/node_metrics.h"

#include <chrono>

#include "common/clock.h"
#include "http/status_code.h"
#include "metrics/process.h"

namespace sediment::api {

NodeMetrics::NodeMetrics()
    : ingest_requests(registry.AddCounter("sediment_ingest_requests",
                                          "Ingest requests answered, by route and HTTP status.",
                                          {"endpoint", "status"})),
      ingested_events(registry.AddCounter(
          "sediment_ingested_events",
          "Events of ingest requests answered 200 (durable in the commit log), by repository.",
          {"repo"})),
      ingested_bytes(registry.AddCounter(
          "sediment_ingested_bytes",
          "Request body bytes of ingest requests answered 200, by repository.", {"repo"})),
      commit_log_append_seconds(
          registry
              .AddHistogram("sediment_commit_log_append_seconds",
                            "Time from an ingest request's append to the commit log's "
                            "acknowledgement of all its messages.",
                            {}, metrics::LatencyBuckets())
              .With({})),
      queries(registry.AddCounter(
          "sediment_queries",
          "Query runs finished on this node as coordinator, by kind (query: POST /query; job: one "
          "run of a query job) and HTTP status.",
          {"kind", "status"})),
      query_duration_seconds(registry.AddHistogram("sediment_query_duration_seconds",
                                                   "Duration of query runs coordinated here.",
                                                   {"kind"}, metrics::LatencyBuckets())),
      queries_running(
          registry.AddGauge("sediment_queries_running", "Query runs this node coordinates now.")
              .With({})),
      query_jobs_started(registry.AddCounter(
          "sediment_query_jobs_started",
          "Query jobs created and live streams started, by kind (job, live_job, live_stream).",
          {"kind"})),
      http_requests(registry.AddCounter("sediment_http_requests",
                                        "HTTP requests answered, by status.", {"status"})),
      cache_hits(registry
                     .AddCounter("sediment_cache_hits",
                                 "Segments the queries coordinated here read from a local copy "
                                 "(on the node that read them).")
                     .With({})),
      cache_misses(registry
                       .AddCounter("sediment_cache_misses",
                                   "Segments the queries coordinated here downloaded from the "
                                   "bucket before reading them.")
                       .With({})) {
  metrics::AddProcessCollector(registry);
}

Result<coordinator::CoordinatedResult> CountedQueryRun(
    NodeMetrics& m, std::string_view kind,
    const std::function<Result<coordinator::CoordinatedResult>()>& run) {
  m.queries_running.Inc();
  const auto t0 = SteadyNow();
  Result<coordinator::CoordinatedResult> result = run();
  m.queries_running.Dec();
  m.query_duration_seconds.With({kind}).Observe(
      std::chrono::duration<double>(SteadyNow() - t0).count());
  const int status = result.ok() ? 200 : http::StatusCodeFor(result.status());
  m.queries.With({kind, std::to_string(status)}).Inc();
  if (result.ok()) {
    const uint64_t read = result->result.stats.segments_scanned;
    const uint64_t fetched = result->bucket_fetches;
    m.cache_misses.Inc(fetched);
    m.cache_hits.Inc(read > fetched ? read - fetched : 0);
  }
  return result;
}

}  // namespace sediment::api

// GET /metrics: the node's Prometheus metrics (text exposition format 0.0.4, metrics/README.md).
// The instruments of NodeMetrics as they stand, then the values computed at scrape time from the
// node's parts: digest lag per partition (the cluster view's, as GET /api/v1/cluster computes it),
// segments by repository and node, replication, bucket and cache progress, commit-log health.
// Access: a known API token, or a client address inside a --metrics-allow range.
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/node.h"
#include "api/routes.h"
#include "common/cidr.h"
#include "common/mutex.h"
#include "metrics/metrics.h"

namespace sediment::api {
namespace {

using metrics::Labels;
using metrics::Type;
using metrics::Writer;

class MetricsRoutes : public Node {
 public:
  explicit MetricsRoutes(const Node& node) : Node(node) {
    // Server start refused bad ranges (ValidateMetricsAllow); none is left here to skip.
    for (const std::string& text : config.metrics_allow) {
      if (auto c = Cidr::Parse(text); c.ok()) allowed_.push_back(*c);
    }
  }

  // Refusal of a request (401, 403), nullopt to admit it.
  std::optional<http::Response> Refusal(const http::Request& req) const;
  http::Response Handle() const;

 private:
  void WriteDigest(Writer& w) const;
  void WriteSegments(Writer& w) const;
  void WriteStorage(Writer& w) const;
  void WriteNode(Writer& w) const;

  std::vector<Cidr> allowed_;
  // Per partition: the wall time a scrape last saw its digest caught up (lag 0), for
  // sediment_digest_lag_seconds.
  mutable Mutex mu_;
  mutable std::map<int32_t, int64_t> caught_up_ms_ GUARDED_BY(mu_);
};

std::optional<http::Response> MetricsRoutes::Refusal(const http::Request& req) const {
  for (const Cidr& c : allowed_) {
    if (c.Contains(req.remote)) return std::nullopt;
  }
  if (TokenFrom(req, false).empty()) {
    return http::JsonError(401,
                           "GET /metrics needs an API token (Authorization: Bearer <token>) or "
                           "a client address inside a --metrics-allow range");
  }
  if (IsApiCaller(req)) return std::nullopt;
  if (!IngestRepo(req, false).empty()) {
    return http::JsonError(403, "an ingest token cannot read /metrics: use an API token");
  }
  return http::JsonError(401, "unknown API token");
}

void MetricsRoutes::WriteDigest(Writer& w) const {
  // Each partition's next offset: this node's digest for the partitions it owns, else the owner's
  // last heartbeat (as the cluster view); -1: unknown (no owner, owner dead or claiming).
  std::map<int32_t, PartitionDigestStatus> local;
  for (auto& p : digest->PartitionStatuses()) local[p.partition.value] = p;
  std::map<int64_t, NodeView> views;
  for (auto& v : membership->Nodes()) views[v.node.value] = v;
  std::map<int32_t, PartitionState> pstates;
  global->Read([&](const GlobalState& st) { pstates = st.partitions; });
  int64_t bounds_age_ms = -1;
  const std::vector<PartitionBounds> bounds = ingest_bounds->Fresh(&bounds_age_ms);
  const int64_t now_ms = clock->NowMillis();

  struct Row {
    std::string partition, owner;
    int64_t lag = -1;
    uint64_t buffered = 0;
  };
  std::vector<Row> rows;
  const int32_t partitions = ingest_log->partition_count();
  for (int32_t p = 0; p < partitions; ++p) {
    PartitionState ps;
    if (auto it = pstates.find(p); it != pstates.end()) ps = it->second;
    if (ps.epoch.value <= 0) continue;
    int64_t next = -1;
    uint64_t buffered = 0;
    if (ps.owner == node) {
      auto it = local.find(p);
      if (it != local.end() && it->second.claimed && it->second.epoch == ps.epoch) {
        next = it->second.next_offset.value;
        buffered = it->second.buffered_events;
      }
    } else if (auto v = views.find(ps.owner.value); v != views.end() && v->second.serving()) {
      for (const auto& pp : v->second.last.partitions) {
        if (pp.partition.value == p && pp.epoch == ps.epoch) {
          next = pp.next_offset.value;
          buffered = pp.buffered_events;
        }
      }
    }
    const PartitionBounds lb =
        static_cast<size_t>(p) < bounds.size() ? bounds[p] : PartitionBounds{};
    if (next < 0 || lb.end < 0) continue;
    rows.push_back(Row{std::to_string(p), std::to_string(ps.owner.value),
                       std::max<int64_t>(0, lb.end - next), buffered});
  }
  w.Begin("sediment_digest_lag_events", Type::kGauge,
          "Commit-log records of the partition not yet digested (log end minus the owner's next "
          "offset), as this node sees the cluster; owner: the digesting node.");
  for (const Row& r : rows) {
    w.Sample({{"partition", r.partition}, {"owner", r.owner}}, static_cast<double>(r.lag));
  }
  w.Begin("sediment_digest_lag_seconds", Type::kGauge,
          "Seconds since a scrape of this node last saw the partition's digest caught up (0 "
          "while it is).");
  {
    MutexLock lock(&mu_);
    for (const Row& r : rows) {
      const int32_t p = std::stoi(r.partition);
      auto it = caught_up_ms_.emplace(p, now_ms).first;
      if (r.lag == 0) it->second = now_ms;
      w.Sample({{"partition", r.partition}, {"owner", r.owner}},
               static_cast<double>(now_ms - it->second) / 1000.0);
    }
  }
  w.Begin("sediment_digest_buffered_events", Type::kGauge,
          "Events digested into segments not yet flushed, by partition.");
  for (const Row& r : rows) {
    w.Sample({{"partition", r.partition}, {"owner", r.owner}}, static_cast<double>(r.buffered));
  }
  w.Begin("sediment_commit_log_offsets_age_seconds", Type::kGauge,
          "Age of the commit-log end offsets the lag is computed from (-1: not known yet).");
  w.Sample({}, bounds_age_ms < 0 ? -1.0 : static_cast<double>(bounds_age_ms) / 1000.0);
}

void MetricsRoutes::WriteSegments(Writer& w) const {
  struct Count {
    uint64_t segments = 0, bytes = 0, events = 0;
  };
  std::map<std::string, Count> by_repo;                           // committed segments
  std::map<std::pair<std::string, int64_t>, Count> by_repo_node;  // copies
  uint64_t under = 0, under_bytes = 0, no_live = 0, backlog = 0, backlog_bytes = 0;
  std::map<int64_t, bool> alive;
  for (const auto& v : membership->Nodes()) alive[v.node.value] = v.serving();
  alive[node.value] = true;
  bool bucket_set = false;
  global->Read([&](const GlobalState& st) {
    bucket_set = !st.bucket.empty();
    const uint32_t factor = EffectiveReplicationFactor(st);
    for (const auto& [id, seg] : st.segments) {
      if (seg.staged()) continue;
      const std::string& repo = seg.datasource.repo;
      Count& c = by_repo[repo];
      ++c.segments;
      c.bytes += seg.file_size;
      c.events += seg.event_count;
      bool live = false;
      for (NodeId n : seg.replicas) {
        Count& cn = by_repo_node[{repo, n.value}];
        ++cn.segments;
        cn.bytes += seg.file_size;
        live = live || alive[n.value];
      }
      if (!seg.uploaded) {
        ++backlog;
        backlog_bytes += seg.file_size;
        if (seg.replicas.size() < factor) {
          ++under;
          under_bytes += seg.file_size;
        }
        if (!live) ++no_live;
      }
    }
  });
  w.Begin("sediment_segments", Type::kGauge, "Segments in Global, by repository.");
  for (const auto& [repo, c] : by_repo) w.Sample({{"repo", repo}}, static_cast<double>(c.segments));
  w.Begin("sediment_segment_bytes", Type::kGauge,
          "Bytes of the segments in Global, by repository.");
  for (const auto& [repo, c] : by_repo) w.Sample({{"repo", repo}}, static_cast<double>(c.bytes));
  w.Begin("sediment_segment_events", Type::kGauge,
          "Events in the segments in Global, by repository.");
  for (const auto& [repo, c] : by_repo) w.Sample({{"repo", repo}}, static_cast<double>(c.events));
  w.Begin("sediment_segment_copies", Type::kGauge,
          "Segment copies Global lists on a node, by repository and node.");
  for (const auto& [k, c] : by_repo_node) {
    w.Sample({{"repo", k.first}, {"node", std::to_string(k.second)}},
             static_cast<double>(c.segments));
  }
  w.Begin("sediment_segment_copy_bytes", Type::kGauge,
          "Bytes of the segment copies Global lists on a node, by repository and node.");
  for (const auto& [k, c] : by_repo_node) {
    w.Sample({{"repo", k.first}, {"node", std::to_string(k.second)}}, static_cast<double>(c.bytes));
  }
  w.Begin("sediment_under_replicated_segments", Type::kGauge,
          "Segments (not in the bucket) with fewer copies than the replication factor.");
  w.Sample({}, static_cast<double>(under));
  w.Begin("sediment_under_replicated_bytes", Type::kGauge,
          "Bytes of the under-replicated segments.");
  w.Sample({}, static_cast<double>(under_bytes));
  w.Begin("sediment_segments_without_live_copy", Type::kGauge,
          "Segments (not in the bucket) whose every copy is on nodes that are not alive.");
  w.Sample({}, static_cast<double>(no_live));
  if (bucket_set) {
    w.Begin("sediment_bucket_upload_backlog_segments", Type::kGauge,
            "Segments not yet uploaded to the bucket.");
    w.Sample({}, static_cast<double>(backlog));
    w.Begin("sediment_bucket_upload_backlog_bytes", Type::kGauge,
            "Bytes of the segments not yet uploaded to the bucket.");
    w.Sample({}, static_cast<double>(backlog_bytes));
  }
}

void MetricsRoutes::WriteStorage(Writer& w) const {
  auto one = [&](const char* name, Type type, const char* help, double v) {
    w.Begin(name, type, help);
    w.Sample({}, v);
  };
  if (replicator) {
    const Replicator::Progress r = replicator->progress();
    one("sediment_repair_pending_segments", Type::kGauge,
        "Segment copies this node should pull now (as of the replicator's last pass).",
        static_cast<double>(r.pending_segments));
    one("sediment_repair_pending_bytes", Type::kGauge, "Bytes of the pending segment copies.",
        static_cast<double>(r.pending_bytes));
    one("sediment_repair_copied_segments", Type::kCounter,
        "Segment copies pulled, verified and announced by this node.",
        static_cast<double>(r.copied_segments));
    one("sediment_repair_failed_pulls", Type::kCounter, "Segment copy pulls that failed.",
        static_cast<double>(r.failed_pulls));
    one("sediment_corrupt_copies_detected", Type::kCounter,
        "Local segment copies found corrupt (scrub or read).",
        static_cast<double>(r.corrupt_copies));
    if (r.bucket_mode) {
      one("sediment_bucket_fetches", Type::kCounter,
          "Segments downloaded from the bucket into the local cache.",
          static_cast<double>(r.bucket_fetches));
      one("sediment_bucket_fetched_bytes", Type::kCounter,
          "Bytes downloaded from the bucket into the local cache.",
          static_cast<double>(r.bucket_fetched_bytes));
      one("sediment_bucket_fetch_failures", Type::kCounter,
          "Bucket downloads that failed or were corrupt (after a retry).",
          static_cast<double>(r.failed_bucket_fetches));
      one("sediment_cache_evicted_segments", Type::kCounter,
          "Local copies evicted for the cache bound.", static_cast<double>(r.evicted_segments));
      one("sediment_cache_bytes", Type::kGauge, "Bytes of the local segment files.",
          static_cast<double>(r.local_bytes));
      one("sediment_cache_max_bytes", Type::kGauge, "The local segment cache bound (0: none).",
          static_cast<double>(r.cache_max_bytes));
    }
  }
  if (uploader) {
    const Uploader::Progress u = uploader->progress();
    one("sediment_bucket_upload_pending", Type::kGauge,
        "Segments this node is to upload (as of the uploader's last pass).",
        static_cast<double>(u.mine_pending));
    one("sediment_bucket_uploaded_segments", Type::kCounter, "Segments this node uploaded.",
        static_cast<double>(u.uploaded_segments));
    one("sediment_bucket_uploaded_bytes", Type::kCounter, "Bytes this node uploaded.",
        static_cast<double>(u.uploaded_bytes));
    one("sediment_bucket_upload_failures", Type::kCounter, "Uploads that failed.",
        static_cast<double>(u.failed_uploads));
  }
}

void MetricsRoutes::WriteNode(Writer& w) const {
  w.Begin("sediment_node_info", Type::kGauge, "1, labelled with the node's id and version.");
  w.Sample({{"node", std::to_string(node.value)}, {"version", kVersion}}, 1);
  w.Begin("sediment_commit_log_up", Type::kGauge,
          "1 while the commit log reports ok, by log (ingest, global) and type (local, kafka): "
          "on Kafka the producer's health.");
  const std::string type = kafka() ? "kafka" : "local";
  w.Sample({{"log", "ingest"}, {"type", type}}, ingest_log->Health() == "ok" ? 1 : 0);
  w.Sample({{"log", "global"}, {"type", type}}, global_log->Health() == "ok" ? 1 : 0);
  if (group != nullptr) {
    w.Begin("sediment_kafka_consumer_group_up", Type::kGauge,
            "1 while the digest's Kafka consumer group reports ok.");
    w.Sample({}, group->Health() == "ok" ? 1 : 0);
  }
  w.Begin("sediment_global_applied_offset", Type::kGauge,
          "The global-log offset this node's Global has applied.");
  w.Sample({}, static_cast<double>(global->Applied().value));
  if (http_server != nullptr) {
    w.Begin("sediment_http_connections_open", Type::kGauge, "Open client connections.");
    w.Sample({}, static_cast<double>(http_server->open_connections()));
  }
  if (query_jobs != nullptr) {
    w.Begin("sediment_query_slots_in_use", Type::kGauge,
            "Places of --max-query-jobs held by running query jobs and live queries.");
    w.Sample({}, static_cast<double>(query_jobs->ActiveSlots()));
    w.Begin("sediment_query_slots_max", Type::kGauge, "--max-query-jobs.");
    w.Sample({}, static_cast<double>(config.max_query_jobs));
  }
}

http::Response MetricsRoutes::Handle() const {
  http::Response r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = metrics->registry.Render();
  Writer w;
  WriteNode(w);
  WriteDigest(w);
  WriteSegments(w);
  WriteStorage(w);
  r.body += w.Take();
  return r;
}

}  // namespace

void AddMetricsRoutes(http::Router& router, const Node& node) {
  auto self = std::make_shared<const MetricsRoutes>(node);
  router.Add(
      "GET", "/metrics",
      [self](const http::Request&, const http::PathParams&) { return self->Handle(); },
      [self](const http::Request& req, const http::PathParams&) { return self->Refusal(req); });
}

}  // namespace sediment::api

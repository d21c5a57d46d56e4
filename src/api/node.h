// api::Node: what the HTTP API uses of its node, and the helpers every route module shares.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "bucket/bucket.h"
#include "cluster/membership.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/status.h"
#include "config/server_config.h"
#include "coordinator/coordinator.h"
#include "coordinator/leaf.h"
#include "coordinator/query_admission.h"
#include "coordinator/query_jobs.h"
#include "digest/digest.h"
#include "global/global.h"
#include "http/http_server.h"
#include "http/router.h"
#include "log/bounds_monitor.h"
#include "log/commit_log.h"
#include "log/kafka_group.h"
#include "maintenance/bucket_snapshots.h"
#include "merge/merge.h"
#include "query/query.h"
#include "storage/bucket_collector.h"
#include "storage/replicator.h"
#include "storage/store.h"
#include "storage/uploader.h"

namespace sediment {
class JsonWriter;
}

namespace sediment::api {

inline constexpr const char* kVersion = "0.2.0";

// The parts of a running node and the facts fixed at its start. The server fills it once every
// part exists, before its routes serve; the parts are borrowed (the server stops HTTP before it
// destroys any). Null: a part that is off (bucket, uploader, merger, bucket_snapshots). Route
// modules copy it; the parts' own thread-safety applies.
struct Node {
  ServerConfig config;
  Env* env = nullptr;
  Clock* clock = nullptr;
  NodeId node{0};
  std::string advertise;      // HOST:PORT peers and clients use
  int64_t started_ms = 0;     // wall time of the start
  std::string global_source;  // where Global started from
  CommitLog* ingest_log = nullptr;
  CommitLog* global_log = nullptr;
  BoundsMonitor* ingest_bounds = nullptr;  // the ingest log's offsets
  Global* global = nullptr;
  Digest* digest = nullptr;
  Membership* membership = nullptr;
  PartitionGroup* group = nullptr;  // Kafka only: the digest consumer group
  SegmentStore* store = nullptr;
  PeerView* peers = nullptr;
  Replicator* replicator = nullptr;
  Merger* merger = nullptr;
  bucket::Bucket* bucket = nullptr;
  std::string bucket_location;
  uint64_t cache_bound_bytes = 0;  // the local segment cache bound (bucket storage), 0 = none
  Uploader* uploader = nullptr;
  BucketCollector* bucket_collector = nullptr;
  maintenance::BucketSnapshots* bucket_snapshots = nullptr;
  coordinator::Coordinator* coordinator = nullptr;
  coordinator::Leaf* leaf = nullptr;
  coordinator::QueryJobs* query_jobs = nullptr;
  coordinator::QueryAdmission* query_admission = nullptr;  // null: no bound

  bool kafka() const { return !config.kafka_brokers.empty(); }
  // The secret node-to-node requests carry: --cluster-secret, else the one Global holds.
  std::string ClusterSecret() const;
  // Whether `req` carries the cluster secret / a known API token (Authorization: Bearer).
  bool IsInternalCaller(const http::Request& req) const;
  bool IsApiCaller(const http::Request& req) const;
  // `handler`, answered only for callers with the cluster secret (401 otherwise).
  http::RouteHandler InternalOnly(http::RouteHandler handler) const;
  // 401/404 when the request's API token or the repository is unknown.
  std::optional<http::Response> CheckQueryAccess(const http::Request& req,
                                                 const std::string& repo) const;
  // The configured query limits from now (--query-timeout-ms, --query-memory-bytes).
  coordinator::QueryControl LimitsFromNow() const;
};

// The secret node-to-node requests carry: `configured` (--cluster-secret), else the one `global`
// holds (generated once by the cluster).
std::string ClusterSecretOf(const std::string& configured, const Global* global);
// Token from "Authorization: Bearer T" (or "Splunk T" when allow_splunk).
std::string TokenFrom(const http::Request& req, bool allow_splunk);
void WriteRowJson(JsonWriter& w, const query::Row& row);

}  // namespace sediment::api

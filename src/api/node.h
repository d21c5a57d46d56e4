// api::Node: what the HTTP API uses of its node, and the helpers every route module shares.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/node_metrics.h"
#include "api/permissions.h"
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
#include "ingest/sharder.h"
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
  // config.cluster_secret is the secret this node checked against the cluster's verifier at its
  // start (--cluster-secret, or its data dir's cluster-secret file).
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
  // Picks each request's partition per datasource (ingest::AppendAll); null: PartitionFor.
  ingest::DatasourceSharder* sharder = nullptr;
  Global* global = nullptr;
  // The GeoIP databases queries read (query/geo.h; null: none), shared read-only.
  std::shared_ptr<const query::GeoDatabases> geo;
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
  const TokenLookup* tokens = nullptr;        // the ingest and API token lookups (null: none known)
  const http::Server* http_server = nullptr;  // the node's listener (null: none, in tests)
  // The node's instruments (node_metrics.h), shared by every copy of this Node.
  std::shared_ptr<NodeMetrics> metrics = std::make_shared<NodeMetrics>();

  bool kafka() const { return !config.kafka_brokers.empty(); }
  // Whether `req` carries the cluster secret / a known API token (Authorization: Bearer).
  bool IsInternalCaller(const http::Request& req) const;
  bool IsApiCaller(const http::Request& req) const;
  // The request's API token (Bearer) with its permissions; nullopt: none or unknown.
  std::optional<ApiPrincipal> ApiCaller(const http::Request& req) const;
  // The repository the request may ingest into (Bearer, or Splunk when hec): its ingest token's,
  // else, for an API token, the repository named by the `repo` query parameter when the token
  // holds `ingest` on it and it exists; empty: none.
  std::string IngestRepo(const http::Request& req, bool hec) const;
  // The same for Elastic clients (ElasticTokens); empty: none.
  std::string ElasticIngestRepo(const http::Request& req) const;

  // The routes' authentication (http::RouteGate: decided from the header, before the body is
  // read; the handlers behind them do not check again). Each keeps a copy of this Node.
  // The cluster secret only (401): every /internal/ route.
  http::RouteGate InternalGate() const;
  // A known API token (401).
  http::RouteGate ApiTokenGate() const;
  // A known API token (401) holding `need` on the route's {repo} (403; `write` instead for methods
  // other than GET and HEAD), and {repo} exists (404). The permission is checked first, so a token
  // without rights learns nothing about which repositories exist.
  http::RouteGate RepoGate(Permission need) const { return RepoGate(need, need); }
  http::RouteGate RepoGate(Permission read, Permission write) const;
  // A known API token (401) with the admin permission (403).
  http::RouteGate AdminGate() const;
  // A known ingest token: LogScale answers 401 without one or for an unknown one; Splunk HEC
  // (hec) 401 with code 2 without one, 403 with code 4 for an unknown one.
  http::RouteGate IngestGate(bool hec) const;
  // A known ingest token as Elastic clients send it (ElasticTokens): 401 in Elastic's shape
  // (security_exception, WWW-Authenticate) without one or for an unknown one.
  http::RouteGate ElasticGate() const;
  // The configured query limits from now (--query-timeout-ms, --query-memory-bytes).
  coordinator::QueryControl LimitsFromNow() const;
};

// An error answer in Splunk HEC's shape: {"text", "code", "error"}.
http::Response HecError(int status, const std::string& message, int hec_code);
// An error answer in Elasticsearch's shape, {"error": {"root_cause": [{type, reason}], type,
// reason}, "status"}, with the X-Elastic-Product header Elastic clients check.
http::Response ElasticError(int status, std::string_view type, std::string_view reason);
// The ingest tokens an Elastic client may carry, in the order tried: "Basic" (the password; any
// user name), "ApiKey" (the key as given, and the key part of base64 "id:key"), "Bearer".
std::vector<std::string> ElasticTokens(const http::Request& req);
// The unauthenticated health answers (GET /api/v1/health in LogScale's status shape
// {"status": "OK"|"DOWN"}, GET /services/collector/health in Splunk HEC's {"text", "code"}):
// 200 when `up`, else 503. nullopt for any other path.
std::optional<http::Response> HealthAnswer(const http::Request& req, bool up);
// Token from "Authorization: Bearer T" (or "Splunk T" when allow_splunk).
std::string TokenFrom(const http::Request& req, bool allow_splunk);
void WriteRowJson(JsonWriter& w, const query::Row& row);

}  // namespace sediment::api

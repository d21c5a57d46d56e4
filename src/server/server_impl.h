// Internal to the server library: the state of one node and the helpers its request handlers
// share. server.cc starts/stops the node and serves ingest and status; query_handler.cc
// coordinates queries across nodes and serves the query endpoint and the internal query
// endpoints; query_jobs.cc serves the query-job API and live queries; cluster_handler.cc serves
// the cluster view, the snapshot endpoint and partition-group callbacks.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bucket/bucket.h"
#include "cluster/membership.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/status.h"
#include "common/types.h"
#include "coordinator/coordinator.h"
#include "coordinator/peer_client.h"
#include "digest/digest.h"
#include "global/global.h"
#include "http/http_server.h"
#include "http/router.h"
#include "ingest/ingest.h"
#include "log/commit_log.h"
#include "log/kafka_group.h"
#include "log/kafka_log.h"
#include "merge/merge.h"
#include "query/query.h"
#include "server/server.h"
#include "storage/bucket_collector.h"
#include "storage/replicator.h"
#include "storage/store.h"
#include "storage/uploader.h"

namespace sediment {

class JsonWriter;

// ---- helpers shared by the handlers (server_util.cc) ----
std::string RandomHex(size_t bytes);
int HttpStatusFor(const Status& st);
// Token from "Authorization: Bearer T" (or "Splunk T" when allow_splunk).
std::string TokenFrom(const http::Request& req, bool allow_splunk);
void WriteRowJson(class JsonWriter& w, const query::Row& row);
bool ParseListen(const std::string& listen, std::string* host, uint16_t* port);
// A segment file name a peer may ask for: "<name>.seg", no path separators, no "..".
bool ValidSegmentFileName(const std::string& name);

// Whether `dir` holds a Global snapshot file.
bool HasSnapshot(Env* env, const std::string& dir);

inline constexpr const char* kVersion = "0.2.0";

// How long a start waits for an unreachable bucket endpoint or Kafka, and between attempts.
inline constexpr std::chrono::milliseconds kStartDependencyWait{120000};
inline constexpr std::chrono::milliseconds kStartRetryDelay{2000};

// ---- queries (query_handler.cc, query_jobs.cc) ----

// The public query body (LogScale's QueryInput): {queryString, start, end, isLive}; other fields
// (timeZoneOffsetMinutes, arguments, ...) are accepted and ignored.
struct QueryRequestBody {
  std::string query_string;
  std::string start, end;  // as given (a number becomes its decimal text); empty = absent
  bool live = false;
};
// Parses `body`; the 400 response to send when it is not a valid query body.
std::optional<http::Response> ParseQueryRequest(const std::string& body, QueryRequestBody* out);

// The coordinator's types (coordinator/coordinator.h), as the handlers name them.
using coordinator::CoordinatedResult;
using coordinator::QueryControl;

// The error response of a query that failed: 408 for its time limit, 413 for its memory bound
// (naming the flag), else HttpStatusFor's status.
http::Response QueryErrorResponse(const Status& st, const QueryControl& control);

class QueryJobs;  // query_jobs.cc
// What the query-job registry uses of its node.
struct QueryJobsEnv {
  // Server::Impl::RunQuery.
  std::function<Result<CoordinatedResult>(const std::string& repo, const std::string& query_string,
                                          const query::CompiledQuery& compiled,
                                          const query::TimeRange& range,
                                          const QueryControl& control)>
      run;
  std::function<QueryControl()> limits;  // Server::Impl::LimitsFromNow
  std::function<int64_t()> now_ms;       // wall clock
  int max_jobs = 16;                     // jobs and live streams at once
  int64_t expiry_ms = 90000;             // a job not polled this long is forgotten; 0 = never
};
// Starts the query-job registry of a node (its expiry thread).
std::shared_ptr<QueryJobs> StartQueryJobs(QueryJobsEnv env);
// Cancels every query job and live query and refuses new ones (the node is stopping).
void CancelQueryJobs(QueryJobs& jobs);
// CancelQueryJobs, then waits for the jobs' threads.
void StopQueryJobs(QueryJobs& jobs);

struct Server::Impl : public PartitionGroupListener {
  ServerConfig config;
  Env* env = Env::Default();
  Clock* clock = Clock::Real();
  NodeId node{0};
  std::string advertise;  // HOST:PORT peers and clients use to reach this node
  int64_t started_ms = 0;
  std::string global_source;  // where Global started from, for the status page
  std::unique_ptr<CommitLog> ingest_log;
  std::unique_ptr<CommitLog> global_log;
  std::unique_ptr<CommitLog> chatter_log;
  std::unique_ptr<Global> global;
  std::unique_ptr<Digest> digest;
  std::unique_ptr<Membership> membership;
  std::unique_ptr<PartitionGroup> group;
  std::unique_ptr<http::Server> http;
  std::string segment_dir;
  // Storage (src/storage, src/merge): local files, copies on peers, merges.
  std::unique_ptr<SegmentStore> store;
  std::unique_ptr<PeerView> peers;
  std::unique_ptr<SegmentFetcher> fetcher;
  std::unique_ptr<Replicator> replicator;
  std::unique_ptr<Merger> merger;
  // Maintenance thread: starts replication and merges once membership has heard the peers, then
  // runs retention and the global topic's truncation every maintenance_interval_ms.
  std::mutex maintenance_mu;
  std::condition_variable maintenance_cv;
  bool maintenance_stop = false;
  std::thread maintenance_thread;
  void MaintenanceLoop();
  Status StartStorage();
  void StopStorage();
  // The node whose turn it is for cluster-wide chores (retention, global topic truncation): the
  // lowest-id alive node.
  bool IsMaintenanceLeader() const;
  void ApplyRetention();
  void TruncateGlobalTopic();
  int64_t global_truncated_before = 0;  // maintenance thread only
  // Bucket storage (bucket_handler.cc; null bucket = off).
  std::unique_ptr<bucket::Bucket> bucket;
  std::string bucket_location;
  std::unique_ptr<Uploader> uploader;
  std::unique_ptr<BucketCollector> bucket_collector;  // with the uploader (StartStorage)
  bool recovered_here = false;  // this node recovered the cluster from the bucket at start
  Status OpenBucket();
  // Runs `step` again every kStartRetryDelay while it fails with Unavailable, for at most
  // kStartDependencyWait (a warning per attempt); any other error, or the last Unavailable, ends
  // the start. `step` must be safe to run again after it failed.
  Status RetryUnavailableAtStart(const std::string& what, const std::function<Status()>& step);
  // Before Global opens: with --recover-from-bucket on an empty global log, builds the recovered
  // state from the bucket and installs it as the local snapshot (or leaves it to the node whose
  // recovery marker came first).
  Status RecoverFromBucket(const std::string& snapshot_dir);
  // Maintenance leader: uploads a Global snapshot every bucket_snapshot_interval_ms (when it
  // changed), keeps the newest bucket_snapshots_kept, and runs a bucket_collector pass that keeps
  // the files that snapshot lists.
  void BucketMaintenance();
  // One bucket_collector pass keeping `in_snapshot` (the files the newest bucket snapshot lists).
  void CollectBucketGarbage(const std::set<std::string>& in_snapshot);
  uint64_t CacheBoundBytes() const;
  void WriteBucketStatus(JsonWriter& w) const;
  void WriteStorageBucketProgress(JsonWriter& w) const;
  int64_t bucket_snapshot_at_us = 0;  // maintenance thread only
  int64_t bucket_gc_at_us = 0;        // maintenance thread only: last collector pass
  mutable std::mutex bucket_mu;       // guards the fields below
  int64_t bucket_snapshot_offset = -1;
  uint32_t bucket_snapshot_generation = 0;
  std::string bucket_snapshot_key, bucket_snapshot_error;
  int64_t bucket_snapshot_ms = 0;
  uint64_t bucket_snapshots_uploaded = 0;
  std::atomic<bool> ready{false};  // HTTP serving: the heartbeat advertises the address
  bool stopped = false;
  bool kafka() const { return !config.kafka_brokers.empty(); }

  // Commit-log offsets for the status page, asked by a thread of their own: a remote log's
  // offset queries can block far beyond their timeout while brokers are down, and the status page
  // must answer. A status request asks for a fresh reading and waits for it at most 2 s; after
  // that it shows the last reading (and its age).
  struct LogBounds {
    int64_t start = -1, end = -1;  // -1: unknown
  };
  std::mutex bounds_mu;
  std::condition_variable bounds_cv;
  std::vector<LogBounds> bounds;
  int64_t bounds_at_us = 0;    // monotonic time of the last completed reading
  uint64_t bounds_done = 0;    // readings completed
  uint64_t bounds_wanted = 0;  // readings asked for
  bool bounds_stop = false;
  std::thread bounds_thread;
  void BoundsLoop();
  std::vector<LogBounds> FreshBounds(int64_t* age_ms);

  Result<KafkaOptions> KafkaOptionsFromConfig() const;
  Status OpenLogs();
  Status OpenGlobal();
  Status Bootstrap();
  Status StartMembership();
  Heartbeat SelfHeartbeat() const;
  // Before Global::Open on a node without a local snapshot: installs the newest snapshot an alive
  // peer serves. Best effort: without one, Global replays the log from its start.
  void FetchPeerSnapshot(const std::string& snapshot_dir);
  // Asks the live peers, most advanced first, for their Global snapshot and hands each answer to
  // `use` until one accepts it: the peer and `use`'s offset; else why not (also in *why_not, in a
  // few words for the status page).
  Result<std::pair<NodeId, Offset>> PeerSnapshot(
      const std::function<Result<Offset>(const std::string&)>& use, std::string* why_not);

  // The secret node-to-node requests carry (config, else Global's).
  std::string ClusterSecret() const;
  bool IsInternalCaller(const http::Request& req) const;
  bool IsApiCaller(const http::Request& req) const;

  // PartitionGroupListener: the Kafka consumer group's decisions go to the digest.
  void OnAssigned(const std::vector<PartitionId>& partitions) override;
  void OnRevoked(const std::vector<PartitionId>& partitions, bool lost) override;

  // Routes (each handler file registers its own; built once in Start, before HTTP serves).
  http::Router router;
  void AddRoutes();
  void AddIngestRoutes();   // server.cc: ingest, status, index
  void AddQueryRoutes();    // query_handler.cc, query_jobs.cc: query, query jobs, internal query
  void AddClusterRoutes();  // cluster_handler.cc: cluster view, Global snapshot
  void AddStorageRoutes();  // storage_handler.cc: segment list and files, retention
  // `handler`, answered only for callers with the cluster secret (401 otherwise).
  http::RouteHandler InternalOnly(http::RouteHandler handler);
  http::Response Handle(const http::Request& req);
  http::Response HandleIngest(const http::Request& req, ingest::Format format, bool hec);

  // ---- queries (query_handler.cc, query_jobs.cc) ----
  // Coordinates this node's queries (created in Start, after the parts it borrows).
  std::unique_ptr<coordinator::LocalNode> query_local;
  std::unique_ptr<coordinator::PeerClient> query_peers;
  std::unique_ptr<coordinator::Coordinator> coordinator;
  void StartCoordinator();
  // Runs one query across the cluster with this node as coordinator (query_handler.cc). Fails
  // on the limits of `control` (DeadlineExceeded, ResourceExhausted, Cancelled), also when a
  // peer reached them, and on internal errors; unreachable data becomes warnings (P5).
  Result<CoordinatedResult> RunQuery(const std::string& repo, const std::string& query_string,
                                     const query::CompiledQuery& compiled,
                                     const query::TimeRange& range, const QueryControl& control);
  // The configured limits (--query-timeout-ms from now, --query-memory-bytes).
  QueryControl LimitsFromNow() const;
  // 401/404 when the request's API token or the repository is unknown.
  std::optional<http::Response> CheckQueryAccess(const http::Request& req, const std::string& repo);
  http::Response HandleQuery(const http::Request& req, const std::string& repo);
  // POST {repo}/queryjobs, GET|DELETE {repo}/queryjobs/{id} (`id` empty for the first).
  http::Response HandleQueryJobs(const http::Request& req, const std::string& repo,
                                 const std::string& id);
  // A live query on the streaming endpoint (query_jobs.cc).
  http::Response StreamLiveQuery(const http::Request& req, const std::string& repo,
                                 const QueryRequestBody& body,
                                 std::shared_ptr<const query::CompiledQuery> compiled);
  std::shared_ptr<QueryJobs> query_jobs;  // created in Start, cancelled and joined in Stop
  // Internal queries running here for a coordinator, by query id, so that it can cancel them.
  std::mutex internal_queries_mu;
  std::multimap<std::string, std::shared_ptr<std::atomic<bool>>> internal_queries;
  http::Response HandleInternalPartial(const http::Request& req);
  http::Response HandleInternalCancel(const http::Request& req);
  http::Response HandleStatus();
  http::Response HandleCluster();
  http::Response HandleSnapshot(const http::Request& req);
  http::Response HandleInternalBuffers(const http::Request& req);
  http::Response HandleInternalSegments(const http::Request& req);
  http::Response HandleSegmentFile(const http::Request& req);
  http::Response HandleClusterSegments(const http::Request& req);
  http::Response HandleRetention(const http::Request& req, const std::string& repo);
};

}  // namespace sediment

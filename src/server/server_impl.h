// Internal to the server library: the parts of one node, owned here, and the steps that build,
// start and stop them. server.cc: start/stop, logs, Global, bootstrap, the api::Node the routes
// get; query_handler.cc: this node as the coordinator and the leaf see it; cluster_handler.cc:
// membership and peer snapshots; storage_handler.cc: storage and the maintenance thread;
// bucket_handler.cc: the bucket. The HTTP routes are src/api.
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

#include "alerts/alerts.h"
#include "api/node.h"
#include "bucket/bucket.h"
#include "cluster/membership.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/random_hex.h"
#include "common/status.h"
#include "common/types.h"
#include "coordinator/coordinator.h"
#include "coordinator/leaf.h"
#include "coordinator/peer_client.h"
#include "coordinator/query_admission.h"
#include "coordinator/query_jobs.h"
#include "digest/digest.h"
#include "global/global.h"
#include "http/http_client.h"
#include "http/http_server.h"
#include "http/router.h"
#include "ingest/ingest.h"
#include "ingest/sharder.h"
#include "log/bounds_monitor.h"
#include "log/commit_log.h"
#include "log/kafka_group.h"
#include "log/kafka_log.h"
#include "maintenance/bucket_recovery.h"
#include "maintenance/bucket_snapshots.h"
#include "maintenance/maintenance.h"
#include "merge/merge.h"
#include "query/query.h"
#include "server/server.h"
#include "storage/bucket_collector.h"
#include "storage/replicator.h"
#include "storage/store.h"
#include "storage/uploader.h"

namespace sediment {

// How long a start waits for an unreachable bucket endpoint or Kafka, and between attempts.
inline constexpr std::chrono::milliseconds kStartDependencyWait{120000};
inline constexpr std::chrono::milliseconds kStartRetryDelay{2000};
// Files in the data dir (owner-only): the first start's generated tokens, and the cluster secret
// this node generated (or moved out of an older release's Global).
inline constexpr const char* kCredentialsFile = "credentials.txt";
inline constexpr const char* kClusterSecretFile = "cluster-secret";

struct Server::Impl : public PartitionGroupListener {
  ServerConfig config;
  Env* env = Env::Default();
  Clock* clock = Clock::Real();
  NodeId node{0};
  std::string advertise;  // HOST:PORT peers and clients use to reach this node
  // How this node calls its peers (scheme and CA), from PeerTlsOf(config); set at Start before
  // any part that calls peers is built.
  http::PeerTls peer_tls;
  int64_t started_ms = 0;
  std::string global_source;  // where Global started from, for the status page
  std::unique_ptr<CommitLog> ingest_log;
  std::unique_ptr<CommitLog> global_log;
  std::unique_ptr<CommitLog> chatter_log;
  std::unique_ptr<Global> global;
  std::unique_ptr<Digest> digest;
  std::unique_ptr<Membership> membership;
  std::unique_ptr<PartitionGroup> group;
  // Which partitions each request's datasources go to (ingest/sharder.h; the policy lives there).
  // Declared before `http`, whose handlers borrow it, so it outlives them.
  std::unique_ptr<ingest::DatasourceSharder> sharder;
  std::unique_ptr<http::Server> http;
  std::string segment_dir;
  // Storage (src/storage, src/merge): local files, copies on peers, merges.
  std::unique_ptr<SegmentStore> store;
  std::unique_ptr<PeerView> peers;
  std::unique_ptr<SegmentFetcher> fetcher;
  std::unique_ptr<Replicator> replicator;
  std::unique_ptr<Merger> merger;
  Status StartStorage();
  void StopStorage();
  // Bucket storage (bucket_handler.cc; null bucket = off).
  std::unique_ptr<bucket::Bucket> bucket;
  std::string bucket_location;
  std::unique_ptr<Uploader> uploader;
  std::unique_ptr<BucketCollector> bucket_collector;  // with the uploader (StartStorage)
  // Starts replication, uploads and merges; runs retention, truncation and bucket snapshots
  // (declared after the parts it uses).
  std::unique_ptr<maintenance::BucketSnapshots> bucket_snapshots;  // bucket storage only
  std::unique_ptr<maintenance::Maintenance> maintenance;
  Status OpenBucket();
  // Runs `step` again every kStartRetryDelay while it fails with Unavailable, for at most
  // kStartDependencyWait (a warning per attempt); any other error, or the last Unavailable, ends
  // the start. `step` must be safe to run again after it failed.
  Status RetryUnavailableAtStart(const std::string& what, const std::function<Status()>& step);
  uint64_t CacheBoundBytes() const;
  std::atomic<bool> ready{false};  // HTTP serving: the heartbeat advertises the address
  bool stopped = false;
  bool kafka() const { return !config.kafka_brokers.empty(); }

  // The ingest log's offsets for the status pages (read by a thread of their own).
  std::unique_ptr<BoundsMonitor> ingest_bounds;

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

  // The secret node-to-node requests carry: config.cluster_secret, which EnsureClusterSecret
  // checked against the cluster's verifier.
  std::string ClusterSecret() const { return config.cluster_secret; }
  // Before Global opens: without --cluster-secret, the data dir's cluster-secret file (if any)
  // provides it (peers' snapshots are fetched with it).
  Status LoadClusterSecretFile();
  // After Global opened: the first node records the verifier of its secret (given, or generated
  // and saved to the cluster-secret file); every node's secret must match it (InvalidArgument
  // naming --cluster-secret otherwise). A secret Global held in clear (an older release) moves to
  // the file.
  Status EnsureClusterSecret();
  // Writes `text` to `path` through Env (owner-only, atomically).
  Status WritePrivateFile(const std::string& path, const std::string& text);
  // The token lookups the routes use (after Global opens).
  std::unique_ptr<TokenLookup> tokens;

  // PartitionGroupListener: the Kafka consumer group's decisions go to the digest.
  void OnAssigned(const std::vector<PartitionId>& partitions) override;
  void OnRevoked(const std::vector<PartitionId>& partitions, bool lost) override;

  // The HTTP API (src/api): its routes are registered once every part exists, before the node
  // is ready; until then every request is answered 503.
  http::Router router;
  api::Node ApiNode() const;
  http::Response Handle(const http::Request& req);
  // ServerOptions::admit: the gate of the route a request goes to, from its header alone.
  std::optional<http::Response> Admit(const http::Request& req) const;
  // The answer while the node starts: 503, or a health route's "down".
  http::Response NotReady(const http::Request& req) const;
  // sediment_http_requests_total of one answer (Admit's refusals and Handle's answers).
  void CountHttpAnswer(int status) const;

  // Queries (query_handler.cc).
  // Coordinates this node's queries (created in Start, after the parts it borrows).
  std::unique_ptr<coordinator::LocalNode> query_local;
  std::unique_ptr<coordinator::PeerClient> query_peers;
  std::unique_ptr<coordinator::Coordinator> coordinator;
  std::unique_ptr<coordinator::Leaf> leaf;  // answers the coordinators of other nodes
  // The GeoIP databases (--geoip-city-db, --geoip-asn-db), opened at the start before anything
  // else (none open when neither flag is set); read-only and shared by every query.
  std::shared_ptr<const query::GeoDatabases> geo;
  void StartCoordinator();
  // Created in Start, cancelled before HTTP stops and joined after.
  std::shared_ptr<coordinator::QueryJobs> query_jobs;
  std::unique_ptr<coordinator::QueryAdmission> query_admission;  // plain /query requests
  // The node's instruments (GET /metrics), shared with every route module through ApiNode.
  std::shared_ptr<api::NodeMetrics> metrics = std::make_shared<api::NodeMetrics>();

  // Scheduled searches and alerts (alert_handler.cc): started once queries can run, stopped
  // first (a delivery between retries gives up; its window stays unfinished for the next owner).
  std::unique_ptr<alerts::ActionSender> alert_sender;
  std::unique_ptr<alerts::AlertRunner> alert_runner;
  void StartAlerts();
};

}  // namespace sediment

// The coordinator of a query across the cluster (coordinator/README.md): asks each partition's
// owner for its buffered events, cuts them at flushed_through, has each segment read by one
// holder, retries on other copies, and merges the partial states.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/env.h"
#include "common/status.h"
#include "coordinator/peer_client.h"
#include "global/global.h"
#include "query/query.h"

namespace sediment::coordinator {

// Limits and progress of one coordinated query. Pointers are not owned and must outlive the run.
struct QueryControl {
  std::optional<std::chrono::steady_clock::time_point> deadline;
  int64_t timeout_ms = 0;       // the limit the deadline came from (for messages)
  size_t max_memory_bytes = 0;  // per node; 0 = unlimited
  const std::atomic<bool>* cancel = nullptr;
  query::QueryProgress* progress = nullptr;  // this node's scan
  // Requests to other nodes for this query: sent / answered (query-job progress).
  std::atomic<uint64_t>* peers_total = nullptr;
  std::atomic<uint64_t>* peers_done = nullptr;
};

// The limits of a query that starts now: a deadline `timeout_ms` from now (0 = none) and a memory
// bound per node (0 = none).
QueryControl QueryLimitsFromNow(int64_t timeout_ms, uint64_t max_memory_bytes);

// A coordinated query's answer.
struct CoordinatedResult {
  query::QueryResult result;          // rows; stats summed over every node that read data
  std::vector<std::string> warnings;  // every warning (P5), in the order they were found
  uint64_t bucket_fetches = 0, bucket_fetched_bytes = 0;
};

// What the coordinator uses of the node it runs on. Implementations are thread-safe (queries run
// concurrently).
class LocalNode {
 public:
  virtual ~LocalNode() = default;
  virtual NodeId id() const = 0;
  // The buffered events of the partitions of `want` (partition -> claim epoch) this node digests
  // under exactly that epoch; the partitions of `want` it does not serve go to `not_served`.
  virtual std::vector<query::BufferedSource> Buffers(const std::map<int32_t, Epoch>& want,
                                                     std::vector<int64_t>* not_served) = 0;
  // Whether this node has a file of that name in its segment directory now.
  virtual bool HoldsFile(const std::string& file_name) const = 0;
  // How the query engine reads this node's copy of `seg`.
  virtual query::SegmentSource SourceOf(const SegmentRecord& seg) const = 0;
  // How the query engine reads segment `id` from `file_name`, a file Global no longer lists (merged
  // away, expired) that is still in the segment directory (the deletion delay): from its footer.
  // nullopt when the name is not a valid segment file name, or the file is gone or unreadable.
  virtual std::optional<query::SegmentSource> SourceOfFile(const std::string& file_name,
                                                           SegmentId id) const = 0;
  // Keeps the files from being deleted while the handle lives.
  virtual std::shared_ptr<void> Pin(const std::vector<std::string>& file_names) = 0;
  // Whether bucket storage is on (FetchFromBucket can work).
  virtual bool HasBucket() const = 0;
  struct Fetched {
    bool fetched = false;  // downloaded now (else it was already local)
    uint64_t bytes = 0;
  };
  // Makes `seg` local from the bucket.
  virtual Result<Fetched> FetchFromBucket(const SegmentRecord& seg) = 0;
  // This node's copy of `id` could not be read: it is withdrawn (and replaced from a good copy).
  virtual void ReportUnreadable(SegmentId id) = 0;
};

struct CoordinatorOptions {
  int query_threads = 1;
  // --heartbeat-timeout-ms, named when a peer is given up because membership declared it dead.
  int64_t heartbeat_timeout_ms = 0;
  // --peer-progress-timeout-ms: a peer call that brings no answer byte this long is abandoned
  // (zero = never).
  std::chrono::milliseconds peer_progress_timeout{0};
  // How long to wait for this node's Global to reach the partition owners' snapshots.
  std::chrono::milliseconds global_wait{5000};
  // The node's GeoIP databases (query/geo.h) for the defineTable()/join() subqueries it compiles
  // (null: none).
  std::shared_ptr<const query::GeoDatabases> geo;
};

// What a peer looks like to the coordinator now.
struct PeerInfo {
  bool alive = false;
  std::string address;  // HOST:PORT; empty = unknown
  // Alive and reachable (a node without an address is still starting).
  bool serving() const { return alive && !address.empty(); }
};

class Coordinator {
 public:
  // Borrows everything; all must outlive the Coordinator. `find_peer`: the membership view of a
  // node (nullopt: unknown). Thread-safe: Run may be called concurrently.
  Coordinator(Env* env, Clock* clock, Global* global, LocalNode* local, PeerClient* peers,
              std::function<std::optional<PeerInfo>(NodeId)> find_peer, CoordinatorOptions options);

  // Runs `compiled` (the compiled form of `query_string`) over `repo` in `range` on the cluster.
  // Errors: the query's limits (DeadlineExceeded, ResourceExhausted, Cancelled), also when a peer
  // reached one; the engine's errors. Whatever could not be read becomes a warning (P5).
  Result<CoordinatedResult> Run(const std::string& repo, const std::string& query_string,
                                const query::CompiledQuery& compiled, const query::TimeRange& range,
                                const QueryControl& control);

 private:
  Env* const env_;
  Clock* const clock_;
  Global* const global_;
  LocalNode* const local_;
  PeerClient* const peers_;
  const std::function<std::optional<PeerInfo>(NodeId)> find_peer_;
  const CoordinatorOptions options_;
};

}  // namespace sediment::coordinator

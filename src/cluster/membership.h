// Membership: which nodes are alive (DESIGN section 9). Every node appends a heartbeat to
// partition 0 of the chatter log each interval and tails that partition to learn its peers.
// Used for query routing, status pages and (later) storage placement. Partition ownership is NOT
// decided here: that is the Kafka consumer group (DESIGN section 6).
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

#include "cluster/heartbeat.h"
#include "common/background_loop.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/types.h"
#include "log/commit_log.h"

namespace sediment {

struct MembershipOptions {
  // How often this node appends its heartbeat.
  std::chrono::milliseconds interval{1000};
  // A node is alive iff its newest heartbeat is younger than this.
  std::chrono::milliseconds liveness_timeout{5000};
  // At Start the listener begins this many records before the chatter end offset.
  int64_t catchup_records = 2000;
  // Every 30 heartbeats the publisher calls DeleteBefore(end - retain_records) on partition 0, so
  // an embedded chatter log does not grow forever (Kafka's retention makes it a no-op there).
  int64_t retain_records = 10000;
};

struct NodeView {
  NodeId node;
  std::string address;
  bool alive = false;
  int64_t last_heartbeat_ms = 0;  // sender's sent_ms of the newest heartbeat
  int64_t age_ms = 0;             // local view of how long ago that heartbeat counts from
  Heartbeat last;                 // the newest heartbeat itself
  // Alive and reachable: a node that heartbeats without an address is still starting and serves
  // nothing yet (queries, replication and the cluster view treat it as down).
  bool serving() const { return alive && !address.empty(); }
};

struct MembershipStats {
  uint64_t heartbeats_sent = 0;    // appends the log acknowledged (including Start's)
  uint64_t send_failures = 0;      // appends the log refused after Start
  uint64_t records_read = 0;       // chatter records the listener processed
  uint64_t malformed_records = 0;  // of those, records that did not decode (skipped)
  Offset catchup_end{0};           // chatter end offset seen at Start
  Offset next_offset{0};           // next chatter offset the listener reads
};

class Membership {
 public:
  // chatter: a CommitLog whose partition 0 carries heartbeats (Kafka topic <prefix>chatter, or an
  // embedded LocalLog on a single node). Not owned; outlives Membership. clock: not owned; gives
  // wall time (sent_ms, catch-up ages) and monotonic time (ages of live heartbeats). `self` builds
  // this node's heartbeat; it is called once by Start on the caller's thread, then on the
  // publisher thread each interval. Membership overwrites the returned `sent_ms` with the clock's
  // wall time and `node` with the id returned at Start (the node id is fixed for a run).
  Membership(CommitLog* chatter, Clock* clock, MembershipOptions options,
             std::function<Heartbeat()> self);
  // Stops (see Stop).
  ~Membership();
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  // Appends the first heartbeat and waits for the log to acknowledge it (its error is returned, and
  // nothing is started), reads the recent chatter history (best effort, up to about 2 s) so that
  // recent peers are known on return, then starts the publisher and listener threads.
  // InvalidArgument when `self` returns a node <= 0; Aborted after a successful Start. A failed
  // Start may be retried.
  Status Start();
  // Idempotent; stops and joins both threads. Afterwards the view is frozen, and self ages like
  // any other node.
  void Stop();

  // This node's id (from the first heartbeat); NodeId(0) before Start.
  NodeId self_id() const;
  // Every node heard of (including self once started), sorted by id.
  std::vector<NodeView> Nodes() const;
  std::optional<NodeView> Find(NodeId node) const;
  bool IsAlive(NodeId node) const;
  // NodeView::serving of `node` (false when unknown).
  bool IsServing(NodeId node) const;
  // The alive subset of Nodes(), sorted by id.
  std::vector<NodeView> AliveNodes() const;
  MembershipStats stats() const;

  // Thread-safety: every method may be called from any thread concurrently, except that Start must
  // not race with Stop or the destructor.

 private:
  struct Entry {
    Heartbeat last;
    // Monotonic time the heartbeat counts from: receive time for live records, or
    // now - (wall now - sent_ms) for records read during the startup catch-up.
    int64_t seen_mono_us = 0;
  };

  // The publisher loop's pass: one heartbeat, and every kTruncateEvery sends a truncation.
  void PublisherPass();
  // Builds, records locally and appends one heartbeat; waits for the ack unless stopping.
  Status PublishOnce() EXCLUDES(mu_);
  void MaybeTruncate();
  // Reads once from next_offset_ (waiting up to max_wait) and applies what it got. False when the
  // read failed (the caller waits a little before the next).
  bool ReadStep(std::chrono::milliseconds max_wait) EXCLUDES(mu_);
  void Apply(const LogRecord& record) EXCLUDES(mu_);
  NodeView View(const Entry& e, int64_t now_mono_us) const REQUIRES(mu_);

  CommitLog* const log_;
  Clock* const clock_;
  const MembershipOptions options_;
  const std::function<Heartbeat()> self_;

  Mutex lifecycle_mu_ ACQUIRED_BEFORE(mu_);  // serializes Start and Stop
  // Created by a successful Start (the publisher every interval at a fixed rate, the listener
  // back to back, kReadWait apart after a failed read), stopped and joined by Stop.
  std::unique_ptr<BackgroundLoop> publisher_ GUARDED_BY(lifecycle_mu_);
  std::unique_ptr<BackgroundLoop> listener_ GUARDED_BY(lifecycle_mu_);
  std::atomic<bool> stopping_{false};  // set by Stop: the publisher stops waiting for an ack

  mutable Mutex mu_;
  bool started_ GUARDED_BY(mu_) = false;  // a Start succeeded
  bool running_ GUARDED_BY(mu_) = false;  // between a successful Start and Stop
  NodeId self_id_ GUARDED_BY(mu_){0};     // fixed once started
  int64_t self_started_ms_ GUARDED_BY(mu_) = 0;
  std::map<NodeId, Entry> nodes_ GUARDED_BY(mu_);
  MembershipStats stats_ GUARDED_BY(mu_);
  uint64_t sends_since_truncate_ = 0;  // publisher thread only

  // Rate limiting of warnings (publisher and listener each have their own).
  struct Limiter {
    int64_t last_us = INT64_MIN;
    uint64_t suppressed = 0;
    // True when a message may be logged now; *suppressed gets the count dropped since the last.
    bool Allow(int64_t now_us, uint64_t* dropped);
  };
  Limiter send_limiter_;       // publisher thread only
  Limiter truncate_limiter_;   // publisher thread only
  Limiter read_limiter_;       // listener thread (and Start) only
  Limiter malformed_limiter_;  // listener thread (and Start) only
  Limiter duplicate_limiter_;  // listener thread (and Start) only
};

}  // namespace sediment

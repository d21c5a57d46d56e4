// Maintenance: the periodic chores of a node that keep storage within its promises, and the
// cluster-wide ones its leader runs (docs/DESIGN.md sections 5 and 8).
//
// Contract:
// - Start runs one thread. On a cluster it first waits `start_delay` (the heartbeat timeout: the
//   placement of copies needs every peer's heartbeat), then starts the replicator, the uploader
//   and the merger it was given, then every `interval` runs one pass while this node leads
//   (LeadsChores): retention (ApplyRetention), the global topic's truncation below the oldest
//   snapshot every live node keeps (TruncateGlobalTopic, cluster only), and the bucket snapshot
//   and collection pass (BucketSnapshots::RunOnce).
// - Stop ends the thread, then stops the uploader, the merger and the replicator. Idempotent; the
//   destructor stops.
// - The parts are not owned and must outlive the Maintenance. Not copyable; Start/Stop from one
//   thread (the node's start/stop).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "cluster/membership.h"
#include "common/clock.h"
#include "common/types.h"
#include "global/global.h"
#include "log/commit_log.h"
#include "maintenance/bucket_snapshots.h"
#include "merge/merge.h"
#include "storage/replicator.h"
#include "storage/uploader.h"

namespace sediment::maintenance {

// Whether `self` runs the cluster-wide chores: the lowest-id serving node of `alive` (Membership::
// AliveNodes, sorted by id). A node not yet serving never leads.
bool LeadsChores(const std::vector<NodeView>& alive, NodeId self);

// Removes the segments past their repository's retention (storage::PlanRetention) from Global, in
// batches of 1000; logs what it removed per repository. Failures are logged; the next pass retries.
void ApplyRetention(Global* global, Clock* clock);

// Deletes the global topic's records below the oldest snapshot every live node keeps
// (GlobalTopicTruncationPoint over this node's and the peers' heartbeats). `*truncated_before` is
// the point already reached (the log is not asked again for it) and is raised on success.
void TruncateGlobalTopic(Global* global, CommitLog* global_log, const Membership& membership,
                         NodeId self, int64_t* truncated_before);

struct MaintenanceParts {
  Clock* clock = nullptr;
  Global* global = nullptr;
  // Cluster only (null on a single node, which always leads and truncates nothing).
  const Membership* membership = nullptr;
  CommitLog* global_log = nullptr;
  // Started by the loop and stopped by Stop; uploader, merger and bucket_snapshots may be null.
  Replicator* replicator = nullptr;
  Uploader* uploader = nullptr;
  Merger* merger = nullptr;
  BucketSnapshots* bucket_snapshots = nullptr;
};

struct MaintenanceOptions {
  NodeId self{0};
  std::chrono::milliseconds start_delay{0};
  std::chrono::milliseconds interval{5000};
};

class Maintenance {
 public:
  Maintenance(MaintenanceParts parts, MaintenanceOptions options);
  ~Maintenance();
  Maintenance(const Maintenance&) = delete;
  Maintenance& operator=(const Maintenance&) = delete;

  void Start();
  void Stop();

 private:
  void Loop();
  // Waits `d` unless stopped; false once stopped.
  bool Wait(std::chrono::milliseconds d);
  bool Leads() const;

  const MaintenanceParts parts_;
  const MaintenanceOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  bool stopped_ = false;
  std::thread thread_;
  int64_t global_truncated_before_ = 0;  // the loop's thread only
};

}  // namespace sediment::maintenance

// BucketSnapshots: uploads Global snapshots to the bucket and runs the bucket's garbage
// collection against them (docs/DESIGN.md section 8, P4). Run by the maintenance leader.
//
// Contract of RunOnce (one caller thread at a time; the maintenance loop):
// - At most every `interval`: when Global's state changed since the last upload (offset or
//   generation), its encoded snapshot is put at BucketSnapshotKey(generation, offset); snapshots
//   beyond the newest `kept` are deleted; then a collector pass keeps every segment file the
//   uploaded snapshot lists. An unchanged state runs only the collector pass (objects age past
//   their grace meanwhile). A failed upload is retried at the next interval and shown in Status.
// - Status may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "bucket/bucket.h"
#include "common/clock.h"
#include "global/global.h"
#include "storage/bucket_collector.h"

namespace sediment::maintenance {

struct BucketSnapshotsOptions {
  std::chrono::milliseconds interval{60000};
  uint32_t kept = 3;
};

// The newest upload, for the status page.
struct BucketSnapshotStatus {
  int64_t offset = -1;  // global offset of the newest snapshot uploaded; -1: none yet
  uint32_t generation = 0;
  std::string key, error;   // its object key; the last upload's failure (empty after a success)
  int64_t uploaded_ms = 0;  // wall time of that upload
  uint64_t uploaded = 0;    // snapshots uploaded since start
};

class BucketSnapshots {
 public:
  // Not owned; must outlive this. `collector` may be null (no collection).
  BucketSnapshots(Clock* clock, Global* global, bucket::Bucket* bucket, BucketCollector* collector,
                  BucketSnapshotsOptions options);

  void RunOnce();
  BucketSnapshotStatus Status() const;

 private:
  void Collect(const std::set<std::string>& in_snapshot);

  Clock* const clock_;
  Global* const global_;
  bucket::Bucket* const bucket_;
  BucketCollector* const collector_;
  const BucketSnapshotsOptions options_;
  std::optional<int64_t> snapshot_at_us_;  // RunOnce's thread only: last upload attempt
  int64_t gc_at_us_ = 0;                   // RunOnce's thread only: last collector pass
  mutable std::mutex mu_;
  BucketSnapshotStatus status_;  // guarded by mu_
};

}  // namespace sediment::maintenance

#include "maintenance/bucket_snapshots.h"

#include <spdlog/spdlog.h>

namespace sediment::maintenance {

BucketSnapshots::BucketSnapshots(Clock* clock, Global* global, bucket::Bucket* bucket,
                                 BucketCollector* collector, BucketSnapshotsOptions options)
    : clock_(clock), global_(global), bucket_(bucket), collector_(collector), options_(options) {}

BucketSnapshotStatus BucketSnapshots::Status() const {
  std::lock_guard lock(mu_);
  return status_;
}

void BucketSnapshots::RunOnce() {
  const int64_t now_us = clock_->MonotonicMicros();
  const int64_t interval_us = options_.interval.count() * 1000;
  if (snapshot_at_us_ && now_us - *snapshot_at_us_ < interval_us) return;
  auto [offset, bytes] = global_->EncodedState();
  uint32_t generation = 0;
  std::set<std::string> needed;  // segment files the uploaded snapshot lists
  {
    auto snap = DecodeGlobalState(bytes);
    if (!snap.ok()) {
      spdlog::error("bucket: encoding a snapshot: {}", snap.status().ToString());
      return;
    }
    generation = snap->generation;
    for (const auto& [id, seg] : snap->segments) needed.insert(seg.file_name);
  }
  BucketSnapshotStatus last = Status();
  if (offset.value == last.offset && generation == last.generation) {
    // Unchanged: the newest bucket snapshot is this state. Objects may have aged past the grace
    // meanwhile: collect at the snapshot interval all the same.
    if (now_us - gc_at_us_ >= interval_us) Collect(needed);
    return;
  }
  const std::string key = BucketSnapshotKey(generation, offset);
  snapshot_at_us_ = now_us;  // a failure is retried at the next interval
  ::sediment::Status st = bucket_->Put(key, bytes);
  if (!st.ok()) {
    {
      std::lock_guard lock(mu_);
      status_.error = st.ToString();
    }
    spdlog::warn("bucket: uploading snapshot {}: {}", key, st.ToString());
    return;
  }
  {
    std::lock_guard lock(mu_);
    status_.offset = offset.value;
    status_.generation = generation;
    status_.error.clear();
    status_.key = key;
    status_.uploaded_ms = clock_->NowMillis();
    ++status_.uploaded;
  }
  // Old snapshots beyond the newest kept ones (keys sort by generation, then offset).
  auto snaps = bucket_->List(kBucketSnapshotPrefix);
  if (snaps.ok() && snaps->size() > options_.kept) {
    for (size_t i = 0; i + options_.kept < snaps->size(); ++i) {
      ::sediment::Status d = bucket_->Delete((*snaps)[i].key);
      if (!d.ok()) {
        spdlog::warn("bucket: deleting old snapshot {}: {}", (*snaps)[i].key, d.ToString());
      }
    }
  }
  Collect(needed);
}

void BucketSnapshots::Collect(const std::set<std::string>& in_snapshot) {
  // Segment objects neither the newest bucket snapshot nor the current state lists (merged away,
  // expired) are not needed by a recovery from that snapshot; storage/README.md ("Bucket garbage
  // collection") says when one is deleted. The collector logs its own failures.
  gc_at_us_ = clock_->MonotonicMicros();
  if (collector_ != nullptr) (void)collector_->CollectOnce(in_snapshot);
}

}  // namespace sediment::maintenance

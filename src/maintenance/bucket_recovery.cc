#include "maintenance/bucket_recovery.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <set>
#include <vector>

#include "common/clock.h"
#include "global/global.h"
#include "global/segment_record.h"
#include "segment/file_name.h"
#include "storage/store.h"

namespace sediment::maintenance {
namespace {

// The newest snapshot of the bucket that decodes, and its key; NotFound when none does.
Result<std::pair<GlobalState, std::string>> NewestUsableSnapshot(bucket::Bucket* bucket) {
  ASSIGN_OR_RETURN(std::vector<bucket::ObjectInfo> snaps, bucket->List(kBucketSnapshotPrefix));
  for (auto it = snaps.rbegin(); it != snaps.rend(); ++it) {
    auto data = bucket->Get(it->key);
    if (!data.ok()) return data.status().WithContext("recovery: reading snapshot " + it->key);
    auto state = DecodeGlobalState(*data);
    if (!state.ok()) {
      spdlog::error("recovery: snapshot {} is unusable: {}; trying an older one", it->key,
                    state.status().ToString());
      continue;
    }
    return std::make_pair(std::move(*state), it->key);
  }
  return Status::NotFound("recovery: no usable Global snapshot under " + bucket->Describe() + " " +
                          kBucketSnapshotPrefix);
}

// The recovered state: `base` plus the segment objects uploaded after it (read from their
// footers; unreadable ones are logged and ignored).
Result<GlobalState> RecoveredState(bucket::Bucket* bucket, const GlobalState& base,
                                   const std::string& base_key) {
  ASSIGN_OR_RETURN(std::vector<bucket::ObjectInfo> objects, bucket->List(kBucketSegmentPrefix));
  std::set<std::string> listed;
  for (const auto& [id, seg] : base.segments) listed.insert(seg.file_name);
  std::vector<BucketSegmentFile> files;
  std::vector<SegmentRecord> found;
  const size_t prefix_len = std::string(kBucketSegmentPrefix).size();
  for (const auto& obj : objects) {
    const std::string name = obj.key.substr(prefix_len);
    if (!IsValidSegmentFileName(name)) continue;
    files.push_back({name, obj.size});
    if (listed.count(name) != 0) continue;
    // Uploaded after the snapshot: its footer says what it holds.
    auto bytes = bucket->Get(obj.key);
    if (!bytes.ok()) return bytes.status().WithContext("recovery: reading " + obj.key);
    auto info = ReadSegmentInfo(name, *bytes);
    if (!info.ok()) {
      spdlog::error("recovery: {} is not a readable segment ({}); ignored", obj.key,
                    info.status().ToString());
      continue;
    }
    // Writer and epoch are not in the footer; a recovered segment has no holder anyway.
    SegmentRecord rec = SegmentRecordFor(*info, name, NodeId(0), Epoch(0));
    rec.generation = base.generation;
    found.push_back(std::move(rec));
  }
  return RecoverState(base, base_key, files, std::move(found));
}

void LogRecovery(const RecoveryReport& r, double secs) {
  spdlog::info(
      "recovery: generation {} from {}: kept {} segments ({} added after the snapshot), {} "
      "events, {} bytes; lost {} segments, {} events; took {:.2f} s",
      r.generation, r.snapshot_key, r.kept_segments + r.added_segments, r.added_segments,
      r.kept_events, r.kept_bytes, r.lost_segments, r.lost_events, secs);
  for (const LostSegment& l : r.lost) {
    spdlog::warn(
        "recovery: lost (never reached the bucket): {} partition {}, {} events, time {} .. {} "
        "(file {})",
        l.datasource, l.partition.value, l.event_count, l.min_ts, l.max_ts, l.file_name);
  }
}

}  // namespace

Result<bool> RecoverFromBucket(Env* env, CommitLog* global_log, bucket::Bucket* bucket,
                               const std::string& snapshot_dir) {
  ASSIGN_OR_RETURN(Offset end, global_log->EndOffset(PartitionId(0)));
  if (end.value > 0) {
    spdlog::info(
        "--recover-from-bucket: the global log already holds {} events (the recovery happened); "
        "starting normally",
        end.value);
    return false;
  }
  if (HasGlobalSnapshot(env, snapshot_dir)) {
    return Status::InvalidArgument("--recover-from-bucket needs an empty data dir, but " +
                                   snapshot_dir + " holds Global snapshots");
  }
  const auto t0 = SteadyNow();
  spdlog::info("recovery: reading {}", bucket->Describe());
  ASSIGN_OR_RETURN(auto newest, NewestUsableSnapshot(bucket));
  const auto& [base, base_key] = newest;
  spdlog::info(
      "recovery: newest snapshot {} (generation {}, through global offset {}, {} segments)",
      base_key, base.generation, base.applied_through.value, base.segments.size());
  ASSIGN_OR_RETURN(GlobalState recovered, RecoveredState(bucket, base, base_key));

  // Offset 0 of the new global log marks the recovery; the node whose marker lands there owns it,
  // every other node starts from its snapshot.
  auto appended =
      global_log->Append(PartitionId(0), EncodeGlobalEvent(BeginRecovery{recovered.generation}))
          .get();
  if (!appended.ok()) return appended.status().WithContext("recovery: writing the marker");
  if (appended->value != 0) {
    spdlog::info(
        "recovery: another node began the recovery first (this node's marker is at global "
        "offset {}); starting from its snapshot",
        appended->value);
    return false;
  }
  recovered.applied_through = *appended;
  auto installed = InstallGlobalSnapshot(env, snapshot_dir, EncodeGlobalState(recovered));
  if (!installed.ok()) return installed.status().WithContext("recovery: writing the snapshot");
  LogRecovery(recovered.recovery, std::chrono::duration<double>(SteadyNow() - t0).count());
  return true;
}

}  // namespace sediment::maintenance

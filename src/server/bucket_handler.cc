// Bucket storage wiring of a node (DESIGN section 8, P3/P4): opening the S3 bucket, disaster
// recovery from it before Global opens, the upload of Global snapshots and the collection of
// bucket objects no snapshot or state needs (by the maintenance leader), and the bucket's part of
// the status pages.
#include <spdlog/spdlog.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "bucket/s3_bucket.h"
#include "common/json_writer.h"
#include "global/segment_record.h"
#include "server/server_impl.h"

namespace sediment {
namespace {

using Steady = std::chrono::steady_clock;

}  // namespace

Status Server::Impl::OpenBucket() {
  if (config.bucket_endpoint.empty()) {
    if (config.recover_from_bucket) {
      return Status::InvalidArgument("--recover-from-bucket needs bucket storage (--bucket-*)");
    }
    if (config.cache_max_bytes > 0 || config.cache_max_percent > 0) {
      return Status::InvalidArgument(
          "--cache-max-bytes / --cache-max-percent need bucket storage (--bucket-endpoint): "
          "without a bucket every local copy is needed");
    }
    return Status::OK();
  }
  bucket::S3Options o;
  o.endpoint = config.bucket_endpoint;
  o.region = config.bucket_region;
  o.bucket = config.bucket_name;
  o.prefix = config.bucket_prefix;
  o.path_style = config.bucket_path_style;
  o.access_key = config.bucket_access_key;
  o.secret_key = config.bucket_secret_key;
  auto b = bucket::S3Bucket::Open(o);
  if (!b.ok()) return b.status().WithContext("bucket storage");
  if (config.bucket_create) {
    RETURN_IF_ERROR((*b)->CreateBucketIfMissing().WithContext("creating the bucket"));
  }
  bucket_location = (*b)->Describe();
  bucket = std::move(b).value();
  spdlog::info("bucket storage: {}", bucket_location);
  return Status::OK();
}

uint64_t Server::Impl::CacheBoundBytes() const {
  uint64_t bound = config.cache_max_bytes;
  if (config.cache_max_percent > 0) {
    struct statvfs fs {};
    if (::statvfs(config.data_dir.c_str(), &fs) == 0) {
      const double total = static_cast<double>(fs.f_blocks) * static_cast<double>(fs.f_frsize);
      const auto pct = static_cast<uint64_t>(total * config.cache_max_percent / 100.0);
      bound = bound == 0 ? pct : std::min(bound, pct);
    } else {
      spdlog::warn("--cache-max-percent: cannot read the size of {}'s file system",
                   config.data_dir);
    }
  }
  return bound;
}

Status Server::Impl::RecoverFromBucket(const std::string& snapshot_dir) {
  if (!config.recover_from_bucket) return Status::OK();
  ASSIGN_OR_RETURN(Offset end, global_log->EndOffset(PartitionId(0)));
  if (end.value > 0) {
    spdlog::info(
        "--recover-from-bucket: the global log already holds {} events (the recovery happened); "
        "starting normally",
        end.value);
    return Status::OK();
  }
  if (HasSnapshot(env, snapshot_dir)) {
    return Status::InvalidArgument("--recover-from-bucket needs an empty data dir, but " +
                                   snapshot_dir + " holds Global snapshots");
  }
  const auto t0 = Steady::now();
  spdlog::info("recovery: reading {}", bucket_location);
  ASSIGN_OR_RETURN(std::vector<bucket::ObjectInfo> snaps, bucket->List(kBucketSnapshotPrefix));
  GlobalState base;
  std::string base_key;
  for (auto it = snaps.rbegin(); it != snaps.rend() && base_key.empty(); ++it) {
    auto data = bucket->Get(it->key);
    if (!data.ok()) return data.status().WithContext("recovery: reading snapshot " + it->key);
    auto state = DecodeGlobalState(*data);
    if (!state.ok()) {
      spdlog::error("recovery: snapshot {} is unusable: {}; trying an older one", it->key,
                    state.status().ToString());
      continue;
    }
    base = std::move(*state);
    base_key = it->key;
  }
  if (base_key.empty()) {
    return Status::NotFound("recovery: no usable Global snapshot under " + bucket_location + " " +
                            kBucketSnapshotPrefix);
  }
  spdlog::info(
      "recovery: newest snapshot {} (generation {}, through global offset {}, {} segments)",
      base_key, base.generation, base.applied_through.value, base.segments.size());

  ASSIGN_OR_RETURN(std::vector<bucket::ObjectInfo> objects, bucket->List(kBucketSegmentPrefix));
  std::set<std::string> listed;
  for (const auto& [id, seg] : base.segments) listed.insert(seg.file_name);
  std::vector<BucketSegmentFile> files;
  std::vector<SegmentRecord> found;
  const size_t prefix_len = std::string(kBucketSegmentPrefix).size();
  for (const auto& obj : objects) {
    const std::string name = obj.key.substr(prefix_len);
    if (!ValidSegmentFileName(name)) continue;
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
  GlobalState recovered = RecoverState(base, base_key, files, std::move(found));

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
    return Status::OK();
  }
  recovered.applied_through = *appended;
  auto installed = InstallGlobalSnapshot(env, snapshot_dir, EncodeGlobalState(recovered));
  if (!installed.ok()) return installed.status().WithContext("recovery: writing the snapshot");
  const RecoveryReport& r = recovered.recovery;
  const double secs = std::chrono::duration<double>(Steady::now() - t0).count();
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
  recovered_here = true;
  return Status::OK();
}

void Server::Impl::BucketMaintenance() {
  if (!bucket) return;
  const int64_t now_us = clock->MonotonicMicros();
  if (now_us - bucket_snapshot_at_us < config.bucket_snapshot_interval_ms * 1000) return;
  auto [offset, bytes] = global->EncodedState();
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
  if (offset.value == bucket_snapshot_offset && generation == bucket_snapshot_generation) {
    // Unchanged: the newest bucket snapshot is this state. Objects may have aged past the grace
    // meanwhile: collect at the snapshot interval all the same.
    if (now_us - bucket_gc_at_us >= config.bucket_snapshot_interval_ms * 1000) {
      CollectBucketGarbage(needed);
    }
    return;
  }
  const std::string key = BucketSnapshotKey(generation, offset);
  Status st = bucket->Put(key, bytes);
  if (!st.ok()) {
    {
      std::lock_guard lock(bucket_mu);
      bucket_snapshot_error = st.ToString();
    }
    spdlog::warn("bucket: uploading snapshot {}: {}", key, st.ToString());
    bucket_snapshot_at_us = now_us;  // retried at the next interval
    return;
  }
  bucket_snapshot_at_us = now_us;
  {
    std::lock_guard lock(bucket_mu);
    bucket_snapshot_offset = offset.value;
    bucket_snapshot_generation = generation;
    bucket_snapshot_error.clear();
    bucket_snapshot_key = key;
    bucket_snapshot_ms = clock->NowMillis();
    ++bucket_snapshots_uploaded;
  }

  // Old snapshots beyond the newest kept ones.
  auto snaps = bucket->List(kBucketSnapshotPrefix);
  if (snaps.ok() && snaps->size() > config.bucket_snapshots_kept) {
    for (size_t i = 0; i + config.bucket_snapshots_kept < snaps->size(); ++i) {
      Status d = bucket->Delete((*snaps)[i].key);
      if (!d.ok())
        spdlog::warn("bucket: deleting old snapshot {}: {}", (*snaps)[i].key, d.ToString());
    }
  }
  CollectBucketGarbage(needed);
}

void Server::Impl::CollectBucketGarbage(const std::set<std::string>& in_snapshot) {
  // Segment objects neither the newest bucket snapshot nor the current state lists (merged away,
  // expired) are not needed by a recovery from that snapshot; storage/README.md ("Bucket garbage
  // collection") says when one is deleted. The collector logs its own failures.
  bucket_gc_at_us = clock->MonotonicMicros();
  if (bucket_collector) (void)bucket_collector->CollectOnce(in_snapshot);
}

void Server::Impl::WriteStorageBucketProgress(JsonWriter& w) const {
  if (uploader) {
    const Uploader::Progress u = uploader->progress();
    w.Key("uploader").BeginObject();
    w.Key("pending").Int(static_cast<int64_t>(u.mine_pending));
    w.Key("uploadedSegments").Int(static_cast<int64_t>(u.uploaded_segments));
    w.Key("uploadedBytes").Int(static_cast<int64_t>(u.uploaded_bytes));
    w.Key("failedUploads").Int(static_cast<int64_t>(u.failed_uploads));
    w.Key("corruptCopies").Int(static_cast<int64_t>(u.corrupt_copies));
    w.Key("inBackoff").Bool(u.in_backoff);
    w.Key("lastUploadMs").Int(u.last_upload_ms);
    w.Key("lastError").String(u.last_error);
    w.EndObject();
  }
  if (replicator) {
    const Replicator::Progress r = replicator->progress();
    w.Key("cache").BeginObject();
    w.Key("localBytes").Int(static_cast<int64_t>(r.local_bytes));
    w.Key("maxBytes").Int(static_cast<int64_t>(r.cache_max_bytes));
    w.Key("evictedSegments").Int(static_cast<int64_t>(r.evicted_segments));
    w.Key("evictedBytes").Int(static_cast<int64_t>(r.evicted_bytes));
    w.Key("fetches").Int(static_cast<int64_t>(r.bucket_fetches));
    w.Key("fetchedBytes").Int(static_cast<int64_t>(r.bucket_fetched_bytes));
    w.Key("failedFetches").Int(static_cast<int64_t>(r.failed_bucket_fetches));
    w.EndObject();
  }
}

void Server::Impl::WriteBucketStatus(JsonWriter& w) const {
  w.Key("bucket").BeginObject();
  w.Key("enabled").Bool(bucket != nullptr);
  uint64_t uploaded = 0, backlog = 0, backlog_bytes = 0, segments = 0;
  uint32_t generation = 0;
  std::string location;
  RecoveryReport recovery;
  BucketGcReport gc;
  global->Read([&](const GlobalState& st) {
    location = st.bucket;
    generation = st.generation;
    recovery = st.recovery;
    gc = st.bucket_gc;
    for (const auto& [id, seg] : st.segments) {
      ++segments;
      if (seg.uploaded) {
        ++uploaded;
      } else {
        ++backlog;
        backlog_bytes += seg.file_size;
      }
    }
  });
  w.Key("location").String(location);
  w.Key("generation").Int(generation);
  if (!location.empty()) {
    w.Key("segments").Int(static_cast<int64_t>(segments));
    w.Key("uploadedSegments").Int(static_cast<int64_t>(uploaded));
    w.Key("backlogSegments").Int(static_cast<int64_t>(backlog));
    w.Key("backlogBytes").Int(static_cast<int64_t>(backlog_bytes));
  }
  if (bucket) {
    {
      std::lock_guard lock(bucket_mu);
      w.Key("lastSnapshot").BeginObject();
      w.Key("key").String(bucket_snapshot_key);
      w.Key("generation").Int(bucket_snapshot_generation);
      w.Key("offset").Int(bucket_snapshot_offset);
      w.Key("atMs").Int(bucket_snapshot_ms);
      w.Key("uploaded").Int(static_cast<int64_t>(bucket_snapshots_uploaded));
      w.Key("lastError").String(bucket_snapshot_error);
      w.EndObject();
    }
    const BucketCollector::Progress p =
        bucket_collector ? bucket_collector->progress() : BucketCollector::Progress{};
    w.Key("objectsDeleted").Int(static_cast<int64_t>(p.deleted_objects));
    w.Key("gc").BeginObject();
    w.Key("graceMs").Int(config.bucket_gc_grace_ms);
    w.Key("passes").Int(static_cast<int64_t>(p.passes));
    w.Key("skippedBehind").Int(static_cast<int64_t>(p.skipped_behind));
    w.Key("rejectedRecords").Int(static_cast<int64_t>(p.rejected_records));
    w.Key("deletedObjects").Int(static_cast<int64_t>(p.deleted_objects));
    w.Key("deletedBytes").Int(static_cast<int64_t>(p.deleted_bytes));
    w.Key("keptYoung").Int(static_cast<int64_t>(p.last_young));
    w.Key("lastPassMs").Int(p.last_pass_ms);
    w.Key("lastError").String(p.last_error);
    w.Key("recorded").BeginObject();
    w.Key("records").Int(static_cast<int64_t>(gc.records));
    w.Key("objects").Int(static_cast<int64_t>(gc.objects));
    w.Key("bytes").Int(static_cast<int64_t>(gc.bytes));
    w.Key("lastNode").Int(gc.last_node.value);
    w.Key("lastMs").Int(gc.last_ms);
    w.Key("lastFiles").BeginArray();
    for (const std::string& f : gc.last_files) w.String(f);
    w.EndArray();
    w.EndObject();
    w.EndObject();
    WriteStorageBucketProgress(w);
  }
  w.EndObject();
  if (recovery.generation > 0) {
    w.Key("recovery").BeginObject();
    w.Key("generation").Int(recovery.generation);
    w.Key("snapshotKey").String(recovery.snapshot_key);
    w.Key("snapshotOffset").Int(recovery.snapshot_applied_through.value);
    w.Key("keptSegments").Int(static_cast<int64_t>(recovery.kept_segments));
    w.Key("addedSegments").Int(static_cast<int64_t>(recovery.added_segments));
    w.Key("keptEvents").Int(static_cast<int64_t>(recovery.kept_events));
    w.Key("keptBytes").Int(static_cast<int64_t>(recovery.kept_bytes));
    w.Key("lostSegments").Int(static_cast<int64_t>(recovery.lost_segments));
    w.Key("lostEvents").Int(static_cast<int64_t>(recovery.lost_events));
    w.Key("lostBytes").Int(static_cast<int64_t>(recovery.lost_bytes));
    w.Key("lost").BeginArray();
    for (const LostSegment& l : recovery.lost) {
      w.BeginObject().Key("datasource").String(l.datasource);
      w.Key("partition").Int(l.partition.value);
      w.Key("minTs").Int(l.min_ts).Key("maxTs").Int(l.max_ts);
      w.Key("events").Int(static_cast<int64_t>(l.event_count));
      w.Key("rawBytes").Int(static_cast<int64_t>(l.raw_bytes));
      w.Key("file").String(l.file_name).EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
}

}  // namespace sediment

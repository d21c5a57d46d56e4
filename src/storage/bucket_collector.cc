#include "storage/bucket_collector.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "bucket/bucket.h"

namespace sediment {

BucketCollector::BucketCollector(Clock* clock, Global* global, bucket::Bucket* bucket,
                                 BucketCollectorOptions options)
    : clock_(clock), global_(global), bucket_(bucket), options_(std::move(options)) {}

BucketCollector::Progress BucketCollector::progress() const {
  std::lock_guard lock(mu_);
  return progress_;
}

Result<BucketCollector::Pass> BucketCollector::CollectOnce(const std::set<std::string>& keep) {
  std::lock_guard pass_lock(pass_mu_);
  Result<Pass> r = CollectLocked(keep);
  std::lock_guard lock(mu_);
  if (r.ok()) {
    progress_.last_error.clear();
  } else {
    progress_.last_error = r.status().ToString();
    spdlog::warn("bucket gc: {}", progress_.last_error);
  }
  return r;
}

Result<BucketCollector::Pass> BucketCollector::CollectLocked(const std::set<std::string>& keep) {
  Pass pass;
  // 1. The listing. Every object in it was completely written before the listing ended.
  const std::string prefix = kBucketSegmentPrefix;
  Result<std::vector<bucket::ObjectInfo>> listed = bucket_->List(prefix);
  if (!listed.ok()) return listed.status().WithContext("listing " + prefix);
  const std::vector<bucket::ObjectInfo>& objects = *listed;
  // 2. A Global that reflects every event appended before the listing ended: the uploader of a
  // listed object applied the segment's registration before it put the object, so the
  // registration is below this end offset.
  Result<Offset> end = global_->LogEnd();
  if (!end.ok()) return end.status().WithContext("reading the global log's end");
  if (!global_->WaitApplied(Offset(end->value - 1), options_.catch_up_timeout)) {
    const Offset applied = global_->Applied();
    spdlog::warn(
        "bucket gc: this node's Global has applied through offset {} but the global log ends at "
        "{}; pass skipped, nothing deleted",
        applied.value, end->value);
    std::lock_guard lock(mu_);
    ++progress_.skipped_behind;
    return pass;
  }
  std::set<std::string> referenced;
  bool bucket_on = false;
  global_->Read([&](const GlobalState& s) {
    bucket_on = !s.bucket.empty();
    for (const auto& [id, seg] : s.segments) referenced.insert(seg.file_name);
  });
  if (!bucket_on) return pass;

  // 3. What may go: unreferenced and older than the grace.
  const int64_t now_ms = clock_->NowMillis();
  const int64_t grace_ms = options_.grace.count();
  std::vector<BucketSegmentFile> doomed;
  for (const bucket::ObjectInfo& obj : objects) {
    if (obj.key.size() <= prefix.size() || obj.key.compare(0, prefix.size(), prefix) != 0) {
      continue;  // the prefix itself, or not under it
    }
    ++pass.listed;
    std::string name = obj.key.substr(prefix.size());
    if (referenced.count(name) != 0 || keep.count(name) != 0) {
      ++pass.referenced;
      continue;
    }
    if (obj.last_modified_ms <= 0 || now_ms - obj.last_modified_ms < grace_ms) {
      ++pass.young;
      continue;
    }
    doomed.push_back({std::move(name), obj.size});
  }
  pass.ran = true;
  {
    std::lock_guard lock(mu_);
    ++progress_.passes;
    progress_.last_young = pass.young;
    progress_.last_pass_ms = now_ms;
  }

  // 4. Record, then delete, batch by batch. Global refuses a record naming a file some segment
  // references at the record's place in the log, so whatever this node's view was, an object a
  // segment needs is never deleted.
  const size_t batch = std::max<size_t>(1, options_.max_per_record);
  for (size_t i = 0; i < doomed.size(); i += batch) {
    BucketObjectsCollected record{options_.self, now_ms, {}};
    record.files.assign(
        doomed.begin() + static_cast<std::ptrdiff_t>(i),
        doomed.begin() + static_cast<std::ptrdiff_t>(std::min(doomed.size(), i + batch)));
    auto recorded = global_->Submit(record);
    if (!recorded.ok()) {
      if (recorded.status().code() == StatusCode::kRejected) {
        std::lock_guard lock(mu_);
        ++progress_.rejected_records;
      }
      return recorded.status().WithContext("recording " + std::to_string(record.files.size()) +
                                           " objects to delete (kept)");
    }
    for (const BucketSegmentFile& f : record.files) {
      // Recorded but not deleted (an error below): the next pass lists it and records it again.
      RETURN_IF_ERROR(bucket_->Delete(BucketSegmentKey(f.file_name))
                          .WithContext("deleting " + BucketSegmentKey(f.file_name)));
      ++pass.deleted;
      pass.deleted_bytes += f.size;
      pass.deleted_files.push_back(f.file_name);
      std::lock_guard lock(mu_);
      ++progress_.deleted_objects;
      progress_.deleted_bytes += f.size;
    }
  }
  if (pass.deleted > 0) {
    std::string names;
    for (size_t i = 0; i < pass.deleted_files.size() && i < 5; ++i) {
      names += (i > 0 ? ", " : "") + pass.deleted_files[i];
    }
    if (pass.deleted_files.size() > 5) names += ", ...";
    spdlog::info(
        "bucket gc: deleted {} segment objects ({} bytes) no segment references, older than {} "
        "ms ({}); kept {} referenced, {} younger",
        pass.deleted, pass.deleted_bytes, grace_ms, names, pass.referenced, pass.young);
  }
  return pass;
}

}  // namespace sediment

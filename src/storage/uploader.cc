#include "storage/uploader.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <vector>

#include "bucket/bucket.h"

namespace sediment {
namespace {

std::string Name(const SegmentRecord& s) {
  return "segment " + std::to_string(s.id.value) + " (" + s.file_name + ")";
}

}  // namespace

Uploader::Uploader(Env* env, Clock* clock, Global* global, SegmentStore* store,
                   bucket::Bucket* bucket, PeerView* peers, UploaderOptions options)
    : env_(env),
      clock_(clock),
      global_(global),
      store_(store),
      bucket_(bucket),
      peers_(peers),
      options_(std::move(options)),
      loop_("uploader",
            {.interval = options_.interval, .first_pass = BackgroundLoop::FirstPass::kAtStart},
            [this] {
              (void)RunOnce();  // failures are logged and kept in progress()
            }) {}

Uploader::~Uploader() { Stop(); }

void Uploader::Start() { (void)loop_.Start(); }

void Uploader::Stop() { loop_.Stop(); }

Uploader::Progress Uploader::progress() const {
  std::lock_guard lock(mu_);
  Progress p = progress_;
  p.in_backoff = backoff_.count() > 0 && clock_->MonotonicMicros() < backoff_until_us_;
  return p;
}

void Uploader::Warn(const std::string& msg) {
  std::lock_guard lock(mu_);
  progress_.last_error = msg;
  if (msg == last_warned_) return;
  last_warned_ = msg;
  spdlog::warn("storage: {}", msg);
}

void Uploader::OnBucketError(const Status& st) {
  {
    std::lock_guard lock(mu_);
    ++progress_.failed_uploads;
    backoff_ = backoff_.count() == 0 ? options_.initial_backoff
                                     : std::min(backoff_ * 2, options_.max_backoff);
    backoff_until_us_ = clock_->MonotonicMicros() +
                        std::chrono::duration_cast<std::chrono::microseconds>(backoff_).count();
  }
  Warn(st.ToString() + " (uploads back off, retrying)");
}

Status Uploader::RunOnce() {
  std::lock_guard pass(pass_mu_);
  if (stopping()) return Status::Aborted("uploader stopped");
  return RunOnceLocked();
}

Status Uploader::RunOnceLocked() {
  const NodeId self = options_.self;
  bool bucket_on = false;
  uint64_t backlog = 0, backlog_bytes = 0;
  std::vector<SegmentRecord> mine;  // this node uploads these, oldest id first
  std::set<std::string> listed_here;
  global_->Read([&](const GlobalState& s) {
    bucket_on = !s.bucket.empty();
    if (!bucket_on) return;
    std::map<NodeId, bool> present;  // asked once per node
    auto is_present = [&](NodeId n) {
      if (n == self) return true;
      auto it = present.find(n);
      if (it == present.end()) it = present.emplace(n, peers_->IsPresent(n, options_.grace)).first;
      return it->second;
    };
    for (const auto& [id, seg] : s.segments) {
      if (seg.replicas.count(self) != 0) listed_here.insert(seg.file_name);
      if (seg.uploaded) continue;
      ++backlog;
      backlog_bytes += seg.file_size;
      // replicas is ordered by id: the first present holder is the uploader.
      for (NodeId h : seg.replicas) {
        if (!is_present(h)) continue;
        if (h == self) mine.push_back(seg);
        break;
      }
    }
  });
  if (!bucket_on) {
    std::lock_guard lock(mu_);
    ++progress_.passes;
    progress_.backlog_segments = progress_.backlog_bytes = progress_.mine_pending = 0;
    return Status::OK();
  }
  // Only copies that are on disk here can be uploaded from here.
  std::erase_if(mine, [&](const SegmentRecord& seg) { return !store_->Has(seg.file_name); });
  bool waiting = false;
  {
    std::lock_guard lock(mu_);
    ++progress_.passes;
    progress_.backlog_segments = backlog;
    progress_.backlog_bytes = backlog_bytes;
    progress_.mine_pending = mine.size();
    // A copy withdrawn from this node (corrupt, then replaced) is judged afresh when it returns.
    std::erase_if(corrupt_, [&](const auto& e) { return listed_here.count(e.first) == 0; });
    waiting = backoff_.count() > 0 && clock_->MonotonicMicros() < backoff_until_us_;
  }
  if (waiting) return Status::OK();

  Status first;
  for (const SegmentRecord& seg : mine) {
    if (stopping()) return Status::Aborted("uploader stopped");
    bool bucket_error = false;
    Status st = UploadOne(seg, &bucket_error);
    if (st.code() == StatusCode::kAborted) return st;
    if (bucket_error) {
      OnBucketError(st);
      return st;  // the bucket is probably down: the next attempt comes after the backoff
    }
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

Status Uploader::UploadOne(const SegmentRecord& seg, bool* bucket_error) {
  {
    std::lock_guard lock(mu_);
    auto it = corrupt_.find(seg.file_name);
    if (it != corrupt_.end() && it->second == seg.content_hash) return Status::OK();
  }
  if (options_.limiter != nullptr && !options_.limiter->Acquire(seg.file_size)) {
    return Status::Aborted("uploader stopped");
  }
  if (stopping()) return Status::Aborted("uploader stopped");
  auto bytes = store_->Read(seg.file_name);
  if (!bytes.ok()) {
    if (bytes.status().code() == StatusCode::kNotFound) return Status::OK();  // deleted meanwhile
    const Status st = bytes.status().WithContext("reading " + Name(seg) + " for upload");
    Warn(st.ToString());
    return st;
  }
  // The bytes put are the bytes verified: a damaged local copy never reaches the bucket.
  Status verified = VerifySegmentBytes(seg, *bytes);
  if (!verified.ok()) {
    spdlog::error("storage: not uploading {}: the local copy at {} is corrupt: {}", Name(seg),
                  store_->PathOf(seg.file_name), verified.ToString());
    {
      std::lock_guard lock(mu_);
      ++progress_.corrupt_copies;
      progress_.last_error = "corrupt local copy of " + Name(seg) + ": " + verified.ToString();
      corrupt_[seg.file_name] = seg.content_hash;
    }
    if (options_.on_corrupt) options_.on_corrupt(seg.id, verified);
    return Status::OK();  // not a failure of the upload path; another copy takes over
  }
  Status put = bucket_->Put(BucketSegmentKey(seg.file_name), *bytes);
  if (!put.ok()) {
    *bucket_error = true;
    return put.WithContext("uploading " + Name(seg) + " to the bucket");
  }
  auto recorded = global_->Submit(SegmentUploaded{seg.id});
  if (!recorded.ok() && recorded.status().code() != StatusCode::kRejected) {
    // The bytes are in the bucket; the next pass puts them again and retries the record.
    const Status st = recorded.status().WithContext("recording the upload of " + Name(seg));
    {
      std::lock_guard lock(mu_);
      ++progress_.failed_uploads;
    }
    Warn(st.ToString());
    return st;
  }
  // Rejected: another node recorded it first, or the segment left Global; either way done.
  if (recorded.ok()) {
    spdlog::info("storage: uploaded {} ({} bytes) to the bucket", Name(seg), seg.file_size);
  } else {
    spdlog::debug("storage: upload of {} not recorded: {}", Name(seg),
                  recorded.status().ToString());
  }
  std::lock_guard lock(mu_);
  if (!last_warned_.empty()) spdlog::info("storage: uploaded to the bucket again after failures");
  last_warned_.clear();
  progress_.last_error.clear();
  backoff_ = std::chrono::milliseconds{0};
  backoff_until_us_ = 0;
  ++progress_.uploaded_segments;
  progress_.uploaded_bytes += seg.file_size;
  progress_.last_upload_ms = clock_->NowMillis();
  if (progress_.backlog_segments > 0) --progress_.backlog_segments;
  progress_.backlog_bytes -= std::min(progress_.backlog_bytes, seg.file_size);
  if (progress_.mine_pending > 0) --progress_.mine_pending;
  return Status::OK();
}

}  // namespace sediment

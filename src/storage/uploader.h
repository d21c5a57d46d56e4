// Uploader: copies this node's share of the segments not yet in the bucket to the bucket and
// records them in Global (SegmentUploaded), when bucket storage is on (DESIGN section 8). Each
// segment is uploaded by one node: the lowest-id present holder. Contract: storage/README.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "common/background_loop.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/status.h"
#include "common/types.h"
#include "global/global.h"
#include "storage/rate_limiter.h"
#include "storage/store.h"

namespace sediment {

namespace bucket {
class Bucket;
}  // namespace bucket

struct UploaderOptions {
  // This node (must be the PeerView's Self()).
  NodeId self;
  // Time between two RunOnce passes of the background thread.
  std::chrono::milliseconds interval{1000};
  // After a bucket error no upload is attempted for initial_backoff; each further consecutive
  // error doubles the wait, up to max_backoff. A successful upload resets it.
  std::chrono::milliseconds initial_backoff{1000};
  std::chrono::milliseconds max_backoff{30'000};
  // Holders silent for less than this still count as present (PeerView::IsPresent); use the
  // Replicator's grace.
  std::chrono::milliseconds grace{30'000};
  // Optional shared throttle (e.g. with the Replicator's budget): each upload acquires the file
  // size before reading it. Borrowed; must outlive the Uploader. Null = unthrottled.
  RateLimiter* limiter = nullptr;
  // Called (on the pass's thread) when this node's copy of a segment is found corrupt while
  // preparing its upload; the copy is not uploaded. The server wires it to
  // Replicator::ReportCorrupt, which withdraws and deletes the copy so that another holder (or a
  // fresh copy) takes over. Unset: the error is logged and counted and the copy is skipped until
  // it is no longer listed on this node.
  std::function<void(SegmentId, const Status&)> on_corrupt;
};

class Uploader {
 public:
  // All pointers are borrowed and must outlive the Uploader. `bucket` is the configured bucket
  // client (keys relative to its prefix).
  Uploader(Env* env, Clock* clock, Global* global, SegmentStore* store, bucket::Bucket* bucket,
           PeerView* peers, UploaderOptions options);
  ~Uploader();  // Stop()

  Uploader(const Uploader&) = delete;
  Uploader& operator=(const Uploader&) = delete;

  // Starts the background thread: RunOnce every interval.
  void Start();
  // Stops and joins the thread; a pass in progress ends after its current upload. Idempotent and
  // final: Start does nothing and RunOnce returns Aborted afterwards.
  void Stop();

  // One upload pass (see README). Passes never overlap (a call waits for the one in progress).
  // OK when nothing failed (including: bucket storage off, nothing to do, waiting out a backoff);
  // otherwise the failure that ended the pass (a bucket error) or the first other failure.
  Status RunOnce();

  struct Progress {
    uint64_t backlog_segments = 0;  // cluster-wide, not uploaded (last pass, minus its uploads)
    uint64_t backlog_bytes = 0;
    uint64_t mine_pending = 0;       // of the backlog: this node is the uploader and holds it
    uint64_t uploaded_segments = 0;  // put into the bucket by this node and recorded, since start
    uint64_t uploaded_bytes = 0;
    uint64_t failed_uploads = 0;  // bucket errors and failed recordings
    uint64_t corrupt_copies = 0;  // local copies found corrupt, not uploaded
    uint64_t passes = 0;
    std::string last_error;      // most recent failure; empty after a successful upload
    int64_t last_upload_ms = 0;  // wall clock of the last successful upload, 0 = none yet
    bool in_backoff = false;     // waiting after a bucket error
  };
  Progress progress() const;

 private:
  bool stopping() const { return loop_.stopping(); }
  void Loop();
  Status RunOnceLocked();
  // Reads, verifies, puts and records one segment. *bucket_error is set when the bucket failed.
  Status UploadOne(const SegmentRecord& seg, bool* bucket_error);
  void OnBucketError(const Status& st);
  void Warn(const std::string& msg);

  Env* env_;
  Clock* clock_;
  Global* global_;
  SegmentStore* store_;
  bucket::Bucket* bucket_;
  PeerView* peers_;
  const UploaderOptions options_;

  std::mutex pass_mu_;  // one pass at a time

  mutable std::mutex mu_;  // guards everything below
  Progress progress_;
  int64_t backoff_until_us_ = 0;          // monotonic; no upload attempt before
  std::chrono::milliseconds backoff_{0};  // the current backoff step (0 = none)
  std::string last_warned_;               // last warning logged (repeats are not logged)
  // Local copies found corrupt (file name -> content hash), skipped while listed here.
  std::map<std::string, uint64_t> corrupt_;

  BackgroundLoop loop_;  // RunOnce, then interval of waiting, and so on; last: stopped first
};

}  // namespace sediment

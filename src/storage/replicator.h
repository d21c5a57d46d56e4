// Replicator: keeps this node's segment copies where placement wants them (DESIGN section 8).
// Pulls the copies this node should hold from live holders, announces them in Global, drops extra
// copies (never below R), forgets the copies of nodes gone past the grace period, deletes local
// files that left Global after a delay (never while pinned), and scrubs local copies for
// corruption. With bucket storage on (Global's bucket set) an uploaded segment's durable copy is
// the bucket: local copies of it are a cache, evicted least recently used first under a disk-usage
// bound and fetched back on demand (EnsureLocal). Contract: storage/README.md.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

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

struct ReplicatorOptions {
  // Time between two RunOnce passes of the background thread.
  std::chrono::milliseconds interval{1000};
  // A node silent this long is gone: its copies are re-created elsewhere, then forgotten.
  std::chrono::milliseconds grace{30'000};
  // Bytes per second for pulls and scrub/verification reads together; 0 = unlimited.
  uint64_t max_bytes_per_second = 64ull << 20;
  // Time between two ScrubOnce passes of the background thread (the first comes this long after
  // Start); 0 = never.
  std::chrono::milliseconds scrub_every{10 * 60'000};
  // A local file that left Global (or whose copy this node dropped) is deleted this long after it
  // was first seen unlisted, and never while pinned.
  std::chrono::milliseconds deletion_delay{30'000};
  // How throttled reads wait; returns false when cut short. Null: a real sleep that Stop() cuts
  // short. Tests pass a hook that advances a ManualClock.
  RateLimiter::SleepFn sleep;
  // The bucket client (borrowed, must outlive the Replicator); used by EnsureLocal to fetch
  // uploaded segments back. Null: no bucket fetches (EnsureLocal returns Unavailable for a
  // segment it would have to fetch) and no eviction.
  bucket::Bucket* bucket = nullptr;
  // Bucket storage only: bound on the total size of the local *.seg files; RunOnce evicts
  // least recently used copies of uploaded, committed segments above it. 0 = no bound.
  uint64_t cache_max_bytes = 0;
};

class Replicator {
 public:
  // All pointers are borrowed and must outlive the Replicator. `peers->Self()` is this node.
  Replicator(Env* env, Clock* clock, Global* global, SegmentStore* store, PeerView* peers,
             SegmentFetcher* fetcher, ReplicatorOptions options = {});
  ~Replicator();  // Stop()

  Replicator(const Replicator&) = delete;
  Replicator& operator=(const Replicator&) = delete;

  // Starts the background thread: RunOnce every interval, ScrubOnce every scrub_every.
  void Start();
  // Stops and joins the thread; a pass in progress ends after its current file (throttle waits
  // are cut short). Idempotent and final: Start, RunOnce and ScrubOnce do nothing afterwards
  // (the passes return Aborted).
  void Stop();

  // One replication pass (see README). Passes (RunOnce, ScrubOnce) never overlap: a call waits for
  // the one in progress. Returns the first failure met (the pass still tries every segment);
  // Rejected submissions (another node was first) and segments waiting for a live holder are not
  // failures. Aborted once stopped.
  Status RunOnce();
  // Verifies every local copy this node is listed for (throttled); corrupt ones are removed from
  // Global and deleted (they are pulled again by a later RunOnce when still desired here).
  Status ScrubOnce();
  // A reader found this node's copy of `segment` corrupt (`why`): removes the node from the
  // segment's replicas and deletes the file (when its pins are released). Thread-safe; waits at
  // most for an operation in progress on the same file. Unknown or unlisted segments are ignored.
  void ReportCorrupt(SegmentId segment, const Status& why);

  struct FetchOutcome {
    bool fetched = false;  // downloaded from the bucket by this call
    uint64_t bytes = 0;    // bytes downloaded (0 when not fetched)
  };
  // Makes sure this node has a verified local copy of `segment` (called by query threads before
  // reading; pin the file first so that an eviction cannot delete it under the reader). Already
  // local and listed here: OK at once. An uploaded segment that is not local (or whose local copy
  // is unlisted and fails verification) is downloaded from the bucket, verified, installed and
  // announced (AddSegmentReplica); a download that fails verification is retried once, then
  // Corruption. Not uploaded and not local: NotFound (as for a segment not in Global). Bucket
  // errors are returned as they are (Unavailable, ...). Thread-safe; concurrent calls for one
  // file download it once (the others wait, then find it local).
  Result<FetchOutcome> EnsureLocal(const SegmentRecord& segment);

  struct Progress {
    uint64_t pending_segments = 0;  // copies this node should pull now (as of the last pass)
    uint64_t pending_bytes = 0;
    uint64_t copied_segments = 0;  // pulled, verified and announced since start
    uint64_t copied_bytes = 0;
    uint64_t reused_segments = 0;  // found already on disk, verified and announced
    uint64_t failed_pulls = 0;     // fetch / install attempts that failed
    uint64_t corrupt_copies = 0;   // local copies found corrupt (scrub or ReportCorrupt)
    uint64_t missing_copies = 0;   // listed here but the file was gone: replica withdrawn
    uint64_t extra_copies_dropped = 0;
    uint64_t dead_replicas_forgotten = 0;
    uint64_t files_deleted = 0;  // local files deleted after leaving Global
    uint64_t passes = 0;
    uint64_t scrubs = 0;
    std::string last_error;  // most recent failure, empty if none yet
    uint64_t max_bytes_per_second = 0;
    // Bucket storage.
    bool bucket_mode = false;     // Global's bucket was set at the last pass
    uint64_t bucket_fetches = 0;  // EnsureLocal downloads installed and announced
    uint64_t bucket_fetched_bytes = 0;
    uint64_t failed_bucket_fetches = 0;  // downloads that failed or were corrupt (after retry)
    uint64_t evicted_segments = 0;       // local copies evicted for the cache bound
    uint64_t evicted_bytes = 0;
    uint64_t local_bytes = 0;  // total size of the local *.seg files at the end of the last pass
    uint64_t cache_max_bytes = 0;
  };
  Progress progress() const;

 private:
  struct Plan;
  class FileLock;

  bool stopping() const { return loop_.stopping(); }
  bool Sleep(std::chrono::microseconds d);
  // The loop's pass: RunOnce, then ScrubOnce when scrub_every passed since the last one.
  void LoopPass();
  void Loop();
  Status RunOnceLocked();
  Status ScrubOnceLocked();

  Plan MakePlan();
  Status Pull(const SegmentRecord& seg, const std::vector<NodeId>& sources);
  Status Announce(const SegmentRecord& seg, bool fetched);
  Status DropExtra(const SegmentRecord& seg, uint32_t r);
  Status ForgetDead(const SegmentRecord& seg, NodeId dead, uint32_t min_remaining);
  Status WithdrawMissing(const SegmentRecord& seg);
  // Removes self from `seg` (min_remaining 0) and deletes the local file; counts a corrupt copy.
  void HandleCorrupt(const SegmentRecord& seg, const Status& why);
  Status DeleteUnlisted();
  // Measures the local files (local_bytes) and, in bucket mode with a bound, evicts.
  Status Evict(const Plan& plan);
  // Announces a copy EnsureLocal made or revived (FileLock held). Never fails the caller: the
  // file is usable either way; an unknown outcome is retried by the next EnsureLocal.
  void AnnounceCached(const SegmentRecord& seg, bool fetched);
  // Whether a local file no segment lists here can never be registered any more (its events are
  // at or below its datasource's flushed_through), so it is garbage.
  bool IsSettled(const std::string& file);
  // File names of the segments that list self now.
  std::set<std::string> ListedHere();

  // Logs `msg` at warn unless it is what was last logged for `key` (and that was repeated by
  // every pass since); records it as last_error.
  void Warn(const std::string& key, const std::string& msg);

  Env* env_;
  Clock* clock_;
  Global* global_;
  SegmentStore* store_;
  PeerView* peers_;
  SegmentFetcher* fetcher_;
  const ReplicatorOptions options_;
  const NodeId self_;
  RateLimiter limiter_;

  std::mutex pass_mu_;  // one pass at a time

  // Files with an operation in progress (pull, delete, verify); see FileLock.
  std::mutex busy_mu_;
  std::condition_variable busy_cv_;
  std::set<std::string> busy_;

  mutable std::mutex mu_;  // guards everything below
  Progress progress_;
  // Files seen listed with self during this process's lifetime, still on disk.
  std::set<std::string> seen_listed_;
  // Files of seen_listed_ that are no longer listed with self -> monotonic us first seen so.
  std::map<std::string, int64_t> unlisted_since_;
  // key -> (last warning logged, number of the pass that last repeated it)
  std::map<std::string, std::pair<std::string, uint64_t>> warned_;

  std::optional<int64_t> last_scrub_us_;  // loop thread only: monotonic time of the last scrub
  BackgroundLoop loop_;  // LoopPass, then interval of waiting, and so on; last: stopped first
};

}  // namespace sediment

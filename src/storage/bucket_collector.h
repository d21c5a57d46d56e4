// BucketCollector: deletes segment objects from the bucket that no segment of Global references
// any more (merged away, expired, orphans of interrupted uploads), without ever deleting one that a
// segment registered anywhere in the cluster still needs (DESIGN section 8). Contract:
// storage/README.md ("Bucket garbage collection").
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/types.h"
#include "global/global.h"

namespace sediment {

namespace bucket {
class Bucket;
}  // namespace bucket

struct BucketCollectorOptions {
  // This node (recorded in BucketObjectsCollected).
  NodeId self;
  // Objects whose last-modified time is less than this old (by the clock's wall time), or
  // unknown, are never deleted.
  std::chrono::milliseconds grace{std::chrono::hours(1)};
  // How long a pass waits for this node's Global to apply the global log's end (read after the
  // listing); the pass is skipped when it has not by then.
  std::chrono::milliseconds catch_up_timeout{std::chrono::seconds(5)};
  // At most this many objects per BucketObjectsCollected event (bounds the event's size); a pass
  // records and deletes in batches of this size.
  size_t max_per_record = 1000;
};

class BucketCollector {
 public:
  // All pointers are borrowed and must outlive the collector. `bucket` is the configured bucket
  // client (keys relative to its prefix).
  BucketCollector(Clock* clock, Global* global, bucket::Bucket* bucket,
                  BucketCollectorOptions options);

  BucketCollector(const BucketCollector&) = delete;
  BucketCollector& operator=(const BucketCollector&) = delete;

  struct Pass {
    // False: skipped because Global had not applied the log's end within catch_up_timeout (or
    // bucket storage is off in Global); nothing was recorded or deleted.
    bool ran = false;
    uint64_t listed = 0;      // segment objects listed
    uint64_t referenced = 0;  // kept: the file of a segment in Global, or in `keep`
    uint64_t young = 0;       // kept: unreferenced but younger than the grace (or time unknown)
    uint64_t deleted = 0;     // recorded in Global and deleted
    uint64_t deleted_bytes = 0;
    std::vector<std::string> deleted_files;  // file names (keys without kBucketSegmentPrefix)
  };

  // One pass (README): list the bucket's segment objects; read the global log's end and wait until
  // this node's Global applied it; keep every object that is the file of a segment in Global or
  // named in `keep` (e.g. the files the newest bucket snapshot lists) or younger than the grace;
  // record the others in Global (BucketObjectsCollected, in batches) and delete each batch once its
  // record is accepted. Passes never overlap (a call waits for the one in progress).
  // OK with what the pass did (also when skipped); the error that ended it otherwise: the
  // bucket's (listing, deletion), Global's (log end, submission), or Rejected when Global refused
  // a record (a listed object became referenced; nothing of that batch is deleted).
  Result<Pass> CollectOnce(const std::set<std::string>& keep = {});

  struct Progress {
    uint64_t passes = 0;            // CollectOnce calls that ran to the end
    uint64_t skipped_behind = 0;    // passes skipped: Global behind the log's end
    uint64_t rejected_records = 0;  // records Global refused (objects kept)
    uint64_t deleted_objects = 0;   // since start
    uint64_t deleted_bytes = 0;
    uint64_t last_young = 0;   // objects the last pass kept for the grace only
    int64_t last_pass_ms = 0;  // wall clock of the last pass that ran, 0 = none
    std::string last_error;    // of the last pass; empty when it succeeded
  };
  Progress progress() const;
  const BucketCollectorOptions& options() const { return options_; }

 private:
  Result<Pass> CollectLocked(const std::set<std::string>& keep);

  Clock* const clock_;
  Global* const global_;
  bucket::Bucket* const bucket_;
  const BucketCollectorOptions options_;

  std::mutex pass_mu_;     // one pass at a time
  mutable std::mutex mu_;  // guards progress_
  Progress progress_;
};

}  // namespace sediment

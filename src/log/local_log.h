// LocalLog: the embedded commit log for a single node (DESIGN section 4, `local`).
// Layout, record format and recovery rules are specified in log/FORMAT.md.
#pragma once

#include <memory>
#include <string>

#include "common/clock.h"
#include "common/env.h"
#include "log/commit_log.h"

namespace sediment {

struct LocalLogOptions {
  int32_t partitions = 8;
  // A partition's active file is rolled once it reaches this size.
  uint64_t file_roll_bytes = 64ull << 20;
  // ... or once its first record is this old (0 = never by age), even when no append comes: a
  // sealed file is deleted as soon as every record in it is below the start offset
  // (DeleteBefore), so an idle partition gives its digested records' space back.
  std::chrono::milliseconds file_roll_age{10000};
  // Group commit: an append waits at most this long for others to share its fsync.
  std::chrono::microseconds max_commit_delay{0};
  // Threads that write and fsync; partition p is served by thread p % writer_threads.
  // 0 = min(partitions, 4).
  int32_t writer_threads = 0;
};

// Opens (creating if needed) the log in `dir`. Repairs a torn tail of each partition (drops the
// incomplete or checksum-failing records at the end, logging what it dropped). The partition count
// is fixed at creation; opening with a different count is InvalidArgument. Destroying the returned
// log stops its writer threads: appends not yet being written fail with Unavailable.
Result<std::unique_ptr<CommitLog>> OpenLocalLog(Env* env, const std::string& dir,
                                                const LocalLogOptions& options);

}  // namespace sediment

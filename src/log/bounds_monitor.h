// BoundsMonitor: the start and end offsets of every partition of a commit log, read by a thread
// of its own (CommitLog::AllBounds: all partitions at once), for status pages. A remote log's
// offset queries can block far beyond their timeout while its brokers are down, and a status page
// must answer all the same.
//
// Contract: Fresh asks for a new reading and waits for it at most `wait`; after that it answers
// the last reading and its age. The thread also reads every `interval` without being asked.
// Thread-safe. The log is borrowed and must outlive the monitor; the destructor stops the thread
// (waiting for an offset query in flight).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "log/commit_log.h"

namespace sediment {

struct PartitionBounds {
  int64_t start = -1, end = -1;  // -1: unknown (the query failed)
};

class BoundsMonitor {
 public:
  BoundsMonitor(CommitLog* log, Clock* clock,
                std::chrono::milliseconds interval = std::chrono::seconds(5));
  ~BoundsMonitor();
  BoundsMonitor(const BoundsMonitor&) = delete;
  BoundsMonitor& operator=(const BoundsMonitor&) = delete;

  // One entry per partition (empty before the first reading). `*age_ms`: how old the reading is,
  // -1 when there is none.
  std::vector<PartitionBounds> Fresh(int64_t* age_ms,
                                     std::chrono::milliseconds wait = std::chrono::seconds(2));

 private:
  void Loop();
  bool Stopping();

  CommitLog* const log_;
  Clock* const clock_;
  const std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<PartitionBounds> bounds_;  // guarded by mu_
  int64_t read_at_us_ = 0;               // guarded by mu_: monotonic time of the last reading
  uint64_t done_ = 0;                    // guarded by mu_: readings completed
  uint64_t wanted_ = 0;                  // guarded by mu_: readings asked for
  bool stop_ = false;                    // guarded by mu_
  std::thread thread_;
};

}  // namespace sediment

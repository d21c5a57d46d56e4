// A token bucket over bytes: bounds the bytes a node reads and copies for replication and scrubbing
// so that ingest and queries keep their share of disk and network during a large repair.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>

#include "common/clock.h"

namespace sediment {

class RateLimiter {
 public:
  // Waits `d`; false when the wait was cut short (the caller is stopping).
  using SleepFn = std::function<bool(std::chrono::microseconds d)>;

  // bytes_per_second == 0: unlimited. The bucket holds at most one second of budget (the burst)
  // and starts full. Time comes from clock->MonotonicMicros(); `sleep` does the waiting (tests
  // pass one that advances a ManualClock). `clock` is borrowed.
  RateLimiter(Clock* clock, uint64_t bytes_per_second, SleepFn sleep);

  // Takes n bytes of budget; when that leaves the bucket in debt, sleeps until the debt is repaid.
  // So by any time t after construction at most burst + rate * t bytes have been acquired and
  // returned from Acquire. False when a sleep was cut short. Thread-safe (the sleep happens
  // outside the lock; concurrent callers each wait for their own debt).
  bool Acquire(uint64_t n);

  uint64_t bytes_per_second() const { return rate_; }

 private:
  Clock* clock_;
  const uint64_t rate_;
  SleepFn sleep_;
  std::mutex mu_;
  double tokens_;    // bytes; negative = debt
  int64_t last_us_;  // monotonic time tokens_ was brought up to date
};

}  // namespace sediment

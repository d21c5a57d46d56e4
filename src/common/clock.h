// Clock: wall time and monotonic time behind an interface so tests can control both.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace sediment {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch, UTC.
  virtual int64_t NowMillis() = 0;
  // Monotonic microseconds (arbitrary origin); for ages, timeouts and rates.
  virtual int64_t MonotonicMicros() = 0;
  static Clock* Real();
};

// A clock tests move by hand. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t now_ms = 1'700'000'000'000) : now_ms_(now_ms), mono_us_(0) {}
  int64_t NowMillis() override { return now_ms_.load(); }
  int64_t MonotonicMicros() override { return mono_us_.load(); }
  void AdvanceMillis(int64_t ms) {
    now_ms_ += ms;
    mono_us_ += ms * 1000;
  }

 private:
  std::atomic<int64_t> now_ms_;
  std::atomic<int64_t> mono_us_;
};

// The real monotonic clock (the one Clock::Real()->MonotonicMicros() reads) as a std::chrono time
// point, for the deadlines of waits that block in real time (condition variables, librdkafka
// polls, sockets, background loops): an injected ManualClock would never end them. Ages, rates and
// timestamps that tests control are read from an injected Clock instead. Thread-safe.
std::chrono::steady_clock::time_point SteadyNow();

// CPU time the calling thread has used (user + system), in microseconds since it started; 0 where
// the platform cannot tell. A measurement for statistics (e.g. what merges cost), never for
// deciding anything: it is not behind Clock. Thread-safe.
int64_t ThreadCpuMicros();

}  // namespace sediment

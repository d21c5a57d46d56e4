#include "common/clock.h"

#include <time.h>

#include <chrono>

namespace sediment {
namespace {
class RealClock final : public Clock {
 public:
  int64_t NowMillis() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  int64_t MonotonicMicros() override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};
}  // namespace

std::chrono::steady_clock::time_point SteadyNow() { return std::chrono::steady_clock::now(); }

int64_t ThreadCpuMicros() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

Clock* Clock::Real() {
  static RealClock clock;
  return &clock;
}

}  // namespace sediment

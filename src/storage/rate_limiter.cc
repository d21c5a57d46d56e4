#include "storage/rate_limiter.h"

#include <algorithm>
#include <cmath>

namespace sediment {

RateLimiter::RateLimiter(Clock* clock, uint64_t bytes_per_second, SleepFn sleep)
    : clock_(clock),
      rate_(bytes_per_second),
      sleep_(std::move(sleep)),
      tokens_(static_cast<double>(bytes_per_second)),
      last_us_(clock->MonotonicMicros()) {}

bool RateLimiter::Acquire(uint64_t n) {
  if (rate_ == 0 || n == 0) return true;
  int64_t wait_us = 0;
  {
    std::lock_guard lock(mu_);
    const int64_t now = clock_->MonotonicMicros();
    const double burst = static_cast<double>(rate_);
    if (now > last_us_) {
      tokens_ = std::min(burst, tokens_ + static_cast<double>(now - last_us_) * burst / 1e6);
      last_us_ = now;
    }
    tokens_ -= static_cast<double>(n);
    if (tokens_ < 0) wait_us = static_cast<int64_t>(std::ceil(-tokens_ * 1e6 / burst));
  }
  if (wait_us <= 0) return true;
  return sleep_(std::chrono::microseconds(wait_us));
}

}  // namespace sediment

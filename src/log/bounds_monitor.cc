#include "log/bounds_monitor.h"

#include <algorithm>

namespace sediment {

BoundsMonitor::BoundsMonitor(CommitLog* log, Clock* clock, std::chrono::milliseconds interval)
    : log_(log), clock_(clock), interval_(interval) {
  thread_ = std::thread([this] { Loop(); });
}

BoundsMonitor::~BoundsMonitor() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool BoundsMonitor::Stopping() {
  std::lock_guard lock(mu_);
  return stop_;
}

void BoundsMonitor::Loop() {
  while (true) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, interval_, [this] { return stop_ || wanted_ > done_; });
      if (stop_) return;
    }
    // Every partition is asked, all at once (CommitLog::AllBounds): a partition whose leader is
    // moving fails alone (unknown, -1), and while the brokers are known to be down the log fails
    // fast.
    std::vector<PartitionBounds> fresh(static_cast<size_t>(log_->partition_count()));
    std::vector<Result<OffsetBounds>> all = log_->AllBounds();
    for (size_t i = 0; i < fresh.size() && i < all.size(); ++i) {
      if (all[i].ok()) fresh[i] = PartitionBounds{all[i]->start.value, all[i]->end.value};
    }
    if (Stopping()) return;
    {
      std::lock_guard lock(mu_);
      bounds_ = std::move(fresh);
      read_at_us_ = clock_->MonotonicMicros();
      ++done_;
    }
    cv_.notify_all();
  }
}

std::vector<PartitionBounds> BoundsMonitor::Fresh(int64_t* age_ms, std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  const uint64_t target = done_ + 1;
  wanted_ = std::max(wanted_, target);
  cv_.notify_all();
  cv_.wait_for(lock, wait, [&] { return done_ >= target; });
  *age_ms = done_ == 0 ? -1 : (clock_->MonotonicMicros() - read_at_us_) / 1000;
  return bounds_;
}

}  // namespace sediment

#include "log/bounds_monitor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>

namespace sediment {
namespace {

using namespace std::chrono_literals;

// Two partitions with fixed bounds; EndOffset blocks while `frozen` (a broker that went away).
class StubLog final : public CommitLog {
 public:
  int32_t partition_count() const override { return 2; }
  std::future<Result<Offset>> Append(PartitionId, std::string) override {
    std::promise<Result<Offset>> p;
    p.set_value(Status::Unavailable("stub"));
    return p.get_future();
  }
  Result<std::vector<LogRecord>> Read(PartitionId, Offset, size_t,
                                      std::chrono::milliseconds) override {
    return std::vector<LogRecord>{};
  }
  Status DeleteBefore(PartitionId, Offset) override { return Status::OK(); }
  Result<Offset> StartOffset(PartitionId p) override { return Offset(p.value * 10); }
  Result<Offset> EndOffset(PartitionId p) override {
    while (frozen.load()) std::this_thread::sleep_for(5ms);
    if (p.value == 1 && fail_partition_1) return Status::Unavailable("leader moving");
    return Offset(p.value * 10 + end.load());
  }
  std::string Health() override { return "ok"; }

  std::atomic<bool> frozen{false};
  std::atomic<int64_t> end{5};
  bool fail_partition_1 = false;
};

TEST(BoundsMonitorTest, AnswersAFreshReadingOfEveryPartition) {
  StubLog log;
  log.fail_partition_1 = true;
  BoundsMonitor monitor(&log, Clock::Real(), 1h);
  int64_t age = -2;
  auto b = monitor.Fresh(&age);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].start, 0);
  EXPECT_EQ(b[0].end, 5);
  EXPECT_EQ(b[1].start, -1);  // its query failed: unknown
  EXPECT_GE(age, 0);
  log.end = 9;
  EXPECT_EQ(monitor.Fresh(&age)[0].end, 9);  // asked again: read again
}

TEST(BoundsMonitorTest, AFrozenLogGetsTheLastReadingWithinTheWait) {
  StubLog log;
  BoundsMonitor monitor(&log, Clock::Real(), 1h);
  int64_t age = -2;
  ASSERT_EQ(monitor.Fresh(&age)[0].end, 5);
  log.frozen = true;
  log.end = 7;
  const auto t0 = std::chrono::steady_clock::now();
  auto b = monitor.Fresh(&age, 100ms);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].end, 5);  // the last reading
  log.frozen = false;      // lets the destructor's join finish
}

TEST(BoundsMonitorTest, NoReadingYetHasNoAge) {
  StubLog log;
  log.frozen = true;
  BoundsMonitor monitor(&log, Clock::Real(), 1h);
  int64_t age = 0;
  EXPECT_TRUE(monitor.Fresh(&age, 20ms).empty());
  EXPECT_EQ(age, -1);
  log.frozen = false;
}

}  // namespace
}  // namespace sediment

#include "common/background_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

namespace sediment {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;
using Loop = BackgroundLoop;

constexpr auto kLong = std::chrono::hours(1);

// Polls `cond` every millisecond for up to 10 s.
template <class Cond>
bool Eventually(Cond cond) {
  const auto until = Steady::now() + 10s;
  while (!cond()) {
    if (Steady::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(BackgroundLoop, RunsEveryIntervalUntilStopped) {
  std::atomic<int> passes{0};
  Loop loop("test", {.interval = 5ms}, [&] { ++passes; });
  EXPECT_EQ(passes.load(), 0);
  ASSERT_TRUE(loop.Start());
  EXPECT_FALSE(loop.Start());  // started once only
  ASSERT_TRUE(Eventually([&] { return passes.load() >= 3; }));
  loop.Stop();
  EXPECT_TRUE(loop.stopping());
  const int after_stop = passes.load();
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(passes.load(), after_stop);
  EXPECT_FALSE(loop.Start());  // a stopped loop does not start again
}

TEST(BackgroundLoop, FirstPassWaitsOneIntervalUnlessAtStart) {
  std::atomic<int> waiting{0};
  std::atomic<int> at_start{0};
  Loop a("a", {.interval = kLong}, [&] { ++waiting; });
  Loop b("b", {.interval = kLong, .first_pass = Loop::FirstPass::kAtStart}, [&] { ++at_start; });
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  ASSERT_TRUE(Eventually([&] { return at_start.load() == 1; }));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(waiting.load(), 0);
  EXPECT_EQ(at_start.load(), 1);
}

TEST(BackgroundLoop, NotifyWakesTheWaitEarly) {
  std::atomic<int> passes{0};
  Loop loop("test", {.interval = kLong}, [&] { ++passes; });
  ASSERT_TRUE(loop.Start());
  std::this_thread::sleep_for(10ms);
  EXPECT_EQ(passes.load(), 0);
  const auto t0 = Steady::now();
  loop.Notify();
  ASSERT_TRUE(Eventually([&] { return passes.load() == 1; }));
  EXPECT_LT(Steady::now() - t0, 5s);
  loop.Notify();
  ASSERT_TRUE(Eventually([&] { return passes.load() == 2; }));
}

TEST(BackgroundLoop, NotifyBeforeStartRunsTheFirstPassAtOnce) {
  std::atomic<int> passes{0};
  Loop loop("test", {.interval = Loop::kNoPeriod}, [&] { ++passes; });
  loop.Notify();
  loop.Notify();
  ASSERT_TRUE(loop.Start());
  ASSERT_TRUE(Eventually([&] { return passes.load() == 1; }));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(passes.load(), 1);  // Notify calls before a pass coalesce
}

TEST(BackgroundLoop, NotifyDuringAPassRunsOneMorePass) {
  std::atomic<int> passes{0};
  std::atomic<bool> release{false};
  Loop loop("test", {.interval = Loop::kNoPeriod}, [&] {
    ++passes;
    while (!release.load()) std::this_thread::sleep_for(1ms);
  });
  loop.Notify();
  ASSERT_TRUE(loop.Start());
  ASSERT_TRUE(Eventually([&] { return passes.load() == 1; }));
  loop.Notify();  // while the first pass runs
  loop.Notify();
  release = true;
  ASSERT_TRUE(Eventually([&] { return passes.load() == 2; }));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(passes.load(), 2);
}

TEST(BackgroundLoop, StopWaitsForTheRunningPassAndRunsNoOther) {
  std::atomic<int> passes{0};
  std::atomic<bool> in_pass{false};
  std::atomic<bool> saw_stopping{false};
  Loop* self = nullptr;
  Loop loop("test", {.interval = 0ms}, [&] {
    ++passes;
    in_pass = true;
    while (!self->stopping()) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(20ms);  // Stop must wait for this
    saw_stopping = true;
    in_pass = false;
  });
  self = &loop;
  ASSERT_TRUE(loop.Start());
  ASSERT_TRUE(Eventually([&] { return in_pass.load(); }));
  loop.Stop();
  EXPECT_TRUE(saw_stopping.load());
  EXPECT_FALSE(in_pass.load());
  EXPECT_EQ(passes.load(), 1);
}

TEST(BackgroundLoop, StopFromManyThreadsReturnsOnceTheThreadEnded) {
  std::atomic<int> passes{0};
  std::atomic<bool> in_pass{false};
  Loop loop("test", {.interval = 1ms}, [&] {
    in_pass = true;
    std::this_thread::sleep_for(5ms);
    ++passes;
    in_pass = false;
  });
  ASSERT_TRUE(loop.Start());
  ASSERT_TRUE(Eventually([&] { return passes.load() >= 1; }));
  std::vector<std::thread> stoppers;
  std::atomic<int> returned_in_pass{0};
  for (int i = 0; i < 8; ++i) {
    stoppers.emplace_back([&] {
      loop.Stop();
      if (in_pass.load()) ++returned_in_pass;
    });
  }
  for (auto& t : stoppers) t.join();
  EXPECT_EQ(returned_in_pass.load(), 0);
  loop.Stop();  // idempotent
}

TEST(BackgroundLoop, StopFromThePassDoesNotDeadlock) {
  std::atomic<int> passes{0};
  Loop* self = nullptr;
  {
    Loop loop("test", {.interval = 0ms}, [&] {
      ++passes;
      self->Stop();
    });
    self = &loop;
    ASSERT_TRUE(loop.Start());
    ASSERT_TRUE(Eventually([&] { return loop.stopping(); }));
  }  // the destructor joins
  EXPECT_EQ(passes.load(), 1);
}

TEST(BackgroundLoop, DestructorStopsAndNeverStartedLoopIsFine) {
  std::atomic<int> passes{0};
  {
    Loop never("never", {.interval = 1ms}, [&] { ++passes; });
  }
  {
    Loop loop("test", {.interval = 1ms}, [&] { ++passes; });
    ASSERT_TRUE(loop.Start());
    ASSERT_TRUE(Eventually([&] { return passes.load() >= 1; }));
  }
  const int after = passes.load();
  std::this_thread::sleep_for(10ms);
  EXPECT_EQ(passes.load(), after);
}

TEST(BackgroundLoop, SleepForIsCutShortByStop) {
  Loop loop("test", {.interval = kLong}, [] {});
  EXPECT_TRUE(loop.SleepFor(1ms));
  std::atomic<bool> result{true};
  std::thread sleeper([&] { result = loop.SleepFor(kLong); });
  std::this_thread::sleep_for(10ms);
  const auto t0 = Steady::now();
  loop.Stop();
  sleeper.join();
  EXPECT_FALSE(result.load());
  EXPECT_LT(Steady::now() - t0, 5s);
  EXPECT_FALSE(loop.SleepFor(1ms));  // after Stop
}

TEST(BackgroundLoop, PassReturnsItsOwnDelay) {
  std::atomic<int> passes{0};
  Loop loop("test", {.interval = 1ms}, Loop::DelayFromPass{}, [&]() -> Loop::Duration {
    return ++passes < 3 ? Loop::Duration(1ms) : Loop::kNoPeriod;
  });
  ASSERT_TRUE(loop.Start());
  ASSERT_TRUE(Eventually([&] { return passes.load() == 3; }));
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(passes.load(), 3);  // kNoPeriod: only a Notify starts another
  loop.Notify();
  ASSERT_TRUE(Eventually([&] { return passes.load() == 4; }));
}

// Passes of 60 ms every 70 ms, the first one interval after Start: at a fixed rate pass k starts
// no earlier than its grid point, (k + 1) * 70 ms after Start, and 4 periods take about 280 ms;
// with a fixed delay they take at least 4 * 130 ms. A late first start (a loaded machine wakes the
// thread tens of ms late) shortens starts[4] - starts[0] at a fixed rate, as the grid catches up:
// the lower bound is therefore counted from before Start, where lateness cannot move it.
TEST(BackgroundLoop, FixedRateKeepsItsGridFixedDelayAddsThePass) {
  auto four_periods = [](Loop::Schedule schedule) {
    std::vector<Steady::time_point> starts;
    Mutex mu;
    Loop loop("test", {.interval = 70ms, .schedule = schedule}, [&] {
      {
        MutexLock lock(&mu);
        starts.push_back(Steady::now());
      }
      std::this_thread::sleep_for(60ms);
    });
    const Steady::time_point before_start = Steady::now();
    EXPECT_TRUE(loop.Start());
    EXPECT_TRUE(Eventually([&] {
      MutexLock lock(&mu);
      return starts.size() >= 5;
    }));
    loop.Stop();
    return std::make_pair(starts[4] - before_start, starts[4] - starts[0]);
  };
  const auto [rate_from_start, rate] = four_periods(Loop::Schedule::kFixedRate);
  const auto [delay_from_start, delay] = four_periods(Loop::Schedule::kFixedDelay);
  EXPECT_GE(rate_from_start, 5 * 70ms);  // never ahead of the grid
  EXPECT_LT(rate, 4 * 130ms - 40ms);     // the passes' length does not add up
  EXPECT_GE(delay, 4 * 130ms);
  EXPECT_GE(delay_from_start, 70ms + 4 * 130ms);
}

}  // namespace
}  // namespace sediment

#include "coordinator/call_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

namespace sediment::coordinator {
namespace {

using namespace std::chrono_literals;

// Calls that block until the gate opens.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int inside = 0, max_inside = 0;
  void Pass() {
    std::unique_lock lock(mu);
    ++inside;
    max_inside = std::max(max_inside, inside);
    cv.notify_all();
    cv.wait(lock, [&] { return open; });
    --inside;
  }
  void WaitInside(int n) {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 5s, [&] { return inside >= n; }));
  }
  void Open() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
};

TEST(CallPoolTest, AtMostMaxThreadsRunAndTheRestWaitInOrder) {
  CallPool pool(CallPoolOptions{2, 100, 10000ms});
  Gate gate;
  std::mutex order_mu;
  std::vector<int> order;
  std::atomic<int> done{0};
  for (int i = 0; i < 6; ++i) {
    pool.Submit(
        [&, i] {
          gate.Pass();
          {
            std::lock_guard lock(order_mu);
            order.push_back(i);
          }
          ++done;
        },
        [] { FAIL() << "refused"; });
  }
  gate.WaitInside(2);
  EXPECT_EQ(pool.stats().running, 2u);
  EXPECT_EQ(pool.stats().queued, 4u);
  gate.Open();
  for (int i = 0; i < 500 && done < 6; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(done.load(), 6);
  EXPECT_EQ(gate.max_inside, 2);
  EXPECT_LE(pool.stats().threads, 2u);
}

TEST(CallPoolTest, ACallBeyondTheQueueIsRefusedAtOnce) {
  CallPool pool(CallPoolOptions{1, 1, 10000ms});
  Gate gate;
  pool.Submit([&] { gate.Pass(); }, nullptr);
  gate.WaitInside(1);
  std::atomic<bool> queued_ran{false}, queued_refused{false};
  bool refused = false;
  pool.Submit([&] { queued_ran = true; }, [&] { queued_refused = true; });
  pool.Submit([] { FAIL() << "ran beyond the queue"; }, [&] { refused = true; });
  EXPECT_TRUE(refused);
  EXPECT_FALSE(queued_refused.load());
  EXPECT_EQ(pool.stats().refused, 1u);
  gate.Open();
  pool.Shutdown();
  // The queued call either ran or was refused by the shutdown: exactly one of them.
  EXPECT_NE(queued_ran.load(), queued_refused.load());
}

TEST(CallPoolTest, ShutdownRefusesQueuedCallsAndWaitsForRunningOnes) {
  CallPool pool(CallPoolOptions{1, 10, 10000ms});
  Gate gate;
  std::atomic<bool> finished{false};
  pool.Submit(
      [&] {
        gate.Pass();
        finished = true;
      },
      nullptr);
  gate.WaitInside(1);
  std::atomic<int> refused{0};
  for (int i = 0; i < 3; ++i)
    pool.Submit([] { FAIL() << "ran after shutdown"; }, [&] { ++refused; });
  std::thread opener([&] {
    std::this_thread::sleep_for(50ms);
    gate.Open();
  });
  pool.Shutdown();
  EXPECT_TRUE(finished.load());  // Shutdown waited for it
  EXPECT_EQ(refused.load(), 3);
  bool late_refused = false;
  pool.Submit([] { FAIL() << "ran after shutdown"; }, [&] { late_refused = true; });
  EXPECT_TRUE(late_refused);
  opener.join();
}

TEST(CallPoolTest, IdleThreadsEnd) {
  CallPool pool(CallPoolOptions{4, 10, 50ms});
  std::atomic<int> done{0};
  for (int i = 0; i < 4; ++i) pool.Submit([&] { ++done; }, nullptr);
  for (int i = 0; i < 500 && done < 4; ++i) std::this_thread::sleep_for(10ms);
  for (int i = 0; i < 500 && pool.stats().threads > 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(pool.stats().threads, 0u);
  pool.Submit([&] { ++done; }, nullptr);  // a new thread starts for new work
  for (int i = 0; i < 500 && done < 5; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(done.load(), 5);
}

}  // namespace
}  // namespace sediment::coordinator

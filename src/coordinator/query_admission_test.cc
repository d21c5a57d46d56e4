#include "coordinator/query_admission.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace sediment::coordinator {
namespace {

TEST(QueryAdmissionTest, RefusesBeyondTheBoundAndReleasesOnDestruction) {
  QueryAdmission admission(2);
  auto a = admission.TryAdmit();
  auto b = admission.TryAdmit();
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  auto c = admission.TryAdmit();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(c.status().subcode(), StatusSubcode::kConcurrencyLimit);
  EXPECT_NE(c.status().message().find("--max-concurrent-queries"), std::string::npos);
  EXPECT_EQ(admission.running(), 2);
  a->reset();
  EXPECT_EQ(admission.running(), 1);
  EXPECT_TRUE(admission.TryAdmit().ok());  // admitted, and released at once
  EXPECT_EQ(admission.running(), 1);
}

TEST(QueryAdmissionTest, ConcurrentCallersNeverExceedTheBound) {
  QueryAdmission admission(3);
  std::atomic<int> peak{0}, admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        auto ticket = admission.TryAdmit();
        if (!ticket.ok()) continue;
        ++admitted;
        int now = admission.running();
        int p = peak.load();
        while (now > p && !peak.compare_exchange_weak(p, now)) {
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(peak.load(), 3);
  EXPECT_GT(admitted.load(), 0);
  EXPECT_EQ(admission.running(), 0);
}

}  // namespace
}  // namespace sediment::coordinator

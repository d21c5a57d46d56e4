#include "common/thread.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <algorithm>
#include <string>
#include <thread>

namespace sediment {
namespace {

TEST(ThreadTest, NameIsTheFirst15Bytes) {
  std::string seen;
  std::thread t([&] {
    SetCurrentThreadName("digest-partition-12");
    char buf[32] = {};
    ASSERT_EQ(pthread_getname_np(pthread_self(), buf, sizeof buf), 0);
    seen = buf;
  });
  t.join();
  EXPECT_EQ(seen, "digest-partitio");
}

TEST(ThreadTest, NiceIsPerThread) {
  auto before = CurrentThreadNice();
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  const int target = std::min(*before + 3, 19);
  Result<int> inside = Status::Internal("not run");
  std::thread t([&] {
    Status st = SetCurrentThreadNice(target);
    inside = st.ok() ? CurrentThreadNice() : Result<int>(st);
  });
  t.join();
  ASSERT_TRUE(inside.ok()) << inside.status().ToString();
  EXPECT_EQ(*inside, target);
  // The thread that started it keeps its own value.
  auto after = CurrentThreadNice();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, *before);
}

TEST(ThreadTest, NiceOutOfRangeIsRefused) {
  EXPECT_EQ(SetCurrentThreadNice(20).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SetCurrentThreadNice(-21).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sediment

#include "common/testing/fault_env.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

namespace sediment {
namespace {

class FaultEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("fault_env_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return JoinPath(dir_.string(), name); }
  std::string Contents(const std::string& name) {
    auto r = Env::Default()->ReadFile(Path(name));
    return r.ok() ? *r : "<missing>";
  }

  std::filesystem::path dir_;
  FaultEnv env_;
};

TEST_F(FaultEnvTest, DropUnsyncedDataKeepsOnlySyncedBytes) {
  auto f = env_.NewWritableFile(Path("a"));
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append("abc").ok());
  ASSERT_TRUE((*f)->Sync().ok());
  ASSERT_TRUE((*f)->Append("def").ok());
  EXPECT_EQ(env_.SyncedSize(Path("a")), 3u);
  EXPECT_EQ(Contents("a"), "abcdef");
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ(Contents("a"), "abc");
  // The handle belongs to the crashed process.
  EXPECT_FALSE((*f)->Append("x").ok());
  EXPECT_FALSE((*f)->Sync().ok());
  // A reopened handle works and starts from the durable length.
  auto g = env_.NewAppendableFile(Path("a"));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ((*g)->Size(), 3u);
  ASSERT_TRUE((*g)->Append("g").ok());
  ASSERT_TRUE((*g)->Sync().ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ(Contents("a"), "abcg");
}

TEST_F(FaultEnvTest, NeverSyncedFileBecomesEmptyAndStrictModeRemovesIt) {
  auto f = env_.NewWritableFile(Path("a"));
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append("abc").ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ(Contents("a"), "");

  env_.SetStrictDirSync(true);
  auto g = env_.NewWritableFile(Path("b"));
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE((*g)->Append("abc").ok());
  ASSERT_TRUE((*g)->Sync().ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ(Contents("b"), "<missing>");  // directory never synced

  auto h = env_.NewWritableFile(Path("c"));
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE((*h)->Append("xyz").ok());
  ASSERT_TRUE((*h)->Sync().ok());
  ASSERT_TRUE(env_.SyncDir(dir_.string()).ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ(Contents("c"), "xyz");
  EXPECT_EQ(Contents("a"), "");  // existed before strict mode's creations: kept
}

TEST_F(FaultEnvTest, RenameIsDurableOnlyAfterSyncDir) {
  ASSERT_TRUE(env_.WriteFileAtomic(Path("meta"), "v1").ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ(Contents("meta"), "v1");

  {
    auto f = env_.NewWritableFile(Path("meta.new"));
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Append("v2").ok());
    ASSERT_TRUE((*f)->Sync().ok());
  }
  ASSERT_TRUE(env_.RenameFile(Path("meta.new"), Path("meta")).ok());
  EXPECT_EQ(Contents("meta"), "v2");
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ(Contents("meta"), "v1");
  EXPECT_EQ(Contents("meta.new"), "v2");

  // A rename to a fresh name disappears entirely.
  ASSERT_TRUE(env_.RenameFile(Path("meta.new"), Path("other")).ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ(Contents("other"), "<missing>");
  EXPECT_EQ(Contents("meta.new"), "v2");

  ASSERT_TRUE(env_.WriteFileAtomic(Path("meta"), "v3").ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ(Contents("meta"), "v3");
}

TEST_F(FaultEnvTest, TearTailAndFlipByte) {
  ASSERT_TRUE(env_.WriteFileAtomic(Path("a"), "hello").ok());
  ASSERT_TRUE(env_.TearTail(Path("a"), 2).ok());
  EXPECT_EQ(Contents("a"), "hel");
  EXPECT_EQ(env_.SyncedSize(Path("a")), 3u);
  ASSERT_TRUE(env_.FlipByte(Path("a"), 1).ok());
  std::string c = Contents("a");
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[1], static_cast<char>(~'e'));
  EXPECT_FALSE(env_.FlipByte(Path("a"), 3).ok());
  ASSERT_TRUE(env_.TearTail(Path("a"), 100).ok());
  EXPECT_EQ(Contents("a"), "");
}

TEST_F(FaultEnvTest, InjectedWriteAndSyncFailures) {
  auto f = env_.NewWritableFile(Path("a"));
  ASSERT_TRUE(f.ok());
  env_.FailWritesAfter(2);
  EXPECT_TRUE((*f)->Append("1").ok());
  EXPECT_TRUE((*f)->Append("2").ok());
  Status s = (*f)->Append("3");
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  env_.SetPartialWriteOnFailure(true);
  EXPECT_FALSE((*f)->Append("abcd").ok());
  EXPECT_EQ(Contents("a"), "12ab");
  env_.FailWritesAfter(-1);
  EXPECT_TRUE((*f)->Append("z").ok());

  env_.SetSyncFails(true);
  EXPECT_EQ((*f)->Sync().code(), StatusCode::kIOError);
  EXPECT_FALSE(env_.SyncDir(dir_.string()).ok());
  EXPECT_EQ(env_.SyncedSize(Path("a")), 0u);
  env_.SetSyncFails(false);
  uint64_t syncs = env_.sync_count();
  EXPECT_TRUE((*f)->Sync().ok());
  EXPECT_EQ(env_.sync_count(), syncs + 1);
  EXPECT_EQ(env_.SyncedSize(Path("a")), 5u);
}

TEST_F(FaultEnvTest, SimulateCrashBlocksMutationsUntilRestart) {
  auto f = env_.NewWritableFile(Path("a"));
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append("abc").ok());
  ASSERT_TRUE(env_.SimulateCrash().ok());
  EXPECT_FALSE(env_.NewWritableFile(Path("b")).ok());
  EXPECT_FALSE(env_.TruncateFile(Path("a"), 0).ok());
  EXPECT_FALSE(env_.RemoveFile(Path("a")).ok());
  EXPECT_FALSE(env_.WriteFileAtomic(Path("c"), "x").ok());
  EXPECT_TRUE(env_.ReadFile(Path("a")).ok());
  env_.Restart();
  EXPECT_TRUE(env_.NewWritableFile(Path("b")).ok());
}

// A crash is atomic with respect to concurrent Append/Sync: each file ends exactly at the length
// of its last successful Sync.
TEST_F(FaultEnvTest, ConcurrentWritersSeeAtomicCrash) {
  constexpr int kThreads = 4;
  std::vector<uint64_t> last_ok(kThreads, 0);
  std::vector<std::thread> threads;
  std::atomic<int> started{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto f = env_.NewWritableFile(Path("f" + std::to_string(t)));
      ASSERT_TRUE(f.ok());
      started++;
      std::string chunk(100, static_cast<char>('a' + t));
      while (true) {
        if (!(*f)->Append(chunk).ok()) break;
        if (!(*f)->Sync().ok()) break;
        last_ok[t] = (*f)->Size();
      }
    });
  }
  while (started.load() < kThreads) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  ASSERT_TRUE(env_.SimulateCrash().ok());
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(Contents("f" + std::to_string(t)).size(), last_ok[t]) << t;
  }
}

}  // namespace
}  // namespace sediment

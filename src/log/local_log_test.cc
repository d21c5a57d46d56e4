#include "log/local_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "common/testing/fault_env.h"

namespace sediment {
namespace {

using namespace std::chrono_literals;

class LocalLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("local_log_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<CommitLog> Open() {
    auto log = OpenLocalLog(&env_, dir_, opts_);
    EXPECT_TRUE(log.ok()) << log.status().ToString();
    return log.ok() ? std::move(log).value() : nullptr;
  }

  static Offset MustAppend(CommitLog& log, int32_t p, std::string data) {
    auto r = log.Append(PartitionId(p), std::move(data)).get();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : Offset(-1);
  }

  // Every record from StartOffset to EndOffset, read in pieces of about max_bytes.
  static std::vector<LogRecord> ReadAll(CommitLog& log, int32_t p, size_t max_bytes = 1 << 20) {
    std::vector<LogRecord> out;
    auto start = log.StartOffset(PartitionId(p));
    auto end = log.EndOffset(PartitionId(p));
    EXPECT_TRUE(start.ok() && end.ok());
    Offset next = *start;
    while (next < *end) {
      auto r = log.Read(PartitionId(p), next, max_bytes, 0ms);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (!r.ok() || r->empty()) break;
      for (auto& rec : *r) {
        EXPECT_EQ(rec.offset, next);
        next = Offset(rec.offset.value + 1);
        out.push_back(std::move(rec));
      }
    }
    return out;
  }

  std::string PartDir(int32_t p) const {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "p-%05d", p);
    return JoinPath(dir_, buf);
  }
  std::vector<std::string> LogFiles(int32_t p) const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(PartDir(p))) {
      if (e.path().extension() == ".log") out.push_back(e.path().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  static std::string Payload(const std::string& tag, size_t len) {
    std::string s = tag + ":";
    while (s.size() < len) s.push_back(static_cast<char>('a' + s.size() % 26));
    return s;
  }

  std::string dir_;
  FaultEnv env_;
  LocalLogOptions opts_;
};

TEST_F(LocalLogTest, RoundTripAcrossPartitionsAndFileRolls) {
  opts_.partitions = 3;
  opts_.file_roll_bytes = 1000;
  auto log = Open();
  ASSERT_TRUE(log);
  EXPECT_EQ(log->partition_count(), 3);
  std::map<int32_t, std::vector<std::string>> expected;
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    int32_t p = i % 3;
    std::string data = Payload("r" + std::to_string(i), 1 + rng() % 500);
    Offset off = MustAppend(*log, p, data);
    EXPECT_EQ(off.value, static_cast<int64_t>(expected[p].size()));
    expected[p].push_back(std::move(data));
  }
  EXPECT_GT(LogFiles(0).size(), 5u);
  for (int32_t p = 0; p < 3; ++p) {
    EXPECT_EQ(*log->StartOffset(PartitionId(p)), Offset(0));
    EXPECT_EQ(log->EndOffset(PartitionId(p))->value, 100);
    for (size_t max_bytes : {size_t{1}, size_t{700}, size_t{1} << 20}) {
      auto got = ReadAll(*log, p, max_bytes);
      ASSERT_EQ(got.size(), expected[p].size());
      for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].data, expected[p][i]) << i;
    }
    // Random starting points land on the right record.
    for (int64_t from : {1, 17, 50, 99}) {
      auto r = log->Read(PartitionId(p), Offset(from), 1, 0ms);
      ASSERT_TRUE(r.ok());
      ASSERT_EQ(r->size(), 1u);
      EXPECT_EQ((*r)[0].offset.value, from);
      EXPECT_EQ((*r)[0].data, expected[p][from]);
    }
  }
  EXPECT_EQ(log->Health(), "ok");
  EXPECT_EQ(log->Append(PartitionId(3), "x").get().status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(log->Read(PartitionId(-1), Offset(0), 1, 0ms).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(LocalLogTest, LargeRecordsAndMaxBytes) {
  opts_.partitions = 1;
  auto log = Open();
  ASSERT_TRUE(log);
  std::string big = Payload("big", 3 << 20);
  MustAppend(*log, 0, "small");
  MustAppend(*log, 0, big);
  MustAppend(*log, 0, "tail");
  auto r = log->Read(PartitionId(0), Offset(0), 10, 0ms);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);  // the next one would exceed max_bytes
  r = log->Read(PartitionId(0), Offset(1), 10, 0ms);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);  // always at least one
  EXPECT_EQ((*r)[0].data, big);
  r = log->Read(PartitionId(0), Offset(0), 8 << 20, 0ms);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[2].data, "tail");
}

TEST_F(LocalLogTest, ConcurrentAppendersGetDenseUniqueOffsetsAndShareSyncs) {
  opts_.partitions = 2;
  opts_.file_roll_bytes = 64 << 10;
  opts_.max_commit_delay = 500us;
  auto log = Open();
  ASSERT_TRUE(log);
  constexpr int kThreads = 8;
  constexpr int kPerThread = 150;
  struct Acked {
    int32_t p;
    Offset off;
    std::string data;
  };
  std::vector<std::vector<Acked>> acked(kThreads);
  uint64_t syncs_before = env_.sync_count();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        int32_t p = (t + i) % 2;
        std::string data = Payload("t" + std::to_string(t) + "-" + std::to_string(i), 20 + i);
        auto r = log->Append(PartitionId(p), data).get();
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        acked[t].push_back({p, *r, std::move(data)});
      }
    });
  }
  for (auto& th : threads) th.join();
  uint64_t syncs = env_.sync_count() - syncs_before;
  EXPECT_LT(syncs, static_cast<uint64_t>(kThreads * kPerThread / 2)) << "no group commit";

  std::map<int32_t, std::map<int64_t, std::string>> by_offset;
  for (int t = 0; t < kThreads; ++t) {
    std::map<int32_t, int64_t> last;
    for (const auto& a : acked[t]) {
      EXPECT_TRUE(by_offset[a.p].emplace(a.off.value, a.data).second) << "duplicate offset";
      if (last.count(a.p)) {
        EXPECT_GT(a.off.value, last[a.p]);  // one thread's order is kept
      }
      last[a.p] = a.off.value;
    }
  }
  for (int32_t p = 0; p < 2; ++p) {
    auto all = ReadAll(*log, p, 1000);
    ASSERT_EQ(all.size(), by_offset[p].size());
    int64_t expect = 0;
    for (const auto& [off, data] : by_offset[p]) {
      ASSERT_EQ(off, expect);  // dense
      EXPECT_EQ(all[expect].data, data);
      ++expect;
    }
  }
}

TEST_F(LocalLogTest, ReopenPreservesEverything) {
  opts_.partitions = 2;
  opts_.file_roll_bytes = 500;
  std::vector<std::string> expected;
  {
    auto log = Open();
    ASSERT_TRUE(log);
    for (int i = 0; i < 50; ++i) {
      expected.push_back(Payload(std::to_string(i), 100));
      MustAppend(*log, 1, expected.back());
    }
  }
  auto log = Open();
  ASSERT_TRUE(log);
  EXPECT_EQ(log->EndOffset(PartitionId(1))->value, 50);
  EXPECT_EQ(log->EndOffset(PartitionId(0))->value, 0);
  auto all = ReadAll(*log, 1, 333);
  ASSERT_EQ(all.size(), 50u);
  for (size_t i = 0; i < 50; ++i) EXPECT_EQ(all[i].data, expected[i]);
  EXPECT_EQ(MustAppend(*log, 1, "next").value, 50);
  EXPECT_EQ(MustAppend(*log, 0, "first").value, 0);
  log.reset();
  opts_.partitions = 3;
  auto bad = OpenLocalLog(&env_, dir_, opts_);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(LocalLogTest, CrashDuringConcurrentAppendsLosesNoAckedRecord) {
  env_.SetStrictDirSync(true);
  opts_.partitions = 2;
  opts_.file_roll_bytes = 4096;
  std::mt19937 rng(42);
  // Every record known to be in the log: acked ones, plus unacked ones that survived a crash.
  std::map<int32_t, std::map<int64_t, std::string>> known;
  for (int round = 0; round < 6; ++round) {
    auto log = Open();
    ASSERT_TRUE(log) << "round " << round;
    for (int32_t p = 0; p < 2; ++p) {
      auto all = ReadAll(*log, p);
      // Everything acked is there with the same offset and bytes.
      for (const auto& [off, data] : known[p]) {
        ASSERT_LT(static_cast<size_t>(off), all.size()) << "round " << round << " p" << p;
        EXPECT_EQ(all[off].data, data) << "round " << round << " p" << p << " off " << off;
      }
      // Nothing torn: every record read back is one that some appender sent in full.
      for (const auto& rec : all) {
        auto colon = rec.data.find(':');
        ASSERT_NE(colon, std::string::npos);
        size_t len = std::stoul(rec.data.substr(colon + 1, 8));
        EXPECT_EQ(rec.data.size(), len);
        known[p][rec.offset.value] = rec.data;
      }
      EXPECT_EQ(log->EndOffset(PartitionId(p))->value, static_cast<int64_t>(all.size()));
    }
    EXPECT_EQ(log->Health(), "ok");

    std::atomic<bool> go{true};
    std::mutex mu;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t, seed = rng()] {
        std::mt19937 trng(seed);
        for (int i = 0; go.load(); ++i) {
          int32_t p = static_cast<int32_t>(trng() % 2);
          size_t len = 30 + trng() % 1500;
          char head[64];
          std::snprintf(head, sizeof(head), "r%d-t%d-%d:%08zu", round, t, i, len);
          std::string data = Payload(head, len);
          data.resize(len);
          auto r = log->Append(PartitionId(p), data).get();
          if (!r.ok()) break;
          std::lock_guard lock(mu);
          auto [it, inserted] = known[p].emplace(r->value, data);
          EXPECT_TRUE(inserted) << "offset acked twice";
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 40));
    ASSERT_TRUE(env_.SimulateCrash().ok());
    go = false;
    for (auto& th : threads) th.join();
    log.reset();
    env_.Restart();
  }
  auto log = Open();
  ASSERT_TRUE(log);
  for (int32_t p = 0; p < 2; ++p) {
    auto all = ReadAll(*log, p);
    for (const auto& [off, data] : known[p]) {
      ASSERT_LT(static_cast<size_t>(off), all.size());
      EXPECT_EQ(all[off].data, data);
    }
    Offset end = *log->EndOffset(PartitionId(p));
    EXPECT_EQ(MustAppend(*log, p, "after"), end);
  }
}

TEST_F(LocalLogTest, TornTailIsRepairedOnOpen) {
  opts_.partitions = 1;
  constexpr size_t kRecord = 16 + 50;  // header + payload
  for (uint64_t n : {1, 2, 15, 16, 17, 40, 65, 66, 67, 100, 131, 132}) {
    SCOPED_TRACE(n);
    std::filesystem::remove_all(dir_);
    std::vector<std::string> expected;
    {
      auto log = Open();
      ASSERT_TRUE(log);
      for (int i = 0; i < 5; ++i) {
        expected.push_back(Payload(std::to_string(i), 50));
        MustAppend(*log, 0, expected.back());
      }
    }
    ASSERT_TRUE(env_.TearTail(LogFiles(0).back(), n).ok());
    size_t survivors = 5 - (n + kRecord - 1) / kRecord;
    auto log = Open();
    ASSERT_TRUE(log);
    EXPECT_EQ(log->EndOffset(PartitionId(0))->value, static_cast<int64_t>(survivors));
    auto all = ReadAll(*log, 0);
    ASSERT_EQ(all.size(), survivors);
    for (size_t i = 0; i < survivors; ++i) EXPECT_EQ(all[i].data, expected[i]);
    EXPECT_EQ(MustAppend(*log, 0, "again").value, static_cast<int64_t>(survivors));
    log.reset();
    log = Open();
    ASSERT_TRUE(log);
    all = ReadAll(*log, 0);
    ASSERT_EQ(all.size(), survivors + 1);
    EXPECT_EQ(all.back().data, "again");
  }
}

TEST_F(LocalLogTest, FlippedByteDropsTheDamagedTail) {
  opts_.partitions = 1;
  constexpr size_t kRecord = 16 + 50;
  // Positions inside the last record: crc, length, offset, payload.
  for (uint64_t at : {0, 5, 9, 20, 65}) {
    SCOPED_TRACE(at);
    std::filesystem::remove_all(dir_);
    {
      auto log = Open();
      ASSERT_TRUE(log);
      for (int i = 0; i < 4; ++i) MustAppend(*log, 0, Payload(std::to_string(i), 50));
    }
    ASSERT_TRUE(env_.FlipByte(LogFiles(0).back(), 3 * kRecord + at).ok());
    auto log = Open();
    ASSERT_TRUE(log);
    auto all = ReadAll(*log, 0);
    ASSERT_EQ(all.size(), 3u);
    EXPECT_EQ(all[2].data, Payload("2", 50));
    EXPECT_EQ(MustAppend(*log, 0, "x").value, 3);
  }
}

// Every readable record from StartOffset on, following the log's skips over lost records.
std::vector<LogRecord> ReadAllSkipping(CommitLog& log, int32_t p) {
  std::vector<LogRecord> out;
  Offset next = *log.StartOffset(PartitionId(p));
  const Offset end = *log.EndOffset(PartitionId(p));
  while (next < end) {
    auto r = log.Read(PartitionId(p), next, 1, 0ms);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok() || r->empty()) break;
    for (auto& rec : *r) {
      EXPECT_GE(rec.offset, next);
      next = Offset(rec.offset.value + 1);
      out.push_back(std::move(rec));
    }
  }
  return out;
}

// Issue 13, loss window 1: a damaged record with valid records after it is corruption, not a torn
// tail. Every later record is kept, the damaged one is reported lost and its offset is never
// handed out again. (Before: the file was cut at the damage, the later records were dropped and
// their offsets given to new appends.)
TEST_F(LocalLogTest, DamagedRecordInsideTheActiveFileKeepsEveryLaterRecord) {
  opts_.partitions = 1;
  constexpr size_t kRecord = 16 + 50;
  // Positions inside record 1 of 4: crc, length, offset, payload (first and last byte).
  for (uint64_t at : {0, 5, 6, 9, 16, 65}) {
    SCOPED_TRACE(at);
    std::filesystem::remove_all(dir_);
    {
      auto log = Open();
      ASSERT_TRUE(log);
      for (int i = 0; i < 4; ++i) MustAppend(*log, 0, Payload(std::to_string(i), 50));
    }
    ASSERT_TRUE(env_.FlipByte(LogFiles(0).back(), 1 * kRecord + at).ok());
    auto log = Open();
    ASSERT_TRUE(log);
    EXPECT_EQ(log->EndOffset(PartitionId(0))->value, 4);
    auto all = ReadAllSkipping(*log, 0);
    ASSERT_EQ(all.size(), 3u);
    EXPECT_EQ(all[0].offset.value, 0);
    EXPECT_EQ(all[1].offset.value, 2);
    EXPECT_EQ(all[1].data, Payload("2", 50));
    EXPECT_EQ(all[2].data, Payload("3", 50));
    // Reading from the lost offset starts at the next readable record.
    auto r = log->Read(PartitionId(0), Offset(1), 1 << 20, 0ms);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_FALSE(r->empty());
    EXPECT_EQ((*r)[0].offset.value, 2);
    auto damage = log->Damage();
    ASSERT_EQ(damage.size(), 1u);
    EXPECT_EQ(damage[0].first.value, 1);
    EXPECT_EQ(damage[0].end.value, 2);
    EXPECT_EQ(damage[0].file_pos, kRecord);
    EXPECT_EQ(damage[0].bytes, kRecord);
    EXPECT_NE(log->Health(), "ok");
    EXPECT_EQ(MustAppend(*log, 0, "x").value, 4);
    // Reopening finds the same damage and keeps the new record.
    log.reset();
    log = Open();
    ASSERT_TRUE(log);
    all = ReadAllSkipping(*log, 0);
    ASSERT_EQ(all.size(), 4u);
    EXPECT_EQ(all.back().data, "x");
    EXPECT_EQ(log->Damage().size(), 1u);
  }
}

TEST_F(LocalLogTest, DamageSpanningSeveralRecordsIsSkippedToTheNextReadableOne) {
  opts_.partitions = 1;
  constexpr size_t kRecord = 16 + 50;
  {
    auto log = Open();
    ASSERT_TRUE(log);
    for (int i = 0; i < 6; ++i) MustAppend(*log, 0, Payload(std::to_string(i), 50));
  }
  // Records 1 and 2 (a length byte of 1, a payload byte of 2).
  ASSERT_TRUE(env_.FlipByte(LogFiles(0).back(), 1 * kRecord + 5).ok());
  ASSERT_TRUE(env_.FlipByte(LogFiles(0).back(), 2 * kRecord + 30).ok());
  auto log = Open();
  ASSERT_TRUE(log);
  auto all = ReadAllSkipping(*log, 0);
  std::vector<int64_t> offsets;
  for (const auto& r : all) offsets.push_back(r.offset.value);
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 3, 4, 5}));
  auto damage = log->Damage();
  ASSERT_EQ(damage.size(), 1u);
  EXPECT_EQ(damage[0].first.value, 1);
  EXPECT_EQ(damage[0].end.value, 3);
  EXPECT_EQ(MustAppend(*log, 0, "x").value, 6);
}

TEST_F(LocalLogTest, DamagedSealedFileIsSkippedAndReported) {
  opts_.partitions = 1;
  opts_.file_roll_bytes = 100;  // two 96-byte records per file
  {
    auto log = Open();
    ASSERT_TRUE(log);
    for (int i = 0; i < 8; ++i) MustAppend(*log, 0, Payload(std::to_string(i), 80));
  }
  auto files = LogFiles(0);
  ASSERT_EQ(files.size(), 4u);
  // A length field of a sealed file: that record is lost, the log opens.
  ASSERT_TRUE(env_.FlipByte(files[0], 6).ok());
  {
    auto log = Open();
    ASSERT_TRUE(log);
    auto all = ReadAllSkipping(*log, 0);
    ASSERT_EQ(all.size(), 7u);
    EXPECT_EQ(all[0].offset.value, 1);
    auto damage = log->Damage();
    ASSERT_EQ(damage.size(), 1u);
    EXPECT_EQ(damage[0].first.value, 0);
    EXPECT_EQ(damage[0].end.value, 1);
    EXPECT_EQ(damage[0].file, files[0]);
  }
  // A payload byte of a sealed file: found on read, skipped, reported once.
  ASSERT_TRUE(env_.FlipByte(files[0], 6).ok());
  ASSERT_TRUE(env_.FlipByte(files[1], 40).ok());
  {
    auto log = Open();
    ASSERT_TRUE(log);
    EXPECT_TRUE(log->Damage().empty());
    auto r = log->Read(PartitionId(0), Offset(2), 1, 0ms);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->size(), 1u);
    EXPECT_EQ((*r)[0].offset.value, 3);
    EXPECT_EQ((*r)[0].data, Payload("3", 80));
    auto all = ReadAllSkipping(*log, 0);
    EXPECT_EQ(all.size(), 7u);
    auto damage = log->Damage();
    ASSERT_EQ(damage.size(), 1u);
    EXPECT_EQ(damage[0].first.value, 2);
    EXPECT_EQ(damage[0].what, "checksum mismatch");
  }
  // A missing middle file: its records are lost, the others are served.
  ASSERT_TRUE(env_.FlipByte(files[1], 40).ok());
  std::filesystem::remove(files[2]);
  auto log = Open();
  ASSERT_TRUE(log);
  auto all = ReadAllSkipping(*log, 0);
  std::vector<int64_t> offsets;
  for (const auto& r : all) offsets.push_back(r.offset.value);
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 1, 2, 3, 6, 7}));
  auto damage = log->Damage();
  ASSERT_EQ(damage.size(), 1u);
  EXPECT_EQ(damage[0].first.value, 4);
  EXPECT_EQ(damage[0].end.value, 6);
  // Deleting past the damage forgets it.
  ASSERT_TRUE(log->DeleteBefore(PartitionId(0), Offset(6)).ok());
  EXPECT_TRUE(log->Damage().empty());
  EXPECT_EQ(log->Health(), "ok");
}

TEST_F(LocalLogTest, RefuseBelowStopsAppendsWhenTheEndWasLost) {
  opts_.partitions = 2;
  auto log = Open();
  ASSERT_TRUE(log);
  for (int i = 0; i < 3; ++i) MustAppend(*log, 0, "a");
  EXPECT_TRUE(log->RefuseBelow(PartitionId(0), Offset(3)).ok());
  EXPECT_EQ(MustAppend(*log, 0, "b").value, 3);
  Status st = log->RefuseBelow(PartitionId(1), Offset(5));
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  auto r = log->Append(PartitionId(1), "c").get();
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(log->Health().find("partition 1"), std::string::npos) << log->Health();
  EXPECT_EQ(*log->EndOffset(PartitionId(1)), Offset(0));
  // The other partition is unaffected.
  EXPECT_EQ(MustAppend(*log, 0, "d").value, 4);
}

TEST_F(LocalLogTest, DeleteBeforeDropsWholeFilesAndPersistsStart) {
  opts_.partitions = 1;
  opts_.file_roll_bytes = 300;
  auto log = Open();
  ASSERT_TRUE(log);
  for (int i = 0; i < 100; ++i) MustAppend(*log, 0, Payload(std::to_string(i), 40));
  size_t files_before = LogFiles(0).size();
  ASSERT_TRUE(log->DeleteBefore(PartitionId(0), Offset(50)).ok());
  EXPECT_EQ(*log->StartOffset(PartitionId(0)), Offset(50));
  EXPECT_LT(LogFiles(0).size(), files_before);
  EXPECT_EQ(log->Read(PartitionId(0), Offset(49), 1, 0ms).status().code(), StatusCode::kNotFound);
  auto r = log->Read(PartitionId(0), Offset(50), 1, 0ms);
  ASSERT_TRUE(r.ok());
  ASSERT_FALSE(r->empty());
  EXPECT_EQ((*r)[0].offset, Offset(50));
  EXPECT_EQ((*r)[0].data, Payload("50", 40));
  // Lower than the start: no-op.
  ASSERT_TRUE(log->DeleteBefore(PartitionId(0), Offset(10)).ok());
  EXPECT_EQ(*log->StartOffset(PartitionId(0)), Offset(50));
  log.reset();

  log = Open();
  ASSERT_TRUE(log);
  EXPECT_EQ(*log->StartOffset(PartitionId(0)), Offset(50));
  EXPECT_EQ(log->Read(PartitionId(0), Offset(0), 1, 0ms).status().code(), StatusCode::kNotFound);
  auto all = ReadAll(*log, 0);
  ASSERT_EQ(all.size(), 50u);
  EXPECT_EQ(all.front().data, Payload("50", 40));
  // Past the end: clamped to the end; the partition is then empty and keeps its offsets.
  ASSERT_TRUE(log->DeleteBefore(PartitionId(0), Offset(1000)).ok());
  EXPECT_EQ(*log->StartOffset(PartitionId(0)), Offset(100));
  log.reset();
  log = Open();
  ASSERT_TRUE(log);
  EXPECT_EQ(*log->StartOffset(PartitionId(0)), Offset(100));
  EXPECT_EQ(*log->EndOffset(PartitionId(0)), Offset(100));
  EXPECT_EQ(MustAppend(*log, 0, "z"), Offset(100));
  EXPECT_EQ(log->Health(), "ok");
}

// Waits (bounded) until partition p's log files are exactly `want` (file names, sorted).
bool WaitForFiles(const std::function<std::vector<std::string>()>& files,
                  const std::vector<std::string>& want) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<std::string> names;
    for (const auto& f : files()) names.push_back(std::filesystem::path(f).filename().string());
    if (names == want) return true;
    if (std::chrono::steady_clock::now() + 5ms >= deadline) {
      std::string seen;
      for (const auto& n : names) seen += n + " ";
      ADD_FAILURE() << "log files: " << seen;
    }
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

// The one active file of a partition that stops receiving appends is sealed by age, so records
// below the start offset can go on a single node too: deleted at the roll when DeleteBefore came
// first, or by DeleteBefore when the roll came first.
TEST_F(LocalLogTest, AgeRollSealsAnIdleActiveFileSoDigestedRecordsAreDeleted) {
  opts_.partitions = 2;
  opts_.file_roll_age = 50ms;
  auto log = Open();
  ASSERT_TRUE(log);
  for (int i = 0; i < 10; ++i) {
    MustAppend(*log, 0, Payload("a" + std::to_string(i), 100));
    MustAppend(*log, 1, Payload("b" + std::to_string(i), 100));
  }
  // Partition 0: everything below the start before the roll; the roll removes the old file.
  ASSERT_TRUE(log->DeleteBefore(PartitionId(0), Offset(10)).ok());
  EXPECT_TRUE(WaitForFiles([&] { return LogFiles(0); }, {"00000000000000000010.log"}));
  // Partition 1: rolled first (the sealed files stay: their records are not below the start)...
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline &&
         (LogFiles(1).size() < 2 ||
          std::filesystem::path(LogFiles(1).back()).filename() != "00000000000000000010.log")) {
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(std::filesystem::path(LogFiles(1).back()).filename(), "00000000000000000010.log");
  EXPECT_EQ(std::filesystem::path(LogFiles(1).front()).filename(), "00000000000000000000.log");
  EXPECT_EQ(ReadAll(*log, 1).size(), 10u);
  // ... then deleted by DeleteBefore.
  ASSERT_TRUE(log->DeleteBefore(PartitionId(1), Offset(10)).ok());
  EXPECT_EQ(LogFiles(1).size(), 1u);
  // An empty active file is never rolled again.
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(LogFiles(0).size(), 1u);
  EXPECT_EQ(LogFiles(1).size(), 1u);
  // Appends continue with the next offsets; reopening finds the same start and end.
  EXPECT_EQ(MustAppend(*log, 0, "next"), Offset(10));
  EXPECT_EQ(log->Health(), "ok");
  log.reset();
  log = Open();
  ASSERT_TRUE(log);
  EXPECT_EQ(*log->StartOffset(PartitionId(0)), Offset(10));
  EXPECT_EQ(*log->EndOffset(PartitionId(0)), Offset(11));
  auto all = ReadAll(*log, 0);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].data, "next");
  EXPECT_EQ(*log->StartOffset(PartitionId(1)), Offset(10));
  EXPECT_EQ(*log->EndOffset(PartitionId(1)), Offset(10));
}

// With appends coming, the age roll happens before the next batch: a file holds at most about
// file_roll_age of records. Without age rolling the file only rolls by size.
TEST_F(LocalLogTest, AgeRollBeforeABatchAndNoAgeRollWhenOff) {
  opts_.partitions = 1;
  opts_.file_roll_age = 30ms;
  auto log = Open();
  ASSERT_TRUE(log);
  MustAppend(*log, 0, "first");
  std::this_thread::sleep_for(60ms);
  MustAppend(*log, 0, "second");
  EXPECT_GE(LogFiles(0).size(), 2u);
  auto all = ReadAll(*log, 0);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].data, "second");
  log.reset();
  std::filesystem::remove_all(dir_);

  opts_.file_roll_age = 0ms;
  log = Open();
  ASSERT_TRUE(log);
  MustAppend(*log, 0, "first");
  std::this_thread::sleep_for(60ms);
  MustAppend(*log, 0, "second");
  std::this_thread::sleep_for(60ms);
  EXPECT_EQ(LogFiles(0).size(), 1u);
}

// A roll by age that fails (the directory fsync) leaves the active file as it was: nothing is
// lost, the failure is reported, and the roll is retried one age later.
TEST_F(LocalLogTest, FailedAgeRollKeepsTheActiveFileAndIsRetried) {
  env_.SetStrictDirSync(true);
  opts_.partitions = 1;
  opts_.file_roll_age = 300ms;  // the appends below take far less (one or two batches)
  auto log = Open();
  ASSERT_TRUE(log);
  std::vector<std::future<Result<Offset>>> appends;
  for (int i = 0; i < 5; ++i)
    appends.push_back(log->Append(PartitionId(0), "r" + std::to_string(i)));
  for (auto& a : appends) ASSERT_TRUE(a.get().ok());
  env_.SetSyncFails(true);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (log->Health() == "ok" && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_NE(log->Health(), "ok");
  EXPECT_EQ(LogFiles(0).size(), 1u);  // the new file was removed again
  auto all = ReadAll(*log, 0);
  ASSERT_EQ(all.size(), 5u);
  env_.SetSyncFails(false);
  EXPECT_TRUE(WaitForFiles([&] { return LogFiles(0); },
                           {"00000000000000000000.log", "00000000000000000005.log"}));
  // The file shows before its roll returned; the error clears when it did.
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (log->Health() != "ok" && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(log->Health(), "ok");
  // A crash now keeps everything: the sealed file and the (durably created) new one.
  ASSERT_TRUE(env_.SimulateCrash().ok());
  log.reset();
  env_.Restart();
  log = Open();
  ASSERT_TRUE(log);
  all = ReadAll(*log, 0);
  ASSERT_EQ(all.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(all[i].data, "r" + std::to_string(i));
  EXPECT_EQ(MustAppend(*log, 0, "r5"), Offset(5));
}

// Crashes at random moments while files roll by age (every millisecond) and by size and
// DeleteBefore removes what is below the start: after each restart every acknowledged record at
// or above the start is there with its offset and bytes, and the start never moves back.
TEST_F(LocalLogTest, CrashWhileRollingByAgeAndDeletingLosesNoAckedRecord) {
  env_.SetStrictDirSync(true);
  opts_.partitions = 2;
  opts_.file_roll_bytes = 2048;
  opts_.file_roll_age = 1ms;
  std::mt19937 rng(1234);
  std::map<int32_t, std::map<int64_t, std::string>> known;
  std::map<int32_t, int64_t> start_seen;
  for (int round = 0; round < 8; ++round) {
    auto log = Open();
    ASSERT_TRUE(log) << "round " << round;
    for (int32_t p = 0; p < 2; ++p) {
      const int64_t start = log->StartOffset(PartitionId(p))->value;
      EXPECT_GE(start, start_seen[p]) << "round " << round;
      start_seen[p] = start;
      auto all = ReadAll(*log, p);
      std::map<int64_t, std::string> got;
      for (auto& rec : all) got[rec.offset.value] = rec.data;
      for (const auto& [off, data] : known[p]) {
        if (off < start) continue;
        ASSERT_TRUE(got.count(off)) << "round " << round << " p" << p << " lost acked " << off;
        EXPECT_EQ(got[off], data);
      }
      for (auto& [off, data] : got) known[p][off] = data;
      EXPECT_EQ(log->EndOffset(PartitionId(p))->value, start + static_cast<int64_t>(all.size()));
    }
    EXPECT_EQ(log->Health(), "ok");

    std::atomic<bool> go{true};
    std::mutex mu;
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&, t, seed = rng()] {
        std::mt19937 trng(seed);
        for (int i = 0; go.load(); ++i) {
          int32_t p = static_cast<int32_t>(trng() % 2);
          std::string data = Payload(
              "r" + std::to_string(round) + "-" + std::to_string(t) + "-" + std::to_string(i),
              20 + trng() % 300);
          auto r = log->Append(PartitionId(p), data).get();
          if (!r.ok()) break;
          std::lock_guard lock(mu);
          known[p][r->value] = data;
          if (i % 7 == 0) std::this_thread::sleep_for(2ms);  // let age rolls happen
        }
      });
    }
    threads.emplace_back([&] {
      while (go.load()) {
        for (int32_t p = 0; p < 2; ++p) {
          auto end = log->EndOffset(PartitionId(p));
          if (end.ok() && end->value > 3)
            (void)log->DeleteBefore(PartitionId(p), Offset(end->value - 3));
        }
        std::this_thread::sleep_for(3ms);
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 60));
    ASSERT_TRUE(env_.SimulateCrash().ok());
    go = false;
    for (auto& th : threads) th.join();
    log.reset();
    env_.Restart();
  }
}

TEST_F(LocalLogTest, ReadWaitsForData) {
  opts_.partitions = 1;
  auto log = Open();
  ASSERT_TRUE(log);
  auto t0 = std::chrono::steady_clock::now();
  auto r = log->Read(PartitionId(0), Offset(0), 100, 100ms);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 95ms);

  std::thread writer([&] {
    std::this_thread::sleep_for(50ms);
    MustAppend(*log, 0, "late");
  });
  t0 = std::chrono::steady_clock::now();
  r = log->Read(PartitionId(0), Offset(0), 100, 10s);
  auto waited = std::chrono::steady_clock::now() - t0;
  writer.join();
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].data, "late");
  EXPECT_LT(waited, 5s);
}

// WakeReaders ends every Read of the partition waiting for a record (two here) at once, empty and
// without an error; other partitions' Reads keep waiting; a later Read waits again.
TEST_F(LocalLogTest, WakeReadersEndsWaitingReads) {
  opts_.partitions = 2;
  auto log = Open();
  ASSERT_TRUE(log);
  std::atomic<int> ended{0};
  auto wait_long = [&](int32_t p) {
    auto r = log->Read(PartitionId(p), Offset(0), 100, 30s);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r.ok() && r->empty());
    ++ended;
  };
  std::thread a(wait_long, 0), b(wait_long, 0), other(wait_long, 1);
  std::this_thread::sleep_for(500ms);  // all three are waiting
  EXPECT_EQ(ended.load(), 0);
  const auto t0 = std::chrono::steady_clock::now();
  log->WakeReaders(PartitionId(0));
  a.join();
  b.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(ended.load(), 2);  // partition 1's Read still waits
  log->WakeReaders(PartitionId(1));
  other.join();
  EXPECT_EQ(log->Health(), "ok");
  // Both wakes were taken by waiting Reads: the next Read waits out its max_wait.
  const auto t1 = std::chrono::steady_clock::now();
  auto r = log->Read(PartitionId(0), Offset(0), 100, 100ms);
  ASSERT_TRUE(r.ok());
  EXPECT_GE(std::chrono::steady_clock::now() - t1, 95ms);
}

// A wake made while no Read waits is kept for the next Read that would wait (a reader that checked
// its stop flag just before the wake cannot miss it), once; a Read with records returns them.
TEST_F(LocalLogTest, WakeWithNoReadWaitingEndsTheNextWait) {
  opts_.partitions = 1;
  auto log = Open();
  ASSERT_TRUE(log);
  log->WakeReaders(PartitionId(0));
  log->WakeReaders(PartitionId(0));  // one wake is kept, not two
  auto t0 = std::chrono::steady_clock::now();
  auto r = log->Read(PartitionId(0), Offset(0), 100, 30s);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  t0 = std::chrono::steady_clock::now();
  r = log->Read(PartitionId(0), Offset(0), 100, 100ms);
  ASSERT_TRUE(r.ok());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 95ms);
  // A Read that finds records does not wait, and leaves a kept wake for a Read that would.
  MustAppend(*log, 0, "rec");
  log->WakeReaders(PartitionId(0));
  r = log->Read(PartitionId(0), Offset(0), 100, 30s);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  t0 = std::chrono::steady_clock::now();
  r = log->Read(PartitionId(0), Offset(1), 100, 30s);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(log->Health(), "ok");
}

TEST_F(LocalLogTest, SyncFailureFailsFuturesAndRecordsAreNeverReadBack) {
  opts_.partitions = 1;
  auto log = Open();
  ASSERT_TRUE(log);
  for (int i = 0; i < 3; ++i) MustAppend(*log, 0, "good" + std::to_string(i));
  env_.SetSyncFails(true);
  auto f1 = log->Append(PartitionId(0), "bad1");
  auto f2 = log->Append(PartitionId(0), "bad2");
  EXPECT_EQ(f1.get().status().code(), StatusCode::kIOError);
  EXPECT_EQ(f2.get().status().code(), StatusCode::kIOError);
  EXPECT_EQ(log->EndOffset(PartitionId(0))->value, 3);
  EXPECT_NE(log->Health(), "ok");
  env_.SetSyncFails(false);
  EXPECT_EQ(MustAppend(*log, 0, "good3").value, 3);
  EXPECT_EQ(log->Health(), "ok");
  auto check = [&](CommitLog& l) {
    auto all = ReadAll(l, 0);
    ASSERT_EQ(all.size(), 4u);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(all[i].data, "good" + std::to_string(i));
  };
  check(*log);
  log.reset();
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  log = Open();
  ASSERT_TRUE(log);
  check(*log);
}

TEST_F(LocalLogTest, ShortWriteIsCutBackBeforeTheNextBatch) {
  opts_.partitions = 1;
  auto log = Open();
  ASSERT_TRUE(log);
  MustAppend(*log, 0, Payload("a", 100));
  env_.SetPartialWriteOnFailure(true);
  env_.FailWritesAfter(0);
  EXPECT_FALSE(log->Append(PartitionId(0), Payload("b", 100)).get().ok());
  env_.FailWritesAfter(-1);
  EXPECT_EQ(MustAppend(*log, 0, Payload("c", 100)).value, 1);
  log.reset();
  log = Open();
  ASSERT_TRUE(log);
  auto all = ReadAll(*log, 0);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].data, Payload("c", 100));
}

TEST_F(LocalLogTest, UnrepairableFailureStopsThePartitionUntilReopen) {
  opts_.partitions = 2;
  auto log = Open();
  ASSERT_TRUE(log);
  MustAppend(*log, 0, "kept");
  ASSERT_TRUE(env_.SimulateCrash().ok());  // writes and the truncation back both fail
  EXPECT_FALSE(log->Append(PartitionId(0), "lost").get().ok());
  env_.Restart();
  auto r = log->Append(PartitionId(0), "refused").get();
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("reopened"), std::string::npos) << r.status().ToString();
  EXPECT_NE(log->Health().find("partition 0"), std::string::npos);
  log.reset();
  log = Open();
  ASSERT_TRUE(log);
  auto all = ReadAll(*log, 0);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].data, "kept");
  EXPECT_EQ(MustAppend(*log, 0, "more").value, 1);
  EXPECT_EQ(log->Health(), "ok");
}

TEST_F(LocalLogTest, CloseFailsPendingAppendsWithUnavailable) {
  opts_.partitions = 1;
  opts_.max_commit_delay = std::chrono::seconds(30);
  auto log = Open();
  ASSERT_TRUE(log);
  auto f1 = log->Append(PartitionId(0), "a");
  auto f2 = log->Append(PartitionId(0), "b");
  std::this_thread::sleep_for(20ms);
  log.reset();
  EXPECT_EQ(f1.get().status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(f2.get().status().code(), StatusCode::kUnavailable);
  log = Open();
  ASSERT_TRUE(log);
  EXPECT_EQ(log->EndOffset(PartitionId(0))->value, 0);
}

TEST_F(LocalLogTest, RecoversMissingPartitionDirAndRejectsBadMetadata) {
  opts_.partitions = 2;
  {
    auto log = Open();
    ASSERT_TRUE(log);
    MustAppend(*log, 0, "p0");
    MustAppend(*log, 1, "p1");
  }
  std::filesystem::remove_all(PartDir(1));
  {
    auto log = Open();
    ASSERT_TRUE(log);
    EXPECT_EQ(log->EndOffset(PartitionId(1))->value, 0);
    EXPECT_EQ(log->EndOffset(PartitionId(0))->value, 1);
    EXPECT_EQ(MustAppend(*log, 1, "again").value, 0);
  }
  // Empty partition directory (all files gone).
  for (const auto& f : LogFiles(0)) std::filesystem::remove(f);
  {
    auto log = Open();
    ASSERT_TRUE(log);
    EXPECT_EQ(log->EndOffset(PartitionId(0))->value, 0);
  }
  ASSERT_TRUE(env_.FlipByte(JoinPath(dir_, "LOG_META"), 9).ok());
  EXPECT_EQ(OpenLocalLog(&env_, dir_, opts_).status().code(), StatusCode::kCorruption);
  std::filesystem::remove(JoinPath(dir_, "LOG_META"));
  EXPECT_EQ(OpenLocalLog(&env_, dir_, opts_).status().code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace sediment

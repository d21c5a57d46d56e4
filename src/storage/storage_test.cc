// SegmentStore, VerifySegmentBytes, placement and the rate limiter.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/clock.h"
#include "common/coding.h"
#include "common/testing/fault_env.h"
#include "storage/placement.h"
#include "storage/rate_limiter.h"
#include "storage/store.h"
#include "storage/test_util.h"

namespace sediment {
namespace {

using storage_testing::TempDir;
using storage_testing::WriteTestSegment;

std::string ReadAll(const std::string& path) { return Env::Default()->ReadFile(path).value(); }

// Re-seals `bytes` after an edit: recomputes the content hash in the last 8 bytes and returns it.
uint64_t Reseal(std::string* bytes) {
  const uint64_t h = XXH64(bytes->data(), bytes->size() - 8, 0);
  EncodeFixed64(bytes->data() + bytes->size() - 8, h);
  return h;
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rec_ = WriteTestSegment(env_, tmp_.Sub("src"), "a.seg", 100, 50, NodeId(1));
    bytes_ = ReadAll(tmp_.Sub("src/a.seg"));
    rec_.id = SegmentId(7);
  }
  std::vector<std::string> DirEntries(const std::string& dir) {
    if (!env_->FileExists(dir)) return {};
    return env_->ListDir(dir).value();
  }

  Env* env_ = Env::Default();
  TempDir tmp_;
  SegmentRecord rec_;
  std::string bytes_;
};

TEST_F(StoreTest, VerifyAcceptsExactBytes) { EXPECT_TRUE(VerifySegmentBytes(rec_, bytes_).ok()); }

TEST_F(StoreTest, VerifyRejectsWrongSizeHashOrRecord) {
  // One flipped bit anywhere.
  for (size_t pos :
       {size_t{0}, size_t{20}, bytes_.size() / 2, bytes_.size() - 30, bytes_.size() - 1}) {
    std::string bad = bytes_;
    bad[pos] ^= 0x01;
    Status st = VerifySegmentBytes(rec_, bad);
    EXPECT_EQ(st.code(), StatusCode::kCorruption) << pos;
    EXPECT_NE(st.message().find("segment 7"), std::string::npos) << st.ToString();
  }
  EXPECT_EQ(VerifySegmentBytes(rec_, bytes_.substr(0, bytes_.size() - 1)).code(),
            StatusCode::kCorruption);
  EXPECT_EQ(VerifySegmentBytes(rec_, bytes_ + "x").code(), StatusCode::kCorruption);
  EXPECT_EQ(VerifySegmentBytes(rec_, "").code(), StatusCode::kCorruption);
  SegmentRecord other = rec_;
  other.content_hash ^= 1;
  EXPECT_EQ(VerifySegmentBytes(other, bytes_).code(), StatusCode::kCorruption);
  // The right bytes of another segment than the record describes.
  other = rec_;
  other.max_pos.offset.value += 1;
  EXPECT_EQ(VerifySegmentBytes(other, bytes_).code(), StatusCode::kCorruption);
}

TEST_F(StoreTest, VerifyChecksTheFooterNotOnlyTheHash) {
  // A damaged footer whose file was re-sealed with a matching content hash: only the footer
  // checks can catch it.
  std::string bad = bytes_;
  const uint64_t footer_offset = DecodeFixed64(bad.data() + bad.size() - 40);
  bad[footer_offset + 1] ^= 0x40;
  SegmentRecord rec = rec_;
  rec.content_hash = Reseal(&bad);
  Status st = VerifySegmentBytes(rec, bad);
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
  EXPECT_NE(st.message().find("footer"), std::string::npos) << st.ToString();
}

TEST_F(StoreTest, InstallListReadVerify) {
  SegmentStore store(env_, tmp_.Sub("store"));
  EXPECT_TRUE(store.List()->empty());  // dir does not exist yet
  EXPECT_FALSE(store.Has("a.seg"));
  ASSERT_TRUE(store.Install(rec_, bytes_).ok());
  EXPECT_TRUE(store.Has("a.seg"));
  EXPECT_EQ(store.PathOf("a.seg"), tmp_.Sub("store/a.seg"));
  EXPECT_EQ(store.Read("a.seg").value(), bytes_);
  EXPECT_EQ(store.Read("b.seg").status().code(), StatusCode::kNotFound);
  // Temporary and foreign files are not listed.
  ASSERT_TRUE(env_->WriteFileAtomic(tmp_.Sub("store/b.seg.tmp.3"), "x").ok());
  ASSERT_TRUE(env_->WriteFileAtomic(tmp_.Sub("store/notes.txt"), "x").ok());
  EXPECT_EQ(store.List().value(), std::vector<std::string>{"a.seg"});

  uint64_t announced = 0;
  int calls = 0;
  EXPECT_TRUE(store
                  .Verify(rec_,
                          [&](uint64_t n) {
                            announced += n;
                            ++calls;
                            return true;
                          })
                  .ok());
  EXPECT_EQ(announced, rec_.file_size - 8);
  EXPECT_GE(calls, 1);
  EXPECT_EQ(store.Verify(rec_, [](uint64_t) { return false; }).code(), StatusCode::kAborted);

  // Installing again replaces the file atomically (same bytes).
  ASSERT_TRUE(store.Install(rec_, bytes_).ok());
  EXPECT_EQ(store.List().value(), std::vector<std::string>{"a.seg"});
}

TEST_F(StoreTest, VerifyFindsLocalDamageAndMissingFiles) {
  SegmentStore store(env_, tmp_.Sub("store"));
  ASSERT_TRUE(store.Install(rec_, bytes_).ok());
  FaultEnv fenv;
  ASSERT_TRUE(fenv.FlipByte(store.PathOf("a.seg"), rec_.file_size / 2).ok());
  EXPECT_EQ(store.Verify(rec_).code(), StatusCode::kCorruption);
  ASSERT_TRUE(env_->TruncateFile(store.PathOf("a.seg"), rec_.file_size - 5).ok());
  EXPECT_EQ(store.Verify(rec_).code(), StatusCode::kCorruption);
  ASSERT_TRUE(env_->RemoveFile(store.PathOf("a.seg")).ok());
  EXPECT_EQ(store.Verify(rec_).code(), StatusCode::kNotFound);
}

TEST_F(StoreTest, InstallRejectsBadBytesAndLeavesNothing) {
  SegmentStore store(env_, tmp_.Sub("store"));
  std::string bad = bytes_;
  bad[bad.size() / 3] ^= 0x10;
  EXPECT_EQ(store.Install(rec_, bad).code(), StatusCode::kCorruption);
  EXPECT_TRUE(DirEntries(tmp_.Sub("store")).empty());
  SegmentRecord evil = rec_;
  evil.file_name = "../x.seg";
  EXPECT_EQ(store.Install(evil, bytes_).code(), StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, InstallIoErrorLeavesNothingAndKeepsOldFile) {
  FaultEnv fenv;
  SegmentStore store(&fenv, tmp_.Sub("store"));
  fenv.SetSyncFails(true);
  EXPECT_FALSE(store.Install(rec_, bytes_).ok());
  EXPECT_TRUE(DirEntries(tmp_.Sub("store")).empty());
  fenv.SetSyncFails(false);
  ASSERT_TRUE(store.Install(rec_, bytes_).ok());
  fenv.FailWritesAfter(0);
  EXPECT_FALSE(store.Install(rec_, bytes_).ok());
  EXPECT_EQ(DirEntries(tmp_.Sub("store")), std::vector<std::string>{"a.seg"});
  EXPECT_EQ(ReadAll(store.PathOf("a.seg")), bytes_);
}

TEST_F(StoreTest, PinsDeferDeletion) {
  SegmentStore store(env_, tmp_.Sub("store"));
  ASSERT_TRUE(store.Install(rec_, bytes_).ok());
  {
    auto p1 = store.Pin({"a.seg", "zzz.seg"});
    auto p2 = store.Pin({"a.seg"});
    EXPECT_TRUE(store.IsPinned("a.seg"));
    store.DeleteWhenUnpinned("a.seg");
    EXPECT_TRUE(store.Has("a.seg"));
    EXPECT_TRUE(store.IsDeletionPending("a.seg"));
    p1.reset();
    EXPECT_TRUE(store.Has("a.seg"));  // p2 still reads it
    EXPECT_TRUE(store.IsPinned("a.seg"));
    EXPECT_FALSE(store.IsPinned("zzz.seg"));
  }
  EXPECT_FALSE(store.Has("a.seg"));
  EXPECT_FALSE(store.IsPinned("a.seg"));
  EXPECT_FALSE(store.IsDeletionPending("a.seg"));
  store.DeleteWhenUnpinned("a.seg");  // missing: fine

  // Unpinned: deleted at once.
  ASSERT_TRUE(store.Install(rec_, bytes_).ok());
  store.DeleteWhenUnpinned("a.seg");
  EXPECT_FALSE(store.Has("a.seg"));
}

TEST_F(StoreTest, CancelledOrReinstalledFileSurvivesUnpin) {
  SegmentStore store(env_, tmp_.Sub("store"));
  ASSERT_TRUE(store.Install(rec_, bytes_).ok());
  auto pin = store.Pin({"a.seg"});
  store.DeleteWhenUnpinned("a.seg");
  store.CancelDeletion("a.seg");
  pin.reset();
  EXPECT_TRUE(store.Has("a.seg"));

  pin = store.Pin({"a.seg"});
  store.DeleteWhenUnpinned("a.seg");
  ASSERT_TRUE(store.Install(rec_, bytes_).ok());  // a fresh copy replaces the doomed one
  EXPECT_FALSE(store.IsDeletionPending("a.seg"));
  pin.reset();
  EXPECT_TRUE(store.Has("a.seg"));
}

TEST_F(StoreTest, AccessTimesFollowInstallPinAndTouch) {
  SegmentStore store(env_, tmp_.Sub("store"));
  EXPECT_EQ(store.LastAccess("a.seg"), 0u);  // never accessed
  ASSERT_TRUE(store.Install(rec_, bytes_).ok());
  const uint64_t installed = store.LastAccess("a.seg");
  EXPECT_GT(installed, 0u);
  EXPECT_EQ(store.FileSize("a.seg").value(), bytes_.size());
  EXPECT_EQ(store.FileSize("b.seg").status().code(), StatusCode::kNotFound);
  store.Touch("b.seg");
  EXPECT_GT(store.LastAccess("b.seg"), installed);
  auto pin = store.Pin({"a.seg"});
  const uint64_t pinned = store.LastAccess("a.seg");
  EXPECT_GT(pinned, store.LastAccess("b.seg"));
  store.Touch("b.seg");
  EXPECT_GT(store.LastAccess("b.seg"), pinned);
  // Deleted: forgotten (a later copy starts as the oldest until used).
  store.DeleteWhenUnpinned("a.seg");
  EXPECT_EQ(store.LastAccess("a.seg"), pinned);  // still there for its reader
  pin.reset();
  EXPECT_EQ(store.LastAccess("a.seg"), 0u);
  // Another store over the same directory (a restart) knows no access times.
  ASSERT_TRUE(store.Install(rec_, bytes_).ok());
  SegmentStore restarted(env_, tmp_.Sub("store"));
  EXPECT_EQ(restarted.LastAccess("a.seg"), 0u);
}

// ---- Placement ----

SegmentRecord Seg(int64_t id, std::set<NodeId> replicas = {}) {
  SegmentRecord s;
  s.id = SegmentId(id);
  s.replicas = std::move(replicas);
  return s;
}

std::vector<NodeId> Nodes(std::initializer_list<int64_t> ids) {
  std::vector<NodeId> out;
  for (auto i : ids) out.emplace_back(i);
  return out;
}

std::set<NodeId> AsSet(const std::vector<NodeId>& v) { return {v.begin(), v.end()}; }

TEST(PlacementTest, ScoreIsXxh64OfIds) {
  char buf[16];
  EncodeFixed64(buf, 42);
  EncodeFixed64(buf + 8, 7);
  EXPECT_EQ(RendezvousScore(SegmentId(42), NodeId(7)), XXH64(buf, 16, 0));
  EXPECT_NE(RendezvousScore(SegmentId(42), NodeId(7)), RendezvousScore(SegmentId(7), NodeId(42)));
}

TEST(PlacementTest, RankIsDeterministicAndOrderIndependent) {
  auto a = RankNodes(SegmentId(5), Nodes({1, 2, 3, 4, 5}));
  auto b = RankNodes(SegmentId(5), Nodes({5, 3, 1, 4, 2, 3}));
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), 5u);
  for (size_t i = 1; i < a.size(); ++i) {
    EXPECT_GE(RendezvousScore(SegmentId(5), a[i - 1]), RendezvousScore(SegmentId(5), a[i]));
  }
  EXPECT_EQ(DesiredHolders(Seg(5), Nodes({1, 2, 3, 4, 5}), 2),
            std::vector<NodeId>(a.begin(), a.begin() + 2));
}

TEST(PlacementTest, FewerNodesThanRAndZero) {
  EXPECT_EQ(AsSet(DesiredHolders(Seg(1), Nodes({3, 9}), 3)), AsSet(Nodes({3, 9})));
  EXPECT_TRUE(DesiredHolders(Seg(1), Nodes({3, 9}), 0).empty());
  EXPECT_TRUE(DesiredHolders(Seg(1), {}, 2).empty());
}

TEST(PlacementTest, PresentHoldersAreKeptFirst) {
  const auto all = Nodes({1, 2, 3, 4, 5});
  for (int64_t id = 1; id <= 50; ++id) {
    auto ranked = RankNodes(SegmentId(id), all);
    // The worst-ranked node holds a copy: it stays, the best-ranked non-holder joins it.
    NodeId worst = ranked.back();
    auto d = DesiredHolders(Seg(id, {worst}), all, 2);
    EXPECT_EQ(d, (std::vector<NodeId>{worst, ranked[0]})) << id;
    // Two holders beyond r = 1: the better-ranked one is kept.
    d = DesiredHolders(Seg(id, {ranked[3], ranked[2]}), all, 1);
    EXPECT_EQ(d, std::vector<NodeId>{ranked[2]}) << id;
    // A holder that is not present does not count.
    auto present = all;
    present.erase(std::find(present.begin(), present.end(), worst));
    d = DesiredHolders(Seg(id, {worst}), present, 2);
    EXPECT_EQ(d, (std::vector<NodeId>{ranked[0], ranked[1]})) << id;
  }
}

TEST(PlacementTest, StableWhenUnrelatedNodesComeAndGo) {
  const auto five = Nodes({1, 2, 3, 4, 5});
  const auto six = Nodes({1, 2, 3, 4, 5, 6});
  const auto without3 = Nodes({1, 2, 4, 5});
  int moved_to_6 = 0;
  for (int64_t id = 1; id <= 2000; ++id) {
    auto before = AsSet(DesiredHolders(Seg(id), five, 2));
    // Adding node 6: a placement changes only by node 6 taking one slot.
    auto added = AsSet(DesiredHolders(Seg(id), six, 2));
    if (added != before) {
      ++moved_to_6;
      EXPECT_EQ(added.count(NodeId(6)), 1u) << id;
      std::set<NodeId> common;
      std::set_intersection(before.begin(), before.end(), added.begin(), added.end(),
                            std::inserter(common, common.end()));
      EXPECT_EQ(common.size(), 1u) << id;
    }
    // Removing node 3: placements without it do not change.
    auto removed = AsSet(DesiredHolders(Seg(id), without3, 2));
    if (before.count(NodeId(3)) == 0) {
      EXPECT_EQ(removed, before) << id;
    } else {
      EXPECT_EQ(removed.size(), 2u);
      EXPECT_EQ(removed.count(NodeId(3)), 0u);
    }
    // Sticky: when the copies already exist, a new node moves nothing.
    SegmentRecord placed = Seg(id, before);
    EXPECT_EQ(AsSet(DesiredHolders(placed, six, 2)), before) << id;
  }
  // Node 6 gets about 2/6 of the placements (2000 * 2 / 6 = 667 slots).
  EXPECT_GT(moved_to_6, 550);
  EXPECT_LT(moved_to_6, 780);
}

TEST(PlacementTest, SpreadsEvenly) {
  const auto nodes = Nodes({1, 2, 3, 4, 5});
  std::map<NodeId, int> count;
  const int segments = 10000;
  for (int64_t id = 1; id <= segments; ++id) {
    for (NodeId n : DesiredHolders(Seg(id), nodes, 2)) ++count[n];
  }
  ASSERT_EQ(count.size(), 5u);
  for (const auto& [n, c] : count) {
    EXPECT_GT(c, 4000 * 0.9) << n.value;
    EXPECT_LT(c, 4000 * 1.1) << n.value;
  }
  // Sticky fill: a copy already on node 1 (the writer) for every segment, r = 2: the second
  // copies spread evenly over the other four.
  count.clear();
  for (int64_t id = 1; id <= segments; ++id) {
    auto d = DesiredHolders(Seg(id, {NodeId(1)}), nodes, 2);
    ASSERT_EQ(d.front(), NodeId(1));
    ++count[d[1]];
  }
  ASSERT_EQ(count.size(), 4u);
  for (const auto& [n, c] : count) {
    EXPECT_GT(c, 2500 * 0.9) << n.value;
    EXPECT_LT(c, 2500 * 1.1) << n.value;
  }
}

// ---- RateLimiter ----

struct SleepRecorder {
  ManualClock* clock;
  int64_t slept_us = 0;
  int sleeps = 0;
  bool interrupt = false;
  RateLimiter::SleepFn Fn() {
    return [this](std::chrono::microseconds d) {
      slept_us += d.count();
      ++sleeps;
      clock->AdvanceMillis((d.count() + 999) / 1000);
      return !interrupt;
    };
  }
};

TEST(RateLimiterTest, BoundsBytesPerElapsedTime) {
  ManualClock clock;
  SleepRecorder rec{&clock};
  const uint64_t rate = 100'000;
  RateLimiter limiter(&clock, rate, rec.Fn());
  EXPECT_EQ(limiter.bytes_per_second(), rate);
  const int64_t start = clock.MonotonicMicros();
  uint64_t total = 0;
  for (int i = 0; i < 200; ++i) {
    const uint64_t n = 3000 + (i % 7) * 1000;
    ASSERT_TRUE(limiter.Acquire(n));
    total += n;
    // Never more than one second of burst ahead of the rate.
    const double elapsed_s = (clock.MonotonicMicros() - start) / 1e6;
    EXPECT_LE(static_cast<double>(total), rate + rate * elapsed_s + 1) << i;
  }
  const double elapsed_s = (clock.MonotonicMicros() - start) / 1e6;
  EXPECT_GE(elapsed_s, static_cast<double>(total - rate) / rate);
  EXPECT_GT(rec.sleeps, 0);
}

TEST(RateLimiterTest, BurstNeedsNoSleepAndRefills) {
  ManualClock clock;
  SleepRecorder rec{&clock};
  RateLimiter limiter(&clock, 1000, rec.Fn());
  EXPECT_TRUE(limiter.Acquire(600));
  EXPECT_TRUE(limiter.Acquire(400));
  EXPECT_EQ(rec.sleeps, 0);
  clock.AdvanceMillis(500);  // refills 500
  EXPECT_TRUE(limiter.Acquire(500));
  EXPECT_EQ(rec.sleeps, 0);
  EXPECT_TRUE(limiter.Acquire(250));  // 250 in debt: a quarter second
  EXPECT_EQ(rec.sleeps, 1);
  EXPECT_EQ(rec.slept_us, 250'000);
  clock.AdvanceMillis(100'000);  // never more than one second of budget
  EXPECT_TRUE(limiter.Acquire(1000));
  EXPECT_EQ(rec.sleeps, 1);
  EXPECT_TRUE(limiter.Acquire(1));
  EXPECT_EQ(rec.sleeps, 2);
}

TEST(RateLimiterTest, UnlimitedAndInterrupted) {
  ManualClock clock;
  SleepRecorder rec{&clock};
  RateLimiter unlimited(&clock, 0, rec.Fn());
  EXPECT_TRUE(unlimited.Acquire(1ull << 40));
  EXPECT_EQ(rec.sleeps, 0);
  RateLimiter limited(&clock, 10, rec.Fn());
  rec.interrupt = true;
  EXPECT_FALSE(limited.Acquire(1000));
}

}  // namespace
}  // namespace sediment

// Replicator: three (or four) nodes simulated in one process on one Global, each with its own
// segment directory, a fake membership view and a fetcher that serves from the other stores.
#include "storage/replicator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/testing/fault_env.h"
#include "storage/placement.h"
#include "storage/test_util.h"

namespace sediment {
namespace {

using namespace std::chrono_literals;
using storage_testing::Liveness;
using storage_testing::WriteTestSegment;

class ReplicatorTest : public storage_testing::StorageClusterTest<> {
 protected:
  void AddNodes(int n, std::optional<ReplicatorOptions> opts = std::nullopt) {
    for (int i = 1; i <= n; ++i) AddNode(NodeId(i), opts);
  }
  Node& AddNode(NodeId id, std::optional<ReplicatorOptions> opts = std::nullopt) {
    return AddStorageNode(id, opts ? *opts : RepOptions());
  }

  std::vector<SegmentId> SegmentIds() {
    std::vector<SegmentId> out;
    global_->Read([&](const GlobalState& s) {
      for (const auto& [id, seg] : s.segments) out.push_back(id);
    });
    return out;
  }
  uint32_t R() {
    uint32_t r = 0;
    global_->Read([&](const GlobalState& s) { r = EffectiveReplicationFactor(s); });
    return r;
  }

  void Round() { ReplicateRound(); }
  void Rounds(int n) {
    for (int i = 0; i < n; ++i) Round();
  }

  // Every listed holder that is not gone has the exact file.
  void ExpectListedCopiesIntact() {
    for (SegmentId id : SegmentIds()) {
      SegmentRecord seg = Record(id);
      for (NodeId h : seg.replicas) {
        if (members_.Get(h) == Liveness::kGone) continue;
        Status st = N(h.value).store->Verify(seg);
        EXPECT_TRUE(st.ok()) << "segment " << id.value << " on node " << h.value << ": "
                             << st.ToString();
      }
    }
  }
};

TEST_F(ReplicatorTest, PullsAndAnnouncesUntilEverySegmentHasRCopies) {
  AddNodes(3);
  ASSERT_EQ(R(), 2u);
  std::vector<SegmentId> ids;
  for (int i = 0; i < 20; ++i) ids.push_back(AddSegment());
  Round();
  uint64_t copied = 0;
  for (auto& [id, node] : nodes_) {
    auto p = node.rep->progress();
    copied += p.copied_segments;
    EXPECT_EQ(p.pending_segments, 0u);
    EXPECT_EQ(p.failed_pulls, 0u);
    EXPECT_EQ(p.passes, 1u);
  }
  EXPECT_EQ(copied, 20u);
  std::map<NodeId, int> second_copies;
  for (SegmentId id : ids) {
    auto reps = Replicas(id);
    ASSERT_EQ(reps.size(), 2u) << id.value;
    EXPECT_EQ(reps.count(NodeId(1)), 1u);
    for (NodeId n : reps) ++second_copies[n];
    // Exactly where placement wants it.
    std::vector<NodeId> present{NodeId(1), NodeId(2), NodeId(3)};
    SegmentRecord seg = Record(id);
    auto desired = DesiredHolders(seg, present, 2);
    EXPECT_EQ(std::set<NodeId>(desired.begin(), desired.end()), reps);
  }
  EXPECT_GT(second_copies[NodeId(2)], 0);
  EXPECT_GT(second_copies[NodeId(3)], 0);
  ExpectListedCopiesIntact();

  // Nothing changes any more: no Global events, no fetches.
  const Offset applied = global_->Applied();
  const int fetches = fetcher_.fetches;
  Rounds(3);
  EXPECT_EQ(global_->Applied(), applied);
  EXPECT_EQ(fetcher_.fetches, fetches);

  // A higher factor: every node gets every segment.
  ASSERT_TRUE(global_->Submit(SetReplicationFactor{3}).ok());
  Round();
  for (SegmentId id : ids) EXPECT_EQ(Replicas(id).size(), 3u);
  ExpectListedCopiesIntact();
}

TEST_F(ReplicatorTest, GoneNodeIsRepairedBeforeItsCopiesAreForgotten) {
  AddNodes(3);
  std::vector<SegmentId> ids;
  for (int i = 0; i < 12; ++i) ids.push_back(AddSegment());
  Round();
  std::vector<SegmentId> on3;
  for (SegmentId id : ids) {
    if (Replicas(id).count(NodeId(3))) on3.push_back(id);
  }
  ASSERT_FALSE(on3.empty());

  // Silent but within grace: nothing is re-created.
  members_.Set(NodeId(3), Liveness::kSilent);
  const Offset applied = global_->Applied();
  Round();
  EXPECT_EQ(global_->Applied(), applied);

  // Gone: node 1 alone cannot forget node 3's copies (only one present copy each) ...
  members_.Set(NodeId(3), Liveness::kGone);
  ASSERT_TRUE(N(1).rep->RunOnce().ok());
  for (SegmentId id : on3) EXPECT_EQ(Replicas(id), (std::set<NodeId>{NodeId(1), NodeId(3)}));
  EXPECT_EQ(N(1).rep->progress().dead_replicas_forgotten, 0u);
  // ... node 2 re-creates them ...
  ASSERT_TRUE(N(2).rep->RunOnce().ok());
  for (SegmentId id : on3) {
    EXPECT_EQ(Replicas(id), (std::set<NodeId>{NodeId(1), NodeId(2), NodeId(3)}));
  }
  EXPECT_EQ(N(2).rep->progress().copied_segments, ids.size());  // all 12 now on node 2
  // ... then node 1 (the lowest live holder) forgets the dead copies.
  ASSERT_TRUE(N(2).rep->RunOnce().ok());  // node 2 is not the lowest live holder
  EXPECT_EQ(N(2).rep->progress().dead_replicas_forgotten, 0u);
  ASSERT_TRUE(N(1).rep->RunOnce().ok());
  EXPECT_EQ(N(1).rep->progress().dead_replicas_forgotten, on3.size());
  for (SegmentId id : ids) EXPECT_EQ(Replicas(id), (std::set<NodeId>{NodeId(1), NodeId(2)}));
  ExpectListedCopiesIntact();

  // Node 3 comes back: its files left Global and are deleted after the delay; nothing else moves.
  members_.Set(NodeId(3), Liveness::kAlive);
  ASSERT_FALSE(N(3).store->List()->empty());
  Round();
  EXPECT_FALSE(N(3).store->List()->empty());
  clock_.AdvanceMillis(31'000);
  Round();
  EXPECT_TRUE(N(3).store->List()->empty());
  EXPECT_EQ(N(3).rep->progress().files_deleted, on3.size());
  for (SegmentId id : ids) EXPECT_EQ(Replicas(id), (std::set<NodeId>{NodeId(1), NodeId(2)}));
}

TEST_F(ReplicatorTest, DeadCopiesAreForgottenOnlyOnceRPresentCopiesExist) {
  AddNodes(4);
  ASSERT_TRUE(global_->Submit(SetReplicationFactor{3}).ok());
  members_.Set(NodeId(2), Liveness::kGone);
  SegmentId id = AddSegment();
  Round();
  ASSERT_EQ(Replicas(id), (std::set<NodeId>{NodeId(1), NodeId(3), NodeId(4)}));
  // Nodes 3 and 4 go, node 2 is back, R drops to 2: one present copy, two listed dead ones.
  members_.Set(NodeId(3), Liveness::kGone);
  members_.Set(NodeId(4), Liveness::kGone);
  members_.Set(NodeId(2), Liveness::kAlive);
  ASSERT_TRUE(global_->Submit(SetReplicationFactor{2}).ok());
  ASSERT_TRUE(N(1).rep->RunOnce().ok());
  // Forgetting one dead copy would still leave 2 listed, but only 1 present: not yet.
  EXPECT_EQ(Replicas(id), (std::set<NodeId>{NodeId(1), NodeId(3), NodeId(4)}));
  ASSERT_TRUE(N(2).rep->RunOnce().ok());
  EXPECT_EQ(Replicas(id).size(), 4u);
  ASSERT_TRUE(N(1).rep->RunOnce().ok());
  EXPECT_EQ(Replicas(id), (std::set<NodeId>{NodeId(1), NodeId(2)}));
  EXPECT_EQ(N(1).rep->progress().dead_replicas_forgotten, 2u);
}

TEST_F(ReplicatorTest, SegmentWithoutLiveHolderWaitsForOne) {
  AddNodes(3);
  SegmentId id = AddSegment(/*writer=*/3);
  members_.Set(NodeId(3), Liveness::kGone);
  Round();
  Round();
  EXPECT_EQ(Replicas(id), std::set<NodeId>{NodeId(3)});
  uint64_t pending = 0;
  for (int64_t n : {1, 2}) {
    auto p = N(n).rep->progress();
    pending += p.pending_segments;
    if (p.pending_segments) {
      EXPECT_NE(p.last_error.find("no live holder"), std::string::npos) << p.last_error;
    }
  }
  EXPECT_EQ(pending, 2u);  // both survivors want it (R = 2 among the 2 present nodes)
  members_.Set(NodeId(3), Liveness::kAlive);
  Round();
  EXPECT_EQ(Replicas(id).size(), 2u);
  ExpectListedCopiesIntact();
}

TEST_F(ReplicatorTest, ReturningNodeDropsExtraCopiesNeverBelowR) {
  AddNodes(3);
  std::vector<SegmentId> ids;
  for (int i = 0; i < 12; ++i) ids.push_back(AddSegment());
  Round();
  // Node 3 goes; node 2 re-creates its copies, but nobody forgets node 3's yet.
  members_.Set(NodeId(3), Liveness::kGone);
  ASSERT_TRUE(N(2).rep->RunOnce().ok());
  int three_copies = 0;
  for (SegmentId id : ids) three_copies += Replicas(id).size() == 3;
  ASSERT_GT(three_copies, 0);
  // Node 3 returns before the dead copies were forgotten: R + 1 copies, all present.
  members_.Set(NodeId(3), Liveness::kAlive);
  // All three decide on the same state at the same time.
  std::vector<std::thread> threads;
  for (auto& [id, node] : nodes_) {
    threads.emplace_back([&node] { EXPECT_TRUE(node.rep->RunOnce().ok()); });
  }
  for (auto& t : threads) t.join();
  Round();
  uint64_t dropped = 0;
  for (auto& [id, node] : nodes_) dropped += node.rep->progress().extra_copies_dropped;
  EXPECT_EQ(dropped, static_cast<uint64_t>(three_copies));
  for (SegmentId id : ids) {
    auto reps = Replicas(id);
    EXPECT_EQ(reps.size(), 2u) << id.value;
    // The kept copies are where placement wants them.
    std::vector<NodeId> all{NodeId(1), NodeId(2), NodeId(3)};
    auto desired = DesiredHolders(Record(id), all, 2);
    EXPECT_EQ(std::set<NodeId>(desired.begin(), desired.end()), reps);
  }
  ExpectListedCopiesIntact();
  // Dropped files stay for the deletion delay (remote readers), then go.
  size_t files_before = 0, files_after = 0;
  for (auto& [id, node] : nodes_) files_before += node.store->List()->size();
  EXPECT_EQ(files_before, ids.size() * 2 + three_copies);
  clock_.AdvanceMillis(31'000);
  Round();
  for (auto& [id, node] : nodes_) files_after += node.store->List()->size();
  EXPECT_EQ(files_after, ids.size() * 2);
}

TEST_F(ReplicatorTest, ConcurrentDropsNeverGoBelowR) {
  // Four holders of every segment, R lowered to 1 then 2: whatever order the nodes' removals land
  // in, the apply rule keeps at least R.
  AddNodes(4);
  ASSERT_TRUE(global_->Submit(SetReplicationFactor{4}).ok());
  std::vector<SegmentId> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(AddSegment());
  Round();
  for (SegmentId id : ids) ASSERT_EQ(Replicas(id).size(), 4u);
  ASSERT_TRUE(global_->Submit(SetReplicationFactor{2}).ok());
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<std::thread> threads;
    for (auto& [id, node] : nodes_) {
      threads.emplace_back([&node] { EXPECT_TRUE(node.rep->RunOnce().ok()); });
    }
    for (auto& t : threads) t.join();
  }
  for (SegmentId id : ids) EXPECT_EQ(Replicas(id).size(), 2u) << id.value;
  ExpectListedCopiesIntact();
  // The apply rule is what protects R: a drop that would leave fewer is rejected.
  SegmentRecord seg = Record(ids[0]);
  NodeId holder = *seg.replicas.begin();
  auto r = global_->Submit(RemoveSegmentReplica{ids[0], holder, 2});
  EXPECT_EQ(r.status().code(), StatusCode::kRejected);
}

TEST_F(ReplicatorTest, ScrubFindsCorruptCopyWhichIsFetchedAgain) {
  AddNodes(3);
  std::vector<SegmentId> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(AddSegment());
  Round();
  SegmentId victim{0};
  for (SegmentId id : ids) {
    if (Replicas(id).count(NodeId(2))) victim = id;
  }
  ASSERT_NE(victim.value, 0);
  SegmentRecord seg = Record(victim);
  FaultEnv fenv;
  ASSERT_TRUE(fenv.FlipByte(N(2).store->PathOf(seg.file_name), seg.file_size / 2).ok());

  ASSERT_TRUE(N(2).rep->ScrubOnce().ok());
  auto p = N(2).rep->progress();
  EXPECT_EQ(p.corrupt_copies, 1u);
  EXPECT_EQ(p.scrubs, 1u);
  EXPECT_NE(p.last_error.find("corrupt"), std::string::npos);
  EXPECT_EQ(Replicas(victim), std::set<NodeId>{NodeId(1)});
  EXPECT_FALSE(N(2).store->Has(seg.file_name));
  // Clean copies elsewhere are untouched.
  ASSERT_TRUE(N(1).rep->ScrubOnce().ok());
  EXPECT_EQ(N(1).rep->progress().corrupt_copies, 0u);

  ASSERT_TRUE(N(2).rep->RunOnce().ok());
  EXPECT_EQ(Replicas(victim), (std::set<NodeId>{NodeId(1), NodeId(2)}));
  EXPECT_TRUE(N(2).store->Verify(seg).ok());
  ExpectListedCopiesIntact();
}

TEST_F(ReplicatorTest, ReportedCorruptCopyIsDroppedAfterItsReaderAndFetchedAgain) {
  AddNodes(3);
  SegmentId id = AddSegment();
  Round();
  SegmentRecord seg = Record(id);
  NodeId other = *std::next(seg.replicas.begin());  // the non-writer copy
  ASSERT_NE(other, NodeId(1));
  Node& n = N(other.value);
  auto pin = n.store->Pin({seg.file_name});  // the reader that found the damage
  n.rep->ReportCorrupt(id, Status::Corruption("block 0 checksum mismatch"));
  EXPECT_EQ(n.rep->progress().corrupt_copies, 1u);
  EXPECT_EQ(Replicas(id), std::set<NodeId>{NodeId(1)});
  EXPECT_TRUE(n.store->Has(seg.file_name));  // still being read
  EXPECT_TRUE(n.store->IsDeletionPending(seg.file_name));
  pin.reset();
  EXPECT_FALSE(n.store->Has(seg.file_name));
  // Reports about segments not listed here change nothing.
  n.rep->ReportCorrupt(id, Status::Corruption("again"));
  n.rep->ReportCorrupt(SegmentId(999), Status::Corruption("unknown"));
  EXPECT_EQ(n.rep->progress().corrupt_copies, 1u);

  ASSERT_TRUE(n.rep->RunOnce().ok());
  EXPECT_EQ(Replicas(id).count(other), 1u);
  EXPECT_TRUE(n.store->Verify(seg).ok());
}

TEST_F(ReplicatorTest, ReportWhilePinnedThenRepullKeepsTheNewFile) {
  AddNodes(2);
  SegmentId id = AddSegment();
  Round();
  SegmentRecord seg = Record(id);
  auto pin = N(2).store->Pin({seg.file_name});
  FaultEnv fenv;
  ASSERT_TRUE(fenv.FlipByte(N(2).store->PathOf(seg.file_name), seg.file_size / 3).ok());
  N(2).rep->ReportCorrupt(id, Status::Corruption("bad block"));
  // Pulled again while the old file is still pinned: the fresh copy replaces it, and releasing
  // the old reader's pin does not delete the fresh one.
  ASSERT_TRUE(N(2).rep->RunOnce().ok());
  EXPECT_EQ(Replicas(id).count(NodeId(2)), 1u);
  EXPECT_EQ(N(2).rep->progress().copied_segments, 2u);  // first copy and the re-pull
  pin.reset();
  EXPECT_TRUE(N(2).store->Verify(seg).ok());
}

TEST_F(ReplicatorTest, CorruptFetchIsRejectedAndNothingAnnounced) {
  AddNodes(2);
  SegmentId id = AddSegment();
  fetcher_.corrupt = true;
  ASSERT_TRUE(N(1).rep->RunOnce().ok());
  Status st = N(2).rep->RunOnce();
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
  auto p = N(2).rep->progress();
  EXPECT_EQ(p.failed_pulls, 1u);
  EXPECT_EQ(p.copied_segments, 0u);
  EXPECT_EQ(p.pending_segments, 1u);
  EXPECT_NE(p.last_error.find("content hash"), std::string::npos) << p.last_error;
  EXPECT_EQ(Replicas(id), std::set<NodeId>{NodeId(1)});
  auto entries = env_->FileExists(N(2).store->dir()) ? env_->ListDir(N(2).store->dir()).value()
                                                     : std::vector<std::string>{};
  EXPECT_TRUE(entries.empty());  // no file, no temporary file
  fetcher_.corrupt = false;
  ASSERT_TRUE(N(2).rep->RunOnce().ok());
  EXPECT_EQ(Replicas(id), (std::set<NodeId>{NodeId(1), NodeId(2)}));
  EXPECT_EQ(N(2).rep->progress().pending_segments, 0u);
}

TEST_F(ReplicatorTest, FailingSourceFallsBackToTheNextHolder) {
  AddNodes(3);
  ASSERT_TRUE(global_->Submit(SetReplicationFactor{2}).ok());
  SegmentId id = AddSegment();
  Round();
  ASSERT_TRUE(global_->Submit(SetReplicationFactor{3}).ok());
  auto reps = Replicas(id);
  NodeId missing{0};
  for (int64_t n : {1, 2, 3}) {
    if (!reps.count(NodeId(n))) missing = NodeId(n);
  }
  std::vector<NodeId> holders(reps.begin(), reps.end());
  auto ranked = RankNodes(id, holders);
  fetcher_.fail_from = {ranked[0]};
  ASSERT_TRUE(N(missing.value).rep->RunOnce().ok());
  EXPECT_EQ(Replicas(id).size(), 3u);
  EXPECT_EQ(N(missing.value).rep->progress().failed_pulls, 1u);
  fetcher_.fail_from.clear();
}

TEST_F(ReplicatorTest, SegmentRemovedWhileCopyingIsNotKept) {
  AddNodes(2);
  SegmentId id = AddSegment();
  fetcher_.on_fetch = [&](NodeId, const SegmentRecord& seg) {
    EXPECT_TRUE(global_->Submit(RemoveSegments{{seg.id}}).ok());
  };
  ASSERT_TRUE(N(2).rep->RunOnce().ok());
  EXPECT_TRUE(Record(id).file_name.empty());
  EXPECT_TRUE(N(2).store->List()->empty());
  EXPECT_EQ(N(2).rep->progress().copied_segments, 0u);
}

TEST_F(ReplicatorTest, ExistingLocalFileIsReusedWhenIntact) {
  AddNodes(2);
  SegmentId a = AddSegment();
  SegmentId b = AddSegment();
  SegmentRecord ra = Record(a), rb = Record(b);
  // Node 2 already has both files (e.g. an earlier life); b's is damaged.
  ASSERT_TRUE(N(2).store->Install(ra, N(1).store->Read(ra.file_name).value()).ok());
  ASSERT_TRUE(N(2).store->Install(rb, N(1).store->Read(rb.file_name).value()).ok());
  FaultEnv fenv;
  ASSERT_TRUE(fenv.FlipByte(N(2).store->PathOf(rb.file_name), 20).ok());
  ASSERT_TRUE(N(2).rep->RunOnce().ok());
  auto p = N(2).rep->progress();
  EXPECT_EQ(p.reused_segments, 1u);
  EXPECT_EQ(p.copied_segments, 1u);
  EXPECT_EQ(fetcher_.fetches, 1);
  EXPECT_EQ(Replicas(a).size(), 2u);
  EXPECT_EQ(Replicas(b).size(), 2u);
  ExpectListedCopiesIntact();
}

TEST_F(ReplicatorTest, MissingFileIsWithdrawnAndFetchedAgain) {
  AddNodes(2);
  SegmentId id = AddSegment();
  Round();
  SegmentRecord seg = Record(id);
  ASSERT_TRUE(env_->RemoveFile(N(2).store->PathOf(seg.file_name)).ok());
  ASSERT_TRUE(N(2).rep->RunOnce().ok());  // withdraws the copy
  EXPECT_EQ(N(2).rep->progress().missing_copies, 1u);
  EXPECT_EQ(Replicas(id), std::set<NodeId>{NodeId(1)});
  ASSERT_TRUE(N(2).rep->RunOnce().ok());  // pulls it again
  EXPECT_EQ(Replicas(id), (std::set<NodeId>{NodeId(1), NodeId(2)}));
  EXPECT_TRUE(N(2).store->Verify(seg).ok());
}

TEST_F(ReplicatorTest, UnlistedFilesGoAfterTheDelayNeverWhilePinnedUnknownOnesStay) {
  AddNodes(2);
  SegmentId id = AddSegment();
  Round();
  SegmentRecord seg = Record(id);
  // A file this node never saw listed (a digest flush not yet registered): left alone.
  ASSERT_TRUE(env_->WriteFileAtomic(N(2).store->PathOf("unregistered.seg"), "x").ok());
  ASSERT_TRUE(global_->Submit(RemoveSegments{{id}}).ok());  // retention
  auto pin = N(2).store->Pin({seg.file_name});
  Round();
  clock_.AdvanceMillis(20'000);
  Round();
  EXPECT_TRUE(N(1).store->Has(seg.file_name));
  EXPECT_TRUE(N(2).store->Has(seg.file_name));
  clock_.AdvanceMillis(11'000);
  Round();
  EXPECT_FALSE(N(1).store->Has(seg.file_name));
  EXPECT_TRUE(N(2).store->Has(seg.file_name));  // pinned: deferred
  EXPECT_TRUE(N(2).store->IsDeletionPending(seg.file_name));
  pin.reset();
  EXPECT_FALSE(N(2).store->Has(seg.file_name));
  clock_.AdvanceMillis(60'000);
  Round();
  EXPECT_TRUE(N(2).store->Has("unregistered.seg"));
}

TEST_F(ReplicatorTest, FileRegisteredAndRemovedBetweenPassesIsDeletedPendingOneStays) {
  AddNodes(1);
  // Registered and removed (retention of a backfill) before any pass saw it listed.
  SegmentId gone = AddSegment();
  const std::string gone_file = Record(gone).file_name;
  ASSERT_TRUE(global_->Submit(RemoveSegments{{gone}}).ok());
  // A flush written but not registered yet: its events are above flushed_through.
  SegmentRecord pending =
      WriteTestSegment(env_, N(1).store->dir(), "pending.seg", next_offset_ + 100, 5, NodeId(1));
  Round();
  clock_.AdvanceMillis(31'000);
  Round();
  EXPECT_FALSE(N(1).store->Has(gone_file));
  EXPECT_TRUE(N(1).store->Has("pending.seg"));
  // Its registration lands: kept, and listed.
  pending.epoch = Epoch(1);
  ASSERT_TRUE(global_->Submit(RegisterSegment{pending, Offset(next_offset_ + 105)}).ok());
  clock_.AdvanceMillis(31'000);
  Round();
  EXPECT_TRUE(N(1).store->Has("pending.seg"));
}

TEST_F(ReplicatorTest, StagedMergeOutputIsReplicatedThenInputsGo) {
  AddNodes(3);
  SegmentId a = AddSegment(1, 0, 10);
  SegmentId b = AddSegment(1, 0, 10);
  Round();
  // Node 1 merges a and b into one file and stages it.
  SegmentRecord ra = Record(a), rb = Record(b);
  SegmentRecord out = WriteTestSegment(env_, N(1).store->dir(), "merged.seg",
                                       ra.min_pos.offset.value, 20, NodeId(1));
  out.epoch = Epoch(1);
  auto staged = global_->Submit(StageMerge{out, {a, b}});
  ASSERT_TRUE(staged.ok()) << staged.status().ToString();
  EXPECT_EQ(global_->Submit(CommitMerge{staged->segment_id}).status().code(),
            StatusCode::kRejected);  // one replica only
  Round();
  EXPECT_EQ(Replicas(staged->segment_id).size(), 2u);
  ASSERT_TRUE(global_->Submit(CommitMerge{staged->segment_id}).ok());
  Round();
  clock_.AdvanceMillis(31'000);
  Round();
  for (auto& [id, node] : nodes_) {
    EXPECT_FALSE(node.store->Has(ra.file_name));
    EXPECT_FALSE(node.store->Has(rb.file_name));
  }
  ExpectListedCopiesIntact();
}

TEST_F(ReplicatorTest, ThrottleLimitsPullAndScrubBytes) {
  ReplicatorOptions o = RepOptions();
  o.max_bytes_per_second = 100'000;
  AddNodes(2, o);
  uint64_t total = 0;
  for (int i = 0; i < 8; ++i)
    total += Record(AddSegment(1, /*pad=*/1000, /*events=*/100)).file_size;
  ASSERT_GT(total, 250'000u);
  const int64_t start = clock_.MonotonicMicros();
  Round();
  const double elapsed_s = (clock_.MonotonicMicros() - start) / 1e6;
  EXPECT_EQ(N(2).rep->progress().copied_bytes, total);
  EXPECT_EQ(N(2).rep->progress().max_bytes_per_second, 100'000u);
  // At most one second of burst plus the rate.
  EXPECT_GE(elapsed_s, (total - 100'000.0) / 100'000.0);
  EXPECT_GT(slept_us_, 0);
  // Scrubbing reads all of node 2's copies through the same limiter.
  const int64_t before = clock_.MonotonicMicros();
  ASSERT_TRUE(N(2).rep->ScrubOnce().ok());
  const double scrub_s = (clock_.MonotonicMicros() - before) / 1e6;
  EXPECT_GE(scrub_s, (total - 8 * 8 - 100'000.0) / 100'000.0);
}

TEST_F(ReplicatorTest, BackgroundThreadReplicatesAndStops) {
  AddNodes(3);
  std::vector<SegmentId> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(AddSegment());
  for (auto& [id, node] : nodes_) node.rep->Start();
  // Done when every segment has its two copies and every node's thread has begun a pass (a
  // node whose thread was scheduled late may not have, even after the others copied everything).
  bool done = false;
  for (int i = 0; i < 1000 && !done; ++i) {
    done = true;
    for (SegmentId id : ids) done = done && Replicas(id).size() == 2;
    for (auto& [id, node] : nodes_) done = done && node.rep->progress().passes > 0;
    if (!done) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(done);
  for (auto& [id, node] : nodes_) node.rep->Stop();
  for (auto& [id, node] : nodes_) {
    EXPECT_EQ(node.rep->RunOnce().code(), StatusCode::kAborted);
    EXPECT_GT(node.rep->progress().passes, 0u);
  }
  ExpectListedCopiesIntact();
}

TEST_F(ReplicatorTest, StopCutsAThrottledPullShort) {
  ReplicatorOptions o = RepOptions();
  o.max_bytes_per_second = 1000;  // a real sleep of minutes per segment
  o.sleep = nullptr;
  AddNodes(2, o);
  for (int i = 0; i < 3; ++i) AddSegment(1, 200, 50);
  std::thread t([&] { EXPECT_EQ(N(2).rep->RunOnce().code(), StatusCode::kAborted); });
  std::this_thread::sleep_for(50ms);
  N(2).rep->Stop();
  t.join();
  EXPECT_EQ(N(2).rep->progress().copied_segments, 0u);
}

}  // namespace
}  // namespace sediment

#include "coordinator/planner.h"

#include <gtest/gtest.h>

namespace sediment::coordinator {
namespace {

SegmentRecord Seg(int64_t id, std::set<NodeId> replicas, bool uploaded = false) {
  SegmentRecord s;
  s.id = SegmentId(id);
  s.datasource = Datasource{"web", {{"#host", "a"}}};
  s.min_ts = 100;
  s.max_ts = 200;
  s.file_name = "s" + std::to_string(id) + ".seg";
  s.replicas = std::move(replicas);
  s.uploaded = uploaded;
  return s;
}

class PlannerTest : public ::testing::Test {
 protected:
  PlannerTest() {
    ctx_.self = NodeId(1);
    ctx_.excluded = &excluded_;
    ctx_.stalled = &stalled_;
    ctx_.via_bucket = &via_bucket_;
    ctx_.holds_file = [this](const std::string& f) { return local_files_.count(f) != 0; };
    ctx_.serving = [this](NodeId n) { return alive_.count(n.value) != 0; };
  }
  void Add(const SegmentRecord& s) { state_.segments[s.id] = s; }
  SegmentPlan Plan(query::TimeRange range = {0, 1000}) {
    return PlanSegments(state_, "web", range, ctx_);
  }

  GlobalState state_;
  PlanContext ctx_;
  std::set<std::pair<int64_t, int64_t>> excluded_;
  std::set<int64_t> stalled_, via_bucket_;
  std::set<std::string> local_files_;
  std::set<int64_t> alive_{2, 3};
};

TEST_F(PlannerTest, OwnCopyFirstThenLiveHoldersSpreadById) {
  Add(Seg(1, {NodeId(1), NodeId(2)}));
  local_files_.insert("s1.seg");
  Add(Seg(2, {NodeId(2), NodeId(3)}));
  Add(Seg(3, {NodeId(2), NodeId(3)}));
  SegmentPlan p = Plan();
  ASSERT_EQ(p.local.size(), 1u);
  EXPECT_EQ(p.local[0].id, SegmentId(1));
  // Live holders [2, 3]: segment 2 -> index 0, segment 3 -> index 1.
  ASSERT_EQ(p.remote[2].size(), 1u);
  EXPECT_EQ(p.remote[2][0].id, SegmentId(2));
  ASSERT_EQ(p.remote[3].size(), 1u);
  EXPECT_EQ(p.remote[3][0].id, SegmentId(3));
  EXPECT_TRUE(p.unreachable.empty());
}

TEST_F(PlannerTest, AListedCopyWhoseFileIsGoneIsReadElsewhere) {
  Add(Seg(1, {NodeId(1), NodeId(2)}));  // listed here, but no file (deleted, not yet withdrawn)
  SegmentPlan p = Plan();
  EXPECT_TRUE(p.local.empty());
  ASSERT_EQ(p.remote[2].size(), 1u);
}

TEST_F(PlannerTest, ExcludedCopiesAndStalledNodesAreSkipped) {
  Add(Seg(3, {NodeId(2), NodeId(3)}));
  excluded_.insert({3, 3});
  EXPECT_EQ(Plan().remote.count(3), 0u);
  EXPECT_EQ(Plan().remote[2].size(), 1u);
  stalled_.insert(2);
  SegmentPlan p = Plan();
  EXPECT_TRUE(p.remote.empty());
  ASSERT_EQ(p.unreachable.size(), 1u);
}

TEST_F(PlannerTest, DeadHoldersLeaveTheBucketOrAWarning) {
  Add(Seg(1, {NodeId(4)}, /*uploaded=*/true));
  Add(Seg(2, {NodeId(4)}, /*uploaded=*/false));
  SegmentPlan p = Plan();
  EXPECT_TRUE(p.from_bucket.empty()) << "no bucket configured";
  EXPECT_EQ(p.unreachable.size(), 2u);
  ctx_.has_bucket = true;
  p = Plan();
  ASSERT_EQ(p.from_bucket.size(), 1u);
  EXPECT_EQ(p.from_bucket[0].id, SegmentId(1));
  ASSERT_EQ(p.unreachable.size(), 1u);
  EXPECT_EQ(p.unreachable[0].id, SegmentId(2));
  // The bucket copy was fetched here and that copy then failed to read: not again.
  via_bucket_.insert(1);
  excluded_.insert({1, 1});
  p = Plan();
  EXPECT_TRUE(p.from_bucket.empty());
  EXPECT_EQ(p.unreachable.size(), 2u);
}

TEST_F(PlannerTest, OnlyCommittedSegmentsOfTheRepoInTheRange) {
  Add(Seg(1, {NodeId(2)}));
  SegmentRecord other = Seg(2, {NodeId(2)});
  other.datasource.repo = "other";
  Add(other);
  SegmentRecord staged = Seg(3, {NodeId(2)});
  staged.merge_inputs = {SegmentId(1)};
  Add(staged);
  EXPECT_EQ(Plan().remote[2].size(), 1u);
  EXPECT_TRUE(Plan({201, 300}).remote.empty());  // max_ts 200 < start
  EXPECT_TRUE(Plan({0, 100}).remote.empty());    // min_ts 100 >= end (exclusive)
  EXPECT_EQ(Plan({200, 201}).remote[2].size(), 1u);
}

TEST_F(PlannerTest, OwnersAreTheClaimedPartitions) {
  state_.partitions[0] = PartitionState{NodeId(2), Epoch(3), Offset(0), Offset(0)};
  state_.partitions[1] = PartitionState{NodeId(0), Epoch(0), Offset(0), Offset(0)};
  PartitionOwners owners = OwnersOf(state_);
  ASSERT_EQ(owners.size(), 1u);
  EXPECT_EQ(owners[0].first, 2);
  EXPECT_EQ(owners[0].second, Epoch(3));
}

}  // namespace
}  // namespace sediment::coordinator

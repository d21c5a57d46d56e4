#include "storage/retention.h"

#include <gtest/gtest.h>

namespace sediment {
namespace {

class RetentionTest : public ::testing::Test {
 protected:
  void Repo(const std::string& name, int64_t retention_ms, uint64_t retention_bytes) {
    RepoInfo r;
    r.name = name;
    r.retention_ms = retention_ms;
    r.retention_bytes = retention_bytes;
    state_.repos[name] = r;
  }
  void Seg(int64_t id, const std::string& repo, int64_t max_ts, uint64_t bytes,
           bool staged = false) {
    SegmentRecord s;
    s.id = SegmentId(id);
    s.datasource = Datasource{repo, {}};
    s.min_ts = max_ts - 10;
    s.max_ts = max_ts;
    s.file_size = bytes;
    if (staged) s.merge_inputs = {SegmentId(1)};
    state_.segments[s.id] = s;
  }
  static std::vector<int64_t> Ids(const RetentionPlan& p) {
    std::vector<int64_t> out;
    for (SegmentId id : p.expired) out.push_back(id.value);
    return out;
  }
  GlobalState state_;
};

TEST_F(RetentionTest, AgeRemovesSegmentsWhoseNewestEventIsTooOld) {
  Repo("web", /*retention_ms=*/1000, 0);
  Seg(1, "web", 8999, 10);  // older than now - 1000 = 9000
  Seg(2, "web", 9000, 10);  // exactly at the limit: kept
  Seg(3, "web", 500, 10);
  RetentionPlan p = PlanRetention(state_, 10'000);
  EXPECT_EQ(Ids(p), (std::vector<int64_t>{3, 1}));  // oldest first
  EXPECT_EQ(p.by_repo["web"].by_age, 2u);
  EXPECT_EQ(p.by_repo["web"].by_size, 0u);
}

TEST_F(RetentionTest, SizeRemovesOldestUntilUnderTheBound) {
  Repo("web", 0, /*retention_bytes=*/250);
  Seg(1, "web", 100, 100);
  Seg(2, "web", 200, 100);
  Seg(3, "web", 300, 100);
  Seg(4, "web", 300, 100);  // same max_ts as 3: ordered by id
  RetentionPlan p = PlanRetention(state_, 10'000);
  EXPECT_EQ(Ids(p), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(p.by_repo["web"].by_size, 2u);
}

TEST_F(RetentionTest, NoLimitsKeepEverythingAndRepositoriesAreSeparate) {
  Repo("keep", 0, 0);
  Repo("small", 0, 50);
  Seg(1, "keep", 1, 1000);
  Seg(2, "small", 1, 40);
  Seg(3, "small", 2, 40);
  RetentionPlan p = PlanRetention(state_, 10'000);
  EXPECT_EQ(Ids(p), (std::vector<int64_t>{2}));
  EXPECT_EQ(p.by_repo.count("keep"), 0u);
}

TEST_F(RetentionTest, SegmentsOfADeletedRepositoryAllExpire) {
  Repo("keep", 0, 0);
  Seg(1, "keep", 1, 1000);
  Seg(2, "gone", 1, 1000);  // no repository record: deleted (DeleteRepo)
  Seg(3, "gone", 9'999, 10);
  Seg(4, "gone", 5, 10, /*staged=*/true);  // a staged output is never removed here
  RetentionPlan p = PlanRetention(state_, 10'000);
  EXPECT_EQ(Ids(p), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(p.by_repo["gone"].deleted, 2u);
  EXPECT_EQ(p.by_repo.count("keep"), 0u);
}

TEST_F(RetentionTest, StagedMergeOutputsAreNeitherCountedNorRemoved) {
  Repo("web", 0, 150);
  Seg(1, "web", 100, 100);
  Seg(2, "web", 200, 100);
  Seg(3, "web", 50, 1000, /*staged=*/true);
  RetentionPlan p = PlanRetention(state_, 10'000);
  EXPECT_EQ(Ids(p), (std::vector<int64_t>{1}));
}

}  // namespace
}  // namespace sediment

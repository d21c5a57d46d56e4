// Maintenance: who leads the chores, bucket snapshots (upload, keep, retry) and the recovery
// from them, over a real Global on the embedded log and a MemoryBucket on a manual clock.
#include "maintenance/maintenance.h"

#include <gtest/gtest.h>

#include "bucket/memory_bucket.h"
#include "common/testing/temp_dir.h"
#include "log/local_log.h"
#include "maintenance/bucket_recovery.h"
#include "maintenance/bucket_snapshots.h"

namespace sediment::maintenance {
namespace {

using namespace std::chrono_literals;

NodeView View(int64_t id, bool alive, std::string address) {
  NodeView v;
  v.node = NodeId(id);
  v.alive = alive;
  v.address = std::move(address);
  return v;
}

TEST(LeadsChoresTest, TheLowestServingNodeLeads) {
  const std::vector<NodeView> alive = {View(1, true, ""), View(2, true, "h:2"),
                                       View(3, true, "h:3")};
  EXPECT_FALSE(LeadsChores(alive, NodeId(1)));  // heartbeats, but serves nothing yet
  EXPECT_TRUE(LeadsChores(alive, NodeId(2)));
  EXPECT_FALSE(LeadsChores(alive, NodeId(3)));
  EXPECT_FALSE(LeadsChores({}, NodeId(1)));
}

// A bucket whose Puts can be made to fail.
class FlakyBucket final : public bucket::Bucket {
 public:
  explicit FlakyBucket(Clock* clock) : inner_("flaky", clock) {}
  Status Put(const std::string& key, std::string_view bytes) override {
    if (fail_puts) return Status::Unavailable("injected: bucket down");
    return inner_.Put(key, bytes);
  }
  Result<std::string> Get(const std::string& key) override { return inner_.Get(key); }
  Result<uint64_t> Head(const std::string& key) override { return inner_.Head(key); }
  Result<std::vector<bucket::ObjectInfo>> List(const std::string& prefix) override {
    return inner_.List(prefix);
  }
  Status Delete(const std::string& key) override { return inner_.Delete(key); }
  std::string Describe() const override { return inner_.Describe(); }
  bool fail_puts = false;

 private:
  bucket::MemoryBucket inner_;
};

class BucketSnapshotsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LocalLogOptions lo;
    lo.partitions = 1;
    log_ = OpenLocalLog(env_, tmp_.Sub("global-log"), lo).value();
    global_ = Global::Open(env_, log_.get(), tmp_.Sub("snap")).value();
  }
  void Change(int n) {
    ASSERT_TRUE(global_->Submit(SetBucket{"s3://test/" + std::to_string(n)}).ok());
  }
  std::vector<std::string> Snapshots() {
    std::vector<std::string> keys;
    const auto listed = bucket_.List(kBucketSnapshotPrefix);
    for (const auto& o : listed.value()) keys.push_back(o.key);
    return keys;
  }

  Env* env_ = Env::Default();
  TempDir tmp_;
  ManualClock clock_;
  FlakyBucket bucket_{&clock_};
  std::unique_ptr<CommitLog> log_;
  std::unique_ptr<Global> global_;
};

TEST_F(BucketSnapshotsTest, UploadsAChangedStateAtMostEveryIntervalAndKeepsTheNewest) {
  BucketSnapshots snaps(&clock_, global_.get(), &bucket_, nullptr, {1000ms, 2});
  Change(1);
  snaps.RunOnce();
  ASSERT_EQ(Snapshots().size(), 1u);
  EXPECT_EQ(snaps.Status().uploaded, 1u);
  EXPECT_EQ(snaps.Status().key, Snapshots()[0]);

  Change(2);
  snaps.RunOnce();  // within the interval: nothing
  EXPECT_EQ(Snapshots().size(), 1u);
  clock_.AdvanceMillis(1000);
  snaps.RunOnce();
  EXPECT_EQ(Snapshots().size(), 2u);

  clock_.AdvanceMillis(1000);
  snaps.RunOnce();  // unchanged state: no upload
  EXPECT_EQ(snaps.Status().uploaded, 2u);

  Change(3);
  clock_.AdvanceMillis(1000);
  snaps.RunOnce();
  const auto keys = Snapshots();
  ASSERT_EQ(keys.size(), 2u);  // the oldest of three went
  EXPECT_EQ(keys.back(), snaps.Status().key);
  EXPECT_EQ(snaps.Status().offset, global_->EncodedState().first.value);
}

TEST_F(BucketSnapshotsTest, AFailedUploadIsShownAndRetriedAtTheNextInterval) {
  BucketSnapshots snaps(&clock_, global_.get(), &bucket_, nullptr, {1000ms, 3});
  Change(1);
  bucket_.fail_puts = true;
  snaps.RunOnce();
  EXPECT_NE(snaps.Status().error.find("bucket down"), std::string::npos);
  EXPECT_EQ(snaps.Status().uploaded, 0u);
  bucket_.fail_puts = false;
  snaps.RunOnce();  // not before the interval
  EXPECT_EQ(snaps.Status().uploaded, 0u);
  clock_.AdvanceMillis(1000);
  snaps.RunOnce();
  EXPECT_EQ(snaps.Status().uploaded, 1u);
  EXPECT_TRUE(snaps.Status().error.empty());
}

TEST_F(BucketSnapshotsTest, ANewClusterRecoversFromTheNewestSnapshot) {
  // Nothing in the bucket: no recovery is possible.
  {
    TempDir fresh;
    LocalLogOptions lo;
    lo.partitions = 1;
    auto log = OpenLocalLog(env_, fresh.Sub("log"), lo).value();
    EXPECT_EQ(RecoverFromBucket(env_, log.get(), &bucket_, fresh.Sub("snap")).status().code(),
              StatusCode::kNotFound);
  }
  BucketSnapshots snaps(&clock_, global_.get(), &bucket_, nullptr, {1000ms, 3});
  Change(7);
  snaps.RunOnce();

  TempDir fresh;
  LocalLogOptions lo;
  lo.partitions = 1;
  auto log = OpenLocalLog(env_, fresh.Sub("log"), lo).value();
  auto recovered = RecoverFromBucket(env_, log.get(), &bucket_, fresh.Sub("snap"));
  ASSERT_TRUE(recovered.ok()) << recovered.status().ToString();
  EXPECT_TRUE(*recovered);
  EXPECT_TRUE(HasGlobalSnapshot(env_, fresh.Sub("snap")));
  auto g = Global::Open(env_, log.get(), fresh.Sub("snap")).value();
  std::string location;
  g->Read([&](const GlobalState& st) { location = st.bucket; });
  EXPECT_EQ(location, "s3://test/7");

  // Started again, the log holds the marker: the recovery happened, nothing to do.
  g.reset();
  recovered = RecoverFromBucket(env_, log.get(), &bucket_, fresh.Sub("snap"));
  ASSERT_TRUE(recovered.ok());
  EXPECT_FALSE(*recovered);

  // A data dir with snapshots but an empty log is refused.
  TempDir other;
  auto empty_log = OpenLocalLog(env_, other.Sub("log"), lo).value();
  ASSERT_TRUE(env_->CreateDirs(other.Sub("snap")).ok());
  ASSERT_TRUE(InstallGlobalSnapshot(env_, other.Sub("snap"), global_->EncodedState().second).ok());
  EXPECT_EQ(RecoverFromBucket(env_, empty_log.get(), &bucket_, other.Sub("snap")).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sediment::maintenance

// Bucket garbage collection (BucketCollector): a collector whose Global lags another node's never
// deletes what that node just uploaded; young objects are kept for the grace; every deletion is
// recorded in Global first, and Global refuses a record naming a referenced file. Nodes are
// simulated in one process over one embedded LocalLog, with a MemoryBucket on the test's clock.
#include "storage/bucket_collector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bucket/memory_bucket.h"
#include "common/clock.h"
#include "storage/test_util.h"
#include "storage/uploader.h"

namespace sediment {
namespace {

using namespace std::chrono_literals;

// A CommitLog over another that can hold back what its readers see: while held from offset H,
// Read returns no record at or above H (as a consumer that has not fetched them yet). Appends,
// offsets and EndOffset are the underlying log's, so a Global on it lags the log's end.
class HeldBackLog final : public CommitLog {
 public:
  explicit HeldBackLog(CommitLog* base) : base_(base) {}

  void HoldFrom(Offset offset) { hold_from_ = offset.value; }
  void Release() { hold_from_ = -1; }

  int32_t partition_count() const override { return base_->partition_count(); }
  std::future<Result<Offset>> Append(PartitionId p, std::string record) override {
    return base_->Append(p, std::move(record));
  }
  Result<std::vector<LogRecord>> Read(PartitionId p, Offset from, size_t max_bytes,
                                      std::chrono::milliseconds max_wait) override {
    using Steady = std::chrono::steady_clock;
    const auto deadline = Steady::now() + max_wait;
    for (;;) {
      if (!Held(from)) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::max(Steady::duration::zero(), deadline - Steady::now()));
        Result<std::vector<LogRecord>> recs = base_->Read(p, from, max_bytes, left);
        if (!recs.ok()) return recs;
        const int64_t hold = hold_from_.load();
        if (hold >= 0) {
          std::erase_if(*recs, [hold](const LogRecord& r) { return r.offset.value >= hold; });
        }
        if (!recs->empty() || Steady::now() >= deadline) return recs;
      }
      if (Steady::now() >= deadline) return std::vector<LogRecord>{};
      std::this_thread::sleep_for(2ms);
    }
  }
  void WakeReaders(PartitionId p) override { base_->WakeReaders(p); }
  Status DeleteBefore(PartitionId p, Offset offset) override {
    return base_->DeleteBefore(p, offset);
  }
  Result<Offset> StartOffset(PartitionId p) override { return base_->StartOffset(p); }
  Result<Offset> EndOffset(PartitionId p) override { return base_->EndOffset(p); }
  std::string Health() override { return base_->Health(); }

 private:
  bool Held(Offset from) const {
    const int64_t hold = hold_from_.load();
    return hold >= 0 && from.value >= hold;
  }
  CommitLog* const base_;
  std::atomic<int64_t> hold_from_{-1};
};

// A Global that forwards to another and runs `after_read` once, right after the next Read: lets a
// test change the cluster's state between the collector's decision and its record.
class HookedGlobal final : public Global {
 public:
  explicit HookedGlobal(Global* g) : g_(g) {}
  mutable std::function<void()> after_read;  // Read is const; the hook runs once

  Result<Outcome> Submit(const GlobalEvent& ev) override { return g_->Submit(ev); }
  void Read(const std::function<void(const GlobalState&)>& fn) const override {
    g_->Read(fn);
    if (after_read) {
      auto hook = std::move(after_read);
      after_read = nullptr;
      hook();
    }
  }
  Status WriteSnapshot() override { return g_->WriteSnapshot(); }
  std::string SnapshotError() const override { return g_->SnapshotError(); }
  std::pair<Offset, std::string> EncodedState() const override { return g_->EncodedState(); }
  Offset Applied() const override { return g_->Applied(); }
  Offset OldestSnapshot() const override { return g_->OldestSnapshot(); }
  bool WaitApplied(Offset offset, std::chrono::milliseconds timeout) override {
    return g_->WaitApplied(offset, timeout);
  }
  Result<Offset> LogEnd() override { return g_->LogEnd(); }
  std::string FollowError() const override { return g_->FollowError(); }
  uint64_t StateReloads() const override { return g_->StateReloads(); }
  Status Close() override { return Status::OK(); }

 private:
  Global* const g_;
};

struct GcNode : storage_testing::StorageNode {
  std::unique_ptr<Uploader> up;
};

constexpr auto kGrace = std::chrono::milliseconds(std::chrono::hours(1));

class BucketCollectorTest : public storage_testing::StorageClusterTest<GcNode> {
 protected:
  void TearDown() override {
    if (lagging_) (void)lagging_->Close();
    StorageClusterTest::TearDown();
  }

  void BucketOn() { ASSERT_TRUE(global_->Submit(SetBucket{"s3://test/prefix"}).ok()); }

  Node& AddNode(NodeId id) {
    Node& node = AddStorageNode(id, RepOptions());
    UploaderOptions uo;
    uo.self = id;
    node.up = std::make_unique<Uploader>(env_, &clock_, global_.get(), node.store.get(), &bucket_,
                                         node.peers.get(), uo);
    return node;
  }

  BucketCollectorOptions GcOptions(NodeId self) {
    BucketCollectorOptions o;
    o.self = self;
    o.grace = kGrace;
    o.catch_up_timeout = 100ms;
    return o;
  }

  // A second node's Global on the same log, caught up now; `held_` holds it back on demand.
  // It never truncates the shared log (truncate_log off).
  Global& OpenLaggingGlobal() {
    GlobalOptions go;
    go.truncate_log = false;
    held_ = std::make_unique<HeldBackLog>(log_.get());
    lagging_ = Global::Open(env_, held_.get(), tmp_.Sub("snap-lagging"), go).value();
    EXPECT_TRUE(lagging_->WaitApplied(global_->Applied(), 5s));
    return *lagging_;
  }

  bool Knows(Global& g, const std::string& file_name) {
    bool found = false;
    g.Read([&](const GlobalState& s) {
      for (const auto& [id, seg] : s.segments) found = found || seg.file_name == file_name;
    });
    return found;
  }
  BucketGcReport GcReport(Global& g) {
    BucketGcReport r;
    g.Read([&](const GlobalState& s) { r = s.bucket_gc; });
    return r;
  }
  bool InBucket(const std::string& file_name) {
    return bucket_.Head(BucketSegmentKey(file_name)).ok();
  }
  // An object no segment references (e.g. left by an upload whose segment was removed).
  void PutOrphan(const std::string& file_name, size_t size = 10) {
    ASSERT_TRUE(bucket_.Put(BucketSegmentKey(file_name), std::string(size, 'o')).ok());
  }

  bucket::MemoryBucket bucket_{"gc", &clock_};
  std::unique_ptr<HeldBackLog> held_;  // over log_, for the lagging Global
  std::unique_ptr<Global> lagging_;
};

// The loss window of issue 13: node 2 collects while its Global has not applied node 1's
// registration and upload of a segment. The object is older than the grace (node 2 lags by more),
// so only the catch-up check and the record stand between it and deletion.
TEST_F(BucketCollectorTest, LaggingNodeNeverDeletesWhatAnotherNodeJustUploaded) {
  AddNode(NodeId(1));
  BucketOn();
  Global& lagging = OpenLaggingGlobal();
  held_->HoldFrom(global_->LogEnd().value());

  // Node 1 registers, uploads and records a segment; its Global is up to date.
  const SegmentId id = AddSegment(1);
  const SegmentRecord seg = Record(id);
  ASSERT_TRUE(N(1).up->RunOnce().ok());
  ASSERT_TRUE(Record(id).uploaded);
  ASSERT_TRUE(InBucket(seg.file_name));
  // What is at stake: the safe offset is past the segment, so the commit log may be truncated
  // below it and its local copies evicted; the bucket object is the only copy that counts.
  Offset safe;
  global_->Read([&](const GlobalState& s) { safe = SafeOffset(s, PartitionId(0)); });
  EXPECT_GT(safe.value, seg.max_pos.offset.value);

  // Node 2's Global has not seen the segment at all.
  ASSERT_FALSE(Knows(lagging, seg.file_name));
  clock_.AdvanceMillis(kGrace.count() + 1000);

  BucketCollector gc(&clock_, &lagging, &bucket_, GcOptions(NodeId(2)));
  auto pass = gc.CollectOnce();
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_FALSE(pass->ran);  // skipped: Global behind the log end read after the listing
  EXPECT_EQ(pass->deleted, 0u);
  EXPECT_TRUE(InBucket(seg.file_name));
  EXPECT_EQ(bucket_.deletes(), 0u);
  EXPECT_EQ(gc.progress().skipped_behind, 1u);
  EXPECT_EQ(gc.progress().passes, 0u);

  // Once node 2 catches up, the object is referenced: kept.
  held_->Release();
  ASSERT_TRUE(lagging.WaitApplied(global_->Applied(), 10s));
  pass = gc.CollectOnce();
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_TRUE(pass->ran);
  EXPECT_EQ(pass->listed, 1u);
  EXPECT_EQ(pass->referenced, 1u);
  EXPECT_EQ(pass->deleted, 0u);
  ASSERT_TRUE(InBucket(seg.file_name));
  auto bytes = bucket_.Get(BucketSegmentKey(seg.file_name));
  ASSERT_TRUE(bytes.ok());
  EXPECT_TRUE(VerifySegmentBytes(Record(id), *bytes).ok());
  EXPECT_EQ(GcReport(*global_).records, 0u);

  // Removed from Global (retention): now it is garbage, recorded and deleted.
  ASSERT_TRUE(global_->Submit(RemoveSegments{{id}}).ok());
  ASSERT_TRUE(lagging.WaitApplied(global_->Applied(), 10s));
  pass = gc.CollectOnce();
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_EQ(pass->deleted, 1u);
  EXPECT_EQ(pass->deleted_bytes, seg.file_size);
  EXPECT_EQ(pass->deleted_files, std::vector<std::string>{seg.file_name});
  EXPECT_FALSE(InBucket(seg.file_name));
  for (Global* g : {global_.get(), &lagging}) {
    ASSERT_TRUE(g->WaitApplied(lagging.Applied(), 5s));
    const BucketGcReport r = GcReport(*g);
    EXPECT_EQ(r.records, 1u);
    EXPECT_EQ(r.objects, 1u);
    EXPECT_EQ(r.bytes, seg.file_size);
    EXPECT_EQ(r.last_node, NodeId(2));
    EXPECT_EQ(r.last_ms, clock_.NowMillis());
    EXPECT_EQ(r.last_files, std::vector<std::string>{seg.file_name});
  }
  EXPECT_EQ(gc.progress().deleted_objects, 1u);
  EXPECT_EQ(gc.progress().passes, 2u);
}

TEST_F(BucketCollectorTest, UnreferencedObjectsAreKeptForTheGrace) {
  AddNode(NodeId(1));
  BucketOn();
  PutOrphan("orphan-1.seg", 7);
  const SegmentId kept = AddSegment(1);
  ASSERT_TRUE(N(1).up->RunOnce().ok());
  BucketCollector gc(&clock_, global_.get(), &bucket_, GcOptions(NodeId(1)));

  auto pass = gc.CollectOnce();
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_TRUE(pass->ran);
  EXPECT_EQ(pass->listed, 2u);
  EXPECT_EQ(pass->referenced, 1u);
  EXPECT_EQ(pass->young, 1u);
  EXPECT_EQ(pass->deleted, 0u);
  EXPECT_EQ(gc.progress().last_young, 1u);

  clock_.AdvanceMillis(kGrace.count() - 1);
  pass = gc.CollectOnce();
  ASSERT_TRUE(pass.ok());
  EXPECT_EQ(pass->deleted, 0u);
  EXPECT_TRUE(InBucket("orphan-1.seg"));
  EXPECT_EQ(GcReport(*global_).records, 0u);  // nothing recorded for kept objects

  clock_.AdvanceMillis(1);
  pass = gc.CollectOnce();
  ASSERT_TRUE(pass.ok());
  EXPECT_EQ(pass->deleted, 1u);
  EXPECT_EQ(pass->deleted_bytes, 7u);
  EXPECT_FALSE(InBucket("orphan-1.seg"));
  EXPECT_TRUE(InBucket(Record(kept).file_name));
  EXPECT_EQ(GcReport(*global_).last_files, std::vector<std::string>{"orphan-1.seg"});

  // `keep` (the files of the newest bucket snapshot) protects objects Global no longer lists.
  PutOrphan("in-snapshot.seg");
  clock_.AdvanceMillis(kGrace.count());
  pass = gc.CollectOnce({"in-snapshot.seg"});
  ASSERT_TRUE(pass.ok());
  EXPECT_EQ(pass->deleted, 0u);
  EXPECT_TRUE(InBucket("in-snapshot.seg"));

  // An object whose time the bucket does not report is never old enough.
  bucket::MemoryBucket untimed("untimed");
  ASSERT_TRUE(untimed.Put(BucketSegmentKey("old.seg"), "x").ok());
  BucketCollector gc2(&clock_, global_.get(), &untimed, GcOptions(NodeId(1)));
  pass = gc2.CollectOnce();
  ASSERT_TRUE(pass.ok());
  EXPECT_EQ(pass->young, 1u);
  EXPECT_EQ(untimed.object_count(), 1u);
}

// Whatever the collector's view, Global decides in log order: a file that became referenced after
// the collector read its state (a name registered again, an object put before its registration)
// makes the record Rejected, and nothing of it is deleted.
TEST_F(BucketCollectorTest, RecordNamingAReferencedFileIsRefusedAndNothingIsDeleted) {
  AddNode(NodeId(1));
  BucketOn();
  PutOrphan("other.seg");
  SegmentRecord late =
      storage_testing::WriteTestSegment(env_, N(1).store->dir(), "late.seg", 1000, 5, NodeId(1));
  late.epoch = Epoch(1);
  ASSERT_TRUE(bucket_.Put(BucketSegmentKey("late.seg"), N(1).store->Read("late.seg").value()).ok());
  clock_.AdvanceMillis(kGrace.count());

  HookedGlobal hooked(global_.get());
  hooked.after_read = [&] {
    auto r = global_->Submit(RegisterSegment{late, Offset(1005)});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  };
  BucketCollector gc(&clock_, &hooked, &bucket_, GcOptions(NodeId(1)));
  auto pass = gc.CollectOnce();
  EXPECT_EQ(pass.status().code(), StatusCode::kRejected) << pass.status().ToString();
  EXPECT_TRUE(InBucket("late.seg"));
  EXPECT_TRUE(InBucket("other.seg"));  // same record: kept too
  EXPECT_EQ(bucket_.deletes(), 0u);
  EXPECT_EQ(gc.progress().rejected_records, 1u);
  EXPECT_FALSE(gc.progress().last_error.empty());
  EXPECT_EQ(GcReport(*global_).records, 0u);

  // The next pass decides from the new state: the referenced file stays, the other goes.
  pass = gc.CollectOnce();
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_EQ(pass->deleted_files, std::vector<std::string>{"other.seg"});
  EXPECT_TRUE(InBucket("late.seg"));
  EXPECT_TRUE(gc.progress().last_error.empty());
}

TEST_F(BucketCollectorTest, RecordsInBatchesAndRetriesAfterABucketError) {
  AddNode(NodeId(1));
  BucketOn();
  for (int i = 0; i < 5; ++i) PutOrphan("o-" + std::to_string(i) + ".seg", 1);
  clock_.AdvanceMillis(kGrace.count());
  BucketCollectorOptions o = GcOptions(NodeId(1));
  o.max_per_record = 2;
  HookedGlobal hooked(global_.get());
  BucketCollector gc(&clock_, &hooked, &bucket_, o);

  // The listing fails: nothing recorded, the error is returned and shown.
  bucket_.FailNextCalls(1);
  auto pass = gc.CollectOnce();
  EXPECT_EQ(pass.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(GcReport(*global_).records, 0u);
  EXPECT_NE(gc.progress().last_error.find("listing"), std::string::npos);

  // The first deletion fails: the first batch is recorded, nothing is deleted, the pass stops.
  hooked.after_read = [&] { bucket_.FailNextCalls(1); };
  pass = gc.CollectOnce();
  EXPECT_EQ(pass.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(bucket_.object_count(), 5u);
  EXPECT_EQ(GcReport(*global_).records, 1u);
  EXPECT_EQ(GcReport(*global_).objects, 2u);

  // The next pass records and deletes everything, two at a time (the two already recorded are
  // recorded again).
  pass = gc.CollectOnce();
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_EQ(pass->deleted, 5u);
  EXPECT_EQ(bucket_.object_count(), 0u);
  const BucketGcReport r = GcReport(*global_);
  EXPECT_EQ(r.records, 4u);  // 2, then 2 + 2 + 1
  EXPECT_EQ(r.objects, 7u);
  EXPECT_EQ(r.bytes, 7u);
  EXPECT_EQ(r.last_files, std::vector<std::string>{"o-4.seg"});
  EXPECT_EQ(gc.progress().deleted_objects, 5u);
  EXPECT_TRUE(gc.progress().last_error.empty());
}

}  // namespace
}  // namespace sediment

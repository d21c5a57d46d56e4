// Bucket storage: the Uploader, and the Replicator in bucket mode (no pulls of uploaded segments,
// forgetting dead holders, EnsureLocal, cache eviction). Nodes are simulated in one process on
// one Global over the embedded LocalLog, with a MemoryBucket.
#include "storage/uploader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bucket/memory_bucket.h"
#include "common/clock.h"
#include "common/testing/fault_env.h"
#include "storage/replicator.h"
#include "storage/test_util.h"

namespace sediment {
namespace {

using namespace std::chrono_literals;
using storage_testing::Liveness;
using storage_testing::WriteTestSegment;

struct BucketNode : storage_testing::StorageNode {
  std::unique_ptr<Uploader> up;
  std::vector<std::pair<SegmentId, std::string>> corrupt_reports;  // from the uploader
};

class BucketStorageTest : public storage_testing::StorageClusterTest<BucketNode> {
 protected:
  void BucketOn() { ASSERT_TRUE(global_->Submit(SetBucket{"s3://test/prefix"}).ok()); }

  ReplicatorOptions BucketRepOptions(uint64_t cache_max_bytes = 0) {
    ReplicatorOptions o = RepOptions();
    o.bucket = &bucket_;
    o.cache_max_bytes = cache_max_bytes;
    return o;
  }
  UploaderOptions UpOptions(NodeId self) {
    UploaderOptions o;
    o.self = self;
    o.interval = 5ms;
    o.initial_backoff = 1000ms;
    o.max_backoff = 4000ms;
    return o;
  }

  void AddNodes(int n) {
    for (int i = 1; i <= n; ++i) AddNode(NodeId(i));
  }
  Node& AddNode(NodeId id, uint64_t cache_max_bytes = 0, bool report_corrupt = true) {
    Node& node = AddStorageNode(id, BucketRepOptions(cache_max_bytes));
    UploaderOptions uo = UpOptions(id);
    if (report_corrupt) {
      Node* np = &node;
      uo.on_corrupt = [np](SegmentId seg, const Status& why) {
        np->corrupt_reports.emplace_back(seg, why.ToString());
        np->rep->ReportCorrupt(seg, why);
      };
    }
    node.up = std::make_unique<Uploader>(env_, &clock_, global_.get(), node.store.get(), &bucket_,
                                         node.peers.get(), uo);
    return node;
  }

  // Puts the segment into the bucket from node `from` and records it (an upload by hand).
  void Upload(SegmentId id, int64_t from = 1) {
    SegmentRecord seg = Record(id);
    ASSERT_TRUE(
        bucket_.Put(BucketSegmentKey(seg.file_name), N(from).store->Read(seg.file_name).value())
            .ok());
    ASSERT_TRUE(global_->Submit(SegmentUploaded{id}).ok());
  }

  bool Uploaded(SegmentId id) { return Record(id).uploaded; }

  void UploadRound() {
    for (auto& [id, node] : nodes_) {
      if (members_.Get(id) != Liveness::kAlive) continue;
      Status st = node.up->RunOnce();
      EXPECT_TRUE(st.ok()) << "node " << id.value << ": " << st.ToString();
    }
  }
  // The bucket's object for the segment is exactly the segment's bytes.
  void ExpectInBucket(SegmentId id) {
    SegmentRecord seg = Record(id);
    auto bytes = bucket_.Get(BucketSegmentKey(seg.file_name));
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    EXPECT_TRUE(VerifySegmentBytes(seg, *bytes).ok());
  }
  uint64_t TotalLocalBytes(int64_t node) {
    uint64_t total = 0;
    const std::vector<std::string> files = N(node).store->List().value();
    for (const auto& f : files) total += N(node).store->FileSize(f).value();
    return total;
  }

  // Destroyed before the base's nodes_, so TearDown (which destroys the nodes) must have run.
  bucket::MemoryBucket bucket_;
};

// ---- Uploader ----

TEST_F(BucketStorageTest, UploaderDoesNothingWithBucketStorageOff) {
  AddNodes(2);
  SegmentId id = AddSegment();
  UploadRound();
  EXPECT_EQ(bucket_.puts(), 0u);
  EXPECT_FALSE(Uploaded(id));
  auto p = N(1).up->progress();
  EXPECT_EQ(p.passes, 1u);
  EXPECT_EQ(p.backlog_segments, 0u);
  EXPECT_EQ(p.uploaded_segments, 0u);
}

TEST_F(BucketStorageTest, EverySegmentIsUploadedExactlyOnceAndRecorded) {
  AddNodes(3);
  BucketOn();
  std::vector<SegmentId> ids;
  uint64_t bytes = 0;
  for (int i = 0; i < 6; ++i) {
    ids.push_back(AddSegment(1 + i % 3));  // written by every node in turn
    bytes += Record(ids.back()).file_size;
  }
  ReplicateRound();                     // R = 2: every segment has two holders now
  std::map<NodeId, uint64_t> expected;  // uploads per node: the lowest-id holder's
  for (SegmentId id : ids) {
    ASSERT_EQ(Replicas(id).size(), 2u);
    ++expected[*Replicas(id).begin()];
  }
  // Before any upload every node sees the whole backlog.
  ASSERT_TRUE(N(3).up->RunOnce().ok());
  auto p3 = N(3).up->progress();
  EXPECT_EQ(p3.backlog_segments + p3.uploaded_segments, ids.size());

  UploadRound();
  UploadRound();
  EXPECT_EQ(bucket_.puts(), ids.size());  // once each, although two nodes hold each
  uint64_t uploaded = 0, uploaded_bytes = 0;
  for (auto& [n, node] : nodes_) {
    auto p = node.up->progress();
    EXPECT_EQ(p.uploaded_segments, expected[n]) << "node " << n.value;
    uploaded += p.uploaded_segments;
    uploaded_bytes += p.uploaded_bytes;
    EXPECT_EQ(p.backlog_segments, 0u);
    EXPECT_EQ(p.backlog_bytes, 0u);
    EXPECT_EQ(p.mine_pending, 0u);
    EXPECT_EQ(p.failed_uploads, 0u);
    EXPECT_TRUE(p.last_error.empty()) << p.last_error;
  }
  EXPECT_EQ(uploaded, ids.size());
  EXPECT_EQ(uploaded_bytes, bytes);
  for (SegmentId id : ids) {
    EXPECT_TRUE(Uploaded(id)) << id.value;
    ExpectInBucket(id);
  }
  EXPECT_EQ(N(1).up->progress().last_upload_ms, clock_.NowMillis());
  // Nothing left: further passes put nothing.
  UploadRound();
  EXPECT_EQ(bucket_.puts(), ids.size());
}

TEST_F(BucketStorageTest, OnlyTheLowestPresentHolderUploads) {
  AddNodes(3);
  BucketOn();
  SegmentId a = AddSegment(2);
  CopyTo(a, 2, 3);  // held by 2 and 3, not by 1
  // Nodes 3 and 1 do not upload it; node 2 is the uploader.
  ASSERT_TRUE(N(3).up->RunOnce().ok());
  ASSERT_TRUE(N(1).up->RunOnce().ok());
  EXPECT_EQ(bucket_.puts(), 0u);
  EXPECT_EQ(N(3).up->progress().mine_pending, 0u);
  EXPECT_EQ(N(3).up->progress().backlog_segments, 1u);
  EXPECT_EQ(N(3).up->progress().backlog_bytes, Record(a).file_size);
  ASSERT_TRUE(N(2).up->RunOnce().ok());
  EXPECT_EQ(bucket_.puts(), 1u);
  EXPECT_EQ(N(2).up->progress().uploaded_segments, 1u);
  EXPECT_TRUE(Uploaded(a));

  // Node 2 silent but within grace: still the uploader, so node 3 waits.
  SegmentId b = AddSegment(2);
  CopyTo(b, 2, 3);
  members_.Set(NodeId(2), Liveness::kSilent);
  ASSERT_TRUE(N(3).up->RunOnce().ok());
  EXPECT_FALSE(Uploaded(b));
  // Gone: node 3 takes over.
  members_.Set(NodeId(2), Liveness::kGone);
  ASSERT_TRUE(N(3).up->RunOnce().ok());
  EXPECT_TRUE(Uploaded(b));
  EXPECT_EQ(N(3).up->progress().uploaded_segments, 1u);
  ExpectInBucket(b);

  // Listed on the lowest holder but its file is missing there: nobody else uploads, and the
  // listed node cannot.
  members_.Set(NodeId(2), Liveness::kAlive);
  SegmentId c = AddSegment(2);
  CopyTo(c, 2, 3);
  ASSERT_TRUE(env_->RemoveFile(N(2).store->PathOf(Record(c).file_name)).ok());
  UploadRound();
  EXPECT_FALSE(Uploaded(c));
  EXPECT_EQ(N(2).up->progress().mine_pending, 0u);
  // Once node 2's replicator withdraws the lost copy, node 3 uploads it.
  ASSERT_TRUE(N(2).rep->RunOnce().ok());
  ASSERT_EQ(Replicas(c), std::set<NodeId>{NodeId(3)});
  UploadRound();
  EXPECT_TRUE(Uploaded(c));
}

TEST_F(BucketStorageTest, BucketOutageKeepsTheBacklogBacksOffAndDrains) {
  AddNodes(1);
  BucketOn();
  std::vector<SegmentId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(AddSegment());
  bucket_.SetAvailable(false);
  Uploader& up = *N(1).up;

  Status st = up.RunOnce();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  auto p = up.progress();
  EXPECT_EQ(p.failed_uploads, 1u);  // the pass stopped at the first error
  EXPECT_EQ(p.backlog_segments, 4u);
  EXPECT_EQ(p.mine_pending, 4u);
  EXPECT_TRUE(p.in_backoff);
  EXPECT_NE(p.last_error.find("unavailable"), std::string::npos) << p.last_error;

  // Expected waits: 1 s, 2 s, 4 s, 4 s (max_backoff).
  const int64_t waits[] = {1000, 2000, 4000, 4000};
  uint64_t failed = 1;
  for (int64_t wait : waits) {
    clock_.AdvanceMillis(wait - 1);
    EXPECT_TRUE(up.RunOnce().ok());  // still backing off: no attempt
    EXPECT_EQ(up.progress().failed_uploads, failed) << wait;
    EXPECT_TRUE(up.progress().in_backoff);
    clock_.AdvanceMillis(1);
    EXPECT_EQ(up.RunOnce().code(), StatusCode::kUnavailable);
    EXPECT_EQ(up.progress().failed_uploads, ++failed) << wait;
  }
  for (SegmentId id : ids) EXPECT_FALSE(Uploaded(id));
  EXPECT_EQ(up.progress().backlog_segments, 4u);

  bucket_.SetAvailable(true);
  clock_.AdvanceMillis(4000);
  ASSERT_TRUE(up.RunOnce().ok());
  p = up.progress();
  EXPECT_EQ(p.uploaded_segments, 4u);
  EXPECT_EQ(p.backlog_segments, 0u);
  EXPECT_EQ(p.mine_pending, 0u);
  EXPECT_FALSE(p.in_backoff);
  EXPECT_TRUE(p.last_error.empty()) << p.last_error;
  EXPECT_EQ(p.last_upload_ms, clock_.NowMillis());
  for (SegmentId id : ids) {
    EXPECT_TRUE(Uploaded(id));
    ExpectInBucket(id);
  }
  // The backoff starts from the beginning after a success.
  bucket_.SetAvailable(false);
  SegmentId late = AddSegment();
  EXPECT_EQ(up.RunOnce().code(), StatusCode::kUnavailable);
  bucket_.SetAvailable(true);
  clock_.AdvanceMillis(1000);
  ASSERT_TRUE(up.RunOnce().ok());
  EXPECT_TRUE(Uploaded(late));
}

TEST_F(BucketStorageTest, CorruptLocalCopyIsNeverUploaded) {
  AddNodes(2);
  BucketOn();
  SegmentId id = AddSegment(1);
  ReplicateRound();
  ASSERT_EQ(Replicas(id), (std::set<NodeId>{NodeId(1), NodeId(2)}));
  SegmentRecord seg = Record(id);
  FaultEnv fenv;
  ASSERT_TRUE(fenv.FlipByte(N(1).store->PathOf(seg.file_name), seg.file_size / 2).ok());

  // Node 1 is the uploader but its copy is damaged: nothing is put, the copy is reported.
  ASSERT_TRUE(N(1).up->RunOnce().ok());
  EXPECT_EQ(bucket_.puts(), 0u);
  EXPECT_FALSE(Uploaded(id));
  EXPECT_EQ(N(1).up->progress().corrupt_copies, 1u);
  ASSERT_EQ(N(1).corrupt_reports.size(), 1u);
  EXPECT_EQ(N(1).corrupt_reports[0].first, id);
  // The report went to the Replicator, which withdrew the copy: node 2 is the uploader now.
  EXPECT_EQ(Replicas(id), std::set<NodeId>{NodeId(2)});
  ASSERT_TRUE(N(2).up->RunOnce().ok());
  EXPECT_TRUE(Uploaded(id));
  ExpectInBucket(id);
}

TEST_F(BucketStorageTest, CorruptCopyWithoutReportHookIsSkippedNotReread) {
  AddNode(NodeId(1), 0, /*report_corrupt=*/false);
  BucketOn();
  SegmentId bad = AddSegment(1);
  SegmentId good = AddSegment(1);
  SegmentRecord seg = Record(bad);
  FaultEnv fenv;
  ASSERT_TRUE(fenv.FlipByte(N(1).store->PathOf(seg.file_name), 30).ok());
  ASSERT_TRUE(N(1).up->RunOnce().ok());
  ASSERT_TRUE(N(1).up->RunOnce().ok());
  auto p = N(1).up->progress();
  EXPECT_EQ(p.corrupt_copies, 1u);  // found once, then skipped
  EXPECT_EQ(p.uploaded_segments, 1u);
  EXPECT_FALSE(Uploaded(bad));
  EXPECT_TRUE(Uploaded(good));
  EXPECT_EQ(bucket_.puts(), 1u);
  EXPECT_EQ(p.backlog_segments, 1u);
  EXPECT_EQ(p.mine_pending, 1u);
}

TEST_F(BucketStorageTest, StagedMergeOutputIsUploadedSoItCanCommit) {
  AddNodes(1);
  BucketOn();
  SegmentId a = AddSegment(1, 0, 10);
  SegmentId b = AddSegment(1, 0, 10);
  SegmentRecord ra = Record(a);
  SegmentRecord out = WriteTestSegment(env_, N(1).store->dir(), "merged.seg",
                                       ra.min_pos.offset.value, 20, NodeId(1));
  out.epoch = Epoch(1);
  auto staged = global_->Submit(StageMerge{out, {a, b}});
  ASSERT_TRUE(staged.ok()) << staged.status().ToString();
  EXPECT_EQ(global_->Submit(CommitMerge{staged->segment_id}).status().code(),
            StatusCode::kRejected);  // not in the bucket yet
  ASSERT_TRUE(N(1).up->RunOnce().ok());
  EXPECT_TRUE(Uploaded(staged->segment_id));
  EXPECT_TRUE(global_->Submit(CommitMerge{staged->segment_id}).ok());
}

TEST_F(BucketStorageTest, UploaderThreadUploadsAndStops) {
  AddNodes(2);
  BucketOn();
  std::vector<SegmentId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(AddSegment(1 + i % 2));
  for (auto& [n, node] : nodes_) node.up->Start();
  bool done = false;
  for (int i = 0; i < 1000 && !done; ++i) {
    done = true;
    for (SegmentId id : ids) done = done && Uploaded(id);
    if (!done) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(done);
  for (auto& [n, node] : nodes_) node.up->Stop();
  for (auto& [n, node] : nodes_) {
    EXPECT_EQ(node.up->RunOnce().code(), StatusCode::kAborted);
    EXPECT_GT(node.up->progress().passes, 0u);
  }
  EXPECT_EQ(bucket_.puts(), ids.size());
}

// ---- Replicator in bucket mode ----

TEST_F(BucketStorageTest, UploadedSegmentsAreNotPulledOthersReachR) {
  AddNodes(3);  // R = 2
  BucketOn();
  SegmentId up = AddSegment(1);
  SegmentId not_up = AddSegment(1);
  Upload(up);
  ReplicateRound();
  ReplicateRound();
  EXPECT_EQ(Replicas(up), std::set<NodeId>{NodeId(1)});  // the bucket is its durable copy
  EXPECT_EQ(Replicas(not_up).size(), 2u);                // replicated as without a bucket
  uint64_t copied = 0, pending = 0;
  for (auto& [n, node] : nodes_) {
    copied += node.rep->progress().copied_segments;
    pending += node.rep->progress().pending_segments;
    EXPECT_TRUE(node.rep->progress().bucket_mode);
  }
  EXPECT_EQ(copied, 1u);
  EXPECT_EQ(pending, 0u);

  // Extra copies of an uploaded segment are kept (a cache), not dropped.
  CopyTo(up, 1, 2);
  CopyTo(up, 1, 3);
  ASSERT_TRUE(global_->Submit(SetReplicationFactor{1}).ok());
  ReplicateRound();
  clock_.AdvanceMillis(31'000);
  ReplicateRound();
  EXPECT_EQ(Replicas(up).size(), 3u);
  // The non-uploaded one goes down to R = 1 as usual.
  EXPECT_EQ(Replicas(not_up).size(), 1u);
}

TEST_F(BucketStorageTest, WithoutBucketStorageUploadedFlagChangesNothing) {
  // Bucket storage off: even a segment marked uploaded is replicated to R and extra copies drop.
  AddNodes(3);
  SegmentId id = AddSegment(1);
  ASSERT_TRUE(global_->Submit(SegmentUploaded{id}).ok());
  ReplicateRound();
  EXPECT_EQ(Replicas(id).size(), 2u);
  for (auto& [n, node] : nodes_) EXPECT_FALSE(node.rep->progress().bucket_mode);
}

TEST_F(BucketStorageTest, DeadHolderOfUploadedSegmentIsForgottenAfterGrace) {
  AddNodes(3);  // R = 2
  BucketOn();
  SegmentId two = AddSegment(1);  // held by 1 and 2, uploaded
  CopyTo(two, 1, 2);
  Upload(two);
  SegmentId lone = AddSegment(3);  // held by 3 only, uploaded
  Upload(lone, 3);
  SegmentId kept = AddSegment(1);  // held by 1 and 2, not uploaded
  CopyTo(kept, 1, 2);

  // Within grace: nothing is forgotten.
  members_.Set(NodeId(2), Liveness::kSilent);
  members_.Set(NodeId(3), Liveness::kSilent);
  ASSERT_TRUE(N(1).rep->RunOnce().ok());
  EXPECT_EQ(Replicas(two), (std::set<NodeId>{NodeId(1), NodeId(2)}));
  EXPECT_EQ(Replicas(lone), std::set<NodeId>{NodeId(3)});

  members_.Set(NodeId(2), Liveness::kGone);
  members_.Set(NodeId(3), Liveness::kGone);
  ASSERT_TRUE(N(1).rep->RunOnce().ok());
  EXPECT_EQ(Replicas(two), std::set<NodeId>{NodeId(1)});  // one copy left
  EXPECT_TRUE(Replicas(lone).empty());                    // none left: the bucket serves it
  // A segment not uploaded yet keeps the old rule: re-created first (no other present node
  // here), so the dead copy stays listed.
  EXPECT_EQ(Replicas(kept), (std::set<NodeId>{NodeId(1), NodeId(2)}));
  EXPECT_EQ(N(1).rep->progress().dead_replicas_forgotten, 2u);
  // No pull of the uploaded segments although R = 2.
  EXPECT_EQ(N(1).rep->progress().copied_segments, 0u);
}

TEST_F(BucketStorageTest, ForgettingWithNoLiveHolderIsLeftToTheLowestLiveNode) {
  AddNodes(3);
  BucketOn();
  SegmentId lone = AddSegment(3);
  Upload(lone, 3);
  members_.Set(NodeId(3), Liveness::kGone);
  ASSERT_TRUE(N(2).rep->RunOnce().ok());  // not the lowest live node
  EXPECT_EQ(Replicas(lone), std::set<NodeId>{NodeId(3)});
  ASSERT_TRUE(N(1).rep->RunOnce().ok());
  EXPECT_TRUE(Replicas(lone).empty());
}

TEST_F(BucketStorageTest, EnsureLocalFetchesOnceVerifiesAndAnnounces) {
  AddNodes(2);
  ASSERT_TRUE(global_->Submit(SetReplicationFactor{1}).ok());
  BucketOn();
  SegmentId id = AddSegment(1);
  Upload(id);
  SegmentRecord seg = Record(id);
  ASSERT_FALSE(N(2).store->Has(seg.file_name));
  const uint64_t gets_before = bucket_.gets();

  std::atomic<int> fetched{0}, ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      auto r = N(2).rep->EnsureLocal(seg);
      if (!r.ok()) return;
      ++ok;
      if (r->fetched) {
        ++fetched;
        EXPECT_EQ(r->bytes, seg.file_size);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, 6);
  EXPECT_EQ(fetched, 1);
  EXPECT_EQ(bucket_.gets() - gets_before, 1u);
  EXPECT_EQ(Replicas(id), (std::set<NodeId>{NodeId(1), NodeId(2)}));
  EXPECT_TRUE(N(2).store->Verify(seg).ok());
  auto p = N(2).rep->progress();
  EXPECT_EQ(p.bucket_fetches, 1u);
  EXPECT_EQ(p.bucket_fetched_bytes, seg.file_size);
  // Local and listed: no download.
  auto again = N(2).rep->EnsureLocal(seg);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->fetched);
  EXPECT_EQ(bucket_.gets() - gets_before, 1u);
  // The writer's own copy needs nothing either.
  auto own = N(1).rep->EnsureLocal(seg);
  ASSERT_TRUE(own.ok());
  EXPECT_FALSE(own->fetched);

  // Not uploaded and not local: NotFound; unknown segment: NotFound.
  SegmentId other = AddSegment(1);
  EXPECT_EQ(N(2).rep->EnsureLocal(Record(other)).status().code(), StatusCode::kNotFound);
  SegmentRecord unknown = seg;
  unknown.id = SegmentId(999);
  EXPECT_EQ(N(2).rep->EnsureLocal(unknown).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(bucket_.gets() - gets_before, 1u);

  // The copy fetched on node 2 is a cache: the replicator neither drops nor keeps pulling it.
  ReplicateRound();
  EXPECT_EQ(Replicas(id), (std::set<NodeId>{NodeId(1), NodeId(2)}));
}

TEST_F(BucketStorageTest, EnsureLocalRetriesACorruptDownloadOnceThenRefuses) {
  AddNodes(2);
  BucketOn();
  SegmentId id = AddSegment(1);
  Upload(id);
  SegmentRecord seg = Record(id);
  const std::string key = BucketSegmentKey(seg.file_name);

  // One bad read: the retry gets good bytes.
  bucket_.CorruptNextGet(key);
  uint64_t gets = bucket_.gets();
  auto r = N(2).rep->EnsureLocal(seg);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->fetched);
  EXPECT_EQ(bucket_.gets() - gets, 2u);
  EXPECT_TRUE(N(2).store->Verify(seg).ok());
  EXPECT_EQ(Replicas(id), (std::set<NodeId>{NodeId(1), NodeId(2)}));

  // The bucket's object itself is damaged: two tries, Corruption, nothing installed or announced.
  SegmentId id2 = AddSegment(1);
  Upload(id2);
  SegmentRecord seg2 = Record(id2);
  std::string bad = N(1).store->Read(seg2.file_name).value();
  bad[bad.size() / 3] ^= 0x01;
  ASSERT_TRUE(bucket_.Put(BucketSegmentKey(seg2.file_name), bad).ok());
  gets = bucket_.gets();
  auto r2 = N(2).rep->EnsureLocal(seg2);
  EXPECT_EQ(r2.status().code(), StatusCode::kCorruption) << r2.status().ToString();
  EXPECT_EQ(bucket_.gets() - gets, 2u);
  EXPECT_FALSE(N(2).store->Has(seg2.file_name));
  EXPECT_EQ(Replicas(id2), std::set<NodeId>{NodeId(1)});
  auto p = N(2).rep->progress();
  EXPECT_EQ(p.bucket_fetches, 1u);
  EXPECT_EQ(p.failed_bucket_fetches, 1u);
  EXPECT_NE(p.last_error.find("content hash"), std::string::npos) << p.last_error;

  // Bucket down: the error comes back as it is.
  bucket_.SetAvailable(false);
  EXPECT_EQ(N(2).rep->EnsureLocal(seg2).status().code(), StatusCode::kUnavailable);
  // No bucket client at all.
  Node& n3 = AddNode(NodeId(3));
  ReplicatorOptions o = RepOptions();
  o.bucket = nullptr;
  Replicator no_bucket(env_, &clock_, global_.get(), n3.store.get(), n3.peers.get(), &fetcher_, o);
  EXPECT_EQ(no_bucket.EnsureLocal(seg).status().code(), StatusCode::kUnavailable);
}

TEST_F(BucketStorageTest, EnsureLocalRevivesAnIntactEvictedCopyWithoutDownloading) {
  AddNodes(1);
  BucketOn();
  SegmentId id = AddSegment(1);
  Upload(id);
  SegmentRecord seg = Record(id);
  // Evicted while being read: unlisted, deletion pending on its pin.
  auto pin = N(1).store->Pin({seg.file_name});
  ASSERT_TRUE(global_->Submit(RemoveSegmentReplica{id, NodeId(1), 0}).ok());
  N(1).store->DeleteWhenUnpinned(seg.file_name);
  const uint64_t gets = bucket_.gets();
  auto r = N(1).rep->EnsureLocal(seg);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->fetched);
  EXPECT_EQ(bucket_.gets(), gets);
  EXPECT_EQ(Replicas(id), std::set<NodeId>{NodeId(1)});
  EXPECT_FALSE(N(1).store->IsDeletionPending(seg.file_name));
  pin.reset();
  EXPECT_TRUE(N(1).store->Has(seg.file_name));

  // A file left from before (forgotten while this node was away), not pending deletion: verified
  // and announced, not downloaded. A damaged one is replaced from the bucket.
  SegmentId b = AddSegment(1);
  Upload(b);
  SegmentRecord rb = Record(b);
  ASSERT_TRUE(global_->Submit(RemoveSegmentReplica{b, NodeId(1), 0}).ok());
  auto rb_result = N(1).rep->EnsureLocal(rb);
  ASSERT_TRUE(rb_result.ok()) << rb_result.status().ToString();
  EXPECT_FALSE(rb_result->fetched);
  EXPECT_EQ(bucket_.gets(), gets);
  EXPECT_EQ(Replicas(b), std::set<NodeId>{NodeId(1)});
  ASSERT_TRUE(global_->Submit(RemoveSegmentReplica{b, NodeId(1), 0}).ok());
  FaultEnv fenv;
  ASSERT_TRUE(fenv.FlipByte(N(1).store->PathOf(rb.file_name), rb.file_size / 2).ok());
  rb_result = N(1).rep->EnsureLocal(rb);
  ASSERT_TRUE(rb_result.ok()) << rb_result.status().ToString();
  EXPECT_TRUE(rb_result->fetched);
  EXPECT_EQ(bucket_.gets(), gets + 1);
  EXPECT_TRUE(N(1).store->Verify(rb).ok());
  EXPECT_EQ(Replicas(b), std::set<NodeId>{NodeId(1)});
}

// ---- Eviction ----

class EvictionTest : public BucketStorageTest {
 protected:
  // One node, R = 1, `count` segments of about the same size, written by node 1.
  std::vector<SegmentId> AddSegments(int count, uint64_t bound_segments, uint64_t* seg_size) {
    // The bound is set once the file size is known, so the node is created with a placeholder
    // and replaced.
    AddNode(NodeId(1));
    BucketOn();
    std::vector<SegmentId> ids;
    for (int i = 0; i < count; ++i) ids.push_back(AddSegment(1, 200, 20));
    uint64_t max_size = 0;
    for (SegmentId id : ids) max_size = std::max(max_size, Record(id).file_size);
    *seg_size = max_size;
    Node& n = N(1);
    n.rep = std::make_unique<Replicator>(env_, &clock_, global_.get(), n.store.get(), n.peers.get(),
                                         &fetcher_, BucketRepOptions(bound_segments * max_size));
    bound_ = bound_segments * max_size;
    return ids;
  }
  uint64_t bound_ = 0;
};

TEST_F(EvictionTest, KeepsTheBoundLeastRecentlyUsedFirstNeverNotUploaded) {
  uint64_t size = 0;
  std::vector<SegmentId> ids = AddSegments(8, 4, &size);
  // ids[0] is not uploaded (the oldest of all, never evicted); the others are.
  for (size_t i = 1; i < ids.size(); ++i) Upload(ids[i]);
  auto file = [&](size_t i) { return Record(ids[i]).file_name; };
  // Recency: all unknown (oldest) except ids[1] and ids[2], used recently (ids[1] last).
  N(1).store->Touch(file(2));
  N(1).store->Touch(file(1));

  ASSERT_GT(TotalLocalBytes(1), bound_);
  ASSERT_TRUE(N(1).rep->RunOnce().ok());
  EXPECT_LE(TotalLocalBytes(1), bound_);
  auto p = N(1).rep->progress();
  EXPECT_EQ(p.local_bytes, TotalLocalBytes(1));
  EXPECT_EQ(p.cache_max_bytes, bound_);
  // Untouched ones go first, lower ids first: 3, 4, 5, 6 ... until within the bound.
  EXPECT_TRUE(N(1).store->Has(file(0)));
  EXPECT_TRUE(N(1).store->Has(file(1)));
  EXPECT_TRUE(N(1).store->Has(file(2)));
  for (size_t i : {3, 4, 5, 6}) EXPECT_FALSE(N(1).store->Has(file(i))) << i;
  EXPECT_TRUE(N(1).store->Has(file(7)));  // only as many as needed
  EXPECT_EQ(Replicas(ids[3]), std::set<NodeId>{});
  EXPECT_EQ(Replicas(ids[0]), std::set<NodeId>{NodeId(1)});
  EXPECT_EQ(Replicas(ids[1]), std::set<NodeId>{NodeId(1)});
  EXPECT_EQ(p.evicted_segments, 4u);
  uint64_t evicted_bytes = 0;
  for (size_t i = 3; i < ids.size(); ++i) {
    if (!N(1).store->Has(file(i))) evicted_bytes += Record(ids[i]).file_size;
  }
  EXPECT_EQ(p.evicted_bytes, evicted_bytes);

  // Stable: nothing more is evicted within the bound.
  const uint64_t evicted = p.evicted_segments;
  ASSERT_TRUE(N(1).rep->RunOnce().ok());
  EXPECT_EQ(N(1).rep->progress().evicted_segments, evicted);

  // A query needs an evicted segment: fetched back (now the most recently used), and the least
  // recently used copy (ids[7], never accessed) goes to make room.
  auto r = N(1).rep->EnsureLocal(Record(ids[3]));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->fetched);
  EXPECT_EQ(Replicas(ids[3]), std::set<NodeId>{NodeId(1)});
  ASSERT_TRUE(N(1).rep->RunOnce().ok());
  EXPECT_LE(TotalLocalBytes(1), bound_);
  EXPECT_EQ(N(1).rep->progress().evicted_segments, 5u);
  EXPECT_FALSE(N(1).store->Has(file(7)));
  for (size_t i : {0, 1, 2, 3}) EXPECT_TRUE(N(1).store->Has(file(i))) << i;
  // Pinning (a query) makes a copy recent: after another fetch, ids[1] (used before ids[2]
  // was pinned) goes rather than ids[2].
  N(1).store->Pin({file(2)}).reset();
  ASSERT_TRUE(N(1).rep->EnsureLocal(Record(ids[4])).ok());
  ASSERT_TRUE(N(1).rep->RunOnce().ok());
  EXPECT_FALSE(N(1).store->Has(file(1)));
  for (size_t i : {0, 2, 3, 4}) EXPECT_TRUE(N(1).store->Has(file(i))) << i;
}

TEST_F(EvictionTest, NotUploadedSegmentsAreNeverEvictedEvenOverTheBound) {
  uint64_t size = 0;
  std::vector<SegmentId> ids = AddSegments(5, 2, &size);
  ASSERT_TRUE(N(1).rep->RunOnce().ok());  // nothing uploaded: nothing can go
  for (SegmentId id : ids) EXPECT_TRUE(N(1).store->Has(Record(id).file_name));
  auto p = N(1).rep->progress();
  EXPECT_EQ(p.evicted_segments, 0u);
  EXPECT_GT(p.local_bytes, bound_);
  EXPECT_NE(p.last_error.find("cache bound"), std::string::npos) << p.last_error;
  // Once uploaded they can go.
  for (SegmentId id : ids) Upload(id);
  ASSERT_TRUE(N(1).rep->RunOnce().ok());
  EXPECT_LE(TotalLocalBytes(1), bound_);
}

TEST_F(EvictionTest, PinnedFileIsEvictedButDeletedOnlyAfterUnpin) {
  uint64_t size = 0;
  std::vector<SegmentId> ids = AddSegments(4, 2, &size);
  for (SegmentId id : ids) Upload(id);
  auto file = [&](size_t i) { return Record(ids[i]).file_name; };
  // ids[0] is being read, but an older access than the others.
  auto pin = N(1).store->Pin({file(0)});
  for (size_t i = 1; i < ids.size(); ++i) N(1).store->Touch(file(i));
  ASSERT_TRUE(N(1).rep->RunOnce().ok());
  // ids[0] is evicted (unlisted) but still on disk for its reader; it does not count as freed,
  // so ids[1] and ids[2] go as well.
  EXPECT_TRUE(Replicas(ids[0]).empty());
  EXPECT_TRUE(N(1).store->Has(file(0)));
  EXPECT_TRUE(N(1).store->IsDeletionPending(file(0)));
  EXPECT_FALSE(N(1).store->Has(file(1)));
  EXPECT_FALSE(N(1).store->Has(file(2)));
  EXPECT_TRUE(N(1).store->Has(file(3)));
  EXPECT_EQ(N(1).rep->progress().evicted_segments, 3u);
  pin.reset();
  EXPECT_FALSE(N(1).store->Has(file(0)));
  EXPECT_LE(TotalLocalBytes(1), bound_);
}

TEST_F(EvictionTest, NoEvictionWithBucketStorageOff) {
  AddNode(NodeId(1), /*cache_max_bytes=*/1);
  std::vector<SegmentId> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(AddSegment(1));
  for (SegmentId id : ids) ASSERT_TRUE(global_->Submit(SegmentUploaded{id}).ok());
  ASSERT_TRUE(N(1).rep->RunOnce().ok());
  for (SegmentId id : ids) EXPECT_TRUE(N(1).store->Has(Record(id).file_name));
  EXPECT_EQ(N(1).rep->progress().evicted_segments, 0u);
  EXPECT_EQ(N(1).rep->progress().local_bytes, TotalLocalBytes(1));
}

}  // namespace
}  // namespace sediment

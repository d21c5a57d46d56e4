#include "digest/digest.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "global/global.h"
#include "log/local_log.h"

namespace sediment {
namespace {

// Wraps the global log: while `lie` is set, a RegisterSegment is appended but its caller is told
// Unavailable, as a Kafka producer reports a timeout for a record the brokers committed after all.
class LateAckLog final : public CommitLog {
 public:
  explicit LateAckLog(std::unique_ptr<CommitLog> inner) : inner_(std::move(inner)) {}
  int32_t partition_count() const override { return inner_->partition_count(); }
  std::future<Result<Offset>> Append(PartitionId p, std::string record) override {
    auto ev = DecodeGlobalEvent(record);
    bool is_registration = ev.ok() && std::holds_alternative<RegisterSegment>(*ev);
    auto f = inner_->Append(p, std::move(record));
    if (!is_registration || lies_left.load() <= 0) return f;
    --lies_left;
    (void)f.get();  // durable and in the log, but the caller hears otherwise
    std::promise<Result<Offset>> lie;
    lie.set_value(Status::Unavailable("injected: acknowledgement timed out"));
    return lie.get_future();
  }
  Result<std::vector<LogRecord>> Read(PartitionId p, Offset from, size_t max_bytes,
                                      std::chrono::milliseconds max_wait) override {
    return inner_->Read(p, from, max_bytes, max_wait);
  }
  Status DeleteBefore(PartitionId p, Offset o) override { return inner_->DeleteBefore(p, o); }
  Result<Offset> StartOffset(PartitionId p) override { return inner_->StartOffset(p); }
  Result<Offset> EndOffset(PartitionId p) override { return inner_->EndOffset(p); }
  std::string Health() override { return inner_->Health(); }

  std::atomic<int> lies_left{0};

 private:
  std::unique_ptr<CommitLog> inner_;
};

class DigestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("digest_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    Open();
  }
  void TearDown() override {
    Close();
    std::filesystem::remove_all(dir_);
  }
  void Open(std::chrono::milliseconds flush_age = std::chrono::milliseconds(50)) {
    LocalLogOptions lo;
    lo.partitions = 4;
    log_ = OpenLocalLog(env_, dir_ / "ingest", lo).value();
    LocalLogOptions go;
    go.partitions = 1;
    auto late = std::make_unique<LateAckLog>(OpenLocalLog(env_, dir_ / "global", go).value());
    late_ack_ = late.get();
    late_ack_->lies_left = lies_;
    glog_ = std::move(late);
    global_ = Global::Open(env_, glog_.get(), dir_ / "snap").value();
    DigestOptions o;
    o.segment_dir = dir_ / "segments";
    o.flush_age = flush_age;
    o.truncate_every = std::chrono::milliseconds(100);
    digest_ = std::make_unique<Digest>(env_, Clock::Real(), log_.get(), global_.get(), o);
    ASSERT_TRUE(digest_->Start().ok());
    digest_->AssignAll();
    ASSERT_TRUE(digest_->WaitClaimed(std::chrono::seconds(10)));
  }
  void Close() {
    if (digest_) digest_->Stop();
    digest_.reset();
    if (global_) (void)global_->Close();
    global_.reset();
    glog_.reset();
    log_.reset();
  }

  // Appends `n` events of datasource `host` numbered from `first`.
  void Append(const std::string& host, int first, int n) {
    IngestMessage m;
    m.datasource = Datasource{"repo", {{"#host", host}}};
    for (int i = first; i < first + n; ++i) {
      Event e;
      e.timestamp_ms = 1'700'000'000'000 + i;
      e.raw = host + " event " + std::to_string(i);
      m.events.push_back(e);
    }
    auto off =
        log_->Append(m.datasource.PartitionFor(log_->partition_count()), EncodeIngestMessage(m))
            .get();
    ASSERT_TRUE(off.ok()) << off.status().ToString();
  }

  // Every @rawstring in registered segments plus (after the cut) in buffers, with multiplicity.
  std::map<std::string, int> Visible() {
    std::map<std::string, int> seen;
    auto buffers = digest_->SnapshotBuffers();
    std::vector<SegmentRecord> segs;
    std::map<std::pair<std::string, int32_t>, Position> flushed;
    global_->Read([&](const GlobalState& s) {
      for (const auto& [id, seg] : s.segments) segs.push_back(seg);
      flushed = s.flushed_through;
    });
    for (const auto& seg : segs) {
      auto r = SegmentReader::Open(env_, (dir_ / "segments" / seg.file_name).string());
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (!r.ok()) continue;
      for (size_t b = 0; b < (*r)->blocks().size(); ++b) {
        DecodedBlock block;
        EXPECT_TRUE((*r)->ReadBlock(b, &block).ok());
        for (auto raw : block.raw) seen[std::string(raw)]++;
      }
    }
    for (const auto& b : buffers) {
      auto ft = flushed.find({b.datasource.Key(), b.partition.value});
      for (const auto& e : *b.events) {
        if (ft != flushed.end() && e.pos <= ft->second) continue;
        seen[e.event.raw]++;
      }
    }
    return seen;
  }

  // Waits until every partition is read to its end and nothing is buffered.
  void WaitFlushed() {
    for (int i = 0; i < 200; ++i) {
      bool done = true;
      for (const auto& s : digest_->PartitionStatuses()) {
        if (s.buffered_events > 0 || s.next_offset < log_->EndOffset(s.partition).value()) {
          done = false;
        }
      }
      if (done) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    FAIL() << "buffers did not drain";
  }

  Env* env_ = Env::Default();
  std::filesystem::path dir_;
  std::unique_ptr<CommitLog> log_, glog_;
  std::unique_ptr<Global> global_;
  std::unique_ptr<Digest> digest_;
  LateAckLog* late_ack_ = nullptr;
  int lies_ = 0;  // registrations whose acknowledgement is lost, for the next Open()
};

TEST_F(DigestTest, EventsReachSegmentsExactlyOnce) {
  for (int i = 0; i < 20; ++i) Append(i % 2 ? "a" : "b", i * 10, 10);
  WaitFlushed();
  auto seen = Visible();
  ASSERT_EQ(seen.size(), 200u);
  for (const auto& [raw, n] : seen) EXPECT_EQ(n, 1) << raw;
}

TEST_F(DigestTest, QueryCutCountsEachEventOnceWhileFlushing) {
  // Concurrent appends and snapshots: every snapshot shows each appended event at most once,
  // and the final one shows all of them.
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 0; i < 100; ++i) Append("h" + std::to_string(i % 5), i * 5, 5);
    done = true;
  });
  while (!done) {
    for (const auto& [raw, n] : Visible()) ASSERT_EQ(n, 1) << raw;
  }
  writer.join();
  WaitFlushed();
  EXPECT_EQ(Visible().size(), 500u);
}

TEST_F(DigestTest, RestartReplaysWithoutDuplicatesOrLoss) {
  Close();
  Open(std::chrono::milliseconds(60'000));  // nothing flushes by age: everything stays buffered
  for (int i = 0; i < 10; ++i) Append("a", i * 10, 10);
  for (int i = 0; i < 100 && Visible().size() < 100; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(digest_->FlushAll().ok());
  size_t segments = 0;
  global_->Read([&](const GlobalState& s) { segments = s.segments.size(); });
  EXPECT_EQ(segments, 1u);
  for (int i = 10; i < 20; ++i) Append("a", i * 10, 10);  // buffered only, then "crash"
  for (int i = 0; i < 100 && Visible().size() < 200; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(Visible().size(), 200u);
  Close();
  Open();
  WaitFlushed();
  auto seen = Visible();
  ASSERT_EQ(seen.size(), 200u);
  for (const auto& [raw, n] : seen) EXPECT_EQ(n, 1) << raw;
}

// A registration that the log took although its append reported a failure: the retry is rejected
// as already flushed, and the digest must recognise its own segment instead of deleting it.
TEST_F(DigestTest, RegistrationWhoseAckWasLostIsNotUndone) {
  Close();
  lies_ = 2;
  Open();
  for (int i = 0; i < 10; ++i) Append("a", i * 10, 10);
  WaitFlushed();
  EXPECT_EQ(late_ack_->lies_left.load(), 0);
  auto seen = Visible();  // opens every registered segment file: none may be missing
  ASSERT_EQ(seen.size(), 100u);
  for (const auto& [raw, n] : seen) EXPECT_EQ(n, 1) << raw;
  for (const auto& s : digest_->PartitionStatuses())
    EXPECT_EQ(s.error.find("lost"), std::string::npos);
  // More data still flows: the worker did not stop.
  for (int i = 10; i < 15; ++i) Append("a", i * 10, 10);
  WaitFlushed();
  EXPECT_EQ(Visible().size(), 150u);
  Close();
  lies_ = 0;
  Open();
  EXPECT_EQ(Visible().size(), 150u);
}

// A producer that retried after losing an acknowledgement can leave one message twice in the log
// (Kafka's epoch bump resets sequence numbers): the second copy must not add events.
TEST_F(DigestTest, SecondCopyOfAMessageIsDropped) {
  IngestMessage m;
  m.id = 0xfeedbeefcafe1234ull;
  m.datasource = Datasource{"repo", {{"#host", "dup"}}};
  for (int i = 0; i < 5; ++i) {
    Event e;
    e.timestamp_ms = 1'700'000'000'000 + i;
    e.raw = "dup event " + std::to_string(i);
    m.events.push_back(e);
  }
  PartitionId p = m.datasource.PartitionFor(log_->partition_count());
  std::string record = EncodeIngestMessage(m);
  ASSERT_TRUE(log_->Append(p, record).get().ok());
  Append("dup", 100, 3);  // something in between, as in a real log
  ASSERT_TRUE(log_->Append(p, record).get().ok());
  WaitFlushed();
  auto seen = Visible();
  ASSERT_EQ(seen.size(), 8u);
  for (const auto& [raw, n] : seen) EXPECT_EQ(n, 1) << raw;
  uint64_t dropped = 0;
  for (const auto& s : digest_->PartitionStatuses()) dropped += s.duplicates_dropped;
  EXPECT_EQ(dropped, 1u);
}

TEST_F(DigestTest, OrphanSegmentFilesAreRemovedOnStart) {
  Append("a", 0, 10);
  WaitFlushed();
  Close();
  std::string orphan = (dir_ / "segments" / "p0-e9-o0-i0.seg").string();
  ASSERT_TRUE(env_->WriteFileAtomic(orphan, "junk").ok());
  Open();
  EXPECT_FALSE(env_->FileExists(orphan));
  EXPECT_EQ(Visible().size(), 10u);
}

TEST_F(DigestTest, CommitLogIsTruncatedOnlyBelowTheReplayPoint) {
  for (int i = 0; i < 10; ++i) Append("a", i * 10, 10);
  WaitFlushed();
  PartitionId p = Datasource{"repo", {{"#host", "a"}}}.PartitionFor(4);
  Offset start{0};
  for (int i = 0; i < 100; ++i) {
    start = log_->StartOffset(p).value();
    if (start.value > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  Offset replay{0};
  global_->Read([&](const GlobalState& s) { replay = s.partitions.at(p.value).replay_point; });
  EXPECT_GT(start.value, 0);
  EXPECT_LE(start, replay);
  // Everything is still visible after truncation and a restart.
  Close();
  Open();
  EXPECT_EQ(Visible().size(), 100u);
}

// Two nodes on one commit log and one global log. Node 1 owns everything; node 2 takes one
// partition over (the group moved it while node 1 was paused). Node 1 must not register anything
// for it any more, must delete the file whose registration was rejected, and the cut over both
// nodes' buffers (the current owner's only) plus the segments counts each event exactly once.
TEST_F(DigestTest, TakeoverFencesTheStaleOwner) {
  Close();
  Open(std::chrono::milliseconds(60'000));  // node 1 flushes only when asked
  const Datasource ds{"repo", {{"#host", "a"}}};
  const PartitionId part = ds.PartitionFor(log_->partition_count());
  for (int i = 0; i < 5; ++i) Append("a", i * 10, 10);
  for (int i = 0; i < 100 && Visible().size() < 50; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(digest_->FlushAll().ok());  // segment 1 registered by node 1
  for (int i = 5; i < 10; ++i) Append("a", i * 10, 10);
  for (int i = 0; i < 100 && Visible().size() < 100; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));

  // Node 2: its own Global replica and segment directory.
  auto global2 = Global::Open(env_, glog_.get(), (dir_ / "snap2").string()).value();
  DigestOptions o2;
  o2.segment_dir = (dir_ / "segments2").string();
  o2.node = NodeId(2);
  o2.flush_age = std::chrono::milliseconds(50);
  auto digest2 = std::make_unique<Digest>(env_, Clock::Real(), log_.get(), global2.get(), o2);
  ASSERT_TRUE(digest2->Start().ok());
  digest2->Assign({part});
  ASSERT_TRUE(digest2->WaitClaimed(std::chrono::seconds(10)));

  // Node 1 still believes it owns the partition: its flush is rejected and its file removed.
  Status stale = digest_->FlushAll();
  EXPECT_EQ(stale.code(), StatusCode::kRejected) << stale.ToString();
  std::set<std::string> node1_files;
  for (const auto& e : std::filesystem::directory_iterator(dir_ / "segments")) {
    node1_files.insert(e.path().filename().string());
  }
  size_t node1_registered = 0;
  global_->Read([&](const GlobalState& s) {
    for (const auto& [id, seg] : s.segments) {
      EXPECT_TRUE(seg.node == NodeId(1) ? node1_files.count(seg.file_name) == 1 : true);
      if (seg.node == NodeId(1)) ++node1_registered;
    }
  });
  EXPECT_EQ(node1_files.size(), node1_registered) << "a rejected segment file was left behind";
  digest_->Revoke({part});

  // Node 2 replays from the replay point, skips what segment 1 holds and flushes the rest.
  for (int i = 0; i < 300; ++i) {
    size_t segs = 0;
    global2->Read([&](const GlobalState& s) { segs = s.segments.size(); });
    auto st = digest2->PartitionStatuses();
    if (segs == 2 && !st.empty() && st[0].buffered_events == 0 &&
        st[0].next_offset == log_->EndOffset(part).value()) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::map<std::string, int> seen;
  global2->Read([&](const GlobalState& s) {
    for (const auto& [id, seg] : s.segments) {
      auto dir = seg.node == NodeId(1) ? dir_ / "segments" : dir_ / "segments2";
      auto r = SegmentReader::Open(env_, (dir / seg.file_name).string());
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      for (size_t b = 0; b < (*r)->blocks().size(); ++b) {
        DecodedBlock block;
        ASSERT_TRUE((*r)->ReadBlock(b, &block).ok());
        for (auto raw : block.raw) seen[std::string(raw)]++;
      }
    }
  });
  EXPECT_EQ(seen.size(), 100u);
  for (const auto& [raw, n] : seen) EXPECT_EQ(n, 1) << raw;
  digest2->Stop();
  (void)global2->Close();
}
}  // namespace
}  // namespace sediment

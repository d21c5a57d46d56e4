#include "digest/digest.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "common/testing/fault_env.h"
#include "common/thread.h"
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
    if (ev.ok() && std::holds_alternative<SetTruncationPoint>(*ev) &&
        take_over_before_truncation.exchange(false)) {
      // Node 2 claims the partition just before this node's truncation point reaches the log.
      const auto& t = std::get<SetTruncationPoint>(*ev);
      auto claimed =
          inner_->Append(p, EncodeGlobalEvent(ClaimPartition{t.partition, NodeId(2), t.epoch}))
              .get();
      EXPECT_TRUE(claimed.ok()) << claimed.status().ToString();
    }
    if (ev.ok() && std::holds_alternative<ClaimPartition>(*ev)) {
      while (hold_claims.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (refuse_claims.load()) {
        std::promise<Result<Offset>> refused;
        refused.set_value(Status::Unavailable("injected: the global log refused the claim"));
        return refused.get_future();
      }
    }
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
  void WakeReaders(PartitionId p) override { inner_->WakeReaders(p); }
  Status DeleteBefore(PartitionId p, Offset o) override { return inner_->DeleteBefore(p, o); }
  Result<Offset> StartOffset(PartitionId p) override { return inner_->StartOffset(p); }
  Result<Offset> EndOffset(PartitionId p) override { return inner_->EndOffset(p); }
  std::string Health() override { return inner_->Health(); }

  std::atomic<int> lies_left{0};
  // Set: the next SetTruncationPoint is preceded in the log by a ClaimPartition of node 2 at its
  // epoch (another node took the partition over while this one still believed it owned it).
  std::atomic<bool> take_over_before_truncation{false};
  // While set, a ClaimPartition append waits (a claim in flight).
  std::atomic<bool> hold_claims{false};
  // While set, a ClaimPartition is not appended and its caller is told Unavailable.
  std::atomic<bool> refuse_claims{false};

 private:
  std::unique_ptr<CommitLog> inner_;
};

// Wraps the ingest log: Read leaves out the records at `hidden` offsets, as Kafka skips the
// offsets of transaction markers.
class OffsetGapLog final : public CommitLog {
 public:
  OffsetGapLog(CommitLog* inner, std::set<int64_t> hidden)
      : inner_(inner), hidden_(std::move(hidden)) {}
  int32_t partition_count() const override { return inner_->partition_count(); }
  std::future<Result<Offset>> Append(PartitionId p, std::string record) override {
    return inner_->Append(p, std::move(record));
  }
  Result<std::vector<LogRecord>> Read(PartitionId p, Offset from, size_t max_bytes,
                                      std::chrono::milliseconds max_wait) override {
    auto r = inner_->Read(p, from, max_bytes, max_wait);
    if (r.ok()) {
      std::erase_if(*r, [&](const LogRecord& rec) { return hidden_.count(rec.offset.value); });
    }
    return r;
  }
  void WakeReaders(PartitionId p) override { inner_->WakeReaders(p); }
  Status DeleteBefore(PartitionId p, Offset o) override { return inner_->DeleteBefore(p, o); }
  Result<Offset> StartOffset(PartitionId p) override { return inner_->StartOffset(p); }
  Result<Offset> EndOffset(PartitionId p) override { return inner_->EndOffset(p); }
  std::string Health() override { return inner_->Health(); }

 private:
  CommitLog* inner_;
  std::set<int64_t> hidden_;
};

// Wraps the ingest log: while `paused`, Read answers nothing (after max_wait), as for a worker
// whose process is stopped.
class PausableLog final : public CommitLog {
 public:
  explicit PausableLog(CommitLog* inner) : inner_(inner) {}
  int32_t partition_count() const override { return inner_->partition_count(); }
  std::future<Result<Offset>> Append(PartitionId p, std::string record) override {
    return inner_->Append(p, std::move(record));
  }
  Result<std::vector<LogRecord>> Read(PartitionId p, Offset from, size_t max_bytes,
                                      std::chrono::milliseconds max_wait) override {
    if (paused.load()) {
      std::this_thread::sleep_for(std::min(max_wait, std::chrono::milliseconds(20)));
      return std::vector<LogRecord>{};
    }
    return inner_->Read(p, from, max_bytes, max_wait);
  }
  void WakeReaders(PartitionId p) override { inner_->WakeReaders(p); }
  Status DeleteBefore(PartitionId p, Offset o) override { return inner_->DeleteBefore(p, o); }
  Result<Offset> StartOffset(PartitionId p) override { return inner_->StartOffset(p); }
  Result<Offset> EndOffset(PartitionId p) override { return inner_->EndOffset(p); }
  std::string Health() override { return inner_->Health(); }

  std::atomic<bool> paused{false};

 private:
  CommitLog* inner_;
};

// Wraps the ingest log and counts Reads: an idle digest worker waits in Read (max_wait), so the
// count over an idle period is bounded by its length over the wait; a polling loop is not.
class CountingLog final : public CommitLog {
 public:
  explicit CountingLog(CommitLog* inner) : inner_(inner) {}
  int32_t partition_count() const override { return inner_->partition_count(); }
  std::future<Result<Offset>> Append(PartitionId p, std::string record) override {
    return inner_->Append(p, std::move(record));
  }
  Result<std::vector<LogRecord>> Read(PartitionId p, Offset from, size_t max_bytes,
                                      std::chrono::milliseconds max_wait) override {
    reads.fetch_add(1);
    reading.fetch_add(1);
    auto r = inner_->Read(p, from, max_bytes, max_wait);
    reading.fetch_sub(1);
    return r;
  }
  void WakeReaders(PartitionId p) override { inner_->WakeReaders(p); }
  Status DeleteBefore(PartitionId p, Offset o) override { return inner_->DeleteBefore(p, o); }
  Result<Offset> StartOffset(PartitionId p) override { return inner_->StartOffset(p); }
  Result<Offset> EndOffset(PartitionId p) override { return inner_->EndOffset(p); }
  std::string Health() override { return inner_->Health(); }

  std::atomic<uint64_t> reads{0};
  std::atomic<int> reading{0};  // Reads in progress

 private:
  CommitLog* inner_;
};

// Wraps the ingest log: serves one Read of a partition at a time, the next waiting its turn within
// its own max_wait (counted from the call), as KafkaLog's shared consumer does.
class SerialReadLog final : public CommitLog {
 public:
  explicit SerialReadLog(std::unique_ptr<CommitLog> inner)
      : inner_(std::move(inner)), mu_(inner_->partition_count()) {}
  int32_t partition_count() const override { return inner_->partition_count(); }
  std::future<Result<Offset>> Append(PartitionId p, std::string record) override {
    return inner_->Append(p, std::move(record));
  }
  Result<std::vector<LogRecord>> Read(PartitionId p, Offset from, size_t max_bytes,
                                      std::chrono::milliseconds max_wait) override {
    const auto deadline = std::chrono::steady_clock::now() + max_wait;
    std::lock_guard lock(mu_.at(p.value));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    return inner_->Read(p, from, max_bytes, std::max(left, std::chrono::milliseconds(0)));
  }
  void WakeReaders(PartitionId p) override { inner_->WakeReaders(p); }
  Status DeleteBefore(PartitionId p, Offset o) override { return inner_->DeleteBefore(p, o); }
  Result<Offset> StartOffset(PartitionId p) override { return inner_->StartOffset(p); }
  Result<Offset> EndOffset(PartitionId p) override { return inner_->EndOffset(p); }
  std::string Health() override { return inner_->Health(); }

 private:
  std::unique_ptr<CommitLog> inner_;
  std::vector<std::mutex> mu_;
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
    if (serial_reads_) log_ = std::make_unique<SerialReadLog>(std::move(log_));
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
    if (tweak_) tweak_(&o);
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
    inner_log_.reset();
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

  // After Close(): a fresh 4-partition ingest log in inner_log_ (for the test's wrapper around it
  // to go in log_) and a fresh 1-partition global log under a plain Global (no LateAckLog).
  void OpenFreshLogs() {
    LocalLogOptions lo;
    lo.partitions = 4;
    inner_log_ = OpenLocalLog(env_, dir_ / "ingest2", lo).value();
    LocalLogOptions go;
    go.partitions = 1;
    glog_ = OpenLocalLog(env_, dir_ / "global2", go).value();
    global_ = Global::Open(env_, glog_.get(), dir_ / "snap2").value();
  }

  // The options of a digest over the logs of OpenFreshLogs.
  DigestOptions FreshDigestOptions() const {
    DigestOptions o;
    o.segment_dir = dir_ / "segments";
    o.flush_age = std::chrono::milliseconds(50);
    return o;
  }

  // Reopens the digest on a CountingLog over a fresh 4-partition ingest log, with every partition
  // assigned and claimed; returns the counter.
  CountingLog* OpenCounting(std::chrono::milliseconds idle_read_wait) {
    OpenFreshLogs();
    auto counting = std::make_unique<CountingLog>(inner_log_.get());
    CountingLog* counter = counting.get();
    log_ = std::move(counting);
    DigestOptions o = FreshDigestOptions();
    o.idle_read_wait = idle_read_wait;
    digest_ = std::make_unique<Digest>(env_, Clock::Real(), log_.get(), global_.get(), o);
    EXPECT_TRUE(digest_->Start().ok());
    digest_->AssignAll();
    EXPECT_TRUE(digest_->WaitClaimed(std::chrono::seconds(10)));
    return counter;
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

  // Waits until pred() holds; false after `timeout`.
  static bool WaitFor(const std::function<bool()>& pred,
                      std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (!pred()) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

  void Submit(const GlobalEvent& ev) {
    auto r = global_->Submit(ev);
    ASSERT_TRUE(r.ok()) << GlobalEventName(ev) << ": " << r.status().ToString();
  }

  std::map<SegmentId, SegmentRecord> Segments() {
    std::map<SegmentId, SegmentRecord> out;
    global_->Read([&](const GlobalState& s) { out = s.segments; });
    return out;
  }

  PartitionState PartitionOf(PartitionId p) {
    PartitionState out;
    global_->Read([&](const GlobalState& s) { out = s.partitions.at(p.value); });
    return out;
  }

  std::optional<PartitionDigestStatus> FindStatus(PartitionId p) {
    for (const auto& s : digest_->PartitionStatuses()) {
      if (s.partition == p) return s;
    }
    return std::nullopt;
  }

  PartitionDigestStatus StatusOf(PartitionId p) {
    for (const auto& s : digest_->PartitionStatuses()) {
      if (s.partition == p) return s;
    }
    ADD_FAILURE() << "partition " << p.value << " has no status";
    return {};
  }

  // Waits until the worker of `p` has read the partition to its end.
  void WaitRead(PartitionId p) {
    ASSERT_TRUE(WaitFor([&] { return StatusOf(p).next_offset == log_->EndOffset(p).value(); }));
  }

  // Moves a segment's only copy (this node's) to node 2, as if node 1 had dropped an extra copy
  // after node 2 announced one. This node's replica goes first: adding node 2 first would list
  // two copies for a moment, and with R = 2 the truncation thread could see the segment durable
  // then and delete the log records a rebuild of it needs.
  void MoveToNode2(SegmentId id) {
    Submit(RemoveSegmentReplica{id, NodeId(1), 0});
    Submit(AddSegmentReplica{id, NodeId(2)});
  }

  // Options of the rebuild tests: liveness from `dead_`, quick checks.
  void UseLiveness() {
    tweak_ = [this](DigestOptions* o) {
      o->is_alive = [this](NodeId n) {
        std::lock_guard lock(dead_mu_);
        return dead_.count(n) == 0;
      };
      o->rebuild_after = std::chrono::milliseconds(100);
      o->rebuild_check_every = std::chrono::milliseconds(20);
    };
  }
  void SetDead(std::set<NodeId> dead) {
    std::lock_guard lock(dead_mu_);
    dead_ = std::move(dead);
  }

  // File names in this node's segment directory.
  std::set<std::string> LocalFiles() {
    std::set<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_ / "segments")) {
      out.insert(e.path().filename().string());
    }
    return out;
  }

  // The raw strings of a segment file of this node, with multiplicity.
  std::map<std::string, int> FileEvents(const std::string& name) {
    std::map<std::string, int> seen;
    auto r = SegmentReader::Open(env_, (dir_ / "segments" / name).string());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return seen;
    for (size_t b = 0; b < (*r)->blocks().size(); ++b) {
      DecodedBlock block;
      EXPECT_TRUE((*r)->ReadBlock(b, &block).ok());
      for (auto raw : block.raw) seen[std::string(raw)]++;
    }
    return seen;
  }

  FaultEnv fault_env_;  // tests that inject disk faults point env_ here before Open()
  Env* env_ = Env::Default();
  std::filesystem::path dir_;
  std::unique_ptr<CommitLog> log_, glog_;
  std::unique_ptr<CommitLog> inner_log_;  // under log_ when log_ wraps it (OffsetGapLog)
  std::unique_ptr<Global> global_;
  std::unique_ptr<Digest> digest_;
  LateAckLog* late_ack_ = nullptr;
  int lies_ = 0;  // registrations whose acknowledgement is lost, for the next Open()
  std::function<void(DigestOptions*)> tweak_;  // applied to the options of the next Open()
  bool serial_reads_ = false;  // the next Open() wraps the ingest log in a SerialReadLog
  std::mutex dead_mu_;
  std::set<NodeId> dead_;  // nodes the rebuild tests' is_alive reports dead
};

// An ingest message with an id, as the ingest path writes it (so that a copy can be detected).
IngestMessage MessageWithId(uint64_t id, const std::string& host, int n) {
  IngestMessage m;
  m.id = id;
  m.datasource = Datasource{"repo", {{"#host", host}}};
  for (int i = 0; i < n; ++i) {
    Event e;
    e.timestamp_ms = 1'700'000'000'000 + i;
    e.raw = host + " message " + std::to_string(id) + " event " + std::to_string(i);
    m.events.push_back(e);
  }
  return m;
}

TEST_F(DigestTest, EventsReachSegmentsExactlyOnce) {
  for (int i = 0; i < 20; ++i) Append(i % 2 ? "a" : "b", i * 10, 10);
  WaitFlushed();
  auto seen = Visible();
  ASSERT_EQ(seen.size(), 200u);
  for (const auto& [raw, n] : seen) EXPECT_EQ(n, 1) << raw;
}

// Given the node's SegmentStore, the digest writes through it: every file has the flushed shape of
// segment/file_name.h for its partition, claim epoch and first position, and opens in the store.
TEST_F(DigestTest, WritesThroughTheNodesSegmentStore) {
  digest_->Stop();
  digest_.reset();
  SegmentStore store(env_, (dir_ / "segments").string());
  // The digest borrows the store: it goes first, also when an assertion ends the test early.
  struct StopFirst {
    std::unique_ptr<Digest>* digest;
    ~StopFirst() { digest->reset(); }
  } stop_first{&digest_};
  DigestOptions o;
  o.flush_age = std::chrono::milliseconds(50);
  digest_ = std::make_unique<Digest>(Clock::Real(), log_.get(), global_.get(), &store, o);
  ASSERT_TRUE(digest_->Start().ok());
  digest_->AssignAll();
  ASSERT_TRUE(digest_->WaitClaimed(std::chrono::seconds(10)));
  for (int i = 0; i < 8; ++i) Append(i % 2 ? "a" : "b", i * 10, 10);
  WaitFlushed();
  std::vector<SegmentRecord> segs;
  global_->Read([&](const GlobalState& s) {
    for (const auto& [id, seg] : s.segments) segs.push_back(seg);
  });
  ASSERT_FALSE(segs.empty());
  for (const auto& seg : segs) {
    auto name = ParseSegmentFileName(seg.file_name);
    ASSERT_TRUE(name.ok()) << name.status().ToString();
    EXPECT_EQ(name->kind, SegmentFileKind::kFlushed);
    EXPECT_EQ(name->partition, seg.partition);
    EXPECT_EQ(name->epoch, seg.epoch);
    EXPECT_EQ(name->first, seg.min_pos);
    auto reader = store.Open(seg.file_name);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    EXPECT_EQ((*reader)->info().event_count, seg.event_count);
  }
  EXPECT_EQ(store.List()->size(), segs.size());
  EXPECT_EQ(Visible().size(), 80u);
}

// A full disk (issue 13): segment writes fail, the digest keeps the events buffered, says why in
// its status and retries; once space returns every event reaches a segment exactly once.
TEST_F(DigestTest, AFullDiskDelaysSegmentsAndLosesNothing) {
  Close();
  env_ = &fault_env_;
  Open(std::chrono::milliseconds(300));
  for (int i = 0; i < 5; ++i) Append(i % 2 ? "a" : "b", i * 10, 10);
  fault_env_.FailWritesAfter(0);  // ENOSPC from here on
  auto error = [&] {
    for (const auto& s : digest_->PartitionStatuses()) {
      if (!s.error.empty()) return s.error;
    }
    return std::string();
  };
  ASSERT_TRUE(WaitFor([&] { return !error().empty(); }, std::chrono::seconds(10)));
  size_t segments = 1;
  global_->Read([&](const GlobalState& s) { segments = s.segments.size(); });
  EXPECT_EQ(segments, 0u);
  auto seen = Visible();  // still served from the buffers
  EXPECT_EQ(seen.size(), 50u);
  fault_env_.FailWritesAfter(-1);  // space again
  WaitFlushed();
  ASSERT_TRUE(WaitFor([&] { return error().empty(); }, std::chrono::seconds(10))) << error();
  global_->Read([&](const GlobalState& s) { segments = s.segments.size(); });
  EXPECT_GE(segments, 1u);
  seen = Visible();
  ASSERT_EQ(seen.size(), 50u);
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

TEST_F(DigestTest, SnapshotsShareTheBufferedEventsInsteadOfCopyingThem) {
  Close();
  Open(std::chrono::hours(1));  // nothing flushes by age during the test
  const Datasource ds{"repo", {{"#host", "a"}}};
  const PartitionId part = ds.PartitionFor(log_->partition_count());
  Append("a", 0, 10);
  WaitRead(part);
  auto first = digest_->SnapshotBuffers();
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(first[0].events->size(), 10u);
  // A second snapshot without new events hands out the very same events (no copy).
  auto again = digest_->SnapshotBuffers();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].events.get(), first[0].events.get());

  Append("a", 10, 5);
  WaitRead(part);
  auto later = digest_->SnapshotBuffers();
  ASSERT_EQ(later.size(), 2u);  // the earlier run, shared, then the newer events
  EXPECT_EQ(later[0].events.get(), first[0].events.get());
  EXPECT_EQ(later[1].events->size(), 5u);
  EXPECT_EQ(later[1].events->front().event.raw, "a event 10");
  EXPECT_EQ(StatusOf(part).buffered_events, 15u);

  // A flush writes every run into one segment and releases them; the snapshots stay readable.
  ASSERT_TRUE(digest_->FlushAll().ok());
  EXPECT_TRUE(digest_->SnapshotBuffers().empty());
  EXPECT_EQ(StatusOf(part).buffered_events, 0u);
  EXPECT_EQ(first[0].events->back().event.raw, "a event 9");
  std::map<std::string, int> seen = Visible();
  EXPECT_EQ(seen.size(), 15u);
  for (const auto& [raw, n] : seen) EXPECT_EQ(n, 1) << raw;
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

// A producer retry stored on both sides of the replay point (the original below it, in a
// registered segment; the copy above it) must be dropped after a restart as it was before: the
// new claim seeds its duplicate window from the records just below the replay point that the log
// still holds (here from offset 2: an earlier truncation deleted the rest).
TEST_F(DigestTest, SecondCopyAboveTheReplayPointIsDroppedAfterARestart) {
  Close();
  tweak_ = [](DigestOptions* o) { o->truncate = false; };  // the test truncates itself
  Open();
  const IngestMessage m = MessageWithId(0x5eed0000feed0001ull, "dup", 4);
  const PartitionId p = m.datasource.PartitionFor(log_->partition_count());
  const std::string record = EncodeIngestMessage(m);
  for (int i = 0; i < 3; ++i) Append("dup", i * 10, 10);  // offsets 0..2
  auto original = log_->Append(p, record).get();          // offset 3
  ASSERT_TRUE(original.ok()) << original.status().ToString();
  ASSERT_EQ(original->value, 3);
  Append("dup", 100, 5);  // offset 4
  WaitFlushed();
  ASSERT_TRUE(WaitFor([&] { return PartitionOf(p).replay_point == Offset(5); }));

  digest_->Stop();
  ASSERT_TRUE(log_->DeleteBefore(p, Offset(2)).ok());
  auto copy = log_->Append(p, record).get();  // the retry, above the replay point
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  ASSERT_EQ(copy->value, 5);
  Close();
  Open();  // claims again and replays from offset 5
  WaitFlushed();
  auto seen = Visible();
  EXPECT_EQ(seen.size(), 39u);
  for (const auto& [raw, n] : seen) EXPECT_EQ(n, 1) << raw;
  EXPECT_EQ(StatusOf(p).duplicates_dropped, 1u);
}

// The seeding's bounds keep the records nearest to the replay point: with room for one record,
// the copy of the message right below it is dropped, the copy of the one before is not.
TEST_F(DigestTest, DuplicateWindowSeedingKeepsTheNearestRecordsWithinItsBounds) {
  Close();
  tweak_ = [](DigestOptions* o) {
    o->dedup_seed_records = 100;
    o->dedup_seed_bytes = 1;  // one record: the first read
    o->truncate = false;
  };
  Open();
  const IngestMessage far = MessageWithId(0x5eed0000feed0002ull, "dup", 2);
  const IngestMessage near = MessageWithId(0x5eed0000feed0003ull, "dup", 3);
  const PartitionId p = far.datasource.PartitionFor(log_->partition_count());
  ASSERT_TRUE(log_->Append(p, EncodeIngestMessage(far)).get().ok());   // offset 0
  ASSERT_TRUE(log_->Append(p, EncodeIngestMessage(near)).get().ok());  // offset 1
  WaitFlushed();
  ASSERT_TRUE(WaitFor([&] { return PartitionOf(p).replay_point == Offset(2); }));
  digest_->Stop();
  ASSERT_TRUE(log_->Append(p, EncodeIngestMessage(far)).get().ok());
  ASSERT_TRUE(log_->Append(p, EncodeIngestMessage(near)).get().ok());
  Close();
  Open();
  WaitFlushed();
  auto seen = Visible();
  EXPECT_EQ(seen.size(), 5u);
  for (const auto& [raw, n] : seen) {
    EXPECT_EQ(n, raw.find("message " + std::to_string(far.id)) != std::string::npos ? 2 : 1) << raw;
  }
  EXPECT_EQ(StatusOf(p).duplicates_dropped, 1u);
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

// Kafka retention (or anyone else) deletes records the digest has not read yet, while it is
// stopped: the gap is reported as lost offsets, with the range, never skipped silently; the
// records after it are digested.
TEST_F(DigestTest, RecordsDeletedBeforeTheyWereDigestedAreReportedLost) {
  const PartitionId part = Datasource{"repo", {{"#host", "a"}}}.PartitionFor(4);
  Append("a", 0, 10);  // offset 0, digested
  WaitFlushed();
  ASSERT_TRUE(WaitFor([&] { return PartitionOf(part).replay_point.value >= 1; }));
  Close();
  LocalLogOptions lo;
  lo.partitions = 4;
  log_ = OpenLocalLog(env_, dir_ / "ingest", lo).value();
  for (int i = 1; i < 6; ++i) Append("a", i * 10, 10);  // offsets 1..5, never digested
  ASSERT_EQ(log_->EndOffset(part).value(), Offset(6));
  ASSERT_TRUE(log_->DeleteBefore(part, Offset(4)).ok());  // "retention" drops offsets 1..3
  log_.reset();
  Open();
  WaitFlushed();
  const PartitionDigestStatus st = StatusOf(part);
  ASSERT_EQ(st.lost.ranges.size(), 1u);
  EXPECT_EQ(st.lost.ranges[0].first, Offset(1));
  EXPECT_EQ(st.lost.ranges[0].end, Offset(4));
  EXPECT_EQ(st.lost.ranges[0].offsets(), 3);
  EXPECT_GT(st.lost.ranges[0].detected_ms, 0);
  EXPECT_EQ(st.lost.range_count, 1u);
  EXPECT_EQ(st.lost.offsets, 3u);
  auto by_partition = digest_->LostOffsetsByPartition();
  ASSERT_EQ(by_partition.size(), 1u);
  EXPECT_EQ(by_partition.count(part.value), 1u);
  // Events of offset 0 and 4..5 are there exactly once; those of 1..3 are gone.
  auto seen = Visible();
  EXPECT_EQ(seen.size(), 30u);
  for (const auto& [raw, n] : seen) EXPECT_EQ(n, 1) << raw;
  EXPECT_EQ(seen.count("a event 0"), 1u);
  EXPECT_EQ(seen.count("a event 10"), 0u);
  EXPECT_EQ(seen.count("a event 40"), 1u);
  // Other partitions lost nothing.
  for (const auto& s : digest_->PartitionStatuses()) {
    if (s.partition == part) continue;
    EXPECT_EQ(s.lost.range_count, 0u) << s.partition.value;
  }
}

// What the digest truncated itself is not a loss: after its own truncation and a restart
// (replaying from the replay point, at or above the log start) nothing is reported.
TEST_F(DigestTest, OwnTruncationIsNotReportedLost) {
  const PartitionId part = Datasource{"repo", {{"#host", "a"}}}.PartitionFor(4);
  for (int i = 0; i < 5; ++i) Append("a", i * 10, 10);
  WaitFlushed();
  ASSERT_TRUE(WaitFor([&] { return PartitionOf(part).truncated_before.value >= 5; }));
  Close();
  Open();
  for (int i = 5; i < 8; ++i) Append("a", i * 10, 10);
  WaitFlushed();
  EXPECT_TRUE(digest_->LostOffsetsByPartition().empty());
  EXPECT_EQ(StatusOf(part).lost.range_count, 0u);
  EXPECT_EQ(Visible().size(), 80u);
}

// A stale owner (paused while another node claimed the partition, digested it and truncated the
// log) finds the log start above the offset it needs: not a loss. Its fenced check is rejected and
// it gives the partition up without reporting anything.
TEST_F(DigestTest, StaleOwnerBelowTheLogStartReportsNothing) {
  Close();
  OpenFreshLogs();
  auto pausable = std::make_unique<PausableLog>(inner_log_.get());
  PausableLog* gate = pausable.get();
  log_ = std::move(pausable);
  DigestOptions o = FreshDigestOptions();
  o.reclaim_backoff = std::chrono::seconds(60);  // stays away once its claim is lost
  digest_ = std::make_unique<Digest>(env_, Clock::Real(), log_.get(), global_.get(), o);
  ASSERT_TRUE(digest_->Start().ok());
  const PartitionId part = Datasource{"repo", {{"#host", "a"}}}.PartitionFor(4);
  gate->paused = true;
  digest_->Assign({part});
  ASSERT_TRUE(digest_->WaitClaimed(std::chrono::seconds(10)));
  ASSERT_EQ(PartitionOf(part).epoch, Epoch(1));
  for (int i = 0; i < 5; ++i) Append("a", i * 10, 10);
  // Node 2 claims it, digests offsets 0..4 and truncates below 5, while node 1 is paused.
  Submit(ClaimPartition{part, NodeId(2), Epoch(1)});
  Submit(AdvanceReplayPoint{part, Epoch(2), Offset(5)});
  ASSERT_TRUE(log_->DeleteBefore(part, Offset(5)).ok());
  gate->paused = false;
  ASSERT_TRUE(WaitFor([&] {
    auto st = digest_->PartitionStatuses();
    return st.size() == 1 && !st[0].claimed;  // gave the claim up, waiting to claim again
  }));
  EXPECT_TRUE(digest_->LostOffsetsByPartition().empty());
  EXPECT_EQ(PartitionOf(part).epoch, Epoch(2));
  Close();
}

// An idle node uses no measurable CPU: with nothing to digest (nothing buffered, the replay
// point registered), each worker blocks in the log's Read for idle_read_wait (2 s) instead of
// polling or waking every 200 ms. Counts Reads over 3 idle seconds (4 partitions: about 6; with
// 200 ms Reads 60), so a slow machine cannot make it fail.
TEST_F(DigestTest, IdleWorkersBlockInTheLogRead) {
  Close();
  CountingLog* counter = OpenCounting(DigestOptions{}.idle_read_wait);
  Append("a", 0, 10);
  WaitFlushed();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the replay point registered
  const uint64_t before = counter->reads.load();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const uint64_t reads = counter->reads.load() - before;
  EXPECT_LE(reads, 4u * 4u) << "idle digest workers woke more than once a second";
  EXPECT_GE(reads, 4u);  // the workers are running, waiting in Read
  Close();
}

// The partition workers run under their own names at worker_nice, so that ingest requests get
// the CPU first; the thread that started them keeps its priority.
TEST_F(DigestTest, WorkersRunNamedAtTheirNiceValue) {
  Close();
  const int base = CurrentThreadNice().value();
  const int nice = std::min(base + 4, 19);
  tweak_ = [nice](DigestOptions* o) { o->worker_nice = nice; };
  Open();
  std::map<std::string, int> workers;  // thread name -> nice value (/proc: field 19 of stat)
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind("digest-", 0) != 0 || name == "digest-maint") continue;
    std::ifstream stat_file(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(stat_file)), {});
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));  // from field 3 (state) on
    std::string field;
    for (int i = 3; i <= 19 && fields >> field; ++i) {
    }
    workers[name] = std::stoi(field);
  }
  EXPECT_EQ(workers,
            (std::map<std::string, int>{
                {"digest-0", nice}, {"digest-1", nice}, {"digest-2", nice}, {"digest-3", nice}}));
  EXPECT_EQ(CurrentThreadNice().value(), base);
}

// Stop does not wait out the idle workers' long Reads: it wakes them (CommitLog::WakeReaders).
TEST_F(DigestTest, StopCutsIdleReadsShort) {
  Close();
  CountingLog* counter = OpenCounting(std::chrono::seconds(60));
  ASSERT_TRUE(WaitFor([&] { return counter->reading.load() == 4; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = std::chrono::steady_clock::now();
  digest_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(counter->reading.load(), 0);
  Close();
}

// Revoke ends the revoked workers' long idle Reads at once, and only theirs.
TEST_F(DigestTest, RevokeCutsIdleReadsShort) {
  Close();
  CountingLog* counter = OpenCounting(std::chrono::seconds(60));
  ASSERT_TRUE(WaitFor([&] { return counter->reading.load() == 4; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const PartitionId kept = Datasource{"repo", {{"#host", "a"}}}.PartitionFor(4);
  std::vector<PartitionId> revoked;
  for (int32_t i = 0; i < 4; ++i) {
    if (i != kept.value) revoked.emplace_back(i);
  }
  digest_->Revoke(revoked);
  EXPECT_TRUE(WaitFor([&] { return counter->reading.load() == 1; }, std::chrono::seconds(5)));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(counter->reading.load(), 1);  // the kept partition's worker still waits
  // A record ends the kept worker's long idle Read at once (the long wait adds no latency).
  Append("a", 0, 10);
  EXPECT_TRUE(
      WaitFor([&] { return StatusOf(kept).next_offset == Offset(1); }, std::chrono::seconds(5)));
  Close();
}

// Offsets missing inside what the log returns (Kafka's transaction markers) are not a loss.
TEST_F(DigestTest, OffsetGapInsideAReadIsNotReportedLost) {
  Close();
  OpenFreshLogs();
  const PartitionId part = Datasource{"repo", {{"#host", "a"}}}.PartitionFor(4);
  log_ = std::make_unique<OffsetGapLog>(inner_log_.get(), std::set<int64_t>{2, 3});
  for (int i = 0; i < 6; ++i) Append("a", i * 10, 10);
  digest_ = std::make_unique<Digest>(env_, Clock::Real(), log_.get(), global_.get(),
                                     FreshDigestOptions());
  ASSERT_TRUE(digest_->Start().ok());
  digest_->AssignAll();
  ASSERT_TRUE(digest_->WaitClaimed(std::chrono::seconds(10)));
  WaitFlushed();
  EXPECT_TRUE(digest_->LostOffsetsByPartition().empty());
  EXPECT_EQ(StatusOf(part).lost.range_count, 0u);
  EXPECT_EQ(Visible().size(), 40u);
  Close();
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

// P3 with R = 2: a committed segment with a single announced replica holds the truncation at its
// first offset; once its second replica is announced the truncation moves on, never above the
// safe offset.
TEST_F(DigestTest, TruncationWaitsForEveryReplicaOfASegment) {
  Submit(RegisterNode{NodeId(2)});
  Submit(SetReplicationFactor{2});
  const PartitionId part = Datasource{"repo", {{"#host", "a"}}}.PartitionFor(4);
  auto truncated = [&] { return PartitionOf(part).truncated_before; };
  for (int i = 0; i < 5; ++i) Append("a", i * 10, 10);
  WaitFlushed();
  const auto first = Segments();
  for (int i = 5; i < 10; ++i) Append("a", i * 10, 10);
  WaitFlushed();
  std::vector<SegmentRecord> second;
  for (const auto& [id, seg] : Segments()) {
    if (first.count(id) == 0) second.push_back(seg);
  }
  ASSERT_FALSE(first.empty());
  ASSERT_FALSE(second.empty());
  Offset second_min = second.front().min_pos.offset;
  for (const auto& seg : second) second_min = std::min(second_min, seg.min_pos.offset);
  ASSERT_GT(second_min.value, 0);

  // Several truncation periods: every segment has one replica of two, nothing is truncated.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(truncated().value, 0);
  EXPECT_EQ(log_->StartOffset(part).value().value, 0);

  // The first segments reach R: the log is truncated up to the oldest under-replicated one.
  for (const auto& [id, seg] : first) Submit(AddSegmentReplica{id, NodeId(2)});
  ASSERT_TRUE(WaitFor([&] { return truncated().value > 0; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(truncated(), second_min);
  EXPECT_EQ(log_->StartOffset(part).value(), second_min);

  // All of them: up to the replay point.
  for (const auto& seg : second) Submit(AddSegmentReplica{seg.id, NodeId(2)});
  const Offset replay = PartitionOf(part).replay_point;
  ASSERT_GT(replay.value, second.back().max_pos.offset.value);
  // Recorded first, then deleted.
  ASSERT_TRUE(WaitFor([&] { return log_->StartOffset(part).value() == replay; }));
  EXPECT_EQ(truncated(), replay);
  EXPECT_EQ(Visible().size(), 100u);
}

// The truncation point is recorded (fenced by the claim epoch) before the log is deleted: an
// owner whose claim was taken over just before its record reached the log deletes nothing.
TEST_F(DigestTest, TruncationByAnOwnerWhoseClaimWasTakenOverDeletesNothing) {
  Close();
  tweak_ = [](DigestOptions* o) { o->reclaim_backoff = std::chrono::seconds(60); };
  Open();
  late_ack_->take_over_before_truncation = true;
  const PartitionId part = Datasource{"repo", {{"#host", "a"}}}.PartitionFor(4);
  const Epoch claimed = PartitionOf(part).epoch;
  Append("a", 0, 50);  // one record, one segment: nothing for node 1 to register afterwards
  ASSERT_TRUE(WaitFor([&] { return PartitionOf(part).owner == NodeId(2); }));
  EXPECT_EQ(PartitionOf(part).epoch, Epoch(claimed.value + 1));
  EXPECT_FALSE(late_ack_->take_over_before_truncation.load());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // several truncation periods
  EXPECT_EQ(PartitionOf(part).owner, NodeId(2));
  EXPECT_EQ(PartitionOf(part).truncated_before, Offset(0));
  EXPECT_EQ(log_->StartOffset(part).value(), Offset(0));
}

TEST_F(DigestTest, TruncateOffNeverTruncates) {
  Close();
  tweak_ = [](DigestOptions* o) { o->truncate = false; };
  Open();
  for (int i = 0; i < 5; ++i) Append("a", i * 10, 10);
  WaitFlushed();
  const PartitionId part = Datasource{"repo", {{"#host", "a"}}}.PartitionFor(4);
  ASSERT_TRUE(WaitFor([&] { return PartitionOf(part).replay_point.value >= 5; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(PartitionOf(part).truncated_before.value, 0);
  EXPECT_EQ(log_->StartOffset(part).value().value, 0);
}

// Start keeps exactly the files Global lists with this node among the replicas: its own
// segments, copies pulled from peers, staged merge outputs; it removes its own files whose
// replica was dropped, unknown files and temp files.
TEST_F(DigestTest, StartKeepsExactlyTheFilesThisNodeHolds) {
  Submit(RegisterNode{NodeId(2)});
  Append("a", 0, 10);
  Append("b", 0, 10);
  WaitFlushed();
  std::vector<SegmentRecord> a, b;
  for (const auto& [id, seg] : Segments()) {
    (seg.datasource.tags[0].second == "a" ? a : b).push_back(seg);
  }
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  // a's copy here became an extra copy: node 2 holds it, node 1 dropped its replica.
  MoveToNode2(a[0].id);
  // A segment written by node 2 that this node pulled (forged: no file content is checked).
  const Datasource c{"repo", {{"#host", "c"}}};
  const PartitionId cp = c.PartitionFor(4);
  SegmentRecord pulled;
  pulled.datasource = c;
  pulled.partition = cp;
  pulled.min_pos = Position{Offset(1000), 0};
  pulled.max_pos = Position{Offset(1000), 4};
  pulled.event_count = 5;
  pulled.epoch = PartitionOf(cp).epoch;
  pulled.file_name = "p" + std::to_string(cp.value) + "-e1-o1000-i0-from-node-2.seg";
  pulled.node = NodeId(2);
  auto reg = global_->Submit(RegisterSegment{pulled, Offset(0)});
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  Submit(AddSegmentReplica{reg->segment_id, NodeId(1)});
  // A staged merge output of this node (b's segment as its only input).
  SegmentRecord merged = b[0];
  merged.file_name = "merged-output.seg";
  Submit(StageMerge{merged, {b[0].id}});
  Close();

  const auto path = [&](const std::string& name) { return (dir_ / "segments" / name).string(); };
  for (const std::string& name :
       {pulled.file_name, merged.file_name, std::string("stray.seg"), std::string("x.seg.tmp")}) {
    ASSERT_TRUE(env_->WriteFileAtomic(path(name), "junk").ok());
  }
  ASSERT_TRUE(env_->FileExists(path(a[0].file_name)));
  Open();
  EXPECT_TRUE(env_->FileExists(path(b[0].file_name)));
  EXPECT_TRUE(env_->FileExists(path(pulled.file_name)));
  EXPECT_TRUE(env_->FileExists(path(merged.file_name)));
  EXPECT_FALSE(env_->FileExists(path(a[0].file_name)));
  EXPECT_FALSE(env_->FileExists(path("stray.seg")));
  EXPECT_FALSE(env_->FileExists(path("x.seg.tmp")));
  EXPECT_EQ(LocalFiles().size(), 3u);
}

// P2: segments whose only copy was on a node that died are rebuilt from the commit log (which the
// safe offset kept) with the same events, and Global then lists this node as their holder.
TEST_F(DigestTest, SegmentsWithEveryCopyOnDeadNodesAreRebuilt) {
  Close();
  UseLiveness();
  Open();
  Submit(RegisterNode{NodeId(2)});
  Submit(SetReplicationFactor{2});
  for (int i = 0; i < 6; ++i) Append(i % 2 ? "a" : "b", i * 10, 10);
  WaitFlushed();
  const auto old = Segments();
  ASSERT_FALSE(old.empty());
  for (const auto& [id, seg] : old) {
    MoveToNode2(id);
    ASSERT_TRUE(env_->RemoveFile((dir_ / "segments" / seg.file_name).string()).ok());
  }
  SetDead({NodeId(2)});
  ASSERT_TRUE(WaitFor([&] {
    for (const auto& [id, seg] : Segments()) {
      if (old.count(id) != 0) return false;
    }
    return true;
  }));
  const auto now = Segments();
  ASSERT_EQ(now.size(), old.size());
  for (const auto& [id, seg] : now) {
    EXPECT_EQ(seg.node, NodeId(1));
    EXPECT_EQ(seg.replicas, std::set<NodeId>{NodeId(1)});
    EXPECT_EQ(seg.file_name.rfind("r-p" + std::to_string(seg.partition.value) + "-e", 0), 0u)
        << seg.file_name;
    EXPECT_EQ(seg.epoch, PartitionOf(seg.partition).epoch);
    bool matched = false;
    for (const auto& [oid, o] : old) {
      if (o.datasource == seg.datasource && o.partition == seg.partition &&
          o.min_pos == seg.min_pos && o.max_pos == seg.max_pos &&
          o.event_count == seg.event_count && o.min_ts == seg.min_ts && o.max_ts == seg.max_ts &&
          o.raw_bytes == seg.raw_bytes) {
        matched = true;
      }
    }
    EXPECT_TRUE(matched) << "segment " << id.value << " replaces none of the lost ones";
  }
  auto seen = Visible();
  EXPECT_EQ(seen.size(), 60u);
  for (const auto& [raw, n] : seen) EXPECT_EQ(n, 1) << raw;
  // The counters move just after Global applied the replacement (CI once read them between the
  // two), so they are awaited, not read once.
  uint64_t rebuilt = 0, lost = 0;
  EXPECT_TRUE(WaitFor([&] {
    rebuilt = lost = 0;
    for (const auto& s : digest_->PartitionStatuses()) {
      rebuilt += s.segments_rebuilt;
      lost += s.segments_lost;
    }
    return rebuilt == old.size();
  }));
  EXPECT_EQ(rebuilt, old.size());
  EXPECT_EQ(lost, 0u);
  // The rebuilt files are this node's now: a restart keeps them.
  Close();
  Open();
  EXPECT_EQ(Visible().size(), 60u);
}

// A rebuild's Reads are not starved by the partition's idle worker on a log that serves one Read
// of a partition at a time (Kafka's): the rebuild ends the worker's long idle Read and keeps its
// next ones short while it reads (a 60 s idle wait here; with it in force the rebuild's 200 ms
// Reads all came back empty and it gave up, as an e2e test on Kafka showed with 2 s).
TEST_F(DigestTest, RebuildIsNotStarvedByIdleReadsOfTheSamePartition) {
  Close();
  UseLiveness();
  auto liveness = tweak_;
  tweak_ = [liveness](DigestOptions* o) {
    liveness(o);
    o->idle_read_wait = std::chrono::seconds(60);
  };
  serial_reads_ = true;
  Open();
  Submit(RegisterNode{NodeId(2)});
  Submit(SetReplicationFactor{2});
  Append("a", 0, 10);
  WaitFlushed();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the workers idle in Read
  const auto old = Segments();
  ASSERT_EQ(old.size(), 1u);
  for (const auto& [id, seg] : old) {
    MoveToNode2(id);
    ASSERT_TRUE(env_->RemoveFile((dir_ / "segments" / seg.file_name).string()).ok());
  }
  SetDead({NodeId(2)});
  EXPECT_TRUE(WaitFor(
      [&] {
        const auto now = Segments();
        return now.size() == 1 && old.count(now.begin()->first) == 0;
      },
      std::chrono::seconds(15)));
  EXPECT_EQ(Visible().size(), 10u);
  Close();
}

// A segment with a copy on a live node is never rebuilt, whoever else died.
TEST_F(DigestTest, SegmentWithALiveCopyIsNeverRebuilt) {
  Close();
  UseLiveness();
  Open();
  Submit(RegisterNode{NodeId(2)});
  Submit(RegisterNode{NodeId(3)});
  for (const std::string host : {"a", "b", "c", "d"}) {
    Append(host, 0, 10);
    WaitFlushed();
  }
  const auto old = Segments();
  // a: on nodes 2 and 3; b: on node 2 only; c: on this node; d: on node 4, which never
  // registered (asked directly).
  std::set<SegmentId> on_b;
  for (const auto& [id, seg] : old) {
    const std::string host = seg.datasource.tags[0].second;
    if (host == "a") {
      Submit(AddSegmentReplica{id, NodeId(3)});
      MoveToNode2(id);
    } else if (host == "b") {
      MoveToNode2(id);
      on_b.insert(id);
    } else if (host == "d") {
      Submit(AddSegmentReplica{id, NodeId(4)});
      Submit(RemoveSegmentReplica{id, NodeId(1), 1});
    }
  }
  ASSERT_FALSE(on_b.empty());
  auto rebuilt = [&] {
    uint64_t n = 0;
    for (const auto& s : digest_->PartitionStatuses()) n += s.segments_rebuilt;
    return n;
  };
  SetDead({NodeId(3)});  // every segment keeps a live copy
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(Segments().size(), old.size());
  for (const auto& [id, seg] : old) EXPECT_EQ(Segments().count(id), 1u) << id.value;
  EXPECT_EQ(rebuilt(), 0u);

  SetDead({NodeId(2)});  // b's only copy is gone (the control); a is still on node 3
  ASSERT_TRUE(WaitFor([&] { return rebuilt() == on_b.size(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto now = Segments();
  for (const auto& [id, seg] : old) {
    EXPECT_EQ(now.count(id), on_b.count(id) != 0 ? 0u : 1u) << id.value;
  }
  EXPECT_EQ(rebuilt(), on_b.size());
  size_t rebuilt_files = 0;
  for (const auto& name : LocalFiles()) rebuilt_files += name.rfind("r-", 0) == 0;
  EXPECT_EQ(rebuilt_files, on_b.size());
}

// The log was truncated past a segment whose copies all died: it is reported lost, once, and
// stays in Global as it was.
TEST_F(DigestTest, SegmentNoLongerInTheLogIsCountedLostNotReplaced) {
  Close();
  UseLiveness();
  Open();
  Submit(RegisterNode{NodeId(2)});
  Submit(SetReplicationFactor{2});
  const PartitionId part = Datasource{"repo", {{"#host", "a"}}}.PartitionFor(4);
  for (int i = 0; i < 3; ++i) Append("a", i * 10, 10);
  WaitFlushed();
  const auto first = Segments();
  for (int i = 3; i < 6; ++i) Append("a", i * 10, 10);
  WaitFlushed();
  Offset second_min{1 << 30};
  for (const auto& [id, seg] : Segments()) {
    if (first.count(id) == 0) second_min = std::min(second_min, seg.min_pos.offset);
  }
  ASSERT_LT(second_min.value, 1 << 30);
  ASSERT_TRUE(log_->DeleteBefore(part, second_min).ok());  // as a wrongly early truncation would
  for (const auto& [id, seg] : first) MoveToNode2(id);
  SetDead({NodeId(2)});
  auto lost = [&] { return StatusOf(part).segments_lost; };
  ASSERT_TRUE(WaitFor([&] { return lost() == first.size(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(lost(), first.size());
  EXPECT_EQ(StatusOf(part).segments_rebuilt, 0u);
  const auto now = Segments();
  for (const auto& [id, seg] : first) {
    ASSERT_EQ(now.count(id), 1u);
    EXPECT_EQ(now.at(id).replicas, std::set<NodeId>{NodeId(2)});
  }
  for (const auto& name : LocalFiles()) EXPECT_NE(name.rfind("r-", 0), 0u) << name;
}

// A rebuild drops second copies of a message as the worker did; when the log's range holds a
// different number of the segment's events (here: a copy whose original is in an earlier
// segment, which the worker dropped but a rebuild starting at the segment cannot know), the
// segment is not replaced and is counted lost.
TEST_F(DigestTest, RebuildDropsCopiesLikeTheWorkerAndRefusesACountMismatch) {
  Close();
  UseLiveness();
  Open(std::chrono::milliseconds(60'000));  // flushes only when asked
  Submit(RegisterNode{NodeId(2)});
  Submit(SetReplicationFactor{2});
  const IngestMessage m = MessageWithId(0xabcdef0123456789ull, "a", 5);
  const PartitionId part = m.datasource.PartitionFor(4);
  const std::string copy = EncodeIngestMessage(m);
  auto dropped = [&] { return StatusOf(part).duplicates_dropped; };

  // Segment 1: m, its copy, 3 more events -> 8 events.
  ASSERT_TRUE(log_->Append(part, copy).get().ok());
  ASSERT_TRUE(log_->Append(part, copy).get().ok());
  Append("a", 100, 3);
  WaitRead(part);
  ASSERT_TRUE(digest_->FlushAll().ok());
  // Segment 2: 3 events, another copy of m (dropped by the worker), 3 events -> 6 events.
  Append("a", 200, 3);
  ASSERT_TRUE(log_->Append(part, copy).get().ok());
  Append("a", 300, 3);
  WaitRead(part);
  ASSERT_TRUE(digest_->FlushAll().ok());
  EXPECT_EQ(dropped(), 2u);
  const auto old = Segments();
  ASSERT_EQ(old.size(), 2u);
  const SegmentRecord s1 = old.begin()->second;
  const SegmentRecord s2 = std::next(old.begin())->second;
  ASSERT_EQ(s1.event_count, 8u);
  ASSERT_EQ(s2.event_count, 6u);

  MoveToNode2(s1.id);
  MoveToNode2(s2.id);
  SetDead({NodeId(2)});
  ASSERT_TRUE(WaitFor([&] {
    const auto st = StatusOf(part);
    return st.segments_rebuilt == 1 && st.segments_lost == 1;
  }));
  const auto now = Segments();
  ASSERT_EQ(now.size(), 2u);
  EXPECT_EQ(now.count(s1.id), 0u);
  ASSERT_EQ(now.count(s2.id), 1u);
  EXPECT_EQ(now.at(s2.id).replicas, std::set<NodeId>{NodeId(2)});
  const SegmentRecord r1 = now.rbegin()->second;
  ASSERT_NE(r1.id, s2.id);
  EXPECT_EQ(r1.event_count, 8u);
  const auto events = FileEvents(r1.file_name);
  EXPECT_EQ(events, FileEvents(s1.file_name));  // node 1 still has the old file (not deleted)
  EXPECT_EQ(events.size(), 8u);
  for (const auto& [raw, n] : events) EXPECT_EQ(n, 1) << raw;
  size_t rebuilt_files = 0;
  for (const auto& name : LocalFiles()) rebuilt_files += name.rfind("r-", 0) == 0;
  EXPECT_EQ(rebuilt_files, 1u);
}

// A claim in flight is the first moments of every assignment: the status says not claimed and
// names no error (the server counts partition errors as problems, so a node just started or just
// handed a partition would read "degraded"). A claim the global log refuses is an error until a
// retry gets through.
TEST_F(DigestTest, AClaimInFlightIsNoErrorAndARefusedClaimIs) {
  const PartitionId p(1);
  digest_->Revoke({p});
  ASSERT_TRUE(WaitFor([&] { return !FindStatus(p).has_value(); }));
  late_ack_->hold_claims = true;
  digest_->Assign({p});
  ASSERT_TRUE(WaitFor([&] { return FindStatus(p).has_value(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  PartitionDigestStatus in_flight = StatusOf(p);
  EXPECT_FALSE(in_flight.claimed);
  EXPECT_EQ(in_flight.error, "");

  late_ack_->refuse_claims = true;
  late_ack_->hold_claims = false;
  ASSERT_TRUE(WaitFor([&] { return StatusOf(p).error.rfind("claiming: Unavailable", 0) == 0; }))
      << StatusOf(p).error;
  EXPECT_FALSE(StatusOf(p).claimed);

  late_ack_->refuse_claims = false;
  ASSERT_TRUE(WaitFor([&] {
    PartitionDigestStatus s = StatusOf(p);
    return s.claimed && s.error.empty();
  })) << StatusOf(p).error;
}

}  // namespace
}  // namespace sediment

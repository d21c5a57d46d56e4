#include "merge/merge.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "global/global.h"
#include "global/segment_record.h"
#include "log/local_log.h"

namespace sediment {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

class FakePeers final : public PeerView {
 public:
  explicit FakePeers(NodeId self) : self_(self) {}
  NodeId Self() const override { return self_; }
  bool IsAlive(NodeId node) const override {
    std::lock_guard lock(mu_);
    return node == self_ || alive_.count(node) != 0;
  }
  bool IsPresent(NodeId node, milliseconds) const override {
    std::lock_guard lock(mu_);
    return node == self_ || alive_.count(node) != 0 || present_.count(node) != 0;
  }
  void SetAlive(NodeId n, bool alive) {
    std::lock_guard lock(mu_);
    if (alive) {
      alive_.insert(n);
    } else {
      alive_.erase(n);
    }
  }
  void SetPresent(NodeId n, bool present) {
    std::lock_guard lock(mu_);
    if (present) {
      present_.insert(n);
    } else {
      present_.erase(n);
    }
  }

 private:
  NodeId self_;
  mutable std::mutex mu_;
  std::set<NodeId> alive_, present_;
};

// Serves files from per-node directories.
class FakeFetcher final : public SegmentFetcher {
 public:
  Result<std::string> Fetch(NodeId holder, const SegmentRecord& segment) override {
    ++calls;
    std::string dir;
    {
      std::lock_guard lock(mu_);
      auto it = dirs_.find(holder);
      if (it == dirs_.end()) return Status::Unavailable("unknown holder");
      dir = it->second;
    }
    return Env::Default()->ReadFile(JoinPath(dir, segment.file_name));
  }
  void AddNode(NodeId n, std::string dir) {
    std::lock_guard lock(mu_);
    dirs_[n] = std::move(dir);
  }
  std::atomic<int> calls{0};

 private:
  std::mutex mu_;
  std::map<NodeId, std::string> dirs_;
};

// The global log, with StageMerge appends that fail: `lie` appends but tells the caller
// Unavailable (a producer timeout for a record the brokers kept); `drop` does not append.
class FlakyLog final : public CommitLog {
 public:
  explicit FlakyLog(std::unique_ptr<CommitLog> inner) : inner_(std::move(inner)) {}
  int32_t partition_count() const override { return inner_->partition_count(); }
  std::future<Result<Offset>> Append(PartitionId p, std::string record) override {
    auto ev = DecodeGlobalEvent(record);
    const bool stage = ev.ok() && std::holds_alternative<StageMerge>(*ev);
    if (stage && drop.load()) return Failed();
    auto f = inner_->Append(p, std::move(record));
    if (!stage || !lie.load()) return f;
    (void)f.get();
    return Failed();
  }
  Result<std::vector<LogRecord>> Read(PartitionId p, Offset from, size_t max_bytes,
                                      milliseconds max_wait) override {
    return inner_->Read(p, from, max_bytes, max_wait);
  }
  void WakeReaders(PartitionId p) override { inner_->WakeReaders(p); }
  Status DeleteBefore(PartitionId p, Offset o) override { return inner_->DeleteBefore(p, o); }
  Result<Offset> StartOffset(PartitionId p) override { return inner_->StartOffset(p); }
  Result<Offset> EndOffset(PartitionId p) override { return inner_->EndOffset(p); }
  std::string Health() override { return inner_->Health(); }

  std::atomic<bool> lie{false}, drop{false};

 private:
  static std::future<Result<Offset>> Failed() {
    std::promise<Result<Offset>> p;
    p.set_value(Status::Unavailable("injected: no acknowledgement"));
    return p.get_future();
  }
  std::unique_ptr<CommitLog> inner_;
};

Datasource Ds(const std::string& host) {
  Datasource ds{"web", {{"#host", host}}};
  ds.Normalize();
  return ds;
}

// `messages` ingest messages from offset `first`, two events each (indexes 0 and 1).
std::vector<PositionedEvent> Events(const std::string& host, int64_t first, int messages) {
  std::vector<PositionedEvent> out;
  for (int64_t o = first; o < first + messages; ++o) {
    for (uint32_t i = 0; i < 2; ++i) {
      PositionedEvent pe;
      pe.pos = Position{Offset(o), i};
      pe.event.timestamp_ms = 1'700'000'000'000 + o * 10 + i;
      pe.event.ingest_ms = 1'700'000'100'000 + o;
      pe.event.raw = "host=" + host + " n=" + std::to_string(o) + "/" + std::to_string(i) +
                     " status=" + std::to_string(200 + o % 7) + " some payload text";
      pe.event.fields = {{"host", host}, {"status", std::to_string(200 + o % 7)}};
      if (i == 1) pe.event.fields.push_back({"extra", "not in raw " + std::to_string(o)});
      out.push_back(std::move(pe));
    }
  }
  return out;
}

std::vector<PositionedEvent> ReadAll(const std::string& path) {
  std::vector<PositionedEvent> out;
  auto r = SegmentReader::Open(Env::Default(), path);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return out;
  DecodedBlock block;
  for (size_t b = 0; b < (*r)->blocks().size(); ++b) {
    auto st = (*r)->ReadBlock(b, &block);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) return out;
    for (size_t i = 0; i < block.size(); ++i) {
      PositionedEvent pe;
      pe.pos = block.positions[i];
      pe.event.timestamp_ms = block.timestamps[i];
      pe.event.ingest_ms = block.ingest_ts[i];
      pe.event.raw = std::string(block.raw[i]);
      for (uint32_t j = block.field_begin[i]; j < block.field_begin[i + 1]; ++j) {
        pe.event.fields.push_back(
            {std::string(block.fields[j].name), std::string(block.fields[j].value)});
      }
      out.push_back(std::move(pe));
    }
  }
  return out;
}

// ---- Tier planning (PlanRunMerges), simulated without files ----

TEST(MergeTierTest, SizeClassesSpanAFactorOfFanInBelowTheTop) {
  EXPECT_EQ(MergeSizeClass(1 << 20, 1 << 20, 4), 0);  // at the top: never a candidate
  EXPECT_EQ(MergeSizeClass(5 << 20, 1 << 20, 4), 0);
  EXPECT_EQ(MergeSizeClass((1 << 20) - 1, 1 << 20, 4), 1);
  EXPECT_EQ(MergeSizeClass(256 << 10, 1 << 20, 4), 1);
  EXPECT_EQ(MergeSizeClass((256 << 10) - 1, 1 << 20, 4), 2);
  EXPECT_EQ(MergeSizeClass(1024, 1 << 20, 4), 5);
  EXPECT_EQ(MergeSizeClass(1023, 1 << 20, 4), 6);
  EXPECT_EQ(MergeSizeClass(0, 1 << 20, 4), 11);  // below every bound: the class whose bound is 0
  EXPECT_EQ(MergeSizeClass(100, 1 << 20, 1), MergeSizeClass(100, 1 << 20, 2));
}

struct SimSegment {
  uint64_t size = 0;
  int64_t first_seen_us = 0;
  int rewrites = 0;  // most times any of its bytes was rewritten by a merge
  bool merged = false;
};

// Runs PlanRunMerges on `run` at `now` and applies every merge at once (output size = the inputs'
// sizes summed, first seen now). Returns the bytes the merges wrote. Candidates only: a segment
// that reached the top (small_bytes) leaves the run and is appended to `done`.
uint64_t SimulatePass(std::vector<SimSegment>* run, std::vector<SimSegment>* done,
                      const MergeOptions& o, int64_t now,
                      std::vector<std::vector<SimSegment>>* merges = nullptr) {
  std::vector<RunMember> members;
  for (const auto& seg : *run) members.push_back({seg.size, seg.first_seen_us, seg.merged});
  auto plans = PlanRunMerges(members, o, now);
  uint64_t written = 0;
  std::vector<SimSegment> next;
  size_t at = 0;
  for (const auto& [begin, end] : plans) {
    EXPECT_LE(at, begin);
    EXPECT_LT(begin, end);
    EXPECT_LE(end, run->size());
    if (end - begin < o.min_inputs) ADD_FAILURE() << "a merge of " << end - begin << " inputs";
    for (; at < begin; ++at) next.push_back((*run)[at]);
    SimSegment out{0, now, 0, true};
    if (merges != nullptr) merges->emplace_back(run->begin() + begin, run->begin() + end);
    for (size_t k = begin; k < end; ++k) {
      out.size += (*run)[k].size;
      out.rewrites = std::max(out.rewrites, (*run)[k].rewrites + 1);
    }
    written += out.size;
    next.push_back(out);
    at = end;
  }
  for (; at < run->size(); ++at) next.push_back((*run)[at]);
  run->clear();
  for (auto& seg : next) {
    // The top ends the run: segments before it can never be merged with segments after it.
    if (seg.size >= o.small_bytes) {
      done->push_back(seg);
      run->clear();
    } else {
      run->push_back(seg);
    }
  }
  return written;
}

TEST(MergeTierTest, SteadyFlushesRewriteEachEventAtMostOncePerClass) {
  MergeOptions o;
  o.small_bytes = 1 << 20;
  o.target_bytes = 4 << 20;
  o.fan_in = 4;
  o.min_age = milliseconds(3'600'000);  // never reached: only full merges
  // Flushes of 900..1100 bytes straddle the class boundary at 1024 (classes 5 and 6).
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint64_t> size(900, 1100);
  const int classes = MergeSizeClass(900, o.small_bytes, o.fan_in);
  ASSERT_EQ(classes, 6);
  std::vector<SimSegment> run, done;
  uint64_t flushed = 0, written = 0;
  size_t most_candidates = 0;
  int64_t now = 0;
  for (int i = 0; i < 20000; ++i) {
    now += 2'000'000;
    SimSegment seg{size(rng), now, 0, false};
    flushed += seg.size;
    run.push_back(seg);
    written += SimulatePass(&run, &done, o, now);
    most_candidates = std::max(most_candidates, run.size());
  }
  int most_rewrites = 0;
  for (const auto& seg : run) most_rewrites = std::max(most_rewrites, seg.rewrites);
  for (const auto& seg : done) most_rewrites = std::max(most_rewrites, seg.rewrites);
  // Every event is rewritten at most once per class between its flush and the top, and the
  // bytes written by merges stay below classes x bytes flushed (the old planning rewrote a run
  // whenever its oldest member aged, whatever the sizes).
  EXPECT_LE(most_rewrites, classes);
  EXPECT_GE(most_rewrites, classes - 1);  // the flushes do climb to the top
  EXPECT_GE(done.size(), 4u);
  EXPECT_LE(written, static_cast<uint64_t>(classes) * flushed);
  EXPECT_GE(written, static_cast<uint64_t>(classes - 1) * flushed / 2);
  // What waits is bounded: fewer than fan_in per class (plus absorbed stragglers).
  EXPECT_LE(most_candidates, static_cast<size_t>(2 * classes) * o.fan_in);
}

TEST(MergeTierTest, AMergedOutputIsNotMergedAgainWithSmallerSegments) {
  MergeOptions o;
  o.small_bytes = 1 << 20;
  o.target_bytes = 4 << 20;
  o.fan_in = 4;
  o.min_age = milliseconds(60'000);
  const int64_t now = 1'000'000'000;
  // A merged output of class 2 (100 KiB) followed by three class-3 flushes: nothing is full and
  // nothing is old yet.
  std::vector<RunMember> run{
      {100 << 10, now, true}, {20 << 10, now}, {20 << 10, now}, {20 << 10, now}};
  EXPECT_TRUE(PlanRunMerges(run, o, now).empty());
  // The fourth class-3 flush fills its class: those four merge, the output stays out.
  run.push_back({20 << 10, now});
  using Ranges = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(PlanRunMerges(run, o, now), (Ranges{{1, 5}}));
  // Old enough: the class-3 flushes merge by age, still without the output of class 2.
  run.pop_back();
  EXPECT_EQ(PlanRunMerges(run, o, now + 60'000'000), (Ranges{{1, 4}}));
  // Two outputs of class 2, however old, are not merged by age: an output waits for fan_in
  // peers of its class. A class-2 flush between them is not merged with them by age either.
  run.insert(run.begin(), RunMember{150 << 10, now, true});
  EXPECT_EQ(PlanRunMerges(run, o, now + 60'000'000), (Ranges{{2, 5}}));
  run.insert(run.begin() + 1, RunMember{70 << 10, now});
  EXPECT_EQ(PlanRunMerges(run, o, now + 60'000'000), (Ranges{{3, 6}}));
  // Four of class 2 (three outputs and the flush) are full: merged at once, young or old.
  run.insert(run.begin(), RunMember{200 << 10, now, true});
  EXPECT_EQ(PlanRunMerges(run, o, now), (Ranges{{0, 4}}));
}

TEST(MergeTierTest, ASmallerSegmentBetweenTwoOfAClassIsMergedWithThem) {
  MergeOptions o;
  o.small_bytes = 1 << 20;
  o.target_bytes = 4 << 20;
  o.fan_in = 4;
  o.min_age = milliseconds(60'000);
  const int64_t now = 1'000'000'000;
  // Class 3 (16..64 KiB) members with class-4 stragglers between them (a flush that straddled
  // the bound): the stragglers have no neighbour of their own class and go with their class-3
  // neighbours; they do not count toward fan_in. The class-4 tail after the last class-3 member
  // is a group of its own.
  std::vector<RunMember> run{{20 << 10, now}, {15 << 10, now}, {20 << 10, now}, {15 << 10, now},
                             {20 << 10, now}, {20 << 10, now}, {15 << 10, now}, {15 << 10, now}};
  using Ranges = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(PlanRunMerges(run, o, now), (Ranges{{0, 6}}));
  EXPECT_EQ(PlanRunMerges(run, o, now + 60'000'000), (Ranges{{0, 6}, {6, 8}}));
}

TEST(MergeTierTest, ARunThatNeverFillsStillMergesAfterMinAge) {
  MergeOptions o;
  o.small_bytes = 1 << 20;
  o.target_bytes = 4 << 20;
  o.fan_in = 16;
  o.min_age = milliseconds(60'000);
  std::vector<SimSegment> run, done;
  // Three flushes, then silence: fewer than fan_in, so only age merges them.
  for (int i = 0; i < 3; ++i) run.push_back({1000, i * 2'000'000, 0, false});
  EXPECT_EQ(SimulatePass(&run, &done, o, 59'000'000), 0u);
  EXPECT_EQ(run.size(), 3u);
  std::vector<std::vector<SimSegment>> merges;
  EXPECT_EQ(SimulatePass(&run, &done, o, 60'000'000, &merges), 3000u);
  ASSERT_EQ(run.size(), 1u);
  EXPECT_EQ(run[0].rewrites, 1);
  // A lone output is never rewritten.
  EXPECT_EQ(SimulatePass(&run, &done, o, 600'000'000), 0u);
}

TEST(MergeTierTest, AgeMergesOfASlowSourceRewriteAnEventOnceMore) {
  // A source so slow that each class ages before it fills: its flushes are merged by age once,
  // then only full merges rewrite them (an output waits for fan_in peers of its class), so an
  // event is rewritten at most once more than the classes above its flush.
  MergeOptions o;
  o.small_bytes = 1 << 20;
  o.target_bytes = 4 << 20;
  o.fan_in = 4;
  o.min_age = milliseconds(60'000);
  std::vector<SimSegment> run, done;
  const int classes = MergeSizeClass(1000, o.small_bytes, o.fan_in);
  int64_t now = 0;
  uint64_t flushed = 0, written = 0;
  for (int i = 0; i < 20000; ++i) {
    now += 45'000'000;  // one flush every 45 s: one or two per min_age
    run.push_back({1000, now, 0, false});
    flushed += 1000;
    written += SimulatePass(&run, &done, o, now);
  }
  ASSERT_FALSE(done.empty());
  int most_rewrites = 0;
  for (const auto& seg : done) most_rewrites = std::max(most_rewrites, seg.rewrites);
  for (const auto& seg : run) most_rewrites = std::max(most_rewrites, seg.rewrites);
  EXPECT_LE(most_rewrites, classes + 1);
  EXPECT_LE(written, static_cast<uint64_t>(classes + 1) * flushed);
}

// ---- The Merger against Global and real files ----

class MergeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("merge_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    LocalLogOptions go;
    go.partitions = 1;
    auto flaky =
        std::make_unique<FlakyLog>(OpenLocalLog(env_, (dir_ / "global").string(), go).value());
    flaky_ = flaky.get();
    glog_ = std::move(flaky);
    global_ = Global::Open(env_, glog_.get(), (dir_ / "snap").string()).value();
    store_ = std::make_unique<SegmentStore>(env_, (dir_ / "node1").string());
    ASSERT_TRUE(env_->CreateDirs(store_->dir()).ok());
    peer_dir_ = (dir_ / "node2").string();
    ASSERT_TRUE(env_->CreateDirs(peer_dir_).ok());
    fetcher_.AddNode(NodeId(2), peer_dir_);
    ASSERT_TRUE(global_->Submit(ClaimPartition{PartitionId(0), NodeId(1), Epoch(0)}).ok());
    options_.min_age = milliseconds(0);
    options_.interval = milliseconds(3'600'000);  // passes are run by hand
    options_.segment.block_raw_bytes = 512;       // several blocks per segment
  }
  void TearDown() override {
    merger_.reset();
    if (global_) (void)global_->Close();
    global_.reset();
    glog_.reset();
    fs::remove_all(dir_);
  }

  void MakeMerger(Clock* clock = Clock::Real()) {
    merger_ = std::make_unique<Merger>(
        env_, clock, global_.get(), store_.get(), &fetcher_, &peers_,
        [this] {
          std::lock_guard lock(owned_mu_);
          return owned_;
        },
        options_);
  }

  Epoch CurrentEpoch(PartitionId p) {
    Epoch e;
    global_->Read([&](const GlobalState& s) { e = s.partitions.at(p.value).epoch; });
    return e;
  }

  // Writes `events` as a segment of `node` (into its directory) and registers it.
  SegmentId Register(const std::string& host, const std::vector<PositionedEvent>& events,
                     NodeId node = NodeId(1)) {
    const std::string name =
        "s-" + host + "-" + std::to_string(events.front().pos.offset.value) + ".seg";
    const std::string dir = node == NodeId(1) ? store_->dir() : peer_dir_;
    auto info =
        WriteSegment(env_, JoinPath(dir, name), Ds(host), PartitionId(0), events, options_.segment);
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    SegmentRecord rec = SegmentRecordFor(*info, name, node, CurrentEpoch(PartitionId(0)));
    auto out = global_->Submit(RegisterSegment{rec, Offset(events.back().pos.offset.value + 1)});
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() ? out->segment_id : SegmentId(0);
  }

  std::map<SegmentId, SegmentRecord> Segments() {
    std::map<SegmentId, SegmentRecord> out;
    global_->Read([&](const GlobalState& s) { out = s.segments; });
    return out;
  }
  std::vector<SegmentRecord> Staged() {
    std::vector<SegmentRecord> out;
    for (auto& [id, seg] : Segments()) {
      if (seg.staged()) out.push_back(seg);
    }
    return out;
  }
  // What queries see: committed segments.
  std::vector<SegmentId> Visible() {
    std::vector<SegmentId> out;
    for (auto& [id, seg] : Segments()) {
      if (!seg.staged()) out.push_back(id);
    }
    return out;
  }
  bool Local(const std::string& file_name) { return env_->FileExists(store_->PathOf(file_name)); }
  std::vector<std::string> DirFiles() { return env_->ListDir(store_->dir()).value(); }

  void Run() {
    auto st = merger_->RunOnce();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  Env* env_ = Env::Default();
  fs::path dir_;
  std::string peer_dir_;
  std::unique_ptr<CommitLog> glog_;
  FlakyLog* flaky_ = nullptr;
  std::unique_ptr<Global> global_;
  std::unique_ptr<SegmentStore> store_;
  FakePeers peers_{NodeId(1)};
  FakeFetcher fetcher_;
  std::mutex owned_mu_;
  std::vector<PartitionId> owned_{PartitionId(0)};
  MergeOptions options_;
  std::unique_ptr<Merger> merger_;
};

TEST_F(MergeTest, AdjacentRunIsStagedThenCommittedWithExactlyTheInputsEvents) {
  auto e1 = Events("a", 0, 10), e2 = Events("a", 10, 5), e3 = Events("a", 15, 20);
  SegmentId s1 = Register("a", e1), s2 = Register("a", e2), s3 = Register("a", e3);
  const auto inputs = Segments();
  MakeMerger();

  Run();
  auto staged = Staged();
  ASSERT_EQ(staged.size(), 1u);
  const SegmentRecord out = staged[0];
  EXPECT_EQ(out.merge_inputs, (std::vector<SegmentId>{s1, s2, s3}));
  EXPECT_EQ(out.node, NodeId(1));
  EXPECT_EQ(out.epoch, CurrentEpoch(PartitionId(0)));
  EXPECT_EQ(out.min_pos, (Position{Offset(0), 0}));
  EXPECT_EQ(out.max_pos, (Position{Offset(34), 1}));
  EXPECT_EQ(out.event_count, 70u);
  EXPECT_TRUE(out.file_name.starts_with("m-p0-o0-i0-n1-")) << out.file_name;
  EXPECT_TRUE(out.file_name.ends_with(".seg"));
  // Staged: queries still see exactly the inputs.
  EXPECT_EQ(Visible(), (std::vector<SegmentId>{s1, s2, s3}));
  ASSERT_TRUE(Local(out.file_name));

  std::vector<PositionedEvent> expected = e1;
  expected.insert(expected.end(), e2.begin(), e2.end());
  expected.insert(expected.end(), e3.begin(), e3.end());
  EXPECT_EQ(ReadAll(store_->PathOf(out.file_name)), expected);
  EXPECT_EQ(merger_->stats().merges_staged, 1u);
  EXPECT_EQ(merger_->stats().bytes_written, out.file_size);
  // Reading, verifying and writing 70 events take measurable CPU on the merge's thread.
  EXPECT_GT(merger_->stats().cpu_micros, 0u);
  EXPECT_EQ(merger_->stats().bytes_read,
            inputs.at(s1).file_size + inputs.at(s2).file_size + inputs.at(s3).file_size);
  EXPECT_EQ(merger_->stats().merges_committed, 0u);

  // R = 1: the next pass commits; the swap removes the inputs from Global (their files are the
  // storage layer's to delete, after its deletion delay).
  Run();
  EXPECT_EQ(Visible(), (std::vector<SegmentId>{out.id}));
  EXPECT_TRUE(Staged().empty());
  EXPECT_TRUE(Local(out.file_name));
  auto st = merger_->stats();
  EXPECT_EQ(st.merges_committed, 1u);
  EXPECT_EQ(st.segments_merged_away, 3u);
  EXPECT_TRUE(st.last_error.empty()) << st.last_error;

  // Nothing left to merge.
  Run();
  EXPECT_EQ(Visible(), (std::vector<SegmentId>{out.id}));
  EXPECT_EQ(merger_->stats().merges_staged, 1u);
}

// Full input blocks are copied as stored, the small tail blocks re-encoded together; the output
// holds exactly the inputs' events whatever the inputs' field names (same order, another order,
// disjoint), and equals, event for event, a merge that re-encodes everything.
TEST_F(MergeTest, FullBlocksAreCopiedAndSmallOnesReencoded) {
  options_.segment.block_raw_bytes = 4096;
  auto e1 = Events("a", 0, 40), e2 = Events("a", 40, 3), e3 = Events("a", 43, 40);
  auto e4 = Events("a", 83, 40);
  for (PositionedEvent& e : e3) std::reverse(e.event.fields.begin(), e.event.fields.end());
  for (PositionedEvent& e : e4) {
    for (Field& f : e.event.fields) f.name = "other_" + f.name;
  }
  Register("a", e1), Register("a", e2), Register("a", e3), Register("a", e4);
  std::vector<PositionedEvent> expected;
  for (const auto* e : {&e1, &e2, &e3, &e4}) expected.insert(expected.end(), e->begin(), e->end());
  uint64_t copyable = 0, input_blocks = 0;
  for (const auto& [id, seg] : Segments()) {
    auto r = SegmentReader::Open(env_, store_->PathOf(seg.file_name));
    ASSERT_TRUE(r.ok());
    for (const BlockInfo& b : (*r)->blocks()) {
      ++input_blocks;
      if (b.raw_bytes >= options_.segment.block_raw_bytes / 4) ++copyable;
    }
  }
  ASSERT_GT(copyable, 3u);
  ASSERT_LT(copyable, input_blocks);  // every input ends with a partial block; e2 has one only

  MakeMerger();
  Run();
  auto staged = Staged();
  ASSERT_EQ(staged.size(), 1u);
  const std::string copied_path = store_->PathOf(staged[0].file_name);
  EXPECT_EQ(ReadAll(copied_path), expected);
  auto st = merger_->stats();
  EXPECT_EQ(st.blocks_copied, copyable);
  EXPECT_EQ(st.blocks_reencoded, input_blocks - copyable);
  {
    auto r = SegmentReader::Open(env_, copied_path);
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE((*r)->VerifyAll().ok());
    EXPECT_LE((*r)->blocks().size(), input_blocks);
  }

  // The same merge re-encoding every block: the same events.
  options_.copy_block_raw_bytes = UINT64_MAX;
  merger_.reset();
  ASSERT_TRUE(global_->Submit(RemoveSegments{{staged[0].id}}).ok());
  MakeMerger();
  Run();
  staged = Staged();
  ASSERT_EQ(staged.size(), 1u);
  EXPECT_EQ(ReadAll(store_->PathOf(staged[0].file_name)), expected);
  EXPECT_EQ(merger_->stats().blocks_copied, 0u);
  EXPECT_EQ(merger_->stats().blocks_reencoded, input_blocks);
}

// A damaged chunk in a block the merge would copy is found (its checksum) and aborts the merge.
TEST_F(MergeTest, CorruptChunkOfACopiedBlockAbortsWithoutStaging) {
  options_.segment.block_raw_bytes = 4096;
  SegmentId s1 = Register("a", Events("a", 0, 40));
  SegmentId s2 = Register("a", Events("a", 40, 40));
  const std::string victim = store_->PathOf(Segments()[s2].file_name);
  {
    auto r = SegmentReader::Open(env_, victim);
    ASSERT_TRUE(r.ok());
    const BlockInfo& b = (*r)->blocks()[0];
    ASSERT_GE(b.raw_bytes, options_.segment.block_raw_bytes / 4);  // copied, not decoded
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    // The block's last byte: the end of its last field column.
    f.seekg(static_cast<std::streamoff>(b.file_offset + b.stored_size - 1));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x20);
    f.seekp(static_cast<std::streamoff>(b.file_offset + b.stored_size - 1));
    f.write(&c, 1);
  }
  MakeMerger();
  auto st = merger_->RunOnce();
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
  EXPECT_NE(st.message().find("checksum"), std::string::npos) << st.ToString();
  EXPECT_TRUE(Staged().empty());
  EXPECT_EQ(Visible(), (std::vector<SegmentId>{s1, s2}));
  for (const auto& name : DirFiles()) EXPECT_FALSE(name.starts_with("m-")) << name;
}

TEST_F(MergeTest, StagedOutputWaitsForTheReplicationFactor) {
  ASSERT_TRUE(global_->Submit(SetReplicationFactor{2}).ok());
  SegmentId s1 = Register("a", Events("a", 0, 4)), s2 = Register("a", Events("a", 4, 4));
  MakeMerger();
  Run();
  ASSERT_EQ(Staged().size(), 1u);
  const SegmentId out = Staged()[0].id;
  for (int i = 0; i < 3; ++i) Run();
  EXPECT_EQ(Staged().size(), 1u);
  EXPECT_EQ(Visible(), (std::vector<SegmentId>{s1, s2}));
  EXPECT_EQ(merger_->stats().merges_committed, 0u);

  ASSERT_TRUE(global_->Submit(AddSegmentReplica{out, NodeId(2)}).ok());
  Run();
  EXPECT_TRUE(Staged().empty());
  EXPECT_EQ(Visible(), (std::vector<SegmentId>{out}));
  EXPECT_EQ(merger_->stats().merges_committed, 1u);
}

TEST_F(MergeTest, SegmentsSeparatedByANonCandidateAreNeverMergedTogether) {
  SegmentId a1 = Register("a", Events("a", 0, 3));
  SegmentId b1 = Register("b", Events("b", 3, 3));
  SegmentId a2 = Register("a", Events("a", 6, 400));  // big
  SegmentId b2 = Register("b", Events("b", 406, 3));
  SegmentId a3 = Register("a", Events("a", 409, 3));
  SegmentId a4 = Register("a", Events("a", 412, 3));
  auto segs = Segments();
  ASSERT_GT(segs[a2].file_size, 4 * segs[a1].file_size);
  options_.small_bytes = segs[a2].file_size;  // a2 is not small
  MakeMerger();
  Run();
  std::map<std::vector<SegmentId>, SegmentRecord> staged;
  for (const auto& s : Staged()) staged[s.merge_inputs] = s;
  // a1 is alone before the big a2; other datasources in between do not separate a3 from a4.
  ASSERT_EQ(staged.size(), 2u);
  EXPECT_EQ(staged.count({a3, a4}), 1u);
  EXPECT_EQ(staged.count({b1, b2}), 1u);
  Run();
  auto visible = Visible();
  EXPECT_EQ(visible.size(), 4u);  // a1, a2, merged a3+a4, merged b1+b2
  EXPECT_NE(std::find(visible.begin(), visible.end(), a1), visible.end());
  EXPECT_NE(std::find(visible.begin(), visible.end(), a2), visible.end());
  // Stable: a1 and a2 never get merged.
  Run();
  EXPECT_EQ(Visible(), visible);
}

TEST_F(MergeTest, FullRunsMergeAtOnceAndTheTailWaitsForMinAge) {
  std::vector<SegmentId> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(Register("a", Events("a", i * 5, 5)));
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const auto& [id, seg] : Segments()) {
    lo = std::min(lo, seg.file_size);
    hi = std::max(hi, seg.file_size);
  }
  ASSERT_LT(hi * 4, lo * 5);  // near-equal sizes: any two fit, no three do
  options_.target_bytes = 2 * hi + lo / 2;
  options_.min_age = milliseconds(60'000);
  ManualClock clock;
  MakeMerger(&clock);
  Run();
  std::set<std::vector<SegmentId>> staged;
  for (const auto& s : Staged()) staged.insert(s.merge_inputs);
  EXPECT_EQ(staged, (std::set<std::vector<SegmentId>>{{ids[0], ids[1]}, {ids[2], ids[3]}}));

  clock.AdvanceMillis(59'000);
  Run();  // commits the two; the tail is still young
  EXPECT_TRUE(Staged().empty());
  EXPECT_EQ(Visible().size(), 4u);

  clock.AdvanceMillis(2'000);
  Run();
  ASSERT_EQ(Staged().size(), 1u);
  EXPECT_EQ(Staged()[0].merge_inputs, (std::vector<SegmentId>{ids[4], ids[5]}));
  EXPECT_EQ(merger_->stats().merges_staged, 3u);
}

TEST_F(MergeTest, AMergedOutputWaitsForPeersOfItsClass) {
  // fan_in 2: two flushes of a class merge at once; their outputs merge when two of them exist;
  // a new flush is never merged into a bigger output, and waits for a peer of its own class.
  std::vector<SegmentId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(Register("a", Events("a", i * 10, 10)));
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const auto& [id, seg] : Segments()) {
    lo = std::min(lo, seg.file_size);
    hi = std::max(hi, seg.file_size);
  }
  options_.fan_in = 2;
  // The flushes share a class (the bound below them is under lo), their merged pairs the next.
  options_.small_bytes = 3 * hi;
  ASSERT_EQ(MergeSizeClass(lo, options_.small_bytes, 2),
            MergeSizeClass(hi, options_.small_bytes, 2));
  options_.min_age = milliseconds(60'000);
  ManualClock clock;
  MakeMerger(&clock);
  Run();
  std::set<std::vector<SegmentId>> staged;
  for (const auto& s : Staged()) staged.insert(s.merge_inputs);
  EXPECT_EQ(staged, (std::set<std::vector<SegmentId>>{{ids[0], ids[1]}, {ids[2], ids[3]}}));
  // A new flush after them, before they are committed.
  const SegmentId late = Register("a", Events("a", 40, 10));
  const uint64_t read_before = merger_->stats().bytes_read;
  Run();  // commits both; their outputs are a class up and full together; `late` stays out
  auto pair = Visible();  // by id: the two outputs were staged before `late` was registered
  ASSERT_EQ(pair.size(), 3u);
  EXPECT_EQ(pair.back(), late);
  pair.pop_back();
  uint64_t pair_bytes = 0;
  for (SegmentId id : pair) {
    pair_bytes += Segments()[id].file_size;
    EXPECT_LT(MergeSizeClass(Segments()[id].file_size, options_.small_bytes, 2),
              MergeSizeClass(hi, options_.small_bytes, 2));
  }
  ASSERT_EQ(Staged().size(), 1u);
  EXPECT_EQ(Staged()[0].merge_inputs, pair);
  EXPECT_EQ(merger_->stats().bytes_read, read_before + pair_bytes);
  clock.AdvanceMillis(120'000);
  Run();  // commits the top; `late`, old but alone in its class, is not merged
  const auto visible = Visible();  // by id: the top output was registered after `late`
  ASSERT_EQ(visible.size(), 2u);
  EXPECT_EQ(visible.front(), late);
  EXPECT_GE(Segments()[visible.back()].file_size, options_.small_bytes);  // never rewritten
  EXPECT_TRUE(Staged().empty());
  Run();
  EXPECT_TRUE(Staged().empty());
  EXPECT_EQ(merger_->stats().merges_staged, 3u);
}

TEST_F(MergeTest, AnAgeMergedOutputIsNotMergedAgainByAge) {
  // Three flushes age into one output; a later flush of the output's class ages too, but the
  // output waits for fan_in peers of its class (it is a merge output: "m-..."), so only flushes
  // are merged by age.
  std::vector<SegmentId> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(Register("a", Events("a", i * 10, 10)));
  options_.min_age = milliseconds(60'000);
  ManualClock clock;
  MakeMerger(&clock);
  Run();
  EXPECT_TRUE(Staged().empty());  // young, and 3 < fan_in
  clock.AdvanceMillis(61'000);
  Run();
  ASSERT_EQ(Staged().size(), 1u);
  EXPECT_EQ(Staged()[0].merge_inputs, ids);
  Run();
  ASSERT_EQ(Visible().size(), 1u);
  const SegmentRecord out = Segments()[Visible()[0]];
  // As big as the output: the same class.
  const SegmentId f4 = Register("a", Events("a", 30, 30));
  ASSERT_EQ(MergeSizeClass(Segments()[f4].file_size, options_.small_bytes, options_.fan_in),
            MergeSizeClass(out.file_size, options_.small_bytes, options_.fan_in));
  clock.AdvanceMillis(61'000);
  Run();
  EXPECT_TRUE(Staged().empty());
  const SegmentId f5 = Register("a", Events("a", 60, 30));
  clock.AdvanceMillis(61'000);
  Run();
  ASSERT_EQ(Staged().size(), 1u);
  EXPECT_EQ(Staged()[0].merge_inputs, (std::vector<SegmentId>{f4, f5}));
  EXPECT_EQ(merger_->stats().merges_staged, 2u);
}

TEST_F(MergeTest, MaxInputsBoundsAMerge) {
  std::vector<SegmentId> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(Register("a", Events("a", i * 2, 2)));
  options_.max_inputs = 2;
  MakeMerger();
  Run();
  std::set<std::vector<SegmentId>> staged;
  for (const auto& s : Staged()) staged.insert(s.merge_inputs);
  EXPECT_EQ(staged, (std::set<std::vector<SegmentId>>{{ids[0], ids[1]}, {ids[2], ids[3]}}));
}

TEST_F(MergeTest, RetentionRemovingAnInputAbortsTheStagedMerge) {
  ASSERT_TRUE(global_->Submit(SetReplicationFactor{2}).ok());
  SegmentId s1 = Register("a", Events("a", 0, 4));
  SegmentId s2 = Register("a", Events("a", 4, 4));
  SegmentId s3 = Register("a", Events("a", 8, 4));
  MakeMerger();
  Run();
  ASSERT_EQ(Staged().size(), 1u);
  const SegmentRecord out = Staged()[0];
  ASSERT_TRUE(Local(out.file_name));

  ASSERT_TRUE(global_->Submit(RemoveSegments{{s1}}).ok());  // retention
  // Even with the replication factor reached, the commit is not attempted.
  ASSERT_TRUE(global_->Submit(AddSegmentReplica{out.id, NodeId(2)}).ok());
  options_.min_inputs = 3;  // keep s2 + s3 from being merged again in this test
  MakeMerger();
  Run();
  auto segs = Segments();
  EXPECT_EQ(segs.count(out.id), 0u);
  EXPECT_FALSE(Local(out.file_name));
  EXPECT_EQ(Visible(), (std::vector<SegmentId>{s2, s3}));
  EXPECT_EQ(merger_->stats().merges_aborted, 1u);
  EXPECT_EQ(merger_->stats().merges_committed, 0u);
}

TEST_F(MergeTest, LostOutputFileAbortsTheStagedMerge) {
  SegmentId s1 = Register("a", Events("a", 0, 4)), s2 = Register("a", Events("a", 4, 4));
  MakeMerger();
  Run();
  ASSERT_EQ(Staged().size(), 1u);
  ASSERT_TRUE(env_->RemoveFile(store_->PathOf(Staged()[0].file_name)).ok());
  options_.min_inputs = 3;
  MakeMerger();
  Run();
  EXPECT_TRUE(Staged().empty());
  EXPECT_EQ(Visible(), (std::vector<SegmentId>{s1, s2}));
  EXPECT_EQ(merger_->stats().merges_aborted, 1u);
}

TEST_F(MergeTest, CorruptInputAbortsWithoutStaging) {
  SegmentId s1 = Register("a", Events("a", 0, 10));
  SegmentId s2 = Register("a", Events("a", 10, 10));
  SegmentId s3 = Register("a", Events("a", 20, 10));
  const std::string victim = store_->PathOf(Segments()[s2].file_name);
  {
    auto r = SegmentReader::Open(env_, victim);
    ASSERT_TRUE(r.ok());
    ASSERT_GE((*r)->blocks().size(), 2u);
    const BlockInfo& b = (*r)->blocks()[1];
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(b.file_offset + b.stored_size / 2));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);
    f.seekp(static_cast<std::streamoff>(b.file_offset + b.stored_size / 2));
    f.write(&c, 1);
  }
  MakeMerger();
  auto st = merger_->RunOnce();
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
  EXPECT_TRUE(Staged().empty());
  EXPECT_EQ(Visible(), (std::vector<SegmentId>{s1, s2, s3}));
  for (const auto& name : DirFiles()) EXPECT_FALSE(name.starts_with("m-")) << name;
  auto stats = merger_->stats();
  EXPECT_EQ(stats.merges_failed, 1u);
  EXPECT_EQ(stats.merges_staged, 0u);
  EXPECT_NE(stats.last_error.find("input segment " + std::to_string(s2.value)), std::string::npos)
      << stats.last_error;
  // The corrupt input is left out for a while; s1 and s3 are not adjacent around it.
  Run();
  EXPECT_TRUE(Staged().empty());
  EXPECT_EQ(merger_->stats().merges_failed, 1u);
}

TEST_F(MergeTest, InputFileThatIsNotItsRecordAbortsWithoutStaging) {
  SegmentId s1 = Register("a", Events("a", 0, 10));
  SegmentId s2 = Register("a", Events("a", 10, 10));
  auto segs = Segments();
  // A valid segment file with the same range and count, but not the one Global describes.
  auto other = Events("a", 10, 10);
  other[7].event.raw += " changed";
  ASSERT_TRUE(WriteSegment(env_, store_->PathOf(segs[s2].file_name), Ds("a"), PartitionId(0), other,
                           options_.segment)
                  .ok());
  MakeMerger();
  auto st = merger_->RunOnce();
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
  EXPECT_NE(st.message().find("does not match its Global record"), std::string::npos);
  EXPECT_TRUE(Staged().empty());
  EXPECT_EQ(Visible(), (std::vector<SegmentId>{s1, s2}));
  for (const auto& name : DirFiles()) EXPECT_FALSE(name.starts_with("m-")) << name;
}

TEST_F(MergeTest, StageWithUnknownOutcomeThatWasAppliedIsCommitted) {
  Register("a", Events("a", 0, 4));
  Register("a", Events("a", 4, 4));
  flaky_->lie = true;
  MakeMerger();
  EXPECT_EQ(merger_->RunOnce().code(), StatusCode::kUnavailable);
  flaky_->lie = false;
  ASSERT_TRUE(global_->WaitApplied(Offset(3), std::chrono::seconds(10)));  // the lost ack's event
  ASSERT_EQ(Staged().size(), 1u);
  const SegmentRecord out = Staged()[0];
  EXPECT_TRUE(Local(out.file_name));
  Run();
  EXPECT_EQ(Visible(), (std::vector<SegmentId>{out.id}));
  EXPECT_TRUE(Local(out.file_name));
  EXPECT_EQ(merger_->stats().merges_committed, 1u);
}

TEST_F(MergeTest, StageThatNeverAppliedHasItsFileDeletedAfterGrace) {
  Register("a", Events("a", 0, 4));
  Register("a", Events("a", 4, 4));
  ManualClock clock;
  flaky_->drop = true;
  options_.grace = milliseconds(10'000);
  MakeMerger(&clock);
  EXPECT_EQ(merger_->RunOnce().code(), StatusCode::kUnavailable);
  flaky_->drop = false;
  EXPECT_TRUE(Staged().empty());
  auto outputs = [&] {
    std::vector<std::string> out;
    for (const auto& name : DirFiles()) {
      if (name.starts_with("m-")) out.push_back(name);
    }
    return out;
  };
  ASSERT_EQ(outputs().size(), 1u);  // kept: the append may still land
  EXPECT_EQ(merger_->stats().merges_failed, 1u);
  clock.AdvanceMillis(11'000);
  // The sweep deletes the old file; the inputs are merged again into a new output.
  Run();
  ASSERT_EQ(Staged().size(), 1u);
  EXPECT_EQ(outputs(), (std::vector<std::string>{Staged()[0].file_name}));
}

TEST_F(MergeTest, InputFilesOutliveTheCommit) {
  // Merged-away files are the storage layer's to delete, after its deletion delay (a coordinator
  // that read Global before the swap may still send this node a read of them).
  SegmentId s1 = Register("a", Events("a", 0, 4)), s2 = Register("a", Events("a", 4, 4));
  auto segs = Segments();
  const std::string f1 = segs[s1].file_name, f2 = segs[s2].file_name;
  MakeMerger();
  Run();
  Run();
  ASSERT_EQ(Visible().size(), 1u);
  EXPECT_EQ(merger_->stats().merges_committed, 1u);
  EXPECT_TRUE(Local(f1));
  EXPECT_TRUE(Local(f2));
}

TEST_F(MergeTest, AbandonedStagedOutputOfADeadWriterIsRemovedByTheOwner) {
  SegmentId s1 = Register("a", Events("a", 0, 4)), s2 = Register("a", Events("a", 4, 4));
  auto segs = Segments();
  SegmentRecord out = segs[s1];
  out.max_pos = segs[s2].max_pos;
  out.event_count = segs[s1].event_count + segs[s2].event_count;
  out.node = NodeId(2);
  out.file_name = "m-p0-o0-i0-n2-deadbeef.seg";
  auto staged = global_->Submit(StageMerge{out, {s1, s2}});
  ASSERT_TRUE(staged.ok()) << staged.status().ToString();

  peers_.SetPresent(NodeId(2), true);
  MakeMerger();
  Run();  // the writer may come back: left alone (and its inputs are not merged again)
  ASSERT_EQ(Staged().size(), 1u);
  EXPECT_EQ(Staged()[0].id, staged->segment_id);

  peers_.SetPresent(NodeId(2), false);
  {
    std::lock_guard lock(owned_mu_);
    owned_.clear();
  }
  Run();  // not the owner: not our business
  ASSERT_EQ(Staged().size(), 1u);
  EXPECT_EQ(Staged()[0].id, staged->segment_id);

  {
    std::lock_guard lock(owned_mu_);
    owned_ = {PartitionId(0)};
  }
  Run();
  EXPECT_EQ(Segments().count(staged->segment_id), 0u);
  EXPECT_EQ(merger_->stats().merges_aborted, 1u);
  // The inputs are free again and this pass merged them itself.
  ASSERT_EQ(Staged().size(), 1u);
  EXPECT_EQ(Staged()[0].node, NodeId(1));
  EXPECT_EQ(Staged()[0].merge_inputs, (std::vector<SegmentId>{s1, s2}));
}

TEST_F(MergeTest, OnlyPartitionsOwnedHereAndInGlobalAreMerged) {
  Register("a", Events("a", 0, 4));
  Register("a", Events("a", 4, 4));
  {
    std::lock_guard lock(owned_mu_);
    owned_.clear();
  }
  MakeMerger();
  Run();
  EXPECT_TRUE(Staged().empty());
  {
    std::lock_guard lock(owned_mu_);
    owned_ = {PartitionId(0)};
  }
  // Global names another owner (a takeover this node has not heard of).
  ASSERT_TRUE(
      global_->Submit(ClaimPartition{PartitionId(0), NodeId(2), CurrentEpoch(PartitionId(0))})
          .ok());
  Run();
  EXPECT_TRUE(Staged().empty());
}

TEST_F(MergeTest, InputsHeldOnlyByAPeerAreFetched) {
  auto e1 = Events("a", 0, 6), e2 = Events("a", 6, 6);
  SegmentId s1 = Register("a", e1, NodeId(2));
  SegmentId s2 = Register("a", e2);
  ASSERT_FALSE(Local(Segments()[s1].file_name));
  MakeMerger();

  // The only holder is down.
  auto st = merger_->RunOnce();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_TRUE(Staged().empty());
  EXPECT_EQ(fetcher_.calls.load(), 0);

  peers_.SetAlive(NodeId(2), true);
  MakeMerger();  // forgets the failed input
  Run();
  EXPECT_EQ(fetcher_.calls.load(), 1);
  ASSERT_EQ(Staged().size(), 1u);
  const SegmentRecord out = Staged()[0];
  EXPECT_EQ(out.merge_inputs, (std::vector<SegmentId>{s1, s2}));
  std::vector<PositionedEvent> expected = e1;
  expected.insert(expected.end(), e2.begin(), e2.end());
  EXPECT_EQ(ReadAll(store_->PathOf(out.file_name)), expected);
  // No temporary file is left; the fetched input is not installed here.
  const auto names = DirFiles();
  std::set<std::string> files(names.begin(), names.end());
  EXPECT_EQ(files, (std::set<std::string>{Segments()[s2].file_name, out.file_name}));
}

TEST_F(MergeTest, BackgroundThreadMergesAndStops) {
  for (int i = 0; i < 4; ++i) Register("a", Events("a", i * 3, 3));
  options_.interval = milliseconds(10);
  MakeMerger();
  ASSERT_TRUE(merger_->Start().ok());
  EXPECT_FALSE(merger_->Start().ok());
  for (int i = 0; i < 1000 && merger_->stats().merges_committed == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  merger_->Stop();
  merger_->Stop();
  EXPECT_EQ(merger_->stats().merges_committed, 1u);
  EXPECT_EQ(Visible().size(), 1u);
  EXPECT_EQ(Segments().begin()->second.event_count, 24u);
}

}  // namespace
}  // namespace sediment

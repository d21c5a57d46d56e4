#include "global/global.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/checksum.h"
#include "common/coding.h"
#include "common/testing/temp_dir.h"
#ifdef SEDIMENT_HAVE_LOCAL_LOG
#include "log/local_log.h"
#endif

namespace sediment {
namespace {

using namespace std::chrono_literals;

// In-memory CommitLog: thread-safe, Read waits on a condition variable.
class MemLog : public CommitLog {
 public:
  int32_t partition_count() const override { return 1; }

  std::future<Result<Offset>> Append(PartitionId p, std::string record) override {
    std::promise<Result<Offset>> promise;
    {
      std::lock_guard lock(mu_);
      if (fail_appends_) {
        promise.set_value(Status::IOError("injected append failure"));
        return promise.get_future();
      }
      const int64_t off = end_++;
      records_[off] = std::move(record);
      promise.set_value(Offset(off));
    }
    cv_.notify_all();
    return promise.get_future();
  }

  Result<std::vector<LogRecord>> Read(PartitionId p, Offset from, size_t max_bytes,
                                      std::chrono::milliseconds max_wait) override {
    std::unique_lock lock(mu_);
    if (from.value < start_) return Status::NotFound("below start offset");
    if (empty_reads_ > 0) {
      // Like a Kafka consumer that has not fetched yet: nothing, though records exist.
      --empty_reads_;
      return std::vector<LogRecord>{};
    }
    cv_.wait_for(lock, max_wait, [&] { return end_ > from.value; });
    std::vector<LogRecord> out;
    size_t bytes = 0;
    for (auto it = records_.lower_bound(from.value); it != records_.end(); ++it) {
      if (!out.empty() && bytes + it->second.size() > max_bytes) break;
      bytes += it->second.size();
      out.push_back(LogRecord{Offset(it->first), it->second});
    }
    return out;
  }

  Status DeleteBefore(PartitionId p, Offset offset) override {
    std::lock_guard lock(mu_);
    start_ = std::max(start_, std::min(offset.value, end_));
    records_.erase(records_.begin(), records_.lower_bound(start_));
    return Status::OK();
  }
  Result<Offset> StartOffset(PartitionId p) override {
    std::lock_guard lock(mu_);
    return Offset(start_);
  }
  Result<Offset> EndOffset(PartitionId p) override {
    std::lock_guard lock(mu_);
    return Offset(end_);
  }
  std::string Health() override { return "ok"; }

  void set_fail_appends(bool v) {
    std::lock_guard lock(mu_);
    fail_appends_ = v;
  }
  // The next n reads answer empty whatever the log holds.
  void set_empty_reads(int n) {
    std::lock_guard lock(mu_);
    empty_reads_ = n;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, std::string> records_;
  int64_t start_ = 0;
  int64_t end_ = 0;
  bool fail_appends_ = false;
  int empty_reads_ = 0;
};

Datasource Ds(const std::string& repo, const std::string& host) {
  Datasource ds;
  ds.repo = repo;
  ds.tags = {{"#host", host}, {"#type", "syslog"}};
  return ds;
}

SegmentRecord Seg(const Datasource& ds, int32_t partition, Position min, Position max,
                  int64_t epoch) {
  SegmentRecord s;
  s.datasource = ds;
  s.partition = PartitionId(partition);
  s.min_pos = min;
  s.max_pos = max;
  s.min_ts = 1700000000000;
  s.max_ts = 1700000005000;
  s.event_count = 42;
  s.raw_bytes = 4096;
  s.file_size = 1234;
  s.content_hash = 0xdeadbeefcafef00dull;
  s.epoch = Epoch(epoch);
  s.file_name = "seg-" + ds.Key() + "-" + std::to_string(min.offset.value);
  s.node = NodeId(7);
  return s;
}

Position Pos(int64_t off, uint32_t idx) { return Position{Offset(off), idx}; }

std::vector<GlobalEvent> OneOfEach() {
  return {
      SetClusterId{"cluster-\x01\xff-id"},
      CreateRepo{"web"},
      AddIngestToken{"web", "tok-123"},
      AddApiToken{"api-secret"},
      ClaimPartition{PartitionId(3), NodeId(-5), Epoch(9)},
      RegisterSegment{Seg(Ds("web", "a"), 3, Pos(-1, 0), Pos(1ll << 40, 0xffffffffu), 4),
                      Offset(77)},
      AdvanceReplayPoint{PartitionId(2147483647), Epoch(1), Offset(123456789)},
      SetTruncationPoint{PartitionId(0), Offset(-1)},
      RemoveSegments{{SegmentId(1), SegmentId(-3), SegmentId(1ll << 62)}},
      SetClusterSecret{"s3cr\x00t"},
      RegisterNode{NodeId(12)},
      AddSegmentReplica{SegmentId(4), NodeId(2)},
      RemoveSegmentReplica{SegmentId(4), NodeId(3), 2},
      StageMerge{Seg(Ds("web", "a"), 3, Pos(5, 0), Pos(9, 1), 4), {SegmentId(1), SegmentId(2)}},
      CommitMerge{SegmentId(9)},
      SetReplicationFactor{3},
      SetRetention{"web", 86400000, 1u << 30},
      ReplaceSegment{SegmentId(8), Seg(Ds("db", "x"), 1, Pos(5, 0), Pos(6, 0), 2)},
  };
}

GlobalState Populated() {
  GlobalState s;
  for (const GlobalEvent& ev : std::vector<GlobalEvent>{
           SetClusterId{"c1"}, CreateRepo{"web"}, CreateRepo{"db"}, AddIngestToken{"web", "t1"},
           AddIngestToken{"web", "t2"}, AddIngestToken{"db", "t3"}, AddApiToken{"a1"},
           ClaimPartition{PartitionId(0), NodeId(1), Epoch(0)},
           ClaimPartition{PartitionId(5), NodeId(2), Epoch(0)},
           ClaimPartition{PartitionId(5), NodeId(3), Epoch(1)}, SetClusterSecret{"sec"}}) {
    EXPECT_TRUE(ApplyGlobalEvent(&s, ev).ok());
  }
  EXPECT_TRUE(ApplyGlobalEvent(
                  &s, RegisterSegment{Seg(Ds("web", "a"), 0, Pos(0, 0), Pos(9, 2), 1), Offset(10)})
                  .ok());
  EXPECT_TRUE(ApplyGlobalEvent(
                  &s, RegisterSegment{Seg(Ds("db", "b"), 5, Pos(3, 0), Pos(4, 1), 2), Offset(5)})
                  .ok());
  EXPECT_TRUE(ApplyGlobalEvent(&s, SetTruncationPoint{PartitionId(0), Offset(4)}).ok());
  s.repos["web"].retention_ms = 86400000;
  s.applied_through = Offset(99);
  return s;
}

// Applies ev, expects Rejected and an unchanged state.
void ExpectRejected(GlobalState* s, const GlobalEvent& ev) {
  const std::string before = EncodeGlobalState(*s);
  SegmentId assigned(-42);
  Status st = ApplyGlobalEvent(s, ev, &assigned);
  EXPECT_EQ(st.code(), StatusCode::kRejected) << GlobalEventName(ev) << ": " << st.ToString();
  EXPECT_FALSE(st.message().empty());
  EXPECT_EQ(EncodeGlobalState(*s), before) << GlobalEventName(ev) << " changed the state";
  EXPECT_EQ(assigned, SegmentId(-42));
}

std::string WithCrc(std::string body) {
  PutFixed32(&body, Crc32c(body));
  return body;
}

// ---------------- codec ----------------

TEST(GlobalCodec, EveryEventRoundTrips) {
  for (const GlobalEvent& ev : OneOfEach()) {
    const std::string enc = EncodeGlobalEvent(ev);
    Result<GlobalEvent> dec = DecodeGlobalEvent(enc);
    ASSERT_TRUE(dec.ok()) << GlobalEventName(ev) << ": " << dec.status().ToString();
    EXPECT_EQ(dec->index(), ev.index());
    EXPECT_EQ(EncodeGlobalEvent(*dec), enc) << GlobalEventName(ev);
  }
  const std::vector<GlobalEvent> all = OneOfEach();
  auto dec = DecodeGlobalEvent(EncodeGlobalEvent(all[5]));
  ASSERT_TRUE(dec.ok());
  const auto& rs = std::get<RegisterSegment>(*dec);
  const auto& orig = std::get<RegisterSegment>(all[5]);
  EXPECT_EQ(rs.segment.datasource, orig.segment.datasource);
  EXPECT_EQ(rs.segment.min_pos, Pos(-1, 0));
  EXPECT_EQ(rs.segment.max_pos, Pos(1ll << 40, 0xffffffffu));
  EXPECT_EQ(rs.segment.content_hash, 0xdeadbeefcafef00dull);
  EXPECT_EQ(rs.segment.file_name, orig.segment.file_name);
  EXPECT_EQ(rs.segment.node, NodeId(7));
  EXPECT_EQ(rs.new_replay_point, Offset(77));
  auto claim = DecodeGlobalEvent(EncodeGlobalEvent(all[4]));
  ASSERT_TRUE(claim.ok());
  EXPECT_EQ(std::get<ClaimPartition>(*claim).node, NodeId(-5));
  EXPECT_EQ(std::get<ClaimPartition>(*claim).expected_epoch, Epoch(9));
}

TEST(GlobalCodec, EveryFlippedByteOfAnEventIsCorruption) {
  for (const GlobalEvent& ev : OneOfEach()) {
    const std::string enc = EncodeGlobalEvent(ev);
    for (size_t i = 0; i < enc.size(); ++i) {
      for (uint8_t mask : {0x01, 0x10, 0x80, 0xff}) {
        std::string bad = enc;
        bad[i] = static_cast<char>(bad[i] ^ mask);
        Result<GlobalEvent> dec = DecodeGlobalEvent(bad);
        EXPECT_EQ(dec.status().code(), StatusCode::kCorruption)
            << GlobalEventName(ev) << " byte " << i << " mask " << int(mask);
      }
    }
  }
}

TEST(GlobalCodec, TruncatedOrExtendedEventIsCorruption) {
  for (const GlobalEvent& ev : OneOfEach()) {
    const std::string enc = EncodeGlobalEvent(ev);
    for (size_t n = 0; n < enc.size(); ++n) {
      EXPECT_EQ(DecodeGlobalEvent(enc.substr(0, n)).status().code(), StatusCode::kCorruption);
    }
    EXPECT_EQ(DecodeGlobalEvent(enc + "x").status().code(), StatusCode::kCorruption);
  }
}

TEST(GlobalCodec, StructurallyBadEventsWithValidCrcAreCorruption) {
  // Unknown type, unsupported version, bad magic, trailing bytes, oversized counts.
  std::string good = EncodeGlobalEvent(CreateRepo{"web"});
  std::string body = good.substr(0, good.size() - 4);
  std::string unknown_type = body;
  unknown_type[3] = 42;
  std::string zero_type = body;
  zero_type[3] = 0;
  std::string version = body;
  version[2] = 2;
  std::string magic = body;
  magic[0] = 'X';
  std::string huge_count = std::string("GE\x01\x09", 4);
  PutVarint64(&huge_count, 1ull << 60);
  std::string huge_string = std::string("GE\x01\x02", 4);
  PutVarint64(&huge_string, 1ull << 40);
  std::string partition_range = std::string("GE\x01\x08", 4);
  PutVarsint64(&partition_range, 1ll << 33);
  PutVarsint64(&partition_range, 1);
  for (const std::string& b : {unknown_type, zero_type, version, magic, body + "zz", huge_count,
                               huge_string, partition_range}) {
    Result<GlobalEvent> dec = DecodeGlobalEvent(WithCrc(b));
    EXPECT_EQ(dec.status().code(), StatusCode::kCorruption) << dec.status().ToString();
  }
  EXPECT_TRUE(DecodeGlobalEvent(WithCrc(body)).ok());
}

TEST(GlobalCodec, PopulatedStateRoundTrips) {
  const GlobalState s = Populated();
  const std::string enc = EncodeGlobalState(s);
  Result<GlobalState> dec = DecodeGlobalState(enc);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(EncodeGlobalState(*dec), enc);
  EXPECT_EQ(dec->applied_through, Offset(99));
  EXPECT_EQ(dec->cluster_id, "c1");
  EXPECT_EQ(dec->repos.size(), 2u);
  EXPECT_EQ(dec->repos.at("web").retention_ms, 86400000);
  EXPECT_EQ(dec->repos.at("web").ingest_tokens, (std::set<std::string>{"t1", "t2"}));
  EXPECT_EQ(dec->ingest_tokens, s.ingest_tokens);
  EXPECT_EQ(dec->api_tokens, s.api_tokens);
  ASSERT_EQ(dec->segments.size(), 2u);
  EXPECT_EQ(dec->segments.at(SegmentId(2)).datasource, Ds("db", "b"));
  EXPECT_EQ(dec->segments.at(SegmentId(2)).id, SegmentId(2));
  EXPECT_EQ(dec->next_segment_id, SegmentId(3));
  EXPECT_EQ(dec->flushed_through, s.flushed_through);
  EXPECT_EQ(dec->partitions.at(5).epoch, Epoch(2));
  EXPECT_EQ(dec->partitions.at(5).owner, NodeId(3));
  EXPECT_EQ(dec->partitions.at(0).replay_point, Offset(10));
  EXPECT_EQ(dec->partitions.at(0).truncated_before, Offset(4));
  EXPECT_EQ(dec->cluster_secret, "sec");

  Result<GlobalState> empty = DecodeGlobalState(EncodeGlobalState(GlobalState{}));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->applied_through, Offset(-1));
  EXPECT_EQ(empty->next_segment_id, SegmentId(1));
}

TEST(GlobalCodec, CorruptStateIsCorruption) {
  const std::string enc = EncodeGlobalState(Populated());
  for (size_t i = 0; i < enc.size(); ++i) {
    std::string bad = enc;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    EXPECT_EQ(DecodeGlobalState(bad).status().code(), StatusCode::kCorruption) << "byte " << i;
  }
  for (size_t n = 0; n < enc.size(); n += 3) {
    EXPECT_EQ(DecodeGlobalState(enc.substr(0, n)).status().code(), StatusCode::kCorruption);
  }
  const std::string body = enc.substr(0, enc.size() - 4);
  EXPECT_EQ(DecodeGlobalState(WithCrc(body + std::string(1, '\0'))).status().code(),
            StatusCode::kCorruption);
  EXPECT_EQ(DecodeGlobalState(WithCrc(body.substr(0, body.size() - 1))).status().code(),
            StatusCode::kCorruption);
  // A huge repo count with a valid CRC.
  std::string huge("GSNP\x01", 5);
  PutVarsint64(&huge, 5);
  PutLengthPrefixed(&huge, "c");
  PutVarint64(&huge, 1ull << 62);
  EXPECT_EQ(DecodeGlobalState(WithCrc(huge)).status().code(), StatusCode::kCorruption);
  // Keys out of order (not the canonical encoding) with a valid CRC.
  std::string unordered("GSNP\x01", 5);
  PutVarsint64(&unordered, 5);
  PutLengthPrefixed(&unordered, "c");
  PutVarint64(&unordered, 0);  // repos
  PutVarint64(&unordered, 0);  // ingest tokens
  PutVarint64(&unordered, 2);  // api tokens, out of order
  PutLengthPrefixed(&unordered, "b");
  PutLengthPrefixed(&unordered, "a");
  PutVarint64(&unordered, 0);   // segments
  PutVarsint64(&unordered, 1);  // next segment id
  PutVarint64(&unordered, 0);   // flushed_through
  PutVarint64(&unordered, 0);   // partitions
  EXPECT_EQ(DecodeGlobalState(WithCrc(unordered)).status().code(), StatusCode::kCorruption);
  // Same bytes with the tokens in order decode fine (the hand-built layout is right).
  std::string ordered = unordered;
  std::swap(ordered[ordered.size() - 7], ordered[ordered.size() - 5]);
  EXPECT_TRUE(DecodeGlobalState(WithCrc(ordered)).ok());
}

// ---------------- apply rules ----------------

// The bytes snapshot v3 appends to v2 for a state whose segments each have only their writer as
// replica, no staged merge, no retention bytes, no replication factor and no nodes (what a v1/v2
// snapshot decodes to).
std::string V3Suffix(const GlobalState& s) {
  std::string out;
  for (const auto& [id, seg] : s.segments) {
    PutVarint64(&out, 1);
    PutVarsint64(&out, seg.node.value);
    PutVarint64(&out, 0);
  }
  for (size_t i = 0; i < s.repos.size(); ++i) PutVarint64(&out, 0);
  PutVarint32(&out, 0);
  PutVarint64(&out, 0);
  return out;
}

TEST(GlobalCodec, OlderSnapshotVersionsAreStillRead) {
  GlobalState s = Populated();
  s.cluster_secret.clear();
  const std::string v3 = EncodeGlobalState(s);
  const std::string suffix = V3Suffix(s);
  ASSERT_GT(v3.size(), 4 + suffix.size());
  const std::string body = v3.substr(0, v3.size() - 4);
  ASSERT_EQ(body.substr(body.size() - suffix.size()), suffix);
  // v2 = v3 without the suffix; v1 = v2 without the trailing (empty, one 0x00 byte) secret.
  std::string v2 = body.substr(0, body.size() - suffix.size());
  v2[4] = 2;
  std::string v1 = v2.substr(0, v2.size() - 1);
  v1[4] = 1;
  for (const std::string& old : {WithCrc(v1), WithCrc(v2)}) {
    Result<GlobalState> dec = DecodeGlobalState(old);
    ASSERT_TRUE(dec.ok()) << dec.status().ToString();
    EXPECT_EQ(EncodeGlobalState(*dec), v3);
    for (const auto& [id, seg] : dec->segments) EXPECT_EQ(seg.replicas, std::set<NodeId>{seg.node});
  }
  // A v2 header on v3 bytes has trailing bytes; an unknown version is refused.
  std::string wrong = body;
  wrong[4] = 2;
  EXPECT_EQ(DecodeGlobalState(WithCrc(wrong)).status().code(), StatusCode::kCorruption);
  wrong[4] = 4;
  EXPECT_EQ(DecodeGlobalState(WithCrc(wrong)).status().code(), StatusCode::kCorruption);
}

TEST(GlobalCodec, ReplicationStateRoundTrips) {
  GlobalState s = Populated();
  ASSERT_TRUE(ApplyGlobalEvent(&s, RegisterNode{NodeId(1)}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, RegisterNode{NodeId(2)}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, AddSegmentReplica{SegmentId(1), NodeId(2)}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetReplicationFactor{2}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetRetention{"db", 1000, 5000}).ok());
  SegmentRecord out = Seg(Ds("web", "a"), 0, Pos(0, 0), Pos(9, 2), 1);
  out.event_count = s.segments.at(SegmentId(1)).event_count;
  out.file_name = "m-1.seg";
  ASSERT_TRUE(ApplyGlobalEvent(&s, StageMerge{out, {SegmentId(1)}}).ok());
  const std::string enc = EncodeGlobalState(s);
  Result<GlobalState> dec = DecodeGlobalState(enc);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(EncodeGlobalState(*dec), enc);
  EXPECT_EQ(dec->segments.at(SegmentId(1)).replicas, (std::set<NodeId>{NodeId(2), NodeId(7)}));
  EXPECT_EQ(dec->segments.at(SegmentId(3)).merge_inputs, std::vector<SegmentId>{SegmentId(1)});
  EXPECT_EQ(dec->repos.at("db").retention_bytes, 5000u);
  EXPECT_EQ(dec->replication_factor, 2u);
  EXPECT_EQ(dec->nodes.size(), 2u);
}

TEST(GlobalApply, ReplicationFactorDefaultsByNodeCount) {
  GlobalState s;
  EXPECT_EQ(EffectiveReplicationFactor(s), 1u);
  ASSERT_TRUE(ApplyGlobalEvent(&s, RegisterNode{NodeId(1)}).ok());
  EXPECT_EQ(EffectiveReplicationFactor(s), 1u);
  ExpectRejected(&s, RegisterNode{NodeId(1)});
  ExpectRejected(&s, RegisterNode{NodeId(0)});
  ASSERT_TRUE(ApplyGlobalEvent(&s, RegisterNode{NodeId(2)}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, RegisterNode{NodeId(3)}).ok());
  EXPECT_EQ(EffectiveReplicationFactor(s), 2u);
  ExpectRejected(&s, SetReplicationFactor{0});
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetReplicationFactor{3}).ok());
  EXPECT_EQ(EffectiveReplicationFactor(s), 3u);
}

TEST(GlobalApply, ReplicaRulesNeverGoBelowMinRemaining) {
  GlobalState s = Populated();  // segments 1 and 2, both written by node 7
  ExpectRejected(&s, AddSegmentReplica{SegmentId(99), NodeId(2)});
  ExpectRejected(&s, AddSegmentReplica{SegmentId(1), NodeId(7)});  // already listed
  ASSERT_TRUE(ApplyGlobalEvent(&s, AddSegmentReplica{SegmentId(1), NodeId(2)}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, AddSegmentReplica{SegmentId(1), NodeId(3)}).ok());
  ExpectRejected(&s, RemoveSegmentReplica{SegmentId(1), NodeId(4), 0});  // not a holder
  ASSERT_TRUE(ApplyGlobalEvent(&s, RemoveSegmentReplica{SegmentId(1), NodeId(7), 2}).ok());
  // Two nodes dropping their extra copy at once: the second is refused (2 would become 1).
  ExpectRejected(&s, RemoveSegmentReplica{SegmentId(1), NodeId(2), 2});
  EXPECT_EQ(s.segments.at(SegmentId(1)).replicas, (std::set<NodeId>{NodeId(2), NodeId(3)}));
  // A corrupt copy goes whatever remains.
  ASSERT_TRUE(ApplyGlobalEvent(&s, RemoveSegmentReplica{SegmentId(2), NodeId(7), 0}).ok());
  EXPECT_TRUE(s.segments.at(SegmentId(2)).replicas.empty());
}

TEST(GlobalApply, SafeOffsetWaitsForEveryReplica) {
  GlobalState s = Populated();  // partition 0: segment 1 (offsets 0..9), replay point 10
  EXPECT_EQ(SafeOffset(s, PartitionId(0)), Offset(10));  // R = 1 (no nodes registered)
  EXPECT_EQ(SafeOffset(s, PartitionId(42)), Offset(0));  // never claimed
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetReplicationFactor{2}).ok());
  EXPECT_EQ(SafeOffset(s, PartitionId(0)), Offset(0));  // segment 1 has 1 of 2 copies
  ASSERT_TRUE(ApplyGlobalEvent(&s, AddSegmentReplica{SegmentId(1), NodeId(2)}).ok());
  EXPECT_EQ(SafeOffset(s, PartitionId(0)), Offset(10));
  // A staged merge output is not durable yet, but its inputs are: it does not hold the offset.
  SegmentRecord out = Seg(Ds("web", "a"), 0, Pos(0, 0), Pos(9, 2), 1);
  out.event_count = s.segments.at(SegmentId(1)).event_count;
  ASSERT_TRUE(ApplyGlobalEvent(&s, StageMerge{out, {SegmentId(1)}}).ok());
  EXPECT_EQ(SafeOffset(s, PartitionId(0)), Offset(10));
}

TEST(GlobalApply, MergeIsStagedThenSwappedInOneEvent) {
  GlobalState s = Populated();
  const SegmentRecord in = s.segments.at(SegmentId(1));  // web/a, partition 0, 0/0..9/2
  ASSERT_TRUE(
      ApplyGlobalEvent(
          &s, RegisterSegment{Seg(Ds("web", "a"), 0, Pos(10, 0), Pos(12, 0), 1), Offset(13)})
          .ok());  // segment 3
  SegmentRecord out = Seg(Ds("web", "a"), 0, Pos(0, 0), Pos(12, 0), 2);
  out.event_count = in.event_count + s.segments.at(SegmentId(3)).event_count;
  out.file_name = "m-0.seg";
  // Wrong range, wrong count, missing input, other datasource: refused.
  SegmentRecord bad = out;
  bad.max_pos = Pos(11, 0);
  ExpectRejected(&s, StageMerge{bad, {SegmentId(1), SegmentId(3)}});
  bad = out;
  bad.event_count += 1;
  ExpectRejected(&s, StageMerge{bad, {SegmentId(1), SegmentId(3)}});
  ExpectRejected(&s, StageMerge{out, {SegmentId(1), SegmentId(77)}});
  ExpectRejected(&s, StageMerge{out, {SegmentId(1), SegmentId(2)}});
  ExpectRejected(&s, StageMerge{out, {}});
  SegmentId id;
  ASSERT_TRUE(ApplyGlobalEvent(&s, StageMerge{out, {SegmentId(1), SegmentId(3)}}, &id).ok());
  EXPECT_EQ(id, SegmentId(4));
  EXPECT_TRUE(s.segments.at(id).staged());
  EXPECT_EQ(s.segments.at(id).replicas, std::set<NodeId>{NodeId(7)});
  ExpectRejected(&s, StageMerge{out, {id}});  // a staged output is no input
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetReplicationFactor{2}).ok());
  ExpectRejected(&s, CommitMerge{id});            // one replica of two
  ExpectRejected(&s, CommitMerge{SegmentId(1)});  // not staged
  ASSERT_TRUE(ApplyGlobalEvent(&s, AddSegmentReplica{id, NodeId(1)}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, CommitMerge{id}).ok());
  EXPECT_EQ(s.segments.count(SegmentId(1)), 0u);
  EXPECT_EQ(s.segments.count(SegmentId(3)), 0u);
  EXPECT_FALSE(s.segments.at(id).staged());
  ExpectRejected(&s, CommitMerge{id});
}

TEST(GlobalApply, CommitMergeRefusedWhenAnInputWasRemoved) {
  GlobalState s = Populated();
  SegmentRecord out = Seg(Ds("web", "a"), 0, Pos(0, 0), Pos(9, 2), 1);
  out.event_count = s.segments.at(SegmentId(1)).event_count;
  SegmentId id;
  ASSERT_TRUE(ApplyGlobalEvent(&s, StageMerge{out, {SegmentId(1)}}, &id).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, RemoveSegments{{SegmentId(1)}}).ok());  // retention
  ExpectRejected(&s, CommitMerge{id});
}

TEST(GlobalApply, RetentionAndReplaceSegment) {
  GlobalState s = Populated();
  ExpectRejected(&s, SetRetention{"nope", 1, 1});
  ExpectRejected(&s, SetRetention{"web", -1, 0});
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetRetention{"web", 1000, 2000}).ok());
  EXPECT_EQ(s.repos.at("web").retention_ms, 1000);
  EXPECT_EQ(s.repos.at("web").retention_bytes, 2000u);
  // Segment 1 (partition 0, epoch 1) rebuilt by the owner of epoch 1.
  SegmentRecord rebuilt = s.segments.at(SegmentId(1));
  rebuilt.file_name = "r-0.seg";
  rebuilt.node = NodeId(9);
  SegmentRecord wrong = rebuilt;
  wrong.event_count += 1;
  ExpectRejected(&s, ReplaceSegment{SegmentId(1), wrong});
  wrong = rebuilt;
  wrong.epoch = Epoch(7);
  ExpectRejected(&s, ReplaceSegment{SegmentId(1), wrong});
  ExpectRejected(&s, ReplaceSegment{SegmentId(55), rebuilt});
  SegmentId id;
  ASSERT_TRUE(ApplyGlobalEvent(&s, ReplaceSegment{SegmentId(1), rebuilt}, &id).ok());
  EXPECT_EQ(s.segments.count(SegmentId(1)), 0u);
  EXPECT_EQ(s.segments.at(id).file_name, "r-0.seg");
  EXPECT_EQ(s.segments.at(id).replicas, std::set<NodeId>{NodeId(9)});
}

TEST(GlobalApply, ClusterSecretIsSetOnce) {
  GlobalState s;
  ExpectRejected(&s, SetClusterSecret{""});
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetClusterSecret{"one"}).ok());
  ExpectRejected(&s, SetClusterSecret{"two"});
  EXPECT_EQ(s.cluster_secret, "one");
}

TEST(GlobalApply, ClusterIdIsSetOnce) {
  GlobalState s;
  ExpectRejected(&s, SetClusterId{""});
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetClusterId{"abc"}).ok());
  EXPECT_EQ(s.cluster_id, "abc");
  ExpectRejected(&s, SetClusterId{"other"});
  ExpectRejected(&s, SetClusterId{"abc"});
}

TEST(GlobalApply, RepoAndTokenRules) {
  GlobalState s;
  ExpectRejected(&s, AddIngestToken{"web", "t"});  // unknown repo
  ASSERT_TRUE(ApplyGlobalEvent(&s, CreateRepo{"web"}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, CreateRepo{"db"}).ok());
  ExpectRejected(&s, CreateRepo{"web"});
  ExpectRejected(&s, CreateRepo{""});
  ASSERT_TRUE(ApplyGlobalEvent(&s, AddIngestToken{"web", "t"}).ok());
  ExpectRejected(&s, AddIngestToken{"web", "t"});
  ExpectRejected(&s, AddIngestToken{"db", "t"});  // a token maps to one repo
  ExpectRejected(&s, AddIngestToken{"db", ""});
  EXPECT_EQ(s.ingest_tokens.at("t"), "web");
  EXPECT_EQ(s.repos.at("web").ingest_tokens.count("t"), 1u);
  EXPECT_TRUE(s.repos.at("db").ingest_tokens.empty());
  ASSERT_TRUE(ApplyGlobalEvent(&s, AddApiToken{"a"}).ok());
  ExpectRejected(&s, AddApiToken{"a"});
  ExpectRejected(&s, AddApiToken{""});
  EXPECT_EQ(s.api_tokens, std::set<std::string>{"a"});
}

TEST(GlobalApply, ClaimPartitionIsACompareAndSetOnTheEpoch) {
  GlobalState s;
  ExpectRejected(&s, ClaimPartition{PartitionId(1), NodeId(1), Epoch(1)});
  EXPECT_TRUE(s.partitions.empty());
  ASSERT_TRUE(ApplyGlobalEvent(&s, ClaimPartition{PartitionId(1), NodeId(1), Epoch(0)}).ok());
  EXPECT_EQ(s.partitions.at(1).epoch, Epoch(1));
  EXPECT_EQ(s.partitions.at(1).owner, NodeId(1));
  ExpectRejected(&s, ClaimPartition{PartitionId(1), NodeId(2), Epoch(0)});  // lost the race
  ASSERT_TRUE(ApplyGlobalEvent(&s, ClaimPartition{PartitionId(1), NodeId(2), Epoch(1)}).ok());
  EXPECT_EQ(s.partitions.at(1).epoch, Epoch(2));
  EXPECT_EQ(s.partitions.at(1).owner, NodeId(2));
  ExpectRejected(&s, ClaimPartition{PartitionId(-1), NodeId(2), Epoch(0)});
}

TEST(GlobalApply, RegisterSegmentIsFencedByTheEpoch) {
  GlobalState s;
  const Datasource ds = Ds("web", "a");
  ExpectRejected(&s, RegisterSegment{Seg(ds, 0, Pos(0, 0), Pos(1, 0), 0), Offset(2)});  // unclaimed
  ASSERT_TRUE(ApplyGlobalEvent(&s, ClaimPartition{PartitionId(0), NodeId(1), Epoch(0)}).ok());
  SegmentId id;
  ASSERT_TRUE(
      ApplyGlobalEvent(&s, RegisterSegment{Seg(ds, 0, Pos(0, 0), Pos(1, 0), 1), Offset(2)}, &id)
          .ok());
  EXPECT_EQ(id, SegmentId(1));
  EXPECT_EQ(s.segments.at(id).id, id);
  EXPECT_EQ(s.segments.at(id).file_name, Seg(ds, 0, Pos(0, 0), Pos(1, 0), 1).file_name);
  // Node 2 takes over; the old owner's next registration is fenced off.
  ASSERT_TRUE(ApplyGlobalEvent(&s, ClaimPartition{PartitionId(0), NodeId(2), Epoch(1)}).ok());
  ExpectRejected(&s, RegisterSegment{Seg(ds, 0, Pos(2, 0), Pos(3, 0), 1), Offset(4)});
  ExpectRejected(&s, RegisterSegment{Seg(ds, 0, Pos(2, 0), Pos(3, 0), 3), Offset(4)});  // future
  ExpectRejected(&s, RegisterSegment{Seg(ds, 1, Pos(2, 0), Pos(3, 0), 2), Offset(4)});  // unknown
  ExpectRejected(&s, RegisterSegment{Seg(ds, 0, Pos(3, 0), Pos(2, 0), 2), Offset(4)});  // min>max
  ASSERT_TRUE(
      ApplyGlobalEvent(&s, RegisterSegment{Seg(ds, 0, Pos(2, 0), Pos(3, 0), 2), Offset(4)}, &id)
          .ok());
  EXPECT_EQ(id, SegmentId(2));
  EXPECT_EQ(s.next_segment_id, SegmentId(3));
}

TEST(GlobalApply, RegisterSegmentRejectsAlreadyFlushedPositions) {
  GlobalState s;
  ASSERT_TRUE(ApplyGlobalEvent(&s, ClaimPartition{PartitionId(0), NodeId(1), Epoch(0)}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, ClaimPartition{PartitionId(1), NodeId(1), Epoch(0)}).ok());
  const Datasource a = Ds("web", "a");
  ASSERT_TRUE(
      ApplyGlobalEvent(&s, RegisterSegment{Seg(a, 0, Pos(0, 0), Pos(5, 3), 1), Offset(6)}).ok());
  EXPECT_EQ(s.flushed_through.at({a.Key(), 0}), Pos(5, 3));
  ExpectRejected(&s, RegisterSegment{Seg(a, 0, Pos(0, 0), Pos(5, 3), 1), Offset(6)});  // replay
  ExpectRejected(&s, RegisterSegment{Seg(a, 0, Pos(5, 3), Pos(7, 0), 1), Offset(8)});  // overlap
  ExpectRejected(&s, RegisterSegment{Seg(a, 0, Pos(2, 0), Pos(9, 0), 1), Offset(10)});
  // Other datasource and other partition have their own flushed_through.
  ASSERT_TRUE(ApplyGlobalEvent(
                  &s, RegisterSegment{Seg(Ds("web", "b"), 0, Pos(0, 0), Pos(5, 3), 1), Offset(6)})
                  .ok());
  ASSERT_TRUE(
      ApplyGlobalEvent(&s, RegisterSegment{Seg(a, 1, Pos(0, 0), Pos(5, 3), 1), Offset(6)}).ok());
  ASSERT_TRUE(
      ApplyGlobalEvent(&s, RegisterSegment{Seg(a, 0, Pos(5, 4), Pos(7, 0), 1), Offset(8)}).ok());
  EXPECT_EQ(s.flushed_through.at({a.Key(), 0}), Pos(7, 0));
  EXPECT_EQ(s.segments.size(), 4u);
}

TEST(GlobalApply, ReplayPointNeverLowers) {
  GlobalState s;
  ASSERT_TRUE(ApplyGlobalEvent(&s, ClaimPartition{PartitionId(0), NodeId(1), Epoch(0)}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(
                  &s, RegisterSegment{Seg(Ds("r", "a"), 0, Pos(0, 0), Pos(9, 0), 1), Offset(10)})
                  .ok());
  EXPECT_EQ(s.partitions.at(0).replay_point, Offset(10));
  ASSERT_TRUE(ApplyGlobalEvent(
                  &s, RegisterSegment{Seg(Ds("r", "b"), 0, Pos(0, 0), Pos(4, 0), 1), Offset(5)})
                  .ok());
  EXPECT_EQ(s.partitions.at(0).replay_point, Offset(10));
  ASSERT_TRUE(ApplyGlobalEvent(&s, AdvanceReplayPoint{PartitionId(0), Epoch(1), Offset(3)}).ok());
  EXPECT_EQ(s.partitions.at(0).replay_point, Offset(10));
  ASSERT_TRUE(ApplyGlobalEvent(&s, AdvanceReplayPoint{PartitionId(0), Epoch(1), Offset(20)}).ok());
  EXPECT_EQ(s.partitions.at(0).replay_point, Offset(20));
  ExpectRejected(&s, AdvanceReplayPoint{PartitionId(0), Epoch(0), Offset(30)});  // stale epoch
  ExpectRejected(&s, AdvanceReplayPoint{PartitionId(4), Epoch(1), Offset(30)});  // unknown
  // A takeover keeps the replay point.
  ASSERT_TRUE(ApplyGlobalEvent(&s, ClaimPartition{PartitionId(0), NodeId(2), Epoch(1)}).ok());
  EXPECT_EQ(s.partitions.at(0).replay_point, Offset(20));
}

TEST(GlobalApply, TruncationPointNeverLowersAndRemoveIgnoresUnknownIds) {
  GlobalState s;
  ExpectRejected(&s, SetTruncationPoint{PartitionId(0), Offset(5)});
  ASSERT_TRUE(ApplyGlobalEvent(&s, ClaimPartition{PartitionId(0), NodeId(1), Epoch(0)}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetTruncationPoint{PartitionId(0), Offset(5)}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetTruncationPoint{PartitionId(0), Offset(2)}).ok());
  EXPECT_EQ(s.partitions.at(0).truncated_before, Offset(5));
  ASSERT_TRUE(ApplyGlobalEvent(
                  &s, RegisterSegment{Seg(Ds("r", "a"), 0, Pos(0, 0), Pos(9, 0), 1), Offset(10)})
                  .ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, RemoveSegments{{SegmentId(99), SegmentId(1)}}).ok());
  EXPECT_TRUE(s.segments.empty());
  EXPECT_EQ(s.next_segment_id, SegmentId(2));  // ids are never reused
  // flushed_through survives removal: a merge's inputs are gone but their events are flushed.
  ExpectRejected(&s, RegisterSegment{Seg(Ds("r", "a"), 0, Pos(0, 0), Pos(9, 0), 1), Offset(10)});
}

// ---------------- Global ----------------

GlobalState ReferenceState(const std::vector<GlobalEvent>& events) {
  GlobalState s;
  int64_t off = 0;
  for (const auto& ev : events) {
    (void)ApplyGlobalEvent(&s, ev);
    s.applied_through = Offset(off++);
  }
  return s;
}

std::string Encoded(const Global& g) {
  std::string out;
  g.Read([&](const GlobalState& s) { out = EncodeGlobalState(s); });
  return out;
}

bool WaitApplied(const Global& g, int64_t through, std::chrono::milliseconds timeout = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int64_t applied = -2;
    g.Read([&](const GlobalState& s) { applied = s.applied_through.value; });
    if (applied >= through) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

std::vector<GlobalEvent> Workload(int n) {
  std::vector<GlobalEvent> evs = {SetClusterId{"c"}, CreateRepo{"web"},
                                  ClaimPartition{PartitionId(0), NodeId(1), Epoch(0)}};
  for (int i = 0; i < n; ++i) {
    evs.push_back(RegisterSegment{
        Seg(Ds("web", "h" + std::to_string(i % 3)), 0, Pos(i, 0), Pos(i, 5), 1), Offset(i)});
    if (i % 4 == 0) evs.push_back(AddIngestToken{"web", "tok" + std::to_string(i)});
  }
  evs.push_back(CreateRepo{"web"});  // rejected, still recorded as applied
  return evs;
}

std::vector<std::string> SnapshotFiles(const std::string& dir) {
  std::vector<std::string> out;
  auto names = Env::Default()->ListDir(dir);
  if (!names.ok()) return out;
  for (const auto& n : *names) {
    if (n.starts_with("snapshot-") && n.ends_with(".bin")) out.push_back(n);
  }
  return out;
}

TEST(Global, SubmitReturnsTheApplyOutcome) {
  MemLog log;
  TempDir dir;
  auto g = Global::Open(Env::Default(), &log, dir.path());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto r = (*g)->Submit(CreateRepo{"web"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->offset, Offset(0));
  auto dup = (*g)->Submit(CreateRepo{"web"});
  EXPECT_EQ(dup.status().code(), StatusCode::kRejected);
  ASSERT_TRUE((*g)->Submit(ClaimPartition{PartitionId(0), NodeId(1), Epoch(0)}).ok());
  auto seg =
      (*g)->Submit(RegisterSegment{Seg(Ds("web", "a"), 0, Pos(0, 0), Pos(3, 0), 1), Offset(4)});
  ASSERT_TRUE(seg.ok()) << seg.status().ToString();
  EXPECT_EQ(seg->segment_id, SegmentId(1));
  EXPECT_EQ(seg->offset, Offset(3));
  auto stale =
      (*g)->Submit(RegisterSegment{Seg(Ds("web", "a"), 0, Pos(4, 0), Pos(5, 0), 0), Offset(6)});
  EXPECT_EQ(stale.status().code(), StatusCode::kRejected);
  (*g)->Read([](const GlobalState& s) {
    EXPECT_EQ(s.applied_through, Offset(4));
    EXPECT_EQ(s.segments.size(), 1u);
    EXPECT_EQ(s.partitions.at(0).replay_point, Offset(4));
  });
  log.set_fail_appends(true);
  EXPECT_EQ((*g)->Submit(CreateRepo{"x"}).status().code(), StatusCode::kIOError);
  log.set_fail_appends(false);
  ASSERT_TRUE((*g)->Close().ok());
  ASSERT_TRUE((*g)->Close().ok());  // idempotent
  EXPECT_EQ((*g)->Submit(CreateRepo{"y"}).status().code(), StatusCode::kAborted);
}

TEST(Global, ConcurrentSubmitsAllApplyWithUniqueIds) {
  MemLog log;
  TempDir dir;
  GlobalOptions opts;
  opts.snapshot_every = 64;
  auto g = Global::Open(Env::Default(), &log, dir.path(), opts);
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE((*g)->Submit(ClaimPartition{PartitionId(0), NodeId(1), Epoch(0)}).ok());
  constexpr int kThreads = 8, kPerThread = 60;
  std::vector<std::vector<SegmentId>> ids(kThreads);
  std::atomic<int> failures{0}, rejected{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const Datasource ds = Ds("web", "thread" + std::to_string(t));
      for (int i = 0; i < kPerThread; ++i) {
        auto r = (*g)->Submit(
            RegisterSegment{Seg(ds, 0, Pos(i * 10, 0), Pos(i * 10 + 9, 0), 1), Offset(i)});
        if (!r.ok()) {
          ++failures;
          continue;
        }
        ids[t].push_back(r->segment_id);
        // A duplicate of the same flush is rejected.
        auto dup = (*g)->Submit(
            RegisterSegment{Seg(ds, 0, Pos(i * 10, 0), Pos(i * 10 + 9, 0), 1), Offset(i)});
        if (dup.status().code() == StatusCode::kRejected) ++rejected;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(rejected.load(), kThreads * kPerThread);
  std::set<SegmentId> unique;
  for (const auto& v : ids) unique.insert(v.begin(), v.end());
  EXPECT_EQ(unique.size(), size_t{kThreads * kPerThread});
  (*g)->Read([&](const GlobalState& s) {
    EXPECT_EQ(s.segments.size(), size_t{kThreads * kPerThread});
    EXPECT_EQ(s.next_segment_id, SegmentId(kThreads * kPerThread + 1));
    for (SegmentId id : unique) EXPECT_EQ(s.segments.count(id), 1u);
  });
}

TEST(Global, ReopenFromTheLogOnly) {
  MemLog log;
  TempDir dir;
  const auto events = Workload(20);
  std::string first;
  {
    auto g = Global::Open(Env::Default(), &log, dir.Sub("a"));
    ASSERT_TRUE(g.ok());
    for (const auto& ev : events) (void)(*g)->Submit(ev);
    first = Encoded(**g);
  }
  EXPECT_EQ(first, EncodeGlobalState(ReferenceState(events)));
  auto g2 = Global::Open(Env::Default(), &log, dir.Sub("b"));  // no snapshot there
  ASSERT_TRUE(g2.ok()) << g2.status().ToString();
  EXPECT_EQ(Encoded(**g2), first);
  // Keeps tailing: an event appended by someone else shows up.
  ASSERT_TRUE(log.Append(PartitionId(0), EncodeGlobalEvent(CreateRepo{"late"})).get().ok());
  ASSERT_TRUE(WaitApplied(**g2, static_cast<int64_t>(events.size())));
  (*g2)->Read([](const GlobalState& s) { EXPECT_EQ(s.repos.count("late"), 1u); });
}

// A remote log may answer reads empty until it has fetched; Open must still replay to the log's
// end before anyone uses the state (a stale epoch would make the next claim fail).
TEST(Global, OpenReplaysToTheEndThoughReadsAnswerEmptyAtFirst) {
  MemLog log;
  TempDir dir;
  const auto events = Workload(20);
  {
    auto g = Global::Open(Env::Default(), &log, dir.Sub("a"));
    ASSERT_TRUE(g.ok());
    for (const auto& ev : events) (void)(*g)->Submit(ev);
  }
  log.set_empty_reads(3);
  auto g2 = Global::Open(Env::Default(), &log, dir.Sub("b"));
  ASSERT_TRUE(g2.ok()) << g2.status().ToString();
  EXPECT_EQ(Encoded(**g2), EncodeGlobalState(ReferenceState(events)));
}

TEST(Global, ReopenFromSnapshotPlusLogTailAndCorruptNewestSnapshot) {
  MemLog log;
  TempDir dir;
  const std::string snaps = dir.Sub("snaps");
  auto events = Workload(30);
  const size_t first_part = 12, second_part = 24;
  {
    auto g = Global::Open(Env::Default(), &log, snaps);
    ASSERT_TRUE(g.ok());
    for (size_t i = 0; i < first_part; ++i) (void)(*g)->Submit(events[i]);
    ASSERT_TRUE((*g)->WriteSnapshot().ok());
    for (size_t i = first_part; i < second_part; ++i) (void)(*g)->Submit(events[i]);
    ASSERT_TRUE((*g)->Close().ok());  // second snapshot, log truncated below the first
  }
  EXPECT_EQ(SnapshotFiles(snaps),
            (std::vector<std::string>{GlobalSnapshotFileName(Offset(first_part - 1)),
                                      GlobalSnapshotFileName(Offset(second_part - 1))}));
  EXPECT_EQ(log.StartOffset(PartitionId(0))->value, static_cast<int64_t>(first_part));
  // The tail, written while this node was down.
  for (size_t i = second_part; i < events.size(); ++i) {
    ASSERT_TRUE(log.Append(PartitionId(0), EncodeGlobalEvent(events[i])).get().ok());
  }
  const std::string expected = EncodeGlobalState(ReferenceState(events));
  {
    auto g = Global::Open(Env::Default(), &log, snaps, {.snapshot_every = 1000000});
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(Encoded(**g), expected);
  }
  // The reopen's Close wrote a third snapshot and dropped the oldest; corrupt the newest one.
  auto files = SnapshotFiles(snaps);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files.back(), GlobalSnapshotFileName(Offset(events.size() - 1)));
  const int64_t start = log.StartOffset(PartitionId(0))->value;
  EXPECT_EQ(start, static_cast<int64_t>(second_part));
  const std::string newest = JoinPath(snaps, files.back());
  auto data = Env::Default()->ReadFile(newest);
  ASSERT_TRUE(data.ok());
  std::string bad = *data;
  bad[bad.size() / 2] = static_cast<char>(bad[bad.size() / 2] ^ 0x20);
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(newest, bad).ok());
  {
    auto g = Global::Open(Env::Default(), &log, snaps, {.snapshot_every = 1000000});
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(Encoded(**g), expected);
    (*g)->Read([&](const GlobalState& s) {
      EXPECT_EQ(s.applied_through.value + 1, (int64_t)events.size());
    });
    ASSERT_TRUE((*g)->Close().ok());
  }
  // Both remaining snapshots corrupt and the log truncated: the state cannot be rebuilt.
  for (const auto& f : SnapshotFiles(snaps)) {
    ASSERT_TRUE(Env::Default()->WriteFileAtomic(JoinPath(snaps, f), "garbage").ok());
  }
  auto g = Global::Open(Env::Default(), &log, snaps);
  EXPECT_EQ(g.status().code(), StatusCode::kCorruption) << g.status().ToString();
}

TEST(Global, TruncatedLogWithoutSnapshotIsCorruption) {
  MemLog log;
  TempDir dir;
  for (const auto& ev : Workload(3)) {
    ASSERT_TRUE(log.Append(PartitionId(0), EncodeGlobalEvent(ev)).get().ok());
  }
  ASSERT_TRUE(log.DeleteBefore(PartitionId(0), Offset(2)).ok());
  auto g = Global::Open(Env::Default(), &log, dir.path());
  EXPECT_EQ(g.status().code(), StatusCode::kCorruption);
  EXPECT_TRUE(SnapshotFiles(dir.path()).empty());
}

TEST(Global, SnapshotsAutomaticallyAndTruncatesTheLog) {
  MemLog log;
  TempDir dir;
  auto g = Global::Open(Env::Default(), &log, dir.path(), {.snapshot_every = 5});
  ASSERT_TRUE(g.ok());
  const auto events = Workload(40);
  // The background writer coalesces snapshots that are due while it is busy, so give it time to
  // write one before submitting the rest.
  const size_t half = events.size() / 2;
  for (size_t i = 0; i < half; ++i) (void)(*g)->Submit(events[i]);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (SnapshotFiles(dir.path()).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_FALSE(SnapshotFiles(dir.path()).empty());
  for (size_t i = half; i < events.size(); ++i) (void)(*g)->Submit(events[i]);
  deadline = std::chrono::steady_clock::now() + 10s;
  while (log.StartOffset(PartitionId(0))->value == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_GT(log.StartOffset(PartitionId(0))->value, 0);
  ASSERT_TRUE((*g)->Close().ok());
  auto files = SnapshotFiles(dir.path());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files.back(), GlobalSnapshotFileName(Offset(events.size() - 1)));
  auto g2 = Global::Open(Env::Default(), &log, dir.path());
  ASSERT_TRUE(g2.ok()) << g2.status().ToString();
  EXPECT_EQ(Encoded(**g2), EncodeGlobalState(ReferenceState(events)));
}

TEST(Global, ClusterModeKeepsTheLogAndPeersInstallSnapshots) {
  MemLog log;
  TempDir dir, peer_dir;
  GlobalOptions opts{.snapshot_every = 3, .truncate_log = false};
  auto g = Global::Open(Env::Default(), &log, dir.path(), opts);
  ASSERT_TRUE(g.ok());
  const auto events = Workload(20);
  for (const auto& ev : events) (void)(*g)->Submit(ev);
  ASSERT_TRUE((*g)->WriteSnapshot().ok());
  EXPECT_EQ(log.StartOffset(PartitionId(0))->value, 0) << "truncate_log=false must keep the log";
  const Offset last = (*g)->Applied();
  EXPECT_GE(last.value, static_cast<int64_t>(events.size()) - 1);
  EXPECT_EQ(log.EndOffset(PartitionId(0))->value, last.value + 1);
  EXPECT_TRUE((*g)->WaitApplied(last, 1ms));
  EXPECT_FALSE((*g)->WaitApplied(Offset(last.value + 1), 20ms));

  // A peer without snapshots installs this node's encoded state and starts from it.
  auto [off, bytes] = (*g)->EncodedState();
  EXPECT_EQ(off, last);
  auto installed = InstallGlobalSnapshot(Env::Default(), peer_dir.path(), bytes);
  ASSERT_TRUE(installed.ok()) << installed.status().ToString();
  EXPECT_EQ(*installed, last);
  EXPECT_EQ(SnapshotFiles(peer_dir.path()), std::vector<std::string>{GlobalSnapshotFileName(last)});
  // Later events reach the peer through the log.
  (void)(*g)->Submit(CreateRepo{"after-snapshot"});
  auto peer = Global::Open(Env::Default(), &log, peer_dir.path(), opts);
  ASSERT_TRUE(peer.ok()) << peer.status().ToString();
  EXPECT_EQ(Encoded(**peer), Encoded(**g));

  std::string bad = bytes;
  bad[bad.size() / 2] ^= 0x20;
  EXPECT_EQ(InstallGlobalSnapshot(Env::Default(), peer_dir.path(), bad).status().code(),
            StatusCode::kCorruption);
  EXPECT_FALSE(
      InstallGlobalSnapshot(Env::Default(), peer_dir.path(), EncodeGlobalState(GlobalState{}))
          .ok());
}

TEST(Global, TwoInstancesOnOneLogReachIdenticalStates) {
  MemLog log;
  TempDir dir;
  const GlobalOptions opts{.snapshot_every = 1000000};
  auto a = Global::Open(Env::Default(), &log, dir.Sub("a"), opts);
  auto b = Global::Open(Env::Default(), &log, dir.Sub("b"), opts);
  ASSERT_TRUE(a.ok() && b.ok());
  // Both race to claim the same partitions and register segments; the log order decides.
  std::vector<std::thread> threads;
  for (int n = 0; n < 2; ++n) {
    Global* g = n == 0 ? a->get() : b->get();
    threads.emplace_back([g, n] {
      for (int i = 0; i < 40; ++i) {
        int64_t epoch = 0;
        g->Read([&](const GlobalState& s) {
          auto it = s.partitions.find(i % 4);
          if (it != s.partitions.end()) epoch = it->second.epoch.value;
        });
        (void)g->Submit(ClaimPartition{PartitionId(i % 4), NodeId(n + 1), Epoch(epoch)});
        (void)g->Submit(RegisterSegment{Seg(Ds("web", "x"), i % 4, Pos(i, 0), Pos(i, 1), epoch + 1),
                                        Offset(i + 1)});
        (void)g->Submit(CreateRepo{"repo" + std::to_string(i % 7)});
      }
    });
  }
  for (auto& t : threads) t.join();
  // A corrupt record is skipped identically by both.
  ASSERT_TRUE(log.Append(PartitionId(0), "not a global event").get().ok());
  ASSERT_TRUE((*a)->Submit(AddApiToken{"final"}).ok());
  const int64_t last = log.EndOffset(PartitionId(0))->value - 1;
  ASSERT_TRUE(WaitApplied(**a, last));
  ASSERT_TRUE(WaitApplied(**b, last));
  const std::string sa = Encoded(**a);
  EXPECT_EQ(sa, Encoded(**b));
  // And a third instance built from the log alone agrees.
  auto c = Global::Open(Env::Default(), &log, dir.Sub("c"), opts);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Encoded(**c), sa);
  (*a)->Read([](const GlobalState& s) {
    EXPECT_GT(s.segments.size(), 0u);
    EXPECT_EQ(s.api_tokens.count("final"), 1u);
  });
}

#ifdef SEDIMENT_HAVE_LOCAL_LOG
TEST(Global, RunsOverTheLocalLog) {
  TempDir dir;
  const auto events = Workload(25);
  std::string first;
  {
    auto log = OpenLocalLog(Env::Default(), dir.Sub("log"), LocalLogOptions{.partitions = 1});
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    auto g = Global::Open(Env::Default(), log->get(), dir.Sub("snaps"), {.snapshot_every = 7});
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    for (const auto& ev : events) (void)(*g)->Submit(ev);
    first = Encoded(**g);
    ASSERT_TRUE((*g)->Close().ok());
  }
  EXPECT_EQ(first, EncodeGlobalState(ReferenceState(events)));
  auto log = OpenLocalLog(Env::Default(), dir.Sub("log"), LocalLogOptions{.partitions = 1});
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  auto g = Global::Open(Env::Default(), log->get(), dir.Sub("snaps"));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(Encoded(**g), first);
  auto r = (*g)->Submit(CreateRepo{"after-reopen"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->offset, Offset(static_cast<int64_t>(events.size())));
}
#endif

}  // namespace
}  // namespace sediment

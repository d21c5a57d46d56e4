#include "global/global.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "common/checksum.h"
#include "common/coding.h"
#include "common/testing/fault_env.h"
#include "common/testing/temp_dir.h"
#include "log/local_log.h"

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

AlertDef TestAlertDef() {
  AlertDef d;
  d.query = "status=500 | count()";
  d.every_ms = 5000;
  d.window_ms = 10000;
  d.delay_ms = 250;
  d.threshold = AlertThreshold{"_count", ">", 3.5};
  AlertAction hook;
  hook.url = "http://127.0.0.1:9/hook";
  hook.headers = {{"X-Team", "ops"}};
  hook.body_template = R"({"id": "{firing_id}"})";
  AlertAction line;
  line.kind = AlertActionKind::kLogLine;
  d.actions = {hook, line};
  return d;
}

std::vector<GlobalEvent> OneOfEach() {
  return {
      SetClusterId{"cluster-\x01\xff-id"},
      CreateRepo{"web"},
      AddIngestToken{"web", HashToken("tok-123"), ""},
      AddApiToken{HashToken("api-secret"), ""},
      ClaimPartition{PartitionId(3), NodeId(-5), Epoch(9)},
      RegisterSegment{Seg(Ds("web", "a"), 3, Pos(-1, 0), Pos(1ll << 40, 0xffffffffu), 4),
                      Offset(77)},
      AdvanceReplayPoint{PartitionId(2147483647), Epoch(1), Offset(123456789)},
      SetTruncationPoint{PartitionId(0), Epoch(3), Offset(-1)},
      RemoveSegments{{SegmentId(1), SegmentId(-3), SegmentId(1ll << 62)}},
      SetClusterSecret{HashToken(std::string("s3cr\x00t", 5)), ""},
      RegisterNode{NodeId(12)},
      AddSegmentReplica{SegmentId(4), NodeId(2)},
      RemoveSegmentReplica{SegmentId(4), NodeId(3), 2},
      StageMerge{Seg(Ds("web", "a"), 3, Pos(5, 0), Pos(9, 1), 4), {SegmentId(1), SegmentId(2)}},
      CommitMerge{SegmentId(9)},
      SetReplicationFactor{3},
      SetRetention{"web", 86400000, 1u << 30},
      ReplaceSegment{SegmentId(8), Seg(Ds("db", "x"), 1, Pos(5, 0), Pos(6, 0), 2)},
      SetBucket{"s3://bucket/prefix at http://127.0.0.1:9000"},
      SegmentUploaded{SegmentId(12)},
      BeginRecovery{3},
      BucketObjectsCollected{NodeId(3), -7, {{"p0-e1-o0-i0.seg", 1234}, {"\x00odd", 0}}},
      PutLookupFile{"web", "users.csv", std::string("userid,name\n1,chr\n\x00", 19)},
      DeleteLookupFile{"web", "users.csv"},
      PutParser{"web", "access", {"kvParse() | #env := env", {"host"}}},
      DeleteParser{"web", "access"},
      DeleteRepo{"web"},
      CreateIngestToken{"web", "shipper-1", HashToken("ingest-1"), "kv", 1700000000123},
      RevokeIngestToken{"web", "shipper-1"},
      CreateApiToken{
          "reader", HashToken("api-2"), false, {{"db", kPermRead}, {"web", kPermAll}}, -1},
      RevokeApiToken{"reader"},
      CreateRepo{"db", 1700000000999},
      PutSavedSearch{"web", "errors", {"status=500", "1h", ""}},
      DeleteSavedSearch{"web", "errors"},
      PutAlert{"web", "many-500", TestAlertDef(), 1'700'000'001'234},
      DeleteAlert{"web", "many-500"},
      AlertWindowDone{"web",
                      "many-500",
                      7,
                      PartitionId(3),
                      Epoch(2),
                      {1'700'000'005'000, 1'699'999'995'000, AlertOutcome::kFailed, 12, 5,
                       NodeId(4), 1'700'000'009'000, "HTTP 503"}},
  };
}

GlobalState Populated() {
  GlobalState s;
  for (const GlobalEvent& ev : std::vector<GlobalEvent>{
           SetClusterId{"c1"}, CreateRepo{"web"}, CreateRepo{"db"},
           AddIngestToken{"web", HashToken("t1"), ""}, AddIngestToken{"web", HashToken("t2"), ""},
           AddIngestToken{"db", HashToken("t3"), ""}, AddApiToken{HashToken("a1"), ""},
           ClaimPartition{PartitionId(0), NodeId(1), Epoch(0)},
           ClaimPartition{PartitionId(5), NodeId(2), Epoch(0)},
           ClaimPartition{PartitionId(5), NodeId(3), Epoch(1)},
           SetClusterSecret{HashToken("sec"), ""}}) {
    EXPECT_TRUE(ApplyGlobalEvent(&s, ev).ok());
  }
  EXPECT_TRUE(ApplyGlobalEvent(
                  &s, RegisterSegment{Seg(Ds("web", "a"), 0, Pos(0, 0), Pos(9, 2), 1), Offset(10)})
                  .ok());
  EXPECT_TRUE(ApplyGlobalEvent(
                  &s, RegisterSegment{Seg(Ds("db", "b"), 5, Pos(3, 0), Pos(4, 1), 2), Offset(5)})
                  .ok());
  EXPECT_TRUE(ApplyGlobalEvent(&s, SetTruncationPoint{PartitionId(0), Epoch(1), Offset(4)}).ok());
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
  version[2] = 4;
  std::string version3 = body;
  version3[2] = 3;  // only for the hashed secrets
  std::string version0 = body;
  version0[2] = 0;
  std::string magic = body;
  magic[0] = 'X';
  std::string huge_count = std::string("GE\x01\x09", 4);
  PutVarint64(&huge_count, 1ull << 60);
  std::string huge_string = std::string("GE\x01\x02", 4);
  PutVarint64(&huge_string, 1ull << 40);
  std::string partition_range = std::string("GE\x01\x08", 4);
  PutVarsint64(&partition_range, 1ll << 33);
  PutVarsint64(&partition_range, 1);
  for (const std::string& b : {unknown_type, zero_type, version, version3, version0, magic,
                               body + "zz", huge_count, huge_string, partition_range}) {
    Result<GlobalEvent> dec = DecodeGlobalEvent(WithCrc(b));
    EXPECT_EQ(dec.status().code(), StatusCode::kCorruption) << dec.status().ToString();
  }
  EXPECT_TRUE(DecodeGlobalEvent(WithCrc(body)).ok());
}

// A record of an earlier release with an empty secret in clear (v1: apply refuses it) decodes and
// encodes back to its own bytes. The encoder chose the version by the legacy field, so it wrote
// such an event as v3 with no hash, which does not decode (global_codec_fuzz found it).
TEST(GlobalCodec, LegacyEmptySecretsEncodeBackToTheirOwnBytes) {
  auto v1 = [](uint8_t type, const std::vector<std::string>& strings) {
    std::string b("GE\x01", 3);
    b.push_back(static_cast<char>(type));
    for (const auto& s : strings) PutLengthPrefixed(&b, s);
    return WithCrc(b);
  };
  const std::string cases[] = {
      v1(3, {"web", ""}),  // AddIngestToken
      v1(4, {""}),         // AddApiToken
      v1(10, {""}),        // SetClusterSecret
      v1(3, {"web", "t"}),
  };
  for (const std::string& bytes : cases) {
    auto dec = DecodeGlobalEvent(bytes);
    ASSERT_TRUE(dec.ok()) << dec.status().ToString();
    const std::string again = EncodeGlobalEvent(*dec);
    EXPECT_EQ(again, bytes) << GlobalEventName(*dec);
    auto back = DecodeGlobalEvent(again);
    ASSERT_TRUE(back.ok()) << GlobalEventName(*dec) << ": " << back.status().ToString();
    GlobalState s;
    ASSERT_TRUE(ApplyGlobalEvent(&s, CreateRepo{"web"}).ok());
    auto applied = ApplyGlobalEvent(&s, *back);
    if (bytes == cases[3]) {
      EXPECT_TRUE(applied.ok()) << applied.ToString();
    } else {
      EXPECT_FALSE(applied.ok()) << GlobalEventName(*dec);  // an empty secret is refused
    }
  }
}

// SetTruncationPoint gained the claim epoch in event version 2. Records written before (version
// 1, no epoch) still decode, with epoch 0, and are applied as they were then; they encode back to
// the same bytes. Every other event is still written as version 1.
TEST(GlobalCodec, VersionOneTruncationPointIsStillReadAndApplied) {
  std::string v1("GE\x01\x08", 4);  // the bytes a node of the previous release wrote
  PutVarsint64(&v1, 3);             // partition
  PutVarsint64(&v1, 42);            // offset
  v1 = WithCrc(v1);
  Result<GlobalEvent> dec = DecodeGlobalEvent(v1);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  ASSERT_TRUE(std::holds_alternative<SetTruncationPoint>(*dec));
  const auto& t = std::get<SetTruncationPoint>(*dec);
  EXPECT_EQ(t.partition, PartitionId(3));
  EXPECT_EQ(t.offset, Offset(42));
  EXPECT_EQ(t.epoch, Epoch(0));
  EXPECT_EQ(EncodeGlobalEvent(*dec), v1);

  // Applied as before: partition 3 is at epoch 2 with nothing registered (safe offset 0).
  GlobalState s;
  ASSERT_TRUE(ApplyGlobalEvent(&s, ClaimPartition{PartitionId(3), NodeId(1), Epoch(0)}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, ClaimPartition{PartitionId(3), NodeId(2), Epoch(1)}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, *dec).ok());
  EXPECT_EQ(s.partitions.at(3).truncated_before, Offset(42));

  // The fenced form is version 2: the same body plus the epoch.
  const std::string v2 =
      EncodeGlobalEvent(SetTruncationPoint{PartitionId(3), Epoch(2), Offset(42)});
  EXPECT_EQ(v2[2], 2);
  std::string v2_body = v1.substr(0, v1.size() - 4);
  v2_body[2] = 2;
  PutVarsint64(&v2_body, 2);
  EXPECT_EQ(v2, WithCrc(v2_body));
  auto fenced = DecodeGlobalEvent(v2);
  ASSERT_TRUE(fenced.ok()) << fenced.status().ToString();
  EXPECT_EQ(std::get<SetTruncationPoint>(*fenced).epoch, Epoch(2));
  for (const GlobalEvent& ev : OneOfEach()) {
    if (std::holds_alternative<SetTruncationPoint>(ev)) continue;
    // The hashed secrets are version 3 (LegacyClearTokenRecordsAreHashedOnApply).
    if (std::holds_alternative<AddIngestToken>(ev) || std::holds_alternative<AddApiToken>(ev) ||
        std::holds_alternative<SetClusterSecret>(ev)) {
      EXPECT_EQ(EncodeGlobalEvent(ev)[2], 3) << GlobalEventName(ev);
      continue;
    }
    // A CreateRepo with a creation time is version 4 (CreateRepoCreationTimeIsVersionFour).
    if (const auto* c = std::get_if<CreateRepo>(&ev); c != nullptr && c->created_ms != 0) {
      EXPECT_EQ(EncodeGlobalEvent(ev)[2], 4) << GlobalEventName(ev);
      continue;
    }
    EXPECT_EQ(EncodeGlobalEvent(ev)[2], 1) << GlobalEventName(ev);
    // Their bodies are the same in version 2.
    std::string as_v2 = EncodeGlobalEvent(ev);
    as_v2 = as_v2.substr(0, as_v2.size() - 4);
    as_v2[2] = 2;
    EXPECT_TRUE(DecodeGlobalEvent(WithCrc(as_v2)).ok()) << GlobalEventName(ev);
  }

  // Not canonical or malformed: epoch 0 in version 2, a version-1 header on a version-2 body
  // (trailing bytes), a version-2 header on a version-1 body (no epoch).
  std::string zero_epoch = v1.substr(0, v1.size() - 4);
  zero_epoch[2] = 2;
  PutVarsint64(&zero_epoch, 0);
  std::string v1_header = v2.substr(0, v2.size() - 4);
  v1_header[2] = 1;
  std::string v2_header = v1.substr(0, v1.size() - 4);
  v2_header[2] = 2;
  for (const std::string& b : {zero_epoch, v1_header, v2_header}) {
    EXPECT_EQ(DecodeGlobalEvent(WithCrc(b)).status().code(), StatusCode::kCorruption);
  }
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
  EXPECT_EQ(dec->repos.at("web").ingest_token_hashes.size(), 2u);
  EXPECT_EQ(dec->ingest_token_hashes, s.ingest_token_hashes);
  EXPECT_EQ(dec->api_token_hashes, s.api_token_hashes);
  EXPECT_EQ(IngestRepoForToken(*dec, "t1"), "web");
  EXPECT_EQ(IngestRepoForToken(*dec, "t3"), "db");
  EXPECT_EQ(IngestRepoForToken(*dec, "a1"), std::nullopt);
  EXPECT_TRUE(IsApiToken(*dec, "a1"));
  EXPECT_FALSE(IsApiToken(*dec, "t1"));
  // No token and no secret is in the encoding in clear.
  for (const std::string secret : {"t1", "t2", "t3", "a1", "sec"}) {
    std::string as_str;
    PutLengthPrefixed(&as_str, secret);
    EXPECT_EQ(enc.find(as_str), std::string::npos) << secret;
  }
  ASSERT_EQ(dec->segments.size(), 2u);
  EXPECT_EQ(dec->segments.at(SegmentId(2)).datasource, Ds("db", "b"));
  EXPECT_EQ(dec->segments.at(SegmentId(2)).id, SegmentId(2));
  EXPECT_EQ(dec->next_segment_id, SegmentId(3));
  EXPECT_EQ(dec->flushed_through, s.flushed_through);
  EXPECT_EQ(dec->partitions.at(5).epoch, Epoch(2));
  EXPECT_EQ(dec->partitions.at(5).owner, NodeId(3));
  EXPECT_EQ(dec->partitions.at(0).replay_point, Offset(10));
  EXPECT_EQ(dec->partitions.at(0).truncated_before, Offset(4));
  EXPECT_TRUE(IsClusterSecret(*dec, "sec"));
  EXPECT_FALSE(IsClusterSecret(*dec, "se"));
  EXPECT_TRUE(dec->legacy_cluster_secret.empty());

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

// The bytes snapshot v4 appends to v3 (FORMAT.md), written independently of the encoder.
std::string V4Suffix(const GlobalState& s) {
  std::string out;
  for (const auto& [id, seg] : s.segments) {
    PutVarint64(&out, seg.uploaded ? 1 : 0);
    PutVarint32(&out, seg.generation);
  }
  PutLengthPrefixed(&out, s.bucket);
  PutVarint32(&out, s.generation);
  const RecoveryReport& r = s.recovery;
  PutVarint32(&out, r.generation);
  PutVarsint64(&out, r.snapshot_applied_through.value);
  PutLengthPrefixed(&out, r.snapshot_key);
  for (uint64_t v : {r.kept_segments, r.kept_events, r.kept_bytes, r.added_segments,
                     r.lost_segments, r.lost_events, r.lost_bytes}) {
    PutVarint64(&out, v);
  }
  PutVarint64(&out, r.lost.size());
  for (const LostSegment& l : r.lost) {
    PutLengthPrefixed(&out, l.datasource);
    PutVarsint64(&out, l.partition.value);
    PutVarsint64(&out, l.min_ts);
    PutVarsint64(&out, l.max_ts);
    PutVarint64(&out, l.event_count);
    PutVarint64(&out, l.raw_bytes);
    PutLengthPrefixed(&out, l.file_name);
  }
  return out;
}

void PutTestAlertDef(std::string* out, const AlertDef& d) {
  PutLengthPrefixed(out, d.query);
  PutVarsint64(out, d.every_ms);
  PutVarsint64(out, d.window_ms);
  PutVarsint64(out, d.delay_ms);
  PutVarint64(out, d.threshold ? 1 : 0);
  if (d.threshold) {
    PutLengthPrefixed(out, d.threshold->field);
    PutLengthPrefixed(out, d.threshold->op);
    uint64_t bits;
    std::memcpy(&bits, &d.threshold->value, 8);
    PutFixed64(out, bits);
  }
  PutVarint64(out, d.actions.size());
  for (const AlertAction& a : d.actions) {
    PutVarint64(out, static_cast<uint64_t>(a.kind));
    PutLengthPrefixed(out, a.url);
    PutVarint64(out, a.headers.size());
    for (const auto& [k, v] : a.headers) {
      PutLengthPrefixed(out, k);
      PutLengthPrefixed(out, v);
    }
    PutLengthPrefixed(out, a.body_template);
  }
  PutVarint64(out, d.enabled ? 1 : 0);
}

void PutTestFiring(std::string* out, const AlertFiring& f) {
  PutVarsint64(out, f.window_end_ms);
  PutVarsint64(out, f.window_start_ms);
  PutVarint64(out, static_cast<uint64_t>(f.outcome));
  PutVarint64(out, f.result_count);
  PutVarint32(out, f.attempts);
  PutVarsint64(out, f.node.value);
  PutVarsint64(out, f.at_ms);
  PutLengthPrefixed(out, f.error);
}

// The second part of what snapshot v9 appends to v8, after the API tokens (FORMAT.md): saved
// searches and alerts, written independently of the encoder.
std::string V9AlertSuffix(const GlobalState& s) {
  std::string out;
  for (const auto& [name, repo] : s.repos) {
    PutVarint64(&out, repo.saved_searches.size());
    for (const auto& [search, def] : repo.saved_searches) {
      PutLengthPrefixed(&out, search);
      PutLengthPrefixed(&out, def.query);
      PutLengthPrefixed(&out, def.start);
      PutLengthPrefixed(&out, def.end);
    }
    PutVarint64(&out, repo.alerts.size());
    for (const auto& [alert, a] : repo.alerts) {
      PutLengthPrefixed(&out, alert);
      PutVarint64(&out, a.id);
      PutVarsint64(&out, a.done_through_ms);
      PutTestAlertDef(&out, a.def);
      PutVarint64(&out, a.firings.size());
      for (const AlertFiring& f : a.firings) PutTestFiring(&out, f);
    }
  }
  PutVarint64(&out, s.next_alert_id);
  return out;
}

// The bytes snapshot v8 appends to v7 (FORMAT.md), written independently of the encoder.
std::string V8Suffix(const GlobalState& s) {
  std::string out;
  for (const auto& [name, repo] : s.repos) {
    PutVarint64(&out, repo.parsers.size());
    for (const auto& [parser, def] : repo.parsers) {
      PutLengthPrefixed(&out, parser);
      PutLengthPrefixed(&out, def.script);
      PutVarint64(&out, def.tag_fields.size());
      for (const std::string& f : def.tag_fields) PutLengthPrefixed(&out, f);
    }
  }
  return out;
}

// The bytes snapshot v9 appends to v8 (FORMAT.md), written independently of the encoder.
std::string V9Suffix(const GlobalState& s) {
  std::string out;
  auto perms = [&out](const std::map<std::string, uint32_t>& repos) {
    PutVarint64(&out, repos.size());
    for (const auto& [repo, bits] : repos) {
      PutLengthPrefixed(&out, repo);
      PutVarint32(&out, bits);
    }
  };
  for (const auto& [name, repo] : s.repos) {
    PutVarsint64(&out, repo.created_ms);
    PutVarint64(&out, repo.ingest_tokens.size());
    for (const auto& [token_name, t] : repo.ingest_tokens) {
      PutLengthPrefixed(&out, token_name);
      PutLengthPrefixed(&out, t.token_hash);
      PutLengthPrefixed(&out, t.parser);
      PutVarsint64(&out, t.created_ms);
    }
  }
  PutVarint64(&out, s.api_tokens.size());
  for (const auto& [token_name, t] : s.api_tokens) {
    PutLengthPrefixed(&out, token_name);
    PutLengthPrefixed(&out, t.token_hash);
    PutVarint64(&out, t.admin ? 1 : 0);
    perms(t.repos);
    PutVarsint64(&out, t.created_ms);
  }
  out += V9AlertSuffix(s);
  return out;
}

// The bytes snapshot v7 appends to v6 (FORMAT.md), written independently of the encoder.
std::string V7Suffix(const GlobalState& s) {
  std::string out;
  for (const auto& [name, repo] : s.repos) {
    PutVarint64(&out, repo.lookup_files.size());
    for (const auto& [file, content] : repo.lookup_files) {
      PutLengthPrefixed(&out, file);
      PutLengthPrefixed(&out, content);
    }
  }
  return out;
}

// The bytes snapshot v5 appends to v4 (FORMAT.md), written independently of the encoder.
std::string V5Suffix(const GlobalState& s) {
  std::string out;
  const BucketGcReport& g = s.bucket_gc;
  PutVarint64(&out, g.records);
  PutVarint64(&out, g.objects);
  PutVarint64(&out, g.bytes);
  PutVarsint64(&out, g.last_node.value);
  PutVarsint64(&out, g.last_ms);
  PutVarint64(&out, g.last_files.size());
  for (const std::string& f : g.last_files) PutLengthPrefixed(&out, f);
  return out;
}

// Snapshots of versions 1 to 5 kept tokens (and, from 2, the cluster secret) in clear, in the
// same places as version 6 keeps their hashes. `s` with its tokens replaced by clear ones, and the
// state such a snapshot decodes to (the legacy hashes of the same tokens).
GlobalState WithClearTokens(GlobalState s, const std::string& secret, GlobalState* hashed) {
  s.repos.at("web").ingest_token_hashes = {"t1", "t2"};
  s.repos.at("db").ingest_token_hashes = {"t3"};
  s.ingest_token_hashes = {{"t1", "web"}, {"t2", "web"}, {"t3", "db"}};
  s.api_token_hashes = {"a1"};
  s.cluster_secret_verifier = secret;
  *hashed = s;
  hashed->repos.at("web").ingest_token_hashes = {LegacyTokenHash("t1"), LegacyTokenHash("t2")};
  hashed->repos.at("db").ingest_token_hashes = {LegacyTokenHash("t3")};
  hashed->ingest_token_hashes = {{LegacyTokenHash("t1"), "web"},
                                 {LegacyTokenHash("t2"), "web"},
                                 {LegacyTokenHash("t3"), "db"}};
  hashed->api_token_hashes = {LegacyTokenHash("a1")};
  hashed->cluster_secret_verifier = secret.empty() ? "" : LegacyTokenHash(secret);
  return s;
}

TEST(GlobalCodec, OlderSnapshotVersionsAreStillRead) {
  GlobalState hashed;
  GlobalState s = WithClearTokens(Populated(), "", &hashed);
  const std::string v9 = EncodeGlobalState(hashed);
  ASSERT_EQ(v9[4], 9);
  // v8 = v9 without the v9 suffix (no creation times, no named tokens, no saved searches or
  // alerts: per repository a 0x00 time and a 0x00 count, then a 0x00 API token count, then per
  // repository two 0x00 counts, then the next alert id 1).
  const std::string suffix9 = V9Suffix(hashed);
  ASSERT_EQ(suffix9, std::string(hashed.repos.size() * 2 + 1, '\0') +
                         std::string(2 * hashed.repos.size(), '\0') + "\x01");
  std::string body8 = v9.substr(0, v9.size() - 4);
  ASSERT_EQ(body8.substr(body8.size() - suffix9.size()), suffix9);
  body8 = body8.substr(0, body8.size() - suffix9.size());
  body8[4] = 8;
  // v7 = v8 without the v8 suffix (no parsers: one 0x00 count per repository).
  const std::string suffix8 = V8Suffix(hashed);
  ASSERT_EQ(suffix8, std::string(hashed.repos.size(), '\0'));
  std::string body7 = body8;
  ASSERT_EQ(body7.substr(body7.size() - suffix8.size()), suffix8);
  body7 = body7.substr(0, body7.size() - suffix8.size());
  body7[4] = 7;
  // v6 = v7 without the v7 suffix (no lookup files: one 0x00 count per repository).
  const std::string suffix7 = V7Suffix(hashed);
  ASSERT_EQ(suffix7, std::string(hashed.repos.size(), '\0'));
  std::string body6 = body7;
  ASSERT_EQ(body6.substr(body6.size() - suffix7.size()), suffix7);
  body6 = body6.substr(0, body6.size() - suffix7.size());
  body6[4] = 6;
  // Version 5 is version 6's layout with the tokens in clear.
  std::string body5 = EncodeGlobalState(s);
  body5 = body5.substr(0, body5.size() - 4 - suffix7.size() - suffix8.size() - suffix9.size());
  body5[4] = 5;
  const std::string v5 = WithCrc(body5);
  // v4 = v5 without the v5 suffix (an empty GC report); v3 = v4 without the v4 suffix; v2 = v3
  // without the v3 suffix; v1 = v2 without the trailing (empty, one 0x00 byte) secret.
  const std::string suffix5 = V5Suffix(s);
  ASSERT_GT(body5.size(), suffix5.size());
  ASSERT_EQ(body5.substr(body5.size() - suffix5.size()), suffix5);
  std::string body = body5.substr(0, body5.size() - suffix5.size());
  body[4] = 4;
  const std::string suffix4 = V4Suffix(s);
  ASSERT_GT(body.size(), suffix4.size());
  ASSERT_EQ(body.substr(body.size() - suffix4.size()), suffix4);
  std::string v3 = body.substr(0, body.size() - suffix4.size());
  v3[4] = 3;
  const std::string suffix3 = V3Suffix(s);
  ASSERT_GT(v3.size(), suffix3.size());
  ASSERT_EQ(v3.substr(v3.size() - suffix3.size()), suffix3);
  std::string v2 = v3.substr(0, v3.size() - suffix3.size());
  v2[4] = 2;
  std::string v1 = v2.substr(0, v2.size() - 1);
  v1[4] = 1;
  for (const std::string& old : {WithCrc(v1), WithCrc(v2), WithCrc(v3), WithCrc(body), v5,
                                 WithCrc(body6), WithCrc(body7), WithCrc(body8)}) {
    Result<GlobalState> dec = DecodeGlobalState(old);
    ASSERT_TRUE(dec.ok()) << "version " << int(old[4]) << ": " << dec.status().ToString();
    EXPECT_EQ(EncodeGlobalState(*dec), v9) << "version " << int(old[4]);
    EXPECT_EQ(dec->next_alert_id, 1u);
    for (const auto& [name, repo] : dec->repos) EXPECT_TRUE(repo.alerts.empty());
    for (const auto& [name, repo] : dec->repos) EXPECT_TRUE(repo.saved_searches.empty());
    EXPECT_EQ(IngestRepoForToken(*dec, "t2"), "web") << "version " << int(old[4]);
    EXPECT_TRUE(IsApiToken(*dec, "a1"));
    EXPECT_TRUE(dec->cluster_secret_verifier.empty());
    EXPECT_EQ(dec->bucket_gc.records, 0u);
    EXPECT_TRUE(dec->bucket_gc.last_files.empty());
    for (const auto& [id, seg] : dec->segments) {
      EXPECT_EQ(seg.replicas, std::set<NodeId>{seg.node});
      EXPECT_FALSE(seg.uploaded);
      EXPECT_EQ(seg.generation, 0u);
    }
    EXPECT_TRUE(dec->bucket.empty());
    EXPECT_EQ(dec->generation, 0u);
    EXPECT_EQ(dec->recovery.generation, 0u);
    EXPECT_EQ(dec->recovery.snapshot_applied_through, Offset(-1));
    EXPECT_TRUE(dec->recovery.lost.empty());
    for (const auto& [name, repo] : dec->repos) EXPECT_TRUE(repo.lookup_files.empty());
    for (const auto& [name, repo] : dec->repos) EXPECT_TRUE(repo.parsers.empty());
  }
  // An older version header on v5 bytes leaves trailing bytes; a v5 header on v4 bytes or a v4
  // header on v3 bytes is truncated; a v6 or v7 header on clear tokens is no hash; versions 0 and
  // 9 are refused; a v7 header on v6 bytes and a v8 header on v7 bytes are truncated.
  for (char version : {0, 1, 2, 3, 4, 6, 7, 8, 9, 10}) {
    std::string wrong = body5;
    wrong[4] = version;
    EXPECT_EQ(DecodeGlobalState(WithCrc(wrong)).status().code(), StatusCode::kCorruption)
        << "version " << int(version);
  }
  std::string short7 = body6;
  short7[4] = 7;
  EXPECT_EQ(DecodeGlobalState(WithCrc(short7)).status().code(), StatusCode::kCorruption);
  std::string short8 = body7;
  short8[4] = 8;
  EXPECT_EQ(DecodeGlobalState(WithCrc(short8)).status().code(), StatusCode::kCorruption);
  std::string short9 = body8;
  short9[4] = 9;
  EXPECT_EQ(DecodeGlobalState(WithCrc(short9)).status().code(), StatusCode::kCorruption);
  std::string short5 = body;
  short5[4] = 5;
  EXPECT_EQ(DecodeGlobalState(WithCrc(short5)).status().code(), StatusCode::kCorruption);
  std::string short4 = v3;
  short4[4] = 4;
  EXPECT_EQ(DecodeGlobalState(WithCrc(short4)).status().code(), StatusCode::kCorruption);
  EXPECT_TRUE(DecodeGlobalState(WithCrc(body5)).ok());
}

// A snapshot of version 2 to 5 holds the cluster secret in clear: it decodes to its verifier, and
// the secret is kept (not encoded) for the node's upgrade (server: the cluster-secret file).
TEST(GlobalCodec, OldSnapshotSecretBecomesAVerifier) {
  GlobalState hashed;
  GlobalState s = WithClearTokens(Populated(), "old-secret", &hashed);
  std::string body5 = EncodeGlobalState(s);
  body5 = body5.substr(
      0, body5.size() - 4 - V7Suffix(s).size() - V8Suffix(s).size() - V9Suffix(s).size());
  body5[4] = 5;
  Result<GlobalState> dec = DecodeGlobalState(WithCrc(body5));
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_TRUE(IsClusterSecret(*dec, "old-secret"));
  EXPECT_EQ(dec->legacy_cluster_secret, "old-secret");
  const std::string v6 = EncodeGlobalState(*dec);
  EXPECT_EQ(v6, EncodeGlobalState(hashed));
  EXPECT_EQ(v6.find("old-secret"), std::string::npos);
  Result<GlobalState> again = DecodeGlobalState(v6);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->legacy_cluster_secret.empty());
  EXPECT_TRUE(IsClusterSecret(*again, "old-secret"));
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

TEST(GlobalCodec, BucketAndRecoveryEventsRoundTripWithTheirFields) {
  // OneOfEach covers every event type (the flip and truncation tests above rely on it).
  std::set<size_t> types;
  for (const GlobalEvent& ev : OneOfEach()) types.insert(ev.index());
  EXPECT_EQ(types.size(), std::variant_size_v<GlobalEvent>);

  const std::vector<GlobalEvent> events = {SetBucket{"s3://bucket/prefix at http://127.0.0.1:9000"},
                                           SetBucket{""},
                                           SegmentUploaded{SegmentId(1ll << 50)},
                                           SegmentUploaded{SegmentId(-3)},
                                           BeginRecovery{0xffffffffu},
                                           BeginRecovery{0}};
  for (const GlobalEvent& ev : events) {
    const std::string enc = EncodeGlobalEvent(ev);
    Result<GlobalEvent> dec = DecodeGlobalEvent(enc);
    ASSERT_TRUE(dec.ok()) << GlobalEventName(ev) << ": " << dec.status().ToString();
    ASSERT_EQ(dec->index(), ev.index());
    EXPECT_EQ(EncodeGlobalEvent(*dec), enc) << GlobalEventName(ev);
    if (const auto* b = std::get_if<SetBucket>(&ev)) {
      EXPECT_EQ(enc[3], 19);  // type tags are permanent (FORMAT.md)
      EXPECT_STREQ(GlobalEventName(ev), "SetBucket");
      EXPECT_EQ(std::get<SetBucket>(*dec).location, b->location);
    } else if (const auto* u = std::get_if<SegmentUploaded>(&ev)) {
      EXPECT_EQ(enc[3], 20);
      EXPECT_STREQ(GlobalEventName(ev), "SegmentUploaded");
      EXPECT_EQ(std::get<SegmentUploaded>(*dec).segment, u->segment);
    } else {
      EXPECT_EQ(enc[3], 21);
      EXPECT_STREQ(GlobalEventName(ev), "BeginRecovery");
      EXPECT_EQ(std::get<BeginRecovery>(*dec).generation, std::get<BeginRecovery>(ev).generation);
    }
  }
  // A BeginRecovery generation above 32 bits, with a valid CRC.
  std::string big("GE\x01\x15", 4);
  PutVarint64(&big, 1ull << 32);
  EXPECT_EQ(DecodeGlobalEvent(WithCrc(big)).status().code(), StatusCode::kCorruption);
  std::string fits("GE\x01\x15", 4);
  PutVarint64(&fits, (1ull << 32) - 1);
  EXPECT_TRUE(DecodeGlobalEvent(WithCrc(fits)).ok());
}

// Populated() with bucket storage on, segment 1 uploaded, segment 2 of generation 3, the state at
// generation 4 and a recovery report listing two lost segments.
GlobalState BucketState() {
  GlobalState s = Populated();
  EXPECT_TRUE(ApplyGlobalEvent(&s, SetBucket{"s3://bucket/prefix at http://127.0.0.1:9000"}).ok());
  EXPECT_TRUE(ApplyGlobalEvent(&s, SegmentUploaded{SegmentId(1)}).ok());
  EXPECT_TRUE(ApplyGlobalEvent(&s, BucketObjectsCollected{NodeId(2),
                                                          1'700'000'000'123,
                                                          {{"gone-1.seg", 10}, {"gone-2.seg", 20}}})
                  .ok());
  s.segments.at(SegmentId(2)).generation = 3;
  s.generation = 4;
  RecoveryReport& r = s.recovery;
  r.generation = 4;
  r.snapshot_applied_through = Offset(77);
  r.snapshot_key = BucketSnapshotKey(3, Offset(77));
  r.kept_segments = 11;
  r.kept_events = 12;
  r.kept_bytes = 13;
  r.added_segments = 14;
  r.lost_segments = 15;
  r.lost_events = 16;
  r.lost_bytes = 17;
  r.lost = {LostSegment{.datasource = Ds("web", "a").Key(),
                        .partition = PartitionId(-2),
                        .min_ts = -5,
                        .max_ts = 1ll << 40,
                        .event_count = 3,
                        .raw_bytes = 1u << 20,
                        .file_name = "lost-1.seg"},
            LostSegment{.datasource = Ds("db", "b").Key(),
                        .partition = PartitionId(2147483647),
                        .min_ts = 9,
                        .max_ts = 10,
                        .event_count = 1ull << 40,
                        .raw_bytes = 0,
                        .file_name = "lost-2.seg"}};
  return s;
}

TEST(GlobalCodec, BucketAndRecoveryStateRoundTrips) {
  const GlobalState s = BucketState();
  const std::string enc = EncodeGlobalState(s);
  // The v4 fields are laid out as FORMAT.md says, at the end of the body.
  const std::string body = enc.substr(0, enc.size() - 4);
  const std::string suffix = V4Suffix(s) + V5Suffix(s) + V7Suffix(s) + V8Suffix(s) + V9Suffix(s);
  ASSERT_GT(body.size(), suffix.size());
  EXPECT_EQ(body.substr(body.size() - suffix.size()), suffix);

  Result<GlobalState> dec = DecodeGlobalState(enc);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(EncodeGlobalState(*dec), enc);
  EXPECT_TRUE(dec->segments.at(SegmentId(1)).uploaded);
  EXPECT_EQ(dec->segments.at(SegmentId(1)).generation, 0u);
  EXPECT_FALSE(dec->segments.at(SegmentId(2)).uploaded);
  EXPECT_EQ(dec->segments.at(SegmentId(2)).generation, 3u);
  EXPECT_EQ(dec->bucket, "s3://bucket/prefix at http://127.0.0.1:9000");
  EXPECT_EQ(dec->generation, 4u);
  const RecoveryReport& r = dec->recovery;
  EXPECT_EQ(r.generation, 4u);
  EXPECT_EQ(r.snapshot_applied_through, Offset(77));
  EXPECT_EQ(r.snapshot_key, BucketSnapshotKey(3, Offset(77)));
  EXPECT_EQ(r.kept_segments, 11u);
  EXPECT_EQ(r.kept_events, 12u);
  EXPECT_EQ(r.kept_bytes, 13u);
  EXPECT_EQ(r.added_segments, 14u);
  EXPECT_EQ(r.lost_segments, 15u);
  EXPECT_EQ(r.lost_events, 16u);
  EXPECT_EQ(r.lost_bytes, 17u);
  const BucketGcReport& gc = dec->bucket_gc;
  EXPECT_EQ(gc.records, 1u);
  EXPECT_EQ(gc.objects, 2u);
  EXPECT_EQ(gc.bytes, 30u);
  EXPECT_EQ(gc.last_node, NodeId(2));
  EXPECT_EQ(gc.last_ms, 1'700'000'000'123);
  EXPECT_EQ(gc.last_files, (std::vector<std::string>{"gone-1.seg", "gone-2.seg"}));
  ASSERT_EQ(r.lost.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const LostSegment& want = s.recovery.lost[i];
    const LostSegment& got = r.lost[i];
    EXPECT_EQ(got.datasource, want.datasource);
    EXPECT_EQ(got.partition, want.partition);
    EXPECT_EQ(got.min_ts, want.min_ts);
    EXPECT_EQ(got.max_ts, want.max_ts);
    EXPECT_EQ(got.event_count, want.event_count);
    EXPECT_EQ(got.raw_bytes, want.raw_bytes);
    EXPECT_EQ(got.file_name, want.file_name);
  }
}

TEST(GlobalCodec, UploadedFlagOtherThanZeroOrOneIsCorruption) {
  const GlobalState s = BucketState();
  const std::string enc = EncodeGlobalState(s);
  const std::string body = enc.substr(0, enc.size() - 4);
  // The first byte of the v4 suffix is segment 1's uploaded flag (1).
  const size_t flag = body.size() - V4Suffix(s).size() - V5Suffix(s).size() - V7Suffix(s).size() -
                      V8Suffix(s).size() - V9Suffix(s).size();
  ASSERT_EQ(body[flag], 1);
  std::string bad = body;
  bad[flag] = 2;
  Result<GlobalState> dec = DecodeGlobalState(WithCrc(bad));
  EXPECT_EQ(dec.status().code(), StatusCode::kCorruption) << dec.status().ToString();
  // 0 at the same place is fine: the byte located is the flag.
  std::string zero = body;
  zero[flag] = 0;
  dec = DecodeGlobalState(WithCrc(zero));
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_FALSE(dec->segments.at(SegmentId(1)).uploaded);
}

TEST(GlobalCodec, BucketKeys) {
  EXPECT_EQ(BucketSegmentKey("p3-000001.seg"), "segments/p3-000001.seg");
  EXPECT_EQ(BucketSnapshotKey(3, Offset(42)), "global/g0000000003-00000000000000000042.snap");
  EXPECT_EQ(BucketSnapshotKey(0xffffffffu, Offset(0)),
            "global/g4294967295-00000000000000000000.snap");
  // Keys sort by (generation, offset).
  const std::vector<std::string> keys = {BucketSnapshotKey(0, Offset(9)),
                                         BucketSnapshotKey(0, Offset(10)),
                                         BucketSnapshotKey(0, Offset(123456789012)),
                                         BucketSnapshotKey(1, Offset(0)),
                                         BucketSnapshotKey(1, Offset(5)),
                                         BucketSnapshotKey(10, Offset(1))};
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  for (const auto& k : keys) EXPECT_TRUE(k.starts_with(kBucketSnapshotPrefix)) << k;
}

// ---------------- apply rules ----------------

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
  // Segment 1 has 1 of 2 copies: held at its first offset (0), but never below the truncation
  // point (4): the log holds nothing below it.
  EXPECT_EQ(SafeOffset(s, PartitionId(0)), Offset(4));
  ASSERT_TRUE(ApplyGlobalEvent(&s, AddSegmentReplica{SegmentId(1), NodeId(2)}).ok());
  EXPECT_EQ(SafeOffset(s, PartitionId(0)), Offset(10));
  // A staged merge output is not durable yet, but its inputs are: it does not hold the offset.
  SegmentRecord out = Seg(Ds("web", "a"), 0, Pos(0, 0), Pos(9, 2), 1);
  out.event_count = s.segments.at(SegmentId(1)).event_count;
  ASSERT_TRUE(ApplyGlobalEvent(&s, StageMerge{out, {SegmentId(1)}}).ok());
  EXPECT_EQ(SafeOffset(s, PartitionId(0)), Offset(10));
}

TEST(GlobalApply, LogFloorIsAboveEveryRecordedOffset) {
  GlobalState s = Populated();  // partition 0: flushed through 9/2, replay point 10, truncated 4
  EXPECT_EQ(LogFloor(s, PartitionId(0)), Offset(10));
  EXPECT_EQ(LogFloor(s, PartitionId(5)), Offset(5));
  EXPECT_EQ(LogFloor(s, PartitionId(42)), Offset(0));  // never claimed
  // Another datasource flushed further than the replay point (which waits for web/a's buffer).
  ASSERT_TRUE(ApplyGlobalEvent(
                  &s, RegisterSegment{Seg(Ds("db", "b"), 0, Pos(20, 0), Pos(25, 3), 1), Offset(10)})
                  .ok());
  EXPECT_EQ(LogFloor(s, PartitionId(0)), Offset(26));
  s.partitions[0].truncated_before = Offset(40);
  EXPECT_EQ(LogFloor(s, PartitionId(0)), Offset(40));
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

TEST(GlobalApply, LookupFiles) {
  GlobalState s = Populated();
  ExpectRejected(&s, PutLookupFile{"nope", "a.csv", "x\n"});
  for (const std::string& bad :
       std::vector<std::string>{"", ".", "..", "a/b.csv", "a\\b", "a\nb", "a\x7f",
                                std::string(kMaxLookupFileNameBytes + 1, 'f')}) {
    ExpectRejected(&s, PutLookupFile{"web", bad, "x\n"});
  }
  ExpectRejected(&s, DeleteLookupFile{"web", "a.csv"});
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutLookupFile{"web", "a.csv", "userid,name\n1,chr\n"}).ok());
  ASSERT_TRUE(
      ApplyGlobalEvent(&s, PutLookupFile{"web", std::string(kMaxLookupFileNameBytes, 'f'), ""})
          .ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutLookupFile{"db", "a.csv", "{}"}).ok());
  // A second upload replaces the content; files are per repository.
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutLookupFile{"web", "a.csv", "userid,name\n2,krab\n"}).ok());
  EXPECT_EQ(s.repos.at("web").lookup_files.at("a.csv"), "userid,name\n2,krab\n");
  EXPECT_EQ(s.repos.at("web").lookup_files.size(), 2u);
  EXPECT_EQ(s.repos.at("db").lookup_files.at("a.csv"), "{}");
  ExpectRejected(&s, DeleteLookupFile{"nope", "a.csv"});
  ASSERT_TRUE(ApplyGlobalEvent(&s, DeleteLookupFile{"web", "a.csv"}).ok());
  ExpectRejected(&s, DeleteLookupFile{"web", "a.csv"});
  EXPECT_EQ(s.repos.at("web").lookup_files.count("a.csv"), 0u);
  EXPECT_EQ(s.repos.at("db").lookup_files.size(), 1u);
  // The files are in the snapshot (v7) and come back from it.
  const std::string enc = EncodeGlobalState(s);
  Result<GlobalState> dec = DecodeGlobalState(enc);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(dec->repos.at("db").lookup_files, s.repos.at("db").lookup_files);
  EXPECT_EQ(dec->repos.at("web").lookup_files, s.repos.at("web").lookup_files);
  EXPECT_EQ(EncodeGlobalState(*dec), enc);
  std::string body = enc.substr(0, enc.size() - 4 - V8Suffix(s).size() - V9Suffix(s).size());
  EXPECT_EQ(body.substr(body.size() - V7Suffix(s).size()), V7Suffix(s));
}

TEST(GlobalApply, Parsers) {
  GlobalState s = Populated();
  const ParserDef web{"kvParse() | status := code", {"host"}};
  ExpectRejected(&s, PutParser{"nope", "p", web});
  for (const std::string& bad :
       std::vector<std::string>{"", ".", "..", "a/b", "a b", "a\nb", std::string(101, 'p')}) {
    ExpectRejected(&s, PutParser{"web", bad, web});
  }
  ExpectRejected(&s, DeleteParser{"web", "p"});
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutParser{"web", "p", web}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutParser{"web", "q.v-2_x", {"parseJson()", {}}}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutParser{"db", "p", {"none()", {}}}).ok());
  // A second put replaces; parsers are per repository.
  const ParserDef web2{"kvParse()", {"a", "b"}};
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutParser{"web", "p", web2}).ok());
  EXPECT_EQ(s.repos.at("web").parsers.at("p"), web2);
  EXPECT_EQ(s.repos.at("web").parsers.size(), 2u);
  EXPECT_EQ(s.repos.at("db").parsers.at("p").script, "none()");
  ExpectRejected(&s, DeleteParser{"nope", "p"});
  ASSERT_TRUE(ApplyGlobalEvent(&s, DeleteParser{"web", "q.v-2_x"}).ok());
  ExpectRejected(&s, DeleteParser{"web", "q.v-2_x"});
  EXPECT_EQ(s.repos.at("web").parsers.size(), 1u);
  // The parsers survive a snapshot round trip (v8), with the documented suffix.
  const std::string enc = EncodeGlobalState(s);
  ASSERT_EQ(enc[4], 9);
  Result<GlobalState> dec = DecodeGlobalState(enc);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(dec->repos.at("web").parsers, s.repos.at("web").parsers);
  EXPECT_EQ(dec->repos.at("db").parsers, s.repos.at("db").parsers);
  EXPECT_EQ(EncodeGlobalState(*dec), enc);
  std::string body = enc.substr(0, enc.size() - 4 - V9Suffix(s).size());
  EXPECT_EQ(body.substr(body.size() - V8Suffix(s).size()), V8Suffix(s));
  // A snapshot whose parser name is not valid is corrupt.
  GlobalState bad = s;
  bad.repos.at("web").parsers.emplace("a/b", web);
  EXPECT_EQ(DecodeGlobalState(EncodeGlobalState(bad)).status().code(), StatusCode::kCorruption);
}

TEST(GlobalCodec, ParserEventsHaveTheDocumentedBytes) {
  // FORMAT.md: type 25 = str repo, str name, str script, varint n, n x str tag field; type 26 =
  // str repo, str name; version 1.
  std::string put = "GE";
  put.push_back(1);
  put.push_back(25);
  PutLengthPrefixed(&put, "web");
  PutLengthPrefixed(&put, "p");
  PutLengthPrefixed(&put, "kvParse()");
  PutVarint64(&put, 2);
  PutLengthPrefixed(&put, "host");
  PutLengthPrefixed(&put, "env");
  const PutParser ev{"web", "p", {"kvParse()", {"host", "env"}}};
  EXPECT_EQ(EncodeGlobalEvent(ev), WithCrc(put));
  std::string del = "GE";
  del.push_back(1);
  del.push_back(26);
  PutLengthPrefixed(&del, "web");
  PutLengthPrefixed(&del, "p");
  EXPECT_EQ(EncodeGlobalEvent(DeleteParser{"web", "p"}), WithCrc(del));
  Result<GlobalEvent> dec = DecodeGlobalEvent(WithCrc(put));
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  const PutParser& got = std::get<PutParser>(*dec);
  EXPECT_EQ(got.repo, "web");
  EXPECT_EQ(got.name, "p");
  EXPECT_EQ(got.parser, ev.parser);
  dec = DecodeGlobalEvent(WithCrc(del));
  ASSERT_TRUE(dec.ok());
  EXPECT_EQ(std::get<DeleteParser>(*dec).name, "p");
  // A tag-field count beyond the bytes is corrupt.
  std::string lying = put.substr(0, put.size() - 10);
  PutVarint64(&lying, 1000);
  EXPECT_EQ(DecodeGlobalEvent(WithCrc(lying)).status().code(), StatusCode::kCorruption);
}

TEST(GlobalCodec, LookupFileEventsHaveTheDocumentedBytes) {
  // FORMAT.md: type 23 = str repo, str name, str content; type 24 = str repo, str name; version 1.
  std::string put = "GE";
  put.push_back(1);
  put.push_back(23);
  PutLengthPrefixed(&put, "web");
  PutLengthPrefixed(&put, "u.csv");
  PutLengthPrefixed(&put, "a,b\n");
  EXPECT_EQ(EncodeGlobalEvent(PutLookupFile{"web", "u.csv", "a,b\n"}), WithCrc(put));
  std::string del = "GE";
  del.push_back(1);
  del.push_back(24);
  PutLengthPrefixed(&del, "web");
  PutLengthPrefixed(&del, "u.csv");
  EXPECT_EQ(EncodeGlobalEvent(DeleteLookupFile{"web", "u.csv"}), WithCrc(del));
  Result<GlobalEvent> dec = DecodeGlobalEvent(WithCrc(put));
  ASSERT_TRUE(dec.ok());
  EXPECT_EQ(std::get<PutLookupFile>(*dec).content, "a,b\n");
}

TEST(GlobalCodec, SnapshotLookupFileNamesAreCheckedAndOrdered) {
  GlobalState s = Populated();
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutLookupFile{"web", "a.csv", "1"}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutLookupFile{"web", "b.csv", "2"}).ok());
  const std::string enc = EncodeGlobalState(s);
  std::string body = enc.substr(0, enc.size() - 4);
  // Swap the two names: out of order. Rename one to "a/b.csv"'s length twin "a/csv": invalid.
  std::string swapped = body;
  const size_t a = swapped.rfind("a.csv"), b = swapped.rfind("b.csv");
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(b, std::string::npos);
  swapped[a] = 'b';
  swapped[b] = 'a';
  EXPECT_EQ(DecodeGlobalState(WithCrc(swapped)).status().code(), StatusCode::kCorruption);
  std::string invalid = body;
  invalid[a + 1] = '/';
  EXPECT_EQ(DecodeGlobalState(WithCrc(invalid)).status().code(), StatusCode::kCorruption);
  EXPECT_TRUE(DecodeGlobalState(WithCrc(body)).ok());
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
  ExpectRejected(&s, SetClusterSecret{"", ""});
  ExpectRejected(&s, SetClusterSecret{"one", ""});  // not a hash
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetClusterSecret{HashToken("one"), ""}).ok());
  ExpectRejected(&s, SetClusterSecret{HashToken("two"), ""});
  ExpectRejected(&s, SetClusterSecret{"", "two"});
  EXPECT_TRUE(IsClusterSecret(s, "one"));
  EXPECT_FALSE(IsClusterSecret(s, "two"));
  EXPECT_FALSE(IsClusterSecret(s, ""));
  EXPECT_TRUE(s.legacy_cluster_secret.empty());
}

TEST(GlobalApply, ClusterIdIsSetOnce) {
  GlobalState s;
  ExpectRejected(&s, SetClusterId{""});
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetClusterId{"abc"}).ok());
  EXPECT_EQ(s.cluster_id, "abc");
  ExpectRejected(&s, SetClusterId{"other"});
  ExpectRejected(&s, SetClusterId{"abc"});
}

// ---------------- management: repositories, named tokens, permissions ----------------

// A version-8 snapshot written by the release before named tokens (the encoder of that release,
// not this one): repositories web (retention 1 h / 1 MB, lookup file users.csv, ingest token
// "ingest-web") and db (parser kvp, ingest token "ingest-db"), API token "api-admin", cluster
// secret "secret", applied through 41. Hashes with the fixed salts 'a' x16, 'b' x16, 'c' x16 and
// 'd' x16.
constexpr const char* kV8SnapshotHex =
    "47534e50085202633802026462000130626262626262626262626262626262623a1c4de3dcdaba05dd201b95"
    "faed02c4cf6af6ea2cc635738394bc5c4707f5b70377656280bab70301306161616161616161616161616161"
    "61617527eb9209c49fedb740c6825c33747fc57ce5bb769bb19496e79d3c8085529302306161616161616161"
    "61616161616161617527eb9209c49fedb740c6825c33747fc57ce5bb769bb19496e79d3c8085529303776562"
    "30626262626262626262626262626262623a1c4de3dcdaba05dd201b95faed02c4cf6af6ea2cc635738394bc"
    "5c4707f5b70264620130636363636363636363636363636363632474da13ebf8009a1f6e8fb450b5249d7c31"
    "c6e8d74568b34031d46d097a1b5b000200003064646464646464646464646464646464f35933a26abc43d91c"
    "cb4afdc699eacdfcb25f000be8ab8a0307fa84c9dbe4a400c0843d0000000000010000000000000000000000"
    "0000000000010975736572732e6373760c69642c6e616d650a312c610a01036b7670096b7650617273652829"
    "0104686f737400b3fd3e31";

std::string FromHex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

TEST(GlobalCodec, VersionEightSnapshotOfThePreviousReleaseIsRead) {
  const std::string v8 = FromHex(kV8SnapshotHex);
  ASSERT_EQ(v8[4], 8);
  Result<GlobalState> dec = DecodeGlobalState(v8);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(dec->applied_through, Offset(41));
  EXPECT_EQ(dec->cluster_id, "c8");
  ASSERT_EQ(dec->repos.size(), 2u);
  EXPECT_EQ(dec->repos.at("web").retention_ms, 3600000);
  EXPECT_EQ(dec->repos.at("web").retention_bytes, 1000000u);
  EXPECT_EQ(dec->repos.at("web").lookup_files.at("users.csv"), "id,name\n1,a\n");
  EXPECT_EQ(dec->repos.at("db").parsers.at("kvp").script, "kvParse()");
  EXPECT_EQ(IngestRepoForToken(*dec, "ingest-web"), "web");
  EXPECT_EQ(IngestRepoForToken(*dec, "ingest-db"), "db");
  EXPECT_TRUE(IsClusterSecret(*dec, "secret"));
  // The --api-token token of then is an admin now; nothing is named, no creation time is known.
  auto admin = ApiPrincipalForToken(*dec, "api-admin");
  ASSERT_TRUE(admin.has_value());
  EXPECT_TRUE(admin->admin);
  EXPECT_EQ(admin->name, kStartupTokenName);
  EXPECT_TRUE(dec->api_tokens.empty());
  for (const auto& [name, repo] : dec->repos) {
    EXPECT_EQ(repo.created_ms, 0);
    EXPECT_TRUE(repo.ingest_tokens.empty());
  }
  // Written back as version 9: the v8 bytes plus the (empty) v9 suffix.
  const std::string v9 = EncodeGlobalState(*dec);
  ASSERT_EQ(v9[4], 9);
  std::string want = v8.substr(0, v8.size() - 4) + V9Suffix(*dec);
  want[4] = 9;
  EXPECT_EQ(v9, WithCrc(want));
  // And the state goes on: named tokens on the old repositories.
  GlobalState s = *dec;
  ASSERT_TRUE(
      ApplyGlobalEvent(&s, CreateIngestToken{"web", "n1", HashToken("named-web"), "kv", 5}).ok());
  EXPECT_EQ(IngestRepoForToken(s, "named-web"), "web");
  EXPECT_EQ(IngestRepoForToken(s, "ingest-web"), "web");
}

TEST(GlobalCodec, CreateRepoCreationTimeIsVersionFour) {
  const std::string plain = EncodeGlobalEvent(CreateRepo{"web"});
  EXPECT_EQ(plain[2], 1);
  const std::string timed = EncodeGlobalEvent(CreateRepo{"web", 1700000000000});
  EXPECT_EQ(timed[2], 4);
  std::string want("GE\x04\x02", 4);
  PutLengthPrefixed(&want, "web");
  PutVarsint64(&want, 1700000000000);
  EXPECT_EQ(timed, WithCrc(want));
  auto dec = DecodeGlobalEvent(timed);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(std::get<CreateRepo>(*dec).created_ms, 1700000000000);
  // Version 4 with a time of 0 is not canonical; version 4 of another type, version 3 of
  // CreateRepo, and a version-1 CreateRepo with a time (trailing bytes) are corrupt.
  std::string zero("GE\x04\x02", 4);
  PutLengthPrefixed(&zero, "web");
  PutVarsint64(&zero, 0);
  std::string v3 = want;
  v3[2] = 3;
  std::string v1 = want;
  v1[2] = 1;
  std::string other = EncodeGlobalEvent(SetReplicationFactor{2});
  other = other.substr(0, other.size() - 4);
  other[2] = 4;
  std::string api = EncodeGlobalEvent(AddApiToken{HashToken("x"), ""});
  api = api.substr(0, api.size() - 4);
  api[2] = 4;
  for (const std::string& b : {zero, v3, v1, other, api}) {
    EXPECT_EQ(DecodeGlobalEvent(WithCrc(b)).status().code(), StatusCode::kCorruption);
  }
  GlobalState s;
  ASSERT_TRUE(ApplyGlobalEvent(&s, *dec).ok());
  EXPECT_EQ(s.repos.at("web").created_ms, 1700000000000);
}

TEST(GlobalCodec, ManagementEventsHaveTheDocumentedBytes) {
  const std::string h1 = HashToken("one"), h2 = HashToken("two");
  auto framed = [](uint8_t type, const std::string& body) {
    std::string out("GE\x01", 3);
    out.push_back(static_cast<char>(type));
    return WithCrc(out + body);
  };
  std::string body;
  PutLengthPrefixed(&body, "web");
  EXPECT_EQ(EncodeGlobalEvent(DeleteRepo{"web"}), framed(27, body));
  body.clear();
  PutLengthPrefixed(&body, "web");
  PutLengthPrefixed(&body, "shipper");
  PutLengthPrefixed(&body, h1);
  PutLengthPrefixed(&body, "kv");
  PutVarsint64(&body, 1234);
  EXPECT_EQ(EncodeGlobalEvent(CreateIngestToken{"web", "shipper", h1, "kv", 1234}),
            framed(28, body));
  body.clear();
  PutLengthPrefixed(&body, "web");
  PutLengthPrefixed(&body, "shipper");
  EXPECT_EQ(EncodeGlobalEvent(RevokeIngestToken{"web", "shipper"}), framed(29, body));
  body.clear();
  PutLengthPrefixed(&body, "ci");
  PutLengthPrefixed(&body, h2);
  PutVarint64(&body, 0);
  PutVarint64(&body, 2);
  PutLengthPrefixed(&body, "db");
  PutVarint32(&body, kPermRead);
  PutLengthPrefixed(&body, "web");
  PutVarint32(&body, kPermRead | kPermManage);
  PutVarsint64(&body, 99);
  const CreateApiToken api{"ci", h2, false, {{"db", kPermRead}, {"web", 5}}, 99};
  EXPECT_EQ(EncodeGlobalEvent(api), framed(30, body));
  auto dec = DecodeGlobalEvent(framed(30, body));
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(std::get<CreateApiToken>(*dec).repos, api.repos);
  body.clear();
  PutLengthPrefixed(&body, "ci");
  EXPECT_EQ(EncodeGlobalEvent(RevokeApiToken{"ci"}), framed(31, body));
  // A hash of the wrong size, an admin flag other than 0/1 and repositories out of order are
  // corrupt.
  std::string short_hash;
  PutLengthPrefixed(&short_hash, "ci");
  PutLengthPrefixed(&short_hash, "not-a-hash");
  PutVarint64(&short_hash, 0);
  PutVarint64(&short_hash, 0);
  PutVarsint64(&short_hash, 1);
  std::string bad_admin;
  PutLengthPrefixed(&bad_admin, "ci");
  PutLengthPrefixed(&bad_admin, h2);
  PutVarint64(&bad_admin, 2);
  PutVarint64(&bad_admin, 0);
  PutVarsint64(&bad_admin, 1);
  std::string order;
  PutLengthPrefixed(&order, "ci");
  PutLengthPrefixed(&order, h2);
  PutVarint64(&order, 1);
  PutVarint64(&order, 2);
  PutLengthPrefixed(&order, "web");
  PutVarint32(&order, 1);
  PutLengthPrefixed(&order, "db");
  PutVarint32(&order, 1);
  PutVarsint64(&order, 1);
  for (const std::string& b : {short_hash, bad_admin, order}) {
    EXPECT_EQ(DecodeGlobalEvent(framed(30, b)).status().code(), StatusCode::kCorruption);
  }
}

TEST(GlobalApply, NamedIngestTokens) {
  GlobalState s = Populated();
  const std::string h = HashToken("named");
  ExpectRejected(&s, CreateIngestToken{"nope", "n", h, "", 1});
  for (const std::string& bad : std::vector<std::string>{"", ".hidden", "a b", "a/b"}) {
    ExpectRejected(&s, CreateIngestToken{"web", bad, h, "", 1});
  }
  ExpectRejected(&s, CreateIngestToken{"web", "n", "short", "", 1});
  ExpectRejected(&s, CreateIngestToken{"web", "n", h, "bad\nparser", 1});
  ExpectRejected(&s, CreateIngestToken{"web", "n", h, std::string(1025, 'p'), 1});
  // A hash already stored (the --ingest-token t1's) cannot be added again.
  ExpectRejected(
      &s,
      CreateIngestToken{"web", "n", s.repos.at("web").ingest_token_hashes.begin()->c_str(), "", 1});
  ASSERT_TRUE(ApplyGlobalEvent(&s, CreateIngestToken{"web", "n", h, "kv", 7}).ok());
  ExpectRejected(&s, CreateIngestToken{"web", "n", HashToken("other"), "", 1});  // name taken
  ASSERT_TRUE(ApplyGlobalEvent(&s, CreateIngestToken{"db", "n", HashToken("db-n"), "", 8}).ok());
  EXPECT_EQ(IngestRepoForToken(s, "named"), "web");
  auto m = IngestTokenForToken(s, "named");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->name, "n");
  EXPECT_EQ(m->parser, "kv");
  auto flag = IngestTokenForToken(s, "t1");
  ASSERT_TRUE(flag.has_value());
  EXPECT_EQ(flag->repo, "web");
  EXPECT_TRUE(flag->name.empty());
  // Snapshot round trip (v9) with the documented suffix.
  const std::string enc = EncodeGlobalState(s);
  auto dec = DecodeGlobalState(enc);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(dec->repos.at("web").ingest_tokens, s.repos.at("web").ingest_tokens);
  EXPECT_EQ(EncodeGlobalState(*dec), enc);
  EXPECT_EQ(enc.substr(enc.size() - 4 - V9Suffix(s).size(), V9Suffix(s).size()), V9Suffix(s));
  // A named token whose hash is not in the index is corrupt.
  GlobalState bad = s;
  bad.repos.at("db").ingest_tokens.emplace("stray", IngestTokenInfo{HashToken("stray"), "", 0});
  EXPECT_EQ(DecodeGlobalState(EncodeGlobalState(bad)).status().code(), StatusCode::kCorruption);
  // Revocation removes it from every index; the flag tokens stay.
  ExpectRejected(&s, RevokeIngestToken{"web", "missing"});
  ExpectRejected(&s, RevokeIngestToken{"nope", "n"});
  ASSERT_TRUE(ApplyGlobalEvent(&s, RevokeIngestToken{"web", "n"}).ok());
  EXPECT_EQ(IngestRepoForToken(s, "named"), std::nullopt);
  EXPECT_EQ(s.ingest_token_hashes.count(h), 0u);
  EXPECT_EQ(s.repos.at("web").ingest_token_hashes.count(h), 0u);
  EXPECT_EQ(IngestRepoForToken(s, "t1"), "web");
  EXPECT_EQ(IngestRepoForToken(s, "db-n"), "db");
}

TEST(GlobalApply, NamedApiTokensAndPermissions) {
  GlobalState s = Populated();
  const std::string h = HashToken("reader");
  ExpectRejected(&s, CreateApiToken{"r", h, false, {{"nope", kPermRead}}, 1});  // unknown repo
  ExpectRejected(&s, CreateApiToken{"r", h, false, {{"web", 0}}, 1});
  ExpectRejected(&s, CreateApiToken{"r", h, false, {{"web", 8}}, 1});
  ExpectRejected(&s, CreateApiToken{"", h, false, {}, 1});
  ExpectRejected(&s, CreateApiToken{kStartupTokenName, h, true, {}, 1});
  ExpectRejected(&s, CreateApiToken{"r", "x", false, {}, 1});
  ExpectRejected(&s, CreateApiToken{"r", *s.api_token_hashes.begin(), false, {}, 1});
  ASSERT_TRUE(ApplyGlobalEvent(&s, CreateApiToken{"r", h, false, {{"web", kPermRead}}, 3}).ok());
  ExpectRejected(&s, CreateApiToken{"r", HashToken("x"), false, {}, 1});  // name taken
  ExpectRejected(&s, CreateIngestToken{"web", "i", h, "", 1});            // an API token's hash
  ASSERT_TRUE(ApplyGlobalEvent(&s, CreateApiToken{"boss", HashToken("boss"), true, {}, 4}).ok());
  auto r = ApiPrincipalForToken(s, "reader");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->name, "r");
  EXPECT_FALSE(r->admin);
  EXPECT_EQ(r->On("web"), kPermRead);
  EXPECT_EQ(r->On("db"), 0u);
  auto boss = ApiPrincipalForToken(s, "boss");
  ASSERT_TRUE(boss.has_value());
  EXPECT_EQ(boss->On("anything"), kPermAll);
  auto startup = ApiPrincipalForToken(s, "a1");
  ASSERT_TRUE(startup.has_value());
  EXPECT_TRUE(startup->admin);
  EXPECT_FALSE(ApiPrincipalForToken(s, "t1").has_value());
  // Snapshot round trip.
  const std::string enc = EncodeGlobalState(s);
  auto dec = DecodeGlobalState(enc);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(dec->api_tokens, s.api_tokens);
  EXPECT_EQ(EncodeGlobalState(*dec), enc);
  // Deleting a repository takes its permissions away (a new repository of the same name starts
  // with none); revoking removes the token.
  ASSERT_TRUE(ApplyGlobalEvent(&s, DeleteRepo{"web"}).ok());
  EXPECT_TRUE(s.api_tokens.at("r").repos.empty());
  ExpectRejected(&s, RevokeApiToken{"missing"});
  ASSERT_TRUE(ApplyGlobalEvent(&s, RevokeApiToken{"r"}).ok());
  EXPECT_FALSE(ApiPrincipalForToken(s, "reader").has_value());
  EXPECT_TRUE(ApiPrincipalForToken(s, "boss").has_value());
}

TEST(GlobalApply, DeleteRepoRemovesItsTokensAndSegments) {
  GlobalState s = Populated();
  ASSERT_TRUE(ApplyGlobalEvent(&s, CreateIngestToken{"web", "n", HashToken("named"), "", 1}).ok());
  ExpectRejected(&s, DeleteRepo{"nope"});
  const size_t segments = s.segments.size();
  size_t web_segments = 0;
  for (const auto& [id, seg] : s.segments) web_segments += seg.datasource.repo == "web" ? 1 : 0;
  ASSERT_GT(web_segments, 0u);
  ASSERT_TRUE(ApplyGlobalEvent(&s, DeleteRepo{"web"}).ok());
  EXPECT_EQ(s.repos.count("web"), 0u);
  EXPECT_EQ(IngestRepoForToken(s, "t1"), std::nullopt);
  EXPECT_EQ(IngestRepoForToken(s, "named"), std::nullopt);
  EXPECT_EQ(IngestRepoForToken(s, "t3"), "db");
  EXPECT_EQ(s.segments.size(), segments - web_segments);
  for (const auto& [id, seg] : s.segments) EXPECT_NE(seg.datasource.repo, "web");
  for (const auto& [hash, repo] : s.ingest_token_hashes) EXPECT_NE(repo, "web");
  ExpectRejected(&s, DeleteRepo{"web"});
  // Created again: empty, no tokens.
  ASSERT_TRUE(ApplyGlobalEvent(&s, CreateRepo{"web", 9}).ok());
  EXPECT_TRUE(s.repos.at("web").ingest_token_hashes.empty());
  EXPECT_EQ(IngestRepoForToken(s, "t1"), std::nullopt);
}

TEST(Global, TokenLookupForgetsRevokedTokensAtOnce) {
  MemLog log;
  TempDir dir;
  auto g = Global::Open(Env::Default(), &log, dir.path());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  TokenLookup lookup(g->get());
  ASSERT_TRUE((*g)->Submit(CreateRepo{"web", 1}).ok());
  ASSERT_TRUE((*g)->Submit(CreateRepo{"db", 1}).ok());
  ASSERT_TRUE((*g)->Submit(CreateIngestToken{"web", "i", HashToken("ingest"), "kv", 1}).ok());
  ASSERT_TRUE(
      (*g)->Submit(CreateApiToken{"r", HashToken("reader"), false, {{"web", kPermRead}}, 1}).ok());
  for (int i = 0; i < 2; ++i) {  // the second time from the cache
    EXPECT_EQ(lookup.IngestRepo("ingest"), "web");
    auto m = lookup.Ingest("ingest");
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->parser, "kv");
    auto p = lookup.Api("reader");
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->On("web"), kPermRead);
  }
  ASSERT_TRUE((*g)->Submit(RevokeIngestToken{"web", "i"}).ok());
  ASSERT_TRUE((*g)->Submit(RevokeApiToken{"r"}).ok());
  EXPECT_EQ(lookup.IngestRepo("ingest"), std::nullopt);
  EXPECT_FALSE(lookup.IsApiToken("reader"));
  // A new token of the same name with another secret: the old secret stays refused, the new one
  // is found.
  ASSERT_TRUE(
      (*g)->Submit(CreateApiToken{"r", HashToken("reader-2"), false, {{"db", kPermRead}}, 1}).ok());
  EXPECT_FALSE(lookup.IsApiToken("reader"));
  auto p2 = lookup.Api("reader-2");
  ASSERT_TRUE(p2.has_value());
  EXPECT_EQ(p2->On("db"), kPermRead);
  EXPECT_EQ(p2->On("web"), 0u);
  // A repository deleted: its tokens stop at once too.
  ASSERT_TRUE((*g)->Submit(CreateIngestToken{"db", "i", HashToken("db-ingest"), "", 1}).ok());
  EXPECT_EQ(lookup.IngestRepo("db-ingest"), "db");
  ASSERT_TRUE((*g)->Submit(DeleteRepo{"db"}).ok());
  EXPECT_EQ(lookup.IngestRepo("db-ingest"), std::nullopt);
  auto p3 = lookup.Api("reader-2");
  ASSERT_TRUE(p3.has_value());
  EXPECT_EQ(p3->On("db"), 0u);
}

TEST(GlobalApply, RepoAndTokenRules) {
  GlobalState s;
  const std::string t = HashToken("t");
  ExpectRejected(&s, AddIngestToken{"web", t, ""});  // unknown repo
  ASSERT_TRUE(ApplyGlobalEvent(&s, CreateRepo{"web"}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, CreateRepo{"db"}).ok());
  ExpectRejected(&s, CreateRepo{"web"});
  ExpectRejected(&s, CreateRepo{""});
  ASSERT_TRUE(ApplyGlobalEvent(&s, AddIngestToken{"web", t, ""}).ok());
  ExpectRejected(&s, AddIngestToken{"web", t, ""});  // the same hash
  ExpectRejected(&s, AddIngestToken{"db", t, ""});   // a hash maps to one repo
  ExpectRejected(&s, AddIngestToken{"db", "", ""});
  ExpectRejected(&s, AddIngestToken{"db", "t", ""});  // not a hash
  EXPECT_EQ(s.ingest_token_hashes.at(t), "web");
  EXPECT_EQ(s.repos.at("web").ingest_token_hashes.count(t), 1u);
  EXPECT_TRUE(s.repos.at("db").ingest_token_hashes.empty());
  EXPECT_EQ(IngestRepoForToken(s, "t"), "web");
  EXPECT_EQ(IngestRepoForToken(s, "u"), std::nullopt);
  EXPECT_EQ(IngestRepoForToken(s, ""), std::nullopt);
  const std::string a = HashToken("a");
  ASSERT_TRUE(ApplyGlobalEvent(&s, AddApiToken{a, ""}).ok());
  ExpectRejected(&s, AddApiToken{a, ""});
  ExpectRejected(&s, AddApiToken{"", ""});
  ExpectRejected(&s, AddApiToken{"a", ""});
  EXPECT_EQ(s.api_token_hashes, std::set<std::string>{a});
  EXPECT_TRUE(IsApiToken(s, "a"));
  EXPECT_FALSE(IsApiToken(s, "t"));
  // The same token hashed again (another salt) is a different hash: the rule cannot tell, the
  // server checks before it submits (Bootstrap). Lookups still find it.
  ASSERT_TRUE(ApplyGlobalEvent(&s, AddApiToken{HashToken("a"), ""}).ok());
  EXPECT_TRUE(IsApiToken(s, "a"));
}

// Records written when tokens were kept in clear (event versions 1 and 2) still decode, encode
// back to their own bytes, and are hashed when applied, with the same rules as then.
TEST(GlobalApply, LegacyClearTokenRecordsAreHashedOnApply) {
  GlobalState s;
  ASSERT_TRUE(ApplyGlobalEvent(&s, CreateRepo{"web"}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, CreateRepo{"db"}).ok());
  // The bytes a node of the previous release wrote (FORMAT.md: types 3, 4 and 10, version 1).
  std::string ingest("GE\x01\x03", 4);
  PutLengthPrefixed(&ingest, "web");
  PutLengthPrefixed(&ingest, "old-ingest");
  ingest = WithCrc(ingest);
  std::string api("GE\x01\x04", 4);
  PutLengthPrefixed(&api, "old-api");
  api = WithCrc(api);
  std::string secret("GE\x01\x0a", 4);
  PutLengthPrefixed(&secret, "old-secret");
  secret = WithCrc(secret);
  for (const std::string* rec : {&ingest, &api, &secret}) {
    Result<GlobalEvent> dec = DecodeGlobalEvent(*rec);
    ASSERT_TRUE(dec.ok()) << dec.status().ToString();
    EXPECT_EQ(EncodeGlobalEvent(*dec), *rec) << GlobalEventName(*dec);
    ASSERT_TRUE(ApplyGlobalEvent(&s, *dec).ok()) << GlobalEventName(*dec);
    // Applied once more (or the same clear token for another repository): rejected as then.
    ExpectRejected(&s, *dec);
  }
  ExpectRejected(&s, AddIngestToken{"db", "", "old-ingest"});
  EXPECT_EQ(IngestRepoForToken(s, "old-ingest"), "web");
  EXPECT_TRUE(IsApiToken(s, "old-api"));
  EXPECT_TRUE(IsClusterSecret(s, "old-secret"));
  EXPECT_EQ(s.legacy_cluster_secret, "old-secret");
  // Every node reaches the same state from the same records (the legacy salt is derived).
  EXPECT_EQ(s.ingest_token_hashes.begin()->first, LegacyTokenHash("old-ingest"));
  const std::string enc = EncodeGlobalState(s);
  for (const char* clear : {"old-ingest", "old-api", "old-secret"}) {
    EXPECT_EQ(enc.find(clear), std::string::npos) << clear;
  }
  // A version-3 record must carry a hash; another type is never version 3.
  std::string short_hash("GE\x03\x04", 4);
  PutLengthPrefixed(&short_hash, "old-api");
  EXPECT_EQ(DecodeGlobalEvent(WithCrc(short_hash)).status().code(), StatusCode::kCorruption);
  std::string repo_v3("GE\x03\x02", 4);
  PutLengthPrefixed(&repo_v3, "web");
  EXPECT_EQ(DecodeGlobalEvent(WithCrc(repo_v3)).status().code(), StatusCode::kCorruption);
  const std::string hashed = EncodeGlobalEvent(AddApiToken{HashToken("new"), ""});
  EXPECT_EQ(hashed[2], 3);
  EXPECT_EQ(hashed.find("new"), std::string::npos);
}

TEST(GlobalTokens, HashesAreSaltedAndCompared) {
  const std::string h1 = HashToken("secret");
  const std::string h2 = HashToken("secret");
  EXPECT_EQ(h1.size(), kTokenHashBytes);
  EXPECT_NE(h1, h2);  // a fresh salt each time
  EXPECT_TRUE(TokenMatches(h1, "secret"));
  EXPECT_TRUE(TokenMatches(h2, "secret"));
  EXPECT_FALSE(TokenMatches(h1, "secreT"));
  EXPECT_FALSE(TokenMatches(h1, ""));
  EXPECT_FALSE(TokenMatches(h1.substr(1), "secret"));
  EXPECT_EQ(h1.find("secret"), std::string::npos);
  EXPECT_EQ(HashTokenWithSalt(h1.substr(0, kTokenSaltBytes), "secret"), h1);
  EXPECT_EQ(LegacyTokenHash("secret"), LegacyTokenHash("secret"));
  EXPECT_NE(LegacyTokenHash("secret"), LegacyTokenHash("secret2"));
  EXPECT_TRUE(TokenMatches(LegacyTokenHash("secret"), "secret"));
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
  ExpectRejected(&s, SetTruncationPoint{PartitionId(0), Epoch(1), Offset(5)});
  ASSERT_TRUE(ApplyGlobalEvent(&s, ClaimPartition{PartitionId(0), NodeId(1), Epoch(0)}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, AdvanceReplayPoint{PartitionId(0), Epoch(1), Offset(10)}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetTruncationPoint{PartitionId(0), Epoch(1), Offset(5)}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetTruncationPoint{PartitionId(0), Epoch(1), Offset(2)}).ok());
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

TEST(GlobalApply, SetBucketAndSegmentUploaded) {
  GlobalState s = Populated();
  ExpectRejected(&s, SetBucket{""});
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetBucket{"s3://a/p at http://127.0.0.1:9000"}).ok());
  EXPECT_EQ(s.bucket, "s3://a/p at http://127.0.0.1:9000");
  ExpectRejected(&s, SetBucket{"s3://a/p at http://127.0.0.1:9000"});  // unchanged
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetBucket{"s3://b/q at http://127.0.0.1:9001"}).ok());
  EXPECT_EQ(s.bucket, "s3://b/q at http://127.0.0.1:9001");
  ExpectRejected(&s, SetBucket{""});

  ExpectRejected(&s, SegmentUploaded{SegmentId(99)});  // unknown
  EXPECT_FALSE(s.segments.at(SegmentId(1)).uploaded);
  ASSERT_TRUE(ApplyGlobalEvent(&s, SegmentUploaded{SegmentId(1)}).ok());
  EXPECT_TRUE(s.segments.at(SegmentId(1)).uploaded);
  EXPECT_FALSE(s.segments.at(SegmentId(2)).uploaded);
  ExpectRejected(&s, SegmentUploaded{SegmentId(1)});  // already uploaded
}

TEST(GlobalCodec, BucketObjectsCollectedRoundTripsWithItsFields) {
  const BucketObjectsCollected ev{
      NodeId(4), 1'700'000'000'000, {{"a.seg", 1}, {"b.seg", 1ull << 40}}};
  const std::string enc = EncodeGlobalEvent(ev);
  EXPECT_EQ(enc[3], 22);  // type tags are permanent (FORMAT.md)
  EXPECT_STREQ(GlobalEventName(ev), "BucketObjectsCollected");
  // The body as FORMAT.md lays it out, written independently of the encoder.
  std::string want("GE\x01\x16", 4);
  PutVarsint64(&want, 4);
  PutVarsint64(&want, 1'700'000'000'000);
  PutVarint64(&want, 2);
  PutLengthPrefixed(&want, "a.seg");
  PutVarint64(&want, 1);
  PutLengthPrefixed(&want, "b.seg");
  PutVarint64(&want, 1ull << 40);
  EXPECT_EQ(enc, WithCrc(want));
  Result<GlobalEvent> dec = DecodeGlobalEvent(enc);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  const auto& got = std::get<BucketObjectsCollected>(*dec);
  EXPECT_EQ(got.node, NodeId(4));
  EXPECT_EQ(got.at_ms, 1'700'000'000'000);
  ASSERT_EQ(got.files.size(), 2u);
  EXPECT_EQ(got.files[1].file_name, "b.seg");
  EXPECT_EQ(got.files[1].size, 1ull << 40);
  // A count larger than the bytes left is Corruption, not an allocation.
  std::string huge("GE\x01\x16", 4);
  PutVarsint64(&huge, 4);
  PutVarsint64(&huge, 0);
  PutVarint64(&huge, 1ull << 60);
  EXPECT_EQ(DecodeGlobalEvent(WithCrc(huge)).status().code(), StatusCode::kCorruption);
}

TEST(GlobalApply, BucketObjectsCollectedNeverNamesAReferencedFile) {
  GlobalState s = Populated();
  const std::string referenced = s.segments.at(SegmentId(2)).file_name;
  ASSERT_FALSE(referenced.empty());
  // Bucket storage off: nothing to collect.
  ExpectRejected(&s, BucketObjectsCollected{NodeId(1), 5, {{"gone.seg", 3}}});
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetBucket{"s3://a/p at http://127.0.0.1:9000"}).ok());
  ExpectRejected(&s, BucketObjectsCollected{NodeId(1), 5, {}});
  ExpectRejected(&s, BucketObjectsCollected{NodeId(1), 5, {{"", 3}}});
  // One referenced name rejects the whole record (the collector decides again from a newer
  // state), whether the segment is uploaded or not, committed or staged.
  ExpectRejected(&s, BucketObjectsCollected{NodeId(1), 5, {{"gone.seg", 3}, {referenced, 9}}});
  ASSERT_TRUE(ApplyGlobalEvent(&s, SegmentUploaded{SegmentId(2)}).ok());
  ExpectRejected(&s, BucketObjectsCollected{NodeId(1), 5, {{referenced, 9}}});
  SegmentRecord out = s.segments.at(SegmentId(1));
  out.file_name = "m-staged.seg";
  ASSERT_TRUE(ApplyGlobalEvent(&s, StageMerge{out, {SegmentId(1)}}).ok());
  ExpectRejected(&s, BucketObjectsCollected{NodeId(1), 5, {{"m-staged.seg", 9}}});

  ASSERT_TRUE(ApplyGlobalEvent(&s, BucketObjectsCollected{NodeId(2), 7, {{"gone.seg", 3}}}).ok());
  ASSERT_TRUE(
      ApplyGlobalEvent(&s, BucketObjectsCollected{NodeId(3), 8, {{"x.seg", 4}, {"y.seg", 5}}})
          .ok());
  EXPECT_EQ(s.bucket_gc.records, 2u);
  EXPECT_EQ(s.bucket_gc.objects, 3u);
  EXPECT_EQ(s.bucket_gc.bytes, 12u);
  EXPECT_EQ(s.bucket_gc.last_node, NodeId(3));
  EXPECT_EQ(s.bucket_gc.last_ms, 8);
  EXPECT_EQ(s.bucket_gc.last_files, (std::vector<std::string>{"x.seg", "y.seg"}));

  // Once its segment is gone (retention, merge), a file may be collected.
  ASSERT_TRUE(ApplyGlobalEvent(&s, RemoveSegments{{SegmentId(2)}}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, BucketObjectsCollected{NodeId(2), 9, {{referenced, 9}}}).ok());

  // The listed names are bounded; the counts cover every name.
  BucketObjectsCollected many{NodeId(1), 10, {}};
  for (size_t i = 0; i < BucketGcReport::kMaxListed + 5; ++i) {
    many.files.push_back({"f-" + std::to_string(i) + ".seg", 1});
  }
  ASSERT_TRUE(ApplyGlobalEvent(&s, many).ok());
  EXPECT_EQ(s.bucket_gc.last_files.size(), BucketGcReport::kMaxListed);
  EXPECT_EQ(s.bucket_gc.objects, 4u + BucketGcReport::kMaxListed + 5);
}

TEST(GlobalApply, BeginRecoveryIsRejectedOrAbortedNeverApplied) {
  GlobalState s = Populated();
  EXPECT_FALSE(IsRecoveryMarker(s, CreateRepo{"x"}));
  ExpectRejected(&s, BeginRecovery{0});  // generation 0 >= 0
  EXPECT_FALSE(IsRecoveryMarker(s, BeginRecovery{0}));
  // Generation 1 needs the recovered state: Aborted, state unchanged.
  const std::string before = EncodeGlobalState(s);
  SegmentId assigned(-42);
  Status st = ApplyGlobalEvent(&s, BeginRecovery{1}, &assigned);
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
  EXPECT_EQ(EncodeGlobalState(s), before);
  EXPECT_EQ(assigned, SegmentId(-42));
  EXPECT_TRUE(IsRecoveryMarker(s, BeginRecovery{1}));

  s.generation = 2;  // a recovered state
  ExpectRejected(&s, BeginRecovery{1});
  ExpectRejected(&s, BeginRecovery{2});
  EXPECT_FALSE(IsRecoveryMarker(s, BeginRecovery{1}));
  EXPECT_FALSE(IsRecoveryMarker(s, BeginRecovery{2}));
  EXPECT_TRUE(IsRecoveryMarker(s, BeginRecovery{3}));
  EXPECT_TRUE(IsRecoveryMarker(s, BeginRecovery{0xffffffffu}));
  const std::string at2 = EncodeGlobalState(s);
  EXPECT_EQ(ApplyGlobalEvent(&s, BeginRecovery{3}).code(), StatusCode::kAborted);
  EXPECT_EQ(EncodeGlobalState(s), at2);
}

constexpr SegmentId kA(1), kB(2);

// Partition 0 claimed at epoch 1 (node 1) with segments kA = web/a 5..9 and kB = web/a 10..14,
// both written by node 7, replay point 15, generation 0, no nodes registered (R = 1).
GlobalState TwoSegments() {
  GlobalState s;
  const Datasource ds = Ds("web", "a");
  EXPECT_TRUE(ApplyGlobalEvent(&s, ClaimPartition{PartitionId(0), NodeId(1), Epoch(0)}).ok());
  EXPECT_TRUE(
      ApplyGlobalEvent(&s, RegisterSegment{Seg(ds, 0, Pos(5, 0), Pos(9, 0), 1), Offset(10)}).ok());
  EXPECT_TRUE(
      ApplyGlobalEvent(&s, RegisterSegment{Seg(ds, 0, Pos(10, 0), Pos(14, 0), 1), Offset(15)})
          .ok());
  EXPECT_EQ(s.segments.size(), 2u);
  return s;
}

// A zombie owner (an older claim) cannot record a truncation point, nor can any owner record one
// above the safe offset at the event's place in the log (its view of Global may lag).
TEST(GlobalApply, TruncationPointIsFencedByTheClaimEpochAndTheSafeOffset) {
  GlobalState s = TwoSegments();  // partition 0 at epoch 1 (node 1), safe offset 15
  const PartitionId p(0);
  ASSERT_TRUE(ApplyGlobalEvent(&s, ClaimPartition{p, NodeId(2), Epoch(1)}).ok());  // epoch 2
  ExpectRejected(&s, SetTruncationPoint{p, Epoch(1), Offset(10)});                 // the old owner
  ExpectRejected(&s, SetTruncationPoint{p, Epoch(3), Offset(10)});  // no such claim yet
  ExpectRejected(&s, SetTruncationPoint{p, Epoch(2), Offset(16)});  // above the safe offset
  ExpectRejected(&s, SetTruncationPoint{PartitionId(9), Epoch(2), Offset(1)});  // unknown
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetTruncationPoint{p, Epoch(2), Offset(15)}).ok());
  EXPECT_EQ(s.partitions.at(0).truncated_before, Offset(15));
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetTruncationPoint{p, Epoch(2), Offset(3)}).ok());
  EXPECT_EQ(s.partitions.at(0).truncated_before, Offset(15));  // never lowered
  // Epoch 0 (a version-1 record) is applied as it was when it was written: no checks but the
  // partition's.
  ExpectRejected(&s, SetTruncationPoint{PartitionId(9), Epoch(0), Offset(1)});
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetTruncationPoint{p, Epoch(0), Offset(20)}).ok());
  EXPECT_EQ(s.partitions.at(0).truncated_before, Offset(20));
}

// Applies `ev` (expected accepted), checks that partition 0's safe offset did not move below
// *last, then truncates as the digest does (SetTruncationPoint at the safe offset, current epoch).
void StepKeepsSafeOffset(GlobalState* s, Offset* last, const GlobalEvent& ev, const char* what,
                         SegmentId* assigned = nullptr) {
  const PartitionId p(0);
  Status st = ApplyGlobalEvent(s, ev, assigned);
  ASSERT_TRUE(st.ok()) << what << ": " << st.ToString();
  const Offset safe = SafeOffset(*s, p);
  EXPECT_GE(safe.value, last->value) << "the safe offset moved down after " << what;
  EXPECT_GE(safe.value, s->partitions.at(0).truncated_before.value) << what;
  *last = std::max(*last, safe);
  const PartitionState& ps = s->partitions.at(0);
  if (safe > ps.truncated_before) {
    st = ApplyGlobalEvent(s, SetTruncationPoint{p, ps.epoch, safe});
    ASSERT_TRUE(st.ok()) << what << ": truncating: " << st.ToString();
  }
}

// Every way a segment below the truncation point can lose durability after the digest truncated
// the log below the safe offset: the safe offset never moves down (the records below it are gone
// from the log: nothing could be rebuilt from them). A segment above it still holds it.
TEST(GlobalApply, SafeOffsetNeverMovesDownAcrossRebuildsMergesAndReplicaLoss) {
  GlobalState s = TwoSegments();  // kA = 5..9, kB = 10..14 (one copy each, node 7), replay 15
  const PartitionId p(0);
  const Datasource ds = Ds("web", "a");
  Offset last = SafeOffset(s, p);
  ASSERT_EQ(last, Offset(15));  // R = 1
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetTruncationPoint{p, Epoch(1), last}).ok());

  // A second node registers: R becomes 2, kA and kB have one copy of two.
  StepKeepsSafeOffset(&s, &last, RegisterNode{NodeId(1)}, "RegisterNode 1");
  StepKeepsSafeOffset(&s, &last, RegisterNode{NodeId(2)}, "RegisterNode 2 (R = 2)");
  StepKeepsSafeOffset(&s, &last, AddSegmentReplica{kA, NodeId(2)}, "AddSegmentReplica kA");
  StepKeepsSafeOffset(&s, &last, AddSegmentReplica{kB, NodeId(2)}, "AddSegmentReplica kB");
  SegmentId c;
  SegmentRecord seg_c = Seg(ds, 0, Pos(15, 0), Pos(19, 0), 1);
  StepKeepsSafeOffset(&s, &last, RegisterSegment{seg_c, Offset(20)}, "RegisterSegment kC", &c);
  EXPECT_EQ(SafeOffset(s, p), Offset(15));  // kC (one copy) holds it
  StepKeepsSafeOffset(&s, &last, AddSegmentReplica{c, NodeId(2)}, "AddSegmentReplica kC");
  EXPECT_EQ(last, Offset(20));

  // kA + kB merged (committed with R copies), then the output loses a copy (found corrupt).
  SegmentRecord out = Seg(ds, 0, Pos(5, 0), Pos(14, 0), 1);
  out.event_count = 84;
  out.file_name = "m-0.seg";
  SegmentId m;
  StepKeepsSafeOffset(&s, &last, StageMerge{out, {kA, kB}}, "StageMerge", &m);
  StepKeepsSafeOffset(&s, &last, AddSegmentReplica{m, NodeId(2)}, "AddSegmentReplica merge");
  StepKeepsSafeOffset(&s, &last, CommitMerge{m}, "CommitMerge");
  StepKeepsSafeOffset(&s, &last, RemoveSegmentReplica{m, NodeId(2), 0},
                      "RemoveSegmentReplica of the merge output");

  // kC loses both copies and is rebuilt by the owner: one copy.
  StepKeepsSafeOffset(&s, &last, RemoveSegmentReplica{c, NodeId(7), 0}, "RemoveSegmentReplica kC");
  StepKeepsSafeOffset(&s, &last, RemoveSegmentReplica{c, NodeId(2), 0}, "RemoveSegmentReplica kC");
  SegmentRecord rebuilt = seg_c;
  rebuilt.file_name = "r-p0-e1-o15-i0-00000000.seg";
  rebuilt.node = NodeId(1);
  SegmentId c2;
  StepKeepsSafeOffset(&s, &last, ReplaceSegment{c, rebuilt}, "ReplaceSegment kC", &c2);

  StepKeepsSafeOffset(&s, &last, SetReplicationFactor{3}, "SetReplicationFactor 3");
  StepKeepsSafeOffset(&s, &last, SetBucket{"s3://b"}, "SetBucket (nothing uploaded)");
  EXPECT_EQ(SafeOffset(s, p), Offset(20));

  // Above the truncation point a segment that is not durable still holds the safe offset.
  SegmentId d;
  StepKeepsSafeOffset(&s, &last, RegisterSegment{Seg(ds, 0, Pos(20, 0), Pos(24, 0), 1), Offset(25)},
                      "RegisterSegment kD", &d);
  EXPECT_EQ(SafeOffset(s, p), Offset(20));
  StepKeepsSafeOffset(&s, &last, SegmentUploaded{d}, "SegmentUploaded kD");
  EXPECT_EQ(SafeOffset(s, p), Offset(20));  // the merge output and kC are not uploaded either
  StepKeepsSafeOffset(&s, &last, SegmentUploaded{m}, "SegmentUploaded merge");
  StepKeepsSafeOffset(&s, &last, SegmentUploaded{c2}, "SegmentUploaded rebuilt kC");
  EXPECT_EQ(SafeOffset(s, p), Offset(25));
}

TEST(GlobalApply, DurableMeansReplicasWithoutBucketAndUploadedWithIt) {
  GlobalState s = TwoSegments();
  const PartitionId p(0);
  EXPECT_TRUE(SegmentDurable(s, s.segments.at(kA)));  // R = 1
  EXPECT_EQ(SafeOffset(s, p), Offset(15));
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetReplicationFactor{2}).ok());
  EXPECT_FALSE(SegmentDurable(s, s.segments.at(kA)));
  EXPECT_EQ(SafeOffset(s, p), Offset(5));
  ASSERT_TRUE(ApplyGlobalEvent(&s, AddSegmentReplica{kA, NodeId(2)}).ok());
  EXPECT_TRUE(SegmentDurable(s, s.segments.at(kA)));
  EXPECT_EQ(SafeOffset(s, p), Offset(10));
  ASSERT_TRUE(ApplyGlobalEvent(&s, AddSegmentReplica{kB, NodeId(2)}).ok());
  EXPECT_EQ(SafeOffset(s, p), Offset(15));
  // Without a bucket an upload does not count: one copy of two.
  SegmentRecord uploaded_one_copy = s.segments.at(kA);
  uploaded_one_copy.replicas = {NodeId(7)};
  uploaded_one_copy.uploaded = true;
  EXPECT_FALSE(SegmentDurable(s, uploaded_one_copy));

  // With a bucket only the upload counts.
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetBucket{"s3://b"}).ok());
  EXPECT_FALSE(SegmentDurable(s, s.segments.at(kA)));  // R copies, not uploaded
  EXPECT_TRUE(SegmentDurable(s, uploaded_one_copy));
  EXPECT_EQ(SafeOffset(s, p), Offset(5));
  ASSERT_TRUE(ApplyGlobalEvent(&s, SegmentUploaded{kA}).ok());
  EXPECT_EQ(SafeOffset(s, p), Offset(10));
  ASSERT_TRUE(ApplyGlobalEvent(&s, RemoveSegmentReplica{kB, NodeId(2), 0}).ok());
  EXPECT_EQ(s.segments.at(kB).replicas.size(), 1u);
  EXPECT_EQ(SafeOffset(s, p), Offset(10));
  ASSERT_TRUE(ApplyGlobalEvent(&s, SegmentUploaded{kB}).ok());
  EXPECT_TRUE(SegmentDurable(s, s.segments.at(kB)));  // uploaded, one copy of two
  EXPECT_EQ(SafeOffset(s, p), Offset(15));
}

TEST(GlobalApply, SegmentsOfAnOlderGenerationNeverHoldTheSafeOffset) {
  GlobalState s = TwoSegments();
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetReplicationFactor{2}).ok());
  EXPECT_EQ(SafeOffset(s, PartitionId(0)), Offset(5));
  s.generation = 1;  // as after a recovery: kA and kB belong to the previous commit log
  EXPECT_EQ(SafeOffset(s, PartitionId(0)), Offset(15));
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetBucket{"s3://b"}).ok());
  EXPECT_EQ(SafeOffset(s, PartitionId(0)), Offset(15));
  // A segment of the current generation does hold it until uploaded.
  SegmentId c;
  ASSERT_TRUE(
      ApplyGlobalEvent(
          &s, RegisterSegment{Seg(Ds("web", "a"), 0, Pos(20, 0), Pos(24, 0), 1), Offset(25)}, &c)
          .ok());
  EXPECT_EQ(SafeOffset(s, PartitionId(0)), Offset(20));
  ASSERT_TRUE(ApplyGlobalEvent(&s, SegmentUploaded{c}).ok());
  EXPECT_EQ(SafeOffset(s, PartitionId(0)), Offset(25));
}

TEST(GlobalApply, CommitMergeWithBucketWaitsForTheUpload) {
  GlobalState s = TwoSegments();  // R = 1: the writer's copy would do without a bucket
  SegmentRecord out = Seg(Ds("web", "a"), 0, Pos(5, 0), Pos(14, 0), 1);
  out.event_count = 84;
  out.file_name = "m.seg";
  out.uploaded = true;  // the apply rule decides, not the event
  {
    GlobalState no_bucket = s;
    SegmentId id;
    ASSERT_TRUE(ApplyGlobalEvent(&no_bucket, StageMerge{out, {kA, kB}}, &id).ok());
    EXPECT_TRUE(ApplyGlobalEvent(&no_bucket, CommitMerge{id}).ok());
  }
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetBucket{"s3://b"}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, SegmentUploaded{kA}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, SegmentUploaded{kB}).ok());
  SegmentId id;
  ASSERT_TRUE(ApplyGlobalEvent(&s, StageMerge{out, {kA, kB}}, &id).ok());
  EXPECT_FALSE(s.segments.at(id).uploaded);
  ExpectRejected(&s, CommitMerge{id});
  ASSERT_TRUE(ApplyGlobalEvent(&s, AddSegmentReplica{id, NodeId(2)}).ok());
  ExpectRejected(&s, CommitMerge{id});  // copies do not count with a bucket
  ASSERT_TRUE(ApplyGlobalEvent(&s, SegmentUploaded{id}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, CommitMerge{id}).ok());
  EXPECT_EQ(s.segments.count(kA), 0u);
  EXPECT_EQ(s.segments.count(kB), 0u);
  EXPECT_FALSE(s.segments.at(id).staged());
  EXPECT_TRUE(s.segments.at(id).uploaded);
}

// TwoSegments() moved to generation 1, plus segment kC = web/a 20..24 registered there.
constexpr SegmentId kC(3);
GlobalState TwoGenerations() {
  GlobalState s = TwoSegments();
  s.generation = 1;
  SegmentRecord c = Seg(Ds("web", "a"), 0, Pos(20, 0), Pos(24, 0), 1);
  c.uploaded = true;  // ignored: the apply rule sets both
  c.generation = 9;
  SegmentId id;
  EXPECT_TRUE(ApplyGlobalEvent(&s, RegisterSegment{c, Offset(25)}, &id).ok());
  EXPECT_EQ(id, kC);
  return s;
}

TEST(GlobalApply, RegisterSegmentTakesTheCurrentGeneration) {
  GlobalState s = TwoSegments();
  EXPECT_EQ(s.segments.at(kA).generation, 0u);
  s = TwoGenerations();
  EXPECT_EQ(s.segments.at(kA).generation, 0u);
  EXPECT_EQ(s.segments.at(kC).generation, 1u);
  EXPECT_FALSE(s.segments.at(kC).uploaded);
}

TEST(GlobalApply, StageMergeKeepsTheInputsGeneration) {
  GlobalState s = TwoGenerations();
  // kA (generation 0) and kC (generation 1): otherwise a valid merge.
  SegmentRecord mixed = Seg(Ds("web", "a"), 0, Pos(5, 0), Pos(24, 0), 1);
  mixed.event_count = 84;
  mixed.file_name = "mixed.seg";
  ExpectRejected(&s, StageMerge{mixed, {kA, kC}});
  ExpectRejected(&s, StageMerge{mixed, {kC, kA}});
  {
    GlobalState same = s;
    same.segments.at(kC).generation = 0;
    EXPECT_TRUE(ApplyGlobalEvent(&same, StageMerge{mixed, {kA, kC}}).ok());
  }
  // An old-generation merge while the state is at generation 1 stays at generation 0.
  SegmentRecord old = Seg(Ds("web", "a"), 0, Pos(5, 0), Pos(14, 0), 1);
  old.event_count = 84;
  old.file_name = "old.seg";
  old.generation = 1;
  SegmentId old_id, cur_id;
  ASSERT_TRUE(ApplyGlobalEvent(&s, StageMerge{old, {kA, kB}}, &old_id).ok());
  EXPECT_EQ(s.segments.at(old_id).generation, 0u);
  SegmentRecord cur = Seg(Ds("web", "a"), 0, Pos(20, 0), Pos(24, 0), 1);
  cur.file_name = "cur.seg";
  ASSERT_TRUE(ApplyGlobalEvent(&s, StageMerge{cur, {kC}}, &cur_id).ok());
  EXPECT_EQ(s.segments.at(cur_id).generation, 1u);
  // Committed, the old-generation output still does not hold the safe offset.
  ASSERT_TRUE(ApplyGlobalEvent(&s, CommitMerge{old_id}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, SetReplicationFactor{2}).ok());
  EXPECT_EQ(SafeOffset(s, PartitionId(0)), Offset(20));  // only kC (generation 1) holds it
}

TEST(GlobalApply, ReplaceSegmentOnlyRebuildsTheCurrentGeneration) {
  GlobalState s = TwoGenerations();
  SegmentRecord ra = s.segments.at(kA);
  ra.file_name = "ra.seg";
  ra.node = NodeId(9);
  ExpectRejected(&s, ReplaceSegment{kA, ra});
  {
    GlobalState gen0 = s;
    gen0.generation = 0;
    EXPECT_TRUE(ApplyGlobalEvent(&gen0, ReplaceSegment{kA, ra}).ok());
  }
  SegmentRecord rc = s.segments.at(kC);
  rc.file_name = "rc.seg";
  rc.node = NodeId(9);
  rc.uploaded = true;
  rc.generation = 0;
  SegmentId id;
  ASSERT_TRUE(ApplyGlobalEvent(&s, ReplaceSegment{kC, rc}, &id).ok());
  EXPECT_EQ(s.segments.count(kC), 0u);
  EXPECT_EQ(s.segments.at(id).generation, 1u);
  EXPECT_FALSE(s.segments.at(id).uploaded);
}

// ---------------- RecoverState ----------------

// A committed segment of web/<host> in the snapshot: `events` events, file and raw sizes `bytes`,
// two replicas, not uploaded, generation 2.
SegmentRecord Rec(int64_t id, const std::string& host, int32_t partition, int64_t lo, int64_t hi,
                  const std::string& file, int64_t min_ts, uint64_t bytes, uint64_t events = 42) {
  SegmentRecord s = Seg(Ds("web", host), partition, Pos(lo, 0), Pos(hi, 0), 3);
  s.id = SegmentId(id);
  s.file_name = file;
  s.min_ts = min_ts;
  s.max_ts = min_ts + 999;
  s.file_size = bytes;
  s.raw_bytes = bytes;
  s.event_count = events;
  s.replicas = {NodeId(1), NodeId(2)};
  s.generation = 2;
  return s;
}

struct RecoveryCase {
  GlobalState snapshot;
  std::vector<BucketSegmentFile> files;
  std::vector<SegmentRecord> found;
};

// A snapshot at generation 2 (applied through 500) and a bucket:
// - k1 (0..9), k2 (10..19), k3 (40..49) of web/a partition 0 and k4 (web/b partition 1,
//   generation 1) are in the bucket with their size: kept;
// - l1 (20..29, min_ts 2000) is missing and l2 (30..39, min_ts 1000) has the wrong size: lost;
// - m3 is a staged merge of k3, in the bucket: dropped;
// - found: fm (a merge of k1+k2 committed after the snapshot: it covers both and replaces them),
//   f1 (50..59), fbig (60..79, a merge of f2 and f3 which are also found: fbig wins), and fb / fp /
//   fg overlapping k1's positions in another datasource, partition or generation (added).
RecoveryCase MakeRecoveryCase() {
  RecoveryCase c;
  GlobalState& s = c.snapshot;
  for (const GlobalEvent& ev : std::vector<GlobalEvent>{
           SetClusterId{"c1"}, SetClusterSecret{HashToken("sec"), ""}, CreateRepo{"web"},
           AddIngestToken{"web", HashToken("t1"), ""}, AddApiToken{HashToken("a1"), ""},
           SetRetention{"web", 1000, 2000}, SetReplicationFactor{2}, RegisterNode{NodeId(1)},
           RegisterNode{NodeId(2)}, SetBucket{"s3://b/p at http://127.0.0.1:9000"}}) {
    EXPECT_TRUE(ApplyGlobalEvent(&s, ev).ok()) << GlobalEventName(ev);
  }
  s.applied_through = Offset(500);
  s.generation = 2;
  s.next_segment_id = SegmentId(10);
  s.partitions[0] = PartitionState{NodeId(2), Epoch(3), Offset(60), Offset(20)};
  s.partitions[1] = PartitionState{NodeId(1), Epoch(1), Offset(5), Offset(5)};
  s.flushed_through[{Ds("web", "a").Key(), 0}] = Pos(49, 0);
  s.recovery.generation = 2;
  s.recovery.snapshot_key = "global/older";
  s.recovery.lost_segments = 99;
  LostSegment ancient;
  ancient.datasource = "x";
  ancient.file_name = "ancient.seg";
  s.recovery.lost = {ancient};
  std::vector<SegmentRecord> segs = {
      Rec(1, "a", 0, 0, 9, "k1", 5000, 101),   Rec(2, "a", 0, 10, 19, "k2", 6000, 102),
      Rec(3, "a", 0, 20, 29, "l1", 2000, 103), Rec(4, "a", 0, 30, 39, "l2", 1000, 104),
      Rec(5, "a", 0, 40, 49, "k3", 7000, 105), Rec(6, "a", 0, 40, 49, "m3", 7000, 106),
      Rec(7, "b", 1, 0, 4, "k4", 8000, 107)};
  segs[0].uploaded = true;
  segs[5].merge_inputs = {SegmentId(5)};
  segs[6].generation = 1;
  for (auto& seg : segs) s.segments[seg.id] = seg;
  c.files = {{"k1", 101},   {"k2", 102}, {"l2", 999}, {"k3", 105}, {"m3", 106},
             {"k4", 107},   {"fm", 200}, {"f1", 201}, {"f2", 202}, {"f3", 203},
             {"fbig", 204}, {"fb", 205}, {"fp", 206}, {"fg", 207}};
  c.found = {
      Rec(0, "a", 0, 0, 19, "fm", 5000, 200, 84), Rec(0, "a", 0, 60, 69, "f2", 9000, 202),
      Rec(0, "a", 0, 50, 59, "f1", 8500, 201),    Rec(0, "a", 0, 60, 79, "fbig", 9000, 204, 84),
      Rec(0, "a", 0, 70, 79, "f3", 9500, 203),    Rec(0, "b", 0, 0, 9, "fb", 100, 205),
      Rec(0, "a", 1, 0, 9, "fp", 100, 206),       Rec(0, "a", 0, 0, 9, "fg", 100, 207)};
  c.found.back().generation = 3;
  for (auto& f : c.found) f.replicas = {NodeId(4)};
  return c;
}

const SegmentRecord* ByFile(const GlobalState& s, const std::string& file) {
  for (const auto& [id, seg] : s.segments) {
    if (seg.file_name == file) return &seg;
  }
  return nullptr;
}

TEST(RecoverState, KeepsWhatIsInTheBucketAndReportsTheRest) {
  const RecoveryCase c = MakeRecoveryCase();
  const std::string key = BucketSnapshotKey(2, Offset(500));
  const GlobalState out = RecoverState(c.snapshot, key, c.files, c.found);
  const GlobalState& in = c.snapshot;

  std::set<std::string> files;
  for (const auto& [id, seg] : out.segments) {
    EXPECT_EQ(id, seg.id);
    files.insert(seg.file_name);
    EXPECT_TRUE(seg.uploaded) << seg.file_name;
    EXPECT_TRUE(seg.replicas.empty()) << seg.file_name;
    EXPECT_FALSE(seg.staged()) << seg.file_name;
  }
  EXPECT_EQ(files, (std::set<std::string>{"fm", "k3", "k4", "f1", "fbig", "fb", "fp", "fg"}));
  // k1 and k2 were replaced by their merge output fm.
  EXPECT_EQ(out.segments.count(SegmentId(1)), 0u);
  EXPECT_EQ(out.segments.count(SegmentId(2)), 0u);
  // Kept segments keep their id, record and generation.
  for (int64_t id : {5, 7}) {
    const SegmentRecord& was = in.segments.at(SegmentId(id));
    ASSERT_EQ(out.segments.count(SegmentId(id)), 1u) << id;
    const SegmentRecord& now = out.segments.at(SegmentId(id));
    EXPECT_EQ(now.file_name, was.file_name);
    EXPECT_EQ(now.min_pos, was.min_pos);
    EXPECT_EQ(now.max_pos, was.max_pos);
    EXPECT_EQ(now.generation, was.generation);
  }
  EXPECT_EQ(out.segments.at(SegmentId(7)).generation, 1u);
  EXPECT_EQ(out.segments.count(SegmentId(6)), 0u);  // the staged merge
  // Found records get new ids, above the snapshot's.
  std::set<SegmentId> added;
  for (const char* f : {"fm", "f1", "fbig", "fb", "fp", "fg"}) {
    const SegmentRecord* seg = ByFile(out, f);
    ASSERT_NE(seg, nullptr) << f;
    EXPECT_GE(seg->id, SegmentId(10)) << f;
    added.insert(seg->id);
  }
  EXPECT_EQ(added, (std::set<SegmentId>{SegmentId(10), SegmentId(11), SegmentId(12), SegmentId(13),
                                        SegmentId(14), SegmentId(15)}));
  EXPECT_EQ(out.next_segment_id, SegmentId(16));
  EXPECT_EQ(ByFile(out, "fbig")->event_count, 84u);
  EXPECT_EQ(ByFile(out, "fg")->generation, 3u);

  const RecoveryReport& r = out.recovery;
  EXPECT_EQ(r.generation, 3u);
  EXPECT_EQ(r.snapshot_applied_through, Offset(500));
  EXPECT_EQ(r.snapshot_key, key);
  EXPECT_EQ(r.kept_segments, 2u);
  EXPECT_EQ(r.added_segments, 6u);
  EXPECT_EQ(r.kept_events, 2u * 42 + 4 * 42 + 84 + 84);
  EXPECT_EQ(r.kept_bytes, 105u + 107 + 200 + 201 + 204 + 205 + 206 + 207);
  EXPECT_EQ(r.lost_segments, 2u);
  EXPECT_EQ(r.lost_events, 84u);
  EXPECT_EQ(r.lost_bytes, 103u + 104);
  ASSERT_EQ(r.lost.size(), 2u);
  EXPECT_EQ(r.lost[0].file_name, "l2");  // oldest first
  EXPECT_EQ(r.lost[1].file_name, "l1");
  const SegmentRecord& l2 = in.segments.at(SegmentId(4));
  EXPECT_EQ(r.lost[0].datasource, l2.datasource.Key());
  EXPECT_EQ(r.lost[0].partition, l2.partition);
  EXPECT_EQ(r.lost[0].min_ts, 1000);
  EXPECT_EQ(r.lost[0].max_ts, 1999);
  EXPECT_EQ(r.lost[0].event_count, 42u);
  EXPECT_EQ(r.lost[0].raw_bytes, 104u);

  // The new commit log: generation + 1, partitions unclaimed at the next epoch from offset 0.
  EXPECT_EQ(out.generation, 3u);
  EXPECT_EQ(out.applied_through, Offset(-1));
  ASSERT_EQ(out.partitions.size(), 2u);
  EXPECT_EQ(out.partitions.at(0).epoch, Epoch(4));
  EXPECT_EQ(out.partitions.at(1).epoch, Epoch(2));
  for (const auto& [p, ps] : out.partitions) {
    EXPECT_EQ(ps.owner, NodeId(0)) << p;
    EXPECT_EQ(ps.replay_point, Offset(0)) << p;
    EXPECT_EQ(ps.truncated_before, Offset(0)) << p;
  }
  EXPECT_TRUE(out.flushed_through.empty());
  EXPECT_TRUE(out.nodes.empty());
  // Kept as they were.
  EXPECT_EQ(out.cluster_id, "c1");
  EXPECT_EQ(out.cluster_secret_verifier, in.cluster_secret_verifier);
  EXPECT_TRUE(IsClusterSecret(out, "sec"));
  EXPECT_EQ(out.replication_factor, 2u);
  EXPECT_EQ(out.bucket, in.bucket);
  EXPECT_EQ(out.api_token_hashes, in.api_token_hashes);
  EXPECT_EQ(out.ingest_token_hashes, in.ingest_token_hashes);
  ASSERT_EQ(out.repos.size(), 1u);
  EXPECT_EQ(out.repos.at("web").retention_ms, 1000);
  EXPECT_EQ(out.repos.at("web").retention_bytes, 2000u);
  EXPECT_EQ(out.repos.at("web").ingest_token_hashes, in.repos.at("web").ingest_token_hashes);
  EXPECT_EQ(IngestRepoForToken(out, "t1"), "web");

  // A pure function of its inputs: the order of `found` does not matter.
  std::vector<SegmentRecord> reversed(c.found.rbegin(), c.found.rend());
  EXPECT_EQ(EncodeGlobalState(RecoverState(c.snapshot, key, c.files, reversed)),
            EncodeGlobalState(out));
  // The recovered state decodes back (snapshot format v4 carries all of it).
  Result<GlobalState> dec = DecodeGlobalState(EncodeGlobalState(out));
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(EncodeGlobalState(*dec), EncodeGlobalState(out));
}

TEST(RecoverState, TheNewCommitLogStartsAtOffsetZero) {
  const RecoveryCase c = MakeRecoveryCase();
  GlobalState s = RecoverState(c.snapshot, "k", c.files, c.found);
  // Kept segments are of older generations: they do not hold the new log's safe offset.
  EXPECT_EQ(SafeOffset(s, PartitionId(0)), Offset(0));
  ExpectRejected(&s, ClaimPartition{PartitionId(0), NodeId(5), Epoch(3)});
  ASSERT_TRUE(ApplyGlobalEvent(&s, ClaimPartition{PartitionId(0), NodeId(5), Epoch(4)}).ok());
  SegmentId id;
  ASSERT_TRUE(
      ApplyGlobalEvent(
          &s, RegisterSegment{Seg(Ds("web", "a"), 0, Pos(0, 0), Pos(9, 0), 5), Offset(10)}, &id)
          .ok());
  EXPECT_EQ(id, SegmentId(16));
  EXPECT_EQ(s.segments.at(id).generation, 3u);
  EXPECT_EQ(SafeOffset(s, PartitionId(0)), Offset(0));  // not uploaded yet
  ASSERT_TRUE(ApplyGlobalEvent(&s, SegmentUploaded{id}).ok());
  EXPECT_EQ(SafeOffset(s, PartitionId(0)), Offset(10));
}

TEST(RecoverState, LostListIsCappedButCountsCoverEverySegment) {
  GlobalState snap;
  snap.applied_through = Offset(7);
  const size_t n = RecoveryReport::kMaxLostListed + 5;
  for (size_t i = 0; i < n; ++i) {
    // Later ids are older: the listing must sort, not keep id order.
    SegmentRecord seg = Rec(static_cast<int64_t>(i) + 1, "a", 0, static_cast<int64_t>(i) * 10,
                            static_cast<int64_t>(i) * 10 + 9, "s" + std::to_string(i),
                            100000 - static_cast<int64_t>(i), 10);
    snap.segments[seg.id] = seg;
  }
  snap.next_segment_id = SegmentId(static_cast<int64_t>(n) + 1);
  const GlobalState out = RecoverState(snap, "k", {}, {});
  EXPECT_TRUE(out.segments.empty());
  const RecoveryReport& r = out.recovery;
  EXPECT_EQ(r.kept_segments, 0u);
  EXPECT_EQ(r.lost_segments, n);
  EXPECT_EQ(r.lost_events, n * 42);
  EXPECT_EQ(r.lost_bytes, n * 10);
  ASSERT_EQ(r.lost.size(), RecoveryReport::kMaxLostListed);
  EXPECT_TRUE(std::is_sorted(
      r.lost.begin(), r.lost.end(),
      [](const LostSegment& a, const LostSegment& b) { return a.min_ts < b.min_ts; }));
  // The oldest are listed; the 5 newest (ids 1..5) are not.
  EXPECT_EQ(r.lost.front().min_ts, 100000 - static_cast<int64_t>(n - 1));
  EXPECT_EQ(r.lost.back().min_ts, 100000 - 5);
  EXPECT_EQ(r.lost.front().file_name, "s" + std::to_string(n - 1));
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
    if (i % 4 == 0) evs.push_back(AddIngestToken{"web", HashToken("tok" + std::to_string(i)), ""});
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

// Lookups through a running Global: positive answers are cached, misses are not (a token added
// afterwards is found), and nothing persisted holds a token.
TEST(Global, TokenLookupFindsTokensAddedAtAnyTime) {
  MemLog log;
  TempDir dir;
  auto g = Global::Open(Env::Default(), &log, dir.path());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  TokenLookup lookup(g->get());
  ASSERT_TRUE((*g)->Submit(CreateRepo{"web"}).ok());
  EXPECT_EQ(lookup.IngestRepo("late-token"), std::nullopt);
  EXPECT_FALSE(lookup.IsApiToken("late-api"));
  ASSERT_TRUE((*g)->Submit(AddIngestToken{"web", HashToken("late-token"), ""}).ok());
  ASSERT_TRUE((*g)->Submit(AddApiToken{HashToken("late-api"), ""}).ok());
  for (int i = 0; i < 2; ++i) {  // the second time from the cache
    EXPECT_EQ(lookup.IngestRepo("late-token"), "web");
    EXPECT_TRUE(lookup.IsApiToken("late-api"));
    EXPECT_FALSE(lookup.IsApiToken("late-token"));
    EXPECT_EQ(lookup.IngestRepo("late-api"), std::nullopt);
    EXPECT_EQ(lookup.IngestRepo(""), std::nullopt);
  }
  ASSERT_TRUE((*g)->WriteSnapshot().ok());
  auto names = Env::Default()->ListDir(dir.path());
  ASSERT_TRUE(names.ok());
  ASSERT_FALSE(names->empty());
  for (const std::string& name : names.value()) {
    auto bytes = Env::Default()->ReadFile(dir.path() + "/" + name);
    ASSERT_TRUE(bytes.ok());
    EXPECT_EQ(bytes->find("late-"), std::string::npos) << name;
  }
  auto recs = log.Read(PartitionId(0), Offset(0), 1 << 20, std::chrono::milliseconds(0));
  ASSERT_TRUE(recs.ok());
  EXPECT_EQ(recs->size(), 3u);
  for (const auto& rec : *recs) EXPECT_EQ(rec.data.find("late-"), std::string::npos);
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

TEST(Global, TopicTruncationKeepsEveryLiveNodesOldestSnapshot) {
  EXPECT_EQ(GlobalTopicTruncationPoint(Offset(40), {}), Offset(41));
  EXPECT_EQ(GlobalTopicTruncationPoint(Offset(40), {Offset(55), Offset(12)}), Offset(13));
  EXPECT_EQ(GlobalTopicTruncationPoint(Offset(-1), {Offset(55)}), Offset(-1));  // none here yet
  // A live peer without a snapshot (or of a version that does not report one): nothing.
  EXPECT_EQ(GlobalTopicTruncationPoint(Offset(40), {Offset(55), Offset(-1)}), Offset(-1));
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
  // The server loads a peer's state on exactly this subcode.
  EXPECT_EQ(g.status().subcode(), StatusSubcode::kLogTruncatedPastState) << g.status().ToString();
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

TEST(Global, AFailedSnapshotIsReportedUntilOneSucceeds) {
  MemLog log;
  TempDir dir;
  FaultEnv env;
  auto g = Global::Open(&env, &log, dir.path(), {.snapshot_every = 0});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  for (const auto& ev : Workload(3)) (void)(*g)->Submit(ev);
  EXPECT_EQ((*g)->SnapshotError(), "");
  env.FailWritesAfter(0);  // a full disk
  EXPECT_FALSE((*g)->WriteSnapshot().ok());
  EXPECT_NE((*g)->SnapshotError(), "");
  EXPECT_TRUE(SnapshotFiles(dir.path()).empty());
  env.FailWritesAfter(-1);  // space again
  ASSERT_TRUE((*g)->WriteSnapshot().ok());
  EXPECT_EQ((*g)->SnapshotError(), "");
  EXPECT_EQ(SnapshotFiles(dir.path()).size(), 1u);
  ASSERT_TRUE((*g)->Close().ok());
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
  EXPECT_FALSE(HasGlobalSnapshot(Env::Default(), peer_dir.path()));
  EXPECT_FALSE(HasGlobalSnapshot(Env::Default(), peer_dir.path() + "/missing"));
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(peer_dir.path() + "/snapshot-x.bin", "x").ok());
  EXPECT_FALSE(HasGlobalSnapshot(Env::Default(), peer_dir.path()));  // not a snapshot's name
  ASSERT_TRUE(Env::Default()->RemoveFile(peer_dir.path() + "/snapshot-x.bin").ok());
  auto installed = InstallGlobalSnapshot(Env::Default(), peer_dir.path(), bytes);
  ASSERT_TRUE(installed.ok()) << installed.status().ToString();
  EXPECT_EQ(*installed, last);
  EXPECT_EQ(SnapshotFiles(peer_dir.path()), std::vector<std::string>{GlobalSnapshotFileName(last)});
  EXPECT_TRUE(HasGlobalSnapshot(Env::Default(), peer_dir.path()));
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

// A node's view of a shared log whose reads answer nothing while frozen, like a node stopped
// with SIGSTOP; appends go through.
class FreezableLog : public CommitLog {
 public:
  explicit FreezableLog(CommitLog* log) : log_(log) {}
  // Freezing waits for a read in progress to end, so nothing appended after it is read.
  void Freeze(bool frozen) {
    frozen_.store(frozen);
    while (frozen && reading_.load() > 0) std::this_thread::sleep_for(1ms);
  }

  int32_t partition_count() const override { return log_->partition_count(); }
  std::future<Result<Offset>> Append(PartitionId p, std::string record) override {
    return log_->Append(p, std::move(record));
  }
  Result<std::vector<LogRecord>> Read(PartitionId p, Offset from, size_t max_bytes,
                                      std::chrono::milliseconds max_wait) override {
    ++reading_;
    if (frozen_.load()) {
      --reading_;
      std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(max_wait, 20ms));
      return std::vector<LogRecord>{};
    }
    auto r = log_->Read(p, from, max_bytes, max_wait);
    --reading_;
    return r;
  }
  void WakeReaders(PartitionId p) override { log_->WakeReaders(p); }
  Status DeleteBefore(PartitionId p, Offset offset) override {
    return log_->DeleteBefore(p, offset);
  }
  Result<Offset> StartOffset(PartitionId p) override { return log_->StartOffset(p); }
  Result<Offset> EndOffset(PartitionId p) override { return log_->EndOffset(p); }
  std::string Health() override { return "ok"; }

 private:
  CommitLog* const log_;
  std::atomic<bool> frozen_{false};
  std::atomic<int> reading_{0};
};

// Regression (chaos campaign, issue 13): a node paused past the heartbeat timeout was left out of
// the global topic's truncation; after it resumed, the log no longer held the next event it had to
// apply and its tailer stopped for good ("the state cannot follow the log"), so the partitions it
// claimed stayed unclaimed until it was restarted. It now loads a newer state (a peer's snapshot)
// and follows the log again.
TEST(Global, ANodeLeftBehindByTruncationLoadsANewerStateAndFollowsAgain) {
  MemLog log;
  FreezableLog b_view(&log), c_view(&log);
  TempDir dir;
  const GlobalOptions opts{.snapshot_every = 1000000, .truncate_log = false};
  auto a = Global::Open(Env::Default(), &log, dir.Sub("a"), opts);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  Global* b_ptr = nullptr;
  std::atomic<int> offered{0};
  std::string follow_error_while_behind;
  GlobalOptions b_opts = opts;
  b_opts.newer_state = [&]() -> Result<std::string> {
    const int n = ++offered;
    if (n == 1) return Status::Unavailable("no peer alive");
    if (n == 2) return (*b_ptr).EncodedState().second;  // not past its own state: refused
    follow_error_while_behind = b_ptr->FollowError();
    return (*a)->EncodedState().second;
  };
  auto b = Global::Open(Env::Default(), &b_view, dir.Sub("b"), b_opts);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  b_ptr = b->get();
  // Without a source of newer states the tailer stops and says why.
  auto c = Global::Open(Env::Default(), &c_view, dir.Sub("c"), opts);
  ASSERT_TRUE(c.ok()) << c.status().ToString();

  ASSERT_TRUE((*a)->Submit(CreateRepo{"first"}).ok());
  ASSERT_TRUE((*b)->WaitApplied((*a)->Applied(), 5s));
  ASSERT_TRUE((*c)->WaitApplied((*a)->Applied(), 5s));
  b_view.Freeze(true);
  c_view.Freeze(true);
  // b's own event is appended while it is frozen: it cannot see its outcome in the log.
  const int64_t end_before = log.EndOffset(PartitionId(0))->value;
  auto from_b = std::async(std::launch::async, [&] { return (*b)->Submit(CreateRepo{"from-b"}); });
  for (int i = 0; i < 500 && log.EndOffset(PartitionId(0))->value == end_before; ++i) {
    std::this_thread::sleep_for(2ms);
  }
  ASSERT_GT(log.EndOffset(PartitionId(0))->value, end_before) << "b's event was not appended";
  for (const auto& ev : Workload(30)) (void)(*a)->Submit(ev);
  const Offset a_applied = (*a)->Applied();
  ASSERT_TRUE(log.DeleteBefore(PartitionId(0), a_applied).ok());  // a's state covers the rest
  b_view.Freeze(false);
  c_view.Freeze(false);

  ASSERT_TRUE((*b)->WaitApplied(a_applied, 10s)) << (*b)->FollowError();
  EXPECT_EQ(Encoded(**b), Encoded(**a));
  EXPECT_EQ((*b)->StateReloads(), 1u);
  EXPECT_EQ((*b)->FollowError(), "");
  EXPECT_EQ(offered.load(), 3);
  EXPECT_NE(follow_error_while_behind.find("truncated below"), std::string::npos)
      << follow_error_while_behind;
  EXPECT_NE(follow_error_while_behind.find("not past this node's"), std::string::npos)
      << follow_error_while_behind;
  auto b_outcome = from_b.get();
  EXPECT_EQ(b_outcome.status().code(), StatusCode::kUnavailable) << b_outcome.status().ToString();

  // b follows the log after the loaded state, and a restart starts from it.
  ASSERT_TRUE((*a)->Submit(CreateRepo{"later"}).ok());
  ASSERT_TRUE((*b)->WaitApplied((*a)->Applied(), 5s)) << (*b)->FollowError();
  EXPECT_EQ(Encoded(**b), Encoded(**a));
  ASSERT_TRUE((*b)->Close().ok());
  b->reset();
  auto b2 = Global::Open(Env::Default(), &b_view, dir.Sub("b"), b_opts);
  ASSERT_TRUE(b2.ok()) << b2.status().ToString();
  EXPECT_EQ(Encoded(**b2), Encoded(**a));

  // c's tailer stopped: its state is stale and it says why; its Submits fail.
  for (int i = 0; i < 100 && (*c)->FollowError().empty(); ++i) std::this_thread::sleep_for(20ms);
  EXPECT_NE((*c)->FollowError().find("cannot follow the log"), std::string::npos)
      << (*c)->FollowError();
  EXPECT_EQ((*c)->StateReloads(), 0u);
  EXPECT_EQ((*c)->Submit(CreateRepo{"from-c"}).status().code(), StatusCode::kCorruption);
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
  ASSERT_TRUE((*a)->Submit(AddApiToken{HashToken("final"), ""}).ok());
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
    EXPECT_TRUE(IsApiToken(s, "final"));
  });
}

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

// A commit log that begins with BeginRecovery{1} (written by a node that recovered from the bucket)
// cannot be replayed from an empty state; it opens once the recovered snapshot is installed, and a
// second BeginRecovery{1} is rejected.
void ExpectRecoveredLogNeedsTheRecoveredSnapshot(CommitLog* log, const TempDir& dir) {
  auto marker = log->Append(PartitionId(0), EncodeGlobalEvent(BeginRecovery{1})).get();
  ASSERT_TRUE(marker.ok()) << marker.status().ToString();
  ASSERT_EQ(*marker, Offset(0));
  const std::string snaps = dir.Sub("snaps");
  // Cluster mode: the log is never truncated by a node, so a fresh node can still replay it.
  const GlobalOptions opts{.truncate_log = false};
  {
    auto g = Global::Open(Env::Default(), log, snaps, opts);
    ASSERT_EQ(g.status().code(), StatusCode::kAborted) << g.status().ToString();
    EXPECT_EQ(g.status().subcode(), StatusSubcode::kLogBeginsWithRecovery) << g.status().ToString();
    EXPECT_NE(g.status().message().find(kRecoveredLogMarker), std::string::npos)
        << g.status().message();
  }
  EXPECT_TRUE(SnapshotFiles(snaps).empty());

  // The recovering node's state: Populated() recovered with segment 1 in the bucket.
  GlobalState old = Populated();
  ASSERT_TRUE(ApplyGlobalEvent(&old, SetBucket{"s3://b"}).ok());
  const SegmentRecord& seg1 = old.segments.at(SegmentId(1));
  GlobalState recovered = RecoverState(old, BucketSnapshotKey(0, old.applied_through),
                                       {{seg1.file_name, seg1.file_size}}, {});
  ASSERT_EQ(recovered.generation, 1u);
  recovered.applied_through = *marker;
  auto installed = InstallGlobalSnapshot(Env::Default(), snaps, EncodeGlobalState(recovered));
  ASSERT_TRUE(installed.ok()) << installed.status().ToString();
  EXPECT_EQ(*installed, *marker);

  auto g = Global::Open(Env::Default(), log, snaps, opts);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(Encoded(**g), EncodeGlobalState(recovered));
  // Later events apply on the recovered state.
  const Epoch epoch = recovered.partitions.at(0).epoch;
  ASSERT_TRUE((*g)->Submit(ClaimPartition{PartitionId(0), NodeId(3), epoch}).ok());
  auto reg = (*g)->Submit(
      RegisterSegment{Seg(Ds("web", "a"), 0, Pos(0, 0), Pos(4, 0), epoch.value + 1), Offset(5)});
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  EXPECT_EQ(reg->segment_id, recovered.next_segment_id);
  ASSERT_TRUE((*g)->Submit(RegisterNode{NodeId(3)}).ok());
  (*g)->Read([&](const GlobalState& s) {
    EXPECT_EQ(s.generation, 1u);
    EXPECT_EQ(s.segments.at(reg->segment_id).generation, 1u);
    EXPECT_EQ(s.nodes, std::set<NodeId>{NodeId(3)});
    EXPECT_EQ(s.recovery.generation, 1u);
  });
  // A second marker of the same generation is rejected and changes nothing but applied_through.
  GlobalState before;
  (*g)->Read([&](const GlobalState& s) { before = s; });
  auto again = (*g)->Submit(BeginRecovery{1});
  EXPECT_EQ(again.status().code(), StatusCode::kRejected) << again.status().ToString();
  GlobalState after;
  (*g)->Read([&](const GlobalState& s) { after = s; });
  EXPECT_EQ(after.applied_through, Offset(before.applied_through.value + 1));
  before.applied_through = after.applied_through;
  EXPECT_EQ(EncodeGlobalState(after), EncodeGlobalState(before));
  ASSERT_TRUE((*g)->Close().ok());

  // Reopening from this node's snapshots works; an empty snapshot directory still does not.
  auto reopened = Global::Open(Env::Default(), log, snaps, opts);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ(Encoded(**reopened), EncodeGlobalState(after));
  auto fresh = Global::Open(Env::Default(), log, dir.Sub("fresh"), opts);
  EXPECT_EQ(fresh.status().code(), StatusCode::kAborted) << fresh.status().ToString();
}

TEST(Global, RecoveredLogNeedsTheRecoveredSnapshot) {
  MemLog log;
  TempDir dir;
  ExpectRecoveredLogNeedsTheRecoveredSnapshot(&log, dir);
}

TEST(Global, RecoveredLocalLogNeedsTheRecoveredSnapshot) {
  TempDir dir;
  auto log = OpenLocalLog(Env::Default(), dir.Sub("log"), LocalLogOptions{.partitions = 1});
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ExpectRecoveredLogNeedsTheRecoveredSnapshot(log->get(), dir);
}

// ---------------- saved searches and alerts (types 32 to 36, snapshot v9) ----------------

TEST(GlobalAlerts, SavedSearchesArePutAndDeleted) {
  GlobalState s = Populated();
  ExpectRejected(&s, PutSavedSearch{"nope", "a", {"x", "1h", ""}});
  ExpectRejected(&s, PutSavedSearch{"web", "a/b", {"x", "1h", ""}});
  ExpectRejected(&s, PutSavedSearch{"web", "a", {"", "1h", ""}});
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutSavedSearch{"web", "a", {"x", "1h", ""}}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutSavedSearch{"web", "a", {"y", "2h", "1h"}}).ok());
  EXPECT_EQ(s.repos.at("web").saved_searches.at("a"), (SavedSearch{"y", "2h", "1h"}));
  ASSERT_TRUE(ApplyGlobalEvent(&s, DeleteSavedSearch{"web", "a"}).ok());
  ExpectRejected(&s, DeleteSavedSearch{"web", "a"});
}

TEST(GlobalAlerts, PutAlertAssignsIdsAndAlignsTheFirstWindow) {
  GlobalState s = Populated();
  AlertDef d = TestAlertDef();
  ExpectRejected(&s, PutAlert{"nope", "a", d, 0});
  AlertDef bad = d;
  bad.every_ms = 0;
  ExpectRejected(&s, PutAlert{"web", "a", bad, 0});
  bad = d;
  bad.delay_ms = -1;
  ExpectRejected(&s, PutAlert{"web", "a", bad, 0});
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutAlert{"web", "a", d, 12'345}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutAlert{"db", "a", d, 12'345}).ok());
  const AlertState& a = s.repos.at("web").alerts.at("a");
  EXPECT_EQ(a.id, 1u);
  EXPECT_EQ(s.repos.at("db").alerts.at("a").id, 2u);
  EXPECT_EQ(a.done_through_ms, 10'000);  // floor(12345 / 5000) * 5000
  // An update keeps the id; the same interval keeps done_through, a new one realigns it.
  d.query = "status=404";
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutAlert{"web", "a", d, 99'999}).ok());
  EXPECT_EQ(s.repos.at("web").alerts.at("a").id, 1u);
  EXPECT_EQ(s.repos.at("web").alerts.at("a").done_through_ms, 10'000);
  d.every_ms = 7000;
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutAlert{"web", "a", d, 99'999}).ok());
  EXPECT_EQ(s.repos.at("web").alerts.at("a").done_through_ms, 98'000);
  // Disabled, then enabled again later: it starts from then, with no backlog.
  d.enabled = false;
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutAlert{"web", "a", d, 200'000}).ok());
  EXPECT_EQ(s.repos.at("web").alerts.at("a").done_through_ms, 98'000);
  d.enabled = true;
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutAlert{"web", "a", d, 300'000}).ok());
  EXPECT_EQ(s.repos.at("web").alerts.at("a").done_through_ms, 294'000);
  // A recreated alert gets a new id (its firing ids differ from the deleted one's).
  ASSERT_TRUE(ApplyGlobalEvent(&s, DeleteAlert{"web", "a"}).ok());
  ExpectRejected(&s, DeleteAlert{"web", "a"});
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutAlert{"web", "a", d, 0}).ok());
  EXPECT_EQ(s.repos.at("web").alerts.at("a").id, 3u);
  EXPECT_EQ(AlertFiringId(3, 14'000), "3-14000");
}

TEST(GlobalAlerts, WindowDoneIsFencedAndInOrder) {
  GlobalState s = Populated();  // partition 5: owner 3 at epoch 2
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutAlert{"web", "a", TestAlertDef(), 12'345}).ok());
  auto done = [](int64_t end, AlertOutcome outcome, NodeId node, Epoch epoch, uint64_t id = 1) {
    AlertWindowDone e{"web", "a", id, PartitionId(5), epoch, {}};
    e.firing.window_end_ms = end;
    e.firing.window_start_ms = end - 10'000;
    e.firing.outcome = outcome;
    e.firing.node = node;
    return e;
  };
  ExpectRejected(&s, done(15'000, AlertOutcome::kFired, NodeId(3), Epoch(1)));     // stale epoch
  ExpectRejected(&s, done(15'000, AlertOutcome::kFired, NodeId(2), Epoch(2)));     // not the owner
  ExpectRejected(&s, done(15'000, AlertOutcome::kFired, NodeId(3), Epoch(2), 9));  // other id
  ExpectRejected(&s, done(20'000, AlertOutcome::kFired, NodeId(3), Epoch(2)));     // skips a window
  ASSERT_TRUE(ApplyGlobalEvent(&s, done(15'000, AlertOutcome::kFired, NodeId(3), Epoch(2))).ok());
  ExpectRejected(&s, done(15'000, AlertOutcome::kFired, NodeId(3), Epoch(2)));  // twice
  ASSERT_TRUE(ApplyGlobalEvent(&s, done(20'000, AlertOutcome::kQuiet, NodeId(3), Epoch(2))).ok());
  const AlertState& a = s.repos.at("web").alerts.at("a");
  EXPECT_EQ(a.done_through_ms, 20'000);
  ASSERT_EQ(a.firings.size(), 1u);  // quiet windows are not listed
  EXPECT_EQ(a.firings[0].window_end_ms, 15'000);
  // The list keeps the newest kMaxFirings.
  for (int64_t end = 25'000; end < 25'000 + 5'000 * 150; end += 5'000) {
    ASSERT_TRUE(ApplyGlobalEvent(&s, done(end, AlertOutcome::kFired, NodeId(3), Epoch(2))).ok());
  }
  ASSERT_EQ(a.firings.size(), AlertState::kMaxFirings);
  EXPECT_EQ(a.firings.back().window_end_ms, 20'000 + 5'000 * 150);
}

TEST(GlobalAlerts, DeleteRepoRemovesItsSavedSearchesAndAlerts) {
  GlobalState s = Populated();  // partition 5: owner 3 at epoch 2
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutSavedSearch{"web", "errors", {"status=500", "1h", ""}}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutAlert{"web", "a", TestAlertDef(), 12'345}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutAlert{"db", "b", TestAlertDef(), 12'345}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, DeleteRepo{"web"}).ok());
  EXPECT_EQ(s.repos.at("db").alerts.size(), 1u);
  // A repository created again under the name starts with none; the old alert's runner is fenced
  // by the repository and then by the alert id (ids are never reused).
  AlertWindowDone done{"web", "a", 1, PartitionId(5), Epoch(2), {}};
  done.firing.window_end_ms = 15'000;
  done.firing.node = NodeId(3);
  ExpectRejected(&s, done);
  ASSERT_TRUE(ApplyGlobalEvent(&s, CreateRepo{"web", 20'000}).ok());
  EXPECT_TRUE(s.repos.at("web").saved_searches.empty());
  EXPECT_TRUE(s.repos.at("web").alerts.empty());
  ExpectRejected(&s, done);
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutAlert{"web", "a", TestAlertDef(), 12'345}).ok());
  EXPECT_EQ(s.repos.at("web").alerts.at("a").id, 3u);
  ExpectRejected(&s, done);
}

TEST(GlobalAlerts, EventsHaveTheDocumentedBytes) {
  // FORMAT.md: type 36 = str repo, str name, u64 alert id, PartitionId, Epoch, firing.
  AlertWindowDone e{"web", "a", 7, PartitionId(3), Epoch(2), {}};
  e.firing = {15'000, 5'000, AlertOutcome::kFired, 4, 1, NodeId(9), 16'000, ""};
  std::string want = "GE";
  want.push_back(1);
  want.push_back(36);
  PutLengthPrefixed(&want, "web");
  PutLengthPrefixed(&want, "a");
  PutVarint64(&want, 7);
  PutVarsint64(&want, 3);
  PutVarsint64(&want, 2);
  PutTestFiring(&want, e.firing);
  EXPECT_EQ(EncodeGlobalEvent(e), WithCrc(want));
  // Type 34 = str repo, str name, alert definition, i64 now_ms.
  std::string put = "GE";
  put.push_back(1);
  put.push_back(34);
  PutLengthPrefixed(&put, "web");
  PutLengthPrefixed(&put, "a");
  PutTestAlertDef(&put, TestAlertDef());
  PutVarsint64(&put, 42);
  EXPECT_EQ(EncodeGlobalEvent(PutAlert{"web", "a", TestAlertDef(), 42}), WithCrc(put));
  Result<GlobalEvent> dec = DecodeGlobalEvent(WithCrc(put));
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(std::get<PutAlert>(*dec).def, TestAlertDef());
  // The type after the last alert event is unknown: Corruption, never a crash.
  std::string unknown = "GE";
  unknown.push_back(1);
  unknown.push_back(37);
  EXPECT_EQ(DecodeGlobalEvent(WithCrc(unknown)).status().code(), StatusCode::kCorruption);
  // An action kind other than 1 and 2 is Corruption.
  AlertDef odd = TestAlertDef();
  std::string bad = "GE";
  bad.push_back(1);
  bad.push_back(34);
  PutLengthPrefixed(&bad, "web");
  PutLengthPrefixed(&bad, "a");
  odd.actions[0].kind = static_cast<AlertActionKind>(3);
  PutTestAlertDef(&bad, odd);
  PutVarsint64(&bad, 42);
  EXPECT_EQ(DecodeGlobalEvent(WithCrc(bad)).status().code(), StatusCode::kCorruption);
}

TEST(GlobalAlerts, SnapshotV9KeepsSavedSearchesAndAlerts) {
  GlobalState s = Populated();
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutSavedSearch{"web", "errors", {"status=500", "1h", ""}}).ok());
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutAlert{"web", "a", TestAlertDef(), 12'345}).ok());
  AlertDef plain = TestAlertDef();
  plain.threshold.reset();
  plain.enabled = false;
  ASSERT_TRUE(ApplyGlobalEvent(&s, PutAlert{"db", "b", plain, 12'345}).ok());
  AlertWindowDone e{"web", "a", 1, PartitionId(5), Epoch(2), {}};
  e.firing = {15'000, 5'000, AlertOutcome::kFired, 4, 1, NodeId(3), 16'000, ""};
  ASSERT_TRUE(ApplyGlobalEvent(&s, e).ok());
  const std::string enc = EncodeGlobalState(s);
  ASSERT_EQ(enc[4], 9);
  const std::string body = enc.substr(0, enc.size() - 4);
  EXPECT_EQ(body.substr(body.size() - V9Suffix(s).size()), V9Suffix(s));
  Result<GlobalState> dec = DecodeGlobalState(enc);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(EncodeGlobalState(*dec), enc);
  EXPECT_EQ(dec->next_alert_id, 3u);
  EXPECT_EQ(dec->repos.at("web").saved_searches.at("errors").query, "status=500");
  const AlertState& a = dec->repos.at("web").alerts.at("a");
  EXPECT_EQ(a.def, TestAlertDef());
  EXPECT_EQ(a.done_through_ms, 15'000);
  ASSERT_EQ(a.firings.size(), 1u);
  EXPECT_EQ(a.firings[0].result_count, 4u);
  EXPECT_EQ(dec->repos.at("db").alerts.at("b").def, plain);
  // An alert name that is not valid is corrupt.
  GlobalState bad = s;
  bad.repos.at("web").alerts.emplace("a/b", AlertState{});
  EXPECT_EQ(DecodeGlobalState(EncodeGlobalState(bad)).status().code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace sediment

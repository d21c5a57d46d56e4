#include "cluster/heartbeat.h"

#include <gtest/gtest.h>

#include <random>

#include "common/checksum.h"
#include "common/coding.h"

namespace sediment {
namespace {

Heartbeat Sample() {
  Heartbeat hb;
  hb.node = NodeId(123456);
  hb.address = "10.0.0.7:8080";
  hb.sent_ms = 1'700'000'123'456;
  hb.started_ms = 1'700'000'000'000;
  hb.version = "0.1.0-test";
  hb.global_applied = Offset(98765);
  hb.partitions.push_back({PartitionId(0), Epoch(3), Offset(1000), Offset(900), 17});
  hb.partitions.push_back({PartitionId(7), Epoch(1), Offset(0), Offset(0), 0});
  hb.partitions.push_back(
      {PartitionId(2147483647), Epoch(1LL << 40), Offset(-1), Offset(1LL << 50), ~0ull});
  hb.oldest_snapshot = Offset(4242);
  hb.repair = {3, 3 << 20, 17, 17 << 20, 1, 2, 5};
  hb.lost.push_back({PartitionId(7),
                     2,
                     130,
                     {{Offset(10), Offset(40), 1'700'000'000'001},
                      {Offset(500), Offset(600), 1'700'000'000'002}}});
  hb.lost.push_back({PartitionId(0), 1, 1, {{Offset(0), Offset(1), 5}}});
  return hb;
}

TEST(Heartbeat, RoundTrip) {
  Heartbeat hb = Sample();
  auto r = DecodeHeartbeat(EncodeHeartbeat(hb));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, hb);

  Heartbeat minimal;
  minimal.node = NodeId(1);
  auto m = DecodeHeartbeat(EncodeHeartbeat(minimal));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(*m, minimal);
  EXPECT_EQ(m->global_applied, Offset(-1));
  EXPECT_TRUE(m->partitions.empty());

  Heartbeat big = Sample();
  big.address.assign(5000, 'a');
  big.address[17] = '\0';
  for (int i = 0; i < 1000; ++i) {
    big.partitions.push_back({PartitionId(i), Epoch(i), Offset(i * 3), Offset(i * 2), 5});
  }
  auto b = DecodeHeartbeat(EncodeHeartbeat(big));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(*b, big);

  // At most kMaxRanges ranges per partition are sent: the newest.
  Heartbeat many = Sample();
  many.lost.resize(1);
  many.lost[0].ranges.clear();
  for (int i = 0; i < 20; ++i) {
    many.lost[0].ranges.push_back({Offset(i * 10), Offset(i * 10 + 5), i});
  }
  auto m2 = DecodeHeartbeat(EncodeHeartbeat(many));
  ASSERT_TRUE(m2.ok()) << m2.status().ToString();
  ASSERT_EQ(m2->lost.size(), 1u);
  ASSERT_EQ(m2->lost[0].ranges.size(), LostOffsetsReport::kMaxRanges);
  EXPECT_EQ(m2->lost[0].ranges.front().first, Offset(40));
  EXPECT_EQ(m2->lost[0].ranges.back().first, Offset(190));
}

TEST(Heartbeat, Header) {
  std::string enc = EncodeHeartbeat(Sample());
  EXPECT_EQ(enc.substr(0, 4), "SDHB");
  EXPECT_EQ(enc[4], 3);
  EXPECT_EQ(DecodeFixed32(enc.data() + enc.size() - 4),
            Crc32c(std::string_view(enc).substr(0, enc.size() - 4)));
}

// Re-seals `body` (everything before the CRC) with a valid CRC so that checks behind the CRC are
// exercised.
std::string Seal(std::string body) {
  PutFixed32(&body, Crc32c(body));
  return body;
}

TEST(Heartbeat, RejectsEveryTruncation) {
  const std::string enc = EncodeHeartbeat(Sample());
  for (size_t n = 0; n < enc.size(); ++n) {
    auto r = DecodeHeartbeat(std::string_view(enc).substr(0, n));
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  }
}

TEST(Heartbeat, RejectsEveryBitFlip) {
  const std::string enc = EncodeHeartbeat(Sample());
  for (size_t i = 0; i < enc.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string s = enc;
      s[i] = static_cast<char>(s[i] ^ (1 << bit));
      auto r = DecodeHeartbeat(s);
      ASSERT_FALSE(r.ok()) << "byte " << i << " bit " << bit;
      EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
    }
  }
}

TEST(Heartbeat, RejectsStructuralErrorsBehindAValidCrc) {
  const std::string enc = EncodeHeartbeat(Sample());
  const std::string body = enc.substr(0, enc.size() - 4);
  auto expect_bad = [](const std::string& s, const std::string& why) {
    auto r = DecodeHeartbeat(s);
    ASSERT_FALSE(r.ok()) << why;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << why;
  };
  expect_bad(Seal("XDHB" + body.substr(4)), "magic");
  {
    std::string b = body;
    b[4] = 0x7f;
    expect_bad(Seal(b), "version");
    b[4] = 0;
    expect_bad(Seal(b), "version 0");
    b[4] = 4;
    expect_bad(Seal(b), "version 4");
    b[4] = 1;  // a newer body under a version 1 header has trailing bytes
    expect_bad(Seal(b), "v3 body as v1");
    b[4] = 2;
    expect_bad(Seal(b), "v3 body as v2");
  }
  expect_bad(Seal(body + "x"), "trailing byte");
  // Every truncation of the body, re-sealed.
  for (size_t n = 5; n < body.size(); ++n) expect_bad(Seal(body.substr(0, n)), "short body");

  auto with = [](auto&& fill) {
    std::string b = "SDHB";
    b.push_back(1);
    fill(&b);
    return Seal(b);
  };
  auto header = [](std::string* b, int64_t node, uint64_t count) {
    PutVarsint64(b, node);
    PutLengthPrefixed(b, "a:1");
    PutVarsint64(b, 1);
    PutVarsint64(b, 1);
    PutLengthPrefixed(b, "v");
    PutVarsint64(b, -1);
    PutVarint64(b, count);
  };
  // The builder itself makes a valid (version 1) record, read with version 2's defaults.
  auto v1 = DecodeHeartbeat(with([&](std::string* b) { header(b, 5, 0); }));
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  EXPECT_EQ(v1->oldest_snapshot, Offset(-1));
  EXPECT_EQ(v1->repair, RepairProgress{});
  // A version 2 record (as nodes before version 3 send it) is read with no lost offsets.
  auto v2 = DecodeHeartbeat([&] {
    std::string b = "SDHB";
    b.push_back(2);
    header(&b, 5, 1);
    for (int64_t v : {3, 1, 100, 90}) PutVarsint64(&b, v);  // partition, epoch, next, replay
    PutVarint64(&b, 4);                                     // buffered events
    PutVarsint64(&b, 77);                                   // oldest snapshot
    for (uint64_t v = 1; v <= 7; ++v) PutVarint64(&b, v);   // repair progress
    return Seal(b);
  }());
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_EQ(v2->partitions.size(), 1u);
  EXPECT_EQ(v2->oldest_snapshot, Offset(77));
  EXPECT_EQ(v2->repair, (RepairProgress{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_TRUE(v2->lost.empty());
  // Version 3 structure: range counts and values are checked behind a valid CRC.
  auto v3 = [&](auto&& lost) {
    std::string b = "SDHB";
    b.push_back(3);
    header(&b, 5, 0);
    PutVarsint64(&b, -1);
    for (int i = 0; i < 7; ++i) PutVarint64(&b, 0);
    lost(&b);
    return Seal(b);
  };
  EXPECT_TRUE(DecodeHeartbeat(v3([](std::string* b) { PutVarint64(b, 0); })).ok());
  expect_bad(v3([](std::string* b) { PutVarint64(b, 1ull << 60); }), "huge lost count");
  expect_bad(v3([](std::string* b) {
               PutVarint64(b, 1);
               PutVarsint64(b, 0);
               PutVarint64(b, 1);
               PutVarint64(b, 0);
               PutVarint64(b, 17);  // more ranges than kMaxRanges
               for (int i = 0; i < 17 * 3; ++i) PutVarsint64(b, i);
             }),
             "too many ranges");
  expect_bad(v3([](std::string* b) {
               PutVarint64(b, 1);
               PutVarsint64(b, 0);
               PutVarint64(b, 1);
               PutVarint64(b, 0);
               PutVarint64(b, 1);
               PutVarsint64(b, 9);  // first
               PutVarsint64(b, 9);  // end: empty range
               PutVarsint64(b, 1);
             }),
             "empty range");
  expect_bad(v3([](std::string* b) {
               PutVarint64(b, 1);
               PutVarsint64(b, -3);  // negative partition
               PutVarint64(b, 0);
               PutVarint64(b, 0);
               PutVarint64(b, 0);
             }),
             "negative lost partition");
  expect_bad(with([&](std::string* b) { header(b, 0, 0); }), "node 0");
  expect_bad(with([&](std::string* b) { header(b, -9, 0); }), "negative node");
  // A huge partition count must be rejected before allocating.
  expect_bad(with([&](std::string* b) { header(b, 5, 1ull << 60); }), "huge count");
  expect_bad(with([&](std::string* b) {
               header(b, 5, 1);
               PutVarsint64(b, int64_t{1} << 31);  // partition out of int32
               for (int i = 0; i < 4; ++i) PutVarint64(b, 0);
             }),
             "partition range");
  expect_bad(with([&](std::string* b) {
               header(b, 5, 1);
               PutVarsint64(b, -1);  // negative partition
               for (int i = 0; i < 4; ++i) PutVarint64(b, 0);
             }),
             "negative partition");
  // Length prefix past the end.
  expect_bad(with([&](std::string* b) {
               PutVarsint64(b, 5);
               PutVarint64(b, 1000);
               b->append("abc");
             }),
             "long string");
  // Overlong varint (11 continuation bytes).
  expect_bad(with([&](std::string* b) { b->append(11, '\xff'); }), "overlong varint");
}

TEST(Heartbeat, RandomGarbageNeverCrashes) {
  std::mt19937_64 rng(42);
  const std::string enc = EncodeHeartbeat(Sample());
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    if (i % 2 == 0) {
      s.resize(rng() % 80);
      for (char& c : s) c = static_cast<char>(rng());
    } else {
      // Mutations of a valid record: several random byte changes plus an optional cut.
      s = enc;
      for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) {
        s[rng() % s.size()] = static_cast<char>(rng());
      }
      if (rng() % 2) s.resize(rng() % s.size());
    }
    auto r = DecodeHeartbeat(s);
    if (r.ok()) {
      if (s != enc) ++accepted;
      EXPECT_EQ(EncodeHeartbeat(*r), s);  // only exact encodings are accepted
    } else {
      EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
    }
  }
  // Changes that keep the CRC valid are astronomically unlikely (a "change" may rewrite a byte
  // to its old value, which leaves the valid record).
  EXPECT_EQ(accepted, 0);
}

}  // namespace
}  // namespace sediment

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
}

TEST(Heartbeat, Header) {
  std::string enc = EncodeHeartbeat(Sample());
  EXPECT_EQ(enc.substr(0, 4), "SDHB");
  EXPECT_EQ(enc[4], 2);
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
    b[4] = 3;
    expect_bad(Seal(b), "version");
    b[4] = 0;
    expect_bad(Seal(b), "version 0");
    b[4] = 1;  // a version 2 body under a version 1 header has trailing bytes
    expect_bad(Seal(b), "v2 body as v1");
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

#include "model/event.h"

#include <gtest/gtest.h>

namespace sediment {
namespace {

IngestMessage Sample() {
  IngestMessage m;
  m.datasource.repo = "web";
  m.datasource.tags = {{"#type", "access"}, {"#host", "a"}};
  m.datasource.Normalize();
  for (int i = 0; i < 50; ++i) {
    Event e;
    e.timestamp_ms = 1700000000000 + i;
    e.ingest_ms = 1700000000500;
    e.raw = "GET /index.html " + std::to_string(i);
    e.fields = {{"status", "200"}, {"n", std::to_string(i)}};
    m.events.push_back(e);
  }
  return m;
}

TEST(IngestMessage, RoundTripsWithEveryCodec) {
  for (Codec c : {Codec::kNone, Codec::kLz4, Codec::kZstd}) {
    auto msg = Sample();
    msg.id = 0x0123456789abcdefull;
    auto decoded = DecodeIngestMessage(EncodeIngestMessage(msg, c));
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(decoded->id, msg.id);
    EXPECT_EQ(decoded->datasource, msg.datasource);
    EXPECT_EQ(decoded->events, msg.events);
  }
}

TEST(IngestMessage, EveryFlippedByteOrTruncationIsCorruption) {
  std::string enc = EncodeIngestMessage(Sample(), Codec::kLz4);
  for (size_t i = 0; i < enc.size(); ++i) {
    std::string bad = enc;
    bad[i] ^= 0x5a;
    EXPECT_FALSE(DecodeIngestMessage(bad).ok()) << "flip at " << i;
  }
  for (size_t n = 0; n < enc.size(); ++n) {
    EXPECT_FALSE(DecodeIngestMessage(std::string_view(enc).substr(0, n)).ok()) << "cut at " << n;
  }
}

TEST(Datasource, NormalizeSortsAndKeyIsStable) {
  Datasource a{"r", {{"#b", "1"}, {"#a", "2"}}};
  Datasource b{"r", {{"#a", "2"}, {"#b", "1"}}};
  a.Normalize();
  b.Normalize();
  EXPECT_EQ(a.Key(), b.Key());
  EXPECT_EQ(a.PartitionFor(24), b.PartitionFor(24));
  Datasource c{"r", {{"#a", "3"}}};
  EXPECT_NE(a.Key(), c.Key());
}

}  // namespace
}  // namespace sediment

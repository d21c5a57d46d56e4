#include "model/event.h"

#include <gtest/gtest.h>

#include <cstring>
#include <utility>

#include <lz4.h>
#include <zstd.h>

#include "common/checksum.h"
#include "common/coding.h"

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

// The raw ingest path encodes lines without building events: its record must be the one
// EncodeIngestMessage gives for the same events, byte for byte, with and without fields and tags,
// for empty and long lines (two-byte lengths), no lines at all, and every codec.
TEST(IngestMessage, EncodeIngestLinesIsTheRecordOfTheSameEvents) {
  const std::string long_line(300, 'x');
  const std::vector<std::vector<std::string_view>> line_sets = {
      {},
      {"one line"},
      {"a", "", long_line, "GET / HTTP/1.1 200", std::string_view("\xff\0 z", 4)}};
  const std::vector<std::vector<Field>> field_sets = {
      {}, {{"host", "web-1"}, {"sourcetype", "access"}, {"channel", std::string(200, 'c')}}};
  for (const bool tags : {false, true}) {
    Datasource ds;
    ds.repo = "logs";
    if (tags) ds.tags = {{"#host", "a"}, {"#type", "x"}};
    for (const auto& lines : line_sets) {
      for (const auto& fields : field_sets) {
        for (Codec c : {Codec::kNone, Codec::kLz4, Codec::kZstd}) {
          IngestMessage msg;
          msg.id = 0x1122334455667788ull;
          msg.datasource = ds;
          for (std::string_view line : lines) {
            msg.events.push_back(Event{-5, 1700000000123, std::string(line), fields});
          }
          EXPECT_EQ(EncodeIngestLines(msg.id, ds, -5, 1700000000123, fields, lines, c),
                    EncodeIngestMessage(msg, c))
              << lines.size() << " lines, " << fields.size() << " fields, tags " << tags
              << ", codec " << static_cast<int>(c);
        }
      }
    }
  }
}

// The record layout the commit log stores (model/README.md): magic, version 2, codec, payload
// length, CRC32C of the body, body. Checked byte for byte for the uncompressed codec, where the
// body is the payload; the compressed ones decode to the same payload (above).
TEST(IngestMessage, HeaderAndBodyLayout) {
  IngestMessage msg = Sample();
  msg.id = 7;
  const std::string enc = EncodeIngestMessage(msg, Codec::kNone);
  ASSERT_GE(enc.size(), 14u);
  EXPECT_EQ(enc.substr(0, 4), "SDIM");
  EXPECT_EQ(enc[4], 2);
  EXPECT_EQ(enc[5], static_cast<char>(Codec::kNone));
  const std::string_view body = std::string_view(enc).substr(14);
  uint32_t len, crc;
  std::memcpy(&len, enc.data() + 6, 4);
  std::memcpy(&crc, enc.data() + 10, 4);
  EXPECT_EQ(len, body.size());
  EXPECT_EQ(crc, Crc32c(body));
  std::string payload;
  PutFixed64(&payload, 7);
  PutLengthPrefixed(&payload, msg.datasource.repo);
  PutVarint64(&payload, msg.datasource.tags.size());
  for (const auto& [name, value] : msg.datasource.tags) {
    PutLengthPrefixed(&payload, name);
    PutLengthPrefixed(&payload, value);
  }
  EncodeEvents(msg.events, &payload);
  EXPECT_EQ(body, payload);
  for (Codec c : {Codec::kLz4, Codec::kZstd}) {
    const std::string z = EncodeIngestMessage(msg, c);
    std::memcpy(&len, z.data() + 6, 4);
    std::memcpy(&crc, z.data() + 10, 4);
    EXPECT_EQ(len, payload.size());
    EXPECT_EQ(crc, Crc32c(std::string_view(z).substr(14)));
  }
}

// The compressed bodies are exactly the codec's output for the payload (the record holds no slack
// and no byte of an earlier, larger message the encoder's buffer held), with any mix of sizes on
// one thread.
TEST(IngestMessage, CompressedBodyIsTheCodecOutputOfThePayload) {
  IngestMessage big = Sample();
  for (int i = 0; i < 2000; ++i) big.events.push_back(big.events[i % 50]);
  IngestMessage small = Sample();
  small.events.resize(3);
  IngestMessage empty;
  empty.datasource.repo = "web";
  for (const IngestMessage* m : {&big, &small, &empty, &big, &small}) {
    const std::string plain = EncodeIngestMessage(*m, Codec::kNone);
    const std::string_view payload = std::string_view(plain).substr(14);
    std::string lz4(static_cast<size_t>(LZ4_compressBound(static_cast<int>(payload.size()))), 0);
    lz4.resize(static_cast<size_t>(LZ4_compress_default(payload.data(), lz4.data(),
                                                        static_cast<int>(payload.size()),
                                                        static_cast<int>(lz4.size()))));
    std::string zstd(ZSTD_compressBound(payload.size()), 0);
    zstd.resize(ZSTD_compress(zstd.data(), zstd.size(), payload.data(), payload.size(), 1));
    for (auto [codec, body] : {std::pair{Codec::kLz4, &lz4}, std::pair{Codec::kZstd, &zstd}}) {
      const std::string z = EncodeIngestMessage(*m, codec);
      EXPECT_EQ(z.substr(0, 6),
                plain.substr(0, 4) + std::string(1, 2) + std::string(1, static_cast<char>(codec)));
      EXPECT_EQ(z.substr(6, 4), plain.substr(6, 4));  // payload length
      EXPECT_EQ(z.substr(14), *body);
      uint32_t crc;
      std::memcpy(&crc, z.data() + 10, 4);
      EXPECT_EQ(crc, Crc32c(*body));
      auto back = DecodeIngestMessage(z);
      ASSERT_TRUE(back.ok());
      EXPECT_EQ(back->events, m->events);
    }
  }
}

TEST(Events, DecodeAppendsAndLeavesTheVectorAsItWasOnCorruption) {
  const IngestMessage msg = Sample();
  std::string enc;
  EncodeEvents(msg.events, &enc);
  std::vector<Event> out(1);
  out[0].raw = "kept";
  std::string_view in = enc;
  ASSERT_TRUE(DecodeEvents(&in, &out).ok());
  EXPECT_TRUE(in.empty());
  ASSERT_EQ(out.size(), msg.events.size() + 1);
  EXPECT_EQ(std::vector<Event>(out.begin() + 1, out.end()), msg.events);
  for (size_t cut : {size_t{1}, enc.size() / 2, enc.size() - 1}) {
    std::vector<Event> part(1);
    part[0].raw = "kept";
    std::string_view short_in = std::string_view(enc).substr(0, cut);
    EXPECT_FALSE(DecodeEvents(&short_in, &part).ok()) << cut;
    ASSERT_EQ(part.size(), 1u) << cut;
    EXPECT_EQ(part[0].raw, "kept");
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

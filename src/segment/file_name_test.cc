// Segment file names (segment/file_name.h): the shapes sediment has always written, round trips,
// and names that must be refused.
#include "segment/file_name.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace sediment {
namespace {

// Names as the digest and merges wrote them before file_name.h existed (string concatenation in
// digest.cc and merge.cc): existing data directories and bucket objects carry them.
TEST(SegmentFileNameTest, ShapesWrittenBeforeStillParse) {
  auto flushed = ParseSegmentFileName("p3-e12-o4096-i7.seg");
  ASSERT_TRUE(flushed.ok()) << flushed.status().ToString();
  EXPECT_EQ(flushed->kind, SegmentFileKind::kFlushed);
  EXPECT_EQ(flushed->partition, PartitionId(3));
  EXPECT_EQ(flushed->epoch, Epoch(12));
  EXPECT_EQ(flushed->first, (Position{Offset(4096), 7}));

  auto rebuilt = ParseSegmentFileName("r-p0-e1-o15-i0-00c0ffee.seg");
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status().ToString();
  EXPECT_EQ(rebuilt->kind, SegmentFileKind::kRebuilt);
  EXPECT_EQ(rebuilt->partition, PartitionId(0));
  EXPECT_EQ(rebuilt->epoch, Epoch(1));
  EXPECT_EQ(rebuilt->first, (Position{Offset(15), 0}));
  EXPECT_EQ(rebuilt->random, 0x00c0ffeeu);

  auto merged = ParseSegmentFileName("m-p23-o100000-i2-n4-deadbeef.seg");
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->kind, SegmentFileKind::kMerged);
  EXPECT_EQ(merged->partition, PartitionId(23));
  EXPECT_EQ(merged->first, (Position{Offset(100000), 2}));
  EXPECT_EQ(merged->node, NodeId(4));
  EXPECT_EQ(merged->random, 0xdeadbeefu);
}

TEST(SegmentFileNameTest, BuildersWriteTheSameShapes) {
  EXPECT_EQ(FlushedSegmentFileName(PartitionId(3), Epoch(12), Position{Offset(4096), 7}),
            "p3-e12-o4096-i7.seg");
  EXPECT_EQ(RebuiltSegmentFileName(PartitionId(0), Epoch(1), Position{Offset(15), 0}, 0x00c0ffee),
            "r-p0-e1-o15-i0-00c0ffee.seg");
  EXPECT_EQ(
      MergedSegmentFileName(PartitionId(23), Position{Offset(100000), 2}, NodeId(4), 0xdeadbeef),
      "m-p23-o100000-i2-n4-deadbeef.seg");
}

TEST(SegmentFileNameTest, RoundTripOverRandomFields) {
  std::mt19937_64 rng(20261202);
  for (int i = 0; i < 3000; ++i) {
    SegmentFileName n;
    n.kind = static_cast<SegmentFileKind>(rng() % 3);
    // Small and extreme values alike.
    auto pick = [&](uint64_t max) { return rng() % 4 == 0 ? max : rng() % (max + 1) % 100000; };
    n.partition = PartitionId(static_cast<int32_t>(pick(INT32_MAX)));
    n.first = Position{Offset(static_cast<int64_t>(pick(INT64_MAX))),
                       static_cast<uint32_t>(pick(UINT32_MAX))};
    if (n.kind != SegmentFileKind::kMerged) n.epoch = Epoch(static_cast<int64_t>(pick(INT64_MAX)));
    if (n.kind == SegmentFileKind::kMerged) n.node = NodeId(static_cast<int64_t>(pick(INT64_MAX)));
    if (n.kind != SegmentFileKind::kFlushed) n.random = static_cast<uint32_t>(rng());
    const std::string name = n.Format();
    ASSERT_TRUE(IsValidSegmentFileName(name)) << name;
    auto back = ParseSegmentFileName(name);
    ASSERT_TRUE(back.ok()) << name << ": " << back.status().ToString();
    EXPECT_EQ(back->kind, n.kind) << name;
    EXPECT_EQ(back->partition, n.partition) << name;
    EXPECT_EQ(back->epoch, n.epoch) << name;
    EXPECT_EQ(back->first, n.first) << name;
    EXPECT_EQ(back->node, n.node) << name;
    EXPECT_EQ(back->random, n.random) << name;
    EXPECT_EQ(back->Format(), name);
  }
}

TEST(SegmentFileNameTest, HostileNamesAreInvalid) {
  const std::string too_long = std::string(kMaxSegmentFileNameBytes - 3, 'a') + ".seg";
  for (std::string bad : {std::string(),
                          std::string(".seg"),
                          std::string("a.se"),
                          std::string("a.seg.tmp"),
                          std::string("a.seg.tmp.3"),
                          std::string("fetched-1.tmp"),
                          std::string("p0-e1-o0-i0"),
                          std::string("../a.seg"),
                          std::string(".."),
                          std::string("a..seg"),
                          std::string("..a.seg"),
                          std::string(".hidden.seg"),
                          std::string("/a.seg"),
                          std::string("dir/a.seg"),
                          std::string("dir\\a.seg"),
                          std::string("a b.seg"),
                          std::string("a\n.seg"),
                          std::string("a\0b.seg", 7),
                          std::string("caf\xc3\xa9.seg"),
                          std::string("a.seg/"),
                          std::string("a.SEG"),
                          too_long}) {
    EXPECT_FALSE(IsValidSegmentFileName(bad)) << "'" << bad << "'";
    EXPECT_EQ(ParseSegmentFileName(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  // The longest accepted name.
  EXPECT_TRUE(IsValidSegmentFileName(too_long.substr(1)));
}

TEST(SegmentFileNameTest, ValidNamesOfOtherShapesAreValidButNotParsed) {
  for (std::string name : {"a.seg", "seg-5.seg", "merged-output.seg", "m-0.seg", "r-0.seg",
                           "p0-e1-o1000-i0-from-node-2.seg", "x_y.seg"}) {
    EXPECT_TRUE(IsValidSegmentFileName(name)) << name;
    EXPECT_EQ(ParseSegmentFileName(name).status().code(), StatusCode::kInvalidArgument) << name;
  }
}

TEST(SegmentFileNameTest, NonCanonicalNumbersAreNotParsed) {
  // Accepting them would let two names denote the same fields.
  for (std::string name :
       {"p01-e1-o0-i0.seg", "p1-e1-o00-i0.seg", "p1-e-1-o0-i0.seg", "p1-e1-o0-i0-.seg",
        "p2147483648-e1-o0-i0.seg", "p1-e1-o0-i4294967296.seg", "p1-e9223372036854775808-o0-i0.seg",
        "r-p0-e1-o15-i0-00C0FFEE.seg", "r-p0-e1-o15-i0-c0ffee.seg", "r-p0-e1-o15-i0-00c0ffee0.seg",
        "m-p0-e1-o0-i0-n1-deadbeef.seg", "m-p0-o0-i0-deadbeef.seg", "p1-e1-o0-i0.seg.seg"}) {
    EXPECT_EQ(ParseSegmentFileName(name).status().code(), StatusCode::kInvalidArgument) << name;
  }
}

}  // namespace
}  // namespace sediment

#include "coordinator/internal_query.h"

#include <gtest/gtest.h>

namespace sediment::coordinator {
namespace {

TEST(InternalQuery, RoundTripsEveryField) {
  InternalQuery q;
  q.repo = "web";
  q.query_string = "status=500 | count()";
  q.range = query::TimeRange{1000, 2000};
  q.partitions = {{PartitionId(3), Epoch(7)}, {PartitionId(0), Epoch(1)}};
  q.segments = {SegmentId(4), SegmentId(9)};
  q.segment_files = {"a.seg", "b.seg"};
  q.max_events = 50;
  q.query_id = "abc";
  q.timeout_ms = 1234;
  q.max_memory_bytes = 1 << 20;
  q.tables["t"] = query::LookupTable{{"client", "n"}, {{"c1", "3"}, {"c\"2", ""}, {}}};
  q.tables["join@7"] = query::LookupTable{{"k"}, {}};
  auto back = DecodeInternalQuery(EncodeInternalQuery(q));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->repo, q.repo);
  EXPECT_EQ(back->query_string, q.query_string);
  EXPECT_EQ(back->range.start_ms, 1000);
  EXPECT_EQ(back->range.end_ms, 2000);
  EXPECT_EQ(back->partitions, q.partitions);
  EXPECT_EQ(back->segments, q.segments);
  EXPECT_EQ(back->segment_files, q.segment_files);
  EXPECT_EQ(back->max_events, 50u);
  EXPECT_EQ(back->query_id, "abc");
  EXPECT_EQ(back->timeout_ms, 1234);
  EXPECT_EQ(back->max_memory_bytes, 1u << 20);
  EXPECT_EQ(back->tables, q.tables);
}

// A body of a coordinator from before defineTable()/join() (no "tables") still decodes, to no
// tables; a bad table entry is refused.
TEST(InternalQuery, BodiesWithoutTablesDecodeAndBadTablesAreRefused) {
  auto q = DecodeInternalQuery(
      R"({"repo":"r","queryString":"*","startMs":0,"endMs":1,"partitions":[],"segments":[3],)"
      R"("segmentFiles":["a.seg"],"queryId":"x"})");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_TRUE(q->tables.empty());
  EXPECT_EQ(q->segments, (std::vector<SegmentId>{SegmentId(3)}));
  EXPECT_NE(DecodeInternalQuery(
                R"({"repo":"r","queryString":"*","startMs":0,"endMs":1,"tables":[{"name":"t"}]})")
                .status()
                .message()
                .find("table"),
            std::string::npos);
  EXPECT_FALSE(DecodeInternalQuery(R"({"repo":"r","queryString":"*","startMs":0,"endMs":1,)"
                                   R"("tables":[{"name":"t","columns":["a"],"rows":[[1]]}]})")
                   .ok());
}

TEST(InternalQuery, DefaultsStayUnset) {
  InternalQuery q;
  q.repo = "r";
  q.query_string = "*";
  auto back = DecodeInternalQuery(EncodeInternalQuery(q));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->max_events, SIZE_MAX);
  EXPECT_EQ(back->timeout_ms, 0);
  EXPECT_EQ(back->max_memory_bytes, 0u);
  EXPECT_TRUE(back->query_id.empty());
}

TEST(InternalQuery, RefusesBadBodiesWithTheFieldNamed) {
  EXPECT_EQ(DecodeInternalQuery("[1]").status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(DecodeInternalQuery("{}").status().message().find("repo"), std::string::npos);
  EXPECT_NE(
      DecodeInternalQuery(R"({"repo":"r","queryString":"*"})").status().message().find("startMs"),
      std::string::npos);
  EXPECT_NE(DecodeInternalQuery(
                R"({"repo":"r","queryString":"*","startMs":0,"endMs":1,"partitions":[{"x":1}]})")
                .status()
                .message()
                .find("partition"),
            std::string::npos);
  // Segment files that do not match the segments are dropped rather than misattributed.
  auto q = DecodeInternalQuery(
      R"({"repo":"r","queryString":"*","startMs":0,"endMs":1,"segments":[1,2],"segmentFiles":["a"]})");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->segment_files, (std::vector<std::string>{"", ""}));
}

TEST(InternalQuery, CancelBody) {
  auto id = DecodeCancel(EncodeCancel("q-1"));
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, "q-1");
  EXPECT_FALSE(DecodeCancel(R"({"queryId":""})").ok());
  EXPECT_FALSE(DecodeCancel("nope").ok());
}

TEST(InternalQuery, IdLists) {
  EXPECT_EQ(JoinIds({}), "");
  EXPECT_EQ(JoinIds({1, 2, 3}), "1,2,3");
  EXPECT_EQ(JoinIds({1, 2, 3}, 2), "1,2,... (3 in all)");
  EXPECT_EQ(SplitIds("4,x,7"), (std::vector<int64_t>{4, 7}));
  EXPECT_EQ(SplitIds(""), (std::vector<int64_t>{}));
}

}  // namespace
}  // namespace sediment::coordinator

// The Elastic bulk and LogScale JSON parsers (parse_elastic_bulk.cc, parse_logscale_json.cc).
#include <gtest/gtest.h>

#include <string>

#include "ingest/ingest.h"

namespace sediment::ingest {
namespace {

constexpr int64_t kNow = 1700000000000;

ParseOptions Options() {
  ParseOptions o;
  o.repo = "r";
  o.now_ms = kNow;
  return o;
}

std::vector<Event> Events(const ParseResult& r) {
  std::vector<Event> out;
  for (const IngestMessage& m : r.messages) {
    EXPECT_EQ(m.datasource.repo, "r");
    for (const Event& e : m.events) out.push_back(e);
  }
  return out;
}

std::string FieldOf(const Event& e, const std::string& name) {
  for (const Field& f : e.fields) {
    if (f.name == name) return f.value;
  }
  return "<absent>";
}

TEST(ElasticBulkTest, Paths) {
  EXPECT_EQ(FormatForPath("/_bulk"), Format::kElasticBulk);
  EXPECT_EQ(FormatForPath("/api/v1/ingest/elastic-bulk"), Format::kElasticBulk);
  EXPECT_EQ(FormatForPath("/logs-2024/_bulk"), Format::kElasticBulk);
  EXPECT_EQ(FormatForPath("/a/b/_bulk"), std::nullopt);
  EXPECT_EQ(FormatForPath("//_bulk"), std::nullopt);
  EXPECT_EQ(FormatForPath("/api/v1/ingest/json"), Format::kJson);
  EXPECT_STREQ(FormatName(Format::kElasticBulk), "elastic-bulk");
  EXPECT_STREQ(FormatName(Format::kJson), "json");
}

TEST(ElasticBulkTest, IndexAndCreateBecomeEvents) {
  const std::string body =
      R"({"index":{"_index":"web","_id":"a1"}})"
      "\n"
      R"({"@timestamp":"2024-01-02T03:04:05.678Z","message":"GET / 200","http":{"status":200}})"
      "\n"
      R"({"create":{}})"
      "\r\n"
      R"({"level":"info","n":1})"
      "\n";
  ParseOptions o = Options();
  o.bulk_index = "dflt";
  auto r = ParseRequest(Format::kElasticBulk, body, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->items.size(), 2u);
  EXPECT_EQ(r->items[0].action, "index");
  EXPECT_EQ(r->items[0].index, "web");
  EXPECT_EQ(r->items[0].id, "a1");
  EXPECT_EQ(r->items[0].status, 201);
  EXPECT_EQ(r->items[1].action, "create");
  EXPECT_EQ(r->items[1].index, "dflt");   // the path's {index}
  EXPECT_EQ(r->items[1].id.size(), 20u);  // generated
  EXPECT_EQ(r->items[1].status, 201);
  auto events = Events(*r);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(r->event_count, 2u);
  // message is @rawstring; @timestamp is the event's time, not a field.
  EXPECT_EQ(events[0].raw, "GET / 200");
  EXPECT_EQ(events[0].timestamp_ms, 1704164645678);
  EXPECT_EQ(events[0].ingest_ms, kNow);
  EXPECT_EQ(FieldOf(events[0], "http.status"), "200");
  EXPECT_EQ(FieldOf(events[0], "message"), "GET / 200");
  EXPECT_EQ(FieldOf(events[0], "_index"), "web");
  EXPECT_EQ(FieldOf(events[0], "_id"), "a1");
  EXPECT_EQ(FieldOf(events[0], "@timestamp"), "<absent>");
  // Without a string message the document is the @rawstring; no @timestamp: ingest time.
  EXPECT_EQ(events[1].raw, R"({"level":"info","n":1})");
  EXPECT_EQ(events[1].timestamp_ms, kNow);
  EXPECT_EQ(FieldOf(events[1], "_id"), "<absent>");
  EXPECT_EQ(FieldOf(events[1], "_index"), "dflt");
}

TEST(ElasticBulkTest, EpochMillisTimestamp) {
  auto r =
      ParseRequest(Format::kElasticBulk,
                   "{\"index\":{}}\n{\"@timestamp\":1704164645678,\"message\":\"x\"}\n", Options());
  ASSERT_TRUE(r.ok());
  auto events = Events(*r);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].timestamp_ms, 1704164645678);
}

// A bad document in the middle: that item is refused as Elastic refuses it, the others are events.
TEST(ElasticBulkTest, BadDocumentsAreItemErrors) {
  const std::string body =
      "{\"index\":{\"_index\":\"i\"}}\n{\"message\":\"one\"}\n"
      "{\"index\":{\"_index\":\"i\"}}\n{\"message\": \"broken\n"  // not JSON
      "{\"index\":{\"_index\":\"i\"}}\n[1,2]\n"                   // not an object
      "{\"index\":{\"_index\":\"i\"}}\n{\"@timestamp\":\"yesterday\",\"message\":\"t\"}\n"
      "{\"delete\":{\"_index\":\"i\",\"_id\":\"7\"}}\n"
      "{\"update\":{\"_index\":\"i\",\"_id\":\"8\"}}\n{\"doc\":{\"a\":1}}\n"
      "{\"create\":{\"_index\":\"i\"}}\n{\"message\":\"two\"}\n";
  auto r = ParseRequest(Format::kElasticBulk, body, Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->items.size(), 7u);
  const int want_status[] = {201, 400, 400, 400, 400, 400, 201};
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(r->items[i].status, want_status[i]) << i;
  EXPECT_EQ(r->items[1].error_type, "mapper_parsing_exception");
  EXPECT_EQ(r->items[1].error_reason, "failed to parse");
  EXPECT_EQ(r->items[1].cause_type, "json_parse_exception");
  EXPECT_EQ(r->items[2].error_type, "mapper_parsing_exception");
  EXPECT_EQ(r->items[2].cause_type, "not_x_content_exception");
  EXPECT_EQ(r->items[3].error_type, "mapper_parsing_exception");
  EXPECT_NE(r->items[3].error_reason.find("[@timestamp]"), std::string::npos);
  EXPECT_EQ(r->items[4].action, "delete");
  EXPECT_EQ(r->items[4].id, "7");
  EXPECT_EQ(r->items[4].error_type, "illegal_argument_exception");
  EXPECT_EQ(r->items[5].action, "update");
  EXPECT_EQ(r->items[5].error_type, "illegal_argument_exception");
  auto events = Events(*r);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].raw, "one");
  EXPECT_EQ(events[1].raw, "two");
}

TEST(ElasticBulkTest, OversizedDocumentIsAnItemError) {
  ParseOptions o = Options();
  o.max_event_bytes = 100;
  const std::string big(200, 'x');
  auto r =
      ParseRequest(Format::kElasticBulk,
                   "{\"index\":{}}\n{\"message\":\"" + big + "\"}\n{\"index\":{}}\n{\"a\":1}\n", o);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->items.size(), 2u);
  EXPECT_EQ(r->items[0].status, 400);
  EXPECT_EQ(r->items[0].error_type, "illegal_argument_exception");
  EXPECT_EQ(r->items[1].status, 201);
  EXPECT_EQ(Events(*r).size(), 1u);
}

// What is not a bulk body at all is refused whole (nothing appended).
TEST(ElasticBulkTest, MalformedBodiesAreRefused) {
  for (const char* body : {
           "not json\n{\"a\":1}\n",
           "{\"index\":{}}\n{\"a\":1}\n{\"frobnicate\":{}}\n{\"a\":1}\n",  // unknown action
           "{\"index\":{},\"create\":{}}\n{\"a\":1}\n",                    // two actions
           "{\"index\":{}}\n",                                             // no source line
           "{\"index\":[]}\n{\"a\":1}\n",
           "{\"index\":{\"_index\":{}}}\n{\"a\":1}\n",
           "[]\n",
       }) {
    auto r = ParseRequest(Format::kElasticBulk, body, Options());
    EXPECT_FALSE(r.ok()) << body;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << body;
    }
  }
  // Blank: zero items (the route answers Elastic's "no requests added").
  auto r = ParseRequest(Format::kElasticBulk, " \n", Options());
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->items.empty());
}

TEST(LogScaleJsonTest, ObjectOrArray) {
  auto one = ParseRequest(Format::kJson, R"({"msg":"event 1","a":{"b":[1,true]}})", Options());
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  auto events = Events(*one);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].raw, R"({"msg":"event 1","a":{"b":[1,true]}})");
  EXPECT_EQ(events[0].timestamp_ms, kNow);  // LogScale: ingest time unless a parser sets one
  EXPECT_EQ(FieldOf(events[0], "msg"), "event 1");
  EXPECT_EQ(FieldOf(events[0], "a.b[1]"), "true");

  auto many = ParseRequest(Format::kJson, R"([{"msg":"event 1"}, {"msg":"event 2"}])", Options());
  ASSERT_TRUE(many.ok());
  events = Events(*many);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(FieldOf(events[1], "msg"), "event 2");
  EXPECT_TRUE(many->items.empty());
}

TEST(LogScaleJsonTest, Refusals) {
  for (const char* body : {"[{\"a\":1}, 2]", "\"text\"", "12", "{\"a\":", "[{\"a\":1}] x"}) {
    auto r = ParseRequest(Format::kJson, body, Options());
    EXPECT_FALSE(r.ok()) << body;
  }
  ParseOptions o = Options();
  o.max_fields_per_event = 2;
  auto r = ParseRequest(Format::kJson, R"({"a":1,"b":2,"c":3})", o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kTooLarge);
}

}  // namespace
}  // namespace sediment::ingest

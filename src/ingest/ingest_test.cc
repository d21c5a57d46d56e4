#include "ingest/ingest.h"

#include <gtest/gtest.h>

#include <deque>
#include <future>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include "common/clock.h"

namespace sediment::ingest {
namespace {

constexpr int64_t kNow = 1700000999000;
constexpr int64_t kIsoMs = 1704164645678;  // 2024-01-02T03:04:05.678Z

ParseOptions Opts() {
  ParseOptions o;
  o.repo = "web";
  o.now_ms = kNow;
  return o;
}

std::vector<Field> F(std::initializer_list<std::pair<const char*, const char*>> kv) {
  std::vector<Field> out;
  for (auto& [k, v] : kv) out.push_back(Field{k, v});
  return out;
}

ParseResult MustParse(Format f, std::string_view body, const ParseOptions& o = Opts()) {
  auto r = ParseRequest(f, body, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString() << "\nbody: " << body;
  if (!r.ok()) return {};
  return std::move(r).value();
}

TEST(IngestStructured, HappyPath) {
  const char* body = R"([
    {"tags": {"host": "h1", "#env": "prod"},
     "events": [
       {"timestamp": "2024-01-02T03:04:05.678Z",
        "attributes": {"s": "str", "n": 12, "f": 1.5, "b": true, "z": null,
                       "a": {"b": {"c": "deep"}}, "arr": [1, "x", {"k": false}],
                       "eo": {}, "ea": []}},
       {"timestamp": 1700000000123, "timezone": "Europe/Oslo", "rawstring": "line two",
        "attributes": {"k": "v"}}
     ]},
    {"events": [{"timestamp": 1700000000}]}
  ])";
  ParseResult r = MustParse(Format::kHumioStructured, body);
  EXPECT_EQ(r.event_count, 3u);
  ASSERT_EQ(r.messages.size(), 2u);

  const IngestMessage& m0 = r.messages[0];
  EXPECT_EQ(m0.datasource.repo, "web");
  EXPECT_EQ(m0.datasource.tags,
            (std::vector<std::pair<std::string, std::string>>{{"#env", "prod"}, {"#host", "h1"}}));
  ASSERT_EQ(m0.events.size(), 2u);
  const Event& e0 = m0.events[0];
  EXPECT_EQ(e0.timestamp_ms, kIsoMs);
  EXPECT_EQ(e0.ingest_ms, kNow);
  EXPECT_EQ(e0.fields, F({{"s", "str"},
                          {"n", "12"},
                          {"f", "1.5"},
                          {"b", "true"},
                          {"z", "null"},
                          {"a.b.c", "deep"},
                          {"arr[0]", "1"},
                          {"arr[1]", "x"},
                          {"arr[2].k", "false"},
                          {"eo", "{}"},
                          {"ea", "[]"}}));
  // No rawstring: the attributes object as compact JSON.
  EXPECT_EQ(e0.raw, R"({"s":"str","n":12,"f":1.5,"b":true,"z":null,"a":{"b":{"c":"deep"}},)"
                    R"("arr":[1,"x",{"k":false}],"eo":{},"ea":[]})");
  const Event& e1 = m0.events[1];
  EXPECT_EQ(e1.timestamp_ms, 1700000000123);
  EXPECT_EQ(e1.raw, "line two");
  EXPECT_EQ(e1.fields, F({{"k", "v"}, {"@timezone", "Europe/Oslo"}}));

  const IngestMessage& m1 = r.messages[1];
  EXPECT_TRUE(m1.datasource.tags.empty());
  ASSERT_EQ(m1.events.size(), 1u);
  EXPECT_EQ(m1.events[0].timestamp_ms, 1700000000000);
  EXPECT_EQ(m1.events[0].raw, "");
  EXPECT_TRUE(m1.events[0].fields.empty());
}

TEST(IngestStructured, MissingTimestampIsNow) {
  ParseResult r = MustParse(Format::kHumioStructured, R"([{"events":[{"attributes":{"x":"1"}}]}])");
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].events[0].timestamp_ms, kNow);
  EXPECT_EQ(r.messages[0].events[0].raw, R"({"x":"1"})");
}

TEST(IngestStructured, TimestampForms) {
  struct Case {
    const char* json;
    int64_t want;
  } cases[] = {
      {R"("2024-01-02T03:04:05.678Z")", kIsoMs},
      {R"("2024-01-02T05:04:05.678+02:00")", kIsoMs},
      {R"("2024-01-01T22:04:05.678-05:00")", kIsoMs},
      {R"("2024-01-02T03:04:05.678912Z")", kIsoMs},
      {"1700000000", 1700000000000},           // epoch seconds
      {"1700000000123", 1700000000123},        // epoch ms
      {"1700000000.5", 1700000000500},         // fractional seconds
      {"1700000000.123", 1700000000123},       // rounded to the nearest ms
      {"1700000000123.9", 1700000000123},      // fractional ms truncated
      {R"("1700000000.123")", 1700000000123},  // numeric string, seconds
      {R"("1700000000123")", 1700000000123},   // numeric string, ms
      {"0", 0},
  };
  for (const Case& c : cases) {
    std::string body =
        std::string(R"([{"events":[{"timestamp":)") + c.json + R"(,"rawstring":"x"}]}])";
    ParseResult r = MustParse(Format::kHumioStructured, body);
    ASSERT_EQ(r.messages.size(), 1u) << c.json;
    EXPECT_EQ(r.messages[0].events[0].timestamp_ms, c.want) << c.json;
  }
}

TEST(IngestStructured, TagsGroupDatasourcesInRequestOrder) {
  const char* body = R"([
    {"tags": {"a": "1", "b": "2"}, "events": [{"rawstring": "e1"}]},
    {"tags": {"a": "9"}, "events": [{"rawstring": "x1"}]},
    {"tags": {"#b": "2", "#a": "1", "#repo": "web"}, "events": [{"rawstring": "e2"}]}
  ])";
  ParseResult r = MustParse(Format::kHumioStructured, body);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].datasource.tags,
            (std::vector<std::pair<std::string, std::string>>{{"#a", "1"}, {"#b", "2"}}));
  ASSERT_EQ(r.messages[0].events.size(), 2u);
  EXPECT_EQ(r.messages[0].events[0].raw, "e1");
  EXPECT_EQ(r.messages[0].events[1].raw, "e2");
  EXPECT_EQ(r.messages[1].events[0].raw, "x1");
}

TEST(IngestStructured, DuplicateFieldNamesLastValueWins) {
  ParseResult r = MustParse(Format::kHumioStructured,
                            R"([{"events":[{"attributes":{"a.b":"1","a":{"b":"2"},"c":"3"}}]}])");
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].events[0].fields, F({{"a.b", "2"}, {"c", "3"}}));
}

TEST(IngestStructured, ManyFieldsDedup) {
  std::string attrs;
  for (int i = 0; i < 40; ++i) attrs += "\"k" + std::to_string(i) + "\":\"v\",";
  attrs += R"("k3":"last")";
  ParseResult r =
      MustParse(Format::kHumioStructured, "[{\"events\":[{\"attributes\":{" + attrs + "}}]}]");
  const Event& e = r.messages[0].events[0];
  ASSERT_EQ(e.fields.size(), 40u);
  EXPECT_EQ(e.fields[3], (Field{"k3", "last"}));
  EXPECT_EQ(e.fields[39], (Field{"k39", "v"}));
}

TEST(IngestUnstructured, HappyPath) {
  const char* body = R"([
    {"fields": {"host": "web-1", "n": 3}, "tags": {"dc": "eu"}, "type": "accesslog",
     "messages": ["GET / 200", "GET /x 404"]},
    {"messages": ["plain"]}
  ])";
  ParseResult r = MustParse(Format::kHumioUnstructured, body);
  EXPECT_EQ(r.event_count, 3u);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].datasource.tags, (std::vector<std::pair<std::string, std::string>>{
                                               {"#dc", "eu"}, {"#type", "accesslog"}}));
  ASSERT_EQ(r.messages[0].events.size(), 2u);
  for (const Event& e : r.messages[0].events) {
    EXPECT_EQ(e.timestamp_ms, kNow);
    EXPECT_EQ(e.ingest_ms, kNow);
    EXPECT_EQ(e.fields, F({{"host", "web-1"}, {"n", "3"}}));
  }
  EXPECT_EQ(r.messages[0].events[0].raw, "GET / 200");
  EXPECT_EQ(r.messages[0].events[1].raw, "GET /x 404");
  EXPECT_TRUE(r.messages[1].datasource.tags.empty());
  EXPECT_EQ(r.messages[1].events[0].raw, "plain");
  EXPECT_TRUE(r.messages[1].events[0].fields.empty());
}

TEST(IngestRaw, OneEventPerLine) {
  ParseResult r = MustParse(Format::kRaw, "first\r\n\nsecond line\n\r\nthird");
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].datasource.repo, "web");
  EXPECT_TRUE(r.messages[0].datasource.tags.empty());
  ASSERT_EQ(r.messages[0].events.size(), 3u);
  EXPECT_EQ(r.event_count, 3u);
  const char* want[] = {"first", "second line", "third"};
  for (size_t i = 0; i < 3; ++i) {
    const Event& e = r.messages[0].events[i];
    EXPECT_EQ(e.raw, want[i]);
    EXPECT_EQ(e.timestamp_ms, kNow);
    EXPECT_EQ(e.ingest_ms, kNow);
    EXPECT_TRUE(e.fields.empty());
  }
}

TEST(IngestHecRaw, LinesWithParams) {
  ParseOptions o = Opts();
  o.params = {{"host", "h"}, {"source", "/var/log/a"}, {"sourcetype", "st"}, {"other", "x"}};
  ParseResult r = MustParse(Format::kHecRaw, "a\rb\r\nc\n", o);
  ASSERT_EQ(r.messages.size(), 1u);
  ASSERT_EQ(r.messages[0].events.size(), 3u);
  EXPECT_EQ(r.messages[0].events[0].raw, "a");
  EXPECT_EQ(r.messages[0].events[1].raw, "b");
  EXPECT_EQ(r.messages[0].events[2].raw, "c");
  EXPECT_EQ(r.messages[0].events[2].fields,
            F({{"host", "h"}, {"source", "/var/log/a"}, {"sourcetype", "st"}}));
  EXPECT_EQ(r.messages[0].events[2].timestamp_ms, kNow);
}

// Several '\r' breaks before one '\n' (the next '\n' is found once and remembered), an empty
// line between, and a last line without a break.
TEST(IngestHecRaw, ManyCarriageReturnsBeforeANewline) {
  ParseResult r = MustParse(Format::kHecRaw, "x\ry\rz\r\n\rw\n\nlast", Opts());
  ASSERT_EQ(r.messages.size(), 1u);
  std::vector<std::string> got;
  for (const Event& e : r.messages[0].events) got.push_back(e.raw);
  EXPECT_EQ(got, (std::vector<std::string>{"x", "y", "z", "w", "last"}));
  // Raw: only '\n' breaks a line; a '\r' before it is dropped, others stay.
  r = MustParse(Format::kRaw, "a\rb\r\nc", Opts());
  got.clear();
  for (const Event& e : r.messages[0].events) got.push_back(e.raw);
  EXPECT_EQ(got, (std::vector<std::string>{"a\rb", "c"}));
}

TEST(IngestHec, EventsStringAndObject) {
  const char* body =
      R"({"time": 1700000000.123, "host": "h1", "source": "s1", "sourcetype": "st1",)"
      R"( "index": "web", "fields": {"region": "eu", "n": 5}, "event": "hello world"})"
      "\n"
      R"({"time":"1700000001.5","event":{"msg":"m","nested":{"x":[1,2]}}}{"event":"third"})";
  ParseResult r = MustParse(Format::kHecEvent, body);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_TRUE(r.messages[0].datasource.tags.empty());
  ASSERT_EQ(r.messages[0].events.size(), 3u);
  const Event& a = r.messages[0].events[0];
  EXPECT_EQ(a.timestamp_ms, 1700000000123);
  EXPECT_EQ(a.ingest_ms, kNow);
  EXPECT_EQ(a.raw, "hello world");
  EXPECT_EQ(
      a.fields,
      F({{"region", "eu"}, {"n", "5"}, {"host", "h1"}, {"source", "s1"}, {"sourcetype", "st1"}}));
  const Event& b = r.messages[0].events[1];
  EXPECT_EQ(b.timestamp_ms, 1700000001500);
  EXPECT_EQ(b.raw, R"({"msg":"m","nested":{"x":[1,2]}})");
  EXPECT_EQ(b.fields, F({{"msg", "m"}, {"nested.x[0]", "1"}, {"nested.x[1]", "2"}}));
  const Event& c = r.messages[0].events[2];
  EXPECT_EQ(c.timestamp_ms, kNow);
  EXPECT_EQ(c.raw, "third");
  EXPECT_TRUE(c.fields.empty());
}

TEST(IngestHec, TimeForms) {
  struct Case {
    const char* json;
    int64_t want;
  } cases[] = {
      {"1700000000", 1700000000000},
      {"1700000000.123", 1700000000123},
      {R"("1700000000")", 1700000000000},
      {R"("1700000000.123")", 1700000000123},
      {R"("1700000000.1239")", 1700000000123},
      {"1.7e9", 1700000000000},
      {R"(" 1700000000")", -1},  // not a number: rejected below
  };
  for (const Case& c : cases) {
    std::string body = std::string(R"({"event":"x","time":)") + c.json + "}";
    auto r = ParseRequest(Format::kHecEvent, body, Opts());
    if (c.want < 0) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.json;
      continue;
    }
    ASSERT_TRUE(r.ok()) << c.json << ": " << r.status().ToString();
    EXPECT_EQ(r->messages[0].events[0].timestamp_ms, c.want) << c.json;
  }
}

TEST(IngestHec, ParamsAreDefaultsEnvelopeWins) {
  ParseOptions o = Opts();
  o.params = {{"host", "ph"}, {"sourcetype", "pst"}, {"channel", "ch"}};
  ParseResult r = MustParse(Format::kHecEvent, R"({"event":"e","host":"eh"})", o);
  EXPECT_EQ(r.messages[0].events[0].fields,
            F({{"host", "eh"}, {"sourcetype", "pst"}, {"channel", "ch"}}));
}

TEST(Ingest, EmptyRequests) {
  for (Format f : {Format::kHumioStructured, Format::kHumioUnstructured, Format::kRaw,
                   Format::kHecEvent, Format::kHecRaw}) {
    for (const char* body : {"", "  \n", "\n\n"}) {
      ParseResult r = MustParse(f, body);
      EXPECT_TRUE(r.messages.empty()) << FormatName(f);
      EXPECT_EQ(r.event_count, 0u);
    }
  }
  EXPECT_TRUE(MustParse(Format::kHumioStructured, "[]").messages.empty());
  EXPECT_TRUE(MustParse(Format::kHumioStructured, R"([{"events":[]}])").messages.empty());
  EXPECT_TRUE(MustParse(Format::kHumioUnstructured, R"([{"messages":[]}])").messages.empty());
}

TEST(Ingest, BadBodies) {
  struct Case {
    Format format;
    std::string body;
    StatusCode code;
    const char* substring;
  } cases[] = {
      {Format::kHumioStructured, "[{\"events\": [", StatusCode::kInvalidArgument, "malformed JSON"},
      {Format::kHumioStructured, R"({"events": []})", StatusCode::kInvalidArgument,
       "expected a JSON array of batches, got an object"},
      {Format::kHumioStructured, R"([5])", StatusCode::kInvalidArgument,
       "batch 0: expected an object, got a number"},
      {Format::kHumioStructured, R"([{"events": {}}])", StatusCode::kInvalidArgument,
       "batch 0: 'events' must be an array, got an object"},
      {Format::kHumioStructured, R"([{"tags": {}}])", StatusCode::kInvalidArgument,
       "batch 0: missing 'events' array"},
      {Format::kHumioStructured, R"([{"events": []}, {"events": [{}, "x"]}])",
       StatusCode::kInvalidArgument, "event 1 of batch 1: expected an object, got a string"},
      {Format::kHumioStructured, R"([{"events": [{}, {}, {}, {"timestamp": "abc"}]}])",
       StatusCode::kInvalidArgument,
       "event 3 of batch 0: timestamp 'abc' is not ISO-8601 or epoch"},
      {Format::kHumioStructured, R"([{"events": [{"timestamp": "2024-13-01T00:00:00Z"}]}])",
       StatusCode::kInvalidArgument, "event 0 of batch 0: timestamp '2024-13-01T00:00:00Z'"},
      {Format::kHumioStructured, R"([{"events": [{"timestamp": true}]}])",
       StatusCode::kInvalidArgument, "timestamp must be a string or a number, got a boolean"},
      {Format::kHumioStructured, R"([{"events": [{"timestamp": 1e300}]}])",
       StatusCode::kInvalidArgument, "event 0 of batch 0: timestamp 1e+300 is out of range"},
      {Format::kHumioStructured, R"([{"events": [{"attributes": [1]}]}])",
       StatusCode::kInvalidArgument, "'attributes' must be an object, got an array"},
      {Format::kHumioStructured, R"([{"events": [{"rawstring": 5}]}])",
       StatusCode::kInvalidArgument, "'rawstring' must be a string, got a number"},
      {Format::kHumioStructured, R"([{"tags": [], "events": []}])", StatusCode::kInvalidArgument,
       "batch 0: 'tags' must be an object"},
      {Format::kHumioStructured, R"([{"tags": {"a": {"b": 1}}, "events": []}])",
       StatusCode::kInvalidArgument, "batch 0: tag 'a' must be a string, got an object"},
      {Format::kHumioStructured, R"([{"tags": {"repo": "other"}, "events": []}])",
       StatusCode::kInvalidArgument, "does not match the token's repository 'web'"},
      {Format::kHumioStructured, R"([{"events": [{"x": tru}]}])", StatusCode::kInvalidArgument,
       "malformed JSON"},
      {Format::kHumioUnstructured, R"({"messages": []})", StatusCode::kInvalidArgument,
       "expected a JSON array of batches"},
      {Format::kHumioUnstructured, R"([{"messages": "x"}])", StatusCode::kInvalidArgument,
       "batch 0: 'messages' must be an array, got a string"},
      {Format::kHumioUnstructured, R"([{"fields": {}}])", StatusCode::kInvalidArgument,
       "batch 0: missing 'messages' array"},
      {Format::kHumioUnstructured, R"([{"messages": ["a", {"b": 1}]}])",
       StatusCode::kInvalidArgument, "message 1 of batch 0: expected a string, got an object"},
      {Format::kHumioUnstructured, R"([{"messages": [], "type": 3}])", StatusCode::kInvalidArgument,
       "batch 0: 'type' must be a string"},
      {Format::kHumioUnstructured, R"([{"messages": [], "fields": "x"}])",
       StatusCode::kInvalidArgument, "batch 0: 'fields' must be an object"},
      {Format::kHecEvent, R"({"time": 1})", StatusCode::kInvalidArgument,
       "event 0: Event field is required"},
      {Format::kHecEvent, R"({"event": "a"} {"event": null})", StatusCode::kInvalidArgument,
       "event 1: Event field cannot be blank"},
      {Format::kHecEvent, R"({"event": ""})", StatusCode::kInvalidArgument,
       "event 0: Event field cannot be blank"},
      {Format::kHecEvent, R"({"event": "a"} {"event": "b")", StatusCode::kInvalidArgument,
       "event 1: truncated JSON object"},
      {Format::kHecEvent, R"({"event": "a"}, {"event": "b"})", StatusCode::kInvalidArgument,
       "event 1: expected a JSON object, found ', {"},
      {Format::kHecEvent, R"([{"event": "a"}])", StatusCode::kInvalidArgument,
       "event 0: expected a JSON object"},
      {Format::kHecEvent, R"({"event": "a" "x": 1})", StatusCode::kInvalidArgument,
       "event 0: malformed JSON"},
      {Format::kHecEvent, R"({"event": "a", "time": "abc"})", StatusCode::kInvalidArgument,
       "event 0: time 'abc' is not epoch seconds"},
      {Format::kHecEvent, R"({"event": "a", "time": [1]})", StatusCode::kInvalidArgument,
       "event 0: time must be a string or a number, got an array"},
      {Format::kHecEvent, R"({"event": "a", "time": 99999999999999})", StatusCode::kInvalidArgument,
       "event 0: time 99999999999999 is out of range"},
      {Format::kHecEvent, R"({"event": "a", "fields": [1]})", StatusCode::kInvalidArgument,
       "event 0: 'fields' must be an object, got an array"},
      {Format::kHecEvent, R"({"event": "a", "host": {"x": 1}})", StatusCode::kInvalidArgument,
       "event 0: 'host' must be a string, got an object"},
  };
  for (const Case& c : cases) {
    auto r = ParseRequest(c.format, c.body, Opts());
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), c.code) << c.body << " -> " << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.substring), std::string::npos)
        << c.body << " -> " << r.status().message() << "\nwanted: " << c.substring;
  }
}

// Splunk answers code 12 (not 6) for an event object without "event" and code 13 for a blank
// one: the server tells them from the subcode, never from the message.
TEST(Ingest, AMissingEventFieldHasItsOwnSubcode) {
  auto missing = ParseRequest(Format::kHecEvent, R"({"time": 1})", Opts());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().subcode(), StatusSubcode::kEventFieldRequired);
  for (const char* body :
       {R"({"event": ""})", R"({"event": null})", R"({"event": "a"}{"event": ""})"}) {
    auto blank = ParseRequest(Format::kHecEvent, body, Opts());
    ASSERT_FALSE(blank.ok()) << body;
    EXPECT_EQ(blank.status().subcode(), StatusSubcode::kEventFieldBlank) << body;
  }
  auto malformed = ParseRequest(Format::kHecEvent, R"({"event": 1)", Opts());
  ASSERT_FALSE(malformed.ok());
  EXPECT_EQ(malformed.status().subcode(), StatusSubcode::kNone);
}

TEST(Ingest, TooLargeNamesTheEvent) {
  ParseOptions o = Opts();
  o.max_event_bytes = 100;
  std::string big(101, 'x');
  struct Case {
    Format format;
    std::string body;
    const char* substring;
  } cases[] = {
      {Format::kRaw, "ok\n\n" + big + "\n", "line 2: @rawstring of 101 bytes"},
      {Format::kHecRaw, "ok\n" + big, "line 1: @rawstring of 101 bytes"},
      {Format::kHecEvent, R"({"event":"a"}{"event":")" + big + "\"}",
       "event 1: @rawstring of 101 bytes"},
      {Format::kHumioStructured, R"([{"events":[{"rawstring":")" + big + "\"}]}]",
       "event 0 of batch 0: @rawstring of 101 bytes"},
      {Format::kHumioUnstructured, R"([{"messages":["a",")" + big + "\"]}]",
       "message 1 of batch 0: @rawstring of 101 bytes"},
      // Raw text fits, fields push the event over the limit.
      {Format::kHumioStructured,
       R"([{"events":[{"rawstring":"r","attributes":{"k":")" + std::string(80, 'v') + "\"}}]}]",
       "event 0 of batch 0: event of 110 bytes exceeds the event limit of 100 bytes"},
  };
  for (const Case& c : cases) {
    auto r = ParseRequest(c.format, c.body, o);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), StatusCode::kTooLarge) << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.substring), std::string::npos)
        << r.status().message() << "\nwanted: " << c.substring;
  }
  std::string exact(100 - 24, 'y');  // ByteSize() == 100 is allowed
  EXPECT_TRUE(ParseRequest(Format::kRaw, exact, o).ok());
}

// A small body that expands when flattened: every key is repeated in the name of every field
// below it, so depth D under keys of K bytes makes names of D*K bytes. Before the flattener kept
// a running count, a 411 KB body of this shape built a 200 MB event before the size check.
std::string NestedBody(int depth, size_t key_bytes, int leaves_per_level) {
  const std::string key(key_bytes, 'k');
  std::string open, close;
  for (int d = 0; d < depth; ++d) {
    open += "{";
    for (int l = 0; l < leaves_per_level; ++l) open += "\"l" + std::to_string(l) + "\":1,";
    open += "\"" + key + "\":";
    close += "}";
  }
  return R"([{"events":[{"attributes":)" + open + "1" + close + "}]}]";
}

TEST(Ingest, FlatteningStopsAtTheDepthBound) {
  ParseOptions o = Opts();
  o.max_json_depth = 5;
  auto r = ParseRequest(Format::kHumioStructured, NestedBody(6, 1, 0), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kTooLarge);
  EXPECT_NE(r.status().message().find("event 0 of batch 0: fields nested deeper than the limit "
                                      "of 5 levels (--max-json-depth)"),
            std::string::npos)
      << r.status().message();
  // attributes {k:{k:{k:{k:{k:1}}}}}: the field k.k.k.k.k is 5 levels deep, which is allowed.
  ParseResult ok = MustParse(Format::kHumioStructured, NestedBody(5, 1, 0), o);
  EXPECT_EQ(ok.messages[0].events[0].fields[0].name, "k.k.k.k.k");
  // Arrays count as levels too.
  auto arrays = ParseRequest(Format::kHumioStructured,
                             R"([{"events":[{"attributes":{"a":[[[[[[1]]]]]]}}]}])", o);
  EXPECT_EQ(arrays.status().code(), StatusCode::kTooLarge);
}

TEST(Ingest, FlatteningStopsAtTheByteBoundBeforeBuildingTheEvent) {
  ParseOptions o = Opts();
  o.max_json_depth = 100000;
  o.max_event_bytes = 1 << 20;
  // 300 levels under 1000-byte keys with 20 leaves per level: 300 KB of body, ~900 MB of names.
  const std::string body = NestedBody(300, 1000, 20);
  ASSERT_LT(body.size(), 400000u);
  const auto start = std::chrono::steady_clock::now();
  auto r = ParseRequest(Format::kHumioStructured, body, o);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kTooLarge);
  EXPECT_NE(r.status().message().find("exceed the event limit of 1048576 bytes once flattened "
                                      "(--max-event-bytes)"),
            std::string::npos)
      << r.status().message();
  // Printed, not asserted: the work stops at the bound (a few ms), not after ~900 MB.
  std::printf(
      "nested body of %zu bytes refused after %lld ms\n", body.size(),
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
}

TEST(Ingest, FlatteningStopsAtTheFieldBound) {
  ParseOptions o = Opts();
  o.max_fields_per_event = 10;
  auto attrs = [](int n) {
    std::string a;
    for (int i = 0; i < n; ++i) a += (i ? "," : "") + ("\"k" + std::to_string(i) + "\":1");
    return "{" + a + "}";
  };
  EXPECT_TRUE(ParseRequest(Format::kHumioStructured,
                           R"([{"events":[{"attributes":)" + attrs(10) + "}]}]", o)
                  .ok());
  auto r = ParseRequest(Format::kHumioStructured,
                        R"([{"events":[{"attributes":)" + attrs(11) + "}]}]", o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kTooLarge);
  EXPECT_NE(r.status().message().find("more fields than the limit of 10 per event "
                                      "(--max-fields-per-event)"),
            std::string::npos)
      << r.status().message();
  // HEC: the event object and the envelope's 'fields' share one event's bounds (6 + 5 > 10).
  auto hec = ParseRequest(Format::kHecEvent,
                          R"({"event":)" + attrs(6) + R"(,"fields":)" + attrs(5) + "}", o);
  EXPECT_EQ(hec.status().code(), StatusCode::kTooLarge) << hec.status().ToString();
  EXPECT_NE(hec.status().message().find("event 0 'fields': more fields"), std::string::npos)
      << hec.status().message();
  // humio-unstructured: a batch's 'fields'.
  auto un = ParseRequest(Format::kHumioUnstructured,
                         R"([{"fields":)" + attrs(11) + R"(,"messages":["m"]}])", o);
  EXPECT_EQ(un.status().code(), StatusCode::kTooLarge) << un.status().ToString();
}

TEST(Ingest, SplitsMessagesBySize) {
  ParseOptions o = Opts();
  o.max_message_bytes = 1000;
  std::string body;
  const int n = 95;
  for (int i = 0; i < n; ++i) {
    std::string line = "event-" + std::to_string(i) + "-";
    line.resize(76, 'p');  // ByteSize() == 100
    body += line + "\n";
  }
  ParseResult r = MustParse(Format::kRaw, body, o);
  EXPECT_EQ(r.event_count, static_cast<size_t>(n));
  ASSERT_EQ(r.messages.size(), 10u);  // 9 x 10 events + 5
  int next = 0;
  for (size_t m = 0; m < r.messages.size(); ++m) {
    size_t bytes = 0;
    for (const Event& e : r.messages[m].events) {
      bytes += e.ByteSize();
      EXPECT_EQ(e.raw.substr(0, e.raw.find('-', 6) + 1), "event-" + std::to_string(next) + "-");
      ++next;
    }
    EXPECT_LE(bytes, o.max_message_bytes);
    EXPECT_EQ(r.messages[m].events.size(), m + 1 < r.messages.size() ? 10u : 5u);
    EXPECT_EQ(r.messages[m].datasource.repo, "web");
  }
  EXPECT_EQ(next, n);
}

TEST(Ingest, OversizeEventGetsItsOwnMessage) {
  ParseOptions o = Opts();
  o.max_message_bytes = 50;
  ParseResult r = MustParse(Format::kRaw, std::string(60, 'a') + "\nb\nc\n", o);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].events.size(), 1u);
  EXPECT_EQ(r.messages[1].events.size(), 2u);
}

TEST(Ingest, FormatForPath) {
  EXPECT_EQ(FormatForPath("/api/v1/ingest/humio-structured"), Format::kHumioStructured);
  EXPECT_EQ(FormatForPath("/api/v1/ingest/humio-unstructured/"), Format::kHumioUnstructured);
  EXPECT_EQ(FormatForPath("/api/v1/ingest/raw"), Format::kRaw);
  EXPECT_EQ(FormatForPath("/api/v1/ingest/hec"), Format::kHecEvent);
  EXPECT_EQ(FormatForPath("/services/collector"), Format::kHecEvent);
  EXPECT_EQ(FormatForPath("/services/collector/event"), Format::kHecEvent);
  EXPECT_EQ(FormatForPath("/api/v1/ingest/hec/raw"), Format::kHecRaw);
  EXPECT_EQ(FormatForPath("/services/collector/raw"), Format::kHecRaw);
  EXPECT_EQ(FormatForPath("/services/collector/health"), std::nullopt);
  EXPECT_EQ(FormatForPath("/api/v1/ingest/json"), Format::kJson);  // issue 18
  EXPECT_EQ(FormatForPath("/api/v1/ingest/nothing"), std::nullopt);
}

// In-memory commit log. Appends complete on a background thread after a short delay, so
// AppendAll must really wait. Appends whose number is in `fail_at` fail with IOError.
class FakeLog : public CommitLog {
 public:
  explicit FakeLog(int32_t partitions, std::vector<int> fail_at = {})
      : partitions_(partitions), fail_at_(std::move(fail_at)), records_(partitions) {}
  ~FakeLog() override {
    for (auto& t : threads_) t.join();
  }

  int32_t partition_count() const override { return partitions_; }

  std::future<Result<Offset>> Append(PartitionId p, std::string record) override {
    std::lock_guard<std::mutex> lock(mu_);
    int n = appends_++;
    bool fail = std::find(fail_at_.begin(), fail_at_.end(), n) != fail_at_.end();
    auto promise = std::make_shared<std::promise<Result<Offset>>>();
    auto future = promise->get_future();
    threads_.emplace_back([this, p, n, fail, promise, rec = std::move(record)]() mutable {
      std::this_thread::sleep_for(std::chrono::milliseconds(5 * (n % 3 + 1)));
      if (fail) {
        completed_++;
        promise->set_value(Status::IOError("disk on fire"));
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      auto& part = records_[p.value];
      Offset off(static_cast<int64_t>(part.size()));
      part.push_back(LogRecord{off, std::move(rec)});
      completed_++;
      promise->set_value(off);
    });
    return future;
  }

  Result<std::vector<LogRecord>> Read(PartitionId p, Offset from, size_t,
                                      std::chrono::milliseconds) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<LogRecord> out;
    for (const auto& r : records_[p.value]) {
      if (r.offset >= from) out.push_back(r);
    }
    return out;
  }
  Status DeleteBefore(PartitionId, Offset) override { return Status::OK(); }
  Result<Offset> StartOffset(PartitionId) override { return Offset(0); }
  Result<Offset> EndOffset(PartitionId p) override {
    std::lock_guard<std::mutex> lock(mu_);
    return Offset(static_cast<int64_t>(records_[p.value].size()));
  }
  std::string Health() override { return "ok"; }

  int appends() const { return appends_; }
  int completed() const { return completed_.load(); }

 private:
  int32_t partitions_;
  std::vector<int> fail_at_;
  std::mutex mu_;
  std::vector<std::vector<LogRecord>> records_;
  std::vector<std::thread> threads_;
  int appends_ = 0;
  std::atomic<int> completed_{0};
};

std::vector<IngestMessage> SampleMessages() {
  const char* body = R"([
    {"tags": {"host": "a"}, "events": [{"rawstring": "a1"}, {"rawstring": "a2"}]},
    {"tags": {"host": "b"}, "events": [{"rawstring": "b1"}]},
    {"tags": {"host": "c"}, "events": [{"rawstring": "c1"}]},
    {"tags": {"host": "d"}, "events": [{"rawstring": "d1", "timestamp": 1700000000}]}
  ])";
  return MustParse(Format::kHumioStructured, body).messages;
}

TEST(AppendAll, AppendsEveryMessageToItsPartition) {
  FakeLog log(4);
  std::vector<IngestMessage> messages = SampleMessages();
  ASSERT_EQ(messages.size(), 4u);
  ASSERT_TRUE(AppendAll(&log, messages).ok());
  EXPECT_EQ(log.completed(), 4);
  std::vector<IngestMessage> decoded;
  for (int32_t p = 0; p < 4; ++p) {
    auto records = log.Read(PartitionId(p), Offset(0), 1 << 20, std::chrono::milliseconds(0));
    ASSERT_TRUE(records.ok());
    for (const LogRecord& rec : *records) {
      auto msg = DecodeIngestMessage(rec.data);
      ASSERT_TRUE(msg.ok()) << msg.status().ToString();
      EXPECT_EQ(msg->datasource.PartitionFor(4), PartitionId(p));
      decoded.push_back(std::move(msg).value());
    }
  }
  ASSERT_EQ(decoded.size(), messages.size());
  for (const IngestMessage& want : messages) {
    auto it = std::find_if(decoded.begin(), decoded.end(),
                           [&](const IngestMessage& m) { return m.datasource == want.datasource; });
    ASSERT_NE(it, decoded.end());
    EXPECT_EQ(it->events, want.events);
  }
}

TEST(AppendAll, FailureIsReportedAfterAllAppendsComplete) {
  FakeLog log(4, /*fail_at=*/{1, 2});
  Status st = AppendAll(&log, SampleMessages());
  EXPECT_EQ(st.code(), StatusCode::kIOError);
  EXPECT_NE(st.message().find("message 1 of 4"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("disk on fire"), std::string::npos);
  EXPECT_EQ(log.appends(), 4);
  EXPECT_EQ(log.completed(), 4);
}

// A log that never acknowledges (a broker that stopped answering).
class SilentLog final : public CommitLog {
 public:
  int32_t partition_count() const override { return 2; }
  std::future<Result<Offset>> Append(PartitionId, std::string) override {
    promises_.emplace_back();
    return promises_.back().get_future();
  }
  Result<std::vector<LogRecord>> Read(PartitionId, Offset, size_t,
                                      std::chrono::milliseconds) override {
    return std::vector<LogRecord>{};
  }
  Status DeleteBefore(PartitionId, Offset) override { return Status::OK(); }
  Result<Offset> StartOffset(PartitionId) override { return Offset(0); }
  Result<Offset> EndOffset(PartitionId) override { return Offset(0); }
  std::string Health() override { return "silent"; }

 private:
  std::deque<std::promise<Result<Offset>>> promises_;
};

TEST(AppendAll, UnacknowledgedWithinTheTimeoutIsUnavailable) {
  SilentLog log;
  auto start = std::chrono::steady_clock::now();
  Status st = AppendAll(&log, SampleMessages(), std::chrono::milliseconds(100));
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("did not acknowledge within 100 ms"), std::string::npos);
  // The bound covers all messages together, not each one.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(AppendAll, EmptyIsOk) {
  FakeLog log(2);
  EXPECT_TRUE(AppendAll(&log, {}).ok());
  EXPECT_EQ(log.appends(), 0);
}

// ParseLineBatch is ParseRequest for lines without building the events: its ToEvents() is
// ParseRequest's answer and its errors are ParseRequest's, for raw and HEC raw bodies.
TEST(ParseLineBatch, IsParseRequestWithoutTheEvents) {
  ParseOptions hec_params = Opts();
  hec_params.params = {{"host", "h"}, {"sourcetype", "st"}, {"channel", "c1"}, {"x", "y"}};
  ParseOptions small = Opts();
  small.max_message_bytes = 100;
  ParseOptions tight = Opts();
  tight.max_event_bytes = 40;  // a 20-byte line is a 44-byte event with "host=h"
  tight.params = {{"host", "h"}};
  ParseOptions wrong_index = Opts();
  wrong_index.params = {{"index", "other"}};
  std::string many;
  for (int i = 0; i < 40; ++i) many += "line number " + std::to_string(i) + "\n";
  const std::vector<std::string> bodies = {"",
                                           " \r\n\t ",
                                           "one",
                                           "first\r\n\nsecond line\n\r\nthird",
                                           "a\rb\r\nc\n",
                                           "x\ry\rz\r\n\rw\n\nlast",
                                           many,
                                           std::string(20, 'q') + "\nshort\n",
                                           std::string(41, 'z') + "\n"};
  for (Format format : {Format::kRaw, Format::kHecRaw}) {
    for (const ParseOptions* o : {&hec_params, &small, &tight, &wrong_index}) {
      for (const std::string& body : bodies) {
        SCOPED_TRACE(std::string(FormatName(format)) + " body: " + body);
        auto want = ParseRequest(format, body, *o);
        auto got = ParseLineBatch(format, body, *o);
        ASSERT_EQ(got.ok(), want.ok()) << got.status().ToString() << want.status().ToString();
        if (!want.ok()) {
          EXPECT_EQ(got.status().code(), want.status().code());
          EXPECT_EQ(got.status().message(), want.status().message());
          continue;
        }
        const ParseResult events = got->ToEvents();
        EXPECT_EQ(events.event_count, want->event_count);
        EXPECT_EQ(got->lines.size(), want->event_count);
        ASSERT_EQ(events.messages.size(), want->messages.size());
        for (size_t m = 0; m < events.messages.size(); ++m) {
          EXPECT_EQ(events.messages[m].datasource, want->messages[m].datasource);
          EXPECT_EQ(events.messages[m].events, want->messages[m].events);
        }
      }
    }
  }
  // The lines are views into the body.
  const std::string body = "abc\ndef";
  auto batch = ParseLineBatch(Format::kRaw, body, Opts());
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->lines.size(), 2u);
  EXPECT_EQ(batch->lines[1].data(), body.data() + 4);
  EXPECT_EQ(ParseLineBatch(Format::kHecEvent, body, Opts()).status().code(),
            StatusCode::kInvalidArgument);
}

// The messages each partition's records decode to, ids left out (they are random).
std::vector<std::vector<IngestMessage>> Decoded(FakeLog& log) {
  std::vector<std::vector<IngestMessage>> out(static_cast<size_t>(log.partition_count()));
  for (int32_t p = 0; p < log.partition_count(); ++p) {
    auto records = log.Read(PartitionId(p), Offset(0), 1 << 20, std::chrono::milliseconds(0));
    EXPECT_TRUE(records.ok());
    if (!records.ok()) continue;
    for (const LogRecord& rec : *records) {
      auto msg = DecodeIngestMessage(rec.data);
      EXPECT_TRUE(msg.ok()) << msg.status().ToString();
      if (!msg.ok()) continue;
      EXPECT_NE(msg->id, 0u);
      msg->id = 0;
      out[static_cast<size_t>(p)].push_back(std::move(msg).value());
    }
    // FakeLog keeps a partition's records in the order their appends complete, which the test
    // does not control: in the order of their first events instead.
    auto& part = out[static_cast<size_t>(p)];
    std::sort(part.begin(), part.end(), [](const IngestMessage& x, const IngestMessage& y) {
      return x.events.empty() || (!y.events.empty() && x.events[0].raw < y.events[0].raw);
    });
  }
  return out;
}

// AppendLines writes what AppendAll writes for the same body's events: the same messages, cut
// at the same places, in the same order, to the same partitions, with a sharder that spreads the
// datasource over several partitions too.
TEST(AppendLines, WritesTheMessagesOfAppendAll) {
  ParseOptions o = Opts();
  o.max_message_bytes = 300;
  o.params = {{"host", "h1"}, {"source", "/var/log/x"}};
  std::string body;
  for (int i = 0; i < 50; ++i)
    body += "event " + std::to_string(i) + std::string(i % 7, '.') + "\n";
  ShardingOptions sharding;
  sharding.shard_bytes_per_second = 100;  // a few hundred bytes a second: every window doubles
  ManualClock clock_a, clock_b;
  DatasourceSharder sharder_a(&clock_a, sharding), sharder_b(&clock_b, sharding);
  for (Format format : {Format::kRaw, Format::kHecRaw}) {
    for (DatasourceSharder* a : {static_cast<DatasourceSharder*>(nullptr), &sharder_a}) {
      DatasourceSharder* b = a == nullptr ? nullptr : &sharder_b;
      for (int round = 0; round < 4; ++round) {
        SCOPED_TRACE(std::string(FormatName(format)) + (a ? " sharded" : "") + " round " +
                     std::to_string(round));
        FakeLog lines_log(8), events_log(8);
        auto batch = ParseLineBatch(format, body, o);
        ASSERT_TRUE(batch.ok());
        ASSERT_TRUE(AppendLines(&lines_log, *batch, std::chrono::seconds(30), a).ok());
        auto parsed = ParseRequest(format, body, o);
        ASSERT_TRUE(parsed.ok());
        EXPECT_GT(parsed->messages.size(), 3u);
        ASSERT_TRUE(AppendAll(&events_log, parsed->messages, std::chrono::seconds(30), b).ok());
        const auto got = Decoded(lines_log);
        const auto want = Decoded(events_log);
        size_t messages = 0;
        for (size_t p = 0; p < got.size(); ++p) {
          ASSERT_EQ(got[p].size(), want[p].size()) << "partition " << p;
          for (size_t m = 0; m < got[p].size(); ++m) {
            EXPECT_EQ(got[p][m].datasource, want[p][m].datasource);
            EXPECT_EQ(got[p][m].events, want[p][m].events);
          }
          messages += got[p].size();
        }
        EXPECT_EQ(messages, parsed->messages.size());
        clock_a.AdvanceMillis(1500);
        clock_b.AdvanceMillis(1500);
      }
    }
  }
  EXPECT_GT(sharder_a.ShardsOf(Datasource{"web", {}}), 1);
}

TEST(AppendLines, FailureAndEmptyAsAppendAll) {
  auto batch = ParseLineBatch(Format::kRaw, "a\nb\nc\n", [] {
    ParseOptions o = Opts();
    o.max_message_bytes = 1;  // one line per message
    return o;
  }());
  ASSERT_TRUE(batch.ok());
  FakeLog failing(4, /*fail_at=*/{1});
  Status st = AppendLines(&failing, *batch);
  EXPECT_EQ(st.code(), StatusCode::kIOError);
  EXPECT_NE(st.message().find("message 1 of 3"), std::string::npos) << st.ToString();
  EXPECT_EQ(failing.completed(), 3);
  SilentLog silent;
  st = AppendLines(&silent, *batch, std::chrono::milliseconds(100));
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  FakeLog log(2);
  auto empty = ParseLineBatch(Format::kRaw, "\n\n", Opts());
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(AppendLines(&log, *empty).ok());
  EXPECT_EQ(log.appends(), 0);
}

}  // namespace
}  // namespace sediment::ingest

namespace sediment::ingest {
namespace {

// Parse + encode of 100k ~250-byte events, single-threaded: checks every event comes through and
// prints the rate for information (speed is measured by bench/, never asserted in tests).

double EventsPerSecond(Format format, const std::string& body, size_t events) {
  auto start = std::chrono::steady_clock::now();
  auto r = ParseRequest(format, body, Opts());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return 0;
  EXPECT_EQ(r->event_count, events);
  size_t bytes = 0;
  for (const IngestMessage& m : r->messages) bytes += EncodeIngestMessage(m).size();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(bytes, 0u);
  return static_cast<double>(events) / secs;
}

TEST(IngestPerf, RawAndHecThroughput) {
  const size_t n = 100000;
  std::string raw, hec;
  for (size_t i = 0; i < n; ++i) {
    std::string line = "2024-01-02T03:04:05.678Z host-" + std::to_string(i % 50) +
                       " app[1234]: GET /api/v1/items/" + std::to_string(i) +
                       " status=200 bytes=5120 duration_ms=12 user=alice agent='Mozilla/5.0 "
                       "(X11; Linux x86_64) Gecko/20100101 Firefox/120.0' ref=-";
    line.resize(250, '.');
    raw += line + "\n";
    hec += R"({"time":1700000000.123,"host":"h1","sourcetype":"access","event":")" + line + "\"}\n";
  }
  double raw_rate = EventsPerSecond(Format::kRaw, raw, n);
  double hec_rate = EventsPerSecond(Format::kHecEvent, hec, n);
  std::printf("raw: %.0f events/s, hec: %.0f events/s\n", raw_rate, hec_rate);
}

}  // namespace
}  // namespace sediment::ingest

// OTLP/HTTP logs (parse_otlp.cc): both encodings, the mapping of records to events, bounds and
// partial success, malformed input, and the answers.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "ingest/ingest.h"
#include "ingest/otlp.h"
#include "otlp/otlp_logs.pb.h"

namespace sediment::ingest {
namespace {

namespace pb = ::sediment::otlp;

constexpr int64_t kNow = 1700000999000;
constexpr uint64_t kTimeNs = 1544712660300123456;  // 2018-12-13T14:51:00.300Z
constexpr int64_t kTimeMs = 1544712660300;

ParseOptions Opts(const char* content_type = "application/x-protobuf") {
  ParseOptions o;
  o.repo = "otel";
  o.now_ms = kNow;
  o.content_type = content_type;
  return o;
}

std::map<std::string, std::string> FieldMap(const Event& e) {
  std::map<std::string, std::string> m;
  for (const Field& f : e.fields) m[f.name] = f.value;
  return m;
}

std::vector<Event> Events(const ParseResult& r) {
  std::vector<Event> out;
  for (const IngestMessage& m : r.messages) {
    EXPECT_EQ(m.datasource.repo, "otel");
    for (const Event& e : m.events) out.push_back(e);
  }
  return out;
}

ParseResult MustParse(const std::string& body, const ParseOptions& o = Opts()) {
  auto r = ParseRequest(Format::kOtlpLogs, body, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  return std::move(r).value();
}

pb::KeyValue* Attr(google::protobuf::RepeatedPtrField<pb::KeyValue>* attrs,
                   const std::string& key) {
  pb::KeyValue* kv = attrs->Add();
  kv->set_key(key);
  return kv;
}

// One resource (service.name "checkout" + a host) and one scope holding `records` records.
pb::ExportLogsServiceRequest Request(int records) {
  pb::ExportLogsServiceRequest req;
  pb::ResourceLogs* rl = req.add_resource_logs();
  Attr(rl->mutable_resource()->mutable_attributes(), "service.name")
      ->mutable_value()
      ->set_string_value("checkout");
  Attr(rl->mutable_resource()->mutable_attributes(), "host.name")
      ->mutable_value()
      ->set_string_value("h1");
  pb::ScopeLogs* sl = rl->add_scope_logs();
  sl->mutable_scope()->set_name("app.logger");
  sl->mutable_scope()->set_version("1.2");
  Attr(sl->mutable_scope()->mutable_attributes(), "lib")->mutable_value()->set_int_value(7);
  for (int i = 0; i < records; ++i) {
    pb::LogRecord* rec = sl->add_log_records();
    rec->set_time_unix_nano(kTimeNs + static_cast<uint64_t>(i) * 1000000);
    rec->mutable_body()->set_string_value("record " + std::to_string(i));
  }
  return req;
}

TEST(Otlp, ProtobufEveryAnyValueKindIdsAndSeverity) {
  pb::ExportLogsServiceRequest req = Request(1);
  pb::LogRecord* rec = req.mutable_resource_logs(0)->mutable_scope_logs(0)->mutable_log_records(0);
  rec->set_severity_number(17);
  rec->set_severity_text("ERROR");
  rec->set_trace_id(
      std::string("\x5b\x8e\xff\xf7\x98\x03\x81\x03\xd2\x69\xb6\x33\x81\x3f\xc6\x0c", 16));
  rec->set_span_id(std::string("\xee\xe1\x9b\x7e\xc3\xc1\xb1\x74", 8));
  rec->set_flags(1);
  rec->set_event_name("checkout.failed");
  auto* attrs = rec->mutable_attributes();
  Attr(attrs, "s")->mutable_value()->set_string_value("text");
  Attr(attrs, "b")->mutable_value()->set_bool_value(false);
  Attr(attrs, "i")->mutable_value()->set_int_value(-9007199254740993);
  Attr(attrs, "d")->mutable_value()->set_double_value(637.704);
  Attr(attrs, "nan")->mutable_value()->set_double_value(std::numeric_limits<double>::quiet_NaN());
  Attr(attrs, "raw")->mutable_value()->set_bytes_value(std::string("\x00\xffhi", 4));
  pb::ArrayValue* arr = Attr(attrs, "list")->mutable_value()->mutable_array_value();
  arr->add_values()->set_string_value("x");
  arr->add_values()->set_int_value(2);
  pb::KeyValueList* map = Attr(attrs, "map")->mutable_value()->mutable_kvlist_value();
  Attr(map->mutable_values(), "inner")
      ->mutable_value()
      ->mutable_kvlist_value()
      ->add_values()
      ->set_key("leaf");  // a member without a value: null
  Attr(attrs, "empty_map")->mutable_value()->mutable_kvlist_value();
  Attr(attrs, "empty_list")->mutable_value()->mutable_array_value();
  Attr(attrs, "unset");  // no value at all

  ParseResult r = MustParse(req.SerializeAsString());
  ASSERT_EQ(r.event_count, 1u);
  EXPECT_EQ(r.rejected_count, 0u);
  std::vector<Event> events = Events(r);
  ASSERT_EQ(events.size(), 1u);
  const Event& e = events[0];
  EXPECT_EQ(e.raw, "record 0");
  EXPECT_EQ(e.timestamp_ms, kTimeMs);  // nanoseconds truncated to ms
  EXPECT_EQ(e.ingest_ms, kNow);
  std::map<std::string, std::string> want = {
      {"service.name", "checkout"},
      {"severity_text", "ERROR"},
      {"severity_number", "17"},
      {"trace_id", "5b8efff798038103d269b633813fc60c"},
      {"span_id", "eee19b7ec3c1b174"},
      {"flags", "1"},
      {"event_name", "checkout.failed"},
      {"attributes.s", "text"},
      {"attributes.b", "false"},
      {"attributes.i", "-9007199254740993"},
      {"attributes.d", "637.704"},
      {"attributes.nan", "NaN"},
      {"attributes.raw", "AP9oaQ=="},
      {"attributes.list[0]", "x"},
      {"attributes.list[1]", "2"},
      {"attributes.map.inner.leaf", "null"},
      {"attributes.empty_map", "{}"},
      {"attributes.empty_list", "[]"},
      {"attributes.unset", "null"},
      {"scope.name", "app.logger"},
      {"scope.version", "1.2"},
      {"scope.attributes.lib", "7"},
      {"resource.attributes.service.name", "checkout"},
      {"resource.attributes.host.name", "h1"},
  };
  EXPECT_EQ(FieldMap(e), want);
  EXPECT_EQ(e.fields.size(), want.size());
  EXPECT_EQ(e.fields[0].name, "service.name");
}

TEST(Otlp, NonStringBodiesAreJsonAndStructuredOnesAlsoFields) {
  pb::ExportLogsServiceRequest req = Request(6);
  auto* sl = req.mutable_resource_logs(0)->mutable_scope_logs(0);
  pb::KeyValueList* kv = sl->mutable_log_records(0)->mutable_body()->mutable_kvlist_value();
  Attr(kv->mutable_values(), "msg")->mutable_value()->set_string_value("hi \"you\"");
  Attr(kv->mutable_values(), "n")->mutable_value()->set_double_value(1.5);
  pb::ArrayValue* arr = Attr(kv->mutable_values(), "a")->mutable_value()->mutable_array_value();
  arr->add_values()->set_bool_value(true);
  arr->add_values();
  sl->mutable_log_records(1)->mutable_body()->set_int_value(42);
  sl->mutable_log_records(2)->mutable_body()->set_double_value(
      std::numeric_limits<double>::infinity());
  sl->mutable_log_records(3)->mutable_body()->set_bytes_value("abc");
  pb::ArrayValue* top = sl->mutable_log_records(4)->mutable_body()->mutable_array_value();
  top->add_values()->set_string_value("p");
  sl->mutable_log_records(5)->clear_body();

  std::vector<Event> events = Events(MustParse(req.SerializeAsString()));
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(events[0].raw, R"({"msg":"hi \"you\"","n":1.5,"a":[true,null]})");
  auto f0 = FieldMap(events[0]);
  EXPECT_EQ(f0["body.msg"], "hi \"you\"");
  EXPECT_EQ(f0["body.n"], "1.5");
  EXPECT_EQ(f0["body.a[0]"], "true");
  EXPECT_EQ(f0["body.a[1]"], "null");
  EXPECT_EQ(events[1].raw, "42");
  EXPECT_EQ(FieldMap(events[1]).count("body"), 0u);  // scalar bodies are @rawstring only
  EXPECT_EQ(events[2].raw, "\"Infinity\"");
  EXPECT_EQ(events[3].raw, "\"YWJj\"");
  EXPECT_EQ(events[4].raw, R"(["p"])");
  EXPECT_EQ(FieldMap(events[4])["body[0]"], "p");
  EXPECT_EQ(events[5].raw, "");
}

TEST(Otlp, TimestampFallsBackToObservedTimeThenIngestTime) {
  pb::ExportLogsServiceRequest req = Request(3);
  auto* sl = req.mutable_resource_logs(0)->mutable_scope_logs(0);
  sl->mutable_log_records(0)->set_observed_time_unix_nano(kTimeNs + 5000000000ull);  // ignored
  sl->mutable_log_records(1)->set_time_unix_nano(0);
  sl->mutable_log_records(1)->set_observed_time_unix_nano(kTimeNs + 7000000);
  sl->mutable_log_records(2)->set_time_unix_nano(0);
  std::vector<Event> events = Events(MustParse(req.SerializeAsString()));
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].timestamp_ms, kTimeMs);
  EXPECT_EQ(events[1].timestamp_ms, kTimeMs + 7);
  EXPECT_EQ(events[2].timestamp_ms, kNow);
}

TEST(Otlp, EmptyAndZeroIdsAreLeftOut) {
  pb::ExportLogsServiceRequest req = Request(2);
  auto* sl = req.mutable_resource_logs(0)->mutable_scope_logs(0);
  sl->mutable_log_records(0)->set_trace_id(std::string(16, '\0'));
  sl->mutable_log_records(0)->set_span_id(std::string(8, '\0'));
  std::vector<Event> events = Events(MustParse(req.SerializeAsString()));
  ASSERT_EQ(events.size(), 2u);
  for (const Event& e : events) {
    auto f = FieldMap(e);
    EXPECT_EQ(f.count("trace_id"), 0u);
    EXPECT_EQ(f.count("span_id"), 0u);
    EXPECT_EQ(f.count("severity_number"), 0u);
    EXPECT_EQ(f.count("flags"), 0u);
  }
}

// The specification's example request (examples/logs.json), ids in upper case, with int64s both
// as strings and as numbers, snake_case names, unknown members and nulls.
constexpr const char* kJsonRequest = R"({
  "resourceLogs": [{
    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "my.service"}}],
                 "droppedAttributesCount": 0, "entityRefs": []},
    "scopeLogs": [{
      "scope": {"name": "my.library", "version": "1.0.0",
                "attributes": [{"key": "my.scope.attribute",
                                "value": {"stringValue": "some scope attribute"}}]},
      "logRecords": [{
        "timeUnixNano": "1544712660300000000",
        "observedTimeUnixNano": 1544712660300000000,
        "severityNumber": 10, "severityText": "Information",
        "traceId": "5B8EFFF798038103D269B633813FC60C", "spanId": "EEE19B7EC3C1B174",
        "body": {"stringValue": "Example log record"},
        "attributes": [
          {"key": "string.attribute", "value": {"stringValue": "some string"}},
          {"key": "boolean.attribute", "value": {"boolValue": true}},
          {"key": "int.attribute", "value": {"intValue": "10"}},
          {"key": "int.number", "value": {"intValue": 11}},
          {"key": "double.attribute", "value": {"doubleValue": 637.704}},
          {"key": "double.text", "value": {"doubleValue": "-Infinity"}},
          {"key": "bytes.attribute", "value": {"bytesValue": "AP9oaQ"}},
          {"key": "array.attribute",
           "value": {"arrayValue": {"values": [{"stringValue": "many"}, {"stringValue": "values"}]}}},
          {"key": "map.attribute",
           "value": {"kvlistValue": {"values": [{"key": "some.map.key",
                                                 "value": {"stringValue": "some value"}}]}}},
          {"key": "null.attribute", "value": null},
          {"key": "future.attribute", "value": {"somethingNew": 1}}
        ],
        "flags": 1, "eventName": null, "unknownMember": {"x": [1, 2]}
      }, {
        "time_unix_nano": 1544712660301000000, "severity_text": "WARN", "severity_number": "13",
        "trace_id": "", "body": {"kvlist_value": {"values": [{"key": "k", "value": {"int_value": 3}}]}}
      }]
    }]
  }]
})";

TEST(Otlp, JsonEncoding) {
  std::vector<Event> events =
      Events(MustParse(kJsonRequest, Opts("application/json; charset=utf-8")));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].raw, "Example log record");
  EXPECT_EQ(events[0].timestamp_ms, 1544712660300);
  std::map<std::string, std::string> want = {
      {"service.name", "my.service"},
      {"severity_text", "Information"},
      {"severity_number", "10"},
      {"trace_id", "5b8efff798038103d269b633813fc60c"},
      {"span_id", "eee19b7ec3c1b174"},
      {"flags", "1"},
      {"attributes.string.attribute", "some string"},
      {"attributes.boolean.attribute", "true"},
      {"attributes.int.attribute", "10"},
      {"attributes.int.number", "11"},
      {"attributes.double.attribute", "637.704"},
      {"attributes.double.text", "-Infinity"},
      {"attributes.bytes.attribute", "AP9oaQ=="},
      {"attributes.array.attribute[0]", "many"},
      {"attributes.array.attribute[1]", "values"},
      {"attributes.map.attribute.some.map.key", "some value"},
      {"attributes.null.attribute", "null"},
      {"attributes.future.attribute", "null"},
      {"scope.name", "my.library"},
      {"scope.version", "1.0.0"},
      {"scope.attributes.my.scope.attribute", "some scope attribute"},
      {"resource.attributes.service.name", "my.service"},
  };
  EXPECT_EQ(FieldMap(events[0]), want);
  EXPECT_EQ(events[1].timestamp_ms, 1544712660301);
  EXPECT_EQ(events[1].raw, R"({"k":3})");
  auto f1 = FieldMap(events[1]);
  EXPECT_EQ(f1["severity_text"], "WARN");
  EXPECT_EQ(f1["severity_number"], "13");
  EXPECT_EQ(f1["body.k"], "3");
  EXPECT_EQ(f1.count("trace_id"), 0u);
}

TEST(Otlp, JsonAndProtobufGiveTheSameEvents) {
  std::vector<Event> json = Events(MustParse(kJsonRequest, Opts("application/json")));
  // The same request through protobuf: decode the JSON, encode it, parse that.
  pb::ExportLogsServiceRequest req;
  pb::ResourceLogs* rl = req.add_resource_logs();
  Attr(rl->mutable_resource()->mutable_attributes(), "service.name")
      ->mutable_value()
      ->set_string_value("my.service");
  pb::ScopeLogs* sl = rl->add_scope_logs();
  sl->mutable_scope()->set_name("my.library");
  sl->mutable_scope()->set_version("1.0.0");
  Attr(sl->mutable_scope()->mutable_attributes(), "my.scope.attribute")
      ->mutable_value()
      ->set_string_value("some scope attribute");
  sl->add_log_records();  // the first record is not compared
  pb::LogRecord* r2 = sl->add_log_records();
  r2->set_time_unix_nano(1544712660301000000);
  r2->set_severity_text("WARN");
  r2->set_severity_number(13);
  Attr(r2->mutable_body()->mutable_kvlist_value()->mutable_values(), "k")
      ->mutable_value()
      ->set_int_value(3);
  std::vector<Event> proto = Events(MustParse(req.SerializeAsString()));
  ASSERT_EQ(json.size(), 2u);
  ASSERT_EQ(proto.size(), 2u);
  EXPECT_EQ(json[1], proto[1]);
}

TEST(Otlp, RecordOverABoundIsRefusedAloneAsPartialSuccess) {
  ParseOptions o = Opts();
  o.max_event_bytes = 4096;
  o.max_fields_per_event = 20;
  o.max_json_depth = 3;
  pb::ExportLogsServiceRequest req = Request(5);
  auto* sl = req.mutable_resource_logs(0)->mutable_scope_logs(0);
  sl->mutable_log_records(1)->mutable_body()->set_string_value(std::string(5000, 'x'));
  for (int i = 0; i < 30; ++i) {
    Attr(sl->mutable_log_records(2)->mutable_attributes(), "a" + std::to_string(i))
        ->mutable_value()
        ->set_int_value(i);
  }
  // Level 1 "d", level 2 "d.x", level 3 "d.x.y", level 4 "d.x.y.z": one over the bound.
  pb::AnyValue* v = Attr(sl->mutable_log_records(3)->mutable_attributes(), "d")->mutable_value();
  for (const char* k : {"x", "y", "z"}) {
    v = Attr(v->mutable_kvlist_value()->mutable_values(), k)->mutable_value();
  }
  v->set_string_value("deep");
  ParseResult r = MustParse(req.SerializeAsString(), o);
  EXPECT_EQ(r.event_count, 2u);
  EXPECT_EQ(r.rejected_count, 3u);
  EXPECT_NE(r.rejected_message.find("resourceLogs[0].scopeLogs[0].logRecords[1]"),
            std::string::npos)
      << r.rejected_message;
  std::vector<Event> events = Events(r);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].raw, "record 0");
  EXPECT_EQ(events[1].raw, "record 4");

  // Only the 4th level is refused: depth 3 passes.
  o.max_json_depth = 4;
  r = MustParse(req.SerializeAsString(), o);
  EXPECT_EQ(r.event_count, 3u);
  EXPECT_EQ(r.rejected_count, 2u);

  // The answer reports it; protobuf answers decode as an ExportLogsServiceResponse.
  pb::ExportLogsServiceResponse resp;
  ASSERT_TRUE(resp.ParseFromString(OtlpLogsResponse(OtlpEncoding::kProtobuf, r)));
  ASSERT_TRUE(resp.has_partial_success());
  EXPECT_EQ(resp.partial_success().rejected_log_records(), 2);
  EXPECT_NE(resp.partial_success().error_message().find("refused 2 of 5 log records"),
            std::string::npos)
      << resp.partial_success().error_message();
  const std::string json = OtlpLogsResponse(OtlpEncoding::kJson, r);
  EXPECT_NE(
      json.find(R"({"partialSuccess":{"rejectedLogRecords":"2","errorMessage":"refused 2 of 5)"),
      std::string::npos)
      << json;
}

TEST(Otlp, EveryRecordRefusedIsStillAPartialSuccess) {
  ParseOptions o = Opts();
  o.max_event_bytes = 64;
  ParseResult r = MustParse(Request(3).SerializeAsString(), o);  // resource fields alone are over
  EXPECT_EQ(r.event_count, 0u);
  EXPECT_TRUE(r.messages.empty());
  EXPECT_EQ(r.rejected_count, 3u);
  pb::ExportLogsServiceResponse resp;
  ASSERT_TRUE(resp.ParseFromString(OtlpLogsResponse(OtlpEncoding::kProtobuf, r)));
  EXPECT_EQ(resp.partial_success().rejected_log_records(), 3);
}

TEST(Otlp, FullSuccessAnswers) {
  ParseResult r = MustParse(Request(2).SerializeAsString());
  EXPECT_EQ(OtlpLogsResponse(OtlpEncoding::kJson, r), "{}");
  pb::ExportLogsServiceResponse resp;
  const std::string bytes = OtlpLogsResponse(OtlpEncoding::kProtobuf, r);
  EXPECT_TRUE(bytes.empty());  // partial_success unset: an empty message
  ASSERT_TRUE(resp.ParseFromString(bytes));
  EXPECT_FALSE(resp.has_partial_success());

  pb::RpcStatus st;
  ASSERT_TRUE(st.ParseFromString(OtlpErrorBody(OtlpEncoding::kProtobuf, 400, "bad")));
  EXPECT_EQ(st.code(), 3);
  EXPECT_EQ(st.message(), "bad");
  EXPECT_EQ(OtlpErrorBody(OtlpEncoding::kJson, 503, "later"), R"({"code":14,"message":"later"})");
}

TEST(Otlp, MalformedInputIsRefusedWhole) {
  const std::string good = Request(3).SerializeAsString();
  auto code = [](const std::string& body, const char* type) {
    return ParseRequest(Format::kOtlpLogs, body, Opts(type)).status().code();
  };
  EXPECT_EQ(code(good.substr(0, good.size() - 3), "application/x-protobuf"),
            StatusCode::kInvalidArgument);  // truncated
  EXPECT_EQ(code("\xff\xff\xff\xff", "application/x-protobuf"), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("hello, world", "application/x-protobuf"), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(good, "application/json"), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(R"({"resourceLogs": [)", "application/json"), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(R"([])", "application/json"), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(R"({"resourceLogs": {}})", "application/json"), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(R"({"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"xyz"}]}]}]})",
                 "application/json"),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(R"({"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"-1"}]}]}]})",
                 "application/json"),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      code(
          R"({"resourceLogs":[{"scopeLogs":[{"logRecords":[{"severityNumber":"SEVERITY_NUMBER_INFO"}]}]}]})",
          "application/json"),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(
      code(
          R"({"resourceLogs":[{"scopeLogs":[{"logRecords":[{"attributes":[{"key":"k","value":{"intValue":1.5}}]}]}]}]})",
          "application/json"),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(code(good, "text/plain"), StatusCode::kInvalidArgument);
  // The error names where.
  auto st = ParseRequest(
      Format::kOtlpLogs,
      R"({"resourceLogs":[{"scopeLogs":[{},{"logRecords":[{"body":{"boolValue":"yes"}}]}]}]})",
      Opts("application/json"));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("resourceLogs[0].scopeLogs[1].logRecords[0].body.boolValue"),
            std::string::npos)
      << st.status().message();
  // Nesting beyond the decoder's recursion bound is malformed, not a crash.
  pb::AnyValue deep;
  pb::AnyValue* v = &deep;
  for (int i = 0; i < 2000; ++i)
    v = Attr(v->mutable_kvlist_value()->mutable_values(), "k")->mutable_value();
  pb::ExportLogsServiceRequest req = Request(1);
  *req.mutable_resource_logs(0)->mutable_scope_logs(0)->mutable_log_records(0)->mutable_body() =
      deep;
  EXPECT_EQ(code(req.SerializeAsString(), "application/x-protobuf"), StatusCode::kInvalidArgument);
}

TEST(Otlp, EmptyRequestsGiveNoEvents) {
  EXPECT_EQ(MustParse("").event_count, 0u);
  EXPECT_EQ(MustParse("{}", Opts("application/json")).event_count, 0u);
  EXPECT_EQ(
      MustParse(R"({"resourceLogs":[{"scopeLogs":[{"logRecords":[]}]}]})", Opts("application/json"))
          .event_count,
      0u);
}

TEST(Otlp, MessagesAreSplitBySize) {
  ParseOptions o = Opts();
  o.max_message_bytes = 2000;
  ParseResult r = MustParse(Request(100).SerializeAsString(), o);
  EXPECT_EQ(r.event_count, 100u);
  EXPECT_GT(r.messages.size(), 3u);
  std::vector<Event> events = Events(r);
  ASSERT_EQ(events.size(), 100u);
  for (size_t i = 0; i < events.size(); ++i)
    EXPECT_EQ(events[i].raw, "record " + std::to_string(i));
}

TEST(Otlp, ExpansionOfTheWholeRequestIsBounded) {
  // A large resource repeated by many tiny records: each event is within its bound, the request
  // as a whole expands beyond 64 MiB + 16x the body.
  pb::ExportLogsServiceRequest req = Request(0);
  Attr(req.mutable_resource_logs(0)->mutable_resource()->mutable_attributes(), "big")
      ->mutable_value()
      ->set_string_value(std::string(600 * 1024, 'b'));
  auto* sl = req.mutable_resource_logs(0)->mutable_scope_logs(0);
  for (int i = 0; i < 150; ++i) sl->add_log_records();
  auto st = ParseRequest(Format::kOtlpLogs, req.SerializeAsString(), Opts());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kTooLarge);
}

TEST(Otlp, ContentTypes) {
  EXPECT_EQ(OtlpEncodingFor("application/x-protobuf"), OtlpEncoding::kProtobuf);
  EXPECT_EQ(OtlpEncodingFor("Application/X-Protobuf; foo=bar"), OtlpEncoding::kProtobuf);
  EXPECT_EQ(OtlpEncodingFor("application/protobuf"), OtlpEncoding::kProtobuf);
  EXPECT_EQ(OtlpEncodingFor(""), OtlpEncoding::kProtobuf);
  EXPECT_EQ(OtlpEncodingFor("application/json"), OtlpEncoding::kJson);
  EXPECT_EQ(OtlpEncodingFor(" application/json ; charset=utf-8"), OtlpEncoding::kJson);
  EXPECT_EQ(OtlpEncodingFor("text/plain"), std::nullopt);
  EXPECT_EQ(OtlpEncodingFor("application/x-ndjson"), std::nullopt);
  EXPECT_EQ(FormatForPath("/api/v1/ingest/otlp/v1/logs"), Format::kOtlpLogs);
  EXPECT_EQ(FormatForPath("/v1/logs"), Format::kOtlpLogs);
}

}  // namespace
}  // namespace sediment::ingest

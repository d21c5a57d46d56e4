#include "parsers/parsers.h"

#include <gtest/gtest.h>

#include <map>

#include <algorithm>

#include "common/time_parse.h"
#include "parsers/internal.h"

namespace sediment::parsers {
namespace {

constexpr int64_t kNow = 1700000000000;  // 2023-11-14T22:13:20Z

TaggedEvent Line(std::string_view raw, Tags tags = {}) {
  TaggedEvent t;
  t.tags = std::move(tags);
  t.event.raw = std::string(raw);
  t.event.timestamp_ms = kNow;
  t.event.ingest_ms = kNow;
  return t;
}

std::vector<TaggedEvent> RunParser(const Parser& p, const TaggedEvent& in) {
  std::vector<TaggedEvent> out;
  p.Run(in, &out);
  return out;
}

std::string FieldOf(const Event& e, std::string_view name) {
  const std::string* v = e.Find(name);
  return v == nullptr ? "<none>" : *v;
}

int64_t Iso(std::string_view s) { return *ParseIso8601Millis(s); }

TEST(BuiltinTest, NamesResolve) {
  for (const char* n : {"kv", "json", "accesslog", "syslog", "none", "KV", "AccessLog"}) {
    EXPECT_NE(Builtin(n), nullptr) << n;
    EXPECT_TRUE(IsBuiltinName(n)) << n;
  }
  EXPECT_EQ(Builtin("csv"), nullptr);  // needs its header list
  EXPECT_TRUE(IsBuiltinName("csv"));
  EXPECT_EQ(Builtin("nope"), nullptr);
  EXPECT_EQ(Builtin("csv(a,,b)"), nullptr);
  EXPECT_EQ(Builtin("csv(a b)"), nullptr);
}

TEST(BuiltinTest, KvExtractsPairs) {
  auto out = RunParser(*Builtin("kv"), Line("user=alice status=404 msg=\"not found\""));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(FieldOf(out[0].event, "user"), "alice");
  EXPECT_EQ(FieldOf(out[0].event, "status"), "404");
  EXPECT_EQ(FieldOf(out[0].event, "msg"), "not found");
  EXPECT_EQ(out[0].event.raw, "user=alice status=404 msg=\"not found\"");
  EXPECT_EQ(out[0].event.timestamp_ms, kNow);
}

TEST(BuiltinTest, JsonFieldsAndTimestamp) {
  auto out = RunParser(*Builtin("json"),
                       Line(R"({"a":{"b":1},"@timestamp":"2024-01-02T03:04:05.678Z","s":"x"})"));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(FieldOf(out[0].event, "a.b"), "1");
  EXPECT_EQ(FieldOf(out[0].event, "s"), "x");
  EXPECT_EQ(out[0].event.timestamp_ms, Iso("2024-01-02T03:04:05.678Z"));
  EXPECT_EQ(out[0].event.Find("@timestamp"), nullptr);

  // A @timestamp that is not a time: ingest time kept, @error set, event kept.
  out = RunParser(*Builtin("json"), Line(R"({"@timestamp":"yesterday","k":"v"})"));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].event.timestamp_ms, kNow);
  EXPECT_EQ(FieldOf(out[0].event, "@error"), "true");
  EXPECT_NE(FieldOf(out[0].event, "@error_msg").find("yesterday"), std::string::npos);
  EXPECT_EQ(FieldOf(out[0].event, "k"), "v");

  // Not JSON: kept as it is.
  out = RunParser(*Builtin("json"), Line("plain text"));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].event.raw, "plain text");
}

TEST(BuiltinTest, AccessLogCommon) {
  auto out = RunParser(
      *Builtin("accesslog"),
      Line(
          R"(127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326)"));
  ASSERT_EQ(out.size(), 1u);
  const Event& e = out[0].event;
  EXPECT_EQ(e.timestamp_ms, Iso("2000-10-10T20:55:36Z"));
  EXPECT_EQ(FieldOf(e, "client"), "127.0.0.1");
  EXPECT_EQ(FieldOf(e, "ident"), "<none>");
  EXPECT_EQ(FieldOf(e, "authuser"), "frank");
  EXPECT_EQ(FieldOf(e, "method"), "GET");
  EXPECT_EQ(FieldOf(e, "url"), "/apache_pb.gif");
  EXPECT_EQ(FieldOf(e, "httpversion"), "1.0");
  EXPECT_EQ(FieldOf(e, "statuscode"), "200");
  EXPECT_EQ(FieldOf(e, "status"), "200");
  EXPECT_EQ(FieldOf(e, "responsesize"), "2326");
  EXPECT_EQ(FieldOf(e, "referrer"), "<none>");
  EXPECT_EQ(FieldOf(e, "@error"), "<none>");
}

TEST(BuiltinTest, AccessLogCombined) {
  auto out = RunParser(
      *Builtin("accesslog"),
      Line(R"(10.1.2.3 - - [28/Feb/2019:13:17:10 +0000] "POST /login?x=\"1\" HTTP/2.0" 404 - )"
           R"x("https://example.com/" "Mozilla/5.0 (X11; Linux)")x"));
  ASSERT_EQ(out.size(), 1u);
  const Event& e = out[0].event;
  EXPECT_EQ(e.timestamp_ms, Iso("2019-02-28T13:17:10Z"));
  EXPECT_EQ(FieldOf(e, "method"), "POST");
  EXPECT_EQ(FieldOf(e, "url"), R"(/login?x=\"1\")");
  EXPECT_EQ(FieldOf(e, "httpversion"), "2.0");
  EXPECT_EQ(FieldOf(e, "status"), "404");
  EXPECT_EQ(FieldOf(e, "responsesize"), "<none>");
  EXPECT_EQ(FieldOf(e, "referrer"), "https://example.com/");
  EXPECT_EQ(FieldOf(e, "useragent"), "Mozilla/5.0 (X11; Linux)");
}

TEST(BuiltinTest, AccessLogBadLineKeptWithError) {
  for (const char* bad : {"hello world", "1.2.3.4 - - [99/Foo/2000:13:55:36 -0700] \"GET /\" 200 1",
                          "1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] GET / 200 1",
                          "1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] \"GET /\" abc 1", ""}) {
    auto out = RunParser(*Builtin("accesslog"), Line(bad));
    ASSERT_EQ(out.size(), 1u) << bad;
    EXPECT_EQ(out[0].event.raw, bad);
    EXPECT_EQ(out[0].event.timestamp_ms, kNow) << bad;
    EXPECT_EQ(FieldOf(out[0].event, "@error"), "true") << bad;
    EXPECT_EQ(FieldOf(out[0].event, "@error_msg").rfind("accesslog: ", 0), 0u) << bad;
    EXPECT_EQ(out[0].event.Find("status"), nullptr) << bad;
  }
}

TEST(BuiltinTest, Syslog5424WithStructuredData) {
  auto out = RunParser(
      *Builtin("syslog"),
      Line(
          R"(<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 )"
          R"([exampleSDID@32473 iut="3" eventSource="Application" eventID="1011"][ex@1 q="a\"b\]"] )"
          R"(An application event log entry)"));
  ASSERT_EQ(out.size(), 1u);
  const Event& e = out[0].event;
  EXPECT_EQ(e.timestamp_ms, Iso("2003-10-11T22:14:15.003Z"));
  EXPECT_EQ(FieldOf(e, "priority"), "165");
  EXPECT_EQ(FieldOf(e, "facility"), "20");
  EXPECT_EQ(FieldOf(e, "severity"), "5");
  EXPECT_EQ(FieldOf(e, "version"), "1");
  EXPECT_EQ(FieldOf(e, "host"), "mymachine.example.com");
  EXPECT_EQ(FieldOf(e, "app"), "evntslog");
  EXPECT_EQ(FieldOf(e, "pid"), "<none>");
  EXPECT_EQ(FieldOf(e, "msgid"), "ID47");
  EXPECT_EQ(FieldOf(e, "exampleSDID@32473.iut"), "3");
  EXPECT_EQ(FieldOf(e, "exampleSDID@32473.eventSource"), "Application");
  EXPECT_EQ(FieldOf(e, "exampleSDID@32473.eventID"), "1011");
  EXPECT_EQ(FieldOf(e, "ex@1.q"), "a\"b]");
  EXPECT_EQ(FieldOf(e, "message"), "An application event log entry");
}

TEST(BuiltinTest, Syslog5424RepeatedParamsGiveUniqueFields) {
  // Found by parser_fuzz: a parameter named twice gave two fields of one name.
  auto out =
      RunParser(*Builtin("syslog"),
                Line(R"(<34>1 2003-10-11T22:14:15Z h a - - [x@1 b="1" c="2" b="3"][x@1 c="4"] m)"));
  ASSERT_EQ(out.size(), 1u);
  const Event& e = out[0].event;
  std::vector<std::string> names;
  for (const Field& f : e.fields) names.push_back(f.name);
  EXPECT_EQ(std::count(names.begin(), names.end(), "x@1.b"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "x@1.c"), 1);
  EXPECT_EQ(FieldOf(e, "x@1.b"), "3");
  EXPECT_EQ(FieldOf(e, "x@1.c"), "4");
}

TEST(BuiltinTest, Syslog5424FieldsBoundedByTheLine) {
  // Found by parser_fuzz: a long SD-ID with many empty parameters grew the event far beyond the
  // line (the SD-ID is in every field name). Kept unparsed with @error instead.
  std::string line = "<34>1 2003-10-11T22:14:15Z h a - - [" + std::string(200, 'i');
  for (int k = 0; k < 300; ++k) line += " p" + std::to_string(k) + "=\"\"";
  line += "] m";
  TaggedEvent in = Line(line);
  auto out = RunParser(*Builtin("syslog"), in);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(FieldOf(out[0].event, "@error"), "true");
  EXPECT_EQ(out[0].event.timestamp_ms, kNow);
  EXPECT_LE(out[0].event.ByteSize(), 2 * in.event.ByteSize() + 1024);
}

TEST(BuiltinTest, Syslog5424NilValues) {
  auto out = RunParser(*Builtin("syslog"),
                       Line("<34>1 2003-10-11T22:14:15.003+02:00 host app 99 - - no sd here"));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].event.timestamp_ms, Iso("2003-10-11T20:14:15.003Z"));
  EXPECT_EQ(FieldOf(out[0].event, "pid"), "99");
  EXPECT_EQ(FieldOf(out[0].event, "msgid"), "<none>");
  EXPECT_EQ(FieldOf(out[0].event, "message"), "no sd here");
}

TEST(BuiltinTest, Syslog3164) {
  auto out =
      RunParser(*Builtin("syslog"),
                Line("<34>Oct 11 22:14:15 mymachine su[123]: 'su root' failed on /dev/pts/8"));
  ASSERT_EQ(out.size(), 1u);
  const Event& e = out[0].event;
  EXPECT_EQ(e.timestamp_ms, Iso("2023-10-11T22:14:15Z"));  // the year of kNow
  EXPECT_EQ(FieldOf(e, "priority"), "34");
  EXPECT_EQ(FieldOf(e, "facility"), "4");
  EXPECT_EQ(FieldOf(e, "severity"), "2");
  EXPECT_EQ(FieldOf(e, "host"), "mymachine");
  EXPECT_EQ(FieldOf(e, "app"), "su");
  EXPECT_EQ(FieldOf(e, "pid"), "123");
  EXPECT_EQ(FieldOf(e, "message"), "'su root' failed on /dev/pts/8");

  // No PRI (a daemon's file), a space-padded day, no pid; December seen in January is last year.
  TaggedEvent jan = Line("Dec  9 08:00:01 web-1 CRON: job done");
  jan.event.ingest_ms = Iso("2024-01-02T00:00:00Z");
  out = RunParser(*Builtin("syslog"), jan);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].event.timestamp_ms, Iso("2023-12-09T08:00:01Z"));
  EXPECT_EQ(FieldOf(out[0].event, "priority"), "<none>");
  EXPECT_EQ(FieldOf(out[0].event, "app"), "CRON");
  EXPECT_EQ(FieldOf(out[0].event, "message"), "job done");
}

TEST(BuiltinTest, SyslogBadInputKeptWithError) {
  for (const char* bad :
       {"<999>1 2003-10-11T22:14:15Z h a p m - x", "<34>1 yesterday h a p m - x",
        "<34>1 2003-10-11T22:14:15Z h a p m [unterminated", "just text", "<12", ""}) {
    auto out = RunParser(*Builtin("syslog"), Line(bad));
    ASSERT_EQ(out.size(), 1u) << bad;
    EXPECT_EQ(out[0].event.raw, bad);
    EXPECT_EQ(out[0].event.timestamp_ms, kNow) << bad;
    EXPECT_EQ(FieldOf(out[0].event, "@error"), "true") << bad;
    EXPECT_EQ(FieldOf(out[0].event, "@error_msg").rfind("syslog: ", 0), 0u) << bad;
  }
}

TEST(BuiltinTest, CsvWithHeaderList) {
  auto p = Builtin("csv(host, status,bytes)");
  ASSERT_NE(p, nullptr);
  auto out = RunParser(*p, Line(R"(web-1,"404",12)"));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(FieldOf(out[0].event, "host"), "web-1");
  EXPECT_EQ(FieldOf(out[0].event, "status"), "404");
  EXPECT_EQ(FieldOf(out[0].event, "bytes"), "12");
  // Fewer values than columns: the columns present only.
  out = RunParser(*p, Line("only-one"));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(FieldOf(out[0].event, "host"), "only-one");
  EXPECT_EQ(out[0].event.Find("status"), nullptr);
}

TEST(BuiltinTest, NoneKeepsEvent) {
  TaggedEvent in = Line("a=b");
  auto out = RunParser(*Builtin("none"), in);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].event, in.event);
}

TEST(CustomTest, TimestampTagsAndDrop) {
  auto p = CompileCustom("app",
                         "kvParse() | level != DEBUG | parseTimestamp(\"yyyy-MM-dd HH:mm:ss\", "
                         "field=ts, timezone=\"+01:00\") | #env := env | drop([env])",
                         {"service"});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto out = RunParser(
      **p, Line("ts=\"2024-03-01 10:00:00\" level=INFO service=api env=prod", {{"#type", "app"}}));
  ASSERT_EQ(out.size(), 1u);
  const TaggedEvent& t = out[0];
  EXPECT_EQ(t.event.timestamp_ms, Iso("2024-03-01T09:00:00Z"));
  EXPECT_EQ(FieldOf(t.event, "level"), "INFO");
  EXPECT_EQ(t.event.Find("service"), nullptr);  // a tag field
  EXPECT_EQ(t.event.Find("env"), nullptr);
  Tags want = {{"#type", "app"}, {"#service", "api"}, {"#env", "prod"}};
  Tags got = t.tags;
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);

  // Filtered out: dropped.
  EXPECT_TRUE(RunParser(**p, Line("level=DEBUG ts=\"2024-03-01 10:00:00\"")).empty());

  // A timestamp that does not parse: kept, ingest time, @error.
  out = RunParser(**p, Line("ts=garbage level=WARN"));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].event.timestamp_ms, kNow);
  EXPECT_EQ(FieldOf(out[0].event, "@error"), "true");
  EXPECT_NE(FieldOf(out[0].event, "@error_msg"), "<none>");
}

TEST(CustomTest, DropEventInCase) {
  auto p = CompileCustom("c", "case { /^#/ | dropEvent() ; * }");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(RunParser(**p, Line("# a comment")).empty());
  EXPECT_EQ(RunParser(**p, Line("data")).size(), 1u);
}

TEST(CustomTest, BadScriptsRefused) {
  auto bad = CompileCustom("x", "kvParse() | foo(");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("at position"), std::string::npos);

  for (const char* agg : {"count()", "kvParse() | groupBy(a)", "sort(a)", "head(5)"}) {
    auto r = CompileCustom("x", agg);
    ASSERT_FALSE(r.ok()) << agg;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << agg;
    EXPECT_NE(r.status().message().find("not allowed in a parser"), std::string::npos) << agg;
  }
  auto count = CompileCustom("x", "kvParse() | count()");
  EXPECT_NE(count.status().message().find("count() at position 12"), std::string::npos)
      << count.status().message();
}

TEST(CustomTest, Names) {
  EXPECT_TRUE(IsValidParserName("my-parser_1.v2"));
  EXPECT_FALSE(IsValidParserName(""));
  EXPECT_FALSE(IsValidParserName("kv"));
  EXPECT_FALSE(IsValidParserName("a/b"));
  EXPECT_FALSE(IsValidParserName(".."));
  EXPECT_FALSE(IsValidParserName(std::string(101, 'a')));
}

TEST(CacheTest, CompilesOncePerScript) {
  ParserCache cache;
  auto a = cache.Get("r", "p", "kvParse()", {});
  auto b = cache.Get("r", "p", "kvParse()", {});
  auto c = cache.Get("r", "p", "parseJson()", {});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_NE(a->get(), c->get());
  EXPECT_FALSE(cache.Get("r", "p", "count()", {}).ok());
}

Selection Select(ingest::Format f, std::string token_parser = "") {
  Selection s;
  s.format = f;
  s.token_parser = std::move(token_parser);
  s.resolve = [](std::string_view name) -> std::shared_ptr<const Parser> {
    if (name == "mine") return *CompileCustom("mine", "mine := \"yes\"");
    return Builtin(name);
  };
  return s;
}

TEST(SelectionTest, ParserFor) {
  Event e;
  using F = ingest::Format;
  EXPECT_EQ(ParserFor(Select(F::kRaw), {}, e)->name(), "kv");
  EXPECT_EQ(ParserFor(Select(F::kHecRaw), {}, e)->name(), "kv");
  EXPECT_EQ(ParserFor(Select(F::kHumioUnstructured), {}, e)->name(), "kv");
  EXPECT_EQ(ParserFor(Select(F::kHecEvent), {}, e), nullptr);
  EXPECT_EQ(ParserFor(Select(F::kHumioStructured), {{"#type", "kv"}}, e), nullptr);
  EXPECT_EQ(ParserFor(Select(F::kHumioStructured, "accesslog"), {{"#type", "kv"}}, e)->name(),
            "accesslog");
  EXPECT_EQ(ParserFor(Select(F::kRaw, "accesslog"), {}, e)->name(), "accesslog");
  EXPECT_EQ(ParserFor(Select(F::kRaw, "mine"), {}, e)->name(), "mine");
  // type chooses when a parser of that name exists, else the token's.
  EXPECT_EQ(ParserFor(Select(F::kHumioUnstructured, "accesslog"), {{"#type", "syslog"}}, e)->name(),
            "syslog");
  EXPECT_EQ(ParserFor(Select(F::kHumioUnstructured, "accesslog"), {{"#type", "web"}}, e)->name(),
            "accesslog");
  e.fields.push_back(Field{"sourcetype", "json"});
  EXPECT_EQ(ParserFor(Select(F::kHecEvent), {}, e)->name(), "json");
  EXPECT_EQ(ParserFor(Select(F::kRaw), {}, e)->name(), "kv");  // sourcetype is HEC's only
}

TEST(ApplyTest, RegroupsByNewTags) {
  ingest::ParseOptions options;
  options.repo = "web";
  options.now_ms = kNow;
  auto parsed = ingest::ParseRequest(ingest::Format::kRaw,
                                     "a=1 env=prod\nb=2 env=dev\nc=3 env=prod\nplain\n", options);
  ASSERT_TRUE(parsed.ok());
  Selection s = Select(ingest::Format::kRaw, "tagger");
  auto tagger = CompileCustom("tagger", "kvParse()", {"env"});
  ASSERT_TRUE(tagger.ok());
  s.resolve = [&](std::string_view) { return *tagger; };
  ApplyParsers(s, options, &*parsed);
  EXPECT_EQ(parsed->event_count, 4u);
  ASSERT_EQ(parsed->messages.size(), 3u);
  EXPECT_EQ(parsed->messages[0].datasource.tags, Tags({{"#env", "prod"}}));
  ASSERT_EQ(parsed->messages[0].events.size(), 2u);
  EXPECT_EQ(FieldOf(parsed->messages[0].events[0], "a"), "1");
  EXPECT_EQ(FieldOf(parsed->messages[0].events[1], "c"), "3");
  EXPECT_EQ(parsed->messages[1].datasource.tags, Tags({{"#env", "dev"}}));
  EXPECT_TRUE(parsed->messages[2].datasource.tags.empty());
  EXPECT_EQ(parsed->messages[2].events[0].raw, "plain");
}

TEST(ApplyTest, OversizedParseKeepsOriginalWithError) {
  ingest::ParseOptions options;
  options.repo = "web";
  options.now_ms = kNow;
  options.max_event_bytes = 200;
  std::string line = "a=" + std::string(80, 'x');
  auto parsed = ingest::ParseRequest(ingest::Format::kRaw, line, options);
  ASSERT_TRUE(parsed.ok());
  Selection s = Select(ingest::Format::kRaw, "big");
  auto big = CompileCustom("big", "kvParse() | b := a | c := a");
  ASSERT_TRUE(big.ok());
  s.resolve = [&](std::string_view) { return *big; };
  ApplyParsers(s, options, &*parsed);
  ASSERT_EQ(parsed->event_count, 1u);
  const Event& e = parsed->messages[0].events[0];
  EXPECT_EQ(e.raw, line);
  EXPECT_EQ(FieldOf(e, "@error"), "true");
  EXPECT_EQ(e.Find("b"), nullptr);
}

// KeepsAsIs (the shortcut ApplyParsers takes) is true only where Run gives the event back.
TEST(KeepsAsIsTest, KvOnlyForLinesWithoutPairsAndPlainFields) {
  const std::shared_ptr<const Parser> kv = Builtin("kv");
  const std::string apache =
      "10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] \"GET /a?b=c HTTP/1.0\" 200 2326 \"-\" \"UA\"";
  std::vector<TaggedEvent> cases = {
      Line(apache),
      Line(apache, {{"#host", "h1"}, {"#type", "web"}}),
      Line("a=1 b=2"),
      Line("\"\"=x"),
      Line("'k'=v"),
      Line("plain words only"),
      Line(apache, {{"type", "web"}}),
      Line(apache, {{"#repo", "other"}}),
  };
  TaggedEvent with_field = Line(apache);
  with_field.event.fields = {{"host", "h"}, {"source", "s"}};
  cases.push_back(with_field);
  for (const char* name : {"@timestamp", "@rawstring", "@id", "@ingesttimestamp", "#x"}) {
    TaggedEvent t = Line(apache);
    t.event.fields = {{"host", "h"}, {name, "1700000000"}};
    cases.push_back(t);
  }
  int kept = 0;
  for (const TaggedEvent& in : cases) {
    if (!kv->KeepsAsIs(in.tags, in.event)) continue;
    ++kept;
    std::vector<TaggedEvent> out = RunParser(*kv, in);
    ASSERT_EQ(out.size(), 1u) << in.event.raw;
    EXPECT_EQ(out[0].event, in.event) << in.event.raw;
    // ApplyParsers sets the tags Run gives over the event's: they must be the event's own.
    for (const auto& tag : out[0].tags) {
      EXPECT_NE(std::find(in.tags.begin(), in.tags.end(), tag), in.tags.end()) << tag.first;
    }
  }
  EXPECT_EQ(kept, 5);  // apache, apache with #tags, ""=x, plain words, plain fields
  EXPECT_TRUE(kv->KeepsAsIs({}, Line(apache).event));
  EXPECT_FALSE(kv->KeepsAsIs({}, Line("a=1").event));
  EXPECT_FALSE(kv->KeepsAsIs({}, Line("'k'=v").event));
  EXPECT_TRUE(kv->KeepsAsIs({}, Line("''=v").event));  // an empty key is no pair
  EXPECT_FALSE(kv->KeepsAsIs({{"type", "web"}}, Line(apache).event));
  EXPECT_TRUE(kv->KeepsAsIs({}, with_field.event));
  EXPECT_FALSE(kv->KeepsAsIs({}, cases.back().event));  // a '#' field
  // Only a kvParse() of @rawstring alone, without tag fields.
  for (auto [script, tags] :
       std::vector<std::pair<std::string, std::vector<std::string>>>{{"kvParse() | x := 1", {}},
                                                                     {"kvParse(field=msg)", {}},
                                                                     {"kvParse()", {"env"}},
                                                                     {"x := 1", {}}}) {
    auto p = CompileCustom("c", script, tags);
    ASSERT_TRUE(p.ok()) << script;
    EXPECT_FALSE((*p)->KeepsAsIs({}, Line(apache).event)) << script;
  }
  auto same = CompileCustom("c", "kvParse(field=@rawstring)");
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE((*same)->KeepsAsIs({}, Line(apache).event));
  for (const char* n : {"json", "accesslog", "syslog", "none", "csv(a,b)"}) {
    EXPECT_FALSE(Builtin(n)->KeepsAsIs({}, Line(apache).event)) << n;
  }
}

// The default kv parser on raw lines: lines without pairs come out as ParseRequest made them and
// in their messages; a request with one line that has pairs is parsed as before.
TEST(ApplyTest, KvKeepsLinesWithoutPairs) {
  ingest::ParseOptions options;
  options.repo = "web";
  options.now_ms = kNow;
  options.max_message_bytes = 200;  // several messages
  std::string body;
  for (int i = 0; i < 20; ++i) {
    body += "10.0.0." + std::to_string(i) + " - - \"GET /x?y=" + std::to_string(i) + "\" 200\n";
  }
  auto parsed = ingest::ParseRequest(ingest::Format::kRaw, body, options);
  ASSERT_TRUE(parsed.ok());
  const ingest::ParseResult before = *parsed;
  ASSERT_GT(before.messages.size(), 2u);
  ApplyParsers(Select(ingest::Format::kRaw), options, &*parsed);
  EXPECT_EQ(parsed->event_count, 20u);
  ASSERT_EQ(parsed->messages.size(), before.messages.size());
  for (size_t m = 0; m < before.messages.size(); ++m) {
    EXPECT_EQ(parsed->messages[m].datasource, before.messages[m].datasource);
    EXPECT_EQ(parsed->messages[m].events, before.messages[m].events);
  }

  auto mixed = ingest::ParseRequest(ingest::Format::kRaw, body + "status=500 path=/z\n", options);
  ASSERT_TRUE(mixed.ok());
  ApplyParsers(Select(ingest::Format::kRaw), options, &*mixed);
  EXPECT_EQ(mixed->event_count, 21u);
  const Event& last = mixed->messages.back().events.back();
  EXPECT_EQ(FieldOf(last, "status"), "500");
  EXPECT_EQ(FieldOf(last, "path"), "/z");
  EXPECT_TRUE(mixed->messages.front().events.front().fields.empty());
}

// KeepsLinesAsIs says true only when ApplyParsers leaves the lines' events as ParseRequest made
// them (what lets the route append them without building them): for the default kv on lines
// without pairs, and not with a line that has pairs, a token parser, or a HEC sourcetype that
// names a parser.
TEST(ApplyTest, KeepsLinesAsIsWhenApplyParsersKeepsTheEvents) {
  using F = ingest::Format;
  std::string plain;
  for (int i = 0; i < 20; ++i) {
    plain += "10.0.0." + std::to_string(i) + " - - \"GET /x?y=" + std::to_string(i) + "\" 200\n";
  }
  struct Case {
    F format;
    std::string token_parser;
    std::map<std::string, std::string> params;
    std::string body;
    bool kept;     // KeepsLinesAsIs's answer
    bool changed;  // whether ApplyParsers changes the events (never when kept)
  };
  // A parser other than kv may leave the events as they are without KeepsLinesAsIs knowing it
  // ("none"; json on lines that are not JSON): never wrong in the "true" direction is the promise.
  const std::vector<Case> cases = {
      {F::kRaw, "", {}, plain, true, false},
      {F::kRaw, "", {}, plain + "status=500 path=/z\n", false, true},
      {F::kRaw, "", {}, "a=1\n" + plain, false, true},
      {F::kRaw, "accesslog", {}, plain, false, true},
      {F::kRaw, "none", {}, plain, false, false},
      // No parser is named "web": kv.
      {F::kHecRaw, "", {{"host", "h"}, {"sourcetype", "web"}}, plain, true, false},
      {F::kHecRaw, "", {{"sourcetype", "json"}}, plain, false, false},
      {F::kHecRaw, "", {{"host", "h"}}, plain + "k=v\n", false, true},
      {F::kRaw, "", {}, "", true, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(ingest::FormatName(c.format)) + " token parser '" + c.token_parser +
                 "' body " + c.body.substr(0, 20));
    ingest::ParseOptions options;
    options.repo = "web";
    options.now_ms = kNow;
    options.max_message_bytes = 200;
    options.params = c.params;
    auto batch = ingest::ParseLineBatch(c.format, c.body, options);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    const Selection selection = Select(c.format, c.token_parser);
    EXPECT_EQ(KeepsLinesAsIs(selection, *batch), c.kept);
    const ingest::ParseResult before = batch->ToEvents();
    ingest::ParseResult after = before;
    ApplyParsers(selection, options, &after);
    bool same = after.messages.size() == before.messages.size();
    for (size_t m = 0; same && m < before.messages.size(); ++m) {
      same = after.messages[m].datasource == before.messages[m].datasource &&
             after.messages[m].events == before.messages[m].events;
    }
    EXPECT_EQ(same, !c.changed);
  }
}

// A token parser rebuilds the messages; what the request's answer is made of (Elastic bulk's one
// item per action) must come through.
TEST(ApplyTest, TokenParserKeepsTheRequestsOutcomes) {
  ingest::ParseOptions options;
  options.repo = "web";
  options.now_ms = kNow;
  const std::string body =
      "{\"index\":{\"_index\":\"logs\"}}\n{\"message\":\"a=1\"}\n"
      "{\"create\":{}}\n{\"message\":\"b=2\"}\n"
      "{\"delete\":{\"_id\":\"x\"}}\n";
  auto parsed = ingest::ParseRequest(ingest::Format::kElasticBulk, body, options);
  ASSERT_TRUE(parsed.ok());
  const std::vector<ingest::BulkItem> items = parsed->items;
  ASSERT_EQ(items.size(), 3u);
  Selection s = Select(ingest::Format::kElasticBulk, "tagger");
  auto tagger = CompileCustom("tagger", "kvParse(message)", {});
  ASSERT_TRUE(tagger.ok());
  s.resolve = [&](std::string_view) { return *tagger; };
  ApplyParsers(s, options, &*parsed);
  EXPECT_EQ(parsed->event_count, 2u);
  ASSERT_EQ(parsed->items.size(), items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    EXPECT_EQ(parsed->items[i].action, items[i].action);
    EXPECT_EQ(parsed->items[i].status, items[i].status);
  }
}

TEST(TimeTest, ClfAndBsd) {
  EXPECT_EQ(internal::ParseClfTime("10/Oct/2000:13:55:36 -0700"), Iso("2000-10-10T20:55:36Z"));
  EXPECT_EQ(internal::ParseClfTime("10/Oct/2000:13:55:36"), Iso("2000-10-10T13:55:36Z"));
  EXPECT_EQ(internal::ParseClfTime("10/Oct/2000:13:55:36 +0530"), Iso("2000-10-10T08:25:36Z"));
  EXPECT_EQ(internal::ParseClfTime("10/oct/2000:13:55:36 -0700"), std::nullopt);
  EXPECT_EQ(internal::ParseClfTime("10/Oct/2000:25:55:36 -0700"), std::nullopt);
  EXPECT_EQ(internal::ParseClfTime("10/Oct/2000:13:55:36 -07"), std::nullopt);
  EXPECT_EQ(internal::ParseBsdTime("Feb 29 00:00:00", Iso("2024-03-01T00:00:00Z")),
            Iso("2024-02-29T00:00:00Z"));
  EXPECT_EQ(internal::ParseBsdTime("Feb 30 0:00:00", kNow), std::nullopt);
}

}  // namespace
}  // namespace sediment::parsers

#include "query/query.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>
#include <set>

#include "common/time_parse.h"
#include "query/aggregate.h"
#include "query/columns.h"
#include "query/compiled.h"
#include "query/regex_count.h"
#include "query/search.h"
#include "query/wire.h"
#include "segment/segment.h"

namespace sediment::query {
namespace {

// ---------- searcher ----------

TEST(SearchTest, MatchesNaiveCaseInsensitiveSearch) {
  std::mt19937 rng(42);
  const std::string alphabet = "aAbB@`[{ \n\x80\xff";
  for (int iter = 0; iter < 3000; ++iter) {
    std::string hay(rng() % 200, ' ');
    for (char& c : hay) c = alphabet[rng() % alphabet.size()];
    std::string needle(1 + rng() % 4, ' ');
    for (char& c : needle) c = alphabet[rng() % alphabet.size()];
    if (rng() % 3 == 0 && hay.size() > needle.size()) {
      hay.replace(rng() % (hay.size() - needle.size()), needle.size(), needle);
    }
    CiSearcher s(needle);
    auto lower = [](std::string x) {
      for (char& c : x) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      }
      return x;
    };
    size_t expect = lower(hay).find(lower(needle));
    const char* got = s.Find(hay.data(), hay.data() + hay.size());
    size_t got_off = got == nullptr ? std::string::npos : static_cast<size_t>(got - hay.data());
    ASSERT_EQ(got_off, expect) << "needle '" << needle << "' hay '" << hay << "'";
    // Case-sensitive mode: as std::string::find.
    CiSearcher exact(needle, /*exact_case=*/true);
    got = exact.Find(hay.data(), hay.data() + hay.size());
    got_off = got == nullptr ? std::string::npos : static_cast<size_t>(got - hay.data());
    ASSERT_EQ(got_off, hay.find(needle)) << "exact needle '" << needle << "' hay '" << hay << "'";
  }
  CiSearcher at("@a");
  EXPECT_FALSE(at.Contains("`a `A"));
  EXPECT_TRUE(at.Contains("x@A"));
  CiSearcher empty("");
  EXPECT_TRUE(empty.Contains(""));
}

// ---------- time bounds ----------

TEST(TimeBoundTest, Formats) {
  const int64_t now = 1'700'000'000'000;
  auto b = [&](std::string_view s) { return ParseTimeBound(s, now); };
  EXPECT_EQ(*b("now"), now);
  EXPECT_EQ(*b("15m"), now - 15 * 60'000);
  EXPECT_EQ(*b("24h"), now - 24 * 3'600'000LL);
  EXPECT_EQ(*b("7d"), now - 7 * 86'400'000LL);
  EXPECT_EQ(*b("30s"), now - 30'000);
  EXPECT_EQ(*b("1w"), now - 7 * 86'400'000LL);
  EXPECT_EQ(*b("2y"), now - 2 * 365 * 86'400'000LL);
  EXPECT_EQ(*b("1 hour"), now - 3'600'000);
  EXPECT_EQ(*b("3 days ago"), now - 3 * 86'400'000LL);
  EXPECT_EQ(*b(" 5minutes "), now - 5 * 60'000);
  EXPECT_EQ(*b("1600000000000"), 1'600'000'000'000);
  EXPECT_EQ(*b("2024-01-02T03:04:05Z"), *ParseIso8601Millis("2024-01-02T03:04:05Z"));
  EXPECT_EQ(*b("2024-01-02T03:04:05.123+01:00"), *ParseIso8601Millis("2024-01-02T02:04:05.123Z"));
  for (const char* bad : {"", "bogus", "15x", "m", "-5m", "2024-13"}) {
    auto r = b(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("'" + std::string(bad) + "'"), std::string::npos);
  }
}

TEST(TimeBoundTest, Range) {
  const int64_t now = 1'700'000'000'000;
  auto r = ParseTimeRange("", "", now);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->start_ms, now - 86'400'000);
  EXPECT_EQ(r->end_ms, now);
  r = ParseTimeRange("1h", "30m", now);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->start_ms, now - 3'600'000);
  EXPECT_EQ(r->end_ms, now - 1'800'000);
  EXPECT_FALSE(ParseTimeRange("30m", "1h", now).ok());
  EXPECT_FALSE(ParseTimeRange("nope", "", now).ok());
}

// ---------- evaluation over buffered events ----------

PositionedEvent Ev(int64_t ts, int64_t offset, std::string raw, std::vector<Field> fields = {}) {
  PositionedEvent pe;
  pe.pos = Position{Offset(offset), 0};
  pe.event.timestamp_ms = ts;
  pe.event.ingest_ms = ts + 5;
  pe.event.raw = std::move(raw);
  pe.event.fields = std::move(fields);
  return pe;
}

std::shared_ptr<const std::vector<PositionedEvent>> SampleEvents() {
  auto v = std::make_shared<std::vector<PositionedEvent>>();
  v->push_back(Ev(1001, 101, "GET /index.html 200",
                  {{"method", "GET"}, {"status", "200"}, {"url", "/index.html"}}));
  v->push_back(Ev(1002, 102, "POST /api/login 401 Unauthorized",
                  {{"method", "POST"}, {"status", "401"}, {"url", "/api/login"}}));
  v->push_back(Ev(1003, 103, "get /api/users 200 ERROR slow",
                  {{"method", "get"}, {"status", "200"}, {"url", "/api/users"}}));
  v->push_back(Ev(1004, 104, "DELETE /api/users/7 500 Error: boom",
                  {{"method", "DELETE"}, {"status", "500"}, {"url", "/api/users/7"}}));
  v->push_back(Ev(1005, 105, "Hello \"World\""));
  return v;
}

ScanInput SampleInput() {
  ScanInput in;
  BufferedSource b;
  b.datasource = Datasource{"web", {{"#type", "accesslog"}}};
  b.partition = PartitionId(0);
  b.events = SampleEvents();
  in.buffered.push_back(b);
  return in;
}

const TimeRange kAll{0, 1'000'000};

Result<QueryResult> RunQuery(std::string_view q, const ScanInput& in, const TimeRange& range = kAll,
                             ExecOptions opts = {}) {
  auto c = Compile(q);
  if (!c.ok()) return c.status();
  return Execute(Env::Default(), **c, range, in, opts);
}

const Value* Get(const Row& r, const std::string& name) {
  for (const auto& [k, v] : r) {
    if (k == name) return &v;
  }
  return nullptr;
}

// Timestamps of the matching events, last digit only (1001 -> 1).
std::string Matches(std::string_view q, const ScanInput& in) {
  auto r = RunQuery(q, in);
  if (!r.ok()) return "ERROR " + r.status().ToString();
  std::string out;
  for (const Row& row : r->rows)
    out += std::to_string(std::get<int64_t>(*Get(row, "@timestamp")) % 10);
  return out;
}

TEST(EvalTest, StartAndEndMustBeBoundBeforeTheQueryRuns) {
  auto q = Compile("x := end() - @timestamp");
  ASSERT_TRUE(q.ok());
  auto ran = Execute(Env::Default(), **q, TimeRange{0, 1}, ScanInput{});
  ASSERT_FALSE(ran.ok());
  EXPECT_EQ(ran.status().code(), StatusCode::kFailedPrecondition);
  auto bound = BindTimeRange((*q)->text, TimeRange{0, 1});
  ASSERT_TRUE(bound.ok());
  auto b = Compile(*bound);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(Execute(Env::Default(), **b, TimeRange{0, 1}, ScanInput{}).ok());
}

TEST(EvalTest, FilterTable) {
  ScanInput in = SampleInput();
  struct Case {
    const char* query;
    const char* expect;
  } cases[] = {
      {"", "12345"},
      {"error", "34"},
      {"ERROR", "34"},
      {"\"error:\"", "4"},
      {"api users", "34"},
      {"status=200", "13"},
      {"status=20", ""},
      {"status=2*", "13"},
      {"url=*users*", "34"},
      {"url=*USERS*", ""},
      {"status!=200", "245"},
      {"status=*", "1234"},
      {"status!=*", "5"},
      {"method=/^get$/i", "13"},
      {"method=/^get$/", "3"},
      {"method=GET", "1"},
      {"/P[OU]ST/", "2"},
      {"/p[ou]st/", ""},
      {"/p[ou]st/i", "2"},
      {"#type=accesslog", "12345"},
      {"#type=other", ""},
      {"#repo=web error", "34"},
      {"#repo=other or error", "34"},
      {"error or login", "234"},
      {"not error", "125"},
      {"!error", "125"},
      {"error and not slow", "4"},
      {"error AND NOT slow", "4"},
      {"login or error and boom", "4"},
      {"boom login or error", "4"},
      {"get or post error", "3"},
      {"get or (post error)", "13"},
      {"error or index.html status=200", "13"},
      {"users AND slow OR boom AND delete", "4"},
      {"(users AND slow) OR (boom AND delete)", "34"},
      {"not error or login", "125"},
      {"not (error or login)", "15"},
      {"*", "12345"},
      {R"("*")", "12345"},
      {R"("ERR*boom")", "4"},
      {R"("e*r slow")", "3"},
      {R"("/API/*S/7")", "4"},
      {R"("hello*\"world\"")", "5"},
      {"hel*lo", "5"},
      {"hell*llo", ""},
      {"lo*lo", ""},
      {"l*l*l", "5"},
      {R"(url="/api/*")", "234"},
      {R"(url="*users*")", "34"},
      {R"(url="/api/users")", "3"},
      {R"(method="G*")", "1"},
      {R"(method="g*")", "3"},
      {R"(status="*")", "1234"},
      {R"(status!="*")", "5"},
      {"NOT status=*", "5"},
      {"not missing=*", "12345"},
      {"missing=*", ""},
      {"(login or error) and boom", "4"},
      {"(login or boom) and (post or delete)", "24"},
      {R"("Hello \"World\"")", "5"},
      {R"(@rawstring="Hello \"World\"")", "5"},
      {"@rawstring=hello", ""},
      {"@rawstring=*World*", "5"},
      {"@timestamp=1002", "2"},
      {"@ingesttimestamp=1007", "2"},
      {"@id=0-103-0", "3"},
      {"*api/us*", "34"},
      {"get*users", "3"},
      {"missing=x", ""},
      {"\"\"", "12345"},
  };
  for (const Case& c : cases) EXPECT_EQ(Matches(c.query, in), c.expect) << c.query;
}

TEST(EvalTest, EventRowContents) {
  auto r = RunQuery("login", SampleInput());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->rows.size(), 1u);
  EXPECT_FALSE(r->is_aggregate);
  const Row& row = r->rows[0];
  EXPECT_EQ(std::get<int64_t>(*Get(row, "@timestamp")), 1002);
  EXPECT_EQ(std::get<std::string>(*Get(row, "@rawstring")), "POST /api/login 401 Unauthorized");
  EXPECT_EQ(std::get<std::string>(*Get(row, "@id")), "0-102-0");
  EXPECT_EQ(std::get<int64_t>(*Get(row, "@ingesttimestamp")), 1007);
  EXPECT_EQ(std::get<std::string>(*Get(row, "#repo")), "web");
  EXPECT_EQ(std::get<std::string>(*Get(row, "#type")), "accesslog");
  EXPECT_EQ(std::get<std::string>(*Get(row, "status")), "401");
  EXPECT_EQ(r->stats.events_matched, 1u);
  EXPECT_EQ(r->stats.events_scanned, 5u);
}

TEST(EvalTest, HitsNeverSpanEvents) {
  ScanInput in;
  auto v = std::make_shared<std::vector<PositionedEvent>>();
  // Enough events that the contiguous-run search path is used.
  for (int i = 0; i < 64; ++i) {
    v->push_back(Ev(2000 + 2 * i, 2 * i, "xxab"));
    v->push_back(Ev(2001 + 2 * i, 2 * i + 1, "cdxx"));
  }
  v->push_back(Ev(3000, 500, "zzABCD"));
  in.buffered.push_back(BufferedSource{Datasource{"r", {}}, PartitionId(1), v});
  EXPECT_EQ(Matches("bc", in), "0");
  EXPECT_EQ(Matches("abcd", in), "0");
  EXPECT_EQ(Matches("xab", in).size(), 64u);
  EXPECT_EQ(Matches("bcdx", in), "");
}

TEST(EvalTest, TimeRangeIsHalfOpen) {
  ScanInput in = SampleInput();
  auto r = RunQuery("", in, TimeRange{1002, 1004});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->rows.size(), 2u);
  EXPECT_EQ(std::get<int64_t>(*Get(r->rows[0], "@timestamp")), 1002);
  EXPECT_EQ(std::get<int64_t>(*Get(r->rows[1], "@timestamp")), 1003);
}

// ---------- pipeline ----------

std::string Column(const QueryResult& r, const std::string& name) {
  std::string out;
  for (const Row& row : r.rows) {
    const Value* v = Get(row, name);
    if (!out.empty()) out += ',';
    if (v == nullptr) {
      out += '-';
    } else if (const auto* s = std::get_if<std::string>(v)) {
      out += *s;
    } else if (const auto* i = std::get_if<int64_t>(v)) {
      out += std::to_string(*i);
    }
  }
  return out;
}

TEST(PipelineTest, Functions) {
  ScanInput in = SampleInput();
  auto col = [&](std::string_view q, const std::string& field) {
    auto r = RunQuery(q, in);
    EXPECT_TRUE(r.ok()) << q << ": " << r.status().ToString();
    return r.ok() ? Column(*r, field) : "";
  };
  EXPECT_EQ(col("| count()", "_count"), "5");
  EXPECT_EQ(col("error | count()", "_count"), "2");
  EXPECT_EQ(col("nothing-matches | count()", "_count"), "0");
  EXPECT_EQ(col("| head(2)", "@timestamp"), "1001,1002");
  EXPECT_EQ(col("| tail(2)", "@timestamp"), "1004,1005");
  EXPECT_EQ(col("| head(3) | tail(1)", "@timestamp"), "1003");
  EXPECT_EQ(col("| sort(status, order=asc)", "status"), "200,200,401,500,-");
  EXPECT_EQ(col("| sort(status)", "@timestamp"), "1004,1002,1001,1003,1005");
  EXPECT_EQ(col("| sort(status, limit=2)", "status"), "500,401");
  EXPECT_EQ(col("| sort([status, method], order=asc)", "method"), "GET,get,POST,DELETE,-");
  EXPECT_EQ(col("| table([method, status])", "method"), "-,DELETE,get,POST,GET");  // newest first
  EXPECT_EQ(col("| table([status], limit=2)", "status"), "-,500");
  EXPECT_EQ(col("| groupBy(status)", "status"), "200,401,500");
  EXPECT_EQ(col("| groupBy(status)", "_count"), "2,1,1");
  EXPECT_EQ(col("| groupBy([status, #repo], function=count())", "#repo"), "web,web,web");
  EXPECT_EQ(col("| groupby(status, function=[count()]) | sort(_count) | head(1)", "status"), "200");
  EXPECT_EQ(col("| groupBy(status) | count()", "_count"), "3");
  EXPECT_EQ(col("| groupBy(status, limit=1)", "status"), "200");
  EXPECT_EQ(col("| head(4) | groupBy(method)", "_count"), "1,1,1,1");
  EXPECT_EQ(col("| count() | table([_count])", "_count"), "5");

  auto r = RunQuery("| table([method])", in);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->is_aggregate);
  ASSERT_EQ(r->rows.size(), 5u);
  EXPECT_EQ(r->rows[0].size(), 0u);  // the newest event has no method
  EXPECT_EQ(r->rows[4].size(), 1u);
}

TEST(PipelineTest, NumericAwareSort) {
  ScanInput in;
  auto v = std::make_shared<std::vector<PositionedEvent>>();
  const char* values[] = {"9", "100", "10", "abc", "-2.5"};
  for (int i = 0; i < 5; ++i) v->push_back(Ev(10 + i, i, "e", {{"n", values[i]}}));
  in.buffered.push_back(BufferedSource{Datasource{"r", {}}, PartitionId(0), v});
  auto r = RunQuery("| sort(n, order=asc)", in);
  ASSERT_TRUE(r.ok());
  // Numbers compare numerically among themselves; "abc" compares as a string.
  EXPECT_EQ(Column(*r, "n"), "-2.5,9,10,100,abc");
  r = RunQuery("| sort(n)", in);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Column(*r, "n"), "abc,100,10,9,-2.5");
}

TEST(PipelineTest, MaxEventsKeepsNewestWithWarning) {
  ScanInput in = SampleInput();
  ExecOptions opts;
  opts.max_events = 2;
  auto r = RunQuery("", in, kAll, opts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Column(*r, "@timestamp"), "1004,1005");
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("newest 2 of 5"), std::string::npos);
  // Aggregates still see every event.
  r = RunQuery("| count()", in, kAll, opts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Column(*r, "_count"), "5");
  EXPECT_TRUE(r->warnings.empty());
}

TEST(PipelineTest, ThreadsGiveSameResults) {
  ScanInput in;
  std::mt19937 rng(7);
  for (int src = 0; src < 3; ++src) {
    auto v = std::make_shared<std::vector<PositionedEvent>>();
    for (int i = 0; i < 10000; ++i) {
      std::string raw = "event " + std::to_string(i) + (rng() % 50 == 0 ? " needle" : " hay");
      v->push_back(
          Ev(static_cast<int64_t>(rng() % 100000), i, raw, {{"k", std::to_string(rng() % 7)}}));
    }
    in.buffered.push_back(
        BufferedSource{Datasource{"r", {{"#src", std::to_string(src)}}}, PartitionId(src), v});
  }
  for (const char* q : {"needle", "needle | groupBy(k)", "| tail(50)", "needle | count()",
                        "k=3 | sort(@timestamp, order=asc, limit=20)"}) {
    ExecOptions one, four;
    one.threads = 1;
    four.threads = 4;
    auto a = RunQuery(q, in, TimeRange{0, 100000}, one);
    auto b = RunQuery(q, in, TimeRange{0, 100000}, four);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->rows, b->rows) << q;
    EXPECT_FALSE(a->rows.empty()) << q;
  }
}

// ---------- segment-backed execution ----------

class SegmentExecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/query_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    opener_ = std::make_unique<DirectorySegmentOpener>(Env::Default(), dir_);
  }
  void TearDown() override { (void)Env::Default()->RemoveAll(dir_); }

  // Segment `id` with `n` events at ts base..base+n-1; event `rare_at` (if >= 0) has "Zebrafish".
  SegmentSource MakeSegment(int64_t id, int64_t base, int n, int rare_at) {
    std::vector<PositionedEvent> events;
    for (int i = 0; i < n; ++i) {
      std::string raw = "2024 INFO request " + std::to_string(i) + " served user=u" +
                        std::to_string(i % 13) + " path=/api/v1/items";
      if (i == rare_at) raw += " Zebrafish alert";
      events.push_back(
          Ev(base + i, id * 100000 + i, raw, {{"user", "u" + std::to_string(i % 13)}}));
    }
    Datasource ds{"logs", {{"#type", "app"}}};
    SegmentSource s;
    s.opener = opener_.get();
    s.file_name = "seg" + std::to_string(id);
    s.id = SegmentId(id);
    s.datasource = ds;
    s.partition = PartitionId(static_cast<int32_t>(id));
    SegmentWriterOptions o;
    o.block_raw_bytes = 4096;
    auto info = WriteSegment(Env::Default(), dir_ + "/" + s.file_name, ds, s.partition, events, o);
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    s.min_ts = info->min_ts;
    s.max_ts = info->max_ts;
    return s;
  }

  SegmentSource WriteEvents(const std::string& name, const std::vector<PositionedEvent>& events,
                            uint32_t version) {
    Datasource ds{"logs", {{"#type", "app"}}};
    SegmentSource s;
    s.opener = opener_.get();
    s.file_name = name;
    s.id = SegmentId(static_cast<int64_t>(version));
    s.datasource = ds;
    s.partition = PartitionId(1);
    SegmentWriterOptions o;
    o.block_raw_bytes = block_raw_bytes_;
    o.format_version = version;
    auto info = WriteSegment(Env::Default(), dir_ + "/" + s.file_name, ds, s.partition, events, o);
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    s.min_ts = info->min_ts;
    s.max_ts = info->max_ts;
    return s;
  }

  std::string dir_;
  std::unique_ptr<DirectorySegmentOpener> opener_;
  uint64_t block_raw_bytes_ = 2048;
};

// A format 2 segment decodes only the columns a query reads (query/columns.h); every query must
// answer exactly as over the same events in a format 1 segment (always decoded whole) and as over
// the same events buffered in memory.
TEST_F(SegmentExecTest, ColumnSelectiveReadsAnswerAsFullReads) {
  std::vector<PositionedEvent> events;
  const char* methods[] = {"GET", "POST", "get", "DELETE"};
  for (int i = 0; i < 600; ++i) {
    const std::string status = std::to_string(200 + 100 * (i % 4));
    const std::string method = methods[i % 4];
    const std::string user = "u" + std::to_string(i % 17);
    const std::string size = std::to_string((i * 7919) % 5000);
    std::string raw = method + " /api/" + std::to_string(i % 9) + " " + status + " size=" + size +
                      " user=" + user + " {\"k\":" + std::to_string(i % 3) + "}";
    std::vector<Field> fields = {
        {"method", method}, {"status", status}, {"size", size}, {"user", user}, {"@extra", "x"}};
    if (i % 5 == 0) fields.push_back({"note", "slow request"});
    if (i % 2 == 0) fields.push_back({"body", "{\"k\":" + std::to_string(i % 3) + "}"});
    events.push_back(Ev(1000 + i * 3, 100 + i, raw, fields));
  }
  // Then events of another shape (whole blocks without method/status/size/user).
  for (int i = 600; i < 800; ++i) {
    events.push_back(Ev(1000 + i * 3, 100 + i, "level=info app log line " + std::to_string(i),
                        {{"level", i % 3 ? "info" : "warn"}}));
  }
  // Small blocks (~25 events: a few distinct values are decided one event at a time) and large
  // ones (hundreds of events: decided once per distinct value up front).
  ScanInput v1, v2, v2big, mem;
  v1.segments.push_back(WriteEvents("v1", events, 1));
  v2.segments.push_back(WriteEvents("v2", events, 2));
  block_raw_bytes_ = 64 << 10;
  v2big.segments.push_back(WriteEvents("v2big", events, 2));
  BufferedSource b;
  b.datasource = Datasource{"logs", {{"#type", "app"}}};
  b.partition = PartitionId(1);
  b.events = std::make_shared<std::vector<PositionedEvent>>(events);
  mem.buffered.push_back(b);
  const char* queries[] = {
      "| count()",
      "status=500 | count()",
      "| groupBy(status)",
      "| groupBy([method, status], function=[count(), sum(size), max(size)])",
      "| timeChart(span=100ms)",
      "| top(user)",
      "status>=400 | avg(size)",
      "level=warn | groupBy(level)",
      "status!=200 | count()",
      "NOT status=200 | groupBy(level)",
      "user=/u1[0-3]/ | groupBy(user)",
      "slow | count()",
      "/size=4\\d\\d / | count()",
      "method=get | groupBy(method)",
      "method=/get/i | count()",
      "| regex(\"user=(?<who>\\S+)\") | groupBy(who)",
      "| regex(\"(?<u>u1)\", field=user) | groupBy(u)",
      "| parseJson(body) | groupBy(k)",
      "| kvParse() | groupBy(size)",
      "| kvParse(override=true) | groupBy(user)",
      "| x := size * 2 | sum(x)",
      "| eval(y = length(user)) | groupBy(y)",
      "| case { status=500 | s := \"bad\" ; * | s := \"ok\" } | groupBy(s)",
      "| formatTime(\"%S\", as=sec) | groupBy(sec)",
      "| lower(method) | groupBy(_lower)",
      "| length(note) | groupBy(_length)",
      "| rename(user, as=who) | groupBy(who)",
      "| select([status]) | head(5)",
      "| drop([user]) | tail(3)",
      "| sort(size, limit=5)",
      "| table([user, size], limit=7)",
      "note=* | count()",
      "@extra=x | count()",
      "#type=app | groupBy(#type)",
      "| head(4)",
      "@ingesttimestamp > 2000 | count()",
      "| max(@ingesttimestamp)",
      // Issue 17's functions (their own RecordFunction stages and new metric kinds).
      "| format(\"%s-%s\", field=[method, user], as=mu) | groupBy(mu)",
      "| replace(\"u1\", with=\"U\", field=user, as=ru) | groupBy(ru)",
      "| test(size > 2500) | count()",
      "| default(field=note, \"none\") | groupBy(note)",
      "| coalesce([note, method]) | groupBy(_coalesce)",
      "| splitString(by=\" \", index=1, as=p) | groupBy(p)",
      "| parseCsv(delimiter=\" \", columns=[m, path, st]) | groupBy(st)",
      "| upper(method) | groupBy(_upper)",
      "| groupBy(method, function=[stdDev(size), range(size), collect(status)])",
      "| groupBy(status, function=selectFromMax(size, include=[user, size]))",
      "| selectLast([note, level, user])",
      // Shapes read without @timestamp and positions in blocks inside the range, and their
      // neighbours that need them.
      "status=500 | groupBy(method)",
      "status=500 | groupBy(user)",
      "size>100 | groupBy(status, function=[min(size), avg(size), collect(method)])",
      "| rename(size, as=s) | groupBy(status, function=max(s))",
      "level=warn | groupBy(level, function=count(as=n))",
      "@timestamp > 1500 | groupBy(status)",
      "| groupBy(status, function=max(@timestamp))",
      "| groupBy(status, function=selectLast(user))",
      "| groupBy(method, function=selectFromMin(size, include=[user]))",
      "| ts := @timestamp | groupBy(status, function=min(ts))",
      "",
  };
  // The whole range (every block inside it) and one that cuts blocks.
  for (const TimeRange range : {TimeRange{0, 100000}, TimeRange{1500, 2950}}) {
    for (const char* q : queries) {
      auto a = RunQuery(q, v1, range);
      auto c = RunQuery(q, v2, range);
      auto big = RunQuery(q, v2big, range);
      auto m = RunQuery(q, mem, range);
      ASSERT_TRUE(a.ok()) << q << ": " << a.status().ToString();
      ASSERT_TRUE(c.ok()) << q << ": " << c.status().ToString();
      ASSERT_TRUE(big.ok()) << q << ": " << big.status().ToString();
      ASSERT_TRUE(m.ok()) << q << ": " << m.status().ToString();
      EXPECT_FALSE(a->rows.empty()) << q;
      EXPECT_EQ(a->rows, c->rows) << q << " " << range.start_ms;
      EXPECT_EQ(a->rows, big->rows) << q << " " << range.start_ms;
      EXPECT_EQ(m->rows, c->rows) << q << " " << range.start_ms;
    }
  }
}

// Blocks without a field that the filter compares are not read (SegmentReader::BlockMayHaveField);
// the answers equal the unpruned scan, a format 1 segment and buffered events. `status` is a
// dictionary column in the first blocks, plain (one value per event) in the next ones, and absent
// from the last ones.
TEST_F(SegmentExecTest, BlocksWithoutAComparedFieldAreSkipped) {
  std::vector<PositionedEvent> events;
  for (int i = 0; i < 900; ++i) {
    std::vector<Field> fields = {{"level", i % 3 ? "info" : "warn"}};
    std::string raw = "line " + std::to_string(i);
    if (i < 300) {
      fields.push_back({"status", std::to_string(200 + 100 * (i % 4))});
    } else if (i < 600) {
      fields.push_back({"status", std::to_string(500 + i)});  // distinct: plain encoding
    }
    for (const Field& f : fields) raw += " " + f.name + "=" + f.value;
    events.push_back(Ev(1000 + i, 100 + i, raw, fields));
  }
  block_raw_bytes_ = 1024;
  ScanInput v1, v2, mem;
  v1.segments.push_back(WriteEvents("v1", events, 1));
  v2.segments.push_back(WriteEvents("v2", events, 2));
  BufferedSource b;
  b.datasource = Datasource{"logs", {{"#type", "app"}}};
  b.partition = PartitionId(1);
  b.events = std::make_shared<std::vector<PositionedEvent>>(events);
  mem.buffered.push_back(b);
  ExecOptions unpruned;
  unpruned.use_block_filters = false;
  const std::pair<const char*, const char*> cases[] = {
      {"status=500 | count()", "75"},
      {"status=99999 | count()", "0"},   // in no dictionary
      {"status=1099 | count()", "1"},    // a plain-encoded value
      {"status!=500 | count()", "825"},  // events without status match a negation
      {"NOT status=500 | count()", "825"},
      {"status=/^5/ | count()", "75"},
      {"status=/^5/i | count()", "75"},
      {"status=5* | count()", "75"},
      {"status>=1000 | count()", "100"},
      {"status=500 or level=warn | count()", "350"},
      {"status=500 and level=warn | count()", "25"},
      {"status=500 level=info | count()", "50"},
      {"status=* | count()", "600"},
      {"level=warn | count()", "300"},
  };
  for (const auto& [q, want] : cases) {
    auto p = RunQuery(q, v2, kAll);
    auto u = RunQuery(q, v2, kAll, unpruned);
    auto a = RunQuery(q, v1, kAll);
    auto m = RunQuery(q, mem, kAll);
    ASSERT_TRUE(p.ok() && u.ok() && a.ok() && m.ok()) << q;
    EXPECT_EQ(Column(*p, "_count"), want) << q;
    EXPECT_EQ(p->rows, u->rows) << q;
    EXPECT_EQ(p->rows, a->rows) << q;
    EXPECT_EQ(p->rows, m->rows) << q;
  }
  // Only the blocks that have status are read when the filter requires it (a filter without
  // terms for the token filters).
  auto p = RunQuery("status=* | groupBy(level)", v2, kAll);
  auto u = RunQuery("status=* | groupBy(level)", v2, kAll, unpruned);
  ASSERT_TRUE(p.ok() && u.ok());
  EXPECT_EQ(p->rows, u->rows);
  EXPECT_EQ(u->stats.blocks_scanned, u->stats.blocks_total);
  EXPECT_LT(p->stats.blocks_scanned, u->stats.blocks_total);
  EXPECT_GE(p->stats.events_scanned, 600u);
  EXPECT_LT(p->stats.events_scanned, 700u);
  // groupBy on a field: blocks without it are not read, their events still count as matched.
  for (const char* q : {"| groupBy(status)", "| top(status)", "level=warn | groupBy(status)"}) {
    auto gp = RunQuery(q, v2, kAll);
    auto gu = RunQuery(q, v2, kAll, unpruned);
    auto ga = RunQuery(q, v1, kAll);
    auto gm = RunQuery(q, mem, kAll);
    ASSERT_TRUE(gp.ok() && gu.ok() && ga.ok() && gm.ok()) << q;
    EXPECT_FALSE(gp->rows.empty()) << q;
    EXPECT_EQ(gp->rows, gu->rows) << q;
    EXPECT_EQ(gp->rows, ga->rows) << q;
    EXPECT_EQ(gp->rows, gm->rows) << q;
    EXPECT_EQ(gp->stats.events_matched, gu->stats.events_matched) << q;
    EXPECT_EQ(gp->stats.events_scanned, gu->stats.events_scanned) << q;
  }
  auto g = RunQuery("| groupBy(status)", v2, kAll);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->stats.events_matched, 900u);
  EXPECT_LT(g->stats.blocks_scanned, g->stats.blocks_total);
  // A negation or an OR with another field keeps every block.
  for (const char* q : {"status!=500 | count()", "status=500 or level=warn | count()"}) {
    auto r = RunQuery(q, v2, kAll);
    ASSERT_TRUE(r.ok()) << q;
    EXPECT_EQ(r->stats.blocks_scanned, r->stats.blocks_total) << q;
  }
}

// Counts the block reads of the segments it opens by whether they asked for @timestamp and
// positions (ColumnSelection::order). Thread-safe.
class OrderCountingOpener final : public SegmentOpener {
 public:
  explicit OrderCountingOpener(const SegmentOpener* inner) : inner_(inner) {}
  Result<std::unique_ptr<SegmentReader>> Open(const std::string& file_name) const override {
    ASSIGN_OR_RETURN(std::unique_ptr<SegmentReader> r, inner_->Open(file_name));
    return std::unique_ptr<SegmentReader>(std::make_unique<Reader>(std::move(r), this));
  }
  uint64_t ordered() const { return ordered_.load(); }
  uint64_t unordered() const { return unordered_.load(); }
  void Reset() {
    ordered_ = 0;
    unordered_ = 0;
  }

 private:
  class Reader final : public SegmentReader {
   public:
    Reader(std::unique_ptr<SegmentReader> r, const OrderCountingOpener* o)
        : r_(std::move(r)), o_(o) {}
    const SegmentInfo& info() const override { return r_->info(); }
    const std::vector<BlockInfo>& blocks() const override { return r_->blocks(); }
    bool BlockMayContainAll(size_t i, const std::vector<std::string>& terms) const override {
      return r_->BlockMayContainAll(i, terms);
    }
    Status ReadBlock(size_t i, DecodedBlock* out) const override {
      ++o_->ordered_;
      return r_->ReadBlock(i, out);
    }
    Status ReadBlockColumns(size_t i, const ColumnSelection& columns,
                            DecodedBlock* out) const override {
      ++(columns.all || columns.order ? o_->ordered_ : o_->unordered_);
      return r_->ReadBlockColumns(i, columns, out);
    }
    Status ReadStoredBlock(size_t i, StoredBlock* out) const override {
      return r_->ReadStoredBlock(i, out);
    }
    uint32_t format_version() const override { return r_->format_version(); }
    Status VerifyAll() const override { return r_->VerifyAll(); }

   private:
    std::unique_ptr<SegmentReader> r_;
    const OrderCountingOpener* o_;
  };
  const SegmentOpener* inner_;
  mutable std::atomic<uint64_t> ordered_{0}, unordered_{0};
};

// A query that reads neither @timestamp, @id nor the records' order reads the blocks wholly
// inside its range without @timestamp and positions, and the blocks the range cuts with them;
// the answers are those of format 1 (always decoded whole) and of the same events buffered.
TEST_F(SegmentExecTest, BlocksInsideTheRangeSkipTimeAndPositionsWhenUnread) {
  std::vector<PositionedEvent> events;
  const char* methods[] = {"GET", "POST", "PUT"};
  for (int i = 0; i < 2000; ++i) {
    const std::string status = std::to_string(200 + 100 * (i % 4));
    events.push_back(
        Ev(1000 + i * 2, 100 + i,
           std::string(methods[i % 3]) + " /x " + status + " u" + std::to_string(i % 29),
           {{"method", methods[i % 3]},
            {"status", status},
            {"user", "u" + std::to_string(i % 29)},
            {"size", std::to_string((i * 31) % 977)}}));
  }
  ScanInput v1, v2, mem;
  v1.segments.push_back(WriteEvents("v1", events, 1));
  v2.segments.push_back(WriteEvents("v2", events, 2));
  OrderCountingOpener counting(opener_.get());
  v2.segments[0].opener = &counting;
  {
    auto r = opener_->Open("v2");
    ASSERT_TRUE(r.ok());
    ASSERT_GT((*r)->blocks().size(), 4u);
  }
  BufferedSource b;
  b.datasource = Datasource{"logs", {{"#type", "app"}}};
  b.partition = PartitionId(1);
  b.events = std::make_shared<std::vector<PositionedEvent>>(events);
  mem.buffered.push_back(b);
  struct Case {
    const char* q;
    bool order;  // the blocks inside the range need @timestamp and positions
  };
  const Case cases[] = {
      {"status=500 | count()", false},
      {"| groupBy(status)", false},
      {"status=500 | groupBy(method)", false},
      {"status=500 | groupBy(user, function=sum(size))", false},
      {"/PUT/ | groupBy(status)", false},  // with the raw strings
      {"| timeChart(span=100ms)", true},
      {"| groupBy(status, function=selectLast(user))", true},
      {"@timestamp > 1500 | count()", true},
      {"| groupBy(status, function=max(@timestamp))", true},
      {"status=500 | tail(3)", true},
  };
  const TimeRange whole{0, 100000}, cut{1501, 4499};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.q);
    for (const TimeRange& range : {whole, cut}) {
      counting.Reset();
      auto got = RunQuery(c.q, v2, range);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      auto full = RunQuery(c.q, v1, range);
      auto buffered = RunQuery(c.q, mem, range);
      ASSERT_TRUE(full.ok() && buffered.ok());
      EXPECT_FALSE(got->rows.empty());
      EXPECT_EQ(got->rows, full->rows);
      EXPECT_EQ(got->rows, buffered->rows);
      if (!c.order) {
        // (tail() counts only the events it read, which depends on the block sizes.)
        EXPECT_EQ(got->stats.events_matched, full->stats.events_matched);
      }
      if (c.order) {
        EXPECT_EQ(counting.unordered(), 0u);
        EXPECT_GT(counting.ordered(), 0u);
      } else if (range.start_ms == whole.start_ms) {
        // Every block inside the range.
        EXPECT_EQ(counting.ordered(), 0u);
        EXPECT_GT(counting.unordered(), 0u);
      } else {
        // The blocks at the range's edges (one or two) need each event's time; the others do
        // not.
        EXPECT_GE(counting.ordered(), 1u);
        EXPECT_LE(counting.ordered(), 2u);
        EXPECT_GT(counting.unordered(), 0u);
      }
    }
  }
}

// count() over blocks wholly inside the range reads no block: the segment index has their event
// counts. Blocks cut by the range, or any filter, are read.
TEST_F(SegmentExecTest, CountOfWholeBlocksReadsNoBlock) {
  ScanInput in;
  in.segments.push_back(MakeSegment(1, 10000, 3000, -1));
  in.segments.push_back(MakeSegment(2, 20000, 3000, 7));
  for (int threads : {1, 2}) {
    ExecOptions o;
    o.threads = threads;
    auto all = RunQuery("| count()", in, TimeRange{0, 100000}, o);
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(std::get<int64_t>(*Get(all->rows[0], "_count")), 6000);
    EXPECT_EQ(all->stats.blocks_scanned, 0u);
    EXPECT_EQ(all->stats.events_matched, 6000u);
    // A range that cuts blocks: those are read and their events filtered by time.
    auto part = RunQuery("| count()", in, TimeRange{10500, 21000}, o);
    ASSERT_TRUE(part.ok());
    EXPECT_EQ(std::get<int64_t>(*Get(part->rows[0], "_count")), 3500);
    EXPECT_GT(part->stats.blocks_scanned, 0u);
    EXPECT_LT(part->stats.blocks_scanned, part->stats.blocks_total);
    auto filtered = RunQuery("zebrafish | count()", in, TimeRange{0, 100000}, o);
    ASSERT_TRUE(filtered.ok());
    EXPECT_EQ(std::get<int64_t>(*Get(filtered->rows[0], "_count")), 1);
    auto two = RunQuery("| [count(), count(as=n)]", in, TimeRange{0, 100000}, o);
    ASSERT_TRUE(two.ok());
    EXPECT_EQ(std::get<int64_t>(*Get(two->rows[0], "n")), 6000);
    EXPECT_EQ(two->stats.blocks_scanned, 0u);
  }
}

// tail(N) and head(N) read blocks newest (oldest) first and skip blocks wholly older (newer) than
// the N they keep; the rows are those of a full scan.
TEST_F(SegmentExecTest, HeadAndTailSkipBlocksBeyondWhatTheyKeep) {
  ScanInput in;
  in.segments.push_back(MakeSegment(1, 10000, 3000, -1));
  in.segments.push_back(MakeSegment(2, 20000, 3000, -1));
  in.segments.push_back(MakeSegment(3, 5000, 3000, -1));  // overlaps nothing, oldest
  BufferedSource b;
  b.datasource = Datasource{"logs", {{"#type", "app"}}};
  b.partition = PartitionId(9);
  b.events = std::make_shared<std::vector<PositionedEvent>>(
      std::vector<PositionedEvent>{Ev(15000, 1, "buffered one"), Ev(30000, 2, "newest")});
  in.buffered.push_back(b);
  for (int threads : {1, 3}) {
    ExecOptions o;
    o.threads = threads;
    for (const char* q : {"| tail(5)", "| head(5)", "served | tail(50)", "| head(2500)"}) {
      SCOPED_TRACE(std::string(q) + " threads " + std::to_string(threads));
      auto r = RunQuery(q, in, TimeRange{0, 100000}, o);
      ASSERT_TRUE(r.ok());
      // The same rows as collecting every event and cutting afterwards.
      auto all =
          RunQuery(std::string(q).find("served") == 0 ? "served" : "", in, TimeRange{0, 100000}, o);
      ASSERT_TRUE(all.ok());
      std::vector<Row> rows = all->rows;
      const size_t n = std::string(q).find("2500") != std::string::npos ? 2500
                       : std::string(q).find("50") != std::string::npos ? 50
                                                                        : 5;
      if (std::string(q).find("tail") != std::string::npos) {
        rows.erase(rows.begin(), rows.end() - static_cast<ptrdiff_t>(n));
      } else {
        rows.resize(n);
      }
      EXPECT_EQ(r->rows, rows);
      // Each worker cuts once it holds N itself: a few blocks per worker for a small N.
      if (n <= 50) {
        EXPECT_LT(r->stats.blocks_scanned, r->stats.blocks_total / 2);
      }
    }
  }
}

// The selection itself: what each shape of query reads.
TEST(ScanColumnsTest, SelectsWhatTheQueryReads) {
  auto sel = [](std::string_view q) {
    auto c = Compile(q);
    EXPECT_TRUE(c.ok()) << q;
    ColumnSelection s = ScanColumns(**c);
    if (s.all) return std::string("all");
    std::string out = s.raw ? "raw" : (s.ingest ? "ingest" : "");
    for (const std::string& f : s.fields) out += (out.empty() ? "" : ",") + f;
    return out;
  };
  EXPECT_EQ(sel("| count()"), "");
  EXPECT_EQ(sel("status=500 | count()"), "status");
  EXPECT_EQ(sel("| groupBy(status)"), "status");
  EXPECT_EQ(sel("| groupBy([a, b], function=sum(c))"), "a,b,c");
  EXPECT_EQ(sel("| timeChart(span=1m)"), "");
  EXPECT_EQ(sel("error | count()"), "raw");
  EXPECT_EQ(sel("| regex(\"x(?<y>.)\") | groupBy(y)"), "raw,y");
  EXPECT_EQ(sel("| @timestamp > 5 | count()"), "");
  EXPECT_EQ(sel("| @ingesttimestamp > 5 | count()"), "ingest");
  EXPECT_EQ(sel("#repo=x | count()"), "");
  EXPECT_EQ(sel("status=500"), "all");
  EXPECT_EQ(sel("| tail(10)"), "all");
  EXPECT_EQ(sel("| kvParse() | count()"), "all");
  EXPECT_EQ(sel("| count() | sort(_count)"), "");
  // Whether @timestamp and positions are needed (ColumnSelection::order).
  auto order = [](std::string_view q) {
    auto c = Compile(q);
    EXPECT_TRUE(c.ok()) << q;
    ColumnSelection s = ScanColumns(**c);
    return s.all || s.order;
  };
  EXPECT_FALSE(order("status=500 | count()"));
  EXPECT_FALSE(order("| groupBy(status)"));
  EXPECT_FALSE(order("status=500 | groupBy(method, function=[sum(size), collect(user)])"));
  EXPECT_FALSE(order("error | top(user)"));
  EXPECT_FALSE(order("| x := size * 2 | avg(x)"));
  EXPECT_TRUE(order("| timeChart(span=1m)"));
  EXPECT_TRUE(order("| bucket(span=1m)"));
  EXPECT_TRUE(order("@timestamp > 5 | count()"));
  EXPECT_TRUE(order("| groupBy(@id)"));
  EXPECT_TRUE(order("| t := @timestamp | max(t)"));
  EXPECT_TRUE(order("| formatTime(\"%H\", as=h) | groupBy(h)"));
  EXPECT_TRUE(order("| groupBy(a, function=selectLast(b))"));
  EXPECT_TRUE(order("| groupBy(a, function=selectFromMax(c, include=[b]))"));
  EXPECT_TRUE(order("| table([a])"));
  EXPECT_TRUE(order("| upper(a) | count()"));  // a RecordFunction
  EXPECT_TRUE(order("status=500"));
  EXPECT_TRUE(order("| tail(10)"));
}

TEST_F(SegmentExecTest, RareTermPrunesBlocksAndMatchesUnprunedResult) {
  ScanInput in;
  in.segments.push_back(MakeSegment(1, 10000, 3000, 1234));
  in.segments.push_back(MakeSegment(2, 20000, 3000, -1));
  ExecOptions pruned, full;
  full.use_block_filters = false;
  auto a = RunQuery("zebrafish", in, TimeRange{0, 100000}, pruned);
  auto b = RunQuery("zebrafish", in, TimeRange{0, 100000}, full);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->rows.size(), 1u);
  EXPECT_EQ(a->rows, b->rows);
  EXPECT_EQ(std::get<int64_t>(*Get(a->rows[0], "@timestamp")), 11234);
  EXPECT_EQ(std::get<std::string>(*Get(a->rows[0], "@id")), "1-101234-0");
  EXPECT_EQ(std::get<std::string>(*Get(a->rows[0], "#type")), "app");
  EXPECT_EQ(std::get<std::string>(*Get(a->rows[0], "user")), "u12");
  EXPECT_EQ(a->stats.segments_total, 2u);
  EXPECT_EQ(a->stats.segments_scanned, 2u);
  EXPECT_GT(a->stats.blocks_total, 20u);
  EXPECT_LT(a->stats.blocks_scanned, a->stats.blocks_total / 4);
  EXPECT_EQ(b->stats.blocks_scanned, b->stats.blocks_total);
  EXPECT_LT(a->stats.bytes_scanned, b->stats.bytes_scanned);
  EXPECT_EQ(b->stats.events_scanned, 6000u);
  EXPECT_TRUE(a->warnings.empty());

  // Common terms and aggregates agree with and without pruning.
  for (const char* q :
       {"user=u3 | count()", "served | groupBy(user)", "request 42", "alert or \"request 7 \"",
        "user=u1* | tail(5)", "served alert or zebrafish", "zebrafish or served alert",
        "\"zebra*ALERT\"", "user=\"u1*\" | count()", "zebrafish or zebra"}) {
    auto x = RunQuery(q, in, TimeRange{0, 100000}, pruned);
    auto y = RunQuery(q, in, TimeRange{0, 100000}, full);
    ASSERT_TRUE(x.ok() && y.ok()) << q;
    EXPECT_EQ(x->rows, y->rows) << q;
    EXPECT_FALSE(x->rows.empty()) << q;
  }
  // Wildcard pieces and terms implied by both sides of an OR still prune.
  for (const char* q : {"\"ZEBRA*alert\"", "zebr*sh", "zebrafish or zebra",
                        "served (zebrafish alert) or (zebrafish user=u12)"}) {
    auto x = RunQuery(q, in, TimeRange{0, 100000}, pruned);
    ASSERT_TRUE(x.ok()) << q;
    ASSERT_EQ(x->rows.size(), 1u) << q;
    EXPECT_EQ(std::get<int64_t>(*Get(x->rows[0], "@timestamp")), 11234) << q;
    EXPECT_LT(x->stats.blocks_scanned, x->stats.blocks_total / 4) << q;
  }
  auto c = RunQuery("user=u3 | count()", in, TimeRange{0, 100000});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Column(*c, "_count"), std::to_string(2 * ((3000 - 3 + 12) / 13)));
}

TEST_F(SegmentExecTest, RegexLiteralsPruneBlocksAndMatchUnprunedResult) {
  ScanInput in;
  in.segments.push_back(MakeSegment(1, 10000, 3000, 1234));
  in.segments.push_back(MakeSegment(2, 20000, 3000, -1));
  ExecOptions pruned, full;
  full.use_block_filters = false;
  // Each needs "zebrafish" (or "alert"): only the rare event's block is read.
  for (const char* q : {"/Zebra[f]ish\\s+a/", "/(?i)zebrafish.*alert/", "/user=u\\d+ .*Zebrafish/",
                        "/(Zebrafish|zebrafish) alert$/", "user=/u12/ /fish alert/",
                        R"q(regex("(?<animal>\\w+fish) alert") | groupBy(animal))q",
                        R"q(regex("user=(?<u>\\w+) path=\\S+ Zebra") | table([u]))q"}) {
    auto x = RunQuery(q, in, TimeRange{0, 100000}, pruned);
    auto y = RunQuery(q, in, TimeRange{0, 100000}, full);
    ASSERT_TRUE(x.ok() && y.ok()) << q;
    EXPECT_EQ(x->rows, y->rows) << q;
    EXPECT_EQ(x->rows.size(), 1u) << q;
    EXPECT_LT(x->stats.blocks_scanned, x->stats.blocks_total / 4) << q;
  }
  // Regexes without a certain literal, or with common ones, read every block and agree.
  for (const char* q : {"/u1[0-2] path/ | count()", "/(?i)zebrafish|served/ | count()",
                        R"q(regex("user=(?<u>u1\\d)") | groupBy(u))q", "/^2024/ | count()"}) {
    auto x = RunQuery(q, in, TimeRange{0, 100000}, pruned);
    auto y = RunQuery(q, in, TimeRange{0, 100000}, full);
    ASSERT_TRUE(x.ok() && y.ok()) << q;
    EXPECT_EQ(x->rows, y->rows) << q;
    EXPECT_FALSE(x->rows.empty()) << q;
  }
}

// regex(...) | groupBy(group) is counted block by block (RegexGroupCounter, SimpleRegex) and
// must answer exactly as the per-record path, which a select() between the stages forces: with
// events the regex does not match, non-ASCII text, an optional group that keeps the event's own
// field, and patterns outside SimpleRegex's subset.
TEST_F(SegmentExecTest, RegexGroupCountsAnswerAsTheRecordPath) {
  std::vector<PositionedEvent> events;
  const std::vector<std::string> texts = {
      R"(1.2.3.4 - - "GET /a HTTP/1.1" 200 12 user=u1)",
      R"(1.2.3.5 - - "GET /é HTTP/1.1" 404 0 user=ü2)",
      R"(no status here user=u3)",
      R"(1.2.3.6 - - "POST /b HTTP/1.1" 500 7 served)",
      R"(x "" 30 " 301 y user=u1)",
      "",
  };
  for (int i = 0; i < 600; ++i) {
    const std::string& t = texts[static_cast<size_t>(i) % texts.size()];
    events.push_back(Ev(1000 + i, i, t, {{"user", "f" + std::to_string(i % 3)}}));
  }
  ScanInput in;
  in.segments.push_back(WriteEvents("regexcount", events, 2));
  int fast = 0;
  for (const char* r : {R"(\" (?<status>\d{3}) )", R"(user=(?<user>\S+))", R"((?<user>zz)?served)",
                        R"((?<method>[A-Z]+) /(?<path>[^ ]*) )", R"((?<status>\d{3}|xyz) )",
                        R"((?i)(?<user>U\d))"}) {
    const std::string group = std::string(r).find("status") != std::string::npos ? "status"
                              : std::string(r).find("user") != std::string::npos ? "user"
                                                                                 : "path";
    std::string lit;
    for (const char* c = r; *c; ++c) {
      if (*c == '"' || *c == '\\') lit += '\\';
      lit += *c;
    }
    const std::string q1 = "regex(\"" + lit + "\") | groupBy(" + group + ")";
    const std::string q2 =
        "regex(\"" + lit + "\") | select([" + group + "]) | groupBy(" + group + ")";
    auto c = Compile(q1);
    ASSERT_TRUE(c.ok()) << q1 << ": " << c.status().ToString();
    CollectorContext ctx;
    ctx.range = TimeRange{0, 100000};
    auto collector = NewCollector((*c)->stages[1], ctx);
    fast += RegexGroupCounter::For(**c, 1, *collector) != nullptr;
    auto x = RunQuery(q1, in, TimeRange{0, 100000});
    auto y = RunQuery(q2, in, TimeRange{0, 100000});
    ASSERT_TRUE(x.ok() && y.ok()) << q1;
    EXPECT_EQ(x->rows, y->rows) << q1;
    EXPECT_FALSE(x->rows.empty()) << q1;
  }
  EXPECT_EQ(fast, 6);  // every one of them takes the block path (SimpleRegex or RE2 inside)
}

// The block path keeps a block's distinct group values in a short list (values of up to 7 bytes
// compared as one word): more distinct values than the list holds, values of 0 to 12 bytes, and
// values that differ only in their length or in a byte beyond the seventh count as the record path.
TEST_F(SegmentExecTest, RegexGroupCountsManyAndLongValuesAsTheRecordPath) {
  std::vector<PositionedEvent> events;
  for (int i = 0; i < 3000; ++i) {
    std::string v = std::string(static_cast<size_t>(i % 13), 'a');
    if (!v.empty()) v.back() = static_cast<char>('a' + (i / 13) % 7);
    events.push_back(Ev(1000 + i, i, "x k=" + v + " end", {}));
  }
  ScanInput in;
  in.segments.push_back(WriteEvents("regexmany", events, 2));
  const std::string q1 = R"q(regex("k=(?<v>\w*) end") | groupBy(v, limit=max))q";
  const std::string q2 = R"q(regex("k=(?<v>\w*) end") | select([v]) | groupBy(v, limit=max))q";
  auto x = RunQuery(q1, in, TimeRange{0, 100000});
  auto y = RunQuery(q2, in, TimeRange{0, 100000});
  ASSERT_TRUE(x.ok() && y.ok()) << x.status().ToString() << " " << y.status().ToString();
  EXPECT_EQ(x->rows, y->rows);
  EXPECT_EQ(x->rows.size(), 1u + 12u * 7u);  // "" and 7 last letters at each length 1..12
}

// A fixed pattern with a leading literal is searched for over each run of events laid out back to
// back (RegexGroupCounter::scans): an occurrence of the literal that runs into the next event, a
// match that would end in the next event, a first occurrence that does not match before one that
// does, empty events and events a filter left out must count as the record path counts them, in
// format 1 and 2 segments, with the literal found by the searcher (2 bytes) and by memchr (1).
TEST_F(SegmentExecTest, RegexGroupScanAcrossEventsAnswersAsTheRecordPath) {
  const std::vector<std::string> texts = {R"(a ")",
                                          R"( 200 x)",
                                          R"(x " 20)",
                                          R"(0 y)",
                                          R"(" abc " 404 z)",
                                          R"(" 500 " 501 )",
                                          R"(skip " 302 )",
                                          "",
                                          R"(")",
                                          R"( 201 )",
                                          R"(q "  203 )",
                                          R"(k=a)",
                                          R"(b; k=cd;)",
                                          R"(k=é; k=ef;)",
                                          R"(=gh)",
                                          R"(;)",
                                          R"(skip k=ij;)",
                                          R"(k=k1; k=lm;)",
                                          R"(" 999)",
                                          R"( )"};
  std::mt19937 rng(7);
  std::vector<PositionedEvent> events;
  for (int i = 0; i < 3000; ++i) {
    events.push_back(Ev(1000 + i, i, texts[rng() % texts.size()], {}));
  }
  block_raw_bytes_ = 700;
  ScanInput in;
  in.segments.push_back(WriteEvents("scan1", events, 1));
  in.segments.push_back(WriteEvents("scan2", events, 2));
  int scans = 0;
  // Values: 404 500 302 (skipped by the filter); cd ef ij (skipped) lm.
  for (const char* pattern : {R"(\" (?<g>\d{3}) )", R"(=(?<g>[a-z]{2});)"}) {
    std::string lit;
    for (const char* c = pattern; *c; ++c) {
      if (*c == '"' || *c == '\\') lit += '\\';
      lit += *c;
    }
    for (const std::string filter : {"", "NOT skip | "}) {
      const std::string q1 = filter + "regex(\"" + lit + "\") | groupBy(g)";
      const std::string q2 = filter + "regex(\"" + lit + "\") | select([g]) | groupBy(g)";
      auto c = Compile(q1);
      ASSERT_TRUE(c.ok()) << q1 << ": " << c.status().ToString();
      CollectorContext ctx;
      ctx.range = TimeRange{0, 100000};
      auto collector = NewCollector((*c)->stages[1], ctx);
      auto counter = RegexGroupCounter::For(**c, 1, *collector);
      scans += counter != nullptr && counter->scans();
      auto x = RunQuery(q1, in, TimeRange{0, 100000});
      auto y = RunQuery(q2, in, TimeRange{0, 100000});
      ASSERT_TRUE(x.ok() && y.ok()) << q1;
      EXPECT_EQ(x->rows, y->rows) << q1;
      const size_t values = pattern[0] == '=' ? 4 : 3;
      EXPECT_EQ(x->rows.size(), filter.empty() ? values : values - 1) << q1;
    }
  }
  EXPECT_EQ(scans, 4);
}

TEST_F(SegmentExecTest, TimeAndTagPruning) {
  ScanInput in;
  in.segments.push_back(MakeSegment(1, 10000, 500, -1));
  in.segments.push_back(MakeSegment(2, 20000, 500, -1));
  auto r = RunQuery("| count()", in, TimeRange{20100, 20200});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Column(*r, "_count"), "100");
  EXPECT_EQ(r->stats.segments_scanned, 1u);
  EXPECT_LT(r->stats.blocks_scanned, r->stats.blocks_total);
  r = RunQuery("#type=other | count()", in, TimeRange{0, 100000});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Column(*r, "_count"), "0");
  EXPECT_EQ(r->stats.segments_scanned, 0u);
}

TEST_F(SegmentExecTest, SegmentsAndBufferedMergeInTimestampOrder) {
  ScanInput in = SampleInput();
  in.segments.push_back(MakeSegment(3, 1003, 2, -1));  // ts 1003, 1004
  auto r = RunQuery("", in, kAll);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Column(*r, "@timestamp"), "1001,1002,1003,1003,1004,1004,1005");
  // Ties are ordered by partition then position: buffered partition 0 before segment's 3.
  EXPECT_EQ(Column(*r, "#repo"), "web,web,web,logs,web,logs,web");
}

TEST_F(SegmentExecTest, CorruptAndMissingSegmentsBecomeWarnings) {
  ScanInput in;
  in.segments.push_back(MakeSegment(1, 10000, 1000, -1));
  in.segments.push_back(MakeSegment(2, 20000, 1000, -1));
  in.segments.push_back(MakeSegment(3, 30000, 1000, -1));
  in.segments.push_back(MakeSegment(4, 40000, 1000, -1));
  // Segment 2: flip bytes at the start of its first block: its timestamp column, which every
  // query reads (a damaged column that a query does not read does not affect it).
  {
    auto data = Env::Default()->ReadFile((dir_ + "/" + in.segments[1].file_name));
    ASSERT_TRUE(data.ok());
    auto reader = SegmentReader::Open(Env::Default(), (dir_ + "/" + in.segments[1].file_name));
    ASSERT_TRUE(reader.ok());
    const BlockInfo& b0 = (*reader)->blocks()[0];
    std::string bytes = *data;
    for (uint32_t k = 0; k < 16; ++k) bytes[b0.file_offset + k] ^= 0x5a;
    ASSERT_TRUE(
        Env::Default()->WriteFileAtomic((dir_ + "/" + in.segments[1].file_name), bytes).ok());
  }
  // Segment 3: truncated (footer gone).
  ASSERT_TRUE(Env::Default()->TruncateFile((dir_ + "/" + in.segments[2].file_name), 100).ok());
  // Segment 4: missing.
  ASSERT_TRUE(Env::Default()->RemoveFile((dir_ + "/" + in.segments[3].file_name)).ok());

  // count(@timestamp) reads every block's timestamps (a bare count() of whole blocks is answered
  // from the segment index, see CountOfWholeBlocksReadsNoBlock).
  for (int threads : {1, 3}) {
    ExecOptions o;
    o.threads = threads;
    auto r = RunQuery("| count(@timestamp)", in, TimeRange{0, 100000}, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    int64_t count = std::get<int64_t>(*Get(r->rows[0], "_count"));
    EXPECT_GE(count, 1000);  // segment 1 in full, segment 2 minus its bad block
    EXPECT_LT(count, 2000);
    ASSERT_EQ(r->warnings.size(), 3u);
    EXPECT_NE(r->warnings[0].find("segment 2 block 0 ("), std::string::npos) << r->warnings[0];
    EXPECT_NE(r->warnings[0].find(FormatIso8601Millis(20000)), std::string::npos);
    EXPECT_NE(r->warnings[1].find("segment 3 ("), std::string::npos) << r->warnings[1];
    EXPECT_NE(r->warnings[1].find(FormatIso8601Millis(30000) + " .. " + FormatIso8601Millis(30999)),
              std::string::npos);
    EXPECT_NE(r->warnings[2].find("segment 4 ("), std::string::npos) << r->warnings[2];
    EXPECT_EQ(r->stats.segments_scanned, 2u);
    EXPECT_EQ(r->unreadable_segments,
              (std::vector<SegmentId>{SegmentId(2), SegmentId(3), SegmentId(4)}));
    auto m = CollectMatches(Env::Default(), **Compile(""), TimeRange{0, 100000}, in, o);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->unreadable_segments, r->unreadable_segments);
  }
}

// ---------- partial results, limits, progress ----------

// Buffered sources with k (0..6), n (0..999) and 2% needles over 3 partitions.
ScanInput ManyEvents(int per_source = 4000) {
  ScanInput in;
  std::mt19937 rng(11);
  for (int src = 0; src < 3; ++src) {
    auto v = std::make_shared<std::vector<PositionedEvent>>();
    for (int i = 0; i < per_source; ++i) {
      std::string raw = "event " + std::to_string(i) + (rng() % 50 == 0 ? " needle" : " hay");
      v->push_back(Ev(static_cast<int64_t>(rng() % 100000), i, raw,
                      {{"k", std::to_string(rng() % 7)}, {"n", std::to_string(rng() % 1000)}}));
    }
    in.buffered.push_back(
        BufferedSource{Datasource{"r", {{"#src", std::to_string(src)}}}, PartitionId(src), v});
  }
  return in;
}

TEST(PartialTest, SplitInputMergesToTheSameResult) {
  const ScanInput in = ManyEvents();
  const TimeRange range{0, 100000};
  const char* queries[] = {
      "needle",
      "| count()",
      "needle | groupBy(k)",
      "| groupBy(k, function=[count(), sum(n), avg(n), min(n), max(n)])",
      "| tail(50)",
      "| head(7)",
      "k=3 | sort(n, order=asc, limit=20)",
      "| table([k, n], limit=10)",
      "| x := n * 2 | k >= 5 | groupBy(x) | sort(_count, limit=5)",
      "| top(k, limit=3)",
      "| count(k, distinct=true)",
      "| percentile(n, percentiles=[50, 99])",
      "| timeChart(span=10s)",
      "| bucket(span=20s, field=k, function=max(n))",
      "needle | regex(\"event (?<num>\\d+)\") | num < 100 | table([num])",
      "| stats([count(), avg(n)])",
      "| neighbor([n, k], prefix=prev, distance=3)",
      "needle | accumulate([sum(n), count(as=c)])",
      "| slidingTimeWindow([max(n), count()], span=2s)",
      "| createEvents([\"a=1\", \"a=2\"]) | kvParse()",
      "| groupBy(k) | sort(k, order=asc) | transpose(header=k)",
      "| head(20) | neighbor(n, direction=succeeding)",
      "| correlate(A: { k=1 } include: [n], B: { k=2 | #src <=> A.#src }, maxPerRoot=2)",
      "| groupBy(k, function=series(n, separator=\",\", maxpause=1s, memlimit=1MiB))",
      "| timeChart(span=10s, function=[max(n, as=m), window([avg(n), count()], buckets=2)])",
  };
  for (const char* q : queries) {
    auto c = Compile(q);
    ASSERT_TRUE(c.ok()) << q << ": " << c.status().ToString();
    ExecOptions o;
    o.threads = 2;
    auto whole = Execute(Env::Default(), **c, range, in, o);
    ASSERT_TRUE(whole.ok()) << q << ": " << whole.status().ToString();
    // One partial per source, as three nodes would send them (two of them over the wire).
    std::vector<PartialResult> parts;
    for (size_t i = 0; i < in.buffered.size(); ++i) {
      ScanInput one;
      one.buffered.push_back(in.buffered[i]);
      auto p = ExecutePartial(Env::Default(), **c, range, one, o);
      ASSERT_TRUE(p.ok()) << q << ": " << p.status().ToString();
      if (i == 0) {
        parts.push_back(std::move(p).value());
      } else {
        auto decoded = DecodePartial(EncodePartial(*p));
        ASSERT_TRUE(decoded.ok()) << q << ": " << decoded.status().ToString();
        parts.push_back(std::move(decoded).value());
      }
    }
    auto merged = FinishPartials(**c, range, std::move(parts), o);
    ASSERT_TRUE(merged.ok()) << q << ": " << merged.status().ToString();
    EXPECT_EQ(merged->rows, whole->rows) << q;
    EXPECT_FALSE(whole->rows.empty()) << q;
    EXPECT_EQ(merged->stats.events_scanned, whole->stats.events_scanned) << q;
    EXPECT_EQ(merged->is_aggregate, whole->is_aggregate) << q;
  }
}

TEST(PartialTest, GarbledStatesAreCorruption) {
  const ScanInput in = ManyEvents(500);
  auto c = Compile("| groupBy(k)");
  ASSERT_TRUE(c.ok());
  auto p = ExecutePartial(Env::Default(), **c, TimeRange{0, 100000}, in);
  ASSERT_TRUE(p.ok());
  std::string frame = EncodePartial(*p);
  frame[frame.size() / 2] ^= 0x40;
  EXPECT_EQ(DecodePartial(frame).status().code(), StatusCode::kCorruption);
  // A state that decodes as a frame but not as this stage's collector.
  PartialResult bad;
  bad.state = "not a collector";
  std::vector<PartialResult> parts;
  parts.push_back(std::move(bad));
  auto r = FinishPartials(**c, TimeRange{0, 100000}, std::move(parts));
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
}

TEST(LimitsTest, DeadlineCancelAndMemory) {
  const ScanInput in = ManyEvents();
  ExecOptions late;
  late.deadline = std::chrono::steady_clock::now() - std::chrono::milliseconds(1);
  auto r = RunQuery("| count()", in, kAll, late);
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);

  std::atomic<bool> cancel{true};
  ExecOptions cancelled;
  cancelled.cancel = &cancel;
  r = RunQuery("needle", in, kAll, cancelled);
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
  cancel = false;
  EXPECT_TRUE(RunQuery("needle", in, kAll, cancelled).ok());

  ExecOptions small;
  small.max_memory_bytes = 20000;
  r = RunQuery("| groupBy([k, n])", in, kAll, small);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("groupBy()"), std::string::npos) << r.status().ToString();
  // A small answer fits the same bound.
  EXPECT_TRUE(RunQuery("| groupBy(k)", in, kAll, small).ok());
}

TEST(LimitsTest, ProgressCountsEveryTask) {
  const ScanInput in = ManyEvents();
  QueryProgress progress;
  ExecOptions o;
  o.progress = &progress;
  auto r = RunQuery("needle | count()", in, kAll, o);
  ASSERT_TRUE(r.ok());
  EXPECT_GT(progress.tasks_total.load(), 0u);
  EXPECT_EQ(progress.tasks_done.load(), progress.tasks_total.load());
  EXPECT_EQ(progress.events_scanned.load(), 12000u);
  EXPECT_EQ(static_cast<int64_t>(progress.events_matched.load()),
            std::get<int64_t>(*Get(r->rows[0], "_count")));
}

TEST(PipelineTest, StagesAfterTheFirstAggregateRunOnRows) {
  ScanInput in = SampleInput();
  auto r = RunQuery("| groupBy(status) | _count > 1 | x := _count * 10 | select([status, x])", in);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->rows.size(), 1u);
  EXPECT_EQ(Column(*r, "status"), "200");
  EXPECT_EQ(Column(*r, "x"), "20");
  // A filter stage between per-record stages keeps the event order of plain searches.
  r = RunQuery(
      "| in(method, values=[get], ignoreCase=true) | lower(method, as=method) | table([method, "
      "status])",
      in);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Column(*r, "method"), "get,get");
}

}  // namespace
}  // namespace sediment::query

#include "query/aggregate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <random>
#include <set>

#include "query/compiled.h"
#include "query/query.h"
#include "query/record.h"

namespace sediment::query {
namespace {

// ---------- helpers ----------

RecordKey Key(int64_t ts, int64_t offset = 0, int32_t partition = 0, uint32_t index = 0) {
  return RecordKey{ts, partition, offset, index};
}

Record R(Row row, RecordKey key) { return Record::FromRow(std::move(row), key); }

Metric M(Metric::Kind k, std::string field = "", std::string as = "") {
  Metric m;
  m.kind = k;
  m.field = std::move(field);
  m.as = std::move(as);
  return m;
}
Metric Distinct(std::string field) {
  Metric m = M(Metric::Kind::kCount, std::move(field));
  m.distinct = true;
  return m;
}
Metric Pct(std::string field, std::vector<double> ps, std::string as = "") {
  Metric m = M(Metric::Kind::kPercentile, std::move(field), std::move(as));
  m.percentiles = std::move(ps);
  return m;
}

Stage Agg(Stage::Grouping g, std::vector<std::string> fields, std::vector<Metric> metrics,
          int64_t limit = 20000) {
  Stage st;
  st.kind = Stage::Kind::kAggregate;
  st.grouping = g;
  st.fields = std::move(fields);
  st.metrics = std::move(metrics);
  st.limit = limit;
  st.function = g == Stage::Grouping::kGroupBy  ? "groupBy"
                : g == Stage::Grouping::kBucket ? "timeChart"
                : g == Stage::Grouping::kTop    ? "top"
                                                : "stats";
  return st;
}
Stage Simple(Stage::Kind kind, int64_t limit, std::vector<std::string> fields = {},
             bool descending = true) {
  Stage st;
  st.kind = kind;
  st.limit = limit;
  st.fields = std::move(fields);
  st.descending = descending;
  return st;
}

struct Output {
  std::vector<Row> rows;
  std::vector<std::string> warnings;
  bool operator==(const Output&) const = default;
};

Output Finish(Collector& c) {
  Output o;
  o.rows = c.Finish(&o.warnings);
  return o;
}

std::string Show(const Value& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return "\"" + *s + "\"";
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i) + "i";
  return ValueToString(v) + "d";
}
std::string Show(const Row& r) {
  std::string s = "{";
  for (const auto& [k, v] : r) s += k + "=" + Show(v) + " ";
  return s + "}";
}
std::string Show(const std::vector<Row>& rows) {
  std::string s;
  for (const Row& r : rows) s += Show(r) + "\n";
  return s;
}

const Value* Get(const Row& r, std::string_view name) {
  for (const auto& [k, v] : r) {
    if (k == name) return &v;
  }
  return nullptr;
}

// Event blocks built by hand, with stable storage for the views.
struct TestBlock {
  DecodedBlock b;
  Datasource ds;
  PartitionId partition{3};
  std::deque<std::string> store;

  TestBlock() {
    ds.repo = "web";
    ds.tags = {{"#type", "access"}};
    b.field_begin.push_back(0);
  }
  std::string_view Keep(std::string s) {
    store.push_back(std::move(s));
    return store.back();
  }
  void Add(int64_t ts, int64_t offset, std::string raw,
           std::vector<std::pair<std::string, std::string>> fields) {
    b.timestamps.push_back(ts);
    b.ingest_ts.push_back(ts + 1);
    b.positions.push_back(Position{Offset(offset), 0});
    b.raw.push_back(Keep(std::move(raw)));
    for (auto& [k, v] : fields) b.fields.push_back(FieldView{Keep(k), Keep(v)});
    b.field_begin.push_back(static_cast<uint32_t>(b.fields.size()));
    b.event_count = b.timestamps.size();
  }
  Record At(size_t i) const { return Record(EventRef{&b, &ds, partition, i}); }
};

// Encodes `c`, decodes it for `st` and returns the decoded collector.
std::unique_ptr<Collector> RoundTrip(const Collector& c, const Stage* st,
                                     const CollectorContext& ctx) {
  std::string bytes;
  c.Encode(&bytes);
  auto r = DecodeCollector(st, ctx, bytes);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return nullptr;
  return std::move(r).value();
}

std::unique_ptr<Collector> Fresh(const Stage* st, const CollectorContext& ctx) {
  return st ? NewCollector(*st, ctx) : NewEventCollector(ctx);
}

// ---------- event collector, head, tail ----------

TEST(EventCollectorTest, KeepsTheNewestInKeyOrderAndWarnsWhenItCuts) {
  CollectorContext ctx;
  ctx.max_events = 3;
  auto c = NewEventCollector(ctx);
  // Unordered input, as parallel block scans deliver it.
  for (int64_t ts : {50, 10, 40, 20, 30}) c->Add(R({{"t", ts}}, Key(ts)));
  Output o = Finish(*c);
  ASSERT_EQ(o.rows.size(), 3u) << Show(o.rows);
  EXPECT_EQ(o.rows[0], (Row{{"t", int64_t{30}}}));
  EXPECT_EQ(o.rows[1], (Row{{"t", int64_t{40}}}));
  EXPECT_EQ(o.rows[2], (Row{{"t", int64_t{50}}}));
  EXPECT_EQ(o.warnings,
            std::vector<std::string>{"results limited to the newest 3 of 5 matching events"});
}

TEST(EventCollectorTest, NoWarningWhenNothingIsCut) {
  CollectorContext ctx;
  ctx.max_events = 3;
  auto c = NewEventCollector(ctx);
  for (int64_t ts : {2, 1, 3}) c->Add(R({{"t", ts}}, Key(ts)));
  Output o = Finish(*c);
  EXPECT_EQ(o.rows.size(), 3u);
  EXPECT_TRUE(o.warnings.empty());
}

TEST(EventCollectorTest, WarningCountsEveryMergedRecord) {
  CollectorContext ctx;
  ctx.max_events = 2;
  auto a = NewEventCollector(ctx);
  auto b = NewEventCollector(ctx);
  for (int64_t ts : {1, 2, 3}) a->Add(R({{"t", ts}}, Key(ts)));
  for (int64_t ts : {4, 5}) b->Add(R({{"t", ts}}, Key(ts)));
  a->Merge(*b);
  Output o = Finish(*a);
  ASSERT_EQ(o.rows.size(), 2u);
  EXPECT_EQ(*Get(o.rows[0], "t"), Value(int64_t{4}));
  EXPECT_EQ(*Get(o.rows[1], "t"), Value(int64_t{5}));
  EXPECT_EQ(o.warnings,
            std::vector<std::string>{"results limited to the newest 2 of 5 matching events"});
}

TEST(EventCollectorTest, EventRecordsAreCopiedOutOfTheirBlock) {
  TestBlock tb;
  tb.Add(1000, 7, "GET /a", {{"status", "200"}});
  tb.Add(2000, 8, "GET /b", {{"status", "404"}});
  CollectorContext ctx;
  auto c = NewEventCollector(ctx);
  Row expect0 = tb.At(0).ToRow();
  Row expect1 = tb.At(1).ToRow();
  c->Add(tb.At(1));
  c->Add(tb.At(0));
  // The block is reused for the next one.
  for (std::string& s : tb.store) std::fill(s.begin(), s.end(), 'x');
  tb.b.timestamps = {0, 0};
  Output o = Finish(*c);
  ASSERT_EQ(o.rows.size(), 2u);
  EXPECT_EQ(o.rows[0], expect0);
  EXPECT_EQ(o.rows[1], expect1);
  EXPECT_EQ(*Get(o.rows[0], "@rawstring"), Value(std::string("GET /a")));
  EXPECT_EQ(*Get(o.rows[0], "@timestamp"), Value(int64_t{1000}));
  EXPECT_EQ(*Get(o.rows[1], "status"), Value(std::string("404")));
}

TEST(HeadTailTest, HeadKeepsTheSmallestKeysTailTheLargest) {
  CollectorContext ctx;
  Stage head = Simple(Stage::Kind::kHead, 2);
  Stage tail = Simple(Stage::Kind::kTail, 2);
  auto h = NewCollector(head, ctx);
  auto t = NewCollector(tail, ctx);
  for (int64_t ts : {30, 10, 50, 20, 40}) {
    h->Add(R({{"t", ts}}, Key(ts)));
    t->Add(R({{"t", ts}}, Key(ts)));
  }
  Output ho = Finish(*h), to = Finish(*t);
  ASSERT_EQ(ho.rows.size(), 2u);
  EXPECT_EQ(*Get(ho.rows[0], "t"), Value(int64_t{10}));
  EXPECT_EQ(*Get(ho.rows[1], "t"), Value(int64_t{20}));
  ASSERT_EQ(to.rows.size(), 2u);
  EXPECT_EQ(*Get(to.rows[0], "t"), Value(int64_t{40}));
  EXPECT_EQ(*Get(to.rows[1], "t"), Value(int64_t{50}));
  EXPECT_TRUE(ho.warnings.empty());
  EXPECT_TRUE(to.warnings.empty());
}

TEST(HeadTailTest, KeyOrderUsesPartitionOffsetAndIndexAfterTimestamp) {
  CollectorContext ctx;
  Stage head = Simple(Stage::Kind::kHead, 3);
  auto h = NewCollector(head, ctx);
  h->Add(R({{"n", int64_t{4}}}, Key(5, 1, 1, 0)));
  h->Add(R({{"n", int64_t{3}}}, Key(5, 9, 0, 0)));
  h->Add(R({{"n", int64_t{2}}}, Key(5, 1, 0, 7)));
  h->Add(R({{"n", int64_t{1}}}, Key(5, 1, 0, 2)));
  Output o = Finish(*h);
  ASSERT_EQ(o.rows.size(), 3u);
  EXPECT_EQ(*Get(o.rows[0], "n"), Value(int64_t{1}));
  EXPECT_EQ(*Get(o.rows[1], "n"), Value(int64_t{2}));
  EXPECT_EQ(*Get(o.rows[2], "n"), Value(int64_t{3}));
}

// ---------- sort ----------

TEST(SortCollectorTest, OrdersByFieldsWithMissingLastAndTiesByKey) {
  CollectorContext ctx;
  Stage st = Simple(Stage::Kind::kSort, 10, {"v"}, /*descending=*/true);
  auto c = NewCollector(st, ctx);
  c->Add(R({{"id", int64_t{1}}, {"v", std::string("9")}}, Key(1)));
  c->Add(R({{"id", int64_t{2}}, {"v", std::string("10")}}, Key(2)));  // numeric: 10 > 9
  c->Add(R({{"id", int64_t{3}}}, Key(3)));                            // no v: last
  c->Add(R({{"id", int64_t{4}}, {"v", int64_t{9}}}, Key(0)));         // ties with id 1, older
  c->Add(R({{"id", int64_t{5}}, {"v", 2.5}}, Key(5)));
  Output o = Finish(*c);
  std::vector<int64_t> ids;
  for (const Row& r : o.rows) ids.push_back(std::get<int64_t>(*Get(r, "id")));
  EXPECT_EQ(ids, (std::vector<int64_t>{2, 4, 1, 5, 3})) << Show(o.rows);
  EXPECT_TRUE(o.warnings.empty());
}

TEST(SortCollectorTest, AscendingMultiFieldAndLimitWarning) {
  CollectorContext ctx;
  Stage st = Simple(Stage::Kind::kSort, 3, {"a", "b"}, /*descending=*/false);
  auto c = NewCollector(st, ctx);
  int64_t id = 0;
  for (auto [a, b] : std::vector<std::pair<const char*, int64_t>>{
           {"y", 1}, {"x", 3}, {"x", 2}, {"z", 0}, {"x", 1}}) {
    c->Add(R({{"id", id}, {"a", std::string(a)}, {"b", b}}, Key(100 - id)));
    ++id;
  }
  Output o = Finish(*c);
  ASSERT_EQ(o.rows.size(), 3u);
  EXPECT_EQ(*Get(o.rows[0], "id"), Value(int64_t{4}));  // x 1
  EXPECT_EQ(*Get(o.rows[1], "id"), Value(int64_t{2}));  // x 2
  EXPECT_EQ(*Get(o.rows[2], "id"), Value(int64_t{1}));  // x 3
  EXPECT_EQ(o.warnings, std::vector<std::string>{"sort: kept the first 3 of 5 rows (limit=3)"});
}

// ---------- table ----------

// sort(type=hex): hexadecimal numbers (0x optional, any case) numerically, before other values;
// type=string: text order even for numbers; per-field orders.
TEST(SortCollectorTest, TypesAndPerFieldOrders) {
  auto run = [](std::vector<Stage::SortKey> keys, std::vector<std::string> fields,
                std::vector<Row> rows) {
    Stage st = Simple(Stage::Kind::kSort, 10, fields);
    st.sort_keys = std::move(keys);
    CollectorContext ctx;
    auto c = NewCollector(st, ctx);
    int64_t k = 0;
    for (Row& r : rows) c->Add(R(std::move(r), Key(++k)));
    std::vector<std::string> out;
    for (const Row& r : Finish(*c).rows) {
      std::string line;
      for (const auto& [name, v] : r) line += (line.empty() ? "" : ",") + ValueToString(v);
      out.push_back(line);
    }
    return out;
  };
  using T = Stage::SortType;
  EXPECT_EQ(run({{false, T::kHex}}, {"h"},
                {{{"h", std::string("ff")}},
                 {{"h", std::string("0x10")}},
                 {{"h", std::string("zz")}},
                 {{"h", std::string("9")}},
                 {{"h", std::string("0XA")}}}),
            (std::vector<std::string>{"9", "0XA", "0x10", "ff", "zz"}));
  EXPECT_EQ(run({{true, T::kString}}, {"s"},
                {{{"s", int64_t{9}}}, {{"s", int64_t{10}}}, {{"s", std::string("a")}}}),
            (std::vector<std::string>{"a", "9", "10"}));
  EXPECT_EQ(run({{false, T::kNumber}, {true, T::kNumber}}, {"a", "b"},
                {{{"a", int64_t{2}}, {"b", int64_t{1}}},
                 {{"a", int64_t{1}}, {"b", int64_t{1}}},
                 {{"a", int64_t{1}}, {"b", int64_t{5}}}}),
            (std::vector<std::string>{"1,5", "1,1", "2,1"}));
}

TEST(TableCollectorTest, KeepsTheNewestRowsWithOnlyTheColumns) {
  CollectorContext ctx;
  Stage st = Simple(Stage::Kind::kTable, 2, {"b", "a"});
  auto c = NewCollector(st, ctx);
  c->Add(R({{"a", int64_t{1}}, {"b", std::string("x")}, {"c", 1.5}}, Key(10)));
  c->Add(R({{"a", int64_t{3}}, {"c", 1.5}}, Key(30)));
  c->Add(R({{"a", int64_t{2}}, {"b", std::string("y")}}, Key(20)));
  Output o = Finish(*c);
  ASSERT_EQ(o.rows.size(), 2u);
  EXPECT_EQ(o.rows[0], (Row{{"b", std::string("y")}, {"a", int64_t{2}}}));
  EXPECT_EQ(o.rows[1], (Row{{"a", int64_t{3}}}));
  EXPECT_EQ(o.warnings, std::vector<std::string>{"table: kept 2 of 3 rows (limit=2)"});
}

TEST(TableCollectorTest, ReadsEventBuiltinsAndFields) {
  TestBlock tb;
  tb.Add(1234, 1, "hello", {{"user", "ann"}});
  CollectorContext ctx;
  Stage st = Simple(Stage::Kind::kTable, 10, {"@timestamp", "user", "#type", "missing"});
  auto c = NewCollector(st, ctx);
  c->Add(tb.At(0));
  Output o = Finish(*c);
  ASSERT_EQ(o.rows.size(), 1u);
  EXPECT_EQ(o.rows[0], (Row{{"@timestamp", int64_t{1234}},
                            {"user", std::string("ann")},
                            {"#type", std::string("access")}}));
}

TEST(TableCollectorTest, EventsComeNewestFirstRowsInTheirOrder) {
  TestBlock tb;
  tb.Add(300, 1, "c", {{"n", "3"}});
  tb.Add(100, 2, "a", {{"n", "1"}});
  tb.Add(200, 3, "b", {{"n", "2"}});
  CollectorContext ctx;
  Stage st = Simple(Stage::Kind::kTable, 10, {"n"});
  // Split over two collectors and one encode round trip: the order survives the merge.
  auto a = NewCollector(st, ctx);
  auto b = NewCollector(st, ctx);
  a->Add(tb.At(0));
  b->Add(tb.At(1));
  b->Add(tb.At(2));
  std::string state;
  b->Encode(&state);
  auto decoded = DecodeCollector(&st, ctx, state);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  a->Merge(**decoded);
  Output o = Finish(*a);
  ASSERT_EQ(o.rows.size(), 3u);
  EXPECT_EQ(o.rows[0], (Row{{"n", std::string("3")}}));
  EXPECT_EQ(o.rows[2], (Row{{"n", std::string("1")}}));
  // Rows of an earlier stage keep their order.
  auto rows = NewCollector(st, ctx);
  rows->Add(R({{"n", int64_t{1}}}, Key(0)));
  rows->Add(R({{"n", int64_t{2}}}, Key(1)));
  o = Finish(*rows);
  ASSERT_EQ(o.rows.size(), 2u);
  EXPECT_EQ(o.rows[0], (Row{{"n", int64_t{1}}}));
}

// ---------- ungrouped aggregates ----------

TEST(AggregateTest, CountOverNothingIsZeroAndOtherMetricsAreMissing) {
  CollectorContext ctx;
  Metric d = Distinct("x");
  d.as = "d";
  Stage st = Agg(Stage::Grouping::kNone, {},
                 {M(Metric::Kind::kCount), M(Metric::Kind::kSum, "x"), M(Metric::Kind::kAvg, "x"),
                  M(Metric::Kind::kMin, "x"), M(Metric::Kind::kMax, "x"), d, Pct("x", {50})});
  auto c = NewCollector(st, ctx);
  c->Add(R({{"x", std::string("not a number")}}, Key(1)));
  Output o = Finish(*c);
  // No numeric value of x: no _sum, _avg, _min, _max, _50.
  EXPECT_EQ(o.rows, (std::vector<Row>{Row{{"_count", int64_t{1}}, {"d", int64_t{1}}}}))
      << Show(o.rows);
  auto empty = NewCollector(st, ctx);
  EXPECT_EQ(Finish(*empty).rows,
            (std::vector<Row>{Row{{"_count", int64_t{0}}, {"d", int64_t{0}}}}));
}

TEST(AggregateTest, DistinctCountWithAs) {
  CollectorContext ctx;
  Metric d = Distinct("x");
  d.as = "dx";
  auto c = NewCollector(Agg(Stage::Grouping::kNone, {}, {d, M(Metric::Kind::kCount, "x")}), ctx);
  for (const char* v : {"a", "b", "a", "c", "b"}) c->Add(R({{"x", std::string(v)}}, Key(1)));
  c->Add(R({{"y", std::string("a")}}, Key(2)));
  Output o = Finish(*c);
  ASSERT_EQ(o.rows.size(), 1u);
  EXPECT_EQ(o.rows[0], (Row{{"dx", int64_t{3}}, {"_count", int64_t{5}}}));
}

TEST(AggregateTest, NumericMetricsKeepIntegersAsInt64) {
  CollectorContext ctx;
  Stage st =
      Agg(Stage::Grouping::kNone, {},
          {M(Metric::Kind::kSum, "x"), M(Metric::Kind::kAvg, "x"), M(Metric::Kind::kMin, "x"),
           M(Metric::Kind::kMax, "x"), M(Metric::Kind::kCount, "x", "n")});
  auto c = NewCollector(st, ctx);
  for (const char* v : {"4", "-2", "+10", "abc", "7"}) c->Add(R({{"x", std::string(v)}}, Key(1)));
  c->Add(R({{"x", int64_t{1}}}, Key(2)));
  c->Add(R({}, Key(3)));
  Output o = Finish(*c);
  ASSERT_EQ(o.rows.size(), 1u);
  // Numeric values: 4, -2, 10, 7, 1 (sum 20); count(x) counts every record having x (6).
  EXPECT_EQ(o.rows[0], (Row{{"_sum", int64_t{20}},
                            {"_avg", 20.0 / 5},
                            {"_min", int64_t{-2}},
                            {"_max", int64_t{10}},
                            {"n", int64_t{6}}}))
      << Show(o.rows);
}

TEST(AggregateTest, NonIntegerValuesMakeDoubles) {
  CollectorContext ctx;
  Stage st =
      Agg(Stage::Grouping::kNone, {},
          {M(Metric::Kind::kSum, "x"), M(Metric::Kind::kMin, "x"), M(Metric::Kind::kMax, "x")});
  auto c = NewCollector(st, ctx);
  for (const char* v : {"1.5", "2", "-0.25", "nan", "inf"}) {
    c->Add(R({{"x", std::string(v)}}, Key(1)));
  }
  Output o = Finish(*c);
  ASSERT_EQ(o.rows.size(), 1u);
  // "nan" and "inf" are text, not numbers.
  EXPECT_EQ(o.rows[0], (Row{{"_sum", 3.25}, {"_min", -0.25}, {"_max", int64_t{2}}}))
      << Show(o.rows);
}

TEST(AggregateTest, HugeIntegerSumsFallBackToDouble) {
  CollectorContext ctx;
  auto c = NewCollector(Agg(Stage::Grouping::kNone, {}, {M(Metric::Kind::kSum, "x")}), ctx);
  c->Add(R({{"x", std::numeric_limits<int64_t>::max()}}, Key(1)));
  c->Add(R({{"x", std::numeric_limits<int64_t>::max()}}, Key(2)));
  Output o = Finish(*c);
  ASSERT_EQ(o.rows.size(), 1u);
  const Value* v = Get(o.rows[0], "_sum");
  ASSERT_NE(v, nullptr);
  ASSERT_TRUE(std::holds_alternative<double>(*v));
  EXPECT_DOUBLE_EQ(std::get<double>(*v),
                   2.0 * static_cast<double>(std::numeric_limits<int64_t>::max()));
}

TEST(AggregateTest, PercentilesAreNearestRankWithLogScaleNames) {
  CollectorContext ctx;
  Stage st = Agg(Stage::Grouping::kNone, {},
                 {Pct("x", {}), Pct("x", {0, 99.9, 100}, "p")});  // empty: the default 50,75,99
  auto c = NewCollector(st, ctx);
  // 1..200 in a scrambled order.
  for (int i = 0; i < 200; ++i) {
    c->Add(R({{"x", static_cast<int64_t>((i * 37) % 200 + 1)}}, Key(i)));
  }
  Output o = Finish(*c);
  ASSERT_EQ(o.rows.size(), 1u);
  // Nearest rank over 1..200: p% -> ceil(p*200/100).
  EXPECT_EQ(o.rows[0], (Row{{"_50", 100.0},
                            {"_75", 150.0},
                            {"_99", 198.0},
                            {"p_0", 1.0},
                            {"p_99.9", 200.0},
                            {"p_100", 200.0}}))
      << Show(o.rows);
}

// stdDev, range and collect: split over two collectors, merged once directly and once after a
// wire round trip of each part, give the answer of one collector over all the input.
TEST(AggregateTest, StdDevRangeCollectMergeAndRoundTrip) {
  CollectorContext ctx;
  Metric collect = M(Metric::Kind::kCollect, "s");
  collect.separator = ",";
  collect.limit = 3;
  Metric all = M(Metric::Kind::kCollect, "s");
  all.as = "every";
  Stage st = Agg(Stage::Grouping::kNone, {},
                 {M(Metric::Kind::kStdDev, "x"), M(Metric::Kind::kRange, "x"), collect, all});
  const int64_t xs[] = {2, 4, 4, 4, 5, 5, 7, 9};  // mean 5, population stddev 2
  const char* ss[] = {"d", "b", "a", "b", "e", "c", "a", "d"};
  auto one = NewCollector(st, ctx);
  auto left = NewCollector(st, ctx), right = NewCollector(st, ctx);
  for (int i = 0; i < 8; ++i) {
    Record r = R({{"x", xs[i]}, {"s", std::string(ss[i])}}, Key(i));
    one->Add(r);
    (i % 2 ? right : left)->Add(r);
  }
  const Row want = {{"_stddev", 2.0},
                    {"_range", int64_t{7}},
                    {"s", std::string("a,b,c")},
                    {"every", std::string("a\nb\nc\nd\ne")}};
  EXPECT_EQ(Finish(*one).rows, std::vector<Row>{want}) << Show(Finish(*one).rows);
  auto l2 = RoundTrip(*left, &st, ctx), r2 = RoundTrip(*right, &st, ctx);
  ASSERT_TRUE(l2 && r2);
  l2->Merge(*r2);
  EXPECT_EQ(Finish(*l2).rows, std::vector<Row>{want}) << Show(Finish(*l2).rows);
  left->Merge(*right);
  EXPECT_EQ(Finish(*left).rows, std::vector<Row>{want});
  // No value: the metrics are missing.
  auto empty = NewCollector(st, ctx);
  EXPECT_EQ(Finish(*empty).rows, std::vector<Row>{Row{}});
}

// selectFromMax/Min and selectLast: the same answer from one collector, from two merged ones,
// and from two sent over the wire; ties go to the larger (max, last) / smaller (min) key.
TEST(AggregateTest, SelectMetricsMergeAndRoundTrip) {
  CollectorContext ctx;
  Metric mx = M(Metric::Kind::kSelectMax, "x");
  mx.select_fields = {"name", "x"};
  Metric mn = M(Metric::Kind::kSelectMin, "x");
  mn.select_fields = {"name", "missing"};
  Metric last = M(Metric::Kind::kSelectLast);
  last.select_fields = {"y", "z"};
  Stage st = Agg(Stage::Grouping::kNone, {}, {mx, mn, last});
  // x: 5 (a), 9 (b), 9 (c, later key), 1 (d), 1 (e, later key); y on every record but the
  // last; z only on the first.
  struct In {
    int64_t x;
    const char* name;
  } in[] = {{5, "a"}, {9, "b"}, {9, "c"}, {1, "d"}, {1, "e"}};
  auto one = NewCollector(st, ctx), left = NewCollector(st, ctx), right = NewCollector(st, ctx);
  for (int i = 0; i < 5; ++i) {
    Row row = {{"x", in[i].x}, {"name", std::string(in[i].name)}};
    if (i < 4) row.emplace_back("y", static_cast<int64_t>(i));
    if (i == 0) row.emplace_back("z", std::string("first"));
    Record r = R(std::move(row), Key(i));
    one->Add(r);
    (i % 2 ? left : right)->Add(r);
  }
  auto row_of = [](Collector& c) {
    Output o = Finish(c);
    EXPECT_EQ(o.rows.size(), 1u);
    return o.rows.empty() ? Row{} : o.rows[0];
  };
  // selectFromMax picks c (9, later key), selectFromMin picks d (1, earlier key): name ends as d.
  Row got = row_of(*one);
  EXPECT_EQ(got, (Row{{"name", std::string("d")},
                      {"x", int64_t{9}},
                      {"y", int64_t{3}},
                      {"z", std::string("first")}}))
      << Show({got});
  auto l2 = RoundTrip(*left, &st, ctx), r2 = RoundTrip(*right, &st, ctx);
  ASSERT_TRUE(l2 && r2);
  l2->Merge(*r2);
  EXPECT_EQ(row_of(*l2), got);
  left->Merge(*right);
  EXPECT_EQ(row_of(*left), got);
  // The chosen record of selectFromMax alone.
  Stage only_max = Agg(Stage::Grouping::kNone, {}, {mx});
  auto c = NewCollector(only_max, ctx);
  for (int i = 0; i < 5; ++i) {
    c->Add(R({{"x", in[i].x}, {"name", std::string(in[i].name)}}, Key(i)));
  }
  EXPECT_EQ(row_of(*c), (Row{{"name", std::string("c")}, {"x", int64_t{9}}}));
}

// ---------- groupBy ----------

TEST(GroupByTest, RowsPerCombinationInKeyOrder) {
  CollectorContext ctx;
  Stage st = Agg(Stage::Grouping::kGroupBy, {"host", "method"},
                 {M(Metric::Kind::kCount), M(Metric::Kind::kMax, "ms")});
  auto c = NewCollector(st, ctx);
  c->Add(
      R({{"host", std::string("b")}, {"method", std::string("GET")}, {"ms", int64_t{5}}}, Key(1)));
  c->Add(R({{"host", std::string("a")}, {"method", std::string("PUT")}}, Key(2)));
  c->Add(
      R({{"host", std::string("a")}, {"method", std::string("GET")}, {"ms", int64_t{7}}}, Key(3)));
  c->Add(
      R({{"host", std::string("b")}, {"method", std::string("GET")}, {"ms", int64_t{9}}}, Key(4)));
  c->Add(R({{"host", std::string("a")}}, Key(5)));  // no method: not grouped
  Output o = Finish(*c);
  EXPECT_EQ(
      o.rows,
      (std::vector<Row>{
          Row{{"host", std::string("a")},
              {"method", std::string("GET")},
              {"_count", int64_t{1}},
              {"_max", int64_t{7}}},
          Row{{"host", std::string("a")}, {"method", std::string("PUT")}, {"_count", int64_t{1}}},
          Row{{"host", std::string("b")},
              {"method", std::string("GET")},
              {"_count", int64_t{2}},
              {"_max", int64_t{9}}},
      }))
      << Show(o.rows);
  EXPECT_TRUE(o.warnings.empty());
}

TEST(GroupByTest, MultiFieldKeysDoNotCollide) {
  CollectorContext ctx;
  auto c = NewCollector(Agg(Stage::Grouping::kGroupBy, {"a", "b"}, {M(Metric::Kind::kCount)}), ctx);
  c->Add(R({{"a", std::string("x")}, {"b", std::string("yz")}}, Key(1)));
  c->Add(R({{"a", std::string("xy")}, {"b", std::string("z")}}, Key(2)));
  EXPECT_EQ(Finish(*c).rows.size(), 2u);
}

TEST(GroupByTest, LimitKeepsTheFirstGroupsInKeyOrderWithAWarning) {
  CollectorContext ctx;
  auto c = NewCollector(Agg(Stage::Grouping::kGroupBy, {"k"}, {M(Metric::Kind::kCount)}, 2), ctx);
  for (const char* k : {"d", "b", "c", "a", "b"}) c->Add(R({{"k", std::string(k)}}, Key(1)));
  Output o = Finish(*c);
  EXPECT_EQ(o.rows, (std::vector<Row>{Row{{"k", std::string("a")}, {"_count", int64_t{1}}},
                                      Row{{"k", std::string("b")}, {"_count", int64_t{2}}}}));
  EXPECT_EQ(o.warnings, std::vector<std::string>{
                            "groupBy: 4 groups exceed limit=2; kept the first 2 in key order"});
}

// One-field groups are ordered eight bytes at a time; the order must be plain byte order
// (unsigned) for keys that share long prefixes, end inside or exactly at an eight-byte chunk,
// hold NUL bytes or bytes >= 0x80, and with a limit that cuts.
TEST(GroupByTest, OneFieldKeyOrderIsByteOrder) {
  std::mt19937 rng(7);
  const std::string alphabet("\0a\x7f\x80\xff", 5);
  std::set<std::string> keys{"", std::string(8, 'a'), std::string(9, 'a'), std::string(16, 'a'),
                             std::string(8, 'a') + std::string(1, '\0')};
  for (int i = 0; i < 3000; ++i) {
    std::string k = i % 3 == 0 ? "/api/v1/users/" : "";
    const int len = static_cast<int>(rng() % 20);
    for (int j = 0; j < len; ++j) k.push_back(alphabet[rng() % alphabet.size()]);
    keys.insert(k);
  }
  for (int64_t limit : {int64_t{100000}, int64_t{17}}) {
    CollectorContext ctx;
    auto c =
        NewCollector(Agg(Stage::Grouping::kGroupBy, {"k"}, {M(Metric::Kind::kCount)}, limit), ctx);
    std::vector<std::string> shuffled(keys.begin(), keys.end());
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    for (const std::string& k : shuffled) c->Add(R({{"k", k}}, Key(1)));
    Output o = Finish(*c);
    std::vector<std::string> got;
    for (const Row& r : o.rows) got.push_back(std::get<std::string>(r[0].second));
    std::vector<std::string> want(keys.begin(), keys.end());  // std::string compares unsigned
    want.resize(std::min(want.size(), static_cast<size_t>(limit)));
    EXPECT_EQ(got, want) << "limit " << limit;
  }
}

TEST(GroupByTest, GroupsEventFieldsAndTags) {
  TestBlock tb;
  tb.Add(1, 1, "a", {{"status", "200"}});
  tb.Add(2, 2, "b", {{"status", "500"}});
  tb.Add(3, 3, "c", {{"status", "200"}});
  tb.Add(4, 4, "d", {});
  CollectorContext ctx;
  auto c = NewCollector(
      Agg(Stage::Grouping::kGroupBy, {"#type", "status"}, {M(Metric::Kind::kCount)}), ctx);
  for (size_t i = 0; i < tb.b.size(); ++i) c->Add(tb.At(i));
  Output o = Finish(*c);
  EXPECT_EQ(o.rows, (std::vector<Row>{
                        Row{{"#type", std::string("access")},
                            {"status", std::string("200")},
                            {"_count", int64_t{2}}},
                        Row{{"#type", std::string("access")},
                            {"status", std::string("500")},
                            {"_count", int64_t{1}}},
                    }));
}

// groupBy against a direct computation over random data.
TEST(GroupByTest, MatchesAReferenceComputation) {
  std::mt19937_64 rng(7);
  struct Ref {
    int64_t count = 0, sum = 0, n = 0, min = 0, max = 0;
    std::set<int64_t> distinct;
  };
  std::map<std::string, Ref> ref;
  CollectorContext ctx;
  Metric distinct = Distinct("v");
  distinct.as = "_distinct";
  auto c = NewCollector(
      Agg(Stage::Grouping::kGroupBy, {"g"},
          {M(Metric::Kind::kCount), M(Metric::Kind::kSum, "v"), M(Metric::Kind::kMin, "v"),
           M(Metric::Kind::kMax, "v"), M(Metric::Kind::kAvg, "v"), distinct}),
      ctx);
  for (int i = 0; i < 5000; ++i) {
    std::string g = "g" + std::to_string(rng() % 37);
    Row row{{"g", g}};
    Ref& r = ref[g];
    ++r.count;
    if (rng() % 4 != 0) {
      const int64_t v = static_cast<int64_t>(rng() % 2001) - 1000;
      row.emplace_back("v", std::to_string(v));
      r.sum += v;
      r.min = r.n == 0 ? v : std::min(r.min, v);
      r.max = r.n == 0 ? v : std::max(r.max, v);
      ++r.n;
      r.distinct.insert(v);
    }
    c->Add(R(std::move(row), Key(i)));
  }
  Output o = Finish(*c);
  ASSERT_EQ(o.rows.size(), ref.size());
  size_t i = 0;
  for (const auto& [g, r] : ref) {
    Row want{{"g", g}, {"_count", r.count}};
    if (r.n > 0) {
      want.emplace_back("_sum", r.sum);
      want.emplace_back("_min", r.min);
      want.emplace_back("_max", r.max);
      want.emplace_back("_avg", static_cast<double>(r.sum) / static_cast<double>(r.n));
    }
    want.emplace_back("_distinct", static_cast<int64_t>(r.distinct.size()));
    EXPECT_EQ(o.rows[i], want) << g;
    ++i;
  }
}

// groupBy() then sort(limit=) through FinishThrough gives exactly the rows and warnings of
// Finish followed by the sort collector: ties on the sort fields (many groups share a count),
// sort fields that are grouping fields or metric columns, missing metric values, several sort
// keys and table(sortby=)'s columns.
TEST(GroupByTest, FinishThroughSortEqualsFinishThenSort) {
  using T = Stage::SortType;
  struct Case {
    std::vector<std::string> group;
    std::vector<std::string> sort_fields;
    std::vector<Stage::SortKey> keys;
    int64_t limit;
    std::vector<std::string> table_columns;
  };
  const std::vector<Case> cases = {
      {{"g"}, {"_count"}, {{true, T::kNumber}}, 5, {}},
      {{"g"}, {"_count"}, {{false, T::kNumber}}, 7, {}},
      {{"g"}, {"_sum", "_count"}, {{true, T::kNumber}, {false, T::kNumber}}, 4, {}},
      {{"g"}, {"_avg"}, {{true, T::kNumber}}, 6, {}},  // missing for groups without v
      {{"g"}, {"g"}, {{true, T::kString}}, 3, {}},
      {{"g", "h"}, {"_count", "h"}, {{true, T::kNumber}, {false, T::kString}}, 9, {}},
      {{"g", "h"}, {"_max"}, {{true, T::kNumber}}, 2, {"g", "_max"}},
      {{"g"}, {"_count"}, {{true, T::kNumber}}, 1, {}},
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& tc = cases[ci];
    CollectorContext ctx;
    const Stage agg = Agg(Stage::Grouping::kGroupBy, tc.group,
                          {M(Metric::Kind::kCount), M(Metric::Kind::kSum, "v"),
                           M(Metric::Kind::kAvg, "v"), M(Metric::Kind::kMax, "v")});
    Stage sort = Simple(Stage::Kind::kSort, tc.limit, tc.sort_fields);
    sort.sort_keys = tc.keys;
    sort.table_columns = tc.table_columns;
    auto a = NewCollector(agg, ctx);
    auto b = NewCollector(agg, ctx);
    std::mt19937_64 rng(11 + ci);
    for (int i = 0; i < 3000; ++i) {
      Row row{{"g", "g" + std::to_string(rng() % 53)}, {"h", "h" + std::to_string(rng() % 3)}};
      if (rng() % 5 != 0 && row[0].second != Value(std::string("g7"))) {
        row.emplace_back("v", std::to_string(static_cast<int64_t>(rng() % 21) - 10));
      }
      a->Add(R(row, Key(i)));
      b->Add(R(std::move(row), Key(i)));
    }
    Output want;
    std::vector<Row> grouped = b->Finish(&want.warnings);
    auto s = NewCollector(sort, ctx);
    for (size_t i = 0; i < grouped.size(); ++i) {
      RecordKey key;
      key.offset = static_cast<int64_t>(i);
      s->Add(R(std::move(grouped[i]), key));
    }
    want.rows = s->Finish(&want.warnings);
    Output got;
    std::optional<std::vector<Row>> rows = a->FinishThrough(sort, &got.warnings);
    ASSERT_TRUE(rows.has_value()) << "case " << ci;
    got.rows = std::move(*rows);
    EXPECT_EQ(got, want) << "case " << ci << "\ngot:\n"
                         << Show(got.rows) << "want:\n"
                         << Show(want.rows);
  }
}

// FinishThrough declines (leaving the collector to Finish) when the sort keeps every group, when
// groupBy(limit=) cut groups, and when a sort field is not one of the groupBy's columns.
TEST(GroupByTest, FinishThroughDeclinesWhatItCannotShortcut) {
  CollectorContext ctx;
  auto fill = [](Collector& c, int groups) {
    for (int i = 0; i < 100; ++i) c.Add(R(Row{{"g", "g" + std::to_string(i % groups)}}, Key(i)));
  };
  std::vector<std::string> warnings;
  auto all = NewCollector(Agg(Stage::Grouping::kGroupBy, {"g"}, {M(Metric::Kind::kCount)}), ctx);
  fill(*all, 10);
  EXPECT_FALSE(all->FinishThrough(Simple(Stage::Kind::kSort, 10, {"_count"}), &warnings));
  EXPECT_FALSE(all->FinishThrough(Simple(Stage::Kind::kSort, 3, {"other"}), &warnings));
  EXPECT_FALSE(all->FinishThrough(Simple(Stage::Kind::kHead, 3), &warnings));
  auto cut = NewCollector(Agg(Stage::Grouping::kGroupBy, {"g"}, {M(Metric::Kind::kCount)}, 5), ctx);
  fill(*cut, 10);
  EXPECT_FALSE(cut->FinishThrough(Simple(Stage::Kind::kSort, 3, {"_count"}), &warnings));
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(Finish(*all).rows.size(), 10u);
}

// ---------- bucket / timeChart ----------

TEST(BucketTest, EveryBucketOfTheRangeWithoutASeries) {
  CollectorContext ctx;
  ctx.range = TimeRange{1000, 5500};
  Stage st =
      Agg(Stage::Grouping::kBucket, {}, {M(Metric::Kind::kCount), M(Metric::Kind::kSum, "x")});
  st.span_ms = 1000;
  auto c = NewCollector(st, ctx);
  c->Add(R({{"@timestamp", int64_t{1999}}, {"x", int64_t{2}}}, Key(1999)));
  c->Add(R({{"@timestamp", int64_t{1000}}, {"x", int64_t{3}}}, Key(1000)));
  c->Add(R({{"@timestamp", int64_t{4000}}}, Key(4000)));
  c->Add(R({{"@timestamp", std::string("4500")}, {"x", std::string("1")}}, Key(1)));
  c->Add(R({{"x", int64_t{100}}}, Key(2)));  // no @timestamp: skipped
  Output o = Finish(*c);
  EXPECT_EQ(o.rows,
            (std::vector<Row>{
                Row{{"_bucket", int64_t{1000}}, {"_count", int64_t{2}}, {"_sum", int64_t{5}}},
                Row{{"_bucket", int64_t{2000}}, {"_count", int64_t{0}}},
                Row{{"_bucket", int64_t{3000}}, {"_count", int64_t{0}}},
                Row{{"_bucket", int64_t{4000}}, {"_count", int64_t{2}}, {"_sum", int64_t{1}}},
                Row{{"_bucket", int64_t{5000}}, {"_count", int64_t{0}}},
            }))
      << Show(o.rows);
  EXPECT_TRUE(o.warnings.empty());
}

TEST(BucketTest, EventTimestampsAndNegativeTimes) {
  TestBlock tb;
  tb.Add(-1, 1, "a", {});
  tb.Add(-1000, 2, "b", {});
  tb.Add(0, 3, "c", {});
  CollectorContext ctx;
  ctx.range = TimeRange{-1000, 1000};
  Stage st = Agg(Stage::Grouping::kBucket, {}, {M(Metric::Kind::kCount)});
  st.span_ms = 1000;
  auto c = NewCollector(st, ctx);
  for (size_t i = 0; i < tb.b.size(); ++i) c->Add(tb.At(i));
  Output o = Finish(*c);
  EXPECT_EQ(o.rows, (std::vector<Row>{Row{{"_bucket", int64_t{-1000}}, {"_count", int64_t{2}}},
                                      Row{{"_bucket", int64_t{0}}, {"_count", int64_t{1}}}}));
}

TEST(BucketTest, SeriesRowsOrderedByBucketThenSeries) {
  CollectorContext ctx;
  ctx.range = TimeRange{0, 3000};
  Stage st = Agg(Stage::Grouping::kBucket, {"host"}, {M(Metric::Kind::kCount)}, 10);
  st.span_ms = 1000;
  auto c = NewCollector(st, ctx);
  auto add = [&](int64_t ts, const char* host) {
    c->Add(R({{"@timestamp", ts}, {"host", std::string(host)}}, Key(ts)));
  };
  add(2500, "b");
  add(100, "b");
  add(200, "a");
  add(2600, "b");
  c->Add(R({{"@timestamp", int64_t{5}}}, Key(5)));  // no series value: skipped
  Output o = Finish(*c);
  EXPECT_EQ(o.rows,
            (std::vector<Row>{
                Row{{"_bucket", int64_t{0}}, {"host", std::string("a")}, {"_count", int64_t{1}}},
                Row{{"_bucket", int64_t{0}}, {"host", std::string("b")}, {"_count", int64_t{1}}},
                Row{{"_bucket", int64_t{2000}}, {"host", std::string("b")}, {"_count", int64_t{2}}},
            }))
      << Show(o.rows);
}

TEST(BucketTest, SeriesLimitKeepsTheSeriesWithTheHighestValues) {
  CollectorContext ctx;
  ctx.range = TimeRange{0, 2000};
  Stage st = Agg(Stage::Grouping::kBucket, {"s"}, {M(Metric::Kind::kCount)}, 2);
  st.span_ms = 1000;
  auto c = NewCollector(st, ctx);
  auto add = [&](int64_t ts, const char* s, int n) {
    for (int i = 0; i < n; ++i) c->Add(R({{"@timestamp", ts}, {"s", std::string(s)}}, Key(ts)));
  };
  add(0, "a", 1);
  add(1000, "a", 1);  // a: 2 events
  add(0, "b", 3);     // b: 3
  add(1500, "c", 2);  // c: 2, ties with a; a wins (ascending value)
  Output o = Finish(*c);
  EXPECT_EQ(o.rows,
            (std::vector<Row>{
                Row{{"_bucket", int64_t{0}}, {"s", std::string("a")}, {"_count", int64_t{1}}},
                Row{{"_bucket", int64_t{0}}, {"s", std::string("b")}, {"_count", int64_t{3}}},
                Row{{"_bucket", int64_t{1000}}, {"s", std::string("a")}, {"_count", int64_t{1}}},
            }))
      << Show(o.rows);
  EXPECT_EQ(o.warnings,
            std::vector<std::string>{
                "timeChart: 3 series exceed limit=2; kept the 2 with the highest values"});
}

TEST(BucketTest, AutomaticSpanGivesAboutAHundredBuckets) {
  const int64_t kDay = 86400000;
  CollectorContext ctx;
  ctx.range = TimeRange{10 * kDay, 11 * kDay};
  Stage st = Agg(Stage::Grouping::kBucket, {}, {M(Metric::Kind::kCount)});
  auto c = NewCollector(st, ctx);
  Output o = Finish(*c);
  // 24h / 100 = 14.4 min: the nearest listed span is 10 min.
  ASSERT_EQ(o.rows.size(), 144u);
  EXPECT_EQ(*Get(o.rows[0], "_bucket"), Value(10 * kDay));
  EXPECT_EQ(*Get(o.rows[1], "_bucket"), Value(10 * kDay + 600000));
  ctx.range = TimeRange{0, 3600000};  // 1h: 36 s -> 30 s
  auto h = NewCollector(st, ctx);
  EXPECT_EQ(Finish(*h).rows.size(), 120u);
}

TEST(BucketTest, TooManyBucketsAreNotFilled) {
  CollectorContext ctx;
  ctx.range = TimeRange{0, 1000000000};
  Stage st = Agg(Stage::Grouping::kBucket, {}, {M(Metric::Kind::kCount)});
  st.span_ms = 1;
  auto c = NewCollector(st, ctx);
  c->Add(R({{"@timestamp", int64_t{7}}}, Key(7)));
  Output o = Finish(*c);
  EXPECT_EQ(o.rows, (std::vector<Row>{Row{{"_bucket", int64_t{7}}, {"_count", int64_t{1}}}}));
  ASSERT_EQ(o.warnings.size(), 1u);
  EXPECT_NE(o.warnings[0].find("buckets without events are left out"), std::string::npos);
}

// ---------- top ----------

TEST(TopTest, DescendingByCountTiesByValueWithPercent) {
  CollectorContext ctx;
  Stage st = Agg(Stage::Grouping::kTop, {"k"}, {M(Metric::Kind::kCount)}, 3);
  st.top_percent = true;
  auto c = NewCollector(st, ctx);
  for (const char* k : {"c", "a", "b", "c", "d", "b", "c", "e"}) {
    c->Add(R({{"k", std::string(k)}}, Key(1)));
  }
  c->Add(R({{"other", std::string("x")}}, Key(2)));  // no k: not counted
  Output o = Finish(*c);
  EXPECT_EQ(o.rows,
            (std::vector<Row>{
                Row{{"k", std::string("c")}, {"_count", int64_t{3}}, {"percent", 3 * 100.0 / 8}},
                Row{{"k", std::string("b")}, {"_count", int64_t{2}}, {"percent", 2 * 100.0 / 8}},
                Row{{"k", std::string("a")}, {"_count", int64_t{1}}, {"percent", 1 * 100.0 / 8}},
            }))
      << Show(o.rows);
}

TEST(TopTest, SumAndAs) {
  CollectorContext ctx;
  Stage st = Agg(Stage::Grouping::kTop, {"k"}, {M(Metric::Kind::kSum, "bytes", "total")}, 10);
  st.top_sum = "bytes";
  auto c = NewCollector(st, ctx);
  c->Add(R({{"k", std::string("a")}, {"bytes", int64_t{5}}}, Key(1)));
  c->Add(R({{"k", std::string("b")}, {"bytes", std::string("7")}}, Key(2)));
  c->Add(R({{"k", std::string("a")}, {"bytes", int64_t{4}}}, Key(3)));
  Output o = Finish(*c);
  EXPECT_EQ(o.rows, (std::vector<Row>{Row{{"k", std::string("a")}, {"total", int64_t{9}}},
                                      Row{{"k", std::string("b")}, {"total", int64_t{7}}}}));
  Stage plain = st;
  plain.metrics[0].as.clear();
  auto d = NewCollector(plain, ctx);
  d->Add(R({{"k", std::string("a")}, {"bytes", int64_t{5}}}, Key(1)));
  EXPECT_EQ(Finish(*d).rows,
            (std::vector<Row>{Row{{"k", std::string("a")}, {"_sum", int64_t{5}}}}));
}

// ---------- merge and encoding properties ----------

// Random records over a few fields; values are integers, strings and multiples of 1/4 (exact
// sums), keys unique.
std::vector<Record> RandomRecords(std::mt19937_64& rng, size_t n) {
  std::vector<Record> out;
  const char* hosts[] = {"a", "b", "c", "d", "e", "f", "g"};
  for (size_t i = 0; i < n; ++i) {
    Row row;
    const int64_t ts = static_cast<int64_t>(rng() % 10000);
    row.emplace_back("@timestamp", ts);
    if (rng() % 10 != 0) row.emplace_back("host", std::string(hosts[rng() % 7]));
    if (rng() % 3 != 0) row.emplace_back("code", std::to_string(200 + rng() % 5 * 100));
    switch (rng() % 4) {
      case 0:
        row.emplace_back("v", static_cast<int64_t>(rng() % 1000) - 500);
        break;
      case 1:
        row.emplace_back("v", static_cast<double>(static_cast<int64_t>(rng() % 400) - 200) / 4);
        break;
      case 2:
        row.emplace_back("v", std::string(rng() % 2 ? "text" : "17"));
        break;
      default:
        break;
    }
    out.push_back(Record::FromRow(
        std::move(row), Key(ts, static_cast<int64_t>(i), static_cast<int32_t>(rng() % 3))));
  }
  return out;
}

struct Case {
  std::string name;
  std::optional<Stage> stage;  // none: the event collector
};

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  cases.push_back({"events", std::nullopt});
  cases.push_back({"head", Simple(Stage::Kind::kHead, 25)});
  cases.push_back({"tail", Simple(Stage::Kind::kTail, 25)});
  cases.push_back({"sort_desc", Simple(Stage::Kind::kSort, 30, {"v", "host"}, true)});
  cases.push_back({"sort_asc", Simple(Stage::Kind::kSort, 30, {"code"}, false)});
  cases.push_back({"table", Simple(Stage::Kind::kTable, 20, {"host", "v"})});
  Metric dc = Distinct("code");
  dc.as = "dc";
  const std::vector<Metric> all = {M(Metric::Kind::kCount),
                                   M(Metric::Kind::kCount, "v", "cv"),
                                   dc,
                                   M(Metric::Kind::kSum, "v"),
                                   M(Metric::Kind::kAvg, "v"),
                                   M(Metric::Kind::kMin, "v"),
                                   M(Metric::Kind::kMax, "v"),
                                   Pct("v", {10, 50, 90})};
  cases.push_back({"stats", Agg(Stage::Grouping::kNone, {}, all)});
  cases.push_back({"groupBy", Agg(Stage::Grouping::kGroupBy, {"host"}, all)});
  cases.push_back({"groupBy2", Agg(Stage::Grouping::kGroupBy, {"host", "code"}, all, 12)});
  Stage tc = Agg(Stage::Grouping::kBucket, {}, all);
  tc.span_ms = 700;
  cases.push_back({"timeChart", tc});
  Stage tcs = Agg(Stage::Grouping::kBucket, {"host"},
                  {M(Metric::Kind::kCount), M(Metric::Kind::kMax, "v")}, 4);
  tcs.span_ms = 2000;
  cases.push_back({"timeChartSeries", tcs});
  Stage top = Agg(Stage::Grouping::kTop, {"host"}, {M(Metric::Kind::kCount)}, 4);
  top.top_percent = true;
  cases.push_back({"top", top});
  Stage tops = Agg(Stage::Grouping::kTop, {"host", "code"}, {M(Metric::Kind::kSum, "v")}, 5);
  tops.top_sum = "v";
  cases.push_back({"topSum", tops});
  // Subqueries in function=: their per-record steps, nested collectors and later steps; the
  // nested states travel inside the aggregate's.
  for (const char* text :
       {"groupBy(host, function=[count(), {v > 0 | sum(v) | twice := _sum * 2}])",
        "groupBy(host, function=groupBy(code))", "groupBy(code, function={tail(2)})",
        "timeChart(span=1s, function={count() | c2 := _count + 1})",
        "[{code=200 | head(3)}, {max(v) | m := _max}]",
        "groupBy(host, function={sort(v, limit=2) | collect(v)})"}) {
    auto q = Compile(text);
    EXPECT_TRUE(q.ok()) << text << ": " << q.status().ToString();
    if (q.ok()) cases.push_back({text, (*q)->stages[0]});
  }
  return cases;
}

class MergeTest : public ::testing::TestWithParam<int> {};

TEST_P(MergeTest, SplitMergedAndRoundTrippedEqualsOneCollector) {
  std::mt19937_64 rng(static_cast<uint64_t>(GetParam()) * 7919 + 1);
  CollectorContext ctx;
  ctx.max_events = 40;
  ctx.range = TimeRange{0, 10000};
  const std::vector<Record> records = RandomRecords(rng, 300 + rng() % 500);
  for (const Case& cs : AllCases()) {
    SCOPED_TRACE(cs.name);
    const Stage* st = cs.stage ? &*cs.stage : nullptr;
    auto one = Fresh(st, ctx);
    for (const Record& r : records) one->Add(r);
    const size_t one_bytes = one->MemoryBytes();
    auto rt_one = RoundTrip(*one, st, ctx);
    ASSERT_NE(rt_one, nullptr);
    Output want = Finish(*one);
    EXPECT_FALSE(want.rows.empty());
    EXPECT_EQ(Finish(*rt_one), want) << "single round trip";

    const size_t parts = 2 + rng() % 5;
    std::vector<std::unique_ptr<Collector>> cs_parts;
    for (size_t p = 0; p < parts; ++p) cs_parts.push_back(Fresh(st, ctx));
    for (const Record& r : records) cs_parts[rng() % parts]->Add(r);
    // Merge in a random order, some partials through an encode/decode round trip.
    std::vector<size_t> order(parts);
    for (size_t p = 0; p < parts; ++p) order[p] = p;
    std::shuffle(order.begin(), order.end(), rng);
    std::unique_ptr<Collector> acc = std::move(cs_parts[order[0]]);
    for (size_t k = 1; k < parts; ++k) {
      std::unique_ptr<Collector> next = std::move(cs_parts[order[k]]);
      if (rng() % 2) next = RoundTrip(*next, st, ctx);
      ASSERT_NE(next, nullptr);
      acc->Merge(*next);
      if (rng() % 3 == 0) acc = RoundTrip(*acc, st, ctx);
      ASSERT_NE(acc, nullptr);
    }
    EXPECT_GT(acc->MemoryBytes(), 0u);
    EXPECT_LT(acc->MemoryBytes(), one_bytes * 3 + 100000);
    Output got = Finish(*acc);
    EXPECT_EQ(got.rows, want.rows) << "want:\n" << Show(want.rows) << "got:\n" << Show(got.rows);
    EXPECT_EQ(got.warnings, want.warnings);
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, MergeTest, ::testing::Range(0, 12));

TEST(EncodeTest, DeterministicRegardlessOfInsertionOrder) {
  std::mt19937_64 rng(3);
  CollectorContext ctx;
  ctx.max_events = 50;
  ctx.range = TimeRange{0, 10000};
  std::vector<Record> records = RandomRecords(rng, 400);
  for (const Case& cs : AllCases()) {
    SCOPED_TRACE(cs.name);
    std::optional<Stage> stage = cs.stage;
    if (stage) {
      // Percentile values are kept (and encoded) in arrival order.
      std::erase_if(stage->metrics,
                    [](const Metric& m) { return m.kind == Metric::Kind::kPercentile; });
    }
    const Stage* st = stage ? &*stage : nullptr;
    auto a = Fresh(st, ctx);
    auto b = Fresh(st, ctx);
    for (const Record& r : records) a->Add(r);
    std::shuffle(records.begin(), records.end(), rng);
    for (const Record& r : records) b->Add(r);
    std::string ea, eb;
    a->Encode(&ea);
    b->Encode(&eb);
    EXPECT_EQ(ea, eb);
  }
}

TEST(EncodeTest, MemoryBytesTracksHeldState) {
  CollectorContext ctx;
  auto g = NewCollector(Agg(Stage::Grouping::kGroupBy, {"k"}, {M(Metric::Kind::kCount)}), ctx);
  const size_t empty = g->MemoryBytes();
  for (int i = 0; i < 1000; ++i)
    g->Add(R({{"k", std::string(100, 'a') + std::to_string(i)}}, Key(i)));
  EXPECT_GT(g->MemoryBytes(), empty + 1000 * 100);
  EXPECT_LT(g->MemoryBytes(), empty + 1000 * 1000);
  const size_t groups = g->MemoryBytes();
  for (int i = 0; i < 1000; ++i)
    g->Add(R({{"k", std::string(100, 'a') + std::to_string(i)}}, Key(i)));
  EXPECT_EQ(g->MemoryBytes(), groups);  // no new group

  auto e = NewEventCollector(ctx);
  for (int i = 0; i < 100; ++i) e->Add(R({{"raw", std::string(1000, 'x')}}, Key(i)));
  EXPECT_GT(e->MemoryBytes(), 100u * 1000);
  ctx.max_events = 10;
  auto small = NewEventCollector(ctx);
  for (int i = 0; i < 100; ++i) small->Add(R({{"raw", std::string(1000, 'x')}}, Key(i)));
  EXPECT_GT(small->MemoryBytes(), 10u * 1000);
  EXPECT_LT(small->MemoryBytes(), 20u * 1000);

  // sort keeps a bounded heap; table keeps only its columns.
  auto sort = NewCollector(Simple(Stage::Kind::kSort, 5, {"n"}), ctx);
  auto table = NewCollector(Simple(Stage::Kind::kTable, 100, {"n"}), ctx);
  for (int i = 0; i < 1000; ++i) {
    Record r = R({{"n", int64_t{i}}, {"raw", std::string(1000, 'x')}}, Key(i));
    sort->Add(r);
    table->Add(r);
  }
  EXPECT_GT(sort->MemoryBytes(), 5u * 1000);
  EXPECT_LT(sort->MemoryBytes(), 10u * 1000);
  EXPECT_GT(table->MemoryBytes(), 100u * 8);
  EXPECT_LT(table->MemoryBytes(), 100u * 1000);
}

// ---------- decoding bad input ----------

TEST(DecodeTest, EveryTruncationAndRandomFlipsAreRejectedOrHarmless) {
  std::mt19937_64 rng(11);
  CollectorContext ctx;
  ctx.max_events = 30;
  ctx.range = TimeRange{0, 10000};
  const std::vector<Record> records = RandomRecords(rng, 200);
  for (const Case& cs : AllCases()) {
    SCOPED_TRACE(cs.name);
    const Stage* st = cs.stage ? &*cs.stage : nullptr;
    auto c = Fresh(st, ctx);
    for (const Record& r : records) c->Add(r);
    std::string bytes;
    c->Encode(&bytes);
    ASSERT_TRUE(DecodeCollector(st, ctx, bytes).ok());
    for (size_t n = 0; n < bytes.size(); ++n) {
      auto r = DecodeCollector(st, ctx, std::string_view(bytes).substr(0, n));
      ASSERT_FALSE(r.ok()) << "prefix of " << n << " of " << bytes.size() << " bytes decoded";
      EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
    }
    std::string extra = bytes + '\0';
    EXPECT_EQ(DecodeCollector(st, ctx, extra).status().code(), StatusCode::kCorruption);
    for (int trial = 0; trial < 300; ++trial) {
      std::string bad = bytes;
      const int flips = 1 + static_cast<int>(rng() % 3);
      for (int f = 0; f < flips; ++f) {
        bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
      }
      auto r = DecodeCollector(st, ctx, bad);
      if (!r.ok()) {
        EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
        continue;
      }
      // A flip that still decodes gives a usable collector.
      std::vector<std::string> w;
      (*r)->MemoryBytes();
      std::string again;
      (*r)->Encode(&again);
      (*r)->Finish(&w);
    }
  }
}

TEST(DecodeTest, StateOfAnotherStageIsCorruption) {
  CollectorContext ctx;
  Stage count = Agg(Stage::Grouping::kGroupBy, {"k"}, {M(Metric::Kind::kCount)});
  Stage sum = Agg(Stage::Grouping::kGroupBy, {"k"}, {M(Metric::Kind::kSum, "k")});
  Stage two = Agg(Stage::Grouping::kGroupBy, {"k", "j"}, {M(Metric::Kind::kCount)});
  Stage none = Agg(Stage::Grouping::kNone, {}, {M(Metric::Kind::kCount)});
  Stage sort = Simple(Stage::Kind::kSort, 10, {"k"});
  Stage head = Simple(Stage::Kind::kHead, 10);
  Stage small_head = Simple(Stage::Kind::kHead, 1);
  auto g = NewCollector(count, ctx);
  g->Add(R({{"k", std::string("x")}}, Key(1)));
  std::string bytes;
  g->Encode(&bytes);
  EXPECT_TRUE(DecodeCollector(&count, ctx, bytes).ok());
  for (const Stage* other : {&sum, &two, &none, &sort, &head}) {
    EXPECT_EQ(DecodeCollector(other, ctx, bytes).status().code(), StatusCode::kCorruption);
  }
  EXPECT_EQ(DecodeCollector(nullptr, ctx, bytes).status().code(), StatusCode::kCorruption);
  // A head state holding more rows than the stage's limit.
  auto h = NewCollector(head, ctx);
  h->Add(R({{"k", int64_t{1}}}, Key(1)));
  h->Add(R({{"k", int64_t{2}}}, Key(2)));
  std::string hb;
  h->Encode(&hb);
  EXPECT_TRUE(DecodeCollector(&head, ctx, hb).ok());
  EXPECT_EQ(DecodeCollector(&small_head, ctx, hb).status().code(), StatusCode::kCorruption);
  EXPECT_EQ(DecodeCollector(&sort, ctx, hb).status().code(), StatusCode::kCorruption);
  // A timeChart state decoded with a different span.
  Stage tc = Agg(Stage::Grouping::kBucket, {}, {M(Metric::Kind::kCount)});
  tc.span_ms = 1000;
  Stage tc2 = tc;
  tc2.span_ms = 2000;
  std::string tb;
  NewCollector(tc, ctx)->Encode(&tb);
  EXPECT_TRUE(DecodeCollector(&tc, ctx, tb).ok());
  EXPECT_EQ(DecodeCollector(&tc2, ctx, tb).status().code(), StatusCode::kCorruption);
  // A transform stage has no collector.
  Stage eval;
  eval.kind = Stage::Kind::kEval;
  EXPECT_EQ(NewCollector(eval, ctx), nullptr);
  EXPECT_FALSE(DecodeCollector(&eval, ctx, bytes).ok());
}

}  // namespace
}  // namespace sediment::query

// CollectMatches (the filter part of a query, for a coordinator) and the MatchSet wire encoding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <set>
#include <tuple>

#include "common/checksum.h"
#include "common/coding.h"
#include "query/query.h"
#include "query/wire.h"
#include "segment/segment.h"

namespace sediment::query {
namespace {

PositionedEvent Ev(int64_t ts, int64_t offset, std::string raw, std::vector<Field> fields = {}) {
  PositionedEvent pe;
  pe.pos = Position{Offset(offset), 0};
  pe.event.timestamp_ms = ts;
  // Saturating: the extremes test passes INT64_MAX.
  pe.event.ingest_ms = ts > INT64_MAX - 5 ? ts : ts + 5;
  pe.event.raw = std::move(raw);
  pe.event.fields = std::move(fields);
  return pe;
}

const Datasource kApp{"logs", {{"#type", "app"}}};
const Datasource kDb{"logs", {{"#type", "db"}}};
const Datasource kWeb{"web", {{"#type", "accesslog"}}};

Result<QueryResult> RunQuery(std::string_view q, const ScanInput& in, const TimeRange& range,
                             ExecOptions opts = {}) {
  auto c = Compile(q);
  if (!c.ok()) return c.status();
  return Execute(Env::Default(), **c, range, in, opts);
}

Result<MatchSet> Collect(std::string_view q, const ScanInput& in, const TimeRange& range,
                         ExecOptions opts = {}, size_t max_events = SIZE_MAX) {
  auto c = Compile(q);
  if (!c.ok()) return c.status();
  return CollectMatches(Env::Default(), **c, range, in, opts, max_events);
}

const Value* Get(const Row& r, const std::string& name) {
  for (const auto& [k, v] : r) {
    if (k == name) return &v;
  }
  return nullptr;
}

// "<#repo>/<@id>" of every row, sorted.
std::vector<std::string> RowIds(const QueryResult& r) {
  std::vector<std::string> out;
  for (const Row& row : r.rows) {
    out.push_back(std::get<std::string>(*Get(row, "#repo")) + "/" +
                  std::get<std::string>(*Get(row, "@id")));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> MatchIds(const MatchSet& m) {
  std::vector<std::string> out;
  for (const BufferedSource& s : m.sources) {
    for (const PositionedEvent& pe : *s.events) {
      out.push_back(s.datasource.repo + "/" + FormatEventId(s.partition, pe.pos));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

size_t EventCount(const MatchSet& m) {
  size_t n = 0;
  for (const BufferedSource& s : m.sources) n += s.events->size();
  return n;
}

int64_t CountOf(const QueryResult& r) { return std::get<int64_t>(*Get(r.rows.at(0), "_count")); }

// The CollectMatches contract on the shape of its sources.
void ExpectWellFormed(const MatchSet& m) {
  std::set<std::pair<std::string, int32_t>> seen;
  for (const BufferedSource& s : m.sources) {
    ASSERT_NE(s.events, nullptr);
    EXPECT_FALSE(s.events->empty());
    EXPECT_TRUE(seen.insert({s.datasource.Key(), s.partition.value}).second)
        << "duplicate source " << s.datasource.Key() << " p" << s.partition.value;
    for (size_t i = 1; i < s.events->size(); ++i) {
      EXPECT_LT((*s.events)[i - 1].pos, (*s.events)[i].pos);
    }
  }
}

ScanInput AsBuffered(const MatchSet& m) {
  ScanInput in;
  in.buffered = m.sources;
  return in;
}

class CollectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/query_wire_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    opener_ = std::make_unique<DirectorySegmentOpener>(Env::Default(), dir_);
  }
  void TearDown() override { (void)Env::Default()->RemoveAll(dir_); }

  // Segment `id` of `ds` on `partition` with `n` events at ts base..base+n-1 and offsets
  // first_offset..; event `rare_at` (if >= 0) contains "Zebrafish".
  SegmentSource MakeSegment(int64_t id, const Datasource& ds, int32_t partition, int64_t base,
                            int n, int rare_at, int64_t first_offset) {
    std::vector<PositionedEvent> events;
    for (int i = 0; i < n; ++i) {
      std::string raw = "2024 INFO request " + std::to_string(i) + " served user=u" +
                        std::to_string(i % 13) + " path=/api/v1/items";
      if (i == rare_at) raw += " Zebrafish alert";
      events.push_back(Ev(base + i, first_offset + i, raw,
                          {{"user", "u" + std::to_string(i % 13)}, {"n", std::to_string(i)}}));
    }
    SegmentSource s;
    s.opener = opener_.get();
    s.file_name = "seg" + std::to_string(id);
    s.id = SegmentId(id);
    s.datasource = ds;
    s.partition = PartitionId(partition);
    SegmentWriterOptions o;
    o.block_raw_bytes = 4096;
    auto info = WriteSegment(Env::Default(), dir_ + "/" + s.file_name, ds, s.partition, events, o);
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    s.min_ts = info->min_ts;
    s.max_ts = info->max_ts;
    return s;
  }

  // Four segments (logs/app on partitions 1 and 2, logs/db on partition 1, then an older logs/app
  // one on partition 1, so that source's events must be re-sorted by position), plus buffered
  // web events on partition 0 and buffered logs/app events on partition 1 after segment 1.
  ScanInput MixedInput() {
    ScanInput in;
    auto more_app = std::make_shared<std::vector<PositionedEvent>>();
    for (int i = 0; i < 300; ++i) {
      more_app->push_back(
          Ev(13000 + i, 5000 + i,
             "buffered request " + std::to_string(i) + (i == 77 ? " zebrafish" : " served"),
             {{"user", "u" + std::to_string(i % 5)}}));
    }
    in.buffered.push_back(BufferedSource{kApp, PartitionId(1), more_app});
    in.segments.push_back(MakeSegment(1, kApp, 1, 10000, 3000, 1234, 1000));
    in.segments.push_back(MakeSegment(2, kApp, 2, 20000, 3000, -1, 1000));
    in.segments.push_back(MakeSegment(3, kDb, 1, 15000, 1000, 5, 90000));
    in.segments.push_back(MakeSegment(4, kApp, 1, 9000, 200, -1, 0));
    auto web = std::make_shared<std::vector<PositionedEvent>>();
    web->push_back(Ev(10001, 101, "GET /index.html 200", {{"method", "GET"}, {"status", "200"}}));
    web->push_back(Ev(10002, 102, "POST /api/login 401 zebrafish",
                      {{"method", "POST"}, {"status", "401"}, {"user", "u3"}}));
    web->push_back(Ev(20150, 103, "get /api/users 200 served",
                      {{"method", "get"}, {"status", "200"}, {"user", "u1"}}));
    in.buffered.push_back(BufferedSource{kWeb, PartitionId(0), web});
    in.buffered.push_back(BufferedSource{kDb, PartitionId(1), nullptr});  // nothing buffered
    return in;
  }

  std::string dir_;
  std::unique_ptr<DirectorySegmentOpener> opener_;
};

const TimeRange kAll{0, 100000};
const char* const kFilters[] = {"",
                                "zebrafish",
                                "user=u3",
                                "#type=app served",
                                "#type=db",
                                "#repo=web",
                                "/request 4\\d /",
                                "NOT served",
                                "user=u1* OR post",
                                "\"zebra*ALERT\"",
                                "status!=200 method=*",
                                "nosuchtermanywhere"};

TEST_F(CollectTest, ReturnsExactlyTheEventsExecuteMatches) {
  ScanInput in = MixedInput();
  for (const TimeRange& range : {kAll, TimeRange{20100, 20200}, TimeRange{12990, 15003}}) {
    for (const char* f : kFilters) {
      SCOPED_TRACE(std::string(f) + " in [" + std::to_string(range.start_ms) + ", " +
                   std::to_string(range.end_ms) + ")");
      for (int threads : {1, 3}) {
        ExecOptions opts;
        opts.threads = threads;
        auto m = Collect(f, in, range, opts);
        auto count = RunQuery(std::string(f) + " | count()", in, range, opts);
        auto search = RunQuery(f, in, range, opts);
        ASSERT_TRUE(m.ok() && count.ok() && search.ok()) << m.status().ToString();
        ExpectWellFormed(*m);
        EXPECT_FALSE(m->truncated);
        EXPECT_TRUE(m->warnings.empty());
        EXPECT_EQ(static_cast<int64_t>(EventCount(*m)), CountOf(*count));
        EXPECT_EQ(m->stats.events_matched, count->stats.events_matched);
        ASSERT_LT(search->rows.size(), ExecOptions{}.max_events);
        EXPECT_EQ(MatchIds(*m), RowIds(*search));
        // The same pruning as the search: identical scan statistics. (A bare count() counts
        // blocks wholly in range from the segment index without reading them.)
        EXPECT_EQ(m->stats.segments_total, search->stats.segments_total);
        EXPECT_EQ(m->stats.segments_scanned, search->stats.segments_scanned);
        EXPECT_EQ(m->stats.blocks_total, search->stats.blocks_total);
        EXPECT_EQ(m->stats.blocks_scanned, search->stats.blocks_scanned);
        EXPECT_EQ(m->stats.events_scanned, search->stats.events_scanned);
        EXPECT_EQ(m->stats.bytes_scanned, search->stats.bytes_scanned);
      }
    }
  }
}

TEST_F(CollectTest, SourcesKeepDatasourcePartitionAndPositionOrder) {
  ScanInput in = MixedInput();
  auto m = Collect("", in, kAll);
  ASSERT_TRUE(m.ok());
  ExpectWellFormed(*m);
  // Order of first appearance: segments (1: app/p1, 2: app/p2, 3: db/p1), then buffered web/p0.
  ASSERT_EQ(m->sources.size(), 4u);
  EXPECT_EQ(m->sources[0].datasource, kApp);
  EXPECT_EQ(m->sources[0].partition, PartitionId(1));
  EXPECT_EQ(m->sources[0].events->size(), 3500u);  // segments 1 and 4, buffered continuation
  EXPECT_EQ(m->sources[0].events->front().pos.offset, Offset(0));
  EXPECT_EQ(m->sources[0].events->back().pos.offset, Offset(5299));
  EXPECT_EQ(m->sources[1].datasource, kApp);
  EXPECT_EQ(m->sources[1].partition, PartitionId(2));
  EXPECT_EQ(m->sources[2].datasource, kDb);
  EXPECT_EQ(m->sources[2].partition, PartitionId(1));
  EXPECT_EQ(m->sources[3].datasource, kWeb);
  EXPECT_EQ(m->sources[3].partition, PartitionId(0));
  // Whole events survive: timestamps, ingest time, raw and fields in order.
  const PositionedEvent& e = (*m->sources[0].events)[200 + 1234];
  EXPECT_EQ(e.event.timestamp_ms, 11234);
  EXPECT_EQ(e.event.ingest_ms, 11239);
  EXPECT_NE(e.event.raw.find("Zebrafish alert"), std::string::npos);
  EXPECT_EQ(e.event.fields, (std::vector<Field>{{"user", "u12"}, {"n", "1234"}}));
  EXPECT_EQ((*m->sources[3].events)[1], (*in.buffered[1].events)[1]);
}

TEST_F(CollectTest, TagAndTimePruning) {
  ScanInput in = MixedInput();
  auto m = Collect("#type=db", in, kAll);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->stats.segments_total, 4u);
  EXPECT_EQ(m->stats.segments_scanned, 1u);
  ASSERT_EQ(m->sources.size(), 1u);
  EXPECT_EQ(m->sources[0].datasource, kDb);
  EXPECT_EQ(m->sources[0].events->size(), 1000u);

  m = Collect("", in, TimeRange{20100, 20200});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->stats.segments_scanned, 1u);  // only segment 2 overlaps
  EXPECT_LT(m->stats.blocks_scanned, m->stats.blocks_total);
  EXPECT_EQ(EventCount(*m), 101u);  // 100 of segment 2, one buffered web event
  for (const BufferedSource& s : m->sources) {
    for (const PositionedEvent& pe : *s.events) {
      EXPECT_GE(pe.event.timestamp_ms, 20100);
      EXPECT_LT(pe.event.timestamp_ms, 20200);
    }
  }

  // Block filters prune a rare term exactly as Execute does.
  m = Collect("zebrafish", in, kAll);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(EventCount(*m), 4u);  // segments 1 and 3, buffered app and web
  EXPECT_LT(m->stats.blocks_scanned, m->stats.blocks_total / 4);
}

TEST_F(CollectTest, ExecuteOverMatchSetGivesTheSameRows) {
  ScanInput in = MixedInput();
  const char* queries[] = {"",
                           "served",
                           "zebrafish",
                           "| count()",
                           "user=u3 | count()",
                           "served | groupBy(user)",
                           "| groupBy([#repo, #type, user])",
                           "request | sort(user, order=asc, limit=30)",
                           "| sort(n, limit=10)",
                           "| head(7)",
                           "| tail(9)",
                           "user=u1* | table([@timestamp, @id, user], limit=5)",
                           "#repo=web | sort(status)",
                           "NOT served | tail(20) | groupBy(#type)"};
  for (const TimeRange& range : {kAll, TimeRange{12990, 15003}}) {
    for (const char* q : queries) {
      SCOPED_TRACE(q);
      auto c = Compile(q);
      ASSERT_TRUE(c.ok());
      ExecOptions three;
      three.threads = 3;
      auto m = CollectMatches(Env::Default(), **c, range, in, three);
      ASSERT_TRUE(m.ok());
      auto direct = Execute(Env::Default(), **c, range, in);
      auto via = Execute(Env::Default(), **c, range, AsBuffered(*m));
      ASSERT_TRUE(direct.ok() && via.ok());
      EXPECT_EQ(via->rows, direct->rows);
      EXPECT_EQ(via->warnings, direct->warnings);
      EXPECT_EQ(via->is_aggregate, direct->is_aggregate);
      // head/tail skip blocks beyond what they already keep, so their matched count is of what
      // they read (the rows are the same).
      const std::string text = q;
      if (text.find("head(") == std::string::npos && text.find("tail(") == std::string::npos) {
        EXPECT_EQ(via->stats.events_matched, direct->stats.events_matched);
      }
      if (range.start_ms == kAll.start_ms) {
        EXPECT_FALSE(direct->rows.empty());
      }

      // The same after a trip over the wire.
      auto decoded = DecodeMatchSet(EncodeMatchSet(*m));
      ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
      auto wired = Execute(Env::Default(), **c, range, AsBuffered(*decoded));
      ASSERT_TRUE(wired.ok());
      EXPECT_EQ(wired->rows, direct->rows);
    }
  }
}

TEST_F(CollectTest, CorruptAndMissingSegmentsBecomeWarnings) {
  ScanInput in;
  in.segments.push_back(MakeSegment(1, kApp, 1, 10000, 1000, -1, 0));
  in.segments.push_back(MakeSegment(2, kApp, 2, 20000, 1000, -1, 0));
  in.segments.push_back(MakeSegment(3, kApp, 3, 30000, 1000, -1, 0));
  in.segments.push_back(MakeSegment(4, kApp, 4, 40000, 1000, -1, 0));
  {
    auto data = Env::Default()->ReadFile((dir_ + "/" + in.segments[1].file_name));
    ASSERT_TRUE(data.ok());
    auto reader = SegmentReader::Open(Env::Default(), (dir_ + "/" + in.segments[1].file_name));
    ASSERT_TRUE(reader.ok());
    const BlockInfo& b0 = (*reader)->blocks()[0];
    std::string bytes = *data;
    for (uint32_t k = 0; k < 16; ++k) bytes[b0.file_offset + b0.stored_size / 2 + k] ^= 0x5a;
    ASSERT_TRUE(
        Env::Default()->WriteFileAtomic((dir_ + "/" + in.segments[1].file_name), bytes).ok());
  }
  ASSERT_TRUE(Env::Default()->TruncateFile((dir_ + "/" + in.segments[2].file_name), 100).ok());
  ASSERT_TRUE(Env::Default()->RemoveFile((dir_ + "/" + in.segments[3].file_name)).ok());

  for (int threads : {1, 3}) {
    ExecOptions o;
    o.threads = threads;
    auto m = Collect("served", in, kAll, o);
    auto count = RunQuery("served | count()", in, kAll, o);
    ASSERT_TRUE(m.ok() && count.ok());
    ASSERT_EQ(m->warnings.size(), 3u);
    EXPECT_EQ(m->warnings, count->warnings);
    EXPECT_NE(m->warnings[0].find("segment 2 block 0 ("), std::string::npos) << m->warnings[0];
    EXPECT_NE(m->warnings[1].find("segment 3 ("), std::string::npos) << m->warnings[1];
    EXPECT_NE(m->warnings[2].find("segment 4 ("), std::string::npos) << m->warnings[2];
    EXPECT_EQ(static_cast<int64_t>(EventCount(*m)), CountOf(*count));
    EXPECT_GE(EventCount(*m), 1000u);
    EXPECT_LT(EventCount(*m), 2000u);
    EXPECT_EQ(m->stats.segments_scanned, 2u);
    EXPECT_FALSE(m->truncated);

    // The warnings travel with the events.
    auto decoded = DecodeMatchSet(EncodeMatchSet(*m));
    ASSERT_TRUE(decoded.ok());
    EXPECT_EQ(decoded->warnings, count->warnings);
  }
}

TEST_F(CollectTest, MaxEventsStopsEarly) {
  ScanInput in = MixedInput();
  auto all = Collect("served", in, kAll);
  ASSERT_TRUE(all.ok());
  const size_t total = EventCount(*all);
  ASSERT_GT(total, 1000u);
  const std::vector<std::string> all_ids = MatchIds(*all);
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    ExecOptions o;
    o.threads = threads;
    auto m = Collect("served", in, kAll, o, 10);
    ASSERT_TRUE(m.ok());
    ExpectWellFormed(*m);
    EXPECT_TRUE(m->truncated);
    EXPECT_EQ(EventCount(*m), 10u);
    EXPECT_LT(m->stats.blocks_scanned, all->stats.blocks_scanned / 2);  // stopped, not filtered
    for (const std::string& id : MatchIds(*m)) {
      EXPECT_TRUE(std::binary_search(all_ids.begin(), all_ids.end(), id)) << id;
    }

    m = Collect("served", in, kAll, o, total - 1);
    ASSERT_TRUE(m.ok());
    EXPECT_TRUE(m->truncated);
    EXPECT_EQ(EventCount(*m), total - 1);

    m = Collect("served", in, kAll, o, total);
    ASSERT_TRUE(m.ok());
    EXPECT_FALSE(m->truncated);
    EXPECT_EQ(MatchIds(*m), all_ids);

    m = Collect("served", in, kAll, o, 0);
    ASSERT_TRUE(m.ok());
    EXPECT_TRUE(m->truncated);
    EXPECT_TRUE(m->sources.empty());
    EXPECT_EQ(m->stats.blocks_scanned, 0u);
  }
  // With one thread the kept events are the first in input order: segment 1's oldest.
  ExecOptions one;
  one.threads = 1;
  auto m = Collect("served", in, kAll, one, 5);
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->sources.size(), 1u);
  EXPECT_EQ(m->sources[0].events->front().pos.offset, Offset(1000));
}

TEST(IsAggregateTest, Stages) {
  for (auto [q, aggregate] :
       std::vector<std::pair<const char*, bool>>{{"", false},
                                                 {"error", false},
                                                 {"| head(5)", false},
                                                 {"| tail(5) | head(2)", false},
                                                 {"| count()", true},
                                                 {"| groupBy(a)", true},
                                                 {"| tail(3) | sort(a)", true},
                                                 {"| table([a])", true}}) {
    auto c = Compile(q);
    ASSERT_TRUE(c.ok()) << q;
    EXPECT_EQ(IsAggregate(**c), aggregate) << q;
  }
}

// ---------- wire encoding ----------

MatchSet SampleSet() {
  MatchSet m;
  auto a = std::make_shared<std::vector<PositionedEvent>>();
  for (int i = 0; i < 40; ++i) {
    PositionedEvent pe = Ev(1000 + i, 10 + i / 3, "line " + std::to_string(i) + " repeated text",
                            {{"k", std::to_string(i % 4)}, {"empty", ""}});
    pe.pos.index = static_cast<uint32_t>(i % 3);
    a->push_back(std::move(pe));
  }
  m.sources.push_back(BufferedSource{kApp, PartitionId(3), a});
  auto b = std::make_shared<std::vector<PositionedEvent>>();
  b->push_back(Ev(-5, 0, ""));                                       // negative ts, empty raw
  b->push_back(Ev(INT64_MAX, INT64_MAX, std::string("\0\xff", 2)));  // extremes, binary
  b->back().pos.index = UINT32_MAX;
  m.sources.push_back(BufferedSource{Datasource{"r", {}}, PartitionId(INT32_MAX), b});
  m.warnings = {"segment 7 (x) could not be read", ""};
  m.stats = QueryStats{1, 2, 3, 4, 5, 6, 7, -8};
  m.truncated = true;
  return m;
}

void ExpectSameSet(const MatchSet& a, const MatchSet& b) {
  ASSERT_EQ(a.sources.size(), b.sources.size());
  for (size_t i = 0; i < a.sources.size(); ++i) {
    EXPECT_EQ(a.sources[i].datasource, b.sources[i].datasource);
    EXPECT_EQ(a.sources[i].partition, b.sources[i].partition);
    ASSERT_NE(b.sources[i].events, nullptr);
    const std::vector<PositionedEvent> empty;
    EXPECT_EQ(a.sources[i].events ? *a.sources[i].events : empty, *b.sources[i].events);
  }
  EXPECT_EQ(a.warnings, b.warnings);
  EXPECT_EQ(a.truncated, b.truncated);
  const QueryStats &x = a.stats, &y = b.stats;
  EXPECT_EQ(std::tie(x.segments_total, x.segments_scanned, x.blocks_total, x.blocks_scanned,
                     x.events_scanned, x.events_matched, x.bytes_scanned, x.elapsed_ms),
            std::tie(y.segments_total, y.segments_scanned, y.blocks_total, y.blocks_scanned,
                     y.events_scanned, y.events_matched, y.bytes_scanned, y.elapsed_ms));
}

TEST(WireTest, RoundTrip) {
  const MatchSet m = SampleSet();
  for (Codec codec : {Codec::kNone, Codec::kLz4, Codec::kZstd}) {
    std::string enc = EncodeMatchSet(m, codec);
    EXPECT_EQ(enc.substr(0, 4), "SQMS");
    EXPECT_EQ(enc[4], 1);                          // version
    EXPECT_EQ(static_cast<Codec>(enc[5]), codec);  // the sample compresses well
    auto d = DecodeMatchSet(enc);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    ExpectSameSet(m, *d);
  }
  EXPECT_LT(EncodeMatchSet(m, Codec::kLz4).size(), EncodeMatchSet(m, Codec::kNone).size());

  // Empty set; a null events pointer decodes as an empty source.
  MatchSet empty;
  auto d = DecodeMatchSet(EncodeMatchSet(empty));
  ASSERT_TRUE(d.ok());
  ExpectSameSet(empty, *d);
  MatchSet null_events;
  null_events.sources.push_back(BufferedSource{kDb, PartitionId(-1), nullptr});
  d = DecodeMatchSet(EncodeMatchSet(null_events));
  ASSERT_TRUE(d.ok());
  ExpectSameSet(null_events, *d);
  EXPECT_TRUE(d->sources[0].events->empty());
}

TEST(PartialWireTest, RoundTripAndRejection) {
  PartialResult p;
  p.state = std::string("collector\0bytes", 15);
  p.warnings = {"segment 9 (x) could not be read", ""};
  p.stats = QueryStats{9, 8, 7, 6, 5, 4, 3, 2};
  p.unreadable_segments = {SegmentId(9)};  // not sent
  for (Codec codec : {Codec::kNone, Codec::kLz4, Codec::kZstd}) {
    const std::string enc = EncodePartial(p, codec);
    EXPECT_EQ(enc.substr(0, 4), "SQPR");
    auto d = DecodePartial(enc);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->state, p.state);
    EXPECT_EQ(d->warnings, p.warnings);
    EXPECT_TRUE(d->unreadable_segments.empty());
    EXPECT_EQ(d->collector, nullptr);
    EXPECT_EQ(std::tie(d->stats.segments_total, d->stats.bytes_scanned, d->stats.elapsed_ms),
              std::tie(p.stats.segments_total, p.stats.bytes_scanned, p.stats.elapsed_ms));
    for (size_t n = 0; n < enc.size(); ++n) {
      auto t = DecodePartial(std::string_view(enc).substr(0, n));
      ASSERT_EQ(t.status().code(), StatusCode::kCorruption) << n;
    }
    EXPECT_FALSE(DecodePartial(enc + '\0').ok());
    for (size_t i = 0; i < enc.size(); ++i) {
      std::string bad = enc;
      bad[i] = static_cast<char>(bad[i] ^ 0x10);
      ASSERT_EQ(DecodePartial(bad).status().code(), StatusCode::kCorruption) << i;
    }
  }
  // A match set is not a partial result, nor the other way round.
  EXPECT_FALSE(DecodePartial(EncodeMatchSet(SampleSet())).ok());
  EXPECT_FALSE(DecodeMatchSet(EncodePartial(p)).ok());
}

TEST(WireTest, EveryTruncationAndExtensionIsRejected) {
  for (Codec codec : {Codec::kNone, Codec::kLz4}) {
    const std::string enc = EncodeMatchSet(SampleSet(), codec);
    for (size_t n = 0; n < enc.size(); ++n) {
      auto d = DecodeMatchSet(std::string_view(enc).substr(0, n));
      ASSERT_FALSE(d.ok()) << "prefix of " << n << " bytes";
      EXPECT_EQ(d.status().code(), StatusCode::kCorruption);
    }
    EXPECT_FALSE(DecodeMatchSet(enc + '\0').ok());
    EXPECT_FALSE(DecodeMatchSet(enc + enc).ok());
  }
}

TEST(WireTest, BitFlipsAreRejected) {
  for (Codec codec : {Codec::kNone, Codec::kLz4}) {
    const std::string enc = EncodeMatchSet(SampleSet(), codec);
    // Every single-bit flip.
    for (size_t i = 0; i < enc.size(); ++i) {
      for (int bit = 0; bit < 8; ++bit) {
        std::string bad = enc;
        bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
        auto d = DecodeMatchSet(bad);
        ASSERT_FALSE(d.ok()) << "byte " << i << " bit " << bit;
        EXPECT_EQ(d.status().code(), StatusCode::kCorruption);
      }
    }
    // Random multi-bit flips.
    std::mt19937 rng(42);
    for (int trial = 0; trial < 2000; ++trial) {
      std::string bad = enc;
      const int flips = 2 + static_cast<int>(rng() % 6);
      for (int f = 0; f < flips; ++f)
        bad[rng() % bad.size()] ^= static_cast<char>(1 << (rng() % 8));
      if (bad == enc) continue;
      EXPECT_FALSE(DecodeMatchSet(bad).ok()) << "trial " << trial;
    }
  }
}

// A frame as WIRE.md describes it around `body`, with a valid checksum.
std::string Frame(std::string_view body, uint8_t codec = 0, uint64_t raw_len = UINT64_MAX,
                  uint8_t version = 1) {
  std::string out = "SQMS";
  out.push_back(static_cast<char>(version));
  out.push_back(static_cast<char>(codec));
  out.append(2, '\0');
  PutFixed64(&out, raw_len == UINT64_MAX ? body.size() : raw_len);
  PutFixed64(&out, body.size());
  out.append(body);
  PutFixed32(&out, Crc32c(out));
  return out;
}

// Body prefix up to and including the warnings: no flags, zero stats, no warnings.
std::string Head() {
  std::string b;
  PutVarint64(&b, 0);
  for (int i = 0; i < 8; ++i) PutVarint64(&b, 0);
  PutVarint64(&b, 0);
  return b;
}

std::string DecodeError(const std::string& data) {
  auto d = DecodeMatchSet(data);
  if (d.ok()) return "OK";
  EXPECT_EQ(d.status().code(), StatusCode::kCorruption);
  return d.status().message();
}

TEST(WireTest, CheckedGarbageIsRejectedWithAMessage) {
  // The frame itself matches the spec: an empty set.
  std::string empty_body = Head();
  PutVarint64(&empty_body, 0);
  ASSERT_EQ(Frame(empty_body), EncodeMatchSet(MatchSet{}, Codec::kNone));
  EXPECT_EQ(DecodeError(Frame(empty_body)), "OK");

  EXPECT_NE(DecodeError(Frame(empty_body, 0, UINT64_MAX, 2)).find("unsupported version 2"),
            std::string::npos);
  EXPECT_NE(DecodeError(Frame(empty_body, 9)).find("unknown codec 9"), std::string::npos);
  EXPECT_NE(DecodeError(Frame(empty_body, 0, empty_body.size() + 1)).find("raw length"),
            std::string::npos);
  EXPECT_NE(DecodeError(Frame(empty_body, 1, uint64_t{1} << 40)).find("too large"),
            std::string::npos);
  EXPECT_NE(DecodeError(Frame("garbage", 1, 100)).find("lz4"), std::string::npos);
  EXPECT_NE(DecodeError(Frame("garbage", 2, 100)).find("zstd"), std::string::npos);
  EXPECT_NE(DecodeError(Frame("")).find("truncated flags"), std::string::npos);
  EXPECT_NE(DecodeError(Frame(empty_body + "x")).find("trailing"), std::string::npos);
  {
    std::string b;
    PutVarint64(&b, 2);  // unknown flag
    EXPECT_NE(DecodeError(Frame(b)).find("unknown flags"), std::string::npos);
  }
  {
    std::string b = Head();
    PutVarint64(&b, 1000000);  // sources beyond the input
    EXPECT_NE(DecodeError(Frame(b)).find("bad source count"), std::string::npos);
  }
  // One source whose event block disagrees with its positions.
  auto source = [](int64_t partition, uint64_t positions, const std::vector<Event>& events) {
    std::string b = Head();
    PutVarint64(&b, 1);
    PutLengthPrefixed(&b, "repo");
    PutVarint64(&b, 0);
    PutVarsint64(&b, partition);
    PutVarint64(&b, positions);
    for (uint64_t i = 0; i < positions; ++i) {
      PutVarsint64(&b, static_cast<int64_t>(i));
      PutVarint64(&b, 0);
    }
    EncodeEvents(events, &b);
    return b;
  };
  Event e;
  e.raw = std::string(100, 'x');
  EXPECT_EQ(DecodeError(Frame(source(1, 1, {e}))), "OK");
  EXPECT_NE(DecodeError(Frame(source(1, 2, {e}))).find("1 events for 2 positions"),
            std::string::npos);
  EXPECT_NE(DecodeError(Frame(source(int64_t{1} << 40, 1, {e}))).find("bad partition"),
            std::string::npos);
  {
    std::string b = source(1, 1, {e});
    b.resize(b.size() - 1);  // cut the event's raw string
    EXPECT_NE(DecodeError(Frame(b)).find("source 0"), std::string::npos);
  }

  // Random bodies under a valid checksum never crash the decoder.
  const std::string body = [] {
    std::string enc = EncodeMatchSet(SampleSet(), Codec::kNone);
    return enc.substr(24, enc.size() - 28);
  }();
  ASSERT_EQ(DecodeError(Frame(body)), "OK");
  std::mt19937 rng(3);
  for (int trial = 0; trial < 3000; ++trial) {
    std::string b = body;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits; ++k) b[rng() % b.size()] = static_cast<char>(rng());
    if (rng() % 4 == 0) b.resize(rng() % b.size());
    (void)DecodeMatchSet(Frame(b));  // OK or Corruption; must not crash or over-read
  }
}

}  // namespace
}  // namespace sediment::query

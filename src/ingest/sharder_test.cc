#include "ingest/sharder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "common/checksum.h"
#include "ingest/ingest.h"
#include "log/local_log.h"

namespace sediment::ingest {
namespace {

using namespace std::chrono_literals;

Datasource Ds(const std::string& host, const std::string& repo = "r") {
  Datasource d;
  d.repo = repo;
  d.tags = {{"#host", host}};
  d.Normalize();
  return d;
}

ShardingOptions Options(uint64_t bytes_per_second = 1000, int32_t max_shards = 8) {
  ShardingOptions o;
  o.shard_bytes_per_second = bytes_per_second;
  o.max_shards = max_shards;
  o.window_ms = 1000;
  o.shrink_after_ms = 60000;
  o.forget_after_ms = 600000;
  return o;
}

// Pick once per "second" with `bytes_per_second` bytes, `seconds` times.
void Feed(DatasourceSharder& s, ManualClock& clock, const Datasource& d, uint64_t bytes_per_second,
          int seconds, int32_t partitions = 16) {
  for (int i = 0; i < seconds; ++i) {
    (void)s.Pick(d, bytes_per_second, partitions);
    clock.AdvanceMillis(1000);
  }
}

// The partitions `n` consecutive picks (one request each, no bytes) of `d` go to.
std::set<int32_t> PartitionsOfPicks(DatasourceSharder& s, const Datasource& d, int n,
                                    int32_t partitions = 16) {
  std::set<int32_t> out;
  for (int i = 0; i < n; ++i) out.insert(s.Pick(d, 0, partitions).value);
  return out;
}

TEST(ShardPartition, ShardZeroIsPartitionForAndShardsAreDistinct) {
  for (int32_t n : {1, 2, 3, 4, 6, 8, 12, 24, 97}) {
    for (int k = 0; k < 200; ++k) {
      const Datasource d = Ds("h" + std::to_string(k));
      const uint64_t h = Hash64(d.Key());
      ASSERT_EQ(ShardPartition(h, 0, n), d.PartitionFor(n)) << n;
      // Today's formula, so data written before sharding is where it always was.
      ASSERT_EQ(d.PartitionFor(n).value, static_cast<int32_t>(h % static_cast<uint64_t>(n)));
      std::set<int32_t> seen;
      for (int32_t i = 0; i < n; ++i) {
        const PartitionId p = ShardPartition(h, i, n);
        ASSERT_GE(p.value, 0);
        ASSERT_LT(p.value, n);
        seen.insert(p.value);
      }
      ASSERT_EQ(seen.size(), static_cast<size_t>(n)) << "partitions " << n << " key " << k;
    }
  }
}

TEST(DatasourceSharder, StartsAtOneShardOnPartitionFor) {
  ManualClock clock;
  DatasourceSharder s(&clock, Options());
  const Datasource d = Ds("a");
  EXPECT_EQ(s.ShardsOf(d), 1);
  // Below the threshold for a long while: always shard 0, today's partition.
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(s.Pick(d, 500, 16), d.PartitionFor(16));
    clock.AdvanceMillis(1000);
  }
  EXPECT_EQ(s.ShardsOf(d), 1);
  EXPECT_TRUE(s.ShardedDatasources().empty());
}

TEST(DatasourceSharder, DisabledOrOnePartitionIsAlwaysPartitionFor) {
  ManualClock clock;
  DatasourceSharder off(&clock, Options(/*bytes_per_second=*/0));
  DatasourceSharder one_shard(&clock, Options(1000, /*max_shards=*/1));
  DatasourceSharder on(&clock, Options());
  const Datasource d = Ds("a");
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(off.Pick(d, 1 << 30, 16), d.PartitionFor(16));
    EXPECT_EQ(one_shard.Pick(d, 1 << 30, 16), d.PartitionFor(16));
    EXPECT_EQ(on.Pick(d, 1 << 30, 1), PartitionId(0));
    clock.AdvanceMillis(1000);
  }
  EXPECT_EQ(off.TrackedCount(), 0u);
}

TEST(DatasourceSharder, GrowsWhenBusyAndSpreadsRequestsRoundRobin) {
  ManualClock clock;
  DatasourceSharder s(&clock, Options(1000));
  const Datasource busy = Ds("busy");
  const Datasource quiet = Ds("quiet");
  // Within the first window nothing changes, however many bytes come.
  (void)s.Pick(busy, 1'000'000, 16);
  clock.AdvanceMillis(500);
  (void)s.Pick(busy, 1'000'000, 16);
  EXPECT_EQ(s.ShardsOf(busy), 1);
  clock.AdvanceMillis(500);
  // The window closes at 2 MB/s per shard: 2 shards, then 4 after the next busy window.
  (void)s.Pick(busy, 3000, 16);
  EXPECT_EQ(s.ShardsOf(busy), 2);
  clock.AdvanceMillis(1000);
  (void)s.Pick(busy, 10, 16);
  EXPECT_EQ(s.ShardsOf(busy), 4);
  // Requests go round-robin over the shards: 4 distinct partitions, shard 0 among them.
  const std::set<int32_t> parts = PartitionsOfPicks(s, busy, 8);
  EXPECT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts.count(busy.PartitionFor(16).value), 1u);
  const uint64_t h = Hash64(busy.Key());
  for (int32_t i = 0; i < 4; ++i) EXPECT_EQ(parts.count(ShardPartition(h, i, 16).value), 1u);
  // Another datasource is not affected.
  Feed(s, clock, quiet, 100, 5);
  EXPECT_EQ(s.ShardsOf(quiet), 1);
  auto sharded = s.ShardedDatasources();
  ASSERT_EQ(sharded.size(), 1u);
  EXPECT_EQ(sharded[0].datasource, busy);
  EXPECT_EQ(sharded[0].shards, 4);
}

TEST(DatasourceSharder, RateBetweenThresholdsKeepsTheCount) {
  ManualClock clock;
  DatasourceSharder s(&clock, Options(1000));
  const Datasource d = Ds("a");
  Feed(s, clock, d, 1500, 3);  // 1.5x the threshold: 2 shards, 750 per shard
  EXPECT_EQ(s.ShardsOf(d), 2);
  Feed(s, clock, d, 1500, 200);  // above a quarter per shard: neither grows nor shrinks
  EXPECT_EQ(s.ShardsOf(d), 2);
}

TEST(DatasourceSharder, CapsAtMaxShardsAndAtThePartitionCount) {
  ManualClock clock;
  DatasourceSharder s(&clock, Options(1000, /*max_shards=*/4));
  const Datasource a = Ds("a");
  Feed(s, clock, a, 1'000'000'000, 20);
  EXPECT_EQ(s.ShardsOf(a), 4);
  EXPECT_EQ(PartitionsOfPicks(s, a, 20).size(), 4u);

  DatasourceSharder t(&clock, Options(1000, /*max_shards=*/64));
  const Datasource b = Ds("b");
  Feed(t, clock, b, 1'000'000'000, 20, /*partitions=*/3);
  EXPECT_EQ(t.ShardsOf(b), 3);
  EXPECT_EQ(PartitionsOfPicks(t, b, 30, 3), (std::set<int32_t>{0, 1, 2}));
  // A smaller log (another node's view) never gets a shard beyond its partitions.
  for (int i = 0; i < 10; ++i) EXPECT_LT(t.Pick(b, 0, 2).value, 2);
}

TEST(DatasourceSharder, ShrinksAfterALongLowPeriod) {
  ManualClock clock;
  ShardingOptions o = Options(1000);
  o.shrink_after_ms = 60000;
  DatasourceSharder s(&clock, o);
  const Datasource d = Ds("a");
  Feed(s, clock, d, 100'000, 5);
  EXPECT_EQ(s.ShardsOf(d), 8);
  // Low (under a quarter per shard), but not yet for a minute.
  Feed(s, clock, d, 100, 30);
  EXPECT_EQ(s.ShardsOf(d), 8);
  // A busy window ends the low run.
  Feed(s, clock, d, 100'000, 1);
  Feed(s, clock, d, 100, 40);
  EXPECT_EQ(s.ShardsOf(d), 8);
  Feed(s, clock, d, 100, 30);  // a minute of low windows since the busy one
  EXPECT_EQ(s.ShardsOf(d), 4);
  Feed(s, clock, d, 100, 61);
  EXPECT_EQ(s.ShardsOf(d), 2);
  Feed(s, clock, d, 100, 61);
  EXPECT_EQ(s.ShardsOf(d), 1);
  EXPECT_EQ(PartitionsOfPicks(s, d, 5), (std::set<int32_t>{d.PartitionFor(16).value}));
}

TEST(DatasourceSharder, IdleDatasourceShrinksAndIsForgotten) {
  ManualClock clock;
  DatasourceSharder s(&clock, Options(1000));
  const Datasource d = Ds("a");
  Feed(s, clock, d, 100'000, 5);
  EXPECT_EQ(s.ShardsOf(d), 8);
  // Two idle minutes: the window that closes at the next request was low throughout.
  clock.AdvanceMillis(120000);
  (void)s.Pick(d, 10, 16);
  EXPECT_EQ(s.ShardsOf(d), 4);
  // Idle beyond forget_after: it starts over at one shard.
  clock.AdvanceMillis(600000);
  EXPECT_EQ(s.ShardsOf(d), 1);
  EXPECT_TRUE(s.ShardedDatasources().empty());
  EXPECT_EQ(s.Pick(d, 10, 16), d.PartitionFor(16));
}

TEST(DatasourceSharder, TheMapIsBounded) {
  ManualClock clock;
  ShardingOptions o = Options(1000);
  o.max_datasources = 10;
  o.forget_after_ms = 60000;
  DatasourceSharder s(&clock, o);
  // A datasource used between the others stays (least recently used first out) with its bytes.
  const Datasource kept = Ds("kept");
  (void)s.Pick(kept, 1'000'000, 16);
  for (int i = 0; i < 1000; ++i) {
    (void)s.Pick(Ds("h" + std::to_string(i)), 1, 16);
    if (i % 5 == 0) (void)s.Pick(kept, 0, 16);
    ASSERT_LE(s.TrackedCount(), 10u);
  }
  EXPECT_EQ(s.TrackedCount(), 10u);
  clock.AdvanceMillis(1000);
  (void)s.Pick(kept, 0, 16);
  EXPECT_EQ(s.ShardsOf(kept), 2);
  // Idle entries go at the next new datasource.
  clock.AdvanceMillis(60000);
  (void)s.Pick(Ds("new"), 1, 16);
  EXPECT_EQ(s.TrackedCount(), 1u);
}

TEST(DatasourceSharder, ConcurrentPicksStayOnTheDatasourcesShards) {
  ManualClock clock;
  ShardingOptions o = Options(1000, 8);
  o.max_datasources = 64;
  DatasourceSharder s(&clock, o);
  std::atomic<bool> stop{false};
  std::thread ticker([&] {
    while (!stop.load()) {
      clock.AdvanceMillis(100);
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5000; ++i) {
        const Datasource d = Ds("h" + std::to_string((t + i) % 100));
        const PartitionId p = s.Pick(d, 5000, 24);
        const uint64_t h = Hash64(d.Key());
        bool ok = false;
        for (int32_t k = 0; k < 8; ++k) ok = ok || ShardPartition(h, k, 24) == p;
        if (!ok) ++bad;
        if (i % 64 == 0) {
          (void)s.ShardedDatasources();
          (void)s.ShardsOf(d);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  stop = true;
  ticker.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_LE(s.TrackedCount(), 64u);
}

// ---- AppendAll over an embedded log ----

class ShardedAppendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("sharder_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
    LocalLogOptions lo;
    lo.partitions = 8;
    auto log = OpenLocalLog(Env::Default(), dir_, lo);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    log_ = std::move(log).value();
  }
  void TearDown() override {
    log_.reset();
    std::filesystem::remove_all(dir_);
  }

  // One request: `n` messages of datasource `d`, events named "<request>-<message>" and padded
  // with `pad` bytes.
  static std::vector<IngestMessage> Request(const Datasource& d, int request, int n,
                                            size_t pad = 2000) {
    std::vector<IngestMessage> out;
    for (int m = 0; m < n; ++m) {
      IngestMessage msg;
      msg.datasource = d;
      Event e;
      e.timestamp_ms = 1;
      e.ingest_ms = 1;
      e.raw = std::to_string(request) + "-" + std::to_string(m) + std::string(pad, 'x');
      msg.events.push_back(std::move(e));
      out.push_back(std::move(msg));
    }
    return out;
  }

  struct Stored {
    Datasource datasource;
    int request = 0;
    int message = 0;
  };
  // partition -> its events in log order.
  std::map<int32_t, std::vector<Stored>> ReadAll() {
    std::map<int32_t, std::vector<Stored>> out;
    for (int32_t p = 0; p < log_->partition_count(); ++p) {
      auto records = log_->Read(PartitionId(p), Offset(0), 1 << 24, 0ms);
      EXPECT_TRUE(records.ok());
      if (!records.ok()) continue;
      for (const LogRecord& rec : *records) {
        auto msg = DecodeIngestMessage(rec.data);
        EXPECT_TRUE(msg.ok());
        if (!msg.ok()) continue;
        for (const Event& e : msg->events) {
          const size_t dash = e.raw.find('-');
          out[p].push_back(Stored{msg->datasource, std::stoi(e.raw.substr(0, dash)),
                                  std::stoi(e.raw.substr(dash + 1))});
        }
      }
    }
    return out;
  }

  std::string dir_;
  std::unique_ptr<CommitLog> log_;
};

TEST_F(ShardedAppendTest, BusyDatasourceSpreadsOverPartitionsOneRequestPerPartition) {
  ManualClock clock;
  DatasourceSharder sharder(&clock, Options(/*bytes_per_second=*/1000, /*max_shards=*/4));
  const Datasource busy = Ds("busy");
  const Datasource quiet = Ds("quiet");
  constexpr int kRequests = 12;
  constexpr int kMessages = 3;
  for (int r = 0; r < kRequests; ++r) {
    std::vector<IngestMessage> messages = Request(busy, r, kMessages);
    // A quiet datasource in the same request stays on its partition.
    std::vector<IngestMessage> q = Request(quiet, r, 1, /*pad=*/10);
    messages.push_back(std::move(q[0]));
    ASSERT_TRUE(AppendAll(log_.get(), std::move(messages), 10s, &sharder).ok());
    clock.AdvanceMillis(1000);
  }
  EXPECT_EQ(sharder.ShardsOf(busy), 4);
  EXPECT_EQ(sharder.ShardsOf(quiet), 1);

  const uint64_t h = Hash64(busy.Key());
  std::set<int32_t> busy_parts;
  std::set<int32_t> quiet_parts;
  std::map<int, int32_t> partition_of_request;  // busy requests only
  size_t busy_events = 0;
  for (const auto& [p, events] : ReadAll()) {
    const Stored* prev = nullptr;  // the previous busy event of this partition
    for (const Stored& e : events) {
      if (e.datasource == quiet) {
        quiet_parts.insert(p);
        continue;
      }
      ASSERT_EQ(e.datasource, busy);
      ++busy_events;
      busy_parts.insert(p);
      // Every message of a request is in one partition, in the request's order, not interleaved.
      auto [it, fresh] = partition_of_request.emplace(e.request, p);
      EXPECT_EQ(it->second, p) << "request " << e.request << " split over partitions";
      if (!fresh) {
        ASSERT_NE(prev, nullptr);
        EXPECT_EQ(prev->request, e.request) << "request interleaved";
        EXPECT_EQ(prev->message + 1, e.message);
      } else {
        EXPECT_EQ(e.message, 0);
      }
      prev = &e;
    }
  }
  EXPECT_EQ(busy_events, static_cast<size_t>(kRequests * kMessages));
  EXPECT_EQ(partition_of_request.size(), static_cast<size_t>(kRequests));
  EXPECT_GT(busy_parts.size(), 1u);
  EXPECT_EQ(busy_parts.size(), 4u);
  for (int32_t p : busy_parts) {
    bool is_shard = false;
    for (int32_t i = 0; i < 4; ++i) is_shard = is_shard || ShardPartition(h, i, 8).value == p;
    EXPECT_TRUE(is_shard) << p;
  }
  EXPECT_EQ(busy_parts.count(busy.PartitionFor(8).value), 1u);
  EXPECT_EQ(quiet_parts, (std::set<int32_t>{quiet.PartitionFor(8).value}));
}

TEST_F(ShardedAppendTest, WithoutASharderEverythingGoesToPartitionFor) {
  const Datasource busy = Ds("busy");
  for (int r = 0; r < 6; ++r) {
    ASSERT_TRUE(AppendAll(log_.get(), Request(busy, r, 3), 10s).ok());
  }
  auto all = ReadAll();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all.begin()->first, busy.PartitionFor(8).value);
  EXPECT_EQ(all.begin()->second.size(), 18u);
}

}  // namespace
}  // namespace sediment::ingest

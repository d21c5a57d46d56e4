// DatasourceSharder: datasource autosharding (DESIGN section 3). A datasource whose ingest rate is
// high is spread over several ingest partitions, so one busy datasource is not limited to what
// one partition (one Kafka produce queue, one digest worker) takes.
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "common/types.h"
#include "model/event.h"

namespace sediment::ingest {

struct ShardingOptions {
  // A datasource whose rate of appended bytes per shard is above this over a window gets twice
  // its shards (server --datasource-shard-bytes-per-second). 0 disables sharding: every datasource
  // keeps one shard, PartitionFor.
  uint64_t shard_bytes_per_second = uint64_t{4} << 20;
  // Most shards of one datasource (server --max-datasource-shards); never more than the log's
  // partitions. At least 1.
  int32_t max_shards = 8;
  // A datasource's rate is measured over windows of at least this long: the bytes appended since
  // the window began over the time since then, taken when a request comes after the window's end.
  int64_t window_ms = 1000;
  // A datasource whose rate stayed below a quarter of its shards' threshold for this long (every
  // window since then) halves its shards, down to 1.
  int64_t shrink_after_ms = 5 * 60 * 1000;
  // A datasource with no request for this long is forgotten (the next one starts at one shard).
  int64_t forget_after_ms = 10 * 60 * 1000;
  // Most datasources tracked; beyond, the least recently used one is forgotten.
  size_t max_datasources = 100000;
};

// One datasource's sharding as ShardedDatasources reports it.
struct DatasourceShards {
  std::string key;  // Datasource::Key()
  Datasource datasource;
  int32_t shards = 1;
  uint64_t bytes_per_second = 0;  // the rate of the last completed window
};

// Decides which partition each request's messages of a datasource go to.
//
// Per datasource key it keeps a shard count (1 at first) and the rate of bytes appended. Each
// Pick counts the request's bytes and picks one shard, round-robin over the current count; the
// request then appends every message of that datasource to that shard's partition, in order, so a
// request's events of one datasource stay in order in one partition. Shard i is
// ShardPartition(Hash64(key), i, partitions): shard 0 is PartitionFor, so a datasource that never
// shards (and all data written before sharding existed) is where it always was. Events of one
// datasource from different requests may be in different partitions: their order across requests
// is not kept (it never was across clients).
//
// When a window closes with a rate per shard above shard_bytes_per_second, the count doubles (up
// to max_shards and the partition count). After shrink_after_ms in which every window's rate was
// below a quarter of shards x threshold, it halves. Memory is bounded: at most max_datasources
// entries, least recently used first out, and entries idle forget_after_ms are dropped.
//
// Time comes from the injected Clock (MonotonicMicros). Thread-safe: one mutex, held for a map
// lookup and a few arithmetic operations per Pick.
class DatasourceSharder {
 public:
  // `clock` is borrowed and outlives the sharder.
  DatasourceSharder(Clock* clock, ShardingOptions options);

  // The partition for one request's messages of `datasource`, whose encoded size is `bytes`;
  // counts the bytes towards its rate. partition_count > 0. With sharding disabled, or
  // partition_count 1, PartitionFor(partition_count) without any bookkeeping.
  [[nodiscard]] PartitionId Pick(const Datasource& datasource, uint64_t bytes,
                                 int32_t partition_count);

  // The shard count of `datasource` now (1 when unknown).
  [[nodiscard]] int32_t ShardsOf(const Datasource& datasource) const;
  // Datasources with more than one shard, most shards first.
  [[nodiscard]] std::vector<DatasourceShards> ShardedDatasources() const;
  // Datasources tracked (bounded by max_datasources).
  [[nodiscard]] size_t TrackedCount() const;

  const ShardingOptions& options() const { return options_; }

 private:
  struct Entry {
    std::string key;
    Datasource datasource;
    uint64_t hash = 0;
    int32_t shards = 1;
    uint64_t next = 0;  // round-robin counter
    int64_t last_seen_ms = 0;
    int64_t window_start_ms = 0;
    uint64_t window_bytes = 0;
    uint64_t last_rate = 0;     // bytes per second of the last completed window
    int64_t low_since_ms = -1;  // start of the run of low windows; -1: the last one was not low
  };
  using Lru = std::list<Entry>;

  int64_t NowMs() const { return clock_->MonotonicMicros() / 1000; }
  // Closes `e`'s window when it is over, and grows or shrinks its shards from the rate.
  void CloseWindow(Entry& e, int64_t now_ms, int32_t partition_count) const;
  // Drops entries idle for forget_after_ms, then the least recently used beyond the bound.
  void Evict(int64_t now_ms) REQUIRES(mu_);

  Clock* const clock_;
  const ShardingOptions options_;
  mutable Mutex mu_;
  // Most recently used first.
  Lru lru_ GUARDED_BY(mu_);
  std::unordered_map<std::string, Lru::iterator> index_ GUARDED_BY(mu_);
};

}  // namespace sediment::ingest
